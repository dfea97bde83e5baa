//! ZooKeeper's contract as one sequential model over the data tree
//! ([`crate::tree::DataTree`], the same tree the simulated servers
//! replicate): a history satisfies the contract when some order of its
//! steps, each placed inside its time window, replays on this model.
//!
//! How each guarantee becomes a rule of the model (docs/CONTRACT.md):
//!
//! * **writes linearizable** — a write is placed between its call and its
//!   return, applied to the tree, and its reply must be the tree's reply;
//! * **session FIFO** — each session's steps are placed in the order the
//!   client saw them complete (a counter per session);
//! * **reads sequentially consistent** — a read is answered by the tree at
//!   its place; it may be placed before writes that completed before it
//!   was called (a lagging server), but never before the session's
//!   previous step (monotonic reads, read-your-writes, across reconnects);
//! * **sync then read** — a sync is placed after its call, so the reads
//!   after it see every write that completed before the sync was called;
//! * **watch before data** — a write's triggers queue events for the
//!   sessions watching; when a session's step is placed, exactly the
//!   events it received before that step's reply must be queued (so no
//!   reply shows data whose event has not been received, and no event
//!   arrives for a change not yet made), in order (events in zxid order).
//!
//! Indeterminate writes (ConnectionLoss, or a session that ended while the
//! write was in flight) may take effect at any time after their call, or
//! never; a session's end (expiry) likewise. Under **write FIFO** such a
//! write takes effect before every write its session issued after it, or
//! never (a rank per write, in issue order).
//!
//! Stat fields that carry zxids or the leader's clock (czxid, mzxid,
//! pzxid, ctime, mtime) are not compared: the model numbers its own txns,
//! and a reply's zxid is only a hint for the search's order.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::sync::Arc;

use crate::check::lin::{self, Outcome, Step};
use crate::proto::{EventType, MultiResult, Op, Reply, SessionId, Stat, WatchEvent, ZkError, Zxid};
use crate::tree::{DataTree, Node, ReadRef, TreeConfig, WatchTable};

/// Which rules the model enforces: all of them for the contract; fewer to
/// find which guarantee a failing history breaks first.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Rules {
    /// Reads (and syncs, reconnects) take part; off: writes alone.
    pub reads: bool,
    /// A sync is placed after its call; off: after the session's previous
    /// step, like a read.
    pub sync_fresh: bool,
    /// Received events are matched against the triggers.
    pub events: bool,
    /// Events must arrive in trigger order; off: as a multiset per step.
    pub event_order: bool,
    /// A session's writes take effect in the order it issued them: a
    /// write of unknown outcome before every write the session issued
    /// after it, or never; off: at any time after its call.
    pub write_fifo: bool,
    /// A read is placed after every write that completed more than its
    /// session's staleness bound before the read was called
    /// ([`super::SessionLog::staleness_us`]); off: any write that
    /// completed before its call may follow it.
    pub timely: bool,
    /// A write placed after its session's [`SessionSpec::closes_first`]
    /// sessions closed: once a client was told its session expired, the
    /// close takes effect before every write the ensemble sequences late
    /// enough after that ([`super::SessionLog::expiry_bound_us`]); off: an
    /// expired session may end at any time after its last step, or never.
    pub expiry: bool,
}

impl Rules {
    /// Every guarantee.
    pub const ALL: Rules = Rules {
        reads: true,
        sync_fresh: true,
        events: true,
        event_order: true,
        write_fifo: true,
        timely: true,
        expiry: true,
    };
}

/// One of a session's steps, in the order the client saw them complete.
///
/// It borrows the op and the reply from the history it was read from
/// (`'h`): the check copies none of a history's data.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum StepKind<'h> {
    /// exists / getData / getChildren with the reply the client got.
    Read {
        /// The read.
        op: &'h Op,
        /// Its reply.
        reply: Result<&'h Reply, ZkError>,
    },
    /// A sync that completed.
    Sync,
    /// A write with the server's definite answer (success or error).
    Write {
        /// The write.
        op: &'h Op,
        /// Its reply.
        reply: Result<&'h Reply, ZkError>,
        /// Its place among the session's writes in the order they were
        /// issued, those of unknown outcome included.
        rank: u32,
    },
    /// close() answered by the server: the session's ephemerals go.
    Close,
    /// The connection broke.
    Disconnected,
    /// The session (re)attached to a server, which replays its watches.
    Connected,
}

/// What the search places: a session's step, or an effect at an unknown
/// time.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Input<'h> {
    /// The `k`th step of session `session`; `events` are the watch events
    /// the client received after the previous step and before this one.
    Step {
        /// The session's index.
        session: usize,
        /// The step's index within the session.
        k: u32,
        /// What the step is.
        kind: StepKind<'h>,
        /// Events received just before it, in order.
        events: Vec<&'h WatchEvent>,
    },
    /// A write whose outcome the client never learned: applied here, or
    /// (placed last, or after its session ended) never.
    Indeterminate {
        /// The session's index.
        session: usize,
        /// The write.
        op: &'h Op,
        /// Its place among the session's writes in the order they were
        /// issued ([`StepKind::Write`]'s `rank`).
        rank: u32,
    },
    /// The session's end on the servers (expiry, or a close whose answer
    /// was lost): its ephemerals go; may also never happen.
    Expire {
        /// The session's index.
        session: usize,
    },
    /// After the session's last step: `events` were received after it
    /// (they must have been triggered).
    End {
        /// The session's index.
        session: usize,
        /// Events received after the last step, in order.
        events: Vec<&'h WatchEvent>,
    },
}

impl Input<'_> {
    /// The session it belongs to.
    pub fn session(&self) -> usize {
        match self {
            Input::Step { session, .. }
            | Input::Indeterminate { session, .. }
            | Input::Expire { session }
            | Input::End { session, .. } => *session,
        }
    }
}

/// A session in the model.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct SessionSpec {
    /// The session's id (ephemeral owners carry it).
    pub id: SessionId,
    /// Its timeout, as the tree records it.
    pub timeout_ms: u64,
    /// How many steps it has.
    pub steps: u32,
    /// Whether it received events after its last step (an
    /// [`Input::End`] checks them, before the session can end).
    pub trailing: bool,
    /// Under [`Rules::expiry`]: before its `k`th step, the sessions
    /// (indices) whose close must have taken effect, by `k` ascending.
    pub closes_first: Vec<(u32, Vec<usize>)>,
}

/// The client's watch tables (data, exist, child), as the client keeps
/// them across reconnects.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
struct Watches {
    data: BTreeSet<String>,
    exist: BTreeSet<String>,
    child: BTreeSet<String>,
}

/// Which client tables an event consumed (to put them back if the event
/// never reached the client).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
struct Consumed {
    data: bool,
    exist: bool,
    child: bool,
}

impl Watches {
    /// Whether [`Watches::fire`] would deliver `e` (it changes nothing).
    fn fires(&self, e: &WatchEvent) -> bool {
        let p = &e.path;
        match e.event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                self.data.contains(p) || self.exist.contains(p)
            }
            EventType::NodeChildrenChanged => self.child.contains(p),
            EventType::NodeDeleted => {
                self.data.contains(p) || self.exist.contains(p) || self.child.contains(p)
            }
        }
    }

    /// The client's delivery rule: the event consumes the tables it
    /// applies to; delivered only if it consumed a watch.
    fn fire(&mut self, e: &WatchEvent) -> Option<Consumed> {
        let p = &e.path;
        let c = match e.event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => Consumed {
                data: self.data.remove(p),
                exist: self.exist.remove(p),
                child: false,
            },
            EventType::NodeChildrenChanged => Consumed {
                child: self.child.remove(p),
                ..Consumed::default()
            },
            EventType::NodeDeleted => Consumed {
                data: self.data.remove(p),
                exist: self.exist.remove(p),
                child: self.child.remove(p),
            },
        };
        (c.data || c.exist || c.child).then_some(c)
    }

    fn restore(&mut self, path: &str, c: Consumed) {
        if c.data {
            self.data.insert(path.to_owned());
        }
        if c.exist {
            self.exist.insert(path.to_owned());
        }
        if c.child {
            self.child.insert(path.to_owned());
        }
    }
}

/// One session's part of the state.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Session {
    next_step: u32,
    /// The model zxid the session has seen (its client's lastZxid).
    seen: Zxid,
    watches: Watches,
    /// Triggered for this session, not yet received.
    pending: VecDeque<(WatchEvent, Consumed)>,
    connected: bool,
    /// Its closeSession is applied: nothing of it can happen any more.
    closed: bool,
    /// Past its last step and its trailing events.
    ended: bool,
    /// How many of its writes, by rank, are decided: one past the rank of
    /// the last that took effect (under [`Rules::write_fifo`]); a write
    /// of a lower rank can no longer take effect.
    writes_done: u32,
}

/// The model's state: the tree and every session's part.
///
/// A search keeps one state per configuration and makes a new one at
/// every step it tries, where a step changes the tree or one or two
/// sessions: the parts are shared ([`Arc`]) between the states that have
/// them, and copied when a step changes them ([`Arc::make_mut`]). A
/// tree copies in O(1) and hashes in O(sessions) (its znodes through the
/// digest it keeps), so neither a copy nor a hash of a state walks the
/// znodes.
#[derive(Clone, Debug)]
pub struct State {
    tree: Arc<DataTree>,
    sessions: Vec<Arc<Session>>,
}

impl State {
    /// The tree at this point.
    pub fn tree(&self) -> &DataTree {
        &self.tree
    }

    /// The tree, to change (copied first if another state shares it).
    fn tree_mut(&mut self) -> &mut DataTree {
        Arc::make_mut(&mut self.tree)
    }

    /// The index of session `session`'s next step (how many of its steps
    /// are placed).
    pub fn next_step(&self, session: usize) -> u32 {
        self.sessions[session].next_step
    }

    /// How many of session `session`'s writes, in issue order, can no
    /// longer take effect ([`Rules::write_fifo`]).
    pub fn writes_done(&self, session: usize) -> u32 {
        self.sessions[session].writes_done
    }
}

/// Equal trees and sessions. A shared tree is equal to itself without a
/// look; trees of different digests are told apart by the tree's own
/// comparison without a look at their znodes.
impl PartialEq for State {
    fn eq(&self, other: &State) -> bool {
        (Arc::ptr_eq(&self.tree, &other.tree) || self.tree == other.tree)
            && self.sessions == other.sessions
    }
}

impl Eq for State {}

impl Hash for State {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.tree.hash(h);
        self.sessions.hash(h);
    }
}

/// The bytes a search counts for each state it keeps, against its memory
/// bound ([`lin::Model::state_bytes`]): what a state took when it held its
/// tree and sessions by value. The bound then stops a search at the step
/// it did before the parts were shared, so that no verdict moved.
pub(crate) const STATE_BYTES: usize =
    std::mem::size_of::<CountedTree>() + std::mem::size_of::<Vec<Session>>();

/// [`DataTree`]'s fields as they were when [`STATE_BYTES`] was fixed (the
/// znodes in a `BTreeMap`, no digest): counted by this shape rather than
/// the tree's own, so that a change of the tree's layout moves no search's
/// stopping step, and so no verdict. Never made; its size alone is used.
#[allow(dead_code)]
struct CountedTree {
    nodes: BTreeMap<Arc<str>, Arc<Node>>,
    sessions: BTreeMap<SessionId, u64>,
    ephemerals: BTreeMap<SessionId, BTreeSet<String>>,
    last_zxid: Zxid,
    config: TreeConfig,
}

/// The contract's sequential model over a given set of sessions; it
/// places [`Input`]s that borrow from a history (`'h`).
#[derive(Clone, Debug)]
pub struct ZkModel<'h> {
    /// The sessions, by index.
    pub sessions: Vec<SessionSpec>,
    /// Which rules hold.
    pub rules: Rules,
    history: PhantomData<&'h ()>,
}

impl<'h> ZkModel<'h> {
    /// The model of `sessions` under `rules`.
    pub fn new(sessions: Vec<SessionSpec>, rules: Rules) -> ZkModel<'h> {
        ZkModel {
            sessions,
            rules,
            history: PhantomData,
        }
    }

    /// The initial state: a fresh tree with every session created.
    pub fn init(&self) -> State {
        let mut tree = DataTree::default();
        for s in &self.sessions {
            tree.create_session(0, s.id, s.timeout_ms);
        }
        let session = Arc::new(Session {
            next_step: 0,
            seen: 0,
            watches: Watches::default(),
            pending: VecDeque::new(),
            connected: false,
            closed: false,
            ended: false,
            writes_done: 0,
        });
        State {
            tree: Arc::new(tree),
            sessions: vec![session; self.sessions.len()],
        }
    }

    /// Places `input` in `state`: the next state, or `None` if it cannot
    /// happen here.
    pub fn step(&self, state: &State, input: &Input<'h>) -> Option<State> {
        let mut next = state.clone();
        self.step_in_place(&mut next, input).then_some(next)
    }

    /// Places `input` in `st` itself: `true` if it can happen here (`st`
    /// is then the next state); `false` if not, and `st` is unchanged (a
    /// refused write is taken back with the tree's undo journal). The fast
    /// path steps this way: copying the state at every step was most of
    /// the check's cost.
    pub fn step_in_place(&self, st: &mut State, input: &Input<'h>) -> bool {
        match input {
            Input::Step {
                session,
                k,
                kind,
                events,
            } => {
                let s = &st.sessions[*session];
                if s.next_step != *k || s.closed {
                    return false;
                }
                if self.rules.expiry && !self.closes_done(st, *session, *k) {
                    return false;
                }
                if !self.session_step(st, *session, kind, events) {
                    return false;
                }
                Arc::make_mut(&mut st.sessions[*session]).next_step += 1;
                true
            }
            Input::Indeterminate { session, op, rank } => {
                let s = &st.sessions[*session];
                // A closed session's: never happened (its end came first).
                // Under write FIFO, once a write the session issued after
                // it took effect, it never will (ZooKeeper's leader refuses
                // a write from a connection the session has moved away
                // from, SessionMoved, so a late copy cannot overtake).
                if s.closed || (self.rules.write_fifo && *rank < s.writes_done) {
                    return true;
                }
                // Its outcome is unknown: any reply will do.
                let _ = self.write(st, *session, op);
                if self.rules.write_fifo {
                    Arc::make_mut(&mut st.sessions[*session]).writes_done = rank + 1;
                }
                true
            }
            Input::Expire { session } => {
                let s = &st.sessions[*session];
                if s.closed {
                    return true;
                }
                let spec = &self.sessions[*session];
                // Events it received came before its end.
                if s.next_step != spec.steps || (spec.trailing && !s.ended) {
                    return false;
                }
                self.close(st, *session);
                true
            }
            Input::End { session, events } => {
                let s = &st.sessions[*session];
                if s.next_step != self.sessions[*session].steps || s.ended {
                    return false;
                }
                let s = Arc::make_mut(&mut st.sessions[*session]);
                if self.rules.events && !take_received(s, events, self.rules.event_order, false) {
                    return false;
                }
                s.ended = true;
                s.pending.clear();
                true
            }
        }
    }

    /// Whether every session whose close must precede session `i`'s `k`th
    /// step has closed ([`SessionSpec::closes_first`]).
    fn closes_done(&self, st: &State, i: usize, k: u32) -> bool {
        let first = &self.sessions[i].closes_first;
        match first.binary_search_by_key(&k, |(at, _)| *at) {
            Ok(at) => first[at].1.iter().all(|&t| st.sessions[t].closed),
            Err(_) => true,
        }
    }

    /// One session step, in place; `false` (and `st` unchanged) if it
    /// cannot happen here.
    fn session_step(
        &self,
        st: &mut State,
        i: usize,
        kind: &StepKind<'h>,
        events: &[&'h WatchEvent],
    ) -> bool {
        let rules = self.rules;
        match kind {
            StepKind::Read { op, reply } => {
                if !same_read(st.tree.read_ref(op), *reply) {
                    return false;
                }
                let watch = matches!(
                    op,
                    Op::Exists { watch: true, .. }
                        | Op::GetData { watch: true, .. }
                        | Op::GetChildren { watch: true, .. }
                );
                let last = st.tree.last_zxid();
                let s = Arc::make_mut(&mut st.sessions[i]);
                if rules.events {
                    if !take_received(s, events, rules.event_order, true) {
                        return false;
                    }
                    if watch && reply.is_ok() {
                        let table = match (op, reply) {
                            (Op::Exists { .. }, Ok(Reply::Exists(None))) => &mut s.watches.exist,
                            (Op::GetChildren { .. }, _) => &mut s.watches.child,
                            _ => &mut s.watches.data,
                        };
                        table.insert(op_path(op).to_owned());
                    }
                }
                s.seen = s.seen.max(last);
            }
            StepKind::Sync => {
                let last = st.tree.last_zxid();
                let s = Arc::make_mut(&mut st.sessions[i]);
                if rules.events && !take_received(s, events, rules.event_order, true) {
                    return false;
                }
                s.seen = s.seen.max(last);
            }
            StepKind::Write { op, reply, rank } => {
                // A write of unknown outcome the session issued after this
                // one took effect already.
                if rules.write_fifo && *rank < st.sessions[i].writes_done {
                    return false;
                }
                let txn = st
                    .tree
                    .prepare(st.tree.next_zxid(), 0, self.sessions[i].id, op);
                let (applied, undo) = st.tree_mut().apply_undoable(&txn);
                let model = applied.reply.expect("a client write's txn carries a reply");
                if !same_reply(model.as_ref().map_err(|e| *e), *reply) {
                    st.tree_mut().undo(undo);
                    return false;
                }
                if rules.events {
                    let fired = self.fire(st, &applied.triggers);
                    let s = Arc::make_mut(&mut st.sessions[i]);
                    if !take_received(s, events, rules.event_order, true) {
                        // Take back what the write queued, newest first.
                        for &(j, t, c) in fired.iter().rev() {
                            let s = Arc::make_mut(&mut st.sessions[j]);
                            s.pending.pop_back();
                            s.watches.restore(&applied.triggers[t].path, c);
                        }
                        st.tree_mut().undo(undo);
                        return false;
                    }
                }
                let last = st.tree.last_zxid();
                let s = Arc::make_mut(&mut st.sessions[i]);
                s.seen = s.seen.max(last);
                if rules.write_fifo {
                    s.writes_done = rank + 1;
                }
            }
            StepKind::Close => {
                if rules.events
                    && !take_received(
                        Arc::make_mut(&mut st.sessions[i]),
                        events,
                        rules.event_order,
                        false,
                    )
                {
                    return false;
                }
                self.close(st, i);
            }
            StepKind::Disconnected => {
                let s = Arc::make_mut(&mut st.sessions[i]);
                if rules.events {
                    if !take_received(s, events, rules.event_order, false) {
                        return false;
                    }
                    // What was triggered but never arrived: the client
                    // still holds those watches and will send them again.
                    for (e, c) in std::mem::take(&mut s.pending) {
                        s.watches.restore(&e.path, c);
                    }
                }
                s.connected = false;
            }
            StepKind::Connected => {
                let tree = &st.tree;
                let s = Arc::make_mut(&mut st.sessions[i]);
                if rules.events {
                    if !take_received(s, events, rules.event_order, true) {
                        return false;
                    }
                    // The server replays the client's watches against its
                    // state (SetWatches with the client's lastZxid).
                    for e in replay(&s.watches, tree, s.seen) {
                        if let Some(c) = s.watches.fire(&e) {
                            s.pending.push_back((e, c));
                        }
                    }
                }
                s.connected = true;
            }
        }
        true
    }

    /// Applies a write of session `i` at the next model zxid, fires its
    /// triggers, and returns the tree's reply.
    fn write(&self, st: &mut State, i: usize, op: &Op) -> Result<Reply, ZkError> {
        let txn = st
            .tree
            .prepare(st.tree.next_zxid(), 0, self.sessions[i].id, op);
        let applied = st.tree_mut().apply(&txn);
        self.fire(st, &applied.triggers);
        applied.reply.expect("a client write's txn carries a reply")
    }

    fn close(&self, st: &mut State, i: usize) {
        let triggers = st.tree_mut().close_session(0, self.sessions[i].id);
        let s = Arc::make_mut(&mut st.sessions[i]);
        s.closed = true;
        s.pending.clear();
        s.watches = Watches::default();
        self.fire(st, &triggers);
    }

    /// Queues each trigger for every connected session it reaches; returns
    /// what it queued, in order (session, trigger index, the watches the
    /// event consumed), so that a refused step can take it back.
    fn fire(&self, st: &mut State, triggers: &[WatchEvent]) -> Vec<(usize, usize, Consumed)> {
        let mut fired = Vec::new();
        if !self.rules.events {
            return fired;
        }
        for (j, s) in st.sessions.iter_mut().enumerate() {
            // A session that no trigger reaches stays shared.
            if s.closed || s.ended || !s.connected || !triggers.iter().any(|e| s.watches.fires(e)) {
                continue;
            }
            let s = Arc::make_mut(s);
            for (t, e) in triggers.iter().enumerate() {
                if let Some(c) = s.watches.fire(e) {
                    s.pending.push_back((e.clone(), c));
                    fired.push((j, t, c));
                }
            }
        }
        fired
    }
}

impl<'h> lin::Model for ZkModel<'h> {
    type State = State;
    type Input = Input<'h>;
    type Output = ();

    fn init(&self) -> State {
        ZkModel::init(self)
    }

    fn state_bytes(&self) -> usize {
        STATE_BYTES
    }

    fn step(&self, state: &State, input: &Input<'h>, _: Outcome<&()>) -> Step<State> {
        match ZkModel::step(self, state, input) {
            Some(next) => Step::To(next),
            None => Step::Impossible,
        }
    }

    fn describe_op(&self, input: &Input<'h>, _: Outcome<&()>) -> String {
        let who = |i: usize| format!("session {}", self.sessions[i].id);
        match input {
            Input::Step {
                session, k, kind, ..
            } => {
                let what = match kind {
                    StepKind::Read { op, reply } | StepKind::Write { op, reply, .. } => {
                        format!("{} -> {}", describe(op), describe_reply(*reply))
                    }
                    StepKind::Sync => "sync".to_owned(),
                    StepKind::Close => "close".to_owned(),
                    StepKind::Disconnected => "Disconnected".to_owned(),
                    StepKind::Connected => "Connected".to_owned(),
                };
                format!("{} step {k}: {what}", who(*session))
            }
            Input::Indeterminate { session, op, .. } => {
                format!("{}: {} (outcome unknown)", who(*session), describe(op))
            }
            Input::Expire { session } => format!("{} ends on the servers", who(*session)),
            Input::End { session, events } => format!(
                "{}: events after its last step: {}",
                who(*session),
                events
                    .iter()
                    .map(|e| format!("{:?} {}", e.event_type, e.path))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    fn describe_state(&self, state: &State) -> String {
        describe_tree(&state.tree)
    }
}

/// An op in words: its name and path (`create /lock/x-`).
pub fn describe(op: &Op) -> String {
    match op {
        Op::Multi(ops) => format!(
            "multi [{}]",
            ops.iter()
                .map(|o| o.path().to_owned())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        op => format!("{} {}", op.name(), op_path(op)),
    }
}

/// A reply in words, short.
pub fn describe_reply(r: Result<&Reply, ZkError>) -> String {
    match r {
        Err(e) => format!("{e:?}"),
        Ok(Reply::Create { path, .. }) => path.clone(),
        Ok(Reply::Exists(None)) => "none".to_owned(),
        Ok(Reply::Exists(Some(s))) => format!("version {}", s.version),
        Ok(Reply::GetData { data, stat }) => {
            format!("{} bytes, version {}", data.len(), stat.version)
        }
        Ok(Reply::SetData(s)) => format!("version {}", s.version),
        Ok(Reply::GetChildren { children, .. }) => {
            let mut c = children.clone();
            c.sort();
            format!("[{}]", c.join(", "))
        }
        Ok(Reply::Multi(results)) => format!("{} results", results.len()),
        Ok(other) => format!("{other:?}"),
    }
}

/// The tree's znodes outside /zookeeper, with their versions; long trees
/// cut short.
pub fn describe_tree(tree: &DataTree) -> String {
    const MOST: usize = 40;
    let mut out = Vec::new();
    let mut stack = vec!["/".to_owned()];
    let mut n = 0usize;
    while let Some(p) = stack.pop() {
        let Some(node) = tree.node(&p) else { continue };
        if p != "/" {
            n += 1;
            if out.len() < MOST {
                out.push(format!("{p} v{}", node.version));
            }
        }
        for c in node.children.iter().rev() {
            if p == "/" && c == "zookeeper" {
                continue;
            }
            stack.push(crate::path::join(&p, c));
        }
    }
    if n > MOST {
        out.push(format!("... {} more", n - MOST));
    }
    if out.is_empty() {
        "empty".to_owned()
    } else {
        out.join("; ")
    }
}

/// The events a client received before a step must be exactly what was
/// triggered for it and not yet received (`exact`), or a prefix of it
/// (before a disconnect, a close or the end, the rest may never arrive).
/// Takes them off the session's pending events; `false` (and nothing
/// taken) if they do not match.
fn take_received(s: &mut Session, received: &[&WatchEvent], ordered: bool, exact: bool) -> bool {
    if exact && received.len() != s.pending.len() {
        return false;
    }
    if received.len() > s.pending.len() {
        return false;
    }
    if ordered {
        if !received.iter().zip(&s.pending).all(|(r, (p, _))| *r == p) {
            return false;
        }
        s.pending.drain(..received.len());
    } else {
        // Match every received event to a distinct pending one first, so
        // that a mismatch leaves the session as it was.
        let mut taken = vec![false; s.pending.len()];
        for r in received {
            let free = s
                .pending
                .iter()
                .zip(&taken)
                .position(|((p, _), used)| !used && p == *r);
            match free {
                Some(at) => taken[at] = true,
                None => return false,
            }
        }
        let mut at = 0;
        s.pending.retain(|_| {
            at += 1;
            !taken[at - 1]
        });
    }
    true
}

/// The server's SetWatches replay of the client's watches against `tree`
/// (the tree's own [`WatchTable::set_watches`], on a table that is thrown
/// away: only its events matter here).
fn replay(w: &Watches, tree: &DataTree, relative: Zxid) -> Vec<WatchEvent> {
    let list = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>();
    WatchTable::<u8>::new().set_watches(
        0,
        tree,
        relative,
        &list(&w.data),
        &list(&w.exist),
        &list(&w.child),
    )
}

fn op_path(op: &Op) -> &str {
    match op {
        Op::Create { path, .. }
        | Op::Delete { path, .. }
        | Op::Exists { path, .. }
        | Op::GetData { path, .. }
        | Op::SetData { path, .. }
        | Op::GetChildren { path, .. }
        | Op::Sync { path } => path,
        Op::Multi(_) => "",
    }
}

/// Whether two stats are the same as the model compares them: the fields
/// that carry zxids or the leader's clock are left out.
fn same_stat(x: &Stat, y: &Stat) -> bool {
    x.version == y.version
        && x.cversion == y.cversion
        && x.aversion == y.aversion
        && x.ephemeral_owner == y.ephemeral_owner
        && x.data_length == y.data_length
        && x.num_children == y.num_children
}

/// Whether what the tree's read sees is the recorded reply `seen`, as
/// [`same_reply`] compares them, without building the tree's reply: the
/// fast path compares one at every read it tries.
pub fn same_read(tree: Result<ReadRef<'_>, ZkError>, seen: Result<&Reply, ZkError>) -> bool {
    match (tree, seen) {
        (Err(x), Err(y)) => x == y,
        (Ok(ReadRef::Exists(s)), Ok(Reply::Exists(t))) => match (s, t) {
            (Some(s), Some(t)) => same_stat(&s, t),
            (None, None) => true,
            _ => false,
        },
        (Ok(ReadRef::Data { data, stat }), Ok(Reply::GetData { data: d, stat: t })) => {
            data == d.as_slice() && same_stat(&stat, t)
        }
        (
            Ok(ReadRef::Children { children, stat }),
            Ok(Reply::GetChildren {
                children: c,
                stat: t,
            }),
        ) => {
            // The same names in any order: a sorted reply is compared in
            // step with the tree's sorted set, any other sorted by
            // reference (the names themselves are never copied).
            same_stat(&stat, t)
                && children.len() == c.len()
                && if c.windows(2).all(|w| w[0] < w[1]) {
                    children.iter().zip(c).all(|(x, y)| x == y)
                } else {
                    let mut sorted: Vec<&String> = c.iter().collect();
                    sorted.sort_unstable();
                    children.iter().zip(sorted).all(|(x, y)| x == y)
                }
        }
        (Ok(ReadRef::Sync), Ok(Reply::Sync)) => true,
        _ => false,
    }
}

/// Whether two replies are the same as the model compares them (what
/// [`normalize`] keeps), without building either normalized copy: the fast
/// path compares a reply at every step it tries.
pub fn same_reply(a: Result<&Reply, ZkError>, b: Result<&Reply, ZkError>) -> bool {
    let stat = same_stat;
    let opt_stat = |x: &Option<Stat>, y: &Option<Stat>| match (x, y) {
        (Some(x), Some(y)) => stat(x, y),
        (None, None) => true,
        _ => false,
    };
    match (a, b) {
        (Err(x), Err(y)) => x == y,
        (Ok(x), Ok(y)) => match (x, y) {
            (Reply::Create { path: p, stat: s }, Reply::Create { path: q, stat: t }) => {
                p == q && stat(s, t)
            }
            (Reply::Delete, Reply::Delete) | (Reply::Sync, Reply::Sync) => true,
            (Reply::Exists(s), Reply::Exists(t)) => opt_stat(s, t),
            (Reply::GetData { data: d, stat: s }, Reply::GetData { data: e, stat: t }) => {
                d == e && stat(s, t)
            }
            (Reply::SetData(s), Reply::SetData(t)) => stat(s, t),
            (
                Reply::GetChildren {
                    children: c,
                    stat: s,
                },
                Reply::GetChildren {
                    children: d,
                    stat: t,
                },
            ) => {
                // The same names in any order (sorted copies only when the
                // orders differ).
                stat(s, t)
                    && c.len() == d.len()
                    && (c == d || {
                        let (mut c, mut d) = (c.clone(), d.clone());
                        c.sort_unstable();
                        d.sort_unstable();
                        c == d
                    })
            }
            (Reply::Multi(r), Reply::Multi(q)) => {
                r.len() == q.len()
                    && r.iter().zip(q).all(|(x, y)| match (x, y) {
                        (
                            MultiResult::Create { path: p, stat: s },
                            MultiResult::Create { path: q, stat: t },
                        ) => p == q && opt_stat(s, t),
                        (MultiResult::SetData { stat: s }, MultiResult::SetData { stat: t }) => {
                            stat(s, t)
                        }
                        (x, y) => x == y,
                    })
            }
            _ => false,
        },
        _ => false,
    }
}

/// A reply as the model compares it: Stat fields holding zxids or the
/// leader's clock zeroed, children sorted.
pub fn normalize(r: &Result<Reply, ZkError>) -> Result<Reply, ZkError> {
    let stat = |s: &Stat| Stat {
        czxid: 0,
        mzxid: 0,
        pzxid: 0,
        ctime: 0,
        mtime: 0,
        ..*s
    };
    r.as_ref().map_err(|e| *e).map(|reply| match reply {
        Reply::Create { path, stat: s } => Reply::Create {
            path: path.clone(),
            stat: stat(s),
        },
        Reply::Delete => Reply::Delete,
        Reply::Exists(s) => Reply::Exists(s.as_ref().map(stat)),
        Reply::GetData { data, stat: s } => Reply::GetData {
            data: data.clone(),
            stat: stat(s),
        },
        Reply::SetData(s) => Reply::SetData(stat(s)),
        Reply::GetChildren { children, stat: s } => {
            let mut children = children.clone();
            children.sort();
            Reply::GetChildren {
                children,
                stat: stat(s),
            }
        }
        Reply::Sync => Reply::Sync,
        Reply::Multi(results) => Reply::Multi(
            results
                .iter()
                .map(|m| match m {
                    MultiResult::Create { path, stat: s } => MultiResult::Create {
                        path: path.clone(),
                        stat: s.as_ref().map(stat),
                    },
                    MultiResult::SetData { stat: s } => MultiResult::SetData { stat: stat(s) },
                    other => other.clone(),
                })
                .collect(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::CreateMode;
    use rustc_hash::FxHasher;

    /// The inputs borrow their ops, replies and events from a history; a
    /// test's few are leaked so that they live as long as the test.
    fn leak<T>(t: T) -> &'static T {
        Box::leak(Box::new(t))
    }

    fn owned(r: Result<Reply, ZkError>) -> Result<&'static Reply, ZkError> {
        r.map(leak)
    }

    fn leaked_changed(path: &str) -> &'static WatchEvent {
        leak(changed(path))
    }

    fn model(n: usize) -> ZkModel<'static> {
        ZkModel::new(
            (0..n)
                .map(|i| SessionSpec {
                    id: SessionId(i as i64 + 1),
                    timeout_ms: 10_000,
                    steps: 100,
                    trailing: false,
                    closes_first: Vec::new(),
                })
                .collect(),
            Rules::ALL,
        )
    }

    fn create(path: &str) -> Op {
        Op::Create {
            path: path.into(),
            data: b"x".to_vec(),
            mode: CreateMode::Persistent,
        }
    }

    fn step(
        session: usize,
        k: u32,
        kind: StepKind<'static>,
        events: Vec<&'static WatchEvent>,
    ) -> Input<'static> {
        Input::Step {
            session,
            k,
            kind,
            events,
        }
    }

    /// Runs `inputs` in order, returning the state or the index of the first
    /// that cannot happen.
    fn run(m: &ZkModel<'static>, inputs: &[Input<'static>]) -> Result<State, usize> {
        let mut s = m.init();
        for (i, input) in inputs.iter().enumerate() {
            s = m.step(&s, input).ok_or(i)?;
        }
        Ok(s)
    }

    fn reply_of(
        m: &ZkModel<'static>,
        before: &[Input<'static>],
        session: usize,
        op: &Op,
    ) -> Result<Reply, ZkError> {
        let mut s = run(m, before).expect("prefix runs");
        m.write(&mut s, session, op)
    }

    fn changed(path: &str) -> WatchEvent {
        WatchEvent {
            event_type: EventType::NodeDataChanged,
            path: path.into(),
        }
    }

    #[test]
    fn a_write_must_get_the_trees_reply() {
        let m = model(1);
        let ok = reply_of(&m, &[], 0, &create("/a"));
        let connected = step(0, 0, StepKind::Connected, vec![]);
        let good = step(
            0,
            1,
            StepKind::Write {
                op: leak(create("/a")),
                reply: owned(ok.clone()),
                rank: 0,
            },
            vec![],
        );
        assert!(run(&m, &[connected.clone(), good]).is_ok());
        let wrong = step(
            0,
            1,
            StepKind::Write {
                op: leak(create("/a")),
                reply: owned(Err(ZkError::NodeExists)),
                rank: 0,
            },
            vec![],
        );
        assert_eq!(run(&m, &[connected, wrong]).err(), Some(1));
    }

    #[test]
    fn steps_go_in_session_order() {
        let m = model(1);
        let out_of_order = step(0, 1, StepKind::Connected, vec![]);
        assert_eq!(run(&m, &[out_of_order]).err(), Some(0));
    }

    #[test]
    fn a_reply_after_a_trigger_needs_the_event_first() {
        let m = model(2);
        let made = reply_of(&m, &[], 0, &create("/a"));
        let set = Op::SetData {
            path: "/a".into(),
            data: b"y".to_vec(),
            version: -1,
        };
        let mut prefix = vec![
            step(0, 0, StepKind::Connected, vec![]),
            step(1, 0, StepKind::Connected, vec![]),
            step(
                0,
                1,
                StepKind::Write {
                    op: leak(create("/a")),
                    reply: owned(made),
                    rank: 0,
                },
                vec![],
            ),
        ];
        let read = Op::GetData {
            path: "/a".into(),
            watch: true,
        };
        let (seen, _) = run(&m, &prefix).unwrap().tree.read(&read);
        prefix.push(step(
            1,
            1,
            StepKind::Read {
                op: leak(read),
                reply: owned(seen),
            },
            vec![],
        ));
        let set_reply = reply_of(&m, &prefix, 0, &set);
        prefix.push(step(
            0,
            2,
            StepKind::Write {
                op: leak(set),
                reply: owned(set_reply),
                rank: 1,
            },
            vec![],
        ));
        let read_again = Op::Exists {
            path: "/a".into(),
            watch: false,
        };
        let (now, _) = run(&m, &prefix).unwrap().tree.read(&read_again);
        let after = |events| {
            step(
                1,
                2,
                StepKind::Read {
                    op: leak(read_again.clone()),
                    reply: owned(now.clone()),
                },
                events,
            )
        };
        // The event came first: fine. Missing, or for another path: not.
        assert!(run(
            &m,
            &[prefix.clone(), vec![after(vec![leaked_changed("/a")])]].concat()
        )
        .is_ok());
        let n = prefix.len();
        assert_eq!(
            run(&m, &[prefix.clone(), vec![after(vec![])]].concat()).err(),
            Some(n)
        );
        assert_eq!(
            run(
                &m,
                &[prefix, vec![after(vec![leaked_changed("/b")])]].concat()
            )
            .err(),
            Some(n)
        );
    }

    /// A write whose reply fits but whose events do not is refused, and
    /// everything it did is taken back: the tree, the events it queued
    /// for every session, the watches they consumed.
    #[test]
    fn a_refused_write_is_taken_back_in_place() {
        let m = model(2);
        let made = reply_of(&m, &[], 0, &create("/a"));
        let mut prefix = vec![
            step(0, 0, StepKind::Connected, vec![]),
            step(1, 0, StepKind::Connected, vec![]),
            step(
                0,
                1,
                StepKind::Write {
                    op: leak(create("/a")),
                    reply: owned(made),
                    rank: 0,
                },
                vec![],
            ),
        ];
        let watch = Op::GetData {
            path: "/a".into(),
            watch: true,
        };
        let (seen, _) = run(&m, &prefix).unwrap().tree.read(&watch);
        for (session, k) in [(0, 2), (1, 1)] {
            prefix.push(step(
                session,
                k,
                StepKind::Read {
                    op: leak(watch.clone()),
                    reply: owned(seen.clone()),
                },
                vec![],
            ));
        }
        let set = Op::SetData {
            path: "/a".into(),
            data: b"y".to_vec(),
            version: -1,
        };
        let set_reply = reply_of(&m, &prefix, 0, &set);
        let before = run(&m, &prefix).unwrap();
        let write = |events| {
            step(
                0,
                3,
                StepKind::Write {
                    op: leak(set.clone()),
                    reply: owned(set_reply.clone()),
                    rank: 1,
                },
                events,
            )
        };
        // Session 0's own watch fires before its reply: without the event
        // the step cannot happen, and nothing of it may stay behind.
        let mut tried = before.clone();
        assert!(!m.step_in_place(&mut tried, &write(vec![])));
        assert_eq!(tried, before);
        let mut tried = before.clone();
        assert!(m.step_in_place(&mut tried, &write(vec![leaked_changed("/a")])));
        assert_eq!(
            tried.sessions[1].pending.len(),
            1,
            "session 1's event queued"
        );
        assert!(
            tried.sessions[1].watches.data.is_empty(),
            "its watch consumed"
        );
    }

    /// The state's copy with nothing shared, down to the tree's znodes and
    /// their map: what the tree's kept digest and the shortcuts of
    /// [`State`]'s comparison must agree with.
    fn unshared(s: &State) -> State {
        State {
            tree: Arc::new(s.tree.unshared_for_test()),
            sessions: s
                .sessions
                .iter()
                .map(|x| Arc::new(Session::clone(x)))
                .collect(),
        }
    }

    fn hash_of(s: &State) -> u64 {
        let mut h = FxHasher::default();
        s.hash(&mut h);
        h.finish()
    }

    /// A state counts against the memory bound as many bytes as when it
    /// held a tree of a `BTreeMap` and no digest (112 on 64-bit targets):
    /// the searches stop where they did, and so no verdict moves.
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_state_counts_the_bytes_it_always_did() {
        assert_eq!(STATE_BYTES, 112);
    }

    /// After every step, taken or refused, the state is equal to (and
    /// hashes as) its copy with nothing shared, and its tree keeps its
    /// invariants (its digest is its znodes'); states that differ only in
    /// the tree are unequal.
    #[test]
    fn states_equal_their_unshared_copies() {
        let m = model(2);
        let made = reply_of(&m, &[], 0, &create("/a"));
        let inputs = [
            step(0, 0, StepKind::Connected, vec![]),
            step(1, 0, StepKind::Connected, vec![]),
            // Refused: the reply is not the tree's.
            step(
                0,
                1,
                StepKind::Write {
                    op: leak(create("/a")),
                    reply: owned(Err(ZkError::NodeExists)),
                    rank: 0,
                },
                vec![],
            ),
            step(
                0,
                1,
                StepKind::Write {
                    op: leak(create("/a")),
                    reply: owned(made),
                    rank: 0,
                },
                vec![],
            ),
            Input::Indeterminate {
                session: 1,
                op: leak(create("/b")),
                rank: 0,
            },
        ];
        let mut st = m.init();
        let mut states = vec![st.clone()];
        for input in &inputs {
            let before = st.clone();
            let placed = m.step_in_place(&mut st, input);
            st.tree.check_invariants().unwrap();
            assert_eq!(st, unshared(&st));
            assert_eq!(hash_of(&st), hash_of(&unshared(&st)));
            if placed {
                states.push(st.clone());
            } else {
                assert_eq!(st, before);
            }
        }
        // The last two, given the same sessions (the lost write also
        // counts as session 1's decided write), differ in the tree alone.
        let (a, b) = (&states[states.len() - 2], &states[states.len() - 1]);
        assert_eq!(b.sessions[1].writes_done, 1);
        let mut a = a.clone();
        a.sessions = b.sessions.clone();
        assert_ne!(&a, b);
        assert_ne!(unshared(&a), unshared(b));
    }

    #[test]
    fn a_lost_event_is_replayed_on_reconnect() {
        let m = model(2);
        let made = reply_of(&m, &[], 0, &create("/a"));
        let mut prefix = vec![
            step(0, 0, StepKind::Connected, vec![]),
            step(1, 0, StepKind::Connected, vec![]),
            step(
                0,
                1,
                StepKind::Write {
                    op: leak(create("/a")),
                    reply: owned(made),
                    rank: 0,
                },
                vec![],
            ),
        ];
        let watch = Op::Exists {
            path: "/a".into(),
            watch: true,
        };
        let (seen, _) = run(&m, &prefix).unwrap().tree.read(&watch);
        prefix.push(step(
            1,
            1,
            StepKind::Read {
                op: leak(watch),
                reply: owned(seen),
            },
            vec![],
        ));
        let set = Op::SetData {
            path: "/a".into(),
            data: vec![],
            version: -1,
        };
        let r = reply_of(&m, &prefix, 0, &set);
        prefix.push(step(
            0,
            2,
            StepKind::Write {
                op: leak(set),
                reply: owned(r),
                rank: 1,
            },
            vec![],
        ));
        // Session 1 never got the event: it disconnects, reconnects, and the
        // server's replay gives it the event after Connected.
        prefix.push(step(1, 2, StepKind::Disconnected, vec![]));
        prefix.push(step(1, 3, StepKind::Connected, vec![]));
        let sync = |events| step(1, 4, StepKind::Sync, events);
        assert!(run(
            &m,
            &[prefix.clone(), vec![sync(vec![leaked_changed("/a")])]].concat()
        )
        .is_ok());
        let n = prefix.len();
        assert_eq!(
            run(&m, &[prefix, vec![sync(vec![])]].concat()).err(),
            Some(n)
        );
    }

    #[test]
    fn an_expired_sessions_ephemerals_go_and_it_can_do_nothing_more() {
        let m = model(2);
        let eph = Op::Create {
            path: "/e".into(),
            data: vec![],
            mode: CreateMode::Ephemeral,
        };
        let made = reply_of(&m, &[], 0, &eph);
        let mut inputs = vec![
            step(0, 0, StepKind::Connected, vec![]),
            step(
                0,
                1,
                StepKind::Write {
                    op: leak(eph),
                    reply: owned(made),
                    rank: 0,
                },
                vec![],
            ),
        ];
        let mut m = m;
        m.sessions[0].steps = 2;
        inputs.push(Input::Expire { session: 0 });
        let s = run(&m, &inputs).unwrap();
        assert!(s.tree.node("/e").is_none());
        // A write of the closed session that the client never heard back
        // about did not happen; one it got a reply for cannot come after.
        let late = Input::Indeterminate {
            session: 0,
            op: leak(create("/late")),
            rank: 1,
        };
        let s2 = m.step(&s, &late).unwrap();
        assert!(s2.tree.node("/late").is_none());
    }

    #[test]
    fn normalize_ignores_zxids_times_and_child_order() {
        let stat = Stat {
            czxid: 5,
            mzxid: 6,
            pzxid: 7,
            ctime: 8,
            mtime: 9,
            version: 2,
            ..Stat::default()
        };
        let a = Ok(Reply::GetChildren {
            children: vec!["b".into(), "a".into()],
            stat,
        });
        let b = Ok(Reply::GetChildren {
            children: vec!["a".into(), "b".into()],
            stat: Stat { czxid: 1, ..stat },
        });
        assert_eq!(normalize(&a), normalize(&b));
        let c = Ok(Reply::GetChildren {
            children: vec!["a".into(), "b".into()],
            stat: Stat { version: 3, ..stat },
        });
        assert_ne!(normalize(&a), normalize(&c));
        assert!(same_reply(
            a.as_ref().map_err(|e| *e),
            b.as_ref().map_err(|e| *e)
        ));
        assert!(!same_reply(
            a.as_ref().map_err(|e| *e),
            c.as_ref().map_err(|e| *e)
        ));
    }

    mod same_reply_agrees {
        //! `same_reply` (the fast path's comparison) says exactly what
        //! comparing [`normalize`]d copies says.
        use std::collections::BTreeSet;

        use super::super::{normalize, same_read, same_reply};
        use crate::proto::{MultiResult, Reply, Stat, ZkError};
        use crate::tree::ReadRef;
        use proptest::prelude::*;

        fn stat() -> impl Strategy<Value = Stat> {
            (0..2i64, 0..2i64, 0..2i32, 0..2i32, 0..2i64, 0..2i32).prop_map(
                |(czxid, mtime, version, cversion, ephemeral_owner, num_children)| Stat {
                    czxid,
                    mtime,
                    version,
                    cversion,
                    ephemeral_owner,
                    num_children,
                    ..Stat::default()
                },
            )
        }

        fn reply() -> impl Strategy<Value = Result<Reply, ZkError>> {
            let names = prop::collection::vec(prop::sample::select(&["a", "b", "c"][..]), 0..3)
                .prop_map(|v| v.into_iter().map(str::to_owned).collect::<Vec<_>>());
            let path = prop::sample::select(&["/a", "/b"][..]).prop_map(str::to_owned);
            prop_oneof![
                Just(Err(ZkError::NoNode)),
                Just(Err(ZkError::NodeExists)),
                Just(Ok(Reply::Delete)),
                Just(Ok(Reply::Sync)),
                (path.clone(), stat()).prop_map(|(path, stat)| Ok(Reply::Create { path, stat })),
                prop::option::of(stat()).prop_map(|s| Ok(Reply::Exists(s))),
                (prop::collection::vec(0..2u8, 0..2), stat())
                    .prop_map(|(data, stat)| Ok(Reply::GetData { data, stat })),
                stat().prop_map(|s| Ok(Reply::SetData(s))),
                (names, stat())
                    .prop_map(|(children, stat)| Ok(Reply::GetChildren { children, stat })),
                prop::collection::vec(
                    prop_oneof![
                        (path, prop::option::of(stat()))
                            .prop_map(|(path, stat)| MultiResult::Create { path, stat }),
                        stat().prop_map(|stat| MultiResult::SetData { stat }),
                        Just(MultiResult::Check),
                        Just(MultiResult::Failed(ZkError::BadVersion)),
                    ],
                    0..3
                )
                .prop_map(|r| Ok(Reply::Multi(r))),
            ]
        }

        proptest! {
            #[test]
            fn as_normalize_says(a in reply(), b in reply()) {
                let (x, y) = (a.as_ref().map_err(|e| *e), b.as_ref().map_err(|e| *e));
                prop_assert_eq!(same_reply(x, y), normalize(&a) == normalize(&b));
                prop_assert!(same_reply(x, x));
            }

            /// `same_read` (the tree's read, borrowed) says what comparing
            /// the reply the tree would build says.
            #[test]
            fn same_read_as_the_built_reply_says(
                which in 0..5u8,
                data in prop::collection::vec(0..2u8, 0..2),
                names in prop::collection::btree_set(
                    prop::sample::select(&["a", "b", "c"][..]).prop_map(str::to_owned),
                    0..3,
                ),
                s in stat(),
                exists in any::<bool>(),
                b in reply(),
            ) {
                let children: BTreeSet<String> = names;
                let tree = match which {
                    0 => Err(ZkError::NoNode),
                    1 => Ok(ReadRef::Exists(exists.then_some(s))),
                    2 => Ok(ReadRef::Data { data: &data, stat: s }),
                    3 => Ok(ReadRef::Children { children: &children, stat: s }),
                    _ => Ok(ReadRef::Sync),
                };
                let built = tree.map(ReadRef::to_reply);
                let y = b.as_ref().map_err(|e| *e);
                prop_assert_eq!(
                    same_read(tree, y),
                    same_reply(built.as_ref().map_err(|e| *e), y)
                );
                prop_assert!(same_read(tree, built.as_ref().map_err(|e| *e)));
            }
        }
    }
}
