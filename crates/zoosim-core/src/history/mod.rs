//! Client-level histories of runs: what every client asked and was told,
//! the watch and session events it received, and every fault and server
//! role change, in the order they happened (docs/HISTORY.md).
//!
//! A history is written as JSON lines ([`json`]): a first `meta` line, then
//! one [`Record`] per line, tagged by its kind. The contract checker and
//! `zoosim lin` read it back with [`json::parse`], which gives a typed error
//! with the line number for any bad input. [`edn`] exports it in Jepsen's
//! EDN history format for Knossos, Elle or Porcupine.
//!
//! Pure: the types and their (de)serialisation; the simulation's recorder
//! fills them, the command line writes them to files.

use std::collections::BTreeMap;
use std::fmt;

use crate::proto::{Op, Reply, SessionEvent, SessionId, WatchEvent, ZkError, Zxid};

pub mod edn;
mod fault;
pub mod json;
mod record;

pub use fault::FaultParams;
pub use record::{Clock, Recorder};

/// The version of the JSON-lines format this code writes and reads; a file
/// with another version is refused. Additions that old readers can ignore
/// keep it; anything else bumps it.
pub const FORMAT_VERSION: u32 = 1;

/// What a reading that a caller may stop gave: the whole input, or where
/// it stopped (its caller's stop said so, e.g. at a memory bound: a 200 MB
/// history is read into several times that, and the caller must be able
/// to stop before the machine does).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Read<T> {
    /// All of it.
    Whole(T),
    /// Stopped before `line` (1-based), with `records` read.
    Stopped {
        /// The line the reading did not go past.
        line: usize,
        /// The records (operations, events) read before it.
        records: usize,
    },
}

/// How many records a stoppable reading reads between two polls of its
/// stop: a poll costs about as much as reading a record (it sums the
/// memory counters), so one in a thousand is noise; a thousand records
/// are well under a megabyte.
pub const READ_POLL_EVERY: usize = 1024;

impl<T> Read<T> {
    /// What a reading given a stop that never fires read: all of it.
    pub(crate) fn whole(self) -> T {
        match self {
            Read::Whole(t) => t,
            // The stop never fired: the reader stopped on its own.
            Read::Stopped { line, .. } => {
                unreachable!("a reading with no stop stopped at line {line}")
            }
        }
    }
}

/// A server's number in the ensemble (0-based), as the scenario files and
/// the fault list name servers.
pub type ServerNo = u32;

/// A whole history: its `meta` line and its records, in the order they
/// happened (time never goes backwards).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct History {
    /// What was run.
    pub meta: Meta,
    /// Every record, in order.
    pub records: Vec<Record>,
}

/// The first line of a history: what run it records.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Meta {
    /// [`FORMAT_VERSION`] when written.
    pub format: u32,
    /// The scenario's name.
    pub scenario: String,
    /// The scenario's file, as given on the command line (`None` for a
    /// scenario built in code).
    pub file: Option<String>,
    /// The seed run.
    pub seed: u64,
    /// The zoosim version that ran it (`CARGO_PKG_VERSION`).
    pub zoosim: String,
    /// Servers in the ensemble.
    pub servers: u32,
    /// The session timeout the clients asked for, in ms.
    pub session_timeout_ms: u64,
    /// The servers' tickTime in ms, where the run says (a simulated run's
    /// history does; `None` in a history from elsewhere). With
    /// `sync_limit_ticks`, it gives the contract's timeliness bound.
    pub tick_ms: Option<u64>,
    /// The servers' syncLimit in ticks, where the run says.
    pub sync_limit_ticks: Option<u64>,
}

/// One thing that happened, at a simulated time.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Record {
    /// Simulated time since the run began, in nanoseconds (madsim's clock
    /// steps in whole milliseconds today; ns leaves room and is what
    /// Jepsen's `:time` counts).
    pub at_ns: u64,
    /// What happened.
    pub event: Event,
}

/// What a [`Record`] records.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Event {
    /// A client called an operation.
    Invoke(Invoke),
    /// An operation ended: a reply, a server's error, or a local failure.
    Complete(Complete),
    /// A watch event as the client delivered it.
    Watch(Watched),
    /// A change of a session's state as the client reported it.
    Session(SessionChange),
    /// A fault the nemesis injected (or tried and skipped).
    Fault(FaultRecord),
    /// A server process's role changed.
    Role(RoleChange),
}

impl Event {
    /// The record kind's name in the JSON-lines format (`invoke`,
    /// `complete`, `watch`, `session`, `fault`, `role`).
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Invoke(_) => "invoke",
            Event::Complete(_) => "complete",
            Event::Watch(_) => "watch",
            Event::Session(_) => "session",
            Event::Fault(_) => "fault",
            Event::Role(_) => "role",
        }
    }
}

/// Who did something on the client side.
///
/// A scenario's client (its number in the outcome log and in the fault
/// list: `client 3`) may open several sessions one after another; each
/// session lives in its own handle, a simulated client process numbered
/// from 1 in the order handles were opened (`client-<handle>` in the
/// trace). Sessions outside the scenario's numbered clients (a recipe's
/// setup session, say) have no `client`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Actor {
    /// The scenario's client number, if the handle belongs to one.
    pub client: Option<u32>,
    /// The handle (one per session), unique in the run.
    pub handle: u32,
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.client {
            Some(c) => write!(f, "client {c} (handle {})", self.handle),
            None => write!(f, "handle {}", self.handle),
        }
    }
}

/// An operation's id, unique in the history: invocations are numbered from
/// 0 in the order they were called. The completion carries the same id.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct OpId(pub u64);

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op {}", self.0)
    }
}

/// What a client called: a ZooKeeper request, or `close()`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum HistOp {
    /// A request, with all its arguments.
    Zk(Op),
    /// `close()`: ends the session; its ephemerals go when the close
    /// commits (an `ok` completion), or when the session expires.
    CloseSession,
}

impl HistOp {
    /// The op's name (`create`, ..., `multi`, `close_session`).
    pub fn name(&self) -> &'static str {
        match self {
            HistOp::Zk(op) => op.name(),
            HistOp::CloseSession => "close_session",
        }
    }

    /// Whether the op changes the tree when it takes effect (a close
    /// deletes the session's ephemerals).
    pub fn is_write(&self) -> bool {
        match self {
            HistOp::Zk(op) => op.is_write(),
            HistOp::CloseSession => true,
        }
    }
}

/// An operation's invocation.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Invoke {
    /// The id its completion carries.
    pub id: OpId,
    /// Who called it.
    pub actor: Actor,
    /// The handle's session, if it has one yet.
    pub session: Option<SessionId>,
    /// The request's xid on the wire; `None` for an op that never got one
    /// (failed locally, an empty multi, a close).
    pub xid: Option<i64>,
    /// The op and all its arguments.
    pub op: HistOp,
}

/// How an operation ended.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Outcome {
    /// A reply (for a multi, check [`Reply::multi_error`]); a close
    /// answers `Ok(None)`, a request `Ok(Some(reply))`.
    Ok(Option<Reply>),
    /// An error: the server's, or the client's own (ConnectionLoss,
    /// SessionExpired, BadArguments).
    Err(ZkError),
}

impl Outcome {
    /// The error, if the op failed (a failed multi's first error too).
    pub fn error(&self) -> Option<ZkError> {
        match self {
            Outcome::Ok(Some(r)) => r.multi_error(),
            Outcome::Ok(None) => None,
            Outcome::Err(e) => Some(*e),
        }
    }

    /// Whether the op's effect is unknown: it may or may not have taken
    /// effect (ConnectionLoss, SessionExpired, OperationTimeout,
    /// RequestTimeout).
    pub fn is_indeterminate(&self) -> bool {
        matches!(
            self,
            Outcome::Err(
                ZkError::ConnectionLoss
                    | ZkError::SessionExpired
                    | ZkError::OperationTimeout
                    | ZkError::RequestTimeout
            )
        )
    }
}

/// An operation's completion.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Complete {
    /// Its invocation's id.
    pub id: OpId,
    /// Who called it (the invocation's actor).
    pub actor: Actor,
    /// The server that answered; `None` when no server did (a local
    /// failure, ConnectionLoss, SessionExpired at expiry or close).
    pub server: Option<ServerNo>,
    /// The zxid the reply's header carried; `None` without a reply.
    pub zxid: Option<Zxid>,
    /// The reply or the error.
    pub outcome: Outcome,
}

/// A watch event the client delivered to its caller.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Watched {
    /// Who received it.
    pub actor: Actor,
    /// The handle's session.
    pub session: Option<SessionId>,
    /// The server of the connection it came on.
    pub server: Option<ServerNo>,
    /// The event.
    pub event: WatchEvent,
}

/// A session state change the client reported.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SessionChange {
    /// Whose session.
    pub actor: Actor,
    /// The session (`None` before the first connection).
    pub session: Option<SessionId>,
    /// Connected, Disconnected, Expired or Closed.
    pub state: SessionEvent,
    /// For Connected: the server connected to.
    pub server: Option<ServerNo>,
}

/// A fault the nemesis injected or tried.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FaultRecord {
    /// Its kind, as scenario files spell it (`leader-crash`).
    pub fault: String,
    /// Whom it hit and for how long, as a history keeps them
    /// ([`FaultParams::recorded`]).
    pub params: FaultParams,
    /// The fault did not apply (nothing to aim at, or it would have cost
    /// the quorum): kept as the nemesis logs it.
    pub skipped: bool,
}

/// A server's role (ZooKeeper's peer states).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Role {
    /// Electing.
    Looking,
    /// Following this leader.
    Following(ServerNo),
    /// Leading.
    Leading,
}

/// A server process's role change (also each server's role at the start).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RoleChange {
    /// The server.
    pub server: ServerNo,
    /// Its process: 1 for the first, +1 per restart.
    pub process: u64,
    /// The new role.
    pub role: Role,
    /// Its current epoch.
    pub epoch: u32,
    /// Whether it serves clients now.
    pub serving: bool,
}

/// An invocation with its completion, if it completed before the history
/// ended (otherwise its outcome is unknown, as a crashed client's).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OpPair<'a> {
    /// When it was called, in ns.
    pub invoked_ns: u64,
    /// The invocation.
    pub invoke: &'a Invoke,
    /// When it completed, and how.
    pub complete: Option<(u64, &'a Complete)>,
}

impl History {
    /// Every operation, in invocation order, with its completion.
    pub fn ops(&self) -> Vec<OpPair<'_>> {
        let mut done: BTreeMap<OpId, (u64, &Complete)> = BTreeMap::new();
        for r in &self.records {
            if let Event::Complete(c) = &r.event {
                done.insert(c.id, (r.at_ns, c));
            }
        }
        self.records
            .iter()
            .filter_map(|r| match &r.event {
                Event::Invoke(i) => Some(OpPair {
                    invoked_ns: r.at_ns,
                    invoke: i,
                    complete: done.get(&i.id).copied(),
                }),
                _ => None,
            })
            .collect()
    }

    /// [`History::ops`] grouped by scenario client (handles without a
    /// client under `None`), each in invocation order.
    pub fn ops_by_client(&self) -> BTreeMap<Option<u32>, Vec<OpPair<'_>>> {
        let mut by: BTreeMap<Option<u32>, Vec<OpPair<'_>>> = BTreeMap::new();
        for p in self.ops() {
            by.entry(p.invoke.actor.client).or_default().push(p);
        }
        by
    }

    /// How many records of each kind (by [`Event::kind`]).
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut n = BTreeMap::new();
        for r in &self.records {
            *n.entry(r.event.kind()).or_default() += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests;
