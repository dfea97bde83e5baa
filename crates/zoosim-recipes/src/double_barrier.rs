//! Double barrier (recipes page, "Double Barriers"): processes enter
//! together once `x` of them are there, compute, and leave together.
//!
//! Enter: create `b/<p>` EPHEMERAL; exists(`b/ready`, watch); list `b`
//! (without `ready`): fewer than `x`, wait for `ready`'s NodeCreated; else
//! create `b/ready` (NodeExists: someone did). Leave: list `b`; none left,
//! done; only us, delete ours, done; lowest, wait on the highest; else
//! delete ours and wait on the lowest; on every wake-up list again.
//! Ordering is by node name; `<p>` is the process's stable name. A create
//! that meets NodeExists checks the node's owner: ours (a create sent again
//! after ConnectionLoss) means in; a previous session's (the process
//! restarted while its old session lingers) means waiting for that node to
//! go — counting it would let a restarted process count twice and the
//! barrier open with fewer than `x` processes (the simulation caught a
//! guid-named version doing exactly that).
//!
//! ```
//! # use zoosim_client::local::{LocalConfig, LocalServer};
//! # use zoosim_recipes::double_barrier::{DoubleBarrier, DoubleBarrierClient};
//! # futures::executor::block_on(async {
//! let server = LocalServer::new(LocalConfig::default());
//! let zk = server.connect(4000);
//! // A barrier of one: enters and leaves at once.
//! # use zoosim_client::Zk;
//! let mut me = DoubleBarrierClient::new(&zk, DoubleBarrier::new("/db/round-1", "p1", zk.session_id(), 1));
//! me.enter().await.expect("entered");
//! me.leave().await.expect("left");
//! # });
//! ```

use super::{
    assert_component, child_path, classify, Driver, Failure, Input, Io, Machine, Output, Pending,
};
use zoosim_client::Zk;
use zoosim_core::proto::{CreateMode, EventType, Op, Reply, SessionEvent, SessionId, ZkError};

const READY: &str = "ready";

/// What the application asks of a [`DoubleBarrier`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum DoubleBarrierCommand {
    /// Enter the barrier (only when idle); answered by [`DoubleBarrierOutcome::Entered`]
    /// once `x` processes are in.
    Enter,
    /// Leave the barrier (only once in); answered by [`DoubleBarrierOutcome::Left`] once
    /// every process has left.
    Leave,
}

/// What a [`DoubleBarrier`] reports to the application.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum DoubleBarrierOutcome {
    /// `x` processes are in: compute, then leave.
    Entered,
    /// Every process has left; the machine is idle again.
    Left,
    /// The session ended while entering, in, or leaving (our node is gone with it):
    /// start over with a new session.
    Lost {
        /// Why: `SessionExpired` (also when the session expired or closed).
        reason: ZkError,
    },
    /// A command that makes no sense now (enter unless idle, leave unless in);
    /// nothing changed.
    Refused {
        /// The command refused.
        command: DoubleBarrierCommand,
    },
    /// A ZooKeeper answer the recipe has no way forward from; the machine stops.
    Failed(ZkError),
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum Phase {
    Idle,
    // Enter.
    Creating(Pending),
    /// NodeExists on our create: whose node is it?
    Owning(Pending),
    /// An older session's node of ours: wait for it to go.
    AwaitingOld,
    WatchingReady(Pending),
    Counting(Pending),
    /// Fewer than x: waiting for `ready`.
    AwaitingReady,
    MakingReady(Pending),
    In,
    // Leave.
    Listing(Pending),
    Deleting(Pending),
    Checking(Pending, String),
    /// Waiting for an event on `String`.
    AwaitingLeave(String),
    Over,
}

/// The double barrier's state machine: one process's part in one barrier node
/// (see the module docs).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct DoubleBarrier {
    dir: String,
    name: String,
    /// Our session's id, to recognise our own node.
    session: i64,
    threshold: usize,
    io: Io<DoubleBarrierOutcome>,
    phase: Phase,
    lost: Option<Pending>,
    /// `ready`'s NodeCreated came while counting: the wait is over.
    ready_seen: bool,
}

impl DoubleBarrier {
    /// `name`: this process's node name, stable across its sessions (no
    /// '/'); `session`: the id of the session it runs on.
    pub fn new(dir: &str, name: &str, session: SessionId, threshold: usize) -> DoubleBarrier {
        assert_component("process name", name);
        assert_ne!(
            name, READY,
            "a process name is one path component other than {READY:?}"
        );
        assert!(threshold >= 1, "a barrier of at least one process");
        DoubleBarrier {
            dir: dir.to_owned(),
            name: name.to_owned(),
            session: session.0,
            threshold,
            io: Io::new(),
            phase: Phase::Idle,
            lost: None,
            ready_seen: false,
        }
    }

    /// Whether the machine's session has ended.
    pub fn session_ended(&self) -> bool {
        self.io.has_ended()
    }

    fn own(&self) -> String {
        child_path(&self.dir, &self.name)
    }

    fn ready(&self) -> String {
        child_path(&self.dir, READY)
    }

    fn create(&mut self, with_parents: bool) {
        if with_parents {
            let dir = self.dir.clone();
            self.io.create_path(&dir);
        }
        let req = self.io.send(Op::Create {
            path: self.own(),
            data: vec![],
            mode: CreateMode::Ephemeral,
        });
        self.phase = Phase::Creating(req);
    }

    fn owner(&mut self) {
        let req = self.io.send(Op::Exists {
            path: self.own(),
            watch: true,
        });
        self.phase = Phase::Owning(req);
    }

    fn watch_ready(&mut self) {
        let req = self.io.send(Op::Exists {
            path: self.ready(),
            watch: true,
        });
        self.phase = Phase::WatchingReady(req);
    }

    fn list(&mut self, leaving: bool) {
        let req = self.io.send(Op::GetChildren {
            path: self.dir.clone(),
            watch: false,
        });
        self.phase = if leaving {
            Phase::Listing(req)
        } else {
            Phase::Counting(req)
        };
    }

    fn make_ready(&mut self) {
        let req = self.io.send(Op::Create {
            path: self.ready(),
            data: vec![],
            mode: CreateMode::Persistent,
        });
        self.phase = Phase::MakingReady(req);
    }

    fn delete_own(&mut self) {
        let req = self.io.send(Op::Delete {
            path: self.own(),
            version: -1,
        });
        self.phase = Phase::Deleting(req);
    }

    fn check(&mut self, name: String) {
        let req = self.io.send(Op::Exists {
            path: child_path(&self.dir, &name),
            watch: true,
        });
        self.phase = Phase::Checking(req, name);
    }

    fn current(&self) -> Option<Pending> {
        match &self.phase {
            Phase::Creating(p)
            | Phase::Owning(p)
            | Phase::WatchingReady(p)
            | Phase::Counting(p)
            | Phase::MakingReady(p)
            | Phase::Listing(p)
            | Phase::Deleting(p)
            | Phase::Checking(p, _) => Some(*p),
            _ => None,
        }
    }

    fn resend(&mut self) {
        self.lost = None;
        match self.phase.clone() {
            Phase::Creating(_) => self.create(false),
            Phase::Owning(_) => self.owner(),
            Phase::WatchingReady(_) => self.watch_ready(),
            Phase::Counting(_) => self.list(false),
            Phase::MakingReady(_) => self.make_ready(),
            Phase::Listing(_) => self.list(true),
            Phase::Deleting(_) => self.delete_own(),
            Phase::Checking(_, name) => self.check(name),
            _ => {}
        }
    }

    fn done(&mut self, phase: Phase, outcome: DoubleBarrierOutcome) {
        self.phase = phase;
        self.ready_seen = false;
        self.io.report(outcome);
    }

    fn end(&mut self, reason: ZkError) {
        if reason == ZkError::SessionExpired {
            self.io.end();
        }
        if !matches!(self.phase, Phase::Idle | Phase::Over) {
            self.io.report(DoubleBarrierOutcome::Lost { reason });
        }
        self.phase = Phase::Over;
        self.lost = None;
    }

    /// Process nodes (not `ready`), sorted by name.
    fn processes(children: &[String]) -> Vec<String> {
        let mut p: Vec<String> = children.iter().filter(|c| *c != READY).cloned().collect();
        p.sort();
        p
    }

    /// Leave, steps 2–5, on a fresh list.
    fn leave_step(&mut self, children: &[String]) {
        let processes = Self::processes(children);
        let ours = processes.contains(&self.name);
        match processes.as_slice() {
            [] => self.done(Phase::Idle, DoubleBarrierOutcome::Left),
            [only] if *only == self.name => self.delete_own(),
            // Ours is gone already: wait on the lowest.
            [lowest, ..] if !ours => self.check(lowest.clone()),
            // The lowest of several waits for the highest to go.
            [lowest, .., highest] if *lowest == self.name => self.check(highest.clone()),
            _ => self.delete_own(),
        }
    }

    fn on_reply(&mut self, pending: Pending, result: Result<Reply, ZkError>) {
        let phase = self.phase.clone();
        let reply = match result {
            Ok(r) => r,
            Err(e) => {
                return match (phase, e) {
                    (Phase::Creating(_), ZkError::NodeExists) => self.owner(),
                    (Phase::Creating(_), ZkError::NoNode) => self.create(true),
                    (Phase::MakingReady(_), ZkError::NodeExists) => {
                        self.done(Phase::In, DoubleBarrierOutcome::Entered)
                    }
                    // Ours is gone (deleted before a lost reply): go on.
                    (Phase::Deleting(_), ZkError::NoNode) => self.after_delete(),
                    (_, e) => match classify(e) {
                        Failure::SessionEnded => self.end(ZkError::SessionExpired),
                        Failure::Unknown if self.io.may_retry(pending) => self.resend(),
                        Failure::Unknown => self.lost = Some(pending),
                        Failure::Answer(e) => {
                            self.io.report(DoubleBarrierOutcome::Failed(e));
                            self.phase = Phase::Over;
                        }
                    },
                };
            }
        };
        match (phase, reply) {
            (Phase::Creating(_), Reply::Create { .. }) => self.watch_ready(),
            (Phase::Owning(_), Reply::Exists(Some(stat)))
                if stat.ephemeral_owner == self.session =>
            {
                self.watch_ready()
            }
            // An older session's: its deletion (the watch just set) calls
            // us back.
            (Phase::Owning(_), Reply::Exists(Some(_))) => self.phase = Phase::AwaitingOld,
            (Phase::Owning(_), Reply::Exists(None)) => self.create(false),
            (Phase::WatchingReady(_), Reply::Exists(Some(_))) => {
                self.done(Phase::In, DoubleBarrierOutcome::Entered)
            }
            (Phase::WatchingReady(_), Reply::Exists(None)) => self.list(false),
            (Phase::Counting(_), Reply::GetChildren { children, .. }) => {
                if self.ready_seen {
                    self.done(Phase::In, DoubleBarrierOutcome::Entered)
                } else if Self::processes(&children).len() < self.threshold {
                    // The exist watch on `ready` wakes us.
                    self.phase = Phase::AwaitingReady;
                } else {
                    self.make_ready();
                }
            }
            (Phase::MakingReady(_), Reply::Create { .. }) => {
                self.done(Phase::In, DoubleBarrierOutcome::Entered)
            }
            (Phase::Listing(_), Reply::GetChildren { children, .. }) => self.leave_step(&children),
            (Phase::Deleting(_), Reply::Delete) => self.after_delete(),
            (Phase::Checking(_, _), Reply::Exists(None)) => self.list(true),
            (Phase::Checking(_, name), Reply::Exists(Some(_))) => {
                self.phase = Phase::AwaitingLeave(name)
            }
            (phase, reply) => unreachable!("double barrier: {reply:?} in {phase:?}"),
        }
    }

    /// Our node is deleted: list again (the page's "goto 1"); the only
    /// process was us, then the list is empty and we are out.
    fn after_delete(&mut self) {
        self.list(true);
    }
}

impl Machine for DoubleBarrier {
    type Command = DoubleBarrierCommand;
    type Outcome = DoubleBarrierOutcome;

    fn handle(&mut self, input: Input<DoubleBarrierCommand>) {
        match input {
            Input::Command(DoubleBarrierCommand::Enter) if self.phase == Phase::Idle => {
                self.create(false)
            }
            Input::Command(DoubleBarrierCommand::Leave) if self.phase == Phase::In => {
                self.list(true)
            }
            Input::Command(command) => self.io.report(DoubleBarrierOutcome::Refused { command }),
            Input::Reply(id, result) => match self.current() {
                Some(p) if p.op == id => self.on_reply(p, result),
                _ if result == Err(ZkError::SessionExpired) => self.end(ZkError::SessionExpired),
                _ => {}
            },
            Input::Watch(event) => match &self.phase {
                Phase::AwaitingReady
                    if event.path == self.ready() && event.event_type == EventType::NodeCreated =>
                {
                    self.done(Phase::In, DoubleBarrierOutcome::Entered)
                }
                // It may come while the count is in flight.
                Phase::WatchingReady(_) | Phase::Counting(_)
                    if event.path == self.ready() && event.event_type == EventType::NodeCreated =>
                {
                    self.ready_seen = true;
                }
                Phase::AwaitingLeave(name) if event.path == child_path(&self.dir, name) => {
                    self.list(true)
                }
                Phase::AwaitingOld if event.path == self.own() => self.create(false),
                _ => {}
            },
            Input::Session(event) => {
                if self.io.on_session(event) {
                    return self.end(ZkError::SessionExpired);
                }
                if event == SessionEvent::Connected
                    && self.lost.is_some_and(|p| self.io.may_retry(p))
                {
                    self.resend();
                }
            }
        }
    }

    fn poll(&mut self) -> Option<Output<DoubleBarrierOutcome>> {
        self.io.poll()
    }
}

/// The double barrier for application code.
pub struct DoubleBarrierClient<'z, Z: Zk> {
    driver: Driver<'z, Z, DoubleBarrier>,
}

impl<'z, Z: Zk + Sync> DoubleBarrierClient<'z, Z> {
    /// A client running `barrier` over `zk`.
    pub fn new(zk: &'z Z, barrier: DoubleBarrier) -> Self {
        DoubleBarrierClient {
            driver: Driver::new(zk, barrier),
        }
    }

    async fn run(
        &mut self,
        command: DoubleBarrierCommand,
        want: DoubleBarrierOutcome,
    ) -> Result<(), ZkError> {
        self.driver.command(command);
        match self.driver.next_outcome().await {
            o if o == want => Ok(()),
            DoubleBarrierOutcome::Lost { reason } => Err(reason),
            DoubleBarrierOutcome::Failed(e) => Err(e),
            _ => Err(ZkError::ApiError),
        }
    }

    /// Waits until `x` processes are in.
    pub async fn enter(&mut self) -> Result<(), ZkError> {
        self.run(DoubleBarrierCommand::Enter, DoubleBarrierOutcome::Entered)
            .await
    }

    /// Waits until every process has left.
    pub async fn leave(&mut self) -> Result<(), ZkError> {
        self.run(DoubleBarrierCommand::Leave, DoubleBarrierOutcome::Left)
            .await
    }

    /// The driver underneath, for finer control (single commands, outcomes one by one).
    pub fn driver(&mut self) -> &mut Driver<'z, Z, DoubleBarrier> {
        &mut self.driver
    }
}

#[cfg(test)]
#[path = "double_barrier_tests.rs"]
mod tests;
