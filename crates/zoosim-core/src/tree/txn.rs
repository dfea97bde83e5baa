//! Transactions: what the leader's prep stage makes of a write, and what
//! every replica applies (ZooKeeper's PrepRequestProcessor → Txn →
//! DataTree.processTxn).
//!
//! Prep runs against the latest proposed state and decides everything a
//! replica needs: the final name of a sequential create, the new parent
//! counter, the new version, or the error. Applying a txn is then the same on
//! every replica, whatever its watches or connections.

use std::collections::BTreeMap;

use super::{DataTree, Owner};
use crate::path::{self, validate_path};
use crate::proto::{CreateMode, MultiOp, MultiResult, Op, SessionId, ZkError, Zxid};

/// A sequenced change to the replicated tree.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Txn {
    /// The txn's zxid, assigned by the leader; every txn, failed writes
    /// included, takes one.
    pub zxid: Zxid,
    /// The leader's clock at prep (ctime/mtime of what it creates/changes).
    pub time_ms: i64,
    /// The session that sent the write, or that is created or closed.
    pub session: SessionId,
    /// What the txn does.
    pub body: TxnBody,
}

/// What a txn does, as decided at prep.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum TxnBody {
    /// A new session (createSession).
    CreateSession {
        /// The negotiated session timeout in ms.
        timeout_ms: u64,
    },
    /// Deletes every listed ephemeral at this one zxid (the session's
    /// ephemerals as prep saw them, in-flight creates included).
    CloseSession {
        /// The ephemerals' paths.
        ephemerals: Vec<String>,
    },
    /// One successful write.
    Op(TxnOp),
    /// A committed multi: every op applied at one zxid, in order.
    Multi(Vec<TxnOp>),
    /// A failed write: nothing changes, but the zxid is used.
    Error(ZkError),
    /// A failed multi: nothing changes; the per-op results go back.
    MultiError(Vec<MultiResult>),
}

impl TxnBody {
    /// Why prep failed the write: its error, and in a multi at which op
    /// (0 for a single write); `None` for a write that went through and
    /// for session txns.
    pub fn prep_failure(&self) -> Option<(usize, ZkError)> {
        match self {
            TxnBody::Error(e) => Some((0, *e)),
            TxnBody::MultiError(results) => results.iter().enumerate().find_map(|(i, r)| match r {
                MultiResult::Failed(e) => Some((i, *e)),
                _ => None,
            }),
            _ => None,
        }
    }
}

/// One state change, fully decided at prep.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum TxnOp {
    /// Add a node; its name (sequence suffix included) is final.
    Create {
        /// The full path of the new node.
        path: String,
        /// Its initial data.
        data: Vec<u8>,
        /// Its owner, from the create mode and the session.
        owner: Owner,
        /// The parent's counter after this create, decided at prep
        /// (CreateTxn.parentCVersion). Applied only if larger than the
        /// stored one, so at i32::MAX the counter sticks (ZOOKEEPER-3249).
        parent_cversion: i32,
    },
    /// Remove a node (prep checked it exists and has no children).
    Delete {
        /// The node to remove.
        path: String,
    },
    /// Replace a node's data.
    SetData {
        /// The node to change.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// The version after this change.
        version: i32,
    },
    /// A multi's check: no change.
    Check {
        /// The node that was checked.
        path: String,
    },
}

/// A client write as prep sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WriteRef<'a> {
    Create {
        path: &'a str,
        data: &'a [u8],
        mode: CreateMode,
    },
    Delete {
        path: &'a str,
        version: i32,
    },
    SetData {
        path: &'a str,
        data: &'a [u8],
        version: i32,
    },
    Check {
        path: &'a str,
        version: i32,
    },
}

impl<'a> WriteRef<'a> {
    pub(crate) fn from_multi(op: &'a MultiOp) -> Self {
        match op {
            MultiOp::Create { path, data, mode } => WriteRef::Create {
                path,
                data,
                mode: *mode,
            },
            MultiOp::Delete { path, version } => WriteRef::Delete {
                path,
                version: *version,
            },
            MultiOp::SetData {
                path,
                data,
                version,
            } => WriteRef::SetData {
                path,
                data,
                version: *version,
            },
            MultiOp::Check { path, version } => WriteRef::Check {
                path,
                version: *version,
            },
        }
    }
}

/// What prep needs to know of a node, as left by earlier ops of the same
/// multi (ZooKeeper's ChangeRecord).
#[derive(Clone, Copy, Debug)]
struct NodeView {
    version: i32,
    /// Child creates so far (the parent's sequence counter); unlike the
    /// stored one, wraps past i32::MAX (see `prep_one`).
    child_creates: i32,
    num_children: i32,
    owner: Owner,
}

/// What prep reads of a server's outstanding change records where they
/// differ from the proposed tree (`super::Outstanding` keeps them).
pub(super) trait PrepRecords {
    /// How many more children than the proposed tree has prep counts.
    fn extra_children(&self, path: &str) -> i32;
    /// The sequence counter prep reads where it differs from the stored one.
    fn sequence_counter(&self, path: &str) -> Option<i32>;
}

/// A server that applies each txn before it preps the next: no records.
struct NoRecords;

impl PrepRecords for NoRecords {
    fn extra_children(&self, _: &str) -> i32 {
        0
    }

    fn sequence_counter(&self, _: &str) -> Option<i32> {
        None
    }
}

/// Pending changes of a multi in preparation, on top of the tree and the
/// server's outstanding records. A single op needs none, so an inactive
/// overlay records nothing (the hot path).
struct Overlay<'a> {
    active: bool,
    nodes: BTreeMap<String, Option<NodeView>>,
    records: &'a dyn PrepRecords,
}

impl<'a> Overlay<'a> {
    fn single(records: &'a dyn PrepRecords) -> Overlay<'a> {
        Overlay {
            active: false,
            nodes: BTreeMap::new(),
            records,
        }
    }

    fn for_multi(records: &'a dyn PrepRecords) -> Overlay<'a> {
        Overlay {
            active: true,
            nodes: BTreeMap::new(),
            records,
        }
    }

    fn record(&mut self, path: &str, view: Option<NodeView>) {
        if self.active {
            self.nodes.insert(path.to_owned(), view);
        }
    }
}

/// The largest ttl ZooKeeper accepts (EphemeralType.TTL: 40 bits).
const TTL_MAX_MS: i64 = (1 << 40) - 1;

/// Paths the server refuses to delete (DataTree.isSpecialPath).
pub(crate) fn is_special(path: &str) -> bool {
    matches!(
        path,
        "/" | "/zookeeper" | "/zookeeper/quota" | "/zookeeper/config"
    )
}

/// Nodes whose ACL lets clients only read: `/zookeeper/config`, which
/// the server creates with `world:anyone` READ alone (DataTree.addConfigNode,
/// ZOOKEEPER-2014: reconfiguration is access controlled), so that a write
/// to it, or a create or delete under it, is NoAuth. Every other node is
/// `world:anyone` with every permission (the tree models no other ACLs).
pub(crate) fn is_read_only(path: &str) -> bool {
    path == "/zookeeper/config"
}

/// Java's `String.format("%010d", n)` for an int.
pub fn sequence_suffix(counter: i32) -> String {
    format!("{counter:010}")
}

impl DataTree {
    fn view(&self, overlay: &Overlay, path: &str) -> Option<NodeView> {
        if let Some(v) = overlay.nodes.get(path) {
            return *v;
        }
        self.node(path).map(|n| NodeView {
            version: n.version,
            child_creates: overlay
                .records
                .sequence_counter(path)
                .unwrap_or(n.child_creates),
            num_children: n.children.len() as i32 + overlay.records.extra_children(path),
            owner: n.owner,
        })
    }

    /// Decides one write against the tree plus `overlay`, in the server's
    /// order of checks (docs/ZOOKEEPER.md, "Errors and the order of
    /// checks"): the first failure wins.
    fn prep_one(
        &self,
        overlay: &mut Overlay,
        session: SessionId,
        op: WriteRef<'_>,
    ) -> Result<TxnOp, ZkError> {
        match op {
            WriteRef::Create { path, data, mode } => {
                if let Some(ttl) = mode.ttl_ms() {
                    if !self.config.extended_types {
                        return Err(ZkError::Unimplemented);
                    }
                    if !(1..=TTL_MAX_MS).contains(&ttl) {
                        return Err(ZkError::BadArguments);
                    }
                }
                self.check_session(session)?;
                if !path.starts_with('/') || path.contains('\0') {
                    return Err(ZkError::BadArguments);
                }
                let parent_path = path::parent(path);
                let mut parent = self.view(overlay, parent_path).ok_or(ZkError::NoNode)?;
                // CREATE on the parent, checked before the name is made.
                if is_read_only(parent_path) {
                    return Err(ZkError::NoAuth);
                }
                let name = if mode.is_sequential() {
                    let full = format!("{path}{}", sequence_suffix(parent.child_creates));
                    validate_path(&full, false)?;
                    full
                } else {
                    path.to_owned()
                };
                if self.view(overlay, &name).is_some() {
                    return Err(ZkError::NodeExists);
                }
                if let Owner::Ephemeral(_) = parent.owner {
                    return Err(ZkError::NoChildrenForEphemerals);
                }
                let owner = match mode {
                    CreateMode::Persistent | CreateMode::PersistentSequential => Owner::Persistent,
                    CreateMode::Ephemeral | CreateMode::EphemeralSequential => {
                        Owner::Ephemeral(session)
                    }
                    CreateMode::Container => Owner::Container,
                    CreateMode::PersistentWithTtl { ttl_ms }
                    | CreateMode::PersistentSequentialWithTtl { ttl_ms } => Owner::Ttl(ttl_ms),
                };
                let parent_cversion = parent.child_creates.wrapping_add(1);
                // Prep's own record of the parent takes the new counter as
                // it is, wrapped or not (PrepRequestProcessor sets the
                // ChangeRecord's cversion unconditionally), so the next
                // create of the same multi is named from it: past i32::MAX,
                // `-2147483648`. Only the apply keeps the stored counter
                // from going back (DataTree.createNode).
                parent.child_creates = parent_cversion;
                parent.num_children += 1;
                overlay.record(parent_path, Some(parent));
                overlay.record(
                    &name,
                    Some(NodeView {
                        version: 0,
                        child_creates: 0,
                        num_children: 0,
                        owner,
                    }),
                );
                Ok(TxnOp::Create {
                    path: name,
                    data: data.to_vec(),
                    owner,
                    parent_cversion,
                })
            }
            WriteRef::Delete { path, version } => {
                self.check_session(session)?;
                if is_special(path) || !path.starts_with('/') || path.contains('\0') {
                    return Err(ZkError::BadArguments);
                }
                let parent_path = path::parent(path);
                let mut parent = self.view(overlay, parent_path).ok_or(ZkError::NoNode)?;
                // DELETE on the parent, before the node is looked up.
                if is_read_only(parent_path) {
                    return Err(ZkError::NoAuth);
                }
                let node = self.view(overlay, path).ok_or(ZkError::NoNode)?;
                if version != -1 && version != node.version {
                    return Err(ZkError::BadVersion);
                }
                if node.num_children > 0 {
                    return Err(ZkError::NotEmpty);
                }
                parent.num_children -= 1;
                overlay.record(parent_path, Some(parent));
                overlay.record(path, None);
                Ok(TxnOp::Delete {
                    path: path.to_owned(),
                })
            }
            WriteRef::SetData {
                path,
                data,
                version,
            } => {
                self.check_session(session)?;
                let mut node = self.view(overlay, path).ok_or(ZkError::NoNode)?;
                // WRITE on the node, before its version.
                if is_read_only(path) {
                    return Err(ZkError::NoAuth);
                }
                if version != -1 && version != node.version {
                    return Err(ZkError::BadVersion);
                }
                node.version = node.version.wrapping_add(1);
                overlay.record(path, Some(node));
                Ok(TxnOp::SetData {
                    path: path.to_owned(),
                    data: data.to_vec(),
                    version: node.version,
                })
            }
            WriteRef::Check { path, version } => {
                self.check_session(session)?;
                let node = self.view(overlay, path).ok_or(ZkError::NoNode)?;
                if version != -1 && version != node.version {
                    return Err(ZkError::BadVersion);
                }
                Ok(TxnOp::Check {
                    path: path.to_owned(),
                })
            }
        }
    }

    fn check_session(&self, session: SessionId) -> Result<(), ZkError> {
        if self.sessions.contains_key(&session) {
            Ok(())
        } else {
            Err(ZkError::SessionExpired)
        }
    }

    /// Prep of a client write: decides its txn against this (proposed)
    /// state without changing it. Reads are not txns: pass only writes.
    /// For a server that applies each txn before it preps the next; a
    /// pipelined one preps over its outstanding records
    /// ([`DataTree::prepare_over`]).
    pub fn prepare(&self, zxid: Zxid, time_ms: i64, session: SessionId, op: &Op) -> Txn {
        self.prepare_with(&NoRecords, zxid, time_ms, session, op)
    }

    /// [`DataTree::prepare`] against this proposed state as `records` say
    /// prep sees it ([`DataTree::prepare_over`]).
    pub(super) fn prepare_with(
        &self,
        records: &dyn PrepRecords,
        zxid: Zxid,
        time_ms: i64,
        session: SessionId,
        op: &Op,
    ) -> Txn {
        let body = match op {
            Op::Create { path, data, mode } => self.prep_single(
                records,
                session,
                WriteRef::Create {
                    path,
                    data,
                    mode: *mode,
                },
            ),
            Op::Delete { path, version } => self.prep_single(
                records,
                session,
                WriteRef::Delete {
                    path,
                    version: *version,
                },
            ),
            Op::SetData {
                path,
                data,
                version,
            } => self.prep_single(
                records,
                session,
                WriteRef::SetData {
                    path,
                    data,
                    version: *version,
                },
            ),
            Op::Multi(ops) => self.prep_multi(records, session, ops),
            Op::Exists { .. } | Op::GetData { .. } | Op::GetChildren { .. } | Op::Sync { .. } => {
                panic!("prepare() takes writes only, got {}", op.name())
            }
        };
        Txn {
            zxid,
            time_ms,
            session,
            body,
        }
    }

    fn prep_single(
        &self,
        records: &dyn PrepRecords,
        session: SessionId,
        op: WriteRef<'_>,
    ) -> TxnBody {
        match self.prep_one(&mut Overlay::single(records), session, op) {
            Ok(op) => TxnBody::Op(op),
            Err(e) => TxnBody::Error(e),
        }
    }

    /// Each op is checked against the state the earlier ones leave; the
    /// first failure aborts the whole multi (docs/ZOOKEEPER.md, "Multi").
    fn prep_multi(
        &self,
        records: &dyn PrepRecords,
        session: SessionId,
        ops: &[MultiOp],
    ) -> TxnBody {
        let mut overlay = Overlay::for_multi(records);
        let mut txn_ops = Vec::with_capacity(ops.len());
        for (i, op) in ops.iter().enumerate() {
            match self.prep_one(&mut overlay, session, WriteRef::from_multi(op)) {
                Ok(t) => txn_ops.push(t),
                Err(e) => {
                    let mut results = vec![MultiResult::RolledBack; i];
                    results.push(MultiResult::Failed(e));
                    results.resize(
                        ops.len(),
                        MultiResult::Failed(ZkError::RuntimeInconsistency),
                    );
                    return TxnBody::MultiError(results);
                }
            }
        }
        TxnBody::Multi(txn_ops)
    }

    /// Prep of createSession.
    pub fn prepare_create_session(
        &self,
        zxid: Zxid,
        time_ms: i64,
        session: SessionId,
        timeout_ms: u64,
    ) -> Txn {
        assert!(session.0 != 0, "session ids are non-zero");
        Txn {
            zxid,
            time_ms,
            session,
            body: TxnBody::CreateSession { timeout_ms },
        }
    }

    /// Prep of closeSession (explicit close or expiry): collects the
    /// session's ephemerals in this proposed state.
    pub fn prepare_close_session(&self, zxid: Zxid, time_ms: i64, session: SessionId) -> Txn {
        let ephemerals = self
            .ephemerals
            .get(&session)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        Txn {
            zxid,
            time_ms,
            session,
            body: TxnBody::CloseSession { ephemerals },
        }
    }
}
