//! A watch event received before the event of an earlier change
//! (`event-order`, docs/CONTRACT.md): found in one pass, with no search.
//!
//! Sound on its own for events whose change is known for certain:
//! - one write of the whole history could make that event (one setData of
//!   the node for NodeDataChanged; one create of it for NodeCreated; one
//!   delete for NodeDeleted, with no create of the node that a session's
//!   close, the container scan or a TTL could delete), and its reply said
//!   it took effect;
//! - the watch was set on the connection that received the event, by a
//!   read answered before that write was called: the server that answered
//!   it held the watch when it applied the write, so it fired the event
//!   itself, as it applied the write. A watch carried over a reconnect is
//!   not enough: the new server's SetWatches fires, at once and in its own
//!   order, the events of every change it has already applied.
//!
//! A server applies writes in the one order and sends a connection's
//! events in the order it fires them. So of two such events on one
//! connection, the one whose write completed before the other's was
//! called comes first; received the other way round, the events are out
//! of order.
//!
//! The search finds the same, but in a long history can run out of budget
//! before it has shown that no order exists (event-reordered seed
//! 3020711936: two-phase-commit votes set one after the other, their
//! events received the other way round).

use std::collections::{BTreeMap, BTreeSet};

use super::{guarantees, Broken, Done, Seen, SessionLog};
use crate::proto::{CreateMode, EventType, MultiOp, Op, Reply};

/// A write that took effect: its history id and when it was called and
/// answered (µs).
#[derive(Clone, Copy)]
struct Write {
    id: usize,
    call_us: u64,
    answered_us: u64,
}

/// An event the session received, with the write that made it.
#[derive(Clone, Copy)]
struct Received<'h> {
    at_us: u64,
    path: &'h str,
    event_type: EventType,
    write: Write,
}

/// The writes that could make each event, over the whole history.
struct Makers<'h> {
    /// Every write of any outcome but a definite error, by the event it
    /// makes: `Some` for one whose reply said it took effect.
    by_event: BTreeMap<(EventType, &'h str), Vec<Option<Write>>>,
    /// Nodes something other than a delete request may remove: created
    /// ephemeral (its session's close), as a container or with a TTL.
    removable: BTreeSet<&'h str>,
    /// The prefixes of sequential creates: such a create, its reply lost,
    /// may have made any node of its prefix and ten digits.
    sequential: BTreeSet<&'h str>,
}

impl<'h> Makers<'h> {
    fn new(logs: &[SessionLog<'h>]) -> Makers<'h> {
        let mut makers = Makers {
            by_event: BTreeMap::new(),
            removable: BTreeSet::new(),
            sequential: BTreeSet::new(),
        };
        for log in logs {
            for seen in &log.seen {
                let Seen::Request {
                    id,
                    op: Some(op),
                    call_us,
                    done,
                } = seen
                else {
                    continue;
                };
                let write = match done {
                    // A definite error: the write (a multi: all of it)
                    // changed nothing.
                    Done::Answered { result: Err(_), .. } => continue,
                    Done::Answered { at_us, .. } => Some(Write {
                        id: *id,
                        call_us: *call_us,
                        answered_us: *at_us,
                    }),
                    Done::Unknown { .. } => None,
                };
                match op {
                    Op::Create { path, mode, .. } => makers.create(path, *mode, write),
                    Op::Delete { path, .. } => makers.add(EventType::NodeDeleted, path, write),
                    Op::SetData { path, .. } => makers.add(EventType::NodeDataChanged, path, write),
                    Op::Multi(ops) => {
                        for o in ops {
                            match o {
                                MultiOp::Create { path, mode, .. } => {
                                    makers.create(path, *mode, write)
                                }
                                MultiOp::Delete { path, .. } => {
                                    makers.add(EventType::NodeDeleted, path, write)
                                }
                                MultiOp::SetData { path, .. } => {
                                    makers.add(EventType::NodeDataChanged, path, write)
                                }
                                MultiOp::Check { .. } => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        makers
    }

    fn add(&mut self, event_type: EventType, path: &'h str, write: Option<Write>) {
        (self.by_event.entry((event_type, path)).or_default()).push(write);
    }

    fn create(&mut self, path: &'h str, mode: CreateMode, write: Option<Write>) {
        if mode.is_sequential() {
            self.sequential.insert(path);
        } else {
            self.add(EventType::NodeCreated, path, write);
        }
        if mode != CreateMode::Persistent && mode != CreateMode::PersistentSequential {
            self.removable.insert(path);
        }
    }

    /// The one write that could have made `event_type` on `path`, if it
    /// is certain and took effect.
    fn only(&self, event_type: EventType, path: &str) -> Option<Write> {
        let numbered = path.len() >= 10
            && path.as_bytes()[path.len() - 10..]
                .iter()
                .all(u8::is_ascii_digit);
        let named = |set: &BTreeSet<&str>| {
            set.contains(path) || (numbered && set.contains(&path[..path.len() - 10]))
        };
        match event_type {
            EventType::NodeDataChanged => {}
            EventType::NodeCreated if !named(&self.sequential) => {}
            EventType::NodeDeleted if !named(&self.sequential) && !named(&self.removable) => {}
            _ => return None,
        }
        match self.by_event.get(&(event_type, path))?.as_slice() {
            [Some(write)] => Some(*write),
            _ => None,
        }
    }
}

/// The watches a read sets: data watches (which NodeDataChanged and
/// NodeDeleted use), exist watches (NodeCreated) and child watches
/// (NodeDeleted too).
fn sets_watch(op: &Op, result: Result<&Reply, crate::proto::ZkError>) -> &'static [EventType] {
    use EventType::{NodeCreated, NodeDataChanged, NodeDeleted};
    match (op, result) {
        (Op::GetData { watch: true, .. }, Ok(_))
        | (Op::Exists { watch: true, .. }, Ok(Reply::Exists(Some(_)))) => {
            &[NodeDataChanged, NodeDeleted]
        }
        (Op::Exists { watch: true, .. }, Ok(Reply::Exists(None))) => &[NodeCreated],
        (Op::GetChildren { watch: true, .. }, Ok(_)) => &[NodeDeleted],
        _ => &[],
    }
}

fn read_path(op: &Op) -> Option<&str> {
    match op {
        Op::GetData { path, .. } | Op::Exists { path, .. } | Op::GetChildren { path, .. } => {
            Some(path)
        }
        _ => None,
    }
}

/// The first event a session received after the event of a later change,
/// on one connection.
pub(super) fn overtaken(logs: &[SessionLog]) -> Option<Broken> {
    let makers = Makers::new(logs);
    for log in logs {
        // On the current connection: when each watch was first set since
        // its last event (µs, the read's answer), and of the events whose
        // write is certain, the one whose write was called last.
        let mut watches: BTreeMap<(EventType, &str), u64> = BTreeMap::new();
        let mut latest: Option<Received> = None;
        for seen in &log.seen {
            match seen {
                Seen::State { .. } => {
                    watches.clear();
                    latest = None;
                }
                Seen::Request {
                    op: Some(op),
                    done: Done::Answered { at_us, result, .. },
                    ..
                } => {
                    let Some(path) = read_path(op) else {
                        continue;
                    };
                    for &kind in sets_watch(op, *result) {
                        watches.entry((kind, path)).or_insert(*at_us);
                    }
                }
                Seen::Event { at_us, event } => {
                    let path = event.path.as_str();
                    let set = watches.remove(&(event.event_type, path));
                    // The other kinds the same watch serves are used up too.
                    watches.retain(|(_, p), _| *p != path);
                    let Some(write) = makers.only(event.event_type, path) else {
                        continue;
                    };
                    if set.is_none_or(|set_us| set_us >= write.call_us) {
                        continue;
                    }
                    let this = Received {
                        at_us: *at_us,
                        path,
                        event_type: event.event_type,
                        write,
                    };
                    match latest {
                        Some(earlier) if write.answered_us < earlier.write.call_us => {
                            return Some(broken(log, earlier, this));
                        }
                        Some(earlier) if earlier.write.call_us >= write.call_us => {}
                        _ => latest = Some(this),
                    }
                }
                _ => {}
            }
        }
    }
    None
}

fn broken(log: &SessionLog, first: Received, second: Received) -> Broken {
    Broken {
        guarantee: guarantees::EVENT_ORDER,
        detail: format!(
            "session {} received {:?} of {} (at {} ms, made by op {}) before {:?} of {} (at {} \
             ms, made by op {}), on one connection whose reads had set both watches; but op {} \
             completed before op {} was called, so its event comes first",
            log.id,
            first.event_type,
            first.path,
            first.at_us / 1_000,
            first.write.id,
            second.event_type,
            second.path,
            second.at_us / 1_000,
            second.write.id,
            second.write.id,
            first.write.id,
        ),
        ops: vec![second.write.id, first.write.id],
        prefix: Vec::new(),
        prefix_states: Vec::new(),
        stuck_state: None,
    }
}
