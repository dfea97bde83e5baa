//! Clients going through a double barrier round after round (one barrier
//! node per round): enter, compute, leave. A client whose session is lost
//! enters the same round again with a new session, so every live client
//! visits every round. Every outcome goes into the log
//! [`crate::check::double_barrier`] judges.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::task::JoinHandle;
use madsim::time::{sleep, timeout, Instant};

use super::now_ms;
use crate::check::double_barrier::DoubleBarrierEvent;
use crate::check::Entry;
use crate::client::Zk;
use crate::ensemble::sim::nemesis::ClientSlots;
use crate::ensemble::sim::{Ensemble, Flavour, SimZk};
use crate::recipes::double_barrier::{DoubleBarrier, DoubleBarrierCommand, DoubleBarrierOutcome};
use crate::recipes::Driver;

#[derive(Clone, Debug)]
pub struct DoubleBarrierWorkload {
    pub dir: String,
    pub clients: usize,
    pub threshold: usize,
    pub compute_ms_max: u64,
    pub session_timeout_ms: u64,
}

impl Default for DoubleBarrierWorkload {
    fn default() -> Self {
        DoubleBarrierWorkload {
            dir: "/double".into(),
            clients: 5,
            threshold: 3,
            compute_ms_max: 300,
            session_timeout_ms: 4000,
        }
    }
}

pub type DoubleBarrierLog = Arc<Mutex<Vec<Entry<DoubleBarrierEvent>>>>;

fn push(log: &DoubleBarrierLog, client: usize, event: DoubleBarrierEvent) {
    log.lock().unwrap().push(Entry {
        at_ms: now_ms(),
        client,
        event,
    });
}

pub fn spawn(
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    w: &DoubleBarrierWorkload,
    until: Instant,
) -> (DoubleBarrierLog, Vec<JoinHandle<()>>) {
    let log = DoubleBarrierLog::default();
    {
        let mut s = slots.lock().unwrap();
        if s.len() < w.clients {
            s.resize_with(w.clients, Default::default);
        }
    }
    let tasks = (0..w.clients)
        .map(|c| {
            let (e, s, w, l) = (ensemble.clone(), slots.clone(), w.clone(), log.clone());
            madsim::task::spawn(supervise(c, e, s, w, l, until))
        })
        .collect();
    (log, tasks)
}

async fn supervise(
    c: usize,
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    w: DoubleBarrierWorkload,
    log: DoubleBarrierLog,
    until: Instant,
) {
    let flavour = if c % 2 == 0 {
        Flavour::Java
    } else {
        Flavour::Rust
    };
    let servers = ensemble.config().servers;
    let round = Arc::new(Mutex::new(0u64));
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
        let run = node.spawn(session(
            c,
            zk.clone(),
            w.clone(),
            log.clone(),
            round.clone(),
            until,
        ));
        let ended = run.await;
        slots.lock().unwrap()[c].zk = None;
        match ended {
            Ok(true) => continue,
            _ => return,
        }
    }
}

/// True when the session was lost (open another, same round).
async fn session(
    c: usize,
    zk: Arc<SimZk>,
    w: DoubleBarrierWorkload,
    log: DoubleBarrierLog,
    round: Arc<Mutex<u64>>,
    until: Instant,
) -> bool {
    loop {
        let r = *round.lock().unwrap();
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
            push(&log, c, called);
            driver.command(command);
            let left = until.saturating_duration_since(Instant::now());
            match timeout(left, driver.next_outcome()).await {
                Ok(DoubleBarrierOutcome::Entered | DoubleBarrierOutcome::Left) => {
                    push(&log, c, done)
                }
                Ok(DoubleBarrierOutcome::Lost { .. }) => {
                    push(&log, c, DoubleBarrierEvent::Lost);
                    let bound = Duration::from_millis(zk.session_timeout_ms());
                    let _ = timeout(bound, zk.close()).await;
                    return true;
                }
                Ok(other) => {
                    push(
                        &log,
                        c,
                        DoubleBarrierEvent::Failed {
                            error: format!("{other:?}"),
                        },
                    );
                    return true;
                }
                Err(_) => return false,
            }
            if command == DoubleBarrierCommand::Enter {
                let compute = thread_rng().gen_range(0..=w.compute_ms_max);
                sleep(Duration::from_millis(compute)).await;
            }
        }
        *round.lock().unwrap() += 1;
    }
}
