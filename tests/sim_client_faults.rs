//! The client faults of real deployments, shown happening as described:
//! a partition that leaves a lock holder with its follower on the minority
//! side (connected but expired: the follower keeps serving it after the
//! leader expired its session, so it believes it holds while its fenced
//! accesses are rejected), and a client machine cut off from every server
//! (Disconnected throughout; Java learns Expired after the heal, Rust
//! decides it locally). A few seeds each; a failure names its seed and the
//! command that replays it.

#[cfg(not(madsim))]
compile_error!(
    "tests/sim_client_faults.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::sync::Arc;
use std::time::Duration;

mod common;

use madsim::runtime::Runtime;
use madsim::time::{sleep, timeout, Instant};
use zoosim::check::fence::FencedResource;
use zoosim::client::{Zk, ZkExt};
use zoosim::ensemble::sim::{Ensemble, EnsembleConfig, Flavour};
use zoosim::proto::{ClientEvent, SessionEvent, ZkError};
use zoosim::recipes::lock::{Lock, LockClient};

/// The session timeout the clients ask for, in ms.
const T_MS: u64 = 4000;

fn runtime(seed: u64) -> Runtime {
    Runtime::with_seed_and_config(seed, madsim::Config::default())
}

/// ZooKeeper's sample timing: tickTime 2000 ms, syncLimit 5. A follower
/// cut off from its leader notices after syncLimit ticks (10 s), while the
/// leader expires a session of T = 4000 ms (2 ticks) 4–6 s after it last
/// heard of it.
fn sample_config() -> EnsembleConfig {
    EnsembleConfig {
        tick_ms: 2000,
        sync_limit_ticks: 5,
        init_limit_ticks: 10,
        ..EnsembleConfig::default()
    }
}

/// What the minority holder went through, for the sweep's report.
struct Window {
    /// From the partition to the new holder's acquisition.
    taken_after: Duration,
    /// The longest a server served the old holder's session after its
    /// expiry.
    served_after_expiry: Duration,
}

#[test]
fn a_minority_holder_believes_it_holds_past_its_expiry_while_its_fenced_accesses_are_rejected() {
    let windows = common::sweep(
        "sim_client_faults",
        "minority_holder",
        0x1616_0000,
        6,
        |seed| {
            runtime(seed).block_on(async {
                let e = Arc::new(Ensemble::start(sample_config()));
                // Client 0 holds through follower 2; client 1 waits on the
                // leader's side.
                let a = e
                    .client(2)
                    .scenario_client(0)
                    .timeout_ms(T_MS)
                    .connect()
                    .await
                    .unwrap();
                let b = e
                    .client(0)
                    .scenario_client(1)
                    .timeout_ms(T_MS)
                    .connect()
                    .await
                    .unwrap();
                let mut holder = LockClient::new(&a, Lock::new("/locks/l", "a"));
                let old = holder.acquire().await.unwrap();
                let mut resource = FencedResource::new();
                assert!(resource.access(old));

                // The partition: server 2 alone with its client.
                let partitioned = Instant::now();
                e.partition(&[&[2], &[0, 1]]);
                e.cut_off_client(0, &[0, 1]);
                e.cut_off_client(1, &[2]);

                // The leader expires the holder's session and the waiter
                // takes the lock...
                let mut waiter = LockClient::new(&b, Lock::new("/locks/l", "b"));
                let new = timeout(Duration::from_secs(9), waiter.acquire())
                    .await
                    .expect("the waiter takes the lock before the follower gives up")
                    .unwrap();
                let taken_after = partitioned.elapsed();
                assert!(new > old, "tokens {old} then {new}");
                assert!(resource.access(new));
                let leader = e.leader().expect("the majority keeps its leader");
                assert!(
                    !e.with_server(leader, |s| s.tree().has_session(a.session_id())),
                    "the leader expired the holder's session"
                );

                // ...while the holder, still served by its follower, believes
                // it holds: connected, pongs coming, its own node there.
                assert!(a.is_connected(), "the follower still serves it");
                assert_eq!(a.current_server(), Some(2));
                assert!(holder.is_holder(), "the holder still believes it holds");
                let (mine, _) = a.get_children("/locks/l", false).await.unwrap();
                assert!(
                    mine.iter().any(|n| n.starts_with("a-")),
                    "its own ephemeral is still visible on its server: {mine:?}"
                );
                // It acts, and fencing is what stops it.
                assert!(
                    !resource.access(old),
                    "the stale holder's access is refused"
                );
                assert_eq!((resource.accepted(), resource.rejected()), (2, 1));

                // The follower gives up syncLimit ticks after it last heard
                // from its leader: the holder is Disconnected (suspended)
                // and can reach no server that serves.
                let suspended = timeout(Duration::from_secs(8), async {
                    while holder.is_holder() {
                        sleep(Duration::from_millis(50)).await;
                    }
                })
                .await;
                assert!(suspended.is_ok(), "the follower gives up within syncLimit");
                assert!(!a.is_connected());
                let served = e
                    .served_after_expiry()
                    .into_iter()
                    .find(|(s, _)| *s == a.session_id())
                    .map(|(_, lag)| Duration::from_millis(lag))
                    .expect("served after its expiry");
                assert!(served >= Duration::from_millis(2000), "{served:?}");

                // Healed, the Java client learns Expired.
                e.heal();
                let expired = timeout(Duration::from_secs(10), async {
                    loop {
                        match a.exists("/locks", false).await {
                            Err(ZkError::SessionExpired) => break,
                            _ => sleep(Duration::from_millis(100)).await,
                        }
                    }
                })
                .await;
                assert!(expired.is_ok(), "Expired after the heal");
                e.shutdown();
                Window {
                    taken_after,
                    served_after_expiry: served,
                }
            })
        },
    );
    for w in &windows {
        eprintln!(
            "lock taken {} ms after the partition; old holder served {} ms past its expiry",
            w.taken_after.as_millis(),
            w.served_after_expiry.as_millis()
        );
    }
}

/// Client 0 isolated from every server for 3T: Disconnected the whole
/// time, the leader expires its session meanwhile, and no new session can
/// be opened from its machine. Returns when it learned Expired, since the
/// isolation began.
fn isolated(seed: u64, flavour: Flavour) -> (Duration, Duration) {
    runtime(seed).block_on(async {
        let e = Arc::new(Ensemble::start(EnsembleConfig::default()));
        let a = e
            .client(1)
            .scenario_client(0)
            .flavour(flavour)
            .timeout_ms(T_MS)
            .connect()
            .await
            .unwrap();
        while a.try_next_event().is_some() {}
        let window = Duration::from_millis(3 * T_MS);
        let start = Instant::now();
        e.cut_off_client(0, &[0, 1, 2]);
        // A new session from the same machine finds no server either.
        let second = {
            let e = e.clone();
            madsim::task::spawn(async move {
                let zk = e.client(0).scenario_client(0).timeout_ms(T_MS).connect();
                zk.await.map(|zk| zk.session_id())
            })
        };
        let mut events = Vec::new();
        let mut expired_at = None;
        while start.elapsed() < window {
            while let Some(ev) = a.try_next_event() {
                if ev == ClientEvent::Session(SessionEvent::Expired) && expired_at.is_none() {
                    expired_at = Some(start.elapsed());
                }
                events.push((start.elapsed(), ev));
            }
            if start.elapsed() > Duration::from_millis(T_MS) {
                assert!(!a.is_connected(), "connected while isolated");
            }
            sleep(Duration::from_millis(50)).await;
        }
        let second = second.await.unwrap();
        assert_eq!(
            second,
            Err(ZkError::ConnectionLoss),
            "a session from the isolated machine"
        );
        let leader = e.leader().unwrap();
        assert!(
            !e.with_server(leader, |s| s.tree().has_session(a.session_id())),
            "the leader expired the isolated session"
        );
        let disconnected = events
            .iter()
            .find(|(_, ev)| *ev == ClientEvent::Session(SessionEvent::Disconnected))
            .map(|(at, _)| *at)
            .expect("Disconnected while isolated");
        assert!(
            !events
                .iter()
                .any(|(_, ev)| *ev == ClientEvent::Session(SessionEvent::Connected)),
            "never Connected while isolated: {events:?}"
        );
        match flavour {
            // Java never decides expiry itself: only the heal tells it.
            Flavour::Java => assert_eq!(expired_at, None, "{events:?}"),
            Flavour::Rust => {
                let at = expired_at.expect("the Rust client expires locally");
                assert!(at < window, "{at:?}");
            }
        }
        e.reconnect_client(0, &[0, 1, 2]);
        let learned = timeout(Duration::from_secs(10), async {
            loop {
                if let ClientEvent::Session(SessionEvent::Expired) = a.next_event().await {
                    break;
                }
            }
        })
        .await;
        if flavour == Flavour::Java {
            assert!(learned.is_ok(), "Expired after the heal");
            expired_at = Some(start.elapsed());
        }
        e.shutdown();
        (disconnected, expired_at.expect("expired"))
    })
}

#[test]
fn an_isolated_java_client_is_disconnected_throughout_and_learns_expired_after_the_heal() {
    let seen = common::sweep(
        "sim_client_faults",
        "isolated_java",
        0x1616_1000,
        5,
        |seed| isolated(seed, Flavour::Java),
    );
    for (disconnected, expired) in seen {
        // Disconnected at the read timeout (2T/3, a ping's tenth of T late
        // at most); Expired only once healed, after 3T.
        assert!(
            disconnected <= Duration::from_millis(T_MS),
            "{disconnected:?}"
        );
        assert!(expired >= Duration::from_millis(3 * T_MS), "{expired:?}");
    }
}

#[test]
fn an_isolated_rust_client_expires_its_session_itself() {
    let seen = common::sweep(
        "sim_client_faults",
        "isolated_rust",
        0x1616_2000,
        5,
        |seed| isolated(seed, Flavour::Rust),
    );
    for (disconnected, expired) in seen {
        // 2T/5 of silence breaks the connection; 7T/5 after the last
        // contact, the session is given up locally.
        assert!(
            disconnected <= Duration::from_millis(T_MS / 2 + T_MS / 10),
            "{disconnected:?}"
        );
        assert!(expired <= Duration::from_millis(2 * T_MS), "{expired:?}");
    }
}
