//! The madsim shell: servers and clients as simulated nodes, the pure
//! [`Server`] inside each server node, and its messages as datagrams.
//!
//! madsim datagrams are not FIFO and a clog drops them, while ZooKeeper's
//! links are TCP: every datagram carries a per-link sequence number and the
//! receiver delivers in order (the [`Reorder`] buffer). The faults so far
//! (client crash, forced expiry) lose no datagram between live nodes, so a
//! gap is only ever a late datagram.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::channel::{mpsc, oneshot};
use futures::StreamExt;
use madsim::net::Endpoint;
use madsim::runtime::{Handle, NodeHandle};
use madsim::task::NodeId;
use madsim::time::TimeHandle;
use tokio::sync::Notify;

use super::msg::{ClientMsg, ConnId, PeerMsg, ServerId, ServerMsg};
use super::server::{Output, Server, ServerConfig};
use crate::client::Zk;
use crate::path::validate_op;
use crate::proto::{ClientEvent, Op, Reply, SessionEvent, SessionId, ZkError, Zxid};
use crate::tree::TreeConfig;

const TAG: u64 = 0x2181;
const CLIENT_PORT: u16 = 2181;

/// Ensemble parameters.
#[derive(Clone, Copy, Debug)]
pub struct EnsembleConfig {
    pub servers: u32,
    pub tick_ms: u64,
}

impl Default for EnsembleConfig {
    fn default() -> Self {
        EnsembleConfig {
            servers: 3,
            tick_ms: 500,
        }
    }
}

/// What travels in one datagram.
enum Wire {
    Peer {
        from: ServerId,
        seq: u64,
        msg: PeerMsg,
    },
    Client {
        conn: ConnId,
        seq: u64,
        msg: ClientMsg,
    },
    Server {
        seq: u64,
        msg: ServerMsg,
    },
}

/// The sender a datagram's sequence number counts for.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Link {
    Peer(ServerId),
    Conn(ConnId),
    Server,
}

impl Wire {
    fn link(&self) -> (Link, u64) {
        match self {
            Wire::Peer { from, seq, .. } => (Link::Peer(*from), *seq),
            Wire::Client { conn, seq, .. } => (Link::Conn(*conn), *seq),
            Wire::Server { seq, .. } => (Link::Server, *seq),
        }
    }
}

/// Delivers each link's datagrams in sequence order.
#[derive(Default)]
struct Reorder {
    expected: BTreeMap<Link, u64>,
    held: BTreeMap<(Link, u64), Wire>,
}

impl Reorder {
    fn accept(&mut self, wire: Wire) -> Vec<Wire> {
        let (link, seq) = wire.link();
        let next = self.expected.entry(link).or_insert(0);
        assert!(seq >= *next, "datagram {seq} on {link:?} delivered twice");
        self.held.insert((link, seq), wire);
        let mut ready = Vec::new();
        while let Some(w) = self.held.remove(&(link, *next)) {
            ready.push(w);
            *next += 1;
        }
        ready
    }
}

/// Per-link sequence numbers on the sending side.
#[derive(Default)]
struct Sequencer(BTreeMap<SocketAddr, u64>);

impl Sequencer {
    fn next(&mut self, to: SocketAddr) -> u64 {
        let n = self.0.entry(to).or_insert(0);
        *n += 1;
        *n - 1
    }
}

pub fn server_addr(id: ServerId) -> SocketAddr {
    let id = u8::try_from(id + 1).expect("at most 254 servers");
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, id)), CLIENT_PORT)
}

fn client_addr(n: u32) -> SocketAddr {
    let [_, _, hi, lo] = n.to_be_bytes();
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 1, hi, lo)), 1)
}

fn now_ms() -> i64 {
    TimeHandle::current().elapsed().as_millis() as i64
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The simulation is single-threaded; a poisoned lock means a panic that
    // is already failing the seed.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a server node's loop reacts to, in one ordered stream.
enum Event {
    Datagram(Wire, SocketAddr),
    Tick,
    /// Forced session expiry (a fault), acted on by the leader.
    Expire(SessionId, Duration),
    /// Prep the closeSessions of sessions marked closing, behind every
    /// datagram already queued (ZooKeeper's prep queue).
    CloseExpired,
}

/// A server's state, shared between its node and the test driving it.
struct ServerSlot {
    server: Mutex<Server>,
    /// The running node's event stream, for faults injected from outside.
    events: Mutex<Option<mpsc::UnboundedSender<Event>>>,
}

/// A running ensemble: its servers' state can be inspected after (or
/// during) a run.
pub struct Ensemble {
    config: EnsembleConfig,
    servers: Vec<Arc<ServerSlot>>,
    _nodes: Vec<NodeHandle>,
    next_client: Mutex<u32>,
}

impl Ensemble {
    /// Starts the servers as madsim nodes; server 0 leads.
    pub fn start(config: EnsembleConfig) -> Ensemble {
        assert!(config.servers >= 1, "an ensemble needs a server");
        let handle = Handle::current();
        let mut servers = Vec::new();
        let mut nodes = Vec::new();
        for id in 0..config.servers {
            let server = Arc::new(ServerSlot {
                server: Mutex::new(Server::new(ServerConfig {
                    id,
                    servers: config.servers,
                    leader: 0,
                    epoch: 1,
                    tick_ms: config.tick_ms,
                    tree: TreeConfig::default(),
                })),
                events: Mutex::new(None),
            });
            let shared = server.clone();
            let tick_ms = config.tick_ms;
            let node = handle
                .create_node()
                .name(format!("server-{id}"))
                .ip(server_addr(id).ip())
                .init(move || serve(shared.clone(), tick_ms))
                .build();
            servers.push(server);
            nodes.push(node);
        }
        Ensemble {
            config,
            servers,
            _nodes: nodes,
            next_client: Mutex::new(0),
        }
    }

    pub fn config(&self) -> EnsembleConfig {
        self.config
    }

    /// Runs `f` on server `id`'s state.
    pub fn with_server<R>(&self, id: ServerId, f: impl FnOnce(&Server) -> R) -> R {
        f(&lock(&self.servers[id as usize].server))
    }

    /// Fault: the leader expires `session` now, as if its time were up.
    pub fn expire_session(&self, session: SessionId) {
        self.expire_session_with_window(session, Duration::ZERO);
    }

    /// Fault: the leader marks `session` closing now and closes it after
    /// `window`; the session's writes prepped in the window fail with
    /// SessionExpired (what a client sees when its session expires while it
    /// is connected and writing).
    pub fn expire_session_with_window(&self, session: SessionId, window: Duration) {
        let leader = (0..self.config.servers)
            .find(|&s| self.with_server(s, Server::is_leader))
            .expect("a leader");
        if let Some(events) = &*lock(&self.servers[leader as usize].events) {
            let _ = events.unbounded_send(Event::Expire(session, window));
        }
    }

    /// Fault: the client's node dies (its pings stop; the handle must not
    /// be used again).
    pub fn crash_client(&self, zk: &SimZk) {
        Handle::current().kill(zk.node);
    }

    /// A new client node, connected to server `server` with a new session.
    pub async fn connect(&self, server: ServerId, timeout_ms: u64) -> Result<SimZk, ZkError> {
        let n = {
            let mut next = lock(&self.next_client);
            *next += 1;
            *next
        };
        let node = Handle::current()
            .create_node()
            .name(format!("client-{n}"))
            .ip(client_addr(n).ip())
            .build();
        let target = server_addr(server);
        let id = node.id();
        node.spawn(async move { SimZk::connect(n, id, target, timeout_ms).await })
            .await
            .map_err(|_| ZkError::ConnectionLoss)?
    }
}

/// Receives datagrams into the node's event stream (a dedicated task, so
/// no datagram is lost to a cancelled receive).
async fn receive_into(endpoint: Arc<Endpoint>, events: mpsc::UnboundedSender<Event>) {
    while let Ok((payload, from)) = endpoint.recv_from_raw(TAG).await {
        let wire = *payload
            .downcast::<Wire>()
            .unwrap_or_else(|_| panic!("a datagram that is not zoosim's from {from}"));
        if events.unbounded_send(Event::Datagram(wire, from)).is_err() {
            return;
        }
    }
}

/// A server node's life: receive, step the state machine, send.
async fn serve(slot: Arc<ServerSlot>, tick_ms: u64) {
    let id = lock(&slot.server).id();
    let endpoint = Arc::new(
        Endpoint::bind(server_addr(id))
            .await
            .expect("the server's address is free"),
    );
    let (tx, mut events) = mpsc::unbounded();
    *lock(&slot.events) = Some(tx.clone());
    let to_self = tx.clone();
    madsim::task::spawn(receive_into(endpoint.clone(), tx.clone()));
    madsim::task::spawn(async move {
        loop {
            madsim::time::sleep(Duration::from_millis(tick_ms)).await;
            if tx.unbounded_send(Event::Tick).is_err() {
                return;
            }
        }
    });
    let mut reorder = Reorder::default();
    let mut seqs = Sequencer::default();
    let mut clients: BTreeMap<ConnId, SocketAddr> = BTreeMap::new();
    while let Some(event) = events.next().await {
        let mut out = Vec::new();
        match event {
            Event::Tick => lock(&slot.server).on_tick(now_ms(), &mut out),
            Event::Expire(session, window) => {
                lock(&slot.server).expire(now_ms(), session, window.as_millis() as u64);
                if !window.is_zero() {
                    let to_self = to_self.clone();
                    madsim::task::spawn(async move {
                        madsim::time::sleep(window).await;
                        let _ = to_self.unbounded_send(Event::CloseExpired);
                    });
                }
            }
            Event::CloseExpired => lock(&slot.server).close_expired(now_ms(), &mut out),
            Event::Datagram(wire, from) => {
                for wire in reorder.accept(wire) {
                    let mut s = lock(&slot.server);
                    match wire {
                        Wire::Peer { from, msg, .. } => s.on_peer(now_ms(), from, msg, &mut out),
                        Wire::Client { conn, msg, .. } => {
                            clients.insert(conn, from);
                            s.on_client(now_ms(), conn, msg, &mut out)
                        }
                        Wire::Server { .. } => panic!("a server message sent to a server"),
                    }
                }
            }
        }
        if lock(&slot.server).has_due_closes(now_ms()) {
            // Behind what is queued already; the channel is ours, so this
            // cannot fail while the loop runs.
            let _ = to_self.unbounded_send(Event::CloseExpired);
        }
        for o in out {
            let (to, wire) = match o {
                Output::Peer { to, msg } => {
                    let addr = server_addr(to);
                    let seq = seqs.next(addr);
                    (addr, Wire::Peer { from: id, seq, msg })
                }
                Output::Client { conn, msg } => {
                    let Some(&addr) = clients.get(&conn) else {
                        continue; // not this server's connection (any more)
                    };
                    let seq = seqs.next(addr);
                    (addr, Wire::Server { seq, msg })
                }
            };
            send(&endpoint, to, wire);
        }
    }
}

/// Sends without waiting: madsim's send costs simulated time, and a server
/// must not stall its loop on it. Order is restored by sequence numbers.
fn send(endpoint: &Arc<Endpoint>, to: SocketAddr, wire: Wire) {
    let endpoint = endpoint.clone();
    madsim::task::spawn(async move {
        // A send to a dead node is dropped by the network, like a datagram.
        let _ = endpoint.send_to_raw(to, TAG, Box::new(wire)).await;
    });
}

struct ClientState {
    next_xid: i64,
    /// Set by close(): answered when the server confirms.
    closing: Option<oneshot::Sender<()>>,
    closed: bool,
    /// The server dropped the connection. Reconnecting (and so learning
    /// Expired, as the Java client does) is the next step of the
    /// simulator; until then a disconnected handle answers ConnectionLoss.
    disconnected: bool,
    waiting: BTreeMap<i64, oneshot::Sender<Result<Reply, ZkError>>>,
    events: VecDeque<ClientEvent>,
    /// The largest zxid seen in a reply (the reconnect check will use it).
    last_zxid: Zxid,
    /// Replies come in issue order (ZooKeeper's client drops a connection
    /// whose replies do not): the last answered xid.
    last_reply_xid: i64,
    seq: u64,
}

/// The simulated client: one session over one connection (this part has no
/// reconnects yet).
pub struct SimZk {
    node: NodeId,
    endpoint: Arc<Endpoint>,
    server: SocketAddr,
    conn: ConnId,
    session: SessionId,
    timeout_ms: u64,
    state: Arc<Mutex<ClientState>>,
    notify: Arc<Notify>,
}

impl SimZk {
    async fn connect(
        n: u32,
        node: NodeId,
        server: SocketAddr,
        timeout_ms: u64,
    ) -> Result<SimZk, ZkError> {
        let endpoint = Arc::new(
            Endpoint::bind(client_addr(n))
                .await
                .map_err(|_| ZkError::ConnectionLoss)?,
        );
        let conn = ConnId::from(n) << 16;
        let state = Arc::new(Mutex::new(ClientState {
            next_xid: 1,
            closing: None,
            closed: false,
            disconnected: false,
            waiting: BTreeMap::new(),
            events: VecDeque::new(),
            last_zxid: 0,
            last_reply_xid: 0,
            seq: 1,
        }));
        let notify = Arc::new(Notify::new());
        let hello = Wire::Client {
            conn,
            seq: 0,
            msg: ClientMsg::Connect { timeout_ms },
        };
        send(&endpoint, server, hello);
        let mut reorder = Reorder::default();
        let (session, negotiated) = loop {
            let (payload, _) = endpoint
                .recv_from_raw(TAG)
                .await
                .map_err(|_| ZkError::ConnectionLoss)?;
            let wire = *payload
                .downcast::<Wire>()
                .map_err(|_| ZkError::MarshallingError)?;
            let mut ready = reorder.accept(wire).into_iter();
            match ready.next() {
                Some(Wire::Server {
                    msg:
                        ServerMsg::Connected {
                            session,
                            timeout_ms,
                        },
                    ..
                }) => {
                    assert!(ready.next().is_none(), "messages before Connected");
                    break (session, timeout_ms);
                }
                None => continue,
                Some(_) => panic!("the first message of a connection is not Connected"),
            }
        };
        lock(&state)
            .events
            .push_back(ClientEvent::Session(SessionEvent::Connected));
        madsim::task::spawn(receive(
            endpoint.clone(),
            reorder,
            state.clone(),
            notify.clone(),
        ));
        madsim::task::spawn(ping(
            endpoint.clone(),
            server,
            conn,
            negotiated,
            state.clone(),
        ));
        Ok(SimZk {
            node,
            endpoint,
            server,
            conn,
            session,
            timeout_ms: negotiated,
            state,
            notify,
        })
    }

    /// The largest zxid this client has seen in a reply.
    pub fn last_zxid(&self) -> Zxid {
        lock(&self.state).last_zxid
    }
}

/// Pings every T/3 so the session stays alive while the client is idle.
async fn ping(
    endpoint: Arc<Endpoint>,
    server: SocketAddr,
    conn: ConnId,
    timeout_ms: u64,
    state: Arc<Mutex<ClientState>>,
) {
    loop {
        madsim::time::sleep(Duration::from_millis(timeout_ms / 3)).await;
        let mut st = lock(&state);
        if st.closed || st.disconnected || st.closing.is_some() {
            return;
        }
        let seq = st.seq;
        st.seq += 1;
        drop(st);
        let ping = Wire::Client {
            conn,
            seq,
            msg: ClientMsg::Ping,
        };
        send(&endpoint, server, ping);
    }
}

/// The client's receive loop: replies to their callers, events to the
/// stream, in arrival (= server) order.
async fn receive(
    endpoint: Arc<Endpoint>,
    mut reorder: Reorder,
    state: Arc<Mutex<ClientState>>,
    notify: Arc<Notify>,
) {
    loop {
        let Ok((payload, from)) = endpoint.recv_from_raw(TAG).await else {
            return;
        };
        let wire = *payload
            .downcast::<Wire>()
            .unwrap_or_else(|_| panic!("a datagram that is not zoosim's from {from}"));
        for wire in reorder.accept(wire) {
            let Wire::Server { msg, .. } = wire else {
                panic!("a client received a non-server message");
            };
            let mut st = lock(&state);
            match msg {
                ServerMsg::Reply { xid, zxid, result } => {
                    assert!(zxid >= st.last_zxid, "a server's zxid went backwards");
                    assert!(xid > st.last_reply_xid, "reply {xid} out of issue order");
                    st.last_zxid = zxid;
                    st.last_reply_xid = xid;
                    let waiter = st.waiting.remove(&xid);
                    let waiter = waiter.unwrap_or_else(|| panic!("reply to unknown xid {xid}"));
                    // The caller may have given up (dropped its future).
                    let _ = waiter.send(result);
                }
                ServerMsg::Watch(event) => {
                    st.events.push_back(ClientEvent::Watch(event));
                    notify.notify_one();
                }
                ServerMsg::Closed => {
                    st.closed = true;
                    st.events
                        .push_back(ClientEvent::Session(SessionEvent::Closed));
                    notify.notify_one();
                    if let Some(tx) = st.closing.take() {
                        let _ = tx.send(());
                    }
                }
                ServerMsg::Pong => {}
                ServerMsg::ConnectionClosed => {
                    // Every pending request fails, in issue order, then
                    // Disconnected (ZK_SEMANTICS.md §3.3).
                    st.disconnected = true;
                    for (_, waiter) in std::mem::take(&mut st.waiting) {
                        let _ = waiter.send(Err(ZkError::ConnectionLoss));
                    }
                    st.events
                        .push_back(ClientEvent::Session(SessionEvent::Disconnected));
                    notify.notify_one();
                }
                ServerMsg::Connected { .. } => panic!("Connected twice on one connection"),
            }
        }
    }
}

impl Zk for SimZk {
    fn session_id(&self) -> SessionId {
        self.session
    }

    fn session_timeout_ms(&self) -> u64 {
        self.timeout_ms
    }

    fn call(&self, op: Op) -> impl std::future::Future<Output = Result<Reply, ZkError>> + Send {
        let sent = validate_op(&op).and_then(|()| {
            if matches!(&op, Op::Multi(ops) if ops.is_empty()) {
                return Ok(None);
            }
            let (tx, rx) = oneshot::channel();
            let mut st = lock(&self.state);
            if st.closed || st.closing.is_some() {
                return Err(ZkError::SessionExpired);
            }
            if st.disconnected {
                return Err(ZkError::ConnectionLoss);
            }
            let xid = st.next_xid;
            st.next_xid += 1;
            st.waiting.insert(xid, tx);
            let seq = st.seq;
            st.seq += 1;
            let wire = Wire::Client {
                conn: self.conn,
                seq,
                msg: ClientMsg::Request { xid, op },
            };
            drop(st);
            send(&self.endpoint, self.server, wire);
            Ok(Some(rx))
        });
        async move {
            match sent? {
                None => Ok(Reply::Multi(Vec::new())),
                Some(rx) => rx.await.unwrap_or(Err(ZkError::ConnectionLoss)),
            }
        }
    }

    async fn next_event(&self) -> ClientEvent {
        loop {
            if let Some(e) = self.try_next_event() {
                return e;
            }
            self.notify.notified().await;
        }
    }

    fn try_next_event(&self) -> Option<ClientEvent> {
        lock(&self.state).events.pop_front()
    }

    fn close(&self) -> impl std::future::Future<Output = Result<(), ZkError>> + Send {
        let mut st = lock(&self.state);
        let rx = if st.closed || st.closing.is_some() {
            None // closing a closed handle is a no-op
        } else {
            let (tx, rx) = oneshot::channel();
            st.closing = Some(tx);
            let seq = st.seq;
            st.seq += 1;
            let wire = Wire::Client {
                conn: self.conn,
                seq,
                msg: ClientMsg::Close,
            };
            send(&self.endpoint, self.server, wire);
            Some(rx)
        };
        drop(st);
        async move {
            if let Some(rx) = rx {
                rx.await.map_err(|_| ZkError::ConnectionLoss)?;
            }
            Ok(())
        }
    }
}
