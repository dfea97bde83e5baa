//! The simulated client across connections: a follower's crash moves its
//! clients to other servers with their sessions, ephemerals and watches
//! (replayed by SetWatches); a request still in flight from an abandoned
//! connection is refused with SessionMoved; with no server reachable the
//! two client flavours end differently. Many seeds each; a failure names
//! its seed and the command that replays it.

#[cfg(not(madsim))]
compile_error!(
    "tests/sim_reconnect.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::sync::Arc;
use std::time::Duration;

mod common;

use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Runtime;
use madsim::time::{sleep, timeout, Instant};
use zoosim::client::{Zk, ZkExt};
use zoosim::ensemble::sim::{Ensemble, EnsembleConfig, Flavour, SimZk};
use zoosim::proto::{ClientEvent, CreateMode, EventType, Op, SessionEvent, WatchEvent, ZkError};
use zoosim::tree::TxnBody;

const T_MS: u64 = 4000;

fn runtime(seed: u64) -> Runtime {
    Runtime::with_seed_and_config(seed, madsim::Config::default())
}

fn event(event_type: EventType, path: &str) -> ClientEvent {
    ClientEvent::Watch(WatchEvent {
        event_type,
        path: path.into(),
    })
}

fn drain(zk: &SimZk) -> Vec<ClientEvent> {
    std::iter::from_fn(|| zk.try_next_event()).collect()
}

/// A follower dies; its client reconnects elsewhere with everything intact.
fn follower_crash(seed: u64, flavour: Flavour) -> Duration {
    runtime(seed).block_on(async {
        let ensemble = Ensemble::start(EnsembleConfig::default());
        let follower = thread_rng().gen_range(1..3);
        let a = ensemble
            .client(follower)
            .timeout_ms(T_MS)
            .flavour(flavour)
            .connect()
            .await
            .unwrap();
        let b = ensemble.client(0).timeout_ms(T_MS).connect().await.unwrap();
        a.create("/a", b"", CreateMode::Ephemeral).await.unwrap();
        a.create("/d", b"", CreateMode::Persistent).await.unwrap();
        a.create("/kids", b"", CreateMode::Persistent)
            .await
            .unwrap();
        assert!(a.exists("/w", true).await.unwrap().is_none());
        a.get_data("/d", true).await.unwrap();
        a.get_children("/kids", true).await.unwrap();
        drain(&a);
        ensemble.crash_server(follower);
        let crashed = Instant::now();
        // A request in flight when the server died (sent now, by `call`).
        let in_flight = a.call(Op::Exists {
            path: "/a".into(),
            watch: false,
        });
        // Changes while A is away (its read timeout is over a second off),
        // to be replayed when it is back.
        b.sync("/").await.unwrap();
        b.create("/w", b"", CreateMode::Persistent).await.unwrap();
        b.set_data("/d", b"x", -1).await.unwrap();
        b.create("/kids/k", b"", CreateMode::Persistent)
            .await
            .unwrap();
        assert_eq!(in_flight.await, Err(ZkError::ConnectionLoss));
        // A comes back on its own: the session, its ephemeral, its watches.
        let back = timeout(Duration::from_secs(10), async {
            loop {
                if a.next_event().await == ClientEvent::Session(SessionEvent::Connected) {
                    return;
                }
            }
        })
        .await;
        assert!(back.is_ok(), "reconnected within 10 s");
        let away = crashed.elapsed();
        assert!(
            a.exists("/a", false).await.unwrap().is_some(),
            "the ephemeral survives"
        );
        let mut events = drain(&a);
        events.sort();
        let mut want = vec![
            event(EventType::NodeCreated, "/w"),
            event(EventType::NodeDataChanged, "/d"),
            event(EventType::NodeChildrenChanged, "/kids"),
        ];
        want.sort();
        assert_eq!(
            events, want,
            "each missed change replayed once (away {away:?})"
        );
        // The session works on the new server; ownership moved with it.
        a.create("/after", b"", CreateMode::Ephemeral)
            .await
            .unwrap();
        a.close().await.unwrap();
        sleep(Duration::from_secs(1)).await;
        for s in (0..3).filter(|&s| s != follower) {
            ensemble.with_server(s, |s| {
                assert!(s.tree().node("/a").is_none() && s.tree().node("/after").is_none());
                s.tree().check_invariants().unwrap();
            });
        }
        away
    })
}

#[test]
fn a_follower_crash_moves_its_clients_with_their_sessions() {
    for (flavour, start) in [(Flavour::Java, 0xfa11_0000), (Flavour::Rust, 0xfa12_0000)] {
        let away = common::sweep(
            "sim_reconnect",
            // The replay filter; a replayed seed runs both flavours.
            "a_follower_crash_moves",
            start,
            40,
            |seed| follower_crash(seed, flavour),
        );
        let ms: Vec<u128> = away.iter().map(Duration::as_millis).collect();
        eprintln!(
            "{flavour:?}: back on another server {}–{} ms after the crash (T = {T_MS})",
            ms.iter().min().unwrap(),
            ms.iter().max().unwrap()
        );
    }
}

#[test]
fn requests_from_an_abandoned_connection_meet_session_moved() {
    let outcomes = common::sweep("sim_reconnect", "session_moved", 0x5e55_0000, 100, |seed| {
        runtime(seed).block_on(async {
            let ensemble = Arc::new(Ensemble::start(EnsembleConfig::default()));
            // The Rust client reconnects at once: the race below needs the
            // new connection within milliseconds, which the Java client's
            // 0-1 s reconnect jitter makes rare.
            let a = Arc::new(
                ensemble
                    .client(1)
                    .timeout_ms(T_MS)
                    .flavour(Flavour::Rust)
                    .connect()
                    .await
                    .unwrap(),
            );
            let write = {
                let a = a.clone();
                madsim::task::spawn(
                    async move { a.create("/x", b"", CreateMode::Persistent).await },
                )
            };
            sleep(Duration::from_millis(thread_rng().gen_range(0..12))).await;
            a.break_connection();
            let result = write.await.unwrap();
            sleep(Duration::from_secs(2)).await;
            a.sync("/").await.unwrap();
            let exists = a.exists("/x", false).await.unwrap().is_some();
            let moved = ensemble.with_server(0, |s| {
                s.log()
                    .iter()
                    .filter(|e| e.txn.body == TxnBody::Error(ZkError::SessionMoved))
                    .count()
            });
            match result {
                Ok(_) => assert!(exists, "an acknowledged create is there"),
                Err(ZkError::ConnectionLoss) => {}
                Err(e) => panic!("{e:?}"),
            }
            if moved > 0 {
                assert!(!exists, "a write refused with SessionMoved is not applied");
            }
            (moved > 0, exists)
        })
    });
    let moved = outcomes.iter().filter(|o| o.0).count();
    let applied = outcomes.iter().filter(|o| o.1).count();
    eprintln!("abandoned-connection writes: {moved} refused with SessionMoved, {applied} applied");
    assert!(
        moved > 0 && applied > 0,
        "both outcomes happen: {moved} / {applied}"
    );
}

/// A write stalled on a cut link, from a connection the client gave up:
/// the client's next connection attempt to that server stalls too, and it
/// connects elsewhere. When the link heals, both stalled datagrams reach
/// the old server in either order; the late ConnectRequest re-attaches the
/// session there (taking its ownership), and ZooKeeper then closes the
/// session's older connection (processConnectRequest, CLIENT_RECONNECT), so
/// the write is never applied — else a lock client's guid search (sync,
/// then list) finds nothing, creates again, and leaves an orphan node
/// behind. Found by the leader-election sweep.
#[test]
fn a_write_stalled_on_an_abandoned_connection_is_never_applied() {
    let closes = common::sweep(
        "sim_reconnect",
        "stalled_on_an_abandoned",
        0x57a1_0000,
        50,
        |seed| {
            runtime(seed).block_on(async {
                let ensemble = Arc::new(Ensemble::start(EnsembleConfig::default()));
                // Attempts last T over the list's length: with six, the
                // stalled attempt at server 1 and the move to server 2 take
                // 2T/3 + T/6 after the client last heard from server 1,
                // safely before the leader may expire the session (T after
                // the last touch it knows of; with the servers' ticks out
                // of phase, that can be hardly later than the client's
                // last pong). The Rust client, which has no reconnect
                // jitter: the Java client's 0-1 s before each attempt
                // would take it past T.
                let a = Arc::new(
                    ensemble
                        .client_list(&[1, 1, 2, 2, 2, 2])
                        .timeout_ms(T_MS)
                        .flavour(Flavour::Rust)
                        .connect()
                        .await
                        .unwrap(),
                );
                let _ = drain(&a);
                ensemble.cut_client(&a, 1);
                let write = {
                    let a = a.clone();
                    madsim::task::spawn(
                        async move { a.create("/x", b"", CreateMode::Persistent).await },
                    )
                };
                assert_eq!(write.await.unwrap(), Err(ZkError::ConnectionLoss));
                let reconnected = timeout(Duration::from_millis(2 * T_MS), async {
                    while !a.is_connected() {
                        sleep(Duration::from_millis(10)).await;
                    }
                })
                .await;
                assert!(reconnected.is_ok(), "the client reconnects to server 2");
                let (client, server) = (a.addr().ip(), zoosim::ensemble::sim::server_addr(1).ip());
                ensemble.net().heal(client, server);
                ensemble.net().heal(server, client);
                sleep(Duration::from_secs(1)).await;
                let _ = a.sync("/").await;
                let b = ensemble.client(0).timeout_ms(T_MS).connect().await.unwrap();
                b.sync("/").await.unwrap();
                assert_eq!(
                    b.exists("/x", false).await.unwrap(),
                    None,
                    "a write from a connection the client gave up was applied"
                );
                ensemble.with_server(1, |s| s.stats().reconnect_closes)
            })
        },
    );
    let hit = closes.iter().filter(|&&c| c > 0).count();
    eprintln!("stalled writes: the older connection closed at a late re-attach in {hit} seeds");
    assert!(
        hit > 0,
        "the late re-attach never closed an older connection"
    );
}

#[test]
fn with_no_server_reachable_the_flavours_part() {
    // The client knows one server, which dies. The Rust client gives the
    // session up itself at 7T/5; the Java client keeps trying and never
    // hears Expired.
    common::sweep(
        "sim_reconnect",
        "no_server_reachable",
        0x0e5e_0000,
        20,
        |seed| {
            for flavour in [Flavour::Java, Flavour::Rust] {
                runtime(seed).block_on(async {
                    let ensemble = Ensemble::start(EnsembleConfig::default());
                    let a = ensemble
                        .client(1)
                        .timeout_ms(T_MS)
                        .flavour(flavour)
                        .no_failover()
                        .connect()
                        .await
                        .unwrap();
                    a.create("/a", b"", CreateMode::Ephemeral).await.unwrap();
                    drain(&a);
                    ensemble.crash_server(1);
                    sleep(Duration::from_millis(3 * T_MS)).await;
                    let events = drain(&a);
                    let late = a.exists("/a", false).await;
                    match flavour {
                        Flavour::Java => {
                            assert_eq!(events, [ClientEvent::Session(SessionEvent::Disconnected)]);
                            assert_eq!(late, Err(ZkError::ConnectionLoss));
                        }
                        Flavour::Rust => {
                            assert_eq!(
                                events,
                                [
                                    ClientEvent::Session(SessionEvent::Disconnected),
                                    ClientEvent::Session(SessionEvent::Expired)
                                ]
                            );
                            assert_eq!(late, Err(ZkError::SessionExpired));
                        }
                    }
                    // Meanwhile the leader expired the session on its own.
                    ensemble.with_server(0, |s| assert!(!s.tree().has_session(a.session_id())));
                })
            }
        },
    );
}

#[test]
fn a_restarted_follower_catches_up_before_it_serves() {
    common::sweep(
        "sim_reconnect",
        "a_restarted_follower_catches_up",
        0x4e57_0000,
        40,
        |seed| {
            runtime(seed).block_on(async {
                let ensemble = Ensemble::start(EnsembleConfig::default());
                let follower = thread_rng().gen_range(1..3);
                let b = ensemble.client(0).timeout_ms(T_MS).connect().await.unwrap();
                b.create("/before", b"", CreateMode::Persistent)
                    .await
                    .unwrap();
                sleep(Duration::from_millis(thread_rng().gen_range(0..300))).await;
                ensemble.crash_server(follower);
                for i in 0..5 {
                    b.create(&format!("/while-{i}"), b"", CreateMode::Persistent)
                        .await
                        .unwrap();
                }
                let late = ensemble.client(0).timeout_ms(T_MS).connect().await.unwrap();
                sleep(Duration::from_millis(thread_rng().gen_range(0..2000))).await;
                ensemble.restart_server(follower);
                // A client that knows only the restarted follower gets in once
                // it has synced, and reads everything committed meanwhile.
                let c = ensemble
                    .client(follower)
                    .timeout_ms(T_MS)
                    .no_failover()
                    .connect()
                    .await
                    .expect("the restarted follower serves again");
                let (children, _) = c.get_children("/", false).await.unwrap();
                assert!(children.len() >= 7, "{children:?}");
                b.create("/after", b"", CreateMode::Persistent)
                    .await
                    .unwrap();
                // The follower takes part in new commits again.
                c.sync("/").await.unwrap();
                assert!(c.exists("/after", false).await.unwrap().is_some());
                late.close().await.unwrap();
                sleep(Duration::from_secs(1)).await;
                let logs: Vec<Vec<i64>> = (0..3)
                    .map(|s| ensemble.with_server(s, |s| s.applied_zxids().collect()))
                    .collect();
                assert!(logs.iter().all(|l| l == &logs[0]), "applied logs converge");
                for s in 0..3 {
                    ensemble.with_server(s, |s| s.tree().check_invariants().unwrap());
                }
                assert!(
                    ensemble.with_server(follower, |s| !s.tree().has_session(late.session_id()))
                );
            })
        },
    );
}

#[test]
fn close_while_disconnected_fails_waiting_requests() {
    // A request held while no server is reachable must not outlive a
    // close(): it fails with SessionExpired, in both flavours.
    common::sweep(
        "sim_reconnect",
        "close_while_disconnected",
        0xc105_0000,
        20,
        |seed| {
            for flavour in [Flavour::Java, Flavour::Rust] {
                runtime(seed).block_on(async {
                    let ensemble = Ensemble::start(EnsembleConfig::default());
                    let a = Arc::new(
                        ensemble
                            .client(1)
                            .timeout_ms(T_MS)
                            .flavour(flavour)
                            .no_failover()
                            .connect()
                            .await
                            .unwrap(),
                    );
                    ensemble.crash_server(1);
                    sleep(Duration::from_millis(T_MS)).await; // disconnected now
                    assert!(!a.is_connected());
                    let held = {
                        let a = a.clone();
                        madsim::task::spawn(async move { a.exists("/", false).await })
                    };
                    sleep(Duration::from_millis(thread_rng().gen_range(1..1500))).await;
                    a.close().await.unwrap();
                    let result = timeout(Duration::from_secs(1), held).await;
                    let result = result.expect("the held request ended").unwrap();
                    assert!(
                        matches!(
                            result,
                            Err(ZkError::SessionExpired | ZkError::ConnectionLoss)
                        ),
                        "{result:?}"
                    );
                    assert_eq!(a.exists("/", false).await, Err(ZkError::SessionExpired));
                })
            }
        },
    );
}

/// The single system image (docs/ZOOKEEPER.md, "Crashes, partitions and lost
/// replies"): a client that has seen zxid z is refused by a server that
/// has not, and reads its own write once that server has caught up.
#[test]
fn a_lagging_server_refuses_a_client_that_has_seen_more() {
    common::sweep("sim_reconnect", "lagging_server", 0x1a90_0000, 50, |seed| {
        runtime(seed).block_on(async {
            let ensemble = Ensemble::start(EnsembleConfig::default());
            // Connect string "1,2"; T = 8 s outlasts the lag below.
            let a = ensemble
                .client_list(&[1, 2])
                .timeout_ms(8000)
                .connect()
                .await
                .unwrap();
            // Server 2 hears of everything 1.5 s late (under syncLimit, so
            // it stays a follower).
            ensemble.delay(0, 2, Duration::from_millis(1500));
            a.create("/seen", b"", CreateMode::Persistent)
                .await
                .unwrap();
            // Server 1 becomes unreachable; the client tries 2 next.
            ensemble.cut_client(&a, 1);
            drain(&a);
            a.break_connection();
            let broke = Instant::now();
            let back = timeout(Duration::from_secs(20), async {
                while a.next_event().await != ClientEvent::Session(SessionEvent::Connected) {}
            });
            assert!(back.await.is_ok(), "reconnected within 20 s");
            let refusals = ensemble.with_server(2, |s| s.stats().zxid_refusals);
            assert!(
                refusals > 0,
                "server 2 refused the client while it lagged (reconnected after {:?}: {})",
                broke.elapsed(),
                ensemble.with_server(2, |s| s.describe())
            );
            let away = broke.elapsed();
            assert!(
                away >= Duration::from_millis(1500),
                "reconnected after {away:?}"
            );
            assert_eq!(a.current_server(), Some(2));
            assert!(
                a.exists("/seen", false).await.unwrap().is_some(),
                "a client reads its own write wherever it reconnects"
            );
        })
    });
}
