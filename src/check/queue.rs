//! The queue's oracle, over producers' and consumers' outcome logs and the
//! items left in the queue at the end. Items are identified by their data
//! (unique per enqueue call).
//!
//! * **None taken twice**, unless its enqueue may have made two copies
//!   (the producer's search after a ConnectionLoss found nothing and it
//!   created again: a consumer may have taken the first copy meanwhile).
//! * **None lost**: every acknowledged item was taken, maybe taken (a
//!   delete's outcome unknown), claimed by a consumer that died or lost its
//!   session before hearing back, or is still in the queue.
//! * **None invented**: everything taken was enqueued by someone.
//! * **FIFO per consumer** (plain queue): a consumer's takes come in
//!   increasing sequence order.
//! * **Drained**: after the quiet phase (producers stopped, consumers
//!   running) the queue is empty.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::Entry;

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum QueueEvent {
    EnqueueCalled {
        item: String,
    },
    Enqueued {
        item: String,
        duplicate_possible: bool,
    },
    Claiming {
        item: String,
    },
    Taken {
        item: String,
        seq: u64,
    },
    Missed {
        item: String,
    },
    MaybeTaken {
        item: String,
    },
    /// The guid search after a ConnectionLoss on the create.
    Recovered {
        found: bool,
    },
    /// The session ended; a pending claim stays unresolved.
    Lost,
    Crashed,
    Failed {
        error: String,
    },
}

#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct QueueReport {
    pub enqueued: u64,
    pub taken: u64,
    pub maybe_taken: u64,
    pub unresolved_claims: u64,
    pub missed: u64,
    pub duplicates_possible: u64,
    pub recovered_found: u64,
    pub recovered_not_found: u64,
    pub remaining: u64,
    pub violations: Vec<String>,
}

impl QueueReport {
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for QueueReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "enqueued {}, taken {}, maybe taken {}, unresolved claims {}, missed {}, \
             duplicates possible {}, producer search found {} / not {}, remaining {}",
            self.enqueued,
            self.taken,
            self.maybe_taken,
            self.unresolved_claims,
            self.missed,
            self.duplicates_possible,
            self.recovered_found,
            self.recovered_not_found,
            self.remaining
        )?;
        for v in &self.violations {
            writeln!(f, "VIOLATION: {v}")?;
        }
        Ok(())
    }
}

/// `remaining`: the items in the queue at the end; `fifo`: a plain queue;
/// `drained`: the run ended with a quiet phase long enough to empty it.
pub fn check_queue(
    log: &[Entry<QueueEvent>],
    remaining: &[String],
    fifo: bool,
    drained: bool,
) -> QueueReport {
    let mut r = QueueReport {
        remaining: remaining.len() as u64,
        ..QueueReport::default()
    };
    let mut called = BTreeSet::new();
    let mut acked = BTreeSet::new();
    let mut duplicable = BTreeSet::new();
    let mut taken: BTreeMap<&str, usize> = BTreeMap::new();
    let mut gone = BTreeSet::new();
    // Per consumer: its claim in flight, and the last sequence it took.
    let mut claim: BTreeMap<usize, &str> = BTreeMap::new();
    let mut last_seq: BTreeMap<usize, u64> = BTreeMap::new();
    // Per producer: the item it is enqueuing.
    let mut enqueuing: BTreeMap<usize, &str> = BTreeMap::new();
    for e in log {
        let c = e.client;
        match &e.event {
            QueueEvent::EnqueueCalled { item } => {
                called.insert(item.as_str());
                enqueuing.insert(c, item);
            }
            QueueEvent::Enqueued {
                item,
                duplicate_possible,
            } => {
                r.enqueued += 1;
                acked.insert(item.as_str());
                if *duplicate_possible {
                    r.duplicates_possible += 1;
                    duplicable.insert(item.as_str());
                }
            }
            QueueEvent::Claiming { item } => {
                claim.insert(c, item);
            }
            QueueEvent::Taken { item, seq } => {
                r.taken += 1;
                claim.remove(&c);
                gone.insert(item.as_str());
                *taken.entry(item).or_default() += 1;
                if fifo {
                    if let Some(&prev) = last_seq.get(&c) {
                        if *seq <= prev {
                            r.violations.push(format!(
                                "consumer {c} took {item} (sequence {seq}) after sequence {prev}"
                            ));
                        }
                    }
                    last_seq.insert(c, *seq);
                }
            }
            QueueEvent::MaybeTaken { item } => {
                r.maybe_taken += 1;
                claim.remove(&c);
                gone.insert(item.as_str());
            }
            QueueEvent::Missed { .. } => {
                r.missed += 1;
                claim.remove(&c);
            }
            QueueEvent::Recovered { found } => {
                if *found {
                    r.recovered_found += 1;
                } else {
                    r.recovered_not_found += 1;
                    // Created again: a consumer may have taken the first
                    // copy before the search, so there may be two.
                    if let Some(item) = enqueuing.get(&c) {
                        duplicable.insert(*item);
                    }
                }
            }
            QueueEvent::Lost | QueueEvent::Crashed => {
                if let Some(item) = claim.remove(&c) {
                    r.unresolved_claims += 1;
                    gone.insert(item);
                }
            }
            QueueEvent::Failed { error } => r
                .violations
                .push(format!("client {c} failed at {} ms: {error}", e.at_ms)),
        }
    }
    // Claims still open when the log ends may have gone either way.
    for item in claim.into_values() {
        r.unresolved_claims += 1;
        gone.insert(item);
    }
    for (item, n) in &taken {
        if *n > 1 && !duplicable.contains(item) {
            r.violations.push(format!("{item} was taken {n} times"));
        }
        if !called.contains(item) {
            r.violations
                .push(format!("{item} was taken but never enqueued"));
        }
    }
    let left: BTreeSet<&str> = remaining.iter().map(String::as_str).collect();
    for item in &acked {
        if !gone.contains(item) && !left.contains(item) {
            r.violations.push(format!(
                "{item} was enqueued, then lost (neither taken nor left)"
            ));
        }
    }
    if drained && !remaining.is_empty() {
        r.violations.push(format!(
            "the queue was not drained in the quiet phase: {} items left ({:?}...)",
            remaining.len(),
            &remaining[..remaining.len().min(3)]
        ));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use QueueEvent::*;

    fn log(entries: Vec<(usize, QueueEvent)>) -> Vec<Entry<QueueEvent>> {
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

    fn item(s: &str) -> String {
        s.to_owned()
    }

    fn enqueue(c: usize, i: &str) -> Vec<(usize, QueueEvent)> {
        vec![
            (c, EnqueueCalled { item: item(i) }),
            (
                c,
                Enqueued {
                    item: item(i),
                    duplicate_possible: false,
                },
            ),
        ]
    }

    #[test]
    fn a_clean_run_passes() {
        let mut l = enqueue(0, "a");
        l.extend(enqueue(0, "b"));
        l.push((1, Claiming { item: item("a") }));
        l.push((
            1,
            Taken {
                item: item("a"),
                seq: 1,
            },
        ));
        l.push((2, Claiming { item: item("a") }));
        l.push((2, Missed { item: item("a") }));
        l.push((2, Claiming { item: item("b") }));
        l.push((
            2,
            Taken {
                item: item("b"),
                seq: 2,
            },
        ));
        let r = check_queue(&log(l), &[], true, true);
        assert!(r.is_ok(), "{r}");
        assert_eq!((r.enqueued, r.taken, r.missed), (2, 2, 1));
    }

    #[test]
    fn lost_twice_taken_invented_out_of_order_and_undrained_are_caught() {
        let mut l = enqueue(0, "a");
        l.extend(enqueue(0, "b"));
        l.extend(enqueue(0, "c"));
        l.push((
            1,
            Taken {
                item: item("b"),
                seq: 2,
            },
        ));
        l.push((
            1,
            Taken {
                item: item("b"),
                seq: 2,
            },
        ));
        l.push((
            1,
            Taken {
                item: item("z"),
                seq: 9,
            },
        ));
        l.push((
            2,
            Taken {
                item: item("d"),
                seq: 3,
            },
        ));
        let r = check_queue(&log(l), &[item("c")], true, true);
        let v = r.violations.join("\n");
        assert!(v.contains("a was enqueued, then lost"), "{v}");
        assert!(v.contains("b was taken 2 times"), "{v}");
        assert!(v.contains("z was taken but never enqueued"), "{v}");
        assert!(v.contains("after sequence 2"), "{v}");
        assert!(v.contains("not drained"), "{v}");
    }

    #[test]
    fn unknown_outcomes_excuse_what_they_should() {
        let mut l = enqueue(0, "a");
        l.extend(enqueue(0, "b"));
        l.push((0, EnqueueCalled { item: item("c") }));
        l.push((
            0,
            Enqueued {
                item: item("c"),
                duplicate_possible: true,
            },
        ));
        l.push((1, Claiming { item: item("a") }));
        l.push((1, Crashed));
        l.push((2, MaybeTaken { item: item("b") }));
        l.push((
            2,
            Taken {
                item: item("c"),
                seq: 3,
            },
        ));
        l.push((
            3,
            Taken {
                item: item("c"),
                seq: 4,
            },
        ));
        let r = check_queue(&log(l), &[], true, true);
        assert!(r.is_ok(), "{r}");
        assert_eq!((r.unresolved_claims, r.maybe_taken), (1, 1));
    }
}
