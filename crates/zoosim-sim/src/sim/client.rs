//! The simulated client: one session over a succession of connections, as
//! ZooKeeper's clients behave (docs/ZOOKEEPER.md, "Watches and SetWatches",
//! "Session timeouts", "Client states"):
//!
//! * a connection breaks when the server closes it or stays silent longer
//!   than the read timeout; every request in flight then fails with
//!   ConnectionLoss, in issue order, and Disconnected follows;
//! * it reconnects to the next server of its list with its session id, its
//!   last zxid (a server that has seen less refuses it) and its watches
//!   (replayed by the server); the session is either back (Connected, then
//!   the replayed events) or gone (Expired: the handle is dead);
//! * requests issued while disconnected wait for the next connection; the
//!   two [`Flavour`]s differ in how long;
//! * replies to submitted requests and events go into one stream
//!   ([`zoosim_client::Delivery`]) in the order the server sent them on the
//!   connection (a notification fired by a write before the replies the
//!   server sends after it), with the failures the client decides itself
//!   (ConnectionLoss, SessionExpired) placed where it decides them, before
//!   the Disconnected, Expired or Closed that follows.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::oneshot;
use futures::StreamExt;
use madsim::rand::seq::SliceRandom;
use madsim::rand::Rng;
use madsim::task::NodeId;
use madsim::time::{sleep, timeout};
use tokio::sync::Notify;

use super::net::{Datagram, Inbox, Socket};
use super::{client_addr, lock, now_ms, Network, Outbox, Reorder, Wire};
use crate::msg::{ClientMsg, ConnId, ServerId, ServerMsg, WatchLists};
use zoosim_client::{wait_for, Deliveries, Delivery, Ticket, Zk};
use zoosim_core::history::Recorder;
use zoosim_core::history::{Actor, HistOp, OpId, Outcome};
use zoosim_core::path::validate_op;
use zoosim_core::proto::{
    ClientEvent, EventType, Op, Reply, SessionEvent, SessionId, WatchEvent, ZkError, Zxid,
};

/// Which real client's behaviour to reproduce; recipes must pass under both.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Flavour {
    /// The Java client: read timeout 2T/3; requests issued while
    /// disconnected go out after the next handshake, or fail with
    /// ConnectionLoss if the attempt in progress fails; it never expires a
    /// session itself and learns Expired when it reconnects.
    Java,
    /// The zookeeper-client crate, as pinned by tests/real_client.rs:
    /// silence of 2T/5 breaks the connection; requests issued while
    /// disconnected are held across attempts until the session is back;
    /// 7T/5 after it last heard from a server it expires the session
    /// itself, failing them with SessionExpired.
    Rust,
}

impl Flavour {
    fn read_timeout_ms(self, t: u64) -> i64 {
        match self {
            Flavour::Java => (2 * t / 3) as i64,
            Flavour::Rust => (2 * t / 5) as i64,
        }
    }
}

pub(crate) struct ClientSetup {
    pub net: Arc<Network>,
    pub n: u32,
    pub node: NodeId,
    /// In the order to try them.
    pub servers: Vec<SocketAddr>,
    pub timeout_ms: u64,
    pub flavour: Flavour,
    /// The scenario's client number this handle belongs to, if any.
    pub client: Option<u32>,
    pub recorder: Option<Recorder>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Connecting,
    Connected { conn: ConnId, server: SocketAddr },
    Closed,
    Expired,
}

/// How a connection attempt ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Attempted {
    Connected,
    Expired,
    Failed,
}

/// What a read armed, registered when its reply arrives (ZKWatchManager).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Arm {
    Exists,
    Data,
    Child,
}

/// Where a request's reply goes.
enum Route {
    /// To the [`Zk::call`] awaiting it (which may have given up).
    Call(oneshot::Sender<Result<Reply, ZkError>>),
    /// Into the ordered stream, under its [`Zk::submit`] ticket.
    Stream(Ticket),
}

impl Route {
    fn answer(self, stream: &mut Deliveries, result: Result<Reply, ZkError>) {
        match self {
            // The caller may have given up (dropped its future).
            Route::Call(tx) => {
                let _ = tx.send(result);
            }
            Route::Stream(ticket) => stream.reply(ticket, result),
        }
    }
}

struct Waiter {
    to: Route,
    arm: Option<(Arm, String)>,
    /// The request's invocation in the history, when recording.
    op: Option<OpId>,
}

/// The client's watch tables, by path (data, exist, child).
#[derive(Default)]
struct Watches {
    data: BTreeSet<String>,
    exist: BTreeSet<String>,
    child: BTreeSet<String>,
}

impl Watches {
    /// Consumes the watches an event fires; false if none did (the event is
    /// then dropped, as the Java client's materialize() finds no watcher).
    fn fire(&mut self, e: &WatchEvent) -> bool {
        let p = &e.path;
        match e.event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                self.data.remove(p) | self.exist.remove(p)
            }
            EventType::NodeChildrenChanged => self.child.remove(p),
            EventType::NodeDeleted => {
                self.data.remove(p) | self.exist.remove(p) | self.child.remove(p)
            }
        }
    }

    fn lists(&self) -> WatchLists {
        WatchLists {
            data: self.data.iter().cloned().collect(),
            exist: self.exist.iter().cloned().collect(),
            child: self.child.iter().cloned().collect(),
        }
    }
}

struct State {
    net: Arc<Network>,
    outbox: Outbox,
    setup_servers: Vec<SocketAddr>,
    flavour: Flavour,
    n: u32,
    phase: Phase,
    session: Option<SessionId>,
    timeout_ms: u64,
    conns_made: u64,
    /// The connection being set up, and who waits for its outcome.
    attempt: Option<(ConnId, SocketAddr, oneshot::Sender<Attempted>)>,
    reorder: Reorder,
    seq: u64,
    next_xid: i64,
    /// Sent on the current connection, unanswered.
    waiting: BTreeMap<i64, Waiter>,
    /// Issued while not connected.
    held: VecDeque<(i64, Op, Waiter)>,
    /// Replies to submitted requests and events, in the order they came
    /// off the connection (or, for failures no server sent, in the order
    /// the client decided them).
    stream: Deliveries,
    last_state: Option<SessionEvent>,
    watches: Watches,
    last_zxid: Zxid,
    last_reply_xid: i64,
    last_heard_ms: i64,
    last_sent_ms: i64,
    closing: Option<oneshot::Sender<()>>,
    /// The close under way's invocation in the history, when recording.
    closing_op: Option<OpId>,
    actor: Actor,
    recorder: Option<Recorder>,
}

fn outcome(result: &Result<Reply, ZkError>) -> Outcome {
    match result {
        Ok(r) => Outcome::Ok(Some(r.clone())),
        Err(e) => Outcome::Err(*e),
    }
}

impl State {
    /// The server of the current connection, if connected.
    fn server(&self) -> Option<ServerId> {
        match self.phase {
            Phase::Connected { server, .. } => super::server_of(server),
            _ => None,
        }
    }

    /// Fails a request with an error no server sent; records it.
    fn fail(&mut self, w: Waiter, e: ZkError) {
        if let (Some(r), Some(id)) = (&self.recorder, w.op) {
            r.complete(id, None, None, Outcome::Err(e));
        }
        w.to.answer(&mut self.stream, Err(e));
    }

    /// How the trace names this client: by its scenario client number
    /// when it has one (the number the fault schedule and the outcome log
    /// use), else by its node; and its session once it has one.
    fn who(&self) -> String {
        let client = match self.actor.client {
            Some(c) => format!("client {c}"),
            None => format!("client-{}", self.n),
        };
        match self.session {
            Some(s) => format!("{client} session {s}"),
            None => client,
        }
    }

    fn state_event(&mut self, e: SessionEvent) {
        // The same state is never reported twice in a row (CC:504-519).
        if self.last_state != Some(e) {
            tracing::info!(target: "zoosim::client", "{} {e:?}", self.who());
            if let Some(r) = &self.recorder {
                let server = (e == SessionEvent::Connected)
                    .then(|| self.server())
                    .flatten();
                r.session(self.actor, self.session, e, server);
            }
            self.last_state = Some(e);
            self.stream.event(ClientEvent::Session(e));
        }
    }

    fn send_on(&mut self, socket: Socket, conn: ConnId, to: SocketAddr, msg: ClientMsg) {
        let seq = self.seq;
        self.seq += 1;
        self.last_sent_ms = now_ms();
        self.net
            .send(&self.outbox, socket, to, Wire::Client { conn, seq, msg });
    }

    /// The handle is dead (expired or closed): every waiting and held
    /// request fails with SessionExpired, as the Java client fails its
    /// queued packets.
    fn end(&mut self, phase: Phase, event: SessionEvent) {
        self.phase = phase;
        self.attempt = None;
        for (_, w) in std::mem::take(&mut self.waiting) {
            self.fail(w, ZkError::SessionExpired);
        }
        for (_, _, w) in std::mem::take(&mut self.held) {
            self.fail(w, ZkError::SessionExpired);
        }
        self.watches = Watches::default();
        self.state_event(event);
    }

    fn expire(&mut self) {
        self.end(Phase::Expired, SessionEvent::Expired);
    }

    /// The connection broke: in-flight requests fail with ConnectionLoss
    /// (BTreeMap order is issue order), then Disconnected.
    fn disconnect(&mut self, socket: Socket) {
        let Phase::Connected { conn, server } = self.phase else {
            return;
        };
        // A best-effort socket close, so the server drops its side.
        self.send_on(socket, conn, server, ClientMsg::Disconnect);
        self.phase = Phase::Connecting;
        if self.closing.take().is_some() {
            // close() was under way: it fails (ConnectionLoss) and the
            // handle is closed anyway; the session lives until it expires.
            self.phase = Phase::Closed;
            if let (Some(r), Some(id)) = (&self.recorder, self.closing_op.take()) {
                r.complete(id, None, None, Outcome::Err(ZkError::ConnectionLoss));
            }
        }
        for (_, w) in std::mem::take(&mut self.waiting) {
            self.fail(w, ZkError::ConnectionLoss);
        }
        self.state_event(SessionEvent::Disconnected);
    }
}

/// The simulated client (see the module docs).
pub struct SimZk {
    node: NodeId,
    socket: Socket,
    session: SessionId,
    timeout_ms: u64,
    state: Arc<Mutex<State>>,
    actor: Actor,
    recorder: Option<Recorder>,
    /// Wakes whoever waits on the stream (`next_event`, `next_delivery`).
    events: Arc<Notify>,
    /// Wakes the connector when the connection breaks.
    broken: Arc<Notify>,
}

impl SimZk {
    pub(crate) async fn connect(setup: ClientSetup) -> Result<SimZk, ZkError> {
        let (socket, inbox) = setup.net.bind(client_addr(setup.n));
        let state = Arc::new(Mutex::new(State {
            net: setup.net,
            outbox: Outbox::start(),
            setup_servers: setup.servers,
            flavour: setup.flavour,
            n: setup.n,
            phase: Phase::Connecting,
            session: None,
            timeout_ms: setup.timeout_ms,
            conns_made: 0,
            attempt: None,
            reorder: Reorder::default(),
            seq: 0,
            next_xid: 1,
            waiting: BTreeMap::new(),
            held: VecDeque::new(),
            stream: Deliveries::default(),
            last_state: None,
            watches: Watches::default(),
            last_zxid: 0,
            last_reply_xid: 0,
            last_heard_ms: now_ms(),
            last_sent_ms: now_ms(),
            closing: None,
            closing_op: None,
            actor: Actor {
                client: setup.client,
                handle: setup.n,
            },
            recorder: setup.recorder.clone(),
        }));
        let events = Arc::new(Notify::new());
        let broken = Arc::new(Notify::new());
        madsim::task::spawn(receive(
            socket,
            inbox,
            state.clone(),
            events.clone(),
            broken.clone(),
        ));
        // The first session: rounds over the servers, a second apart, for
        // up to the session timeout (a real client keeps trying; a caller
        // of this constructor wants an answer).
        let servers = lock(&state).setup_servers.clone();
        let give_up = now_ms() + setup.timeout_ms as i64;
        'rounds: loop {
            for &server in &servers {
                if attempt(socket, &state, server).await == Attempted::Connected {
                    break 'rounds;
                }
            }
            if now_ms() >= give_up {
                return Err(ZkError::ConnectionLoss);
            }
            sleep(Duration::from_secs(1)).await;
        }
        let (session, timeout_ms) = {
            let st = lock(&state);
            (st.session.expect("connected"), st.timeout_ms)
        };
        madsim::task::spawn(keep_alive(
            socket,
            state.clone(),
            events.clone(),
            broken.clone(),
        ));
        madsim::task::spawn(reconnect(
            socket,
            state.clone(),
            events.clone(),
            broken.clone(),
        ));
        Ok(SimZk {
            node: setup.node,
            socket,
            session,
            timeout_ms,
            state,
            actor: Actor {
                client: setup.client,
                handle: setup.n,
            },
            recorder: setup.recorder,
            events,
            broken,
        })
    }

    /// The client's node (for faults).
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The client's network address (for link faults).
    pub fn addr(&self) -> SocketAddr {
        self.socket.addr()
    }

    /// How the trace names this client (its scenario client number and
    /// session), for the faults aimed at it.
    pub(crate) fn who(&self) -> String {
        lock(&self.state).who()
    }

    /// The largest zxid this client has seen in a reply.
    pub fn last_zxid(&self) -> Zxid {
        lock(&self.state).last_zxid
    }

    /// The server of the current connection, if connected.
    pub fn current_server(&self) -> Option<crate::msg::ServerId> {
        match lock(&self.state).phase {
            Phase::Connected { server, .. } => super::server_of(server),
            _ => None,
        }
    }

    /// Whether a connection is up now.
    pub fn is_connected(&self) -> bool {
        matches!(lock(&self.state).phase, Phase::Connected { .. })
    }

    /// Fault: the connection breaks now, as if the server's socket closed
    /// (the client reconnects elsewhere).
    pub fn break_connection(&self) {
        let mut st = lock(&self.state);
        tracing::info!(target: "zoosim::fault", "break the connection of {}", st.who());
        st.disconnect(self.socket);
        drop(st);
        self.events.notify_waiters();
        self.broken.notify_one();
    }

    /// Sends `op` now on the current connection, or holds it until the
    /// next one; a request that needs no server (a bad path, an empty
    /// multi, a dead handle) is answered at once, through `to`.
    fn issue(&self, op: Op, to: Route) {
        let mut st = lock(&self.state);
        let ended = match st.phase {
            Phase::Closed | Phase::Expired => true,
            _ => st.closing.is_some(),
        };
        let local = match validate_op(&op) {
            Err(e) => Some(Err(e)),
            Ok(()) if matches!(&op, Op::Multi(ops) if ops.is_empty()) => {
                Some(Ok(Reply::Multi(Vec::new())))
            }
            Ok(()) if ended => Some(Err(ZkError::SessionExpired)),
            Ok(()) => None,
        };
        if let Some(result) = local {
            // A call that ends here, without a request, is recorded here.
            if let Some(r) = &self.recorder {
                let outcome = match &result {
                    Ok(reply) => Outcome::Ok(Some(reply.clone())),
                    Err(e) => Outcome::Err(*e),
                };
                r.local(
                    self.actor,
                    Some(self.session),
                    HistOp::Zk(op.clone()),
                    outcome,
                );
            }
            to.answer(&mut st.stream, result);
            drop(st);
            self.events.notify_waiters();
            return;
        }
        let arm = match &op {
            Op::Exists { path, watch: true } => Some((Arm::Exists, path.clone())),
            Op::GetData { path, watch: true } => Some((Arm::Data, path.clone())),
            Op::GetChildren { path, watch: true } => Some((Arm::Child, path.clone())),
            _ => None,
        };
        let xid = st.next_xid;
        st.next_xid += 1;
        tracing::debug!(target: "zoosim::client", "{} request {xid}: {op:?}", st.who());
        let rec = self.recorder.as_ref().map(|r| {
            r.invoke(
                self.actor,
                Some(self.session),
                Some(xid),
                HistOp::Zk(op.clone()),
            )
        });
        let w = Waiter { to, arm, op: rec };
        match st.phase {
            Phase::Connected { conn, server } => {
                st.waiting.insert(xid, w);
                st.send_on(self.socket, conn, server, ClientMsg::Request { xid, op });
            }
            _ => st.held.push_back((xid, op, w)),
        }
    }
}

/// One connection attempt: Connect, then wait for the outcome within the
/// connect timeout (T / number of servers).
async fn attempt(socket: Socket, state: &Arc<Mutex<State>>, server: SocketAddr) -> Attempted {
    let (rx, wait) = {
        let mut st = lock(state);
        super::budget::note(super::budget::Event::Connect);
        st.conns_made += 1;
        let conn = ConnId::from(st.n) << 32 | st.conns_made;
        let (tx, rx) = oneshot::channel();
        st.attempt = Some((conn, server, tx));
        st.reorder = Reorder::default();
        st.seq = 0;
        let connect = ClientMsg::Connect {
            session: st.session,
            last_zxid: st.last_zxid,
            timeout_ms: st.timeout_ms,
            watches: st.watches.lists(),
        };
        tracing::debug!(target: "zoosim::client", "{} connecting to {server}", st.who());
        st.send_on(socket, conn, server, connect);
        let wait = st.timeout_ms / st.setup_servers.len() as u64;
        (rx, Duration::from_millis(wait.max(1)))
    };
    let outcome = match timeout(wait, rx).await {
        Ok(Ok(outcome)) => outcome,
        _ => Attempted::Failed,
    };
    if outcome == Attempted::Failed {
        let mut st = lock(state);
        if let Some((conn, server, _)) = st.attempt.take() {
            st.send_on(socket, conn, server, ClientMsg::Disconnect);
        }
    }
    outcome
}

/// Reconnects after every break until the session ends.
async fn reconnect(
    socket: Socket,
    state: Arc<Mutex<State>>,
    events: Arc<Notify>,
    broken: Arc<Notify>,
) {
    let mut next = 0;
    loop {
        broken.notified().await;
        let servers = lock(&state).setup_servers.clone();
        'round: loop {
            for _ in 0..servers.len() {
                // The Java client sleeps 0-1 s before every connection
                // attempt but its first (ClientCnxn.SendThread.startConnect),
                // so that clients of a failed server do not all reconnect
                // in the same instant.
                if lock(&state).flavour == Flavour::Java {
                    let ms = madsim::rand::thread_rng().gen_range(0..1000);
                    sleep(Duration::from_millis(ms)).await;
                }
                {
                    let mut st = lock(&state);
                    match st.phase {
                        Phase::Closed | Phase::Expired => return,
                        Phase::Connected { .. } => break 'round,
                        Phase::Connecting => {}
                    }
                    if st.flavour == Flavour::Rust
                        && now_ms() - st.last_heard_ms > (7 * st.timeout_ms / 5) as i64
                    {
                        st.expire();
                        drop(st);
                        events.notify_waiters();
                        return;
                    }
                }
                next = (next + 1) % servers.len();
                let outcome = attempt(socket, &state, servers[next]).await;
                if outcome == Attempted::Failed {
                    let mut st = lock(&state);
                    if st.flavour == Flavour::Java {
                        // Requests queued for this attempt fail with it.
                        for (_, _, w) in std::mem::take(&mut st.held) {
                            st.fail(w, ZkError::ConnectionLoss);
                        }
                    }
                }
                events.notify_waiters();
                match outcome {
                    Attempted::Connected => break 'round,
                    Attempted::Expired => return,
                    Attempted::Failed => {}
                }
            }
            // A full round failed: back off about a second.
            sleep(Duration::from_secs(1)).await;
        }
    }
}

/// Pings while idle and breaks a connection that stays silent too long.
async fn keep_alive(
    socket: Socket,
    state: Arc<Mutex<State>>,
    events: Arc<Notify>,
    broken: Arc<Notify>,
) {
    let t = lock(&state).timeout_ms;
    loop {
        sleep(Duration::from_millis((t / 10).max(1))).await;
        let mut st = lock(&state);
        let Phase::Connected { conn, server } = st.phase else {
            if matches!(st.phase, Phase::Closed | Phase::Expired) {
                return;
            }
            continue;
        };
        let now = now_ms();
        if now - st.last_heard_ms > st.flavour.read_timeout_ms(t) {
            tracing::debug!(target: "zoosim::client", "{} heard nothing from server {} for {} ms: read timeout", st.who(), server, now - st.last_heard_ms);
            st.disconnect(socket);
            drop(st);
            events.notify_waiters();
            broken.notify_one();
            continue;
        }
        if now - st.last_sent_ms >= (t / 3) as i64 {
            st.send_on(socket, conn, server, ClientMsg::Ping);
        }
    }
}

/// Every datagram to this client, routed by connection: the attempt's
/// answers, the current connection's replies and events; anything for a
/// connection given up is dropped.
async fn receive(
    socket: Socket,
    mut inbox: Inbox,
    state: Arc<Mutex<State>>,
    events: Arc<Notify>,
    broken: Arc<Notify>,
) {
    while let Some(Datagram { from, wires }) = inbox.next().await {
        let mut st = lock(&state);
        for wire in wires {
            if let Wire::Reset { conn } = wire {
                on_reset(socket, &mut st, conn, &broken);
                continue;
            }
            let Wire::Server { conn, .. } = &wire else {
                panic!("a client received a non-server message from {from}");
            };
            let conn = *conn;
            st.net.note_delivered();
            let current = match st.phase {
                Phase::Connected { conn: c, .. } => c == conn,
                _ => false,
            };
            let attempting = st.attempt.as_ref().is_some_and(|(c, _, _)| *c == conn);
            if !current && !attempting {
                continue; // a connection this client gave up
            }
            for wire in st.reorder.accept(wire) {
                let Wire::Server { msg, .. } = wire else {
                    unreachable!("checked above")
                };
                // Only a session's server counts as heard from: a refusal at
                // connect confirms nothing.
                if current || matches!(msg, ServerMsg::Connected { .. }) {
                    st.last_heard_ms = now_ms();
                }
                on_message(socket, &mut st, conn, msg, &broken);
            }
        }
        drop(st);
        events.notify_waiters();
    }
}

/// The server's process died and its operating system reset connection
/// `conn`: the connection (or the attempt) fails now, whatever replies it
/// still carried are lost, and the client reconnects elsewhere.
fn on_reset(socket: Socket, st: &mut State, conn: ConnId, broken: &Notify) {
    match st.phase {
        Phase::Connected { conn: c, .. } if c == conn => {
            tracing::debug!(target: "zoosim::client", "{} connection reset", st.who());
            st.net.note_reset();
            st.disconnect(socket);
            broken.notify_one();
        }
        _ => {
            if st.attempt.as_ref().is_some_and(|(c, _, _)| *c == conn) {
                st.net.note_reset();
                let (_, _, tx) = st.attempt.take().expect("checked");
                let _ = tx.send(Attempted::Failed);
            }
        }
    }
}

fn on_message(socket: Socket, st: &mut State, conn: ConnId, msg: ServerMsg, broken: &Notify) {
    match msg {
        ServerMsg::Connected {
            session,
            timeout_ms,
        } => {
            let (c, server, tx) = st.attempt.take().expect("Connected answers an attempt");
            assert_eq!(c, conn);
            if let Some(s) = st.session {
                assert_eq!(s, session, "re-attached to another session");
            }
            st.session = Some(session);
            st.timeout_ms = timeout_ms;
            st.phase = Phase::Connected { conn, server };
            st.state_event(SessionEvent::Connected);
            // Requests issued meanwhile go out behind the handshake.
            for (xid, op, w) in std::mem::take(&mut st.held) {
                st.waiting.insert(xid, w);
                st.send_on(socket, conn, server, ClientMsg::Request { xid, op });
            }
            let _ = tx.send(Attempted::Connected);
        }
        ServerMsg::Expired => {
            let (_, _, tx) = st.attempt.take().expect("Expired answers an attempt");
            st.expire();
            let _ = tx.send(Attempted::Expired);
        }
        ServerMsg::ConnectionClosed => {
            if let Some((_, _, tx)) = st.attempt.take() {
                let _ = tx.send(Attempted::Failed);
            } else {
                tracing::debug!(target: "zoosim::client", "{} connection closed by the server", st.who());
                st.disconnect(socket);
                broken.notify_one();
            }
        }
        ServerMsg::Reply { xid, zxid, result } => {
            assert!(zxid >= st.last_zxid, "a server's zxid went backwards");
            assert!(xid > st.last_reply_xid, "reply {xid} out of issue order");
            st.last_zxid = zxid;
            st.last_reply_xid = xid;
            tracing::debug!(target: "zoosim::client", "{} reply {xid} at {zxid:#x}: {result:?}", st.who());
            let w = st
                .waiting
                .remove(&xid)
                .unwrap_or_else(|| panic!("reply to unknown xid {xid}"));
            // The watch is registered before the caller sees the reply.
            if let (Some((arm, path)), Ok(reply)) = (&w.arm, &result) {
                let table = match (arm, reply) {
                    (Arm::Exists, Reply::Exists(None)) => &mut st.watches.exist,
                    (Arm::Exists | Arm::Data, _) => &mut st.watches.data,
                    (Arm::Child, _) => &mut st.watches.child,
                };
                table.insert(path.clone());
            }
            // A real server lists children in HashSet order: a seeded
            // shuffle catches callers that assume sorted names
            // (docs/ZOOKEEPER.md, "Child order").
            let mut result = result;
            if let Ok(Reply::GetChildren { children, .. }) = &mut result {
                children.shuffle(&mut madsim::rand::thread_rng());
            }
            if let (Some(r), Some(id)) = (&st.recorder, w.op) {
                r.complete(id, st.server(), Some(zxid), outcome(&result));
            }
            w.to.answer(&mut st.stream, result);
        }
        ServerMsg::Watch(event) => {
            tracing::debug!(target: "zoosim::client", "{} watch event {:?} {}", st.who(), event.event_type, event.path);
            if st.watches.fire(&event) {
                if let Some(r) = &st.recorder {
                    r.watch(st.actor, st.session, st.server(), event.clone());
                }
                st.stream.event(ClientEvent::Watch(event));
            }
        }
        ServerMsg::Closed => {
            if let (Some(r), Some(id)) = (&st.recorder, st.closing_op.take()) {
                r.complete(id, st.server(), None, Outcome::Ok(None));
            }
            st.phase = Phase::Closed;
            st.state_event(SessionEvent::Closed);
            if let Some(tx) = st.closing.take() {
                let _ = tx.send(());
            }
        }
        ServerMsg::Pong => {}
    }
}

impl Zk for SimZk {
    fn session_id(&self) -> SessionId {
        self.session
    }

    fn session_timeout_ms(&self) -> u64 {
        self.timeout_ms
    }

    fn call(&self, op: Op) -> impl Future<Output = Result<Reply, ZkError>> + Send {
        let (tx, rx) = oneshot::channel();
        self.issue(op, Route::Call(tx));
        async move { rx.await.unwrap_or(Err(ZkError::ConnectionLoss)) }
    }

    fn submit(&self, op: Op) -> Ticket {
        let ticket = lock(&self.state).stream.ticket();
        self.issue(op, Route::Stream(ticket));
        ticket
    }

    async fn next_delivery(&self) -> Delivery {
        wait_for(&self.events, || self.try_next_delivery()).await
    }

    fn try_next_delivery(&self) -> Option<Delivery> {
        lock(&self.state).stream.pop()
    }

    async fn next_event(&self) -> ClientEvent {
        wait_for(&self.events, || self.try_next_event()).await
    }

    fn try_next_event(&self) -> Option<ClientEvent> {
        lock(&self.state).stream.pop_event()
    }

    fn close(&self) -> impl Future<Output = Result<(), ZkError>> + Send {
        let mut st = lock(&self.state);
        let rec = self
            .recorder
            .as_ref()
            .map(|r| r.invoke(self.actor, Some(self.session), None, HistOp::CloseSession));
        let rx = match st.phase {
            Phase::Connected { conn, server } if st.closing.is_none() => {
                let (tx, rx) = oneshot::channel();
                st.closing = Some(tx);
                st.closing_op = rec;
                st.send_on(self.socket, conn, server, ClientMsg::Close);
                Some(rx)
            }
            Phase::Connecting => {
                // Disconnected: the close cannot be sent; the session lives
                // on until it times out (docs/ZOOKEEPER.md, "Sessions and
                // expiry").
                st.end(Phase::Closed, SessionEvent::Closed);
                None
            }
            // Closing or closed already: a no-op.
            _ => None,
        };
        if rx.is_none() {
            // Ended here: ok, with no server (the session may live on).
            if let (Some(r), Some(id)) = (&self.recorder, rec) {
                r.complete(id, None, None, Outcome::Ok(None));
            }
        }
        drop(st);
        // Ending here put failures and Closed in the stream.
        self.events.notify_waiters();
        async move {
            if let Some(rx) = rx {
                rx.await.map_err(|_| ZkError::ConnectionLoss)?;
            }
            Ok(())
        }
    }
}
