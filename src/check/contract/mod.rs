//! ZooKeeper's client contract, checked on what clients saw alone (so it
//! applies to a real ensemble's history as much as to a simulated one):
//! writes linearizable; each session's operations in FIFO order; reads
//! sequentially consistent (never backwards, across reconnects; a session
//! sees its own writes); a read after `sync` sees every write that
//! completed before the sync was called; a client sees a watch event
//! before it sees the data change that triggered it; events in zxid order.
//!
//! The whole contract is one search ([`model`]): some order of every
//! session's steps must replay on the data tree. When none does, the check
//! runs again with fewer rules, weakest first, and names the first
//! guarantee that fails on its own ([`GUARANTEES`]).
//!
//! Replies' zxids order the search (a correct ensemble's zxid order is
//! the order it needs, so it finds it at once), but they decide nothing:
//! every verdict is the model's.

pub mod model;

use std::fmt;

use crate::check::Property;
use crate::proto::{Op, Reply, SessionEvent, SessionId, WatchEvent, ZkError, Zxid};

pub use model::{Input, Rules, SessionSpec, StepKind, ZkModel};

/// The guarantees, in the order a failing history is tried against them.
pub mod guarantees {
    use super::Property;

    /// Each session's replies come back in the order it issued the requests.
    pub const SESSION_FIFO: Property = Property::new(
        "session-fifo",
        "each session's requests complete in the order it issued them",
    );
    /// Writes, with the replies they got, fit one order within their times.
    pub const WRITES_LINEARIZABLE: Property = Property::new(
        "writes-linearizable",
        "every write takes effect at one point between its call and its reply, in one order \
         that explains every write's reply",
    );
    /// Reads fit that order, never going back for a session.
    pub const SEQUENTIAL_CONSISTENCY: Property = Property::new(
        "sequential-consistency",
        "each read sees a state of that one order, never older than what its session saw \
         before (across reconnects) and never missing the session's own writes",
    );
    /// sync makes the next read fresh.
    pub const SYNC_READ_FRESH: Property = Property::new(
        "sync-read-fresh",
        "a read after sync sees every write that completed before the sync was called",
    );
    /// Events precede the data they announce.
    pub const WATCH_BEFORE_DATA: Property = Property::new(
        "watch-before-data",
        "a client receives a watch event before any reply showing the change that \
         triggered it, and only events for changes that happened",
    );
    /// Events come in the order of their changes.
    pub const EVENT_ORDER: Property = Property::new(
        "event-order",
        "a client receives its watch events in the order of the changes that triggered them",
    );
}

/// Every guarantee, in the order they are tried.
pub const GUARANTEES: [Property; 6] = [
    guarantees::SESSION_FIFO,
    guarantees::WRITES_LINEARIZABLE,
    guarantees::SEQUENTIAL_CONSISTENCY,
    guarantees::SYNC_READ_FRESH,
    guarantees::WATCH_BEFORE_DATA,
    guarantees::EVENT_ORDER,
];

/// How a request ended, as its client saw it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Done {
    /// The server answered (success or a definite error) at `at_us`, with
    /// the reply header's zxid where the client sees one.
    Answered {
        /// When the reply arrived.
        at_us: u64,
        /// The reply or the server's error.
        result: Result<Reply, ZkError>,
        /// The reply's zxid (a hint only).
        zxid: Option<Zxid>,
    },
    /// The client never learned the outcome (ConnectionLoss, or the session
    /// ended while it was in flight); `at_us` when it gave up, if it did.
    Unknown {
        /// When the request failed locally, if it did.
        at_us: Option<u64>,
        /// The local error.
        error: ZkError,
    },
}

/// One thing a session's client saw, in the order it saw them.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Seen {
    /// A request: `id` is its name in the history (for reports).
    Request {
        /// The history's id of the operation.
        id: usize,
        /// The request (`None`: close()).
        op: Option<Op>,
        /// When it was issued.
        call_us: u64,
        /// How it ended.
        done: Done,
    },
    /// A watch event delivered to the client.
    Event {
        /// When.
        at_us: u64,
        /// The event.
        event: WatchEvent,
    },
    /// A change of the session's state.
    State {
        /// When.
        at_us: u64,
        /// The state.
        event: SessionEvent,
    },
}

/// One session's view: everything its client saw, in order.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SessionLog {
    /// The session.
    pub id: SessionId,
    /// Its negotiated timeout.
    pub timeout_ms: u64,
    /// What it saw, in the order it saw it (requests at their completion;
    /// requests that never completed last).
    pub seen: Vec<Seen>,
}

/// One operation as the search places it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Placed {
    /// What the model steps on.
    pub input: Input,
    /// The earliest time it may take effect.
    pub call_us: u64,
    /// The latest (`None`: any time later, or never).
    pub ret_us: Option<u64>,
    /// Where the search should try it (the reply's zxid), if known.
    pub hint: Option<Zxid>,
    /// The history's operation it stands for, if one.
    pub id: Option<usize>,
}

/// A history the contract check cannot take.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ContractError(pub String);

impl fmt::Display for ContractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ContractError {}

/// Builds the model and what it places from the sessions' logs, under
/// `rules`.
pub fn build(logs: &[SessionLog], rules: Rules) -> (ZkModel, Vec<Placed>) {
    let mut specs = Vec::new();
    let mut placed = Vec::new();
    for (i, log) in logs.iter().enumerate() {
        let mut k: u32 = 0;
        // The earliest a step may take effect: after the session's previous
        // step, which a read may precede in time (a lagging server), but a
        // write, sync or close may not (they are placed after their call).
        let mut floor: u64 = 0;
        let mut events: Vec<WatchEvent> = Vec::new();
        let mut closed_by_reply = false;
        let mut free = Vec::new();
        let mut step = |kind: StepKind,
                        call_us: u64,
                        ret_us: u64,
                        hint: Option<Zxid>,
                        id: Option<usize>,
                        events: &mut Vec<WatchEvent>,
                        k: &mut u32| {
            placed.push(Placed {
                input: Input::Step {
                    session: i,
                    k: *k,
                    kind,
                    events: std::mem::take(events),
                },
                call_us,
                ret_us: Some(ret_us),
                hint,
                id,
            });
            *k += 1;
        };
        for seen in &log.seen {
            match seen {
                Seen::Event { event, .. } => {
                    if rules.events {
                        events.push(event.clone());
                    }
                }
                Seen::State { at_us, event } => {
                    if !rules.reads {
                        continue;
                    }
                    let kind = match event {
                        SessionEvent::Connected => StepKind::Connected,
                        SessionEvent::Disconnected => StepKind::Disconnected,
                        SessionEvent::Expired | SessionEvent::Closed => continue,
                    };
                    step(kind, floor, *at_us, None, None, &mut events, &mut k);
                }
                Seen::Request {
                    id,
                    op,
                    call_us,
                    done,
                } => match (op, done) {
                    (None, Done::Answered { at_us, .. }) => {
                        closed_by_reply = true;
                        step(
                            StepKind::Close,
                            *call_us,
                            *at_us,
                            None,
                            Some(*id),
                            &mut events,
                            &mut k,
                        );
                        floor = *call_us;
                    }
                    (None, Done::Unknown { .. }) => {}
                    (
                        Some(op),
                        Done::Answered {
                            at_us,
                            result,
                            zxid,
                        },
                    ) if op.is_write() => {
                        let kind = StepKind::Write {
                            op: op.clone(),
                            reply: result.clone(),
                        };
                        step(
                            kind,
                            *call_us,
                            *at_us,
                            *zxid,
                            Some(*id),
                            &mut events,
                            &mut k,
                        );
                        floor = *call_us;
                    }
                    (Some(op), Done::Unknown { .. }) if op.is_write() => {
                        free.push(Placed {
                            input: Input::Indeterminate {
                                session: i,
                                op: op.clone(),
                            },
                            call_us: *call_us,
                            ret_us: None,
                            hint: None,
                            id: Some(*id),
                        });
                    }
                    (
                        Some(Op::Sync { .. }),
                        Done::Answered {
                            at_us,
                            result: Ok(_),
                            zxid,
                        },
                    ) => {
                        if !rules.reads {
                            continue;
                        }
                        let call = if rules.sync_fresh { *call_us } else { floor };
                        step(
                            StepKind::Sync,
                            call,
                            *at_us,
                            *zxid,
                            Some(*id),
                            &mut events,
                            &mut k,
                        );
                        floor = call;
                    }
                    (
                        Some(op),
                        Done::Answered {
                            at_us,
                            result,
                            zxid,
                        },
                    ) => {
                        if !rules.reads || matches!(op, Op::Sync { .. }) {
                            continue;
                        }
                        let kind = StepKind::Read {
                            op: op.clone(),
                            reply: result.clone(),
                        };
                        step(kind, floor, *at_us, *zxid, Some(*id), &mut events, &mut k);
                    }
                    // A read that failed locally saw nothing.
                    (Some(_), Done::Unknown { .. }) => {}
                },
            }
        }
        placed.append(&mut free);
        if !closed_by_reply {
            placed.push(Placed {
                input: Input::Expire { session: i },
                call_us: floor,
                ret_us: None,
                hint: None,
                id: None,
            });
        }
        if rules.events && !events.is_empty() {
            placed.push(Placed {
                input: Input::End {
                    session: i,
                    events: std::mem::take(&mut events),
                },
                call_us: floor,
                ret_us: None,
                hint: None,
                id: None,
            });
        }
        specs.push(SessionSpec {
            id: log.id,
            timeout_ms: log.timeout_ms,
            steps: k,
        });
    }
    (
        ZkModel {
            sessions: specs,
            rules,
        },
        placed,
    )
}

/// The order the search tries operations in: by the reply's zxid (a
/// write before the reads that report its zxid), then by call time;
/// operations without a zxid (indeterminate writes, session ends,
/// reconnects) are not ordered here.
fn hint_key(p: &Placed) -> (Zxid, u8, u64) {
    let is_read = matches!(
        p.input,
        Input::Step {
            kind: StepKind::Read { .. } | StepKind::Sync,
            ..
        }
    );
    (p.hint.unwrap_or(Zxid::MAX), u8::from(is_read), p.call_us)
}

/// The fast path: the operations in zxid order, each session's unhinted
/// steps (reconnects) right after the step before them, and the
/// operations of unknown effect placed greedily where the next one needs
/// them. `Some(order)` is a witness that the history satisfies the rules
/// (the model accepted every step, each within its time window); `None`
/// says nothing: the full search decides.
pub fn fast_path(model: &ZkModel, placed: &[Placed]) -> Option<Vec<usize>> {
    // Sessions' steps without a hint inherit the previous step's, so they
    // stay in session order.
    let mut keys: Vec<(Zxid, u8, u64)> = placed.iter().map(hint_key).collect();
    let mut last_hint: Vec<Option<Zxid>> = vec![None; model.sessions.len()];
    for (i, p) in placed.iter().enumerate() {
        if let Input::Step { session, .. } = p.input {
            match p.hint {
                Some(h) => last_hint[session] = Some(h),
                None => keys[i].0 = last_hint[session].unwrap_or(0),
            }
        }
    }
    let (mut sure, mut loose): (Vec<usize>, Vec<usize>) = (0..placed.len()).partition(|&i| {
        matches!(placed[i].input, Input::Step { .. })
    });
    sure.sort_by_key(|&i| keys[i]);
    loose.sort_by_key(|&i| placed[i].call_us);
    let mut state = model.init();
    let mut order = Vec::with_capacity(placed.len());
    let mut now: u64 = 0;
    // Places `i` if its window allows and the model accepts it.
    let try_place = |i: usize, state: &mut model::State, now: &mut u64| -> bool {
        let p = &placed[i];
        let at = (*now).max(p.call_us);
        if p.ret_us.is_some_and(|r| at > r) {
            return false;
        }
        match model.step(state, &p.input) {
            Some(next) => {
                *state = next;
                *now = at;
                true
            }
            None => false,
        }
    };
    let mut used = vec![false; placed.len()];
    for &i in &sure {
        if try_place(i, &mut state, &mut now) {
            order.push(i);
            continue;
        }
        // Something of unknown effect must have happened first: one of
        // those already called, tried in call order.
        let mut placed_one = false;
        for &j in &loose {
            if used[j] || placed[j].call_us > placed[i].ret_us.unwrap_or(u64::MAX) {
                continue;
            }
            let saved = (state.clone(), now);
            if try_place(j, &mut state, &mut now) && try_place(i, &mut state, &mut now) {
                used[j] = true;
                order.push(j);
                order.push(i);
                placed_one = true;
                break;
            }
            (state, now) = saved;
        }
        if !placed_one {
            return None;
        }
    }
    // The rest never happened, or happened after everything seen: place
    // them last.
    let mut left: Vec<usize> = loose.into_iter().filter(|&j| !used[j]).collect();
    while !left.is_empty() {
        let before = left.len();
        left.retain(|&j| {
            let done = try_place(j, &mut state, &mut now);
            if done {
                order.push(j);
            }
            !done
        });
        if left.len() == before {
            return None;
        }
    }
    Some(order)
}
