//! What servers and clients say to each other. These are the datagrams the
//! simulator delivers; the server state machine consumes and produces them.

use zoosim_core::proto::{Op, Reply, SessionId, WatchEvent, ZkError, Zxid};
use zoosim_core::tree::Txn;

/// A server's index in the ensemble (0-based; ZooKeeper's myid is this + 1).
pub type ServerId = u32;

/// One client connection: unique across the run (a client's reconnect is a
/// new connection).
pub type ConnId = u64;

/// Where a request came from, so the server holding the connection can
/// answer it once the txn is applied there.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Origin {
    /// The server holding the client's connection.
    pub server: ServerId,
    /// The connection on that server.
    pub conn: ConnId,
    /// The request's xid on that connection.
    pub xid: i64,
}

/// Server ↔ server: ZooKeeper's quorum protocol (fast leader election,
/// then Zab's discovery, sync and broadcast), reduced to what clients can
/// observe.
///
/// A follower's connection to its leader is one *attempt* (a fresh number
/// each time it starts following, kept across restarts): messages of an
/// attempt the other side has given up on are ignored, as data arriving on
/// a closed TCP connection would be.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum PeerMsg {
    /// Election: the sender's credentials and what it is doing. A looking
    /// server broadcasts it every tick; others answer a looking one.
    Vote(Vote),
    /// Follower → leader, within one attempt.
    Learner { attempt: u64, msg: LearnerMsg },
    /// Leader → follower, within one attempt.
    Leader { attempt: u64, msg: LeaderMsg },
}

/// What an election compares: (current epoch, last logged zxid, server id).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Vote {
    pub(crate) current_epoch: u32,
    pub(crate) last_zxid: Zxid,
    pub(crate) state: PeerState,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum PeerState {
    Looking,
    Following(ServerId),
    Leading,
}

/// Follower → leader.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum LearnerMsg {
    /// Opens an attempt (resent every tick until answered).
    FollowerInfo { accepted_epoch: u32 },
    /// The follower accepted the leader's epoch; its log, for the sync.
    /// `counts` is false when it had accepted that epoch from another
    /// server already: it then does not count for the epoch's quorum, but
    /// may still sync (ZooKeeper acks with epoch -1).
    AckEpoch {
        current_epoch: u32,
        last_zxid: Zxid,
        counts: bool,
    },
    /// The sync is logged: the follower's log is the leader's.
    AckNewLeader,
    /// The proposal is in my durable log.
    Ack { zxid: Zxid },
    /// Every tick: the heartbeat, with the sessions the follower's clients
    /// were heard from since the last one (ZooKeeper's ping reply).
    Touch { sessions: Vec<SessionId> },
    /// A client's write, sync, or session request.
    Forward { origin: Origin, request: Forwarded },
    /// A client re-attaches `session` here.
    Revalidate { origin: Origin, session: SessionId },
}

/// Leader → follower.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum LeaderMsg {
    /// The epoch the leader proposes (or leads in).
    LeaderInfo { epoch: u32 },
    /// The sync (ZooKeeper's DIFF or TRUNC, then NEWLEADER): drop the log
    /// after `truncate_to`, append `entries`; everything up to `committed`
    /// is committed.
    NewLeader {
        truncate_to: Zxid,
        entries: Vec<(Txn, Option<Origin>)>,
        committed: Zxid,
    },
    /// A quorum is synced: commit up to `committed` and serve clients.
    UpToDate { committed: Zxid },
    /// In zxid order.
    Proposal { txn: Txn, origin: Option<Origin> },
    /// In zxid order.
    Commit { zxid: Zxid },
    /// Everything proposed before the sync has been committed (and, FIFO,
    /// those commits were sent first).
    SyncDone { origin: Origin },
    /// Whether the session lives (it is now owned by the follower, and
    /// touched).
    Revalidated {
        origin: Origin,
        session: SessionId,
        live: Option<u64>,
    },
    /// Every tick: the leader is alive.
    Ping,
}

/// What a follower forwards to the leader.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Forwarded {
    Write { session: SessionId, op: Op },
    Sync,
    CreateSession { timeout_ms: u64 },
    CloseSession { session: SessionId },
}

/// The watches a reconnecting client still holds (SetWatches).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub(crate) struct WatchLists {
    pub(crate) data: Vec<String>,
    pub(crate) exist: Vec<String>,
    pub(crate) child: Vec<String>,
}

/// Client → server.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum ClientMsg {
    /// A connection's first message: a new session (`session: None`) or a
    /// re-attach, with the last zxid the client has seen and, on a
    /// re-attach, its watches to replay (ConnectRequest + SetWatches).
    Connect {
        session: Option<SessionId>,
        last_zxid: Zxid,
        timeout_ms: u64,
        watches: WatchLists,
    },
    /// The client gives this connection up (a socket close).
    Disconnect,
    Request {
        xid: i64,
        op: Op,
    },
    /// Close the session (its ephemerals go at once).
    Close,
    /// Keeps the session alive while the client is idle.
    Ping,
}

/// Server → client, in the order the server produced them.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum ServerMsg {
    Connected {
        session: SessionId,
        timeout_ms: u64,
    },
    /// `zxid` is the server's last processed zxid when it answered.
    Reply {
        xid: i64,
        zxid: Zxid,
        result: Result<Reply, ZkError>,
    },
    Watch(WatchEvent),
    /// The session's closeSession has been applied; the connection ends.
    Closed,
    Pong,
    /// ConnectResponse with timeout 0: the session is unknown or expired.
    Expired,
    /// The server dropped this connection (its session was closed, e.g. by
    /// expiry): what a client sees as the TCP connection closing.
    ConnectionClosed,
}
