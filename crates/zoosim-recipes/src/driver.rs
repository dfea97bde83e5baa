//! Runs a recipe machine over a [`Zk`] handle: every request the machine
//! queues is sent at once, in order ([`Zk::submit`]: several may be in
//! flight, as a real client pipelines them), and the machine is fed the
//! handle's one ordered stream ([`Zk::next_delivery`]): replies and watch
//! and session events, each in its place.
//!
//! # What order the machine sees, and why it is safe
//!
//! The machine sees what the server sent on the connection in the order
//! it sent it, as a Java application's callbacks and watcher do (exactly
//! so over the simulator and [`zoosim_client::local::LocalZk`]; over
//! [`zoosim_client::real::RealZk`] an event may come later than its
//! place, never earlier: see its docs). So an event may now come before
//! the reply to a request that was in flight when the server sent it.
//!
//! That order is safe because it is the server's: a reply reflects every
//! change whose event came before it (the server applied the change, sent
//! its notification, then answered), and an event that comes after a
//! reply is news about a state later than the one the reply showed. A
//! lock waiter whose predecessor goes away while its exists() is in flight
//! gets either the reply "gone" (the delete came first: the exists armed
//! nothing, and any NodeDeleted it takes beforehand comes from an earlier
//! watch) or the reply "there" followed by the NodeDeleted. What was unsafe
//! is the opposite — an event handed over before a reply the server sent
//! earlier, which the machine would take for news about a state it has not
//! seen yet — and a handle that cannot see the wire errs the other way.
//! The recipes' models (crate zoosim-models) explore the same thing: a FIFO
//! of requests per client, and replies and events delivered as the server
//! sends them.
//!
//! Session events keep their place too: the requests in flight when a
//! connection breaks fail with ConnectionLoss, in issue order, before the
//! `Disconnected`; after a reconnect `Connected` comes before any reply on
//! the new connection; on expiry the failures come before `Expired`.
//!
//! Cancellation-safe: a request is submitted, and its ticket recorded,
//! before the driver waits, and a delivery is taken from the stream only
//! when it is handed to the machine; so a caller may put a timeout around
//! [`Driver::next_outcome`] and call it again later without losing
//! anything. The driver takes the whole stream of its handle: run one
//! driver per handle (a [`Zk::call`] on the same handle is fine: its reply
//! never enters the stream).

use std::collections::{BTreeMap, VecDeque};

use super::{Input, Machine, OpId, Output};
use zoosim_client::{Delivery, Ticket, Zk};
use zoosim_core::proto::{ClientEvent, Op, SessionEvent};

/// What a driver reports, in the order it happened: an outcome of its
/// machine, or (only with [`Driver::noting_sessions`]) a session event it
/// handed the machine.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Noted<O> {
    /// An outcome the machine reported.
    Outcome(O),
    /// A session event the machine was given: what it knew from then on
    /// (an oracle judges a holder that acts after `Disconnected` by it).
    Session(SessionEvent),
}

/// A machine run over a [`Zk`] handle: it sends the machine's requests as
/// soon as it queues them, feeds it the handle's replies and events in
/// stream order, and queues its outcomes.
pub struct Driver<'z, Z: Zk, M: Machine> {
    zk: &'z Z,
    machine: M,
    /// Outcomes, and session events handed over when noting them.
    outcomes: VecDeque<Noted<M::Outcome>>,
    noting: bool,
    /// Queued by the machine, not submitted yet (sent at the next step).
    sends: VecDeque<(OpId, Op)>,
    /// Submitted and not answered yet: the machine's id for each ticket.
    in_flight: BTreeMap<Ticket, OpId>,
}

impl<'z, Z: Zk + Sync, M: Machine> Driver<'z, Z, M> {
    /// Runs `machine` over `zk`; nothing is sent until the machine is given a command.
    pub fn new(zk: &'z Z, machine: M) -> Self {
        Driver {
            zk,
            machine,
            outcomes: VecDeque::new(),
            noting: false,
            sends: VecDeque::new(),
            in_flight: BTreeMap::new(),
        }
    }

    /// Reports every session event handed to the machine too, in its
    /// place among the outcomes ([`Driver::next_noted`],
    /// [`Driver::take_noted`]): the outcomes its earlier inputs led to
    /// come before it, the ones it leads to after. [`Driver::next_outcome`]
    /// and [`Driver::take_outcome`] skip the session events.
    pub fn noting_sessions(mut self) -> Self {
        self.noting = true;
        self
    }

    /// The machine, to inspect its state.
    pub fn machine(&self) -> &M {
        &self.machine
    }

    /// For inputs that are not events (a producer's next item).
    pub fn machine_mut(&mut self) -> &mut M {
        &mut self.machine
    }

    /// The handle the machine runs over.
    pub fn zk(&self) -> &'z Z {
        self.zk
    }

    /// Hands `command` to the machine and queues what it asks for; its outcomes come from
    /// [`Driver::next_outcome`].
    pub fn command(&mut self, command: M::Command) {
        self.machine.handle(Input::Command(command));
        self.collect();
    }

    /// Hands the machine every reply and event that has already arrived,
    /// in stream order, without waiting and without sending anything.
    pub fn pump(&mut self) {
        while let Some(delivery) = self.zk.try_next_delivery() {
            self.take(delivery);
        }
        self.collect();
    }

    /// How many of the machine's requests are sent and not answered yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The next outcome already reported, if any.
    pub fn take_outcome(&mut self) -> Option<M::Outcome> {
        while let Some(noted) = self.outcomes.pop_front() {
            if let Noted::Outcome(o) = noted {
                return Some(o);
            }
        }
        None
    }

    /// The next outcome or noted session event already reported, if any.
    pub fn take_noted(&mut self) -> Option<Noted<M::Outcome>> {
        self.outcomes.pop_front()
    }

    /// Runs the machine until it reports an outcome: sends its requests and
    /// waits for events as it needs. Waits for ever if the machine has
    /// nothing to send and no event comes (an idle machine).
    pub async fn next_outcome(&mut self) -> M::Outcome {
        loop {
            if let Some(outcome) = self.take_outcome() {
                return outcome;
            }
            self.step().await;
        }
    }

    /// As [`Driver::next_outcome`], but a noted session event is reported
    /// too (see [`Driver::noting_sessions`]).
    pub async fn next_noted(&mut self) -> Noted<M::Outcome> {
        loop {
            if let Some(noted) = self.outcomes.pop_front() {
                return noted;
            }
            self.step().await;
        }
    }

    /// One step: send every request the machine has queued, in order,
    /// then wait for the next delivery of the stream and hand it over.
    pub async fn step(&mut self) {
        self.collect();
        while let Some((id, op)) = self.sends.pop_front() {
            let ticket = self.zk.submit(op);
            self.in_flight.insert(ticket, id);
        }
        let delivery = self.zk.next_delivery().await;
        self.take(delivery);
        self.collect();
    }

    fn take(&mut self, delivery: Delivery) {
        match delivery {
            Delivery::Reply(ticket, result) => {
                // A ticket not ours was submitted by someone else on this
                // handle (see the module docs): nothing to hand over.
                if let Some(id) = self.in_flight.remove(&ticket) {
                    self.machine.handle(Input::Reply(id, result));
                }
            }
            Delivery::Event(event) => self.deliver(event),
        }
    }

    fn deliver(&mut self, event: ClientEvent) {
        match event {
            ClientEvent::Watch(w) => self.machine.handle(Input::Watch(w)),
            ClientEvent::Session(s) => {
                if self.noting {
                    // What the earlier inputs led to comes first.
                    self.collect();
                    self.outcomes.push_back(Noted::Session(s));
                }
                self.machine.handle(Input::Session(s))
            }
        }
    }

    /// Takes what the machine has queued: outcomes are reported at once,
    /// requests go out at the next step.
    fn collect(&mut self) {
        while let Some(out) = self.machine.poll() {
            match out {
                Output::Outcome(o) => self.outcomes.push_back(Noted::Outcome(o)),
                Output::Send(id, op) => self.sends.push_back((id, op)),
            }
        }
    }
}
