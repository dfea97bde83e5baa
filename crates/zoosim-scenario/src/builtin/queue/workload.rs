//! Producers and consumers on one queue (plain or priority): producers
//! enqueue unique items until `produce_until`, consumers take items until
//! the run ends, under whatever the nemesis does. Every outcome goes into
//! the log [`zoosim_core::check::queue`] judges.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::time::{sleep, timeout, Instant};

use crate::sim::{client_sessions, flavour_of, replace, OutcomeLog, RunCtx};
use zoosim_client::{Delivery, Ticket, Zk};
use zoosim_core::check::queue::QueueEvent;
use zoosim_core::proto::{ClientEvent, Op, Reply, SessionId, ZkError};
use zoosim_recipes::queue::{priority_rank, Consumer, Producer, QueueCommand, QueueOutcome};
use zoosim_recipes::{base_name, sequence_of, Driver, Machine};
use zoosim_sim::sim::nemesis::ClientSlots;
use zoosim_sim::sim::{Ensemble, SimZk};

#[derive(Clone, Debug)]
pub(super) struct QueueWorkload {
    pub dir: String,
    pub producers: usize,
    pub consumers: usize,
    /// A priority queue: each producer uses priority `c % 3`.
    pub priority: bool,
    pub think_ms_max: u64,
    pub session_timeout_ms: u64,
}

pub(super) type QueueLog = OutcomeLog<QueueEvent>;

impl QueueWorkload {
    /// The scenario's workload, for the queue or (`priority`) the priority queue.
    pub(super) fn of(ctx: &RunCtx, priority: bool) -> QueueWorkload {
        QueueWorkload {
            dir: "/queues/q".into(),
            producers: ctx.value_u64("producers") as usize,
            consumers: ctx.value_u64("consumers") as usize,
            priority,
            think_ms_max: ctx.value_u64("think_ms_max"),
            session_timeout_ms: ctx.session_timeout_ms(),
        }
    }
}

/// What a queue's consumer machine must be.
pub(super) trait ConsumerMachine:
    Machine<Command = QueueCommand, Outcome = QueueOutcome> + Send + 'static
{
}

impl<M: Machine<Command = QueueCommand, Outcome = QueueOutcome> + Send + 'static> ConsumerMachine
    for M
{
}

/// Starts producers (clients `0..producers`) and consumers (the rest);
/// producers stop enqueueing at `produce_until`, everyone stops at `until`.
pub(super) fn spawn(ctx: &mut RunCtx, w: &QueueWorkload) -> QueueLog {
    let priority = w.priority;
    spawn_with(ctx, w, move |dir| Consumer::new(dir, priority))
}

/// [`spawn`] with consumers' machines from `consumer` (given the queue's
/// directory), one per session.
pub(super) fn spawn_with<M: ConsumerMachine>(
    ctx: &mut RunCtx,
    w: &QueueWorkload,
    consumer: impl Fn(&str) -> M + Clone + Send + Sync + 'static,
) -> QueueLog {
    let (ensemble, slots) = (ctx.ensemble().clone(), ctx.slots().clone());
    let (produce_until, until) = (ctx.fault_end(), ctx.until());
    let log = QueueLog::default();
    let n = w.producers + w.consumers;
    for c in 0..n {
        let (e, s, w, l) = (ensemble.clone(), slots.clone(), w.clone(), log.clone());
        let make = consumer.clone();
        ctx.spawn(supervise(c, e, s, w, l, make, produce_until, until))
    }
    log
}

#[allow(clippy::too_many_arguments)]
async fn supervise<M: ConsumerMachine>(
    c: usize,
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    w: QueueWorkload,
    log: QueueLog,
    consumer: impl Fn(&str) -> M + Clone + Send + Sync + 'static,
    produce_until: Instant,
    until: Instant,
) {
    // A producer's item numbers run on across its sessions.
    let next_item = Arc::new(Mutex::new(0u64));
    let t = w.session_timeout_ms;
    client_sessions(c, ensemble, slots, flavour_of(c), t, until, |zk| {
        let (w, log, next_item) = (w.clone(), log.clone(), next_item.clone());
        let consumer = consumer.clone();
        async move {
            if c < w.producers {
                let guid = format!("c{c}s{:08x}", thread_rng().gen::<u32>());
                let priority = w.priority.then_some((c % 3) as u8);
                let machine = Producer::new(&w.dir, &guid, priority);
                produce(c, zk, machine, w, log, next_item, produce_until, until).await
            } else {
                let machine = consumer(&w.dir);
                consume(c, zk, machine, &w, log, until).await
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

async fn consume<M: ConsumerMachine>(
    c: usize,
    zk: Arc<SimZk>,
    machine: M,
    w: &QueueWorkload,
    log: QueueLog,
    until: Instant,
) -> bool {
    // A priority consumer's lists go into the log: the oracle judges its
    // takes against them.
    let listing = Listing {
        zk: &zk,
        dir: w.priority.then_some(w.dir.as_str()),
        c,
        log: &log,
        listings: Mutex::new(BTreeSet::new()),
    };
    let mut driver = Driver::new(&listing, machine);
    loop {
        driver.command(QueueCommand::Take);
        match wait(&mut driver, c, &log, until, None).await {
            Some(true) => {}
            Some(false) => return replace(&zk).await,
            None => return false,
        }
    }
}

/// A consumer's handle that logs what each of its listings of `dir`
/// showed, when the reply comes (before the machine takes it).
struct Listing<'a> {
    zk: &'a SimZk,
    /// The queue's directory; None: log nothing.
    dir: Option<&'a str>,
    c: usize,
    log: &'a QueueLog,
    /// Submitted listings of `dir` whose replies have not been taken yet.
    listings: Mutex<BTreeSet<Ticket>>,
}

impl Listing<'_> {
    fn is_listing(&self, op: &Op) -> bool {
        matches!((op, self.dir), (Op::GetChildren { path, .. }, Some(d)) if path == d)
    }

    fn note(&self, reply: &Result<Reply, ZkError>) {
        if let Ok(Reply::GetChildren { children, .. }) = reply {
            let items = children.iter().filter_map(|n| priority_rank(n)).collect();
            self.log.record(self.c, QueueEvent::Listed { items });
        }
    }

    /// Logs a listing's reply as it is taken from the stream.
    fn taken(&self, delivery: &Delivery) {
        if let Delivery::Reply(ticket, reply) = delivery {
            if self.listings.lock().unwrap().remove(ticket) {
                self.note(reply);
            }
        }
    }
}

impl Zk for Listing<'_> {
    fn session_id(&self) -> SessionId {
        self.zk.session_id()
    }

    fn session_timeout_ms(&self) -> u64 {
        self.zk.session_timeout_ms()
    }

    fn call(&self, op: Op) -> impl Future<Output = Result<Reply, ZkError>> + Send {
        let listing = self.is_listing(&op);
        let call = self.zk.call(op);
        async move {
            let reply = call.await;
            if listing {
                self.note(&reply);
            }
            reply
        }
    }

    fn submit(&self, op: Op) -> Ticket {
        let listing = self.is_listing(&op);
        // Noted before the reply can be taken: a reply answered at once
        // is in the stream when submit returns.
        let mut listings = self.listings.lock().unwrap();
        let ticket = self.zk.submit(op);
        if listing {
            listings.insert(ticket);
        }
        ticket
    }

    async fn next_delivery(&self) -> Delivery {
        let delivery = self.zk.next_delivery().await;
        self.taken(&delivery);
        delivery
    }

    fn try_next_delivery(&self) -> Option<Delivery> {
        let delivery = self.zk.try_next_delivery()?;
        self.taken(&delivery);
        Some(delivery)
    }

    fn next_event(&self) -> impl Future<Output = ClientEvent> + Send {
        self.zk.next_event()
    }

    fn try_next_event(&self) -> Option<ClientEvent> {
        self.zk.try_next_event()
    }

    fn close(&self) -> impl Future<Output = Result<(), ZkError>> + Send {
        self.zk.close()
    }
}

/// Runs until the command's outcome, logging everything: Some(true) when
/// it went through, Some(false) when the session is lost, None at `until`.
/// `enqueuing`: the item a producer is enqueuing.
async fn wait<Z: Zk + Sync, M: Machine<Command = QueueCommand, Outcome = QueueOutcome>>(
    driver: &mut Driver<'_, Z, M>,
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
