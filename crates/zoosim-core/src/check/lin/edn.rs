//! A reader of EDN (<https://github.com/edn-format/edn>), the data
//! notation Jepsen writes its histories in, written for this checker.
//!
//! All of EDN is read, so that a real history is never refused for
//! something in a field the model ignores: `nil`, booleans, strings with
//! their escapes, characters (`\a`, `\newline`, `\u0041`), integers (an
//! `N` suffix, or too many digits for 64 bits, is a [`Value::BigInt`]
//! that a model needing an `i64` refuses by name), floats (`1.5`, `1e3`,
//! `##NaN`, `##Inf`, `##-Inf`), `M` decimals and ratios (kept as written),
//! keywords and symbols (namespaced too), lists, vectors, maps with keys
//! of any type, sets, tagged literals (`#inst "..."`, and Jepsen 0.3's
//! record syntax `#jepsen.history.Op{...}`), `#_` discards, `;` comments
//! and commas as whitespace.
//!
//! Bad input is a [`SyntaxError`] with its line and column, never a
//! panic: nesting is bounded ([`MAX_DEPTH`]), so a file of brackets cannot
//! overflow the stack, and what an error quotes is cut short. The reader
//! only moves forward; a position becomes a line and column only for an
//! error, so reading is linear in the text's length.

use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Values nested deeper than this are refused (garbage, not a history;
/// and the reader recurses once per level).
pub const MAX_DEPTH: usize = 64;

/// A float, compared and hashed by its bits: `##NaN` equals itself, so a
/// value can be a map key or a set member like any other.
#[derive(Clone, Copy, Debug)]
pub struct Float(pub f64);

impl PartialEq for Float {
    fn eq(&self, other: &Float) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Float {}

impl Hash for Float {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.to_bits().hash(h)
    }
}

/// An EDN value.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Value {
    /// `nil`.
    Nil,
    /// `true` or `false`.
    Bool(bool),
    /// An integer that fits 64 bits (`7`, `-3`, `7N`).
    Int(i64),
    /// An integer that does not fit 64 bits, in decimal (`-` if negative).
    BigInt(String),
    /// A float (`1.5`, `-2e10`, `##NaN`, `##Inf`).
    Float(Float),
    /// A decimal with the `M` suffix, as written (without the `M`): it is
    /// exact, a float would not be.
    Decimal(String),
    /// A ratio `n/d`, as written.
    Ratio(String),
    /// A character (`\a`, `\newline`).
    Char(char),
    /// A string.
    Str(String),
    /// A keyword, without its colon (`jepsen.history/foo`).
    Keyword(String),
    /// A symbol.
    Symbol(String),
    /// A list `(a b ...)`.
    List(Vec<Value>),
    /// A vector `[a b ...]`.
    Vector(Vec<Value>),
    /// A map `{k v ...}`, its pairs in the order written.
    Map(Vec<(Value, Value)>),
    /// A set `#{a b ...}`, its members in the order written.
    Set(Vec<Value>),
    /// A tagged literal `#tag value` (`#inst "1985-04-12T23:20:50.52Z"`).
    Tagged(String, Box<Value>),
}

impl Value {
    /// The pairs of a map, or of a tagged map (a record as Jepsen 0.3
    /// writes an operation: `#jepsen.history.Op{...}` is that map).
    pub fn as_map(&self) -> Option<&[(Value, Value)]> {
        match self {
            Value::Map(m) => Some(m),
            Value::Tagged(_, v) => match &**v {
                Value::Map(m) => Some(m),
                _ => None,
            },
            _ => None,
        }
    }

    /// The value of the keyword key `:k` in a map (see [`Value::as_map`]).
    pub fn get(&self, k: &str) -> Option<&Value> {
        self.as_map()?
            .iter()
            .find(|(key, _)| matches!(key, Value::Keyword(w) if w == k))
            .map(|(_, v)| v)
    }
}

fn write_seq(f: &mut fmt::Formatter<'_>, open: &str, items: &[Value], close: &str) -> fmt::Result {
    f.write_str(open)?;
    for (k, x) in items.iter().enumerate() {
        if k > 0 {
            f.write_str(" ")?;
        }
        write!(f, "{x}")?;
    }
    f.write_str(close)
}

impl fmt::Display for Value {
    /// As EDN (strings and characters escaped as Rust does, which EDN
    /// reads back for all but the rarest control characters).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Nil => f.write_str("nil"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::BigInt(i) => write!(f, "{i}N"),
            Value::Float(Float(x)) if x.is_nan() => f.write_str("##NaN"),
            Value::Float(Float(x)) if x.is_infinite() => {
                f.write_str(if *x > 0.0 { "##Inf" } else { "##-Inf" })
            }
            Value::Float(Float(x)) => write!(f, "{x:?}"),
            Value::Decimal(d) => write!(f, "{d}M"),
            Value::Ratio(r) => f.write_str(r),
            Value::Char(c) => match c {
                '\n' => f.write_str("\\newline"),
                '\r' => f.write_str("\\return"),
                ' ' => f.write_str("\\space"),
                '\t' => f.write_str("\\tab"),
                c if c.is_control() => write!(f, "\\u{:04x}", *c as u32),
                c => write!(f, "\\{c}"),
            },
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Keyword(k) => write!(f, ":{k}"),
            Value::Symbol(s) => f.write_str(s),
            Value::List(v) => write_seq(f, "(", v, ")"),
            Value::Vector(v) => write_seq(f, "[", v, "]"),
            Value::Set(v) => write_seq(f, "#{", v, "}"),
            Value::Map(m) => {
                f.write_str("{")?;
                for (k, (key, v)) in m.iter().enumerate() {
                    if k > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{key} {v}")?;
                }
                f.write_str("}")
            }
            Value::Tagged(t, v) => write!(f, "#{t} {v}"),
        }
    }
}

/// Bad EDN: the line (1-based) and what is wrong, with its column.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SyntaxError {
    /// The line (1-based) of the text given to the [`Reader`].
    pub line: usize,
    /// What is wrong, and at which column.
    pub what: String,
}

/// The characters of a token or value quoted in an error message.
const QUOTED: usize = 40;

/// A token as quoted in an error message: its first characters, and its
/// length when cut (`crate::quote`): a token may be megabytes long.
pub(crate) fn quoted(t: &str) -> String {
    crate::quote::quoted(t, QUOTED)
}

/// A value as quoted in an error message: its first characters, and its
/// length when cut (counted, never built whole).
pub(crate) fn shown(v: &Value) -> String {
    crate::quote::display(v, QUOTED)
}

/// Whether `c` ends a token (a number, keyword, symbol or character name).
fn delimiter(c: char) -> bool {
    c.is_whitespace() || matches!(c, ',' | '(' | ')' | '[' | ']' | '{' | '}' | '"' | ';')
}

/// Whether `c` may appear in a symbol or keyword.
fn symbol_char(c: char) -> bool {
    c.is_alphanumeric() || ".*+!-_?$%&=<>/:#'".contains(c)
}

/// A reader of EDN text, moving forward from a position.
pub struct Reader<'a> {
    s: &'a str,
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `s`.
    pub fn new(s: &'a str) -> Self {
        Reader { s, at: 0 }
    }

    /// The byte position the reader is at.
    pub fn position(&self) -> usize {
        self.at
    }

    /// The line and column (1-based, the column in characters) of byte
    /// `at`: for errors only, it reads the text before `at`.
    pub fn line_column(&self, at: usize) -> (usize, usize) {
        let before = &self.s[..at];
        let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
        let start = before.rfind('\n').map_or(0, |k| k + 1);
        (line, before[start..].chars().count() + 1)
    }

    /// An error at byte `at`; `what` gets the column.
    pub fn error(&self, at: usize, what: impl FnOnce(usize) -> String) -> SyntaxError {
        let (line, column) = self.line_column(at);
        SyntaxError {
            line,
            what: what(column),
        }
    }

    /// The token (up to the next delimiter) at byte `at`.
    pub fn token_at(&self, at: usize) -> &'a str {
        let rest = &self.s[at..];
        let first = rest.chars().next().map_or(0, char::len_utf8);
        let len = rest[first..]
            .find(delimiter)
            .map_or(rest.len(), |k| k + first);
        &rest[..len]
    }

    /// Moves past the next character.
    pub fn skip_char(&mut self) {
        self.at += self.peek().map_or(0, char::len_utf8);
    }

    /// The next character, without moving.
    pub fn peek(&self) -> Option<char> {
        self.s[self.at..].chars().next()
    }

    /// Skips whitespace, commas, `;` comments and `#_` discarded forms
    /// (read, so a discarded form must be well formed, as EDN says).
    pub fn skip(&mut self, depth: usize) -> Result<(), SyntaxError> {
        loop {
            let rest = &self.s[self.at..];
            let trimmed = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
            self.at += rest.len() - trimmed.len();
            if trimmed.starts_with(';') {
                self.at += trimmed.find('\n').unwrap_or(trimmed.len());
            } else if trimmed.starts_with("#_") {
                let start = self.at;
                if depth > MAX_DEPTH {
                    // `#_#_#_...` discards recurse, one level each.
                    return Err(self.error(start, |c| {
                        format!("discards nested too deep (more than {MAX_DEPTH}) at column {c}")
                    }));
                }
                self.at += 2;
                self.skip(depth + 1)?;
                if self.peek().is_none() {
                    return Err(self.error(start, |c| {
                        format!("`#_` at column {c} discards nothing (truncated?)")
                    }));
                }
                self.value(depth)?;
            } else {
                return Ok(());
            }
        }
    }

    /// Whether only whitespace, comments and discards are left.
    pub fn at_end(&mut self) -> Result<bool, SyntaxError> {
        self.skip(0)?;
        Ok(self.peek().is_none())
    }

    /// Reads one value, `depth` levels down.
    pub fn value(&mut self, depth: usize) -> Result<Value, SyntaxError> {
        self.skip(depth)?;
        let start = self.at;
        let Some(c) = self.peek() else {
            return Err(self.error(start, |c| {
                format!("expected a value at column {c} (truncated?)")
            }));
        };
        if depth > MAX_DEPTH && matches!(c, '(' | '[' | '{' | '#') {
            return Err(self.error(start, |c| {
                format!("values nested too deep (more than {MAX_DEPTH} levels) at column {c}")
            }));
        }
        match c {
            '(' => self.seq(start, ')', "list", depth).map(Value::List),
            '[' => self.seq(start, ']', "vector", depth).map(Value::Vector),
            '{' => self.map(start, depth),
            '"' => self.string(start),
            '\\' => self.character(start),
            '#' => self.dispatch(start, depth),
            ')' | ']' | '}' => Err(self.error(start, |col| {
                format!("unexpected {c:?} at column {col} (nothing to close)")
            })),
            _ => self.token(start),
        }
    }

    /// The items up to `close`, the opening bracket at `start`.
    fn seq(
        &mut self,
        start: usize,
        close: char,
        what: &str,
        depth: usize,
    ) -> Result<Vec<Value>, SyntaxError> {
        self.at += 1; // the opening bracket (`#{`: its `{`)
        let mut items = Vec::new();
        loop {
            self.skip(depth + 1)?;
            match self.peek() {
                Some(c) if c == close => {
                    self.at += 1;
                    return Ok(items);
                }
                None => {
                    return Err(self.error(start, |c| {
                        format!("the {what} is not closed (it opens at column {c}; truncated?)")
                    }))
                }
                Some(c @ (')' | ']' | '}')) => {
                    let at = self.at;
                    return Err(self.error(at, |col| {
                        format!(
                            "unexpected {c:?} at column {col}: the {what} is closed by {close:?}"
                        )
                    }));
                }
                Some(_) => items.push(self.value(depth + 1)?),
            }
        }
    }

    /// `{k v ...}`, the brace at `start`: keys of any type, none twice.
    fn map(&mut self, start: usize, depth: usize) -> Result<Value, SyntaxError> {
        self.at += 1;
        let mut pairs = Vec::new();
        let mut key_at = Vec::new();
        loop {
            self.skip(depth + 1)?;
            match self.peek() {
                Some('}') => {
                    self.at += 1;
                    break;
                }
                None => {
                    return Err(self.error(start, |c| {
                        format!("the map is not closed (it opens at column {c}; truncated?)")
                    }))
                }
                Some(_) => {}
            }
            let at = self.at;
            let key = self.value(depth + 1)?;
            self.skip(depth + 1)?;
            if matches!(self.peek(), Some('}') | None) {
                let key = shown(&key);
                return Err(self.error(at, |c| format!("{key} has no value (column {c})")));
            }
            let value = self.value(depth + 1)?;
            pairs.push((key, value));
            key_at.push(at);
        }
        // Keys are checked once the map is read, each hashed once: a map
        // of many keys is read in linear time.
        let mut seen = HashSet::with_capacity(pairs.len());
        for ((key, _), at) in pairs.iter().zip(&key_at) {
            if !seen.insert(key) {
                let key = shown(key);
                return Err(self.error(*at, |c| format!("{key} twice in a map (column {c})")));
            }
        }
        Ok(Value::Map(pairs))
    }

    /// After a `#`: a set, a symbolic value, or a tagged literal.
    fn dispatch(&mut self, start: usize, depth: usize) -> Result<Value, SyntaxError> {
        let rest = &self.s[start + 1..];
        if rest.starts_with('{') {
            self.at += 1;
            let items = self.seq(start, '}', "set", depth)?;
            let mut seen = HashSet::with_capacity(items.len());
            for v in &items {
                if !seen.insert(v) {
                    let v = shown(v);
                    return Err(
                        self.error(start, |c| format!("{v} twice in the set at column {c}"))
                    );
                }
            }
            return Ok(Value::Set(items));
        }
        if let Some(symbolic) = rest.strip_prefix('#') {
            let name = &symbolic[..symbolic.find(delimiter).unwrap_or(symbolic.len())];
            let x = match name {
                "NaN" => f64::NAN,
                "Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                _ => {
                    return Err(self.error(start, |c| {
                        format!(
                        "unknown symbolic value {} at column {c} (expected ##NaN, ##Inf or ##-Inf)",
                        quoted(&format!("##{name}"))
                    )
                    }))
                }
            };
            self.at += 2 + name.len();
            return Ok(Value::Float(Float(x)));
        }
        let tag = &rest[..rest.find(delimiter).unwrap_or(rest.len())];
        if !tag.starts_with(char::is_alphabetic) || !tag.chars().all(symbol_char) {
            return Err(self.error(start, |c| {
                format!(
                    "unexpected {} at column {c} (a `#` starts a set `#{{`, a tag `#inst`, \
                     a discard `#_` or `##NaN`)",
                    quoted(self.token_at(start))
                )
            }));
        }
        self.at += 1 + tag.len();
        self.skip(depth)?;
        if self.peek().is_none() {
            return Err(self.error(start, |c| {
                format!(
                    "the tag #{} at column {c} tags nothing (truncated?)",
                    crate::quote::cut(tag, QUOTED)
                )
            }));
        }
        let v = self.value(depth + 1)?;
        Ok(Value::Tagged(tag.to_owned(), Box::new(v)))
    }

    /// A number, keyword, symbol, `nil`, `true` or `false`.
    fn token(&mut self, start: usize) -> Result<Value, SyntaxError> {
        let t = self.token_at(start);
        let bad = |what: &str| {
            let what = what.to_owned();
            self.error(start, move |c| {
                format!("{} at column {c} {what}", quoted(t))
            })
        };
        let v = if let Some(k) = t.strip_prefix(':') {
            if k.is_empty() || k.starts_with(':') || !k.chars().all(symbol_char) {
                return Err(bad("is not a keyword EDN can have"));
            }
            Value::Keyword(k.to_owned())
        } else if t.starts_with(|c: char| c.is_ascii_digit())
            || (t.starts_with(['+', '-']) && t[1..].starts_with(|c: char| c.is_ascii_digit()))
        {
            number(t).ok_or_else(|| bad("is not a valid number"))?
        } else {
            match t {
                "nil" => Value::Nil,
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ if t.chars().all(symbol_char) => Value::Symbol(t.to_owned()),
                _ => return Err(bad("is not a value EDN can have")),
            }
        };
        self.at += t.len();
        Ok(v)
    }

    /// A character literal, its backslash at `start`.
    fn character(&mut self, start: usize) -> Result<Value, SyntaxError> {
        let rest = &self.s[start + 1..];
        let Some(first) = rest.chars().next() else {
            return Err(self.error(start, |c| {
                format!("a lone backslash at column {c} (truncated?)")
            }));
        };
        // `\(` is the character `(`; `\newline` a name.
        let name = if first.is_alphanumeric() {
            &rest[..rest.find(delimiter).unwrap_or(rest.len())]
        } else {
            &rest[..first.len_utf8()]
        };
        let c = if name.chars().count() == 1 {
            Some(first)
        } else {
            match name {
                "newline" => Some('\n'),
                "return" => Some('\r'),
                "space" => Some(' '),
                "tab" => Some('\t'),
                "formfeed" => Some('\u{c}'),
                "backspace" => Some('\u{8}'),
                _ => name
                    .strip_prefix('u')
                    .filter(|h| h.len() == 4 && h.chars().all(|c| c.is_ascii_hexdigit()))
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .and_then(char::from_u32),
            }
        };
        let Some(c) = c else {
            return Err(self.error(start, |col| {
                format!(
                    "unknown character {} at column {col} (expected e.g. \\a, \\newline, \\u0041)",
                    quoted(&format!("\\{name}"))
                )
            }));
        };
        self.at = start + 1 + name.len();
        Ok(Value::Char(c))
    }

    /// The string whose opening quote is at byte `start`.
    fn string(&mut self, start: usize) -> Result<Value, SyntaxError> {
        let body = &self.s[start + 1..];
        let mut out = String::new();
        let mut chars = body.char_indices();
        // Four hex digits after byte `k` of the body, as a number.
        let hex = |k: usize| {
            body.get(k..k + 4)
                .filter(|h| h.chars().all(|c| c.is_ascii_hexdigit()))
                .and_then(|h| u32::from_str_radix(h, 16).ok())
        };
        while let Some((k, c)) = chars.next() {
            match c {
                '"' => {
                    self.at = start + 1 + k + 1;
                    return Ok(Value::Str(out));
                }
                '\\' => {
                    let escape_at = start + 1 + k;
                    let bad = |what: String| {
                        self.error(escape_at, |col| format!("{what} at column {col}"))
                    };
                    match chars.next() {
                        Some((_, 'n')) => out.push('\n'),
                        Some((_, 't')) => out.push('\t'),
                        Some((_, 'r')) => out.push('\r'),
                        Some((_, 'b')) => out.push('\u{8}'),
                        Some((_, 'f')) => out.push('\u{c}'),
                        Some((_, e @ ('"' | '\\'))) => out.push(e),
                        Some((u, 'u')) => {
                            let Some(x) = hex(u + 1) else {
                                return Err(bad("\\u without four hex digits".into()));
                            };
                            let mut skip = 4;
                            let c = if (0xd800..0xdc00).contains(&x) {
                                // A UTF-16 pair, as Java writes a
                                // character outside the BMP.
                                let low = body
                                    .get(u + 5..u + 7)
                                    .filter(|s| *s == "\\u")
                                    .and_then(|_| hex(u + 7))
                                    .filter(|y| (0xdc00..0xe000).contains(y));
                                low.and_then(|y| {
                                    skip += 6;
                                    char::from_u32(0x10000 + ((x - 0xd800) << 10) + (y - 0xdc00))
                                })
                            } else {
                                char::from_u32(x)
                            };
                            let Some(c) = c else {
                                return Err(bad(format!("\\u{x:04x} is not a character")));
                            };
                            out.push(c);
                            for _ in 0..skip {
                                chars.next();
                            }
                        }
                        Some((_, e)) => {
                            return Err(bad(format!(
                                "unknown escape {} in a string",
                                quoted(&format!("\\{e}"))
                            )))
                        }
                        None => break,
                    }
                }
                c => out.push(c),
            }
        }
        Err(self.error(start, |c| {
            format!("the string at column {c} is not closed (truncated?)")
        }))
    }
}

/// The number `t` is (its first character a digit, or a sign and a
/// digit), or `None` if it is none EDN has.
fn number(t: &str) -> Option<Value> {
    let (negative, body) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let integer = |d: &str| {
        // No leading zero: Clojure would read `010` as octal 8.
        if !digits(d) || (d.len() > 1 && d.starts_with('0')) {
            return None;
        }
        let signed = if negative {
            format!("-{d}")
        } else {
            d.to_owned()
        };
        Some(match signed.parse::<i64>() {
            Ok(i) => Value::Int(i),
            Err(_) => Value::BigInt(signed),
        })
    };
    if let Some(d) = body.strip_suffix('N') {
        return integer(d);
    }
    if digits(body) {
        return integer(body);
    }
    if let Some((n, d)) = body.split_once('/') {
        return (digits(n) && digits(d) && d.bytes().any(|b| b != b'0'))
            .then(|| Value::Ratio(t.trim_start_matches('+').to_owned()));
    }
    let (decimal, body) = match body.strip_suffix('M') {
        Some(b) => (true, b),
        None => (false, body),
    };
    // digits, then `.digits*` and/or an exponent (either, for a float).
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(k) => (&body[..k], Some(&body[k + 1..])),
        None => (body, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (mantissa, None),
    };
    let well_formed = digits(whole)
        && fraction.is_none_or(|f| f.is_empty() || digits(f))
        && exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)))
        && (decimal || fraction.is_some() || exponent.is_some());
    if !well_formed {
        return None;
    }
    if decimal {
        return Some(Value::Decimal(
            t[..t.len() - 1].trim_start_matches('+').to_owned(),
        ));
    }
    let x: f64 = body.parse().ok()?;
    Some(Value::Float(Float(if negative { -x } else { x })))
}

/// Reads `s` as one whole value (whitespace and comments around it).
pub fn read_one(s: &str) -> Result<Value, SyntaxError> {
    let mut r = Reader::new(s);
    let v = r.value(0)?;
    if !r.at_end()? {
        let at = r.position();
        return Err(r.error(at, |c| {
            format!("unexpected {} at column {c}", quoted(r.token_at(at)))
        }));
    }
    Ok(v)
}
