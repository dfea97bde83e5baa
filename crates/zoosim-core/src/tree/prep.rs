//! What a server's prep stage sees of the writes it has prepped but not yet
//! applied, where that differs from the proposed tree.
//!
//! ZooKeeper's `PrepRequestProcessor` decides each write against its
//! *outstanding change records* (`ZooKeeperServer.outstandingChanges`):
//! one record per path changed by a prepped txn, copied from the path's
//! previous record (or from the data tree) and changed as the txn
//! changes it; `FinalRequestProcessor` drops a txn's records once the txn
//! is applied, each only while it is still its path's latest. The
//! leader's proposed tree ([`super::DataTree`] with every prepped txn
//! applied) agrees with those records everywhere but two places, which
//! this type models:
//!
//! **A closeSession's prep does not lower the parents' child counts.** It
//! records each of the session's ephemerals as deleted and (digests on,
//! the 3.8 default) copies each parent's record with a new pzxid, but it
//! leaves the copy's `childCount` as it was (3.8 `pRequest2Txn`,
//! `case OpCode.closeSession`; the prep of a delete lowers it). Until the
//! close is applied, the parent's record counts the closing session's
//! ephemerals still, and every later record of that path is copied from
//! it: a delete of the parent prepped meanwhile fails with NotEmpty, though
//! it comes after the close in zxid order. Once the latest record of the
//! path is applied, prep reads the data tree again and the count is right.
//!
//! **A create's prep sets the record's sequence counter as it is, wrapped
//! or not** (`parentRecord.stat.setCversion(newCversion)`), while applying
//! the create only ever raises the stored counter (ZOOKEEPER-3249). Past
//! `i32::MAX` the record says `-2147483648` and on, the stored counter
//! stays at the maximum: a create prepped while such a record is
//! outstanding is named from the record, one prepped after from the
//! stored counter (docs/ZOOKEEPER.md, "Sequence numbers").
//!
//! With digests off the close adds no parent record, but the parent's
//! count then comes from an older record or from the data tree, which
//! still holds the ephemerals until the close is applied: the same
//! overcount, for as long. So one rule covers both.
//!
//! Not modelled: prep and apply run on different threads, so a multi's
//! prep could see a txn applied between two of its ops; here a write is
//! prepped against one applied prefix.

use std::collections::BTreeMap;

use super::txn::{PrepRecords, Txn, TxnBody, TxnOp};
use super::DataTree;
use crate::path;
use crate::proto::{Op, SessionId, Zxid};

/// The outstanding change records, as far as they differ from the
/// proposed tree: for every path whose latest record counts more children
/// than the proposed tree has, that record's zxid and how many more.
///
/// Feed it every txn in prep order ([`Outstanding::prepped`]) and tell it
/// how far the txns are applied ([`Outstanding::applied`]); prep reads it
/// through [`super::DataTree::prepare_over`]. A server that applies each
/// txn before it preps the next has none, which is what
/// [`super::DataTree::prepare`] assumes.
#[derive(Clone, Default, PartialEq, Eq, Hash, Debug)]
pub struct Outstanding {
    overcount: BTreeMap<String, (Zxid, i32)>,
    /// For every path whose latest record's sequence counter has wrapped
    /// past `i32::MAX` (the stored one stuck there): that record's zxid
    /// and its counter.
    wrapped: BTreeMap<String, (Zxid, i32)>,
    /// A deliberately wrong prep: closes lower their parents' counts (the
    /// proposed tree's view). Only for the tests that show the
    /// conformance suite catching a prep that differs from ZooKeeper's.
    lowers_on_close: bool,
}

impl Outstanding {
    /// No outstanding records.
    pub fn new() -> Outstanding {
        Outstanding::default()
    }

    /// A deliberately wrong copy whose closeSession prep lowers each
    /// parent's child count at once, as a delete's does. For the tests
    /// that show a difference from ZooKeeper's prep is caught; never use
    /// it to model a server.
    pub fn lowering_counts_on_close() -> Outstanding {
        Outstanding {
            lowers_on_close: true,
            ..Outstanding::default()
        }
    }

    /// Whether prep sees the proposed tree as it is.
    pub fn is_empty(&self) -> bool {
        self.overcount.is_empty() && self.wrapped.is_empty()
    }

    /// The sequence counter prep reads for `path` where it differs from
    /// the stored one (wrapped past `i32::MAX` in an outstanding record).
    pub fn sequence_counter(&self, path: &str) -> Option<i32> {
        if self.wrapped.is_empty() {
            return None;
        }
        self.wrapped.get(path).map(|&(_, c)| c)
    }

    /// How many more children than the proposed tree has prep counts
    /// at `path`.
    pub fn extra_children(&self, path: &str) -> i32 {
        if self.overcount.is_empty() {
            return 0;
        }
        self.overcount.get(path).map_or(0, |&(_, n)| n)
    }

    /// Records the change records prep made for `txn` (every txn, in prep
    /// order; a failed write or multi leaves none, as ZooKeeper rolls a
    /// failed multi's records back).
    pub fn prepped(&mut self, txn: &Txn) {
        match &txn.body {
            TxnBody::CloseSession { ephemerals } => {
                for e in ephemerals {
                    // The node's record says deleted: no children counted.
                    self.overcount.remove(e.as_str());
                    self.wrapped.remove(e.as_str());
                    if self.lowers_on_close {
                        self.touch(path::parent(e), txn.zxid);
                        continue;
                    }
                    let entry = self
                        .overcount
                        .entry(path::parent(e).to_owned())
                        .or_insert((txn.zxid, 0));
                    *entry = (txn.zxid, entry.1 + 1);
                }
            }
            TxnBody::Op(op) => self.prepped_op(op, txn.zxid),
            TxnBody::Multi(ops) => {
                for op in ops {
                    self.prepped_op(op, txn.zxid);
                }
            }
            TxnBody::CreateSession { .. } | TxnBody::Error(_) | TxnBody::MultiError(_) => {}
        }
        if cfg!(debug_assertions) {
            for (p, &(_, n)) in &self.overcount {
                assert!(n > 0, "an overcount of {n} kept for {p}");
            }
        }
    }

    fn prepped_op(&mut self, op: &TxnOp, zxid: Zxid) {
        match op {
            // A new node's record is new, not a copy: it counts right.
            TxnOp::Create {
                path,
                parent_cversion,
                ..
            } => {
                self.overcount.remove(path.as_str());
                self.wrapped.remove(path.as_str());
                let parent = path::parent(path);
                self.touch(parent, zxid);
                // Stored counters never go below 0 (they start there and
                // only rise): a negative one is a wrapped record's.
                if *parent_cversion < 0 {
                    self.wrapped
                        .insert(parent.to_owned(), (zxid, *parent_cversion));
                }
            }
            TxnOp::Delete { path } => {
                self.overcount.remove(path.as_str());
                self.wrapped.remove(path.as_str());
                self.touch(path::parent(path), zxid);
            }
            TxnOp::SetData { path, .. } => self.touch(path, zxid),
            // A check makes no record.
            TxnOp::Check { .. } => {}
        }
    }

    /// A new record of `path`, copied from its latest: an overcount goes
    /// with it and now lasts until this txn is applied.
    fn touch(&mut self, path: &str, zxid: Zxid) {
        if let Some(entry) = self.overcount.get_mut(path) {
            entry.0 = zxid;
        }
        if let Some(entry) = self.wrapped.get_mut(path) {
            entry.0 = zxid;
        }
    }

    /// Every txn up to `zxid` is applied: their records are dropped, each
    /// where it is still its path's latest.
    pub fn applied(&mut self, zxid: Zxid) {
        if !self.overcount.is_empty() {
            self.overcount.retain(|_, (z, _)| *z > zxid);
        }
        if !self.wrapped.is_empty() {
            self.wrapped.retain(|_, (z, _)| *z > zxid);
        }
    }
}

impl PrepRecords for Outstanding {
    fn extra_children(&self, path: &str) -> i32 {
        Outstanding::extra_children(self, path)
    }

    fn sequence_counter(&self, path: &str) -> Option<i32> {
        Outstanding::sequence_counter(self, path)
    }
}

impl DataTree {
    /// [`DataTree::prepare`] as a server with txns prepped but not yet
    /// applied decides it: against this proposed state as `records` say
    /// prep sees it (a closing session's ephemerals still counted in their
    /// parents, a sequence counter wrapped past `i32::MAX`).
    pub fn prepare_over(
        &self,
        records: &Outstanding,
        zxid: Zxid,
        time_ms: i64,
        session: SessionId,
        op: &Op,
    ) -> Txn {
        self.prepare_with(records, zxid, time_ms, session, op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{CreateMode, MultiOp, Op, SessionId, ZkError};
    use crate::tree::{DataTree, Txn};

    const OWNER: SessionId = SessionId(0x100);
    const OTHER: SessionId = SessionId(0x200);

    /// A pipelined server: prepped txns go into the proposed tree at
    /// once, and their records stay until `applied`.
    struct Pipeline {
        proposed: DataTree,
        records: Outstanding,
    }

    impl Pipeline {
        /// `/p` with two ephemerals of OWNER under it, all applied.
        fn new(records: Outstanding) -> Pipeline {
            let mut t = DataTree::default();
            t.create_session(0, OWNER, 30_000);
            t.create_session(0, OTHER, 30_000);
            let mut p = Pipeline {
                proposed: t,
                records,
            };
            p.write(OTHER, create("/p", CreateMode::Persistent));
            p.write(OWNER, create("/p/e1", CreateMode::Ephemeral));
            p.write(OWNER, create("/p/e2", CreateMode::Ephemeral));
            p.records.applied(p.proposed.last_zxid());
            p
        }

        fn write(&mut self, session: SessionId, op: Op) -> (Zxid, TxnBody) {
            let zxid = self.proposed.next_zxid();
            let txn = self
                .proposed
                .prepare_over(&self.records, zxid, 1, session, &op);
            self.records.prepped(&txn);
            self.proposed.apply(&txn);
            (zxid, txn.body)
        }

        fn close(&mut self, session: SessionId) -> Zxid {
            let zxid = self.proposed.next_zxid();
            let txn = self.proposed.prepare_close_session(zxid, 1, session);
            self.records.prepped(&txn);
            self.proposed.apply(&txn);
            zxid
        }
    }

    fn create(path: &str, mode: CreateMode) -> Op {
        Op::Create {
            path: path.into(),
            data: Vec::new(),
            mode,
        }
    }

    fn delete(path: &str) -> Op {
        Op::Delete {
            path: path.into(),
            version: -1,
        }
    }

    #[test]
    fn a_delete_prepped_before_the_close_is_applied_is_not_empty() {
        let mut p = Pipeline::new(Outstanding::new());
        let close = p.close(OWNER);
        assert_eq!(p.records.extra_children("/p"), 2);
        // The proposed tree has no children under /p; prep still counts two.
        assert!(p.proposed.node("/p").unwrap().children.is_empty());
        let (_, body) = p.write(OTHER, delete("/p"));
        assert_eq!(body, TxnBody::Error(ZkError::NotEmpty));
        // Once the close is applied its records go, and the delete passes.
        p.records.applied(close);
        assert!(p.records.is_empty());
        let (_, body) = p.write(OTHER, delete("/p"));
        assert!(
            matches!(body, TxnBody::Op(TxnOp::Delete { .. })),
            "{body:?}"
        );
    }

    #[test]
    fn later_records_of_the_parent_carry_the_overcount_until_they_are_applied() {
        let mut p = Pipeline::new(Outstanding::new());
        let close = p.close(OWNER);
        // A child created and deleted after the close: each copies the
        // parent's record, so the overcount lasts until the last is applied.
        let (created, _) = p.write(OTHER, create("/p/c", CreateMode::Persistent));
        let (deleted, _) = p.write(OTHER, delete("/p/c"));
        assert_eq!(p.records.extra_children("/p"), 2);
        p.records.applied(close);
        p.records.applied(created);
        let (_, body) = p.write(OTHER, delete("/p"));
        assert_eq!(body, TxnBody::Error(ZkError::NotEmpty));
        p.records.applied(deleted);
        let (_, body) = p.write(OTHER, delete("/p"));
        assert!(matches!(body, TxnBody::Op(_)), "{body:?}");
    }

    #[test]
    fn a_check_or_a_failed_multi_makes_no_record() {
        let mut p = Pipeline::new(Outstanding::new());
        let close = p.close(OWNER);
        let check = Op::Multi(vec![
            MultiOp::Check {
                path: "/p".into(),
                version: -1,
            },
            MultiOp::SetData {
                path: "/missing".into(),
                data: Vec::new(),
                version: -1,
            },
        ]);
        let (_, body) = p.write(OTHER, check);
        assert!(matches!(body, TxnBody::MultiError(_)), "{body:?}");
        let (_, body) = p.write(
            OTHER,
            Op::Multi(vec![MultiOp::Check {
                path: "/p".into(),
                version: -1,
            }]),
        );
        assert!(matches!(body, TxnBody::Multi(_)), "{body:?}");
        // Neither extended the close's record: applying the close ends it.
        p.records.applied(close);
        assert!(p.records.is_empty());
    }

    #[test]
    fn a_multi_deleting_the_parent_sees_the_overcount() {
        let mut p = Pipeline::new(Outstanding::new());
        p.close(OWNER);
        let multi = Op::Multi(vec![MultiOp::Delete {
            path: "/p".into(),
            version: -1,
        }]);
        let (_, body) = p.write(OTHER, multi);
        assert!(
            matches!(&body, TxnBody::MultiError(r) if r[0] == crate::proto::MultiResult::Failed(ZkError::NotEmpty)),
            "{body:?}"
        );
        assert_eq!(p.records.extra_children("/p"), 2);
    }

    #[test]
    fn creates_in_flight_past_the_counter_limit_are_named_from_the_wrapped_record() {
        let mut p = Pipeline::new(Outstanding::new());
        // /p's stored counter at i32::MAX - 1 (a create txn carries it).
        let zxid = p.proposed.next_zxid();
        p.proposed.apply(&Txn {
            zxid,
            time_ms: 1,
            session: OTHER,
            body: TxnBody::Op(TxnOp::Create {
                path: "/p/c".into(),
                data: Vec::new(),
                owner: crate::tree::Owner::Persistent,
                parent_cversion: i32::MAX - 1,
            }),
        });
        let name = |body: &TxnBody| match body {
            TxnBody::Op(TxnOp::Create { path, .. }) => path.clone(),
            other => panic!("{other:?}"),
        };
        let seq = || create("/p/s-", CreateMode::PersistentSequential);
        let (_, first) = p.write(OTHER, seq());
        let (at_max, second) = p.write(OTHER, seq());
        assert_eq!(name(&first), "/p/s-2147483646");
        assert_eq!(name(&second), "/p/s-2147483647");
        assert_eq!(p.proposed.node("/p").unwrap().child_creates, i32::MAX);
        // Prepped while the create at MAX is outstanding: its record wrapped.
        assert_eq!(p.records.sequence_counter("/p"), Some(i32::MIN));
        let (wrapped, third) = p.write(OTHER, seq());
        assert_eq!(name(&third), "/p/s--2147483648");
        // Once they are applied, prep reads the stored counter, stuck at MAX.
        p.records.applied(at_max);
        assert_eq!(p.records.sequence_counter("/p"), Some(i32::MIN + 1));
        p.records.applied(wrapped);
        assert!(p.records.is_empty());
        let (_, fourth) = p.write(OTHER, seq());
        assert_eq!(fourth, TxnBody::Error(ZkError::NodeExists));
    }

    #[test]
    fn the_deliberately_wrong_copy_lowers_the_count_at_the_close() {
        let mut p = Pipeline::new(Outstanding::lowering_counts_on_close());
        p.close(OWNER);
        assert_eq!(p.records.extra_children("/p"), 0);
        let (_, body) = p.write(OTHER, delete("/p"));
        assert!(matches!(body, TxnBody::Op(_)), "{body:?}");
    }
}
