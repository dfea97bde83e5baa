//! The recorder: what clients, servers and a nemesis did, as a
//! [`crate::history`] history. The simulator records with its simulated
//! clock (`zoosim::ensemble::sim::sim_recorder`, off unless an ensemble
//! is started with one); the real-server client with the wall clock
//! (`zoosim::client::real::wall_recorder`). The recorder knows no runtime
//! and no clock: it is given the clock it reads.
//!
//! Recording must not change a run: it only reads its clock and appends
//! under its own lock — no await, send, spawn or RNG draw. And as the
//! simulator is a fuzzer, it asserts what a client must guarantee while
//! it records: every completion has exactly one earlier invocation, and a
//! handle's requests complete in the order they were issued.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{
    Actor, Complete, Event, FaultRecord, HistOp, History, Invoke, Meta, OpId, Outcome, Record,
    Role, RoleChange, ServerNo as ServerId, SessionChange, Watched,
};
use crate::proto::{SessionEvent, SessionId, WatchEvent, Zxid};

/// What a recorder reads the time from: nanoseconds since the run began.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// A shared, append-only history under construction; clones share it.
#[derive(Clone)]
pub struct Recorder {
    rec: Arc<Mutex<Recording>>,
    clock: Clock,
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("records", &lock(&self.rec).records.len())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock means a panic that is already failing the run.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Default)]
struct Recording {
    records: Vec<Record>,
    next_op: u64,
    /// Invoked, not completed: who, and the request's xid.
    open: BTreeMap<OpId, (Actor, Option<i64>)>,
    /// Each handle's last completed xid.
    last_xid: BTreeMap<u32, i64>,
}

impl Recorder {
    /// An empty recorder that reads `clock`.
    pub fn new(clock: Clock) -> Recorder {
        Recorder {
            rec: Arc::default(),
            clock,
        }
    }

    fn now_ns(&self) -> u64 {
        (self.clock)()
    }

    fn push(&self, event: Event) {
        let at_ns = self.now_ns();
        lock(&self.rec).records.push(Record { at_ns, event });
    }

    /// How many records so far (a position for `insert_at`). Plumbing
    /// for the recording clients, not a collection's size: no `is_empty`.
    #[doc(hidden)]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        lock(&self.rec).records.len()
    }

    /// A record placed before the `at`th (made later, e.g. a fault whose
    /// parameters are known only once injected, but that came first).
    pub(crate) fn insert_at(&self, at: usize, event: Event) {
        let at_ns = self.now_ns();
        let mut r = lock(&self.rec);
        let at = at.min(r.records.len());
        r.records.insert(at, Record { at_ns, event });
    }

    /// An invocation; the id its completion must carry.
    #[doc(hidden)]
    pub fn invoke(
        &self,
        actor: Actor,
        session: Option<SessionId>,
        xid: Option<i64>,
        op: HistOp,
    ) -> OpId {
        let at_ns = self.now_ns();
        let mut r = lock(&self.rec);
        let id = OpId(r.next_op);
        r.next_op += 1;
        r.open.insert(id, (actor, xid));
        r.records.push(Record {
            at_ns,
            event: Event::Invoke(Invoke {
                id,
                actor,
                session,
                xid,
                op,
            }),
        });
        id
    }

    /// A completion. Panics if `id` is not open (completed twice, or never
    /// invoked), or if the handle's requests complete out of issue order.
    #[doc(hidden)]
    pub fn complete(
        &self,
        id: OpId,
        server: Option<ServerId>,
        zxid: Option<Zxid>,
        outcome: Outcome,
    ) {
        let at_ns = self.now_ns();
        let mut r = lock(&self.rec);
        let Some((actor, xid)) = r.open.remove(&id) else {
            panic!("history: {id} completes without an open invocation");
        };
        if let Some(xid) = xid {
            let last = r.last_xid.entry(actor.handle).or_insert(0);
            assert!(
                xid > *last,
                "history: {actor}'s request {xid} completes after its request {last}: \
                 completions out of issue order"
            );
            *last = xid;
        }
        r.records.push(Record {
            at_ns,
            event: Event::Complete(Complete {
                id,
                actor,
                server,
                zxid,
                outcome,
            }),
        });
    }

    /// An invocation that ends at once, without a request (refused
    /// locally, an empty multi, a close with nothing to send).
    #[doc(hidden)]
    pub fn local(&self, actor: Actor, session: Option<SessionId>, op: HistOp, outcome: Outcome) {
        let id = self.invoke(actor, session, None, op);
        self.complete(id, None, None, outcome);
    }

    /// A watch event the client delivered.
    #[doc(hidden)]
    pub fn watch(
        &self,
        actor: Actor,
        session: Option<SessionId>,
        server: Option<ServerId>,
        event: WatchEvent,
    ) {
        self.push(Event::Watch(Watched {
            actor,
            session,
            server,
            event,
        }));
    }

    /// A session state change the client reported.
    #[doc(hidden)]
    pub fn session(
        &self,
        actor: Actor,
        session: Option<SessionId>,
        state: SessionEvent,
        server: Option<ServerId>,
    ) {
        self.push(Event::Session(SessionChange {
            actor,
            session,
            state,
            server,
        }));
    }

    /// A server process's role (at its start, and at every change).
    #[doc(hidden)]
    pub fn role(&self, server: ServerId, process: u64, (role, serving, epoch): (Role, bool, u32)) {
        self.push(Event::Role(RoleChange {
            server,
            process,
            role,
            epoch,
            serving,
        }));
    }

    /// A fault record (a position for `insert_at`).
    #[doc(hidden)]
    pub fn fault_at(&self, at: usize, f: FaultRecord) {
        self.insert_at(at, Event::Fault(f));
    }

    /// Every record so far, in order.
    pub fn records(&self) -> Vec<Record> {
        lock(&self.rec).records.clone()
    }

    /// The history so far, under `meta`.
    pub fn history(&self, meta: Meta) -> History {
        History {
            meta,
            records: self.records(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Outcome;
    use crate::proto::{Op, ZkError};

    fn actor() -> Actor {
        Actor {
            client: Some(0),
            handle: 1,
        }
    }

    fn get() -> HistOp {
        HistOp::Zk(Op::Sync { path: "/".into() })
    }

    fn in_sim(f: impl FnOnce(&Recorder) + Send + 'static) {
        f(&Recorder::new(Arc::new(|| 0)));
    }

    #[test]
    fn a_completion_in_issue_order_is_recorded() {
        in_sim(|r| {
            let a = r.invoke(actor(), None, Some(1), get());
            let b = r.invoke(actor(), None, Some(2), get());
            r.complete(a, Some(0), Some(5), Outcome::Err(ZkError::NoNode));
            r.complete(b, Some(0), Some(5), Outcome::Err(ZkError::NoNode));
            assert_eq!(r.len(), 4);
        });
    }

    #[test]
    #[should_panic(expected = "completes without an open invocation")]
    fn a_completion_without_invocation_fails_the_run() {
        in_sim(|r| {
            let a = r.invoke(actor(), None, Some(1), get());
            r.complete(a, None, None, Outcome::Err(ZkError::ConnectionLoss));
            r.complete(a, None, None, Outcome::Err(ZkError::ConnectionLoss));
        });
    }

    #[test]
    #[should_panic(expected = "completions out of issue order")]
    fn completions_out_of_issue_order_fail_the_run() {
        in_sim(|r| {
            let a = r.invoke(actor(), None, Some(1), get());
            let b = r.invoke(actor(), None, Some(2), get());
            r.complete(b, Some(0), Some(5), Outcome::Err(ZkError::NoNode));
            r.complete(a, Some(0), Some(5), Outcome::Err(ZkError::NoNode));
        });
    }
}
