//! Barrier (recipes page, "Barriers"): a node that blocks processes while
//! it exists. The coordinator sets it (create) and removes it (delete);
//! a process waits with exists(b, watch): absent, it passes; present, it
//! waits for the watch event and calls exists again.
//!
//! One step more than the page: before its first exists() the waiter
//! checks the barrier through the leader, with a multi holding one
//! `check(b, -1)` — a write-path request, so the answer is that of the
//! quorum at a point after everything committed before it. A process that
//! learned out of band that the barrier is up (the usual way: the
//! coordinator told it) may otherwise read a lagging server that has not
//! applied the create yet, find no barrier, and pass before the removal —
//! the simulation caught exactly that. `sync` first is not enough: a
//! leader cut off from its quorum answers syncs from its own stale state
//! until it notices (up to syncLimit), and the simulation caught that too.
//! The page's literal waiter is kept as the variant `barrier/no-sync`, and
//! the waiter that syncs instead of checking as `barrier/sync-instead-of-check`.
//!
//! Set and remove are idempotent, so after ConnectionLoss they are simply
//! sent again: NodeExists then means set, NoNode means removed. A barrier
//! removed and set again while a waiter was disconnected may be missed by
//! it (the watch replay shows a change, exists finds it present again):
//! ZooKeeper's watches report state, not every transition.
//!
//! ```
//! # use zoosim_client::local::{LocalConfig, LocalServer};
//! # use zoosim_recipes::barrier::{Barrier, BarrierClient};
//! # futures::executor::block_on(async {
//! let server = LocalServer::new(LocalConfig::default());
//! let zk = server.connect(4000);
//! let mut coordinator = BarrierClient::new(&zk, Barrier::new("/barriers/start"));
//! coordinator.set().await.expect("set");
//! coordinator.remove().await.expect("removed");
//! let mut worker = BarrierClient::new(&zk, Barrier::new("/barriers/start"));
//! worker.wait().await.expect("passed"); // the barrier is down
//! # });
//! ```

use super::{classify, Driver, Failure, Input, Io, Machine, Output, Pending};
use zoosim_client::Zk;
use zoosim_core::proto::{CreateMode, MultiOp, Op, Reply, SessionEvent, ZkError};

/// Which barrier waiter to run: the correct one, or a known-buggy one to reproduce its bug.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum BarrierVariant {
    /// The waiter checks the barrier through the leader before its first exists().
    #[default]
    Correct,
    /// The page's waiter, without the check through the leader: it can
    /// pass a barrier it was told is up, reading a lagging server.
    NoSync,
    /// The waiter syncs, then calls exists(), instead of the check through
    /// the leader: a deposed leader that does not know it yet answers the
    /// sync from its stale state, and the exists() after it too.
    SyncInsteadOfCheck,
}

impl BarrierVariant {
    /// Every variant, the correct one first.
    pub const ALL: [BarrierVariant; 3] = [
        BarrierVariant::Correct,
        BarrierVariant::NoSync,
        BarrierVariant::SyncInsteadOfCheck,
    ];

    /// The variant's name in scenario files and reports (`barrier`, `barrier/no-sync`,
    /// `barrier/sync-instead-of-check`).
    pub const fn name(self) -> &'static str {
        match self {
            BarrierVariant::Correct => "barrier",
            BarrierVariant::NoSync => "barrier/no-sync",
            BarrierVariant::SyncInsteadOfCheck => "barrier/sync-instead-of-check",
        }
    }

    /// The variant named `name`, if any.
    pub fn from_name(name: &str) -> Option<BarrierVariant> {
        BarrierVariant::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// What the application asks of a [`Barrier`]; one command at a time.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum BarrierCommand {
    /// Raise the barrier (create its node); answered by [`BarrierOutcome::Set`].
    Set,
    /// Remove the barrier (delete its node); answered by [`BarrierOutcome::Removed`].
    Remove,
    /// Wait until the barrier is down; answered by [`BarrierOutcome::Passed`].
    Wait,
}

/// What a [`Barrier`] reports to the application.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum BarrierOutcome {
    /// The barrier is up (created, or it already existed).
    Set,
    /// The barrier is down (deleted, or it was already gone).
    Removed,
    /// The barrier is down: go on.
    Passed,
    /// A watch event woke the waiter (it checks again).
    Woken,
    /// The session ended while a command was in progress: the command did not complete;
    /// start over with a new session.
    Lost {
        /// Why: `SessionExpired` (also when the session expired or closed).
        reason: ZkError,
    },
    /// A command arrived while another was in progress, or after the machine stopped;
    /// nothing changed.
    Refused {
        /// The command refused.
        command: BarrierCommand,
    },
    /// A ZooKeeper answer the recipe has no way forward from; the machine stops.
    Failed(ZkError),
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum Phase {
    Idle,
    Setting(Pending),
    Removing(Pending),
    Syncing(Pending),
    Checking(Pending),
    Waiting,
    Over,
}

/// The barrier's state machine, for one barrier node (see the module docs).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Barrier {
    path: String,
    variant: BarrierVariant,
    io: Io<BarrierOutcome>,
    phase: Phase,
    lost: Option<Pending>,
}

impl Barrier {
    /// A correct barrier on the node `path`.
    pub fn new(path: &str) -> Barrier {
        Barrier::with_variant(path, BarrierVariant::Correct)
    }

    /// A barrier on the node `path` running `variant`.
    pub fn with_variant(path: &str, variant: BarrierVariant) -> Barrier {
        Barrier {
            path: path.to_owned(),
            variant,
            io: Io::new(),
            phase: Phase::Idle,
            lost: None,
        }
    }

    /// Whether no command is in progress (and none has ended the machine).
    pub fn is_idle(&self) -> bool {
        self.phase == Phase::Idle
    }

    /// Whether the machine's session has ended.
    pub fn session_ended(&self) -> bool {
        self.io.has_ended()
    }

    fn set(&mut self, with_parents: bool) {
        if with_parents {
            if let Some((parent, _)) = self.path.rsplit_once('/').filter(|(p, _)| !p.is_empty()) {
                let parent = parent.to_owned();
                self.io.create_path(&parent);
            }
        }
        let req = self.io.send(Op::Create {
            path: self.path.clone(),
            data: vec![],
            mode: CreateMode::Persistent,
        });
        self.phase = Phase::Setting(req);
    }

    fn remove(&mut self) {
        let req = self.io.send(Op::Delete {
            path: self.path.clone(),
            version: -1,
        });
        self.phase = Phase::Removing(req);
    }

    /// A linearizable look at the barrier: `check(b, -1)` in a multi
    /// succeeds iff the node exists when the leader commits it.
    fn sync(&mut self) {
        let op = if self.variant == BarrierVariant::SyncInsteadOfCheck {
            // BUG (barrier/sync-instead-of-check): sync is not a quorum
            // operation; a deposed leader answers it from its own state.
            Op::Sync {
                path: self.path.clone(),
            }
        } else {
            Op::Multi(vec![MultiOp::Check {
                path: self.path.clone(),
                version: -1,
            }])
        };
        let req = self.io.send(op);
        self.phase = Phase::Syncing(req);
    }

    fn check(&mut self) {
        let req = self.io.send(Op::Exists {
            path: self.path.clone(),
            watch: true,
        });
        self.phase = Phase::Checking(req);
    }

    fn current(&self) -> Option<Pending> {
        match self.phase {
            Phase::Setting(p) | Phase::Removing(p) | Phase::Syncing(p) | Phase::Checking(p) => {
                Some(p)
            }
            _ => None,
        }
    }

    fn resend(&mut self) {
        self.lost = None;
        match self.phase {
            Phase::Setting(_) => self.set(false),
            Phase::Removing(_) => self.remove(),
            Phase::Syncing(_) => self.sync(),
            Phase::Checking(_) => self.check(),
            _ => {}
        }
    }

    fn end(&mut self, reason: ZkError) {
        if reason == ZkError::SessionExpired {
            self.io.end();
        }
        if !matches!(self.phase, Phase::Idle | Phase::Over) {
            self.io.report(BarrierOutcome::Lost { reason });
        }
        self.phase = Phase::Over;
        self.lost = None;
    }

    fn done(&mut self, outcome: BarrierOutcome) {
        self.phase = Phase::Idle;
        self.io.report(outcome);
    }

    fn on_reply(&mut self, pending: Pending, result: Result<Reply, ZkError>) {
        match (self.phase.clone(), result) {
            (Phase::Setting(_), Ok(Reply::Create { .. }) | Err(ZkError::NodeExists)) => {
                self.done(BarrierOutcome::Set)
            }
            (Phase::Setting(_), Err(ZkError::NoNode)) => self.set(true),
            (Phase::Removing(_), Ok(Reply::Delete) | Err(ZkError::NoNode)) => {
                self.done(BarrierOutcome::Removed)
            }
            (Phase::Syncing(_), Ok(reply @ Reply::Multi(_))) => match reply.multi_error() {
                // Up now: wait for it with a watch (our server has applied
                // at least as much as the check saw).
                None => self.check(),
                // Down at a point after the waiter was told it was up.
                Some(ZkError::NoNode) => self.done(BarrierOutcome::Passed),
                Some(e) => {
                    self.io.report(BarrierOutcome::Failed(e));
                    self.phase = Phase::Over;
                }
            },
            // The sync-instead-of-check waiter's sync: look with exists().
            (Phase::Syncing(_), Ok(Reply::Sync)) => self.check(),
            (Phase::Checking(_), Ok(Reply::Exists(None))) => self.done(BarrierOutcome::Passed),
            (Phase::Checking(_), Ok(Reply::Exists(Some(_)))) => self.phase = Phase::Waiting,
            (phase, Ok(reply)) => unreachable!("barrier: {reply:?} in {phase:?}"),
            (_, Err(e)) => match classify(e) {
                Failure::SessionEnded => self.end(ZkError::SessionExpired),
                Failure::Unknown if self.io.may_retry(pending) => self.resend(),
                Failure::Unknown => self.lost = Some(pending),
                Failure::Answer(e) => {
                    self.io.report(BarrierOutcome::Failed(e));
                    self.phase = Phase::Over;
                }
            },
        }
    }
}

impl Machine for Barrier {
    type Command = BarrierCommand;
    type Outcome = BarrierOutcome;

    fn handle(&mut self, input: Input<BarrierCommand>) {
        match input {
            Input::Command(command) if self.phase != Phase::Idle => {
                self.io.report(BarrierOutcome::Refused { command })
            }
            Input::Command(BarrierCommand::Set) => self.set(false),
            Input::Command(BarrierCommand::Remove) => self.remove(),
            Input::Command(BarrierCommand::Wait) => match self.variant {
                BarrierVariant::Correct | BarrierVariant::SyncInsteadOfCheck => self.sync(),
                // BUG (barrier/no-sync): the page's literal waiter.
                BarrierVariant::NoSync => self.check(),
            },
            Input::Reply(id, result) => match self.current() {
                Some(p) if p.op == id => self.on_reply(p, result),
                _ if result == Err(ZkError::SessionExpired) => self.end(ZkError::SessionExpired),
                _ => {}
            },
            Input::Watch(event) => {
                if event.path == self.path && self.phase == Phase::Waiting {
                    self.io.report(BarrierOutcome::Woken);
                    self.check();
                }
            }
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

    fn poll(&mut self) -> Option<Output<BarrierOutcome>> {
        self.io.poll()
    }
}

/// The barrier for application code.
pub struct BarrierClient<'z, Z: Zk> {
    driver: Driver<'z, Z, Barrier>,
}

impl<'z, Z: Zk + Sync> BarrierClient<'z, Z> {
    /// A client running `barrier` over `zk`.
    pub fn new(zk: &'z Z, barrier: Barrier) -> Self {
        BarrierClient {
            driver: Driver::new(zk, barrier),
        }
    }

    async fn run(&mut self, command: BarrierCommand, want: BarrierOutcome) -> Result<(), ZkError> {
        self.driver.command(command);
        loop {
            match self.driver.next_outcome().await {
                o if o == want => return Ok(()),
                BarrierOutcome::Lost { reason } => return Err(reason),
                BarrierOutcome::Failed(e) => return Err(e),
                BarrierOutcome::Refused { .. } => return Err(ZkError::ApiError),
                _ => {}
            }
        }
    }

    /// Raises the barrier.
    pub async fn set(&mut self) -> Result<(), ZkError> {
        self.run(BarrierCommand::Set, BarrierOutcome::Set).await
    }

    /// Removes the barrier.
    pub async fn remove(&mut self) -> Result<(), ZkError> {
        self.run(BarrierCommand::Remove, BarrierOutcome::Removed)
            .await
    }

    /// Waits until the barrier is down.
    pub async fn wait(&mut self) -> Result<(), ZkError> {
        self.run(BarrierCommand::Wait, BarrierOutcome::Passed).await
    }

    /// The driver underneath, for finer control (single commands, outcomes one by one).
    pub fn driver(&mut self) -> &mut Driver<'z, Z, Barrier> {
        &mut self.driver
    }
}

#[cfg(test)]
#[path = "barrier_tests.rs"]
mod tests;
