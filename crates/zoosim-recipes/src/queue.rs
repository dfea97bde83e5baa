//! Distributed queue and priority queue (recipes page, "Queues" and
//! "Priority Queues").
//!
//! A producer creates `dir/qn-<guid>-<k>-` PERSISTENT_SEQUENTIAL with the
//! item as data (a priority queue: `dir/queue-<YY>-<guid>-<k>-`, YY the
//! priority, lower first). A consumer lists `dir` with a watch, takes the
//! head — lowest sequence number; for a priority queue lowest (priority,
//! sequence) — by reading it and deleting it; NoNode means another consumer
//! took it: it tries the next. An empty queue waits for NodeChildrenChanged.
//! A priority consumer throws its list away on every child event, since a
//! more urgent item may have arrived.
//!
//! What is promised under ConnectionLoss:
//! * enqueue: the producer syncs and looks for its `<guid>-<k>-` name, and
//!   creates again only if absent — an item is never lost, and duplicated
//!   only if a consumer took the first copy between the loss and the search
//!   (reported as `Enqueued { duplicate_possible: true }`);
//! * take: a delete is retried after the reconnect; NoNode on the retry
//!   means the first delete may have been ours — `MaybeTaken`, the page's
//!   "at most once" caveat made explicit instead of silent.
//!
//! ```
//! # use zoosim_client::local::{LocalConfig, LocalServer};
//! # use zoosim_recipes::queue::{Consumer, Producer, QueueClient};
//! # futures::executor::block_on(async {
//! let server = LocalServer::new(LocalConfig::default());
//! let zk = server.connect(4000);
//! let mut producer = QueueClient::new(&zk, Producer::new("/jobs", "p1", None));
//! producer.enqueue(b"job 1".to_vec()).await.expect("enqueued");
//! let mut consumer = QueueClient::new(&zk, Consumer::new("/jobs", false));
//! assert_eq!(consumer.take().await.expect("taken"), b"job 1".to_vec());
//! # });
//! ```

use super::{
    assert_component, child_path, classify, sequence_of, Driver, Failure, Input, Io, Machine,
    Output, Pending,
};
use zoosim_client::Zk;
use zoosim_core::proto::{CreateMode, EventType, Op, Reply, SessionEvent, ZkError};

/// The item names' common start.
const PLAIN: &str = "qn-";
const PRIORITY: &str = "queue-";

/// A priority queue item's (priority, sequence number), read off its
/// node's name (`queue-<YY>-...<sequence>`); None for any other name. A
/// priority consumer takes the lowest first.
pub fn priority_rank(name: &str) -> Option<(u8, u64)> {
    let seq = sequence_of(name)?;
    let priority = name.strip_prefix(PRIORITY)?.get(..2)?.parse().ok()?;
    Some((priority, seq))
}

/// What the application asks of a queue machine: a [`Producer`] takes `Enqueue`, a
/// [`Consumer`] takes `Take`, one at a time.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum QueueCommand {
    /// Enqueue the item set with [`Producer::set_item`]; answered by
    /// [`QueueOutcome::Enqueued`].
    Enqueue,
    /// Take the queue's head, waiting while the queue is empty; answered by
    /// [`QueueOutcome::Taken`] (or `MaybeTaken`).
    Take,
}

/// What a [`Producer`] or [`Consumer`] reports to the application.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum QueueOutcome {
    /// The item is in the queue as `name`.
    Enqueued {
        /// The item node's path.
        name: String,
        /// Whether the item may be in the queue twice: after a ConnectionLoss the search
        /// found nothing and the producer created again, and a consumer may have taken the
        /// first copy meanwhile.
        duplicate_possible: bool,
    },
    /// After a ConnectionLoss on the create: whether the search found it.
    Recovered {
        /// Whether the search found the item node.
        found: bool,
    },
    /// About to delete `name` (read as `data`): if the client dies now, the
    /// item may be gone without anyone having reported it.
    Claiming {
        /// The item node's name (a child of the queue's node), about to be deleted.
        name: String,
        /// The item's data.
        data: Vec<u8>,
    },
    /// The item is ours: deleted by us.
    Taken {
        /// The item node's name (a child of the queue's node).
        name: String,
        /// The item's data.
        data: Vec<u8>,
    },
    /// Another consumer took `name` first (NoNode).
    Missed {
        /// The item node's name (a child of the queue's node).
        name: String,
    },
    /// Our delete met ConnectionLoss and its retry NoNode: the item is gone,
    /// taken by us or by someone else.
    MaybeTaken {
        /// The item node's name (a child of the queue's node).
        name: String,
        /// The item's data.
        data: Vec<u8>,
    },
    /// A child event reached an idle or waiting consumer.
    Woken,
    /// The session ended: start over with a new one.
    Lost {
        /// Why: `SessionExpired` (also when the session expired or closed).
        reason: ZkError,
    },
    /// A command this machine does not take (`Take` to a producer, `Enqueue` to a
    /// consumer), or one that arrived while busy or after the machine stopped; nothing changed.
    Refused {
        /// The command refused.
        command: QueueCommand,
    },
    /// A ZooKeeper answer the recipe has no way forward from; the machine stops.
    Failed(ZkError),
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum ProducerPhase {
    Idle,
    Creating(Pending),
    Syncing(Pending),
    Searching(Pending),
    Over,
}

/// A queue producer: one item at a time.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Producer {
    dir: String,
    guid: String,
    priority: Option<u8>,
    io: Io<QueueOutcome>,
    phase: ProducerPhase,
    /// The item being enqueued: its number and data.
    item: u64,
    data: Vec<u8>,
    lost: Option<Pending>,
    searched: bool,
}

impl Producer {
    /// A producer for `dir` (created if missing); `priority` (0–99, lower
    /// first) makes it a priority queue's. `guid` unique to the session.
    pub fn new(dir: &str, guid: &str, priority: Option<u8>) -> Producer {
        assert!(
            priority.is_none_or(|p| p < 100),
            "priorities are two digits"
        );
        assert_component("guid", guid);
        Producer {
            dir: dir.to_owned(),
            guid: guid.to_owned(),
            priority,
            io: Io::new(),
            phase: ProducerPhase::Idle,
            item: 0,
            data: Vec::new(),
            lost: None,
            searched: false,
        }
    }

    /// Sets the data of the next item (the command carries no payload, so
    /// the machine stays a small Copy-command machine).
    pub fn set_item(&mut self, data: Vec<u8>) {
        assert_eq!(self.phase, ProducerPhase::Idle, "one item at a time");
        self.data = data;
    }

    /// Sets the priority of the next item (0–99, lower first), between
    /// items, for a producer made for a priority queue: one producer may
    /// enqueue items of several priorities.
    pub fn set_priority(&mut self, priority: u8) {
        assert_eq!(self.phase, ProducerPhase::Idle, "one item at a time");
        assert!(priority < 100, "priorities are two digits");
        assert!(
            self.priority.is_some(),
            "a plain queue's producer has no priority"
        );
        self.priority = Some(priority);
    }

    /// Whether no enqueue is in progress (and the machine has not stopped).
    pub fn is_idle(&self) -> bool {
        self.phase == ProducerPhase::Idle
    }

    /// Whether the machine's session has ended.
    pub fn session_ended(&self) -> bool {
        self.io.has_ended()
    }

    /// `qn-<guid>-<k>-` or `queue-<YY>-<guid>-<k>-`.
    fn prefix(&self) -> String {
        match self.priority {
            None => format!("{PLAIN}{}-{}-", self.guid, self.item),
            Some(p) => format!("{PRIORITY}{p:02}-{}-{}-", self.guid, self.item),
        }
    }

    fn create(&mut self, with_parents: bool) {
        if with_parents {
            let dir = self.dir.clone();
            self.io.create_path(&dir);
        }
        let req = self.io.send(Op::Create {
            path: child_path(&self.dir, &self.prefix()),
            data: self.data.clone(),
            mode: CreateMode::PersistentSequential,
        });
        self.phase = ProducerPhase::Creating(req);
    }

    fn sync(&mut self) {
        let req = self.io.send(Op::Sync {
            path: self.dir.clone(),
        });
        self.phase = ProducerPhase::Syncing(req);
    }

    fn search(&mut self) {
        let req = self.io.send(Op::GetChildren {
            path: self.dir.clone(),
            watch: false,
        });
        self.phase = ProducerPhase::Searching(req);
    }

    fn current(&self) -> Option<Pending> {
        match &self.phase {
            ProducerPhase::Creating(p)
            | ProducerPhase::Syncing(p)
            | ProducerPhase::Searching(p) => Some(*p),
            _ => None,
        }
    }

    fn resend(&mut self) {
        self.lost = None;
        match self.phase {
            // The create's outcome is unknown: look before creating again.
            ProducerPhase::Creating(_) | ProducerPhase::Syncing(_) => self.sync(),
            ProducerPhase::Searching(_) => self.search(),
            _ => unreachable!("nothing to send again"),
        }
    }

    fn enqueued(&mut self, name: String) {
        self.io.report(QueueOutcome::Enqueued {
            name,
            duplicate_possible: self.searched,
        });
        self.item += 1;
        self.searched = false;
        self.phase = ProducerPhase::Idle;
    }

    fn end(&mut self, reason: ZkError) {
        if reason == ZkError::SessionExpired {
            self.io.end(); // a SessionExpired reply says so as much as the event
        }
        if !matches!(self.phase, ProducerPhase::Idle | ProducerPhase::Over) {
            self.io.report(QueueOutcome::Lost { reason });
        }
        self.phase = ProducerPhase::Over;
        self.lost = None;
    }

    /// The reply to `p`, the current phase's request.
    fn on_reply(&mut self, p: Pending, result: Result<Reply, ZkError>) {
        let reply = match result {
            Ok(r) => r,
            Err(e) => match classify(e) {
                Failure::SessionEnded => return self.end(ZkError::SessionExpired),
                Failure::Unknown => {
                    if self.io.may_retry(p) {
                        self.resend();
                    } else {
                        self.lost = Some(p);
                    }
                    return;
                }
                Failure::Answer(ZkError::NoNode) => {
                    return match self.phase {
                        ProducerPhase::Creating(_) => self.create(true),
                        ProducerPhase::Syncing(_) => self.search(),
                        ProducerPhase::Searching(_) => {
                            self.io.report(QueueOutcome::Recovered { found: false });
                            self.create(true)
                        }
                        // Only the phases above send requests (current()).
                        ref phase => {
                            unreachable!("producer: NoNode in {phase:?}, which sent nothing")
                        }
                    };
                }
                Failure::Answer(e) => {
                    self.io.report(QueueOutcome::Failed(e));
                    self.phase = ProducerPhase::Over;
                    return;
                }
            },
        };
        match (self.phase.clone(), reply) {
            (ProducerPhase::Creating(_), Reply::Create { path, .. }) => self.enqueued(path),
            (ProducerPhase::Syncing(_), Reply::Sync) => self.search(),
            (ProducerPhase::Searching(_), Reply::GetChildren { children, .. }) => {
                self.searched = true;
                let prefix = self.prefix();
                let found = children.iter().find(|c| c.starts_with(&prefix)).cloned();
                self.io.report(QueueOutcome::Recovered {
                    found: found.is_some(),
                });
                match found {
                    Some(name) => self.enqueued(child_path(&self.dir, &name)),
                    None => self.create(false),
                }
            }
            (phase, reply) => unreachable!("producer: {reply:?} in {phase:?}"),
        }
    }
}

impl Machine for Producer {
    type Command = QueueCommand;
    type Outcome = QueueOutcome;

    fn handle(&mut self, input: Input<QueueCommand>) {
        match input {
            Input::Command(QueueCommand::Enqueue) if self.phase == ProducerPhase::Idle => {
                self.create(false)
            }
            Input::Command(command) => self.io.report(QueueOutcome::Refused { command }),
            Input::Reply(id, result) => {
                if let Some(p) = self.current().filter(|p| p.op == id) {
                    self.on_reply(p, result);
                } else if result == Err(ZkError::SessionExpired) {
                    self.end(ZkError::SessionExpired);
                }
            }
            Input::Watch(_) => {}
            Input::Session(event) => {
                if self.io.on_session(event) {
                    return self.end(ZkError::SessionExpired);
                }
                if event == SessionEvent::Connected {
                    if let Some(p) = self.lost {
                        if self.io.may_retry(p) {
                            self.resend();
                        }
                    }
                }
            }
        }
    }

    fn poll(&mut self) -> Option<Output<QueueOutcome>> {
        self.io.poll()
    }
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum ConsumerPhase {
    Idle,
    Listing(Pending),
    /// The queue was empty: waiting for NodeChildrenChanged.
    Waiting,
    Reading {
        req: Pending,
        name: String,
    },
    Deleting {
        req: Pending,
        name: String,
        data: Vec<u8>,
        /// Sent again after a ConnectionLoss.
        retried: bool,
    },
    Over,
}

/// A queue consumer: takes one item per `Take`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Consumer {
    dir: String,
    priority: bool,
    io: Io<QueueOutcome>,
    phase: ConsumerPhase,
    /// The rest of the last list, head first.
    candidates: Vec<String>,
    /// A child event came since the last list (a priority consumer then
    /// lists again rather than trusting `candidates`).
    stale: bool,
    lost: Option<Pending>,
}

impl Consumer {
    /// A consumer of `dir`; `priority` for a priority queue.
    pub fn new(dir: &str, priority: bool) -> Consumer {
        Consumer {
            dir: dir.to_owned(),
            priority,
            io: Io::new(),
            phase: ConsumerPhase::Idle,
            candidates: Vec::new(),
            stale: false,
            lost: None,
        }
    }

    /// Whether no take is in progress (and the machine has not stopped).
    pub fn is_idle(&self) -> bool {
        self.phase == ConsumerPhase::Idle
    }

    /// Whether the machine's session has ended.
    pub fn session_ended(&self) -> bool {
        self.io.has_ended()
    }

    /// Queue items in the order they are taken.
    fn order(&self, children: &[String]) -> Vec<String> {
        let marker = if self.priority { PRIORITY } else { PLAIN };
        let mut items: Vec<((u8, u64), &String)> = children
            .iter()
            .filter(|c| c.starts_with(marker))
            .filter_map(|c| {
                let rank = if self.priority {
                    priority_rank(c)?
                } else {
                    (0, sequence_of(c)?)
                };
                Some((rank, c))
            })
            .collect();
        items.sort();
        items.into_iter().map(|(_, c)| c.clone()).collect()
    }

    fn list(&mut self) {
        self.stale = false;
        let req = self.io.send(Op::GetChildren {
            path: self.dir.clone(),
            watch: true,
        });
        self.phase = ConsumerPhase::Listing(req);
    }

    /// The next candidate, or a fresh list.
    fn next(&mut self) {
        if self.candidates.is_empty() || (self.priority && self.stale) {
            return self.list();
        }
        let name = self.candidates.remove(0);
        let req = self.io.send(Op::GetData {
            path: child_path(&self.dir, &name),
            watch: false,
        });
        self.phase = ConsumerPhase::Reading { req, name };
    }

    fn delete(&mut self, name: String, data: Vec<u8>, retried: bool) {
        if !retried {
            self.io.report(QueueOutcome::Claiming {
                name: name.clone(),
                data: data.clone(),
            });
        }
        let req = self.io.send(Op::Delete {
            path: child_path(&self.dir, &name),
            version: -1,
        });
        self.phase = ConsumerPhase::Deleting {
            req,
            name,
            data,
            retried,
        };
    }

    fn current(&self) -> Option<Pending> {
        match &self.phase {
            ConsumerPhase::Listing(p)
            | ConsumerPhase::Reading { req: p, .. }
            | ConsumerPhase::Deleting { req: p, .. } => Some(*p),
            _ => None,
        }
    }

    fn resend(&mut self) {
        self.lost = None;
        match self.phase.clone() {
            ConsumerPhase::Listing(_) => self.list(),
            ConsumerPhase::Reading { name, .. } => {
                self.candidates.insert(0, name);
                self.next();
            }
            ConsumerPhase::Deleting { name, data, .. } => self.delete(name, data, true),
            phase => unreachable!("nothing to send again in {phase:?}"),
        }
    }

    fn end(&mut self, reason: ZkError) {
        if reason == ZkError::SessionExpired {
            self.io.end(); // a SessionExpired reply says so as much as the event
        }
        if !matches!(self.phase, ConsumerPhase::Idle | ConsumerPhase::Over) {
            self.io.report(QueueOutcome::Lost { reason });
        }
        self.phase = ConsumerPhase::Over;
        self.lost = None;
    }

    /// The reply to `p`, the current phase's request.
    fn on_reply(&mut self, p: Pending, result: Result<Reply, ZkError>) {
        let phase = self.phase.clone();
        let reply = match result {
            Ok(r) => r,
            Err(e) => match classify(e) {
                Failure::SessionEnded => return self.end(ZkError::SessionExpired),
                Failure::Unknown => {
                    if self.io.may_retry(p) {
                        self.resend();
                    } else {
                        self.lost = Some(p);
                    }
                    return;
                }
                Failure::Answer(ZkError::NoNode) => {
                    return match phase {
                        // No queue yet: nothing to take; wait for it by
                        // watching its creation is not what the page does,
                        // so list again once something changes.
                        ConsumerPhase::Listing(_) => {
                            let req = self.io.send(Op::Exists {
                                path: self.dir.clone(),
                                watch: true,
                            });
                            self.phase = ConsumerPhase::Listing(req);
                        }
                        ConsumerPhase::Reading { name, .. } => {
                            self.io.report(QueueOutcome::Missed { name });
                            self.next();
                        }
                        ConsumerPhase::Deleting {
                            name,
                            data,
                            retried,
                            ..
                        } => {
                            if retried {
                                self.io.report(QueueOutcome::MaybeTaken { name, data });
                                self.phase = ConsumerPhase::Idle;
                            } else {
                                self.io.report(QueueOutcome::Missed { name });
                                self.next();
                            }
                        }
                        // Only the phases above send requests (current()).
                        phase => unreachable!("consumer: NoNode in {phase:?}, which sent nothing"),
                    };
                }
                Failure::Answer(e) => {
                    self.io.report(QueueOutcome::Failed(e));
                    self.phase = ConsumerPhase::Over;
                    return;
                }
            },
        };
        match (phase, reply) {
            (ConsumerPhase::Listing(_), Reply::GetChildren { children, .. }) => {
                self.candidates = self.order(&children);
                if self.candidates.is_empty() {
                    // The list's watch wakes us when something arrives.
                    self.phase = ConsumerPhase::Waiting;
                } else {
                    self.stale = false;
                    self.next();
                }
            }
            // The queue's parent did not exist; it does now, or its
            // creation will wake us.
            (ConsumerPhase::Listing(_), Reply::Exists(stat)) => match stat {
                Some(_) => self.list(),
                None => self.phase = ConsumerPhase::Waiting,
            },
            (ConsumerPhase::Reading { name, .. }, Reply::GetData { data, .. }) => {
                self.delete(name, data, false)
            }
            (ConsumerPhase::Deleting { name, data, .. }, Reply::Delete) => {
                self.io.report(QueueOutcome::Taken { name, data });
                self.phase = ConsumerPhase::Idle;
            }
            (phase, reply) => unreachable!("consumer: {reply:?} in {phase:?}"),
        }
    }
}

impl Machine for Consumer {
    type Command = QueueCommand;
    type Outcome = QueueOutcome;

    fn handle(&mut self, input: Input<QueueCommand>) {
        match input {
            Input::Command(QueueCommand::Take) if self.phase == ConsumerPhase::Idle => self.next(),
            Input::Command(command) => self.io.report(QueueOutcome::Refused { command }),
            Input::Reply(id, result) => {
                if let Some(p) = self.current().filter(|p| p.op == id) {
                    self.on_reply(p, result);
                } else if result == Err(ZkError::SessionExpired) {
                    self.end(ZkError::SessionExpired);
                }
            }
            Input::Watch(event) => {
                if matches!(
                    event.event_type,
                    EventType::NodeChildrenChanged | EventType::NodeCreated
                ) {
                    self.stale = true;
                    if self.phase == ConsumerPhase::Waiting {
                        self.io.report(QueueOutcome::Woken);
                        self.list();
                    }
                }
            }
            Input::Session(event) => {
                if self.io.on_session(event) {
                    return self.end(ZkError::SessionExpired);
                }
                if event == SessionEvent::Connected {
                    if let Some(p) = self.lost {
                        if self.io.may_retry(p) {
                            self.resend();
                        }
                    }
                }
            }
        }
    }

    fn poll(&mut self) -> Option<Output<QueueOutcome>> {
        self.io.poll()
    }
}

/// Why an enqueue or take did not succeed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum QueueError {
    /// The session ended: start over with a new session.
    Lost(ZkError),
    /// A ZooKeeper answer the recipe has no way forward from.
    Failed(ZkError),
    /// The command made no sense now; nothing changed.
    Refused,
    /// The item is gone, maybe to us (ConnectionLoss on the delete).
    MaybeTaken(Vec<u8>),
}

impl std::fmt::Display for QueueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueueError::Lost(e) => write!(f, "the session ended ({e}): start over with a new one"),
            QueueError::Failed(e) => write!(f, "an answer the recipe has no way forward from: {e}"),
            QueueError::Refused => f.write_str("the command makes no sense now; nothing changed"),
            QueueError::MaybeTaken(item) => write!(
                f,
                "the item ({} bytes) is gone, maybe taken by us: the connection was lost on its delete",
                item.len()
            ),
        }
    }
}

impl std::error::Error for QueueError {}

/// A producer or consumer for application code.
pub struct QueueClient<'z, Z: Zk, M: Machine> {
    driver: Driver<'z, Z, M>,
}

impl<'z, Z: Zk + Sync, M: Machine<Command = QueueCommand, Outcome = QueueOutcome>>
    QueueClient<'z, Z, M>
{
    /// A client running `machine` (a [`Producer`] or a [`Consumer`]) over `zk`.
    pub fn new(zk: &'z Z, machine: M) -> Self {
        QueueClient {
            driver: Driver::new(zk, machine),
        }
    }

    /// Runs the machine until `done` picks an outcome (what it ends with),
    /// or one that says it failed.
    async fn until_done<T>(
        &mut self,
        done: impl Fn(QueueOutcome) -> Option<T>,
    ) -> Result<T, QueueError> {
        loop {
            match self.driver.next_outcome().await {
                QueueOutcome::MaybeTaken { data, .. } => return Err(QueueError::MaybeTaken(data)),
                QueueOutcome::Lost { reason } => return Err(QueueError::Lost(reason)),
                QueueOutcome::Failed(e) => return Err(QueueError::Failed(e)),
                QueueOutcome::Refused { .. } => return Err(QueueError::Refused),
                other => {
                    if let Some(t) = done(other) {
                        return Ok(t);
                    }
                }
            }
        }
    }

    /// The driver underneath, for finer control (single commands, outcomes one by one).
    pub fn driver(&mut self) -> &mut Driver<'z, Z, M> {
        &mut self.driver
    }
}

impl<'z, Z: Zk + Sync> QueueClient<'z, Z, Producer> {
    /// Enqueues one item.
    pub async fn enqueue(&mut self, data: Vec<u8>) -> Result<(), QueueError> {
        self.driver.machine_mut().set_item(data);
        self.driver.command(QueueCommand::Enqueue);
        self.until_done(|o| matches!(o, QueueOutcome::Enqueued { .. }).then_some(()))
            .await
    }
}

impl<'z, Z: Zk + Sync> QueueClient<'z, Z, Consumer> {
    /// Takes the head item, waiting while the queue is empty.
    pub async fn take(&mut self) -> Result<Vec<u8>, QueueError> {
        self.driver.command(QueueCommand::Take);
        self.until_done(|o| match o {
            QueueOutcome::Taken { data, .. } => Some(data),
            _ => None,
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zoosim_core::proto::{Stat, WatchEvent};

    /// Drains a machine: (requests sent, outcomes reported).
    fn drain<M: Machine>(m: &mut M) -> (Vec<(u64, Op)>, Vec<M::Outcome>) {
        let (mut sends, mut outcomes) = (Vec::new(), Vec::new());
        while let Some(o) = m.poll() {
            match o {
                Output::Send(id, op) => sends.push((id, op)),
                Output::Outcome(x) => outcomes.push(x),
            }
        }
        (sends, outcomes)
    }

    fn created(path: &str) -> Result<Reply, ZkError> {
        Ok(Reply::Create {
            path: path.into(),
            stat: Stat::default(),
        })
    }

    fn children(names: &[&str]) -> Result<Reply, ZkError> {
        Ok(Reply::GetChildren {
            children: names.iter().map(|n| n.to_string()).collect(),
            stat: Stat::default(),
        })
    }

    fn producer() -> Producer {
        let mut p = Producer::new("/q", "g", None);
        p.set_item(b"x".to_vec());
        p.handle(Input::Command(QueueCommand::Enqueue));
        p
    }

    #[test]
    fn a_producer_creates_a_sequential_node_with_the_item() {
        let mut p = producer();
        let (sends, _) = drain(&mut p);
        assert_eq!(
            sends,
            vec![(
                0,
                Op::Create {
                    path: "/q/qn-g-0-".into(),
                    data: b"x".to_vec(),
                    mode: CreateMode::PersistentSequential
                }
            )]
        );
        p.handle(Input::Reply(0, created("/q/qn-g-0-0000000007")));
        let (_, out) = drain(&mut p);
        assert_eq!(
            out,
            vec![QueueOutcome::Enqueued {
                name: "/q/qn-g-0-0000000007".into(),
                duplicate_possible: false
            }]
        );
        assert!(p.is_idle());
        // The next item is number 1; priorities go into the name.
        let mut q = Producer::new("/q", "g", Some(3));
        q.handle(Input::Command(QueueCommand::Enqueue));
        let (sends, _) = drain(&mut q);
        assert!(matches!(&sends[0].1, Op::Create { path, .. } if path == "/q/queue-03-g-0-"));
    }

    #[test]
    fn a_producer_creates_missing_parents() {
        let mut p = Producer::new("/a/q", "g", None);
        p.handle(Input::Command(QueueCommand::Enqueue));
        drain(&mut p);
        p.handle(Input::Reply(0, Err(ZkError::NoNode)));
        let (sends, _) = drain(&mut p);
        let paths: Vec<&str> = sends
            .iter()
            .map(|(_, op)| match op {
                Op::Create { path, .. } => path.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(paths, vec!["/a", "/a/q", "/a/q/qn-g-0-"]);
        // The parents' replies are ignored.
        p.handle(Input::Reply(1, Err(ZkError::NodeExists)));
        assert!(drain(&mut p).1.is_empty());
    }

    #[test]
    fn a_producer_searches_before_creating_again_after_connection_loss() {
        let mut p = producer();
        drain(&mut p);
        p.handle(Input::Reply(0, Err(ZkError::ConnectionLoss)));
        assert!(
            drain(&mut p).0.is_empty(),
            "nothing sent while disconnected"
        );
        p.handle(Input::Session(SessionEvent::Disconnected));
        p.handle(Input::Session(SessionEvent::Connected));
        let (sends, _) = drain(&mut p);
        assert_eq!(sends, vec![(1, Op::Sync { path: "/q".into() })]);
        p.handle(Input::Reply(1, Ok(Reply::Sync)));
        let (sends, _) = drain(&mut p);
        assert!(matches!(&sends[0].1, Op::GetChildren { watch: false, .. }));
        // Found: enqueued, flagged.
        let mut found = p.clone();
        found.handle(Input::Reply(
            2,
            children(&["qn-h-0-0000000001", "qn-g-0-0000000002"]),
        ));
        let (_, out) = drain(&mut found);
        assert_eq!(
            out,
            vec![
                QueueOutcome::Recovered { found: true },
                QueueOutcome::Enqueued {
                    name: "/q/qn-g-0-0000000002".into(),
                    duplicate_possible: true
                }
            ]
        );
        // Not found: created again.
        p.handle(Input::Reply(2, children(&["qn-h-0-0000000001"])));
        let (sends, out) = drain(&mut p);
        assert_eq!(out, vec![QueueOutcome::Recovered { found: false }]);
        assert!(matches!(&sends[0].1, Op::Create { path, .. } if path == "/q/qn-g-0-"));
    }

    #[test]
    fn a_producer_reports_a_lost_session_and_refuses_after() {
        let mut p = producer();
        drain(&mut p);
        p.handle(Input::Reply(0, Err(ZkError::SessionExpired)));
        let (_, out) = drain(&mut p);
        assert_eq!(
            out,
            vec![QueueOutcome::Lost {
                reason: ZkError::SessionExpired
            }]
        );
        assert!(p.session_ended());
        p.handle(Input::Command(QueueCommand::Enqueue));
        let (sends, out) = drain(&mut p);
        assert!(sends.is_empty());
        assert_eq!(
            out,
            vec![QueueOutcome::Refused {
                command: QueueCommand::Enqueue
            }]
        );
    }

    fn consumer(priority: bool) -> Consumer {
        let mut c = Consumer::new("/q", priority);
        c.handle(Input::Command(QueueCommand::Take));
        c
    }

    #[test]
    fn a_consumer_waits_on_an_empty_queue_for_a_child_event() {
        let mut c = consumer(false);
        let (sends, _) = drain(&mut c);
        assert_eq!(
            sends,
            vec![(
                0,
                Op::GetChildren {
                    path: "/q".into(),
                    watch: true
                }
            )]
        );
        c.handle(Input::Reply(0, children(&["lock-0000000001"])));
        assert!(drain(&mut c).0.is_empty(), "no items: wait");
        c.handle(Input::Watch(WatchEvent {
            event_type: EventType::NodeChildrenChanged,
            path: "/q".into(),
        }));
        let (sends, out) = drain(&mut c);
        assert_eq!(out, vec![QueueOutcome::Woken]);
        assert!(matches!(&sends[0].1, Op::GetChildren { watch: true, .. }));
    }

    #[test]
    fn a_consumer_takes_the_head_and_moves_on_when_beaten() {
        let mut c = consumer(false);
        drain(&mut c);
        c.handle(Input::Reply(
            0,
            children(&[
                "qn-b-0-0000000009",
                "qn-a-0-0000000003",
                "qn-c-0-0000000005",
            ]),
        ));
        let (sends, _) = drain(&mut c);
        assert!(matches!(&sends[0].1, Op::GetData { path, .. } if path == "/q/qn-a-0-0000000003"));
        // Another consumer took it before we read it.
        c.handle(Input::Reply(1, Err(ZkError::NoNode)));
        let (sends, out) = drain(&mut c);
        assert_eq!(
            out,
            vec![QueueOutcome::Missed {
                name: "qn-a-0-0000000003".into()
            }]
        );
        assert!(matches!(&sends[0].1, Op::GetData { path, .. } if path == "/q/qn-c-0-0000000005"));
        c.handle(Input::Reply(
            2,
            Ok(Reply::GetData {
                data: b"item".to_vec(),
                stat: Stat::default(),
            }),
        ));
        let (sends, out) = drain(&mut c);
        assert_eq!(
            out,
            vec![QueueOutcome::Claiming {
                name: "qn-c-0-0000000005".into(),
                data: b"item".to_vec()
            }]
        );
        assert!(matches!(&sends[0].1, Op::Delete { version: -1, .. }));
        // Beaten at the delete: the next candidate.
        let mut beaten = c.clone();
        beaten.handle(Input::Reply(3, Err(ZkError::NoNode)));
        let (sends, _) = drain(&mut beaten);
        assert!(matches!(&sends[0].1, Op::GetData { path, .. } if path == "/q/qn-b-0-0000000009"));
        c.handle(Input::Reply(3, Ok(Reply::Delete)));
        let (_, out) = drain(&mut c);
        assert_eq!(
            out,
            vec![QueueOutcome::Taken {
                name: "qn-c-0-0000000005".into(),
                data: b"item".to_vec()
            }]
        );
        assert!(c.is_idle());
    }

    #[test]
    fn a_lost_delete_is_retried_and_may_end_unknown() {
        let mut c = consumer(false);
        drain(&mut c);
        c.handle(Input::Reply(0, children(&["qn-a-0-0000000001"])));
        drain(&mut c);
        c.handle(Input::Reply(
            1,
            Ok(Reply::GetData {
                data: b"i".to_vec(),
                stat: Stat::default(),
            }),
        ));
        drain(&mut c);
        c.handle(Input::Reply(2, Err(ZkError::ConnectionLoss)));
        assert!(drain(&mut c).0.is_empty());
        c.handle(Input::Session(SessionEvent::Connected));
        let (sends, out) = drain(&mut c);
        assert!(out.is_empty(), "no second Claiming");
        assert!(matches!(&sends[0].1, Op::Delete { .. }));
        let mut done = c.clone();
        done.handle(Input::Reply(3, Ok(Reply::Delete)));
        assert!(matches!(drain(&mut done).1[0], QueueOutcome::Taken { .. }));
        c.handle(Input::Reply(3, Err(ZkError::NoNode)));
        let (_, out) = drain(&mut c);
        assert_eq!(
            out,
            vec![QueueOutcome::MaybeTaken {
                name: "qn-a-0-0000000001".into(),
                data: b"i".to_vec()
            }]
        );
    }

    #[test]
    fn a_priority_consumer_orders_by_priority_and_relists_after_events() {
        let mut c = consumer(true);
        drain(&mut c);
        c.handle(Input::Reply(
            0,
            children(&[
                "queue-05-a-0-0000000001",
                "queue-01-b-0-0000000004",
                "qn-x-0-0000000000",
            ]),
        ));
        let (sends, _) = drain(&mut c);
        assert!(
            matches!(&sends[0].1, Op::GetData { path, .. } if path == "/q/queue-01-b-0-0000000004")
        );
        // A child event while working: the next step lists afresh.
        c.handle(Input::Watch(WatchEvent {
            event_type: EventType::NodeChildrenChanged,
            path: "/q".into(),
        }));
        c.handle(Input::Reply(1, Err(ZkError::NoNode)));
        let (sends, _) = drain(&mut c);
        assert!(matches!(&sends[0].1, Op::GetChildren { watch: true, .. }));
    }

    #[test]
    fn a_consumer_of_a_missing_queue_waits_for_its_creation() {
        let mut c = consumer(false);
        drain(&mut c);
        c.handle(Input::Reply(0, Err(ZkError::NoNode)));
        let (sends, _) = drain(&mut c);
        assert_eq!(
            sends,
            vec![(
                1,
                Op::Exists {
                    path: "/q".into(),
                    watch: true
                }
            )]
        );
        c.handle(Input::Reply(1, Ok(Reply::Exists(None))));
        assert!(drain(&mut c).0.is_empty());
        c.handle(Input::Watch(WatchEvent {
            event_type: EventType::NodeCreated,
            path: "/q".into(),
        }));
        let (sends, out) = drain(&mut c);
        assert_eq!(out, vec![QueueOutcome::Woken]);
        assert!(matches!(&sends[0].1, Op::GetChildren { .. }));
    }
}
