//! One ZooKeeper server as a pure state machine: messages in, messages out,
//! no sockets, clocks or runtime (the simulator's shell moves them).
//!
//! This part has a fixed leader (elections come later). Every write, failed
//! or not, is prepped by the leader against its proposed state, given a
//! zxid, proposed to every follower, committed on a quorum of acks, and
//! applied in zxid order on every server; the server holding the client's
//! connection answers once it has applied the txn itself
//! (ZK_SEMANTICS.md §4.2). Reads are served from the local applied state,
//! behind the same connection's earlier writes (§4.3).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::msg::{ClientMsg, ConnId, Forwarded, Origin, PeerMsg, ServerId, ServerMsg, WatchLists};
use crate::proto::{Op, Reply, SessionId, ZkError, Zxid};
use crate::tree::{DataTree, TreeConfig, Txn, TxnBody, WatchTable};

/// Something a server wants delivered.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Output {
    Peer { to: ServerId, msg: PeerMsg },
    Client { conn: ConnId, msg: ServerMsg },
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ServerConfig {
    pub id: ServerId,
    pub servers: u32,
    pub leader: ServerId,
    pub epoch: u32,
    pub tick_ms: u64,
    pub tree: TreeConfig,
}

impl ServerConfig {
    /// The negotiated session timeout: 2 to 20 ticks (ZK_SEMANTICS.md §3.1).
    pub fn negotiate(&self, timeout_ms: u64) -> u64 {
        timeout_ms.clamp(2 * self.tick_ms, 20 * self.tick_ms)
    }
}

/// Counts of the interesting things a server did, for coverage: a sweep
/// whose faults never cause them proves little.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct ServerStats {
    /// Connections refused because the client had seen a later zxid.
    pub zxid_refusals: u64,
    /// Connections refused while syncing after a restart.
    pub syncing_refusals: u64,
    /// Watch events replayed by SetWatches on a re-attach.
    pub replayed_events: u64,
    /// Sessions expired by this server as leader.
    pub expiries: u64,
    /// Write replies dropped by the lost-reply fault.
    pub lost_replies: u64,
}

/// A logged proposal: the txn and who to answer.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Entry {
    pub txn: Txn,
    pub origin: Option<Origin>,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Pending {
    xid: i64,
    op: Op,
    result: Option<Result<Reply, ZkError>>,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
struct Conn {
    session: Option<SessionId>,
    /// Requests in issue order; the head is answered first.
    queue: VecDeque<Pending>,
    /// A re-attach waiting for the leader: the client's last zxid and the
    /// watches to replay once the session is confirmed.
    reattach: Option<(Zxid, WatchLists)>,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct LeaderState {
    /// Applied state plus every proposal not yet committed: what prep sees.
    proposed: DataTree,
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
    /// with SessionExpired before the close (ZK_SEMANTICS.md §3.3, 6).
    /// With the time before which not to prep the close (a fault's
    /// closing window; now for a natural expiry).
    to_close: Vec<(SessionId, i64)>,
    /// The server each session is attached to; a write from another
    /// server's (stale) connection fails with SessionMoved.
    owner: BTreeMap<SessionId, ServerId>,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Server {
    config: ServerConfig,
    tree: DataTree,
    watches: WatchTable<ConnId>,
    /// Durable log: every proposal this server has logged, in zxid order.
    log: Vec<Entry>,
    committed: usize,
    applied: usize,
    conns: BTreeMap<ConnId, Conn>,
    leader: Option<LeaderState>,
    /// Sessions heard from since the last report to the leader.
    touched: BTreeSet<SessionId>,
    /// Connections this server dropped; their late packets are ignored.
    dropped: BTreeSet<ConnId>,
    /// A restarted follower until the leader's Diff: it serves no client.
    syncing: bool,
    /// Fault: sessions whose next write reply is lost here (the write is
    /// applied, the reply dropped and the connection broken).
    lose_reply: BTreeSet<SessionId>,
    stats: ServerStats,
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

/// When a session touched at `now_ms` expires: now + T, rounded up to the
/// next tick (ExpiryQueue), so between T and T + tick.
fn expiry_time(tick_ms: u64, now_ms: i64, timeout_ms: u64) -> i64 {
    let tick = tick_ms as i64;
    ((now_ms + timeout_ms as i64) / tick + 1) * tick
}

impl Server {
    pub fn new(config: ServerConfig) -> Server {
        assert!(config.id < config.servers && config.leader < config.servers);
        let tree = DataTree::new(config.tree);
        let leader = (config.id == config.leader).then(|| LeaderState {
            proposed: tree.clone(),
            counter: 0,
            acks: BTreeMap::new(),
            syncs: Vec::new(),
            next_session: 0,
            tracker: BTreeMap::new(),
            closing: BTreeSet::new(),
            to_close: Vec::new(),
            owner: BTreeMap::new(),
        });
        Server {
            config,
            tree,
            watches: WatchTable::new(),
            log: Vec::new(),
            committed: 0,
            applied: 0,
            conns: BTreeMap::new(),
            leader,
            touched: BTreeSet::new(),
            dropped: BTreeSet::new(),
            syncing: false,
            lose_reply: BTreeSet::new(),
            stats: ServerStats::default(),
        }
    }

    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// Fault: the next reply to a write of `session` on this server is lost
    /// and the connection breaks (TCP cannot lose one reply alone,
    /// ZK_SEMANTICS.md §3.4); the write itself is applied.
    pub fn lose_next_write_reply(&mut self, session: SessionId) {
        self.lose_reply.insert(session);
    }

    /// The server process restarts: only the durable log survives; the
    /// tree is rebuilt from the leader's Diff (the first message out).
    /// Only followers restart here: a leader's restart needs an election.
    pub fn restart(&mut self, out: &mut Vec<Output>) {
        assert!(!self.is_leader(), "a leader's restart needs an election");
        self.tree = DataTree::new(self.config.tree);
        self.watches = WatchTable::new();
        self.committed = 0;
        self.applied = 0;
        self.conns.clear();
        self.touched.clear();
        self.dropped.clear();
        self.lose_reply.clear();
        self.syncing = true;
        let last_logged = self.log.last().map_or(0, |e| e.txn.zxid);
        out.push(Output::Peer {
            to: self.config.leader,
            msg: PeerMsg::FollowerInfo { last_logged },
        });
    }

    /// Whether this server takes client connections now.
    pub fn is_serving(&self) -> bool {
        !self.syncing
    }

    /// The session was heard from.
    fn touch(&mut self, now_ms: i64, session: SessionId) {
        let tick_ms = self.config.tick_ms;
        match &self.leader {
            Some(leader) => {
                let Some(&(timeout, _)) = leader.tracker.get(&session) else {
                    return;
                };
                if leader.closing.contains(&session) {
                    return;
                }
                let at = expiry_time(tick_ms, now_ms, timeout);
                let leader = self.leader.as_mut().expect("leader");
                leader.tracker.insert(session, (timeout, at));
            }
            None => {
                self.touched.insert(session);
            }
        }
    }

    /// A tick of the server's clock: followers report touched sessions; the
    /// leader expires the sessions whose time is up.
    pub fn on_tick(&mut self, now_ms: i64, out: &mut Vec<Output>) {
        let Some(leader) = &self.leader else {
            if !self.touched.is_empty() {
                let sessions = std::mem::take(&mut self.touched).into_iter().collect();
                out.push(Output::Peer {
                    to: self.config.leader,
                    msg: PeerMsg::Touch { sessions },
                });
            }
            return;
        };
        let due: Vec<SessionId> = leader
            .tracker
            .iter()
            .filter(|(s, (_, at))| *at <= now_ms && !leader.closing.contains(s))
            .map(|(s, _)| *s)
            .collect();
        for session in due {
            self.stats.expiries += 1;
            self.mark_closing(session, now_ms);
        }
    }

    /// Expiry, first half: from now on the session's writes fail at prep;
    /// its closeSession is prepped from `close_at_ms` on.
    fn mark_closing(&mut self, session: SessionId, close_at_ms: i64) {
        let leader = self.leader.as_mut().expect("leader only");
        leader.closing.insert(session);
        leader.to_close.push((session, close_at_ms));
    }

    /// The leader confirms a re-attach: the session lives (and is now owned
    /// by the client's new server, and touched) or it does not.
    fn revalidate(
        &mut self,
        now_ms: i64,
        origin: Origin,
        session: SessionId,
        out: &mut Vec<Output>,
    ) {
        let leader = self.leader.as_mut().expect("leader only");
        let live = match leader.tracker.get(&session) {
            Some(&(timeout, _)) if !leader.closing.contains(&session) => Some(timeout),
            _ => None,
        };
        if live.is_some() {
            leader.owner.insert(session, origin.server);
            self.touch(now_ms, session);
        }
        if origin.server == self.config.id {
            self.revalidated(origin, session, live, out);
        } else {
            out.push(Output::Peer {
                to: origin.server,
                msg: PeerMsg::Revalidated {
                    origin,
                    session,
                    live,
                },
            });
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
        let (last_zxid, watches) = c.reattach.take().expect("a re-attach in progress");
        let Some(timeout_ms) = live else {
            self.conns.remove(&conn);
            self.dropped.insert(conn);
            out.push(Output::Client {
                conn,
                msg: ServerMsg::Expired,
            });
            return;
        };
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

    /// Whether a closeSession is due to be prepped by
    /// [`Server::close_expired`].
    pub fn has_due_closes(&self, now_ms: i64) -> bool {
        self.leader
            .as_ref()
            .is_some_and(|l| l.to_close.iter().any(|(_, at)| *at <= now_ms))
    }

    /// Expiry, second half: prep the closeSession requests. The shell calls
    /// this behind whatever the leader had already received when it marked
    /// the sessions closing (ZooKeeper's prep queue).
    pub fn close_expired(&mut self, now_ms: i64, out: &mut Vec<Output>) {
        let Some(leader) = &mut self.leader else {
            return;
        };
        let (due, later) = std::mem::take(&mut leader.to_close)
            .into_iter()
            .partition(|(_, at)| *at <= now_ms);
        leader.to_close = later;
        for (session, _) in due {
            self.lead(now_ms, None, Forwarded::CloseSession { session }, out);
        }
    }

    /// Forced expiry (a fault): the leader marks the session closing now,
    /// as if its time were up, and preps its closeSession once
    /// `closing_window_ms` has passed ([`Server::close_expired`]); the
    /// session's writes prepped meanwhile fail with SessionExpired, which
    /// their clients then see. Only the leader can; elsewhere this does
    /// nothing.
    pub fn expire(&mut self, now_ms: i64, session: SessionId, closing_window_ms: u64) {
        let live = self
            .leader
            .as_ref()
            .is_some_and(|l| l.tracker.contains_key(&session) && !l.closing.contains(&session));
        if live {
            self.mark_closing(session, now_ms + closing_window_ms as i64);
        }
    }

    pub fn id(&self) -> ServerId {
        self.config.id
    }

    pub fn is_leader(&self) -> bool {
        self.leader.is_some()
    }

    /// The applied state.
    pub fn tree(&self) -> &DataTree {
        &self.tree
    }

    /// The zxids of the applied prefix of the log, in order.
    pub fn applied_zxids(&self) -> impl Iterator<Item = Zxid> + '_ {
        self.log[..self.applied].iter().map(|e| e.txn.zxid)
    }

    pub fn log(&self) -> &[Entry] {
        &self.log
    }

    fn quorum(&self) -> usize {
        self.config.servers as usize / 2 + 1
    }

    fn followers(&self) -> impl Iterator<Item = ServerId> + '_ {
        (0..self.config.servers).filter(move |&s| s != self.config.id)
    }

    /// A message from a client connection held by this server.
    pub fn on_client(&mut self, now_ms: i64, conn: ConnId, msg: ClientMsg, out: &mut Vec<Output>) {
        let me = self.config.id;
        let origin = |xid| Origin {
            server: me,
            conn,
            xid,
        };
        if !matches!(msg, ClientMsg::Connect { .. } | ClientMsg::Disconnect) {
            match self.conns.get(&conn) {
                // This server dropped the connection (its session closed):
                // a real server's socket is gone and the packet is lost.
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
            ClientMsg::Ping => out.push(Output::Client {
                conn,
                // Pings carry no xid: the answer may pass earlier replies.
                msg: ServerMsg::Pong,
            }),
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
                if self.syncing {
                    self.stats.syncing_refusals += 1;
                } else if last_zxid > self.tree.last_zxid() {
                    self.stats.zxid_refusals += 1;
                }
                if self.syncing || last_zxid > self.tree.last_zxid() {
                    // Not serving yet (syncing after a restart), or the
                    // client has seen more than this server: refused (it
                    // must try another server), ZK_SEMANTICS.md §3.4.
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
                        c.reattach = Some((last_zxid, watches));
                        let origin = origin(-1);
                        if self.is_leader() {
                            self.revalidate(now_ms, origin, session, out);
                        } else {
                            out.push(Output::Peer {
                                to: self.config.leader,
                                msg: PeerMsg::Revalidate { origin, session },
                            });
                        }
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
                let c = self.conns.get_mut(&conn).expect("checked above");
                c.queue.push_back(Pending {
                    xid,
                    op,
                    result: None,
                });
                if let Some(request) = forwarded {
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
        if self.is_leader() {
            self.lead(now_ms, Some(origin), request, out);
        } else {
            out.push(Output::Peer {
                to: self.config.leader,
                msg: PeerMsg::Forward { origin, request },
            });
        }
    }

    /// A message from another server.
    pub fn on_peer(&mut self, now_ms: i64, from: ServerId, msg: PeerMsg, out: &mut Vec<Output>) {
        match msg {
            PeerMsg::Forward { origin, request } => {
                assert!(self.is_leader(), "forward to a follower");
                assert_eq!(origin.server, from);
                self.lead(now_ms, Some(origin), request, out);
            }
            PeerMsg::FollowerInfo { last_logged } => {
                assert!(self.is_leader(), "follower info to a follower");
                // With a stable leader a follower's log is a prefix of ours.
                let known = self.log.partition_point(|e| e.txn.zxid <= last_logged);
                assert!(
                    known == 0 || self.log[known - 1].txn.zxid == last_logged,
                    "follower {from} logged {last_logged:#x}, which the leader never proposed"
                );
                let entries = self.log[known..]
                    .iter()
                    .map(|e| (e.txn.clone(), e.origin))
                    .collect();
                let committed = self.log[..self.committed].last().map_or(0, |e| e.txn.zxid);
                out.push(Output::Peer {
                    to: from,
                    msg: PeerMsg::Diff { entries, committed },
                });
            }
            PeerMsg::Diff { entries, committed } => {
                assert_eq!(from, self.config.leader);
                self.log.extend(
                    entries
                        .into_iter()
                        .map(|(txn, origin)| Entry { txn, origin }),
                );
                self.committed = self.log.partition_point(|e| e.txn.zxid <= committed);
                // Ack everything uncommitted, including entries logged before
                // the crash whose ack may have died with it.
                for e in &self.log[self.committed..] {
                    out.push(Output::Peer {
                        to: from,
                        msg: PeerMsg::Ack { zxid: e.txn.zxid },
                    });
                }
                // No connection survived the restart, so applying answers
                // nobody here.
                self.apply_committed(out);
                self.syncing = false;
            }
            PeerMsg::Revalidate { origin, session } => {
                assert_eq!(origin.server, from);
                self.revalidate(now_ms, origin, session, out);
            }
            PeerMsg::Revalidated {
                origin,
                session,
                live,
            } => self.revalidated(origin, session, live, out),
            PeerMsg::Touch { sessions } => {
                assert!(self.is_leader(), "touch to a follower");
                for s in sessions {
                    self.touch(now_ms, s);
                }
            }
            PeerMsg::Proposal { .. } | PeerMsg::Commit { .. } if self.syncing => {
                // Sent before the leader heard of the restart; the Diff
                // covers them.
            }
            PeerMsg::Proposal { txn, origin } => {
                assert_eq!(from, self.config.leader, "proposal from a non-leader");
                if let Some(last) = self.log.last() {
                    assert!(txn.zxid > last.txn.zxid, "proposals out of zxid order");
                }
                let zxid = txn.zxid;
                self.log.push(Entry { txn, origin });
                out.push(Output::Peer {
                    to: from,
                    msg: PeerMsg::Ack { zxid },
                });
            }
            PeerMsg::Ack { zxid } => {
                let leader = self.leader.as_mut().expect("ack to a follower");
                if let Some(acks) = leader.acks.get_mut(&zxid) {
                    acks.insert(from);
                }
                self.commit_ready(out);
            }
            PeerMsg::Commit { zxid } => {
                let next = self
                    .log
                    .get(self.committed)
                    .unwrap_or_else(|| panic!("commit {zxid:#x} of an unlogged proposal"));
                assert_eq!(next.txn.zxid, zxid, "commits out of order");
                self.committed += 1;
                self.apply_committed(out);
            }
            PeerMsg::SyncDone { origin } => {
                assert_eq!(origin.server, self.config.id);
                self.complete(origin, Ok(Reply::Sync), out);
            }
        }
    }

    /// The leader sequences a request: prep, zxid, propose. `origin` is
    /// `None` for the leader's own requests (expiry).
    fn lead(
        &mut self,
        now_ms: i64,
        origin: Option<Origin>,
        request: Forwarded,
        out: &mut Vec<Output>,
    ) {
        let id = self.config.id;
        let epoch = self.config.epoch;
        let tick_ms = self.config.tick_ms;
        let leader = self.leader.as_mut().expect("only the leader leads");
        if let Forwarded::Sync = request {
            let origin = origin.expect("a sync comes from a client");
            if self.committed == self.log.len() {
                self.sync_done(origin, out);
            } else {
                leader.syncs.push((self.log.len(), origin));
            }
            return;
        }
        leader.counter += 1;
        let zxid = (i64::from(epoch) << 32) | i64::from(leader.counter);
        let txn = match request {
            // The session checks of prep, in ZooKeeper's order: closing or
            // already closed is SessionExpired (§1.6); a write from a
            // connection the session has moved away from is SessionMoved
            // (not applied; that server closes the connection).
            Forwarded::Write { session, .. }
                if leader.closing.contains(&session) || !leader.tracker.contains_key(&session) =>
            {
                error_txn(zxid, now_ms, session, ZkError::SessionExpired)
            }
            Forwarded::Write { session, .. }
                if origin.is_some_and(|o| leader.owner.get(&session) != Some(&o.server)) =>
            {
                error_txn(zxid, now_ms, session, ZkError::SessionMoved)
            }
            Forwarded::Write { session, op } => leader.proposed.prepare(zxid, now_ms, session, &op),
            Forwarded::CreateSession { timeout_ms } => {
                leader.next_session += 1;
                let session = SessionId((i64::from(id) + 1) << 56 | leader.next_session);
                leader.tracker.insert(
                    session,
                    (timeout_ms, expiry_time(tick_ms, now_ms, timeout_ms)),
                );
                if let Some(o) = origin {
                    leader.owner.insert(session, o.server);
                }
                leader
                    .proposed
                    .prepare_create_session(zxid, now_ms, session, timeout_ms)
            }
            Forwarded::CloseSession { session } => {
                // Prep collects the ephemerals in the proposed state, so
                // creates still in flight go too.
                leader.closing.insert(session);
                leader.tracker.remove(&session);
                leader.owner.remove(&session);
                leader.to_close.retain(|(s, _)| *s != session);
                leader.proposed.prepare_close_session(zxid, now_ms, session)
            }
            Forwarded::Sync => unreachable!("handled above"),
        };
        leader.proposed.apply(&txn);
        leader.acks.insert(zxid, BTreeSet::from([id]));
        let entry = Entry { txn, origin };
        for to in (0..self.config.servers).filter(|&s| s != id) {
            out.push(Output::Peer {
                to,
                msg: PeerMsg::Proposal {
                    txn: entry.txn.clone(),
                    origin: entry.origin,
                },
            });
        }
        self.log.push(entry);
        self.commit_ready(out);
    }

    /// Commits, in order, every proposal a quorum has acked.
    fn commit_ready(&mut self, out: &mut Vec<Output>) {
        let quorum = self.quorum();
        while let Some(entry) = self.log.get(self.committed) {
            let zxid = entry.txn.zxid;
            let leader = self.leader.as_mut().expect("leader only");
            if leader.acks.get(&zxid).map_or(0, BTreeSet::len) < quorum {
                break;
            }
            leader.acks.remove(&zxid);
            self.committed += 1;
            for to in self.followers() {
                out.push(Output::Peer {
                    to,
                    msg: PeerMsg::Commit { zxid },
                });
            }
            self.apply_committed(out);
            let committed = self.committed;
            let leader = self.leader.as_mut().expect("leader only");
            // The hot path: most commits release no sync.
            if leader.syncs.iter().any(|(upto, _)| *upto <= committed) {
                let (done, waiting): (Vec<_>, Vec<_>) = leader
                    .syncs
                    .drain(..)
                    .partition(|(upto, _)| *upto <= committed);
                leader.syncs = waiting;
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
            out.push(Output::Peer {
                to: origin.server,
                msg: PeerMsg::SyncDone { origin },
            });
        }
    }

    /// Applies the committed prefix: watches fire, then the txn's own
    /// connection (if here) gets its answer.
    fn apply_committed(&mut self, out: &mut Vec<Output>) {
        assert!(self.applied <= self.committed && self.committed <= self.log.len());
        while self.applied < self.committed {
            let i = self.applied;
            self.applied += 1;
            // Borrow the entry rather than clone it: this runs for every txn
            // on every server.
            let applied = self.tree.apply(&self.log[i].txn);
            let entry = &self.log[i];
            let (session, origin) = (entry.txn.session, entry.origin);
            let created = match entry.txn.body {
                TxnBody::CreateSession { timeout_ms } => Some(timeout_ms),
                _ => None,
            };
            let closed = matches!(entry.txn.body, TxnBody::CloseSession { .. });
            if closed {
                self.drop_connections(session, origin, out);
                if let Some(leader) = &mut self.leader {
                    leader.closing.remove(&session);
                }
            }
            for (conn, event) in self.watches.fire_all(&applied.triggers) {
                out.push(Output::Client {
                    conn,
                    msg: ServerMsg::Watch(event),
                });
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
            // answering (ZK_SEMANTICS.md §1.6).
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

    /// Answers the connection's queue from the head: reads run now (after
    /// every earlier request of the connection), writes once applied here.
    fn drain(&mut self, conn: ConnId, out: &mut Vec<Output>) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        while let Some(head) = c.queue.front_mut() {
            let result = match head.result.take() {
                Some(r) => r,
                None if head.op.is_write() || matches!(head.op, Op::Sync { .. }) => break,
                None => {
                    let (reply, watch) = self.tree.read(&head.op);
                    if let Some((kind, path)) = watch {
                        self.watches.register(conn, kind, &path);
                    }
                    reply
                }
            };
            let xid = head.xid;
            let lost = head.op.is_write() && c.session.is_some_and(|s| self.lose_reply.remove(&s));
            c.queue.pop_front();
            if lost {
                self.stats.lost_replies += 1;
                self.conns.remove(&conn);
                self.watches.remove_connection(conn);
                self.dropped.insert(conn);
                out.push(Output::Client {
                    conn,
                    msg: ServerMsg::ConnectionClosed,
                });
                return;
            }
            out.push(Output::Client {
                conn,
                msg: ServerMsg::Reply {
                    xid,
                    zxid: self.tree.last_zxid(),
                    result,
                },
            });
        }
    }
}

#[cfg(test)]
mod tests;
