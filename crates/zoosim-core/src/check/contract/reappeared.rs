//! A node a session saw gone, seen again by that session
//! (`sequential-consistency`, docs/CONTRACT.md): found in one pass, with
//! no search. Sound on its own, for a node only one create could have
//! made ([`Creates::unique`]): such a node exists over one stretch of the
//! one order, so a session whose view has passed its delete can never
//! see it again.
//!
//! A session's view has passed the delete once
//! - its own delete of the node was answered;
//! - one of its reads, after it had seen the node (by its own create or a
//!   read), found it missing: the read's reply zxid carries the server's
//!   state past the delete, and the session never goes back, across
//!   reconnects too;
//! - it received the node's NodeDeleted event, and until the connection
//!   is lost: a server sends the event as it applies the delete, and
//!   answers that connection's later reads in order after it. A
//!   notification does not move the client's lastZxid, so after a
//!   reconnect a server that has not yet applied the delete may answer.
//!
//! The search finds the same, but in a long history can run out of budget
//! before it has shown that no order exists (stale-read seed 3020699650:
//! a session listed a lock node after receiving its NodeDeleted).

use std::collections::{BTreeMap, BTreeSet};

use super::creates::Creates;
use super::{guarantees, Broken, Done, Seen, SessionLog};
use crate::proto::{EventType, MultiOp, Op, Reply, SessionEvent, ZkError};

/// How a session learned a node was gone.
#[derive(Clone, Copy)]
enum Gone {
    /// By this request (its history id): its own delete, or a read.
    Request(usize),
    /// By its NodeDeleted event, at this time (µs), on the connection
    /// still open.
    Event(u64),
}

/// The first read that saw a node its session had already seen gone.
pub(super) fn reappeared(logs: &[SessionLog]) -> Option<Broken> {
    let creates = Creates::new(logs);
    // A parent deleted anywhere may be made again, its sequence counted
    // from 0 again: its sequential children's names are not unique.
    let deleted: BTreeSet<&str> = (logs.iter())
        .flat_map(|log| &log.seen)
        .filter_map(|seen| match seen {
            Seen::Request { op: Some(op), .. } => Some(*op),
            _ => None,
        })
        .flat_map(|op| match op {
            Op::Delete { path, .. } => vec![path.as_str()],
            Op::Multi(ops) => (ops.iter())
                .filter_map(|o| match o {
                    MultiOp::Delete { path, .. } => Some(path.as_str()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        })
        .collect();
    let unique = |node: &str| creates.unique(node, deleted.contains(crate::path::parent(node)));
    for log in logs {
        let mut present: BTreeSet<String> = BTreeSet::new();
        let mut gone: BTreeMap<String, Gone> = BTreeMap::new();
        for seen in &log.seen {
            let (id, op, result) = match seen {
                Seen::Event { at_us, event }
                    if event.event_type == EventType::NodeDeleted && unique(&event.path) =>
                {
                    gone.entry(event.path.clone())
                        .or_insert(Gone::Event(*at_us));
                    continue;
                }
                Seen::State {
                    event: SessionEvent::Disconnected,
                    ..
                } => {
                    gone.retain(|_, how| matches!(how, Gone::Request(_)));
                    continue;
                }
                Seen::Request {
                    id,
                    op: Some(op),
                    done: Done::Answered { result, .. },
                    ..
                } => (*id, *op, result),
                _ => continue,
            };
            // What this reply says exists and what it says does not.
            let mut seen_present: Vec<String> = Vec::new();
            let mut seen_gone: Vec<String> = Vec::new();
            match (op, result) {
                (Op::Create { .. }, Ok(Reply::Create { path, .. })) => {
                    seen_present.push(path.clone())
                }
                (Op::Delete { path, .. }, Ok(_)) => seen_gone.push(path.clone()),
                (Op::Exists { path, .. }, Ok(Reply::Exists(found))) => match found {
                    Some(_) => seen_present.push(path.clone()),
                    None => seen_gone.push(path.clone()),
                },
                (Op::GetData { path, .. }, Ok(Reply::GetData { .. })) => {
                    seen_present.push(path.clone())
                }
                (Op::GetData { path, .. }, Err(ZkError::NoNode)) => seen_gone.push(path.clone()),
                (Op::GetChildren { path, .. }, Ok(Reply::GetChildren { children, .. })) => {
                    let listed: BTreeSet<String> = (children.iter())
                        .map(|name| crate::path::join(path, name))
                        .collect();
                    seen_gone.extend(
                        (present.iter())
                            .filter(|node| {
                                crate::path::parent(node) == path.as_str()
                                    && !listed.contains(*node)
                            })
                            .cloned(),
                    );
                    seen_present.extend(listed);
                }
                _ => {}
            }
            for node in seen_present {
                if !unique(&node) {
                    continue;
                }
                if let Some(&how) = gone.get(&node) {
                    return Some(broken(log, &node, how, id));
                }
                present.insert(node);
            }
            // A read that finds a node missing says it is gone only once
            // the session has seen it exist: before, it may not have been
            // made yet.
            let own_delete = matches!(op, Op::Delete { .. });
            for node in seen_gone {
                if unique(&node) && (own_delete || present.remove(&node)) {
                    gone.entry(node).or_insert(Gone::Request(id));
                }
            }
        }
    }
    None
}

fn broken(log: &SessionLog, node: &str, how: Gone, read: usize) -> Broken {
    let (why, mut ops) = match how {
        Gone::Request(id) => (format!("saw it gone (op {id})"), vec![id]),
        Gone::Event(at_us) => (
            format!(
                "received its NodeDeleted event at {} ms, on the connection that then answered",
                at_us / 1_000
            ),
            Vec::new(),
        ),
    };
    ops.push(read);
    Broken {
        guarantee: guarantees::SEQUENTIAL_CONSISTENCY,
        detail: format!(
            "session {} {why}; its later read (op {read}) saw {node} again, a node only one \
             create could have made, so the read is older than what the session had seen",
            log.id
        ),
        ops,
        prefix: Vec::new(),
        prefix_states: Vec::new(),
        stuck_state: None,
    }
}
