//! The two-phase commit oracle, per transaction. Each property is a
//! constant below, named in every violation of it; [`PROPERTIES`] lists
//! them.
//!
//! * **Agreement** (`agreement`): every site that decides, decides the
//!   same.
//! * **Validity** (`validity`): commit only if every site voted commit.
//! * **No recipe failure** (`no-recipe-failure`).
//! * **Liveness** (`liveness`): in the quiet phase every site that voted
//!   decides within the bound, unless a site of the transaction crashed
//!   before deciding (its vote may not have landed, and a site that crashes
//!   before its `alive` node exists cannot be told from a slow one without
//!   timers, which the recipe has none of: classic 2PC blocking).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::{Entry, Liveness, Moment, Property, Violation};

/// What one two-phase-commit site saw or did, as the oracle reads it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum TpcEvent {
    /// The site voted on transaction `tx`.
    VoteCalled {
        /// The transaction.
        tx: u64,
        /// The vote: true for commit, false for abort.
        commit: bool,
    },
    /// The site learned transaction `tx`'s outcome.
    Decided {
        /// The transaction.
        tx: u64,
        /// The outcome: true for commit, false for abort.
        commit: bool,
    },
    /// The site wrote "abort" for another site of `tx` whose session ended before it voted.
    AbortedFor {
        /// The transaction.
        tx: u64,
    },
    /// The site's session ended; it goes on with a new one.
    Lost,
    /// The site's process crashed (the nemesis).
    Crashed,
    /// The recipe met an answer it has no way forward from, or refused a command.
    Failed {
        /// The recipe's error, as text.
        error: String,
    },
}

/// What [`check_tpc`] found: counts of what happened, and the violations.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct TpcReport {
    /// Commit decisions a site learned.
    pub commits: u64,
    /// Abort decisions a site learned.
    pub aborts: u64,
    /// Abort votes written for failed sites (`AbortedFor` events).
    pub aborts_for_failed_sites: u64,
    /// Sessions lost (`Lost` events).
    pub losses: u64,
    /// Every property broken, in the order found.
    pub violations: Vec<Violation>,
}

impl TpcReport {
    /// Whether no property was broken.
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

/// Every site that decides a transaction decides the same.
pub const AGREEMENT: Property = Property::new(
    "agreement",
    "every site that decides a transaction decides the same",
);
/// A transaction commits only if every site voted commit.
pub const VALIDITY: Property = Property::new(
    "validity",
    "a transaction commits only if every site voted commit",
);
/// In the quiet phase every site that voted decides within the bound, unless a site
/// of the transaction crashed before deciding.
pub const LIVENESS: Property = Property::new(
    "liveness",
    "in the quiet phase every site that voted decides within the bound, unless a site of the \
     transaction crashed before deciding",
);
pub use super::NO_RECIPE_FAILURE;

/// What this oracle checks, safety first.
pub const PROPERTIES: &[Property] = &[AGREEMENT, VALIDITY, NO_RECIPE_FAILURE, LIVENESS];

/// `sites`: the clients that are the sites of every transaction.
pub fn check_tpc(
    log: &[Entry<TpcEvent>],
    sites: &[usize],
    liveness: Option<Liveness>,
) -> TpcReport {
    use TpcEvent::*;
    let mut r = TpcReport::default();
    for e in log {
        match e.event {
            Decided { commit: true, .. } => r.commits += 1,
            Decided { commit: false, .. } => r.aborts += 1,
            AbortedFor { .. } => r.aborts_for_failed_sites += 1,
            Lost => r.losses += 1,
            _ => {}
        }
    }
    // Grouped by property, in the order the one-pass oracle first reported
    // each.
    check_agreement(log, &mut r);
    check_validity(log, sites, &mut r);
    let failures = super::recipe_failures(log, |e| match e {
        Failed { error } => Some(error),
        _ => None,
    });
    r.violations.extend(failures);
    if let Some(l) = liveness {
        check_liveness(log, l, &mut r);
    }
    r
}

fn check_agreement(log: &[Entry<TpcEvent>], r: &mut TpcReport) {
    // Per transaction: the first decision.
    let mut decided: BTreeMap<u64, bool> = BTreeMap::new();
    for e in log {
        let TpcEvent::Decided { tx, commit } = e.event else {
            continue;
        };
        match decided.get(&tx) {
            Some(&d) if d != commit => r.violations.push(
                Violation::new(
                    AGREEMENT,
                    format!(
                        "transaction {tx}: client {} decided {commit} at {} ms, another {d}",
                        e.client, e.at_ms
                    ),
                )
                .at([e.moment()]),
            ),
            _ => {
                decided.insert(tx, commit);
            }
        }
    }
}

fn check_validity(log: &[Entry<TpcEvent>], sites: &[usize], r: &mut TpcReport) {
    // Per transaction: the votes cast so far (a commit is judged by the
    // votes before it).
    let mut votes: BTreeMap<u64, BTreeMap<usize, bool>> = BTreeMap::new();
    for e in log {
        match e.event {
            TpcEvent::VoteCalled { tx, commit } => {
                votes.entry(tx).or_default().insert(e.client, commit);
            }
            TpcEvent::Decided { tx, commit: true } => {
                let v = votes.get(&tx).cloned().unwrap_or_default();
                let all = sites.iter().all(|s| v.get(s) == Some(&true));
                if !all {
                    r.violations.push(
                        Violation::new(
                            VALIDITY,
                            format!(
                                "transaction {tx} committed (client {}) without every site voting \
                             commit: {v:?}",
                                e.client
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

fn check_liveness(log: &[Entry<TpcEvent>], l: Liveness, r: &mut TpcReport) {
    use TpcEvent::*;
    // Per (transaction, site): since when it waits for the decision.
    let mut waiting: BTreeMap<(u64, usize), u64> = BTreeMap::new();
    // Per site: the transaction it last voted in.
    let mut current: BTreeMap<usize, u64> = BTreeMap::new();
    let mut crashed: BTreeSet<usize> = BTreeSet::new();
    let mut deciders: BTreeSet<(u64, usize)> = BTreeSet::new();
    // Every wait: transaction, site, since, decided when.
    let mut waits: Vec<(u64, usize, u64, Option<u64>)> = Vec::new();
    for e in log {
        let c = e.client;
        match e.event {
            VoteCalled { tx, .. } => {
                waiting.insert((tx, c), e.at_ms);
                current.insert(c, tx);
            }
            Decided { tx, .. } => {
                deciders.insert((tx, c));
                if let Some(since) = waiting.remove(&(tx, c)) {
                    waits.push((tx, c, since, Some(e.at_ms)));
                }
            }
            Lost | Crashed => {
                if e.event == Crashed {
                    crashed.insert(c);
                }
                if let Some(tx) = current.remove(&c) {
                    waiting.remove(&(tx, c));
                }
            }
            AbortedFor { .. } | Failed { .. } => {}
        }
    }
    for ((tx, c), since) in waiting {
        waits.push((tx, c, since, None));
    }
    // A crashed site blocks the transactions it had not decided: its vote
    // may not have landed, and its alive node may never have existed (then
    // no one can tell it failed).
    let blocked = |tx: u64| crashed.iter().any(|s| !deciders.contains(&(tx, *s)));
    for (tx, c, since, done) in waits {
        let deadline = since.max(l.from_ms) + l.bound_ms;
        if l.missed(deadline, done) && !blocked(tx) {
            r.violations.push(
                Violation::new(
                    LIVENESS,
                    format!(
                        "client {c} voted in transaction {tx} at {since} ms and decided {}",
                        done.map_or("never".to_owned(), |t| format!("at {t} ms"))
                    ),
                )
                .at([Moment {
                    client: c,
                    at_ms: since,
                }]),
            );
        }
    }
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
        let r = check_tpc(&bad, &[1, 2], None);
        assert_eq!(named(&r), [AGREEMENT.name, VALIDITY.name], "{r}");
        assert!(r.violations[0].detail.contains("another true"), "{r}");
        assert!(
            r.violations[1]
                .detail
                .contains("without every site voting commit"),
            "{r}"
        );
    }

    /// The properties the report names, in its order.
    fn named(r: &TpcReport) -> Vec<&'static str> {
        r.violations.iter().map(|v| v.property).collect()
    }

    fn vote(at: u64, site: usize, commit: bool) -> Entry<TpcEvent> {
        Entry {
            at_ms: at,
            client: site,
            event: VoteCalled { tx: 1, commit },
        }
    }

    fn decide(at: u64, site: usize, commit: bool) -> Entry<TpcEvent> {
        Entry {
            at_ms: at,
            client: site,
            event: Decided { tx: 1, commit },
        }
    }

    #[test]
    fn properties_are_named_once_each() {
        let names: BTreeSet<&str> = PROPERTIES.iter().map(|p| p.name).collect();
        assert_eq!(names.len(), PROPERTIES.len());
    }

    #[test]
    fn a_commit_before_every_commit_vote_is_invalid_even_if_all_agree() {
        // Site 2's commit vote comes after site 1 committed.
        let l = vec![
            vote(0, 1, true),
            decide(1, 1, true),
            vote(2, 2, true),
            decide(3, 2, true),
        ];
        let r = check_tpc(&l, &[1, 2], None);
        assert_eq!(named(&r), [VALIDITY.name], "{r}");
        assert!(r.violations[0].detail.contains("(client 1)"), "{r}");
    }

    #[test]
    fn an_undecided_vote_is_caught_unless_a_site_crashed_undecided() {
        let quiet = Some(Liveness {
            from_ms: 100,
            bound_ms: 50,
            end_ms: 500,
        });
        let stuck = vec![vote(0, 1, true), vote(10, 2, true), decide(120, 1, true)];
        let r = check_tpc(&stuck, &[1, 2], quiet);
        assert_eq!(named(&r), [LIVENESS.name], "{r}");
        assert_eq!(
            r.violations[0].detail,
            "client 2 voted in transaction 1 at 10 ms and decided never"
        );
        // Decided, late.
        let mut late = stuck.clone();
        late.push(decide(160, 2, true));
        let r = check_tpc(&late, &[1, 2], quiet);
        assert_eq!(named(&r), [LIVENESS.name], "{r}");
        assert!(r.violations[0].detail.ends_with("decided at 160 ms"), "{r}");
        // Site 3 crashed before it voted: the others cannot know it will
        // not, and block (classic 2PC), which is not judged.
        let waiting = vec![vote(0, 1, true), vote(10, 2, true)];
        let r = check_tpc(&waiting, &[1, 2, 3], quiet);
        assert_eq!(named(&r), [LIVENESS.name, LIVENESS.name], "{r}");
        let mut blocked = waiting;
        blocked.push(Entry {
            at_ms: 20,
            client: 3,
            event: Crashed,
        });
        assert!(check_tpc(&blocked, &[1, 2, 3], quiet).is_ok());
        // Without a quiet phase, no liveness.
        assert!(check_tpc(&stuck, &[1, 2], None).is_ok());
    }

    #[test]
    fn a_recipe_failure_is_a_violation() {
        let l = vec![
            vote(0, 1, false),
            Entry {
                at_ms: 4,
                client: 2,
                event: Failed {
                    error: "BadVersion".into(),
                },
            },
        ];
        let r = check_tpc(&l, &[1, 2], None);
        assert_eq!(named(&r), [NO_RECIPE_FAILURE.name], "{r}");
        assert_eq!(
            r.violations[0].detail,
            "client 2 failed at 4 ms: BadVersion"
        );
    }
}
