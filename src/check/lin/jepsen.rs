//! Jepsen's history formats, read into [`Operation`]s for a model.
//!
//! Two texts are read, both into one list of [`Event`]s (a process
//! invoked, or completed, an operation `f` with a value):
//!
//! * the log format ([`parse_log`]), one event per line
//!   `INFO  jepsen.util - <process>\t:invoke|:ok|:fail|:info\t:<f>\t<value>`
//!   (tabs, or any run of whitespace, between the fields);
//! * the EDN format ([`parse_edn`]), one map per line
//!   `{:process 3, :type :ok, :f :get, :key "k", :value "v"}` (other keys
//!   are ignored; events of the `:nemesis` process are skipped).
//!
//! [`history`] then pairs each invocation with its completion, whatever
//! the format, and asks the model ([`FromJepsen`]) what its `f` and values
//! mean. Jepsen's meaning of a completion: `:ok` took effect; `:fail` did
//! not take effect: the operation is dropped, unless the model says what
//! the failure itself tells ([`FromJepsen::failed`]: a register's failed
//! compare-and-set is a read of another value than the one expected);
//! `:info`, or no completion at all by the end, is unknown (it may have
//! taken effect, or not). Times are line numbers.
//!
//! Everything here is a pure function of the text: bad input (a truncated
//! line, an unknown type or operation, a completion without an invocation,
//! a second invocation by a process with one open, bytes that are not
//! text) is a [`ParseError`] with its line, never a panic. Reading takes
//! time in proportion to the text's length, however long its lines.

use std::collections::BTreeMap;
use std::fmt;

use super::{History, Model, Operation, Outcome};

/// A value in a Jepsen history (the part of EDN it uses).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Value {
    /// `nil`.
    Nil,
    /// `true` or `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A string.
    Str(String),
    /// A keyword, without its colon.
    Keyword(String),
    /// A vector `[a b ...]`.
    Vector(Vec<Value>),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Nil => f.write_str("nil"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Keyword(k) => write!(f, ":{k}"),
            Value::Vector(v) => {
                f.write_str("[")?;
                for (k, x) in v.iter().enumerate() {
                    if k > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// The type of an event.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Kind {
    /// `:invoke`: the call.
    Invoke,
    /// `:ok`: it took effect.
    Ok,
    /// `:fail`: it did not take effect (what else that says is the
    /// model's: [`FromJepsen::failed`]).
    Fail,
    /// `:info`: unknown.
    Info,
}

/// One line of a Jepsen history.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Event {
    /// Its line (1-based).
    pub line: usize,
    /// The process (client).
    pub process: u64,
    /// Invocation or which completion.
    pub kind: Kind,
    /// The operation's name, without its colon (`read`, `cas`, `get`).
    pub f: String,
    /// The key, if the event has one (`:key`).
    pub key: Option<Value>,
    /// The value.
    pub value: Value,
}

/// Bad input: what and on which line.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ParseError {
    /// The line (1-based).
    pub line: usize,
    /// What is wrong with it.
    pub what: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for ParseError {}

/// The most characters of a message about bad input: a value or token
/// quoted in it is cut short (a line may be megabytes long).
const MAX_MESSAGE: usize = 300;

impl ParseError {
    /// An error on `line`, its message cut to [`MAX_MESSAGE`] characters.
    pub fn new(line: usize, what: String) -> ParseError {
        ParseError {
            line,
            what: clip(what, MAX_MESSAGE),
        }
    }
}

/// `s` cut to `n` characters, with `...` where it was cut.
fn clip(s: String, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s,
    }
}

/// A model that knows what Jepsen's operations mean for it.
pub trait FromJepsen: Model {
    /// The input of an invocation of `f` with `key` and `value`, or what
    /// is wrong with it (e.g. `unknown operation :foo`).
    fn input(&self, f: &str, key: Option<&Value>, value: &Value) -> Result<Self::Input, String>;

    /// The output of an `:ok` completion of `input` with `value`, or what
    /// is wrong with it.
    fn output(&self, input: &Self::Input, value: &Value) -> Result<Self::Output, String>;

    /// What a `:fail` completion of `input` with `value` says. Jepsen's
    /// `:fail` means the operation did not take effect, and by default
    /// that is all it says (`Ok(None)`: the operation is left out of the
    /// history). Where the model gives a failure a meaning of its own, it
    /// is that output (`Ok(Some(..))`), and the operation stays in the
    /// history with it: a register's compare-and-set that failed read,
    /// at some moment between its call and its return, a value other than
    /// the one it expected.
    fn failed(&self, input: &Self::Input, value: &Value) -> Result<Option<Self::Output>, String> {
        let _ = (input, value);
        Ok(None)
    }
}

/// The Jepsen formats this module reads; [`Format::parse`] reads one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Format {
    /// The log format (`INFO  jepsen.util - ...`), [`parse_log`].
    Log,
    /// One EDN map per line, [`parse_edn`].
    Edn,
}

impl Format {
    /// The format of `text`, from its first line that is not blank: a map
    /// is EDN, anything else is taken for the log format.
    pub fn detect(text: &[u8]) -> Format {
        let first = text
            .split(|&b| b == b'\n')
            .map(|l| l.trim_ascii())
            .find(|l| !l.is_empty());
        match first {
            Some(l) if l.starts_with(b"{") => Format::Edn,
            _ => Format::Log,
        }
    }

    /// Reads `text` in this format.
    pub fn parse(self, text: &[u8]) -> Result<Vec<Event>, ParseError> {
        match self {
            Format::Log => parse_log(text),
            Format::Edn => parse_edn(text),
        }
    }
}

/// The lines of `text`, numbered from 1, as text, without their `\r\n`.
fn lines(text: &[u8]) -> impl Iterator<Item = Result<(usize, &str), ParseError>> {
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    text.split(|&b| b == b'\n')
        .enumerate()
        .filter(|_| !text.is_empty())
        .map(|(k, l)| {
            let l = l.strip_suffix(b"\r").unwrap_or(l);
            std::str::from_utf8(l).map(|s| (k + 1, s)).map_err(|e| {
                ParseError::new(
                    k + 1,
                    format!("not UTF-8 text (at byte {} of the line)", e.valid_up_to()),
                )
            })
        })
}

/// What precedes the fields on a log line: `jepsen.util`, then `-` with
/// whitespace around it.
const LOG_MARK: &str = "jepsen.util";

/// The fields of a log line after its `jepsen.util -`, or `None` if the
/// line has no such mark.
fn after_log_mark(l: &str) -> Option<&str> {
    let mut from = 0;
    while let Some(k) = l[from..].find(LOG_MARK) {
        let rest = &l[from + k + LOG_MARK.len()..];
        let dash = rest.trim_start();
        if dash.len() < rest.len() {
            if let Some(fields) = dash.strip_prefix('-') {
                let trimmed = fields.trim_start();
                if trimmed.len() < fields.len() {
                    return Some(trimmed);
                }
            }
        }
        from += k + LOG_MARK.len();
    }
    None
}

/// The first whitespace-separated field of `s` and what follows it.
fn field(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    let end = s.find(char::is_whitespace).unwrap_or(s.len());
    (&s[..end], &s[end..])
}

/// Reads the log format: `... jepsen.util - <process> <type> <f> <value>`
/// per line, the fields separated by any run of whitespace (Jepsen writes
/// tabs; some copies of its logs have spaces); the value is the rest of
/// the line (`[1 2]` has a space in it). Blank lines are skipped.
pub fn parse_log(text: &[u8]) -> Result<Vec<Event>, ParseError> {
    let mut events = Vec::new();
    for line in lines(text) {
        let (n, l) = line?;
        if l.trim().is_empty() {
            continue;
        }
        let err = |what: String| ParseError::new(n, what);
        let Some(rest) = after_log_mark(l) else {
            return Err(err(
                "not a Jepsen log line (expected `INFO  jepsen.util - <process> <type> <f> <value>`, \
                 the fields separated by tabs or spaces)"
                    .into(),
            ));
        };
        let (process, rest) = field(rest);
        let (kind, rest) = field(rest);
        let (f, rest) = field(rest);
        let value = rest.trim();
        let found = [process, kind, f, value]
            .iter()
            .take_while(|x| !x.is_empty())
            .count();
        if found < 4 {
            return Err(err(format!(
                "expected 4 fields after `jepsen.util -` (process, type, f, value), found {found}"
            )));
        }
        let process = parse_process(process).map_err(err)?;
        let kind = parse_kind(kind).map_err(err)?;
        let f = parse_f(f).map_err(err)?;
        let value = read_value(value).map_err(err)?;
        events.push(Event {
            line: n,
            process,
            kind,
            f,
            key: None,
            value,
        });
    }
    Ok(events)
}

/// Reads the EDN format: one map per line with `:process`, `:type`, `:f`,
/// and optionally `:key` and `:value`; blank lines are skipped.
pub fn parse_edn(text: &[u8]) -> Result<Vec<Event>, ParseError> {
    let mut events = Vec::new();
    for line in lines(text) {
        let (n, l) = line?;
        if l.trim().is_empty() {
            continue;
        }
        let err = |what: String| ParseError::new(n, what);
        let mut r = Reader::new(l);
        let map = r.map().map_err(err)?;
        r.end().map_err(err)?;
        let get = |k: &str| map.get(k);
        let need = |k: &str| get(k).ok_or_else(|| err(format!("no :{k}")));
        let process = match need("process")? {
            Value::Int(p) if *p >= 0 => *p as u64,
            Value::Keyword(k) if k == "nemesis" => continue,
            v => return Err(err(format!(":process must be a number, not {}", shown(v)))),
        };
        let keyword = |k: &str| match need(k)? {
            Value::Keyword(w) => Ok(w.clone()),
            v => Err(err(format!(":{k} must be a keyword, not {}", shown(v)))),
        };
        let kind = parse_kind(&format!(":{}", keyword("type")?)).map_err(err)?;
        let f = keyword("f")?;
        events.push(Event {
            line: n,
            process,
            kind,
            f,
            key: get("key").cloned(),
            value: get("value").cloned().unwrap_or(Value::Nil),
        });
    }
    Ok(events)
}

fn parse_process(s: &str) -> Result<u64, String> {
    s.parse()
        .map_err(|_| format!("the process must be a number, not {}", quoted(s)))
}

fn parse_kind(s: &str) -> Result<Kind, String> {
    Ok(match s {
        ":invoke" => Kind::Invoke,
        ":ok" => Kind::Ok,
        ":fail" => Kind::Fail,
        ":info" => Kind::Info,
        _ => {
            return Err(format!(
                "unknown type {} (expected :invoke, :ok, :fail or :info)",
                quoted(s)
            ))
        }
    })
}

fn parse_f(s: &str) -> Result<String, String> {
    match s.strip_prefix(':') {
        Some(f) if !f.is_empty() => Ok(f.to_owned()),
        _ => Err(format!(
            "the operation must be a keyword like :read, not {}",
            quoted(s)
        )),
    }
}

/// Reads one whole value.
fn read_value(s: &str) -> Result<Value, String> {
    let mut r = Reader::new(s);
    let v = r.value(0)?;
    r.end()?;
    Ok(v)
}

/// Nesting deeper than this is refused (garbage, not a history).
const MAX_DEPTH: usize = 32;

/// A token as quoted in an error message: its first characters.
fn quoted(t: &str) -> String {
    clip(format!("{t:?}"), 40)
}

/// A value as quoted in an error message: its first characters.
fn shown(v: &Value) -> String {
    clip(v.to_string(), 40)
}

/// A reader of the EDN Jepsen uses, over one line. It only moves forward:
/// every byte is looked at a bounded number of times, and a position is
/// turned into a column (counting characters from the line's start) only
/// for an error message, so that a line of many megabytes is read in
/// time proportional to its length.
struct Reader<'a> {
    s: &'a str,
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(s: &'a str) -> Self {
        Reader { s, at: 0 }
    }

    fn skip_space(&mut self) {
        let rest = &self.s[self.at..];
        let trimmed = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
        self.at += rest.len() - trimmed.len();
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_space();
        self.s[self.at..].chars().next()
    }

    /// The column (1-based, in characters) of byte `at`: for errors only.
    fn column(&self, at: usize) -> usize {
        self.s[..at].chars().count() + 1
    }

    fn end(&mut self) -> Result<(), String> {
        match self.peek() {
            None => Ok(()),
            Some(c) => Err(format!(
                "unexpected {c:?} at column {}",
                self.column(self.at)
            )),
        }
    }

    /// `{:k v ...}` as a map from key (without colon) to value.
    fn map(&mut self) -> Result<BTreeMap<String, Value>, String> {
        if self.peek() != Some('{') {
            return Err(format!(
                "expected a map `{{...}}` at column {}",
                self.column(self.at)
            ));
        }
        self.at += 1;
        let mut pairs: BTreeMap<String, Value> = BTreeMap::new();
        loop {
            match self.peek() {
                Some('}') => {
                    self.at += 1;
                    return Ok(pairs);
                }
                None => return Err("the map is not closed (truncated line?)".into()),
                Some(_) => {}
            }
            let start = self.at;
            let key = match self.value(1)? {
                Value::Keyword(k) => k,
                v => {
                    return Err(format!(
                        "a map key must be a keyword, not {} (column {})",
                        shown(&v),
                        self.column(start)
                    ))
                }
            };
            if matches!(self.peek(), Some('}') | None) {
                return Err(format!(
                    ":{} has no value (column {})",
                    clip(key, 40),
                    self.column(start)
                ));
            }
            let value = self.value(1)?;
            match pairs.entry(key) {
                std::collections::btree_map::Entry::Occupied(e) => {
                    return Err(format!(
                        ":{} twice (column {})",
                        clip(e.key().clone(), 40),
                        self.column(start)
                    ))
                }
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(value);
                }
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        let Some(c) = self.peek() else {
            return Err(format!(
                "expected a value at column {} (truncated line?)",
                self.column(self.at)
            ));
        };
        let start = self.at;
        match c {
            '[' => {
                if depth >= MAX_DEPTH {
                    return Err(format!(
                        "vectors nested too deep at column {}",
                        self.column(start)
                    ));
                }
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    match self.peek() {
                        Some(']') => {
                            self.at += 1;
                            return Ok(Value::Vector(items));
                        }
                        None => {
                            return Err(format!(
                                "the vector at column {} is not closed",
                                self.column(start)
                            ))
                        }
                        Some(_) => items.push(self.value(depth + 1)?),
                    }
                }
            }
            '"' => self.string(start),
            _ => {
                let rest = &self.s[self.at..];
                let len = rest
                    .find(|c: char| {
                        c.is_whitespace() || matches!(c, ',' | '[' | ']' | '{' | '}' | '"')
                    })
                    .unwrap_or(rest.len());
                let token = &rest[..len];
                let keyword = token.strip_prefix(':').filter(|k| !k.is_empty());
                let v = match token {
                    _ if keyword.is_some() => {
                        Value::Keyword(keyword.unwrap_or_default().to_owned())
                    }
                    "" => return Err(format!("unexpected {c:?} at column {}", self.column(start))),
                    "nil" => Value::Nil,
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    t if t.starts_with(|c: char| c.is_ascii_digit() || c == '-') => {
                        Value::Int(t.parse().map_err(|_| {
                            format!(
                                "{} at column {} is not a whole number in range",
                                quoted(t),
                                self.column(start)
                            )
                        })?)
                    }
                    t => {
                        return Err(format!(
                            "unexpected {} at column {}",
                            quoted(t),
                            self.column(start)
                        ))
                    }
                };
                self.at += len;
                Ok(v)
            }
        }
    }

    /// The string whose opening quote is at byte `start`.
    fn string(&mut self, start: usize) -> Result<Value, String> {
        self.at += 1; // the opening quote
        let mut out = String::new();
        let mut chars = self.s[self.at..].char_indices();
        while let Some((k, c)) = chars.next() {
            match c {
                '"' => {
                    self.at += k + 1;
                    return Ok(Value::Str(out));
                }
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, 'r')) => out.push('\r'),
                    Some((_, e @ ('"' | '\\'))) => out.push(e),
                    Some((_, e)) => {
                        return Err(format!(
                            "unknown escape \\{e} in the string at column {}",
                            self.column(start)
                        ))
                    }
                    None => break,
                },
                c => out.push(c),
            }
        }
        Err(format!(
            "the string at column {} is not closed (truncated line?)",
            self.column(start)
        ))
    }
}

/// Pairs `events`' invocations with their completions into operations of
/// `model` (see the module's documentation). Times are line numbers.
pub fn history<M: FromJepsen>(model: &M, events: &[Event]) -> Result<History<M>, ParseError> {
    // Per process: the open operation's index in `ops`, its line and f.
    let mut open: BTreeMap<u64, (usize, usize, &str)> = BTreeMap::new();
    let mut ops: Vec<Option<Operation<M::Input, M::Output>>> = Vec::new();
    for e in events {
        let err = |what: String| ParseError::new(e.line, what);
        match e.kind {
            Kind::Invoke => {
                if let Some((_, line, _)) = open.get(&e.process) {
                    return Err(err(format!(
                        "process {} invokes again while its operation from line {line} is open",
                        e.process
                    )));
                }
                let input = model.input(&e.f, e.key.as_ref(), &e.value).map_err(err)?;
                open.insert(e.process, (ops.len(), e.line, &e.f));
                ops.push(Some(Operation {
                    client: e.process,
                    input,
                    output: Outcome::Unknown,
                    call: e.line as u64,
                    ret: None,
                }));
            }
            Kind::Ok | Kind::Fail | Kind::Info => {
                let Some((k, line, invoked)) = open.remove(&e.process) else {
                    return Err(err(format!(
                        "a completion for process {}, which has no operation open",
                        e.process
                    )));
                };
                if invoked != e.f {
                    return Err(err(format!(
                        "completes :{} but process {} invoked :{invoked} (line {line})",
                        e.f, e.process
                    )));
                }
                match e.kind {
                    Kind::Fail => {
                        let failed = match &ops[k] {
                            Some(op) => model.failed(&op.input, &e.value).map_err(err)?,
                            None => None,
                        };
                        match (failed, &mut ops[k]) {
                            (Some(output), Some(op)) => {
                                op.output = Outcome::Known(output);
                                op.ret = Some(e.line as u64);
                            }
                            _ => ops[k] = None,
                        }
                    }
                    Kind::Info => {
                        if let Some(op) = &mut ops[k] {
                            op.ret = Some(e.line as u64);
                        }
                    }
                    _ => {
                        if let Some(op) = &mut ops[k] {
                            op.output =
                                Outcome::Known(model.output(&op.input, &e.value).map_err(err)?);
                            op.ret = Some(e.line as u64);
                        }
                    }
                }
            }
        }
    }
    Ok(ops.into_iter().flatten().collect())
}
