//! The double barrier's oracle, per round (one barrier node per round).
//!
//! * **Enter**: nobody is in before `x` processes asked to enter.
//! * **Leave**: nobody is out before every process that was inside when it
//!   started to leave has asked to leave too — or lost its session inside
//!   the round, which deleted its node (when exactly, a paused process's own
//!   log cannot show). A latecomer that enters after that, through the
//!   `ready` node left behind, is not waited for.
//! * **Liveness**: in the quiet phase every enter and leave ends within the
//!   bound (a round short of `x` live processes is not judged for entry).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::{Entry, Liveness};

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum DoubleBarrierEvent {
    EnterCalled { round: u64 },
    Entered { round: u64 },
    LeaveCalled { round: u64 },
    Left { round: u64 },
    Lost,
    Crashed,
    Failed { error: String },
}

#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct DoubleBarrierReport {
    pub entries: u64,
    pub exits: u64,
    pub losses: u64,
    pub violations: Vec<String>,
}

impl DoubleBarrierReport {
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

pub fn check_double_barrier(
    log: &[Entry<DoubleBarrierEvent>],
    threshold: usize,
    liveness: Option<Liveness>,
) -> DoubleBarrierReport {
    use DoubleBarrierEvent::*;
    let mut r = DoubleBarrierReport::default();
    let mut asked: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
    // Per round: who entered, when.
    let mut entered: BTreeMap<u64, BTreeMap<usize, u64>> = BTreeMap::new();
    // Per (round, client): when it asked to leave.
    let mut leave_called: BTreeMap<(u64, usize), u64> = BTreeMap::new();
    // Per round, the clients that asked to leave or lost their node.
    let mut gone: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
    // Per client: the round it is in (entered, not yet out).
    let mut inside: BTreeMap<usize, u64> = BTreeMap::new();
    let mut pending: BTreeMap<usize, (&'static str, u64)> = BTreeMap::new();
    // Leaves while another was still inside; excused if that one's session
    // was lost in the round (its node went with the session, at a moment
    // its own log cannot show: a paused process learns it late).
    let mut early: Vec<(u64, usize, usize, u64)> = Vec::new();
    let mut lost_inside: BTreeSet<(u64, usize)> = BTreeSet::new();
    let judge =
        |r: &mut DoubleBarrierReport, c: usize, what: &str, since: u64, done: Option<u64>| {
            let Some(l) = liveness else { return };
            let deadline = since.max(l.from_ms) + l.bound_ms;
            let late = match done {
                Some(at) => at > deadline && deadline <= l.end_ms,
                None => deadline <= l.end_ms,
            };
            if late {
                r.violations.push(format!(
                    "liveness: client {c}'s {what} from {since} ms did not end in time ({done:?})"
                ));
            }
        };
    for e in log {
        let c = e.client;
        match &e.event {
            EnterCalled { round } => {
                asked.entry(*round).or_default().insert(c);
                pending.insert(c, ("enter", e.at_ms));
            }
            Entered { round } => {
                r.entries += 1;
                let n = asked.get(round).map_or(0, BTreeSet::len);
                if n < threshold {
                    r.violations.push(format!(
                        "client {c} entered round {round} at {} ms with only {n} of {threshold} \
                         processes there",
                        e.at_ms
                    ));
                }
                entered.entry(*round).or_default().insert(c, e.at_ms);
                inside.insert(c, *round);
                if let Some((w, since)) = pending.remove(&c) {
                    judge(&mut r, c, w, since, Some(e.at_ms));
                }
            }
            LeaveCalled { round } => {
                gone.entry(*round).or_default().insert(c);
                leave_called.insert((*round, c), e.at_ms);
                pending.insert(c, ("leave", e.at_ms));
            }
            Left { round } => {
                r.exits += 1;
                inside.remove(&c);
                // Those inside when this one started to leave must all have
                // asked to leave too (a latecomer entering after that,
                // through the `ready` left behind, is not waited for).
                let out = gone.get(round).cloned().unwrap_or_default();
                let since = leave_called.get(&(*round, c)).copied().unwrap_or(e.at_ms);
                for (other, &at) in entered.get(round).into_iter().flatten() {
                    if at < since && !out.contains(other) {
                        early.push((*round, c, *other, e.at_ms));
                    }
                }
                if let Some((w, since)) = pending.remove(&c) {
                    judge(&mut r, c, w, since, Some(e.at_ms));
                }
            }
            Lost | Crashed => {
                r.losses += u64::from(e.event == Lost);
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
                pending.remove(&c);
            }
            Failed { error } => r
                .violations
                .push(format!("client {c} failed at {} ms: {error}", e.at_ms)),
        }
    }
    for (c, (what, since)) in pending {
        judge(&mut r, c, what, since, None);
    }
    for (round, c, other, at) in early {
        if !lost_inside.contains(&(round, other)) {
            r.violations.push(format!(
                "client {c} left round {round} at {at} ms before client {other} asked to leave"
            ));
        }
    }
    r
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
        let v = check_double_barrier(&bad, 2, None).violations.join("\n");
        assert!(v.contains("with only 1 of 2"), "{v}");
        assert!(v.contains("before client 1 asked to leave"), "{v}");
    }
}
