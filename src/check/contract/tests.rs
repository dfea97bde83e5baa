//! The contract check on small hand-written histories: each guarantee is
//! shown holding, then broken by one change, and named.

use super::*;
use crate::check::lin::Budget;
use crate::history::{Actor, Complete, Invoke, Meta, SessionChange, Watched};
use crate::proto::{CreateMode, EventType, Stat};

/// Writes a history by hand: sessions 1.., times in ms.
struct H {
    records: Vec<Record>,
    next: u64,
}

use crate::history::Record;

impl H {
    fn new() -> H {
        H {
            records: Vec::new(),
            next: 0,
        }
    }

    fn actor(s: i64) -> Actor {
        Actor {
            client: Some(s as u32),
            handle: s as u32,
        }
    }

    fn push(&mut self, at_ms: u64, event: Event) {
        self.records.push(Record {
            at_ns: at_ms * 1_000_000,
            event,
        });
    }

    fn connect(&mut self, at_ms: u64, s: i64) -> &mut H {
        self.state(at_ms, s, SessionEvent::Connected)
    }

    fn state(&mut self, at_ms: u64, s: i64, state: SessionEvent) -> &mut H {
        self.push(
            at_ms,
            Event::Session(SessionChange {
                actor: H::actor(s),
                session: Some(SessionId(s)),
                state,
                server: Some(0),
            }),
        );
        self
    }

    /// An op called at `call` and answered at `ret` with `result`.
    fn op(
        &mut self,
        call: u64,
        ret: u64,
        s: i64,
        op: Op,
        result: Result<Reply, ZkError>,
        zxid: Option<Zxid>,
    ) -> &mut H {
        let id = self.invoke(call, s, op);
        self.complete(ret, s, id, result, zxid, Some(0))
    }

    fn invoke(&mut self, call: u64, s: i64, op: Op) -> OpId {
        let id = OpId(self.next);
        self.next += 1;
        self.push(
            call,
            Event::Invoke(Invoke {
                id,
                actor: H::actor(s),
                session: Some(SessionId(s)),
                xid: Some(id.0 as i64),
                op: HistOp::Zk(op),
            }),
        );
        id
    }

    fn complete(
        &mut self,
        at: u64,
        s: i64,
        id: OpId,
        result: Result<Reply, ZkError>,
        zxid: Option<Zxid>,
        server: Option<u32>,
    ) -> &mut H {
        self.push(
            at,
            Event::Complete(Complete {
                id,
                actor: H::actor(s),
                server,
                zxid,
                outcome: match result {
                    Ok(r) => HistOutcome::Ok(Some(r)),
                    Err(e) => HistOutcome::Err(e),
                },
            }),
        );
        self
    }

    fn event(&mut self, at: u64, s: i64, event_type: EventType, path: &str) -> &mut H {
        self.push(
            at,
            Event::Watch(Watched {
                actor: H::actor(s),
                session: Some(SessionId(s)),
                server: Some(0),
                event: WatchEvent {
                    event_type,
                    path: path.into(),
                },
            }),
        );
        self
    }

    fn history(&self) -> History {
        let mut records = self.records.clone();
        records.sort_by_key(|r| r.at_ns);
        History {
            meta: Meta {
                format: crate::history::FORMAT_VERSION,
                scenario: "hand-written".into(),
                file: None,
                seed: 0,
                zoosim: "test".into(),
                servers: 1,
                session_timeout_ms: 10_000,
            },
            records,
        }
    }
}

fn create(path: &str) -> Op {
    Op::Create {
        path: path.into(),
        data: vec![],
        mode: CreateMode::Persistent,
    }
}

fn created(path: &str) -> Result<Reply, ZkError> {
    Ok(Reply::Create {
        path: path.into(),
        stat: Stat::default(),
    })
}

fn get(path: &str, watch: bool) -> Op {
    Op::GetData {
        path: path.into(),
        watch,
    }
}

fn set(path: &str) -> Op {
    Op::SetData {
        path: path.into(),
        data: vec![1],
        version: -1,
    }
}

fn data(len: i32, version: i32) -> Result<Reply, ZkError> {
    Ok(Reply::GetData {
        data: vec![1; len as usize],
        stat: Stat {
            version,
            data_length: len,
            ..Stat::default()
        },
    })
}

fn stat(version: i32, len: i32) -> Result<Reply, ZkError> {
    Ok(Reply::SetData(Stat {
        version,
        data_length: len,
        ..Stat::default()
    }))
}

fn verdict(h: &H) -> ContractVerdict {
    check(&h.history(), &Budget::UNLIMITED).unwrap().verdict
}

fn broken(h: &H) -> &'static str {
    match verdict(h) {
        ContractVerdict::Broken(b) => b.guarantee.name,
        other => panic!("expected a broken guarantee, got {other:?}"),
    }
}

/// Session 1 creates /a and sets it; session 2 reads it. Correct as
/// written.
fn base() -> H {
    let mut h = H::new();
    h.connect(0, 1).connect(0, 2);
    h.op(1, 2, 1, create("/a"), created("/a"), Some(1));
    h.op(3, 4, 2, get("/a", false), data(0, 0), Some(1));
    h.op(5, 6, 1, set("/a"), stat(1, 1), Some(2));
    h.op(7, 8, 2, get("/a", false), data(1, 1), Some(2));
    h
}

#[test]
fn a_correct_history_holds_on_the_fast_path() {
    let h = base();
    let r = check(&h.history(), &Budget::UNLIMITED).unwrap();
    assert_eq!(r.verdict, ContractVerdict::Holds);
    assert!(r.fast);
}

/// Session 2 watches /a; session 1 sets it; session 2 gets the event and
/// loses its connection before session 1's reply arrives, reconnects and
/// reads the new data. `late_event`: the event arrives after the new data
/// instead.
fn disconnect_after_event(late_event: bool) -> H {
    let mut h = H::new();
    h.connect(0, 1).connect(0, 2);
    h.op(1, 2, 1, create("/a"), created("/a"), Some(1));
    h.op(3, 4, 2, get("/a", true), data(0, 0), Some(1));
    h.op(5, 8, 1, set("/a"), stat(1, 1), Some(2));
    if !late_event {
        h.event(6, 2, EventType::NodeDataChanged, "/a");
    }
    h.state(7, 2, SessionEvent::Disconnected);
    h.connect(9, 2);
    h.op(10, 11, 2, get("/a", false), data(1, 1), Some(2));
    if late_event {
        h.event(12, 2, EventType::NodeDataChanged, "/a");
    }
    h
}

#[test]
fn a_disconnect_waits_for_the_write_whose_event_it_received() {
    // The disconnect carries no zxid, and the last write completed before
    // it is zxid 1: the fast path defers it until the write that triggered
    // its event (zxid 2, answered later) is placed.
    let h = disconnect_after_event(false);
    let r = check(&h.history(), &Budget::UNLIMITED).unwrap();
    assert_eq!(r.verdict, ContractVerdict::Holds);
    assert!(r.fast, "decided on the fast path");
    // Deferring is no licence: the event after the new data still breaks
    // watch-before-data.
    assert_eq!(broken(&disconnect_after_event(true)), "watch-before-data");
}

#[test]
fn a_stale_read_is_fine_but_going_back_is_not() {
    // Session 2 reads version 0 after the set completed: a lagging server,
    // allowed.
    let mut h = base();
    h.op(9, 10, 2, get("/a", false), data(1, 1), Some(2));
    assert_eq!(verdict(&h), ContractVerdict::Holds);
    let mut stale = H::new();
    stale.connect(0, 1).connect(0, 2);
    stale.op(1, 2, 1, create("/a"), created("/a"), Some(1));
    stale.op(5, 6, 1, set("/a"), stat(1, 1), Some(2));
    stale.op(7, 8, 2, get("/a", false), data(0, 0), Some(1));
    assert_eq!(verdict(&stale), ContractVerdict::Holds, "stale is allowed");
    // ... but then back: version 1, then version 0 again.
    let mut back = base();
    back.op(9, 10, 2, get("/a", false), data(0, 0), Some(1));
    assert_eq!(broken(&back), "sequential-consistency");
}

#[test]
fn a_session_sees_its_own_writes() {
    let mut h = base();
    h.op(9, 10, 1, get("/a", false), data(0, 0), Some(1));
    assert_eq!(broken(&h), "sequential-consistency");
}

#[test]
fn two_creates_of_one_path_both_succeeding_break_writes() {
    let mut h = base();
    h.op(9, 10, 2, create("/a"), created("/a"), Some(3));
    assert_eq!(broken(&h), "writes-linearizable");
    // Failing with NodeExists is right.
    let mut ok = base();
    ok.op(9, 10, 2, create("/a"), Err(ZkError::NodeExists), Some(3));
    assert_eq!(verdict(&ok), ContractVerdict::Holds);
}

#[test]
fn a_write_acknowledged_then_lost_is_caught() {
    // The create of /b is acknowledged, but a later create of /b succeeds
    // too, and nobody deleted it.
    let mut h = base();
    h.op(9, 10, 1, create("/b"), created("/b"), Some(3));
    h.op(
        11,
        12,
        2,
        Op::Exists {
            path: "/b".into(),
            watch: false,
        },
        Ok(Reply::Exists(None)),
        Some(3),
    );
    // Reads alone: session 2 might be lagging, fine.
    assert_eq!(verdict(&h), ContractVerdict::Holds);
    h.op(13, 14, 2, create("/b"), created("/b"), Some(4));
    assert_eq!(broken(&h), "writes-linearizable");
}

#[test]
fn an_indeterminate_write_may_have_happened_or_not() {
    for happened in [false, true] {
        let mut h = base();
        let id = h.invoke(9, 1, create("/c"));
        h.complete(10, 1, id, Err(ZkError::ConnectionLoss), None, None);
        let seen = if happened {
            Ok(Reply::Exists(Some(Stat::default())))
        } else {
            Ok(Reply::Exists(None))
        };
        h.op(
            11,
            12,
            2,
            Op::Exists {
                path: "/c".into(),
                watch: false,
            },
            seen,
            Some(3),
        );
        assert_eq!(verdict(&h), ContractVerdict::Holds, "happened: {happened}");
    }
}

#[test]
fn a_watch_event_must_come_before_the_new_data() {
    let watched = |late: bool| {
        let mut h = H::new();
        h.connect(0, 1).connect(0, 2);
        h.op(1, 2, 1, create("/a"), created("/a"), Some(1));
        h.op(3, 4, 2, get("/a", true), data(0, 0), Some(1));
        h.op(5, 6, 1, set("/a"), stat(1, 1), Some(2));
        if late {
            h.op(7, 8, 2, get("/a", false), data(1, 1), Some(2));
            h.event(9, 2, EventType::NodeDataChanged, "/a");
        } else {
            h.event(7, 2, EventType::NodeDataChanged, "/a");
            h.op(8, 9, 2, get("/a", false), data(1, 1), Some(2));
        }
        h
    };
    assert_eq!(verdict(&watched(false)), ContractVerdict::Holds);
    assert_eq!(broken(&watched(true)), "watch-before-data");
}

#[test]
fn an_event_for_a_change_that_never_happened_is_caught() {
    let mut h = base();
    h.op(9, 10, 2, get("/a", true), data(1, 1), Some(2));
    h.event(11, 2, EventType::NodeDeleted, "/a");
    assert_eq!(broken(&h), "watch-before-data");
}

#[test]
fn sync_makes_the_next_read_fresh() {
    let run = |sync: bool| {
        let mut h = H::new();
        h.connect(0, 1).connect(0, 2);
        h.op(1, 2, 1, create("/a"), created("/a"), Some(1));
        h.op(3, 4, 1, set("/a"), stat(1, 1), Some(2));
        if sync {
            h.op(
                5,
                6,
                2,
                Op::Sync { path: "/a".into() },
                Ok(Reply::Sync),
                Some(2),
            );
        }
        h.op(7, 8, 2, get("/a", false), data(0, 0), Some(1));
        h
    };
    assert_eq!(verdict(&run(false)), ContractVerdict::Holds);
    assert_eq!(broken(&run(true)), "sync-read-fresh");
}

#[test]
fn replies_out_of_issue_order_break_fifo() {
    let mut h = base();
    let a = h.invoke(9, 2, get("/a", false));
    let b = h.invoke(9, 2, get("/a", false));
    h.complete(10, 2, b, data(1, 1), Some(2), Some(0));
    h.complete(11, 2, a, data(1, 1), Some(2), Some(0));
    assert_eq!(broken(&h), "session-fifo");
}
