//! SetWatches replay after a reconnect (docs/ZOOKEEPER.md, "Watches and
//! SetWatches", observed), differentially: a real client's watches survive
//! a server's death, other clients change the watched nodes meanwhile, and
//! the events the real server replays on reconnect must be those
//! `WatchTable::set_watches` computes on the model's tree.
//!
//! A 3-node ensemble, so that writes go on while the watcher's server is
//! down; the watcher's server is killed and restarted (a restarted follower
//! syncs with the leader before it serves, so the replay sees every change).

use std::time::{Duration, Instant};

use zoosim::client::local::LocalServer;
use zoosim::client::real::RealZk;
use zoosim::client::{Zk, ZkExt};
use zoosim::proto::{ClientEvent, CreateMode, EventType, SessionEvent, WatchEvent, ZkError};
use zoosim::real_server::{fresh_root, shared_server, RealEnsemble};
use zoosim::tree::WatchTable;

use crate::runtime;

const T_MS: u64 = 10_000;

/// The nodes and the watches the watcher arms on them.
const DATA: &[&str] = &["/same", "/changed", "/deleted", "/recreated"];
const EXIST: &[&str] = &["/born", "/brief"];
const CHILD: &[&str] = &["/kids", "/same"];

async fn setup<Z: Zk + Sync>(writer: &Z, root: &str) -> Result<(), ZkError> {
    writer.create(root, b"", CreateMode::Persistent).await?;
    for p in ["/same", "/changed", "/deleted", "/kids", "/recreated"] {
        writer
            .create(&format!("{root}{p}"), b"", CreateMode::Persistent)
            .await?;
    }
    Ok(())
}

async fn arm<Z: Zk + Sync>(watcher: &Z, root: &str) -> Result<(), ZkError> {
    watcher.sync(root).await?;
    for p in DATA {
        watcher.get_data(&format!("{root}{p}"), true).await?;
    }
    for p in EXIST {
        watcher.exists(&format!("{root}{p}"), true).await?;
    }
    for p in CHILD {
        watcher.get_children(&format!("{root}{p}"), true).await?;
    }
    Ok(())
}

/// What happens while the watcher is away.
async fn changes<Z: Zk + Sync>(writer: &Z, root: &str) -> Result<(), ZkError> {
    let p = |s: &str| format!("{root}{s}");
    writer.set_data(&p("/changed"), b"v", -1).await?;
    writer.delete(&p("/deleted"), -1).await?;
    writer
        .create(&p("/kids/k"), b"", CreateMode::Persistent)
        .await?;
    writer.delete(&p("/recreated"), -1).await?;
    writer
        .create(&p("/recreated"), b"", CreateMode::Persistent)
        .await?;
    writer
        .create(&p("/born"), b"", CreateMode::Persistent)
        .await?;
    writer
        .create(&p("/brief"), b"", CreateMode::Persistent)
        .await?;
    writer.delete(&p("/brief"), -1).await?;
    Ok(())
}

/// The model's answer: the same history on the tree, then SetWatches with
/// the zxid the watcher had seen when it went away.
fn expected(root: &str) -> Vec<WatchEvent> {
    runtime().block_on(async {
        let server = LocalServer::default();
        let watcher = server.connect(T_MS);
        let writer = server.connect(T_MS);
        setup(&writer, root).await.unwrap();
        arm(&watcher, root).await.unwrap();
        let last_seen = server.tree().last_zxid();
        changes(&writer, root).await.unwrap();
        let paths = |v: &[&str]| v.iter().map(|p| format!("{root}{p}")).collect::<Vec<_>>();
        let mut table = WatchTable::new();
        let mut events = table.set_watches(
            watcher.session_id(),
            &server.tree(),
            last_seen,
            &paths(DATA),
            &paths(EXIST),
            &paths(CHILD),
        );
        events.sort();
        events
    })
}

#[test]
fn set_watches_replay_matches_the_model() {
    if shared_server("set_watches_replay_matches_the_model").is_none() {
        return;
    }
    let started = Instant::now();
    let mut ensemble = RealEnsemble::start(3).expect("a 3-node ensemble");
    let leader = ensemble.leader().expect("a leader");
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let root = fresh_root("replay");
    let want = expected(&root);

    let got = runtime().block_on(async {
        // The watcher knows only its follower; the writer only the leader.
        let watcher = RealZk::connect(&ensemble.member_connect_string(follower), T_MS)
            .await
            .expect("watcher connects");
        let writer = RealZk::connect(&ensemble.member_connect_string(leader), T_MS)
            .await
            .expect("writer connects");
        setup(&writer, &root).await.unwrap();
        arm(&watcher, &root).await.unwrap();
        while watcher.try_next_event().is_some() {}

        ensemble.kill(follower);
        let gone = Instant::now();
        let disconnected = tokio::time::timeout(Duration::from_secs(5), watcher.next_event()).await;
        assert_eq!(
            disconnected,
            Ok(ClientEvent::Session(SessionEvent::Disconnected)),
            "the watcher noticed its server's death"
        );
        changes(&writer, &root).await.unwrap();
        ensemble.restart(follower).expect("the follower restarts");

        // Until the watcher is back: then one round trip, and every
        // replayed event has arrived.
        let mut events = Vec::new();
        let reconnected = tokio::time::timeout(Duration::from_secs(8), async {
            loop {
                match watcher.next_event().await {
                    ClientEvent::Session(SessionEvent::Connected) => break,
                    ClientEvent::Watch(w) => events.push(w),
                    ClientEvent::Session(s) => panic!("watcher: {s:?} while reconnecting"),
                }
            }
        })
        .await;
        assert!(reconnected.is_ok(), "the watcher reconnected within 8 s");
        eprintln!(
            "replay: watcher back {:.2} s after the kill",
            gone.elapsed().as_secs_f64()
        );
        watcher.exists(&root, false).await.unwrap();
        while let Some(e) = watcher.try_next_event() {
            match e {
                ClientEvent::Watch(w) => events.push(w),
                ClientEvent::Session(s) => panic!("watcher: {s:?} after reconnecting"),
            }
        }
        let _ = watcher.close().await;
        let _ = writer.close().await;
        events.sort();
        events
    });
    drop(ensemble);
    eprintln!(
        "set_watches_replay_matches_the_model: {:.1} s",
        started.elapsed().as_secs_f64()
    );

    assert_eq!(got, want, "replayed events: real (left) vs model (right)");
    // The documented facts, on the real server's answer.
    let has = |t: EventType, p: &str| {
        got.contains(&WatchEvent {
            event_type: t,
            path: format!("{root}{p}"),
        })
    };
    assert!(has(EventType::NodeDataChanged, "/changed"));
    assert!(has(EventType::NodeDeleted, "/deleted"));
    assert!(has(EventType::NodeChildrenChanged, "/kids"));
    assert!(
        has(EventType::NodeDataChanged, "/recreated"),
        "deleted and re-created while away: a data change, not a delete"
    );
    assert!(has(EventType::NodeCreated, "/born"));
    assert!(
        !got.iter()
            .any(|e| e.path.ends_with("/brief") || e.path.ends_with("/same")),
        "created-and-deleted while away, and unchanged: no event"
    );
}
