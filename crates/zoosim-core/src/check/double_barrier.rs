//! The double barrier's oracle, per round (one barrier node per round).
//! Each property is a constant below, named in every violation of it;
//! [`PROPERTIES`] lists them.
//!
//! * **Enter** (`enter-safety`): nobody is in before `x` processes asked to
//!   enter.
//! * **Leave** (`leave-safety`): nobody is out before every process that
//!   was inside when it started to leave has asked to leave too — or lost
//!   its session inside the round, which deleted its node (when exactly, a
//!   paused process's own log cannot show). A latecomer that enters after
//!   that, through the `ready` node left behind, is not waited for.
//! * **No recipe failure** (`no-recipe-failure`).
//! * **Liveness** (`liveness`): in the quiet phase every enter and leave
//!   ends within the bound (a round short of `x` live processes is not
//!   judged for entry).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::{Entry, Liveness, Moment, Property, Violation};

/// What one double-barrier client saw or did, as the oracle reads it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum DoubleBarrierEvent {
    /// The client asked to enter round `round`.
    EnterCalled {
        /// The round being entered.
        round: u64,
    },
    /// The client is in round `round` (its enter returned).
    Entered {
        /// The round entered.
        round: u64,
    },
    /// The client asked to leave round `round`.
    LeaveCalled {
        /// The round being left.
        round: u64,
    },
    /// The client is out of round `round` (its leave returned).
    Left {
        /// The round left.
        round: u64,
    },
    /// The client's session ended (its node in the round is gone); it goes on with a new one.
    Lost,
    /// The client process crashed (the nemesis).
    Crashed,
    /// The recipe met an answer it has no way forward from, or refused a command.
    Failed {
        /// The recipe's error, as text.
        error: String,
    },
}

/// What [`check_double_barrier`] found: counts of what happened, and the violations.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct DoubleBarrierReport {
    /// Enters that returned (`Entered` events).
    pub entries: u64,
    /// Leaves that returned (`Left` events).
    pub exits: u64,
    /// Sessions lost (`Lost` events).
    pub losses: u64,
    /// Every property broken, in the order found.
    pub violations: Vec<Violation>,
}

impl DoubleBarrierReport {
    /// Whether no property was broken.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for DoubleBarrierReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "entries {}, exits {}, sessions lost {}",
            self.entries, self.exits, self.losses
        )?;
        for v in &self.violations {
            writeln!(f, "VIOLATION: {v}")?;
        }
        Ok(())
    }
}

/// Nobody is in a round before `x` processes asked to enter it.
pub const ENTER_SAFETY: Property = Property::new(
    "enter-safety",
    "nobody is in a round before x processes asked to enter it",
);
/// Nobody is out of a round before everyone inside when it started to leave asked to
/// leave too, or lost its session there.
pub const LEAVE_SAFETY: Property = Property::new(
    "leave-safety",
    "nobody is out of a round before everyone inside when it started to leave asked to leave \
     too, or lost its session there",
);
/// In the quiet phase, every enter and leave ends within the bound.
pub const LIVENESS: Property = Property::new(
    "liveness",
    "in the quiet phase, every enter and leave ends within the bound",
);
pub use super::NO_RECIPE_FAILURE;

/// What this oracle checks, safety first.
pub const PROPERTIES: &[Property] = &[ENTER_SAFETY, LEAVE_SAFETY, NO_RECIPE_FAILURE, LIVENESS];

/// Judges a double-barrier run's outcome log against [`PROPERTIES`]; `threshold` is
/// the barrier's `x` (processes needed to enter), `liveness`, if given, also judges
/// the quiet phase.
pub fn check_double_barrier(
    log: &[Entry<DoubleBarrierEvent>],
    threshold: usize,
    liveness: Option<Liveness>,
) -> DoubleBarrierReport {
    use DoubleBarrierEvent::*;
    let mut r = DoubleBarrierReport::default();
    for e in log {
        match e.event {
            Entered { .. } => r.entries += 1,
            Left { .. } => r.exits += 1,
            Lost => r.losses += 1,
            _ => {}
        }
    }
    // Grouped by property, in the order the one-pass oracle first reported
    // each.
    check_enter_safety(log, threshold, &mut r);
    if let Some(l) = liveness {
        check_liveness(log, l, &mut r);
    }
    let failures = super::recipe_failures(log, |e| match e {
        Failed { error } => Some(error),
        _ => None,
    });
    r.violations.extend(failures);
    check_leave_safety(log, &mut r);
    r
}

fn check_enter_safety(
    log: &[Entry<DoubleBarrierEvent>],
    threshold: usize,
    r: &mut DoubleBarrierReport,
) {
    use DoubleBarrierEvent::*;
    // Per round: who had asked to enter so far.
    let mut asked: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
    for e in log {
        match e.event {
            EnterCalled { round } => {
                asked.entry(round).or_default().insert(e.client);
            }
            Entered { round } => {
                let n = asked.get(&round).map_or(0, BTreeSet::len);
                if n < threshold {
                    r.violations.push(
                        Violation::new(
                            ENTER_SAFETY,
                            format!(
                                "client {} entered round {round} at {} ms with only {n} of \
                             {threshold} processes there",
                                e.client, e.at_ms
                            ),
                        )
                        .at([e.moment()]),
                    );
                }
            }
            _ => {}
        }
    }
}

fn check_leave_safety(log: &[Entry<DoubleBarrierEvent>], r: &mut DoubleBarrierReport) {
    use DoubleBarrierEvent::*;
    let mut asked: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
    // Per round: who entered, when.
    let mut entered: BTreeMap<u64, BTreeMap<usize, u64>> = BTreeMap::new();
    // Per (round, client): when it asked to leave.
    let mut leave_called: BTreeMap<(u64, usize), u64> = BTreeMap::new();
    // Per round, the clients that asked to leave or lost their node.
    let mut gone: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
    // Per client: the round it is in (entered, not yet out).
    let mut inside: BTreeMap<usize, u64> = BTreeMap::new();
    // Leaves while another was still inside; excused if that one's session
    // was lost in the round (its node went with the session, at a moment
    // its own log cannot show: a paused process learns it late).
    let mut early: Vec<(u64, usize, usize, u64)> = Vec::new();
    let mut lost_inside: BTreeSet<(u64, usize)> = BTreeSet::new();
    for e in log {
        let c = e.client;
        match e.event {
            EnterCalled { round } => {
                asked.entry(round).or_default().insert(c);
            }
            Entered { round } => {
                entered.entry(round).or_default().insert(c, e.at_ms);
                inside.insert(c, round);
            }
            LeaveCalled { round } => {
                gone.entry(round).or_default().insert(c);
                leave_called.insert((round, c), e.at_ms);
            }
            Left { round } => {
                inside.remove(&c);
                // Those inside when this one started to leave must all have
                // asked to leave too (a latecomer entering after that,
                // through the `ready` left behind, is not waited for).
                let out = gone.get(&round).cloned().unwrap_or_default();
                let since = leave_called.get(&(round, c)).copied().unwrap_or(e.at_ms);
                for (other, &at) in entered.get(&round).into_iter().flatten() {
                    if at < since && !out.contains(other) {
                        early.push((round, c, *other, e.at_ms));
                    }
                }
            }
            Lost | Crashed => {
                if let Some(round) = inside.remove(&c) {
                    gone.entry(round).or_default().insert(c);
                    lost_inside.insert((round, c));
                }
                // An enter in flight may have made a node that is gone now.
                for (round, who) in &asked {
                    if who.contains(&c) {
                        gone.entry(*round).or_default().insert(c);
                    }
                }
            }
            Failed { .. } => {}
        }
    }
    for (round, c, other, at) in early {
        if !lost_inside.contains(&(round, other)) {
            r.violations.push(
                Violation::new(
                    LEAVE_SAFETY,
                    format!(
                        "client {c} left round {round} at {at} ms before client {other} asked to \
                     leave"
                    ),
                )
                .at([Moment {
                    client: c,
                    at_ms: at,
                }]),
            );
        }
    }
}

/// Every enter and leave ends within the bound of the quiet phase; a
/// session loss or crash ends the wait unjudged.
fn check_liveness(log: &[Entry<DoubleBarrierEvent>], l: Liveness, r: &mut DoubleBarrierReport) {
    use DoubleBarrierEvent::*;
    let mut judge = |c: usize, what: &str, since: u64, done: Option<u64>| {
        let deadline = since.max(l.from_ms) + l.bound_ms;
        if l.missed(deadline, done) {
            r.violations.push(
                Violation::new(
                    LIVENESS,
                    format!("client {c}'s {what} from {since} ms did not end in time ({done:?})"),
                )
                .at([Moment {
                    client: c,
                    at_ms: since,
                }]),
            );
        }
    };
    // Per client: what it is waiting for, since when.
    let mut pending: BTreeMap<usize, (&'static str, u64)> = BTreeMap::new();
    for e in log {
        let c = e.client;
        match e.event {
            EnterCalled { .. } => {
                pending.insert(c, ("enter", e.at_ms));
            }
            LeaveCalled { .. } => {
                pending.insert(c, ("leave", e.at_ms));
            }
            Entered { .. } | Left { .. } => {
                if let Some((what, since)) = pending.remove(&c) {
                    judge(c, what, since, Some(e.at_ms));
                }
            }
            Lost | Crashed => {
                pending.remove(&c);
            }
            Failed { .. } => {}
        }
    }
    for (c, (what, since)) in pending {
        judge(c, what, since, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DoubleBarrierEvent::*;

    fn log(entries: Vec<(u64, usize, DoubleBarrierEvent)>) -> Vec<Entry<DoubleBarrierEvent>> {
        entries
            .into_iter()
            .map(|(at_ms, client, event)| Entry {
                at_ms,
                client,
                event,
            })
            .collect()
    }

    #[test]
    fn early_entry_and_early_exit_are_caught() {
        let ok = log(vec![
            (0, 0, EnterCalled { round: 1 }),
            (1, 1, EnterCalled { round: 1 }),
            (2, 0, Entered { round: 1 }),
            (2, 1, Entered { round: 1 }),
            (3, 0, LeaveCalled { round: 1 }),
            (4, 1, LeaveCalled { round: 1 }),
            (5, 0, Left { round: 1 }),
            (5, 1, Left { round: 1 }),
        ]);
        assert!(check_double_barrier(&ok, 2, None).is_ok());
        let bad = log(vec![
            (0, 0, EnterCalled { round: 1 }),
            (1, 0, Entered { round: 1 }),
            (2, 1, EnterCalled { round: 1 }),
            (3, 1, Entered { round: 1 }),
            (4, 0, LeaveCalled { round: 1 }),
            (5, 0, Left { round: 1 }),
        ]);
        let r = check_double_barrier(&bad, 2, None);
        assert_eq!(named(&r), [ENTER_SAFETY.name, LEAVE_SAFETY.name], "{r}");
        assert!(r.violations[0].detail.contains("with only 1 of 2"), "{r}");
        assert!(
            r.violations[1]
                .detail
                .contains("before client 1 asked to leave"),
            "{r}"
        );
    }

    /// The properties the report names, in its order.
    fn named(r: &DoubleBarrierReport) -> Vec<&'static str> {
        r.violations.iter().map(|v| v.property).collect()
    }

    #[test]
    fn properties_are_named_once_each() {
        let names: BTreeSet<&str> = PROPERTIES.iter().map(|p| p.name).collect();
        assert_eq!(names.len(), PROPERTIES.len());
    }

    #[test]
    fn an_early_leave_is_excused_only_by_a_session_lost_inside() {
        let early = vec![
            (0, 0, EnterCalled { round: 1 }),
            (1, 1, EnterCalled { round: 1 }),
            (2, 0, Entered { round: 1 }),
            (2, 1, Entered { round: 1 }),
            (3, 0, LeaveCalled { round: 1 }),
            (4, 0, Left { round: 1 }),
        ];
        let r = check_double_barrier(&log(early.clone()), 2, None);
        assert_eq!(named(&r), [LEAVE_SAFETY.name], "{r}");
        assert_eq!(
            r.violations[0].detail,
            "client 0 left round 1 at 4 ms before client 1 asked to leave"
        );
        // Client 1's session was lost inside the round (learnt late): its
        // node was gone.
        let mut lost = early;
        lost.push((9, 1, Lost));
        let r = check_double_barrier(&log(lost), 2, None);
        assert!(r.is_ok(), "{r}");
        assert_eq!((r.entries, r.exits, r.losses), (2, 1, 1));
    }

    #[test]
    fn late_or_never_ending_waits_and_failures_are_caught() {
        let quiet = Some(Liveness {
            from_ms: 100,
            bound_ms: 50,
            end_ms: 500,
        });
        // Client 1 enters late (bound from the quiet phase's 100 ms: 150),
        // client 0 never leaves, client 2's recipe fails.
        let l = log(vec![
            (0, 0, EnterCalled { round: 1 }),
            (10, 1, EnterCalled { round: 1 }),
            (120, 0, Entered { round: 1 }),
            (160, 1, Entered { round: 1 }),
            (170, 0, LeaveCalled { round: 1 }),
            (180, 1, LeaveCalled { round: 1 }),
            (190, 1, Left { round: 1 }),
            (
                200,
                2,
                Failed {
                    error: "NoNode".into(),
                },
            ),
        ]);
        let r = check_double_barrier(&l, 2, quiet);
        assert_eq!(
            named(&r),
            [LIVENESS.name, LIVENESS.name, NO_RECIPE_FAILURE.name],
            "{r}"
        );
        let v: Vec<&str> = r.violations.iter().map(|v| v.detail.as_str()).collect();
        assert_eq!(
            v[0],
            "client 1's enter from 10 ms did not end in time (Some(160))"
        );
        assert_eq!(
            v[1],
            "client 0's leave from 170 ms did not end in time (None)"
        );
        assert_eq!(v[2], "client 2 failed at 200 ms: NoNode");
        // Without a quiet phase, only the failure.
        let r = check_double_barrier(&l, 2, None);
        assert_eq!(named(&r), [NO_RECIPE_FAILURE.name], "{r}");
    }
}
