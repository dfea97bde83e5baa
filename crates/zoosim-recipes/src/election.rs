//! Leader election (recipes page, "Leader Election"): every candidate
//! creates `dir/<guid>-n_` EPHEMERAL_SEQUENTIAL; the lowest sequence number
//! leads; every other candidate watches the next lower node (exists with a
//! watch) and lists again when it goes. It is the lock's algorithm
//! ([`super::lock`], guid recovery included), with one step more: before
//! acting as leader a candidate confirms its own node still exists in its
//! current session — a sync, then exists() — because the child list that
//! made it lowest may come from a lagging server that has not yet applied
//! the expiry of its session. The leader's epoch (its fencing token) is its
//! node's sequence number: every new leader's is larger.
//!
//! ```
//! # use zoosim_client::local::{LocalConfig, LocalServer};
//! # use zoosim_recipes::election::{Election, ElectionClient};
//! # futures::executor::block_on(async {
//! let server = LocalServer::new(LocalConfig::default());
//! let zk = server.connect(4000);
//! let mut candidate = ElectionClient::new(&zk, Election::new("/app/election", "node-a"));
//! let epoch = candidate.lead().await.expect("elected");
//! // ... lead, stamping every effect with `epoch` ...
//! assert!(candidate.is_leader());
//! candidate.resign().await.expect("resigned");
//! # let _ = epoch;
//! # });
//! ```

use super::lock::{Lock, LockCommand, LockOutcome};
use super::{Driver, Input, Machine, Output};
use zoosim_client::Zk;
use zoosim_core::proto::ZkError;

/// Which election to run: the correct one, or a known-buggy one to reproduce its bug.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum ElectionVariant {
    /// The correct election: a leader whose session ended stops leading.
    #[default]
    Correct,
    /// After its session expired, goes on acting as leader on the old node
    /// (CURATOR-696).
    KeepLeadershipAfterExpiry,
    /// Leads as soon as its child list shows it lowest, without the sync +
    /// exists() confirmation: a list answered by a server that has not yet
    /// applied its session's expiry makes it leader on a session already
    /// gone.
    ActWithoutConfirming,
}

impl ElectionVariant {
    /// Every variant, the correct one first.
    pub const ALL: [ElectionVariant; 3] = [
        ElectionVariant::Correct,
        ElectionVariant::KeepLeadershipAfterExpiry,
        ElectionVariant::ActWithoutConfirming,
    ];

    /// The variant's name in scenario files and reports (`election`,
    /// `election/keep-leadership-after-expiry`, `election/act-without-confirming`).
    pub const fn name(self) -> &'static str {
        match self {
            ElectionVariant::Correct => "election",
            ElectionVariant::KeepLeadershipAfterExpiry => "election/keep-leadership-after-expiry",
            ElectionVariant::ActWithoutConfirming => "election/act-without-confirming",
        }
    }

    /// The variant named `name`, if any.
    pub fn from_name(name: &str) -> Option<ElectionVariant> {
        ElectionVariant::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// What the application asks of an [`Election`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ElectionCommand {
    /// Become a candidate.
    Join,
    /// Stop leading, or stop being a candidate (the node is deleted).
    Resign,
}

/// What an [`Election`] reports to the application.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum ElectionOutcome {
    /// This candidate leads; `epoch` grows with every new leader.
    Elected {
        /// The leader's epoch, its fencing token: stamp every act of leadership with it.
        epoch: u64,
    },
    /// The leader's connection broke: it must not act as leader.
    Suspended,
    /// Reconnected with the session intact: leading again.
    Resumed,
    /// The candidate's node is deleted.
    Resigned,
    /// After a ConnectionLoss on the create: whether the guid search found
    /// the node.
    Recovered {
        /// Whether the search found the candidate's node.
        found: bool,
    },
    /// The deletion of `path` woke this candidate.
    Woken {
        /// The deleted node whose watch fired.
        path: String,
    },
    /// Not leading and not a candidate any more: the session ended or the
    /// node vanished. Join again with a new session.
    Lost {
        /// Why: `SessionExpired` when the session ended, `NoNode` when the node vanished.
        reason: ZkError,
    },
    /// A command that makes no sense now (join while a candidate, or after the session
    /// ended); nothing changed.
    Refused {
        /// The command refused.
        command: ElectionCommand,
    },
    /// A ZooKeeper answer the recipe has no way forward from.
    Failed(ZkError),
}

/// The election's state machine.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Election {
    inner: Lock,
    variant: ElectionVariant,
}

impl Election {
    /// A candidate in `dir` (created if missing); `guid` unique to this
    /// session.
    pub fn new(dir: &str, guid: &str) -> Election {
        Election::with_variant(dir, guid, ElectionVariant::Correct)
    }

    /// A candidate in `dir` (created if missing) running `variant`; `guid` unique to this
    /// session.
    pub fn with_variant(dir: &str, guid: &str, variant: ElectionVariant) -> Election {
        let keep = variant == ElectionVariant::KeepLeadershipAfterExpiry;
        // BUG (election/act-without-confirming): no sync + exists() before leading.
        let confirm = variant != ElectionVariant::ActWithoutConfirming;
        Election {
            inner: Lock::for_election(dir, guid, keep, confirm),
            variant,
        }
    }

    /// Renames the candidate (for a model's symmetry reduction), as
    /// [`Lock::rename`]: its guid becomes `guid`, and every node name it
    /// keeps is mapped by `path` (None: unchanged).
    pub fn rename(&mut self, guid: &str, path: &dyn Fn(&str) -> Option<String>) {
        self.inner.rename(guid, path);
    }

    /// True while leading and connected: the only time to act as leader.
    pub fn is_leader(&self) -> bool {
        self.inner.is_holder()
    }

    /// Leading, but suspended: disconnected, the session's fate not known yet.
    pub fn is_suspended(&self) -> bool {
        self.inner.is_suspended()
    }

    /// The session ended or the recipe failed: a new session is needed.
    pub fn is_over(&self) -> bool {
        self.inner.is_over()
    }

    /// Whether the machine's session has ended (expired or closed).
    pub fn session_ended(&self) -> bool {
        self.inner.session_ended()
    }

    /// The candidate's node (full path), once it has one.
    pub fn node(&self) -> Option<&str> {
        self.inner.node()
    }

    /// The variant this candidate runs.
    pub fn variant(&self) -> ElectionVariant {
        self.variant
    }

    /// What the machine is doing, in words (see [`Lock::describe`]).
    pub fn describe(&self) -> String {
        self.inner.describe()
    }
}

impl Machine for Election {
    type Command = ElectionCommand;
    type Outcome = ElectionOutcome;

    fn handle(&mut self, input: Input<ElectionCommand>) {
        let input = match input {
            Input::Command(ElectionCommand::Join) => Input::Command(LockCommand::Acquire),
            Input::Command(ElectionCommand::Resign) => Input::Command(LockCommand::Release),
            Input::Reply(id, r) => Input::Reply(id, r),
            Input::Watch(w) => Input::Watch(w),
            Input::Session(s) => Input::Session(s),
        };
        self.inner.handle(input);
    }

    fn poll(&mut self) -> Option<Output<ElectionOutcome>> {
        Some(match self.inner.poll()? {
            Output::Send(id, op) => Output::Send(id, op),
            Output::Outcome(o) => Output::Outcome(match o {
                LockOutcome::Acquired { token, .. } => ElectionOutcome::Elected { epoch: token },
                LockOutcome::Suspended => ElectionOutcome::Suspended,
                LockOutcome::Resumed => ElectionOutcome::Resumed,
                LockOutcome::Released => ElectionOutcome::Resigned,
                LockOutcome::Recovered { found } => ElectionOutcome::Recovered { found },
                LockOutcome::Woken { path } => ElectionOutcome::Woken { path },
                LockOutcome::Lost { reason } => ElectionOutcome::Lost { reason },
                LockOutcome::Refused { command } => ElectionOutcome::Refused {
                    command: match command {
                        LockCommand::Acquire => ElectionCommand::Join,
                        LockCommand::Release => ElectionCommand::Resign,
                    },
                },
                LockOutcome::Failed(e) => ElectionOutcome::Failed(e),
                LockOutcome::RevokeAsked => unreachable!("an election is not revocable"),
            }),
        })
    }
}

/// Why a candidate did not get what it asked for.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ElectionError {
    /// The session ended (or the node vanished): join again with a new
    /// session.
    Lost(ZkError),
    /// A ZooKeeper answer the recipe has no way forward from.
    Failed(ZkError),
    /// The command made no sense now; nothing changed.
    Refused,
}

impl std::fmt::Display for ElectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ElectionError::Lost(e) => {
                write!(f, "the session ended ({e}): start over with a new one")
            }
            ElectionError::Failed(e) => {
                write!(f, "an answer the recipe has no way forward from: {e}")
            }
            ElectionError::Refused => {
                f.write_str("the command makes no sense now; nothing changed")
            }
        }
    }
}

impl std::error::Error for ElectionError {}

/// The election for application code: [`Election`] over a [`Zk`] handle.
pub struct ElectionClient<'z, Z: Zk> {
    driver: Driver<'z, Z, Election>,
}

impl<'z, Z: Zk + Sync> ElectionClient<'z, Z> {
    /// A client running `election` over `zk`.
    pub fn new(zk: &'z Z, election: Election) -> Self {
        ElectionClient {
            driver: Driver::new(zk, election),
        }
    }

    /// Joins and waits until elected; returns the epoch.
    pub async fn lead(&mut self) -> Result<u64, ElectionError> {
        self.driver.command(ElectionCommand::Join);
        loop {
            match self.driver.next_outcome().await {
                ElectionOutcome::Elected { epoch } => return Ok(epoch),
                ElectionOutcome::Lost { reason } => return Err(ElectionError::Lost(reason)),
                ElectionOutcome::Failed(e) => return Err(ElectionError::Failed(e)),
                ElectionOutcome::Refused { .. } => return Err(ElectionError::Refused),
                _ => {}
            }
        }
    }

    /// Resigns: stops leading, or stops being a candidate (the node is deleted).
    pub async fn resign(&mut self) -> Result<(), ElectionError> {
        self.driver.command(ElectionCommand::Resign);
        loop {
            match self.driver.next_outcome().await {
                ElectionOutcome::Resigned => return Ok(()),
                ElectionOutcome::Lost { reason } => return Err(ElectionError::Lost(reason)),
                ElectionOutcome::Failed(e) => return Err(ElectionError::Failed(e)),
                ElectionOutcome::Refused { .. } => return Err(ElectionError::Refused),
                _ => {}
            }
        }
    }

    /// True while leading and connected, after taking in the events that
    /// have arrived. Check it before every act of leadership.
    pub fn is_leader(&mut self) -> bool {
        self.driver.pump();
        self.driver.machine().is_leader()
    }

    /// The driver underneath, for finer control (single commands, outcomes one by one).
    pub fn driver(&mut self) -> &mut Driver<'z, Z, Election> {
        &mut self.driver
    }
}

#[cfg(test)]
mod tests {
    //! The election's own layer: commands and outcomes in its terms. The
    //! algorithm's branches are tested on the lock (`lock_tests.rs`,
    //! `election_*`).
    use super::*;
    use zoosim_core::proto::{CreateMode, Op, Reply, SessionEvent, Stat};

    fn step(e: &mut Election, input: Input<ElectionCommand>) -> Vec<Output<ElectionOutcome>> {
        e.handle(input);
        std::iter::from_fn(|| e.poll()).collect()
    }

    #[test]
    fn variants_are_found_by_name() {
        for v in ElectionVariant::ALL {
            assert_eq!(ElectionVariant::from_name(v.name()), Some(v));
        }
        assert_eq!(ElectionVariant::from_name("election/none"), None);
    }

    #[test]
    fn join_elect_suspend_resume_resign() {
        let mut e = Election::new("/e", "g");
        assert_eq!(
            step(&mut e, Input::Command(ElectionCommand::Resign)),
            vec![Output::Outcome(ElectionOutcome::Refused {
                command: ElectionCommand::Resign
            })]
        );
        let out = step(&mut e, Input::Command(ElectionCommand::Join));
        assert!(matches!(
            &out[..],
            [Output::Send(0, Op::Create { path, mode: CreateMode::EphemeralSequential, .. })]
                if path == "/e/g-n_"
        ));
        let created = Reply::Create {
            path: "/e/g-n_0000000007".into(),
            stat: Stat::default(),
        };
        step(&mut e, Input::Reply(0, Ok(created)));
        let lowest = Reply::GetChildren {
            children: vec!["g-n_0000000007".into()],
            stat: Stat::default(),
        };
        step(&mut e, Input::Reply(1, Ok(lowest)));
        step(&mut e, Input::Reply(2, Ok(Reply::Sync)));
        let mine = Reply::Exists(Some(Stat::default()));
        assert_eq!(
            step(&mut e, Input::Reply(3, Ok(mine))),
            vec![Output::Outcome(ElectionOutcome::Elected { epoch: 7 })]
        );
        assert!(e.is_leader());
        assert_eq!(
            step(&mut e, Input::Session(SessionEvent::Disconnected)),
            vec![Output::Outcome(ElectionOutcome::Suspended)]
        );
        assert!(!e.is_leader(), "a disconnected leader must not act");
        assert_eq!(
            step(&mut e, Input::Session(SessionEvent::Connected)),
            vec![Output::Outcome(ElectionOutcome::Resumed)]
        );
        assert!(e.is_leader());
        let out = step(&mut e, Input::Command(ElectionCommand::Resign));
        assert!(
            matches!(&out[..], [Output::Send(4, Op::Delete { path, .. })] if path == "/e/g-n_0000000007")
        );
        assert_eq!(
            step(&mut e, Input::Reply(4, Ok(Reply::Delete))),
            vec![Output::Outcome(ElectionOutcome::Resigned)]
        );
        assert!(!e.is_leader());
    }
}
