//! Name service and configuration: one znode holds a value; clients read
//! it with a watch, and update it with setData at the version they read
//! (a conflict means someone else's update won: read again). The oracle
//! ([`zoosim_core::check::config`]) checks that no update is lost, reads never
//! go back within a session, and every live client converges.

#[cfg(madsim)]
mod workload;

use crate::recipe::Recipe;
use crate::verdict::{counter_names, Counter, Property};
use crate::workload::WorkloadKey;
use zoosim_core::check::config::PROPERTIES;

/// The `configuration` recipe.
#[derive(Clone, Copy, Debug)]
pub struct Configuration;

const KEYS: &[WorkloadKey] = &[
    WorkloadKey::int("clients", "clients reading and updating", 1, 64, 4),
    WorkloadKey::int(
        "think_ms_max",
        "a client's longest pause between two updates",
        0,
        600_000,
        200,
    ),
];

/// The counters, each named once with how it is read off the oracle's
/// report: [`Recipe::counters`] and the judge read this one table.
const COUNTED: [Counter<zoosim_core::check::config::ConfigReport>; 4] = [
    Counter::new("reads", |r| r.reads),
    Counter::new("sets", |r| r.sets),
    Counter::new("conflicts", |r| r.conflicts),
    Counter::new("sessions-lost", |r| r.losses),
];
const COUNTERS: &[&str] = &counter_names(&COUNTED);

impl Recipe for Configuration {
    fn name(&self) -> &str {
        "configuration"
    }

    fn description(&self) -> &str {
        "a watched configuration znode, updated at the version read"
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
    use super::workload::{self, ConfigLog, ConfigWorkload};
    use crate::sim::{Ending, JudgeCtx, NoLeader, RunCtx, Running};
    use crate::verdict::Verdict;
    use zoosim_client::{Zk, ZkExt};
    use zoosim_core::check::config::{check_config, ConfigEvent};
    use zoosim_core::proto::CreateMode;

    pub(super) fn start(ctx: &mut RunCtx) -> Box<dyn Running> {
        let w = ConfigWorkload {
            path: "/config".into(),
            clients: ctx.clients(),
            think_ms_max: ctx.value_u64("think_ms_max"),
            session_timeout_ms: ctx.session_timeout_ms(),
        };
        // The node every client reads exists before any client starts.
        let (e, path, t) = (ctx.ensemble().clone(), w.path.clone(), w.session_timeout_ms);
        ctx.setup(async move {
            let setup = e
                .client(0)
                .timeout_ms(t)
                .connect()
                .await
                .expect("a setup session");
            setup
                .create(&path, b"0", CreateMode::Persistent)
                .await
                .expect("the configuration node");
            let _ = setup.close().await;
        });
        let log = workload::spawn(ctx, &w);
        Box::new(Run { log, path: w.path })
    }

    struct Run {
        log: ConfigLog,
        path: String,
    }

    impl Running for Run {
        fn ending(&self) -> Ending {
            Ending::QuietPhase
        }

        fn judge(self: Box<Self>, ctx: &JudgeCtx) -> Verdict {
            let log = self.log.entries();
            let log = ctx.with_crashes(log, || ConfigEvent::Crashed);
            let final_version = match ctx.final_node(&self.path) {
                Ok(node) => node.map_or(0, |n| n.version),
                Err(NoLeader) => return Verdict::no_leader(&log),
            };
            let r = check_config(&log, final_version, &ctx.live_clients());
            Verdict::counted(&log, &r, r.violations.clone(), &super::COUNTED)
        }
    }
}
