//! `RealZk` against a real ZooKeeper 3.8 server: every op, the watch
//! collapse, multi's wire form, and what the zookeeper-client crate does
//! where it differs from the Java client (local expiry, requests while
//! disconnected, reconnect after a restart), with measured times.

use std::time::{Duration, Instant};

use zoosim::client::real::RealZk;
use zoosim::client::{Delivery, Zk, ZkExt};
use zoosim::proto::{
    ClientEvent, CreateMode, EventType, MultiOp, MultiResult, Op, Reply, SessionEvent, WatchEvent,
    ZkError,
};

use zoosim::real_server::{fresh_root, shared_server, RealServer};

const T_MS: u64 = 10_000;

async fn connect(server: &RealServer, timeout_ms: u64) -> RealZk {
    RealZk::connect(&server.connect_string(), timeout_ms)
        .await
        .expect("connect")
}

fn drain(zk: &RealZk) -> Vec<ClientEvent> {
    std::iter::from_fn(|| zk.try_next_event()).collect()
}

fn watch(event_type: EventType, path: &str) -> ClientEvent {
    ClientEvent::Watch(WatchEvent {
        event_type,
        path: path.to_owned(),
    })
}

/// A round trip on `zk`: on one server, every notification the server sent
/// it before this read's reply is then in its stream (the contract).
async fn round_trip(zk: &RealZk) {
    zk.exists("/", false).await.expect("exists /");
}

/// Waits for the next event, at most `limit`.
async fn next_within(zk: &RealZk, limit: Duration) -> Option<ClientEvent> {
    tokio::time::timeout(limit, zk.next_event()).await.ok()
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_op_against_a_real_server() {
    let Some(server) = shared_server("every_op_against_a_real_server") else {
        return;
    };
    let started = Instant::now();
    let root = fresh_root("every_op");
    let zk = connect(server, T_MS).await;
    let sid = zk.session_id().0;

    let (name, stat) = zk
        .create(&root, b"r", CreateMode::Persistent)
        .await
        .unwrap();
    assert_eq!(name, root);
    assert_eq!((stat.version, stat.cversion, stat.num_children), (0, 0, 0));
    assert_eq!(stat.data_length, 1);
    assert_eq!(stat.ephemeral_owner, 0);
    assert_eq!(
        zk.create(&root, b"", CreateMode::Persistent).await,
        Err(ZkError::NodeExists)
    );

    let e = format!("{root}/e");
    let (_, stat) = zk.create(&e, b"one", CreateMode::Ephemeral).await.unwrap();
    assert_eq!(stat.ephemeral_owner, sid);
    assert_eq!(
        zk.create(&format!("{e}/c"), b"", CreateMode::Persistent)
            .await,
        Err(ZkError::NoChildrenForEphemerals)
    );
    assert_eq!(
        zk.create(&format!("{root}/no/x"), b"", CreateMode::Persistent)
            .await,
        Err(ZkError::NoNode)
    );

    let exists = zk.exists(&e, false).await.unwrap().expect("e exists");
    assert_eq!(exists.ephemeral_owner, sid);
    assert_eq!(zk.exists(&format!("{root}/nope"), false).await, Ok(None));
    assert_eq!(
        zk.get_data(&format!("{root}/nope"), false).await,
        Err(ZkError::NoNode)
    );
    let (data, stat) = zk.get_data(&e, false).await.unwrap();
    assert_eq!((data.as_slice(), stat), (&b"one"[..], exists));

    let stat = zk.set_data(&e, b"two", 0).await.unwrap();
    assert_eq!(stat.version, 1);
    assert!(stat.mzxid > stat.czxid);
    assert_eq!(zk.set_data(&e, b"x", 0).await, Err(ZkError::BadVersion));
    assert_eq!(zk.set_data(&e, b"three", -1).await.unwrap().version, 2);

    let (children, stat) = zk.get_children(&root, false).await.unwrap();
    assert_eq!(children, vec!["e".to_owned()]);
    assert_eq!((stat.num_children, stat.cversion), (1, 1));
    assert_eq!(Some(stat), zk.exists(&root, false).await.unwrap());

    assert_eq!(zk.delete(&root, -1).await, Err(ZkError::NotEmpty));
    assert_eq!(zk.delete(&e, 0).await, Err(ZkError::BadVersion));
    assert_eq!(zk.delete(&e, 2).await, Ok(()));
    assert_eq!(zk.delete(&e, -1).await, Err(ZkError::NoNode));
    assert_eq!(zk.sync(&root).await, Ok(()));

    // A container is created like a persistent node, with no owner.
    let (name, stat) = zk
        .create(&format!("{root}/c"), b"", CreateMode::Container)
        .await
        .unwrap();
    assert_eq!((name, stat.ephemeral_owner), (format!("{root}/c"), 0));

    // TTL nodes need zookeeper.extendedTypesEnabled on the server.
    let ttl = zk
        .create(
            &format!("{root}/t"),
            b"",
            CreateMode::PersistentWithTtl { ttl_ms: 60_000 },
        )
        .await;
    println!("create with TTL: {ttl:?}");
    match ttl {
        Err(ZkError::Unimplemented) => {}
        Ok((name, stat)) => assert_eq!((name, stat.ephemeral_owner), (format!("{root}/t"), 0)),
        other => panic!("TTL create: {other:?}"),
    }
    // Refused by the crate before sending, as Java's client refuses them.
    for ttl_ms in [0, -5] {
        assert_eq!(
            zk.create(
                &format!("{root}/t0"),
                b"",
                CreateMode::PersistentWithTtl { ttl_ms }
            )
            .await,
            Err(ZkError::BadArguments)
        );
    }
    // The crate refuses the root itself without a round trip.
    assert_eq!(
        zk.create("/", b"", CreateMode::Persistent).await,
        Err(ZkError::BadArguments)
    );
    assert_eq!(zk.delete("/", -1).await, Err(ZkError::BadArguments));
    assert_eq!(zk.call(Op::Multi(vec![])).await, Ok(Reply::Multi(vec![])));
    assert!(drain(&zk).is_empty());
    zk.close().await.unwrap();
    println!("every_op: {:.3} s", secs(started.elapsed()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_names() {
    let Some(server) = shared_server("sequential_names") else {
        return;
    };
    let started = Instant::now();
    let root = fresh_root("sequential");
    let zk = connect(server, T_MS).await;
    zk.create(&root, b"", CreateMode::Persistent).await.unwrap();
    let prefix = format!("{root}/x-");
    let mut names = Vec::new();
    for _ in 0..3 {
        let (name, _) = zk
            .create(&prefix, b"", CreateMode::PersistentSequential)
            .await
            .unwrap();
        names.push(name);
    }
    assert_eq!(
        names,
        (0..3)
            .map(|i| format!("{prefix}{i:010}"))
            .collect::<Vec<_>>()
    );
    zk.delete(&names[0], -1).await.unwrap();
    let (name, stat) = zk
        .create(&prefix, b"", CreateMode::EphemeralSequential)
        .await
        .unwrap();
    assert_eq!(name, format!("{prefix}0000000003"));
    assert_eq!(stat.ephemeral_owner, zk.session_id().0);
    // A trailing slash is allowed for sequential creates: the name is bare.
    let (name, _) = zk
        .create(&format!("{root}/"), b"", CreateMode::PersistentSequential)
        .await
        .unwrap();
    assert_eq!(name, format!("{root}/0000000004"));
    // The counter counts creates; cversion counts creates and deletes.
    let (_, stat) = zk.get_children(&root, false).await.unwrap();
    assert_eq!(stat.cversion, 6);
    zk.close().await.unwrap();
    println!("sequential_names: {:.3} s", secs(started.elapsed()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_event_per_server_event_per_session() {
    let Some(server) = shared_server("one_event_per_server_event_per_session") else {
        return;
    };
    let started = Instant::now();
    let root = fresh_root("collapse");
    let a = connect(server, T_MS).await;
    let writer = connect(server, T_MS).await;
    let node = format!("{root}/a");
    a.create(&root, b"", CreateMode::Persistent).await.unwrap();
    a.create(&node, b"", CreateMode::Persistent).await.unwrap();

    // Three reads arm three crate watchers on one path.
    a.exists(&node, true).await.unwrap();
    a.get_data(&node, true).await.unwrap();
    a.get_children(&node, true).await.unwrap();
    assert_eq!(a.armed_watchers(), 3);

    writer.set_data(&node, b"1", -1).await.unwrap();
    round_trip(&a).await;
    assert_eq!(drain(&a), vec![watch(EventType::NodeDataChanged, &node)]);
    // The child watch is still armed; the data ones are used up.
    assert_eq!(a.armed_watchers(), 1);

    a.exists(&node, true).await.unwrap();
    a.get_data(&node, true).await.unwrap();
    writer.delete(&node, -1).await.unwrap();
    round_trip(&a).await;
    assert_eq!(drain(&a), vec![watch(EventType::NodeDeleted, &node)]);
    assert_eq!(a.armed_watchers(), 0);

    // Two exist watches on a missing node: one NodeCreated.
    a.exists(&node, true).await.unwrap();
    a.exists(&node, true).await.unwrap();
    a.get_children(&root, true).await.unwrap();
    a.get_children(&root, true).await.unwrap();
    writer
        .create(&node, b"", CreateMode::Persistent)
        .await
        .unwrap();
    round_trip(&a).await;
    assert_eq!(
        drain(&a),
        vec![
            watch(EventType::NodeCreated, &node),
            watch(EventType::NodeChildrenChanged, &root),
        ]
    );

    // A watch re-armed after its event is a new watch: a second change
    // gives a second event. No call on `a` between the first change and
    // the re-arming read, so the first firing is first seen by the poll
    // that also arms the second watcher.
    a.get_data(&node, true).await.unwrap();
    writer.set_data(&node, b"2", -1).await.unwrap();
    a.get_data(&node, true).await.unwrap();
    writer.set_data(&node, b"3", -1).await.unwrap();
    round_trip(&a).await;
    assert_eq!(
        drain(&a),
        vec![
            watch(EventType::NodeDataChanged, &node),
            watch(EventType::NodeDataChanged, &node),
        ]
    );

    // Nothing late: no duplicate turns up afterwards.
    tokio::time::sleep(Duration::from_millis(200)).await;
    round_trip(&a).await;
    assert!(drain(&a).is_empty());
    a.close().await.unwrap();
    writer.close().await.unwrap();
    println!("collapse: {:.3} s", secs(started.elapsed()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_watching_get_one_event_each() {
    let Some(server) = shared_server("two_sessions_watching_get_one_event_each") else {
        return;
    };
    let started = Instant::now();
    let root = fresh_root("two_sessions");
    let a = connect(server, T_MS).await;
    let b = connect(server, T_MS).await;
    let writer = connect(server, T_MS).await;
    writer
        .create(&root, b"", CreateMode::Persistent)
        .await
        .unwrap();
    for zk in [&a, &b] {
        zk.exists(&root, true).await.unwrap();
        zk.get_data(&root, true).await.unwrap();
        zk.get_children(&root, true).await.unwrap();
    }
    writer.delete(&root, -1).await.unwrap();
    for zk in [&a, &b] {
        // Waiting works too: next_event wakes on the firing.
        let first = next_within(zk, Duration::from_secs(5)).await;
        assert_eq!(first, Some(watch(EventType::NodeDeleted, &root)));
        round_trip(zk).await;
        assert!(drain(zk).is_empty());
    }
    for zk in [a, b, writer] {
        zk.close().await.unwrap();
    }
    println!("two_sessions: {:.3} s", secs(started.elapsed()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_wire_forms() {
    let Some(server) = shared_server("multi_wire_forms") else {
        return;
    };
    let started = Instant::now();
    let root = fresh_root("multi");
    let zk = connect(server, T_MS).await;
    zk.create(&root, b"", CreateMode::Persistent).await.unwrap();
    let m = format!("{root}/m");
    let s = format!("{root}/s-");
    zk.get_children(&root, true).await.unwrap();

    let reply = zk
        .call(Op::Multi(vec![
            MultiOp::Create {
                path: m.clone(),
                data: b"a".to_vec(),
                mode: CreateMode::Persistent,
            },
            MultiOp::SetData {
                path: m.clone(),
                data: b"bb".to_vec(),
                version: 0,
            },
            MultiOp::Check {
                path: m.clone(),
                version: 1,
            },
            MultiOp::Create {
                path: s.clone(),
                data: vec![],
                mode: CreateMode::PersistentSequential,
            },
            MultiOp::Delete {
                path: m.clone(),
                version: 1,
            },
        ]))
        .await
        .unwrap();
    println!("committed multi: {reply:?}");
    let Reply::Multi(results) = &reply else {
        panic!("{reply:?}")
    };
    assert_eq!(reply.multi_error(), None);
    assert_eq!(results.len(), 5);
    let MultiResult::Create { path, stat } = &results[0] else {
        panic!("{results:?}")
    };
    assert_eq!(path, &m);
    // 3.8.0 answers a multi's create without a Stat (ZOOKEEPER-4026).
    assert_eq!(stat, &None);
    let MultiResult::SetData { stat } = &results[1] else {
        panic!("{results:?}")
    };
    assert_eq!((stat.version, stat.data_length), (1, 2));
    assert_eq!(results[2], MultiResult::Check);
    assert!(
        matches!(&results[3], MultiResult::Create { path, .. } if *path == format!("{s}0000000001"))
    );
    assert_eq!(results[4], MultiResult::Delete);
    // Its watches fire before its reply: one NodeChildrenChanged.
    assert_eq!(
        drain(&zk),
        vec![watch(EventType::NodeChildrenChanged, &root)]
    );

    let x = format!("{root}/x");
    let failed = zk
        .call(Op::Multi(vec![
            MultiOp::Create {
                path: x.clone(),
                data: vec![],
                mode: CreateMode::Persistent,
            },
            MultiOp::Create {
                path: x.clone(),
                data: vec![],
                mode: CreateMode::Persistent,
            },
            MultiOp::Check {
                path: format!("{root}/nope"),
                version: 0,
            },
        ]))
        .await;
    assert_eq!(
        failed,
        Ok(Reply::Multi(vec![
            MultiResult::RolledBack,
            MultiResult::Failed(ZkError::NodeExists),
            MultiResult::Failed(ZkError::RuntimeInconsistency),
        ]))
    );
    assert_eq!(zk.exists(&x, false).await, Ok(None));

    let failed = zk
        .multi(vec![
            MultiOp::Check {
                path: root.clone(),
                version: 7,
            },
            MultiOp::Delete {
                path: root.clone(),
                version: -1,
            },
        ])
        .await;
    assert_eq!(failed, Err(ZkError::BadVersion));
    let failed = zk
        .call(Op::Multi(vec![MultiOp::SetData {
            path: x.clone(),
            data: vec![],
            version: -1,
        }]))
        .await;
    assert_eq!(
        failed,
        Ok(Reply::Multi(vec![MultiResult::Failed(ZkError::NoNode)]))
    );
    // A bad path anywhere in a multi: nothing is sent.
    let bad = zk
        .call(Op::Multi(vec![
            MultiOp::Create {
                path: x.clone(),
                data: vec![],
                mode: CreateMode::Persistent,
            },
            MultiOp::Delete {
                path: format!("{root}/"),
                version: -1,
            },
        ]))
        .await;
    assert_eq!(bad, Err(ZkError::BadArguments));
    assert_eq!(zk.exists(&x, false).await, Ok(None));
    assert!(drain(&zk).is_empty());
    zk.close().await.unwrap();
    println!("multi: {:.3} s", secs(started.elapsed()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_the_session() {
    let Some(server) = shared_server("close_ends_the_session") else {
        return;
    };
    let started = Instant::now();
    let root = fresh_root("close");
    let zk = connect(server, T_MS).await;
    let other = connect(server, T_MS).await;
    zk.create(&root, b"", CreateMode::Ephemeral).await.unwrap();
    zk.exists(&root, true).await.unwrap();

    let closing = Instant::now();
    assert_eq!(zk.close().await, Ok(()));
    println!("close: {:.1} ms", closing.elapsed().as_secs_f64() * 1e3);
    // The ephemeral went with the session, at once.
    assert_eq!(other.exists(&root, false).await, Ok(None));
    // The close deleted the ephemeral while the connection was still
    // open: the session's own watch on it fired before the reply.
    assert_eq!(
        drain(&zk),
        vec![
            watch(EventType::NodeDeleted, &root),
            ClientEvent::Session(SessionEvent::Closed),
        ]
    );
    assert_eq!(zk.exists("/", false).await, Err(ZkError::SessionExpired));
    assert_eq!(
        zk.create(&root, b"", CreateMode::Persistent).await,
        Err(ZkError::SessionExpired)
    );
    // Validation comes first, even on a dead handle.
    assert_eq!(zk.exists("/a/", false).await, Err(ZkError::BadArguments));
    assert_eq!(zk.close().await, Ok(()));
    assert!(zk.try_next_event().is_none());
    other.close().await.unwrap();
    println!("close_ends_the_session: {:.3} s", secs(started.elapsed()));
}

/// The crate expires the session itself while it cannot reach a server:
/// measure when, with the server frozen (SIGSTOP) so that TCP still
/// accepts but nothing answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_expiry_while_disconnected() {
    if shared_server("local_expiry_while_disconnected").is_none() {
        return;
    }
    let mut server = RealServer::start().expect("start");
    let zk = connect(&server, 2_000).await;
    let t = zk.session_timeout_ms();
    assert_eq!(t, 2_000);
    let root = fresh_root("expiry");
    zk.create(&root, b"", CreateMode::Ephemeral).await.unwrap();
    zk.get_data(&root, true).await.unwrap();

    server.pause();
    let paused = Instant::now();
    // With the server stopped, anything sent would wait for the crate to
    // give up on the connection; bad paths answer at once.
    for path in ["/a/", "/a\u{1}", "a", "/a//b", "/.", "/\u{1f600}"] {
        assert_eq!(
            zk.exists(path, true).await,
            Err(ZkError::BadArguments),
            "{path:?}"
        );
        assert_eq!(
            zk.create(path, b"", CreateMode::Persistent).await,
            Err(ZkError::BadArguments),
            "{path:?}"
        );
    }
    let checked = paused.elapsed();
    println!(
        "12 bad-path calls on the paused server: {:.3} ms",
        checked.as_secs_f64() * 1e3
    );
    assert!(checked < Duration::from_millis(100));
    // A request already on the wire when the server stops answering.
    let in_flight = async {
        let r = zk.get_data(&root, false).await;
        (r, paused.elapsed())
    };
    let events = async {
        let mut seen = Vec::new();
        while let Some(event) = next_within(&zk, Duration::from_secs(10)).await {
            seen.push((event.clone(), paused.elapsed()));
            if event == ClientEvent::Session(SessionEvent::Disconnected) {
                break;
            }
        }
        seen
    };
    let ((in_flight, in_flight_at), seen) = tokio::join!(in_flight, events);
    let disconnected_at = seen.last().map(|(_, at)| *at).expect("an event");
    println!("events: {seen:?}");
    println!(
        "in-flight request: {in_flight:?} after {:.3} s; Disconnected at {:.3} s = {:.2} T",
        secs(in_flight_at),
        secs(disconnected_at),
        secs(disconnected_at) * 1e3 / t as f64
    );
    assert_eq!(
        seen.iter().map(|(e, _)| e.clone()).collect::<Vec<_>>(),
        vec![ClientEvent::Session(SessionEvent::Disconnected)]
    );
    assert_eq!(in_flight, Err(ZkError::ConnectionLoss));
    let ratio = secs(disconnected_at) * 1e3 / t as f64;
    assert!((0.3..=0.7).contains(&ratio), "Disconnected at {ratio:.2} T");

    // A request issued while disconnected does not fail fast: the crate
    // holds it until the session is back or, here, until it expires the
    // session itself. Expired is in the stream when the call returns.
    let issued = Instant::now();
    let during = zk.exists(&root, false).await;
    let waited = issued.elapsed();
    let expiry = paused.elapsed();
    let events = drain(&zk);
    let ratio = secs(expiry) * 1e3 / t as f64;
    println!(
        "request while disconnected: {during:?} after {:.3} s; Expired at {:.3} s after the pause = {ratio:.2} T",
        secs(waited),
        secs(expiry)
    );
    assert_eq!(during, Err(ZkError::SessionExpired));
    assert_eq!(events, vec![ClientEvent::Session(SessionEvent::Expired)]);
    assert!(waited * 2 > Duration::from_millis(t), "failed fast");
    assert!((1.2..=2.0).contains(&ratio), "expiry at {ratio:.2} T");
    assert_eq!(zk.exists("/", false).await, Err(ZkError::SessionExpired));
    assert_eq!(zk.close().await, Err(ZkError::SessionExpired));
    assert!(zk.try_next_event().is_none());

    // The server, once it runs again, expires the session on its own.
    server.resume();
    let other = connect(&server, T_MS).await;
    let resumed = Instant::now();
    while other.exists(&root, false).await.unwrap().is_some() {
        assert!(resumed.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "server-side expiry {:.3} s after resume",
        secs(resumed.elapsed())
    );
    other.close().await.unwrap();

    // With the server gone (connections refused) it expires the same way.
    let zk = connect(&server, 2_000).await;
    server.kill();
    let killed = Instant::now();
    let e = next_within(&zk, Duration::from_secs(5)).await;
    let disconnected = killed.elapsed();
    assert_eq!(e, Some(ClientEvent::Session(SessionEvent::Disconnected)));
    let e = next_within(&zk, Duration::from_secs(10)).await;
    let expiry = killed.elapsed();
    let ratio = secs(expiry) * 1e3 / t as f64;
    println!(
        "server killed: Disconnected after {:.3} s, Expired after {:.3} s = {ratio:.2} T",
        secs(disconnected),
        secs(expiry)
    );
    assert_eq!(e, Some(ClientEvent::Session(SessionEvent::Expired)));
    assert!((1.2..=2.0).contains(&ratio), "expiry at {ratio:.2} T");
}

/// A server restart within the session timeout: the session survives, the
/// handle reconnects (Connected), and watches set before the outage fire
/// after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_after_a_server_restart() {
    if shared_server("reconnect_after_a_server_restart").is_none() {
        return;
    }
    let mut server = RealServer::start().expect("start");
    let zk = connect(&server, 8_000).await;
    let t = zk.session_timeout_ms();
    let sid = zk.session_id();
    let root = fresh_root("restart");
    let w = format!("{root}/w");
    let x = format!("{root}/x");
    zk.create(&root, b"", CreateMode::Persistent).await.unwrap();
    zk.create(&w, b"", CreateMode::Ephemeral).await.unwrap();
    zk.get_data(&w, true).await.unwrap();
    zk.exists(&x, true).await.unwrap();

    server.kill();
    let killed = Instant::now();
    let e = next_within(&zk, Duration::from_secs(10)).await;
    println!("after kill: {e:?} at {:.3} s", secs(killed.elapsed()));
    assert_eq!(e, Some(ClientEvent::Session(SessionEvent::Disconnected)));

    // A write issued while no server is up (connections refused) is not
    // failed: the crate holds it until the session is back.
    let issued = Instant::now();
    let mut queued = Box::pin(zk.set_data(&root, b"queued", -1));
    let early = tokio::time::timeout(Duration::from_millis(300), &mut queued).await;
    assert!(early.is_err(), "answered while down: {early:?}");

    let restarting = Instant::now();
    server.restart().expect("restart");
    println!("server back after {:.3} s", secs(restarting.elapsed()));
    let answer = tokio::time::timeout(Duration::from_secs(10), queued)
        .await
        .expect("answered after the restart");
    let answered = killed.elapsed();
    println!(
        "write issued while down: {answer:?} after {:.3} s ({:.3} s after the kill, T = {t} ms)",
        secs(issued.elapsed()),
        secs(answered)
    );
    assert_eq!(answer.map(|s| s.version), Ok(1));
    // Reconnected before it was sent, so Connected is already there.
    assert_eq!(
        drain(&zk),
        vec![ClientEvent::Session(SessionEvent::Connected)]
    );
    assert_eq!(zk.session_id(), sid);
    let other = connect(&server, T_MS).await;
    let stat = other
        .exists(&w, false)
        .await
        .unwrap()
        .expect("ephemeral kept");
    assert_eq!(stat.ephemeral_owner, sid.0);
    assert_eq!(other.get_data(&root, false).await.unwrap().0, b"queued");

    other.set_data(&w, b"after", -1).await.unwrap();
    other.create(&x, b"", CreateMode::Persistent).await.unwrap();
    round_trip(&zk).await;
    assert_eq!(
        drain(&zk),
        vec![
            watch(EventType::NodeDataChanged, &w),
            watch(EventType::NodeCreated, &x),
        ]
    );
    zk.close().await.unwrap();
    assert_eq!(other.exists(&w, false).await, Ok(None));
    other.close().await.unwrap();
    println!("reconnect test: {:.3} s", secs(killed.elapsed()));
}

/// Pipelined requests over the crate: sent in submission order (each
/// write sees the one before it), answered in that order in the stream,
/// and the NodeDeleted the pipeline's own delete fires comes after the
/// reply of the read that armed it (never ahead of a reply the server sent
/// before it; it may come after the delete's reply, which follows it on
/// the wire: `RealZk` cannot see the wire order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_come_back_in_order_in_one_stream() {
    let Some(server) = shared_server("pipelined_requests_come_back_in_order_in_one_stream") else {
        return;
    };
    let root = fresh_root("pipelined");
    let zk = connect(server, T_MS).await;
    let p = format!("{root}-p");
    let ops = vec![
        Op::Create {
            path: p.clone(),
            data: b"0".to_vec(),
            mode: CreateMode::Persistent,
        },
        Op::SetData {
            path: p.clone(),
            data: b"1".to_vec(),
            version: 0,
        },
        Op::GetData {
            path: p.clone(),
            watch: true,
        },
        Op::Delete {
            path: p.clone(),
            version: 1,
        },
        // Answered by the handle itself: still in its place.
        Op::Multi(vec![]),
    ];
    let tickets: Vec<_> = ops.into_iter().map(|op| zk.submit(op)).collect();
    let mut seen = Vec::new();
    while seen.len() < 6 {
        let d = tokio::time::timeout(Duration::from_secs(10), zk.next_delivery())
            .await
            .expect("the pipeline is answered");
        seen.push(d);
    }
    let replies: Vec<_> = seen
        .iter()
        .filter_map(|d| match d {
            Delivery::Reply(t, r) => Some((*t, r.clone())),
            Delivery::Event(_) => None,
        })
        .collect();
    assert_eq!(
        replies.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
        tickets,
        "replies in submission order"
    );
    assert!(
        matches!(&replies[0].1, Ok(Reply::Create { .. })),
        "{replies:?}"
    );
    assert!(
        matches!(&replies[1].1, Ok(Reply::SetData(s)) if s.version == 1),
        "{replies:?}"
    );
    assert!(
        matches!(&replies[2].1, Ok(Reply::GetData { data, .. }) if data == b"1"),
        "{replies:?}"
    );
    assert_eq!(replies[3].1, Ok(Reply::Delete));
    assert_eq!(replies[4].1, Ok(Reply::Multi(vec![])));
    let deleted = Delivery::Event(watch(EventType::NodeDeleted, &p));
    let at = seen
        .iter()
        .position(|d| *d == deleted)
        .expect("NodeDeleted");
    let read_at = seen
        .iter()
        .position(|d| matches!(d, Delivery::Reply(t, _) if *t == tickets[2]))
        .expect("the read's reply");
    assert!(
        at > read_at,
        "the event after the reply that armed it: {seen:?}"
    );
    zk.close().await.unwrap();
}
