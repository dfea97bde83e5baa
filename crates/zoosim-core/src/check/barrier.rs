//! The barrier's oracle. The coordinator raises round r's barrier, later
//! removes it; waiters wait on round r only after it was raised. Each
//! property is a constant below, named in every violation of it;
//! [`PROPERTIES`] lists them.
//!
//! * **Safety** (`barrier-safety`): nobody passes round r before its
//!   removal was asked for.
//! * **No recipe failure** (`no-recipe-failure`).
//! * **Liveness** (`liveness`): in the quiet phase, every wait on a removed
//!   barrier ends within the bound after the removal.

use std::collections::BTreeMap;
use std::fmt;

use super::{Entry, Liveness, Moment, Property, Violation};

/// What one barrier client saw or did, as the oracle reads it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum BarrierEvent {
    /// The coordinator raised round `round`'s barrier.
    Raised {
        /// The round whose barrier was raised.
        round: u64,
    },
    /// The coordinator asked to remove round `round`'s barrier.
    RemoveCalled {
        /// The round whose removal was asked for.
        round: u64,
    },
    /// The coordinator's removal of round `round`'s barrier completed.
    Removed {
        /// The round whose barrier was removed.
        round: u64,
    },
    /// A waiter started waiting on round `round`'s barrier.
    WaitCalled {
        /// The round waited on.
        round: u64,
    },
    /// A waiter passed round `round`'s barrier (it saw the barrier gone).
    Passed {
        /// The round passed.
        round: u64,
    },
    /// The client's session ended; it goes on with a new one.
    Lost,
    /// The client process crashed (the nemesis).
    Crashed,
    /// The recipe met an answer it has no way forward from, or refused a command.
    Failed {
        /// The recipe's error, as text.
        error: String,
    },
}

/// What [`check_barrier`] found: counts of what happened, and the violations.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct BarrierReport {
    /// Barrier removals completed (`Removed` events).
    pub rounds: u64,
    /// Waits that passed (`Passed` events).
    pub passes: u64,
    /// Sessions lost (`Lost` events).
    pub losses: u64,
    /// Every property broken, in the order found.
    pub violations: Vec<Violation>,
}

impl BarrierReport {
    /// Whether no property was broken.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for BarrierReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "rounds removed {}, passes {}, sessions lost {}",
            self.rounds, self.passes, self.losses
        )?;
        for v in &self.violations {
            writeln!(f, "VIOLATION: {v}")?;
        }
        Ok(())
    }
}

/// Nobody passes a round before its barrier's removal was asked for.
pub const BARRIER_SAFETY: Property = Property::new(
    "barrier-safety",
    "nobody passes a round before its barrier's removal was asked for",
);
/// In the quiet phase, every wait on a removed barrier ends within the bound after the removal.
pub const LIVENESS: Property = Property::new(
    "liveness",
    "in the quiet phase, every wait on a removed barrier ends within the bound after the removal",
);
pub use super::NO_RECIPE_FAILURE;

/// What this oracle checks, safety first.
pub const PROPERTIES: &[Property] = &[BARRIER_SAFETY, NO_RECIPE_FAILURE, LIVENESS];

/// Judges a barrier run's outcome log against [`PROPERTIES`]; `liveness`, if given,
/// also judges the quiet phase's waits.
pub fn check_barrier(log: &[Entry<BarrierEvent>], liveness: Option<Liveness>) -> BarrierReport {
    let mut r = BarrierReport::default();
    // Per round: when its removal was first asked for, and first done.
    let mut remove_called: BTreeMap<u64, u64> = BTreeMap::new();
    let mut removed: BTreeMap<u64, u64> = BTreeMap::new();
    for e in log {
        match e.event {
            BarrierEvent::RemoveCalled { round } => {
                remove_called.entry(round).or_insert(e.at_ms);
            }
            BarrierEvent::Removed { round } => {
                r.rounds += 1;
                removed.entry(round).or_insert(e.at_ms);
            }
            BarrierEvent::Passed { .. } => r.passes += 1,
            BarrierEvent::Lost => r.losses += 1,
            _ => {}
        }
    }
    // Grouped by property, in the order the one-pass oracle first reported
    // each.
    check_barrier_safety(log, &remove_called, &mut r);
    if let Some(l) = liveness {
        check_liveness(log, &removed, l, &mut r);
    }
    let failures = super::recipe_failures(log, |e| match e {
        BarrierEvent::Failed { error } => Some(error),
        _ => None,
    });
    r.violations.extend(failures);
    r
}

fn check_barrier_safety(
    log: &[Entry<BarrierEvent>],
    remove_called: &BTreeMap<u64, u64>,
    r: &mut BarrierReport,
) {
    for e in log {
        let BarrierEvent::Passed { round } = e.event else {
            continue;
        };
        match remove_called.get(&round) {
            Some(&t) if t <= e.at_ms => {}
            _ => r.violations.push(
                Violation::new(
                    BARRIER_SAFETY,
                    format!(
                        "client {} passed round {round} at {} ms before its barrier was removed",
                        e.client, e.at_ms
                    ),
                )
                .at([e.moment()]),
            ),
        }
    }
}

/// A wait is judged from the later of its start, the barrier's removal and
/// the quiet phase's start; waits on barriers never removed are not.
fn check_liveness(
    log: &[Entry<BarrierEvent>],
    removed: &BTreeMap<u64, u64>,
    l: Liveness,
    r: &mut BarrierReport,
) {
    let mut judge = |c: usize, round: u64, since: u64, done: Option<u64>| {
        let Some(&gone) = removed.get(&round) else {
            return;
        };
        let deadline = since.max(gone).max(l.from_ms) + l.bound_ms;
        if l.missed(deadline, done) {
            r.violations.push(
                Violation::new(
                    LIVENESS,
                    format!(
                    "client {c} waited on round {round} from {since} ms (removed at {gone} ms) \
                     and passed {}",
                    done.map_or("never".to_owned(), |t| format!("at {t} ms"))
                ),
                )
                .at([Moment {
                    client: c,
                    at_ms: since,
                }]),
            );
        }
    };
    // Per waiter: the round it waits on, since when.
    let mut waiting: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
    for e in log {
        let c = e.client;
        match e.event {
            BarrierEvent::WaitCalled { round } => {
                waiting.insert(c, (round, e.at_ms));
            }
            BarrierEvent::Passed { .. } => {
                if let Some((w, since)) = waiting.remove(&c) {
                    judge(c, w, since, Some(e.at_ms));
                }
            }
            BarrierEvent::Lost | BarrierEvent::Crashed => {
                waiting.remove(&c);
            }
            _ => {}
        }
    }
    for (c, (round, since)) in waiting {
        judge(c, round, since, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BarrierEvent::*;

    fn log(entries: Vec<(u64, usize, BarrierEvent)>) -> Vec<Entry<BarrierEvent>> {
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
    fn early_passes_and_stuck_waiters_are_caught() {
        let quiet = Some(Liveness {
            from_ms: 0,
            bound_ms: 100,
            end_ms: 1000,
        });
        let ok = log(vec![
            (0, 0, Raised { round: 1 }),
            (5, 1, WaitCalled { round: 1 }),
            (10, 0, RemoveCalled { round: 1 }),
            (12, 0, Removed { round: 1 }),
            (14, 1, Passed { round: 1 }),
        ]);
        assert!(check_barrier(&ok, quiet).is_ok());
        let early = log(vec![
            (0, 0, Raised { round: 1 }),
            (5, 1, WaitCalled { round: 1 }),
            (6, 1, Passed { round: 1 }),
            (10, 0, RemoveCalled { round: 1 }),
        ]);
        let r = check_barrier(&early, quiet);
        assert_eq!(named(&r), [BARRIER_SAFETY.name], "{r}");
        assert!(r.violations[0]
            .detail
            .contains("before its barrier was removed"));
        let stuck = log(vec![
            (0, 0, Raised { round: 1 }),
            (5, 1, WaitCalled { round: 1 }),
            (10, 0, RemoveCalled { round: 1 }),
            (12, 0, Removed { round: 1 }),
        ]);
        let r = check_barrier(&stuck, quiet);
        assert_eq!(named(&r), [LIVENESS.name], "{r}");
        assert!(r.violations[0].detail.ends_with("passed never"), "{r}");
        // Passed, late: judged from the removal at 12 ms.
        let mut late = stuck.clone();
        late.push(Entry {
            at_ms: 113,
            client: 1,
            event: Passed { round: 1 },
        });
        let r = check_barrier(&late, quiet);
        assert_eq!(named(&r), [LIVENESS.name], "{r}");
        assert!(r.violations[0].detail.ends_with("passed at 113 ms"), "{r}");
        late[4].at_ms = 112;
        assert!(check_barrier(&late, quiet).is_ok());
        // Without a quiet phase, no liveness.
        assert!(check_barrier(&stuck, None).is_ok());
    }

    /// The properties the report names, in its order.
    fn named(r: &BarrierReport) -> Vec<&'static str> {
        r.violations.iter().map(|v| v.property).collect()
    }

    #[test]
    fn properties_are_named_once_each() {
        let names: std::collections::BTreeSet<&str> = PROPERTIES.iter().map(|p| p.name).collect();
        assert_eq!(names.len(), PROPERTIES.len());
    }

    #[test]
    fn a_recipe_failure_is_a_violation() {
        let l = log(vec![
            (0, 0, Raised { round: 1 }),
            (
                5,
                1,
                Failed {
                    error: "NoNode".into(),
                },
            ),
        ]);
        let r = check_barrier(&l, None);
        assert_eq!(named(&r), [NO_RECIPE_FAILURE.name], "{r}");
        assert_eq!(r.violations[0].detail, "client 1 failed at 5 ms: NoNode");
    }
}
