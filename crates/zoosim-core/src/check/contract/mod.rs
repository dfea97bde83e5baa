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

mod certificate;
mod creates;
mod expiry;
mod fast;
pub mod model;
mod overtaken;
mod quotient;
mod reappeared;
mod zxids;

use std::collections::BTreeMap;
use std::fmt;

use crate::check::lin::{
    check_partition, Budget, Model, Operation, Outcome as LinOutcome, Verdict as LinVerdict,
};
use crate::check::{Property, Violation};
use crate::history::{Event, HistOp, History, OpId, Outcome as HistOutcome};
use crate::proto::{MultiOp, Op, Reply, SessionEvent, SessionId, WatchEvent, ZkError, Zxid};
use expiry::ToldExpired;
use quotient::Quotient;

pub use certificate::{certify, Refused};
pub use fast::{fast_path, fast_path_counted, FastStats, Stuck};
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
    /// A write of unknown outcome cannot overtake its session's later
    /// writes.
    pub const LOST_WRITE_FIFO: Property = Property::new(
        "lost-write-fifo",
        "a write whose outcome its client never learned takes effect before every write its \
         session issued after it (on that connection or a later one), or never",
    );
    /// sync makes the next read fresh.
    pub const SYNC_READ_FRESH: Property = Property::new(
        "sync-read-fresh",
        "a read after sync sees every write that completed before the sync was called",
    );
    /// No read is staler than the bound the ensemble's settings give.
    pub const TIMELINESS: Property = Property::new(
        "timeliness",
        "a read sees every write that completed more than the staleness bound before it was \
         called: the granted session timeout plus syncLimit x tickTime",
    );
    /// A session its client was told had expired ends, in time.
    pub const EXPIRY_TAKES_EFFECT: Property = Property::new(
        "expiry-takes-effect",
        "once a client is told its session expired, the session's close (its ephemerals gone) \
         comes before every write answered in an epoch and called later than the session \
         timeout plus three ticks (and the history's longest fault window) after both the \
         telling and that epoch's first reply",
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
    /// The zxids clients see agree with one order of the writes.
    pub const CLIENT_ZXIDS: Property = Property::new(
        "client-zxids",
        "the zxids clients see agree: a session's reply zxids never go back; one version of a \
         node has one mzxid (the create's at version 0, never smaller for a later version), one \
         cversion one pzxid; no Stat names a zxid beyond its reply's, and a write's own Stat \
         carries the write's zxid",
    );
    /// The contract as a whole: what a failure is named when the search
    /// proved that no order satisfies every guarantee together but could
    /// not tell, within its budget, which one fails on its own. Never a
    /// guarantee of its own: a verdict that names it claims only what was
    /// proved.
    pub const CONTRACT: Property = Property::new(
        "contract",
        "some order of every session's steps satisfies all of ZooKeeper's guarantees together \
         (named when the history is proved to break them but which one fails on its own was \
         not determined within the budget)",
    );
    /// The check itself: a panic in it, or a "holds" whose witness does
    /// not replay, is a defect of the checker, reported as a failure so
    /// that no run passes on a verdict nobody established.
    pub const CHECKER: Property = Property::new(
        "contract-checker",
        "the contract check reaches a verdict it can back: it does not panic, and every \
         \"holds\" comes with a witness order that replays on the model",
    );
}

/// The properties a contract verdict may name besides [`GUARANTEES`]: the
/// contract as a whole, and the checker.
pub const VERDICT_PROPERTIES: [Property; 2] = [guarantees::CONTRACT, guarantees::CHECKER];

/// Every guarantee, in the order they are tried.
pub const GUARANTEES: [Property; 10] = [
    guarantees::SESSION_FIFO,
    guarantees::WRITES_LINEARIZABLE,
    guarantees::SEQUENTIAL_CONSISTENCY,
    guarantees::LOST_WRITE_FIFO,
    guarantees::SYNC_READ_FRESH,
    guarantees::TIMELINESS,
    guarantees::EXPIRY_TAKES_EFFECT,
    guarantees::WATCH_BEFORE_DATA,
    guarantees::EVENT_ORDER,
    guarantees::CLIENT_ZXIDS,
];

/// How a request ended, as its client saw it (its reply borrowed from the
/// history, `'h`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Done<'h> {
    /// The server answered (success or a definite error) at `at_us`, with
    /// the reply header's zxid where the client sees one.
    Answered {
        /// When the reply arrived.
        at_us: u64,
        /// The reply or the server's error.
        result: Result<&'h Reply, ZkError>,
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

/// One thing a session's client saw, in the order it saw them (borrowed
/// from the history, `'h`: the check copies none of its data).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Seen<'h> {
    /// A request: `id` is its name in the history (for reports).
    Request {
        /// The history's id of the operation.
        id: usize,
        /// The request (`None`: close()).
        op: Option<&'h Op>,
        /// When it was issued.
        call_us: u64,
        /// How it ended.
        done: Done<'h>,
    },
    /// A watch event delivered to the client.
    Event {
        /// When.
        at_us: u64,
        /// The event.
        event: &'h WatchEvent,
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
pub struct SessionLog<'h> {
    /// The session.
    pub id: SessionId,
    /// Its negotiated timeout.
    pub timeout_ms: u64,
    /// Timeliness: a read of this session sees every write that completed
    /// this long before the read was called, where the history says how
    /// long (`None`: no bound is checked).
    pub staleness_us: Option<u64>,
    /// Expiry takes effect: once its client was told it expired, the
    /// session closes before every write its epoch's leader sequences more
    /// than this long after both the telling and the epoch's first reply
    /// (`None`: not checked). See [`expiry_bound_us`].
    pub expiry_bound_us: Option<u64>,
    /// What it saw, in the order it saw it (requests at their completion;
    /// requests that never completed last).
    pub seen: Vec<Seen<'h>>,
}

/// One operation as the search places it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Placed<'h> {
    /// What the model steps on.
    pub input: Input<'h>,
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
pub fn build<'h>(logs: &[SessionLog<'h>], rules: Rules) -> (ZkModel<'h>, Vec<Placed<'h>>) {
    let mut specs = Vec::new();
    let mut placed = Vec::new();
    let told = if rules.expiry {
        ToldExpired::new(logs, rules)
    } else {
        ToldExpired::default()
    };
    for (i, log) in logs.iter().enumerate() {
        let mut k: u32 = 0;
        let mut closes_first = Vec::new();
        // Each write's place in the order the session issued its writes
        // (history ids are given in invocation order), answered or not.
        let mut issued: Vec<usize> = log
            .seen
            .iter()
            .filter_map(|seen| match seen {
                Seen::Request {
                    id, op: Some(op), ..
                } if op.is_write() => Some(*id),
                _ => None,
            })
            .collect();
        issued.sort_unstable();
        let rank = |id: &usize| -> u32 {
            let r = issued.binary_search(id).expect("a write of this session");
            u32::try_from(r).expect("fewer than 2^32 writes in a session")
        };
        // The earliest a step may take effect: after the session's previous
        // step, which a read may precede in time (a lagging server), but a
        // write, sync or close may not (they are placed after their call).
        let mut floor: u64 = 0;
        let mut events: Vec<&'h WatchEvent> = Vec::new();
        let mut closed_by_reply = false;
        let mut free = Vec::new();
        let mut step = |kind: StepKind<'h>,
                        call_us: u64,
                        ret_us: u64,
                        hint: Option<Zxid>,
                        id: Option<usize>,
                        events: &mut Vec<&'h WatchEvent>,
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
                        events.push(*event);
                    }
                }
                Seen::State { at_us, event } => {
                    // Without events a disconnect or a reconnect changes
                    // nothing the rules can see (it only decides which
                    // watches the server replays), and it can always be
                    // placed right after its session's previous step: it
                    // is left out, a choice fewer for the search.
                    if !rules.events {
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
                    (None, Done::Answered { at_us, zxid, .. }) => {
                        closed_by_reply = true;
                        step(
                            StepKind::Close,
                            *call_us,
                            *at_us,
                            *zxid,
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
                            op,
                            reply: *result,
                            rank: rank(id),
                        };
                        let first = told.closes_first(i, *call_us, *zxid);
                        if !first.is_empty() {
                            closes_first.push((k, first));
                        }
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
                                op,
                                rank: rank(id),
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
                        let kind = StepKind::Read { op, reply: *result };
                        // Timeliness: never before a write that completed
                        // more than the bound before the read was called.
                        let earliest = match (rules.timely, log.staleness_us) {
                            (true, Some(bound)) => floor.max(call_us.saturating_sub(bound)),
                            _ => floor,
                        };
                        step(
                            kind,
                            earliest,
                            *at_us,
                            *zxid,
                            Some(*id),
                            &mut events,
                            &mut k,
                        );
                    }
                    // A read that failed locally saw nothing.
                    (Some(_), Done::Unknown { .. }) => {}
                },
            }
        }
        placed.append(&mut free);
        // Without events, a session's end changes only its ephemerals (its
        // writes still unknown then never happen, as they may anyway): a
        // session that never asked for one ends unseen, a choice fewer.
        let seen_end = rules.events || log.seen.iter().any(asks_for_ephemeral);
        if !closed_by_reply && seen_end {
            placed.push(Placed {
                input: Input::Expire { session: i },
                call_us: floor,
                ret_us: None,
                hint: None,
                id: None,
            });
        }
        let trailing = rules.events && !events.is_empty();
        if trailing {
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
            trailing,
            closes_first,
        });
    }
    (ZkModel::new(specs, rules), placed)
}

/// Whether a request may create an ephemeral node (alone or in a multi).
fn asks_for_ephemeral(seen: &Seen) -> bool {
    let Seen::Request { op: Some(op), .. } = seen else {
        return false;
    };
    match op {
        Op::Create { mode, .. } => mode.is_ephemeral(),
        Op::Multi(ops) => ops
            .iter()
            .any(|o| matches!(o, MultiOp::Create { mode, .. } if mode.is_ephemeral())),
        _ => false,
    }
}

/// The history as it stood at `t_us`: what completed later is unknown
/// (a write's effect) or unseen (a read, an event). Any history that
/// satisfies the contract has truncations that do, so a truncation that
/// breaks it proves the whole history does: a smaller search.
pub fn truncate<'h>(logs: &[SessionLog<'h>], t_us: u64) -> Vec<SessionLog<'h>> {
    logs.iter()
        .map(|log| SessionLog {
            id: log.id,
            timeout_ms: log.timeout_ms,
            staleness_us: log.staleness_us,
            expiry_bound_us: log.expiry_bound_us,
            seen: log
                .seen
                .iter()
                .filter_map(|seen| match seen {
                    Seen::Event { at_us, .. } | Seen::State { at_us, .. } => {
                        (*at_us <= t_us).then(|| seen.clone())
                    }
                    Seen::Request {
                        id,
                        op,
                        call_us,
                        done,
                    } => {
                        if *call_us > t_us {
                            return None;
                        }
                        let late = match done {
                            Done::Answered { at_us, .. } => *at_us > t_us,
                            Done::Unknown { .. } => false,
                        };
                        Some(if late {
                            Seen::Request {
                                id: *id,
                                op: *op,
                                call_us: *call_us,
                                done: Done::Unknown {
                                    at_us: None,
                                    error: ZkError::ConnectionLoss,
                                },
                            }
                        } else {
                            seen.clone()
                        })
                    }
                })
                .collect(),
        })
        .collect()
}

/// Each session's view of a recorded history, one [`SessionLog`] per
/// client handle (a handle holds one session), in handle order. Requests
/// that failed before reaching a server (bad arguments) are left out:
/// they had no effect. Requests still open when the history ends are
/// indeterminate. A sync answered by a server of an older epoch than an
/// established leader's (a deposed leader that does not know it yet, or
/// its follower) is left out too: sync is not a quorum operation, and
/// such a leader answers it from its own state (ZOOKEEPER-1675), so it
/// promises nothing fresh.
pub fn session_logs(h: &History) -> Result<Vec<SessionLog<'_>>, ContractError> {
    struct Building<'h> {
        id: Option<SessionId>,
        seen: Vec<Seen<'h>>,
        open: BTreeMap<OpId, (u64, &'h HistOp)>,
    }
    let mut by: BTreeMap<u32, Building<'_>> = BTreeMap::new();
    let us = |ns: u64| ns / 1_000;
    // Each server's epoch, and the established leaders' (by server), as
    // the role changes so far say.
    let mut epochs: BTreeMap<u32, u32> = BTreeMap::new();
    let mut leading: BTreeMap<u32, u32> = BTreeMap::new();
    for r in &h.records {
        let (handle, session) = match &r.event {
            Event::Invoke(i) => (i.actor.handle, i.session),
            Event::Complete(c) => (c.actor.handle, None),
            Event::Watch(w) => (w.actor.handle, w.session),
            Event::Session(s) => (s.actor.handle, s.session),
            Event::Role(role) => {
                epochs.insert(role.server, role.epoch);
                if role.role == crate::history::Role::Leading && role.serving {
                    leading.insert(role.server, role.epoch);
                } else {
                    leading.remove(&role.server);
                }
                continue;
            }
            Event::Fault(_) => continue,
        };
        let b = by.entry(handle).or_insert_with(|| Building {
            id: None,
            seen: Vec::new(),
            open: BTreeMap::new(),
        });
        if let Some(s) = session {
            match b.id {
                None => b.id = Some(s),
                Some(known) if known != s => {
                    return Err(ContractError(format!(
                        "handle {handle} has two sessions ({known} and {s}): a handle holds one"
                    )))
                }
                Some(_) => {}
            }
        }
        match &r.event {
            Event::Invoke(i) => {
                b.open.insert(i.id, (us(r.at_ns), &i.op));
            }
            Event::Complete(c) => {
                let Some((call_us, op)) = b.open.remove(&c.id) else {
                    return Err(ContractError(format!(
                        "{} completes without an invocation by handle {handle}",
                        c.id
                    )));
                };
                let at_us = us(r.at_ns);
                let done = if c.outcome.is_indeterminate() {
                    Done::Unknown {
                        at_us: Some(at_us),
                        error: c.outcome.error().unwrap_or(ZkError::ConnectionLoss),
                    }
                } else if c.server.is_none() {
                    continue; // refused by the client itself: no effect
                } else if matches!(op, HistOp::Zk(Op::Sync { .. }))
                    && c.server.is_some_and(|s| {
                        let epoch = epochs.get(&s).copied().unwrap_or(0);
                        leading.iter().any(|(&l, &e)| l != s && e > epoch)
                    })
                {
                    continue; // a deposed leader's sync (ZOOKEEPER-1675)
                } else {
                    Done::Answered {
                        at_us,
                        result: match &c.outcome {
                            HistOutcome::Ok(Some(reply)) => Ok(reply),
                            HistOutcome::Ok(None) => Ok(&Reply::Sync),
                            HistOutcome::Err(e) => Err(*e),
                        },
                        zxid: c.zxid,
                    }
                };
                b.seen.push(Seen::Request {
                    id: c.id.0 as usize,
                    op: match op {
                        HistOp::Zk(op) => Some(op),
                        HistOp::CloseSession => None,
                    },
                    call_us,
                    done,
                });
            }
            Event::Watch(w) => b.seen.push(Seen::Event {
                at_us: us(r.at_ns),
                event: &w.event,
            }),
            Event::Session(s) => b.seen.push(Seen::State {
                at_us: us(r.at_ns),
                event: s.state,
            }),
            Event::Fault(_) | Event::Role(_) => {}
        }
    }
    // Per history, not per session: computed once (each is a pass over
    // every record; per session it made 10k sessions quadratic).
    let staleness = staleness_us(&h.meta).map(|b| b.saturating_add(paused_us(h)));
    let expiry_bound = expiry_bound_us(h);
    let mut logs = Vec::new();
    for (_, mut b) in by {
        // A handle that never had a session never reached a server.
        let Some(id) = b.id else { continue };
        for (id, (call_us, op)) in std::mem::take(&mut b.open) {
            b.seen.push(Seen::Request {
                id: id.0 as usize,
                op: match op {
                    HistOp::Zk(op) => Some(op),
                    HistOp::CloseSession => None,
                },
                call_us,
                done: Done::Unknown {
                    at_us: None,
                    error: ZkError::ConnectionLoss,
                },
            });
        }
        logs.push(SessionLog {
            id,
            timeout_ms: h.meta.session_timeout_ms,
            staleness_us: staleness,
            expiry_bound_us: expiry_bound,
            seen: b.seen,
        });
    }
    Ok(logs)
}

/// The timeliness bound of a history's sessions, where its meta gives the
/// servers' tickTime and syncLimit: the session timeout the servers grant
/// (the requested one within 2 and 20 ticks) plus syncLimit ticks. A
/// follower that stops hearing from its leader stops serving within
/// syncLimit ticks, and a client leaves a server that stops answering
/// (frozen, or cut off) within its session timeout, so no server answers
/// a session from a state older than that (docs/CONTRACT.md,
/// "Timeliness").
pub fn staleness_us(meta: &crate::history::Meta) -> Option<u64> {
    let (tick, sync_limit) = (meta.tick_ms?, meta.sync_limit_ticks?);
    if tick == 0 {
        return None; // no tick, no bound (a history file may say anything)
    }
    granted_timeout_ms(meta, tick)
        .checked_add(sync_limit.checked_mul(tick)?)?
        .checked_mul(1_000)
}

/// How long servers were paused in all (the recorded `server-pause`
/// faults' windows), added to the staleness bound: a paused follower
/// resumes with the tree it had, may take a client's reconnect at once
/// and answer a read from that tree before it notices it has lost its
/// leader, as ZooKeeper's followers do (they hold no lease). Seed
/// 3237020579 of configuration: a follower paused from 1.6 s to 9.6 s
/// answered a read with the state of 1.6 s. The sum, not the longest,
/// because pauses of one server stack.
fn paused_us(h: &History) -> u64 {
    pauses_ms(h)
        .fold(0u64, u64::saturating_add)
        .saturating_mul(1_000)
}

/// The windows of the history's server pauses (the `server-pause` faults
/// that took effect).
fn pauses_ms(h: &History) -> impl Iterator<Item = u64> + '_ {
    h.records.iter().filter_map(|r| match &r.event {
        Event::Fault(f) if !f.skipped && f.fault == "server-pause" => Some(f.params.window_ms()),
        _ => None,
    })
}

/// The session timeout the servers grant: the requested one, within 2
/// and 20 ticks.
fn granted_timeout_ms(meta: &crate::history::Meta, tick: u64) -> u64 {
    meta.session_timeout_ms
        .clamp(tick.saturating_mul(2), tick.saturating_mul(20))
}

/// How long after a client is told its session expired the close must
/// have taken effect, for writes sequenced by a leader established before
/// then (docs/CONTRACT.md, "Expiry takes effect"): the session timeout the
/// servers grant, plus three ticks (the expiry queue rounds a deadline up
/// to the next tick; a follower reports its clients' touches to the leader
/// once a tick; and one for the time a message and a tick take), plus the
/// longest window or delay of any fault the history records (a paused
/// server, a delayed or clogged link, or a forced expiry's race window
/// holds an expiry or a touch back that long), plus the windows of all the
/// recorded server pauses, summed. `None` where the meta does not give the
/// tickTime.
pub fn expiry_bound_us(h: &History) -> Option<u64> {
    let tick = h.meta.tick_ms.filter(|&t| t > 0)?;
    let granted = granted_timeout_ms(&h.meta, tick);
    let faults = h
        .records
        .iter()
        .filter_map(|r| match &r.event {
            Event::Fault(f) if !f.skipped => {
                Some(f.params.window_ms().saturating_add(f.params.delay_ms()))
            }
            _ => None,
        })
        .max()
        .unwrap_or(0);
    // A paused leader learns of its sessions' touches only when it resumes
    // (its followers report them then, and it stamps them with that time),
    // so each pause can hold an expiry back by its window, and pauses
    // stack: the bound grows by every recorded pause's window, summed
    // (seed 2589853485 of mix-server-pauses-lock: a session told it
    // expired at 11.2 s, its leader paused three times for 19.5 s in all,
    // still had its node at 40.3 s).
    granted
        .checked_add(tick.checked_mul(3)?)?
        .checked_add(faults)?
        .checked_mul(1_000)?
        .checked_add(paused_us(h))
}

/// What the contract check found.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ContractVerdict {
    /// Every guarantee holds: some order of the history replays on the
    /// model.
    Holds,
    /// A guarantee fails.
    Broken(Broken),
    /// The search ran out of budget before it could decide: neither a
    /// pass nor a failure.
    Unknown(String),
    /// The checker failed (a panic, or a witness its certificate refused):
    /// a defect of the checker, reported as a failure of
    /// [`guarantees::CHECKER`].
    CheckerFault(String),
}

/// A guarantee that fails, with the evidence.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Broken {
    /// The first guarantee that fails on its own ([`GUARANTEES`] order),
    /// or [`guarantees::CONTRACT`] when the history is proved to break the
    /// contract but which guarantee fails first was not determined.
    pub guarantee: Property,
    /// What went wrong, in words.
    pub detail: String,
    /// The history's operations involved (ids), for reports.
    pub ops: Vec<usize>,
    /// The longest prefix of the history that the search could order
    /// (history op ids, in that order; steps without an id are left out).
    pub prefix: Vec<usize>,
    /// The model's state (the data tree, in words) before and after each
    /// operation of `prefix`, in step with it; empty when the check gave
    /// no prefix. For reports: the states on an operation's hover.
    pub prefix_states: Vec<(String, String)>,
    /// The model's state after the whole prefix: the state in which none
    /// of `ops` can be placed (`None` when the check gave no prefix).
    pub stuck_state: Option<String>,
}

/// The contract check's result and what it cost.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ContractReport {
    /// The verdict.
    pub verdict: ContractVerdict,
    /// Sessions in the history.
    pub sessions: usize,
    /// Operations placed (requests, session steps, possible effects).
    pub placed: usize,
    /// Whether the zxid-ordered fast path decided (no search needed).
    pub fast: bool,
    /// Search steps taken (0 on the fast path).
    pub steps: u64,
}

impl ContractReport {
    /// The violation, named by its guarantee, if the contract is broken.
    pub fn violation(&self) -> Option<Violation> {
        match &self.verdict {
            ContractVerdict::Broken(b) => Some(Violation::new(b.guarantee, b.detail.clone())),
            ContractVerdict::CheckerFault(why) => {
                Some(Violation::new(guarantees::CHECKER, why.clone()))
            }
            ContractVerdict::Holds | ContractVerdict::Unknown(_) => None,
        }
    }
}

/// The rules of each guarantee, weakest first (see [`GUARANTEES`]).
const LADDER: [(Property, Rules); 8] = {
    // Each rung is the one before it with one more rule.
    const WRITES: Rules = Rules {
        reads: false,
        sync_fresh: false,
        events: false,
        event_order: false,
        write_fifo: false,
        timely: false,
        expiry: false,
    };
    const READS: Rules = Rules {
        reads: true,
        ..WRITES
    };
    const FIFO: Rules = Rules {
        write_fifo: true,
        ..READS
    };
    const SYNC: Rules = Rules {
        sync_fresh: true,
        ..FIFO
    };
    const TIMELY: Rules = Rules {
        timely: true,
        ..SYNC
    };
    const EXPIRY: Rules = Rules {
        expiry: true,
        ..TIMELY
    };
    const EVENTS: Rules = Rules {
        events: true,
        ..EXPIRY
    };
    [
        (guarantees::WRITES_LINEARIZABLE, WRITES),
        (guarantees::SEQUENTIAL_CONSISTENCY, READS),
        (guarantees::LOST_WRITE_FIFO, FIFO),
        (guarantees::SYNC_READ_FRESH, SYNC),
        (guarantees::TIMELINESS, TIMELY),
        (guarantees::EXPIRY_TAKES_EFFECT, EXPIRY),
        (guarantees::WATCH_BEFORE_DATA, EVENTS),
        (
            guarantees::EVENT_ORDER,
            Rules {
                event_order: true,
                ..EVENTS
            },
        ),
    ]
};

/// Checks a recorded history against ZooKeeper's contract within
/// `budget`.
///
/// A panic anywhere in the check is caught and reported as a
/// [`ContractVerdict::CheckerFault`] (a failure naming the checker), so
/// that one defective check never takes a sweep down with it.
pub fn check(h: &History, budget: &Budget<'_>) -> Result<ContractReport, ContractError> {
    let logs = session_logs(h)?;
    Ok(guarded(logs.len(), || check_logs(&logs, budget)))
}

/// `run` (a check of `sessions` sessions), with a panic in it turned into
/// a [`ContractVerdict::CheckerFault`].
pub fn guarded(sessions: usize, run: impl FnOnce() -> ContractReport) -> ContractReport {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(report) => report,
        Err(panic) => {
            let msg = crate::check::panic_message(panic.as_ref());
            ContractReport {
                verdict: ContractVerdict::CheckerFault(format!(
                    "the contract check panicked: {msg}"
                )),
                sessions,
                placed: 0,
                fast: false,
                steps: 0,
            }
        }
    }
}

/// [`check`] over sessions' logs.
///
/// The zxid-ordered fast path under every rule decides a correct run.
/// Where it sticks, the rungs of [`LADDER`] are searched weakest first:
/// those without events (writes; reads; sync) over classes of states
/// ([`quotient`]), each a smaller search than the whole contract, so a
/// history that breaks one of them is refuted, and named, even when the
/// search of the whole contract could not finish; then the whole
/// contract, and if it fails, the rung with events as a set tells
/// watch-before-data from event-order.
///
/// Four checks without a search come last, on their own: an expired
/// session's node seen after its close must have come
/// ([`expiry::lingering`]), a node seen gone and then again
/// ([`reappeared`]), an event received before an earlier change's
/// ([`overtaken`]), and the zxids clients saw ([`zxids`]). A history
/// that breaks an earlier guarantee is named by that one; one that holds
/// otherwise, or that the search could not decide, fails by these alone.
pub fn check_logs(logs: &[SessionLog], budget: &Budget<'_>) -> ContractReport {
    let mut report = check_order(logs, budget);
    if let ContractVerdict::Holds | ContractVerdict::Unknown(_) = report.verdict {
        let one_pass = expiry::lingering(logs)
            .or_else(|| reappeared::reappeared(logs))
            .or_else(|| overtaken::overtaken(logs))
            .or_else(|| zxids::zxids(logs));
        if let Some(b) = one_pass {
            report.verdict = ContractVerdict::Broken(b);
        }
    }
    report
}

/// Every guarantee but the zxids': whether an order of the history's
/// steps satisfies them.
fn check_order(logs: &[SessionLog], budget: &Budget<'_>) -> ContractReport {
    let mut report = ContractReport {
        verdict: ContractVerdict::Holds,
        sessions: logs.len(),
        placed: 0,
        fast: false,
        steps: 0,
    };
    if let Some(b) = fifo(logs) {
        report.verdict = ContractVerdict::Broken(b);
        return report;
    }
    let (model, placed) = build(logs, Rules::ALL);
    report.placed = placed.len();
    if let Ok(order) = fast_path_counted(&model, &placed, &mut FastStats::default(), budget.stop) {
        report.fast = true;
        if let Err(refused) = certify(&model, &placed, &order) {
            report.verdict = ContractVerdict::CheckerFault(uncertified(&refused));
        }
        return report;
    }
    // The first rung without events the search could not decide, if any:
    // the rungs above it are left to the whole contract's search (which a
    // correct history needs anyway); if that fails, which guarantee fails
    // first is unknown.
    let mut undecided: Option<(Property, String)> = None;
    for (guarantee, rules) in LADDER {
        if rules.events {
            continue;
        }
        let d = decide(logs, rules, &share(rules, budget));
        report.steps += d.steps;
        match d.outcome {
            Decided::Holds => {}
            Decided::Fails(f) => {
                report.verdict = broken(guarantee, f);
                return report;
            }
            Decided::Fault(why) => {
                report.verdict = ContractVerdict::CheckerFault(why);
                return report;
            }
            Decided::Unknown(why) => {
                undecided = Some((guarantee, why));
                break;
            }
        }
    }
    let full = decide(logs, Rules::ALL, budget);
    report.steps += full.steps;
    let failure = match full.outcome {
        Decided::Holds => return report,
        Decided::Unknown(why) => {
            report.verdict = ContractVerdict::Unknown(why);
            return report;
        }
        Decided::Fault(why) => {
            report.verdict = ContractVerdict::CheckerFault(why);
            return report;
        }
        Decided::Fails(f) => f,
    };
    // Which of the two event guarantees fails on its own.
    let (as_set, rules) = LADDER[LADDER.len() - 2];
    let (guarantee, outcome) = match undecided {
        Some((g, why)) => (g, Decided::Unknown(why)),
        None => {
            let d = decide(logs, rules, budget);
            report.steps += d.steps;
            (as_set, d.outcome)
        }
    };
    report.verdict = match outcome {
        Decided::Holds => broken(guarantees::EVENT_ORDER, failure),
        Decided::Fails(f) => broken(as_set, f),
        Decided::Fault(why) => ContractVerdict::CheckerFault(why),
        // The whole contract's search proved the history breaks it: a
        // failure, whichever guarantee fails first.
        Decided::Unknown(why) => {
            let mut f = failure;
            f.detail = format!(
                "contract broken (guarantee not determined within budget: whether {} holds \
                 is unknown, {why}): {}",
                guarantee.name, f.detail
            );
            broken(guarantees::CONTRACT, f)
        }
    };
    report
}

/// Why a "holds" whose witness the certificate refused is a checker
/// fault.
fn uncertified(refused: &Refused) -> String {
    format!("the search said \"holds\" but its witness order does not replay: {refused}")
}

/// The budget of each search of a rung without events. The rungs with
/// reads get an eighth: on a correct run whose zxid-ordered pass stuck
/// (a few in a hundred), they are searched before the whole contract's
/// search, which decides the run; if they run out, that is time spent in
/// vain, and an eighth bounds it. A broken ensemble's history is refuted
/// in a few thousand steps, where every order must be tried (the classes
/// of states make that small).
fn share<'a>(rules: Rules, budget: &Budget<'a>) -> Budget<'a> {
    let part = if rules.reads && !rules.events { 8 } else { 1 };
    Budget {
        max_steps: budget.max_steps / part,
        ..*budget
    }
}

/// The verdict naming `guarantee`, with the failure's evidence.
fn broken(guarantee: Property, f: Failure) -> ContractVerdict {
    ContractVerdict::Broken(Broken {
        guarantee,
        detail: f.detail,
        ops: f.ops,
        prefix: f.prefix,
        prefix_states: f.prefix_states,
        stuck_state: f.stuck_state,
    })
}

/// Each session's answered requests must complete in issue order (ids
/// are given in invocation order).
fn fifo(logs: &[SessionLog]) -> Option<Broken> {
    for log in logs {
        let mut last: Option<usize> = None;
        for seen in &log.seen {
            if let Seen::Request {
                id,
                done: Done::Answered { .. },
                ..
            } = seen
            {
                if let Some(prev) = last {
                    if *id < prev {
                        return Some(Broken {
                            guarantee: guarantees::SESSION_FIFO,
                            detail: format!(
                                "session {}: op {id} completed after op {prev}, which was issued \
                                 later",
                                log.id
                            ),
                            ops: vec![prev, *id],
                            prefix: Vec::new(),
                            prefix_states: Vec::new(),
                            stuck_state: None,
                        });
                    }
                }
                last = Some(*id);
            }
        }
    }
    None
}

#[derive(Clone, Debug)]
struct Failure {
    detail: String,
    ops: Vec<usize>,
    prefix: Vec<usize>,
    prefix_states: Vec<(String, String)>,
    stuck_state: Option<String>,
}

#[derive(Clone, Debug)]
enum Decided {
    /// A witness order was found, and its certificate checked.
    Holds,
    Fails(Failure),
    Unknown(String),
    /// The search's witness failed its certificate.
    Fault(String),
}

#[derive(Clone, Debug)]
struct Decision {
    outcome: Decided,
    steps: u64,
    /// Where the fast path got stuck, if at a known time.
    stuck: Option<u64>,
    /// The session of the step it got stuck on, if a session's step.
    stuck_session: Option<usize>,
}

/// One search under `rules`: the fast path, else the engine. When the
/// engine runs out of budget, a smaller problem that holds whenever this
/// one does is searched, and if it fails, this one fails: without
/// events, the history without the reads (and syncs) of every session
/// but the one the fast path got stuck on (there a read changes nothing
/// but its own session's place); with events, the history truncated
/// where the fast path got stuck.
fn decide(logs: &[SessionLog], rules: Rules, budget: &Budget<'_>) -> Decision {
    let mut d = decide_once(logs, rules, budget);
    let Decided::Unknown(_) = &d.outcome else {
        return d;
    };
    let mut weaker: Vec<(Vec<SessionLog>, String)> = Vec::new();
    if let (Some(i), true) = (d.stuck_session, rules.reads) {
        let what = if rules.events {
            "reads and events"
        } else {
            "reads"
        };
        weaker.push((
            reads_of(logs, i, rules.events),
            format!(
                "in the history with the {what} of session {} alone",
                logs[i].id
            ),
        ));
    }
    // The truncation turns the writes in flight at its time into writes of
    // unknown effect: more orders, not fewer, for the searches over
    // classes; it helps the searches over states.
    if let (Some(t), true) = (d.stuck, rules.events) {
        weaker.push((
            truncate(logs, t),
            format!("in the history up to {:.3} s", t as f64 / 1e6),
        ));
    }
    for (small, within) in weaker {
        let again = decide_once(&small, rules, budget);
        d.steps += again.steps;
        if let Decided::Fails(mut f) = again.outcome {
            f.detail = format!("{} ({within})", f.detail);
            d.outcome = Decided::Fails(f);
            return d;
        }
    }
    d
}

/// The logs without the reads and syncs of every session but `keep`'s
/// (their writes and closes stay), and with `events`, without their watch
/// events and their disconnects and reconnects too. Every order that
/// satisfies the whole logs satisfies these: such a read or sync only
/// checks its reply and advances its own session (and sets a watch of its
/// own); an event received, a disconnect or a reconnect only checks and
/// changes its own session's watches and what is queued for it; a session
/// without reads sets no watch, so no write queues anything for it. A
/// failure of these is a failure of the whole, in a search without the
/// other sessions' reads to interleave (late-watch-event seed 3020703744).
pub fn reads_of<'h>(logs: &[SessionLog<'h>], keep: usize, events: bool) -> Vec<SessionLog<'h>> {
    logs.iter()
        .enumerate()
        .map(|(i, log)| SessionLog {
            id: log.id,
            timeout_ms: log.timeout_ms,
            staleness_us: log.staleness_us,
            expiry_bound_us: log.expiry_bound_us,
            seen: log
                .seen
                .iter()
                .filter(|seen| {
                    i == keep
                        || match seen {
                            Seen::Request { op: Some(op), .. } => op.is_write(),
                            Seen::Request { op: None, .. } => true,
                            Seen::Event { .. } => !events,
                            Seen::State { event, .. } => {
                                !events
                                    || !matches!(
                                        event,
                                        SessionEvent::Connected | SessionEvent::Disconnected
                                    )
                            }
                        }
                })
                .cloned()
                .collect(),
        })
        .collect()
}

/// What the engine searches: each placed operation with its window.
fn operations<'h>(placed: &[Placed<'h>]) -> Vec<Operation<Input<'h>, ()>> {
    // A time far beyond any history: a step that must happen (a session's
    // trailing events) is placed before it.
    const LATE: u64 = u64::MAX / 2;
    placed
        .iter()
        .map(|p| {
            let session = p.input.session();
            Operation {
                client: session as u64,
                output: match p.input {
                    Input::Indeterminate { .. } | Input::Expire { .. } => LinOutcome::Unknown,
                    _ => LinOutcome::Known(()),
                },
                input: p.input.clone(),
                call: p.call_us,
                ret: Some(p.ret_us.unwrap_or(LATE)),
            }
        })
        .collect()
}

fn decide_once(logs: &[SessionLog], rules: Rules, budget: &Budget<'_>) -> Decision {
    let (model, placed) = build(logs, rules);
    let certified = |order: &[usize]| match certify(&model, &placed, order) {
        Ok(()) => Decided::Holds,
        Err(refused) => Decided::Fault(uncertified(&refused)),
    };
    let (stuck, stuck_session) =
        match fast_path_counted(&model, &placed, &mut FastStats::default(), budget.stop) {
            Ok(order) => {
                return Decision {
                    outcome: certified(&order),
                    steps: 0,
                    stuck: None,
                    stuck_session: None,
                }
            }
            Err(s) => (
                (s.at_us != u64::MAX).then_some(s.at_us),
                match placed[s.op].input {
                    Input::Step { session, .. } => Some(session),
                    _ => None,
                },
            ),
        };
    let ops = operations(&placed);
    let all: Vec<usize> = (0..ops.len()).collect();
    let (verdict, explored) = match Quotient::new(&model) {
        Some(q) => check_partition(&q, &ops, &all, budget),
        None => check_partition(&model, &ops, &all, budget),
    };
    let outcome = match verdict {
        LinVerdict::Linearizable(order) => certified(&order),
        LinVerdict::Unknown(why) => Decided::Unknown(format!(
            "{why} after {} search steps ({} of {} operations ordered at best)",
            explored.steps,
            explored.deepest,
            ops.len()
        )),
        LinVerdict::NotChecked => Decided::Unknown("not checked".into()),
        LinVerdict::NotLinearizable(d) => {
            let id = |i: usize| placed[i].id;
            let stuck = &placed[d.deadline];
            let mut ops: Vec<usize> = d.candidates.iter().filter_map(|(i, _)| id(*i)).collect();
            ops.extend(id(d.deadline));
            ops.sort_unstable();
            ops.dedup();
            Decided::Fails(Failure {
                detail: format!(
                    "no order of the history satisfies it: after {} operations in order, {} \
                     (which completed first of those left) cannot be placed, nor anything \
                     before it",
                    d.prefix.len(),
                    model.describe_op(&stuck.input, LinOutcome::Known(&())),
                ),
                ops,
                prefix: d.prefix.iter().filter_map(|l| id(l.op)).collect(),
                prefix_states: d
                    .prefix
                    .iter()
                    .filter(|l| id(l.op).is_some())
                    .map(|l| (l.before.clone(), l.after.clone()))
                    .collect(),
                stuck_state: Some(
                    d.prefix
                        .last()
                        .map_or_else(|| model.describe_state(&model.init()), |l| l.after.clone()),
                ),
            })
        }
    };
    Decision {
        outcome,
        steps: explored.steps,
        stuck,
        stuck_session,
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod witness_tests;
