//! Two-phase commit: a coordinator (client 0) opens transactions, each
//! site votes under the transaction's node, and every site decides from
//! the votes it sees. The oracle ([`zoosim_core::check::two_phase_commit`])
//! checks agreement (every site decides the same), validity (commit only
//! if every site voted commit) and that every vote is decided.

#[cfg(madsim)]
mod workload;

use crate::recipe::Recipe;
use crate::verdict::{counter_names, Counter, Property};
use crate::workload::{Workload, WorkloadError, WorkloadKey};
use zoosim_core::check::two_phase_commit::PROPERTIES;
use zoosim_recipes::two_phase_commit::TwoPhaseCommitVariant;

/// The `two-phase-commit` recipe.
#[derive(Clone, Copy, Debug)]
pub struct TwoPhaseCommit;

const KEYS: &[WorkloadKey] = &[
    WorkloadKey::int(
        "clients",
        "the coordinator (client 0) and the sites",
        1,
        64,
        5,
    ),
    WorkloadKey::int("abort_percent", "how often a site votes abort", 0, 100, 15),
    WorkloadKey::int(
        "vote_ms_max",
        "a site's longest time between joining a transaction (its alive node) and voting, \
         drawn per vote: the window in which its failure makes the others abort for it",
        0,
        60_000,
        600,
    ),
    WorkloadKey::int(
        "operations",
        "transactions in all, then everyone stops (0: until the run ends)",
        0,
        1_000_000,
        0,
    ),
];

/// The counters, each named once with how it is read off the oracle's
/// report: [`Recipe::counters`] and the judge read this one table.
const COUNTED: [Counter<zoosim_core::check::two_phase_commit::TpcReport>; 4] = [
    Counter::new("commits", |r| r.commits),
    Counter::new("aborts", |r| r.aborts),
    Counter::new("aborts-for-failed-sites", |r| r.aborts_for_failed_sites),
    Counter::new("sessions-lost", |r| r.losses),
];
const COUNTERS: &[&str] = &counter_names(&COUNTED);

impl Recipe for TwoPhaseCommit {
    fn name(&self) -> &str {
        "two-phase-commit"
    }

    fn description(&self) -> &str {
        "a coordinator's transactions, voted on and decided by every site"
    }

    fn variants(&self) -> &[&str] {
        const VARIANTS: &[&str] = &[TwoPhaseCommitVariant::CommitBeforeAllVotes.name()];
        VARIANTS
    }

    fn workload_keys(&self) -> &[WorkloadKey] {
        KEYS
    }

    fn check_workload(&self, w: &Workload) -> Result<(), WorkloadError> {
        if w.clients().unwrap_or(0) < 2 {
            return Err(WorkloadError::new(
                "clients",
                "two-phase commit needs a coordinator and at least one site: `clients` >= 2",
            ));
        }
        Ok(())
    }

    fn min_clients(&self, _: &Workload) -> usize {
        2
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
    use super::workload::{self, TpcLog, TpcWorkload};
    use crate::sim::{Ending, Finished, JudgeCtx, RunCtx, Running};
    use crate::verdict::Verdict;
    use zoosim_core::check::two_phase_commit::{check_tpc, TpcEvent};
    use zoosim_recipes::two_phase_commit::TwoPhaseCommitVariant;

    pub(super) fn start(ctx: &mut RunCtx) -> Box<dyn Running> {
        let w = TpcWorkload {
            dir: "/tpc".into(),
            sites: ctx.clients() - 1,
            abort_probability: ctx.value_u64("abort_percent") as f64 / 100.0,
            session_timeout_ms: ctx.session_timeout_ms(),
            transactions: ctx.value_u64("operations") as u32,
            vote_ms_max: ctx.value_u64("vote_ms_max"),
            variant: ctx
                .variant()
                .and_then(TwoPhaseCommitVariant::from_name)
                .unwrap_or_default(),
        };
        let (log, finished) = workload::spawn(ctx, &w);
        Box::new(Run {
            log,
            finished,
            sites: w.sites,
        })
    }

    struct Run {
        log: TpcLog,
        finished: Finished,
        sites: usize,
    }

    impl Running for Run {
        fn ending(&self) -> Ending {
            Ending::Counted {
                done: self.finished.clone(),
                clients: self.sites + 1,
            }
        }

        fn judge(self: Box<Self>, ctx: &JudgeCtx) -> Verdict {
            let log = self.log.entries();
            let log = ctx.with_crashes(log, || TpcEvent::Crashed);
            let sites: Vec<usize> = (1..=self.sites).collect();
            let r = check_tpc(&log, &sites, Some(ctx.liveness()));
            Verdict::counted(&log, &r, r.violations.clone(), &super::COUNTED)
        }
    }
}
