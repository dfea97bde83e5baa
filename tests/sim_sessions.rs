//! Sessions on the simulated ensemble: kept alive by pings, expired only by
//! the leader (T rounded up to the tick, one closeSession deleting the
//! ephemerals, in-flight creates included), under two faults: client crash
//! and forced expiry. Each property over many seeds; a failure names its
//! seed and the command that replays it.

#[cfg(not(madsim))]
compile_error!(
    "tests/sim_sessions.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::sync::Arc;
use std::time::Duration;

mod common;

use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Runtime;
use madsim::time::{sleep, timeout, Instant};
use zoosim::client::{Zk, ZkExt};
use zoosim::ensemble::sim::{Ensemble, EnsembleConfig};
use zoosim::proto::{ClientEvent, CreateMode, EventType, SessionEvent, WatchEvent, ZkError};
use zoosim::tree::TxnBody;

const T_MS: u64 = 4000;
const TICK_MS: u64 = 500;

fn config() -> EnsembleConfig {
    EnsembleConfig {
        servers: 3,
        tick_ms: TICK_MS,
        ..EnsembleConfig::default()
    }
}

fn runtime(seed: u64) -> Runtime {
    Runtime::with_seed_and_config(seed, madsim::Config::default())
}

/// Waits for the watch event `want`; any other event first is an error.
async fn wait_for(zk: &impl Zk, want: WatchEvent, within: Duration) -> Result<(), String> {
    match timeout(within, zk.next_event()).await {
        Ok(ClientEvent::Watch(e)) if e == want => Ok(()),
        Ok(other) => Err(format!("unexpected {other:?} while waiting for {want:?}")),
        Err(_) => Err(format!("no {want:?} within {within:?}")),
    }
}

#[test]
fn a_crashed_clients_session_expires_after_t_and_its_ephemerals_go() {
    let delays = common::sweep(
        "sim_sessions",
        "a_crashed_clients_session",
        0xc4a5_0000,
        50,
        |seed| {
            runtime(seed).block_on(async {
                let ensemble = Ensemble::start(config());
                let a = ensemble.client(1).timeout_ms(T_MS).connect().await.unwrap();
                let b = ensemble.client(2).timeout_ms(T_MS).connect().await.unwrap();
                assert_eq!(
                    b.next_event().await,
                    ClientEvent::Session(SessionEvent::Connected)
                );
                a.create("/a", b"", CreateMode::Ephemeral).await.unwrap();
                let (seq, _) = a
                    .create("/a-", b"", CreateMode::EphemeralSequential)
                    .await
                    .unwrap();
                b.create("/b", b"", CreateMode::Ephemeral).await.unwrap();
                assert!(b.exists("/a", true).await.unwrap().is_some());
                // Busy a while, so the last touch is not the create's.
                sleep(Duration::from_millis(thread_rng().gen_range(0..3000))).await;
                a.exists("/a", false).await.unwrap();
                ensemble.crash_client(&a);
                let crashed = Instant::now();
                let deleted = WatchEvent {
                    event_type: EventType::NodeDeleted,
                    path: "/a".into(),
                };
                wait_for(&b, deleted, Duration::from_millis(3 * T_MS))
                    .await
                    .unwrap();
                let delay = crashed.elapsed();
                // Quiet: the close reaches every replica.
                sleep(Duration::from_secs(1)).await;
                for s in 0..3 {
                    ensemble.with_server(s, |s| {
                        let t = s.tree();
                        assert!(
                            t.node("/a").is_none() && t.node(&seq).is_none(),
                            "A's ephemerals gone"
                        );
                        assert!(t.node("/b").is_some(), "B's ephemeral stays");
                        t.check_invariants().unwrap();
                    });
                }
                assert!(b.exists("/b", false).await.unwrap().is_some(), "B is alive");
                delay
            })
        },
    );
    let ms: Vec<u128> = delays.iter().map(Duration::as_millis).collect();
    let (min, max) = (*ms.iter().min().unwrap(), *ms.iter().max().unwrap());
    eprintln!("crash → NodeDeleted at the watcher: {min}–{max} ms (T = {T_MS}, tick = {TICK_MS})");
    // The leader hears of the last touch up to a tick late and rounds the
    // expiry up to the next tick; messages take some ms.
    assert!(min as u64 >= T_MS, "expired before T: {min} ms");
    assert!(
        max as u64 <= T_MS + 2 * TICK_MS + 300,
        "expired late: {max} ms"
    );
    assert!(
        max > min,
        "the delay varies with the crash's place in the tick"
    );
}

#[test]
fn idle_clients_stay_alive_on_pings() {
    common::sweep(
        "sim_sessions",
        "idle_clients_stay_alive",
        0x1d1e_0000,
        20,
        |seed| {
            runtime(seed).block_on(async {
                let ensemble = Ensemble::start(config());
                let a = ensemble
                    .client(thread_rng().gen_range(0..3))
                    .timeout_ms(2000)
                    .connect()
                    .await
                    .unwrap();
                a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
                sleep(Duration::from_secs(30)).await;
                assert!(a.exists("/e", false).await.unwrap().is_some());
                assert_eq!(
                    a.try_next_event(),
                    Some(ClientEvent::Session(SessionEvent::Connected))
                );
                assert_eq!(
                    a.try_next_event(),
                    None,
                    "no Disconnected in 30 s of idling"
                );
            })
        },
    );
}

#[test]
fn forced_expiry_closes_the_session_everywhere() {
    common::sweep("sim_sessions", "forced_expiry", 0xf0ce_0000, 50, |seed| {
        runtime(seed).block_on(async {
            let ensemble = Ensemble::start(config());
            let a = ensemble
                .client(thread_rng().gen_range(0..3))
                .timeout_ms(T_MS)
                .connect()
                .await
                .unwrap();
            let b = ensemble
                .client(thread_rng().gen_range(0..3))
                .timeout_ms(T_MS)
                .connect()
                .await
                .unwrap();
            assert_eq!(
                b.next_event().await,
                ClientEvent::Session(SessionEvent::Connected)
            );
            a.create("/a", b"", CreateMode::Ephemeral).await.unwrap();
            // B's server may lag behind A's create: sync first.
            b.sync("/").await.unwrap();
            assert!(b.exists("/a", true).await.unwrap().is_some());
            ensemble.expire_session(a.session_id());
            // A's server drops the connection: Disconnected after Connected.
            let events: Vec<_> = std::iter::from_fn(|| a.try_next_event()).collect();
            assert_eq!(events, [ClientEvent::Session(SessionEvent::Connected)]);
            let dropped = timeout(Duration::from_secs(2), a.next_event()).await;
            assert_eq!(
                dropped,
                Ok(ClientEvent::Session(SessionEvent::Disconnected))
            );
            // The Java client learns of the expiry when it reconnects: the
            // request waits for that, then fails, and Expired follows.
            assert_eq!(a.exists("/a", false).await, Err(ZkError::SessionExpired));
            let expired = timeout(Duration::from_secs(2), a.next_event()).await;
            assert_eq!(expired, Ok(ClientEvent::Session(SessionEvent::Expired)));
            assert_eq!(a.try_next_event(), None);
            let deleted = WatchEvent {
                event_type: EventType::NodeDeleted,
                path: "/a".into(),
            };
            wait_for(&b, deleted, Duration::from_secs(2)).await.unwrap();
            sleep(Duration::from_secs(1)).await;
            for s in 0..3 {
                ensemble.with_server(s, |s| {
                    assert!(!s.tree().has_session(a.session_id()));
                    assert!(s.tree().node("/a").is_none());
                });
            }
        })
    });
}

#[test]
fn ephemeral_creates_racing_an_expiry_leave_no_orphans() {
    // Creates prepped before the session was marked closing are in its
    // closeSession; later ones fail with SessionExpired. Either way no
    // ephemeral outlives the session. Both paths must be taken.
    let outcomes = common::sweep(
        "sim_sessions",
        "creates_racing_an_expiry",
        0x0a9e_0000,
        100,
        |seed| {
            runtime(seed).block_on(async {
                let ensemble = Arc::new(Ensemble::start(config()));
                let a = Arc::new(
                    ensemble
                        .client(thread_rng().gen_range(0..3))
                        .timeout_ms(T_MS)
                        .connect()
                        .await
                        .unwrap(),
                );
                let session = a.session_id();
                // Pipelined: several creates in flight when the expiry hits.
                let creates = {
                    let a = a.clone();
                    madsim::task::spawn(async move {
                        let creates = (0..8u64).map(|i| {
                            let a = a.clone();
                            async move {
                                sleep(Duration::from_millis(i * 7)).await;
                                a.create(&format!("/e{i}"), b"", CreateMode::Ephemeral)
                                    .await
                            }
                        });
                        futures::future::join_all(creates).await
                    })
                };
                sleep(Duration::from_millis(thread_rng().gen_range(0..200))).await;
                let window = Duration::from_millis(thread_rng().gen_range(0..60));
                ensemble.expire_session_with_window(session, window);
                let results = creates.await.unwrap();
                sleep(Duration::from_secs(1)).await;
                for s in 0..3 {
                    ensemble.with_server(s, |s| {
                        let t = s.tree();
                        assert!(!t.has_session(session));
                        assert!(
                            t.ephemerals(session).next().is_none(),
                            "orphaned ephemerals"
                        );
                        t.check_invariants().unwrap();
                    });
                }
                let created_then_closed = results.iter().filter(|r| r.is_ok()).count();
                // Refused at the leader's prep (not by the client itself).
                let refused = ensemble.with_server(0, |s| {
                    s.log()
                        .iter()
                        .filter(|e| e.txn.body == TxnBody::Error(ZkError::SessionExpired))
                        .count()
                });
                (created_then_closed, refused)
            })
        },
    );
    let created: usize = outcomes.iter().map(|o| o.0).sum();
    let refused: usize = outcomes.iter().map(|o| o.1).sum();
    eprintln!(
        "racing creates: {created} applied then deleted by the close, {refused} refused at prep"
    );
    assert!(
        created > 0 && refused > 0,
        "both paths taken: {created} / {refused}"
    );
}
