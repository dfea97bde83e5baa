//! The madsim shell: servers and clients as simulated nodes, the pure
//! [`Server`] inside each server node, and its messages as datagrams.
//!
//! Datagrams overtake one another (each draws its own latency), while
//! ZooKeeper's links are TCP: every datagram carries a per-stream sequence number and the receiver delivers
//! in order (the [`Reorder`] buffer). Streams belong to one connection, or
//! to a pair of server incarnations: a killed node's streams are abandoned
//! with it and a restarted one starts fresh, so a gap in a live stream is
//! only ever a late datagram (network faults stall datagrams rather than
//! drop them, see [`net`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::channel::mpsc;
use futures::StreamExt;
use madsim::runtime::{Handle, NodeHandle};
use madsim::time::TimeHandle;

pub mod budget;
mod client;
pub mod nemesis;
mod net;

pub use client::{Flavour, SimZk};
use net::{Datagram, Inbox, Outbox, Socket};
pub use net::{NetStats, Network};
pub use zoosim_core::history::Recorder;

/// A role as a history records it.
fn recorded(
    (state, serving, epoch): (PeerState, bool, u32),
) -> (zoosim_core::history::Role, bool, u32) {
    let role = match state {
        PeerState::Looking => zoosim_core::history::Role::Looking,
        PeerState::Following(l) => zoosim_core::history::Role::Following(l),
        PeerState::Leading => zoosim_core::history::Role::Leading,
    };
    (role, serving, epoch)
}

/// A recorder on the simulated clock, for [`Ensemble::start_recording`]
/// and the runs that keep a history (time since the simulation began).
pub fn sim_recorder() -> Recorder {
    Recorder::new(std::sync::Arc::new(|| {
        TimeHandle::current().elapsed().as_nanos() as u64
    }))
}

use super::msg::{ClientMsg, ConnId, PeerMsg, PeerState, ServerId, ServerMsg};
use super::server::{Output, Server, ServerConfig};
use client::ClientSetup;
use madsim::rand::seq::SliceRandom;
use madsim::rand::Rng;
use zoosim_client::Zk;
use zoosim_core::proto::{SessionId, ZkError};
use zoosim_core::tree::Txn;

const CLIENT_PORT: u16 = 2181;

/// Ensemble parameters.
#[derive(Clone, Copy, Debug)]
pub struct EnsembleConfig {
    /// Servers in the ensemble (default 3).
    pub servers: u32,
    /// ZooKeeper's tickTime, in ms (default 500).
    pub tick_ms: u64,
    /// syncLimit: how long (in ticks) a follower waits for its leader, and
    /// a leader for a quorum, before electing again.
    pub sync_limit_ticks: u64,
    /// initLimit: how long (in ticks) an election's sync may take.
    pub init_limit_ticks: u64,
    /// Every datagram's one-way latency, drawn uniformly from this range
    /// (inclusive; madsim's clock steps in whole milliseconds, 0 is "at
    /// once"). A LAN or localhost hop is well under a millisecond.
    pub link_latency_ms: (u64, u64),
    /// A guarantee the servers break on purpose, and how often (default
    /// none): only to prove that a check of the guarantees can fail (see
    /// [`Breakage`](zoosim_core::breakage::Breakage); a bare
    /// `Breakage` converts to its gross default rate with `.into()`).
    pub broken: Option<zoosim_core::breakage::Broken>,
}

impl Default for EnsembleConfig {
    fn default() -> Self {
        EnsembleConfig {
            servers: 3,
            tick_ms: 500,
            sync_limit_ticks: 5,
            init_limit_ticks: 10,
            link_latency_ms: (0, 1),
            broken: None,
        }
    }
}

/// What travels in one datagram.
pub(crate) enum Wire {
    /// Between server processes: a restart is a new incarnation, whose
    /// streams start afresh (a new TCP connection, in ZooKeeper).
    Peer {
        from: ServerId,
        from_incarnation: u64,
        to_incarnation: u64,
        seq: u64,
        msg: PeerMsg,
    },
    Client {
        conn: ConnId,
        seq: u64,
        msg: ClientMsg,
    },
    Server {
        conn: ConnId,
        seq: u64,
        msg: ServerMsg,
    },
    /// A dead server's operating system resets a client connection (a
    /// TCP RST): it overtakes whatever the connection still carried, so it
    /// travels outside the stream's order.
    Reset { conn: ConnId },
}

/// A one-way stream that sequence numbers count on: from a server to a
/// server, or one client connection's either direction.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Link {
    /// A server and its incarnation.
    Peer(ServerId, u64),
    Conn(ConnId),
}

impl Wire {
    fn link(&self) -> (Link, u64) {
        match self {
            Wire::Peer {
                from,
                from_incarnation,
                seq,
                ..
            } => (Link::Peer(*from, *from_incarnation), *seq),
            Wire::Client { conn, seq, .. } | Wire::Server { conn, seq, .. } => {
                (Link::Conn(*conn), *seq)
            }
            Wire::Reset { .. } => unreachable!("a reset is not in a stream"),
        }
    }
}

/// Delivers each link's datagrams in sequence order.
#[derive(Default)]
pub(crate) struct Reorder {
    expected: BTreeMap<Link, u64>,
    held: BTreeMap<(Link, u64), Wire>,
}

impl Reorder {
    pub(crate) fn accept(&mut self, wire: Wire) -> Vec<Wire> {
        let (link, seq) = wire.link();
        let next = self.expected.entry(link).or_insert(0);
        assert!(seq >= *next, "datagram {seq} on {link:?} delivered twice");
        if seq == *next && !self.held.contains_key(&(link, seq + 1)) {
            // The common case: in order, nothing held behind it.
            *next += 1;
            return vec![wire];
        }
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
struct Sequencer(BTreeMap<Link, u64>);

impl Sequencer {
    fn next(&mut self, to: Link) -> u64 {
        let n = self.0.entry(to).or_insert(0);
        *n += 1;
        *n - 1
    }
}

/// Server `id`'s client address: 10.0.0.(`id` + 1), port 2181.
///
/// Panics if `id` + 1 does not fit in a byte.
pub fn server_addr(id: ServerId) -> SocketAddr {
    let id = u8::try_from(id + 1).expect("at most 254 servers");
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, id)), CLIENT_PORT)
}

/// The server at `addr`, if it is one.
pub(crate) fn server_of(addr: SocketAddr) -> Option<ServerId> {
    match addr.ip() {
        IpAddr::V4(ip) if ip.octets()[..3] == [10, 0, 0] && addr.port() == CLIENT_PORT => {
            Some(ServerId::from(ip.octets()[3]) - 1)
        }
        _ => None,
    }
}

pub(crate) fn client_addr(n: u32) -> SocketAddr {
    let [_, _, hi, lo] = n.to_be_bytes();
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 1, hi, lo)), 1)
}

pub(crate) fn now_ms() -> i64 {
    TimeHandle::current().elapsed().as_millis() as i64
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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
    /// Fault: lose this session's next write reply.
    LoseReply(SessionId),
    /// Prep the closeSessions of sessions marked closing, behind every
    /// datagram already queued (ZooKeeper's prep queue).
    CloseExpired,
    /// What a restarted server sends first.
    Restarted(Vec<Output>),
    /// A peer's process was killed and its connection to this one reset.
    PeerReset(ServerId),
}

/// A server's state, shared between its node and the test driving it.
struct ServerSlot {
    server: Mutex<Server>,
    /// The running node's event stream, for faults injected from outside.
    events: Mutex<Option<mpsc::UnboundedSender<Event>>>,
    /// The socket of the process starting next, and its incarnation:
    /// bound when the ensemble starts or the server restarts, not when
    /// its task first runs, as peers and clients may send in between (at
    /// zero latency, in the same instant) and must find it.
    next_socket: Mutex<Option<(Socket, Inbox, u64)>>,
}

/// What every node of an ensemble shares: the network and which process
/// of each server is the live one (so a peer stream goes to the process
/// now running, as a new TCP connection would).
struct Shared {
    net: Arc<Network>,
    /// Starts of each server's process (1 for the first).
    incarnations: Mutex<Vec<u64>>,
    /// Every txn any server applied, in applied order: Zab's agreement
    /// (every server applies the same sequence) is checked against it as
    /// the servers run, so a divergence fails the seed where it happens.
    history: Mutex<Vec<Txn>>,
    /// The client-level history, when the run records one.
    recorder: Option<Recorder>,
    /// tickTime, in ms.
    tick_ms: u64,
    /// When a leader expired each session (ms since the start).
    expired_at: Mutex<BTreeMap<SessionId, i64>>,
    /// Sessions a server still served (a pong, a reply) a tick or more
    /// after a leader had expired them, with the longest such lag (ms):
    /// the connected-but-expired window.
    served_after_expiry: Mutex<BTreeMap<SessionId, i64>>,
    /// Fault: the next server seen leading before it is established (in
    /// discovery or sync) is reported here, once ([`Ensemble::trap_syncing_leader`]).
    syncing_trap: Mutex<Option<futures::channel::oneshot::Sender<ServerId>>>,
    /// Whether `syncing_trap` is set (every step reads it).
    trap_armed: AtomicBool,
}

impl Shared {
    /// Checks server `s`'s applied prefix from `checked` on against the
    /// history (extending it), and returns how far it is checked now.
    fn check_applied(&self, s: &Server, checked: usize) -> usize {
        let applied = s.applied_log();
        if applied.len() <= checked {
            return checked;
        }
        let mut history = lock(&self.history);
        for (i, entry) in applied.iter().enumerate().skip(checked) {
            match history.get(i) {
                Some(txn) => assert!(
                    *txn == entry.txn,
                    "server {} applied {:#x} as txn {i}, where another applied {:#x}: \
                     replicas diverged",
                    s.id(),
                    entry.txn.zxid,
                    txn.zxid
                ),
                None => history.push(entry.txn.clone()),
            }
        }
        applied.len()
    }
}

/// Where a new client goes after the first server of its connect string.
#[derive(Clone, Debug)]
enum Failover {
    /// Every other server of the ensemble, in a seeded order.
    AnyOther,
    /// These servers, in this order.
    InOrder(Vec<ServerId>),
    /// Nowhere: the connect string names the first server alone.
    Never,
}

/// A simulated client to start, from [`Ensemble::client`] or
/// [`Ensemble::client_list`]; [`ClientBuilder::connect`] starts it.
#[derive(Clone)]
#[must_use = "a client starts only with `.connect().await`"]
pub struct ClientBuilder<'a> {
    ensemble: &'a Ensemble,
    first: ServerId,
    failover: Failover,
    timeout_ms: u64,
    flavour: Flavour,
    client: Option<u32>,
}

impl ClientBuilder<'_> {
    /// The session timeout a client requests unless told otherwise, in ms
    /// (a scenario's default, and 8 ticks of the default tickTime).
    pub const DEFAULT_TIMEOUT_MS: u64 = 4000;

    /// Sets the session timeout the client requests, in ms (the server
    /// negotiates it: clamped to 2–20 ticks). It also bounds how long
    /// [`ClientBuilder::connect`] tries for. Default
    /// [`ClientBuilder::DEFAULT_TIMEOUT_MS`] (4000).
    pub fn timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = timeout_ms;
        self
    }

    /// Sets which real client to behave like. Default [`Flavour::Java`].
    pub fn flavour(mut self, flavour: Flavour) -> Self {
        self.flavour = flavour;
        self
    }

    /// Names the scenario client this session belongs to, for the history
    /// the run records (a scenario's client opens a session after
    /// another; its number is how the outcome log and the faults name
    /// it). Changes nothing else.
    pub fn scenario_client(mut self, client: u32) -> Self {
        self.client = Some(client);
        self
    }

    /// Makes the connect string name the first server alone: the client
    /// never moves to another server (it reconnects to that one, or its
    /// session expires). Drops the rest of a [`Ensemble::client_list`]
    /// list. Default off: the client fails over.
    pub fn no_failover(mut self) -> Self {
        self.failover = Failover::Never;
        self
    }

    /// Starts the client's node and opens its session: rounds over the
    /// connect string, a second apart, until a server accepts it, or
    /// ConnectionLoss once the session timeout has passed.
    pub async fn connect(self) -> Result<SimZk, ZkError> {
        let e = self.ensemble;
        let n = {
            let mut next = lock(&e.next_client);
            *next += 1;
            *next
        };
        let node = Handle::current()
            .create_node()
            .name(format!("client-{n}"))
            .ip(client_addr(n).ip())
            .build();
        // The first server first, then the others (listed, or every other
        // server in a seeded order).
        let mut servers: Vec<SocketAddr> = match self.failover {
            Failover::AnyOther => {
                let mut others: Vec<SocketAddr> = (0..e.config.servers)
                    .filter(|&s| s != self.first)
                    .map(server_addr)
                    .collect();
                others.shuffle(&mut madsim::rand::thread_rng());
                others
            }
            Failover::InOrder(others) => others.into_iter().map(server_addr).collect(),
            Failover::Never => Vec::new(),
        };
        servers.insert(0, server_addr(self.first));
        let id = node.id();
        lock(&e.client_nodes).push(id);
        if let Some(c) = self.client {
            e.add_client_node(c, client_addr(n).ip());
        }
        let setup = ClientSetup {
            net: e.shared.net.clone(),
            n,
            node: id,
            servers,
            timeout_ms: self.timeout_ms,
            flavour: self.flavour,
            client: self.client,
            recorder: e.shared.recorder.clone(),
        };
        node.spawn(async move { SimZk::connect(setup).await })
            .await
            .map_err(|_| ZkError::ConnectionLoss)?
    }
}

/// A running ensemble: its servers' state can be inspected after (or
/// during) a run.
pub struct Ensemble {
    config: EnsembleConfig,
    servers: Vec<Arc<ServerSlot>>,
    nodes: Vec<NodeHandle>,
    shared: Arc<Shared>,
    next_client: Mutex<u32>,
    /// Every client's node, for [`Ensemble::shutdown`].
    client_nodes: Mutex<Vec<madsim::task::NodeId>>,
    /// Servers crashed and not restarted.
    down: Mutex<BTreeSet<ServerId>>,
    /// Scenario clients' machines: the nodes each ran a session on, and
    /// the servers it cannot reach now.
    machines: Mutex<BTreeMap<u32, Machine>>,
    /// Isolated clients whose session the leader expired meanwhile.
    isolated_past_expiry: Mutex<u64>,
    /// Servers paused now (a server pause), each with whether it led as
    /// an established leader when it stopped.
    paused: Mutex<BTreeMap<ServerId, bool>>,
    /// What the server faults caused, for coverage.
    fault_counts: Mutex<FaultCounts>,
}

/// What the server faults caused, for coverage ([`Ensemble::fault_counts`]).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct FaultCounts {
    /// Client connections a killed server's reset reached (each client
    /// then reconnects at once; a Java client after its 0–1 s jitter).
    pub client_resets: u64,
    /// Pauses of an established leader that resumed to find another
    /// established leader of a newer epoch (a deposed leader with its old
    /// view).
    pub deposed_while_paused: u64,
    /// Leaders crashed while they synced their followers (before they
    /// were established).
    pub syncing_leader_crashes: u64,
    /// Sessions that were live when a quorum went down and were still
    /// live once the ensemble was back (the new leader tracked them anew).
    pub sessions_survived_outage: u64,
}

/// A scenario client's machine: every session of the client runs on it
/// (each on a node of its own), so a fault that cuts the machine off
/// cuts off its later sessions too.
#[derive(Default)]
struct Machine {
    /// The addresses of the client's nodes, oldest first.
    nodes: Vec<IpAddr>,
    /// Per server the machine cannot reach, how many faults cut it off
    /// (each heals its own).
    cut_from: BTreeMap<ServerId, u32>,
}

impl Ensemble {
    /// Starts the servers as madsim nodes, already running: server 0 leads
    /// epoch 1 with every follower synced (later leaders are elected).
    pub fn start(config: EnsembleConfig) -> Ensemble {
        Ensemble::start_with(config, None)
    }

    /// [`Ensemble::start`], recording the run's client-level history into
    /// `recorder` (clients, servers' roles, and the nemesis's faults). The
    /// run is the same as without (same seed, same run).
    pub fn start_recording(config: EnsembleConfig, recorder: Recorder) -> Ensemble {
        Ensemble::start_with(config, Some(recorder))
    }

    fn start_with(config: EnsembleConfig, recorder: Option<Recorder>) -> Ensemble {
        assert!(config.servers >= 1, "an ensemble needs a server");
        let handle = Handle::current();
        let shared = Arc::new(Shared {
            net: Arc::new(Network::new(config.link_latency_ms)),
            incarnations: Mutex::new(vec![0; config.servers as usize]),
            history: Mutex::new(Vec::new()),
            recorder,
            tick_ms: config.tick_ms,
            expired_at: Mutex::default(),
            served_after_expiry: Mutex::default(),
            syncing_trap: Mutex::default(),
            trap_armed: Default::default(),
        });
        let mut servers = Vec::new();
        let mut nodes = Vec::new();
        for id in 0..config.servers {
            let mut server_config = ServerConfig::new(id, config.servers, config.tick_ms);
            server_config.sync_limit_ticks = config.sync_limit_ticks;
            server_config.init_limit_ticks = config.init_limit_ticks;
            server_config.broken = config.broken;
            let first = Server::new(server_config);
            if let Some(r) = &shared.recorder {
                r.role(id, 1, recorded(role_of(&first)));
            }
            let server = Arc::new(ServerSlot {
                server: Mutex::new(first),
                events: Mutex::new(None),
                next_socket: Mutex::new(Some(bind_process(&shared, id))),
            });
            let slot = server.clone();
            let shared = shared.clone();
            let tick_ms = config.tick_ms;
            let node = handle
                .create_node()
                .name(format!("server-{id}"))
                .ip(server_addr(id).ip())
                .init(move || serve(slot.clone(), shared.clone(), tick_ms))
                .build();
            servers.push(server);
            nodes.push(node);
        }
        Ensemble {
            config,
            servers,
            nodes,
            shared,
            next_client: Mutex::new(0),
            client_nodes: Mutex::default(),
            down: Mutex::new(Default::default()),
            machines: Mutex::default(),
            isolated_past_expiry: Mutex::new(0),
            paused: Mutex::default(),
            fault_counts: Mutex::default(),
        }
    }

    /// Sessions a server still served (answered a ping or a request) a
    /// tick or more after a leader had expired them, each with the longest
    /// such lag in ms: a minority follower that has not yet noticed the
    /// loss of its leader keeps its clients' sessions alive for them.
    pub fn served_after_expiry(&self) -> Vec<(SessionId, u64)> {
        lock(&self.shared.served_after_expiry)
            .iter()
            .map(|(&s, &lag)| (s, lag as u64))
            .collect()
    }

    /// The committed history: every txn applied anywhere, in order (every
    /// server's applied log is a prefix of it, as the run checks).
    pub fn history(&self) -> Vec<Txn> {
        lock(&self.shared.history).clone()
    }

    /// The recorder of the run's history, if it records one.
    pub fn recorder(&self) -> Option<&Recorder> {
        self.shared.recorder.as_ref()
    }

    /// The network, for link faults and traffic counts.
    pub fn net(&self) -> &Network {
        &self.shared.net
    }

    /// The established leader of the newest epoch, if any (a deposed one
    /// may not know it yet).
    pub fn leader(&self) -> Option<ServerId> {
        (0..self.config.servers)
            .filter(|&s| !self.is_down(s))
            // Restarted, its process not yet started (its socket still
            // waits to be taken): its state is still the dead process's,
            // a leader's role among it.
            .filter(|&s| lock(&self.servers[s as usize].next_socket).is_none())
            .filter(|&s| self.with_server(s, Server::is_leader))
            .max_by_key(|&s| self.with_server(s, Server::current_epoch))
    }

    /// Whether server `id` is crashed (and not restarted).
    pub fn is_down(&self, id: ServerId) -> bool {
        lock(&self.down).contains(&id)
    }

    /// Fault: cuts every link between servers of different `sides` (both
    /// ways); links to clients are untouched. Servers in no side keep
    /// their links.
    pub fn partition(&self, sides: &[&[ServerId]]) {
        tracing::info!(target: "zoosim::fault", "partition {sides:?}");
        for (i, a) in sides.iter().enumerate() {
            for b in &sides[i + 1..] {
                for &x in a.iter() {
                    for &y in b.iter() {
                        let (x, y) = (server_addr(x).ip(), server_addr(y).ip());
                        self.shared.net.cut(x, y);
                        self.shared.net.cut(y, x);
                    }
                }
            }
        }
    }

    /// Fault: server `from` can no longer reach server `to` (one way).
    pub fn clog(&self, from: ServerId, to: ServerId) {
        tracing::info!(target: "zoosim::fault", "clog server {from} -> server {to}");
        let (x, y) = (server_addr(from).ip(), server_addr(to).ip());
        self.shared.net.cut(x, y);
    }

    /// Fault: the client and server `server` cannot reach each other.
    pub fn cut_client(&self, zk: &SimZk, server: ServerId) {
        tracing::info!(target: "zoosim::fault", "cut {} from server {server}", zk.who());
        let (x, y) = (zk.addr().ip(), server_addr(server).ip());
        self.shared.net.cut(x, y);
        self.shared.net.cut(y, x);
    }

    /// Fault: every datagram from server `from` to server `to` takes
    /// `delay` more (zero removes the delay).
    pub fn delay(&self, from: ServerId, to: ServerId, delay: Duration) {
        if delay.is_zero() {
            tracing::info!(target: "zoosim::fault", "end the delay of server {from} -> server {to}");
        } else {
            tracing::info!(target: "zoosim::fault", "delay server {from} -> server {to} by {delay:?}");
        }
        let (x, y) = (server_addr(from).ip(), server_addr(to).ip());
        self.shared.net.delay(x, y, delay);
    }

    /// Heals every cut, clog and delay (scenario clients' machines
    /// included).
    pub fn heal(&self) {
        tracing::info!(target: "zoosim::fault", "heal every link");
        lock(&self.machines)
            .values_mut()
            .for_each(|m| m.cut_from.clear());
        self.shared.net.heal_all();
    }

    /// Fault: scenario client `client`'s machine (see
    /// [`ClientBuilder::scenario_client`]) and `servers` cannot reach each
    /// other: its current session's node, and the nodes of sessions it
    /// opens until [`Ensemble::reconnect_client`] undoes this. A client on
    /// the minority side of a partition is cut off from the majority's
    /// servers; an isolated client from every server.
    pub fn cut_off_client(&self, client: u32, servers: &[ServerId]) {
        tracing::info!(target: "zoosim::fault", "cut client {client} off from servers {servers:?}");
        let mut machines = lock(&self.machines);
        let m = machines.entry(client).or_default();
        for &s in servers {
            let n = m.cut_from.entry(s).or_insert(0);
            *n += 1;
            if *n == 1 {
                for &ip in &m.nodes {
                    self.cut_node(ip, s);
                }
            }
        }
    }

    /// Undoes one [`Ensemble::cut_off_client`] of `servers`: the links
    /// heal once no other fault keeps them cut.
    pub fn reconnect_client(&self, client: u32, servers: &[ServerId]) {
        tracing::info!(target: "zoosim::fault", "reconnect client {client} to servers {servers:?}");
        let mut machines = lock(&self.machines);
        let Some(m) = machines.get_mut(&client) else {
            return;
        };
        for s in servers {
            let Some(n) = m.cut_from.get_mut(s) else {
                continue; // healed already (heal())
            };
            *n -= 1;
            if *n == 0 {
                m.cut_from.remove(s);
                let server = server_addr(*s).ip();
                for &ip in &m.nodes {
                    self.shared.net.heal(ip, server);
                    self.shared.net.heal(server, ip);
                }
            }
        }
    }

    /// Counts an isolated client whose session `session` the leader
    /// expired while it was cut off, if it did (at the isolation's end).
    pub(crate) fn note_isolation_end(&self, session: SessionId) {
        let gone = self
            .leader()
            .is_some_and(|l| self.with_server(l, |s| !s.tree().has_session(session)));
        if gone {
            *lock(&self.isolated_past_expiry) += 1;
        }
    }

    /// Isolated clients (nemesis's `client-isolated`) whose session expired
    /// while they were cut off.
    pub fn isolated_past_expiry(&self) -> u64 {
        *lock(&self.isolated_past_expiry)
    }

    /// The servers scenario client `client`'s machine cannot reach now.
    pub fn client_cut_from(&self, client: u32) -> Vec<ServerId> {
        lock(&self.machines)
            .get(&client)
            .map_or_else(Vec::new, |m| m.cut_from.keys().copied().collect())
    }

    fn cut_node(&self, ip: IpAddr, server: ServerId) {
        let server = server_addr(server).ip();
        self.shared.net.cut(ip, server);
        self.shared.net.cut(server, ip);
    }

    /// A new node of scenario client `client`: on its machine, behind the
    /// machine's cuts.
    fn add_client_node(&self, client: u32, ip: IpAddr) {
        let mut machines = lock(&self.machines);
        let m = machines.entry(client).or_default();
        m.nodes.push(ip);
        for &s in m.cut_from.keys() {
            self.cut_node(ip, s);
        }
    }

    /// The configuration the ensemble was started with.
    pub fn config(&self) -> EnsembleConfig {
        self.config
    }

    /// Runs `f` on server `id`'s state.
    pub fn with_server<R>(&self, id: ServerId, f: impl FnOnce(&Server) -> R) -> R {
        f(&lock(&self.servers[id as usize].server))
    }

    /// Fault: the leader expires `session` now, as if its time were up.
    pub fn expire_session(&self, session: SessionId) -> bool {
        self.expire_session_with_window(session, Duration::ZERO)
    }

    /// Fault: the leader marks `session` closing now and closes it after
    /// `window`; the session's writes prepped in the window fail with
    /// SessionExpired (what a client sees when its session expires while it
    /// is connected and writing).
    /// Returns false if there is no leader to do it.
    pub fn expire_session_with_window(&self, session: SessionId, window: Duration) -> bool {
        let Some(leader) = self.leader() else {
            return false;
        };
        let events = lock(&self.servers[leader as usize].events);
        // Traced only once it applies: the fault schedule marks the
        // others skipped, and the trace must not show them injected.
        let sent = events
            .as_ref()
            .is_some_and(|e| e.unbounded_send(Event::Expire(session, window)).is_ok());
        if sent {
            tracing::info!(target: "zoosim::fault", "expire session {session} (closing window {window:?})");
        }
        sent
    }

    /// Fault: the client's node dies (its pings stop; the handle must not
    /// be used again).
    pub fn crash_client(&self, zk: &SimZk) {
        tracing::info!(target: "zoosim::fault", "crash {}", zk.who());
        Handle::current().kill(zk.node());
    }

    /// A new client: a node of its own with a new session, which tries
    /// `server` first and, when it loses it, moves to the ensemble's other
    /// servers in a seeded order (its connect string names every server).
    /// Configure it with the [`ClientBuilder`]'s methods, then
    /// `.connect().await`.
    pub fn client(&self, server: ServerId) -> ClientBuilder<'_> {
        ClientBuilder {
            ensemble: self,
            first: server,
            failover: Failover::AnyOther,
            timeout_ms: ClientBuilder::DEFAULT_TIMEOUT_MS,
            flavour: Flavour::Java,
            client: None,
        }
    }

    /// [`Ensemble::client`] with an explicit connect string: the client
    /// tries `servers` in this order, first to last, then round again (a
    /// server may be named twice). Panics if `servers` is empty.
    pub fn client_list(&self, servers: &[ServerId]) -> ClientBuilder<'_> {
        let (first, rest) = servers.split_first().expect("at least one server");
        ClientBuilder {
            failover: Failover::InOrder(rest.to_vec()),
            ..self.client(*first)
        }
    }

    /// Kills every server and client node. madsim does not drop the tasks
    /// still running when a runtime is dropped (their memory leaks), so a
    /// process that runs many seeds ends each run with this.
    pub fn shutdown(&self) {
        let handle = Handle::current();
        for node in lock(&self.client_nodes).drain(..) {
            handle.kill(node);
        }
        for node in &self.nodes {
            handle.kill(node.id());
        }
    }

    /// Fault: server `id` powers off: its peers and clients notice only
    /// by its silence (its clients reconnect elsewhere once their read
    /// timeout passes; if it led, the others elect a new leader once
    /// syncLimit passes).
    pub fn crash_server(&self, id: ServerId) {
        tracing::info!(target: "zoosim::fault", "crash server {id}");
        self.power_off(id);
    }

    fn power_off(&self, id: ServerId) {
        assert!(
            !lock(&self.paused).contains_key(&id),
            "server {id} crashed while paused"
        );
        assert!(lock(&self.down).insert(id), "server {id} crashed twice");
        Handle::current().kill(self.nodes[id as usize].id());
    }

    /// Fault: server `id`'s process is killed (kill -9, the OOM killer):
    /// its operating system resets every connection at once, so its
    /// clients see the connection drop and reconnect elsewhere, and its
    /// followers (or its leader) learn it is gone, each after the link's
    /// latency. A reset does not cross a cut link: that side learns by
    /// silence, as from a power-off.
    pub fn kill_server(&self, id: ServerId) {
        tracing::info!(target: "zoosim::fault", "kill server {id}");
        let conns = self.with_server(id, Server::conn_ids);
        self.power_off(id);
        let from = server_addr(id);
        for conn in conns {
            // A connection's id starts with its client's number.
            let to = client_addr((conn >> 32) as u32);
            self.shared.net.reset(from, to, Wire::Reset { conn });
        }
        for peer in (0..self.config.servers).filter(|&p| p != id && !self.is_down(p)) {
            if self.shared.net.is_cut(from.ip(), server_addr(peer).ip()) {
                continue;
            }
            let incarnation = lock(&self.shared.incarnations)[peer as usize];
            let (slot, shared) = (self.servers[peer as usize].clone(), self.shared.clone());
            let latency = self.shared.net.draw_latency();
            madsim::task::spawn(async move {
                madsim::time::sleep(latency).await;
                // Only the process that had the connection.
                if lock(&shared.incarnations)[peer as usize] == incarnation {
                    if let Some(events) = lock(&slot.events).as_ref() {
                        let _ = events.unbounded_send(Event::PeerReset(id));
                    }
                }
            });
        }
    }

    /// Fault: server `id` stops for `stall` (a GC pause, a stalled disk)
    /// and then runs on where it was, with its old view: what reached it
    /// meanwhile waits in its socket, and its missed ticks are not made up
    /// (its next tick comes at its usual phase). Returns whether it led as
    /// an established leader when it stopped.
    pub fn pause_server(&self, id: ServerId, stall: Duration) -> bool {
        tracing::info!(target: "zoosim::fault", "pause server {id} for {stall:?}");
        assert!(!self.is_down(id), "server {id} paused while down");
        let led = self.with_server(id, Server::is_leader);
        assert!(
            lock(&self.paused).insert(id, led).is_none(),
            "server {id} paused twice"
        );
        Handle::current().pause(self.nodes[id as usize].id());
        led
    }

    /// Ends [`Ensemble::pause_server`]'s pause. Counts a leader that
    /// resumes deposed (it led when it stopped, and another leads a newer
    /// epoch now).
    pub fn resume_server(&self, id: ServerId) {
        tracing::info!(target: "zoosim::fault", "resume server {id}");
        let led = lock(&self.paused)
            .remove(&id)
            .unwrap_or_else(|| panic!("server {id} resumed unpaused"));
        let epoch = self.with_server(id, Server::current_epoch);
        let replaced = (0..self.config.servers).any(|s| {
            s != id
                && !self.is_down(s)
                && self.with_server(s, |x| x.is_leader() && x.current_epoch() > epoch)
        });
        if led && replaced {
            lock(&self.fault_counts).deposed_while_paused += 1;
        }
        Handle::current().resume(self.nodes[id as usize].id());
    }

    /// The next server seen leading before it is established (electing
    /// its epoch or syncing its followers), once: what a fault that
    /// crashes a new leader mid-sync waits for.
    pub fn trap_syncing_leader(&self) -> futures::channel::oneshot::Receiver<ServerId> {
        let (tx, rx) = futures::channel::oneshot::channel();
        *lock(&self.shared.syncing_trap) = Some(tx);
        self.shared.trap_armed.store(true, Ordering::Relaxed);
        rx
    }

    /// Whether server `id` leads without being established yet.
    pub fn is_syncing_leader(&self, id: ServerId) -> bool {
        !self.is_down(id)
            && self.with_server(id, |s| {
                s.peer_state() == PeerState::Leading && !s.is_leader()
            })
    }

    /// Counts what the server faults caused (see [`FaultCounts`]).
    pub fn fault_counts(&self) -> FaultCounts {
        let mut c = *lock(&self.fault_counts);
        c.client_resets = self.shared.net.resets_delivered();
        c
    }

    pub(crate) fn count_fault(&self, f: impl FnOnce(&mut FaultCounts)) {
        f(&mut lock(&self.fault_counts));
    }

    /// Fault: the next reply to one of `zk`'s writes is lost on its current
    /// server, which breaks the connection; the write is applied. Returns
    /// false if the client is not connected.
    pub fn lose_next_write_reply(&self, zk: &SimZk) -> bool {
        let Some(server) = zk.current_server() else {
            return false;
        };
        let slot = &self.servers[server as usize];
        let sent = lock(&slot.events)
            .as_ref()
            .is_some_and(|e| e.unbounded_send(Event::LoseReply(zk.session_id())).is_ok());
        if sent {
            tracing::info!(target: "zoosim::fault", "lose the next write reply of {}", zk.who());
        }
        sent
    }

    /// Fault: the client's node stalls for `stall` (a GC pause): it runs
    /// nothing, then resumes where it was.
    pub fn pause_client(&self, zk: &SimZk, stall: Duration) {
        tracing::info!(target: "zoosim::fault", "pause {} for {stall:?}", zk.who());
        let node = zk.node();
        Handle::current().pause(node);
        madsim::task::spawn(async move {
            madsim::time::sleep(stall).await;
            Handle::current().resume(node);
        });
    }

    /// Fault: a crashed server starts again with its durable state (log,
    /// epochs), looks for a leader and syncs before it serves clients.
    pub fn restart_server(&self, id: ServerId) {
        tracing::info!(target: "zoosim::fault", "restart server {id}");
        budget::note(budget::Event::Restart);
        assert!(
            lock(&self.down).remove(&id),
            "server {id} restarted without a crash"
        );
        *lock(&self.servers[id as usize].next_socket) = Some(bind_process(&self.shared, id));
        Handle::current().restart(self.nodes[id as usize].id());
    }
}

/// One server process's shell state: its streams and what it has checked.
struct Process {
    id: ServerId,
    incarnation: u64,
    slot: Arc<ServerSlot>,
    shared: Arc<Shared>,
    socket: Socket,
    outbox: Outbox,
    /// The node's own event stream (for closes due after this event).
    to_self: mpsc::UnboundedSender<Event>,
    reorder: Reorder,
    seqs: Sequencer,
    clients: BTreeMap<ConnId, SocketAddr>,
    /// How much of this process's applied log is checked against the
    /// history (a restart applies from the start again).
    checked: usize,
}

impl Process {
    /// Steps the state machine on one event and sends what it says.
    fn step(&mut self, event: Event) {
        let mut out = Vec::new();
        // One reading of the clock per step: a step never awaits, so the
        // simulated time cannot move within it (and each reading costs a
        // thread-local lookup and a lock, which showed in profiles).
        let now = now_ms();
        // Only for the trace and the history: the hot path skips it when
        // nobody listens (reading the role changes nothing).
        let traced = tracing::enabled!(target: "zoosim::server", tracing::Level::INFO);
        let recorder = self.shared.recorder.as_ref();
        let role_before = (traced || recorder.is_some()).then(|| role_of(&lock(&self.slot.server)));
        match event {
            Event::Restarted(first) => out = first,
            Event::Tick => lock(&self.slot.server).on_tick(now, &mut out),
            Event::Expire(session, window) => {
                lock(&self.slot.server).expire(now, session, window.as_millis() as u64);
                if !window.is_zero() {
                    let to_self = self.to_self.clone();
                    madsim::task::spawn(async move {
                        madsim::time::sleep(window).await;
                        let _ = to_self.unbounded_send(Event::CloseExpired);
                    });
                }
            }
            Event::CloseExpired => lock(&self.slot.server).close_expired(now, &mut out),
            Event::PeerReset(from) => lock(&self.slot.server).on_peer_reset(from, &mut out),
            Event::LoseReply(session) => lock(&self.slot.server).lose_next_write_reply(session),
            Event::Datagram(wire, from) => {
                if let Wire::Peer { to_incarnation, .. } = &wire {
                    if *to_incarnation != self.incarnation {
                        return; // addressed to this server's previous life
                    }
                }
                let mut s = lock(&self.slot.server);
                for wire in self.reorder.accept(wire) {
                    match wire {
                        Wire::Peer { from, msg, .. } => s.on_peer(now, from, msg, &mut out),
                        Wire::Client { conn, msg, .. } => {
                            self.clients.insert(conn, from);
                            s.on_client(now, conn, msg, &mut out)
                        }
                        Wire::Server { .. } | Wire::Reset { .. } => {
                            panic!("a client's message sent to a server")
                        }
                    }
                }
            }
        }
        let mut s = lock(&self.slot.server);
        if let Some(before) = role_before {
            let role = role_of(&s);
            if let Some(r) = recorder.filter(|_| role != before) {
                r.role(self.id, self.incarnation, recorded(role));
            }
            if role != before && traced {
                tracing::info!(
                    target: "zoosim::server",
                    "server {} (process {}) {:?}, epoch {}{}",
                    self.id,
                    self.incarnation,
                    role.0,
                    role.2,
                    if role.1 { ", serving" } else { "" }
                );
            }
        }
        self.checked = self.shared.check_applied(&s, self.checked);
        if self.shared.trap_armed.load(Ordering::Relaxed)
            && s.peer_state() == PeerState::Leading
            && !s.is_leader()
        {
            if let Some(trap) = lock(&self.shared.syncing_trap).take() {
                self.shared.trap_armed.store(false, Ordering::Relaxed);
                let _ = trap.send(self.id);
            }
        }
        self.note_served_after_expiry(&mut s, &out, now);
        if s.has_due_closes(now) {
            // Behind the events queued already (ZooKeeper's prep queue);
            // the channel lives as long as the node.
            let _ = self.to_self.unbounded_send(Event::CloseExpired);
        }
        drop(s);
        for o in out {
            let (to, wire) = match o {
                Output::Peer { to, msg } => {
                    let to_incarnation = lock(&self.shared.incarnations)[to as usize];
                    let seq = self.seqs.next(Link::Peer(to, to_incarnation));
                    let wire = Wire::Peer {
                        from: self.id,
                        from_incarnation: self.incarnation,
                        to_incarnation,
                        seq,
                        msg,
                    };
                    (server_addr(to), wire)
                }
                Output::Client { conn, msg } => {
                    let Some(&addr) = self.clients.get(&conn) else {
                        continue; // not this server's connection (any more)
                    };
                    let seq = self.seqs.next(Link::Conn(conn));
                    (addr, Wire::Server { conn, seq, msg })
                }
            };
            self.shared.net.send(&self.outbox, self.socket, to, wire);
        }
    }
}

impl Process {
    /// Coverage of the connected-but-expired window: notes the sessions
    /// this server (as leader) expired, and the pongs and replies it sends
    /// on sessions a leader expired a tick or more ago.
    fn note_served_after_expiry(&self, s: &mut Server, out: &[Output], now: i64) {
        let newly = s.take_expired();
        let mut expired = lock(&self.shared.expired_at);
        for session in newly {
            tracing::info!(target: "zoosim::server", "server {} expires session {session}", self.id);
            expired.entry(session).or_insert(now);
        }
        if expired.is_empty() {
            return;
        }
        for o in out {
            let Output::Client {
                conn,
                msg: ServerMsg::Pong | ServerMsg::Reply { .. },
            } = o
            else {
                continue;
            };
            let Some(&at) = s.conn_session(*conn).and_then(|x| expired.get(&x)) else {
                continue;
            };
            let lag = now - at;
            if lag >= self.shared.tick_ms as i64 {
                let session = s.conn_session(*conn).expect("looked up above");
                let mut served = lock(&self.shared.served_after_expiry);
                let longest = served.entry(session).or_insert(lag);
                *longest = (*longest).max(lag);
            }
        }
    }
}

/// What the trace reports of a server's role: its state, whether it
/// serves clients, its epoch.
fn role_of(s: &Server) -> (PeerState, bool, u32) {
    (s.peer_state(), s.is_serving(), s.current_epoch())
}

/// Receives datagrams and steps the server on each at once (a dedicated
/// task, so no datagram waits behind a tick; no queue between it and the
/// state machine, as that would cost a task switch per message).
async fn receive(mut inbox: Inbox, process: Arc<Mutex<Process>>, net: Arc<Network>) {
    while let Some(Datagram { from, wires }) = inbox.next().await {
        let mut process = lock(&process);
        for wire in wires {
            net.note_delivered();
            process.step(Event::Datagram(wire, from));
        }
    }
}

/// Binds server `id`'s socket for its next process, and counts that
/// process's incarnation (only once bound: a peer's datagram for this
/// incarnation must find a socket, or its stream would have a gap).
fn bind_process(shared: &Shared, id: ServerId) -> (Socket, Inbox, u64) {
    let (socket, inbox) = shared.net.bind(server_addr(id));
    let mut all = lock(&shared.incarnations);
    all[id as usize] += 1;
    (socket, inbox, all[id as usize])
}

/// A server node's life: its clock, its datagrams and the faults injected
/// into it, each stepping the state machine.
async fn serve(slot: Arc<ServerSlot>, shared: Arc<Shared>, tick_ms: u64) {
    let id = lock(&slot.server).id();
    let (socket, inbox, incarnation) = lock(&slot.next_socket)
        .take()
        .expect("a process's socket is bound when it starts");
    let (tx, mut events) = mpsc::unbounded();
    *lock(&slot.events) = Some(tx.clone());
    let process = Arc::new(Mutex::new(Process {
        id,
        incarnation,
        slot: slot.clone(),
        shared: shared.clone(),
        socket,
        outbox: Outbox::start(),
        to_self: tx.clone(),
        reorder: Reorder::default(),
        seqs: Sequencer::default(),
        clients: BTreeMap::new(),
        checked: 0,
    }));
    if incarnation > 1 {
        let mut first = Vec::new();
        lock(&slot.server).restart(&mut first);
        if let Some(r) = &shared.recorder {
            r.role(id, incarnation, recorded(role_of(&lock(&slot.server))));
        }
        lock(&process).step(Event::Restarted(first));
    }
    madsim::task::spawn(receive(inbox, process.clone(), shared.net.clone()));
    // Each process ticks with a phase of its own (drawn when it starts),
    // as real servers' tick threads do: a follower's and its leader's
    // ticks, and so their timeouts, are not in step.
    let tick = Duration::from_millis(tick_ms);
    let offset_ms = madsim::rand::thread_rng().gen_range(1..=tick_ms);
    let first = madsim::time::Instant::now() + Duration::from_millis(offset_ms);
    lock(&slot.server).set_tick_phase(now_ms() as u64 + offset_ms);
    madsim::task::spawn(async move {
        let mut next = first;
        loop {
            madsim::time::sleep_until(next).await;
            next += tick;
            // After a pause (the node ran nothing for a while) the missed
            // ticks are gone, as a stalled JVM's are: no burst of ticks on
            // resume, the next one at the usual phase.
            let now = madsim::time::Instant::now();
            while next <= now {
                next += tick;
            }
            if tx.unbounded_send(Event::Tick).is_err() {
                return;
            }
        }
    });
    while let Some(event) = events.next().await {
        lock(&process).step(event);
    }
}
