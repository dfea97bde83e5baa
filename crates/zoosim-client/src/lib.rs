#![warn(missing_docs, unreachable_pub)]
//! The client trait recipes are written against, and its implementations.
//!
//! # The contract every `Zk` implementation keeps
//!
//! * **Validation first.** Every path is checked by [`zoosim_core::path::validate_op`]
//!   before anything is sent; a bad path is `Err(BadArguments)` and nothing
//!   reaches a server.
//! * **FIFO.** Requests issued on one handle go to the server in issue
//!   order and are answered in issue order, whether each waits for its
//!   reply ([`Zk::call`]) or several are in flight at once
//!   ([`Zk::submit`]). A failed write does not stop later ones; only
//!   `multi` is atomic. The one exception: a request the handle answers
//!   itself (a bad path, an empty multi, a dead handle) is answered at
//!   once, without waiting for the replies of requests still in flight.
//! * **Replies.** `Ok(Reply)` of the variant matching the `Op`; a failed
//!   `multi` is `Ok(Reply::Multi(results))` with the failing op's code inside
//!   (see [`Reply::multi_error`]). An empty multi answers `Ok(Multi([]))`
//!   without contacting the server.
//! * **Watches** are one-shot and per session: `watch: true` on
//!   exists/get_data/get_children registers the session's watch on that
//!   path (exists on a missing node registers an exist watch; get_data and
//!   get_children on a missing node register nothing). One server event is
//!   delivered once per session, however many reads armed it
//!   (docs/ZOOKEEPER.md, "Watch deduplication", as the Java client's
//!   default watcher). A watch event is in the event stream before the
//!   reply of any call issued after the write that fired it has returned:
//!   after any call returns, every event that precedes its reply can be
//!   taken with [`Zk::try_next_event`].
//!
//! # One ordered stream: replies and events
//!
//! A server sends a connection's replies and watch notifications down one
//! TCP stream, a notification fired by a write before the replies to
//! requests it answers after that write; the Java client hands them to the
//! application in that order (ClientCnxn's event thread). A handle gives
//! the same stream as [`Delivery`]s: [`Zk::submit`] sends a request at
//! once without waiting (several may be in flight: pipelining) and its
//! reply comes back as [`Delivery::Reply`] with the request's [`Ticket`],
//! in its place among the [`Delivery::Event`]s. [`Zk::next_delivery`]
//! waits for the next one, [`Zk::try_next_delivery`] takes one that has
//! arrived. On a broken connection the requests in flight fail with
//! ConnectionLoss in issue order, then `Disconnected` comes; on expiry or
//! close they fail with SessionExpired before `Expired` or `Closed`.
//!
//! How exactly an implementation keeps the wire order:
//!
//! * `SimZk` (the simulator) delivers in exactly the order its server sent
//!   on the connection.
//! * [`local::LocalZk`] answers at once: a write's reply comes after the
//!   events it fired for its own session, as a server sends them.
//! * [`real::RealZk`] cannot see the wire (the crate gives a future per
//!   request and one per watcher): replies come in issue order, and an
//!   event comes after every reply that preceded it on the wire, but may
//!   come later than its place (after replies that followed it). See
//!   [`real`] for the details.
//!
//! **Mixing the two styles on one handle.** The stream holds every event
//! and the replies of submitted requests only: a [`Zk::call`] waits for its
//! own reply, which never enters the stream. [`Zk::next_event`] and
//! [`Zk::try_next_event`] take the next *event* of the stream, leaving any
//! reply ahead of it in place for [`Zk::next_delivery`]. So each event is
//! taken once, by whichever of the two takes it first, and no reply is
//! lost or taken twice; but code that takes events with `next_event`
//! while requests it submitted are in flight sees those events before
//! replies the server sent earlier. One consumer of the stream per handle
//! (a recipe's `Driver` (zoosim-recipes), say) is the intended use.
//! * **ConnectionLoss** means the outcome is unknown: the request may or may
//!   not have been applied. No implementation retries a request by itself.
//! * **SessionExpired**: once a handle has seen `SessionEvent::Expired` (or
//!   `Closed`), every later call fails with `SessionExpired` and the handle
//!   is dead; recovery means a new handle (a new session).
//!
//! # Where the implementations differ (client flavours)
//!
//! ZooKeeper has two client behaviours worth reproducing, and recipes must
//! be correct under both:
//!
//! * **java** (the Java client, docs/ZOOKEEPER.md, "Client states"): while
//!   disconnected it queues new requests and sends them after reconnecting
//!   (failing them with ConnectionLoss if the connection attempt in
//!   progress fails); it
//!   never decides on expiry itself and learns `Expired` only when it
//!   reconnects.
//! * **rust** (the `zookeeper-client` crate 0.11, which [`real::RealZk`]
//!   wraps). Measured against a 3.8.0 server by `tests/real_client.rs`
//!   (T = 2000 ms, tickTime 500):
//!   - it drops a connection that has been silent for 2/5 T: with the
//!     server frozen (SIGSTOP), Disconnected came at 0.41–0.44 T, and the
//!     requests in flight failed with ConnectionLoss at that moment. A
//!     closed or refused connection is noticed at once.
//!   - it does **not** fail fast while disconnected: a request issued then
//!     is held, across any number of failed connection attempts, and sent
//!     once the session is back (after Connected), or failed with
//!     SessionExpired when the session ends. A request issued at
//!     Disconnected with the server frozen waited 1.9 s, until the local
//!     expiry, and failed with SessionExpired; a write issued with the server killed was
//!     applied after the restart, 0.9–1.7 s later.
//!   - it expires the session locally 7/5 T after it last heard from a
//!     server, frozen or gone alike: Expired at 1.40 T (2.79–2.80 s) in
//!     every run, with no server involved.
//!   - after a server restart within that time it reconnects with the
//!     session intact (Connected, same session id, ephemerals kept). It
//!     retries after waits of 100 ms doubling each time, plus up to 100 ms
//!     of jitter (attempts about 0.15, 0.4, 0.85, 1.7, 3.4 s after the
//!     loss), so Connected came 0.9–3.4 s after a kill -9 for a server back
//!     in 0.4–1.2 s. Watches set before the outage fire after it.
//!   - after `close()` every call fails with SessionExpired, as on a closed
//!     Java handle.
//!   - SessionMoved (from its source, not measured): a request that gets it
//!     fails with SessionMoved; the crate would turn one met while
//!     (re)connecting into expiry. A server normally closes the connection
//!     instead, which is ConnectionLoss.
//!
//!   `RealZk` also answers a few requests differently from a server
//!   (create or delete of `/`, TTLs out of range, a multi's create Stat on
//!   3.8.0): see [`real`].

pub mod local;
pub mod real;

use std::collections::VecDeque;
use std::future::Future;

use zoosim_core::proto::{
    ClientEvent, CreateMode, MultiOp, MultiResult, Op, Reply, SessionId, Stat, ZkError,
};

/// Names one request sent with [`Zk::submit`]; its reply comes back in the
/// stream as [`Delivery::Reply`] with the same ticket. Unique per handle,
/// increasing in submission order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Ticket(pub u64);

/// One item of a handle's ordered stream (see the module docs, "One
/// ordered stream").
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Delivery {
    /// The reply to a submitted request.
    Reply(Ticket, Result<Reply, ZkError>),
    /// A watch or session event.
    Event(ClientEvent),
}

/// A handle's stream as the implementations keep it: deliveries in order,
/// tickets handed out in submission order.
#[derive(Default, Debug)]
#[doc(hidden)]
pub struct Deliveries {
    queue: VecDeque<Delivery>,
    next_ticket: u64,
}

impl Deliveries {
    /// The next ticket.
    #[doc(hidden)]
    pub fn ticket(&mut self) -> Ticket {
        let t = Ticket(self.next_ticket);
        self.next_ticket += 1;
        t
    }

    #[doc(hidden)]
    pub fn reply(&mut self, ticket: Ticket, result: Result<Reply, ZkError>) {
        self.queue.push_back(Delivery::Reply(ticket, result));
    }

    #[doc(hidden)]
    pub fn event(&mut self, event: ClientEvent) {
        self.queue.push_back(Delivery::Event(event));
    }

    /// The next delivery, reply or event.
    #[doc(hidden)]
    pub fn pop(&mut self) -> Option<Delivery> {
        self.queue.pop_front()
    }

    /// The next event, leaving the replies ahead of it in place (see the
    /// module docs, "Mixing the two styles").
    #[doc(hidden)]
    pub fn pop_event(&mut self) -> Option<ClientEvent> {
        let at = self
            .queue
            .iter()
            .position(|d| matches!(d, Delivery::Event(_)))?;
        match self.queue.remove(at) {
            Some(Delivery::Event(e)) => Some(e),
            _ => None,
        }
    }
}

/// An asynchronous ZooKeeper session handle. See the module docs for the
/// contract.
pub trait Zk {
    /// The session this handle is bound to.
    fn session_id(&self) -> SessionId;

    /// The negotiated session timeout.
    fn session_timeout_ms(&self) -> u64;

    /// Sends one request and waits for its reply. The reply does not enter
    /// the stream of [`Zk::next_delivery`].
    fn call(&self, op: Op) -> impl Future<Output = Result<Reply, ZkError>> + Send;

    /// Sends one request now, in submission order, without waiting (held
    /// while disconnected exactly as a [`Zk::call`] is); its reply comes
    /// back in the stream ([`Zk::next_delivery`]) under the ticket returned.
    fn submit(&self, op: Op) -> Ticket;

    /// Waits for the next reply or event of the stream. Cancellation-safe:
    /// nothing is taken from the stream unless it is returned.
    fn next_delivery(&self) -> impl Future<Output = Delivery> + Send;

    /// Takes the next reply or event that has already arrived, without
    /// waiting.
    fn try_next_delivery(&self) -> Option<Delivery>;

    /// Waits for the next watch or session event of the stream, leaving
    /// replies in it.
    fn next_event(&self) -> impl Future<Output = ClientEvent> + Send;

    /// Takes the next event that has already arrived, without waiting,
    /// leaving replies in the stream.
    fn try_next_event(&self) -> Option<ClientEvent>;

    /// Closes the session: its ephemerals are deleted at once (if the close
    /// reaches the server); the handle is dead afterwards.
    fn close(&self) -> impl Future<Output = Result<(), ZkError>> + Send;
}

/// Waits until `take` gives something; `notify` is woken with
/// `notify_waiters` whenever the stream grows. Registering before looking
/// means a wake between the look and the wait is not missed, and every
/// waiter (a `next_event` and a `next_delivery` on one handle, say) looks
/// again. Cancellation-safe: `take` is only called when its result is
/// returned at once.
#[doc(hidden)]
pub async fn wait_for<T>(notify: &tokio::sync::Notify, mut take: impl FnMut() -> Option<T>) -> T {
    loop {
        let mut notified = std::pin::pin!(notify.notified());
        notified.as_mut().enable();
        if let Some(x) = take() {
            return x;
        }
        notified.await;
    }
}

fn unexpected(reply: Reply) -> ZkError {
    // A reply of the wrong variant is a broken implementation, not a
    // ZooKeeper outcome: fail loudly in tests, degrade in release.
    debug_assert!(false, "reply does not match its op: {reply:?}");
    ZkError::SystemError
}

/// Typed conveniences over [`Zk::call`].
pub trait ZkExt: Zk + Sync {
    /// Creates a node; returns the created name (with any sequence suffix).
    fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> impl Future<Output = Result<(String, Stat), ZkError>> + Send {
        let op = Op::Create {
            path: path.to_owned(),
            data: data.to_vec(),
            mode,
        };
        async move {
            match self.call(op).await? {
                Reply::Create { path, stat } => Ok((path, stat)),
                other => Err(unexpected(other)),
            }
        }
    }

    /// Deletes a childless node if its version matches (-1 for any).
    fn delete(&self, path: &str, version: i32) -> impl Future<Output = Result<(), ZkError>> + Send {
        let op = Op::Delete {
            path: path.to_owned(),
            version,
        };
        async move {
            match self.call(op).await? {
                Reply::Delete => Ok(()),
                other => Err(unexpected(other)),
            }
        }
    }

    /// The node's Stat, or `None` if it does not exist; `watch` sets a data
    /// watch either way (an exist watch if it is missing).
    fn exists(
        &self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<Option<Stat>, ZkError>> + Send {
        let op = Op::Exists {
            path: path.to_owned(),
            watch,
        };
        async move {
            match self.call(op).await? {
                Reply::Exists(stat) => Ok(stat),
                other => Err(unexpected(other)),
            }
        }
    }

    /// The node's data and Stat; `watch` sets a data watch if it exists.
    fn get_data(
        &self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<(Vec<u8>, Stat), ZkError>> + Send {
        let op = Op::GetData {
            path: path.to_owned(),
            watch,
        };
        async move {
            match self.call(op).await? {
                Reply::GetData { data, stat } => Ok((data, stat)),
                other => Err(unexpected(other)),
            }
        }
    }

    /// Replaces a node's data if its version matches (-1 for any); returns
    /// the new Stat.
    fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> impl Future<Output = Result<Stat, ZkError>> + Send {
        let op = Op::SetData {
            path: path.to_owned(),
            data: data.to_vec(),
            version,
        };
        async move {
            match self.call(op).await? {
                Reply::SetData(stat) => Ok(stat),
                other => Err(unexpected(other)),
            }
        }
    }

    /// The children's names (not full paths, in no particular order) and the
    /// node's Stat; `watch` sets a child watch if it exists.
    fn get_children(
        &self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<(Vec<String>, Stat), ZkError>> + Send {
        let op = Op::GetChildren {
            path: path.to_owned(),
            watch,
        };
        async move {
            match self.call(op).await? {
                Reply::GetChildren { children, stat } => Ok((children, stat)),
                other => Err(unexpected(other)),
            }
        }
    }

    /// Makes the connected server catch up with the leader before answering.
    fn sync(&self, path: &str) -> impl Future<Output = Result<(), ZkError>> + Send {
        let op = Op::Sync {
            path: path.to_owned(),
        };
        async move {
            match self.call(op).await? {
                Reply::Sync => Ok(()),
                other => Err(unexpected(other)),
            }
        }
    }

    /// Runs a multi; a failed multi is `Err` with the first failing code
    /// (the per-op results are in [`Zk::call`]'s reply).
    fn multi(
        &self,
        ops: Vec<MultiOp>,
    ) -> impl Future<Output = Result<Vec<MultiResult>, ZkError>> + Send {
        async move {
            match self.call(Op::Multi(ops)).await? {
                reply @ Reply::Multi(_) => match reply.multi_error() {
                    Some(e) => Err(e),
                    None => match reply {
                        Reply::Multi(results) => Ok(results),
                        _ => unreachable!(),
                    },
                },
                other => Err(unexpected(other)),
            }
        }
    }
}

impl<T: Zk + Sync> ZkExt for T {}
