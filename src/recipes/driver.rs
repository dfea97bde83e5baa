//! Runs a recipe machine over a [`Zk`] handle: the machine's requests are
//! sent one at a time, in order (the session is FIFO anyway).
//!
//! A reply is handed to the machine before the events that arrived with
//! it. The handle cannot say which of them came first on the wire, and
//! this order is the safe one: an event the server sent before the reply
//! describes a change the reply already shows (the machine reads again,
//! needlessly), while an event handed over before a reply it came after
//! would be taken for news about a state the machine has not seen yet — a
//! lock waiter would then take its predecessor's NodeDeleted before the
//! exists() reply that says the node is there, and wait for ever.
//!
//! Cancellation-safe: a request in flight is kept by the driver, so a
//! caller may put a timeout around [`Driver::next_outcome`] and call it
//! again later without losing the reply.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;

use super::{Input, Machine, OpId, Output};
use crate::client::Zk;
use crate::proto::{ClientEvent, Op, Reply, SessionEvent, ZkError};

type Call<'z> = Pin<Box<dyn Future<Output = Result<Reply, ZkError>> + Send + 'z>>;

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

/// A machine run over a [`Zk`] handle: it sends the machine's requests one at a time,
/// feeds it their replies and the session's events, and queues its outcomes.
pub struct Driver<'z, Z: Zk, M: Machine> {
    zk: &'z Z,
    machine: M,
    /// Outcomes, and session events handed over when noting them.
    outcomes: VecDeque<Noted<M::Outcome>>,
    noting: bool,
    sends: VecDeque<(OpId, Op)>,
    in_flight: Option<(OpId, Call<'z>)>,
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
            in_flight: None,
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

    /// Hands the machine every event that has already arrived, without
    /// waiting and without sending anything.
    pub fn pump(&mut self) {
        while let Some(event) = self.zk.try_next_event() {
            self.deliver(event);
        }
        self.collect();
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

    /// One step: send the next request and take its reply, or, with none
    /// to send, wait for one event.
    pub async fn step(&mut self) {
        self.collect();
        if self.in_flight.is_none() {
            if let Some((id, op)) = self.sends.pop_front() {
                self.in_flight = Some((id, Box::pin(self.zk.call(op))));
            }
        }
        match &mut self.in_flight {
            Some((id, call)) => {
                let (id, result) = (*id, call.as_mut().await);
                self.in_flight = None;
                self.machine.handle(Input::Reply(id, result));
                while let Some(event) = self.zk.try_next_event() {
                    self.deliver(event);
                }
            }
            None => {
                let event = self.zk.next_event().await;
                self.deliver(event);
            }
        }
        self.collect();
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
    /// requests wait their turn.
    fn collect(&mut self) {
        while let Some(out) = self.machine.poll() {
            match out {
                Output::Outcome(o) => self.outcomes.push_back(Noted::Outcome(o)),
                Output::Send(id, op) => self.sends.push_back((id, op)),
            }
        }
    }
}
