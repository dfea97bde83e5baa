//! The configuration recipe's oracle. The workload's node holds a counter
//! that every update raises by one with a compare-and-set, starting at "0"
//! in version 0; so every read must show count == version — a lost update
//! (two writers both succeeding from one version) breaks it at once. Each
//! property is a constant below, named in every violation of it;
//! [`PROPERTIES`] lists them.
//!
//! * **No lost update** (`no-lost-update`): every value read has count ==
//!   version.
//! * **Monotonic reads** (`monotonic-reads`): within one session, versions
//!   read never go back.
//! * **Set means set** (`set-means-set`): a `Set` names the version after
//!   the expected one.
//! * **No recipe failure** (`no-recipe-failure`).
//! * **Convergence** (`convergence`): after the quiet phase every live
//!   follower's last read is the node's final version.

use std::collections::BTreeMap;
use std::fmt;

use super::{Entry, Property, Violation};

/// What one configuration client saw or did, as the oracle reads it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum ConfigEvent {
    /// The client started a new session (monotonic reads are judged per session).
    SessionStarted,
    /// The client read the node: its version and the counter it holds.
    Value {
        /// The node's version read.
        version: i32,
        /// The counter the node's data held.
        count: i64,
    },
    /// The client read the node and found it missing.
    Missing,
    /// The client asked to set the node, expecting version `expected_version`.
    SetCalled {
        /// The version the compare-and-set expects the node to have.
        expected_version: i32,
    },
    /// The client's set succeeded; the node is now at `version`.
    Set {
        /// The node's version after the set.
        version: i32,
    },
    /// The client's set failed: the node's version was not the expected one.
    Conflict,
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

/// What [`check_config`] found: counts of what happened, and the violations.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct ConfigReport {
    /// Values read (`Value` events).
    pub reads: u64,
    /// Sets that succeeded (`Set` events).
    pub sets: u64,
    /// Sets refused for a version mismatch (`Conflict` events).
    pub conflicts: u64,
    /// Sessions lost (`Lost` events).
    pub losses: u64,
    /// Every property broken, in the order found.
    pub violations: Vec<Violation>,
}

impl ConfigReport {
    /// Whether no property was broken.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for ConfigReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "reads {}, sets {}, conflicts {}, sessions lost {}",
            self.reads, self.sets, self.conflicts, self.losses
        )?;
        for v in &self.violations {
            writeln!(f, "VIOLATION: {v}")?;
        }
        Ok(())
    }
}

/// Every value read has count == version: no update was lost.
pub const NO_LOST_UPDATE: Property = Property::new(
    "no-lost-update",
    "every value read has count == version (each update raised both by one)",
);
/// Within one session, the versions read never go back.
pub const MONOTONIC_READS: Property = Property::new(
    "monotonic-reads",
    "within one session, the versions read never go back",
);
/// A successful set names the version right after the one it expected.
pub const SET_MEANS_SET: Property = Property::new(
    "set-means-set",
    "a successful set names the version right after the one it expected",
);
pub use super::CONVERGENCE;
pub use super::NO_RECIPE_FAILURE;

/// What this oracle checks, safety first.
pub const PROPERTIES: &[Property] = &[
    NO_LOST_UPDATE,
    MONOTONIC_READS,
    SET_MEANS_SET,
    NO_RECIPE_FAILURE,
    CONVERGENCE,
];

/// `final_version`: the node's version at the end; `live`: the clients
/// whose session was alive at the end (they must have converged).
pub fn check_config(
    log: &[Entry<ConfigEvent>],
    final_version: i32,
    live: &[usize],
) -> ConfigReport {
    let mut r = ConfigReport::default();
    for e in log {
        match e.event {
            ConfigEvent::Value { .. } => r.reads += 1,
            ConfigEvent::Set { .. } => r.sets += 1,
            ConfigEvent::Conflict => r.conflicts += 1,
            ConfigEvent::Lost => r.losses += 1,
            _ => {}
        }
    }
    // Grouped by property, in the order the one-pass oracle first reported
    // each.
    check_no_lost_update(log, &mut r);
    check_monotonic_reads(log, &mut r);
    check_set_means_set(log, &mut r);
    let failures = super::recipe_failures(log, |e| match e {
        ConfigEvent::Failed { error } => Some(error),
        _ => None,
    });
    r.violations.extend(failures);
    check_convergence(log, final_version, live, &mut r);
    r
}

fn check_no_lost_update(log: &[Entry<ConfigEvent>], r: &mut ConfigReport) {
    for e in log {
        if let ConfigEvent::Value { version, count } = e.event {
            if i64::from(version) != count {
                r.violations.push(
                    Violation::new(
                        NO_LOST_UPDATE,
                        format!(
                            "client {} read count {count} in version {version} at {} ms: an \
                         update was lost",
                            e.client, e.at_ms
                        ),
                    )
                    .at([e.moment()]),
                );
            }
        }
    }
}

/// Walks the reads, calling `each(entry, version, previous)` with the
/// version the same session read before (none in a new session, or after a
/// loss or crash); returns each client's last read in its current session.
fn session_reads<'a>(
    log: &'a [Entry<ConfigEvent>],
    mut each: impl FnMut(&'a Entry<ConfigEvent>, i32, Option<i32>),
) -> BTreeMap<usize, i32> {
    let mut last: BTreeMap<usize, i32> = BTreeMap::new();
    for e in log {
        match e.event {
            ConfigEvent::SessionStarted | ConfigEvent::Lost | ConfigEvent::Crashed => {
                last.remove(&e.client);
            }
            ConfigEvent::Value { version, .. } => {
                each(e, version, last.insert(e.client, version));
            }
            _ => {}
        }
    }
    last
}

fn check_monotonic_reads(log: &[Entry<ConfigEvent>], r: &mut ConfigReport) {
    session_reads(log, |e, version, prev| {
        if let Some(prev) = prev.filter(|&p| version < p) {
            r.violations.push(
                Violation::new(
                    MONOTONIC_READS,
                    format!(
                        "client {} read version {version} after {prev} in one session (at {} ms)",
                        e.client, e.at_ms
                    ),
                )
                .at([e.moment()]),
            );
        }
    });
}

fn check_set_means_set(log: &[Entry<ConfigEvent>], r: &mut ConfigReport) {
    // Per client: the version its set in flight expects.
    let mut expected: BTreeMap<usize, i32> = BTreeMap::new();
    for e in log {
        let c = e.client;
        match e.event {
            ConfigEvent::SetCalled { expected_version } => {
                expected.insert(c, expected_version);
            }
            ConfigEvent::Set { version } => {
                if let Some(x) = expected.remove(&c) {
                    if version != x + 1 {
                        r.violations.push(Violation::new(
                            SET_MEANS_SET,
                            format!("client {c}'s set from version {x} reported version {version}"),
                        ));
                    }
                }
            }
            ConfigEvent::Conflict => {
                expected.remove(&c);
            }
            _ => {}
        }
    }
}

fn check_convergence(
    log: &[Entry<ConfigEvent>],
    final_version: i32,
    live: &[usize],
    r: &mut ConfigReport,
) {
    let last = session_reads(log, |_, _, _| {});
    for c in live {
        match last.get(c) {
            Some(&v) if v == final_version => {}
            seen => r.violations.push(Violation::new(
                CONVERGENCE,
                format!(
                    "client {c} did not converge: last read {seen:?}, final version \
                     {final_version}"
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConfigEvent::*;

    fn log(entries: Vec<(usize, ConfigEvent)>) -> Vec<Entry<ConfigEvent>> {
        entries
            .into_iter()
            .enumerate()
            .map(|(i, (client, event))| Entry {
                at_ms: i as u64,
                client,
                event,
            })
            .collect()
    }

    #[test]
    fn a_clean_run_passes_and_each_rule_bites() {
        let ok = log(vec![
            (
                0,
                Value {
                    version: 0,
                    count: 0,
                },
            ),
            (
                0,
                SetCalled {
                    expected_version: 0,
                },
            ),
            (0, Set { version: 1 }),
            (
                1,
                Value {
                    version: 1,
                    count: 1,
                },
            ),
            (
                1,
                SetCalled {
                    expected_version: 0,
                },
            ),
            (1, Conflict),
            (
                0,
                Value {
                    version: 1,
                    count: 1,
                },
            ),
        ]);
        let r = check_config(&ok, 1, &[0, 1]);
        assert!(r.is_ok(), "{r}");
        let bad = log(vec![
            (
                0,
                Value {
                    version: 2,
                    count: 1,
                },
            ),
            (
                0,
                Value {
                    version: 1,
                    count: 1,
                },
            ),
            (
                1,
                SetCalled {
                    expected_version: 3,
                },
            ),
            (1, Set { version: 5 }),
        ]);
        let r = check_config(&bad, 5, &[0, 1]);
        let named: Vec<&str> = r.violations.iter().map(|v| v.property).collect();
        assert_eq!(
            named,
            [
                NO_LOST_UPDATE.name,
                MONOTONIC_READS.name,
                SET_MEANS_SET.name,
                CONVERGENCE.name,
                CONVERGENCE.name
            ],
            "{r}"
        );
        let v: Vec<&str> = r.violations.iter().map(|v| v.detail.as_str()).collect();
        assert!(v[0].contains("an update was lost"), "{r}");
        assert!(v[1].contains("after 2 in one session"), "{r}");
        assert!(v[2].contains("reported version 5"), "{r}");
        assert!(v[3].contains("client 0 did not converge"), "{r}");
        assert!(v[4].contains("client 1 did not converge"), "{r}");
    }

    #[test]
    fn properties_are_named_once_each() {
        let names: std::collections::BTreeSet<&str> = PROPERTIES.iter().map(|p| p.name).collect();
        assert_eq!(names.len(), PROPERTIES.len());
    }

    #[test]
    fn a_new_session_may_read_older_but_a_failure_is_a_violation() {
        let read = |version| Value {
            version,
            count: i64::from(version),
        };
        // A new session may land on a lagging follower: not monotonic
        // across sessions, and its last read is what must converge.
        let l = log(vec![
            (0, read(2)),
            (0, Lost),
            (0, SessionStarted),
            (0, read(1)),
            (0, read(2)),
        ]);
        assert!(check_config(&l, 2, &[0]).is_ok());
        let mut failed = l.clone();
        failed.push(Entry {
            at_ms: 9,
            client: 0,
            event: Failed {
                error: "refused".into(),
            },
        });
        let r = check_config(&failed, 2, &[0]);
        assert_eq!(r.violations.len(), 1, "{r}");
        assert_eq!(r.violations[0].property, NO_RECIPE_FAILURE.name);
        assert_eq!(r.violations[0].detail, "client 0 failed at 9 ms: refused");
    }
}
