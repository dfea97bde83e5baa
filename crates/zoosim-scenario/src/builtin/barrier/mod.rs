//! The barrier: a coordinator (client 0) sets a barrier node; the others
//! watch it and pass when it is removed, round after round. The oracle
//! ([`zoosim_core::check::barrier`]) checks that nobody passes before the
//! removal was asked for, and that every waiter passes in the quiet phase.

#[cfg(madsim)]
mod workload;

use crate::recipe::Recipe;
use crate::verdict::{counter_names, Counter, Property};
use crate::workload::WorkloadKey;
use zoosim_core::check::barrier::PROPERTIES;
use zoosim_recipes::barrier::BarrierVariant;

/// The `barrier` recipe.
#[derive(Clone, Copy, Debug)]
pub struct Barrier;

const KEYS: &[WorkloadKey] = &[
    WorkloadKey::int(
        "clients",
        "the coordinator (client 0) and the waiters",
        1,
        64,
        5,
    ),
    WorkloadKey::int(
        "hold_ms_max",
        "the coordinator's longest hold of the barrier",
        1,
        600_000,
        800,
    ),
    WorkloadKey::int(
        "operations",
        "rounds the coordinator runs, then everyone stops (0: until the run ends)",
        0,
        1_000_000,
        0,
    ),
];

/// The counters, each named once with how it is read off the oracle's
/// report: [`Recipe::counters`] and the judge read this one table.
const COUNTED: [Counter<zoosim_core::check::barrier::BarrierReport>; 3] = [
    Counter::new("rounds", |r| r.rounds),
    Counter::new("passes", |r| r.passes),
    Counter::new("sessions-lost", |r| r.losses),
];
const COUNTERS: &[&str] = &counter_names(&COUNTED);

impl Recipe for Barrier {
    fn name(&self) -> &str {
        "barrier"
    }

    fn description(&self) -> &str {
        "a barrier node that waiters watch until the coordinator removes it"
    }

    fn variants(&self) -> &[&str] {
        const VARIANTS: &[&str] = &[
            BarrierVariant::NoSync.name(),
            BarrierVariant::SyncInsteadOfCheck.name(),
        ];
        VARIANTS
    }

    fn workload_keys(&self) -> &[WorkloadKey] {
        KEYS
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
    use super::workload::{self, BarrierLog, BarrierWorkload};
    use crate::sim::{Ending, Finished, JudgeCtx, RunCtx, Running};
    use crate::verdict::Verdict;
    use zoosim_core::check::barrier::{check_barrier, BarrierEvent};
    use zoosim_recipes::barrier::BarrierVariant;

    pub(super) fn start(ctx: &mut RunCtx) -> Box<dyn Running> {
        let w = BarrierWorkload {
            dir: "/barriers".into(),
            clients: ctx.clients(),
            hold_ms_max: ctx.value_u64("hold_ms_max"),
            session_timeout_ms: ctx.session_timeout_ms(),
            variant: ctx
                .variant()
                .and_then(BarrierVariant::from_name)
                .unwrap_or_default(),
            rounds: ctx.value_u64("operations") as u32,
        };
        let (log, finished) = workload::spawn(ctx, &w);
        Box::new(Run {
            log,
            finished,
            clients: w.clients,
        })
    }

    struct Run {
        log: BarrierLog,
        finished: Finished,
        clients: usize,
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
            let log = ctx.with_crashes(log, || BarrierEvent::Crashed);
            let r = check_barrier(&log, Some(ctx.liveness()));
            Verdict::counted(&log, &r, r.violations.clone(), &super::COUNTED)
        }
    }
}
