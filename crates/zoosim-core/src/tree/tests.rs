//! Unit tests of the tree against the facts of docs/ZOOKEEPER.md, "Paths"
//! to "Watches and SetWatches".

use super::*;
use crate::proto::{CreateMode, MultiOp};
use std::hash::DefaultHasher;

const S1: SessionId = SessionId(0x100);
const S2: SessionId = SessionId(0x200);

fn tree() -> DataTree {
    let mut t = DataTree::default();
    t.create_session(0, S1, 30_000);
    t.create_session(0, S2, 30_000);
    t
}

fn create(t: &mut DataTree, path: &str, mode: CreateMode) -> Result<String, ZkError> {
    let op = Op::Create {
        path: path.into(),
        data: b"d".to_vec(),
        mode,
    };
    match t.execute(7, S1, &op).reply.unwrap() {
        Ok(Reply::Create { path, .. }) => Ok(path),
        Ok(other) => panic!("{other:?}"),
        Err(e) => Err(e),
    }
}

fn write(t: &mut DataTree, session: SessionId, op: Op) -> Result<Reply, ZkError> {
    let r = t.execute(9, session, &op).reply.unwrap();
    t.check_invariants().unwrap();
    r
}

fn stat(t: &DataTree, path: &str) -> Stat {
    t.node(path).unwrap().stat()
}

/// A value's hash under a fixed hasher.
fn hash_of(t: &impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    t.hash(&mut h);
    h.finish()
}

#[test]
fn fresh_tree_has_builtin_nodes() {
    let t = DataTree::default();
    let (r, _) = t.read(&Op::GetChildren {
        path: "/".into(),
        watch: false,
    });
    assert_eq!(
        r,
        Ok(Reply::GetChildren {
            children: vec!["zookeeper".into()],
            stat: stat(&t, "/"),
        })
    );
    assert_eq!(stat(&t, "/").cversion, -1);
    assert!(t.node("/zookeeper/quota").is_some());
    assert!(t.node("/zookeeper/config").is_some());
    t.check_invariants().unwrap();
}

#[test]
fn sequence_numbers_follow_the_parent_counter() {
    // The observed sequence of docs/ZOOKEEPER.md, "Sequence numbers".
    let mut t = tree();
    create(&mut t, "/p", CreateMode::Persistent).unwrap();
    let a = create(&mut t, "/p/x-", CreateMode::PersistentSequential).unwrap();
    let b = create(&mut t, "/p/x-", CreateMode::PersistentSequential).unwrap();
    assert_eq!(
        (a.as_str(), b.as_str()),
        ("/p/x-0000000000", "/p/x-0000000001")
    );
    write(
        &mut t,
        S1,
        Op::Delete {
            path: a,
            version: -1,
        },
    )
    .unwrap();
    let c = create(&mut t, "/p/x-", CreateMode::PersistentSequential).unwrap();
    assert_eq!(c, "/p/x-0000000002");
    create(&mut t, "/p/y", CreateMode::Persistent).unwrap();
    let d = create(&mut t, "/p/", CreateMode::PersistentSequential).unwrap();
    assert_eq!(d, "/p/0000000004");
    // 5 creates + 1 delete.
    assert_eq!(stat(&t, "/p").cversion, 6);
    assert_eq!(stat(&t, "/p").num_children, 4);
}

#[test]
fn failed_creates_use_no_number_but_use_a_zxid() {
    let mut t = tree();
    create(&mut t, "/p", CreateMode::Persistent).unwrap();
    let before = t.last_zxid();
    assert_eq!(
        create(&mut t, "/missing/x-", CreateMode::PersistentSequential),
        Err(ZkError::NoNode)
    );
    assert_eq!(t.last_zxid(), before + 1);
    let a = create(&mut t, "/p/x-", CreateMode::PersistentSequential).unwrap();
    assert_eq!(a, "/p/x-0000000000");
}

#[test]
fn sequence_counter_sticks_at_its_maximum() {
    // DataTree.createNode moves the counter only forward (ZOOKEEPER-3249):
    // MAX + 1 wraps to MIN at prep, is not larger, and is not applied.
    let mut t = tree();
    create(&mut t, "/p", CreateMode::Persistent).unwrap();
    t.update_node("/p", |n| n.child_creates = i32::MAX - 1);
    let a = create(&mut t, "/p/x-", CreateMode::PersistentSequential).unwrap();
    let b = create(&mut t, "/p/x-", CreateMode::PersistentSequential).unwrap();
    assert_eq!(a, "/p/x-2147483646");
    assert_eq!(b, "/p/x-2147483647");
    let pzxid = stat(&t, "/p").pzxid;
    assert_eq!(
        create(&mut t, "/p/x-", CreateMode::PersistentSequential),
        Err(ZkError::NodeExists),
        "the name repeats"
    );
    create(&mut t, "/p/y", CreateMode::Persistent).unwrap();
    assert_eq!(t.node("/p").unwrap().child_creates, i32::MAX);
    assert_eq!(stat(&t, "/p").pzxid, pzxid, "pzxid sticks with the counter");
    assert_eq!(sequence_suffix(-5), "-000000005");
    t.check_invariants().unwrap();
}

#[test]
fn sequence_counter_wraps_inside_a_multi() {
    // Prep's record of the parent takes the wrapped counter
    // (PrepRequestProcessor.pRequest2TxnCreate), so the create after the one
    // at MAX in the same multi is named `-2147483648`; the apply still keeps
    // the stored counter at MAX. Observed on 3.8.0 by the conformance test
    // seq_limit.rs.
    let mut t = tree();
    create(&mut t, "/p", CreateMode::Persistent).unwrap();
    t.update_node("/p", |n| n.child_creates = i32::MAX - 1);
    let seq = || MultiOp::Create {
        path: "/p/x-".into(),
        data: vec![],
        mode: CreateMode::PersistentSequential,
    };
    let missing = MultiOp::Check {
        path: "/p/missing".into(),
        version: -1,
    };
    // Failing: every create rolls back, the wrapped name included.
    let ops = vec![seq(), seq(), seq(), missing];
    assert_eq!(
        write(&mut t, S1, Op::Multi(ops)),
        Ok(Reply::Multi(vec![
            MultiResult::RolledBack,
            MultiResult::RolledBack,
            MultiResult::RolledBack,
            MultiResult::Failed(ZkError::NoNode),
        ]))
    );
    assert_eq!(t.node("/p").unwrap().child_creates, i32::MAX - 1);
    let Ok(Reply::Multi(results)) = write(&mut t, S1, Op::Multi(vec![seq(), seq(), seq()])) else {
        panic!("the multi commits")
    };
    let names: Vec<_> = results
        .iter()
        .map(|r| match r {
            MultiResult::Create { path, .. } => path.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        names,
        ["/p/x-2147483646", "/p/x-2147483647", "/p/x--2147483648"]
    );
    assert_eq!(t.node("/p").unwrap().child_creates, i32::MAX, "sticks");
    // Alone, a create is named from the stored counter again.
    assert_eq!(
        create(&mut t, "/p/x-", CreateMode::PersistentSequential),
        Err(ZkError::NodeExists)
    );
    t.check_invariants().unwrap();
}

#[test]
fn equal_histories_give_equal_trees() {
    // An ephemeral created and deleted leaves no trace in the index.
    let mut t = tree();
    let before = t.clone();
    create(&mut t, "/e", CreateMode::Ephemeral).unwrap();
    write(
        &mut t,
        S1,
        Op::Delete {
            path: "/e".into(),
            version: -1,
        },
    )
    .unwrap();
    t.last_zxid = before.last_zxid;
    t.update_node("/", |n| {
        n.child_creates = 0;
        n.pzxid = 0;
    });
    assert_eq!(t, before);
    assert_eq!(hash_of(&t), hash_of(&before));
}

#[test]
fn prepare_refuses_paths_without_a_slash() {
    let t = tree();
    for op in [
        Op::Create {
            path: "a".into(),
            data: vec![],
            mode: CreateMode::Persistent,
        },
        Op::Delete {
            path: "a".into(),
            version: -1,
        },
    ] {
        let txn = t.prepare(t.next_zxid(), 0, S1, &op);
        assert_eq!(txn.body, TxnBody::Error(ZkError::BadArguments));
    }
}

#[test]
fn first_sequential_child_of_root_is_zero() {
    let mut t = tree();
    assert_eq!(
        create(&mut t, "/x-", CreateMode::PersistentSequential).unwrap(),
        "/x-0000000000"
    );
    // The client boundary refuses create("/"); the tree follows the server's
    // code (unverified: the Rust client never sends it).
    assert_eq!(
        create(&mut t, "/", CreateMode::Persistent),
        Err(ZkError::NodeExists)
    );
}

#[test]
fn stat_fields_track_changes() {
    let mut t = tree();
    create(&mut t, "/a", CreateMode::Persistent).unwrap();
    let s = stat(&t, "/a");
    assert_eq!((s.czxid, s.mzxid, s.pzxid), (s.czxid, s.czxid, s.czxid));
    assert_eq!((s.ctime, s.mtime, s.version, s.data_length), (7, 7, 0, 1));
    let r = write(
        &mut t,
        S1,
        Op::SetData {
            path: "/a".into(),
            data: b"xyz".to_vec(),
            version: 0,
        },
    )
    .unwrap();
    let s2 = stat(&t, "/a");
    assert_eq!(r, Reply::SetData(s2));
    assert_eq!((s2.version, s2.data_length, s2.mtime), (1, 3, 9));
    assert!(s2.mzxid > s.mzxid);
    assert_eq!(s2.pzxid, s.pzxid, "setData does not touch pzxid");
    create(&mut t, "/a/b", CreateMode::Persistent).unwrap();
    let s3 = stat(&t, "/a");
    assert_eq!(s3.pzxid, stat(&t, "/a/b").czxid);
    assert_eq!(s3.mzxid, s2.mzxid, "child ops leave mzxid alone");
    write(
        &mut t,
        S1,
        Op::Delete {
            path: "/a/b".into(),
            version: -1,
        },
    )
    .unwrap();
    let s4 = stat(&t, "/a");
    assert_eq!(s4.pzxid, t.last_zxid());
    assert_eq!((s4.cversion, s4.num_children), (2, 0));
}

#[test]
fn versions_check_and_wrap() {
    let mut t = tree();
    create(&mut t, "/a", CreateMode::Persistent).unwrap();
    let set = |version| Op::SetData {
        path: "/a".into(),
        data: vec![],
        version,
    };
    assert_eq!(write(&mut t, S1, set(5)), Err(ZkError::BadVersion));
    write(&mut t, S1, set(0)).unwrap();
    write(&mut t, S1, set(-1)).unwrap();
    assert_eq!(stat(&t, "/a").version, 2);
    t.update_node("/a", |n| n.version = i32::MAX);
    write(&mut t, S1, set(i32::MAX)).unwrap();
    assert_eq!(stat(&t, "/a").version, i32::MIN);
}

#[test]
fn delete_checks_in_server_order() {
    let mut t = tree();
    create(&mut t, "/a", CreateMode::Persistent).unwrap();
    create(&mut t, "/a/b", CreateMode::Persistent).unwrap();
    let del = |p: &str, version| Op::Delete {
        path: p.into(),
        version,
    };
    // BadVersion beats NotEmpty.
    assert_eq!(write(&mut t, S1, del("/a", 3)), Err(ZkError::BadVersion));
    assert_eq!(write(&mut t, S1, del("/a", 0)), Err(ZkError::NotEmpty));
    assert_eq!(write(&mut t, S1, del("/x/y", 0)), Err(ZkError::NoNode));
    for special in ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"] {
        assert_eq!(
            write(&mut t, S1, del(special, -1)),
            Err(ZkError::BadArguments)
        );
    }
}

#[test]
fn ephemerals_cannot_have_children_and_node_exists_wins() {
    let mut t = tree();
    create(&mut t, "/e", CreateMode::Ephemeral).unwrap();
    assert_eq!(
        create(&mut t, "/e/c", CreateMode::Persistent),
        Err(ZkError::NoChildrenForEphemerals)
    );
    assert_eq!(
        create(&mut t, "/e", CreateMode::Ephemeral),
        Err(ZkError::NodeExists)
    );
    assert_eq!(stat(&t, "/e").ephemeral_owner, S1.0);
}

#[test]
fn containers_and_ttl_hide_their_owner_marker() {
    let mut t = tree();
    create(&mut t, "/c", CreateMode::Container).unwrap();
    assert_eq!(stat(&t, "/c").ephemeral_owner, 0);
    create(&mut t, "/c/e", CreateMode::Ephemeral).unwrap();
    assert_eq!(
        create(&mut t, "/t", CreateMode::PersistentWithTtl { ttl_ms: 100 }),
        Err(ZkError::Unimplemented)
    );
    let mut t = DataTree::new(TreeConfig {
        extended_types: true,
    });
    t.create_session(0, S1, 30_000);
    create(&mut t, "/t", CreateMode::PersistentWithTtl { ttl_ms: 100 }).unwrap();
    assert_eq!(stat(&t, "/t").ephemeral_owner, 0);
    assert_eq!(
        create(&mut t, "/t2", CreateMode::PersistentWithTtl { ttl_ms: 0 }),
        Err(ZkError::BadArguments)
    );
}

#[test]
fn close_session_deletes_its_ephemerals_at_one_zxid() {
    let mut t = tree();
    create(&mut t, "/p", CreateMode::Persistent).unwrap();
    create(&mut t, "/p/e1", CreateMode::Ephemeral).unwrap();
    create(&mut t, "/p/e2-", CreateMode::EphemeralSequential).unwrap();
    write(
        &mut t,
        S2,
        Op::Create {
            path: "/p/other".into(),
            data: vec![],
            mode: CreateMode::Ephemeral,
        },
    )
    .unwrap();
    let triggers = t.close_session(20, S1);
    assert_eq!(triggers.len(), 4, "{triggers:?}");
    let p = stat(&t, "/p");
    assert_eq!(p.num_children, 1);
    assert_eq!(p.pzxid, t.last_zxid());
    assert!(!t.has_session(S1));
    assert_eq!(t.ephemerals(S2).collect::<Vec<_>>(), vec!["/p/other"]);
    t.check_invariants().unwrap();
    // A closed session's writes fail.
    assert_eq!(
        write(
            &mut t,
            S1,
            Op::Create {
                path: "/q".into(),
                data: vec![],
                mode: CreateMode::Persistent
            }
        ),
        Err(ZkError::SessionExpired)
    );
}

#[test]
fn multi_commits_atomically_at_one_zxid() {
    let mut t = tree();
    let ops = vec![
        MultiOp::Create {
            path: "/a".into(),
            data: vec![],
            mode: CreateMode::Persistent,
        },
        MultiOp::Create {
            path: "/a/s-".into(),
            data: vec![],
            mode: CreateMode::PersistentSequential,
        },
        MultiOp::Create {
            path: "/a/s-".into(),
            data: vec![],
            mode: CreateMode::PersistentSequential,
        },
        MultiOp::SetData {
            path: "/a".into(),
            data: b"v".to_vec(),
            version: 0,
        },
        MultiOp::Check {
            path: "/a".into(),
            version: 1,
        },
        MultiOp::Delete {
            path: "/a/s-0000000000".into(),
            version: 0,
        },
    ];
    let applied = t.execute(5, S1, &Op::Multi(ops));
    let Some(Ok(Reply::Multi(results))) = applied.reply else {
        panic!("{applied:?}")
    };
    let z = t.last_zxid();
    assert!(
        matches!(&results[1], MultiResult::Create { path, stat: None } if path == "/a/s-0000000000")
    );
    assert!(matches!(&results[2], MultiResult::Create { path, .. } if path == "/a/s-0000000001"));
    assert!(matches!(&results[3], MultiResult::SetData { stat } if stat.version == 1));
    assert_eq!(results[4], MultiResult::Check);
    assert_eq!(results[5], MultiResult::Delete);
    assert_eq!(stat(&t, "/a").czxid, z);
    assert_eq!(applied.triggers.len(), 9);
    t.check_invariants().unwrap();
}

#[test]
fn failed_multi_changes_nothing_but_uses_a_zxid() {
    let mut t = tree();
    create(&mut t, "/p", CreateMode::Persistent).unwrap();
    let before = t.clone();
    let ops = vec![
        MultiOp::Create {
            path: "/p/s-".into(),
            data: vec![],
            mode: CreateMode::PersistentSequential,
        },
        MultiOp::Create {
            path: "/p".into(),
            data: vec![],
            mode: CreateMode::Persistent,
        },
        MultiOp::Delete {
            path: "/p".into(),
            version: -1,
        },
    ];
    let applied = t.execute(5, S1, &Op::Multi(ops));
    assert_eq!(
        applied.reply,
        Some(Ok(Reply::Multi(vec![
            MultiResult::RolledBack,
            MultiResult::Failed(ZkError::NodeExists),
            MultiResult::Failed(ZkError::RuntimeInconsistency),
        ])))
    );
    assert!(applied.triggers.is_empty());
    assert_eq!(t.last_zxid(), before.last_zxid() + 1);
    assert_eq!(t.node("/p"), before.node("/p"), "counter restored");
    assert_eq!(
        create(&mut t, "/p/s-", CreateMode::PersistentSequential).unwrap(),
        "/p/s-0000000000"
    );
}

#[test]
fn multi_sees_its_own_earlier_ops() {
    let mut t = tree();
    create(&mut t, "/p", CreateMode::Persistent).unwrap();
    create(&mut t, "/p/c", CreateMode::Persistent).unwrap();
    // Deleting the child first makes the parent deletable in the same multi.
    let ops = vec![
        MultiOp::Delete {
            path: "/p/c".into(),
            version: -1,
        },
        MultiOp::Delete {
            path: "/p".into(),
            version: -1,
        },
        MultiOp::Check {
            path: "/p".into(),
            version: -1,
        },
    ];
    let r = write(&mut t, S1, Op::Multi(ops)).unwrap();
    assert_eq!(r.multi_error(), Some(ZkError::NoNode));
    assert!(t.node("/p/c").is_some());
}

#[test]
fn reads_and_the_watches_they_set() {
    let mut t = tree();
    create(&mut t, "/a", CreateMode::Persistent).unwrap();
    let (r, w) = t.read(&Op::Exists {
        path: "/nope".into(),
        watch: true,
    });
    assert_eq!(r, Ok(Reply::Exists(None)));
    assert_eq!(w, Some((WatchKind::Data, "/nope".into())));
    let (r, w) = t.read(&Op::GetData {
        path: "/nope".into(),
        watch: true,
    });
    assert_eq!((r, w), (Err(ZkError::NoNode), None));
    let (_, w) = t.read(&Op::GetChildren {
        path: "/a".into(),
        watch: true,
    });
    assert_eq!(w, Some((WatchKind::Child, "/a".into())));
    let (_, w) = t.read(&Op::GetData {
        path: "/a".into(),
        watch: false,
    });
    assert_eq!(w, None);
}

#[test]
fn watch_table_fires_once_per_connection() {
    let mut t = tree();
    let mut w: WatchTable<u32> = WatchTable::new();
    create(&mut t, "/a", CreateMode::Persistent).unwrap();
    w.register(1, WatchKind::Data, "/a");
    w.register(1, WatchKind::Data, "/a");
    w.register(1, WatchKind::Child, "/a");
    w.register(2, WatchKind::Child, "/a");
    w.register(3, WatchKind::Child, "/");
    let applied = t.execute(
        1,
        S1,
        &Op::Delete {
            path: "/a".into(),
            version: -1,
        },
    );
    let events = w.fire_all(&applied.triggers);
    let deleted = |c| {
        (
            c,
            WatchEvent {
                event_type: EventType::NodeDeleted,
                path: "/a".into(),
            },
        )
    };
    assert_eq!(
        events,
        vec![
            deleted(1),
            deleted(2),
            (
                3,
                WatchEvent {
                    event_type: EventType::NodeChildrenChanged,
                    path: "/".into()
                }
            )
        ]
    );
    assert!(w.is_empty(), "one-shot");
}

#[test]
fn watch_table_drops_a_connection() {
    let mut w: WatchTable<u32> = WatchTable::new();
    w.register(1, WatchKind::Data, "/a");
    w.register(2, WatchKind::Data, "/a");
    w.remove_connection(1);
    assert!(!w.is_watching(1, WatchKind::Data, "/a"));
    assert!(w.is_watching(2, WatchKind::Data, "/a"));
    assert_eq!(w.len(), 1);
}

#[test]
fn set_watches_replays_what_was_missed() {
    let mut t = tree();
    for p in ["/same", "/changed", "/deleted", "/kids", "/recreated"] {
        create(&mut t, p, CreateMode::Persistent).unwrap();
    }
    let seen = t.last_zxid();
    let set = |p: &str| Op::SetData {
        path: p.into(),
        data: vec![],
        version: -1,
    };
    let del = |p: &str| Op::Delete {
        path: p.into(),
        version: -1,
    };
    write(&mut t, S1, set("/changed")).unwrap();
    write(&mut t, S1, del("/deleted")).unwrap();
    create(&mut t, "/kids/k", CreateMode::Persistent).unwrap();
    write(&mut t, S1, del("/recreated")).unwrap();
    create(&mut t, "/recreated", CreateMode::Persistent).unwrap();
    create(&mut t, "/born", CreateMode::Persistent).unwrap();
    create(&mut t, "/brief", CreateMode::Persistent).unwrap();
    write(&mut t, S1, del("/brief")).unwrap();
    let mut w: WatchTable<u32> = WatchTable::new();
    let s = |v: &[&str]| v.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    let events = w.set_watches(
        7,
        &t,
        seen,
        &s(&["/same", "/changed", "/deleted", "/recreated"]),
        &s(&["/born", "/brief"]),
        &s(&["/kids", "/same"]),
    );
    let ev = |e, p: &str| WatchEvent {
        event_type: e,
        path: p.into(),
    };
    assert_eq!(
        events,
        vec![
            ev(EventType::NodeDataChanged, "/changed"),
            ev(EventType::NodeDeleted, "/deleted"),
            // Deleted and re-created while away: a data change, not a delete.
            ev(EventType::NodeDataChanged, "/recreated"),
            ev(EventType::NodeCreated, "/born"),
            ev(EventType::NodeChildrenChanged, "/kids"),
        ]
    );
    assert!(w.is_watching(7, WatchKind::Data, "/same"));
    assert!(w.is_watching(7, WatchKind::Child, "/same"));
    // Created and deleted while away: no event, the watch stays.
    assert!(w.is_watching(7, WatchKind::Data, "/brief"));
    assert_eq!(w.len(), 3);
}

#[test]
fn prepare_does_not_change_the_tree() {
    let t = tree();
    let before = t.clone();
    let txn = t.prepare(
        t.next_zxid(),
        0,
        S1,
        &Op::Create {
            path: "/a".into(),
            data: vec![],
            mode: CreateMode::Persistent,
        },
    );
    assert_eq!(t, before);
    assert!(matches!(txn.body, TxnBody::Op(TxnOp::Create { .. })));
}

#[test]
#[should_panic(expected = "not after last applied")]
fn zxids_must_increase() {
    let mut t = tree();
    let txn = t.prepare_create_session(1, 0, SessionId(9), 1000);
    t.apply(&txn);
}

/// The node at `path` of a tree's nodes, to break.
fn at<'a>(nodes: &'a mut Nodes, path: &str) -> &'a mut Node {
    Arc::make_mut(nodes.get_mut(path).expect("the node"))
}

/// `/a` persistent with `/a/e` ephemeral (of S1), then `corrupt`: which
/// invariant the check says is broken. The digest is recomputed after the
/// corruption, so that each case trips the invariant it is about rather
/// than the digest's (checked last).
fn broken_by(corrupt: impl FnOnce(&mut Nodes)) -> Invariant {
    broken_with_digest(corrupt, true)
}

/// [`broken_by`], the kept digest recomputed after `corrupt` or left stale.
fn broken_with_digest(corrupt: impl FnOnce(&mut Nodes), recompute: bool) -> Invariant {
    let mut t = tree();
    create(&mut t, "/a", CreateMode::Persistent).unwrap();
    create(&mut t, "/a/e", CreateMode::Ephemeral).unwrap();
    t.check_invariants().unwrap();
    let last = t.last_zxid();
    corrupt(t.nodes_mut_for_test());
    if recompute {
        t.recompute_digest_for_test();
    }
    let violation = t.check_invariants().unwrap_err();
    let shown = violation.to_string();
    assert!(
        shown.starts_with(&format!(
            "tree invariant {} broken: ",
            violation.invariant.name()
        )),
        "{shown}"
    );
    assert_eq!(t.last_zxid(), last, "only the nodes were touched");
    violation.invariant
}

#[test]
fn the_invariant_check_names_the_invariant_broken() {
    assert_eq!(
        broken_by(|n| {
            n.remove("/a");
            at(n, "/").children.remove("a");
        }),
        Invariant::ParentExists
    );
    assert_eq!(
        broken_by(|n| {
            at(n, "/").children.remove("a");
        }),
        Invariant::ListedByParent
    );
    assert_eq!(
        broken_by(|n| {
            at(n, "/a").children.insert("ghost".into());
        }),
        Invariant::ChildExists
    );
    assert_eq!(
        broken_by(|n| {
            let a = at(n, "/a");
            a.mzxid = a.czxid - 1;
        }),
        Invariant::ZxidOrder
    );
    assert_eq!(
        broken_by(|n| {
            let a = at(n, "/a");
            a.pzxid = a.czxid - 1;
        }),
        Invariant::ZxidOrder
    );
    assert_eq!(
        broken_by(|n| at(n, "/a").mzxid += 100),
        Invariant::NoFutureZxid
    );
    assert_eq!(
        broken_by(|n| {
            let mut child = Node::clone(&n["/a"]);
            child.children.clear();
            n.insert("/a/e/x".into(), Arc::new(child));
            at(n, "/a/e").children.insert("x".into());
        }),
        Invariant::EphemeralLeaf
    );
    assert_eq!(
        broken_by(|n| at(n, "/a/e").owner = Owner::Ephemeral(SessionId(0x999))),
        Invariant::EphemeralOwnerLive
    );
    assert_eq!(
        broken_by(|n| at(n, "/a/e").owner = Owner::Persistent),
        Invariant::EphemeralIndex
    );
    // A change that went round the digest's helpers, structurally sound.
    assert_eq!(
        broken_with_digest(|n| at(n, "/a").data.push(b'!'), false),
        Invariant::Digest
    );
    assert_eq!(
        broken_with_digest(|n| at(n, "/a").version += 1, false),
        Invariant::Digest
    );
    // A child list is not in the digest, so this trips its own invariant
    // even with the digest stale.
    assert_eq!(
        broken_with_digest(
            |n| {
                at(n, "/a").children.insert("ghost".into());
            },
            false
        ),
        Invariant::ChildExists
    );
}

/// A long, fixed, random-looking run of writes (creates plain and
/// sequential, persistent and ephemeral, deletes, setData, multis, session
/// closes and new sessions): after every one the kept digest is the one
/// computed from scratch (the invariant check compares them).
#[test]
fn the_kept_digest_follows_every_write() {
    const PATHS: [&str; 8] = ["/a", "/a/b", "/a/b/c", "/a/d", "/q", "/q/n-", "/q/m-", "/e"];
    const MODES: [CreateMode; 4] = [
        CreateMode::Persistent,
        CreateMode::Ephemeral,
        CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential,
    ];
    // xorshift64: a fixed sequence, no dependency on a random source.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let mut t = tree();
    let mut sessions = [S1, S2];
    let mut fresh_session = 0x300;
    let (mut created, mut closed) = (0, 0);
    for step in 0..2_000 {
        let path = PATHS[next(PATHS.len())].to_owned();
        let data = vec![b'0' + next(10) as u8; next(4)];
        let session = sessions[next(sessions.len())];
        let op = match next(12) {
            0..=3 => Op::Create {
                path,
                data,
                mode: MODES[next(MODES.len())],
            },
            4..=6 => Op::Delete { path, version: -1 },
            7..=8 => Op::SetData {
                path,
                data,
                version: -1,
            },
            9..=10 => Op::Multi(
                (0..1 + next(3))
                    .map(|_| {
                        let path = PATHS[next(PATHS.len())].to_owned();
                        match next(3) {
                            0 => MultiOp::Create {
                                path,
                                data: b"m".to_vec(),
                                mode: MODES[next(MODES.len())],
                            },
                            1 => MultiOp::Delete { path, version: -1 },
                            _ => MultiOp::SetData {
                                path,
                                data: b"x".to_vec(),
                                version: -1,
                            },
                        }
                    })
                    .collect(),
            ),
            _ => {
                // Close a session (its ephemerals go) and open another.
                let k = next(sessions.len());
                if t.ephemerals(sessions[k]).next().is_some() {
                    closed += 1;
                }
                t.close_session(step, sessions[k]);
                sessions[k] = SessionId(fresh_session);
                t.create_session(step, SessionId(fresh_session), 30_000);
                fresh_session += 1;
                t.check_invariants().unwrap();
                continue;
            }
        };
        if let Some(Ok(Reply::Create { .. })) = t.execute(step, session, &op).reply {
            created += 1;
        }
        t.check_invariants()
            .unwrap_or_else(|v| panic!("step {step}, {op:?}: {v}"));
    }
    assert!(created > 100, "{created} creates: the run reaches deep");
    assert!(closed > 10, "{closed} closes with ephemerals");
    assert!(t.node_count() > 8);
}

/// Trees with the same content have the same digest and hash, whatever
/// writes made them: nodes created in another order, data set through
/// other values, failed writes in between, a node made and deleted again
/// (the zxids then renamed alike, as the models' canonical states do).
#[test]
fn equal_trees_reached_apart_have_one_digest() {
    let set = |t: &mut DataTree, path: &str, data: &[u8]| {
        let op = Op::SetData {
            path: path.into(),
            data: data.to_vec(),
            version: -1,
        };
        write(t, S1, op).unwrap();
    };
    let mut a = tree();
    create(&mut a, "/x", CreateMode::Persistent).unwrap();
    create(&mut a, "/y", CreateMode::Persistent).unwrap();
    create(&mut a, "/x/k", CreateMode::Ephemeral).unwrap();
    set(&mut a, "/x", b"one");
    set(&mut a, "/x", b"two");
    let mut b = tree();
    create(&mut b, "/y", CreateMode::Persistent).unwrap();
    assert_eq!(
        create(&mut b, "/y", CreateMode::Persistent),
        Err(ZkError::NodeExists)
    );
    create(&mut b, "/x", CreateMode::Persistent).unwrap();
    create(&mut b, "/x/k", CreateMode::Ephemeral).unwrap();
    set(&mut b, "/x", b"three");
    set(&mut b, "/x", b"two");
    // Taken back by the undo journal: as if never applied.
    let txn = b.prepare(
        b.next_zxid(),
        7,
        S1,
        &Op::Delete {
            path: "/x/k".into(),
            version: -1,
        },
    );
    let (_, undo) = b.apply_undoable(&txn);
    b.undo(undo);
    assert_ne!(a, b, "the zxids differ");
    for t in [&mut a, &mut b] {
        t.relabel_zxids(|_| 1);
        t.check_invariants().unwrap();
    }
    assert_eq!(a, b);
    assert_eq!(a.digest, b.digest);
    assert_eq!(hash_of(&a), hash_of(&b));
    // Any one field apart: another digest.
    let mut c = b.clone();
    c.update_node("/x/k", |n| n.mtime += 1);
    c.check_invariants().unwrap();
    assert_ne!(a, c);
    assert_ne!(a.digest, c.digest);
    assert_ne!(hash_of(&a), hash_of(&c));
}

mod undo {
    //! `apply_undoable` then `undo` gives back the tree it started from,
    //! whatever the txn (the contract check's model steps in place and
    //! relies on it), and applies exactly what `apply` does.
    use super::*;
    use proptest::prelude::*;

    const PATHS: [&str; 5] = ["/a", "/a/b", "/a/c", "/s", "/s/n-"];

    fn path() -> impl Strategy<Value = String> {
        prop::sample::select(&PATHS[..]).prop_map(str::to_owned)
    }

    fn mode() -> impl Strategy<Value = CreateMode> {
        prop::sample::select(
            &[
                CreateMode::Persistent,
                CreateMode::Ephemeral,
                CreateMode::PersistentSequential,
                CreateMode::EphemeralSequential,
            ][..],
        )
    }

    fn multi_op() -> impl Strategy<Value = MultiOp> {
        prop_oneof![
            (path(), mode()).prop_map(|(path, mode)| MultiOp::Create {
                path,
                data: b"m".to_vec(),
                mode
            }),
            path().prop_map(|path| MultiOp::Delete { path, version: -1 }),
            path().prop_map(|path| MultiOp::SetData {
                path,
                data: b"x".to_vec(),
                version: -1
            }),
            path().prop_map(|path| MultiOp::Check { path, version: -1 }),
        ]
    }

    /// A write of session S1 or S2, or the close of one of them.
    #[derive(Clone, Debug)]
    enum Write {
        Op(bool, Op),
        Close(bool),
    }

    fn write() -> impl Strategy<Value = Write> {
        let op = prop_oneof![
            3 => (path(), mode()).prop_map(|(path, mode)| Op::Create {
                path,
                data: b"d".to_vec(),
                mode
            }),
            2 => path().prop_map(|path| Op::Delete { path, version: -1 }),
            2 => (path(), any::<u8>()).prop_map(|(path, d)| Op::SetData {
                path,
                data: vec![d],
                version: -1
            }),
            1 => prop::collection::vec(multi_op(), 1..4).prop_map(Op::Multi),
        ];
        prop_oneof![
            12 => (any::<bool>(), op).prop_map(|(s, op)| Write::Op(s, op)),
            1 => any::<bool>().prop_map(Write::Close),
        ]
    }

    fn txn(t: &DataTree, w: &Write) -> Option<Txn> {
        match w {
            Write::Op(s1, op) => Some(t.prepare(t.next_zxid(), 5, if *s1 { S1 } else { S2 }, op)),
            Write::Close(s1) => {
                let s = if *s1 { S1 } else { S2 };
                t.has_session(s)
                    .then(|| t.prepare_close_session(t.next_zxid(), 5, s))
            }
        }
    }

    proptest! {
        #[test]
        fn undo_gives_back_the_tree(writes in prop::collection::vec(write(), 1..40)) {
            let mut t = tree();
            for w in &writes {
                let Some(txn) = txn(&t, w) else { continue };
                let before = t.clone();
                let mut plain = t.clone();
                let expected = plain.apply(&txn);
                let (applied, undo) = t.apply_undoable(&txn);
                prop_assert_eq!(&applied, &expected);
                prop_assert_eq!(&t, &plain);
                t.check_invariants().unwrap();
                t.undo(undo);
                prop_assert_eq!(&t, &before);
                t.check_invariants().unwrap();
                t = plain;
            }
        }
    }
}
