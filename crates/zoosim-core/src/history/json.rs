//! The JSON-lines form of a [`History`] (docs/HISTORY.md): a `meta` line,
//! then one record per line, each an object tagged by `kind`.
//!
//! Writing goes through private mirror types (the shape of the file is
//! decided here, not by how `proto` happens to be laid out); reading parses
//! each line on its own and checks the history as a whole, so that a bad
//! file gets a [`ParseError`] naming its line, never a panic.
//!
//! Data bytes are a JSON string when they are valid UTF-8, else an object
//! `{"hex": "..."}` with two lowercase hex digits per byte.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::BufRead;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    Actor, Complete, Event, FaultParams, FaultRecord, HistOp, History, Invoke, Meta, OpId, Outcome,
    Record, Role, RoleChange, ServerNo, SessionChange, Watched, FORMAT_VERSION,
};
use crate::proto::{
    CreateMode, EventType, MultiOp, MultiResult, Op, Reply, SessionEvent, SessionId, Stat,
    WatchEvent, ZkError,
};

// ---------------------------------------------------------------------------
// Errors.

/// Why a history could not be read, and where.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ParseError {
    /// The line (1-based); 0 for the file as a whole (e.g. empty).
    pub line: usize,
    /// What is wrong there.
    pub kind: ParseErrorKind,
}

/// What is wrong with a history's line.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ParseErrorKind {
    /// The file has no lines at all.
    Empty,
    /// The line is not a JSON object (truncated, or not JSON): the JSON
    /// parser's message.
    NotJson(String),
    /// The object has no `kind` string.
    NoKind,
    /// A `kind` this format does not know (cut short: `crate::quote`).
    UnknownKind(String),
    /// A known kind with a missing or malformed field: the parser's message.
    BadRecord {
        /// The record's kind.
        kind: String,
        /// What is wrong.
        message: String,
    },
    /// The first line is not a `meta` line.
    NoMeta,
    /// A second `meta` line.
    MetaAgain,
    /// A format version this code does not read.
    Version(u32),
    /// A record's time is before the previous record's.
    TimeBackwards {
        /// The previous record's time, in ns.
        previous_ns: u64,
        /// This record's time, in ns.
        at_ns: u64,
    },
    /// An invocation whose id an earlier invocation has.
    DuplicateInvoke(u64),
    /// A completion whose id no earlier invocation has.
    CompleteWithoutInvoke(u64),
    /// A second completion of the same op.
    DuplicateComplete(u64),
    /// A completion whose actor is not its invocation's.
    ActorMismatch(u64),
    /// An I/O error while reading the line.
    Io(String),
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseErrorKind::Empty => write!(f, "empty history (no meta line)"),
            ParseErrorKind::NotJson(m) => write!(f, "not a JSON object: {m}"),
            ParseErrorKind::NoKind => write!(f, "record has no \"kind\" string"),
            ParseErrorKind::UnknownKind(k) => write!(
                f,
                "unknown record kind {k} (expected meta, invoke, complete, watch, session, \
                 fault or role)"
            ),
            ParseErrorKind::BadRecord { kind, message } => {
                write!(f, "bad {kind} record: {message}")
            }
            ParseErrorKind::NoMeta => write!(f, "the first record must be a meta line"),
            ParseErrorKind::MetaAgain => write!(f, "a second meta line"),
            ParseErrorKind::Version(v) => write!(
                f,
                "history format version {v}; this zoosim reads version {FORMAT_VERSION}"
            ),
            ParseErrorKind::TimeBackwards { previous_ns, at_ns } => write!(
                f,
                "time goes backwards: {at_ns} ns after a record at {previous_ns} ns"
            ),
            ParseErrorKind::DuplicateInvoke(id) => {
                write!(f, "duplicate id: op {id} was invoked before")
            }
            ParseErrorKind::CompleteWithoutInvoke(id) => {
                write!(f, "completion of op {id} without an earlier invocation")
            }
            ParseErrorKind::DuplicateComplete(id) => {
                write!(f, "op {id} completes a second time")
            }
            ParseErrorKind::ActorMismatch(id) => write!(
                f,
                "op {id} completes for another client or handle than invoked it"
            ),
            ParseErrorKind::Io(m) => write!(f, "cannot read: {m}"),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: ", self.line)?;
        }
        write!(f, "{}", self.kind)
    }
}

impl std::error::Error for ParseError {}

fn err(line: usize, kind: ParseErrorKind) -> ParseError {
    ParseError { line, kind }
}

// ---------------------------------------------------------------------------
// The wire shapes.

/// Bytes: a string if valid UTF-8, else hex.
#[derive(Serialize, Deserialize, Debug)]
#[serde(untagged)]
enum Data {
    Text(String),
    Hex { hex: String },
}

fn data_out(bytes: &[u8]) -> Data {
    match std::str::from_utf8(bytes) {
        Ok(s) => Data::Text(s.to_owned()),
        Err(_) => Data::Hex {
            hex: bytes.iter().map(|b| format!("{b:02x}")).collect(),
        },
    }
}

fn data_in(d: Data) -> Result<Vec<u8>, String> {
    match d {
        Data::Text(s) => Ok(s.into_bytes()),
        Data::Hex { hex } => {
            if hex.len() % 2 != 0 {
                return Err(format!("hex data of odd length {}", hex.len()));
            }
            (0..hex.len())
                .step_by(2)
                .map(|i| {
                    hex.get(i..i + 2)
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                        .ok_or_else(|| format!("bad hex data at offset {i}"))
                })
                .collect()
        }
    }
}

#[derive(Serialize, Deserialize, Debug)]
struct WStat {
    czxid: i64,
    mzxid: i64,
    ctime: i64,
    mtime: i64,
    version: i32,
    cversion: i32,
    aversion: i32,
    ephemeral_owner: i64,
    data_length: i32,
    num_children: i32,
    pzxid: i64,
}

fn stat_out(s: &Stat) -> WStat {
    WStat {
        czxid: s.czxid,
        mzxid: s.mzxid,
        ctime: s.ctime,
        mtime: s.mtime,
        version: s.version,
        cversion: s.cversion,
        aversion: s.aversion,
        ephemeral_owner: s.ephemeral_owner,
        data_length: s.data_length,
        num_children: s.num_children,
        pzxid: s.pzxid,
    }
}

fn stat_in(s: WStat) -> Stat {
    Stat {
        czxid: s.czxid,
        mzxid: s.mzxid,
        ctime: s.ctime,
        mtime: s.mtime,
        version: s.version,
        cversion: s.cversion,
        aversion: s.aversion,
        ephemeral_owner: s.ephemeral_owner,
        data_length: s.data_length,
        num_children: s.num_children,
        pzxid: s.pzxid,
    }
}

fn mode_out(m: CreateMode) -> (&'static str, Option<i64>) {
    let name = match m {
        CreateMode::Persistent => "persistent",
        CreateMode::Ephemeral => "ephemeral",
        CreateMode::PersistentSequential => "persistent_sequential",
        CreateMode::EphemeralSequential => "ephemeral_sequential",
        CreateMode::Container => "container",
        CreateMode::PersistentWithTtl { .. } => "persistent_with_ttl",
        CreateMode::PersistentSequentialWithTtl { .. } => "persistent_sequential_with_ttl",
    };
    (name, m.ttl_ms())
}

fn mode_in(name: &str, ttl_ms: Option<i64>) -> Result<CreateMode, String> {
    let ttl = || ttl_ms.ok_or_else(|| format!("mode {name} needs ttl_ms"));
    Ok(match name {
        "persistent" => CreateMode::Persistent,
        "ephemeral" => CreateMode::Ephemeral,
        "persistent_sequential" => CreateMode::PersistentSequential,
        "ephemeral_sequential" => CreateMode::EphemeralSequential,
        "container" => CreateMode::Container,
        "persistent_with_ttl" => CreateMode::PersistentWithTtl { ttl_ms: ttl()? },
        "persistent_sequential_with_ttl" => {
            CreateMode::PersistentSequentialWithTtl { ttl_ms: ttl()? }
        }
        other => return Err(format!("unknown create mode {other:?}")),
    })
}

/// An op (or a multi's sub-op), tagged by `f`.
#[derive(Serialize, Deserialize, Debug)]
#[serde(tag = "f", rename_all = "snake_case")]
enum WOp {
    Create {
        path: String,
        data: Data,
        mode: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_ms: Option<i64>,
    },
    Delete {
        path: String,
        version: i32,
    },
    Exists {
        path: String,
        watch: bool,
    },
    GetData {
        path: String,
        watch: bool,
    },
    SetData {
        path: String,
        data: Data,
        version: i32,
    },
    GetChildren {
        path: String,
        watch: bool,
    },
    Sync {
        path: String,
    },
    Check {
        path: String,
        version: i32,
    },
    Multi {
        ops: Vec<WOp>,
    },
    CloseSession,
}

fn multi_op_out(op: &MultiOp) -> WOp {
    match op {
        MultiOp::Create { path, data, mode } => {
            let (mode, ttl_ms) = mode_out(*mode);
            WOp::Create {
                path: path.clone(),
                data: data_out(data),
                mode: mode.into(),
                ttl_ms,
            }
        }
        MultiOp::Delete { path, version } => WOp::Delete {
            path: path.clone(),
            version: *version,
        },
        MultiOp::SetData {
            path,
            data,
            version,
        } => WOp::SetData {
            path: path.clone(),
            data: data_out(data),
            version: *version,
        },
        MultiOp::Check { path, version } => WOp::Check {
            path: path.clone(),
            version: *version,
        },
    }
}

fn multi_op_in(op: WOp) -> Result<MultiOp, String> {
    Ok(match op {
        WOp::Create {
            path,
            data,
            mode,
            ttl_ms,
        } => MultiOp::Create {
            path,
            data: data_in(data)?,
            mode: mode_in(&mode, ttl_ms)?,
        },
        WOp::Delete { path, version } => MultiOp::Delete { path, version },
        WOp::SetData {
            path,
            data,
            version,
        } => MultiOp::SetData {
            path,
            data: data_in(data)?,
            version,
        },
        WOp::Check { path, version } => MultiOp::Check { path, version },
        other => return Err(format!("{} inside a multi", wop_name(&other))),
    })
}

fn wop_name(op: &WOp) -> &'static str {
    match op {
        WOp::Create { .. } => "create",
        WOp::Delete { .. } => "delete",
        WOp::Exists { .. } => "exists",
        WOp::GetData { .. } => "get_data",
        WOp::SetData { .. } => "set_data",
        WOp::GetChildren { .. } => "get_children",
        WOp::Sync { .. } => "sync",
        WOp::Check { .. } => "check",
        WOp::Multi { .. } => "multi",
        WOp::CloseSession => "close_session",
    }
}

fn op_out(op: &HistOp) -> WOp {
    let HistOp::Zk(op) = op else {
        return WOp::CloseSession;
    };
    match op {
        Op::Create { path, data, mode } => multi_op_out(&MultiOp::Create {
            path: path.clone(),
            data: data.clone(),
            mode: *mode,
        }),
        Op::Delete { path, version } => WOp::Delete {
            path: path.clone(),
            version: *version,
        },
        Op::Exists { path, watch } => WOp::Exists {
            path: path.clone(),
            watch: *watch,
        },
        Op::GetData { path, watch } => WOp::GetData {
            path: path.clone(),
            watch: *watch,
        },
        Op::SetData {
            path,
            data,
            version,
        } => WOp::SetData {
            path: path.clone(),
            data: data_out(data),
            version: *version,
        },
        Op::GetChildren { path, watch } => WOp::GetChildren {
            path: path.clone(),
            watch: *watch,
        },
        Op::Sync { path } => WOp::Sync { path: path.clone() },
        Op::Multi(ops) => WOp::Multi {
            ops: ops.iter().map(multi_op_out).collect(),
        },
    }
}

fn op_in(op: WOp) -> Result<HistOp, String> {
    Ok(HistOp::Zk(match op {
        WOp::CloseSession => return Ok(HistOp::CloseSession),
        WOp::Create {
            path,
            data,
            mode,
            ttl_ms,
        } => Op::Create {
            path,
            data: data_in(data)?,
            mode: mode_in(&mode, ttl_ms)?,
        },
        WOp::Delete { path, version } => Op::Delete { path, version },
        WOp::Exists { path, watch } => Op::Exists { path, watch },
        WOp::GetData { path, watch } => Op::GetData { path, watch },
        WOp::SetData {
            path,
            data,
            version,
        } => Op::SetData {
            path,
            data: data_in(data)?,
            version,
        },
        WOp::GetChildren { path, watch } => Op::GetChildren { path, watch },
        WOp::Sync { path } => Op::Sync { path },
        WOp::Check { .. } => return Err("check outside a multi".into()),
        WOp::Multi { ops } => {
            Op::Multi(ops.into_iter().map(multi_op_in).collect::<Result<_, _>>()?)
        }
    }))
}

/// A reply, or one result of a multi, tagged by `f`.
#[derive(Serialize, Deserialize, Debug)]
#[serde(tag = "f", rename_all = "snake_case")]
enum WReply {
    Create {
        path: String,
        stat: Option<WStat>,
    },
    Delete,
    Exists {
        stat: Option<WStat>,
    },
    GetData {
        data: Data,
        stat: WStat,
    },
    SetData {
        stat: WStat,
    },
    GetChildren {
        children: Vec<String>,
        stat: WStat,
    },
    Sync,
    Multi {
        results: Vec<WReply>,
    },
    Check,
    RolledBack,
    Error {
        error: String,
    },
    /// A close's completion.
    CloseSession,
}

fn reply_out(r: &Reply) -> WReply {
    match r {
        Reply::Create { path, stat } => WReply::Create {
            path: path.clone(),
            stat: Some(stat_out(stat)),
        },
        Reply::Delete => WReply::Delete,
        Reply::Exists(stat) => WReply::Exists {
            stat: stat.as_ref().map(stat_out),
        },
        Reply::GetData { data, stat } => WReply::GetData {
            data: data_out(data),
            stat: stat_out(stat),
        },
        Reply::SetData(stat) => WReply::SetData {
            stat: stat_out(stat),
        },
        Reply::GetChildren { children, stat } => WReply::GetChildren {
            children: children.clone(),
            stat: stat_out(stat),
        },
        Reply::Sync => WReply::Sync,
        Reply::Multi(results) => WReply::Multi {
            results: results
                .iter()
                .map(|r| match r {
                    MultiResult::Create { path, stat } => WReply::Create {
                        path: path.clone(),
                        stat: stat.as_ref().map(stat_out),
                    },
                    MultiResult::Delete => WReply::Delete,
                    MultiResult::SetData { stat } => WReply::SetData {
                        stat: stat_out(stat),
                    },
                    MultiResult::Check => WReply::Check,
                    MultiResult::RolledBack => WReply::RolledBack,
                    MultiResult::Failed(e) => WReply::Error {
                        error: error_name(*e),
                    },
                })
                .collect(),
        },
    }
}

fn reply_in(r: WReply) -> Result<Reply, String> {
    Ok(match r {
        WReply::Create { path, stat } => Reply::Create {
            path,
            stat: stat_in(stat.ok_or("a create's reply without its stat")?),
        },
        WReply::Delete => Reply::Delete,
        WReply::Exists { stat } => Reply::Exists(stat.map(stat_in)),
        WReply::GetData { data, stat } => Reply::GetData {
            data: data_in(data)?,
            stat: stat_in(stat),
        },
        WReply::SetData { stat } => Reply::SetData(stat_in(stat)),
        WReply::GetChildren { children, stat } => Reply::GetChildren {
            children,
            stat: stat_in(stat),
        },
        WReply::Sync => Reply::Sync,
        WReply::Multi { results } => Reply::Multi(
            results
                .into_iter()
                .map(|r| {
                    Ok(match r {
                        WReply::Create { path, stat } => MultiResult::Create {
                            path,
                            stat: stat.map(stat_in),
                        },
                        WReply::Delete => MultiResult::Delete,
                        WReply::SetData { stat } => MultiResult::SetData {
                            stat: stat_in(stat),
                        },
                        WReply::Check => MultiResult::Check,
                        WReply::RolledBack => MultiResult::RolledBack,
                        WReply::Error { error } => MultiResult::Failed(error_in(&error)?),
                        other => return Err(format!("{other:?} as a multi's result")),
                    })
                })
                .collect::<Result<_, String>>()?,
        ),
        other => return Err(format!("{other:?} is not a reply")),
    })
}

/// An error's name: its `ZkError` variant (`NodeExists`).
fn error_name(e: ZkError) -> String {
    format!("{e:?}")
}

fn error_in(name: &str) -> Result<ZkError, String> {
    ZkError::ALL
        .into_iter()
        .find(|e| error_name(*e) == name)
        .ok_or_else(|| format!("unknown error {name:?}"))
}

fn session_out(s: Option<SessionId>) -> Option<String> {
    s.map(|s| s.to_string())
}

fn session_in(s: Option<String>) -> Result<Option<SessionId>, String> {
    s.map(|s| {
        s.strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .map(|v| SessionId(v as i64))
            .ok_or_else(|| format!("bad session id {s:?} (expected 0x and hex digits)"))
    })
    .transpose()
}

fn event_type_name(t: EventType) -> &'static str {
    match t {
        EventType::NodeCreated => "NodeCreated",
        EventType::NodeDeleted => "NodeDeleted",
        EventType::NodeDataChanged => "NodeDataChanged",
        EventType::NodeChildrenChanged => "NodeChildrenChanged",
    }
}

fn event_type_in(s: &str) -> Result<EventType, String> {
    [
        EventType::NodeCreated,
        EventType::NodeDeleted,
        EventType::NodeDataChanged,
        EventType::NodeChildrenChanged,
    ]
    .into_iter()
    .find(|t| event_type_name(*t) == s)
    .ok_or_else(|| format!("unknown watch event type {s:?}"))
}

fn state_name(s: SessionEvent) -> &'static str {
    match s {
        SessionEvent::Connected => "Connected",
        SessionEvent::Disconnected => "Disconnected",
        SessionEvent::Expired => "Expired",
        SessionEvent::Closed => "Closed",
    }
}

fn state_in(s: &str) -> Result<SessionEvent, String> {
    [
        SessionEvent::Connected,
        SessionEvent::Disconnected,
        SessionEvent::Expired,
        SessionEvent::Closed,
    ]
    .into_iter()
    .find(|t| state_name(*t) == s)
    .ok_or_else(|| format!("unknown session state {s:?}"))
}

#[derive(Serialize, Deserialize)]
struct WMeta {
    format: u32,
    scenario: String,
    #[serde(default)]
    file: Option<String>,
    seed: u64,
    zoosim: String,
    servers: u32,
    session_timeout_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tick_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sync_limit_ticks: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct WInvoke {
    t: u64,
    id: u64,
    client: Option<u32>,
    handle: u32,
    session: Option<String>,
    xid: Option<i64>,
    op: WOp,
}

#[derive(Serialize, Deserialize)]
struct WComplete {
    t: u64,
    id: u64,
    client: Option<u32>,
    handle: u32,
    server: Option<ServerNo>,
    zxid: Option<i64>,
    /// The reply; absent when `error` is there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ok: Option<WReply>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct WWatch {
    t: u64,
    client: Option<u32>,
    handle: u32,
    session: Option<String>,
    server: Option<ServerNo>,
    #[serde(rename = "type")]
    event_type: String,
    path: String,
}

#[derive(Serialize, Deserialize)]
struct WSession {
    t: u64,
    client: Option<u32>,
    handle: u32,
    session: Option<String>,
    state: String,
    server: Option<ServerNo>,
}

/// A [`FaultRecord`] on a line: its parameters as the history keeps them
/// ([`FaultParams::recorded`]), lengths in ms, a missing length or flip
/// list as 0 or `[]`.
#[derive(Serialize, Deserialize)]
struct WFault {
    t: u64,
    fault: String,
    client: Option<u32>,
    server: Option<ServerNo>,
    to: Option<ServerNo>,
    split: Option<Vec<ServerNo>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    servers: Option<Vec<ServerNo>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sides: Option<Vec<Vec<ServerNo>>>,
    #[serde(default)]
    flips: Vec<(Vec<ServerNo>, u64)>,
    #[serde(default)]
    delay_ms: u64,
    #[serde(default)]
    window_ms: u64,
    #[serde(default)]
    skipped: bool,
}

#[derive(Serialize, Deserialize)]
struct WRole {
    t: u64,
    server: ServerNo,
    process: u64,
    /// `looking`, `following` or `leading`.
    role: String,
    /// The leader followed (for `following`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    leader: Option<ServerNo>,
    epoch: u32,
    serving: bool,
}

/// Adds `"kind": kind` in front of a serialised record (spliced as text,
/// so that fields keep their declared order: `kind` and `t` come first).
fn tagged(kind: &str, v: impl Serialize) -> String {
    let body = serde_json::to_string(&v).expect("history records serialise");
    let rest = body.strip_prefix('{').expect("records are objects");
    if rest == "}" {
        format!("{{\"kind\":\"{kind}\"}}")
    } else {
        format!("{{\"kind\":\"{kind}\",{rest}")
    }
}

// ---------------------------------------------------------------------------
// Writing.

/// The meta line (no newline).
pub fn meta_line(m: &Meta) -> String {
    tagged(
        "meta",
        WMeta {
            format: m.format,
            scenario: m.scenario.clone(),
            file: m.file.clone(),
            seed: m.seed,
            zoosim: m.zoosim.clone(),
            servers: m.servers,
            session_timeout_ms: m.session_timeout_ms,
            tick_ms: m.tick_ms,
            sync_limit_ticks: m.sync_limit_ticks,
        },
    )
}

/// One record's line (no newline).
pub fn record_line(r: &Record) -> String {
    let t = r.at_ns;
    match &r.event {
        Event::Invoke(i) => tagged(
            "invoke",
            WInvoke {
                t,
                id: i.id.0,
                client: i.actor.client,
                handle: i.actor.handle,
                session: session_out(i.session),
                xid: i.xid,
                op: op_out(&i.op),
            },
        ),
        Event::Complete(c) => {
            let (ok, error) = match &c.outcome {
                Outcome::Ok(None) => (Some(WReply::CloseSession), None),
                Outcome::Ok(Some(reply)) => (Some(reply_out(reply)), None),
                Outcome::Err(e) => (None, Some(error_name(*e))),
            };
            tagged(
                "complete",
                WComplete {
                    t,
                    id: c.id.0,
                    client: c.actor.client,
                    handle: c.actor.handle,
                    server: c.server,
                    zxid: c.zxid,
                    ok,
                    error,
                },
            )
        }
        Event::Watch(w) => tagged(
            "watch",
            WWatch {
                t,
                client: w.actor.client,
                handle: w.actor.handle,
                session: session_out(w.session),
                server: w.server,
                event_type: event_type_name(w.event.event_type).into(),
                path: w.event.path.clone(),
            },
        ),
        Event::Session(s) => tagged(
            "session",
            WSession {
                t,
                client: s.actor.client,
                handle: s.actor.handle,
                session: session_out(s.session),
                state: state_name(s.state).into(),
                server: s.server,
            },
        ),
        Event::Fault(f) => tagged(
            "fault",
            WFault {
                t,
                fault: f.fault.clone(),
                client: f.params.client.map(|c| c as u32),
                server: f.params.server,
                to: f.params.to,
                split: f.params.split.clone(),
                servers: f.params.servers.clone(),
                sides: f.params.sides.clone(),
                flips: f.params.flips_ms(),
                delay_ms: f.params.delay_ms(),
                window_ms: f.params.window_ms(),
                skipped: f.skipped,
            },
        ),
        Event::Role(r) => {
            let (role, leader) = match r.role {
                Role::Looking => ("looking", None),
                Role::Following(l) => ("following", Some(l)),
                Role::Leading => ("leading", None),
            };
            tagged(
                "role",
                WRole {
                    t,
                    server: r.server,
                    process: r.process,
                    role: role.into(),
                    leader,
                    epoch: r.epoch,
                    serving: r.serving,
                },
            )
        }
    }
}

/// The whole history as JSON lines, each ending in a newline.
pub fn to_string(h: &History) -> String {
    let mut out = meta_line(&h.meta);
    out.push('\n');
    for r in &h.records {
        out += &record_line(r);
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------------------
// Reading.

/// Reads a history from its text (see [`parse_reader`]).
pub fn parse(text: &str) -> Result<History, ParseError> {
    parse_reader(text.as_bytes())
}

/// Reads a history line by line (a large file is never held whole as
/// text). Blank lines are skipped. Checks, besides each line's shape: the
/// first record is the `meta` line of a version this code reads; time never
/// goes backwards; every id is invoked once, before its one completion, by
/// the same actor.
pub fn parse_reader(reader: impl BufRead) -> Result<History, ParseError> {
    parse_reader_until(reader, &|| false).map(super::Read::whole)
}

/// [`parse_reader`], asking `stop` every [`super::READ_POLL_EVERY`]
/// lines whether to go on: once it says stop, the reading ends there
/// ([`super::Read::Stopped`]), what was read dropped.
pub fn parse_reader_until(
    reader: impl BufRead,
    stop: &dyn Fn() -> bool,
) -> Result<super::Read<History>, ParseError> {
    let mut meta = None;
    let mut records = Vec::new();
    let mut invoked: BTreeMap<u64, Actor> = BTreeMap::new();
    let mut completed: BTreeSet<u64> = BTreeSet::new();
    let mut last_ns = 0;
    for (i, line) in reader.lines().enumerate() {
        let n = i + 1;
        if n % super::READ_POLL_EVERY == 0 && stop() {
            return Ok(super::Read::Stopped {
                line: n,
                records: records.len(),
            });
        }
        let line = line.map_err(|e| err(n, ParseErrorKind::Io(e.to_string())))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(&line)
            .map_err(|e| err(n, ParseErrorKind::NotJson(cut(e.to_string()))))?;
        let Value::Object(obj) = value else {
            return Err(err(n, ParseErrorKind::NotJson("not an object".into())));
        };
        let Some(Value::String(kind)) = obj.get("kind") else {
            return Err(err(n, ParseErrorKind::NoKind));
        };
        let kind = kind.clone();
        if kind == "meta" {
            if meta.is_some() {
                return Err(err(n, ParseErrorKind::MetaAgain));
            }
            let m: WMeta = field_err(n, &kind, &line, Value::Object(obj))?;
            if m.format != FORMAT_VERSION {
                return Err(err(n, ParseErrorKind::Version(m.format)));
            }
            meta = Some(Meta {
                format: m.format,
                scenario: m.scenario,
                file: m.file,
                seed: m.seed,
                zoosim: m.zoosim,
                servers: m.servers,
                session_timeout_ms: m.session_timeout_ms,
                tick_ms: m.tick_ms,
                sync_limit_ticks: m.sync_limit_ticks,
            });
            continue;
        }
        let record = record_in(n, &kind, &line, Value::Object(obj))?;
        if meta.is_none() {
            return Err(err(n, ParseErrorKind::NoMeta));
        }
        if record.at_ns < last_ns {
            return Err(err(
                n,
                ParseErrorKind::TimeBackwards {
                    previous_ns: last_ns,
                    at_ns: record.at_ns,
                },
            ));
        }
        last_ns = record.at_ns;
        match &record.event {
            Event::Invoke(inv) if invoked.insert(inv.id.0, inv.actor).is_some() => {
                return Err(err(n, ParseErrorKind::DuplicateInvoke(inv.id.0)));
            }
            Event::Complete(c) => {
                let Some(actor) = invoked.get(&c.id.0) else {
                    return Err(err(n, ParseErrorKind::CompleteWithoutInvoke(c.id.0)));
                };
                if *actor != c.actor {
                    return Err(err(n, ParseErrorKind::ActorMismatch(c.id.0)));
                }
                if !completed.insert(c.id.0) {
                    return Err(err(n, ParseErrorKind::DuplicateComplete(c.id.0)));
                }
            }
            _ => {}
        }
        records.push(record);
    }
    let meta = meta.ok_or(err(0, ParseErrorKind::Empty))?;
    Ok(super::Read::Whole(History { meta, records }))
}

/// `message` (which may quote the line) cut short (`crate::quote`): a line
/// may hold a 200 MB number or string.
fn cut(message: String) -> String {
    match crate::quote::message(&message) {
        std::borrow::Cow::Borrowed(_) => message,
        std::borrow::Cow::Owned(cut) => cut,
    }
}

/// Line `n`'s record `v` (of `kind`, its text `line`) as the mirror type
/// `T`, or what is wrong with it: which field, and why.
fn field_err<T: serde::de::DeserializeOwned>(
    n: usize,
    kind: &str,
    line: &str,
    v: Value,
) -> Result<T, ParseError> {
    serde_json::from_value(v).map_err(|e| {
        let message = e.to_string();
        // serde names a missing field, not one of the wrong type ("invalid
        // type: string \"x\", expected u64"). Read from the text, the same
        // error has a position, and the key before it names the field.
        let field = serde_json::from_str::<T>(line)
            .err()
            .and_then(|e| key_before(line, e.column()));
        let message = match field {
            Some(f) if !message.starts_with("missing field") => {
                format!(
                    "field {}: {message}",
                    crate::quote::quoted(f, crate::quote::WORD)
                )
            }
            _ => message,
        };
        bad(n, kind, message)
    })
}

/// The last object key that ends before the 1-based `column` (bytes) of
/// the JSON text `line`: the field whose value is there. Keys are told
/// from string values by the `:` after them.
#[doc(hidden)]
pub fn key_before(line: &str, column: usize) -> Option<&str> {
    let bytes = line.as_bytes();
    let end = column.min(bytes.len());
    let mut key = None;
    let mut i = 0;
    while i < end {
        if bytes[i] != b'"' {
            i += 1;
            continue;
        }
        let start = i + 1;
        i = start;
        while i < bytes.len() && bytes[i] != b'"' {
            i += if bytes[i] == b'\\' { 2 } else { 1 };
        }
        let string = line.get(start..i.min(bytes.len()));
        i += 1;
        let mut j = i;
        while j < bytes.len() && bytes[j].is_ascii_whitespace() {
            j += 1;
        }
        if j < end && bytes[j] == b':' {
            key = string;
        }
    }
    key
}

fn bad(n: usize, kind: &str, message: String) -> ParseError {
    err(
        n,
        ParseErrorKind::BadRecord {
            kind: kind.into(),
            message: cut(message),
        },
    )
}

fn record_in(n: usize, kind: &str, line: &str, v: Value) -> Result<Record, ParseError> {
    let b = |m: String| bad(n, kind, m);
    let (at_ns, event) = match kind {
        "invoke" => {
            let w: WInvoke = field_err(n, kind, line, v)?;
            (
                w.t,
                Event::Invoke(Invoke {
                    id: OpId(w.id),
                    actor: Actor {
                        client: w.client,
                        handle: w.handle,
                    },
                    session: session_in(w.session).map_err(b)?,
                    xid: w.xid,
                    op: op_in(w.op).map_err(b)?,
                }),
            )
        }
        "complete" => {
            let w: WComplete = field_err(n, kind, line, v)?;
            let outcome = match (w.ok, w.error) {
                (Some(WReply::CloseSession), None) => Outcome::Ok(None),
                (Some(ok), None) => Outcome::Ok(Some(reply_in(ok).map_err(b)?)),
                (None, Some(e)) => Outcome::Err(error_in(&e).map_err(b)?),
                _ => return Err(b("exactly one of \"ok\" and \"error\" is needed".into())),
            };
            (
                w.t,
                Event::Complete(Complete {
                    id: OpId(w.id),
                    actor: Actor {
                        client: w.client,
                        handle: w.handle,
                    },
                    server: w.server,
                    zxid: w.zxid,
                    outcome,
                }),
            )
        }
        "watch" => {
            let w: WWatch = field_err(n, kind, line, v)?;
            (
                w.t,
                Event::Watch(Watched {
                    actor: Actor {
                        client: w.client,
                        handle: w.handle,
                    },
                    session: session_in(w.session).map_err(b)?,
                    server: w.server,
                    event: WatchEvent {
                        event_type: event_type_in(&w.event_type).map_err(b)?,
                        path: w.path,
                    },
                }),
            )
        }
        "session" => {
            let w: WSession = field_err(n, kind, line, v)?;
            (
                w.t,
                Event::Session(SessionChange {
                    actor: Actor {
                        client: w.client,
                        handle: w.handle,
                    },
                    session: session_in(w.session).map_err(b)?,
                    state: state_in(&w.state).map_err(b)?,
                    server: w.server,
                }),
            )
        }
        "fault" => {
            let w: WFault = field_err(n, kind, line, v)?;
            let from_ms = Duration::from_millis;
            (
                w.t,
                Event::Fault(FaultRecord {
                    fault: w.fault,
                    params: FaultParams {
                        client: w.client.map(|c| c as usize),
                        server: w.server,
                        to: w.to,
                        split: w.split,
                        servers: w.servers,
                        sides: w.sides,
                        flips: Some(
                            w.flips
                                .into_iter()
                                .map(|(s, ms)| (s, from_ms(ms)))
                                .collect(),
                        ),
                        delay: Some(from_ms(w.delay_ms)),
                        window: Some(from_ms(w.window_ms)),
                        ..FaultParams::default()
                    }
                    .recorded(),
                    skipped: w.skipped,
                }),
            )
        }
        "role" => {
            let w: WRole = field_err(n, kind, line, v)?;
            let role = match (w.role.as_str(), w.leader) {
                ("looking", _) => Role::Looking,
                ("leading", _) => Role::Leading,
                ("following", Some(l)) => Role::Following(l),
                ("following", None) => return Err(b("following without a leader".into())),
                (other, _) => return Err(b(format!("unknown role {other:?}"))),
            };
            (
                w.t,
                Event::Role(RoleChange {
                    server: w.server,
                    process: w.process,
                    role,
                    epoch: w.epoch,
                    serving: w.serving,
                }),
            )
        }
        other => {
            return Err(err(
                n,
                ParseErrorKind::UnknownKind(crate::quote::quoted(other, crate::quote::WORD)),
            ))
        }
    };
    Ok(Record { at_ns, event })
}
