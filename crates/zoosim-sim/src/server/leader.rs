//! The leader's side of Zab, in three phases (docs/ZOOKEEPER.md, "Zab:
//! discovery, sync, broadcast"):
//!
//! 1. discovery: once a quorum (itself included) has connected, the new
//!    epoch is one more than any of them accepted, and each must accept it
//!    (a follower accepts an epoch only if it is newer than any it
//!    promised, so two leaders never share one);
//! 2. sync: once a quorum accepted, the leader's current epoch is the new
//!    one and each follower's log is made the leader's (TRUNC to the common
//!    prefix, DIFF after it). A follower whose log is newer than the
//!    leader's makes it step down: it must not lead;
//! 3. broadcast: once a quorum is synced, the leader's whole log is
//!    committed, the sessions are re-tracked with a fresh timeout, and
//!    writes are prepped, proposed and committed on a quorum of acks.
//!
//! A leader that does not get there within initLimit, or later hears from
//! less than a quorum within syncLimit, steps down.

use std::collections::{BTreeMap, BTreeSet};

use super::{Breakage, Entry, LearnerMsg, Output, PeerMsg, Role, Server, ServerConfig, ServerId};
use crate::msg::{Forwarded, LeaderMsg, Origin};
use zoosim_core::proto::{Op, Reply, SessionId, ZkError, Zxid};
use zoosim_core::tree::{DataTree, Outstanding, Txn, TxnBody};

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Stage {
    /// Connected (FollowerInfo came).
    Connected,
    /// Accepted the epoch (counting for its quorum or not); its log ends
    /// at `last_zxid`.
    EpochAcked { last_zxid: Zxid, counts: bool },
    /// The sync is sent; proposals and commits follow it.
    Syncing,
    /// The sync is logged: it counts for the quorum.
    Synced,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Learner {
    attempt: u64,
    stage: Stage,
    accepted_epoch: u32,
    last_heard_tick: u64,
}

impl Learner {
    /// Proposals and commits go to it (they follow its sync, FIFO).
    fn in_broadcast(&self) -> bool {
        matches!(self.stage, Stage::Syncing | Stage::Synced)
    }
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(super) struct Leading {
    since_tick: u64,
    /// The new epoch, once a quorum connected.
    epoch: Option<u32>,
    /// A quorum accepted the epoch: syncs go out.
    syncing: bool,
    learners: BTreeMap<ServerId, Learner>,
    /// Once established (a quorum synced).
    broadcast: Option<Broadcast>,
}

/// An established leader's state.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Broadcast {
    epoch: u32,
    /// Applied state plus every proposal not yet committed: what prep sees,
    proposed: DataTree,
    /// where prep's outstanding change records differ from it (a closing
    /// session's ephemerals still counted in their parents until the close
    /// is applied, as in ZooKeeper's prep).
    outstanding: Outstanding,
    counter: u32,
    acks: BTreeMap<Zxid, BTreeSet<ServerId>>,
    /// Syncs waiting for the log prefix (by length) they came after.
    syncs: Vec<(usize, Origin)>,
    next_session: i64,
    /// Live sessions: timeout and expiry time (ZooKeeper's SessionTracker;
    /// only the leader expires sessions).
    tracker: BTreeMap<SessionId, (u64, i64)>,
    /// Sessions whose closeSession is under way: their writes fail at prep.
    closing: BTreeSet<SessionId>,
    /// Expired sessions whose closeSession is not prepped yet: in ZooKeeper
    /// it queues behind requests already submitted, which therefore fail
    /// with SessionExpired before the close (docs/ZOOKEEPER.md, "Sessions
    /// and expiry").
    /// With the time before which not to prep the close (a fault's
    /// closing window; now for a natural expiry).
    to_close: Vec<(SessionId, i64)>,
    /// The server each session is attached to; a write from another
    /// server's (stale) connection fails with SessionMoved. After an
    /// election no session has one until it re-attaches.
    owner: BTreeMap<SessionId, ServerId>,
}

impl Broadcast {
    /// A new epoch's state: every session in the tree gets a fresh full
    /// timeout (docs/ZOOKEEPER.md, "Sessions and expiry": during a leader
    /// change).
    fn new(epoch: u32, tree: &DataTree, grid: TickGrid, now_ms: i64) -> Broadcast {
        let tracker = tree
            .sessions()
            .map(|(s, t)| (s, (t, grid.expiry(now_ms, t))))
            .collect();
        Broadcast {
            epoch,
            proposed: tree.clone(),
            outstanding: Outstanding::new(),
            counter: 0,
            acks: BTreeMap::new(),
            syncs: Vec::new(),
            next_session: 0,
            tracker,
            closing: BTreeSet::new(),
            to_close: Vec::new(),
            owner: BTreeMap::new(),
        }
    }
}

impl Leading {
    /// The first leader of a running ensemble: every follower synced.
    pub(super) fn bootstrap(
        config: &ServerConfig,
        tree: &DataTree,
        learners: impl Iterator<Item = ServerId>,
    ) -> Leading {
        let learners = learners
            .map(|s| {
                let learner = Learner {
                    attempt: 0,
                    stage: Stage::Synced,
                    accepted_epoch: config.epoch,
                    last_heard_tick: 0,
                };
                (s, learner)
            })
            .collect();
        Leading {
            since_tick: 0,
            epoch: Some(config.epoch),
            syncing: true,
            learners,
            broadcast: Some(Broadcast::new(
                config.epoch,
                tree,
                TickGrid::new(config.tick_ms, 0),
                0,
            )),
        }
    }

    pub(super) fn is_established(&self) -> bool {
        self.broadcast.is_some()
    }
}

/// Whether a write failed at prep with NotEmpty (a multi: at its first
/// failing op).
fn fails_not_empty(body: &TxnBody) -> bool {
    body.prep_failure()
        .is_some_and(|(_, e)| e == ZkError::NotEmpty)
}

/// A write that failed at prep: it still uses its zxid.
fn error_txn(zxid: Zxid, time_ms: i64, session: SessionId, error: ZkError) -> Txn {
    Txn {
        zxid,
        time_ms,
        session,
        body: TxnBody::Error(error),
    }
}

/// The instants a server's session tracker rounds expiry times up to:
/// every `tick` ms from `phase` on. ZooKeeper's ExpiryQueue rounds to
/// multiples of tickTime on the process's own monotonic clock, whose
/// origin is arbitrary, so each server has its own phase (the phase of
/// its ticks here: the leader checks for expired sessions on its ticks).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct TickGrid {
    tick: i64,
    phase: i64,
}

impl TickGrid {
    pub(super) fn new(tick_ms: u64, phase_ms: i64) -> TickGrid {
        TickGrid {
            tick: tick_ms as i64,
            phase: phase_ms,
        }
    }

    /// When a session touched at `now_ms` expires: now + T, rounded up to
    /// the next grid instant (ExpiryQueue), so between T and T + tick.
    fn expiry(self, now_ms: i64, timeout_ms: u64) -> i64 {
        let since = now_ms + timeout_ms as i64 - self.phase;
        (since.div_euclid(self.tick) + 1) * self.tick + self.phase
    }
}

impl Server {
    fn leading(&self) -> &Leading {
        match &self.role {
            Role::Leading(l) => l,
            _ => panic!("not leading"),
        }
    }

    fn leading_mut(&mut self) -> &mut Leading {
        match &mut self.role {
            Role::Leading(l) => l,
            _ => panic!("not leading"),
        }
    }

    fn broadcast(&self) -> Option<&Broadcast> {
        match &self.role {
            Role::Leading(l) => l.broadcast.as_ref(),
            _ => None,
        }
    }

    fn broadcast_mut(&mut self) -> Option<&mut Broadcast> {
        match &mut self.role {
            Role::Leading(l) => l.broadcast.as_mut(),
            _ => None,
        }
    }

    /// Won an election: wait for followers to connect.
    pub(super) fn start_leading(&mut self, now_ms: i64, out: &mut Vec<Output>) {
        self.close_learner_connections();
        self.drop_all_connections(out);
        self.role = Role::Leading(Box::new(Leading {
            since_tick: self.ticks,
            epoch: None,
            syncing: false,
            learners: BTreeMap::new(),
            broadcast: None,
        }));
        // Tell the looking servers at once rather than at their next vote.
        self.broadcast_vote(out);
        self.advance(now_ms, out);
    }

    /// Leaving a leadership closes its followers' connections (see
    /// `closed_attempts`).
    pub(super) fn close_learner_connections(&mut self) {
        if let Role::Leading(l) = &self.role {
            for (&id, learner) in &l.learners {
                let closed = self.closed_attempts.entry(id).or_insert(0);
                *closed = (*closed).max(learner.attempt);
            }
        }
    }

    /// Drops learner `id` (its connection is gone), closing its attempt
    /// so that nothing late from it counts; true if it was a learner.
    pub(super) fn forget_learner(&mut self, id: ServerId) -> bool {
        let Role::Leading(l) = &mut self.role else {
            return false;
        };
        let Some(learner) = l.learners.remove(&id) else {
            return false;
        };
        let closed = self.closed_attempts.entry(id).or_insert(0);
        *closed = (*closed).max(learner.attempt);
        true
    }

    fn to_learner(&self, to: ServerId, msg: LeaderMsg, out: &mut Vec<Output>) {
        let Some(learner) = self.leading().learners.get(&to) else {
            return;
        };
        out.push(Output::Peer {
            to,
            msg: PeerMsg::Leader {
                attempt: learner.attempt,
                msg,
            },
        });
    }

    /// Moves discovery and sync on as far as the quorum allows.
    fn advance(&mut self, now_ms: i64, out: &mut Vec<Output>) {
        let quorum = self.config.quorum();
        let me = self.config.id;
        let l = self.leading();
        if l.epoch.is_none() {
            if 1 + l.learners.len() < quorum {
                return;
            }
            let newest = l.learners.values().map(|x| x.accepted_epoch);
            let epoch = newest.max().unwrap_or(0).max(self.accepted_epoch) + 1;
            self.accepted_epoch = epoch;
            self.accepted_leader = me;
            self.leading_mut().epoch = Some(epoch);
            let learners: Vec<ServerId> = self.leading().learners.keys().copied().collect();
            for to in learners {
                self.to_learner(to, LeaderMsg::LeaderInfo { epoch }, out);
            }
        }
        let l = self.leading();
        let epoch = l.epoch.expect("decided above");
        if !l.syncing {
            let acked = l
                .learners
                .values()
                .filter(|x| matches!(x.stage, Stage::EpochAcked { counts: true, .. }));
            if 1 + acked.count() < quorum {
                return;
            }
            self.current_epoch = epoch;
            self.leading_mut().syncing = true;
            let acked: Vec<ServerId> = self
                .leading()
                .learners
                .iter()
                .filter(|(_, x)| matches!(x.stage, Stage::EpochAcked { .. }))
                .map(|(s, _)| *s)
                .collect();
            for to in acked {
                self.send_sync(to, out);
            }
        }
        let l = self.leading();
        if l.broadcast.is_none() {
            let synced = l.learners.values().filter(|x| x.stage == Stage::Synced);
            if 1 + synced.count() >= quorum {
                self.establish(epoch, now_ms, out);
            }
        }
    }

    /// A quorum is synced: the whole log is committed and the leader
    /// serves.
    fn establish(&mut self, epoch: u32, now_ms: i64, out: &mut Vec<Output>) {
        self.committed = self.log.len();
        self.apply_committed(out);
        let b = Broadcast::new(epoch, &self.tree, self.tick_grid(), now_ms);
        self.leading_mut().broadcast = Some(b);
        self.stats.elections_won += 1;
        let committed = self.last_logged();
        let synced: Vec<ServerId> = self
            .leading()
            .learners
            .iter()
            .filter(|(_, x)| x.stage == Stage::Synced)
            .map(|(s, _)| *s)
            .collect();
        for to in synced {
            self.to_learner(to, LeaderMsg::UpToDate { committed }, out);
        }
    }

    /// The follower's log becomes ours: truncate to the common prefix, then
    /// the rest of ours.
    fn send_sync(&mut self, to: ServerId, out: &mut Vec<Output>) {
        let learner = self.leading_mut().learners.get_mut(&to).expect("a learner");
        let Stage::EpochAcked { last_zxid, .. } = learner.stage else {
            panic!("sync for a learner in {:?}", learner.stage);
        };
        learner.stage = Stage::Syncing;
        let keep = self.log.partition_point(|e| e.txn.zxid <= last_zxid);
        let truncate_to = if keep == 0 {
            0
        } else {
            self.log[keep - 1].txn.zxid
        };
        let entries = self.log[keep..]
            .iter()
            .map(|e| (e.txn.clone(), e.origin))
            .collect();
        let committed = if self.committed == 0 {
            0
        } else {
            self.log[self.committed - 1].txn.zxid
        };
        let sync = LeaderMsg::NewLeader {
            truncate_to,
            entries,
            committed,
        };
        self.to_learner(to, sync, out);
    }

    pub(super) fn tick_leading(&mut self, now_ms: i64, out: &mut Vec<Output>) {
        let ticks = self.ticks;
        let limits = self.config;
        let l = self.leading();
        let learners: Vec<ServerId> = l.learners.keys().copied().collect();
        for to in learners {
            self.to_learner(to, LeaderMsg::Ping, out);
        }
        let l = self.leading();
        if !l.is_established() {
            if ticks - l.since_tick > limits.init_limit_ticks {
                self.look(out);
            }
            return;
        }
        let heard = l
            .learners
            .values()
            .filter(|x| {
                x.stage == Stage::Synced && ticks - x.last_heard_tick <= limits.sync_limit_ticks
            })
            .count();
        if 1 + heard < self.config.quorum() {
            self.stats.step_downs += 1;
            self.look(out);
            return;
        }
        let b = self.broadcast().expect("established");
        let due: Vec<SessionId> = b
            .tracker
            .iter()
            .filter(|(s, (_, at))| *at <= now_ms && !b.closing.contains(s))
            .map(|(s, _)| *s)
            .collect();
        for session in due {
            self.stats.expiries += 1;
            self.mark_closing(session, now_ms);
        }
    }

    /// A message from a follower: only its current attempt's count.
    pub(super) fn on_learner(
        &mut self,
        now_ms: i64,
        from: ServerId,
        attempt: u64,
        msg: LearnerMsg,
        out: &mut Vec<Output>,
    ) {
        let ticks = self.ticks;
        let Role::Leading(l) = &mut self.role else {
            // For a leadership this server gave up (or never had): as a
            // refused connection, the follower learns it from our vote.
            if matches!(msg, LearnerMsg::FollowerInfo { .. }) {
                let vote = PeerMsg::Vote(self.vote());
                out.push(Output::Peer {
                    to: from,
                    msg: vote,
                });
            }
            return;
        };
        if self
            .closed_attempts
            .get(&from)
            .is_some_and(|&c| attempt <= c)
        {
            return; // on a connection an earlier leadership closed
        }
        if let LearnerMsg::FollowerInfo { accepted_epoch } = msg {
            match l.learners.get(&from) {
                Some(x) if x.attempt > attempt => return,
                Some(x) if x.attempt == attempt => {
                    // Resent while our answer was on its way.
                    if let (Some(epoch), Stage::Connected) = (l.epoch, x.stage) {
                        self.to_learner(from, LeaderMsg::LeaderInfo { epoch }, out);
                    }
                    return;
                }
                _ => {}
            }
            if l.epoch.is_some_and(|epoch| accepted_epoch > epoch) {
                // The follower promised a newer epoch (to a candidate that
                // failed) and will refuse ours, for as long as we lead: step
                // down, so the next election proposes an epoch above it.
                self.stats.step_downs += 1;
                self.look(out);
                return;
            }
            let learner = Learner {
                attempt,
                stage: Stage::Connected,
                accepted_epoch,
                last_heard_tick: ticks,
            };
            l.learners.insert(from, learner);
            if let Some(epoch) = l.epoch {
                self.to_learner(from, LeaderMsg::LeaderInfo { epoch }, out);
            }
            self.advance(now_ms, out);
            return;
        }
        let Some(learner) = l.learners.get_mut(&from).filter(|x| x.attempt == attempt) else {
            return; // a connection the follower gave up
        };
        learner.last_heard_tick = ticks;
        let stage = learner.stage;
        let (established, syncing) = (l.is_established(), l.syncing);
        match msg {
            LearnerMsg::FollowerInfo { .. } => unreachable!("handled above"),
            LearnerMsg::AckEpoch {
                current_epoch,
                last_zxid,
                counts,
            } => {
                if stage != Stage::Connected {
                    return;
                }
                if (current_epoch, last_zxid) > (self.current_epoch, self.last_logged()) {
                    // A follower has seen more than this leader: it must
                    // not lead (ZooKeeper's waitForEpochAck).
                    self.look(out);
                    return;
                }
                self.set_stage(from, Stage::EpochAcked { last_zxid, counts });
                if syncing {
                    self.send_sync(from, out);
                } else {
                    self.advance(now_ms, out);
                }
            }
            LearnerMsg::AckNewLeader => {
                assert_eq!(stage, Stage::Syncing, "an AckNewLeader without a sync");
                self.set_stage(from, Stage::Synced);
                if established {
                    let committed = if self.committed == 0 {
                        0
                    } else {
                        self.log[self.committed - 1].txn.zxid
                    };
                    self.to_learner(from, LeaderMsg::UpToDate { committed }, out);
                } else {
                    self.advance(now_ms, out);
                }
            }
            LearnerMsg::Ack { zxid } => {
                if let Some(acks) = self.broadcast_mut().and_then(|b| b.acks.get_mut(&zxid)) {
                    acks.insert(from);
                    self.commit_ready(out);
                }
            }
            LearnerMsg::Touch { sessions } => {
                if established {
                    for s in sessions {
                        self.leader_touch(now_ms, s);
                    }
                }
            }
            LearnerMsg::Forward { origin, request } => {
                assert_eq!(origin.server, from);
                assert!(established, "a forward before the leader serves");
                self.lead(now_ms, Some(origin), request, out);
            }
            LearnerMsg::Revalidate { origin, session } => {
                assert_eq!(origin.server, from);
                assert!(established, "a re-attach before the leader serves");
                self.revalidate(now_ms, origin, session, out);
            }
        }
    }

    fn set_stage(&mut self, learner: ServerId, stage: Stage) {
        let l = self.leading_mut().learners.get_mut(&learner);
        l.expect("a learner").stage = stage;
    }

    /// The session was heard from (directly or through a follower).
    pub(super) fn leader_touch(&mut self, now_ms: i64, session: SessionId) {
        let grid = self.tick_grid();
        let Some(b) = self.broadcast_mut() else {
            return;
        };
        let Some(&(timeout, _)) = b.tracker.get(&session) else {
            return;
        };
        if !b.closing.contains(&session) {
            b.tracker
                .insert(session, (timeout, grid.expiry(now_ms, timeout)));
        }
    }

    /// Expiry, first half: from now on the session's writes fail at prep;
    /// its closeSession is prepped from `close_at_ms` on.
    fn mark_closing(&mut self, session: SessionId, close_at_ms: i64) {
        // Breakage::ExpiredEphemeralsLinger: one in `one_in` expiries
        // never proposes the close.
        let linger = self.config.breaks(Breakage::ExpiredEphemeralsLinger) && self.strikes();
        if linger {
            self.stats.breakage_hits += 1;
        }
        let b = self.broadcast_mut().expect("an established leader");
        b.closing.insert(session);
        if !linger {
            b.to_close.push((session, close_at_ms));
        }
        self.expired_now.push(session);
    }

    /// closeSession applied here.
    pub(super) fn closed_session(&mut self, session: SessionId) {
        if let Some(b) = self.broadcast_mut() {
            b.closing.remove(&session);
        }
    }

    /// The leader confirms a re-attach: the session lives (and is now owned
    /// by the client's new server, and touched) or it does not.
    pub(super) fn revalidate(
        &mut self,
        now_ms: i64,
        origin: Origin,
        session: SessionId,
        out: &mut Vec<Output>,
    ) {
        let b = self.broadcast_mut().expect("an established leader");
        let live = match b.tracker.get(&session) {
            Some(&(timeout, _)) if !b.closing.contains(&session) => Some(timeout),
            _ => None,
        };
        if live.is_some() {
            b.owner.insert(session, origin.server);
            self.leader_touch(now_ms, session);
        }
        if origin.server == self.config.id {
            self.revalidated(origin, session, live, out);
        } else {
            let msg = LeaderMsg::Revalidated {
                origin,
                session,
                live,
            };
            self.to_learner(origin.server, msg, out);
        }
    }

    /// Whether a closeSession is due to be prepped by
    /// [`Server::close_expired`].
    pub(crate) fn has_due_closes(&self, now_ms: i64) -> bool {
        self.broadcast()
            .is_some_and(|b| b.to_close.iter().any(|(_, at)| *at <= now_ms))
    }

    /// Expiry, second half: prep the closeSession requests. The shell calls
    /// this behind whatever the leader had already received when it marked
    /// the sessions closing (ZooKeeper's prep queue).
    pub(crate) fn close_expired(&mut self, now_ms: i64, out: &mut Vec<Output>) {
        let Some(b) = self.broadcast_mut() else {
            return;
        };
        let (due, later) = std::mem::take(&mut b.to_close)
            .into_iter()
            .partition(|(_, at)| *at <= now_ms);
        b.to_close = later;
        for (session, _) in due {
            self.lead(now_ms, None, Forwarded::CloseSession { session }, out);
        }
    }

    /// Forced expiry (a fault): the leader marks the session closing now,
    /// as if its time were up, and preps its closeSession once
    /// `closing_window_ms` has passed ([`Server::close_expired`]); the
    /// session's writes prepped meanwhile fail with SessionExpired, which
    /// their clients then see. Only an established leader can; elsewhere
    /// this does nothing. Returns whether the session was live.
    pub(crate) fn expire(
        &mut self,
        now_ms: i64,
        session: SessionId,
        closing_window_ms: u64,
    ) -> bool {
        let live = self
            .broadcast()
            .is_some_and(|b| b.tracker.contains_key(&session) && !b.closing.contains(&session));
        if live {
            self.mark_closing(session, now_ms + closing_window_ms as i64);
        }
        live
    }

    /// The leader sequences a request: prep, zxid, propose. `origin` is
    /// `None` for the leader's own requests (expiry).
    pub(super) fn lead(
        &mut self,
        now_ms: i64,
        origin: Option<Origin>,
        request: Forwarded,
        out: &mut Vec<Output>,
    ) {
        let id = self.config.id;
        let grid = self.tick_grid();
        let broken = self.config.broken.map(|b| b.kind);
        // Breakage::ReplyBeforeQuorum: this server's own clients' writes,
        // one in `one_in` of them.
        let early = (broken == Some(Breakage::ReplyBeforeQuorum)
            && matches!(request, Forwarded::Write { .. }))
        .then_some(origin)
        .flatten()
        .filter(|o| o.server == id)
        .filter(|_| self.strikes());
        let (log_len, all_committed) = (self.log.len(), self.committed == self.log.len());
        // Breakage::CreatePrepIgnoresInFlightParent: a create whose parent
        // is in the proposed tree but not yet in the committed one.
        let parent_in_flight = broken == Some(Breakage::CreatePrepIgnoresInFlightParent)
            && match &request {
                Forwarded::Write {
                    op: Op::Create { path, .. },
                    ..
                } => {
                    let parent = zoosim_core::path::parent(path);
                    self.tree().node(parent).is_none()
                        && self
                            .broadcast()
                            .is_some_and(|b| b.proposed.node(parent).is_some())
                }
                _ => false,
            };
        // Breakage::SkipSessionMovedCheck: one in `one_in` of the writes
        // from a connection their session has moved away from is applied.
        // (The owner is looked up only with the switch on: this is every
        // write's path.)
        let skip_moved = broken == Some(Breakage::SkipSessionMovedCheck)
            && match (&request, origin) {
                (Forwarded::Write { session, .. }, Some(o)) => self
                    .broadcast()
                    .and_then(|b| b.owner.get(session))
                    .is_some_and(|&owner| owner != o.server),
                _ => false,
            }
            && self.strikes();
        let b = self
            .broadcast_mut()
            .expect("only an established leader leads");
        if let Forwarded::Sync = request {
            let origin = origin.expect("a sync comes from a client");
            if all_committed {
                self.sync_done(origin, out);
            } else {
                b.syncs.push((log_len, origin));
            }
            return;
        }
        b.counter = b.counter.checked_add(1).expect("zxid counter overflow");
        let zxid = (i64::from(b.epoch) << 32) | i64::from(b.counter);
        let mut hit = false;
        let mut behind_close = false;
        let txn = match request {
            // The session checks of prep, in ZooKeeper's order: closing or
            // already closed is SessionExpired (docs/ZOOKEEPER.md, "Errors
            // and the order of checks"); a write from a
            // connection the session has moved away from is SessionMoved
            // (not applied; that server closes the connection).
            Forwarded::Write { session, .. }
                if b.closing.contains(&session) || !b.tracker.contains_key(&session) =>
            {
                error_txn(zxid, now_ms, session, ZkError::SessionExpired)
            }
            Forwarded::Write { session, .. }
                if !skip_moved
                    && origin.is_some_and(|o| {
                        *b.owner.entry(session).or_insert(o.server) != o.server
                    }) =>
            {
                error_txn(zxid, now_ms, session, ZkError::SessionMoved)
            }
            Forwarded::Write { session, .. } if parent_in_flight => {
                hit = true;
                error_txn(zxid, now_ms, session, ZkError::NoNode)
            }
            Forwarded::Write { session, op } => {
                hit = skip_moved;
                let txn = b
                    .proposed
                    .prepare_over(&b.outstanding, zxid, now_ms, session, &op);
                behind_close = !b.outstanding.is_empty()
                    && fails_not_empty(&txn.body)
                    && !fails_not_empty(&b.proposed.prepare(zxid, now_ms, session, &op).body);
                txn
            }
            Forwarded::CreateSession { timeout_ms } => {
                b.next_session += 1;
                assert!(b.next_session < 1 << 32, "session counter overflow");
                let session = SessionId(
                    (i64::from(id) + 1) << 56 | i64::from(b.epoch) << 32 | b.next_session,
                );
                let expiry = grid.expiry(now_ms, timeout_ms);
                b.tracker.insert(session, (timeout_ms, expiry));
                if let Some(o) = origin {
                    b.owner.insert(session, o.server);
                }
                b.proposed
                    .prepare_create_session(zxid, now_ms, session, timeout_ms)
            }
            Forwarded::CloseSession { session } => {
                // Prep collects the ephemerals in the proposed state, so
                // creates still in flight go too.
                b.closing.insert(session);
                b.tracker.remove(&session);
                b.owner.remove(&session);
                b.to_close.retain(|(s, _)| *s != session);
                b.proposed.prepare_close_session(zxid, now_ms, session)
            }
            Forwarded::Sync => unreachable!("handled above"),
        };
        b.outstanding.prepped(&txn);
        let result = b.proposed.apply(&txn).reply;
        b.acks.insert(zxid, BTreeSet::from([id]));
        if hit {
            self.stats.breakage_hits += 1;
        }
        self.stats.not_empty_behind_close += u64::from(behind_close);
        let entry = Entry { txn, origin };
        let to: Vec<ServerId> = self.broadcast_learners().collect();
        for to in to {
            let msg = LeaderMsg::Proposal {
                txn: entry.txn.clone(),
                origin: entry.origin,
            };
            self.to_learner(to, msg, out);
        }
        self.log.push(entry);
        if let (Some(origin), Some(result)) = (early, result) {
            // SessionMoved closes the connection instead (complete()).
            if result != Err(ZkError::SessionMoved) {
                self.answer_early(origin, zxid, result, out);
            }
        }
        self.commit_ready(out);
    }

    fn broadcast_learners(&self) -> impl Iterator<Item = ServerId> + '_ {
        self.leading()
            .learners
            .iter()
            .filter(|(_, x)| x.in_broadcast())
            .map(|(s, _)| *s)
    }

    /// Commits, in order, every proposal a quorum has acked.
    fn commit_ready(&mut self, out: &mut Vec<Output>) {
        let quorum = self.config.quorum();
        while let Some(entry) = self.log.get(self.committed) {
            let zxid = entry.txn.zxid;
            let b = self.broadcast_mut().expect("an established leader");
            if b.acks.get(&zxid).map_or(0, BTreeSet::len) < quorum {
                break;
            }
            b.acks.remove(&zxid);
            self.committed += 1;
            let to: Vec<ServerId> = self.broadcast_learners().collect();
            for to in to {
                self.to_learner(to, LeaderMsg::Commit { zxid }, out);
            }
            self.apply_committed(out);
            let committed = self.committed;
            let b = self.broadcast_mut().expect("an established leader");
            // FinalRequestProcessor drops the applied txn's records.
            b.outstanding.applied(zxid);
            // The hot path: most commits release no sync.
            if b.syncs.iter().any(|(upto, _)| *upto <= committed) {
                let (done, waiting): (Vec<_>, Vec<_>) =
                    b.syncs.drain(..).partition(|(upto, _)| *upto <= committed);
                b.syncs = waiting;
                for (_, origin) in done {
                    self.sync_done(origin, out);
                }
            }
        }
    }

    fn sync_done(&mut self, origin: Origin, out: &mut Vec<Output>) {
        if origin.server == self.config.id {
            self.complete(origin, Ok(Reply::Sync), out);
        } else {
            self.to_learner(origin.server, LeaderMsg::SyncDone { origin }, out);
        }
    }
}
