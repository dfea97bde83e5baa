//! The barrier's oracle. The coordinator raises round r's barrier, later
//! removes it; waiters wait on round r only after it was raised.
//!
//! * **Safety**: nobody passes round r before its removal was asked for.
//! * **Liveness**: in the quiet phase, every wait on a removed barrier ends
//!   within the bound after the removal.

use std::collections::BTreeMap;
use std::fmt;

use super::{Entry, Liveness};

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum BarrierEvent {
    Raised { round: u64 },
    RemoveCalled { round: u64 },
    Removed { round: u64 },
    WaitCalled { round: u64 },
    Passed { round: u64 },
    Lost,
    Crashed,
    Failed { error: String },
}

#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct BarrierReport {
    pub rounds: u64,
    pub passes: u64,
    pub losses: u64,
    pub violations: Vec<String>,
}

impl BarrierReport {
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

pub fn check_barrier(log: &[Entry<BarrierEvent>], liveness: Option<Liveness>) -> BarrierReport {
    let mut r = BarrierReport::default();
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
            _ => {}
        }
    }
    // Per waiter: the round it waits on, since when.
    let mut waiting: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
    let judge = |r: &mut BarrierReport, c: usize, round: u64, since: u64, done: Option<u64>| {
        let (Some(l), Some(&gone)) = (liveness, removed.get(&round)) else {
            return;
        };
        let deadline = since.max(gone).max(l.from_ms) + l.bound_ms;
        let late = match done {
            Some(at) => at > deadline && deadline <= l.end_ms,
            None => deadline <= l.end_ms,
        };
        if late {
            r.violations.push(format!(
                "liveness: client {c} waited on round {round} from {since} ms (removed at \
                 {gone} ms) and passed {}",
                done.map_or("never".to_owned(), |t| format!("at {t} ms"))
            ));
        }
    };
    for e in log {
        let c = e.client;
        match &e.event {
            BarrierEvent::WaitCalled { round } => {
                waiting.insert(c, (*round, e.at_ms));
            }
            BarrierEvent::Passed { round } => {
                r.passes += 1;
                match remove_called.get(round) {
                    Some(&t) if t <= e.at_ms => {}
                    _ => r.violations.push(format!(
                        "client {c} passed round {round} at {} ms before its barrier was removed",
                        e.at_ms
                    )),
                }
                if let Some((w, since)) = waiting.remove(&c) {
                    judge(&mut r, c, w, since, Some(e.at_ms));
                }
            }
            BarrierEvent::Lost | BarrierEvent::Crashed => {
                r.losses += u64::from(e.event == BarrierEvent::Lost);
                waiting.remove(&c);
            }
            BarrierEvent::Failed { error } => r
                .violations
                .push(format!("client {c} failed at {} ms: {error}", e.at_ms)),
            _ => {}
        }
    }
    for (c, (round, since)) in waiting {
        judge(&mut r, c, round, since, None);
    }
    r
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
        let v = check_barrier(&early, quiet).violations.join("\n");
        assert!(v.contains("before its barrier was removed"), "{v}");
        let stuck = log(vec![
            (0, 0, Raised { round: 1 }),
            (5, 1, WaitCalled { round: 1 }),
            (10, 0, RemoveCalled { round: 1 }),
            (12, 0, Removed { round: 1 }),
        ]);
        let v = check_barrier(&stuck, quiet).violations.join("\n");
        assert!(v.contains("passed never"), "{v}");
    }
}
