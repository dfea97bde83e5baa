//! The queue's oracle, over producers' and consumers' outcome logs and the
//! items left in the queue at the end. Items are identified by their data
//! (unique per enqueue call). Each property is a constant below, named in
//! every violation of it; [`PROPERTIES`] lists them.
//!
//! * **None taken twice** (`no-duplicate`), unless its enqueue may have
//!   made two copies (the producer's search after a ConnectionLoss found
//!   nothing and it created again: a consumer may have taken the first
//!   copy meanwhile).
//! * **None lost** (`no-loss`): every acknowledged item was taken, maybe
//!   taken (a delete's outcome unknown), claimed by a consumer that died or
//!   lost its session before hearing back, or is still in the queue.
//! * **None invented** (`none-invented`): everything taken was enqueued by
//!   someone.
//! * **FIFO per consumer** (`fifo-per-consumer`, plain queue): a consumer's
//!   takes come in increasing sequence order.
//! * **Priority order** (`priority-order`, priority queue): a consumer
//!   takes an item only when its last list of the queue held no item of
//!   higher priority that it has not since found gone (see
//!   [`PRIORITY_ORDER`] for why that, and not more, is what can be judged).
//! * **No recipe failure** (`no-recipe-failure`).
//! * **Drained** (`liveness`): after the quiet phase (producers stopped,
//!   consumers running) the queue is empty.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::{Entry, Property, Violation};

/// What one queue producer or consumer saw or did, as the oracle reads it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum QueueEvent {
    /// A producer asked to enqueue `item`.
    EnqueueCalled {
        /// The item's data (unique per enqueue call).
        item: String,
    },
    /// The enqueue of `item` was acknowledged.
    Enqueued {
        /// The item's data.
        item: String,
        /// Whether the enqueue may have made two copies (its search after a
        /// ConnectionLoss found nothing and it created again).
        duplicate_possible: bool,
    },
    /// A consumer is about to delete `item`: if it dies now, the item may be gone unreported.
    Claiming {
        /// The item's data.
        item: String,
    },
    /// A consumer took `item`: its delete succeeded.
    Taken {
        /// The item's data.
        item: String,
        /// The item node's sequence number (for FIFO order).
        seq: u64,
    },
    /// Another consumer took the node first (the delete met NoNode).
    Missed {
        /// The item node's name.
        item: String,
    },
    /// A consumer's delete met ConnectionLoss and its retry NoNode: `item` is gone,
    /// taken by it or by someone else.
    MaybeTaken {
        /// The item's data.
        item: String,
    },
    /// The guid search after a ConnectionLoss on the create.
    Recovered {
        /// Whether the search found the producer's node.
        found: bool,
    },
    /// The session ended; a pending claim stays unresolved.
    Lost,
    /// The client process crashed (the nemesis); a pending claim stays unresolved.
    Crashed,
    /// A priority consumer's list of the queue, as the server answered it:
    /// each item's (priority, sequence number). What it takes next rests
    /// on it.
    Listed {
        /// Every item in the list, as (priority, sequence number).
        items: Vec<(u8, u64)>,
    },
    /// The recipe met an answer it has no way forward from, or refused a command.
    Failed {
        /// The recipe's error, as text.
        error: String,
    },
}

/// What [`check_queue`] found: counts of what happened, and the violations.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct QueueReport {
    /// Enqueues acknowledged (`Enqueued` events).
    pub enqueued: u64,
    /// Items taken (`Taken` events).
    pub taken: u64,
    /// Items maybe taken (`MaybeTaken` events).
    pub maybe_taken: u64,
    /// Claims whose outcome is unknown: the consumer crashed, lost its session, or the log ended first.
    pub unresolved_claims: u64,
    /// Deletes that found the node taken by another consumer (`Missed` events).
    pub missed: u64,
    /// Acknowledged enqueues that may have made two copies.
    pub duplicates_possible: u64,
    /// Producer searches after a ConnectionLoss that found the node.
    pub recovered_found: u64,
    /// Producer searches after a ConnectionLoss that found nothing.
    pub recovered_not_found: u64,
    /// Items left in the queue at the end.
    pub remaining: u64,
    /// Every property broken, in the order found.
    pub violations: Vec<Violation>,
}

impl QueueReport {
    /// Whether no property was broken.
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

/// Every acknowledged item was taken, maybe taken, claimed by a consumer that died or
/// lost its session before hearing back, or is still in the queue.
pub const NO_LOSS: Property = Property::new(
    "no-loss",
    "every acknowledged item was taken, maybe taken, claimed by a consumer that died or lost \
     its session before hearing back, or is still in the queue",
);
/// No item is taken twice, unless its enqueue may have made two copies.
pub const NO_DUPLICATE: Property = Property::new(
    "no-duplicate",
    "no item is taken twice, unless its enqueue may have made two copies",
);
/// Everything taken was enqueued by someone.
pub const NONE_INVENTED: Property =
    Property::new("none-invented", "everything taken was enqueued by someone");
/// A plain queue's consumer takes items in increasing sequence order.
pub const FIFO_PER_CONSUMER: Property = Property::new(
    "fifo-per-consumer",
    "a plain queue's consumer takes items in increasing sequence order",
);
/// A priority consumer takes an item only when its last list held no item
/// of higher priority that it has not since found gone.
///
/// Why this and not "no higher-priority item was durably present when the
/// consumer listed": ZooKeeper's reads are sequentially consistent, not
/// linearizable. A consumer's getChildren is answered by its own server,
/// which may not yet have applied a create another client already saw
/// acknowledged (a lagging follower), so an item enqueued, acknowledged,
/// and only then listed for may rightly be missing from the list: judged
/// by real time, a correct consumer would fail. What the consumer's own
/// list showed is different: the server had applied those creates (every
/// applied txn is committed), so the items were durably there when it
/// answered; and one the consumer has not since found gone (its read or
/// delete met NoNode, `Missed`) or taken itself may still be there. A
/// consumer that takes a lower-priority item over such an item chose
/// against what it knew. Concurrent consumers are no excuse: an item
/// another consumer took first is one this consumer finds gone when it
/// tries it, which it must do before going lower. A take whose outcome is
/// unknown (`MaybeTaken`), a lost session or a crash ends what the log can
/// say about the consumer's list until its next one.
pub const PRIORITY_ORDER: Property = Property::new(
    "priority-order",
    "a priority consumer takes an item only when its last list held no item of higher \
     priority that it has not since found gone",
);
/// The queue is drained in the quiet phase (producers stopped, consumers running).
pub const LIVENESS: Property = Property::new(
    "liveness",
    "the queue is drained in the quiet phase (producers stopped, consumers running)",
);
pub use super::NO_RECIPE_FAILURE;

/// What this oracle checks, safety first.
pub const PROPERTIES: &[Property] = &[
    NO_LOSS,
    NO_DUPLICATE,
    NONE_INVENTED,
    FIFO_PER_CONSUMER,
    PRIORITY_ORDER,
    NO_RECIPE_FAILURE,
    LIVENESS,
];

/// What became of the items, by the whole log.
#[derive(Default)]
struct Fates<'a> {
    /// Items some producer asked to enqueue.
    called: BTreeSet<&'a str>,
    /// Items whose enqueue was acknowledged.
    acked: BTreeSet<&'a str>,
    /// Items that may have been created twice.
    duplicable: BTreeSet<&'a str>,
    /// How many times each item was taken.
    taken: BTreeMap<&'a str, usize>,
    /// Items taken, maybe taken, or claimed with the outcome unknown.
    gone: BTreeSet<&'a str>,
}

/// `remaining`: the items in the queue at the end; `fifo`: a plain queue
/// (else a priority queue, judged on its consumers' `Listed` events);
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
    let fates = fates(log, &mut r);
    // Grouped by property, in the order the one-pass oracle first reported
    // each.
    if fifo {
        check_fifo_per_consumer(log, &mut r);
    } else {
        check_priority_order(log, &mut r);
    }
    let failures = super::recipe_failures(log, |e| match e {
        QueueEvent::Failed { error } => Some(error),
        _ => None,
    });
    r.violations.extend(failures);
    check_no_duplicate(&fates, &mut r);
    check_none_invented(&fates, &mut r);
    check_no_loss(&fates, remaining, &mut r);
    if drained {
        check_liveness(remaining, &mut r);
    }
    r
}

/// The counters, and what became of each item.
fn fates<'a>(log: &'a [Entry<QueueEvent>], r: &mut QueueReport) -> Fates<'a> {
    let mut f = Fates::default();
    // Per consumer: its claim in flight.
    let mut claim: BTreeMap<usize, &str> = BTreeMap::new();
    // Per producer: the item it is enqueuing.
    let mut enqueuing: BTreeMap<usize, &str> = BTreeMap::new();
    for e in log {
        let c = e.client;
        match &e.event {
            QueueEvent::EnqueueCalled { item } => {
                f.called.insert(item.as_str());
                enqueuing.insert(c, item);
            }
            QueueEvent::Enqueued {
                item,
                duplicate_possible,
            } => {
                r.enqueued += 1;
                f.acked.insert(item.as_str());
                if *duplicate_possible {
                    r.duplicates_possible += 1;
                    f.duplicable.insert(item.as_str());
                }
            }
            QueueEvent::Claiming { item } => {
                claim.insert(c, item);
            }
            QueueEvent::Taken { item, .. } => {
                r.taken += 1;
                claim.remove(&c);
                f.gone.insert(item.as_str());
                *f.taken.entry(item).or_default() += 1;
            }
            QueueEvent::MaybeTaken { item } => {
                r.maybe_taken += 1;
                claim.remove(&c);
                f.gone.insert(item.as_str());
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
                        f.duplicable.insert(*item);
                    }
                }
            }
            QueueEvent::Lost | QueueEvent::Crashed => {
                if let Some(item) = claim.remove(&c) {
                    r.unresolved_claims += 1;
                    f.gone.insert(item);
                }
            }
            QueueEvent::Failed { .. } | QueueEvent::Listed { .. } => {}
        }
    }
    // Claims still open when the log ends may have gone either way.
    for item in claim.into_values() {
        r.unresolved_claims += 1;
        f.gone.insert(item);
    }
    f
}

fn check_fifo_per_consumer(log: &[Entry<QueueEvent>], r: &mut QueueReport) {
    // Per consumer: the last sequence it took.
    let mut last_seq: BTreeMap<usize, u64> = BTreeMap::new();
    for e in log {
        let QueueEvent::Taken { item, seq } = &e.event else {
            continue;
        };
        let c = e.client;
        if let Some(&prev) = last_seq.get(&c) {
            if *seq <= prev {
                r.violations.push(Violation::new(
                    FIFO_PER_CONSUMER,
                    format!("consumer {c} took {item} (sequence {seq}) after sequence {prev}"),
                ));
            }
        }
        last_seq.insert(c, *seq);
    }
}

/// A consumer's last list, when it came, and the sequence numbers in it
/// found gone or taken since.
type Known<'a> = (&'a [(u8, u64)], u64, BTreeSet<u64>);

/// See [`PRIORITY_ORDER`].
fn check_priority_order(log: &[Entry<QueueEvent>], r: &mut QueueReport) {
    let mut known: BTreeMap<usize, Known> = BTreeMap::new();
    for e in log {
        let c = e.client;
        match &e.event {
            QueueEvent::Listed { items } => {
                known.insert(c, (items, e.at_ms, BTreeSet::new()));
            }
            QueueEvent::Missed { item } => {
                if let (Some((_, _, gone)), Some(seq)) = (known.get_mut(&c), sequence_of(item)) {
                    gone.insert(seq);
                }
            }
            QueueEvent::Taken { item, seq } => {
                let Some((list, listed_at, gone)) = known.get_mut(&c) else {
                    continue;
                };
                let higher = list.iter().find(|(_, s)| s == seq).and_then(|&(p, _)| {
                    list.iter()
                        .filter(|&&(q, s)| q < p && !gone.contains(&s))
                        .min()
                        .map(|&(q, s)| (p, q, s))
                });
                if let Some((p, q, s)) = higher {
                    r.violations.push(
                        Violation::new(
                            PRIORITY_ORDER,
                            format!(
                                "consumer {c} took {item} (priority {p}, sequence {seq}) at {} ms \
                                 while its list of {listed_at} ms held sequence {s} of priority \
                                 {q}, which it had not found gone",
                                e.at_ms
                            ),
                        )
                        .at([
                            super::Moment {
                                client: c,
                                at_ms: *listed_at,
                            },
                            e.moment(),
                        ]),
                    );
                }
                gone.insert(*seq);
            }
            QueueEvent::MaybeTaken { .. }
            | QueueEvent::Lost
            | QueueEvent::Crashed
            | QueueEvent::Failed { .. } => {
                known.remove(&c);
            }
            _ => {}
        }
    }
}

/// A sequential node's number: its name's last ten digits.
fn sequence_of(name: &str) -> Option<u64> {
    let suffix = name.get(name.len().checked_sub(10)?..)?;
    suffix
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| suffix.parse().ok())
        .flatten()
}

fn check_no_duplicate(f: &Fates, r: &mut QueueReport) {
    for (item, n) in &f.taken {
        if *n > 1 && !f.duplicable.contains(item) {
            r.violations.push(Violation::new(
                NO_DUPLICATE,
                format!("{item} was taken {n} times"),
            ));
        }
    }
}

fn check_none_invented(f: &Fates, r: &mut QueueReport) {
    for item in f.taken.keys() {
        if !f.called.contains(item) {
            r.violations.push(Violation::new(
                NONE_INVENTED,
                format!("{item} was taken but never enqueued"),
            ));
        }
    }
}

fn check_no_loss(f: &Fates, remaining: &[String], r: &mut QueueReport) {
    let left: BTreeSet<&str> = remaining.iter().map(String::as_str).collect();
    for item in &f.acked {
        if !f.gone.contains(item) && !left.contains(item) {
            r.violations.push(Violation::new(
                NO_LOSS,
                format!("{item} was enqueued, then lost (neither taken nor left)"),
            ));
        }
    }
}

/// Judged only after a quiet phase long enough to empty the queue.
fn check_liveness(remaining: &[String], r: &mut QueueReport) {
    if !remaining.is_empty() {
        r.violations.push(Violation::new(
            LIVENESS,
            format!(
                "the queue was not drained in the quiet phase: {} items left ({:?}...)",
                remaining.len(),
                &remaining[..remaining.len().min(3)]
            ),
        ));
    }
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
    fn a_priority_consumer_takes_nothing_lower_than_what_it_knows_is_there() {
        let taken = |i: &str, seq| Taken { item: item(i), seq };
        let listed = Listed {
            items: vec![(2, 1), (0, 3), (1, 2)],
        };
        let name = |seq: u64| format!("queue-00-g-1-{seq:010}");
        // Priority 0 first, its node gone (taken by another): then priority 1.
        let mut l = enqueue(0, "a");
        l.extend(enqueue(0, "b"));
        l.extend(enqueue(0, "c"));
        l.extend([
            (1, listed.clone()),
            (1, Missed { item: name(3) }),
            (1, taken("b", 2)),
            (1, taken("a", 1)),
            (2, taken("c", 3)),
        ]);
        let r = check_queue(&log(l.clone()), &[], false, false);
        assert!(r.is_ok(), "{r}");
        // Priority 2 taken while priority 0 was listed and not found gone.
        let bad = vec![(1, listed.clone()), (1, taken("a", 1))];
        let r = check_queue(&log(bad), &[], false, false);
        let names: Vec<&str> = r.violations.iter().map(|v| v.property).collect();
        assert_eq!(names, [PRIORITY_ORDER.name, NONE_INVENTED.name], "{r}");
        assert!(
            r.violations[0].detail.contains(
                "consumer 1 took a (priority 2, sequence 1) at 1 ms while its list of 0 ms held \
                 sequence 3 of priority 0"
            ),
            "{r}"
        );
        // Not judged without a list, after an unknown take, or on a plain queue.
        let unknown = vec![
            (1, listed.clone()),
            (1, MaybeTaken { item: item("c") }),
            (1, taken("a", 1)),
        ];
        let judged = |l, fifo| {
            check_queue(&log(l), &[], fifo, false)
                .violations
                .iter()
                .any(|v| v.property == PRIORITY_ORDER.name)
        };
        assert!(!judged(unknown, false));
        assert!(!judged(vec![(1, taken("a", 1))], false));
        assert!(!judged(vec![(1, listed), (1, taken("a", 1))], true));
    }

    /// The properties the report names, in its order.
    fn named(r: &QueueReport) -> Vec<&'static str> {
        r.violations.iter().map(|v| v.property).collect()
    }

    fn taken(c: usize, i: &str, seq: u64) -> (usize, QueueEvent) {
        (c, Taken { item: item(i), seq })
    }

    #[test]
    fn properties_are_named_once_each() {
        let names: BTreeSet<&str> = PROPERTIES.iter().map(|p| p.name).collect();
        assert_eq!(names.len(), PROPERTIES.len());
    }

    #[test]
    fn lost_twice_taken_invented_out_of_order_and_undrained_are_caught() {
        let mut l = enqueue(0, "a");
        l.extend(enqueue(0, "b"));
        l.extend(enqueue(0, "c"));
        l.push(taken(1, "b", 2));
        l.push(taken(1, "b", 2));
        l.push(taken(1, "z", 9));
        l.push(taken(2, "d", 3));
        let r = check_queue(&log(l), &[item("c")], true, true);
        assert_eq!(
            named(&r),
            [
                FIFO_PER_CONSUMER.name,
                NO_DUPLICATE.name,
                NONE_INVENTED.name,
                NONE_INVENTED.name,
                NO_LOSS.name,
                LIVENESS.name
            ],
            "{r}"
        );
        let v: Vec<&str> = r.violations.iter().map(|v| v.detail.as_str()).collect();
        assert!(v[0].contains("took b (sequence 2) after sequence 2"), "{r}");
        assert_eq!(v[1], "b was taken 2 times");
        assert_eq!(v[2], "d was taken but never enqueued");
        assert_eq!(v[3], "z was taken but never enqueued");
        assert!(v[4].starts_with("a was enqueued, then lost"), "{r}");
        assert!(v[5].contains("not drained"), "{r}");
    }

    #[test]
    fn each_property_bites_alone() {
        let ab = || {
            let mut l = enqueue(0, "a");
            l.extend(enqueue(0, "b"));
            l
        };
        // Taken out of order by one consumer (a plain queue's; a priority
        // queue does not promise it).
        let mut l = ab();
        l.push(taken(1, "b", 2));
        l.push(taken(1, "a", 1));
        let r = check_queue(&log(l.clone()), &[], true, true);
        assert_eq!(named(&r), [FIFO_PER_CONSUMER.name], "{r}");
        assert!(check_queue(&log(l), &[], false, true).is_ok());
        // Taken twice, by two consumers.
        let mut l = ab();
        l.push(taken(1, "a", 1));
        l.push(taken(2, "a", 1));
        l.push(taken(2, "b", 2));
        let r = check_queue(&log(l), &[], true, true);
        assert_eq!(named(&r), [NO_DUPLICATE.name], "{r}");
        // Taken, never enqueued.
        let mut l = ab();
        l.push(taken(1, "a", 1));
        l.push(taken(1, "b", 2));
        l.push(taken(1, "x", 3));
        let r = check_queue(&log(l), &[], true, true);
        assert_eq!(named(&r), [NONE_INVENTED.name], "{r}");
        // Acknowledged, then neither taken nor left.
        let mut l = ab();
        l.push(taken(1, "a", 1));
        let r = check_queue(&log(l), &[], true, true);
        assert_eq!(named(&r), [NO_LOSS.name], "{r}");
        assert_eq!(
            r.violations[0].detail,
            "b was enqueued, then lost (neither taken nor left)"
        );
        // Left in the queue: not drained, judged only after a quiet phase.
        let mut l = ab();
        l.push(taken(1, "a", 1));
        let r = check_queue(&log(l.clone()), &[item("b")], true, true);
        assert_eq!(named(&r), [LIVENESS.name], "{r}");
        assert!(check_queue(&log(l), &[item("b")], true, false).is_ok());
        // A consumer's recipe failed.
        let mut l = ab();
        l.push(taken(1, "a", 1));
        l.push(taken(1, "b", 2));
        l.push((
            2,
            Failed {
                error: "refused".into(),
            },
        ));
        let r = check_queue(&log(l), &[], true, true);
        assert_eq!(named(&r), [NO_RECIPE_FAILURE.name], "{r}");
        assert_eq!(r.violations[0].detail, "client 2 failed at 6 ms: refused");
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
