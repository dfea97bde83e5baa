//! [`RealZk`]: the [`Zk`] contract over the `zookeeper-client` crate (0.11,
//! tokio), for running recipes against a real ZooKeeper.
//!
//! # Watches: one event per server event, as Java's default watcher
//!
//! The crate hands out one `OneshotWatcher` per watching read, and a server
//! notification fires every armed crate watcher on its path that is
//! interested in it (one dispatch, in the crate's session task). Java calls
//! its default watcher once per notification however many reads armed it
//! (docs/ZOOKEEPER.md, "Watch deduplication"), so `RealZk` keeps every
//! watcher it was given in a table (dropping one would remove the watch on
//! the server) and collapses
//! the firings of one dispatch into one [`WatchEvent`].
//!
//! Deciding that two firings with the same type and path came from one
//! dispatch: they did exactly when both watchers were armed before the
//! earlier firing (a dispatch fires every interested armed watcher). Arming
//! and firing happen in the crate's task, out of our sight, so `RealZk`
//! decides from what the arming reads saw (the *witness*):
//!
//! * a request sent after a poll that had already delivered the dispatch
//!   cannot have joined it;
//! * otherwise, for NodeDataChanged the two reads saw the same
//!   `(czxid, mzxid)`, for NodeChildrenChanged the same
//!   `(czxid, cversion, pzxid)`, for NodeDeleted the same `czxid`. This is
//!   exact: a change between the two reads would have fired the first
//!   watcher before the second read's reply (the server sends a connection's
//!   notifications before its later replies, and replays missed changes on
//!   reconnect before any new request), so that watcher could not share a
//!   dispatch with the second one.
//! * NodeCreated fires only exist watches, armed by `exists` on a missing
//!   node, which carry no zxid. Two of them are taken as one dispatch. The
//!   one case this gets wrong: the node was created and deleted between the
//!   two reads, no poll saw that creation before the second read was sent,
//!   and it was created again before a poll: the two creations then give
//!   one NodeCreated.
//!
//! # The stream: what order `RealZk` delivers, and where it can differ
//!
//! The crate's request methods queue their request for its session task
//! when they are called, not when their future is polled ("ordered at
//! future creation time"; `Client::create` and the others call
//! `send_request` before returning the future). [`Zk::submit`] therefore
//! starts the request before it returns (`RealZk::start`), and requests go out in
//! submission order. What comes back is a future per request and a
//! channel per watcher, so the wire order of replies and notifications is
//! not observable; the stream is built by polls (`poll_all`,
//! run by every `try_next_*`/`next_*` and after every call), each of
//! which:
//!
//! 1. looks at the watchers and the session state first,
//! 2. then takes the submitted requests' replies, in submission order, up
//!    to the first still in flight (FIFO, even for a request the crate
//!    refuses without a round trip),
//! 3. and queues: the replies, then the watch events (in the batch order
//!    below), then the session events.
//!
//! The crate completes a request before it dispatches a notification that
//! follows it on the wire (one task, in stream order), so any reply the
//! server sent before an event found in step 1 is found in step 2: **an
//! event is never delivered before a reply the server sent earlier.** It
//! may be delivered later than its place: after replies the server sent
//! after it, when they were already in by the poll that found it. The
//! exceptions and additions:
//!
//! * a `Connected` that ends an outage is queued *before* the replies of
//!   its poll (the crate publishes it before it sends what was queued in
//!   the outage, so those replies follow it); a `Disconnected` and an
//!   `Expired` are queued after them (the requests they fail are failed
//!   after the state is published: if some are not failed yet, their
//!   ConnectionLoss comes after the `Disconnected`). A flap missed
//!   between two polls (`Disconnected` put back, see below) is queued
//!   after the replies, so a reply from after the reconnect can then come
//!   before that `Connected`.
//! * on `Expired` or `Closed`, a submitted request still in flight fails
//!   with SessionExpired before the end event (the crate would fail it
//!   after); `close` does the same before it closes, so that nothing
//!   holds the crate's client.
//!
//! A [`Zk::call`]'s reply never enters the stream.
//!
//! # When events become visible, and in which order
//!
//! * **After a call.** Every call polls the table after its reply. The crate
//!   dispatches a notification before it handles any later reply (one task,
//!   in stream order), so when [`Zk::call`] returns, every watch event that
//!   preceded its reply is in the stream ([`Zk::try_next_event`] takes it).
//!   (A watch armed by a call still running in another task joins the table
//!   when that call returns, and its event becomes visible then.)
//! * **Batches.** Events that become visible in the same poll are delivered
//!   in a fixed order: by path, a node's own events (NodeCreated,
//!   NodeDataChanged, NodeDeleted, in that order) before its descendants'
//!   events, and its NodeChildrenChanged after all of those. For a single
//!   write this is the server's order (the node's event, then the parent's
//!   NodeChildrenChanged); across writes the true order is unknowable here.
//!   The session events of a batch come after its watch events.
//! * **Session events** come from the crate's state watcher (a separate
//!   channel that keeps only the latest state), mapped as SyncConnected →
//!   Connected, Disconnected → Disconnected, Expired → Expired, Closed →
//!   Closed (AuthFailed, which this harness never provokes, → Expired).
//!   What is guaranteed:
//!   - the crate publishes Disconnected before it fails the pending
//!     requests, Expired before it fails any request with SessionExpired,
//!     and SyncConnected before it sends anything queued during the outage;
//!     so when a call returns ConnectionLoss because the connection broke,
//!     SessionExpired, or a success after a reconnect, the matching session
//!     event is already in the stream;
//!   - Connected and Disconnected alternate: if the state changed twice
//!     between polls (only the latest is kept), the missed one is put back;
//!     faster flapping than that is collapsed to one pair;
//!   - no event is given for the initial connection (`connect` returns once
//!     connected), and none after a terminal one (Expired or Closed);
//!   - watch events fired before a disconnect precede its Disconnected when
//!     they are seen in an earlier poll; within one batch the order is as
//!     above (watch events first), so an event replayed by the server on
//!     reconnect may come before the Disconnected/Connected pair of the same
//!     batch. Waiting in [`Zk::next_event`] polls at every change, which
//!     keeps batches to one change in practice.
//!
//! # Error mapping
//!
//! Server codes map one to one (the crate's `UnexpectedErrorCode(n)` through
//! [`ZkError::from_code`]). The crate's transport and decoding failures
//! (I/O errors, its connection timeouts, a reply it cannot decode or
//! match) become ConnectionLoss: the request's outcome is unknown, as after
//! a Java ConnectionLoss. `ClientClosed` becomes SessionExpired, as a Java
//! handle answers after `close()`. See [`map_error`] for the full table and
//! what is lost.
//!
//! # Where the crate answers differently from a Java client
//!
//! * `create` and `delete` of `/`, in a multi or not, are refused by the
//!   crate with BadArguments without a round trip (a Java client sends them
//!   and the server answers; inside a multi that is a per-op result).
//! * A TTL of 0 or beyond 2^40-1 ms is refused by the crate with
//!   BadArguments (the Java client throws IllegalArgumentException).
//! * A multi's create result: a 3.8.0 server answers a plain create without
//!   a Stat (ZOOKEEPER-4026, fixed in 3.8.2); the crate then reports an
//!   invalid Stat (zxids and versions -1), which `RealZk` turns into
//!   `stat: None`, as the tree answers.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::task::ArcWake;
use zookeeper_client as zk;

use super::{Deliveries, Delivery, Ticket, Zk};
use zoosim_core::history::{Actor, HistOp, OpId, Outcome, Recorder, ServerNo};
use zoosim_core::path::validate_op;
use zoosim_core::proto::{
    ClientEvent, CreateMode, EventType, MultiOp, MultiResult, Op, Reply, SessionEvent, SessionId,
    Stat, WatchEvent, ZkError,
};

type WatchFuture = Pin<Box<dyn Future<Output = zk::WatchedEvent> + Send>>;
type StateFuture = Pin<Box<dyn Future<Output = (zk::StateWatcher, zk::SessionState)> + Send>>;
type ReplyFuture = Pin<Box<dyn Future<Output = Result<Reply, ZkError>> + Send>>;

/// A session on a real ZooKeeper through the `zookeeper-client` crate.
///
/// Use it inside a tokio runtime with the time driver (the crate spawns its
/// session task there; `close` bounds its wait with a tokio timer); any
/// flavour works. See the module docs for how watch and session events are
/// delivered.
pub struct RealZk {
    /// `None` once closed: every later call fails with SessionExpired.
    client: Mutex<Option<zk::Client>>,
    session_id: SessionId,
    session_timeout_ms: u64,
    /// Submitted requests in flight. Its lock is held for a whole poll
    /// (`poll_all`) and is always taken before `inner`'s.
    pipeline: Mutex<Pipeline>,
    inner: Arc<Mutex<Inner>>,
    /// Polls use this waker, so whoever waits in `next_event` is woken by
    /// any watcher or state change, whoever polled last.
    waker: Waker,
    waiters: Arc<Waiters>,
}

impl std::fmt::Debug for RealZk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealZk")
            .field("session_id", &self.session_id)
            .field("session_timeout_ms", &self.session_timeout_ms)
            .finish_non_exhaustive()
    }
}

impl RealZk {
    /// Connects and establishes a new session, requesting
    /// `session_timeout_ms` (the server clamps it; see
    /// [`Zk::session_timeout_ms`] for the negotiated value). Fails with
    /// ConnectionLoss if no session is established within about the
    /// requested timeout.
    pub async fn connect(connect_string: &str, session_timeout_ms: u64) -> Result<RealZk, ZkError> {
        let client = zk::Client::connector()
            .with_session_timeout(Duration::from_millis(session_timeout_ms))
            .connect(connect_string)
            .await
            .map_err(|e| map_error(&e))?;
        let session_id = SessionId(client.session_id().0);
        let negotiated = u64::try_from(client.session_timeout().as_millis()).unwrap_or(u64::MAX);
        let watcher = client.state_watcher();
        let current = watcher.peek_state();
        let waiters = Arc::new(Waiters::default());
        let mut inner = Inner {
            tick: 0,
            next_id: 0,
            paths: BTreeMap::new(),
            queue: Deliveries::default(),
            state: Some(state_future(watcher)),
            last_session: SessionEvent::Connected,
            terminal: false,
            rec: None,
        };
        // The state may already have moved on since the handshake.
        if current != zk::SessionState::SyncConnected {
            let mut sessions = Vec::new();
            inner.on_state(current, &mut sessions);
            for event in sessions {
                inner.queue_event(ClientEvent::Session(event));
            }
        }
        Ok(RealZk {
            client: Mutex::new(Some(client)),
            session_id,
            session_timeout_ms: negotiated,
            pipeline: Mutex::new(Pipeline::default()),
            inner: Arc::new(Mutex::new(inner)),
            waker: futures::task::waker(waiters.clone()),
            waiters,
        })
    }

    /// Records this handle from now on into `recorder`, as `actor`'s
    /// (the session's Connected first): every request, reply, watch event
    /// and session event, in the order the handle delivers them, on the
    /// recorder's clock — but no watch events, and reads as if they set no
    /// watch: this client cannot see the wire order of notifications and
    /// replies, so the order it delivers them in is not the server's. `server` is the number recorded as the answering
    /// server's: the crate does not say which server of an ensemble
    /// answered, so record only a handle on a single server (0) when the
    /// history is to be checked. Reply headers' zxids are not recorded
    /// (the crate does not expose them).
    pub fn record(&self, recorder: Recorder, actor: Actor, server: ServerNo) {
        let mut inner = lock(&self.inner);
        recorder.session(
            actor,
            Some(self.session_id),
            SessionEvent::Connected,
            Some(server),
        );
        inner.rec = Some(Rec {
            recorder,
            actor,
            session: self.session_id,
            server,
            open: BTreeMap::new(),
        });
    }

    /// The recording of this handle's op, if recorded: its invocation, or
    /// (`refused`) an op that ended at once without a request.
    fn record_invoke(&self, op: &Op, refused: Option<&Result<Reply, ZkError>>) -> Option<OpId> {
        let inner = lock(&self.inner);
        let r = inner.rec.as_ref()?;
        match refused {
            None => Some(r.invoke(op)),
            Some(result) => {
                let outcome = match result {
                    Ok(reply) => Outcome::Ok(Some(reply.clone())),
                    Err(e) => Outcome::Err(*e),
                };
                r.local(HistOp::Zk(unwatched(op)), outcome);
                None
            }
        }
    }

    /// The client to send `op` on, and the answer it gets at once instead
    /// if it gets one: refused by validation, an empty multi, or a closed
    /// handle (SessionExpired).
    fn refused(&self, op: &Op) -> (Option<zk::Client>, Option<Result<Reply, ZkError>>) {
        let local = match validate_op(op) {
            Err(e) => Some(Err(e)),
            Ok(()) if matches!(op, Op::Multi(ops) if ops.is_empty()) => {
                Some(Ok(Reply::Multi(Vec::new())))
            }
            Ok(()) => None,
        };
        let client = self.current_client();
        let refused = match (local, &client) {
            (Some(result), _) => Some(result),
            (None, None) => Some(Err(ZkError::SessionExpired)),
            (None, Some(_)) => None,
        };
        (client, refused)
    }

    /// How many crate watchers are armed (kept alive) right now, after a
    /// poll. For tests: a fired or dropped watch leaves this table.
    pub fn armed_watchers(&self) -> usize {
        self.poll_all();
        let inner = lock(&self.inner);
        inner.paths.values().map(|p| p.armed.len()).sum()
    }

    fn current_client(&self) -> Option<zk::Client> {
        lock(&self.client).clone()
    }

    /// Takes whatever has fired, changed or been answered, without
    /// waiting, and queues it in the order the module docs give: replies
    /// in submission order, then the watch events, then the session
    /// events (a Connected that follows an outage before the replies).
    /// The watchers and the state are looked at *before* the replies, so
    /// that every reply the server sent before an event seen here is seen
    /// too (the crate completes a request before it dispatches a later
    /// notification): an event is never queued ahead of a reply it came
    /// after.
    fn poll_all(&self) {
        let mut pipeline = lock(&self.pipeline);
        let batch = lock(&self.inner).poll(&self.waker);
        let mut replies = Vec::new();
        let mut cx = Context::from_waker(&self.waker);
        // In order, up to the first still in flight: FIFO, even for a
        // request the crate refuses without a round trip.
        while let Some((ticket, fut)) = pipeline.waiting.front_mut() {
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(result) => {
                    replies.push((*ticket, result));
                    pipeline.waiting.pop_front();
                }
                Poll::Pending => break,
            }
        }
        let ended = batch
            .sessions
            .iter()
            .any(|e| matches!(e, SessionEvent::Expired | SessionEvent::Closed));
        if ended {
            // The crate fails them with SessionExpired once it has
            // published the end; say so before the end, as a Java client
            // fails its queued packets before the Expired event. (No lock
            // on `inner` is held here: a watching read's guard takes it
            // when its future is dropped.)
            for (ticket, _) in pipeline.waiting.drain(..) {
                replies.push((ticket, Err(ZkError::SessionExpired)));
            }
        }
        let mut inner = lock(&self.inner);
        let reconnected = batch.sessions.first() == Some(&SessionEvent::Connected);
        if reconnected {
            // Published before anything queued in the outage is sent.
            for &event in &batch.sessions {
                inner.queue_event(ClientEvent::Session(event));
            }
        }
        for (ticket, result) in replies {
            inner.queue_reply(ticket, result);
        }
        for event in batch.watches {
            inner.queue_event(ClientEvent::Watch(event));
        }
        if !reconnected {
            for event in batch.sessions {
                inner.queue_event(ClientEvent::Session(event));
            }
        }
    }

    /// Starts `op` on the crate and returns its reply future, the request
    /// already handed to the crate's session task: the crate's request
    /// methods queue their request when called, not when polled, and the
    /// one poll here runs [`run`] up to that call.
    fn start(&self, client: zk::Client, op: Op) -> ReplyFuture {
        let mut fut: ReplyFuture = Box::pin(run(self.inner.clone(), client, op));
        let mut cx = Context::from_waker(&self.waker);
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(result) => Box::pin(std::future::ready(result)),
            Poll::Pending => fut,
        }
    }
}

/// What a submitted request waits in.
#[derive(Default)]
struct Pipeline {
    next_ticket: u64,
    /// In submission order.
    waiting: VecDeque<(Ticket, ReplyFuture)>,
}

/// Registers a watching read before it is sent, so that a dispatch
/// record is kept while this read could still join it.
fn begin_watch(inner_arc: &Arc<Mutex<Inner>>, path: &str) -> InflightGuard {
    let mut inner = lock(inner_arc);
    let id = inner.next_id;
    inner.next_id += 1;
    let sent_tick = inner.tick;
    inner
        .paths
        .entry(path.to_owned())
        .or_default()
        .inflight
        .push(Inflight { id, sent_tick });
    InflightGuard {
        inner: inner_arc.clone(),
        path: path.to_owned(),
        id,
        sent_tick,
        done: false,
    }
}

fn arm(mut guard: InflightGuard, witness: Witness, watcher: zk::OneshotWatcher) {
    guard.done = true;
    let mut inner = lock(&guard.inner);
    let terminal = inner.terminal;
    let watches = inner.paths.entry(guard.path.clone()).or_default();
    watches.inflight.retain(|f| f.id != guard.id);
    if !terminal {
        watches.armed.push(Armed {
            sent_tick: guard.sent_tick,
            witness,
            fut: Box::pin(watcher.changed()),
        });
    } else if watches.is_empty() {
        inner.paths.remove(&guard.path);
    }
}

/// One request on the crate. Owns what it uses, so that a submitted one
/// can wait in the pipeline.
async fn run(inner: Arc<Mutex<Inner>>, client: zk::Client, op: Op) -> Result<Reply, ZkError> {
    match op {
        Op::Create { path, data, mode } => {
            let options = create_options(mode)?;
            let (stat, sequence) = client
                .create(&path, &data, &options)
                .await
                .map_err(|e| map_error(&e))?;
            let path = if mode.is_sequential() {
                format!("{path}{sequence}")
            } else {
                path
            };
            Ok(Reply::Create {
                path,
                stat: convert_stat(&stat),
            })
        }
        Op::Delete { path, version } => {
            client
                .delete(&path, Some(version))
                .await
                .map_err(|e| map_error(&e))?;
            Ok(Reply::Delete)
        }
        Op::Exists { path, watch: false } => {
            let stat = client.check_stat(&path).await.map_err(|e| map_error(&e))?;
            Ok(Reply::Exists(stat.as_ref().map(convert_stat)))
        }
        Op::Exists { path, watch: true } => {
            let guard = begin_watch(&inner, &path);
            let (stat, watcher) = client
                .check_and_watch_stat(&path)
                .await
                .map_err(|e| map_error(&e))?;
            arm(guard, Witness::of(stat.as_ref()), watcher);
            Ok(Reply::Exists(stat.as_ref().map(convert_stat)))
        }
        Op::GetData { path, watch: false } => {
            let (data, stat) = client.get_data(&path).await.map_err(|e| map_error(&e))?;
            Ok(Reply::GetData {
                data,
                stat: convert_stat(&stat),
            })
        }
        Op::GetData { path, watch: true } => {
            let guard = begin_watch(&inner, &path);
            let (data, stat, watcher) = client
                .get_and_watch_data(&path)
                .await
                .map_err(|e| map_error(&e))?;
            arm(guard, Witness::of(Some(&stat)), watcher);
            Ok(Reply::GetData {
                data,
                stat: convert_stat(&stat),
            })
        }
        Op::SetData {
            path,
            data,
            version,
        } => {
            let stat = client
                .set_data(&path, &data, Some(version))
                .await
                .map_err(|e| map_error(&e))?;
            Ok(Reply::SetData(convert_stat(&stat)))
        }
        Op::GetChildren { path, watch: false } => {
            let (children, stat) = client
                .get_children(&path)
                .await
                .map_err(|e| map_error(&e))?;
            Ok(Reply::GetChildren {
                children,
                stat: convert_stat(&stat),
            })
        }
        Op::GetChildren { path, watch: true } => {
            let guard = begin_watch(&inner, &path);
            let (children, stat, watcher) = client
                .get_and_watch_children(&path)
                .await
                .map_err(|e| map_error(&e))?;
            arm(guard, Witness::of(Some(&stat)), watcher);
            Ok(Reply::GetChildren {
                children,
                stat: convert_stat(&stat),
            })
        }
        Op::Sync { path } => {
            client.sync(&path).await.map_err(|e| map_error(&e))?;
            Ok(Reply::Sync)
        }
        Op::Multi(ops) => run_multi(&client, ops).await,
    }
}

impl Zk for RealZk {
    fn session_id(&self) -> SessionId {
        self.session_id
    }

    fn session_timeout_ms(&self) -> u64 {
        self.session_timeout_ms
    }

    async fn call(&self, op: Op) -> Result<Reply, ZkError> {
        let (client, refused) = self.refused(&op);
        let recorded = self.record_invoke(&op, refused.as_ref());
        let (Some(client), None) = (client, refused.as_ref()) else {
            return refused.expect("refused locally or without a client");
        };
        let result = run(self.inner.clone(), client, op).await;
        // Events that preceded this reply are dispatched by now.
        self.poll_all();
        if let Some(id) = recorded {
            if let Some(r) = &lock(&self.inner).rec {
                r.complete(id, &result);
            }
        }
        result
    }

    /// Sent now, in submission order (see `RealZk::start`); the reply is
    /// queued by the poll that finds it, behind the replies of requests
    /// submitted earlier.
    fn submit(&self, op: Op) -> Ticket {
        // Held while the request is handed over, so that tickets and the
        // crate's queue agree on the order.
        let mut pipeline = lock(&self.pipeline);
        let ticket = Ticket(pipeline.next_ticket);
        pipeline.next_ticket += 1;
        let (client, refused) = self.refused(&op);
        if let Some(id) = self.record_invoke(&op, refused.as_ref()) {
            if let Some(r) = &mut lock(&self.inner).rec {
                r.open.insert(ticket.0, id);
            }
        }
        let fut: ReplyFuture = match (refused, client) {
            (Some(result), _) => Box::pin(std::future::ready(result)),
            (None, Some(client)) => self.start(client, op),
            (None, None) => unreachable!("no client is refused above"),
        };
        pipeline.waiting.push_back((ticket, fut));
        drop(pipeline);
        // Whoever waits in next_delivery looks again (an answer may be
        // ready already).
        self.waker.wake_by_ref();
        ticket
    }

    fn next_delivery(&self) -> impl Future<Output = Delivery> + Send {
        futures::future::poll_fn(move |cx| {
            // Register before polling, so a change in between still wakes us.
            self.waiters.register(cx.waker());
            match self.try_next_delivery() {
                Some(delivery) => Poll::Ready(delivery),
                None => Poll::Pending,
            }
        })
    }

    fn try_next_delivery(&self) -> Option<Delivery> {
        self.poll_all();
        lock(&self.inner).queue.pop()
    }

    fn next_event(&self) -> impl Future<Output = ClientEvent> + Send {
        futures::future::poll_fn(move |cx| {
            self.waiters.register(cx.waker());
            match self.try_next_event() {
                Some(event) => Poll::Ready(event),
                None => Poll::Pending,
            }
        })
    }

    fn try_next_event(&self) -> Option<ClientEvent> {
        self.poll_all();
        lock(&self.inner).queue.pop_event()
    }

    /// Closes the session and waits until the crate reports the outcome:
    /// `Ok` once the server confirmed the close (ephemerals gone), or if the
    /// handle was already closed; `Err(SessionExpired)` if the session had
    /// expired (or expires before the close gets through); `Err(ConnectionLoss)`
    /// if nothing is known within 2 T + 2 s (the crate keeps trying in the
    /// background until its local expiry). Either way the handle is dead and
    /// its stream ends with Closed, unless it already ended with Expired.
    async fn close(&self) -> Result<(), ZkError> {
        let Some(client) = lock(&self.client).take() else {
            return Ok(());
        };
        let recorded = lock(&self.inner).rec.as_ref().map(|r| {
            let id = r
                .recorder
                .invoke(r.actor, Some(r.session), None, HistOp::CloseSession);
            (r.recorder.clone(), id, r.server)
        });
        let mut watcher = client.state_watcher();
        // Whatever has come in goes first; a submitted request still in
        // flight then fails with SessionExpired, before the end, as a
        // closed Java handle fails its queued packets. Dropping it also
        // drops its hold on the crate's client.
        self.poll_all();
        let abandoned: Vec<(Ticket, ReplyFuture)> = {
            let mut pipeline = lock(&self.pipeline);
            let abandoned: Vec<_> = pipeline.waiting.drain(..).collect();
            let mut inner = lock(&self.inner);
            for (ticket, _) in &abandoned {
                inner.queue_reply(*ticket, Err(ZkError::SessionExpired));
            }
            abandoned
        };
        // Dropped with no lock held: a watching read's guard takes `inner`.
        drop(abandoned);
        // The crate sends closeSession once its last handle is gone.
        drop(client);
        let bound = Duration::from_millis(self.session_timeout_ms.saturating_mul(2))
            .saturating_add(Duration::from_secs(2));
        let outcome = tokio::time::timeout(bound, async {
            loop {
                let state = watcher.peek_state();
                if state.is_terminated() {
                    return state;
                }
                watcher.changed().await;
            }
        })
        .await;
        let (event, result) = match outcome {
            Ok(zk::SessionState::Closed) => (SessionEvent::Closed, Ok(())),
            Ok(_) => (SessionEvent::Expired, Err(ZkError::SessionExpired)),
            Err(_) => (SessionEvent::Closed, Err(ZkError::ConnectionLoss)),
        };
        self.poll_all();
        if let Some((recorder, id, server)) = recorded {
            let (server, outcome) = match result {
                Ok(()) => (Some(server), Outcome::Ok(None)),
                Err(e) => (None, Outcome::Err(e)),
            };
            recorder.complete(id, server, None, outcome);
        }
        let mut inner = lock(&self.inner);
        if !inner.terminal {
            inner.push_session(event);
            inner.terminal = true;
        }
        inner.state = None;
        inner.paths.clear();
        drop(inner);
        self.waker.wake_by_ref();
        result
    }
}

/// An empty recorder on the wall clock, from now: for the histories of
/// handles on a real server ([`RealZk::record`]).
pub fn wall_recorder() -> Recorder {
    let start = std::time::Instant::now();
    Recorder::new(Arc::new(move || start.elapsed().as_nanos() as u64))
}

/// Maps a crate error to ZooKeeper's code.
///
/// | crate | ours |
/// |---|---|
/// | each server code (`NoNode`, `NodeExists`, …, `Throttled`) | the same code (`Throttled` → ThrottledOp) |
/// | `UnexpectedErrorCode(n)` (codes the crate does not name) | `ZkError::from_code(n)`, SystemError if unknown |
/// | `RuntimeInconsistent` | RuntimeInconsistency |
/// | `BadArguments(reason)` | BadArguments (reason dropped) |
/// | `ClientClosed` | SessionExpired (a closed Java handle answers so) |
/// | `ConnectionLoss`, `Custom` (I/O errors, connection timeouts), `UnmarshalError`, `UnexpectedError`, `Timeout`, `NoHosts` | ConnectionLoss (outcome unknown; message dropped) |
/// | a variant added to the crate later | SystemError |
///
/// Lossy: the crate itself folds SessionClosedRequireSaslAuth (-124) into
/// AuthFailed, so that code cannot be recovered.
pub fn map_error(error: &zk::Error) -> ZkError {
    use zk::Error as E;
    match error {
        E::NoNode => ZkError::NoNode,
        E::NoAuth => ZkError::NoAuth,
        E::BadVersion => ZkError::BadVersion,
        E::NoChildrenForEphemerals => ZkError::NoChildrenForEphemerals,
        E::NodeExists => ZkError::NodeExists,
        E::NotEmpty => ZkError::NotEmpty,
        E::SessionExpired => ZkError::SessionExpired,
        E::InvalidAcl => ZkError::InvalidAcl,
        E::AuthFailed => ZkError::AuthFailed,
        E::SessionMoved => ZkError::SessionMoved,
        E::NotReadOnly => ZkError::NotReadOnly,
        E::NoWatcher => ZkError::NoWatcher,
        E::QuotaExceeded => ZkError::QuotaExceeded,
        E::Throttled => ZkError::ThrottledOp,
        E::MarshallingError => ZkError::MarshallingError,
        E::Unimplemented => ZkError::Unimplemented,
        E::ReconfigDisabled => ZkError::ReconfigDisabled,
        E::RuntimeInconsistent => ZkError::RuntimeInconsistency,
        E::BadArguments(_) => ZkError::BadArguments,
        E::UnexpectedErrorCode(code) => ZkError::from_code(*code).unwrap_or(ZkError::SystemError),
        E::ClientClosed => ZkError::SessionExpired,
        E::ConnectionLoss
        | E::Custom(_)
        | E::UnmarshalError { .. }
        | E::UnexpectedError(_)
        | E::Timeout
        | E::NoHosts => ZkError::ConnectionLoss,
        _ => ZkError::SystemError,
    }
}

async fn run_multi(client: &zk::Client, ops: Vec<MultiOp>) -> Result<Reply, ZkError> {
    let count = ops.len();
    let mut writer = client.new_multi_writer();
    for op in &ops {
        let added = match op {
            MultiOp::Create { path, data, mode } => {
                writer.add_create(path, data, &create_options(*mode)?)
            }
            MultiOp::Delete { path, version } => writer.add_delete(path, Some(*version)),
            MultiOp::SetData {
                path,
                data,
                version,
            } => writer.add_set_data(path, data, Some(*version)),
            MultiOp::Check { path, version } => writer.add_check_version(path, *version),
        };
        added.map_err(|e| map_error(&e))?;
    }
    match writer.commit().await {
        Ok(results) => {
            if results.len() != count {
                return Err(ZkError::SystemError);
            }
            let results = results
                .into_iter()
                .map(|r| match r {
                    zk::MultiWriteResult::Check => Ok(MultiResult::Check),
                    zk::MultiWriteResult::Delete => Ok(MultiResult::Delete),
                    zk::MultiWriteResult::Create { path, stat } => Ok(MultiResult::Create {
                        path,
                        stat: (!stat.is_invalid()).then(|| convert_stat(&stat)),
                    }),
                    zk::MultiWriteResult::SetData { stat } => Ok(MultiResult::SetData {
                        stat: convert_stat(&stat),
                    }),
                    _ => Err(ZkError::SystemError),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Reply::Multi(results))
        }
        Err(zk::MultiWriteError::OperationFailed { index, source }) => {
            // The crate stops at the failing op; rebuild the server's list:
            // ErrorResult(0) before it, RuntimeInconsistency after it.
            if index >= count {
                return Err(ZkError::SystemError);
            }
            let mut results = vec![MultiResult::RolledBack; index];
            results.push(MultiResult::Failed(map_error(&source)));
            results.resize(count, MultiResult::Failed(ZkError::RuntimeInconsistency));
            Ok(Reply::Multi(results))
        }
        Err(zk::MultiWriteError::RequestFailed { source }) => Err(map_error(&source)),
    }
}

fn create_options(mode: CreateMode) -> Result<zk::CreateOptions<'static>, ZkError> {
    let acls = zk::Acls::anyone_all();
    let ttl = |ttl_ms: i64| match u64::try_from(ttl_ms) {
        Ok(ms) => Ok(Duration::from_millis(ms)),
        // The crate cannot even express it; it rejects 0 the same way.
        Err(_) => Err(ZkError::BadArguments),
    };
    Ok(match mode {
        CreateMode::Persistent => zk::CreateMode::Persistent.with_acls(acls),
        CreateMode::Ephemeral => zk::CreateMode::Ephemeral.with_acls(acls),
        CreateMode::PersistentSequential => zk::CreateMode::PersistentSequential.with_acls(acls),
        CreateMode::EphemeralSequential => zk::CreateMode::EphemeralSequential.with_acls(acls),
        CreateMode::Container => zk::CreateMode::Container.with_acls(acls),
        CreateMode::PersistentWithTtl { ttl_ms } => zk::CreateMode::Persistent
            .with_acls(acls)
            .with_ttl(ttl(ttl_ms)?),
        CreateMode::PersistentSequentialWithTtl { ttl_ms } => zk::CreateMode::PersistentSequential
            .with_acls(acls)
            .with_ttl(ttl(ttl_ms)?),
    })
}

fn convert_stat(stat: &zk::Stat) -> Stat {
    Stat {
        czxid: stat.czxid,
        mzxid: stat.mzxid,
        ctime: stat.ctime,
        mtime: stat.mtime,
        version: stat.version,
        cversion: stat.cversion,
        aversion: stat.aversion,
        ephemeral_owner: stat.ephemeral_owner,
        data_length: stat.data_length,
        num_children: stat.num_children,
        pzxid: stat.pzxid,
    }
}

fn convert_event_type(event_type: zk::EventType) -> Option<EventType> {
    match event_type {
        zk::EventType::NodeCreated => Some(EventType::NodeCreated),
        zk::EventType::NodeDeleted => Some(EventType::NodeDeleted),
        zk::EventType::NodeDataChanged => Some(EventType::NodeDataChanged),
        zk::EventType::NodeChildrenChanged => Some(EventType::NodeChildrenChanged),
        // Terminal session states also fire oneshot watchers; they reach
        // the stream through the state watcher instead.
        zk::EventType::Session => None,
    }
}

fn state_future(mut watcher: zk::StateWatcher) -> StateFuture {
    Box::pin(async move {
        let state = watcher.changed().await;
        (watcher, state)
    })
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not take the handle down with it.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What an arming read saw of its node: enough to tell whether two
/// firings came from one dispatch (module docs).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Witness {
    Missing,
    Node {
        czxid: i64,
        mzxid: i64,
        pzxid: i64,
        cversion: i32,
    },
}

impl Witness {
    fn of(stat: Option<&zk::Stat>) -> Witness {
        match stat {
            None => Witness::Missing,
            Some(s) => Witness::Node {
                czxid: s.czxid,
                mzxid: s.mzxid,
                pzxid: s.pzxid,
                cversion: s.cversion,
            },
        }
    }
}

/// Whether watchers whose reads saw `a` and `b`, both fired with
/// `event_type` and not told apart by timing, were fired by one dispatch.
fn same_dispatch(event_type: EventType, a: Witness, b: Witness) -> bool {
    use Witness::{Missing, Node};
    match (event_type, a, b) {
        (EventType::NodeCreated, Missing, Missing) => true,
        (EventType::NodeDeleted, Node { czxid: a, .. }, Node { czxid: b, .. }) => a == b,
        (
            EventType::NodeDataChanged,
            Node {
                czxid: ca,
                mzxid: ma,
                ..
            },
            Node {
                czxid: cb,
                mzxid: mb,
                ..
            },
        ) => ca == cb && ma == mb,
        (
            EventType::NodeChildrenChanged,
            Node {
                czxid: ca,
                pzxid: pa,
                cversion: va,
                ..
            },
            Node {
                czxid: cb,
                pzxid: pb,
                cversion: vb,
                ..
            },
        ) => ca == cb && pa == pb && va == vb,
        _ => false,
    }
}

/// The delivery order within one batch (module docs): by path components,
/// a node's own events by lifecycle, its NodeChildrenChanged after its
/// descendants (U+FFFF cannot occur in a valid path, so it sorts last).
fn order_key(event: &WatchEvent) -> (Vec<&str>, u8) {
    let mut components: Vec<&str> = event.path.split('/').filter(|c| !c.is_empty()).collect();
    let rank = match event.event_type {
        EventType::NodeCreated => 0,
        EventType::NodeDataChanged => 1,
        EventType::NodeDeleted => 2,
        EventType::NodeChildrenChanged => {
            components.push("\u{ffff}");
            3
        }
    };
    (components, rank)
}

struct Armed {
    /// The poll tick when its read was sent.
    sent_tick: u64,
    witness: Witness,
    fut: WatchFuture,
}

struct Inflight {
    id: u64,
    sent_tick: u64,
}

/// A dispatch already delivered on a path; later firings that belong to it
/// are swallowed.
struct Delivered {
    event_type: EventType,
    witness: Witness,
    /// The poll that saw it.
    fired_tick: u64,
}

#[derive(Default)]
struct PathWatches {
    armed: Vec<Armed>,
    inflight: Vec<Inflight>,
    delivered: Vec<Delivered>,
}

impl PathWatches {
    fn is_empty(&self) -> bool {
        self.armed.is_empty() && self.inflight.is_empty() && self.delivered.is_empty()
    }
}

/// What one poll of the watchers and the state found.
struct Batch {
    watches: Vec<WatchEvent>,
    sessions: Vec<SessionEvent>,
}

struct Inner {
    /// Counts polls; orders reads against deliveries.
    tick: u64,
    next_id: u64,
    /// By path, so a batch is collected in a deterministic order.
    paths: BTreeMap<String, PathWatches>,
    /// The stream, as `RealZk::poll_all` orders it.
    queue: Deliveries,
    /// `None` once terminal.
    state: Option<StateFuture>,
    last_session: SessionEvent,
    terminal: bool,
    /// Where this handle's history goes, if it is recorded
    /// ([`RealZk::record`]).
    rec: Option<Rec>,
}

/// A recorded handle: what it saw goes to `recorder` as `actor`'s, in the
/// order its stream delivers it (events and replies as they are queued,
/// a call's reply when it returns).
struct Rec {
    recorder: Recorder,
    actor: Actor,
    session: SessionId,
    /// The server the caller says answers (see [`RealZk::record`]).
    server: ServerNo,
    /// Submitted requests' invocations, by ticket.
    open: BTreeMap<u64, OpId>,
}

/// `op` as a recorded handle's history gives it: a read without its
/// watch. This client cannot see the wire order of notifications and
/// replies (module docs, "The stream"): it may deliver an event after a
/// reply the server sent later, which a check of the history would take
/// for the server's breach of watch-before-data. So a recorded history
/// holds no watch events, and its reads set none: it claims only what
/// this client observed in order.
fn unwatched(op: &Op) -> Op {
    let mut op = op.clone();
    if let Op::Exists { watch, .. } | Op::GetData { watch, .. } | Op::GetChildren { watch, .. } =
        &mut op
    {
        *watch = false;
    }
    op
}

impl Rec {
    fn invoke(&self, op: &Op) -> OpId {
        let op = HistOp::Zk(unwatched(op));
        self.recorder
            .invoke(self.actor, Some(self.session), None, op)
    }

    /// A request's end: answered by the server unless its outcome is
    /// unknown (ConnectionLoss, SessionExpired: no server answered).
    fn complete(&self, id: OpId, result: &Result<Reply, ZkError>) {
        let outcome = match result {
            Ok(reply) => Outcome::Ok(Some(reply.clone())),
            Err(e) => Outcome::Err(*e),
        };
        let server = (!outcome.is_indeterminate()).then_some(self.server);
        self.recorder.complete(id, server, None, outcome);
    }

    fn local(&self, op: HistOp, result: Outcome) {
        self.recorder
            .local(self.actor, Some(self.session), op, result);
    }
}

impl Inner {
    /// Queues an event, recording it if the handle is recorded.
    fn queue_event(&mut self, event: ClientEvent) {
        // Watch events are not recorded (see `unwatched`).
        if let (Some(r), ClientEvent::Session(e)) = (&self.rec, &event) {
            let server = (*e == SessionEvent::Connected).then_some(r.server);
            r.recorder.session(r.actor, Some(r.session), *e, server);
        }
        self.queue.event(event);
    }

    /// Queues a submitted request's reply, recording its completion if
    /// the handle is recorded.
    fn queue_reply(&mut self, ticket: Ticket, result: Result<Reply, ZkError>) {
        if let Some(r) = &mut self.rec {
            if let Some(id) = r.open.remove(&ticket.0) {
                r.complete(id, &result);
            }
        }
        self.queue.reply(ticket, result);
    }

    /// Takes whatever has fired or changed, without waiting; the caller
    /// places it in the stream.
    fn poll(&mut self, waker: &Waker) -> Batch {
        let mut cx = Context::from_waker(waker);
        self.tick += 1;
        let tick = self.tick;
        let mut fresh = Vec::new();
        for (path, watches) in self.paths.iter_mut() {
            let PathWatches {
                armed,
                inflight,
                delivered,
            } = watches;
            let mut i = 0;
            while i < armed.len() {
                // The crate unwraps its channel inside the watcher; that can
                // only fail if its session task was dropped (runtime shut
                // down), which must not take this handle down with it.
                let polled = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    armed[i].fut.as_mut().poll(&mut cx)
                }));
                let event = match polled {
                    Ok(Poll::Pending) => {
                        i += 1;
                        continue;
                    }
                    Ok(Poll::Ready(event)) => Some(event),
                    Err(_) => None,
                };
                let fired = armed.remove(i);
                let Some(event_type) = event.and_then(|e| convert_event_type(e.event_type)) else {
                    continue;
                };
                let seen = delivered.iter().any(|d| {
                    d.event_type == event_type
                        && d.fired_tick > fired.sent_tick
                        && same_dispatch(event_type, d.witness, fired.witness)
                });
                if !seen {
                    delivered.push(Delivered {
                        event_type,
                        witness: fired.witness,
                        fired_tick: tick,
                    });
                    fresh.push(WatchEvent {
                        event_type,
                        path: path.clone(),
                    });
                }
            }
            // Only a read sent before the delivering poll can still join it.
            delivered.retain(|d| {
                armed.iter().any(|a| a.sent_tick < d.fired_tick)
                    || inflight.iter().any(|f| f.sent_tick < d.fired_tick)
            });
        }
        self.paths.retain(|_, watches| !watches.is_empty());
        fresh.sort_by(|a, b| order_key(a).cmp(&order_key(b)));
        let mut sessions = Vec::new();

        while let Some(fut) = self.state.as_mut() {
            let Poll::Ready((watcher, state)) = fut.as_mut().poll(&mut cx) else {
                break;
            };
            self.on_state(state, &mut sessions);
            self.state = if self.terminal {
                None
            } else {
                Some(state_future(watcher))
            };
        }
        if self.terminal {
            // Nothing fires after the end; the crate has dropped its side.
            self.paths.clear();
        }
        Batch {
            watches: fresh,
            sessions,
        }
    }

    /// Notes a state the crate published; the events it makes go to `out`.
    fn on_state(&mut self, state: zk::SessionState, out: &mut Vec<SessionEvent>) {
        if self.terminal {
            return;
        }
        let event = match state {
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                SessionEvent::Connected
            }
            zk::SessionState::Disconnected => SessionEvent::Disconnected,
            zk::SessionState::Expired | zk::SessionState::AuthFailed => SessionEvent::Expired,
            zk::SessionState::Closed => SessionEvent::Closed,
        };
        match event {
            SessionEvent::Connected | SessionEvent::Disconnected => {
                if event == self.last_session {
                    // The crate never repeats a state: the opposite one was
                    // overwritten in its single-slot channel.
                    let missed = if event == SessionEvent::Connected {
                        SessionEvent::Disconnected
                    } else {
                        SessionEvent::Connected
                    };
                    out.push(missed);
                }
                out.push(event);
            }
            SessionEvent::Expired | SessionEvent::Closed => {
                out.push(event);
                self.terminal = true;
            }
        }
        if let Some(&last) = out.last() {
            self.last_session = last;
        }
    }

    fn push_session(&mut self, event: SessionEvent) {
        self.last_session = event;
        self.queue_event(ClientEvent::Session(event));
    }
}

/// Removes a watching read's registration if it ends without arming.
struct InflightGuard {
    inner: Arc<Mutex<Inner>>,
    path: String,
    id: u64,
    sent_tick: u64,
    done: bool,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut inner = lock(&self.inner);
        if let Some(watches) = inner.paths.get_mut(&self.path) {
            watches.inflight.retain(|f| f.id != self.id);
            if watches.is_empty() {
                inner.paths.remove(&self.path);
            }
        }
    }
}

/// The wakers of everyone waiting in `next_event`, woken together.
#[derive(Default)]
struct Waiters {
    wakers: Mutex<Vec<Waker>>,
}

impl Waiters {
    fn register(&self, waker: &Waker) {
        let mut wakers = lock(&self.wakers);
        if !wakers.iter().any(|w| w.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }
}

impl ArcWake for Waiters {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        let wakers = std::mem::take(&mut *lock(&arc_self.wakers));
        for waker in wakers {
            waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(czxid: i64, mzxid: i64, pzxid: i64, cversion: i32) -> Witness {
        Witness::Node {
            czxid,
            mzxid,
            pzxid,
            cversion,
        }
    }

    #[test]
    fn dispatch_identity_by_witness() {
        use EventType::*;
        let a = node(5, 7, 9, 2);
        assert!(same_dispatch(NodeDataChanged, a, a));
        assert!(!same_dispatch(NodeDataChanged, a, node(5, 8, 9, 2)));
        assert!(same_dispatch(NodeDeleted, a, node(5, 8, 10, 3)));
        assert!(!same_dispatch(NodeDeleted, a, node(6, 7, 9, 2)));
        assert!(same_dispatch(NodeChildrenChanged, a, node(5, 8, 9, 2)));
        assert!(!same_dispatch(NodeChildrenChanged, a, node(5, 7, 10, 3)));
        assert!(same_dispatch(
            NodeCreated,
            Witness::Missing,
            Witness::Missing
        ));
        assert!(!same_dispatch(NodeDeleted, Witness::Missing, a));
    }

    #[test]
    fn batch_order_follows_a_write() {
        let ev = |event_type, path: &str| WatchEvent {
            event_type,
            path: path.to_owned(),
        };
        let mut batch = [
            ev(EventType::NodeChildrenChanged, "/a"),
            ev(EventType::NodeChildrenChanged, "/"),
            ev(EventType::NodeDeleted, "/a/b"),
            ev(EventType::NodeDeleted, "/a"),
            ev(EventType::NodeDataChanged, "/a"),
            ev(EventType::NodeCreated, "/ab"),
        ];
        batch.sort_by(|a, b| order_key(a).cmp(&order_key(b)));
        let got: Vec<_> = batch
            .iter()
            .map(|e| (e.event_type, e.path.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (EventType::NodeDataChanged, "/a"),
                (EventType::NodeDeleted, "/a"),
                (EventType::NodeDeleted, "/a/b"),
                (EventType::NodeChildrenChanged, "/a"),
                (EventType::NodeCreated, "/ab"),
                (EventType::NodeChildrenChanged, "/"),
            ]
        );
    }

    #[test]
    fn error_mapping_keeps_codes() {
        use zk::Error as E;
        assert_eq!(map_error(&E::NodeExists), ZkError::NodeExists);
        assert_eq!(map_error(&E::ClientClosed), ZkError::SessionExpired);
        assert_eq!(
            map_error(&E::UnexpectedErrorCode(-12)),
            ZkError::UnknownSession
        );
        assert_eq!(
            map_error(&E::UnexpectedErrorCode(-2)),
            ZkError::RuntimeInconsistency
        );
        assert_eq!(
            map_error(&E::UnexpectedErrorCode(-9999)),
            ZkError::SystemError
        );
        assert_eq!(map_error(&E::Throttled), ZkError::ThrottledOp);
        assert_eq!(map_error(&E::Timeout), ZkError::ConnectionLoss);
        assert_eq!(map_error(&E::BadArguments(&"x")), ZkError::BadArguments);
    }
}
