#![warn(missing_docs, unreachable_pub)]
//! The recipes of ZooKeeper's "Recipes and Solutions" page, each a pure
//! state machine (sans-IO) with an async wrapper for application code.
//!
//! A machine takes [`Input`]s — a command from its application, a reply to
//! one of its requests, a watch event, a session event — and yields
//! [`Output`]s: requests to send and outcomes to report. It never touches a
//! socket, a clock or a runtime, and it has no hidden inputs (anything
//! random, such as a guid, is given to it), so the same code runs under the
//! stateright models, the simulated ensemble and a real ZooKeeper. The
//! [`Driver`] runs a machine over any [`zoosim_client::Zk`].
//!
//! What every machine does with ZooKeeper's outcomes:
//!
//! * **ConnectionLoss**: the outcome is unknown. A read is sent again once
//!   the session has reconnected; a sequential create is never sent blindly
//!   again (the lock's guid search finds it); a delete is sent again and
//!   NoNode then means it had been done.
//! * **Disconnected**: a holder (of a lock, of leadership) suspends — it
//!   must not act as holder — until the session reconnects intact.
//! * **SessionExpired / Expired / Closed**: the session's ephemerals are
//!   gone or going; the machine reports the loss and stops. Starting over
//!   takes a new session (and a new guid).
//!
//! Waiting is done with watches only: no polling and no timers.
//!
//! The rest of this page is docs/RECIPES.md (its examples run as doctests).
#![doc = include_str!("../../../docs/RECIPES.md")]

pub mod barrier;
pub mod config;
pub mod double_barrier;
mod driver;
pub mod election;
pub mod lock;
pub mod membership;
pub mod queue;
pub mod revocable;
pub mod two_phase_commit;

pub use driver::{Driver, Noted};

use std::collections::VecDeque;
use std::fmt::Debug;
use std::hash::Hash;

use zoosim_core::proto::{Op, Reply, SessionEvent, WatchEvent, ZkError};

/// Names one request of one machine, so its reply finds its way back.
pub type OpId = u64;

/// What a machine is told.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Input<C> {
    /// A request from the application (acquire, release, enter, ...).
    Command(C),
    /// The reply to the request `OpId`.
    Reply(OpId, Result<Reply, ZkError>),
    /// A watch event of the machine's session.
    Watch(WatchEvent),
    /// A change of the machine's session.
    Session(SessionEvent),
}

/// What a machine asks for or reports, in order.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Output<O> {
    /// A request to send on the machine's session, named by its `OpId`: send it and hand
    /// its reply back as [`Input::Reply`] with the same id.
    Send(OpId, Op),
    /// An outcome for the application (held, passed, lost, ...).
    Outcome(O),
}

/// A recipe as a state machine. `Clone + Eq + Hash + Debug` so that a
/// model checker can hold it as state.
pub trait Machine: Clone + Eq + Hash + Debug {
    /// What the application may ask of the machine.
    type Command: Clone + Eq + Hash + Debug;
    /// What the machine reports to the application.
    type Outcome: Clone + Eq + Hash + Debug;

    /// Takes one input; what it leads to is queued for [`Machine::poll`].
    fn handle(&mut self, input: Input<Self::Command>);

    /// The next request to send or outcome to report, if any.
    fn poll(&mut self) -> Option<Output<Self::Outcome>>;
}

/// The plumbing every machine shares: its queue of outputs, request ids,
/// and what it knows of its session.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct Io<O> {
    queue: VecDeque<Output<O>>,
    next_op: OpId,
    /// How many times the session has (re)connected since the machine
    /// started: a request that failed with ConnectionLoss is sent again
    /// only once the count is past the one it was sent under.
    connects: u32,
    connected: bool,
    /// The session is gone (expired or closed): nothing more is sent.
    ended: bool,
}

/// A request in flight and the connection count it was sent under.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Pending {
    /// The request's id.
    pub op: OpId,
    /// How many times the session had (re)connected when it was sent.
    pub connects: u32,
}

impl<O> Io<O> {
    /// For a session that is connected when the machine starts (the usual
    /// case: a handle is returned connected).
    pub fn new() -> Io<O> {
        Io {
            queue: VecDeque::new(),
            next_op: 0,
            connects: 0,
            connected: true,
            ended: false,
        }
    }

    /// Queues `op` to be sent and returns its [`Pending`] (panics if the session has ended).
    pub fn send(&mut self, op: Op) -> Pending {
        assert!(!self.ended, "a machine sent {op:?} after its session ended");
        let id = self.next_op;
        self.next_op += 1;
        self.queue.push_back(Output::Send(id, op));
        Pending {
            op: id,
            connects: self.connects,
        }
    }

    /// Creates `path` and its missing ancestors (persistent, empty), for a
    /// recipe whose create met NoNode. The replies are for nobody: a
    /// NodeExists is fine, and any failure shows again on the request the
    /// recipe sends behind them.
    pub fn create_path(&mut self, path: &str) {
        for p in ancestors(path).into_iter().chain([path.to_owned()]) {
            self.send(Op::Create {
                path: p,
                data: vec![],
                mode: zoosim_core::proto::CreateMode::Persistent,
            });
        }
    }

    /// Queues `outcome` for the application.
    pub fn report(&mut self, outcome: O) {
        self.queue.push_back(Output::Outcome(outcome));
    }

    /// The next queued output (request or outcome), in order.
    pub fn poll(&mut self) -> Option<Output<O>> {
        self.queue.pop_front()
    }

    /// Records a session event; returns true when it ends the session.
    pub fn on_session(&mut self, event: SessionEvent) -> bool {
        match event {
            SessionEvent::Connected => {
                self.connects += 1;
                self.connected = true;
            }
            SessionEvent::Disconnected => self.connected = false,
            SessionEvent::Expired | SessionEvent::Closed => {
                self.connected = false;
                self.ended = true;
            }
        }
        self.ended
    }

    /// Marks the session ended (a SessionExpired reply).
    pub fn end(&mut self) {
        self.connected = false;
        self.ended = true;
    }

    /// Nothing waits to be polled.
    pub fn is_drained(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether the session is connected now.
    pub fn is_connected(&self) -> bool {
        self.connected
    }

    /// Whether the session is gone (expired, closed, or a SessionExpired reply).
    pub fn has_ended(&self) -> bool {
        self.ended
    }

    /// True when a request that failed with ConnectionLoss may be sent
    /// again now: the session has reconnected since it was sent.
    pub fn may_retry(&self, pending: Pending) -> bool {
        self.connects > pending.connects
    }
}

/// How a failed request is to be handled by the machine that sent it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Failure {
    /// Outcome unknown (ConnectionLoss, or SessionMoved: the request was
    /// not applied and the connection is closing, so it is safe to treat it
    /// the same way).
    Unknown,
    /// The session is gone.
    SessionEnded,
    /// A definite answer the recipe must interpret (NoNode, NodeExists, ...).
    Answer(ZkError),
}

/// How a machine is to handle `error`, the failure of one of its requests.
pub fn classify(error: ZkError) -> Failure {
    match error {
        ZkError::ConnectionLoss | ZkError::SessionMoved | ZkError::OperationTimeout => {
            Failure::Unknown
        }
        ZkError::SessionExpired => Failure::SessionEnded,
        other => Failure::Answer(other),
    }
}

/// The sequence number ZooKeeper appended to a sequential node's name
/// (its last ten characters), or None if the name has none.
pub fn sequence_of(name: &str) -> Option<u64> {
    let suffix = name.get(name.len().checked_sub(10)?..)?;
    if suffix.bytes().all(|b| b.is_ascii_digit()) {
        suffix.parse().ok()
    } else {
        None
    }
}

/// The last component of a path.
pub fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `parent/child`.
pub fn child_path(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

/// The proper ancestors of `path`, from the root's child down ("/a/b/c"
/// gives "/a", "/a/b"): what a recipe creates when its parent is missing.
pub fn ancestors(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = path[at + 1..].find('/') {
        at += 1 + i;
        out.push(path[..at].to_owned());
    }
    out
}

/// Panics unless `name` (a `what`: guid, process name, ...) is one
/// non-empty path component: it goes into a node's name, and a '/' would
/// put the node somewhere else. Two checks, so the message says which.
pub(crate) fn assert_component(what: &str, name: &str) {
    assert!(
        !name.is_empty(),
        "a {what} is one non-empty path component, got an empty one"
    );
    assert!(
        !name.contains('/'),
        "a {what} is one non-empty path component, got {name:?} with a '/'"
    );
}

/// Feeds one input to a machine and collects what it sends and reports:
/// scripted tests of a machine, ours or a user's, read as input → output.
pub fn step<M: Machine>(m: &mut M, input: Input<M::Command>) -> (Vec<(OpId, Op)>, Vec<M::Outcome>) {
    m.handle(input);
    let (mut sends, mut outs) = (Vec::new(), Vec::new());
    while let Some(o) = m.poll() {
        match o {
            Output::Send(id, op) => sends.push((id, op)),
            Output::Outcome(x) => outs.push(x),
        }
    }
    (sends, outs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_are_the_last_ten_digits() {
        assert_eq!(sequence_of("x-lock-0000000012"), Some(12));
        assert_eq!(sequence_of("ab12-lock-2147483647"), Some(2147483647));
        assert_eq!(sequence_of("lock-12"), None);
        assert_eq!(sequence_of("x-lock-00000000a2"), None);
        assert_eq!(sequence_of(""), None);
    }

    #[test]
    fn ancestors_and_children() {
        assert_eq!(ancestors("/a/b/c"), vec!["/a", "/a/b"]);
        assert!(ancestors("/a").is_empty());
        assert_eq!(child_path("/", "a"), "/a");
        assert_eq!(child_path("/a", "b"), "/a/b");
        assert_eq!(base_name("/a/b-0000000001"), "b-0000000001");
    }

    #[test]
    fn a_request_is_retried_only_after_a_reconnect() {
        let mut io: Io<()> = Io::new();
        let p = io.send(Op::Sync { path: "/".into() });
        assert!(!io.may_retry(p));
        io.on_session(SessionEvent::Disconnected);
        assert!(!io.may_retry(p));
        assert!(!io.is_connected());
        io.on_session(SessionEvent::Connected);
        assert!(io.may_retry(p));
        assert!(io.is_connected());
        assert!(io.on_session(SessionEvent::Expired));
        assert!(io.has_ended());
    }
}
