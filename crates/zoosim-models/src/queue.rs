//! The queue's and the priority queue's model: the first clients are
//! producers, each enqueuing its own items one at a time (data `p<c>-<k>`,
//! unique per enqueue call, as the simulation's workload does), the others
//! consumers, each taking item after item for as long as it lives (an empty
//! queue: it waits on its list's watch). The machines are
//! [`zoosim_recipes::queue::Producer`] and [`Consumer`] — or, for a
//! deliberately broken copy, any machine with the consumer's commands and
//! outcomes ([`QueueModel::with_consumer`]) — behind [`QueueMachine`], which
//! hands every input and output through unchanged and only notes, for the
//! properties, what the consumer's latest list showed.
//!
//! Sizes: client 0 is the one producer and every other client a consumer
//! (at 3 clients two consumers race for each item). The plain queue's
//! producer enqueues one item; the priority queue's enqueues two, the
//! second more urgent than the first (priorities 1, then 0), so that a
//! consumer can list the first, see the second arrive, and must take it
//! first. Why one item (per priority) is enough: every
//! property is about one item (lost, taken twice) or one pair of item
//! nodes (taken out of order), and each phase a fault can hit — a create,
//! the search after a lost create, a list, a read, a delete and its retry,
//! a wait — is reached by the first item; a second item of the same
//! producer only repeats them later in a longer run (a consumer that takes
//! two nodes, which FIFO order needs, is reached all the same: the two
//! copies of an item re-created after a lost create, or, in the priority
//! queue, its two items). [`QueueModel::with_sizes`] makes
//! bigger ones.
//!
//! Properties (each a named value below), mirroring the simulation's
//! oracle ([`zoosim_core::check::queue`]):
//!
//! * always [`NO_LOSS`]: every acknowledged item is in the queue, taken,
//!   maybe taken (a delete's reply lost and its retry met NoNode), or
//!   claimed by a consumer that has not heard back (it died or lost its
//!   session while deleting it, or its delete is still in flight);
//! * always [`NO_DUPLICATE`]: no item is taken twice unless its enqueue may
//!   have made two copies (its producer's search after a lost create found
//!   nothing and it created again: a consumer may have taken the first);
//! * always [`NONE_INVENTED`]: everything taken was enqueued by someone;
//! * always [`FIFO_PER_CONSUMER`] (plain queue): a consumer's takes come in
//!   increasing sequence order;
//! * always [`PRIORITY_ORDER`] (priority queue): a consumer takes an item
//!   only if no more urgent item (lower priority, or the same priority and
//!   older) that already stood in the queue when the consumer listed it —
//!   the list the item was chosen from — still stands when the take's
//!   delete is served. (The simulation's oracle judges no order for the
//!   priority queue; this is the order a list-then-delete consumer can
//!   promise: an item created after the list may be overtaken.)
//! * always [`NO_RECIPE_FAILURE`]: no machine refuses a command or meets an
//!   answer it has no way forward from;
//! * eventually [`EVERY_ITEM_CONSUMED`]: once no producer can enqueue any
//!   more, the queue empties — unless no consumer is alive (crashed, or its
//!   session over). Fairness: every run of the model is finite and ends
//!   only when no action is enabled (weak fairness), the server always
//!   expires a crashed client's session and a disconnected client always
//!   reconnects; the predicate is monotone along every run (producers that
//!   can no longer enqueue stay so, an empty queue with nobody to fill it
//!   stays empty, dead consumers stay dead), so the checker's joins of the
//!   state graph lose nothing;
//! * sometimes: an item enqueued, taken, a consumer that took two (FIFO is
//!   not vacuous), a take that missed (another consumer was first), a
//!   waiting consumer woken, a delete whose outcome stayed unknown, the
//!   guid search finding and not finding the item, an item taken twice
//!   after a re-create, a claim left unresolved, a session lost, an item
//!   overtaken by a more urgent one (priority queue) — each where the
//!   clients and faults make it possible — and every fault in the budget.
//!
//! Not a property: **no herd**. Every consumer watches the queue's node
//! (the recipes page's design), so one enqueue wakes every waiting
//! consumer and all but one go back to waiting. [`QueueModel::with_herd`]
//! adds the world's no-herd property so that a test can show it failing.
//! Nor **no orphans**: the queue makes no ephemeral nodes, and an item left
//! behind is [`EVERY_ITEM_CONSUMED`]'s business.

use stateright::Property;

use zoosim_core::check::Property as Claim;

use super::{Faults, Log, Maker, RecipeModel, State, World};
use zoosim_core::proto::{Op, Reply};
use zoosim_recipes::queue::{Consumer, Producer, QueueCommand, QueueOutcome};
use zoosim_recipes::{sequence_of, Input, Machine, OpId, Output};

/// The queue's directory.
pub const DIR: &str = "/queue";

pub use super::NO_RECIPE_FAILURE;
pub use zoosim_core::check::queue::FIFO_PER_CONSUMER;
pub use zoosim_core::check::queue::NONE_INVENTED;
pub use zoosim_core::check::queue::NO_DUPLICATE;
pub use zoosim_core::check::queue::NO_LOSS;
pub use zoosim_core::check::queue::PRIORITY_ORDER;
/// The queue empties: the unbounded `eventually` the oracle's
/// `liveness` bounds in time.
pub const EVERY_ITEM_CONSUMED: Claim = Claim::new(
    "every-item-consumed",
    "the queue empties once nobody can enqueue, while a consumer's process and session live",
);
/// Claimed only with [`QueueModel::with_herd`].
pub use super::NO_HERD;

/// The most items a model takes (the shared record keeps them as bits).
pub const MAX_ITEMS: usize = 8;

/// Makes a consumer's machine: `(dir, priority)`.
pub type MakeConsumer<C> = fn(&str, bool) -> C;

/// The queue (or priority queue) as a model.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QueueModel<C = Consumer> {
    /// The priority queue rather than the plain one.
    pub priority: bool,
    /// Clients `0..producers` produce; the others consume.
    producers: usize,
    /// Items each producer enqueues.
    items: usize,
    /// The world's no-herd property is among the properties.
    pub herd: bool,
    make: Maker<MakeConsumer<C>>,
}

/// What the queue's model is, in a line (`zoosim list`).
pub const QUEUE_ABOUT: &str =
    "the queue: one producer enqueues one item; the other clients consume for as long as they live";

/// What the priority queue's model is, in a line (`zoosim list`).
pub const PRIORITY_ABOUT: &str =
    "the priority queue: one producer enqueues two items, the second more urgent; the others consume";

impl QueueModel<Consumer> {
    /// The plain queue: one producer of one item, the rest consumers.
    pub fn plain() -> QueueModel<Consumer> {
        QueueModel::with_consumer(false, Consumer::new)
    }

    /// The priority queue: one producer of two items, the second more
    /// urgent (priorities 1 then 0), the rest consumers.
    pub fn priority() -> QueueModel<Consumer> {
        QueueModel::with_consumer(true, Consumer::new)
    }
}

impl<C> QueueModel<C> {
    /// The queue's model (plain or `priority`) over another consumer
    /// machine, made by `make` (e.g. a deliberately broken copy).
    pub fn with_consumer(priority: bool, make: MakeConsumer<C>) -> QueueModel<C> {
        QueueModel {
            priority,
            producers: 1,
            items: if priority { 2 } else { 1 },
            herd: false,
            make: Maker(make),
        }
    }

    /// The same model with the world's no-herd property among its own.
    pub fn with_herd(mut self) -> QueueModel<C> {
        self.herd = true;
        self
    }

    /// The same model with `producers` producers of `items` items each
    /// (at most [`MAX_ITEMS`] items in all).
    pub fn with_sizes(mut self, producers: usize, items: usize) -> Result<QueueModel<C>, String> {
        if producers == 0 || items == 0 || producers * items > MAX_ITEMS {
            return Err(format!(
                "the queue's model takes 1 to {MAX_ITEMS} items in all, not {producers} producers \
                 of {items}"
            ));
        }
        self.producers = producers;
        self.items = items;
        Ok(self)
    }

    /// How many producers (clients `0..producers`; the others consume).
    pub fn producers(&self) -> usize {
        self.producers
    }

    /// How many items each producer enqueues.
    pub fn items(&self) -> usize {
        self.items
    }

    /// Item `k` of producer `p`'s priority, if a priority queue: each
    /// item in (producer, number) order more urgent than the one before,
    /// so that a later item must overtake the earlier ones.
    fn priority_of(&self, p: usize, k: usize) -> Option<u8> {
        let later = self.producers * self.items - 1 - usize::from(self.item(p, k));
        self.priority.then_some(later.min(99) as u8)
    }

    /// The item `k` of producer `p` as a bit index.
    fn item(&self, p: usize, k: usize) -> u8 {
        (p * self.items + k) as u8
    }

    /// The item whose data is `data`, if it is one of the model's.
    fn item_of(&self, data: &[u8]) -> Option<u8> {
        let s = std::str::from_utf8(data).ok()?;
        let (p, k) = s.strip_prefix('p')?.split_once('-')?;
        let (p, k): (usize, usize) = (p.parse().ok()?, k.parse().ok()?);
        (p < self.producers && k < self.items).then(|| self.item(p, k))
    }
}

/// What the model's applications tell their machines.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Command {
    /// Enqueue the item `p<producer>-<k>`.
    Enqueue {
        /// The producer.
        producer: u8,
        /// The item's number.
        k: u8,
        /// The item's priority (a priority queue's).
        priority: Option<u8>,
    },
    /// Take the head.
    Take,
}

/// A client's machine: the real producer or consumer, handed every input
/// and output unchanged. For a consumer it notes what its latest list
/// showed and, at each take, the taken item's place in the order against
/// that list, which [`PRIORITY_ORDER`] reads.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum QueueMachine<C> {
    /// A producer.
    Producer(Producer),
    /// A consumer.
    Consumer {
        /// The consumer's machine.
        machine: C,
        /// Its list request in flight.
        listing: Option<OpId>,
        /// Child creates of the queue's node when the latest list was
        /// served: items whose sequence number is below it stood then.
        listed: u64,
        /// The latest take: the item's (priority, sequence) and the
        /// `listed` of the list it was chosen from.
        took: Option<((u8, u64), u64)>,
    },
}

/// An item node's (priority, sequence) (priority 0 in a plain queue).
fn rank(name: &str) -> Option<(u8, u64)> {
    let seq = sequence_of(name)?;
    let priority = match name.strip_prefix("queue-") {
        Some(rest) => rest.get(..2)?.parse().ok()?,
        None => 0,
    };
    Some((priority, seq))
}

impl<C> Machine for QueueMachine<C>
where
    C: Machine<Command = QueueCommand, Outcome = QueueOutcome>,
{
    type Command = Command;
    type Outcome = QueueOutcome;

    fn handle(&mut self, input: Input<Command>) {
        let input = match input {
            Input::Command(Command::Enqueue {
                producer,
                k,
                priority,
            }) => {
                if let QueueMachine::Producer(p) = self {
                    if p.is_idle() {
                        p.set_item(format!("p{producer}-{k}").into_bytes());
                        if let Some(priority) = priority {
                            p.set_priority(priority);
                        }
                    }
                }
                Input::Command(QueueCommand::Enqueue)
            }
            Input::Command(Command::Take) => Input::Command(QueueCommand::Take),
            Input::Reply(id, r) => Input::Reply(id, r),
            Input::Watch(e) => Input::Watch(e),
            Input::Session(e) => Input::Session(e),
        };
        match self {
            QueueMachine::Producer(p) => p.handle(input),
            QueueMachine::Consumer {
                machine,
                listing,
                listed,
                ..
            } => {
                if let Input::Reply(id, r) = &input {
                    if Some(*id) == *listing {
                        *listing = None;
                        if let Ok(Reply::GetChildren { stat, .. }) = r {
                            // cversion counts creates and deletes: creates
                            // = (cversion + live children) / 2.
                            let creates =
                                (i64::from(stat.cversion) + i64::from(stat.num_children)) / 2;
                            *listed = creates.max(0) as u64;
                        }
                    }
                }
                machine.handle(input);
            }
        }
    }

    fn poll(&mut self) -> Option<Output<QueueOutcome>> {
        match self {
            QueueMachine::Producer(p) => p.poll(),
            QueueMachine::Consumer {
                machine,
                listing,
                listed,
                took,
            } => {
                let out = machine.poll()?;
                match &out {
                    Output::Send(id, Op::GetChildren { .. }) => *listing = Some(*id),
                    Output::Outcome(QueueOutcome::Taken { name, .. }) => {
                        *took = rank(name).map(|r| (r, *listed));
                    }
                    _ => {}
                }
                Some(out)
            }
        }
    }
}

/// Where a consumer is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Phase {
    /// About to ask for the next item.
    Ready,
    /// Asked; waiting for an item.
    Taking,
    /// Its session ended or its machine stopped.
    Over,
}

/// One client's application.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum App {
    /// A producer.
    Producer {
        /// The producer's number (its client's).
        id: u8,
        /// Items acknowledged so far (the one being enqueued is this one).
        next: u8,
        /// An enqueue is in progress.
        busy: bool,
        /// Its session ended or its machine stopped.
        over: bool,
    },
    /// A consumer.
    Consumer {
        /// Where it is.
        phase: Phase,
        /// The item it is deleting and has not heard back about.
        claim: Option<u8>,
        /// The sequence number of the last item it took.
        last_seq: Option<u64>,
    },
}

/// What the clients share: per item, bits of what became of it; and
/// sticky flags for the properties.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Shared {
    /// Items a producer was asked to enqueue.
    pub called: u8,
    /// Items whose enqueue was acknowledged.
    pub acked: u8,
    /// Items whose enqueue may have made two copies.
    pub duplicable: u8,
    /// Items taken at least once.
    pub taken: u8,
    /// Items taken twice or more.
    pub taken_twice: u8,
    /// Items maybe taken (a delete's outcome unknown).
    pub maybe_taken: u8,
    /// A consumer took something that is no item of the model.
    pub invented: bool,
    /// A consumer took out of sequence order.
    pub out_of_order: bool,
    /// A machine refused a command or failed.
    pub failed: bool,
    /// A consumer took a second item.
    pub took_two: bool,
    /// A take missed (another consumer was first).
    pub missed: bool,
    /// A waiting consumer was woken.
    pub woken: bool,
    /// A guid search found the item.
    pub found: bool,
    /// A guid search found nothing (the item is created again).
    pub not_found: bool,
    /// A session was lost.
    pub lost: bool,
    /// An item was taken while an older, less urgent one stood.
    pub overtook: bool,
}

impl<C> QueueModel<C> {
    fn is_producer(&self, c: usize) -> bool {
        c < self.producers
    }
}

impl<C> RecipeModel for QueueModel<C>
where
    C: Machine<Command = QueueCommand, Outcome = QueueOutcome> + Send + Sync + 'static,
{
    type Machine = QueueMachine<C>;
    type App = App;
    type Shared = Shared;
    const CLAIMS: &'static [Claim] = &[
        NO_LOSS,
        NO_DUPLICATE,
        NONE_INVENTED,
        FIFO_PER_CONSUMER,
        PRIORITY_ORDER,
        NO_RECIPE_FAILURE,
        EVERY_ITEM_CONSUMED,
        NO_HERD,
    ];

    fn name(&self) -> &'static str {
        if self.priority {
            "priority-queue"
        } else {
            "queue"
        }
    }

    fn dirs(&self) -> Vec<String> {
        vec![DIR.to_owned()]
    }

    fn client(&self, i: usize) -> (QueueMachine<C>, App) {
        if self.is_producer(i) {
            let p = Producer::new(DIR, &format!("g{i}"), self.priority_of(i, 0));
            let app = App::Producer {
                id: i as u8,
                next: 0,
                busy: false,
                over: false,
            };
            (QueueMachine::Producer(p), app)
        } else {
            let machine = QueueMachine::Consumer {
                machine: (self.make.0)(DIR, self.priority),
                listing: None,
                listed: 0,
                took: None,
            };
            let app = App::Consumer {
                phase: Phase::Ready,
                claim: None,
                last_seq: None,
            };
            (machine, app)
        }
    }

    fn wants(&self, app: &App) -> bool {
        match *app {
            App::Producer {
                next, busy, over, ..
            } => !busy && !over && usize::from(next) < self.items,
            App::Consumer { phase, .. } => phase == Phase::Ready,
        }
    }

    fn command(&self, app: &mut App, shared: &mut Shared, _: bool, _: &mut Log) -> Command {
        match app {
            App::Producer { id, next, busy, .. } => {
                *busy = true;
                shared.called |= bit(self.item(usize::from(*id), usize::from(*next)));
                Command::Enqueue {
                    producer: *id,
                    k: *next,
                    priority: self.priority_of(usize::from(*id), usize::from(*next)),
                }
            }
            App::Consumer { phase, .. } => {
                *phase = Phase::Taking;
                Command::Take
            }
        }
    }

    fn outcome(&self, app: &mut App, shared: &mut Shared, outcome: &QueueOutcome) {
        match app {
            App::Producer {
                id,
                next,
                busy,
                over,
            } => {
                let item = bit(self.item(usize::from(*id), usize::from(*next)));
                match outcome {
                    QueueOutcome::Enqueued {
                        duplicate_possible, ..
                    } => {
                        shared.acked |= item;
                        if *duplicate_possible {
                            shared.duplicable |= item;
                        }
                        *next += 1;
                        *busy = false;
                    }
                    QueueOutcome::Recovered { found: true } => shared.found = true,
                    QueueOutcome::Recovered { found: false } => {
                        // Created again: a consumer may have taken the
                        // first copy, so there may be two (the oracle's
                        // rule).
                        shared.not_found = true;
                        shared.duplicable |= item;
                    }
                    QueueOutcome::Lost { .. } => {
                        shared.lost = true;
                        *over = true;
                    }
                    QueueOutcome::Refused { .. } | QueueOutcome::Failed(_) => {
                        shared.failed = true;
                        *over = true;
                    }
                    // A consumer's outcomes: the producer's machine gives none.
                    _ => shared.failed = true,
                }
            }
            App::Consumer {
                phase,
                claim,
                last_seq,
            } => match outcome {
                QueueOutcome::Claiming { data, .. } => *claim = self.item_of(data),
                QueueOutcome::Taken { name, data } => {
                    match self.item_of(data) {
                        Some(i) if shared.called & bit(i) != 0 => {
                            if shared.taken & bit(i) != 0 {
                                shared.taken_twice |= bit(i);
                            }
                            shared.taken |= bit(i);
                        }
                        _ => shared.invented = true,
                    }
                    let seq = sequence_of(name);
                    if let Some(last) = *last_seq {
                        shared.took_two = true;
                        if seq.is_none_or(|s| s <= last) {
                            shared.out_of_order = true;
                        }
                    }
                    *last_seq = seq;
                    *claim = None;
                    *phase = Phase::Ready;
                }
                QueueOutcome::Missed { .. } => {
                    shared.missed = true;
                    *claim = None;
                }
                QueueOutcome::MaybeTaken { data, .. } => {
                    match self.item_of(data) {
                        Some(i) => shared.maybe_taken |= bit(i),
                        None => shared.invented = true,
                    }
                    *claim = None;
                    *phase = Phase::Ready;
                }
                QueueOutcome::Woken => shared.woken = true,
                QueueOutcome::Lost { .. } => {
                    // A claim in flight stays unresolved (the item may be
                    // gone unreported).
                    shared.lost = true;
                    *phase = Phase::Over;
                }
                QueueOutcome::Refused { .. } | QueueOutcome::Failed(_) => {
                    shared.failed = true;
                    *phase = Phase::Over;
                }
                // A producer's outcomes: the consumer's machine gives none.
                _ => shared.failed = true,
            },
        }
    }

    fn finished(&self, app: &App) -> bool {
        match *app {
            App::Producer { next, over, .. } => over || usize::from(next) >= self.items,
            App::Consumer { phase, .. } => phase == Phase::Over,
        }
    }

    fn properties(&self, faults: &Faults) -> Vec<Property<World<Self>>> {
        let mut p = vec![
            Property::always(NO_LOSS.name, |w, s: &State<Self>| no_loss(w, s)),
            Property::always(NO_DUPLICATE.name, |_, s: &State<Self>| {
                s.shared.taken_twice & !s.shared.duplicable == 0
            }),
            Property::always(NONE_INVENTED.name, |_, s: &State<Self>| !s.shared.invented),
        ];
        if self.priority {
            p.push(Property::always(
                PRIORITY_ORDER.name,
                |_, s: &State<Self>| taken_over(s, |taken, other| other < taken).is_none(),
            ));
        } else {
            p.push(Property::always(
                FIFO_PER_CONSUMER.name,
                |_, s: &State<Self>| !s.shared.out_of_order,
            ));
        }
        p.push(Property::always(
            NO_RECIPE_FAILURE.name,
            |_, s: &State<Self>| !s.shared.failed,
        ));
        if self.herd {
            p.push(Property::always(NO_HERD.name, |_, s: &State<Self>| !s.herd));
        }
        p.push(Property::eventually(
            EVERY_ITEM_CONSUMED.name,
            |w, s: &State<Self>| consumed(w, s),
        ));
        p.extend([
            Property::sometimes("item-enqueued", |_, s: &State<Self>| s.shared.acked != 0),
            Property::sometimes("item-taken", |_, s: &State<Self>| s.shared.taken != 0),
            // A consumer takes a second item (FIFO is not vacuous): any
            // run with a consumer and two items.
            Property::sometimes("consumer-took-two", |w, s: &State<Self>| {
                s.shared.took_two || consumers(w) == 0 || w.recipe.producers * w.recipe.items < 2
            }),
            Property::sometimes("take-missed", |w, s: &State<Self>| {
                s.shared.missed || consumers(w) < 2
            }),
            Property::sometimes("waiter-woken", |w, s: &State<Self>| {
                s.shared.woken || consumers(w) == 0
            }),
        ]);
        if self.priority {
            // An item overtakes an older, less urgent one: the order is
            // the priority's, not the sequence's.
            p.push(Property::sometimes(
                "more-urgent-item-overtook",
                |w, s: &State<Self>| {
                    taken_over(s, |taken, other| other.0 > taken.0 && other.1 < taken.1).is_some()
                        || w.recipe.producers < 2
                        || consumers(w) == 0
                },
            ));
        }
        if faults.lost_reply > 0 {
            p.extend([
                Property::sometimes("guid-search-found-item", |_, s: &State<Self>| {
                    s.shared.found
                }),
                Property::sometimes("delete-outcome-unknown", |_, s: &State<Self>| {
                    s.shared.maybe_taken != 0
                }),
                Property::sometimes("recreated-item-taken-twice", |_, s: &State<Self>| {
                    s.shared.taken_twice != 0
                }),
            ]);
        }
        if faults.lost_request > 0 {
            p.push(Property::sometimes(
                "guid-search-found-nothing",
                |_, s: &State<Self>| s.shared.not_found,
            ));
        }
        if faults.forced_expiry > 0 {
            p.push(Property::sometimes("session-lost", |_, s: &State<Self>| {
                s.shared.lost
            }));
        }
        if faults.forced_expiry > 0 || faults.client_crash > 0 {
            p.push(Property::sometimes(
                "claim-left-unresolved",
                |_, s: &State<Self>| {
                    s.clients.iter().any(|c| {
                        (c.crashed || !c.session)
                            && matches!(c.app, App::Consumer { claim: Some(_), .. })
                    })
                },
            ));
        }
        p
    }
}

fn bit(item: u8) -> u8 {
    1 << item
}

/// How many consumers the world has.
fn consumers<C>(w: &World<QueueModel<C>>) -> usize
where
    C: Machine<Command = QueueCommand, Outcome = QueueOutcome> + Send + Sync + 'static,
{
    w.clients.saturating_sub(w.recipe.producers)
}

/// The items in the queue now: (item, (priority, sequence)) per node
/// (an item not the model's is `None`).
fn in_queue<C>(s: &State<QueueModel<C>>, w: &QueueModel<C>) -> Vec<(Option<u8>, (u8, u64))>
where
    C: Machine<Command = QueueCommand, Outcome = QueueOutcome> + Send + Sync + 'static,
{
    let Some(dir) = s.tree.node(DIR) else {
        return Vec::new();
    };
    dir.children
        .iter()
        .map(|name| {
            let data = s
                .tree
                .node(&format!("{DIR}/{name}"))
                .map(|n| n.data.as_slice())
                .unwrap_or_default();
            (w.item_of(data), rank(name).unwrap_or((0, 0)))
        })
        .collect()
}

/// [`NO_LOSS`]'s predicate.
fn no_loss<C>(w: &World<QueueModel<C>>, s: &State<QueueModel<C>>) -> bool
where
    C: Machine<Command = QueueCommand, Outcome = QueueOutcome> + Send + Sync + 'static,
{
    let sh = &s.shared;
    let mut accounted = sh.taken | sh.maybe_taken;
    for c in &s.clients {
        if let App::Consumer { claim: Some(i), .. } = c.app {
            accounted |= bit(i);
        }
    }
    for (item, _) in in_queue(s, &w.recipe) {
        if let Some(i) = item {
            accounted |= bit(i);
        }
    }
    sh.acked & !accounted == 0
}

/// A consumer's latest take whose item ranks behind an item still in the
/// queue that had stood there when the consumer listed: `behind(taken,
/// other)` says whether `other` (priority, sequence) is one the taken
/// item must not have overtaken.
fn taken_over<C>(
    s: &State<QueueModel<C>>,
    behind: impl Fn((u8, u64), (u8, u64)) -> bool,
) -> Option<usize>
where
    C: Machine<Command = QueueCommand, Outcome = QueueOutcome> + Send + Sync + 'static,
{
    let dir = s.tree.node(DIR)?;
    let standing: Vec<(u8, u64)> = dir.children.iter().filter_map(|n| rank(n)).collect();
    s.clients.iter().position(|c| {
        let QueueMachine::Consumer {
            took: Some((taken, listed)),
            ..
        } = c.machine
        else {
            return false;
        };
        standing
            .iter()
            .any(|&other| other.1 < listed && behind(taken, other))
    })
}

/// [`EVERY_ITEM_CONSUMED`]'s predicate: no producer can enqueue any more
/// and the queue is empty, or no consumer is alive.
fn consumed<C>(w: &World<QueueModel<C>>, s: &State<QueueModel<C>>) -> bool
where
    C: Machine<Command = QueueCommand, Outcome = QueueOutcome> + Send + Sync + 'static,
{
    let mut producing = false;
    let mut consuming = false;
    for c in &s.clients {
        let alive = !c.crashed && c.session;
        match c.app {
            App::Producer { .. } => producing |= alive && !w.recipe.finished(&c.app),
            App::Consumer { phase, .. } => consuming |= alive && phase != Phase::Over,
        }
    }
    !consuming || (!producing && s.tree.node(DIR).is_none_or(|d| d.children.is_empty()))
}
