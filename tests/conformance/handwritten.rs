//! Hand-written cases, one per fact docs/ZOOKEEPER.md marks (observed) that
//! the tree and watch table are responsible for. Each runs differentially
//! (real server vs model) and then asserts the documented value on the
//! real server's answers, so a fact is pinned even if both sides drift.

use std::time::Instant;

use zoosim::client::{Zk, ZkExt};
use zoosim::proto::{CreateMode, EventType, MultiOp, MultiResult, Op, Reply, ZkError};
use zoosim::real_server::{fresh_root, shared_server, RealServer};

use crate::gen::Step;
use crate::harness::Trace;
use crate::{differential, real_sessions, runtime};

fn op(session: usize, op: Op) -> Step {
    Step::Op { session, op }
}

fn create(path: &str, mode: CreateMode) -> Op {
    Op::Create {
        path: path.into(),
        data: b"d".to_vec(),
        mode,
    }
}

fn set_data(path: &str, version: i32) -> Op {
    Op::SetData {
        path: path.into(),
        data: b"d".to_vec(),
        version,
    }
}

fn delete(path: &str, version: i32) -> Op {
    Op::Delete {
        path: path.into(),
        version,
    }
}

/// Runs a case under a fresh root of the shared server; `None` = skipped.
fn case(name: &str, sessions: usize, steps: &[Step]) -> Option<Trace> {
    let server = shared_server(name)?;
    let started = Instant::now();
    let root = fresh_root(name);
    let (real, _) = runtime()
        .block_on(differential(
            &server.connect_string(),
            &root,
            sessions,
            steps,
            // The shared server: other tests' txns fall in between.
            false,
        ))
        .unwrap_or_else(|e| panic!("{name}: real server and model differ:\n{e}"));
    eprintln!("{name}: {:.2} s", started.elapsed().as_secs_f64());
    Some(real)
}

/// The reply of step `i` (after the setup create of the root).
fn reply(t: &Trace, i: usize) -> &Result<Reply, ZkError> {
    &t.steps[i + 1].reply
}

fn created_name(t: &Trace, i: usize) -> String {
    match reply(t, i) {
        Ok(Reply::Create { path, .. }) => path.clone(),
        other => panic!("step {i}: {other:?}"),
    }
}

#[test]
fn sequence_numbers_and_cversion() {
    let steps = [
        op(0, create("/p", CreateMode::Persistent)),
        op(0, create("/p/x-", CreateMode::PersistentSequential)),
        op(0, create("/p/x-", CreateMode::PersistentSequential)),
        op(0, delete("/p/x-0000000000", -1)),
        op(0, create("/p/x-", CreateMode::PersistentSequential)),
        op(0, create("/p/y", CreateMode::Persistent)),
        op(0, create("/p/", CreateMode::PersistentSequential)),
        op(
            1,
            Op::Exists {
                path: "/p".into(),
                watch: false,
            },
        ),
    ];
    let Some(t) = case("sequence_numbers_and_cversion", 2, &steps) else {
        return;
    };
    let names: Vec<_> = [1, 2, 4, 6].iter().map(|&i| created_name(&t, i)).collect();
    let suffixes: Vec<_> = names.iter().map(|n| &n[n.len() - 10..]).collect();
    assert_eq!(
        suffixes,
        ["0000000000", "0000000001", "0000000002", "0000000004"]
    );
    assert!(names[3].ends_with("/p/0000000004"), "{names:?}");
    let Ok(Reply::Exists(Some(stat))) = reply(&t, 7) else {
        panic!("{:?}", reply(&t, 7))
    };
    assert_eq!(
        (stat.cversion, stat.num_children),
        (6, 4),
        "5 creates + 1 delete"
    );
}

#[test]
fn set_data_with_same_bytes_changes_mzxid_and_fires() {
    let set = || Op::SetData {
        path: "/a".into(),
        data: b"d".to_vec(),
        version: -1,
    };
    let steps = [
        op(0, create("/a", CreateMode::Persistent)),
        op(
            1,
            Op::GetData {
                path: "/a".into(),
                watch: true,
            },
        ),
        op(0, set()),
    ];
    let Some(t) = case("set_data_with_same_bytes", 2, &steps) else {
        return;
    };
    let Ok(Reply::SetData(stat)) = reply(&t, 2) else {
        panic!()
    };
    assert!(stat.mzxid > stat.czxid && stat.version == 1);
    let fired = &t.steps[3].events[1];
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].event_type, EventType::NodeDataChanged);
}

#[test]
fn one_event_per_session_however_many_reads_armed_it() {
    let watch_all = |s| {
        [
            op(
                s,
                Op::Exists {
                    path: "/w".into(),
                    watch: true,
                },
            ),
            op(
                s,
                Op::GetData {
                    path: "/w".into(),
                    watch: true,
                },
            ),
            op(
                s,
                Op::GetChildren {
                    path: "/w".into(),
                    watch: true,
                },
            ),
        ]
    };
    let mut steps = vec![op(0, create("/w", CreateMode::Persistent))];
    steps.extend(watch_all(0));
    steps.extend(watch_all(1));
    steps.push(op(
        2,
        Op::SetData {
            path: "/w".into(),
            data: vec![],
            version: -1,
        },
    ));
    steps.extend(watch_all(0));
    steps.extend(watch_all(1));
    steps.push(op(2, delete("/w", -1)));
    let Some(t) = case("one_event_per_session", 3, &steps) else {
        return;
    };
    let kinds = |i: usize, s: usize| -> Vec<EventType> {
        t.steps[i + 1].events[s]
            .iter()
            .map(|e| e.event_type)
            .collect()
    };
    for s in [0, 1] {
        assert_eq!(kinds(7, s), [EventType::NodeDataChanged], "session {s}");
        assert_eq!(kinds(14, s), [EventType::NodeDeleted], "session {s}");
    }
}

#[test]
fn error_order_and_multi_results() {
    let steps = [
        op(0, create("/a", CreateMode::Persistent)),
        op(0, create("/a/b", CreateMode::Persistent)),
        // BadVersion beats NotEmpty.
        op(0, delete("/a", 5)),
        op(0, delete("/a", 0)),
        op(
            0,
            Op::Multi(vec![
                MultiOp::Create {
                    path: "/m".into(),
                    data: vec![],
                    mode: CreateMode::Persistent,
                },
                MultiOp::Create {
                    path: "/a".into(),
                    data: vec![],
                    mode: CreateMode::Persistent,
                },
                MultiOp::Delete {
                    path: "/a/b".into(),
                    version: -1,
                },
            ]),
        ),
        op(
            0,
            Op::Multi(vec![
                MultiOp::Create {
                    path: "/m1".into(),
                    data: vec![],
                    mode: CreateMode::Persistent,
                },
                MultiOp::Create {
                    path: "/m2".into(),
                    data: vec![],
                    mode: CreateMode::Persistent,
                },
            ]),
        ),
        op(0, create("/e", CreateMode::Ephemeral)),
        op(0, create("/e/c", CreateMode::Persistent)),
        op(0, create("/e", CreateMode::Persistent)),
        op(0, create("/c", CreateMode::Container)),
        op(
            0,
            create("/t", CreateMode::PersistentWithTtl { ttl_ms: 1000 }),
        ),
        op(
            0,
            Op::Exists {
                path: "/m1".into(),
                watch: false,
            },
        ),
        op(
            0,
            Op::Exists {
                path: "/m2".into(),
                watch: false,
            },
        ),
    ];
    let Some(t) = case("error_order_and_multi_results", 1, &steps) else {
        return;
    };
    assert_eq!(reply(&t, 2), &Err(ZkError::BadVersion));
    assert_eq!(reply(&t, 3), &Err(ZkError::NotEmpty));
    assert_eq!(
        reply(&t, 4),
        &Ok(Reply::Multi(vec![
            MultiResult::RolledBack,
            MultiResult::Failed(ZkError::NodeExists),
            MultiResult::Failed(ZkError::RuntimeInconsistency),
        ]))
    );
    let Ok(Reply::Multi(r)) = reply(&t, 5) else {
        panic!()
    };
    assert!(
        r.iter()
            .all(|r| matches!(r, MultiResult::Create { stat: None, .. })),
        "a 3.8 server names multi creates without a Stat: {r:?}"
    );
    let czxid = |i| match reply(&t, i) {
        Ok(Reply::Exists(Some(s))) => s.czxid,
        other => panic!("{other:?}"),
    };
    assert_eq!(czxid(11), czxid(12), "one multi, one zxid");
    assert_eq!(reply(&t, 7), &Err(ZkError::NoChildrenForEphemerals));
    assert_eq!(
        reply(&t, 8),
        &Err(ZkError::NodeExists),
        "NodeExists beats the ephemeral parent"
    );
    let Ok(Reply::Create { stat, .. }) = reply(&t, 9) else {
        panic!()
    };
    assert_eq!(stat.ephemeral_owner, 0, "containers hide their marker");
    assert_eq!(
        reply(&t, 10),
        &Err(ZkError::Unimplemented),
        "TTL nodes need extendedTypesEnabled"
    );
}

/// The true root needs a server of its own: the shared one has other
/// tests' nodes under `/`. It also gives exact zxid counts.
#[test]
fn true_root_and_zxid_accounting() {
    if shared_server("true_root_and_zxid_accounting").is_none() {
        return;
    }
    let started = Instant::now();
    let server = RealServer::start().expect("a dedicated real server");
    let connect = server.connect_string();
    let steps = [
        op(
            0,
            Op::GetChildren {
                path: "/".into(),
                watch: false,
            },
        ),
        op(
            0,
            Op::Exists {
                path: "/".into(),
                watch: false,
            },
        ),
        op(
            0,
            Op::GetChildren {
                path: "/zookeeper".into(),
                watch: false,
            },
        ),
        op(
            0,
            Op::GetData {
                path: "/zookeeper".into(),
                watch: false,
            },
        ),
        op(0, delete("/", -1)),
        op(0, delete("/zookeeper", -1)),
        op(0, delete("/zookeeper/quota", -1)),
        op(0, delete("/zookeeper/config", -1)),
        op(0, create("/", CreateMode::Persistent)),
        op(0, create("/", CreateMode::PersistentSequential)),
        op(0, create("/x-", CreateMode::PersistentSequential)),
        // zxid accounting: a failed create and a failed multi use one each.
        op(0, create("/z1", CreateMode::Persistent)),
        op(0, create("/z1", CreateMode::Persistent)),
        op(
            0,
            Op::Multi(vec![MultiOp::Check {
                path: "/nope".into(),
                version: -1,
            }]),
        ),
        op(0, create("/z2", CreateMode::Persistent)),
        op(
            1,
            Op::Exists {
                path: "/zookeeper/quota".into(),
                watch: false,
            },
        ),
        // /zookeeper/config is read-only to clients (16..=22).
        op(0, set_data("/zookeeper/config", -1)),
        op(0, set_data("/zookeeper/config", 99)),
        op(0, create("/zookeeper/config/x", CreateMode::Persistent)),
        op(
            0,
            create("/zookeeper/config/s-", CreateMode::EphemeralSequential),
        ),
        op(0, delete("/zookeeper/config/x", -1)),
        op(
            1,
            Op::GetData {
                path: "/zookeeper/config".into(),
                watch: true,
            },
        ),
        op(
            0,
            Op::Multi(vec![
                MultiOp::Check {
                    path: "/zookeeper/config".into(),
                    version: -1,
                },
                MultiOp::SetData {
                    path: "/zookeeper/config".into(),
                    data: b"d".to_vec(),
                    version: -1,
                },
            ]),
        ),
        // /zookeeper itself and /zookeeper/quota are open (23, 24).
        op(0, create("/zookeeper/quota/q", CreateMode::Persistent)),
        op(0, delete("/zookeeper/quota/q", -1)),
    ];
    let (t, _) = runtime()
        .block_on(differential(&connect, "", 2, &steps, true))
        .unwrap_or_else(|e| panic!("true root: real server and model differ:\n{e}"));
    let r = |i: usize| &t.steps[i].reply;
    let Ok(Reply::GetChildren { children, .. }) = r(0) else {
        panic!("{:?}", r(0))
    };
    assert_eq!(children, &["zookeeper"]);
    let Ok(Reply::Exists(Some(root))) = r(1) else {
        panic!()
    };
    assert_eq!(root.cversion, -1, "fresh root");
    for i in 4..=7 {
        assert_eq!(
            r(i),
            &Err(ZkError::BadArguments),
            "deleting a built-in node"
        );
    }
    let czxid = |i: usize| match r(i) {
        Ok(Reply::Create { stat, .. }) => stat.czxid,
        other => panic!("{other:?}"),
    };
    assert_eq!(r(8), &Err(ZkError::BadArguments), "create(\"/\")");
    assert_eq!(
        r(9),
        &Err(ZkError::BadArguments),
        "create(\"/\", sequential)"
    );
    assert_eq!(
        created_name_at(&t, 10),
        "/x-0000000000",
        "/zookeeper did not advance the root's counter"
    );
    assert_eq!(
        czxid(14) - czxid(11),
        3,
        "the failed create and multi used a zxid each"
    );
    for i in 16..=20 {
        assert_eq!(
            r(i),
            &Err(ZkError::NoAuth),
            "step {i}: /zookeeper/config is read-only"
        );
    }
    assert!(matches!(r(21), Ok(Reply::GetData { .. })), "{:?}", r(21));
    assert!(
        matches!(r(23), Ok(Reply::Create { .. })) && r(24) == &Ok(Reply::Delete),
        "{:?} {:?}",
        r(23),
        r(24)
    );
    drop(server);
    eprintln!(
        "true_root_and_zxid_accounting: {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

fn created_name_at(t: &Trace, i: usize) -> String {
    match &t.steps[i].reply {
        Ok(Reply::Create { path, .. }) => path.clone(),
        other => panic!("step {i}: {other:?}"),
    }
}

#[test]
fn session_timeout_is_negotiated_within_bounds() {
    let Some(server) = shared_server("session_timeout_is_negotiated") else {
        return;
    };
    runtime().block_on(async {
        // tickTime=500: min 1000 ms; maxSessionTimeout=60000.
        for (asked, got) in [(100_000, 60_000), (100, 1000), (5000, 5000)] {
            let z = zoosim::client::real::RealZk::connect(&server.connect_string(), asked)
                .await
                .unwrap();
            assert_eq!(z.session_timeout_ms(), got, "asked for {asked}");
            let local = zoosim::client::local::LocalServer::default().connect(asked);
            assert_eq!(local.session_timeout_ms(), got, "model, asked for {asked}");
            z.close().await.unwrap();
        }
        // A closed handle: SessionExpired, like the Java client.
        let z = &real_sessions(&server.connect_string(), 1).await.unwrap()[0];
        z.close().await.unwrap();
        assert_eq!(z.exists("/", false).await, Err(ZkError::SessionExpired));
    });
}

#[test]
fn close_deletes_ephemerals_and_wakes_their_watchers() {
    let steps = [
        op(0, create("/e1", CreateMode::Ephemeral)),
        op(0, create("/s-", CreateMode::EphemeralSequential)),
        op(
            1,
            Op::Exists {
                path: "/e1".into(),
                watch: true,
            },
        ),
        op(
            1,
            Op::GetData {
                path: "/s-0000000001".into(),
                watch: true,
            },
        ),
        op(
            1,
            Op::GetChildren {
                path: String::new(),
                watch: true,
            },
        ),
        Step::Close { session: 0 },
        op(
            1,
            Op::Exists {
                path: String::new(),
                watch: false,
            },
        ),
    ];
    let Some(t) = case("close_deletes_ephemerals", 2, &steps) else {
        return;
    };
    let mut kinds: Vec<_> = t.steps[6].events[1].iter().map(|e| e.event_type).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            EventType::NodeDeleted,
            EventType::NodeDeleted,
            EventType::NodeChildrenChanged
        ],
        "one close: both ephemerals deleted, the parent's child watch fired once"
    );
    let Ok(Reply::Exists(Some(root))) = reply(&t, 6) else {
        panic!()
    };
    assert_eq!((root.num_children, root.cversion), (0, 4));
}
