//! What servers and clients say to each other. These are the datagrams the
//! simulator delivers; the server state machine consumes and produces them.

use crate::proto::{Op, Reply, SessionId, WatchEvent, ZkError, Zxid};
use crate::tree::Txn;

/// A server's index in the ensemble (0-based; ZooKeeper's myid is this + 1).
pub type ServerId = u32;

/// One client connection: unique across the run (a client's reconnect is a
/// new connection).
pub type ConnId = u64;

/// Where a request came from, so the server holding the connection can
/// answer it once the txn is applied there.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Origin {
    pub server: ServerId,
    pub conn: ConnId,
    pub xid: i64,
}

/// Server ↔ server (ZooKeeper's quorum protocol, reduced to what clients
/// can observe).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum PeerMsg {
    /// Follower → leader: a client's write, sync, or session request.
    Forward { origin: Origin, request: Forwarded },
    /// Leader → follower, in zxid order.
    Proposal { txn: Txn, origin: Option<Origin> },
    /// Follower → leader: the proposal is in my durable log.
    Ack { zxid: Zxid },
    /// Leader → follower, in zxid order.
    Commit { zxid: Zxid },
    /// Leader → the sync's server: everything proposed before the sync has
    /// been committed (and, FIFO, those commits were sent first).
    SyncDone { origin: Origin },
    /// Follower → leader, every tick: the sessions its clients were heard
    /// from since the last report (ZooKeeper piggybacks this on pings).
    Touch { sessions: Vec<SessionId> },
    /// A restarted follower → leader: the last zxid in its durable log.
    FollowerInfo { last_logged: Zxid },
    /// Leader → a syncing follower: the proposals it lacks and how far the
    /// log is committed (ZooKeeper's DIFF).
    Diff {
        entries: Vec<(Txn, Option<Origin>)>,
        committed: Zxid,
    },
    /// Follower → leader: a client re-attaches `session` here.
    Revalidate { origin: Origin, session: SessionId },
    /// Leader → follower: whether the session lives (it is now owned by
    /// the follower, and touched).
    Revalidated {
        origin: Origin,
        session: SessionId,
        live: Option<u64>,
    },
}

/// What a follower forwards to the leader.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Forwarded {
    Write { session: SessionId, op: Op },
    Sync,
    CreateSession { timeout_ms: u64 },
    CloseSession { session: SessionId },
}

/// The watches a reconnecting client still holds (SetWatches).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct WatchLists {
    pub data: Vec<String>,
    pub exist: Vec<String>,
    pub child: Vec<String>,
}

/// Client → server.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum ClientMsg {
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
pub enum ServerMsg {
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
