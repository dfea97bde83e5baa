//! An in-process standalone ZooKeeper: the data tree and one watch table
//! behind the [`Zk`] trait. No network, no faults, no wall clock (a logical
//! clock ticks once per txn), so it is deterministic: the model side of the
//! conformance tests, and a quick server for recipe unit tests.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::{wait_for, Deliveries, Delivery, Ticket, Zk};
use zoosim_core::path::validate_op;
use zoosim_core::proto::{ClientEvent, Op, Reply, SessionEvent, SessionId, ZkError};
use zoosim_core::tree::{DataTree, Outstanding, TreeConfig, TxnBody, WatchTable};

/// Session timeout bounds, as the server negotiates them (2 and 20 ticks).
#[derive(Clone, Copy, Debug)]
pub struct LocalConfig {
    /// The tickTime in ms the bounds below correspond to; LocalServer itself
    /// has no timers and does not read it.
    pub tick_ms: u64,
    /// The smallest session timeout granted, in ms; shorter requests are
    /// raised to it.
    pub min_session_timeout_ms: u64,
    /// The largest session timeout granted, in ms; longer requests are
    /// lowered to it.
    pub max_session_timeout_ms: u64,
    /// What the data tree accepts (TTL nodes or not).
    pub tree: TreeConfig,
}

impl Default for LocalConfig {
    /// Matches the real-server fixture (tickTime=500, maxSessionTimeout=60000).
    fn default() -> Self {
        LocalConfig {
            tick_ms: 500,
            min_session_timeout_ms: 1000,
            max_session_timeout_ms: 60_000,
            tree: TreeConfig::default(),
        }
    }
}

struct Session {
    /// Replies to submitted requests and events, in the order the server
    /// produced them.
    stream: Deliveries,
    notify: Arc<Notify>,
    /// Closed handles fail every call with SessionExpired, client-side.
    closed: bool,
}

struct State {
    tree: DataTree,
    /// Held prep records ([`LocalServer::hold_prep_records`]); `None`: each
    /// txn is applied before the next is prepped, so there are none.
    held: Option<Outstanding>,
    watches: WatchTable<SessionId>,
    sessions: BTreeMap<SessionId, Session>,
    next_session: i64,
    clock_ms: i64,
    config: LocalConfig,
}

impl State {
    fn tick(&mut self) -> i64 {
        self.clock_ms += 1;
        self.clock_ms
    }

    fn deliver(&mut self, fired: Vec<(SessionId, zoosim_core::proto::WatchEvent)>) {
        for (sid, event) in fired {
            if let Some(s) = self.sessions.get_mut(&sid) {
                s.stream.event(ClientEvent::Watch(event));
                s.notify.notify_waiters();
            }
        }
    }
}

/// The server; clone it to share. Each [`LocalServer::connect`] opens a
/// session.
#[derive(Clone)]
pub struct LocalServer {
    state: Arc<Mutex<State>>,
}

impl Default for LocalServer {
    fn default() -> Self {
        LocalServer::new(LocalConfig::default())
    }
}

impl LocalServer {
    /// A server with a fresh tree ([`DataTree::new`]) and no sessions.
    pub fn new(config: LocalConfig) -> LocalServer {
        LocalServer {
            state: Arc::new(Mutex::new(State {
                tree: DataTree::new(config.tree),
                held: None,
                watches: WatchTable::new(),
                sessions: BTreeMap::new(),
                next_session: 0,
                clock_ms: 0,
                config,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock is already a failed test; keep
        // serving so the panic, not a poison error, is what gets reported.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a session (a createSession txn) with the negotiated timeout.
    pub fn connect(&self, session_timeout_ms: u64) -> LocalZk {
        let mut st = self.lock();
        st.next_session += 1;
        let session = SessionId(st.next_session);
        let timeout_ms = session_timeout_ms.clamp(
            st.config.min_session_timeout_ms,
            st.config.max_session_timeout_ms,
        );
        let time = st.tick();
        st.tree.create_session(time, session, timeout_ms);
        let notify = Arc::new(Notify::new());
        let mut stream = Deliveries::default();
        stream.event(ClientEvent::Session(SessionEvent::Connected));
        st.sessions.insert(
            session,
            Session {
                stream,
                notify: notify.clone(),
                closed: false,
            },
        );
        LocalZk {
            server: self.clone(),
            session,
            timeout_ms,
            notify,
        }
    }

    /// A snapshot of the tree.
    pub fn tree(&self) -> DataTree {
        self.lock().tree.clone()
    }

    /// From now on, writes are prepped as a pipelined server preps them:
    /// over the outstanding change records of the txns not yet applied
    /// ([`Outstanding`]), starting from `records` (normally
    /// [`Outstanding::new`]). Replies still come at once; how far the
    /// server had applied when it prepped the next write is set with
    /// [`LocalServer::applied_upto`]. For replaying a real server's
    /// pipelined order (the conformance tests).
    pub fn hold_prep_records(&self, records: Outstanding) {
        self.lock().held = Some(records);
    }

    /// The txns up to `zxid` count as applied at the next write's prep.
    pub fn applied_upto(&self, zxid: zoosim_core::proto::Zxid) {
        if let Some(held) = &mut self.lock().held {
            held.applied(zxid);
        }
    }

    /// What prep would decide for `op` from `session` if the txns up to
    /// `applied` were applied when it ran; changes nothing.
    pub fn prep_outcome(
        &self,
        session: SessionId,
        op: &Op,
        applied: zoosim_core::proto::Zxid,
    ) -> TxnBody {
        let st = self.lock();
        let mut records = st.held.clone().unwrap_or_default();
        records.applied(applied);
        let zxid = st.tree.next_zxid();
        st.tree
            .prepare_over(&records, zxid, st.clock_ms + 1, session, op)
            .body
    }

    /// The server's logical clock in ms (one tick per txn until
    /// [`LocalServer::advance_clock`]).
    pub fn clock_ms(&self) -> i64 {
        self.lock().clock_ms
    }

    /// Moves the logical clock `ms` forward: time passing with no txns,
    /// for TTL nodes to expire.
    pub fn advance_clock(&self, ms: i64) {
        let mut st = self.lock();
        st.clock_ms = st.clock_ms.saturating_add(ms.max(0));
    }

    /// What a reaper run would try to delete now
    /// ([`DataTree::reaper_candidates`] at the server's clock).
    pub fn reaper_candidates(&self) -> Vec<String> {
        let st = self.lock();
        st.tree.reaper_candidates(st.clock_ms)
    }

    /// One reaper `deleteContainer` of `path`, as a txn of its own (the
    /// next zxid, whether it deletes or fails) whose watches fire like a
    /// client's delete. The server runs no reaper by itself: its caller
    /// decides when one runs and what it deletes.
    pub fn delete_container(&self, path: &str) -> Result<Reply, ZkError> {
        let mut st = self.lock();
        let time = st.tick();
        let txn = st
            .tree
            .prepare_delete_container(st.tree.next_zxid(), time, path);
        let applied = st.tree.apply(&txn);
        let fired = st.watches.fire_all(&applied.triggers);
        st.deliver(fired);
        applied.reply.expect("a deleteContainer txn has a reply")
    }
}

/// One session on a [`LocalServer`].
pub struct LocalZk {
    server: LocalServer,
    session: SessionId,
    timeout_ms: u64,
    notify: Arc<Notify>,
}

impl LocalZk {
    fn call_now(&self, op: &Op) -> Result<Reply, ZkError> {
        self.execute(&mut self.server.lock(), op)
    }

    /// Answers `op` against the server's state, under its lock: the events
    /// a write fires are queued before the caller places the reply.
    fn execute(&self, st: &mut State, op: &Op) -> Result<Reply, ZkError> {
        validate_op(op)?;
        if let Op::Multi(ops) = op {
            if ops.is_empty() {
                // The client answers an empty multi without a round trip,
                // even on a closed handle.
                return Ok(Reply::Multi(Vec::new()));
            }
        }
        if st.sessions.get(&self.session).is_none_or(|s| s.closed) {
            return Err(ZkError::SessionExpired);
        }
        if op.is_write() {
            let time = st.tick();
            let applied = match &mut st.held {
                None => st.tree.execute(time, self.session, op),
                Some(held) => {
                    let zxid = st.tree.next_zxid();
                    let txn = st.tree.prepare_over(held, zxid, time, self.session, op);
                    held.prepped(&txn);
                    st.tree.apply(&txn)
                }
            };
            let fired = st.watches.fire_all(&applied.triggers);
            st.deliver(fired);
            applied.reply.expect("a client write always has a reply")
        } else {
            let (reply, watch) = st.tree.read(op);
            if let Some((kind, path)) = watch {
                st.watches.register(self.session, kind, &path);
            }
            reply
        }
    }
}

impl Zk for LocalZk {
    fn session_id(&self) -> SessionId {
        self.session
    }

    fn session_timeout_ms(&self) -> u64 {
        self.timeout_ms
    }

    fn call(&self, op: Op) -> impl std::future::Future<Output = Result<Reply, ZkError>> + Send {
        let result = self.call_now(&op);
        async move { result }
    }

    /// Answered at once, under the server's lock: the reply follows the
    /// events this write fired for its own session (the server sends a
    /// notification before the reply of the write that fired it), and
    /// precedes the events of any later write.
    fn submit(&self, op: Op) -> Ticket {
        let mut guard = self.server.lock();
        let result = self.execute(&mut guard, &op);
        let s = guard
            .sessions
            .get_mut(&self.session)
            .expect("a handle's session stays in the table");
        let ticket = s.stream.ticket();
        s.stream.reply(ticket, result);
        s.notify.notify_waiters();
        ticket
    }

    async fn next_delivery(&self) -> Delivery {
        wait_for(&self.notify, || self.try_next_delivery()).await
    }

    fn try_next_delivery(&self) -> Option<Delivery> {
        self.server
            .lock()
            .sessions
            .get_mut(&self.session)
            .and_then(|s| s.stream.pop())
    }

    async fn next_event(&self) -> ClientEvent {
        wait_for(&self.notify, || self.try_next_event()).await
    }

    fn try_next_event(&self) -> Option<ClientEvent> {
        self.server
            .lock()
            .sessions
            .get_mut(&self.session)
            .and_then(|s| s.stream.pop_event())
    }

    fn close(&self) -> impl std::future::Future<Output = Result<(), ZkError>> + Send {
        let mut guard = self.server.lock();
        let st = &mut *guard;
        let result = match st.sessions.get_mut(&self.session) {
            Some(s) if !s.closed => {
                s.closed = true;
                s.stream.event(ClientEvent::Session(SessionEvent::Closed));
                s.notify.notify_waiters();
                // What a closing handle still receives of its own close's
                // events is unverified (the server sends them before it
                // closes the connection); the handle is dead, so drop them.
                st.watches.remove_connection(self.session);
                let time = st.tick();
                let triggers = match &mut st.held {
                    None => st.tree.close_session(time, self.session),
                    Some(held) => {
                        let zxid = st.tree.next_zxid();
                        let txn = st.tree.prepare_close_session(zxid, time, self.session);
                        held.prepped(&txn);
                        st.tree.apply(&txn).triggers
                    }
                };
                let fired = st.watches.fire_all(&triggers);
                st.deliver(fired);
                Ok(())
            }
            // Closing a closed handle is a no-op, as in both real clients.
            _ => Ok(()),
        };
        drop(guard);
        async move { result }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ZkExt;
    use zoosim_core::proto::{CreateMode, EventType, WatchEvent};

    fn block<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn watches_fire_once_per_session() {
        block(async {
            let server = LocalServer::default();
            let a = server.connect(5000);
            let b = server.connect(5000);
            assert_eq!(
                a.try_next_event(),
                Some(ClientEvent::Session(SessionEvent::Connected))
            );
            assert_eq!(
                b.try_next_event(),
                Some(ClientEvent::Session(SessionEvent::Connected))
            );
            a.create("/x", b"", CreateMode::Persistent).await.unwrap();
            a.exists("/x", true).await.unwrap();
            a.get_data("/x", true).await.unwrap();
            a.get_children("/x", true).await.unwrap();
            b.exists("/x", true).await.unwrap();
            b.delete("/x", -1).await.unwrap();
            let deleted = ClientEvent::Watch(WatchEvent {
                event_type: EventType::NodeDeleted,
                path: "/x".into(),
            });
            assert_eq!(a.try_next_event(), Some(deleted.clone()));
            assert_eq!(a.try_next_event(), None);
            assert_eq!(b.next_event().await, deleted);
        });
    }

    #[test]
    fn submitted_replies_follow_the_events_their_write_fired() {
        block(async {
            let server = LocalServer::default();
            let a = server.connect(5000);
            let b = server.connect(5000);
            a.create("/x", b"", CreateMode::Persistent).await.unwrap();
            a.exists("/x", true).await.unwrap();
            b.exists("/x", true).await.unwrap();
            let connected = Delivery::Event(ClientEvent::Session(SessionEvent::Connected));
            assert_eq!(a.try_next_delivery(), Some(connected.clone()));
            assert_eq!(b.try_next_delivery(), Some(connected));
            let set = a.submit(Op::SetData {
                path: "/x".into(),
                data: b"1".to_vec(),
                version: -1,
            });
            let bad = a.submit(Op::Exists {
                path: "x".into(),
                watch: false,
            });
            let changed = Delivery::Event(ClientEvent::Watch(WatchEvent {
                event_type: EventType::NodeDataChanged,
                path: "/x".into(),
            }));
            assert_eq!(a.try_next_delivery(), Some(changed.clone()));
            assert!(matches!(
                a.try_next_delivery(),
                Some(Delivery::Reply(t, Ok(Reply::SetData(_)))) if t == set
            ));
            assert_eq!(
                a.try_next_delivery(),
                Some(Delivery::Reply(bad, Err(ZkError::BadArguments)))
            );
            assert_eq!(a.try_next_delivery(), None);
            // The other session only gets the event; a call's reply never
            // enters the stream, and next_event leaves replies in place.
            assert_eq!(b.try_next_delivery(), Some(changed));
            let t = b.submit(Op::Sync { path: "/".into() });
            b.sync("/").await.unwrap();
            b.close().await.unwrap();
            assert_eq!(
                b.try_next_event(),
                Some(ClientEvent::Session(SessionEvent::Closed))
            );
            assert_eq!(
                b.try_next_delivery(),
                Some(Delivery::Reply(t, Ok(Reply::Sync)))
            );
            assert_eq!(b.try_next_delivery(), None);
        });
    }

    #[test]
    fn close_removes_ephemerals_and_kills_the_handle() {
        block(async {
            let server = LocalServer::default();
            let a = server.connect(100_000);
            assert_eq!(a.session_timeout_ms(), 60_000, "clamped to the maximum");
            a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
            a.close().await.unwrap();
            assert_eq!(a.exists("/e", false).await, Err(ZkError::SessionExpired));
            assert!(server.tree().node("/e").is_none());
            assert_eq!(a.close().await, Ok(()), "closing twice is a no-op");
        });
    }

    #[test]
    fn bad_paths_fail_at_the_boundary() {
        block(async {
            let server = LocalServer::default();
            let a = server.connect(5000);
            let zxid = server.tree().last_zxid();
            assert_eq!(a.exists("a", false).await, Err(ZkError::BadArguments));
            assert_eq!(
                a.create("/a/", b"", CreateMode::Persistent).await,
                Err(ZkError::BadArguments)
            );
            assert_eq!(
                server.tree().last_zxid(),
                zxid,
                "nothing reached the server"
            );
        });
    }
}
