//! Jepsen's history formats, read into [`Operation`]s for a model.
//!
//! Two texts are read, both into one list of [`Event`]s (a process
//! invoked, or completed, an operation `f` with a value):
//!
//! * the log format ([`parse_log`]), one event per line
//!   `INFO  jepsen.util - <process>\t:invoke|:ok|:fail|:info\t:<f>\t<value>`
//!   (tabs, or any run of whitespace, between the fields);
//! * the EDN format ([`parse_edn`]), operation maps
//!   `{:process 3, :type :ok, :f :get, :key "k", :value "v"}` one per
//!   line, or spread over lines, or in a vector `[{...} {...}]` as Jepsen
//!   writes them (all of EDN is read, [`super::edn`]: other keys are
//!   ignored whatever their values; events of the `:nemesis` process are
//!   skipped).
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
//! text) is a [`ParseError`] with its line (for EDN: where the operation's
//! map opens, or where the syntax error is), never a panic. Reading takes
//! time in proportion to the text's length, however long its lines.

use std::collections::BTreeMap;
use std::fmt;

use super::edn::{self, quoted, shown, Reader, SyntaxError};
use super::{History, Model, Operation, Outcome};
use crate::history::{Read, READ_POLL_EVERY};

pub use super::edn::{Float, Value};

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
    /// The line (1-based); 0 for the file as a whole.
    pub line: usize,
    /// What is wrong with it.
    pub what: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Line 0 is the file as a whole (nothing to check in it): no line
        // to name.
        if self.line == 0 {
            return f.write_str(&self.what);
        }
        write!(f, "line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for ParseError {}

impl ParseError {
    /// An error on `line`, its message cut (`crate::quote::message`): a
    /// value or token quoted in it is cut short with its length (a line
    /// may be megabytes long).
    pub fn new(line: usize, what: String) -> ParseError {
        let what = match crate::quote::message(&what) {
            std::borrow::Cow::Borrowed(_) => what,
            std::borrow::Cow::Owned(cut) => cut,
        };
        ParseError { line, what }
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
    /// EDN operation maps, [`parse_edn`].
    Edn,
}

impl Format {
    /// The format of `text`, from its first line that is not blank: a
    /// line that opens an EDN form (`{`, `[`, `(`, `#` as in
    /// `#jepsen.history.Op{`, or a `;` comment) is EDN, unless it is a
    /// log line (`jepsen.util -` in it); anything else is taken for the
    /// log format.
    pub fn detect(text: &[u8]) -> Format {
        let first = text
            .split(|&b| b == b'\n')
            .map(|l| l.trim_ascii())
            .find(|l| !l.is_empty());
        match first {
            Some(l) if l.windows(LOG_MARK.len()).any(|w| w == LOG_MARK.as_bytes()) => Format::Log,
            Some([b'{' | b'[' | b'(' | b'#' | b';', ..]) => Format::Edn,
            _ => Format::Log,
        }
    }

    /// Reads `text` in this format.
    pub fn parse(self, text: &[u8]) -> Result<Vec<Event>, ParseError> {
        self.parse_until(text, &|| false).map(Read::whole)
    }

    /// Reads `text` in this format, asking `stop` every
    /// [`READ_POLL_EVERY`] lines (log) or operations (EDN) whether to go
    /// on ([`Read::Stopped`] once it says stop).
    pub fn parse_until(
        self,
        text: &[u8],
        stop: &dyn Fn() -> bool,
    ) -> Result<Read<Vec<Event>>, ParseError> {
        match self {
            Format::Log => log_until(text, stop),
            Format::Edn => edn_until(text, stop),
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
    log_until(text, &|| false).map(Read::whole)
}

/// [`parse_log`], polling `stop` ([`Format::parse_until`]).
fn log_until(text: &[u8], stop: &dyn Fn() -> bool) -> Result<Read<Vec<Event>>, ParseError> {
    let mut events = Vec::new();
    for line in lines(text) {
        let (n, l) = line?;
        if n % READ_POLL_EVERY == 0 && stop() {
            return Ok(Read::Stopped {
                line: n,
                records: events.len(),
            });
        }
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
    Ok(Read::Whole(events))
}

/// Reads the EDN format: operation maps with `:process`, `:type`, `:f`,
/// and optionally `:key` and `:value` (other keys are ignored, whatever
/// their values), in any of the forms Jepsen and its tools write: one map
/// per line, maps spread over several lines, a vector or list of maps (as
/// Knossos's test data and `zoosim history --edn` have it), Jepsen 0.3's
/// records `#jepsen.history.Op{...}`, with `;` comments and `#_`
/// discards anywhere. Several top-level vectors or maps are read one
/// after another. Events of the `:nemesis` process are skipped, whatever
/// they hold. An event's line is the line its map opens on.
pub fn parse_edn(text: &[u8]) -> Result<Vec<Event>, ParseError> {
    edn_until(text, &|| false).map(Read::whole)
}

/// [`parse_edn`], polling `stop` ([`Format::parse_until`]).
fn edn_until(text: &[u8], stop: &dyn Fn() -> bool) -> Result<Read<Vec<Event>>, ParseError> {
    let s = utf8(text)?;
    let mut r = Reader::new(s);
    let syntax = |e: SyntaxError| ParseError::new(e.line, e.what);
    // The line of the last map's start, counted forward from it: every
    // byte is counted once however many maps there are.
    let mut counted = (0, 1);
    let mut line_of = |at: usize| {
        let (from, line) = counted;
        counted = (
            at,
            line + s.as_bytes()[from..at]
                .iter()
                .filter(|&&b| b == b'\n')
                .count(),
        );
        counted.1
    };
    let mut events = Vec::new();
    // Operations read (nemesis ones too), for polling `stop`.
    let mut read = 0usize;
    let mut stopped = |line: usize, events: &[Event]| {
        read += 1;
        (read % READ_POLL_EVERY == 0 && stop()).then_some(Read::Stopped {
            line,
            records: events.len(),
        })
    };
    while !r.at_end().map_err(syntax)? {
        let start = r.position();
        let close = match r.peek() {
            Some('[') => ']',
            Some('(') => ')',
            _ => {
                let line = line_of(start);
                if let Some(stopped) = stopped(line, &events) {
                    return Ok(stopped);
                }
                push_op(&mut r, line, 0, &mut events)?;
                continue;
            }
        };
        // A vector (or list) of operations.
        r.skip_char();
        loop {
            r.skip(1).map_err(syntax)?;
            match r.peek() {
                Some(c) if c == close => {
                    r.skip_char();
                    break;
                }
                None => {
                    return Err(syntax(r.error(start, |c| {
                        format!(
                            "the vector of operations that opens at column {c} is not closed \
                             (truncated?)"
                        )
                    })))
                }
                Some(_) => {
                    let line = line_of(r.position());
                    if let Some(stopped) = stopped(line, &events) {
                        return Ok(stopped);
                    }
                    push_op(&mut r, line, 1, &mut events)?;
                }
            }
        }
    }
    Ok(Read::Whole(events))
}

/// `text` as UTF-8, or an error naming the line and byte of the first
/// byte that is not.
fn utf8(text: &[u8]) -> Result<&str, ParseError> {
    std::str::from_utf8(text).map_err(|e| {
        let good = &text[..e.valid_up_to()];
        let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = good.iter().rposition(|&b| b == b'\n').map_or(0, |k| k + 1);
        ParseError::new(
            line,
            format!(
                "not UTF-8 text (at byte {} of the line)",
                good.len() - line_start
            ),
        )
    })
}

/// Reads the operation map at the reader's position (on `line`), and
/// adds its event to `events` unless it is the nemesis's.
fn push_op(
    r: &mut Reader<'_>,
    line: usize,
    depth: usize,
    events: &mut Vec<Event>,
) -> Result<(), ParseError> {
    let start = r.position();
    let syntax = |e: SyntaxError| ParseError::new(e.line, e.what);
    let not_a_map = |r: &Reader<'_>, found: String| {
        syntax(r.error(start, |c| {
            format!(
                "unexpected {found} at column {c}: expected a map `{{:process .., :type .., \
                 :f .., :value ..}}` (an operation)"
            )
        }))
    };
    // Only a map or a tagged map can be an operation: anything else is
    // refused before it is read (a file of brackets is not read through).
    if !matches!(r.peek(), Some('{' | '#')) || r.token_at(start).starts_with("#{") {
        return Err(not_a_map(r, quoted(r.token_at(start))));
    }
    let op = r.value(depth).map_err(syntax)?;
    if op.as_map().is_none() {
        return Err(not_a_map(r, shown(&op)));
    }
    let err = |what: String| ParseError::new(line, what);
    let need = |k: &str| op.get(k).ok_or_else(|| err(format!("no :{k}")));
    let process = match need("process")? {
        Value::Int(p) if *p >= 0 => *p as u64,
        Value::Keyword(k) if k == "nemesis" => return Ok(()),
        v => return Err(err(format!(":process must be a number, not {}", shown(v)))),
    };
    let keyword = |k: &str| match need(k)? {
        Value::Keyword(w) => Ok(w.clone()),
        v => Err(err(format!(":{k} must be a keyword, not {}", shown(v)))),
    };
    let kind = parse_kind(&format!(":{}", keyword("type")?)).map_err(err)?;
    let f = keyword("f")?;
    events.push(Event {
        line,
        process,
        kind,
        f,
        key: op.get("key").cloned(),
        value: op.get("value").cloned().unwrap_or(Value::Nil),
    });
    Ok(())
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

/// Reads one whole value (of a log line: the errors' columns count from
/// the value's start).
fn read_value(s: &str) -> Result<Value, String> {
    edn::read_one(s).map_err(|e| e.what)
}

/// Pairs `events`' invocations with their completions into operations of
/// `model` (see the module's documentation). Times are line numbers.
pub fn history<M: FromJepsen>(model: &M, events: &[Event]) -> Result<History<M>, ParseError> {
    // Per process: the open operation's index in `ops`, its line, f and
    // key.
    let mut open: BTreeMap<u64, (usize, usize, &str, Option<&Value>)> = BTreeMap::new();
    let mut ops: Vec<Option<Operation<M::Input, M::Output>>> = Vec::new();
    for e in events {
        let err = |what: String| ParseError::new(e.line, what);
        match e.kind {
            Kind::Invoke => {
                if let Some((_, line, _, _)) = open.get(&e.process) {
                    return Err(err(format!(
                        "process {} invokes again while its operation from line {line} is open",
                        e.process
                    )));
                }
                let input = model.input(&e.f, e.key.as_ref(), &e.value).map_err(err)?;
                open.insert(e.process, (ops.len(), e.line, &e.f, e.key.as_ref()));
                ops.push(Some(Operation {
                    client: e.process,
                    input,
                    output: Outcome::Unknown,
                    call: e.line as u64,
                    ret: None,
                }));
            }
            Kind::Ok | Kind::Fail | Kind::Info => {
                let Some((k, line, invoked, key)) = open.remove(&e.process) else {
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
                // A completion about another key than its invocation's
                // contradicts it (a key left out repeats the invocation's).
                if let (Some(invoked), Some(completed)) = (key, &e.key) {
                    if invoked != completed {
                        return Err(err(format!(
                            "completes :{} for key {} but process {} invoked it for key {} \
                             (line {line})",
                            e.f,
                            shown(completed),
                            e.process,
                            shown(invoked)
                        )));
                    }
                }
                // Where a completion's value contradicts its invocation,
                // the model's error names both lines.
                let err = |what: String| err(format!("{what} (invoked on line {line})"));
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
