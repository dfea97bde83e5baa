//! Clients following one configuration node and raising the counter it
//! holds with compare-and-set updates until `update_until`, then only
//! following, under whatever the nemesis does. Every outcome goes into the
//! log [`zoosim_core::check::config`] judges.

use std::sync::Arc;
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::time::{timeout, Instant};

use crate::sim::{client_sessions, flavour_of, replace, OutcomeLog, RunCtx};
use zoosim_core::check::config::ConfigEvent;
use zoosim_recipes::config::{Config, ConfigCommand, ConfigOutcome};
use zoosim_recipes::Driver;
use zoosim_sim::sim::nemesis::ClientSlots;
use zoosim_sim::sim::{Ensemble, SimZk};

#[derive(Clone, Debug)]
pub(super) struct ConfigWorkload {
    pub path: String,
    pub clients: usize,
    pub think_ms_max: u64,
    pub session_timeout_ms: u64,
}

pub(super) type ConfigLog = OutcomeLog<ConfigEvent>;

/// Starts the clients (the node must exist with data "0"). Returns the log
/// and, per client, whether its current session is live.
pub(super) fn spawn(ctx: &mut RunCtx, w: &ConfigWorkload) -> ConfigLog {
    let (ensemble, slots) = (ctx.ensemble().clone(), ctx.slots().clone());
    let (update_until, until) = (ctx.fault_end(), ctx.until());
    let log = ConfigLog::default();
    for c in 0..w.clients {
        let (e, s, w, l) = (ensemble.clone(), slots.clone(), w.clone(), log.clone());
        ctx.spawn(supervise(c, e, s, w, l, update_until, until))
    }
    log
}

async fn supervise(
    c: usize,
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    w: ConfigWorkload,
    log: ConfigLog,
    update_until: Instant,
    until: Instant,
) {
    let t = w.session_timeout_ms;
    client_sessions(c, ensemble, slots, flavour_of(c), t, until, |zk| {
        log.record(c, ConfigEvent::SessionStarted);
        session(c, zk, w.clone(), log.clone(), update_until, until)
    })
    .await
}

/// True when the session was lost (open another).
async fn session(
    c: usize,
    zk: Arc<SimZk>,
    w: ConfigWorkload,
    log: ConfigLog,
    update_until: Instant,
    until: Instant,
) -> bool {
    let mut driver = Driver::new(&*zk, Config::new(&w.path));
    driver.command(ConfigCommand::Follow);
    let mut view: Option<(i32, i64)> = None;
    let mut next_update = Instant::now();
    loop {
        // Wait for news, or for the time of our next update.
        let now = Instant::now();
        if now >= until {
            return false;
        }
        let updating = driver.machine().is_updating();
        let wake = if now < update_until && !updating && view.is_some() {
            next_update.min(until)
        } else {
            until
        };
        match timeout(wake.saturating_duration_since(now), driver.next_outcome()).await {
            Ok(outcome) => {
                let event = match outcome {
                    ConfigOutcome::Value { data, version } => {
                        let count = String::from_utf8_lossy(&data).parse().unwrap_or(-1);
                        view = Some((version, count));
                        ConfigEvent::Value { version, count }
                    }
                    ConfigOutcome::Missing => ConfigEvent::Missing,
                    ConfigOutcome::Set { version } => ConfigEvent::Set { version },
                    ConfigOutcome::Conflict => ConfigEvent::Conflict,
                    ConfigOutcome::Lost { .. } => {
                        log.record(c, ConfigEvent::Lost);
                        return replace(&zk).await;
                    }
                    ConfigOutcome::Refused => ConfigEvent::Failed {
                        error: "refused".into(),
                    },
                    ConfigOutcome::Failed(e) => ConfigEvent::Failed {
                        error: format!("{e:?}"),
                    },
                };
                log.record(c, event);
            }
            Err(_) if Instant::now() >= until => return false,
            Err(_) => {
                // Time to update, from the view we have.
                if let Some((version, count)) = view {
                    log.record(
                        c,
                        ConfigEvent::SetCalled {
                            expected_version: version,
                        },
                    );
                    driver.command(ConfigCommand::CompareAndSet {
                        expected_version: version,
                        data: (count + 1).to_string().into_bytes(),
                    });
                }
                next_update = Instant::now()
                    + Duration::from_millis(thread_rng().gen_range(0..=w.think_ms_max));
            }
        }
    }
}
