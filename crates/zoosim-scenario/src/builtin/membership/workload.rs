//! Clients in one group: each joins and follows the group, and until
//! `churn_until` leaves and joins again now and then; afterwards it stays
//! joined and follows, under whatever the nemesis does. Every outcome goes
//! into the log [`zoosim_core::check::membership`] judges.

use std::sync::Arc;
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::time::{timeout, Instant};

use crate::sim::{client_sessions, flavour_of, replace, OutcomeLog, RunCtx};
use zoosim_core::check::membership::MembershipEvent;
use zoosim_recipes::membership::{Membership, MembershipCommand, MembershipOutcome};
use zoosim_recipes::Driver;
use zoosim_sim::sim::nemesis::ClientSlots;
use zoosim_sim::sim::{Ensemble, SimZk};

#[derive(Clone, Debug)]
pub(super) struct MembershipWorkload {
    pub group: String,
    pub clients: usize,
    pub churn_ms_max: u64,
    pub session_timeout_ms: u64,
}

/// Client `c`'s member name.
pub(super) fn member_name(c: usize) -> String {
    format!("m{c}")
}

pub(super) type MembershipLog = OutcomeLog<MembershipEvent>;

pub(super) fn spawn(ctx: &mut RunCtx, w: &MembershipWorkload) -> MembershipLog {
    let (ensemble, slots) = (ctx.ensemble().clone(), ctx.slots().clone());
    let (churn_until, until) = (ctx.fault_end(), ctx.until());
    let log = MembershipLog::default();
    for c in 0..w.clients {
        let (e, s, w, l) = (ensemble.clone(), slots.clone(), w.clone(), log.clone());
        ctx.spawn(supervise(c, e, s, w, l, churn_until, until))
    }
    log
}

async fn supervise(
    c: usize,
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    w: MembershipWorkload,
    log: MembershipLog,
    churn_until: Instant,
    until: Instant,
) {
    let t = w.session_timeout_ms;
    client_sessions(c, ensemble, slots, flavour_of(c), t, until, |zk| {
        log.record(c, MembershipEvent::SessionStarted);
        let guid = format!("{:08x}", thread_rng().gen::<u32>());
        let machine = Membership::new(&w.group, &member_name(c), &guid);
        session(c, zk, machine, w.clone(), log.clone(), churn_until, until)
    })
    .await
}

/// True when the session was lost (open another).
async fn session(
    c: usize,
    zk: Arc<SimZk>,
    machine: Membership,
    w: MembershipWorkload,
    log: MembershipLog,
    churn_until: Instant,
    until: Instant,
) -> bool {
    let mut driver = Driver::new(&*zk, machine);
    driver.command(MembershipCommand::Follow);
    log.record(c, MembershipEvent::JoinCalled);
    driver.command(MembershipCommand::Join);
    let mut next_churn = Instant::now() + churn_delay(&w);
    loop {
        let now = Instant::now();
        if now >= until {
            return false;
        }
        let wake = if now < churn_until && !driver.machine().is_busy() {
            next_churn.min(until)
        } else if !driver.machine().is_busy() && !driver.machine().is_member() {
            now // after the churn: join again at once
        } else {
            until
        };
        match timeout(wake.saturating_duration_since(now), driver.next_outcome()).await {
            Ok(outcome) => {
                let event = match outcome {
                    MembershipOutcome::Joined => MembershipEvent::Joined,
                    MembershipOutcome::Left => MembershipEvent::Left,
                    MembershipOutcome::Members(members) => MembershipEvent::View { members },
                    MembershipOutcome::Lost { .. } => {
                        log.record(c, MembershipEvent::Lost);
                        return replace(&zk).await;
                    }
                    MembershipOutcome::Refused { command } => MembershipEvent::Failed {
                        error: format!("{command:?} refused"),
                    },
                    MembershipOutcome::Failed(e) => MembershipEvent::Failed {
                        error: format!("{e:?}"),
                    },
                };
                log.record(c, event);
            }
            Err(_) if Instant::now() >= until => return false,
            Err(_) => {
                if driver.machine().is_member() {
                    log.record(c, MembershipEvent::LeaveCalled);
                    driver.command(MembershipCommand::Leave);
                } else {
                    log.record(c, MembershipEvent::JoinCalled);
                    driver.command(MembershipCommand::Join);
                }
                next_churn = Instant::now() + churn_delay(&w);
            }
        }
    }
}

fn churn_delay(w: &MembershipWorkload) -> Duration {
    Duration::from_millis(thread_rng().gen_range(100..=w.churn_ms_max))
}
