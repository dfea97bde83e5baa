//! ZooKeeper's data tree, pure and deterministic (docs/ZOOKEEPER.md,
//! "Paths" to "Watches and SetWatches").
//!
//! Two parts:
//! * [`DataTree`], the replicated state: znodes, the session table, and the
//!   last applied zxid. Writes go through [`DataTree::prepare`] (the leader's
//!   prep, deciding a [`Txn`]) and [`DataTree::apply`] (every replica).
//!   Applying returns the watch triggers of the change. Times and session
//!   ids are inputs; nothing here reads a clock or draws randomness.
//! * [`WatchTable`], which belongs to one server and its connections: it
//!   turns triggers into per-connection events, deduplicated as the server
//!   does, and replays SetWatches after a reconnect.
//!
//! Paths are validated at the client boundary ([`crate::path`]), not here.

mod prep;
mod reaper;
mod txn;
mod watch;

pub use prep::Outstanding;
pub use reaper::REAPER_SESSION;
pub use txn::{sequence_suffix, Txn, TxnBody, TxnOp};
pub use watch::WatchTable;

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use imbl::{OrdMap, OrdSet};
use rustc_hash::FxHasher;

use crate::path::{basename, join, parent};
use crate::proto::{
    EventType, MultiResult, Op, Reply, SessionId, Stat, WatchEvent, WatchKind, ZkError, Zxid,
};

/// Who a znode belongs to (its stored ephemeralOwner).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Owner {
    /// A plain node (stored owner 0).
    Persistent,
    /// A session's ephemeral, deleted with that session's closeSession txn.
    Ephemeral(SessionId),
    /// A container (stored owner `i64::MIN`); shown as 0 in its Stat.
    Container,
    /// A TTL node with its time to live in ms; shown as 0 in its Stat.
    Ttl(i64),
}

/// One znode. `child_creates` is ZooKeeper's stored cversion: the parent's
/// sequence counter, bumped by every child create and never by deletes.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Node {
    /// The node's data.
    pub data: Vec<u8>,
    /// The zxid of the create that made the node.
    pub czxid: Zxid,
    /// The zxid of the last successful setData (czxid until then).
    pub mzxid: Zxid,
    /// The zxid of the last child create or delete (czxid until then).
    pub pzxid: Zxid,
    /// The create txn's time in ms.
    pub ctime: i64,
    /// The last successful setData's time in ms (ctime until then).
    pub mtime: i64,
    /// The data version: +1 per successful setData.
    pub version: i32,
    /// The ACL version (-1 on `/zookeeper/config`, as a 3.8.0 server shows).
    pub aversion: i32,
    /// The sequence counter: +1 per child create, never lowered (see above).
    pub child_creates: i32,
    /// Who the node belongs to.
    pub owner: Owner,
    /// The children's names (not full paths).
    pub children: BTreeSet<String>,
}

impl Node {
    fn new(data: Vec<u8>, zxid: Zxid, time_ms: i64, owner: Owner) -> Node {
        Node {
            data,
            czxid: zxid,
            mzxid: zxid,
            pzxid: zxid,
            ctime: time_ms,
            mtime: time_ms,
            version: 0,
            aversion: 0,
            child_creates: 0,
            owner,
            children: BTreeSet::new(),
        }
    }

    /// The Stat a client sees (DataNode.copyStat).
    pub fn stat(&self) -> Stat {
        let num_children = self.children.len() as i32;
        Stat {
            czxid: self.czxid,
            mzxid: self.mzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            version: self.version,
            // creates + deletes = 2·creates − live children.
            cversion: self
                .child_creates
                .wrapping_mul(2)
                .wrapping_sub(num_children),
            aversion: self.aversion,
            ephemeral_owner: match self.owner {
                Owner::Ephemeral(s) => s.0,
                // The server hides the container and TTL markers.
                Owner::Persistent | Owner::Container | Owner::Ttl(_) => 0,
            },
            data_length: self.data.len() as i32,
            num_children,
            pzxid: self.pzxid,
        }
    }
}

/// Server settings that change what the tree accepts.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct TreeConfig {
    /// `zookeeper.extendedTypesEnabled`: TTL nodes allowed (off by default,
    /// as on the Debian server; TTL creates then fail with Unimplemented).
    pub extended_types: bool,
}

/// What applying a txn produced: the reply for the client that sent it
/// (`None` for session txns) and the watch triggers, in order.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Applied {
    /// The reply for the sending client; `None` for createSession and
    /// closeSession txns.
    pub reply: Option<Result<Reply, ZkError>>,
    /// The events the change triggers, in order, for [`WatchTable::fire`].
    pub triggers: Vec<WatchEvent>,
}

/// What [`DataTree::apply_undoable`] changed, to take it back with
/// [`DataTree::undo`]: a model that tries a step in place keeps this
/// instead of a copy of the whole tree (the contract check tries thousands
/// of steps on trees of hundreds of nodes; copying them was most of its
/// cost).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Undo {
    last_zxid: Zxid,
    /// The inverse changes, in the order they were made (undone in
    /// reverse).
    steps: Vec<UndoStep>,
}

#[derive(Clone, PartialEq, Eq, Debug)]
enum UndoStep {
    /// A node was created at this path.
    Created(String),
    /// This node was deleted.
    Deleted(String, Arc<Node>),
    /// A parent's counters before a child create or delete.
    Counters {
        path: String,
        child_creates: i32,
        pzxid: Zxid,
    },
    /// A node's data fields before a setData.
    Data {
        path: String,
        data: Vec<u8>,
        version: i32,
        mzxid: Zxid,
        mtime: i64,
    },
    /// A session was created.
    SessionCreated(SessionId),
    /// A session with this timeout was closed.
    SessionClosed(SessionId, u64),
}

/// A read's answer borrowed from the tree ([`DataTree::read_ref`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReadRef<'t> {
    /// exists: the node's stat, if it exists.
    Exists(Option<Stat>),
    /// getData.
    Data {
        /// The node's data.
        data: &'t [u8],
        /// Its stat.
        stat: Stat,
    },
    /// getChildren: the names, in the tree's (sorted) order.
    Children {
        /// The children's names.
        children: &'t BTreeSet<String>,
        /// The parent's stat.
        stat: Stat,
    },
    /// sync.
    Sync,
}

impl ReadRef<'_> {
    /// The reply a server sends for it.
    pub fn to_reply(self) -> Reply {
        match self {
            ReadRef::Exists(stat) => Reply::Exists(stat),
            ReadRef::Data { data, stat } => Reply::GetData {
                data: data.to_vec(),
                stat,
            },
            ReadRef::Children { children, stat } => Reply::GetChildren {
                children: children.iter().cloned().collect(),
                stat,
            },
            ReadRef::Sync => Reply::Sync,
        }
    }
}

/// The znodes by path, in path order. A persistent map: a copy of the
/// tree shares the map's own B-tree nodes with the original, so copying is
/// O(1) and a change copies only the O(log n) map nodes on its way down
/// (and, with [`Arc::make_mut`], the znode it changes). The contract check
/// copies a tree at each write it tries, on trees of hundreds to thousands
/// of znodes, and its states compare trees that are mostly the same nodes
/// (shared map nodes are skipped by the comparison). Iterated in the same
/// sorted order as a `BTreeMap`, so every run is the same as before.
#[doc(hidden)]
pub type Nodes = OrdMap<Arc<str>, Arc<Node>>;

/// A znode's share of the tree's digest: a fixed 64-bit hash of its path
/// and of every field but its children.
///
/// The idea is ZooKeeper's own (ZOOKEEPER-3114, `DigestCalculator`): the
/// tree's digest is the sum of its nodes' digests, kept up to date at each
/// change by taking the changed node's old digest out and putting its new
/// one in, so that it costs O(1) per change instead of a walk of the tree.
/// The children are left out (as ZooKeeper leaves them out): they are
/// implied by the other nodes' paths, so nothing is lost, and a parent's
/// digest does not grow with its child list nor change when a child is
/// made or deleted other than through its counters.
///
/// The hasher is fixed, never randomly keyed: the digest feeds the tree's
/// [`Hash`], which must be the same in every run of a seed. It is Fx, whose
/// output is then mixed (the SplitMix64 finalizer) so that every bit of a
/// node's digest depends on every input bit and a sum of them spreads over
/// all 64 bits; with SipHash ([`std::hash::DefaultHasher`]) this function
/// was 6 % of the contract check. A collision costs only a full comparison
/// ([`DataTree`]'s `Eq` never trusts the digest alone).
fn node_digest(path: &str, node: &Node) -> u64 {
    // Every field named, so that a field added to Node is a decision here.
    let Node {
        data,
        czxid,
        mzxid,
        pzxid,
        ctime,
        mtime,
        version,
        aversion,
        child_creates,
        owner,
        children: _,
    } = node;
    let mut h = FxHasher::default();
    path.hash(&mut h);
    data.hash(&mut h);
    (czxid, mzxid, pzxid, ctime, mtime).hash(&mut h);
    (version, aversion, child_creates).hash(&mut h);
    owner.hash(&mut h);
    let mut z = h.finish();
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The digest of `nodes` computed from scratch (what [`DataTree`] keeps).
fn digest_of(nodes: &Nodes) -> u64 {
    nodes
        .iter()
        .fold(0u64, |d, (p, n)| d.wrapping_add(node_digest(p, n)))
}

/// The replicated data tree. `Clone + Eq + Hash`: models hold it as state.
/// Cloning is O(1) (the nodes are a persistent map) and hashing O(sessions)
/// (the nodes are hashed through their kept digest).
#[derive(Clone, Debug)]
pub struct DataTree {
    nodes: Nodes,
    /// The wrapping sum of [`node_digest`] over `nodes`, kept at every
    /// change by [`DataTree::insert_node`], [`DataTree::remove_node`] and
    /// [`DataTree::update_node`], the only ways the nodes change (but for
    /// a child list, which is not in it: [`DataTree::update_children`]).
    /// Equal trees have equal digests, however they were reached.
    digest: u64,
    /// Live sessions and their timeouts (createSession/closeSession txns).
    /// Persistent maps, as the nodes are, so that a copy of the tree
    /// allocates nothing: as `BTreeMap`s copied at each write the contract
    /// check tried, these two (the ephemerals' paths above all) were a
    /// tenth of its time once the nodes were shared. Same sorted order.
    sessions: OrdMap<SessionId, u64>,
    /// Each session's ephemerals (DataTree.ephemerals).
    ephemerals: OrdMap<SessionId, OrdSet<String>>,
    last_zxid: Zxid,
    config: TreeConfig,
}

impl Default for DataTree {
    fn default() -> Self {
        DataTree::new(TreeConfig::default())
    }
}

/// A full comparison (a digest is a hash, and hashes collide), but trees
/// of different digests are told apart without a look at their nodes, and
/// the nodes' comparison skips the parts of the map two copies share.
impl PartialEq for DataTree {
    fn eq(&self, other: &DataTree) -> bool {
        self.digest == other.digest
            && self.last_zxid == other.last_zxid
            && self.config == other.config
            && self.sessions == other.sessions
            && self.nodes == other.nodes
            && self.ephemerals == other.ephemerals
    }
}

impl Eq for DataTree {}

/// The nodes through their kept digest, O(1) however many there are. The
/// ephemeral index is left out too: it is a function of the nodes (their
/// owners and paths, [`Invariant::EphemeralIndex`]), so equal trees still
/// hash equal.
impl Hash for DataTree {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.digest.hash(h);
        self.sessions.hash(h);
        self.last_zxid.hash(h);
        self.config.hash(h);
    }
}

impl DataTree {
    /// A fresh tree: `/`, `/zookeeper`, `/zookeeper/quota` and
    /// `/zookeeper/config`, added without touching any counter.
    pub fn new(config: TreeConfig) -> DataTree {
        let mut tree = DataTree {
            nodes: Nodes::new(),
            digest: 0,
            sessions: OrdMap::new(),
            ephemerals: OrdMap::new(),
            last_zxid: 0,
            config,
        };
        let mut root = Node::new(Vec::new(), 0, 0, Owner::Persistent);
        root.children.insert("zookeeper".into());
        let mut zk = Node::new(Vec::new(), 0, 0, Owner::Persistent);
        zk.children.insert("quota".into());
        zk.children.insert("config".into());
        tree.insert_node("/".into(), Arc::new(root));
        tree.insert_node("/zookeeper".into(), Arc::new(zk));
        tree.insert_node(
            "/zookeeper/quota".into(),
            Arc::new(Node::new(Vec::new(), 0, 0, Owner::Persistent)),
        );
        // A 3.8.0 server shows aversion -1 on the config node (found by
        // conformance; its ACL is set apart from the others).
        let mut config_node = Node::new(Vec::new(), 0, 0, Owner::Persistent);
        config_node.aversion = -1;
        tree.insert_node("/zookeeper/config".into(), Arc::new(config_node));
        tree
    }

    /// The server settings this tree was made with.
    pub fn config(&self) -> TreeConfig {
        self.config
    }

    /// The zxid of the last applied txn.
    pub fn last_zxid(&self) -> Zxid {
        self.last_zxid
    }

    /// The zxid a standalone server would give its next txn.
    pub fn next_zxid(&self) -> Zxid {
        self.last_zxid + 1
    }

    /// The znode at `path`, if it exists.
    pub fn node(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path).map(|n| &**n)
    }

    /// Puts `node` at `path`, keeping the digest; returns the node it
    /// replaced, if any.
    fn insert_node(&mut self, path: Arc<str>, node: Arc<Node>) -> Option<Arc<Node>> {
        let added = node_digest(&path, &node);
        let old = self.nodes.insert(Arc::clone(&path), node);
        let removed = old.as_ref().map_or(0, |o| node_digest(&path, o));
        self.digest = self.digest.wrapping_add(added).wrapping_sub(removed);
        old
    }

    /// Takes the node at `path` out, keeping the digest.
    fn remove_node(&mut self, path: &str) -> Option<Arc<Node>> {
        let old = self.nodes.remove(path)?;
        self.digest = self.digest.wrapping_sub(node_digest(path, &old));
        Some(old)
    }

    /// Changes the node at `path` by `change` (copied first if another
    /// tree shares it), keeping the digest: `None` if there is none.
    fn update_node<R>(&mut self, path: &str, change: impl FnOnce(&mut Node) -> R) -> Option<R> {
        let slot = self.nodes.get_mut(path)?;
        let before = node_digest(path, slot);
        let node = Arc::make_mut(slot);
        let r = change(node);
        let after = node_digest(path, node);
        self.digest = self.digest.wrapping_sub(before).wrapping_add(after);
        Some(r)
    }

    /// Changes the child list of the node at `path` alone: the digest
    /// leaves child lists out ([`node_digest`]), so it stays as it is
    /// without hashing the node twice.
    fn update_children<R>(
        &mut self,
        path: &str,
        change: impl FnOnce(&mut BTreeSet<String>) -> R,
    ) -> Option<R> {
        let slot = self.nodes.get_mut(path)?;
        Some(change(&mut Arc::make_mut(slot).children))
    }

    /// The number of znodes, the root and `/zookeeper` subtree included.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Whether `session` is live (created and not yet closed).
    pub fn has_session(&self, session: SessionId) -> bool {
        self.sessions.contains_key(&session)
    }

    /// Live sessions in id order, with their timeouts.
    pub fn sessions(&self) -> impl Iterator<Item = (SessionId, u64)> + '_ {
        self.sessions.iter().map(|(s, t)| (*s, *t))
    }

    /// A session's ephemerals, in path order.
    pub fn ephemerals(&self, session: SessionId) -> impl Iterator<Item = &str> + '_ {
        self.ephemerals
            .get(&session)
            .into_iter()
            .flat_map(|s| s.iter().map(String::as_str))
    }

    /// Serves a read from this replica's state. Returns the reply and the
    /// watch the server registers with it, if any (docs/ZOOKEEPER.md,
    /// "Setting and firing watches").
    /// Children come in name order; the simulator shuffles them.
    pub fn read(&self, op: &Op) -> (Result<Reply, ZkError>, Option<(WatchKind, String)>) {
        let reply = self.read_ref(op).map(|r| r.to_reply());
        let watch = match (op, &reply) {
            // An exist watch on a missing node sits in the data table.
            (Op::Exists { path, watch: true }, _) => Some((WatchKind::Data, path.clone())),
            (Op::GetData { path, watch: true }, Ok(_)) => Some((WatchKind::Data, path.clone())),
            (Op::GetChildren { path, watch: true }, Ok(_)) => {
                Some((WatchKind::Child, path.clone()))
            }
            _ => None,
        };
        (reply, watch)
    }

    /// What the read `op` sees, borrowed from the tree: [`DataTree::read`]
    /// without copying data or children (a checker compares it with a
    /// recorded reply at every step it tries).
    pub fn read_ref(&self, op: &Op) -> Result<ReadRef<'_>, ZkError> {
        match op {
            Op::Exists { path, .. } => Ok(ReadRef::Exists(self.node(path).map(Node::stat))),
            Op::GetData { path, .. } => match self.node(path) {
                Some(n) => Ok(ReadRef::Data {
                    data: &n.data,
                    stat: n.stat(),
                }),
                None => Err(ZkError::NoNode),
            },
            Op::GetChildren { path, .. } => match self.node(path) {
                Some(n) => Ok(ReadRef::Children {
                    children: &n.children,
                    stat: n.stat(),
                }),
                None => Err(ZkError::NoNode),
            },
            // On a standalone server (or the leader) sync is an ordered no-op.
            Op::Sync { .. } => Ok(ReadRef::Sync),
            Op::Create { .. } | Op::Delete { .. } | Op::SetData { .. } | Op::Multi(_) => {
                panic!("read() takes reads only, got {}", op.name())
            }
        }
    }

    /// Applies a txn decided by [`DataTree::prepare`] (or its session
    /// variants). zxids must strictly increase.
    pub fn apply(&mut self, txn: &Txn) -> Applied {
        self.apply_journaled(txn, None)
    }

    /// [`DataTree::apply`], also returning what takes the change back
    /// ([`DataTree::undo`]).
    pub fn apply_undoable(&mut self, txn: &Txn) -> (Applied, Undo) {
        let mut undo = Undo {
            last_zxid: self.last_zxid,
            steps: Vec::new(),
        };
        let applied = self.apply_journaled(txn, Some(&mut undo.steps));
        (applied, undo)
    }

    /// Takes back the txn that returned `undo`, which must be the last
    /// one applied: the tree is then equal to what it was before it.
    pub fn undo(&mut self, undo: Undo) {
        for step in undo.steps.into_iter().rev() {
            match step {
                UndoStep::Created(path) => {
                    let node = self
                        .remove_node(&path)
                        .unwrap_or_else(|| panic!("undo create {path}: missing"));
                    assert!(node.children.is_empty(), "undo create {path}: has children");
                    if let Owner::Ephemeral(s) = node.owner {
                        self.unindex_ephemeral(s, &path);
                    }
                    self.update_children(parent(&path), |c| c.remove(basename(&path)))
                        .unwrap_or_else(|| panic!("undo create {path}: parent missing"));
                }
                UndoStep::Deleted(path, node) => {
                    if let Owner::Ephemeral(s) = node.owner {
                        self.ephemerals.entry(s).or_default().insert(path.clone());
                    }
                    self.update_children(parent(&path), |c| c.insert(basename(&path).to_owned()))
                        .unwrap_or_else(|| panic!("undo delete {path}: parent missing"));
                    self.insert_node(path.into(), node);
                }
                UndoStep::Counters {
                    path,
                    child_creates,
                    pzxid,
                } => {
                    self.update_node(&path, |n| {
                        n.child_creates = child_creates;
                        n.pzxid = pzxid;
                    })
                    .unwrap_or_else(|| panic!("undo counters of {path}: missing"));
                }
                UndoStep::Data {
                    path,
                    data,
                    version,
                    mzxid,
                    mtime,
                } => {
                    self.update_node(&path, |n| {
                        n.data = data;
                        n.version = version;
                        n.mzxid = mzxid;
                        n.mtime = mtime;
                    })
                    .unwrap_or_else(|| panic!("undo setData {path}: missing"));
                }
                UndoStep::SessionCreated(s) => {
                    self.sessions.remove(&s);
                }
                UndoStep::SessionClosed(s, timeout_ms) => {
                    self.sessions.insert(s, timeout_ms);
                }
            }
        }
        self.last_zxid = undo.last_zxid;
    }

    /// Removes `path` from `session`'s ephemerals, leaving no empty set
    /// (equal trees must compare and hash equal).
    fn unindex_ephemeral(&mut self, session: SessionId, path: &str) {
        let set = self
            .ephemerals
            .get_mut(&session)
            .unwrap_or_else(|| panic!("ephemeral {path}: session {session} not indexed"));
        let known = set.remove(path).is_some();
        assert!(known, "ephemeral {path} missing from its session's index");
        if set.is_empty() {
            self.ephemerals.remove(&session);
        }
    }

    /// [`DataTree::apply`], recording the inverse of each change in
    /// `journal` when there is one.
    fn apply_journaled(&mut self, txn: &Txn, mut journal: Option<&mut Vec<UndoStep>>) -> Applied {
        assert!(
            txn.zxid > self.last_zxid,
            "txn zxid {:#x} not after last applied {:#x}",
            txn.zxid,
            self.last_zxid
        );
        self.last_zxid = txn.zxid;
        let mut triggers = Vec::new();
        let reply = match &txn.body {
            TxnBody::CreateSession { timeout_ms } => {
                let fresh = self.sessions.insert(txn.session, *timeout_ms).is_none();
                assert!(fresh, "session {} created twice", txn.session);
                if let Some(j) = journal.as_deref_mut() {
                    j.push(UndoStep::SessionCreated(txn.session));
                }
                None
            }
            TxnBody::CloseSession { ephemerals } => {
                for path in ephemerals {
                    let op = TxnOp::Delete { path: path.clone() };
                    self.apply_op(txn, &op, &mut triggers, journal.as_deref_mut());
                }
                if let Some(timeout_ms) = self.sessions.remove(&txn.session) {
                    if let Some(j) = journal.as_deref_mut() {
                        j.push(UndoStep::SessionClosed(txn.session, timeout_ms));
                    }
                }
                let left = self.ephemerals.remove(&txn.session);
                assert!(
                    left.is_none(),
                    "closeSession {} left ephemerals behind: {left:?}",
                    txn.session
                );
                None
            }
            TxnBody::Op(op) => Some(Ok(match self.apply_op(txn, op, &mut triggers, journal) {
                MultiResult::Create {
                    path,
                    stat: Some(stat),
                } => Reply::Create { path, stat },
                MultiResult::Delete => Reply::Delete,
                MultiResult::SetData { stat } => Reply::SetData(stat),
                other => unreachable!("single op applied as {other:?}"),
            })),
            TxnBody::Multi(ops) => {
                let results = ops
                    .iter()
                    .map(|op| {
                        let result = self.apply_op(txn, op, &mut triggers, journal.as_deref_mut());
                        (op, result)
                    })
                    .map(|r| match r {
                        // A 3.8 server answers a plain create in a multi with
                        // its name only; container and TTL creates (their own
                        // opcodes) keep their Stat. Found by conformance.
                        (
                            TxnOp::Create {
                                owner: Owner::Persistent | Owner::Ephemeral(_),
                                ..
                            },
                            MultiResult::Create { path, .. },
                        ) => MultiResult::Create { path, stat: None },
                        (_, result) => result,
                    })
                    .collect();
                Some(Ok(Reply::Multi(results)))
            }
            TxnBody::Error(e) => Some(Err(*e)),
            TxnBody::MultiError(results) => Some(Ok(Reply::Multi(results.clone()))),
        };
        Applied { reply, triggers }
    }

    /// Applies one decided change (its result in multi form). Prep
    /// guaranteed it is valid here; a violation means replicas diverged, so
    /// it panics.
    fn apply_op(
        &mut self,
        txn: &Txn,
        op: &TxnOp,
        triggers: &mut Vec<WatchEvent>,
        journal: Option<&mut Vec<UndoStep>>,
    ) -> MultiResult {
        match op {
            TxnOp::Create {
                path,
                data,
                owner,
                parent_cversion,
            } => {
                let parent_path = parent(path);
                let (child_creates, pzxid) = self
                    .update_node(parent_path, |parent| {
                        assert!(
                            !matches!(parent.owner, Owner::Ephemeral(_)),
                            "create {path}: parent is ephemeral"
                        );
                        let fresh = parent.children.insert(basename(path).to_owned());
                        assert!(fresh, "create {path}: already a child at apply");
                        let before = (parent.child_creates, parent.pzxid);
                        // DataTree.createNode: counter and pzxid move only
                        // forward.
                        if *parent_cversion > parent.child_creates {
                            parent.child_creates = *parent_cversion;
                            parent.pzxid = txn.zxid;
                        }
                        before
                    })
                    .unwrap_or_else(|| panic!("create {path}: parent missing at apply"));
                if let Some(j) = journal {
                    j.push(UndoStep::Counters {
                        path: parent_path.to_owned(),
                        child_creates,
                        pzxid,
                    });
                    j.push(UndoStep::Created(path.clone()));
                }
                let node = Node::new(data.clone(), txn.zxid, txn.time_ms, *owner);
                let stat = node.stat();
                let old = self.insert_node(path.as_str().into(), Arc::new(node));
                assert!(old.is_none(), "create {path}: node exists at apply");
                if let Owner::Ephemeral(s) = owner {
                    assert!(
                        self.sessions.contains_key(s),
                        "ephemeral {path} of unknown session {s}"
                    );
                    self.ephemerals.entry(*s).or_default().insert(path.clone());
                }
                triggers.push(event(EventType::NodeCreated, path));
                triggers.push(event(EventType::NodeChildrenChanged, parent_path));
                MultiResult::Create {
                    path: path.clone(),
                    stat: Some(stat),
                }
            }
            TxnOp::Delete { path } => {
                let node = self
                    .remove_node(path)
                    .unwrap_or_else(|| panic!("delete {path}: missing at apply"));
                assert!(node.children.is_empty(), "delete {path}: has children");
                if let Owner::Ephemeral(s) = node.owner {
                    self.unindex_ephemeral(s, path);
                }
                let parent_path = parent(path);
                let (child_creates, pzxid) = self
                    .update_node(parent_path, |parent| {
                        let was_child = parent.children.remove(basename(path));
                        assert!(was_child, "delete {path}: not its parent's child");
                        let before = (parent.child_creates, parent.pzxid);
                        // A delete moves pzxid only forward
                        // (DataTree.deleteNode).
                        parent.pzxid = parent.pzxid.max(txn.zxid);
                        before
                    })
                    .unwrap_or_else(|| panic!("delete {path}: parent missing at apply"));
                if let Some(j) = journal {
                    j.push(UndoStep::Deleted(path.clone(), node));
                    j.push(UndoStep::Counters {
                        path: parent_path.to_owned(),
                        child_creates,
                        pzxid,
                    });
                }
                triggers.push(event(EventType::NodeDeleted, path));
                triggers.push(event(EventType::NodeChildrenChanged, parent_path));
                MultiResult::Delete
            }
            TxnOp::SetData {
                path,
                data,
                version,
            } => {
                let stat = self
                    .update_node(path, |node| {
                        assert_eq!(
                            *version,
                            node.version.wrapping_add(1),
                            "setData {path}: version skew"
                        );
                        if let Some(j) = journal {
                            j.push(UndoStep::Data {
                                path: path.clone(),
                                data: std::mem::take(&mut node.data),
                                version: node.version,
                                mzxid: node.mzxid,
                                mtime: node.mtime,
                            });
                        }
                        node.data.clone_from(data);
                        node.version = *version;
                        node.mzxid = txn.zxid;
                        node.mtime = txn.time_ms;
                        node.stat()
                    })
                    .unwrap_or_else(|| panic!("setData {path}: missing at apply"));
                triggers.push(event(EventType::NodeDataChanged, path));
                MultiResult::SetData { stat }
            }
            TxnOp::Check { path } => {
                assert!(
                    self.nodes.contains_key(path.as_str()),
                    "check {path}: missing at apply"
                );
                MultiResult::Check
            }
        }
    }

    /// Prepares and applies in one step, with the next zxid: a standalone
    /// server's write path.
    pub fn execute(&mut self, time_ms: i64, session: SessionId, op: &Op) -> Applied {
        let txn = self.prepare(self.next_zxid(), time_ms, session, op);
        self.apply(&txn)
    }

    /// createSession on a standalone server.
    pub fn create_session(&mut self, time_ms: i64, session: SessionId, timeout_ms: u64) {
        let txn = self.prepare_create_session(self.next_zxid(), time_ms, session, timeout_ms);
        self.apply(&txn);
    }

    /// closeSession on a standalone server; returns the deletions' triggers.
    pub fn close_session(&mut self, time_ms: i64, session: SessionId) -> Vec<WatchEvent> {
        let txn = self.prepare_close_session(self.next_zxid(), time_ms, session);
        self.apply(&txn).triggers
    }

    /// Every zxid the tree holds: its nodes' czxid, mzxid and pzxid, and
    /// the last applied (in no particular order, with repeats).
    pub fn zxids(&self) -> impl Iterator<Item = Zxid> + '_ {
        self.nodes
            .values()
            .flat_map(|n| [n.czxid, n.mzxid, n.pzxid])
            .chain(std::iter::once(self.last_zxid))
    }

    /// Renames every zxid the tree holds by `f`. For the models' canonical
    /// states (runs whose trees differ only in how many txns came between
    /// two zxids are one state): `f` must keep the order of the zxids it
    /// is given (`a <= b` implies `f(a) <= f(b)`), so that every
    /// comparison the tree and its readers make (a watch restored by
    /// SetWatches, the invariants) answers as before. The next txn's zxid
    /// follows the renamed last one.
    pub fn relabel_zxids(&mut self, mut f: impl FnMut(Zxid) -> Zxid) {
        // A node whose zxids keep their names stays shared (and so do the
        // map's nodes above it).
        let changed: Vec<(Arc<str>, [Zxid; 3])> = self
            .nodes
            .iter()
            .filter_map(|(p, n)| {
                let zxids = [f(n.czxid), f(n.mzxid), f(n.pzxid)];
                (zxids != [n.czxid, n.mzxid, n.pzxid]).then(|| (p.clone(), zxids))
            })
            .collect();
        for (p, [czxid, mzxid, pzxid]) in changed {
            self.update_node(&p, |n| {
                n.czxid = czxid;
                n.mzxid = mzxid;
                n.pzxid = pzxid;
            })
            .expect("a node just seen");
        }
        self.last_zxid = f(self.last_zxid);
    }

    /// Renames the tree's sessions and node names in place, for the
    /// models' symmetry reduction (clients swapped: their session ids and
    /// the names their nodes carry). Both maps must be one-to-one. `name`
    /// gives a node's new name (its last component, as its parent's
    /// children list has it), None when it keeps its own: a node is
    /// renamed where it is, never moved, and a renamed node has no
    /// children (nothing under it would follow). In place, so that the
    /// nodes that keep their names (most of them) cost nothing.
    pub fn rename(
        &mut self,
        session: impl Fn(SessionId) -> SessionId,
        name: impl Fn(&str) -> Option<String>,
    ) {
        let renamed = |p: &str| {
            let (dir, base) = p.split_at(p.rfind('/').map_or(0, |k| k + 1));
            name(base).map(|b| format!("{dir}{b}"))
        };
        // Out first, then in: two names may swap.
        let moved: Vec<(Arc<str>, String)> = self
            .nodes
            .keys()
            .filter_map(|p| renamed(p).map(|q| (p.clone(), q)))
            .collect();
        let nodes: Vec<(String, Arc<Node>)> = moved
            .into_iter()
            .filter_map(|(old, new)| self.remove_node(&old).map(|n| (new, n)))
            .collect();
        for (new, n) in nodes {
            debug_assert!(n.children.is_empty(), "renamed {new}, which has children");
            self.insert_node(new.into(), n);
        }
        let owner_of = |n: &Node| match n.owner {
            Owner::Ephemeral(s) => Owner::Ephemeral(session(s)),
            owner => owner,
        };
        // A node that keeps its owner and children stays shared.
        let changed: Vec<Arc<str>> = self
            .nodes
            .iter()
            .filter(|(_, n)| owner_of(n) != n.owner || n.children.iter().any(|c| name(c).is_some()))
            .map(|(p, _)| p.clone())
            .collect();
        for p in changed {
            self.update_node(&p, |n| {
                n.owner = owner_of(n);
                if n.children.iter().any(|c| name(c).is_some()) {
                    n.children = std::mem::take(&mut n.children)
                        .into_iter()
                        .map(|c| name(&c).unwrap_or(c))
                        .collect();
                }
            })
            .expect("a node just seen");
        }
        self.sessions = std::mem::take(&mut self.sessions)
            .into_iter()
            .map(|(s, t)| (session(s), t))
            .collect();
        self.ephemerals = std::mem::take(&mut self.ephemerals)
            .into_iter()
            .map(|(s, e)| {
                let e = if e.iter().any(|p| renamed(p).is_some()) {
                    e.into_iter().map(|p| renamed(&p).unwrap_or(p)).collect()
                } else {
                    e
                };
                (session(s), e)
            })
            .collect();
    }

    /// Checks every structural invariant; for tests, the simulator's
    /// post-run checks, and every few applied txns on each simulated server
    /// (it walks the whole tree). The first violation found, naming the
    /// invariant.
    pub fn check_invariants(&self) -> Result<(), Violation> {
        let broken = |invariant, detail: String| Err(Violation { invariant, detail });
        let mut seen_ephemerals: OrdMap<SessionId, OrdSet<String>> = OrdMap::new();
        for (path, node) in &self.nodes {
            let path: &str = path;
            if path != "/" {
                let Some(parent) = self.nodes.get(parent(path)) else {
                    return broken(Invariant::ParentExists, format!("{path}: parent missing"));
                };
                if !parent.children.contains(basename(path)) {
                    return broken(
                        Invariant::ListedByParent,
                        format!("{path}: not listed by its parent"),
                    );
                }
            }
            for child in &node.children {
                if !self.nodes.contains_key(join(path, child).as_str()) {
                    return broken(
                        Invariant::ChildExists,
                        format!("{path}: lists missing child {child}"),
                    );
                }
            }
            if node.mzxid < node.czxid {
                return broken(
                    Invariant::ZxidOrder,
                    format!(
                        "{path}: mzxid {:#x} before czxid {:#x}",
                        node.mzxid, node.czxid
                    ),
                );
            }
            if node.pzxid < node.czxid {
                return broken(
                    Invariant::ZxidOrder,
                    format!(
                        "{path}: pzxid {:#x} before czxid {:#x}",
                        node.pzxid, node.czxid
                    ),
                );
            }
            if node.czxid > self.last_zxid {
                return broken(
                    Invariant::NoFutureZxid,
                    format!("{path}: czxid {:#x} after the last applied", node.czxid),
                );
            }
            if node.mzxid > self.last_zxid {
                return broken(
                    Invariant::NoFutureZxid,
                    format!("{path}: mzxid {:#x} after the last applied", node.mzxid),
                );
            }
            if let Owner::Ephemeral(s) = node.owner {
                if !node.children.is_empty() {
                    return broken(
                        Invariant::EphemeralLeaf,
                        format!("ephemeral {path} has children"),
                    );
                }
                if !self.sessions.contains_key(&s) {
                    return broken(
                        Invariant::EphemeralOwnerLive,
                        format!("ephemeral {path} of dead session {s}"),
                    );
                }
                seen_ephemerals
                    .entry(s)
                    .or_default()
                    .insert(path.to_owned());
            }
        }
        if self.ephemerals != seen_ephemerals {
            return broken(
                Invariant::EphemeralIndex,
                format!("indexed {:?}, owned {seen_ephemerals:?}", self.ephemerals),
            );
        }
        let digest = digest_of(&self.nodes);
        if self.digest != digest {
            return broken(
                Invariant::Digest,
                format!("kept {:#018x}, computed {digest:#018x}", self.digest),
            );
        }
        Ok(())
    }

    /// The nodes, for tests that break the tree on purpose to see the
    /// checks catch it. Changed through this, the kept digest goes stale
    /// ([`Invariant::Digest`]) until [`DataTree::recompute_digest_for_test`].
    #[doc(hidden)]
    pub fn nodes_mut_for_test(&mut self) -> &mut Nodes {
        &mut self.nodes
    }

    /// A copy that shares nothing with this tree (its map and every
    /// znode copied), for tests of the shortcuts taken on shared parts.
    #[cfg(test)]
    pub(crate) fn unshared_for_test(&self) -> DataTree {
        DataTree {
            nodes: self
                .nodes
                .iter()
                .map(|(p, n)| (Arc::from(&**p), Arc::new(Node::clone(n))))
                .collect(),
            ..self.clone()
        }
    }

    /// Sets the kept digest to the nodes' own, after
    /// [`DataTree::nodes_mut_for_test`]: for tests of the other invariants.
    #[cfg(test)]
    pub(crate) fn recompute_digest_for_test(&mut self) {
        self.digest = digest_of(&self.nodes);
    }
}

/// The tree's structural invariants, as [`DataTree::check_invariants`]
/// names them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Invariant {
    /// Every node but the root has a parent ...
    ParentExists,
    /// ... that lists it among its children.
    ListedByParent,
    /// Every child a node lists exists.
    ChildExists,
    /// A node is modified (mzxid) and its children changed (pzxid) no
    /// earlier than it was created (czxid).
    ZxidOrder,
    /// No node was created or modified after the last applied txn.
    NoFutureZxid,
    /// An ephemeral has no children.
    EphemeralLeaf,
    /// An ephemeral's owner is a live session.
    EphemeralOwnerLive,
    /// The per-session index of ephemerals is exactly the nodes' owners.
    EphemeralIndex,
    /// The kept digest is the sum of the nodes' digests: every change went
    /// through the helpers that keep it (ZOOKEEPER-3114's digest check).
    Digest,
}

impl Invariant {
    /// The invariant's kebab-case name, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Invariant::ParentExists => "parent-exists",
            Invariant::ListedByParent => "listed-by-parent",
            Invariant::ChildExists => "child-exists",
            Invariant::ZxidOrder => "zxid-order",
            Invariant::NoFutureZxid => "no-future-zxid",
            Invariant::EphemeralLeaf => "ephemeral-leaf",
            Invariant::EphemeralOwnerLive => "ephemeral-owner-live",
            Invariant::EphemeralIndex => "ephemeral-index",
            Invariant::Digest => "digest",
        }
    }
}

/// A broken invariant: which one, and where.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Violation {
    /// Which invariant is broken.
    pub invariant: Invariant,
    /// Where and how, in words: the path and the values involved.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tree invariant {} broken: {}",
            self.invariant.name(),
            self.detail
        )
    }
}

impl std::error::Error for Violation {}

fn event(event_type: EventType, path: &str) -> WatchEvent {
    WatchEvent {
        event_type,
        path: path.to_owned(),
    }
}

#[cfg(test)]
mod tests;
