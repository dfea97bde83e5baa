//! One ZooKeeper server as a pure state machine: messages in, messages out,
//! no sockets, clocks or runtime (the simulator's shell moves them).
//!
//! A server is looking (electing), following or leading
//! (docs/ZOOKEEPER.md, "Zab: discovery, sync, broadcast"). Only a leader
//! with a synced quorum, and its synced followers, serve clients; every
//! change of role drops every client connection ("Crashes, partitions and
//! lost replies").
//!
//! * [`election`]: votes by (current epoch, last logged zxid, server id);
//! * [`leader`]: discovery (a new epoch from a quorum), sync (each
//!   follower's log made the leader's: truncate, then diff), broadcast
//!   (prep against the proposed state, zxid, quorum commit) and sessions
//!   (only the leader expires them);
//! * [`follower`]: the other side of each phase.
//!
//! Every server applies committed txns in zxid order; the server holding
//! the client's connection answers once it has applied the txn itself
//! ("Zab: discovery, sync, broadcast"). Reads are served from the local
//! applied state, behind the same connection's earlier requests
//! ("Consistency guarantees").
//!
//! What survives a restart (the durable state): the log, the accepted and
//! current epochs, and the attempt counter. The tree is rebuilt from the
//! log when the server next syncs.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::breakage::{Breakage, Broken};
use super::msg::{
    ClientMsg, ConnId, Forwarded, LearnerMsg, Origin, PeerMsg, PeerState, ServerId, ServerMsg,
    Vote, WatchLists,
};
use zoosim_core::proto::{EventType, Op, Reply, SessionId, WatchEvent, ZkError, Zxid};
use zoosim_core::tree::{DataTree, TreeConfig, Txn, TxnBody, WatchTable};

mod election;
mod follower;
mod leader;

use election::Looking;
use follower::Following;
use leader::Leading;

/// Applied txns between two checks of the tree's invariants
/// ([`DataTree::check_invariants`]) on each server, in every build (debug
/// and test builds included): a replica broken by a bug in apply or sync
/// fails its run within this many txns, naming the invariant, instead of
/// only if some later read happens to show it. The check walks the whole
/// tree: after every txn it made the pinned scenario seeds 40 % slower;
/// every 64th costs under 1 %.
const TREE_CHECK_INTERVAL: usize = 64;

/// Something a server wants delivered.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Output {
    Peer { to: ServerId, msg: PeerMsg },
    Client { conn: ConnId, msg: ServerMsg },
}

/// One server's static configuration. [`ServerConfig::new`] gives the
/// defaults.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ServerConfig {
    /// This server's id.
    pub id: ServerId,
    /// Servers in the ensemble (ids `0..servers`).
    pub servers: u32,
    /// The ensemble starts running, with this leader in `epoch` (as if an
    /// election had just finished); later leaders are elected.
    pub leader: ServerId,
    /// The bootstrap leader's epoch (default 1).
    pub epoch: u32,
    /// ZooKeeper's tickTime, in ms: the unit of the limits below and of
    /// session timeouts ([`ServerConfig::negotiate`]).
    pub tick_ms: u64,
    /// Ticks a follower waits to hear from its leader, and a leader from a
    /// quorum, before giving up (ZooKeeper's syncLimit).
    pub sync_limit_ticks: u64,
    /// Ticks an election's discovery and sync may take (initLimit).
    pub init_limit_ticks: u64,
    /// The data tree's limits.
    pub tree: TreeConfig,
    /// A guarantee to break on purpose, and how often (default none):
    /// only to prove that a check of the guarantees can fail (see
    /// [`Breakage`]).
    pub broken: Option<Broken>,
}

impl ServerConfig {
    /// Server `id` of `servers`, led by server 0 in epoch 1 at the start,
    /// with ZooKeeper's sample limits (syncLimit 5, initLimit 10 ticks).
    pub fn new(id: ServerId, servers: u32, tick_ms: u64) -> ServerConfig {
        ServerConfig {
            id,
            servers,
            leader: 0,
            epoch: 1,
            tick_ms,
            sync_limit_ticks: 5,
            init_limit_ticks: 10,
            tree: TreeConfig::default(),
            broken: None,
        }
    }

    /// The negotiated session timeout: 2 to 20 ticks (docs/ZOOKEEPER.md,
    /// "Session timeouts").
    pub fn negotiate(&self, timeout_ms: u64) -> u64 {
        timeout_ms.clamp(2 * self.tick_ms, 20 * self.tick_ms)
    }

    fn quorum(&self) -> usize {
        self.servers as usize / 2 + 1
    }

    /// Whether `kind` is the breakage switched on.
    fn breaks(&self, kind: Breakage) -> bool {
        self.broken.is_some_and(|b| b.kind == kind)
    }
}

/// Counts of the interesting things a server did, for coverage: a sweep
/// whose faults never cause them proves little.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct ServerStats {
    /// Connections refused because the client had seen a later zxid.
    pub zxid_refusals: u64,
    /// Connections refused because the server was not in an active quorum
    /// (electing, syncing, or just restarted).
    pub not_serving_refusals: u64,
    /// Watch events replayed by SetWatches on a re-attach.
    pub replayed_events: u64,
    /// Sessions expired by this server as leader.
    pub expiries: u64,
    /// Write replies dropped by the lost-reply fault.
    pub lost_replies: u64,
    /// Times this server became an established leader (the bootstrap
    /// leadership not counted).
    pub elections_won: u64,
    /// Times a leader gave up for want of a quorum.
    pub step_downs: u64,
    /// Syncs with a leader that dropped uncommitted log entries.
    pub truncations: u64,
    /// The entries those syncs dropped.
    pub truncated_entries: u64,
    /// Syncs completed as a follower.
    pub syncs: u64,
    /// Client connections dropped because the server left its role.
    pub role_change_drops: u64,
    /// Peers whose connection reset when their process was killed, seen
    /// by this server (as a follower of it, or as its leader).
    pub peer_resets: u64,
    /// Older connections of a session closed when it reconnected here.
    pub reconnect_closes: u64,
    /// Times the configured [`Breakage`] took effect (always 0 without
    /// one): writes a follower answered itself; reads answered from a
    /// state older than the session's last zxid; acknowledged writes
    /// truncated away; stale reads that differ from the fresh answer;
    /// watch events delivered after a read reply showing their change;
    /// syncs a follower answered itself; watch events overtaken by a later
    /// txn's event; reads a frozen follower answered from its frozen tree.
    pub breakage_hits: u64,
    /// Writes the leader's prep failed with NotEmpty only because a close
    /// of the node's children was still outstanding (prepped, not yet
    /// applied: ZooKeeper's prep counts them until then,
    /// [`zoosim_core::tree::Outstanding`]).
    pub not_empty_behind_close: u64,
}

/// A logged proposal: the txn and who to answer.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Entry {
    /// The proposed txn.
    pub txn: Txn,
    /// The client request to answer once the txn is applied, if any.
    pub origin: Option<Origin>,
}

/// A request waiting in its connection's queue; `op: None` is a ping,
/// answered in order like everything else (so a stuck write stalls pongs
/// too, and the client's read timeout notices).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Pending {
    xid: i64,
    op: Option<Op>,
    result: Option<Result<Reply, ZkError>>,
    /// [`Breakage::ReplyBeforeQuorum`]: the answer the leader gave when it
    /// proposed the write (its txn's zxid, the result), to send once the
    /// request is at the head of the queue ...
    early: Option<(Zxid, Result<Reply, ZkError>)>,
    /// ... and that it was sent: the request stays at the head until the
    /// txn is applied, so later requests still wait for it.
    replied: bool,
}

impl Pending {
    fn new(xid: i64, op: Option<Op>, result: Option<Result<Reply, ZkError>>) -> Pending {
        Pending {
            xid,
            op,
            result,
            early: None,
            replied: false,
        }
    }

    fn waits_for_leader(&self) -> bool {
        self.op
            .as_ref()
            .is_some_and(|op| op.is_write() || matches!(op, Op::Sync { .. }))
    }
}

#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
struct Conn {
    session: Option<SessionId>,
    /// Requests in issue order; the head is answered first.
    queue: VecDeque<Pending>,
    /// A re-attach waiting for the leader: the client's last zxid and the
    /// watches to replay once the session is confirmed.
    reattach: Option<(Zxid, WatchLists)>,
    /// [`Breakage::SkipReconnectZxidRule`]: the last zxid of a session
    /// attached while ahead of this server; replies carry at least it
    /// (0 otherwise).
    zxid_floor: Zxid,
    /// [`Breakage::LateWatchEvent`], [`Breakage::EventReordered`]: events
    /// held back, in order ...
    held: Vec<WatchEvent>,
    /// ... and (EventReordered) the zxid of the txn that fired them.
    held_zxid: Zxid,
}

/// One more opportunity for the breakage `broken` on a server that has
/// counted `opportunities` so far: whether it strikes (one in its `one_in`;
/// never a random draw).
fn strikes(broken: Option<Broken>, opportunities: &mut u64) -> bool {
    let one_in = broken.map_or(1, |b| b.one_in.max(1));
    *opportunities += 1;
    *opportunities % one_in == 0
}

/// [`Breakage::StaleRead`]: a copy of the tree `lag_txns` txns behind the
/// applied state, answering one unwatched read in `one_in` (every read
/// would leave a recipe that reads its own writes no way forward).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Lagging {
    tree: DataTree,
    /// Log entries applied to `tree`.
    applied: usize,
    /// Unwatched reads served so far.
    reads: u64,
    /// How many txns `tree` trails the applied state by ...
    lag: usize,
    /// ... and one unwatched read in this many is answered from it.
    one_in: u64,
}

impl Lagging {
    fn new(config: &ServerConfig) -> Option<Box<Lagging>> {
        let b = config.broken.filter(|b| b.kind == Breakage::StaleRead)?;
        Some(Box::new(Lagging {
            tree: DataTree::new(config.tree),
            applied: 0,
            reads: 0,
            lag: usize::try_from(b.lag_txns).unwrap_or(usize::MAX),
            one_in: b.one_in,
        }))
    }
}

/// [`Breakage::FrozenFollowerServesReads`]: a follower's freeze in
/// progress. Commits are queued (counted in `committed`, not applied)
/// until its tick `until_tick`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Freeze {
    until_tick: u64,
    /// Syncs whose flush the leader answered meanwhile: answered once the
    /// commits before them are applied (at the freeze's end), as the
    /// commit processor answers a sync in order with the commits.
    syncs: Vec<Origin>,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum Role {
    Looking(Looking),
    Following(Following),
    Leading(Box<Leading>),
}

/// One ZooKeeper server as a pure state machine: it consumes ticks and
/// messages and emits messages to deliver; no runtime, clock or socket.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Server {
    config: ServerConfig,
    // Durable: survives a restart.
    /// Every proposal this server has logged, in zxid order.
    log: Vec<Entry>,
    /// The newest epoch this server promised to follow (or lead) ...
    accepted_epoch: u32,
    /// ... and who proposed it.
    accepted_leader: ServerId,
    /// The epoch of the last sync this server completed (as leader: began).
    current_epoch: u32,
    /// Attempts to follow a leader so far (each is a new connection).
    attempts: u64,
    /// Per follower, the newest attempt (connection) a leadership of this
    /// process held and gave up: closed, as a LearnerHandler's socket is
    /// when its Leader ends, so what was still on its way on it (stalled
    /// by a partition) never reaches a later leadership (found at seed
    /// 1309409566 of revocable-lock: a stale AckEpoch for epoch 1 counted
    /// for epoch 2, and two leaders ran epoch 2).
    closed_attempts: BTreeMap<ServerId, u64>,
    stats: ServerStats,
    // Volatile: lost in a restart.
    ticks: u64,
    /// When this process's ticks come: at this many ms past a multiple
    /// of tickTime (each process has its own; see [`Server::set_tick_phase`]).
    tick_phase_ms: i64,
    tree: DataTree,
    watches: WatchTable<ConnId>,
    committed: usize,
    applied: usize,
    role: Role,
    conns: BTreeMap<ConnId, Conn>,
    /// Sessions heard from since the last report to the leader.
    touched: BTreeSet<SessionId>,
    /// Connections this server dropped; their late packets are ignored.
    dropped: BTreeSet<ConnId>,
    /// Fault: sessions whose next write reply is lost here (the write is
    /// applied, the reply dropped and the connection broken).
    lose_reply: BTreeSet<SessionId>,
    /// Sessions this leader expired (marked closing) since the shell last
    /// took them ([`Server::take_expired`]): for coverage only.
    expired_now: Vec<SessionId>,
    // Only with a breakage (see ServerConfig::broken).
    /// The breakage's opportunities so far (what one is depends on the
    /// breakage; [`Breakage::StaleRead`] counts its reads in `lagging`):
    /// one in `one_in` breaks ([`Server::strikes`]).
    opportunities: u64,
    /// [`Breakage::StaleRead`]: the stale copy of the tree.
    lagging: Option<Box<Lagging>>,
    /// [`Breakage::ReplyBeforeQuorum`]: txns answered before they were
    /// committed and not applied since (bookkeeping for the hit count,
    /// kept across a restart with the log).
    early_replied: BTreeSet<Zxid>,
    /// [`Breakage::FrozenFollowerServesReads`]: the freeze in progress.
    frozen: Option<Freeze>,
}

impl Server {
    /// A server of an ensemble that is already running: the configured
    /// leader leads `config.epoch` with every follower synced.
    pub fn new(config: ServerConfig) -> Server {
        assert!(
            config.id < config.servers,
            "server id {} of {} servers",
            config.id,
            config.servers
        );
        assert!(
            config.leader < config.servers,
            "leader {} of {} servers",
            config.leader,
            config.servers
        );
        let tree = DataTree::new(config.tree);
        let role = if config.id == config.leader {
            let learners = (0..config.servers).filter(|&s| s != config.id);
            Role::Leading(Box::new(Leading::bootstrap(&config, &tree, learners)))
        } else {
            Role::Following(Following::bootstrap(config.leader))
        };
        Server {
            config,
            log: Vec::new(),
            accepted_epoch: config.epoch,
            accepted_leader: config.leader,
            current_epoch: config.epoch,
            attempts: 0,
            closed_attempts: BTreeMap::new(),
            stats: ServerStats::default(),
            ticks: 0,
            tick_phase_ms: 0,
            tree,
            watches: WatchTable::new(),
            committed: 0,
            applied: 0,
            role,
            conns: BTreeMap::new(),
            touched: BTreeSet::new(),
            dropped: BTreeSet::new(),
            lose_reply: BTreeSet::new(),
            expired_now: Vec::new(),
            opportunities: 0,
            lagging: Lagging::new(&config),
            early_replied: BTreeSet::new(),
            frozen: None,
        }
    }

    /// The server process restarts: only the durable state survives; it
    /// looks for a leader, and its tree is rebuilt from the log when it
    /// syncs.
    pub(crate) fn restart(&mut self, out: &mut Vec<Output>) {
        self.ticks = 0;
        self.tree = DataTree::new(self.config.tree);
        self.watches = WatchTable::new();
        self.committed = 0;
        self.applied = 0;
        self.conns.clear();
        self.touched.clear();
        self.dropped.clear();
        self.lose_reply.clear();
        self.lagging = Lagging::new(&self.config);
        self.frozen = None;
        self.role = Role::Looking(Looking::default());
        self.broadcast_vote(out);
    }

    /// Counts of what this server did so far.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// This server's id.
    pub fn id(&self) -> ServerId {
        self.config.id
    }

    /// This server's configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// An established leader: one whose epoch a quorum has synced to.
    pub fn is_leader(&self) -> bool {
        matches!(&self.role, Role::Leading(l) if l.is_established())
    }

    /// Whether this server takes client connections now: it is in an
    /// active quorum (an established leader or a synced follower).
    pub fn is_serving(&self) -> bool {
        match &self.role {
            Role::Looking(_) => false,
            Role::Following(f) => f.is_serving(),
            Role::Leading(l) => l.is_established(),
        }
    }

    /// What the server is doing, as its election votes say.
    pub(crate) fn peer_state(&self) -> PeerState {
        match &self.role {
            Role::Looking(_) => PeerState::Looking,
            Role::Following(f) => PeerState::Following(f.leader()),
            Role::Leading(_) => PeerState::Leading,
        }
    }

    /// A one-line summary of the server's role and logs, for failure
    /// messages.
    pub fn describe(&self) -> String {
        format!(
            "server {}: {:?}, serving {}, epochs accepted {} (from {}) current {}, \
             log {} entries (last {:#x}), committed {}, applied {}, tick {}",
            self.config.id,
            self.role,
            self.is_serving(),
            self.accepted_epoch,
            self.accepted_leader,
            self.current_epoch,
            self.log.len(),
            self.last_logged(),
            self.committed,
            self.applied,
            self.ticks
        )
    }

    /// The epoch of the last sync this server completed (as leader: began),
    /// Zab's currentEpoch.
    pub fn current_epoch(&self) -> u32 {
        self.current_epoch
    }

    /// The applied state.
    pub fn tree(&self) -> &DataTree {
        &self.tree
    }

    /// The zxids of the applied prefix of the log, in order.
    pub fn applied_zxids(&self) -> impl Iterator<Item = Zxid> + '_ {
        self.log[..self.applied].iter().map(|e| e.txn.zxid)
    }

    /// The applied prefix of the log.
    pub fn applied_log(&self) -> &[Entry] {
        &self.log[..self.applied]
    }

    /// Every proposal this server has logged, in zxid order, applied or not.
    pub fn log(&self) -> &[Entry] {
        &self.log
    }

    fn last_logged(&self) -> Zxid {
        self.log.last().map_or(0, |e| e.txn.zxid)
    }

    fn vote(&self) -> Vote {
        Vote {
            current_epoch: self.current_epoch,
            last_zxid: self.last_logged(),
            state: self.peer_state(),
        }
    }

    fn others(&self) -> impl Iterator<Item = ServerId> {
        let (me, n) = (self.config.id, self.config.servers);
        (0..n).filter(move |&s| s != me)
    }

    fn broadcast_vote(&self, out: &mut Vec<Output>) {
        let vote = self.vote();
        for to in self.others() {
            out.push(Output::Peer {
                to,
                msg: PeerMsg::Vote(vote),
            });
        }
    }

    /// Fault: the next reply to a write of `session` on this server is lost
    /// and the connection breaks (TCP cannot lose one reply alone,
    /// docs/ZOOKEEPER.md, "Crashes, partitions and lost replies"); the
    /// write itself is applied.
    pub fn lose_next_write_reply(&mut self, session: SessionId) {
        self.lose_reply.insert(session);
    }

    /// The sessions this server, as leader, expired (or was told to) since
    /// the last call: what the simulation's coverage counts the
    /// connected-but-expired window from.
    pub(crate) fn take_expired(&mut self) -> Vec<SessionId> {
        std::mem::take(&mut self.expired_now)
    }

    /// The client connections this server holds now.
    pub(crate) fn conn_ids(&self) -> Vec<ConnId> {
        self.conns.keys().copied().collect()
    }

    /// The session attached on connection `conn` here, if any.
    pub(crate) fn conn_session(&self, conn: ConnId) -> Option<SessionId> {
        self.conns.get(&conn).and_then(|c| c.session)
    }

    /// Sets the phase of this process's ticks: they come at `phase_ms`
    /// past each multiple of tickTime. Session expiry times are rounded up
    /// to these instants, as ZooKeeper's ExpiryQueue rounds them to
    /// multiples of tickTime on the process's own clock.
    pub(crate) fn set_tick_phase(&mut self, phase_ms: u64) {
        self.tick_phase_ms = (phase_ms % self.config.tick_ms) as i64;
    }

    fn tick_grid(&self) -> leader::TickGrid {
        leader::TickGrid::new(self.config.tick_ms, self.tick_phase_ms)
    }

    /// A tick of the server's clock: heartbeats, timeouts, votes, expiry.
    pub(crate) fn on_tick(&mut self, now_ms: i64, out: &mut Vec<Output>) {
        self.ticks += 1;
        if self.config.breaks(Breakage::LateWatchEvent)
            || self.config.breaks(Breakage::EventReordered)
        {
            // Held events go out at the latest now: a client waiting for
            // one is late, not stuck.
            let conns: Vec<ConnId> = self.conns.keys().copied().collect();
            for conn in conns {
                self.flush_held(conn, out);
            }
        }
        match &self.frozen {
            Some(f) if self.ticks >= f.until_tick => self.thaw(out),
            Some(_) => {}
            None => self.maybe_freeze(),
        }
        match &self.role {
            Role::Looking(_) => self.tick_looking(now_ms, out),
            Role::Following(_) => self.tick_following(out),
            Role::Leading(_) => self.tick_leading(now_ms, out),
        }
    }

    /// The server leaves its role (lost its leader or its quorum, or a
    /// sync failed) and looks for a leader. Every client connection drops.
    fn look(&mut self, out: &mut Vec<Output>) {
        self.thaw(out);
        self.close_learner_connections();
        self.drop_all_connections(out);
        self.role = Role::Looking(Looking::default());
        self.broadcast_vote(out);
    }

    fn drop_all_connections(&mut self, out: &mut Vec<Output>) {
        for (conn, c) in std::mem::take(&mut self.conns) {
            push_events(conn, c.held, out);
            self.stats.role_change_drops += 1;
            self.watches.remove_connection(conn);
            self.dropped.insert(conn);
            out.push(Output::Client {
                conn,
                msg: ServerMsg::ConnectionClosed,
            });
        }
        self.touched.clear();
    }

    /// Server `from`'s process died and its operating system reset the
    /// connection to it (a kill, not a power-off, which only silence
    /// reveals). A follower of `from` looks for a leader at once, as
    /// ZooKeeper's `Follower.followLeader` ends on the socket's
    /// IOException; a leader forgets it as a learner (its LearnerHandler
    /// ends), so the next tick counts the quorum without it.
    pub(crate) fn on_peer_reset(&mut self, from: ServerId, out: &mut Vec<Output>) {
        assert_ne!(from, self.config.id, "a reset from itself");
        let following = matches!(&self.role, Role::Following(f) if f.leader() == from);
        if following {
            self.stats.peer_resets += 1;
            self.look(out);
        } else if self.forget_learner(from) {
            self.stats.peer_resets += 1;
        }
    }

    /// A message from another server.
    pub(crate) fn on_peer(
        &mut self,
        now_ms: i64,
        from: ServerId,
        msg: PeerMsg,
        out: &mut Vec<Output>,
    ) {
        assert_ne!(from, self.config.id, "a message from itself");
        match msg {
            PeerMsg::Vote(vote) => self.on_vote(now_ms, from, vote, out),
            PeerMsg::Learner { attempt, msg } => self.on_learner(now_ms, from, attempt, msg, out),
            PeerMsg::Leader { attempt, msg } => self.on_leader(from, attempt, msg, out),
        }
    }

    /// A message from a client connection held by this server.
    pub(crate) fn on_client(
        &mut self,
        now_ms: i64,
        conn: ConnId,
        msg: ClientMsg,
        out: &mut Vec<Output>,
    ) {
        let me = self.config.id;
        let origin = |xid| Origin {
            server: me,
            conn,
            xid,
        };
        if !matches!(msg, ClientMsg::Connect { .. } | ClientMsg::Disconnect) {
            match self.conns.get(&conn) {
                // This server dropped the connection (its session closed, or
                // the server changed role): the socket is gone and the
                // packet is lost.
                None if self.dropped.contains(&conn) => return,
                None => panic!("conn {conn}: a message before Connect"),
                Some(Conn { session: None, .. }) => {
                    panic!("conn {conn}: a message before its session was created")
                }
                Some(Conn {
                    session: Some(s), ..
                }) => {
                    let s = *s;
                    self.touch(now_ms, s);
                }
            }
        }
        match msg {
            ClientMsg::Ping => {
                let c = self.conns.get_mut(&conn).expect("checked above");
                c.queue.push_back(Pending::new(-2, None, None));
                self.drain(conn, out);
            }
            ClientMsg::Connect {
                session,
                last_zxid,
                timeout_ms,
                watches,
            } => {
                assert!(
                    !self.conns.contains_key(&conn),
                    "conn {conn} connected twice"
                );
                let mut ahead = false;
                let refused = if !self.is_serving() {
                    // Not in an active quorum (docs/ZOOKEEPER.md, "Crashes,
                    // partitions and lost replies").
                    self.stats.not_serving_refusals += 1;
                    true
                } else if last_zxid > self.tree.last_zxid() {
                    ahead = self.config.breaks(Breakage::SkipReconnectZxidRule)
                        && matches!(self.role, Role::Following(_))
                        && session.is_some_and(|s| self.tree.has_session(s))
                        && self.strikes();
                    // The client has seen more than this server: it must
                    // try another (same section).
                    if !ahead {
                        self.stats.zxid_refusals += 1;
                    }
                    !ahead
                } else {
                    false
                };
                if refused {
                    self.dropped.insert(conn);
                    out.push(Output::Client {
                        conn,
                        msg: ServerMsg::ConnectionClosed,
                    });
                    return;
                }
                let c = self.conns.entry(conn).or_default();
                match session {
                    None => {
                        let request = Forwarded::CreateSession {
                            timeout_ms: self.config.negotiate(timeout_ms),
                        };
                        self.forward_to_leader(now_ms, origin(-1), request, out);
                    }
                    Some(session) => {
                        let attach_now = if ahead {
                            Some(watches)
                        } else {
                            c.reattach = Some((last_zxid, watches));
                            None
                        };
                        // The session's older connections here close, as
                        // ZooKeeperServer.processConnectRequest does
                        // (CLIENT_RECONNECT): a request still in flight on
                        // one must not be applied after the client has
                        // moved on.
                        let older: Vec<ConnId> = self
                            .conns
                            .iter()
                            .filter(|(&id, c)| id != conn && c.session == Some(session))
                            .map(|(&id, _)| id)
                            .collect();
                        for old in older {
                            self.flush_held(old, out);
                            self.conns.remove(&old);
                            self.dropped.insert(old);
                            self.watches.remove_connection(old);
                            self.stats.reconnect_closes += 1;
                            out.push(Output::Client {
                                conn: old,
                                msg: ServerMsg::ConnectionClosed,
                            });
                        }
                        if let Some(watches) = attach_now {
                            // Broken: attached from this server's own tree
                            // at once, before it has caught up with what
                            // the client saw; the leader is still told (it
                            // records the move), and its answer only
                            // checked.
                            let timeout_ms = self
                                .tree
                                .sessions()
                                .find(|&(s, _)| s == session)
                                .map_or(0, |(_, t)| t);
                            let c = self.conns.get_mut(&conn).expect("made above");
                            c.zxid_floor = last_zxid;
                            self.attach(conn, session, timeout_ms, last_zxid, &watches, out);
                        }
                        self.ask_revalidate(now_ms, origin(-1), session, out);
                    }
                }
            }
            ClientMsg::Disconnect => {
                if self.conns.remove(&conn).is_some() {
                    self.watches.remove_connection(conn);
                    self.dropped.insert(conn);
                }
            }
            ClientMsg::Close => {
                let session = self.conns.get(&conn).and_then(|c| c.session);
                let session = session.expect("checked above");
                self.forward_to_leader(
                    now_ms,
                    origin(-2),
                    Forwarded::CloseSession { session },
                    out,
                );
            }
            ClientMsg::Request { xid, op } => {
                let session = self.conns.get(&conn).and_then(|c| c.session);
                let session = session.expect("checked above");
                let forwarded = match &op {
                    Op::Sync { .. } => Some(Forwarded::Sync),
                    op if op.is_write() => Some(Forwarded::Write {
                        session,
                        op: op.clone(),
                    }),
                    _ => None,
                };
                let local = forwarded.is_some() && op.is_write() && self.answers_write_itself();
                let result = local.then(|| self.write_locally(now_ms, session, &op));
                // Breakage::SyncWithoutFlush: answered here and now.
                let local = local || (matches!(op, Op::Sync { .. }) && self.syncs_itself());
                let result = result.or_else(|| local.then_some(Ok(Reply::Sync)));
                let c = self.conns.get_mut(&conn).expect("checked above");
                c.queue.push_back(Pending::new(xid, Some(op), result));
                if let Some(request) = forwarded.filter(|_| !local) {
                    self.forward_to_leader(now_ms, origin(xid), request, out);
                }
                self.drain(conn, out);
            }
        }
    }

    fn forward_to_leader(
        &mut self,
        now_ms: i64,
        origin: Origin,
        request: Forwarded,
        out: &mut Vec<Output>,
    ) {
        match &self.role {
            Role::Leading(_) => self.lead(now_ms, Some(origin), request, out),
            Role::Following(_) => self.to_leader(LearnerMsg::Forward { origin, request }, out),
            Role::Looking(_) => unreachable!("a looking server holds no connection"),
        }
    }

    fn ask_revalidate(
        &mut self,
        now_ms: i64,
        origin: Origin,
        session: SessionId,
        out: &mut Vec<Output>,
    ) {
        match &self.role {
            Role::Leading(_) => self.revalidate(now_ms, origin, session, out),
            Role::Following(_) => self.to_leader(LearnerMsg::Revalidate { origin, session }, out),
            Role::Looking(_) => unreachable!("a looking server holds no connection"),
        }
    }

    /// The session was heard from.
    fn touch(&mut self, now_ms: i64, session: SessionId) {
        match &self.role {
            Role::Leading(_) => self.leader_touch(now_ms, session),
            _ => {
                self.touched.insert(session);
            }
        }
    }

    /// The re-attach's answer reaches the client's server: Connected, then
    /// the SetWatches replay; or Expired.
    fn revalidated(
        &mut self,
        origin: Origin,
        session: SessionId,
        live: Option<u64>,
        out: &mut Vec<Output>,
    ) {
        let conn = origin.conn;
        let Some(c) = self.conns.get_mut(&conn) else {
            return; // the client gave up on this connection meanwhile
        };
        let Some((last_zxid, watches)) = c.reattach.take() else {
            // Attached already (Breakage::SkipReconnectZxidRule): a session
            // gone meanwhile ends the connection, as its close would.
            if live.is_none() {
                self.flush_held(conn, out);
                self.conns.remove(&conn);
                self.watches.remove_connection(conn);
                self.dropped.insert(conn);
                out.push(Output::Client {
                    conn,
                    msg: ServerMsg::ConnectionClosed,
                });
            }
            return;
        };
        let Some(timeout_ms) = live else {
            self.conns.remove(&conn);
            self.dropped.insert(conn);
            out.push(Output::Client {
                conn,
                msg: ServerMsg::Expired,
            });
            return;
        };
        self.attach(conn, session, timeout_ms, last_zxid, &watches, out);
    }

    /// The re-attach is accepted: Connected, then the SetWatches replay.
    fn attach(
        &mut self,
        conn: ConnId,
        session: SessionId,
        timeout_ms: u64,
        last_zxid: Zxid,
        watches: &WatchLists,
        out: &mut Vec<Output>,
    ) {
        let c = self.conns.get_mut(&conn).expect("an open connection");
        c.session = Some(session);
        out.push(Output::Client {
            conn,
            msg: ServerMsg::Connected {
                session,
                timeout_ms,
            },
        });
        let replayed = self.watches.set_watches(
            conn,
            &self.tree,
            last_zxid,
            &watches.data,
            &watches.exist,
            &watches.child,
        );
        self.stats.replayed_events += replayed.len() as u64;
        for event in replayed {
            out.push(Output::Client {
                conn,
                msg: ServerMsg::Watch(event),
            });
        }
    }

    /// Breakage::FollowerEmptiesSetData: entry `i` as a follower applies
    /// it, if that differs (a setData's data emptied).
    fn emptied_set_data(&mut self, i: usize) -> Option<zoosim_core::tree::Txn> {
        if !self.config.breaks(Breakage::FollowerEmptiesSetData) || self.is_leader() {
            return None;
        }
        let mut txn = self.log[i].txn.clone();
        let TxnBody::Op(zoosim_core::tree::TxnOp::SetData { data, .. }) = &mut txn.body else {
            return None;
        };
        if data.is_empty() {
            return None;
        }
        data.clear();
        self.stats.breakage_hits += 1;
        Some(txn)
    }

    /// Applies the committed prefix: watches fire, then the txn's own
    /// connection (if here) gets its answer.
    fn apply_committed(&mut self, out: &mut Vec<Output>) {
        assert!(
            self.applied <= self.committed,
            "server {}: applied {} past committed {}",
            self.config.id,
            self.applied,
            self.committed
        );
        assert!(
            self.committed <= self.log.len(),
            "server {}: committed {} past the log's {} entries",
            self.config.id,
            self.committed,
            self.log.len()
        );
        while self.applied < self.committed {
            let i = self.applied;
            self.applied += 1;
            // Borrow the entry rather than clone it: this runs for every txn
            // on every server.
            let applied = match self.emptied_set_data(i) {
                Some(txn) => self.tree.apply(&txn),
                None => self.tree.apply(&self.log[i].txn),
            };
            if self.applied % TREE_CHECK_INTERVAL == 0 {
                self.check_tree();
            }
            let entry = &self.log[i];
            let (session, origin) = (entry.txn.session, entry.origin);
            let created = match entry.txn.body {
                TxnBody::CreateSession { timeout_ms } => Some(timeout_ms),
                _ => None,
            };
            let closed = matches!(entry.txn.body, TxnBody::CloseSession { .. });
            if closed {
                // The ephemerals go exactly with the closeSession txn.
                assert!(
                    !self.tree.has_session(session),
                    "session {session} outlived its closeSession"
                );
                assert!(
                    self.tree.ephemerals(session).next().is_none(),
                    "session {session}'s ephemerals outlived its closeSession"
                );
                self.drop_connections(session, origin, out);
                self.closed_session(session);
            }
            let zxid = self.log[i].txn.zxid;
            for (conn, event) in self.watches.fire_all(&applied.triggers) {
                self.send_event(conn, zxid, event, out);
            }
            if !self.early_replied.is_empty() {
                self.early_replied.remove(&self.log[i].txn.zxid);
            }
            let Some(origin) = origin.filter(|o| o.server == self.config.id) else {
                continue;
            };
            match (created, applied.reply) {
                (Some(timeout_ms), _) => {
                    if let Some(c) = self.conns.get_mut(&origin.conn) {
                        c.session = Some(session);
                        out.push(Output::Client {
                            conn: origin.conn,
                            msg: ServerMsg::Connected {
                                session,
                                timeout_ms,
                            },
                        });
                    }
                }
                // Answered by drop_connections above.
                (None, _) if closed => {}
                (None, Some(result)) => self.complete(origin, result, out),
                (None, None) => unreachable!("no reply for txn {i}"),
            }
        }
        if let Some(lag) = &mut self.lagging {
            while lag.applied + lag.lag < self.applied {
                lag.tree.apply(&self.log[lag.applied].txn);
                lag.applied += 1;
            }
        }
    }

    /// A watch event for `conn`, fired by txn `zxid`: sent now, or held
    /// back ([`Breakage::LateWatchEvent`], [`Breakage::EventReordered`]).
    fn send_event(&mut self, conn: ConnId, zxid: Zxid, event: WatchEvent, out: &mut Vec<Output>) {
        let late = self.config.breaks(Breakage::LateWatchEvent);
        let reordered = self.config.breaks(Breakage::EventReordered);
        if (late || reordered) && self.conns.contains_key(&conn) {
            let held = self.conns.get(&conn).map_or(0, |c| c.held.len());
            if reordered && held > 0 && self.conns[&conn].held_zxid != zxid {
                // A later txn's event overtakes the held ones.
                self.stats.breakage_hits += held as u64;
                out.push(Output::Client {
                    conn,
                    msg: ServerMsg::Watch(event),
                });
                self.flush_held(conn, out);
                return;
            }
            // Behind held events, an event is held too (late-watch-event
            // keeps their order; event-reordered keeps a txn's events
            // together); otherwise one in `one_in` is.
            if held > 0 || self.strikes() {
                let c = self.conns.get_mut(&conn).expect("checked above");
                c.held.push(event);
                c.held_zxid = zxid;
                return;
            }
        }
        out.push(Output::Client {
            conn,
            msg: ServerMsg::Watch(event),
        });
    }

    /// Sends the events held back on `conn`, in order.
    fn flush_held(&mut self, conn: ConnId, out: &mut Vec<Output>) {
        if let Some(c) = self.conns.get_mut(&conn) {
            push_events(conn, std::mem::take(&mut c.held), out);
        }
    }

    /// [`Breakage::FrozenFollowerServesReads`]: a tick of a serving
    /// follower that is not frozen; one in `one_in` starts a freeze.
    fn maybe_freeze(&mut self) {
        let freezes = self.config.breaks(Breakage::FrozenFollowerServesReads)
            && matches!(&self.role, Role::Following(f) if f.is_serving())
            && self.strikes();
        if freezes {
            self.frozen = Some(Freeze {
                until_tick: self.ticks + Breakage::freeze_ticks(self.config.sync_limit_ticks),
                syncs: Vec::new(),
            });
        }
    }

    /// [`Breakage::FrozenFollowerServesReads`]: the freeze (if any) ends:
    /// every queued commit is applied at once, then the syncs answered
    /// meanwhile by the leader get their replies.
    fn thaw(&mut self, out: &mut Vec<Output>) {
        let Some(freeze) = self.frozen.take() else {
            return;
        };
        self.apply_committed(out);
        for origin in freeze.syncs {
            self.complete(origin, Ok(Reply::Sync), out);
        }
    }

    /// [`Breakage::FollowerLocalWrite`]: whether this write, received as a
    /// follower, is answered here instead of going to the leader.
    fn answers_write_itself(&mut self) -> bool {
        self.config.breaks(Breakage::FollowerLocalWrite)
            && matches!(self.role, Role::Following(_))
            && self.strikes()
    }

    /// [`Breakage::SyncWithoutFlush`]: whether this sync, received as a
    /// follower, is answered here at once instead of going to the leader.
    fn syncs_itself(&mut self) -> bool {
        let local = self.config.breaks(Breakage::SyncWithoutFlush)
            && matches!(self.role, Role::Following(_))
            && self.strikes();
        self.stats.breakage_hits += u64::from(local);
        local
    }

    /// One more opportunity for the breakage: whether it strikes (one in
    /// its `one_in`, counted on this server; never a random draw).
    fn strikes(&mut self) -> bool {
        strikes(self.config.broken, &mut self.opportunities)
    }

    /// The answer to a write as if it had been applied here next: prepped
    /// and applied on a scratch copy of the tree, which stays as it was.
    fn write_locally(
        &mut self,
        now_ms: i64,
        session: SessionId,
        op: &Op,
    ) -> Result<Reply, ZkError> {
        self.stats.breakage_hits += 1;
        let mut scratch = self.tree.clone();
        let txn = scratch.prepare(scratch.next_zxid(), now_ms, session, op);
        scratch
            .apply(&txn)
            .reply
            .expect("a write's txn has a reply")
    }

    /// [`Breakage::ReplyBeforeQuorum`]: the leader answers the write of
    /// `origin` (on this server) with the result its proposal `zxid` will
    /// have, before a quorum acked it.
    fn answer_early(
        &mut self,
        origin: Origin,
        zxid: Zxid,
        result: Result<Reply, ZkError>,
        out: &mut Vec<Output>,
    ) {
        let Some(c) = self.conns.get_mut(&origin.conn) else {
            return;
        };
        let pending = c
            .queue
            .iter_mut()
            .find(|p| p.xid == origin.xid && p.result.is_none());
        if let Some(p) = pending {
            p.early = Some((zxid, result));
            self.drain(origin.conn, out);
        }
    }

    /// Panics, naming the invariant, if the applied tree is broken.
    fn check_tree(&self) {
        if let Err(violation) = self.tree.check_invariants() {
            panic!(
                "server {}: {violation} (after applying txn {:#x}, {} applied)",
                self.config.id,
                self.tree.last_zxid(),
                self.applied
            );
        }
    }

    /// closeSession applied: every connection of the session here ends. The
    /// one that asked for the close hears Closed; others (expiry) see their
    /// connection closed, as a real server closes the socket.
    fn drop_connections(
        &mut self,
        session: SessionId,
        origin: Option<Origin>,
        out: &mut Vec<Output>,
    ) {
        let conns: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.session == Some(session))
            .map(|(id, _)| *id)
            .collect();
        for conn in conns {
            self.flush_held(conn, out);
            self.conns.remove(&conn);
            self.dropped.insert(conn);
            self.watches.remove_connection(conn);
            let asked = origin.is_some_and(|o| o.server == self.config.id && o.conn == conn);
            let msg = if asked {
                ServerMsg::Closed
            } else {
                ServerMsg::ConnectionClosed
            };
            out.push(Output::Client { conn, msg });
        }
        self.touched.remove(&session);
    }

    /// Records a request's result and answers what can be answered.
    fn complete(&mut self, origin: Origin, result: Result<Reply, ZkError>, out: &mut Vec<Output>) {
        if result == Err(ZkError::SessionMoved) {
            // FinalRequestProcessor closes the stale connection instead of
            // answering (docs/ZOOKEEPER.md, "Errors and the order of checks").
            self.flush_held(origin.conn, out);
            if self.conns.remove(&origin.conn).is_some() {
                self.watches.remove_connection(origin.conn);
                self.dropped.insert(origin.conn);
                out.push(Output::Client {
                    conn: origin.conn,
                    msg: ServerMsg::ConnectionClosed,
                });
            }
            return;
        }
        let Some(c) = self.conns.get_mut(&origin.conn) else {
            return; // the connection is gone
        };
        let pending = c
            .queue
            .iter_mut()
            .find(|p| p.xid == origin.xid && p.result.is_none())
            .unwrap_or_else(|| panic!("result for unknown xid {}", origin.xid));
        pending.result = Some(result);
        self.drain(origin.conn, out);
    }

    /// Answers the connection's queue from the head: reads and pings run
    /// now (after every earlier request of the connection), writes once
    /// applied here.
    fn drain(&mut self, conn: ConnId, out: &mut Vec<Output>) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let late = self.config.breaks(Breakage::LateWatchEvent);
        // Breakage::EventReordered: held events go out, in order, before
        // any reply on their connection.
        let reordered = self.config.breaks(Breakage::EventReordered);
        while let Some(head) = c.queue.front_mut() {
            let result = match (head.result.take(), &head.op) {
                // Answered when proposed (Breakage::ReplyBeforeQuorum):
                // applied now, it only lets the requests behind it go.
                (Some(_), _) if head.replied => {
                    c.queue.pop_front();
                    continue;
                }
                (Some(r), _) => r,
                (None, _) if head.waits_for_leader() => {
                    if let Some((zxid, result)) = head.early.take() {
                        head.replied = true;
                        self.early_replied.insert(zxid);
                        out.push(Output::Client {
                            conn,
                            msg: ServerMsg::Reply {
                                xid: head.xid,
                                zxid: self.tree.last_zxid().max(c.zxid_floor),
                                result,
                            },
                        });
                    }
                    break;
                }
                (None, None) => {
                    c.queue.pop_front();
                    if reordered {
                        push_events(conn, std::mem::take(&mut c.held), out);
                    }
                    out.push(Output::Client {
                        conn,
                        msg: ServerMsg::Pong,
                    });
                    continue;
                }
                (None, Some(op)) => {
                    let (reply, watch) = self.tree.read(op);
                    if let Some((kind, path)) = watch {
                        self.watches.register(conn, kind, &path);
                    }
                    if c.zxid_floor > self.tree.last_zxid() {
                        // Breakage::SkipReconnectZxidRule: a read from a
                        // state older than the session has seen.
                        self.stats.breakage_hits += 1;
                    }
                    if self.frozen.is_some() && self.applied < self.committed {
                        // Breakage::FrozenFollowerServesReads: a read from
                        // a tree behind this server's commits.
                        self.stats.breakage_hits += 1;
                    }
                    let mut answer = match &mut self.lagging {
                        Some(lag) if !sets_watch(op) => {
                            lag.reads += 1;
                            if lag.reads % lag.one_in == 0 {
                                let (stale, _) = lag.tree.read(op);
                                if stale != reply {
                                    self.stats.breakage_hits += 1;
                                }
                                stale
                            } else {
                                reply
                            }
                        }
                        _ => reply,
                    };
                    // Breakage::ZxidLies: one in `one_in` Stats a read
                    // returns names a zxid one below the true mzxid (the
                    // free `strikes`: `c` borrows the connections).
                    if let Ok(
                        Reply::Exists(Some(stat))
                        | Reply::GetData { stat, .. }
                        | Reply::GetChildren { stat, .. },
                    ) = &mut answer
                    {
                        if self.config.breaks(Breakage::ZxidLies)
                            && strikes(self.config.broken, &mut self.opportunities)
                        {
                            stat.mzxid -= 1;
                            self.stats.breakage_hits += 1;
                        }
                    }
                    answer
                }
            };
            let done = c.queue.pop_front().expect("the head");
            let is_write = done.op.as_ref().is_some_and(Op::is_write);
            let lost = is_write && c.session.is_some_and(|s| self.lose_reply.remove(&s));
            if lost {
                self.stats.lost_replies += 1;
                push_events(conn, std::mem::take(&mut c.held), out);
                self.conns.remove(&conn);
                self.watches.remove_connection(conn);
                self.dropped.insert(conn);
                out.push(Output::Client {
                    conn,
                    msg: ServerMsg::ConnectionClosed,
                });
                return;
            }
            if reordered {
                push_events(conn, std::mem::take(&mut c.held), out);
            }
            out.push(Output::Client {
                conn,
                msg: ServerMsg::Reply {
                    xid: done.xid,
                    zxid: self.tree.last_zxid().max(c.zxid_floor),
                    result,
                },
            });
            if late && !c.held.is_empty() {
                // Held events go out behind the first read reply that shows
                // one of their changes.
                let shown = done
                    .op
                    .as_ref()
                    .map_or(0, |op| c.held.iter().filter(|e| read_shows(op, e)).count());
                if shown > 0 {
                    self.stats.breakage_hits += shown as u64;
                    push_events(conn, std::mem::take(&mut c.held), out);
                }
            }
        }
    }
}

/// Watch events to `conn`, in order.
fn push_events(conn: ConnId, events: Vec<WatchEvent>, out: &mut Vec<Output>) {
    for event in events {
        out.push(Output::Client {
            conn,
            msg: ServerMsg::Watch(event),
        });
    }
}

/// Whether the read `op` asks for a watch.
fn sets_watch(op: &Op) -> bool {
    matches!(
        op,
        Op::Exists { watch: true, .. }
            | Op::GetData { watch: true, .. }
            | Op::GetChildren { watch: true, .. }
    )
}

/// Whether the answer to the read `op`, served after `event`'s change was
/// applied, shows that change: a read of the event's path of the kind the
/// event is about.
fn read_shows(op: &Op, event: &WatchEvent) -> bool {
    let (path, data, children) = match op {
        Op::Exists { path, .. } | Op::GetData { path, .. } => (path, true, false),
        Op::GetChildren { path, .. } => (path, false, true),
        _ => return false,
    };
    *path == event.path
        && match event.event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => data,
            EventType::NodeChildrenChanged => children,
            EventType::NodeDeleted => true,
        }
}

#[cfg(test)]
mod tests;
