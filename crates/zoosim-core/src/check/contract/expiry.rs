//! Expiry takes effect (docs/CONTRACT.md, `expiry-takes-effect`): once a
//! client is told its session expired, the leader has marked the session
//! closing (or closed it), and sequences its close before whatever it
//! preps next. A leader that loses its quorum first may lose the close;
//! the next leader takes every session over with a fresh full timeout,
//! and the told client never touches its session again, so that leader
//! expires it within a session timeout of taking over. Hence: a write
//! called later than the session timeout (and a few ticks) after both the
//! telling and its own epoch's first reply comes after the close.
//!
//! [`ToldExpired`] turns that into constraints the model places by
//! ([`super::SessionSpec::closes_first`]); [`lingering`] finds, with no
//! search, the plainest history that breaks them: a session that wrote
//! after such a close and then read a node the closed session still owned.

use std::collections::BTreeMap;

use super::creates::Creates;
use super::{asks_for_ephemeral, guarantees, Broken, Done, Rules, Seen, SessionLog};
use crate::proto::{Op, Reply, SessionEvent, Zxid};

/// Expiry takes effect ([`Rules::expiry`]): the sessions whose clients
/// were told they expired, and when each epoch was first seen.
#[derive(Default)]
pub(super) struct ToldExpired {
    /// Each epoch's first reply (by the reply's zxid), when it arrived:
    /// its leader was established, with a fresh timeout for every session
    /// it took over, by then.
    epoch_seen_us: BTreeMap<u32, u64>,
    /// (session index, when its client was told it expired, its bound),
    /// for the sessions whose end the model places.
    told: Vec<(usize, u64, u64)>,
}

impl ToldExpired {
    pub(super) fn new(logs: &[SessionLog<'_>], rules: Rules) -> ToldExpired {
        let mut epoch_seen_us: BTreeMap<u32, u64> = BTreeMap::new();
        let mut told = Vec::new();
        for (i, log) in logs.iter().enumerate() {
            let mut expired_at = None;
            let mut closed_by_reply = false;
            for seen in &log.seen {
                match seen {
                    Seen::Request {
                        op,
                        done:
                            Done::Answered {
                                at_us,
                                zxid: Some(z),
                                ..
                            },
                        ..
                    } => {
                        closed_by_reply |= op.is_none();
                        if *z > 0 {
                            let first = epoch_seen_us.entry((*z >> 32) as u32).or_insert(*at_us);
                            *first = (*first).min(*at_us);
                        }
                    }
                    Seen::Request {
                        op: None,
                        done: Done::Answered { .. },
                        ..
                    } => closed_by_reply = true,
                    Seen::State {
                        at_us,
                        event: SessionEvent::Expired,
                    } => {
                        expired_at.get_or_insert(*at_us);
                    }
                    _ => {}
                }
            }
            // As build() decides whether the session's end is placed.
            let placed_end =
                !closed_by_reply && (rules.events || log.seen.iter().any(asks_for_ephemeral));
            if let (Some(at), Some(bound), true) = (expired_at, log.expiry_bound_us, placed_end) {
                told.push((i, at, bound));
            }
        }
        ToldExpired {
            epoch_seen_us,
            told,
        }
    }

    /// The sessions that must have closed before session `i`'s write
    /// called at `call_us` and answered with `zxid`: those told they
    /// expired more than their bound before the call, in an epoch first
    /// seen more than the bound before it too (its leader expires them,
    /// at the latest, a session timeout after it took over or after their
    /// last touch, and sequences the close before whatever it preps
    /// later).
    pub(super) fn closes_first(&self, i: usize, call_us: u64, zxid: Option<Zxid>) -> Vec<usize> {
        let Some(z) = zxid.filter(|&z| z > 0) else {
            return Vec::new();
        };
        let Some(&epoch_us) = self.epoch_seen_us.get(&((z >> 32) as u32)) else {
            return Vec::new();
        };
        self.told
            .iter()
            .filter(|&&(t, at, bound)| t != i && call_us > at.max(epoch_us).saturating_add(bound))
            .map(|&(t, _, _)| t)
            .collect()
    }
}

/// A session that, after a write that must follow another session's
/// close ([`ToldExpired::closes_first`]), read a node of that session: an
/// `exists` or `getData` whose Stat names it as the ephemeral owner, or a
/// `getChildren` that lists an ephemeral node it created that no other
/// session's create could have made. In every order the read follows the
/// write (its session's order), and the write the close; a closed
/// session owns no node (its close deletes them all, and it creates none
/// after). Sound on its own, so checked without a search; the search
/// finds the same, but can take long to prove that no order exists.
pub(super) fn lingering(logs: &[SessionLog]) -> Option<Broken> {
    let told = ToldExpired::new(logs, Rules::ALL);
    if told.told.is_empty() {
        return None;
    }
    let creates = Creates::new(logs);
    for (i, log) in logs.iter().enumerate() {
        // The sessions closed before this session's steps so far, with
        // the write that says so.
        let mut closed: Vec<(usize, usize)> = Vec::new();
        for seen in &log.seen {
            let Seen::Request {
                id,
                op: Some(op),
                call_us,
                done: Done::Answered { result, zxid, .. },
            } = seen
            else {
                continue;
            };
            if op.is_write() {
                for t in told.closes_first(i, *call_us, *zxid) {
                    if !closed.iter().any(|&(c, _)| c == t) {
                        closed.push((t, *id));
                    }
                }
                continue;
            }
            let (Ok(reply), false) = (result, closed.is_empty()) else {
                continue;
            };
            let found = match (op, reply) {
                (Op::Exists { path, .. }, Reply::Exists(Some(stat)))
                | (Op::GetData { path, .. }, Reply::GetData { stat, .. }) => closed
                    .iter()
                    .find(|&&(t, _)| stat.ephemeral_owner == logs[t].id.0)
                    .map(|&(t, write)| (t, write, path.clone())),
                (Op::GetChildren { path, .. }, Reply::GetChildren { children, .. }) => {
                    children.iter().find_map(|name| {
                        let child = crate::path::join(path, name);
                        let owner = creates.only_owner(&child)?;
                        closed
                            .iter()
                            .find(|&&(t, _)| t == owner)
                            .map(|&(t, write)| (t, write, child))
                    })
                }
                _ => None,
            };
            let Some((t, write, node)) = found else {
                continue;
            };
            let &(_, told_us, bound_us) = told
                .told
                .iter()
                .find(|&&(s, _, _)| s == t)
                .expect("a closed session was told it expired");
            return Some(Broken {
                guarantee: guarantees::EXPIRY_TAKES_EFFECT,
                detail: format!(
                    "session {}'s client was told it expired at {} ms; session {}'s write (op \
                     {write}) was called more than {} ms after that and after its epoch's \
                     first reply, so it comes after the close; yet the session's later read \
                     (op {id}) saw {node}, an ephemeral node of the expired session",
                    logs[t].id,
                    told_us / 1_000,
                    log.id,
                    bound_us / 1_000,
                ),
                ops: vec![write, *id],
                prefix: Vec::new(),
                prefix_states: Vec::new(),
                stuck_state: None,
            });
        }
    }
    None
}
