//! Clients going through a double barrier round after round (one barrier
//! node per round): enter, compute, leave. A client whose session is lost
//! enters the same round again with a new session, so every live client
//! visits every round. Every outcome goes into the log
//! [`zoosim_core::check::double_barrier`] judges.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::time::{sleep, timeout, Instant};

use crate::sim::{client_sessions, finish, flavour_of, replace, Finished, OutcomeLog, RunCtx};
use zoosim_client::Zk;
use zoosim_core::check::double_barrier::DoubleBarrierEvent;
use zoosim_recipes::double_barrier::{DoubleBarrier, DoubleBarrierCommand, DoubleBarrierOutcome};
use zoosim_recipes::Driver;
use zoosim_sim::sim::nemesis::ClientSlots;
use zoosim_sim::sim::{Ensemble, SimZk};

#[derive(Clone, Debug)]
pub(super) struct DoubleBarrierWorkload {
    pub dir: String,
    pub clients: usize,
    pub threshold: usize,
    pub compute_ms_max: u64,
    pub session_timeout_ms: u64,
    /// Rounds per client, then it stops; 0: until the run ends.
    pub rounds: u32,
}

pub(super) type DoubleBarrierLog = OutcomeLog<DoubleBarrierEvent>;

pub(super) fn spawn(ctx: &mut RunCtx, w: &DoubleBarrierWorkload) -> (DoubleBarrierLog, Finished) {
    let (ensemble, slots, until) = (ctx.ensemble().clone(), ctx.slots().clone(), ctx.until());
    let log = DoubleBarrierLog::default();
    let finished = Finished::default();
    for c in 0..w.clients {
        let (e, s, w, l) = (ensemble.clone(), slots.clone(), w.clone(), log.clone());
        ctx.spawn(supervise(c, e, s, w, l, finished.clone(), until))
    }
    (log, finished)
}

async fn supervise(
    c: usize,
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    w: DoubleBarrierWorkload,
    log: DoubleBarrierLog,
    finished: Finished,
    until: Instant,
) {
    let round = Arc::new(Mutex::new(0u64));
    let t = w.session_timeout_ms;
    let s = slots.clone();
    client_sessions(c, ensemble, slots, flavour_of(c), t, until, |zk| {
        let (s, finished) = (s.clone(), finished.clone());
        let session = session(c, zk.clone(), w.clone(), log.clone(), round.clone(), until);
        async move {
            match session.await {
                Some(lost) => lost,
                None => finish(&s, c, &zk, &finished).await,
            }
        }
    })
    .await
}

/// True when the session was lost (open another, same round); None once
/// the client went through all its rounds.
async fn session(
    c: usize,
    zk: Arc<SimZk>,
    w: DoubleBarrierWorkload,
    log: DoubleBarrierLog,
    round: Arc<Mutex<u64>>,
    until: Instant,
) -> Option<bool> {
    loop {
        let r = *round.lock().unwrap();
        if w.rounds > 0 && r >= u64::from(w.rounds) {
            return None;
        }
        let name = format!("c{c}");
        let machine = DoubleBarrier::new(
            &format!("{}/r{r}", w.dir),
            &name,
            zk.session_id(),
            w.threshold,
        );
        let mut driver = Driver::new(&*zk, machine);
        for (command, called, done) in [
            (
                DoubleBarrierCommand::Enter,
                DoubleBarrierEvent::EnterCalled { round: r },
                DoubleBarrierEvent::Entered { round: r },
            ),
            (
                DoubleBarrierCommand::Leave,
                DoubleBarrierEvent::LeaveCalled { round: r },
                DoubleBarrierEvent::Left { round: r },
            ),
        ] {
            log.record(c, called);
            driver.command(command);
            let left = until.saturating_duration_since(Instant::now());
            match timeout(left, driver.next_outcome()).await {
                Ok(DoubleBarrierOutcome::Entered | DoubleBarrierOutcome::Left) => {
                    log.record(c, done)
                }
                Ok(DoubleBarrierOutcome::Lost { .. }) => {
                    log.record(c, DoubleBarrierEvent::Lost);
                    return Some(replace(&zk).await);
                }
                Ok(other) => {
                    log.record(
                        c,
                        DoubleBarrierEvent::Failed {
                            error: format!("{other:?}"),
                        },
                    );
                    return Some(true);
                }
                Err(_) => return Some(false),
            }
            if command == DoubleBarrierCommand::Enter {
                let compute = thread_rng().gen_range(0..=w.compute_ms_max);
                sleep(Duration::from_millis(compute)).await;
            }
        }
        *round.lock().unwrap() += 1;
    }
}
