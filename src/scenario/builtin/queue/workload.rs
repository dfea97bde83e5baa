//! Producers and consumers on one queue (plain or priority): producers
//! enqueue unique items until `produce_until`, consumers take items until
//! the run ends, under whatever the nemesis does. Every outcome goes into
//! the log [`crate::check::queue`] judges.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::time::{sleep, timeout, Instant};

use crate::check::queue::QueueEvent;
use crate::ensemble::sim::nemesis::ClientSlots;
use crate::ensemble::sim::{Ensemble, SimZk};
use crate::recipes::queue::{Consumer, Producer, QueueCommand, QueueOutcome};
use crate::recipes::{base_name, sequence_of, Driver, Machine};
use crate::scenario::sim::{client_sessions, flavour_of, replace, OutcomeLog, RunCtx};

#[derive(Clone, Debug)]
pub struct QueueWorkload {
    pub dir: String,
    pub producers: usize,
    pub consumers: usize,
    /// A priority queue: each producer uses priority `c % 3`.
    pub priority: bool,
    pub think_ms_max: u64,
    pub session_timeout_ms: u64,
}

pub type QueueLog = OutcomeLog<QueueEvent>;

/// Starts producers (clients `0..producers`) and consumers (the rest);
/// producers stop enqueueing at `produce_until`, everyone stops at `until`.
pub fn spawn(ctx: &mut RunCtx, w: &QueueWorkload) -> QueueLog {
    let (ensemble, slots) = (ctx.ensemble().clone(), ctx.slots().clone());
    let (produce_until, until) = (ctx.fault_end(), ctx.until());
    let log = QueueLog::default();
    let n = w.producers + w.consumers;
    for c in 0..n {
        let (e, s, w, l) = (ensemble.clone(), slots.clone(), w.clone(), log.clone());
        ctx.spawn(supervise(c, e, s, w, l, produce_until, until))
    }
    log
}

async fn supervise(
    c: usize,
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    w: QueueWorkload,
    log: QueueLog,
    produce_until: Instant,
    until: Instant,
) {
    // A producer's item numbers run on across its sessions.
    let next_item = Arc::new(Mutex::new(0u64));
    let t = w.session_timeout_ms;
    client_sessions(c, ensemble, slots, flavour_of(c), t, until, |zk| {
        let (w, log, next_item) = (w.clone(), log.clone(), next_item.clone());
        async move {
            if c < w.producers {
                let guid = format!("c{c}s{:08x}", thread_rng().gen::<u32>());
                let priority = w.priority.then_some((c % 3) as u8);
                let machine = Producer::new(&w.dir, &guid, priority);
                produce(c, zk, machine, w, log, next_item, produce_until, until).await
            } else {
                let machine = Consumer::new(&w.dir, w.priority);
                consume(c, zk, machine, log, until).await
            }
        }
    })
    .await
}

/// Returns true when the session was lost (open another).
#[allow(clippy::too_many_arguments)]
async fn produce(
    c: usize,
    zk: Arc<SimZk>,
    machine: Producer,
    w: QueueWorkload,
    log: QueueLog,
    next_item: Arc<Mutex<u64>>,
    produce_until: Instant,
    until: Instant,
) -> bool {
    let mut driver = Driver::new(&*zk, machine);
    while Instant::now() < produce_until {
        let item = {
            let mut k = next_item.lock().unwrap();
            *k += 1;
            format!("p{c}-{}", *k)
        };
        log.record(c, QueueEvent::EnqueueCalled { item: item.clone() });
        driver.machine_mut().set_item(item.clone().into_bytes());
        driver.command(QueueCommand::Enqueue);
        match wait(&mut driver, c, &log, until, Some(&item)).await {
            Some(true) => {}
            Some(false) => return replace(&zk).await,
            None => return false,
        }
        let think = thread_rng().gen_range(0..=w.think_ms_max);
        sleep(Duration::from_millis(think)).await;
    }
    false
}

async fn consume(
    c: usize,
    zk: Arc<SimZk>,
    machine: Consumer,
    log: QueueLog,
    until: Instant,
) -> bool {
    let mut driver = Driver::new(&*zk, machine);
    loop {
        driver.command(QueueCommand::Take);
        match wait(&mut driver, c, &log, until, None).await {
            Some(true) => {}
            Some(false) => return replace(&zk).await,
            None => return false,
        }
    }
}

/// Runs until the command's outcome, logging everything: Some(true) when
/// it went through, Some(false) when the session is lost, None at `until`.
/// `enqueuing`: the item a producer is enqueuing.
async fn wait<M: Machine<Command = QueueCommand, Outcome = QueueOutcome>>(
    driver: &mut Driver<'_, SimZk, M>,
    c: usize,
    log: &QueueLog,
    until: Instant,
    enqueuing: Option<&str>,
) -> Option<bool> {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let outcome = timeout(left, driver.next_outcome()).await.ok()?;
        let item = |data: &[u8]| String::from_utf8_lossy(data).into_owned();
        let (event, done) = match outcome {
            QueueOutcome::Enqueued {
                name,
                duplicate_possible,
            } => (
                QueueEvent::Enqueued {
                    item: enqueuing.map_or_else(|| base_name(&name).to_owned(), str::to_owned),
                    duplicate_possible,
                },
                Some(true),
            ),
            QueueOutcome::Recovered { found } => (QueueEvent::Recovered { found }, None),
            QueueOutcome::Claiming { data, .. } => {
                (QueueEvent::Claiming { item: item(&data) }, None)
            }
            QueueOutcome::Taken { name, data } => (
                QueueEvent::Taken {
                    item: item(&data),
                    seq: sequence_of(&name).unwrap_or(0),
                },
                Some(true),
            ),
            QueueOutcome::Missed { name } => (QueueEvent::Missed { item: name }, None),
            QueueOutcome::MaybeTaken { data, .. } => {
                (QueueEvent::MaybeTaken { item: item(&data) }, Some(true))
            }
            QueueOutcome::Woken => continue,
            QueueOutcome::Lost { .. } => (QueueEvent::Lost, Some(false)),
            QueueOutcome::Refused { command } => (
                QueueEvent::Failed {
                    error: format!("{command:?} refused"),
                },
                Some(false),
            ),
            QueueOutcome::Failed(e) => (
                QueueEvent::Failed {
                    error: format!("{e:?}"),
                },
                Some(false),
            ),
        };
        log.record(c, event);
        if let Some(done) = done {
            return Some(done);
        }
    }
}
