//! The lock (recipes page, "Locks", with the guid trick of "Recoverable
//! errors and the GUID"):
//!
//! 1. create `dir/<guid>-lock-` EPHEMERAL_SEQUENTIAL;
//! 2. getChildren(dir) **without** a watch;
//! 3. lowest sequence number: the lock is held;
//! 4. else exists(next lower node, watch): gone already → step 2; else wait
//!    for its NodeDeleted, then step 2.
//!
//! Release deletes the node. A ConnectionLoss on the create leaves its
//! outcome unknown: once reconnected the machine syncs (so the server has
//! caught up with a create prepped before the reconnect, docs/ZOOKEEPER.md,
//! "Crashes, partitions and lost replies") and looks for its guid among the
//! children; only if it is absent is the create sent again. The fencing
//! token of an acquisition is the node's sequence number: holders take the
//! lock in sequence order, so tokens grow with every acquisition (as long
//! as `dir` itself is never deleted).
//!
//! ```
//! # use zoosim_client::local::{LocalConfig, LocalServer};
//! # use zoosim_recipes::lock::{Lock, LockClient};
//! # futures::executor::block_on(async {
//! let server = LocalServer::new(LocalConfig::default());
//! let zk = server.connect(4000);
//! let mut lock = LockClient::new(&zk, Lock::new("/locks/printer", "guid-1"));
//! let token = lock.acquire().await.expect("acquired");
//! // ... work, passing `token` to anything the lock protects ...
//! assert!(lock.is_holder());
//! lock.release().await.expect("released");
//! # let _ = token;
//! # });
//! ```

use super::{
    assert_component, base_name, child_path, classify, sequence_of, Driver, Failure, Input, Io,
    Machine, Output, Pending,
};
use zoosim_client::Zk;
use zoosim_core::proto::{CreateMode, EventType, Op, Reply, SessionEvent, ZkError};

/// The lock, correct or with one of the bugs real libraries shipped (for
/// testing the harness: each must be caught).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum LockVariant {
    /// The correct lock.
    #[default]
    Correct,
    /// Creates again after ConnectionLoss without looking for its guid
    /// (the recipes page's warning): an orphan node blocks the lock.
    BlindRetry,
    /// Every waiter watches the lowest node: each release wakes them all.
    Herd,
    /// Orders contenders by the whole name, guid included (ZOOKEEPER-2931).
    SortByFullName,
    /// When exists() finds the predecessor gone, waits for an event that
    /// never comes instead of listing again.
    StallOnVanishedPredecessor,
    /// A shared lock's reader waits on the next lower node of either kind
    /// (kazoo #649): readers queue behind readers.
    ReaderWaitsOnAny,
    /// After ConnectionLoss on its create, searches for its guid at once,
    /// without the sync first: the list may come from a server that has
    /// not applied the create yet (it was acknowledged to nobody), so the
    /// search finds nothing and creates again, and the first node, now
    /// an orphan of a live session, blocks the lock (the recipes page asks
    /// for the search; the sync is what makes its "not found" true).
    SearchWithoutSync,
}

impl LockVariant {
    /// Every variant, the correct one first.
    pub const ALL: [LockVariant; 7] = [
        LockVariant::Correct,
        LockVariant::BlindRetry,
        LockVariant::Herd,
        LockVariant::SortByFullName,
        LockVariant::StallOnVanishedPredecessor,
        LockVariant::ReaderWaitsOnAny,
        LockVariant::SearchWithoutSync,
    ];

    /// The variant's name in scenario files and reports (`lock`, `lock/herd`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            LockVariant::Correct => "lock",
            LockVariant::BlindRetry => "lock/blind-retry",
            LockVariant::Herd => "lock/herd",
            LockVariant::SortByFullName => "lock/sort-by-full-name",
            LockVariant::StallOnVanishedPredecessor => "lock/stall-on-vanished-predecessor",
            LockVariant::ReaderWaitsOnAny => "shared-lock/reader-waits-on-any",
            LockVariant::SearchWithoutSync => "lock/guid-search-without-sync",
        }
    }

    /// The variant named `name` (or by its name before
    /// [`RENAMED_VARIANTS`]), if any.
    pub fn from_name(name: &str) -> Option<LockVariant> {
        let name = renamed_variant(name);
        LockVariant::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// Variants renamed to their recipe's name as prefix (one name per
/// recipe everywhere: the shared lock is `shared-lock`, not `rwlock`):
/// (old, new). Scenario files and `zoosim check --variant` still take the
/// old names.
pub const RENAMED_VARIANTS: [(&str, &str); 1] = [(
    "rwlock/reader-waits-on-any",
    "shared-lock/reader-waits-on-any",
)];

/// `name`, or its new name if it is an old one in [`RENAMED_VARIANTS`].
pub fn renamed_variant(name: &str) -> &str {
    RENAMED_VARIANTS
        .iter()
        .find(|(old, _)| *old == name)
        .map_or(name, |(_, new)| new)
}

const LOCK: &str = "-lock-";
/// What a revoker writes into a holder's node to ask for it.
pub const REVOKE: &[u8] = b"unlock";
const READ: &str = "-read-";
const WRITE: &str = "-write-";

/// An exclusive lock, or one side of a shared (read/write) lock.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum LockMode {
    /// An exclusive lock (nodes `<guid>-lock-<seq>`).
    #[default]
    Exclusive,
    /// A shared lock's reader: holds together with other readers.
    Read,
    /// A shared lock's writer: holds alone.
    Write,
}

impl LockMode {
    fn marker(self) -> &'static str {
        match self {
            LockMode::Exclusive => LOCK,
            LockMode::Read => READ,
            LockMode::Write => WRITE,
        }
    }

    /// Whether this side may hold together with others (a reader).
    pub fn is_shared(self) -> bool {
        self == LockMode::Read
    }
}

/// What the application asks of a [`Lock`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum LockCommand {
    /// Acquire the lock (only when idle); answered by [`LockOutcome::Acquired`].
    Acquire,
    /// Releases a held lock, or gives up waiting (the node is deleted).
    Release,
}

/// What a [`Lock`] reports to the application.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum LockOutcome {
    /// The lock is held. `token` grows with every acquisition: pass it to
    /// whatever the lock protects, which should refuse smaller ones.
    Acquired {
        /// The held node (full path).
        node: String,
        /// The fencing token: the node's sequence number.
        token: u64,
    },
    /// The holder's connection broke: it must not act as holder (its
    /// session may expire meanwhile and another client take the lock).
    Suspended,
    /// Reconnected with the session intact: held again.
    Resumed,
    /// The node is deleted; the machine can acquire again.
    Released,
    /// After a ConnectionLoss on the create: whether the guid search found
    /// the node the create had made.
    Recovered {
        /// Whether the search found the node.
        found: bool,
    },
    /// A watch event reached the machine: the deletion of `path`. Counted
    /// to show that a release wakes one waiter, not a herd.
    Woken {
        /// The deleted node whose watch fired.
        path: String,
    },
    /// Not holding and not waiting any more: the session ended
    /// (SessionExpired) or the node vanished (NoNode). Start over with a new
    /// session.
    Lost {
        /// Why: `SessionExpired` when the session ended, `NoNode` when the node vanished.
        reason: ZkError,
    },
    /// A revoker asked for the lock (revocable locks): release it.
    RevokeAsked,
    /// A command that makes no sense now (acquire while acquiring, or after
    /// the session ended); nothing changed.
    Refused {
        /// The command refused.
        command: LockCommand,
    },
    /// An answer the recipe has no way forward from.
    Failed(ZkError),
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum Phase {
    Idle,
    /// Creating the node (and, after a NoNode, the missing parents first).
    /// `cancel`: release was asked for while the create's outcome is
    /// unknown, so the node is deleted as soon as it is found. Only these
    /// three phases, where the node is not known yet, can defer a release.
    Creating {
        req: Pending,
        cancel: bool,
    },
    /// After a ConnectionLoss on the create: sync, then the guid search.
    Syncing {
        req: Pending,
        cancel: bool,
    },
    Searching {
        req: Pending,
        cancel: bool,
    },
    // From here on our node is known: each phase carries its path.
    Listing {
        req: Pending,
        node: String,
    },
    /// Lowest, and told to confirm it before holding: sync, then exists()
    /// on the own node (leader election). `token` is the node's sequence
    /// number, read off the list that found it lowest.
    ConfirmSync {
        req: Pending,
        node: String,
        token: u64,
    },
    ConfirmExists {
        req: Pending,
        node: String,
        token: u64,
    },
    Checking {
        req: Pending,
        node: String,
        predecessor: String,
    },
    Waiting {
        node: String,
        predecessor: String,
    },
    /// `suspended`: the connection broke while holding; the holder must not
    /// act until it reconnects with the session intact.
    Held {
        node: String,
        suspended: bool,
    },
    Releasing {
        req: Pending,
        node: String,
    },
    /// The session ended or the recipe failed. `node` is the one it had, if
    /// any: after a failure with the session alive it may still exist.
    Over {
        node: Option<String>,
    },
}

impl Phase {
    /// Our node's path, once known.
    fn node(&self) -> Option<&str> {
        match self {
            Phase::Listing { node, .. }
            | Phase::ConfirmSync { node, .. }
            | Phase::ConfirmExists { node, .. }
            | Phase::Checking { node, .. }
            | Phase::Waiting { node, .. }
            | Phase::Held { node, .. }
            | Phase::Releasing { node, .. } => Some(node),
            Phase::Over { node } => node.as_deref(),
            Phase::Idle
            | Phase::Creating { .. }
            | Phase::Syncing { .. }
            | Phase::Searching { .. } => None,
        }
    }
}

/// The lock's state machine.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Lock {
    dir: String,
    guid: String,
    variant: LockVariant,
    io: Io<LockOutcome>,
    phase: Phase,
    /// The request that failed with ConnectionLoss, to send again once the
    /// session has reconnected.
    lost: Option<Pending>,
    /// What marks a contender's node: `<guid><marker><sequence>`.
    marker: String,
    mode: LockMode,
    /// Confirm the own node with sync + exists() before holding.
    confirm: bool,
    /// Election's bug switch: an expiry while holding is ignored.
    keep_after_expiry: bool,
    /// Revocable (recipes page, "Revocable Shared Locks"): the machine
    /// watches its own node's data; "unlock" there asks it to let go.
    revocable: bool,
    /// The getData(own node, watch) in flight, or lost to ConnectionLoss,
    /// with the node it reads (kept with the request: it outlives the
    /// phases, and is cleared whenever the node is let go).
    data_watch: Option<(Pending, String)>,
    /// The node whose data watch is armed: its events are ours, not a
    /// predecessor's (they may come after we released it).
    own_watched: Option<String>,
    lost_data_watch: Option<(Pending, String)>,
    revoke_asked: bool,
}

impl Lock {
    /// A lock on `dir` (created if missing). `guid` must be unique to this
    /// session: it is how the machine recognises its own node.
    pub fn new(dir: &str, guid: &str) -> Lock {
        Lock::with_variant(dir, guid, LockVariant::Correct)
    }

    /// A lock on `dir` (created if missing) running `variant`; `guid` unique to this
    /// session.
    pub fn with_variant(dir: &str, guid: &str, variant: LockVariant) -> Lock {
        assert_component("guid", guid);
        Lock {
            dir: dir.to_owned(),
            guid: guid.to_owned(),
            variant,
            io: Io::new(),
            phase: Phase::Idle,
            lost: None,
            marker: LOCK.into(),
            mode: LockMode::Exclusive,
            confirm: false,
            keep_after_expiry: false,
            revocable: false,
            data_watch: None,
            own_watched: None,
            lost_data_watch: None,
            revoke_asked: false,
        }
    }

    /// Makes this machine another contender's: guid `guid`, and every
    /// node name it keeps mapped by `path` (None: unchanged). For the models' symmetry
    /// reduction, which swaps clients (a contender's guid is in its
    /// node's name, and a waiter keeps its predecessor's); sound for a
    /// lock that compares guids only for equality (every variant but
    /// [`LockVariant::SortByFullName`]). Only between steps: nothing may
    /// wait to be polled.
    pub fn rename(&mut self, guid: &str, path: &dyn Fn(&str) -> Option<String>) {
        assert!(self.io.is_drained(), "a lock renamed mid-step");
        guid.clone_into(&mut self.guid);
        let phase = match &mut self.phase {
            Phase::Listing { node, .. }
            | Phase::ConfirmSync { node, .. }
            | Phase::ConfirmExists { node, .. }
            | Phase::Held { node, .. }
            | Phase::Releasing { node, .. }
            | Phase::Over { node: Some(node) } => [Some(node), None],
            Phase::Checking {
                node, predecessor, ..
            }
            | Phase::Waiting { node, predecessor } => [Some(node), Some(predecessor)],
            Phase::Idle
            | Phase::Creating { .. }
            | Phase::Syncing { .. }
            | Phase::Searching { .. }
            | Phase::Over { node: None } => [None, None],
        };
        let watched = [&mut self.data_watch, &mut self.lost_data_watch]
            .into_iter()
            .flatten()
            .map(|(_, p)| p);
        for p in phase
            .into_iter()
            .flatten()
            .chain(watched)
            .chain(&mut self.own_watched)
        {
            if let Some(q) = path(p) {
                *p = q;
            }
        }
    }

    /// A shared lock's reader (recipes page, "Shared Locks"): nodes
    /// `<guid>-read-<seq>` under `dir`, held when no write node is lower,
    /// waiting on the next lower write node only.
    pub fn read(dir: &str, guid: &str) -> Lock {
        Lock::shared(dir, guid, LockMode::Read, LockVariant::Correct)
    }

    /// A shared lock's writer: nodes `<guid>-write-<seq>`, held when lowest
    /// of both kinds, waiting on the next lower node of either kind.
    pub fn write(dir: &str, guid: &str) -> Lock {
        Lock::shared(dir, guid, LockMode::Write, LockVariant::Correct)
    }

    /// One side (`mode`) of a shared lock on `dir`, running `variant`; `guid` unique to
    /// this session.
    pub fn shared(dir: &str, guid: &str, mode: LockMode, variant: LockVariant) -> Lock {
        Lock {
            marker: mode.marker().into(),
            mode,
            ..Lock::with_variant(dir, guid, variant)
        }
    }

    /// Which side of the lock this machine takes.
    pub fn mode(&self) -> LockMode {
        self.mode
    }

    /// Makes the lock revocable: once its node exists the machine reads it
    /// with a data watch, and reports `RevokeAsked` when a revoker writes
    /// "unlock" there ([`REVOKE`]); the holder consents by releasing.
    pub fn revocable(mut self) -> Lock {
        self.revocable = true;
        self
    }

    /// The same algorithm for leader election: nodes `<guid>-n_<seq>`,
    /// the lowest confirmed (sync + exists) before it holds unless
    /// `confirm` is off (a buggy variant's).
    pub(crate) fn for_election(
        dir: &str,
        guid: &str,
        keep_after_expiry: bool,
        confirm: bool,
    ) -> Lock {
        Lock {
            marker: "-n_".into(),
            confirm,
            keep_after_expiry,
            ..Lock::new(dir, guid)
        }
    }

    /// A revoker asked for the lock (revocable locks).
    pub fn revoke_asked(&self) -> bool {
        self.revoke_asked
    }

    /// The machine's session has ended (expired or closed).
    pub fn session_ended(&self) -> bool {
        self.io.has_ended()
    }

    /// True while the lock is held and the session connected: the only time
    /// the holder may act.
    pub fn is_holder(&self) -> bool {
        matches!(
            self.phase,
            Phase::Held {
                suspended: false,
                ..
            }
        )
    }

    /// Held, but suspended: the connection broke and the session's fate is
    /// not known yet (`Resumed` or `Lost` follows).
    pub fn is_suspended(&self) -> bool {
        matches!(
            self.phase,
            Phase::Held {
                suspended: true,
                ..
            }
        )
    }

    /// Whether the machine is idle: not acquiring, holding, releasing nor over.
    pub fn is_idle(&self) -> bool {
        self.phase == Phase::Idle
    }

    /// The session ended or the recipe failed: a new session is needed.
    pub fn is_over(&self) -> bool {
        matches!(self.phase, Phase::Over { .. })
    }

    /// Acquiring: neither idle, held, releasing nor over.
    pub fn is_waiting(&self) -> bool {
        !matches!(
            self.phase,
            Phase::Idle | Phase::Held { .. } | Phase::Releasing { .. } | Phase::Over { .. }
        )
    }

    /// The machine's node (full path), once it has one.
    pub fn node(&self) -> Option<&str> {
        self.phase.node()
    }

    /// The variant this lock runs.
    pub fn variant(&self) -> LockVariant {
        self.variant
    }

    /// What the machine is doing, in words, with the nodes it knows of:
    /// which node it waits on, which it holds (for a report of a client
    /// that never got anywhere).
    pub fn describe(&self) -> String {
        let node = |n: &str| n.rsplit('/').next().unwrap_or(n).to_owned();
        match &self.phase {
            Phase::Idle => "idle".to_owned(),
            Phase::Creating { .. } => "creating its node".to_owned(),
            Phase::Syncing { .. } | Phase::Searching { .. } => {
                "looking for its node after a ConnectionLoss on the create".to_owned()
            }
            Phase::Listing { node: n, .. } => format!("listing the children, own node {}", node(n)),
            Phase::ConfirmSync { node: n, .. } | Phase::ConfirmExists { node: n, .. } => {
                format!("confirming its node {} before holding", node(n))
            }
            Phase::Checking {
                node: n,
                predecessor,
                ..
            } => format!(
                "asking whether {predecessor} exists (to watch it), own node {}",
                node(n)
            ),
            Phase::Waiting {
                node: n,
                predecessor,
            } => format!(
                "waiting for {predecessor} to go (exists watch), own node {}",
                node(n)
            ),
            Phase::Held { node: n, suspended } => format!(
                "holding with {}{}",
                node(n),
                if *suspended { ", suspended" } else { "" }
            ),
            Phase::Releasing { node: n, .. } => format!("deleting its node {}", node(n)),
            Phase::Over { node: n } => match n {
                Some(n) => format!("over (session ended or failed), had {}", node(n)),
                None => "over (session ended or failed)".to_owned(),
            },
        }
    }

    fn prefix(&self) -> String {
        format!("{}{}", self.guid, self.marker)
    }

    fn create(&mut self, with_parents: bool, cancel: bool) {
        if with_parents {
            let dir = self.dir.clone();
            self.io.create_path(&dir);
        }
        let req = self.io.send(Op::Create {
            path: child_path(&self.dir, &self.prefix()),
            data: vec![],
            mode: CreateMode::EphemeralSequential,
        });
        self.phase = Phase::Creating { req, cancel };
    }

    fn sync(&mut self, cancel: bool) {
        let req = self.io.send(Op::Sync {
            path: self.dir.clone(),
        });
        self.phase = Phase::Syncing { req, cancel };
    }

    /// The guid search's list.
    fn search(&mut self, cancel: bool) {
        let req = self.io.send(Op::GetChildren {
            path: self.dir.clone(),
            watch: false,
        });
        self.phase = Phase::Searching { req, cancel };
    }

    fn list(&mut self, node: String) {
        let req = self.io.send(Op::GetChildren {
            path: self.dir.clone(),
            watch: false,
        });
        self.phase = Phase::Listing { req, node };
    }

    fn check(&mut self, node: String, predecessor: String) {
        let req = self.io.send(Op::Exists {
            path: child_path(&self.dir, &predecessor),
            watch: true,
        });
        self.phase = Phase::Checking {
            req,
            node,
            predecessor,
        };
    }

    fn release(&mut self, node: String) {
        let req = self.io.send(Op::Delete {
            path: node.clone(),
            version: -1,
        });
        self.phase = Phase::Releasing { req, node };
    }

    /// Sends again the request the current phase is waiting for.
    fn resend(&mut self) {
        self.lost = None;
        match self.phase.clone() {
            Phase::Creating { cancel, .. } => match self.variant {
                LockVariant::BlindRetry => self.create(false, cancel),
                LockVariant::SearchWithoutSync => self.search(cancel),
                _ => self.sync(cancel),
            },
            Phase::Syncing { cancel, .. } => self.sync(cancel),
            Phase::Searching { cancel, .. } => self.search(cancel),
            Phase::Listing { node, .. } => self.list(node),
            Phase::ConfirmSync { node, token, .. } => self.confirm_sync(node, token),
            Phase::ConfirmExists { node, token, .. } => self.confirm_exists(node, token),
            Phase::Checking {
                node, predecessor, ..
            } => self.check(node, predecessor),
            Phase::Releasing { node, .. } => self.release(node),
            phase => unreachable!("nothing to send again in {phase:?}"),
        }
    }

    fn current(&self) -> Option<Pending> {
        match &self.phase {
            Phase::Creating { req, .. }
            | Phase::Syncing { req, .. }
            | Phase::Searching { req, .. }
            | Phase::Listing { req, .. }
            | Phase::ConfirmSync { req, .. }
            | Phase::ConfirmExists { req, .. }
            | Phase::Releasing { req, .. }
            | Phase::Checking { req, .. } => Some(*req),
            _ => None,
        }
    }

    fn end(&mut self, reason: ZkError) {
        if reason == ZkError::SessionExpired {
            self.io.end(); // a SessionExpired reply says so as much as the event
        }
        self.data_watch = None;
        self.lost_data_watch = None;
        if self.keep_after_expiry {
            if let Phase::Held { suspended, .. } = &mut self.phase {
                // BUG (election/keep-leadership-after-expiry, CURATOR-696):
                // goes on acting as holder with a session that is gone.
                *suspended = false;
                self.lost = None;
                return;
            }
        }
        if !matches!(self.phase, Phase::Idle | Phase::Over { .. }) {
            self.io.report(LockOutcome::Lost { reason });
        }
        let node = self.phase.node().map(str::to_owned);
        self.phase = Phase::Over { node };
        self.lost = None;
    }

    /// Our node is gone (a list or exists() without it): the session
    /// expired while a lagging server still had it, or someone deleted it.
    /// Either way we hold nothing, and have no node to remember.
    fn vanished(&mut self) {
        self.end(ZkError::NoNode);
        self.phase = Phase::Over { node: None };
    }

    fn fail(&mut self, error: ZkError) {
        self.io.report(LockOutcome::Failed(error));
        let node = self.phase.node().map(str::to_owned);
        self.phase = Phase::Over { node };
        self.lost = None;
    }

    /// Our node is found (created, or by the guid search): watch its data
    /// (revocable locks), then let go of it at once if release was asked
    /// for meanwhile, or go on with `then`.
    fn found(&mut self, node: String, cancel: bool, then: impl FnOnce(&mut Self, String)) {
        if cancel {
            self.release(node);
        } else {
            self.watch_own_data(node.clone());
            then(self, node);
        }
    }

    /// Step 3/4 on a fresh child list.
    fn decide(&mut self, node: String, children: &[String]) {
        let ours = base_name(&node);
        let mut contenders: Vec<(u64, &str)> = children
            .iter()
            .filter(|c| match self.mode {
                LockMode::Exclusive => c.contains(self.marker.as_str()),
                LockMode::Read | LockMode::Write => c.contains(READ) || c.contains(WRITE),
            })
            .filter_map(|c| Some((sequence_of(c)?, c.as_str())))
            .collect();
        match self.variant {
            LockVariant::SortByFullName => contenders.sort_by(|a, b| a.1.cmp(b.1)),
            _ => contenders.sort(),
        }
        let Some(at) = contenders.iter().position(|c| c.1 == ours) else {
            // Our ephemeral is gone: the session expired (we will hear) or
            // someone deleted it. Either way we hold nothing.
            self.vanished();
            return;
        };
        // Found among the contenders, so its sequence number is known: the
        // fencing token if it holds.
        let token = contenders[at].0;
        // What blocks us: for a reader, only the write nodes below it.
        let blockers: Vec<&str> = contenders[..at]
            .iter()
            .map(|c| c.1)
            .filter(|name| self.mode != LockMode::Read || name.contains(WRITE))
            .collect();
        let Some(&last_blocker) = blockers.last() else {
            if self.confirm {
                self.confirm_sync(node, token);
            } else {
                self.hold(node, token);
            }
            return;
        };
        let predecessor = match self.variant {
            LockVariant::Herd => contenders[0].1,
            // BUG (shared-lock/reader-waits-on-any, kazoo #649): a reader waits
            // on the next lower node of either kind.
            LockVariant::ReaderWaitsOnAny if self.mode == LockMode::Read => contenders[at - 1].1,
            _ => last_blocker,
        };
        let predecessor = predecessor.to_owned();
        self.check(node, predecessor);
    }

    fn confirm_sync(&mut self, node: String, token: u64) {
        let req = self.io.send(Op::Sync {
            path: self.dir.clone(),
        });
        self.phase = Phase::ConfirmSync { req, node, token };
    }

    fn confirm_exists(&mut self, node: String, token: u64) {
        let req = self.io.send(Op::Exists {
            path: node.clone(),
            watch: false,
        });
        self.phase = Phase::ConfirmExists { req, node, token };
    }

    fn hold(&mut self, node: String, token: u64) {
        let suspended = !self.io.is_connected();
        self.phase = Phase::Held {
            node: node.clone(),
            suspended,
        };
        self.io.report(LockOutcome::Acquired { node, token });
        if suspended {
            self.io.report(LockOutcome::Suspended);
        }
    }

    /// The reply to `pending`, the current phase's request.
    fn on_reply(&mut self, pending: Pending, result: Result<Reply, ZkError>) {
        let phase = self.phase.clone();
        let reply = match result {
            Ok(reply) => reply,
            Err(e) => match classify(e) {
                Failure::SessionEnded => return self.end(ZkError::SessionExpired),
                Failure::Unknown => {
                    if self.io.may_retry(pending) {
                        self.resend();
                    } else {
                        self.lost = Some(pending);
                    }
                    return;
                }
                Failure::Answer(e) => return self.on_answer(phase, e),
            },
        };
        match (phase, reply) {
            (Phase::Creating { cancel, .. }, Reply::Create { path, .. }) => {
                self.found(path, cancel, Self::list)
            }
            (Phase::Syncing { cancel, .. }, Reply::Sync) => self.search(cancel),
            (Phase::Searching { cancel, .. }, Reply::GetChildren { children, .. }) => {
                let prefix = self.prefix();
                let mine = children
                    .iter()
                    .filter(|c| c.starts_with(&prefix))
                    .min_by_key(|c| sequence_of(c));
                self.io.report(LockOutcome::Recovered {
                    found: mine.is_some(),
                });
                match mine {
                    Some(name) => {
                        let node = child_path(&self.dir, name);
                        self.found(node, cancel, |m, node| m.decide(node, &children));
                    }
                    None if cancel => {
                        self.phase = Phase::Idle;
                        self.io.report(LockOutcome::Released);
                    }
                    None => self.create(false, false),
                }
            }
            (Phase::Listing { node, .. }, Reply::GetChildren { children, .. }) => {
                self.decide(node, &children)
            }
            (Phase::ConfirmSync { node, token, .. }, Reply::Sync) => {
                self.confirm_exists(node, token)
            }
            (Phase::ConfirmExists { node, token, .. }, Reply::Exists(Some(_))) => {
                self.hold(node, token)
            }
            // Our node is gone: the session expired while a lagging server
            // still listed it.
            (Phase::ConfirmExists { .. }, Reply::Exists(None)) => self.vanished(),
            (
                Phase::Checking {
                    node, predecessor, ..
                },
                Reply::Exists(stat),
            ) => match stat {
                Some(_) => self.phase = Phase::Waiting { node, predecessor },
                None if self.variant == LockVariant::StallOnVanishedPredecessor => {
                    self.phase = Phase::Waiting { node, predecessor }
                }
                None => self.list(node),
            },
            (Phase::Releasing { .. }, Reply::Delete) => self.released(),
            (phase, reply) => unreachable!("lock: {reply:?} in {phase:?}"),
        }
    }

    fn on_answer(&mut self, phase: Phase, error: ZkError) {
        match (phase, error) {
            // The parent is missing: create it, then the node.
            (Phase::Creating { cancel, .. }, ZkError::NoNode) => self.create(true, cancel),
            // No dir means none of our nodes either.
            (Phase::Searching { cancel, .. }, ZkError::NoNode) => {
                self.io.report(LockOutcome::Recovered { found: false });
                if cancel {
                    self.phase = Phase::Idle;
                    self.io.report(LockOutcome::Released);
                } else {
                    self.create(true, false);
                }
            }
            // A sync of a missing path is still a sync.
            (Phase::Syncing { cancel, .. }, ZkError::NoNode) => self.search(cancel),
            (Phase::Listing { .. }, ZkError::NoNode) => self.vanished(),
            // A retried delete that had been done.
            (Phase::Releasing { .. }, ZkError::NoNode) => self.released(),
            (_, e) => self.fail(e),
        }
    }

    /// Reads our node `node` with a data watch (revocable locks only).
    fn watch_own_data(&mut self, node: String) {
        if !self.revocable {
            return;
        }
        self.own_watched = Some(node.clone());
        let req = self.io.send(Op::GetData {
            path: node.clone(),
            watch: true,
        });
        self.data_watch = Some((req, node));
    }

    fn on_data_watch(&mut self, pending: Pending, node: String, result: Result<Reply, ZkError>) {
        match result {
            Ok(Reply::GetData { data, .. }) => {
                if data == REVOKE && !self.revoke_asked && self.phase.node().is_some() {
                    self.revoke_asked = true;
                    self.io.report(LockOutcome::RevokeAsked);
                }
            }
            // Our node is gone; the lock's own steps will find out.
            Err(ZkError::NoNode) => {}
            Err(e) => match classify(e) {
                Failure::SessionEnded => self.end(ZkError::SessionExpired),
                Failure::Unknown if self.io.may_retry(pending) => self.watch_own_data(node),
                Failure::Unknown => self.lost_data_watch = Some((pending, node)),
                Failure::Answer(e) => self.fail(e),
            },
            Ok(other) => unreachable!("lock data watch: {other:?}"),
        }
    }

    fn released(&mut self) {
        self.revoke_asked = false;
        self.data_watch = None;
        self.lost_data_watch = None;
        self.phase = Phase::Idle;
        self.io.report(LockOutcome::Released);
    }

    fn on_command(&mut self, command: LockCommand) {
        match (command, &mut self.phase) {
            (LockCommand::Acquire, Phase::Idle) => self.create(false, false),
            (LockCommand::Release, Phase::Over { .. }) => {
                self.io.report(LockOutcome::Refused { command })
            }
            (LockCommand::Release, _) if self.io.has_ended() => {
                // Even the buggy election lets go when told to.
                self.keep_after_expiry = false;
                self.end(ZkError::SessionExpired)
            }
            (LockCommand::Release, Phase::Held { node, .. })
            | (LockCommand::Release, Phase::Listing { node, .. })
            | (LockCommand::Release, Phase::ConfirmSync { node, .. })
            | (LockCommand::Release, Phase::ConfirmExists { node, .. })
            | (LockCommand::Release, Phase::Checking { node, .. })
            | (LockCommand::Release, Phase::Waiting { node, .. }) => {
                let node = node.clone();
                // A request in flight has its reply ignored from now on.
                self.lost = None;
                self.release(node)
            }
            (LockCommand::Release, Phase::Creating { cancel, .. })
            | (LockCommand::Release, Phase::Syncing { cancel, .. })
            | (LockCommand::Release, Phase::Searching { cancel, .. }) => *cancel = true,
            _ => self.io.report(LockOutcome::Refused { command }),
        }
    }
}

impl Machine for Lock {
    type Command = LockCommand;
    type Outcome = LockOutcome;

    fn handle(&mut self, input: Input<LockCommand>) {
        match input {
            Input::Command(c) => self.on_command(c),
            Input::Reply(id, result) => {
                // Replies to requests the machine has moved on from (parent
                // creates, a request whose phase was cancelled) are dropped.
                if let Some((p, node)) = self.data_watch.take_if(|(p, _)| p.op == id) {
                    self.on_data_watch(p, node, result);
                } else if let Some(p) = self.current().filter(|p| p.op == id) {
                    self.on_reply(p, result);
                } else if result == Err(ZkError::SessionExpired) {
                    self.end(ZkError::SessionExpired);
                }
            }
            Input::Watch(event) => {
                if self.own_watched.as_deref() == Some(event.path.as_str()) {
                    // Our own node's data watch (revocable locks), which
                    // fired: one-shot, re-armed while the node is ours.
                    self.own_watched = None;
                    let current = self.phase.node() == Some(event.path.as_str());
                    if current
                        && event.event_type == EventType::NodeDataChanged
                        && self.data_watch.is_none()
                        && !self.io.has_ended()
                    {
                        self.watch_own_data(event.path);
                    }
                    return;
                }
                let woken = match &self.phase {
                    Phase::Waiting { node, predecessor }
                        if child_path(&self.dir, predecessor) == event.path =>
                    {
                        Some(node.clone())
                    }
                    _ => None,
                };
                if event.event_type == EventType::NodeDeleted {
                    self.io.report(LockOutcome::Woken {
                        path: event.path.clone(),
                    });
                }
                // Any event on the predecessor ends its exist watch: a
                // revoker's setData there fires NodeDataChanged, and a
                // waiter that only listened for NodeDeleted would wait for
                // ever (found by the revocable-lock sweep). List again.
                if let Some(node) = woken {
                    self.list(node);
                }
            }
            Input::Session(event) => {
                if self.io.on_session(event) {
                    return self.end(ZkError::SessionExpired);
                }
                match event {
                    SessionEvent::Disconnected => {
                        if let Phase::Held { suspended, .. } = &mut self.phase {
                            if !*suspended {
                                *suspended = true;
                                self.io.report(LockOutcome::Suspended);
                            }
                        }
                    }
                    SessionEvent::Connected => {
                        if let Phase::Held { suspended, .. } = &mut self.phase {
                            if *suspended {
                                // Same session, so our ephemeral is still there.
                                *suspended = false;
                                self.io.report(LockOutcome::Resumed);
                            }
                        }
                        if let Some(p) = self.lost {
                            if self.io.may_retry(p) {
                                self.resend();
                            }
                        }
                        if let Some((_, node)) =
                            self.lost_data_watch.take_if(|(p, _)| self.io.may_retry(*p))
                        {
                            self.watch_own_data(node);
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    fn poll(&mut self) -> Option<Output<LockOutcome>> {
        self.io.poll()
    }
}

/// Why an acquisition or release did not succeed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum LockError {
    /// The session ended (or the node vanished): start over with a new
    /// session.
    Lost(ZkError),
    /// A ZooKeeper answer the recipe has no way forward from.
    Failed(ZkError),
    /// The command made no sense now (acquire while acquiring, or after the session
    /// ended); nothing changed.
    Refused,
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Lost(e) => write!(f, "the session ended ({e}): start over with a new one"),
            LockError::Failed(e) => write!(f, "an answer the recipe has no way forward from: {e}"),
            LockError::Refused => f.write_str("the command makes no sense now; nothing changed"),
        }
    }
}

impl std::error::Error for LockError {}

/// The lock for application code: [`Lock`] run over a [`Zk`] handle.
pub struct LockClient<'z, Z: Zk> {
    driver: Driver<'z, Z, Lock>,
}

impl<'z, Z: Zk + Sync> LockClient<'z, Z> {
    /// A client running `lock` over `zk`.
    pub fn new(zk: &'z Z, lock: Lock) -> Self {
        LockClient {
            driver: Driver::new(zk, lock),
        }
    }

    /// Waits until the lock is held; returns the fencing token.
    pub async fn acquire(&mut self) -> Result<u64, LockError> {
        self.driver.command(LockCommand::Acquire);
        loop {
            match self.driver.next_outcome().await {
                LockOutcome::Acquired { token, .. } => return Ok(token),
                LockOutcome::Lost { reason } => return Err(LockError::Lost(reason)),
                LockOutcome::Failed(e) => return Err(LockError::Failed(e)),
                LockOutcome::Refused { .. } => return Err(LockError::Refused),
                _ => {}
            }
        }
    }

    /// Releases the lock (or gives up waiting for it).
    pub async fn release(&mut self) -> Result<(), LockError> {
        self.driver.command(LockCommand::Release);
        loop {
            match self.driver.next_outcome().await {
                LockOutcome::Released => return Ok(()),
                LockOutcome::Lost { reason } => return Err(LockError::Lost(reason)),
                LockOutcome::Failed(e) => return Err(LockError::Failed(e)),
                LockOutcome::Refused { .. } => return Err(LockError::Refused),
                _ => {}
            }
        }
    }

    /// True while held and connected, after taking in the events that have
    /// arrived. Check it before every action the lock protects.
    pub fn is_holder(&mut self) -> bool {
        self.driver.pump();
        self.driver.machine().is_holder()
    }

    /// The driver underneath, for finer control (single commands, outcomes one by one).
    pub fn driver(&mut self) -> &mut Driver<'z, Z, Lock> {
        &mut self.driver
    }
}

/// Copies of the lock broken on purpose, for the tests that show an
/// oracle or a model catching what each breaks: the simulation's and the
/// models' tests run the same copy. No variant of the recipe (`zoosim
/// list` never shows them), so hidden from the docs.
#[doc(hidden)]
#[path = "lock_broken.rs"]
pub mod broken;

#[cfg(test)]
#[path = "lock_tests.rs"]
mod tests;
