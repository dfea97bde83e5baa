//! The configuration recipe's oracle. The workload's node holds a counter
//! that every update raises by one with a compare-and-set, starting at "0"
//! in version 0; so every read must show count == version — a lost update
//! (two writers both succeeding from one version) breaks it at once.
//!
//! * **No lost update**: every value read has count == version.
//! * **Monotonic reads**: within one session, versions read never go back.
//! * **Set means set**: a `Set` names the version after the expected one.
//! * **Convergence**: after the quiet phase every live follower's last read
//!   is the node's final version.

use std::collections::BTreeMap;
use std::fmt;

use super::Entry;

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum ConfigEvent {
    SessionStarted,
    Value { version: i32, count: i64 },
    Missing,
    SetCalled { expected_version: i32 },
    Set { version: i32 },
    Conflict,
    Lost,
    Crashed,
    Failed { error: String },
}

#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct ConfigReport {
    pub reads: u64,
    pub sets: u64,
    pub conflicts: u64,
    pub losses: u64,
    pub violations: Vec<String>,
}

impl ConfigReport {
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

/// `final_version`: the node's version at the end; `live`: the clients
/// whose session was alive at the end (they must have converged).
pub fn check_config(
    log: &[Entry<ConfigEvent>],
    final_version: i32,
    live: &[usize],
) -> ConfigReport {
    let mut r = ConfigReport::default();
    let mut last: BTreeMap<usize, i32> = BTreeMap::new();
    let mut expected: BTreeMap<usize, i32> = BTreeMap::new();
    for e in log {
        let c = e.client;
        match &e.event {
            ConfigEvent::SessionStarted => {
                last.remove(&c);
            }
            ConfigEvent::Value { version, count } => {
                r.reads += 1;
                if i64::from(*version) != *count {
                    r.violations.push(format!(
                        "client {c} read count {count} in version {version} at {} ms: an \
                         update was lost",
                        e.at_ms
                    ));
                }
                if let Some(&prev) = last.get(&c) {
                    if *version < prev {
                        r.violations.push(format!(
                            "client {c} read version {version} after {prev} in one session \
                             (at {} ms)",
                            e.at_ms
                        ));
                    }
                }
                last.insert(c, *version);
            }
            ConfigEvent::SetCalled { expected_version } => {
                expected.insert(c, *expected_version);
            }
            ConfigEvent::Set { version } => {
                r.sets += 1;
                if let Some(x) = expected.remove(&c) {
                    if *version != x + 1 {
                        r.violations.push(format!(
                            "client {c}'s set from version {x} reported version {version}"
                        ));
                    }
                }
            }
            ConfigEvent::Conflict => {
                r.conflicts += 1;
                expected.remove(&c);
            }
            ConfigEvent::Lost | ConfigEvent::Crashed => {
                r.losses += u64::from(e.event == ConfigEvent::Lost);
                last.remove(&c);
            }
            ConfigEvent::Missing => {}
            ConfigEvent::Failed { error } => r
                .violations
                .push(format!("client {c} failed at {} ms: {error}", e.at_ms)),
        }
    }
    for c in live {
        match last.get(c) {
            Some(&v) if v == final_version => {}
            seen => r.violations.push(format!(
                "client {c} did not converge: last read {seen:?}, final version {final_version}"
            )),
        }
    }
    r
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
        let v = check_config(&bad, 5, &[0, 1]).violations.join("\n");
        assert!(v.contains("an update was lost"), "{v}");
        assert!(v.contains("after 2 in one session"), "{v}");
        assert!(v.contains("reported version 5"), "{v}");
        assert!(v.contains("client 0 did not converge"), "{v}");
        assert!(v.contains("client 1 did not converge"), "{v}");
    }
}
