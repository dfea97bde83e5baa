//! Group membership: each client joins a group with an ephemeral node,
//! watches the group's children, and leaves (or loses its session) now
//! and then. The oracle ([`zoosim_core::check::membership`]) checks that no view
//! invents a member and every live client converges on the final group.

#[cfg(madsim)]
mod workload;

use crate::recipe::Recipe;
use crate::verdict::{counter_names, Counter, Property};
use crate::workload::WorkloadKey;
use zoosim_core::check::membership::PROPERTIES;

/// The `group-membership` recipe.
#[derive(Clone, Copy, Debug)]
pub struct GroupMembership;

const KEYS: &[WorkloadKey] = &[
    WorkloadKey::int("clients", "clients joining and leaving", 1, 64, 5),
    WorkloadKey::int(
        "churn_ms_max",
        "a client's longest stay in (or out of) the group",
        1,
        600_000,
        1500,
    ),
];

/// The counters, each named once with how it is read off the oracle's
/// report: [`Recipe::counters`] and the judge read this one table.
const COUNTED: [Counter<zoosim_core::check::membership::MembershipReport>; 4] = [
    Counter::new("joins", |r| r.joins),
    Counter::new("leaves", |r| r.leaves),
    Counter::new("views", |r| r.views),
    Counter::new("sessions-lost", |r| r.losses),
];
const COUNTERS: &[&str] = &counter_names(&COUNTED);

impl Recipe for GroupMembership {
    fn name(&self) -> &str {
        "group-membership"
    }

    fn description(&self) -> &str {
        "ephemeral members under a group node, watched by every member"
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
    use super::workload::{self, member_name, MembershipLog, MembershipWorkload};
    use crate::sim::{Ending, JudgeCtx, NoLeader, RunCtx, Running};
    use crate::verdict::Verdict;
    use zoosim_core::check::membership::{check_membership, MembershipEvent};

    pub(super) fn start(ctx: &mut RunCtx) -> Box<dyn Running> {
        let w = MembershipWorkload {
            group: "/groups/g".into(),
            clients: ctx.clients(),
            churn_ms_max: ctx.value_u64("churn_ms_max"),
            session_timeout_ms: ctx.session_timeout_ms(),
        };
        let log = workload::spawn(ctx, &w);
        Box::new(Run {
            log,
            group: w.group,
        })
    }

    struct Run {
        log: MembershipLog,
        group: String,
    }

    impl Running for Run {
        fn ending(&self) -> Ending {
            Ending::QuietPhase
        }

        fn judge(self: Box<Self>, ctx: &JudgeCtx) -> Verdict {
            let log = self.log.entries();
            let log = ctx.with_crashes(log, || MembershipEvent::Crashed);
            let final_members: Vec<String> = match ctx.final_node(&self.group) {
                // A member's node is `<member>-<sequence>`.
                Ok(group) => group
                    .map(|g| {
                        g.children
                            .iter()
                            .filter_map(|c| c.split_once('-').map(|(m, _)| m.to_owned()))
                            .collect()
                    })
                    .unwrap_or_default(),
                Err(NoLeader) => return Verdict::no_leader(&log),
            };
            let r = check_membership(&log, member_name, &final_members, &ctx.live_clients());
            Verdict::counted(&log, &r, r.violations.clone(), &super::COUNTED)
        }
    }
}
