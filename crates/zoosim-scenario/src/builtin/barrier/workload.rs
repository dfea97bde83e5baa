//! One coordinator raising and removing a barrier per round, and waiters
//! that wait on each round once it is raised, under whatever the nemesis
//! does. Every outcome goes into the log [`zoosim_core::check::barrier`] judges.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::time::{sleep, timeout, Instant};

use crate::sim::{client_sessions, finish, flavour_of, replace, Finished, OutcomeLog, RunCtx};
use zoosim_core::check::barrier::BarrierEvent;
use zoosim_recipes::barrier::{Barrier, BarrierCommand, BarrierOutcome, BarrierVariant};
use zoosim_recipes::Driver;
use zoosim_sim::sim::nemesis::ClientSlots;
use zoosim_sim::sim::{Ensemble, SimZk};

#[derive(Clone, Debug)]
pub(super) struct BarrierWorkload {
    pub dir: String,
    /// Client 0 coordinates; the others wait.
    pub clients: usize,
    pub hold_ms_max: u64,
    pub session_timeout_ms: u64,
    pub variant: BarrierVariant,
    /// Rounds the coordinator runs, after which everyone stops once past
    /// the last; 0: until the run ends.
    pub rounds: u32,
}

pub(super) type BarrierLog = OutcomeLog<BarrierEvent>;

/// What the coordinator has done, shared with the waiters (the test's own
/// bookkeeping, not the recipe: waiters learn which round to wait on).
#[derive(Default)]
struct Rounds {
    /// The last round raised.
    raised: Option<u64>,
    /// The coordinator's next step: (round, raised yet).
    next: (u64, bool),
    /// The coordinator removed its last round.
    over: bool,
}

fn path(w: &BarrierWorkload, round: u64) -> String {
    format!("{}/r{round}", w.dir)
}

pub(super) fn spawn(ctx: &mut RunCtx, w: &BarrierWorkload) -> (BarrierLog, Finished) {
    let (ensemble, slots, until) = (ctx.ensemble().clone(), ctx.slots().clone(), ctx.until());
    let log = BarrierLog::default();
    let finished = Finished::default();
    let rounds: Arc<Mutex<Rounds>> = Arc::default();
    for c in 0..w.clients {
        let (e, s, w, l, r, f) = (
            ensemble.clone(),
            slots.clone(),
            w.clone(),
            log.clone(),
            rounds.clone(),
            finished.clone(),
        );
        ctx.spawn(supervise(c, e, s, w, l, r, f, until))
    }
    (log, finished)
}

#[allow(clippy::too_many_arguments)]
async fn supervise(
    c: usize,
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    w: BarrierWorkload,
    log: BarrierLog,
    rounds: Arc<Mutex<Rounds>>,
    finished: Finished,
    until: Instant,
) {
    let passed = Arc::new(Mutex::new(None::<u64>));
    let t = w.session_timeout_ms;
    let s = slots.clone();
    client_sessions(c, ensemble, slots, flavour_of(c), t, until, |zk| {
        let (w, log, rounds) = (w.clone(), log.clone(), rounds.clone());
        let (passed, s, finished) = (passed.clone(), s.clone(), finished.clone());
        async move {
            let lost = if c == 0 {
                coordinate(zk.clone(), w, log, rounds, until).await
            } else {
                wait(c, zk.clone(), w, log, rounds, passed, until).await
            };
            match lost {
                Some(lost) => lost,
                None => finish(&s, c, &zk, &finished).await,
            }
        }
    })
    .await
}

/// Runs one command to its outcome; Some(false) if the session is lost.
/// (The loops below return whether the session was lost, or None once
/// the client did all its rounds.)
async fn run(
    driver: &mut Driver<'_, SimZk, Barrier>,
    command: BarrierCommand,
    until: Instant,
) -> Option<bool> {
    driver.command(command);
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match timeout(left, driver.next_outcome()).await.ok()? {
            BarrierOutcome::Set | BarrierOutcome::Removed | BarrierOutcome::Passed => {
                return Some(true)
            }
            BarrierOutcome::Woken => {}
            _ => return Some(false),
        }
    }
}

async fn lost(zk: &SimZk, log: &BarrierLog, c: usize) -> Option<bool> {
    log.record(c, BarrierEvent::Lost);
    Some(replace(zk).await)
}

async fn coordinate(
    zk: Arc<SimZk>,
    w: BarrierWorkload,
    log: BarrierLog,
    rounds: Arc<Mutex<Rounds>>,
    until: Instant,
) -> Option<bool> {
    loop {
        let (round, raised) = rounds.lock().unwrap().next;
        if w.rounds > 0 && round >= u64::from(w.rounds) {
            rounds.lock().unwrap().over = true;
            return None;
        }
        let mut driver = Driver::new(&*zk, Barrier::new(&path(&w, round)));
        if !raised {
            match run(&mut driver, BarrierCommand::Set, until).await {
                Some(true) => {}
                Some(false) => return lost(&zk, &log, 0).await,
                None => return Some(false),
            }
            log.record(0, BarrierEvent::Raised { round });
            {
                let mut r = rounds.lock().unwrap();
                r.raised = Some(round);
                r.next = (round, true);
            }
            let hold = thread_rng().gen_range(50..=w.hold_ms_max);
            sleep(Duration::from_millis(hold)).await;
        }
        log.record(0, BarrierEvent::RemoveCalled { round });
        match run(&mut driver, BarrierCommand::Remove, until).await {
            Some(true) => {}
            Some(false) => return lost(&zk, &log, 0).await,
            None => return Some(false),
        }
        log.record(0, BarrierEvent::Removed { round });
        rounds.lock().unwrap().next = (round + 1, false);
        sleep(Duration::from_millis(thread_rng().gen_range(0..100))).await;
    }
}

async fn wait(
    c: usize,
    zk: Arc<SimZk>,
    w: BarrierWorkload,
    log: BarrierLog,
    rounds: Arc<Mutex<Rounds>>,
    passed: Arc<Mutex<Option<u64>>>,
    until: Instant,
) -> Option<bool> {
    loop {
        let (raised, over) = {
            let r = rounds.lock().unwrap();
            (r.raised, r.over)
        };
        let last = *passed.lock().unwrap();
        let Some(round) = raised.filter(|&r| last.is_none_or(|l| r > l)) else {
            // The harness's own bookkeeping: which round is up.
            if over {
                return None; // past the last round
            }
            if Instant::now() >= until {
                return Some(false);
            }
            sleep(Duration::from_millis(20)).await;
            continue;
        };
        log.record(c, BarrierEvent::WaitCalled { round });
        let mut driver = Driver::new(&*zk, Barrier::with_variant(&path(&w, round), w.variant));
        match run(&mut driver, BarrierCommand::Wait, until).await {
            Some(true) => {}
            Some(false) => return lost(&zk, &log, c).await,
            None => return Some(false),
        }
        log.record(c, BarrierEvent::Passed { round });
        *passed.lock().unwrap() = Some(round);
    }
}
