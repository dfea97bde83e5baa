//! The double barrier: clients enter (an ephemeral node each; in once
//! `threshold` are there, signalled by a ready node), compute, and leave
//! (out once every node is gone), round after round. The oracle
//! ([`zoosim_core::check::double_barrier`]) checks that nobody is in before
//! `threshold` asked to enter and nobody is out before everyone inside
//! asked to leave.

#[cfg(madsim)]
mod workload;

use crate::recipe::Recipe;
use crate::verdict::{counter_names, Counter, Property};
use crate::workload::{Workload, WorkloadError, WorkloadKey};
use zoosim_core::check::double_barrier::PROPERTIES;

/// The `double-barrier` recipe.
#[derive(Clone, Copy, Debug)]
pub struct DoubleBarrier;

const KEYS: &[WorkloadKey] = &[
    WorkloadKey::int("clients", "clients entering and leaving", 1, 64, 5),
    WorkloadKey::int("threshold", "clients it takes to enter", 1, 64, 3),
    WorkloadKey::int(
        "compute_ms_max",
        "a client's longest computation inside",
        1,
        600_000,
        300,
    ),
    WorkloadKey::int(
        "operations",
        "rounds per client, then it stops (0: until the run ends)",
        0,
        1_000_000,
        0,
    ),
];

/// The counters, each named once with how it is read off the oracle's
/// report: [`Recipe::counters`] and the judge read this one table.
const COUNTED: [Counter<zoosim_core::check::double_barrier::DoubleBarrierReport>; 3] = [
    Counter::new("entries", |r| r.entries),
    Counter::new("exits", |r| r.exits),
    Counter::new("sessions-lost", |r| r.losses),
];
const COUNTERS: &[&str] = &counter_names(&COUNTED);

fn threshold(w: &Workload) -> usize {
    w.int("threshold").unwrap_or(1).max(1) as usize
}

impl Recipe for DoubleBarrier {
    fn name(&self) -> &str {
        "double-barrier"
    }

    fn description(&self) -> &str {
        "enter once `threshold` clients are there, leave once all have left"
    }

    fn workload_keys(&self) -> &[WorkloadKey] {
        KEYS
    }

    fn check_workload(&self, w: &Workload) -> Result<(), WorkloadError> {
        let clients = w.clients().unwrap_or(0);
        if threshold(w) > clients {
            return Err(WorkloadError::new(
                "threshold",
                format!(
                    "`workload.threshold` ({}) exceeds `clients` ({clients}): the barrier would never open",
                    threshold(w)
                ),
            ));
        }
        Ok(())
    }

    fn min_clients(&self, w: &Workload) -> usize {
        threshold(w)
    }

    fn properties(&self) -> &[Property] {
        PROPERTIES
    }

    fn counters(&self) -> &[&str] {
        COUNTERS
    }

    #[cfg(madsim)]
    fn start(&self, ctx: &mut crate::sim::RunCtx) -> Box<dyn crate::sim::Running> {
        sim::start(ctx)
    }
}

#[cfg(madsim)]
mod sim {
    use super::workload::{self, DoubleBarrierLog, DoubleBarrierWorkload};
    use crate::sim::{Ending, Finished, JudgeCtx, RunCtx, Running};
    use crate::verdict::Verdict;
    use zoosim_core::check::double_barrier::{check_double_barrier, DoubleBarrierEvent};

    pub(super) fn start(ctx: &mut RunCtx) -> Box<dyn Running> {
        let w = DoubleBarrierWorkload {
            dir: "/double".into(),
            clients: ctx.clients(),
            threshold: ctx.value_u64("threshold") as usize,
            compute_ms_max: ctx.value_u64("compute_ms_max"),
            session_timeout_ms: ctx.session_timeout_ms(),
            rounds: ctx.value_u64("operations") as u32,
        };
        let (log, finished) = workload::spawn(ctx, &w);
        Box::new(Run {
            log,
            finished,
            clients: w.clients,
            threshold: w.threshold,
        })
    }

    struct Run {
        log: DoubleBarrierLog,
        finished: Finished,
        clients: usize,
        threshold: usize,
    }

    impl Running for Run {
        fn ending(&self) -> Ending {
            Ending::Counted {
                done: self.finished.clone(),
                clients: self.clients,
            }
        }

        fn judge(self: Box<Self>, ctx: &JudgeCtx) -> Verdict {
            let log = self.log.entries();
            let log = ctx.with_crashes(log, || DoubleBarrierEvent::Crashed);
            let r = check_double_barrier(&log, self.threshold, Some(ctx.liveness()));
            Verdict::counted(&log, &r, r.violations.clone(), &super::COUNTED)
        }
    }
}
