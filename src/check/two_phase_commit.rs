//! The two-phase commit oracle, per transaction.
//!
//! * **Agreement**: every site that decides, decides the same.
//! * **Validity**: commit only if every site voted commit.
//! * **Liveness**: in the quiet phase every site that voted decides within
//!   the bound, unless a site of the transaction crashed before deciding
//!   (its vote may not have landed, and a site that crashes before its
//!   `alive` node exists cannot be told from a slow one without timers,
//!   which the recipe has none of: classic 2PC blocking).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::{Entry, Liveness};

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum TpcEvent {
    VoteCalled { tx: u64, commit: bool },
    Decided { tx: u64, commit: bool },
    AbortedFor { tx: u64 },
    Lost,
    Crashed,
    Failed { error: String },
}

#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct TpcReport {
    pub commits: u64,
    pub aborts: u64,
    pub aborts_for_failed_sites: u64,
    pub losses: u64,
    pub violations: Vec<String>,
}

impl TpcReport {
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for TpcReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "decisions commit {} / abort {}, aborts written for failed sites {}, sessions lost {}",
            self.commits, self.aborts, self.aborts_for_failed_sites, self.losses
        )?;
        for v in &self.violations {
            writeln!(f, "VIOLATION: {v}")?;
        }
        Ok(())
    }
}

/// `sites`: the clients that are the sites of every transaction.
pub fn check_tpc(
    log: &[Entry<TpcEvent>],
    sites: &[usize],
    liveness: Option<Liveness>,
) -> TpcReport {
    use TpcEvent::*;
    let mut r = TpcReport::default();
    let mut votes: BTreeMap<u64, BTreeMap<usize, bool>> = BTreeMap::new();
    let mut decided: BTreeMap<u64, bool> = BTreeMap::new();
    let mut waiting: BTreeMap<(u64, usize), u64> = BTreeMap::new();
    let mut crashed: BTreeSet<usize> = BTreeSet::new();
    let mut current: BTreeMap<usize, u64> = BTreeMap::new();
    let mut late: Vec<(u64, usize, u64, Option<u64>)> = Vec::new();
    let mut deciders: BTreeSet<(u64, usize)> = BTreeSet::new();
    for e in log {
        let c = e.client;
        match &e.event {
            VoteCalled { tx, commit } => {
                votes.entry(*tx).or_default().insert(c, *commit);
                waiting.insert((*tx, c), e.at_ms);
                current.insert(c, *tx);
            }
            Decided { tx, commit } => {
                deciders.insert((*tx, c));
                if *commit {
                    r.commits += 1;
                } else {
                    r.aborts += 1;
                }
                match decided.get(tx) {
                    Some(d) if d != commit => r.violations.push(format!(
                        "transaction {tx}: client {c} decided {commit} at {} ms, another {d}",
                        e.at_ms
                    )),
                    _ => {
                        decided.insert(*tx, *commit);
                    }
                }
                if *commit {
                    let v = votes.get(tx).cloned().unwrap_or_default();
                    let all = sites.iter().all(|s| v.get(s) == Some(&true));
                    if !all {
                        r.violations.push(format!(
                            "transaction {tx} committed (client {c}) without every site voting \
                             commit: {v:?}"
                        ));
                    }
                }
                if let Some(since) = waiting.remove(&(*tx, c)) {
                    late.push((*tx, c, since, Some(e.at_ms)));
                }
            }
            AbortedFor { .. } => r.aborts_for_failed_sites += 1,
            Lost | Crashed => {
                r.losses += u64::from(e.event == Lost);
                if e.event == Crashed {
                    crashed.insert(c);
                }
                if let Some(tx) = current.remove(&c) {
                    waiting.remove(&(tx, c));
                }
            }
            Failed { error } => r
                .violations
                .push(format!("client {c} failed at {} ms: {error}", e.at_ms)),
        }
    }
    for ((tx, c), since) in waiting {
        late.push((tx, c, since, None));
    }
    if let Some(l) = liveness {
        // A crashed site blocks the transactions it had not decided: its
        // vote may not have landed, and its alive node may never have
        // existed (then no one can tell it failed).
        let blocked = |tx: u64| crashed.iter().any(|s| !deciders.contains(&(tx, *s)));
        for (tx, c, since, done) in late {
            let deadline = since.max(l.from_ms) + l.bound_ms;
            let is_late = match done {
                Some(at) => at > deadline && deadline <= l.end_ms,
                None => deadline <= l.end_ms,
            };
            if is_late && !blocked(tx) {
                r.violations.push(format!(
                    "liveness: client {c} voted in transaction {tx} at {since} ms and decided \
                     {}",
                    done.map_or("never".to_owned(), |t| format!("at {t} ms"))
                ));
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use TpcEvent::*;

    fn log(entries: Vec<(u64, usize, TpcEvent)>) -> Vec<Entry<TpcEvent>> {
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
    fn disagreement_and_invalid_commits_are_caught() {
        let ok = log(vec![
            (
                0,
                1,
                VoteCalled {
                    tx: 1,
                    commit: true,
                },
            ),
            (
                1,
                2,
                VoteCalled {
                    tx: 1,
                    commit: false,
                },
            ),
            (
                2,
                1,
                Decided {
                    tx: 1,
                    commit: false,
                },
            ),
            (
                3,
                2,
                Decided {
                    tx: 1,
                    commit: false,
                },
            ),
        ]);
        assert!(check_tpc(&ok, &[1, 2], None).is_ok());
        let bad = log(vec![
            (
                0,
                1,
                VoteCalled {
                    tx: 1,
                    commit: true,
                },
            ),
            (
                1,
                2,
                VoteCalled {
                    tx: 1,
                    commit: false,
                },
            ),
            (
                2,
                1,
                Decided {
                    tx: 1,
                    commit: true,
                },
            ),
            (
                3,
                2,
                Decided {
                    tx: 1,
                    commit: false,
                },
            ),
        ]);
        let v = check_tpc(&bad, &[1, 2], None).violations.join("\n");
        assert!(v.contains("without every site voting commit"), "{v}");
        assert!(v.contains("another true"), "{v}");
    }
}
