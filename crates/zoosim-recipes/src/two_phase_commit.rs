//! Two-phase commit (recipes page, "Two-phased Commit"): a coordinator
//! creates the transaction node `T` and one vote node `T/s<i>` per site in
//! one multi (all or nothing, so a resend after ConnectionLoss that meets
//! NodeExists finds it done); each site creates its own EPHEMERAL
//! `T/alive-s<i>`, writes its vote into `T/s<i>`, and reads every vote with
//! a watch; any "abort" decides abort at once, all "commit" decide commit.
//!
//! Votes are written with version 0, a compare-and-set: the first word on
//! a vote node is final. A site that sees another site's `alive` node go
//! (its session ended) before that site voted writes "abort" for it the
//! same way; whichever write comes first wins, so every site reads the same
//! votes and decides the same. After a lost reply a vote is read back.
//!
//! ```
//! # use zoosim_client::local::{LocalConfig, LocalServer};
//! # use zoosim_recipes::two_phase_commit::{create_transaction, Site, SiteClient};
//! # use zoosim_client::Zk;
//! # futures::executor::block_on(async {
//! let server = LocalServer::new(LocalConfig::default());
//! let zk = server.connect(4000);
//! zk.call(create_transaction("/tx-1", 2)).await.expect("created");
//! let (a, b) = (server.connect(4000), server.connect(4000));
//! let mut site0 = SiteClient::new(&a, Site::new("/tx-1", 0, 2));
//! let mut site1 = SiteClient::new(&b, Site::new("/tx-1", 1, 2));
//! site0.vote(true).await.expect("voted");
//! site1.vote(false).await.expect("voted");
//! assert_eq!(site0.decision().await, Ok(false)); // one abort: abort
//! assert_eq!(site1.decision().await, Ok(false));
//! # });
//! ```

use super::{child_path, classify, Driver, Failure, Input, Io, Machine, Output, Pending};
use zoosim_client::Zk;
use zoosim_core::proto::{CreateMode, EventType, MultiOp, Op, Reply, SessionEvent, ZkError};

/// Which site to run: the correct one, or a known-buggy one to reproduce
/// its bug.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum TwoPhaseCommitVariant {
    /// Decides commit only once every vote node holds "commit".
    #[default]
    Correct,
    /// Decides commit once it has read every vote node and none holds
    /// "abort": a node still empty (its site has not voted yet) is taken
    /// as no objection instead of being waited for. A site that votes
    /// abort after that read is outvoted by a decision already made.
    CommitBeforeAllVotes,
}

impl TwoPhaseCommitVariant {
    /// Every variant, the correct one first.
    pub const ALL: [TwoPhaseCommitVariant; 2] = [
        TwoPhaseCommitVariant::Correct,
        TwoPhaseCommitVariant::CommitBeforeAllVotes,
    ];

    /// The variant's name in scenario files and reports
    /// (`two-phase-commit`, `two-phase-commit/commit-before-all-votes`).
    pub const fn name(self) -> &'static str {
        match self {
            TwoPhaseCommitVariant::Correct => "two-phase-commit",
            TwoPhaseCommitVariant::CommitBeforeAllVotes => {
                "two-phase-commit/commit-before-all-votes"
            }
        }
    }

    /// The variant named `name`, if any.
    pub fn from_name(name: &str) -> Option<TwoPhaseCommitVariant> {
        TwoPhaseCommitVariant::ALL
            .into_iter()
            .find(|v| v.name() == name)
    }
}

const COMMIT: &[u8] = b"commit";
const ABORT: &[u8] = b"abort";

/// The coordinator's request: `tx` and its `sites` vote nodes, atomically.
pub fn create_transaction(tx: &str, sites: usize) -> Op {
    let mut ops = vec![MultiOp::Create {
        path: tx.to_owned(),
        data: vec![],
        mode: CreateMode::Persistent,
    }];
    for i in 0..sites {
        ops.push(MultiOp::Create {
            path: child_path(tx, &format!("s{i}")),
            data: vec![],
            mode: CreateMode::Persistent,
        });
    }
    Op::Multi(ops)
}

/// What the application asks of a [`Site`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum SiteCommand {
    /// Vote on the transaction (once); answered by [`SiteOutcome::Voted`], then
    /// [`SiteOutcome::Decided`].
    Vote {
        /// True to vote commit, false to vote abort.
        commit: bool,
    },
}

/// What a [`Site`] reports to the application.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum SiteOutcome {
    /// Our vote is on its node (or an abort written for us came first:
    /// `ours` false).
    Voted {
        /// False when an abort written for us came first.
        ours: bool,
    },
    /// The decision: commit or abort.
    Decided {
        /// True to commit, false to abort.
        commit: bool,
    },
    /// We wrote "abort" for site `site`, whose session ended unvoted.
    AbortedFor {
        /// The index of the site aborted for.
        site: usize,
    },
    /// The session ended before the decision: start over with a new session.
    Lost {
        /// Why: `SessionExpired` (also when the session expired or closed).
        reason: ZkError,
    },
    /// A second vote, or a vote after the machine stopped; nothing changed.
    Refused,
    /// A ZooKeeper answer the recipe has no way forward from; the machine stops.
    Failed(ZkError),
}

/// What one request of the site is for.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Purpose {
    Alive,
    Vote,
    ReadVote(usize),
    ListAlive,
    AbortFor(usize),
}

/// One site's state machine in a two-phase commit (see the module docs).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Site {
    tx: String,
    me: usize,
    sites: usize,
    variant: TwoPhaseCommitVariant,
    io: Io<SiteOutcome>,
    vote: Option<bool>,
    voted: bool,
    /// Each site's vote as read: None not yet, Some(None) empty.
    votes: Vec<Option<Option<bool>>>,
    /// Sites whose alive node we have seen.
    seen_alive: Vec<bool>,
    decided: Option<bool>,
    /// Requests in flight, with what they are for.
    pending: Vec<(Pending, Purpose)>,
    /// Requests lost to ConnectionLoss, to send again after a reconnect.
    lost: Vec<(Pending, Purpose)>,
    over: bool,
}

impl Site {
    /// Site number `me` of `sites` in the transaction whose node is `tx`.
    pub fn new(tx: &str, me: usize, sites: usize) -> Site {
        Site::with_variant(tx, me, sites, TwoPhaseCommitVariant::Correct)
    }

    /// [`Site::new`], running `variant` (a buggy one reproduces its bug).
    pub fn with_variant(tx: &str, me: usize, sites: usize, variant: TwoPhaseCommitVariant) -> Site {
        assert!(me < sites, "site {me} of {sites}");
        Site {
            tx: tx.to_owned(),
            me,
            sites,
            variant,
            io: Io::new(),
            vote: None,
            voted: false,
            votes: vec![None; sites],
            seen_alive: vec![false; sites],
            decided: None,
            pending: Vec::new(),
            lost: Vec::new(),
            over: false,
        }
    }

    /// The decision once known: true to commit, false to abort.
    pub fn decision(&self) -> Option<bool> {
        self.decided
    }

    /// The variant this machine runs.
    pub fn variant(&self) -> TwoPhaseCommitVariant {
        self.variant
    }

    /// Whether the machine's session has ended.
    pub fn session_ended(&self) -> bool {
        self.io.has_ended()
    }

    fn vote_path(&self, site: usize) -> String {
        child_path(&self.tx, &format!("s{site}"))
    }

    fn alive_path(&self, site: usize) -> String {
        child_path(&self.tx, &format!("alive-s{site}"))
    }

    fn send(&mut self, purpose: Purpose) {
        let op = match purpose {
            Purpose::Alive => Op::Create {
                path: self.alive_path(self.me),
                data: vec![],
                mode: CreateMode::Ephemeral,
            },
            Purpose::Vote => Op::SetData {
                path: self.vote_path(self.me),
                data: if self.vote == Some(true) {
                    COMMIT
                } else {
                    ABORT
                }
                .to_vec(),
                version: 0,
            },
            Purpose::ReadVote(j) => Op::GetData {
                path: self.vote_path(j),
                watch: true,
            },
            Purpose::ListAlive => Op::GetChildren {
                path: self.tx.clone(),
                watch: true,
            },
            Purpose::AbortFor(j) => Op::SetData {
                path: self.vote_path(j),
                data: ABORT.to_vec(),
                version: 0,
            },
        };
        let p = self.io.send(op);
        self.pending.push((p, purpose));
    }

    fn end(&mut self, reason: ZkError) {
        if reason == ZkError::SessionExpired {
            self.io.end();
        }
        if !self.over && self.decided.is_none() {
            self.io.report(SiteOutcome::Lost { reason });
        }
        self.over = true;
        self.pending.clear();
        self.lost.clear();
    }

    fn decide(&mut self) {
        if self.decided.is_some() {
            return;
        }
        let votes: Vec<Option<bool>> = self.votes.iter().map(|v| v.flatten()).collect();
        let commit = if votes.contains(&Some(false)) {
            false
        } else if votes.iter().all(|v| *v == Some(true)) {
            true
        } else if self.variant == TwoPhaseCommitVariant::CommitBeforeAllVotes
            && self.votes.iter().all(Option::is_some)
        {
            // The bug: every node read once, no abort among them, and the
            // empty ones not waited for.
            true
        } else {
            return;
        };
        self.decided = Some(commit);
        self.io.report(SiteOutcome::Decided { commit });
    }

    fn on_reply(&mut self, p: Pending, purpose: Purpose, result: Result<Reply, ZkError>) {
        match (purpose, result) {
            (Purpose::Alive, Ok(_) | Err(ZkError::NodeExists)) => self.send(Purpose::Vote),
            (Purpose::Vote, Ok(_)) => {
                self.voted = true;
                self.io.report(SiteOutcome::Voted { ours: true });
                self.read_all();
            }
            // Taken already: our own resent vote, or an abort for us.
            (Purpose::Vote, Err(ZkError::BadVersion)) => {
                self.voted = true;
                self.io.report(SiteOutcome::Voted { ours: false });
                self.read_all();
            }
            (Purpose::ReadVote(j), Ok(Reply::GetData { data, .. })) => {
                self.votes[j] = Some(match data.as_slice() {
                    COMMIT => Some(true),
                    ABORT => Some(false),
                    _ => None,
                });
                self.decide();
            }
            (Purpose::ListAlive, Ok(Reply::GetChildren { children, .. })) => {
                for j in 0..self.sites {
                    let alive = children.contains(&format!("alive-s{j}"));
                    let unvoted = self.votes[j] == Some(None);
                    if alive {
                        self.seen_alive[j] = true;
                    } else if self.seen_alive[j] && unvoted && self.decided.is_none() {
                        self.seen_alive[j] = false;
                        self.send(Purpose::AbortFor(j));
                    }
                }
            }
            (Purpose::AbortFor(j), Ok(_)) => {
                self.io.report(SiteOutcome::AbortedFor { site: j });
                self.send(Purpose::ReadVote(j));
            }
            (Purpose::AbortFor(j), Err(ZkError::BadVersion)) => self.send(Purpose::ReadVote(j)),
            (_, Err(e)) => match classify(e) {
                Failure::SessionEnded => self.end(ZkError::SessionExpired),
                Failure::Unknown if self.io.may_retry(p) => self.send(purpose),
                Failure::Unknown => self.lost.push((p, purpose)),
                Failure::Answer(e) => {
                    self.io.report(SiteOutcome::Failed(e));
                    self.over = true;
                }
            },
            (purpose, Ok(reply)) => unreachable!("site: {reply:?} for {purpose:?}"),
        }
    }

    fn read_all(&mut self) {
        for j in 0..self.sites {
            self.send(Purpose::ReadVote(j));
        }
        self.send(Purpose::ListAlive);
    }
}

impl Machine for Site {
    type Command = SiteCommand;
    type Outcome = SiteOutcome;

    fn handle(&mut self, input: Input<SiteCommand>) {
        match input {
            Input::Command(SiteCommand::Vote { commit }) => {
                if self.over || self.vote.is_some() {
                    return self.io.report(SiteOutcome::Refused);
                }
                self.vote = Some(commit);
                self.send(Purpose::Alive);
            }
            Input::Reply(id, result) => {
                let Some(at) = self.pending.iter().position(|(p, _)| p.op == id) else {
                    if result == Err(ZkError::SessionExpired) {
                        self.end(ZkError::SessionExpired);
                    }
                    return;
                };
                let (p, purpose) = self.pending.remove(at);
                self.on_reply(p, purpose, result);
            }
            Input::Watch(event) => {
                if self.over || self.decided.is_some() {
                    return;
                }
                if event.path == self.tx && event.event_type == EventType::NodeChildrenChanged {
                    self.send(Purpose::ListAlive);
                } else if let Some(j) = (0..self.sites).find(|&j| self.vote_path(j) == event.path) {
                    self.send(Purpose::ReadVote(j));
                }
            }
            Input::Session(event) => {
                if self.io.on_session(event) {
                    return self.end(ZkError::SessionExpired);
                }
                if event == SessionEvent::Connected {
                    let (retry, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.lost)
                        .into_iter()
                        .partition(|(p, _)| self.io.may_retry(*p));
                    self.lost = keep;
                    for (_, purpose) in retry {
                        self.send(purpose);
                    }
                }
            }
        }
    }

    fn poll(&mut self) -> Option<Output<SiteOutcome>> {
        self.io.poll()
    }
}

/// A site for application code.
pub struct SiteClient<'z, Z: Zk> {
    driver: Driver<'z, Z, Site>,
}

impl<'z, Z: Zk + Sync> SiteClient<'z, Z> {
    /// A client running `site` over `zk`.
    pub fn new(zk: &'z Z, site: Site) -> Self {
        SiteClient {
            driver: Driver::new(zk, site),
        }
    }

    /// Votes; returns once the vote is on its node.
    pub async fn vote(&mut self, commit: bool) -> Result<(), ZkError> {
        self.driver.command(SiteCommand::Vote { commit });
        loop {
            match self.driver.next_outcome().await {
                SiteOutcome::Voted { .. } => return Ok(()),
                SiteOutcome::Lost { reason } => return Err(reason),
                SiteOutcome::Failed(e) => return Err(e),
                SiteOutcome::Refused => return Err(ZkError::ApiError),
                _ => {}
            }
        }
    }

    /// Waits for the decision: true to commit.
    pub async fn decision(&mut self) -> Result<bool, ZkError> {
        if let Some(d) = self.driver.machine().decision() {
            return Ok(d);
        }
        loop {
            match self.driver.next_outcome().await {
                SiteOutcome::Decided { commit } => return Ok(commit),
                SiteOutcome::Lost { reason } => return Err(reason),
                SiteOutcome::Failed(e) => return Err(e),
                _ => {}
            }
        }
    }

    /// The driver underneath, for finer control (single commands, outcomes one by one).
    pub fn driver(&mut self) -> &mut Driver<'z, Z, Site> {
        &mut self.driver
    }
}

#[cfg(test)]
#[path = "two_phase_commit_tests.rs"]
mod tests;
