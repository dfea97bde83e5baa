//! One coordinator raising and removing a barrier per round, and waiters
//! that wait on each round once it is raised, under whatever the nemesis
//! does. Every outcome goes into the log [`crate::check::barrier`] judges.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::task::JoinHandle;
use madsim::time::{sleep, timeout, Instant};

use super::now_ms;
use crate::check::barrier::BarrierEvent;
use crate::check::Entry;
use crate::client::Zk;
use crate::ensemble::sim::nemesis::ClientSlots;
use crate::ensemble::sim::{Ensemble, Flavour, SimZk};
use crate::recipes::barrier::{Barrier, BarrierCommand, BarrierOutcome, BarrierVariant};
use crate::recipes::Driver;

#[derive(Clone, Debug)]
pub struct BarrierWorkload {
    pub dir: String,
    /// Client 0 coordinates; the others wait.
    pub clients: usize,
    pub hold_ms_max: u64,
    pub session_timeout_ms: u64,
    pub variant: BarrierVariant,
}

impl Default for BarrierWorkload {
    fn default() -> Self {
        BarrierWorkload {
            dir: "/barriers".into(),
            clients: 5,
            hold_ms_max: 800,
            session_timeout_ms: 4000,
            variant: BarrierVariant::Correct,
        }
    }
}

pub type BarrierLog = Arc<Mutex<Vec<Entry<BarrierEvent>>>>;

/// What the coordinator has done, shared with the waiters (the test's own
/// bookkeeping, not the recipe: waiters learn which round to wait on).
#[derive(Default)]
struct Rounds {
    /// The last round raised.
    raised: Option<u64>,
    /// The coordinator's next step: (round, raised yet).
    next: (u64, bool),
}

fn push(log: &BarrierLog, client: usize, event: BarrierEvent) {
    log.lock().unwrap().push(Entry {
        at_ms: now_ms(),
        client,
        event,
    });
}

fn path(w: &BarrierWorkload, round: u64) -> String {
    format!("{}/r{round}", w.dir)
}

pub fn spawn(
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    w: &BarrierWorkload,
    until: Instant,
) -> (BarrierLog, Vec<JoinHandle<()>>) {
    let log = BarrierLog::default();
    let rounds: Arc<Mutex<Rounds>> = Arc::default();
    {
        let mut s = slots.lock().unwrap();
        if s.len() < w.clients {
            s.resize_with(w.clients, Default::default);
        }
    }
    let tasks = (0..w.clients)
        .map(|c| {
            let (e, s, w, l, r) = (
                ensemble.clone(),
                slots.clone(),
                w.clone(),
                log.clone(),
                rounds.clone(),
            );
            madsim::task::spawn(supervise(c, e, s, w, l, r, until))
        })
        .collect();
    (log, tasks)
}

async fn supervise(
    c: usize,
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    w: BarrierWorkload,
    log: BarrierLog,
    rounds: Arc<Mutex<Rounds>>,
    until: Instant,
) {
    let flavour = if c % 2 == 0 {
        Flavour::Java
    } else {
        Flavour::Rust
    };
    let servers = ensemble.config().servers;
    let passed = Arc::new(Mutex::new(None::<u64>));
    while Instant::now() < until {
        let server = thread_rng().gen_range(0..servers);
        let Ok(zk) = ensemble
            .connect_with(server, w.session_timeout_ms, flavour)
            .await
        else {
            sleep(Duration::from_millis(200)).await;
            continue;
        };
        let zk = Arc::new(zk);
        let _ = zk.try_next_event();
        slots.lock().unwrap()[c].zk = Some(zk.clone());
        let node = Handle::current()
            .get_node(zk.node())
            .expect("the client's node");
        let run = if c == 0 {
            node.spawn(coordinate(
                zk.clone(),
                w.clone(),
                log.clone(),
                rounds.clone(),
                until,
            ))
        } else {
            node.spawn(wait(
                c,
                zk.clone(),
                w.clone(),
                log.clone(),
                rounds.clone(),
                passed.clone(),
                until,
            ))
        };
        let ended = run.await;
        slots.lock().unwrap()[c].zk = None;
        match ended {
            Ok(true) => continue,
            _ => return,
        }
    }
}

/// Runs one command to its outcome; Some(false) if the session is lost.
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

async fn lost(zk: &SimZk, log: &BarrierLog, c: usize) -> bool {
    push(log, c, BarrierEvent::Lost);
    let bound = Duration::from_millis(zk.session_timeout_ms());
    let _ = timeout(bound, zk.close()).await;
    true
}

async fn coordinate(
    zk: Arc<SimZk>,
    w: BarrierWorkload,
    log: BarrierLog,
    rounds: Arc<Mutex<Rounds>>,
    until: Instant,
) -> bool {
    loop {
        let (round, raised) = rounds.lock().unwrap().next;
        let mut driver = Driver::new(&*zk, Barrier::new(&path(&w, round)));
        if !raised {
            match run(&mut driver, BarrierCommand::Set, until).await {
                Some(true) => {}
                Some(false) => return lost(&zk, &log, 0).await,
                None => return false,
            }
            push(&log, 0, BarrierEvent::Raised { round });
            {
                let mut r = rounds.lock().unwrap();
                r.raised = Some(round);
                r.next = (round, true);
            }
            let hold = thread_rng().gen_range(50..=w.hold_ms_max);
            sleep(Duration::from_millis(hold)).await;
        }
        push(&log, 0, BarrierEvent::RemoveCalled { round });
        match run(&mut driver, BarrierCommand::Remove, until).await {
            Some(true) => {}
            Some(false) => return lost(&zk, &log, 0).await,
            None => return false,
        }
        push(&log, 0, BarrierEvent::Removed { round });
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
) -> bool {
    loop {
        let raised = rounds.lock().unwrap().raised;
        let last = *passed.lock().unwrap();
        let Some(round) = raised.filter(|&r| last.is_none_or(|l| r > l)) else {
            // The harness's own bookkeeping: which round is up.
            if Instant::now() >= until {
                return false;
            }
            sleep(Duration::from_millis(20)).await;
            continue;
        };
        push(&log, c, BarrierEvent::WaitCalled { round });
        let mut driver = Driver::new(&*zk, Barrier::with_variant(&path(&w, round), w.variant));
        match run(&mut driver, BarrierCommand::Wait, until).await {
            Some(true) => {}
            Some(false) => return lost(&zk, &log, c).await,
            None => return false,
        }
        push(&log, c, BarrierEvent::Passed { round });
        *passed.lock().unwrap() = Some(round);
    }
}
