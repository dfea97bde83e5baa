//! The container and TTL reaper (ZooKeeper's `ContainerManager`), as pure
//! functions of the tree and a time passed in (docs/ZOOKEEPER.md,
//! "Containers and TTL nodes").
//!
//! ZooKeeper's leader runs the reaper on a timer every
//! `znode.container.checkIntervalMs`. Each run takes its candidates from
//! the committed tree ([`DataTree::reaper_candidates`]) and submits one
//! `deleteContainer` request per candidate through the normal pipeline,
//! where prep decides it against the latest proposed state like any write
//! ([`DataTree::prepare_delete_container`]): it takes a zxid whether it
//! deletes or fails, and a delete fires the same watches as a client's.
//!
//! When it runs is the server's business: nothing here reads a clock. A
//! caller (a model, a test) decides when a run happens and what time it
//! is, and applies the txns it gets with [`DataTree::apply`].

use super::{DataTree, Owner, Txn, TxnBody, TxnOp};
use crate::path;
use crate::proto::{SessionId, ZkError, Zxid};

/// The session a reaper's txn carries: ContainerManager builds its
/// requests with session id 0 (no client sent them).
pub const REAPER_SESSION: SessionId = SessionId(0);

impl DataTree {
    /// The paths one reaper run would try to delete at `now_ms` (the
    /// leader's wall clock in ZooKeeper; any clock the caller keeps here),
    /// in path order:
    ///
    /// * containers with no children that have had a child (the stored
    ///   cversion, [`super::Node::child_creates`], is above 0): a container
    ///   that never had one is kept, so that a client can create one and
    ///   then its first child (`maxNeverUsedIntervalMs`, which would reap
    ///   those too, is off by default and not modelled);
    /// * TTL nodes with no children whose last change is more than their
    ///   ttl ago: `now_ms - mtime > ttl` (setData moves mtime, so it
    ///   renews a TTL node; a child create does not).
    ///
    /// ZooKeeper collects them in a `HashSet`, so its order is
    /// unspecified; path order keeps this deterministic. A run submits all
    /// of them from the one committed state it looked at: a container
    /// emptied by this run's own deletes waits for the next run.
    pub fn reaper_candidates(&self, now_ms: i64) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.children.is_empty())
            .filter(|(_, n)| match n.owner {
                Owner::Container => n.child_creates > 0,
                // A ttl is never 0 (prep refuses it); the subtraction
                // saturates so that no clock value can wrap it.
                Owner::Ttl(ttl_ms) => ttl_ms != 0 && now_ms.saturating_sub(n.mtime) > ttl_ms,
                Owner::Persistent | Owner::Ephemeral(_) => false,
            })
            .map(|(p, _)| p.to_string())
            .collect()
    }

    /// Prep of a reaper's `deleteContainer` request for `path`, against
    /// this (proposed) state, in ZooKeeper 3.8's order of checks
    /// (`PrepRequestProcessor.pRequest2Txn`, `case deleteContainer`):
    ///
    /// 1. no `/` in the path, or a NUL: BadArguments;
    /// 2. the parent is gone: NoNode; then the node is gone: NoNode (a
    ///    client deleted it, or an earlier run's delete of it is still
    ///    outstanding);
    /// 3. it has children (a child was created since the run looked):
    ///    NotEmpty;
    /// 4. it is a session's ephemeral: BadVersion (prep refuses only
    ///    ephemerals: a node recreated at the path as a plain persistent
    ///    one in the meantime would be deleted, as ZooKeeper would).
    ///
    /// There is no session check (the request has none) and no version.
    /// A failure is an error txn: it takes the zxid and changes nothing.
    /// Success is a plain delete, applied and watched as any other.
    pub fn prepare_delete_container(&self, zxid: Zxid, time_ms: i64, path: &str) -> Txn {
        Txn {
            zxid,
            time_ms,
            session: REAPER_SESSION,
            body: match self.prep_delete_container(path) {
                Ok(op) => TxnBody::Op(op),
                Err(e) => TxnBody::Error(e),
            },
        }
    }

    fn prep_delete_container(&self, path: &str) -> Result<TxnOp, ZkError> {
        if !path.contains('/') || path.contains('\0') {
            return Err(ZkError::BadArguments);
        }
        // The root's parent is ZooKeeper's "" (the root itself): present.
        if path != "/" && self.node(path::parent(path)).is_none() {
            return Err(ZkError::NoNode);
        }
        let node = self.node(path).ok_or(ZkError::NoNode)?;
        if !node.children.is_empty() {
            return Err(ZkError::NotEmpty);
        }
        if let Owner::Ephemeral(_) = node.owner {
            return Err(ZkError::BadVersion);
        }
        Ok(TxnOp::Delete {
            path: path.to_owned(),
        })
    }

    /// One reaper run on a standalone server at `now_ms`: each candidate's
    /// `deleteContainer`, prepped and applied in turn with the next zxid.
    /// Returns what each did (its path and the applied result).
    pub fn reap(&mut self, now_ms: i64) -> Vec<(String, super::Applied)> {
        self.reaper_candidates(now_ms)
            .into_iter()
            .map(|p| {
                let txn = self.prepare_delete_container(self.next_zxid(), now_ms, &p);
                let applied = self.apply(&txn);
                (p, applied)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{CreateMode, EventType, Op, Reply, WatchEvent};
    use crate::tree::TreeConfig;

    const S1: SessionId = SessionId(0x100);

    /// A tree with TTL nodes allowed and one session; every write at
    /// time 10 unless said otherwise.
    fn tree() -> DataTree {
        let mut t = DataTree::new(TreeConfig {
            extended_types: true,
        });
        t.create_session(0, S1, 30_000);
        t
    }

    fn write_at(t: &mut DataTree, time_ms: i64, op: Op) -> Result<Reply, ZkError> {
        let r = t.execute(time_ms, S1, &op).reply.unwrap();
        t.check_invariants().unwrap();
        r
    }

    fn create_at(t: &mut DataTree, time_ms: i64, path: &str, mode: CreateMode) {
        let op = Op::Create {
            path: path.into(),
            data: Vec::new(),
            mode,
        };
        write_at(t, time_ms, op).unwrap();
    }

    fn delete(t: &mut DataTree, path: &str) {
        let op = Op::Delete {
            path: path.into(),
            version: -1,
        };
        write_at(t, 10, op).unwrap();
    }

    #[test]
    fn a_container_is_a_candidate_once_it_had_a_child_and_has_none() {
        let mut t = tree();
        create_at(&mut t, 10, "/c", CreateMode::Container);
        assert!(
            t.reaper_candidates(i64::MAX).is_empty(),
            "never had a child"
        );
        create_at(&mut t, 10, "/c/x", CreateMode::Persistent);
        assert!(t.reaper_candidates(i64::MAX).is_empty(), "has a child");
        delete(&mut t, "/c/x");
        assert_eq!(t.reaper_candidates(0), vec!["/c"], "time plays no part");
        // A container emptied by a session close is one too.
        create_at(&mut t, 10, "/d", CreateMode::Container);
        create_at(&mut t, 10, "/d/e", CreateMode::Ephemeral);
        t.close_session(11, S1);
        assert_eq!(t.reaper_candidates(0), vec!["/c", "/d"]);
    }

    #[test]
    fn a_ttl_node_is_a_candidate_strictly_after_its_ttl_from_mtime() {
        let mut t = tree();
        create_at(
            &mut t,
            1000,
            "/t",
            CreateMode::PersistentWithTtl { ttl_ms: 300 },
        );
        assert!(t.reaper_candidates(1300).is_empty(), "exactly ttl: kept");
        assert_eq!(t.reaper_candidates(1301), vec!["/t"]);
        // setData moves mtime and so renews it.
        let set = Op::SetData {
            path: "/t".into(),
            data: b"x".to_vec(),
            version: -1,
        };
        write_at(&mut t, 2000, set).unwrap();
        assert!(t.reaper_candidates(2300).is_empty());
        assert_eq!(t.reaper_candidates(2301), vec!["/t"]);
        // A child keeps it; a child create does not renew it.
        create_at(&mut t, 5000, "/t/k", CreateMode::Persistent);
        assert!(t.reaper_candidates(i64::MAX).is_empty());
        delete(&mut t, "/t/k");
        assert_eq!(t.reaper_candidates(2301), vec!["/t"]);
        // Sequential TTL nodes are TTL nodes.
        create_at(
            &mut t,
            1000,
            "/q-",
            CreateMode::PersistentSequentialWithTtl { ttl_ms: 5 },
        );
        // The root had one child create (/t) before it.
        assert_eq!(t.reaper_candidates(2301), vec!["/q-0000000001", "/t"]);
        // Plain, ephemeral and never-used container nodes never are.
        create_at(&mut t, 0, "/p", CreateMode::Persistent);
        create_at(&mut t, 0, "/e", CreateMode::Ephemeral);
        create_at(&mut t, 0, "/c", CreateMode::Container);
        assert_eq!(t.reaper_candidates(i64::MAX).len(), 2);
    }

    #[test]
    fn delete_container_deletes_and_fires_watches_like_a_delete() {
        let mut t = tree();
        create_at(&mut t, 10, "/c", CreateMode::Container);
        create_at(&mut t, 10, "/c/x", CreateMode::Persistent);
        delete(&mut t, "/c/x");
        let root_pzxid = t.node("/").unwrap().pzxid;
        let zxid = t.next_zxid();
        let txn = t.prepare_delete_container(zxid, 50, "/c");
        assert_eq!(txn.session, REAPER_SESSION);
        let applied = t.apply(&txn);
        assert_eq!(applied.reply, Some(Ok(Reply::Delete)));
        assert_eq!(
            applied.triggers,
            vec![
                WatchEvent {
                    event_type: EventType::NodeDeleted,
                    path: "/c".into()
                },
                WatchEvent {
                    event_type: EventType::NodeChildrenChanged,
                    path: "/".into()
                },
            ]
        );
        assert!(t.node("/c").is_none());
        assert_eq!(t.last_zxid(), zxid);
        let root = t.node("/").unwrap();
        assert!(root.pzxid > root_pzxid && root.pzxid == zxid);
        t.check_invariants().unwrap();
    }

    #[test]
    fn delete_container_fails_as_zookeepers_prep_does_and_uses_a_zxid() {
        let mut t = tree();
        create_at(&mut t, 10, "/c", CreateMode::Container);
        create_at(&mut t, 10, "/c/x", CreateMode::Persistent);
        create_at(&mut t, 10, "/e", CreateMode::Ephemeral);
        create_at(&mut t, 10, "/p", CreateMode::Persistent);
        let cases = [
            ("c", ZkError::BadArguments),
            ("/c\0", ZkError::BadArguments),
            ("/missing/x", ZkError::NoNode),
            ("/gone", ZkError::NoNode),
            ("/c", ZkError::NotEmpty),
            ("/", ZkError::NotEmpty),
            ("/e", ZkError::BadVersion),
        ];
        for (path, err) in cases {
            let before = t.clone();
            let txn = t.prepare_delete_container(t.next_zxid(), 50, path);
            assert_eq!(txn.body, TxnBody::Error(err), "{path:?}");
            let applied = t.apply(&txn);
            assert_eq!(applied.reply, Some(Err(err)));
            assert!(applied.triggers.is_empty());
            assert_eq!(t.last_zxid(), before.last_zxid() + 1, "{path}: a zxid");
            assert_eq!(t.node_count(), before.node_count());
        }
        // Prep refuses only ephemerals: a plain node at a candidate's path
        // (recreated meanwhile) goes.
        let txn = t.prepare_delete_container(t.next_zxid(), 50, "/p");
        assert_eq!(t.apply(&txn).reply, Some(Ok(Reply::Delete)));
        assert!(t.node("/p").is_none());
    }

    #[test]
    fn a_run_deletes_its_candidates_and_an_emptied_parent_waits_for_the_next() {
        let mut t = tree();
        create_at(&mut t, 10, "/c", CreateMode::Container);
        create_at(&mut t, 10, "/c/d", CreateMode::Container);
        create_at(&mut t, 10, "/c/d/x", CreateMode::Persistent);
        create_at(
            &mut t,
            10,
            "/t",
            CreateMode::PersistentWithTtl { ttl_ms: 100 },
        );
        delete(&mut t, "/c/d/x");
        let first = t.reap(1000);
        let paths: Vec<_> = first.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            ["/c/d", "/t"],
            "/c still had /c/d when the run looked"
        );
        assert!(first
            .iter()
            .all(|(_, a)| a.reply == Some(Ok(Reply::Delete))));
        let second = t.reap(1000);
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].0, "/c");
        assert!(t.reap(1000).is_empty(), "nothing left to reap");
        assert!(t.node("/c").is_none() && t.node("/t").is_none());
        t.check_invariants().unwrap();
    }
}
