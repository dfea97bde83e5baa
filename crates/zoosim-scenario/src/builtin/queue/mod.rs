//! The queue and the priority queue: producers enqueue unique items
//! (sequential nodes; a priority queue's names carry the priority),
//! consumers take the lowest and delete it, and the oracle
//! ([`zoosim_core::check::queue`]) checks that no item is lost, taken twice or
//! invented, and (plain queue) that each consumer takes in FIFO order.

#[cfg(madsim)]
mod workload;

#[cfg(all(test, madsim))]
pub(crate) mod broken;

use crate::recipe::Recipe;
use crate::verdict::{counter_names, Counter, Property};
use crate::workload::{Workload, WorkloadKey};
use zoosim_core::check::queue as oracle;

/// A queue; `priority`: the priority queue.
#[derive(Clone, Copy, Debug)]
pub struct Queue {
    /// The priority queue (`priority-queue`) rather than the plain one
    /// (`queue`).
    pub priority: bool,
}

/// The `queue` recipe.
pub const QUEUE: Queue = Queue { priority: false };
/// The `priority-queue` recipe.
pub const PRIORITY_QUEUE: Queue = Queue { priority: true };

const KEYS: &[WorkloadKey] = &[
    WorkloadKey::int("producers", "clients that enqueue", 1, 64, 2),
    WorkloadKey::int("consumers", "clients that take", 1, 64, 3),
    WorkloadKey::int(
        "think_ms_max",
        "a client's longest pause between two operations",
        0,
        600_000,
        100,
    ),
];

/// The counters, each named once with how it is read off the oracle's
/// report: [`Recipe::counters`] and the judge read this one table.
const COUNTED: [Counter<zoosim_core::check::queue::QueueReport>; 8] = [
    Counter::new("enqueued", |r| r.enqueued),
    Counter::new("taken", |r| r.taken),
    Counter::new("maybe-taken", |r| r.maybe_taken),
    Counter::new("unresolved-claims", |r| r.unresolved_claims),
    Counter::new("missed", |r| r.missed),
    Counter::new("duplicates-possible", |r| r.duplicates_possible),
    Counter::new("guid-found", |r| r.recovered_found),
    Counter::new("guid-not-found", |r| r.recovered_not_found),
];
const COUNTERS: &[&str] = &counter_names(&COUNTED);

/// A priority queue takes in priority order, not FIFO per consumer.
const PRIORITY_PROPERTIES: &[Property] = &[
    oracle::NO_LOSS,
    oracle::NO_DUPLICATE,
    oracle::NONE_INVENTED,
    oracle::PRIORITY_ORDER,
    oracle::NO_RECIPE_FAILURE,
    oracle::LIVENESS,
];

/// A plain queue takes FIFO per consumer; priorities it has none.
const PLAIN_PROPERTIES: &[Property] = &[
    oracle::NO_LOSS,
    oracle::NO_DUPLICATE,
    oracle::NONE_INVENTED,
    oracle::FIFO_PER_CONSUMER,
    oracle::NO_RECIPE_FAILURE,
    oracle::LIVENESS,
];

impl Recipe for Queue {
    fn name(&self) -> &str {
        if self.priority {
            "priority-queue"
        } else {
            "queue"
        }
    }

    fn description(&self) -> &str {
        if self.priority {
            "priority queue: the lowest priority, then the oldest, is taken first"
        } else {
            "FIFO queue: sequential nodes, the lowest is taken first"
        }
    }

    fn workload_keys(&self) -> &[WorkloadKey] {
        KEYS
    }

    fn client_slots(&self, w: &Workload) -> usize {
        let n = |k| w.int(k).unwrap_or(0).max(0) as usize;
        n("producers") + n("consumers")
    }

    fn properties(&self) -> &[Property] {
        if self.priority {
            PRIORITY_PROPERTIES
        } else {
            PLAIN_PROPERTIES
        }
    }

    fn counters(&self) -> &[&str] {
        COUNTERS
    }

    #[cfg(madsim)]
    fn start(&self, ctx: &mut crate::sim::RunCtx) -> Box<dyn crate::sim::Running> {
        sim::start(self.priority, ctx)
    }
}

#[cfg(madsim)]
mod sim {
    use super::workload::{self, QueueLog, QueueWorkload};
    use crate::sim::{Ending, JudgeCtx, RunCtx, Running};
    use crate::verdict::Verdict;
    use zoosim_core::check::queue::{check_queue, QueueEvent};

    pub(super) fn start(priority: bool, ctx: &mut RunCtx) -> Box<dyn Running> {
        let w = QueueWorkload::of(ctx, priority);
        let log = workload::spawn(ctx, &w);
        running(log, w)
    }

    /// The run of workload `w` recording into `log`, judged by [`check_queue`].
    pub(super) fn running(log: QueueLog, w: QueueWorkload) -> Box<dyn Running> {
        Box::new(Run {
            log,
            dir: w.dir,
            priority: w.priority,
        })
    }

    struct Run {
        log: QueueLog,
        dir: String,
        priority: bool,
    }

    impl Running for Run {
        fn ending(&self) -> Ending {
            Ending::QuietPhase
        }

        fn judge(self: Box<Self>, ctx: &JudgeCtx) -> Verdict {
            let log = self.log.entries();
            let log = ctx.with_crashes(log, || QueueEvent::Crashed);
            let dir = &self.dir;
            // Without a leader nothing is left to read: the items are
            // judged as taken or lost from the log alone.
            let remaining: Vec<String> = match ctx.leader() {
                None => Vec::new(),
                Some(l) => ctx.ensemble().with_server(l, |s| {
                    let tree = s.tree();
                    tree.node(dir)
                        .map(|d| {
                            d.children
                                .iter()
                                .filter_map(|c| tree.node(&format!("{dir}/{c}")))
                                .map(|n| String::from_utf8_lossy(&n.data).into_owned())
                                .collect()
                        })
                        .unwrap_or_default()
                }),
            };
            let r = check_queue(&log, &remaining, !self.priority, true);
            Verdict::counted(&log, &r, r.violations.clone(), &super::COUNTED)
        }
    }
}
