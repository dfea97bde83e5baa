//! The server faults production ensembles meet, each shown to do what it
//! says: a process kill resets connections at once (clients and followers
//! react in milliseconds, where a power-off takes a read timeout or
//! syncLimit); the Java client waits 0–1 s before each reconnect; a paused
//! leader resumes with its old view and serves a stale read; a majority and
//! the whole ensemble go down and come back from their logs with sessions
//! intact; a new leader crashes while it syncs; three-way and long
//! partitions are drawn as described. Several seeds each; a failure names
//! its seed and the command that replays it.

#[cfg(not(madsim))]
compile_error!(
    "tests/sim_server_faults.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::sync::Arc;
use std::time::Duration;

mod common;

use madsim::runtime::Runtime;
use madsim::time::{sleep, Instant};
use zoosim::client::ZkExt;
use zoosim::ensemble::fault::Fault;
use zoosim::ensemble::sim::nemesis::{
    self, ClientSlot, ClientSlots, InjectedFault, NemesisConfig, PlannedFault,
};
use zoosim::ensemble::sim::{Ensemble, EnsembleConfig, Flavour, SimZk};
use zoosim::history::FaultParams;
use zoosim::proto::{CreateMode, ZkError};

const T_MS: u64 = 4000;
const BINARY: &str = "sim_server_faults";

fn runtime(seed: u64) -> Runtime {
    Runtime::with_seed_and_config(seed, madsim::Config::default())
}

/// Waits (polling every millisecond, up to `limit`) until `zk` is
/// connected to a server other than `not`; returns how long it took.
async fn reconnected(zk: &SimZk, not: u32, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if zk.current_server().is_some_and(|s| s != not) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "not reconnected within {limit:?} (on {:?})",
            zk.current_server()
        );
        sleep(Duration::from_millis(1)).await;
    }
}

/// `op` again while it fails with ConnectionLoss (a request issued while
/// the client is between servers), a tenth of a second apart, for up to
/// `limit`.
async fn retried<T, F: std::future::Future<Output = Result<T, ZkError>>>(
    limit: Duration,
    mut op: impl FnMut() -> F,
) -> T {
    let start = Instant::now();
    loop {
        match op().await {
            Ok(v) => return v,
            Err(ZkError::ConnectionLoss) if start.elapsed() < limit => {
                sleep(Duration::from_millis(100)).await
            }
            Err(other) => panic!("{other:?} after {:?}", start.elapsed()),
        }
    }
}

/// How long a follower's client takes to be connected elsewhere after its
/// server is killed (`kill`) or powered off.
fn failover(seed: u64, flavour: Flavour, kill: bool) -> Duration {
    runtime(seed).block_on(async {
        let e = Ensemble::start(EnsembleConfig::default());
        let zk = e
            .client(2)
            .timeout_ms(T_MS)
            .flavour(flavour)
            .connect()
            .await
            .unwrap();
        zk.create("/x", b"", CreateMode::Ephemeral).await.unwrap();
        if kill {
            e.kill_server(2);
        } else {
            e.crash_server(2);
        }
        let took = reconnected(&zk, 2, Duration::from_millis(3 * T_MS)).await;
        // The session came through.
        assert!(zk.exists("/x", false).await.unwrap().is_some());
        if kill {
            assert_eq!(e.fault_counts().client_resets, 1, "one connection reset");
        } else {
            assert_eq!(
                e.fault_counts().client_resets,
                0,
                "a power-off resets nothing"
            );
        }
        e.shutdown();
        took
    })
}

#[test]
fn a_killed_servers_clients_reconnect_at_once_and_a_powered_off_ones_after_their_read_timeout() {
    for seed in common::seeds(0x3_0000, 8) {
        common::replaying(BINARY, "kill_failover", seed, || {
            // The Rust client reconnects in the same few milliseconds.
            let killed = failover(seed, Flavour::Rust, true);
            assert!(killed < Duration::from_millis(20), "killed: {killed:?}");
            // The Java client after its jitter, under a second (and a
            // connect's round trip).
            let killed = failover(seed, Flavour::Java, true);
            assert!(killed < Duration::from_millis(1020), "killed: {killed:?}");
            // A power-off is noticed by silence: the read timeout (2T/5
            // for the Rust client), a hundred times slower.
            let off = failover(seed, Flavour::Rust, false);
            assert!(
                off >= Duration::from_millis(2 * T_MS / 5),
                "powered off: {off:?}"
            );
        });
    }
}

#[test]
fn the_java_client_waits_up_to_a_second_before_each_reconnect() {
    let delays: Vec<Duration> = common::sweep(BINARY, "java_jitter", 0x3_1000, 12, |seed| {
        failover(seed, Flavour::Java, true)
    });
    // Drawn per attempt from 0-999 ms: spread out, never over a second.
    let min = delays.iter().min().unwrap();
    let max = delays.iter().max().unwrap();
    assert!(*max < Duration::from_millis(1020), "{delays:?}");
    assert!(
        *max - *min > Duration::from_millis(300),
        "the jitter is drawn, not fixed: {delays:?}"
    );
}

#[test]
fn the_followers_of_a_killed_leader_look_for_a_new_one_at_once() {
    common::sweep(BINARY, "killed_leader", 0x3_2000, 6, |seed| {
        runtime(seed).block_on(async {
            let e = Ensemble::start(EnsembleConfig::default());
            sleep(Duration::from_millis(100)).await;
            assert_eq!(e.leader(), Some(0));
            let killed = Instant::now();
            e.kill_server(0);
            // Within a few ms both followers leave: neither serves.
            sleep(Duration::from_millis(5)).await;
            for s in [1, 2] {
                assert!(
                    !e.with_server(s, |x| x.is_serving()) || e.leader().is_some_and(|l| l != 0),
                    "server {s} still follows a dead leader: {}",
                    e.with_server(s, |x| x.describe())
                );
            }
            let resets: u64 = (1..3)
                .map(|s| e.with_server(s, |x| x.stats().peer_resets))
                .sum();
            assert_eq!(resets, 2, "both followers saw the reset");
            // And elect a leader long before syncLimit (5 ticks of 500 ms)
            // would have told them.
            while e.leader().is_none() {
                sleep(Duration::from_millis(1)).await;
            }
            assert!(
                killed.elapsed() < Duration::from_millis(1000),
                "{:?}",
                killed.elapsed()
            );
            e.shutdown();
        })
    });
}

#[test]
fn a_paused_leader_resumes_with_its_old_view_and_serves_a_stale_read() {
    common::sweep(BINARY, "paused_leader", 0x3_3000, 6, |seed| {
        runtime(seed).block_on(async {
            let e = Ensemble::start(EnsembleConfig::default());
            // A long session: its client stays connected to the paused
            // leader (read timeout 2T/3 = 8 s) through the pause.
            let t = 12_000;
            let a = e.client(0).timeout_ms(t).connect().await.unwrap();
            // B never tries the paused server (an attempt there would wait
            // out its connect timeout, T/3).
            let b = e
                .client_list(&[1, 2])
                .timeout_ms(t)
                .connect()
                .await
                .unwrap();
            a.create("/x", b"old", CreateMode::Persistent)
                .await
                .unwrap();
            b.sync("/").await.unwrap();
            let pause = Duration::from_millis(6000);
            // A hears from its server now: its read timeout runs from here.
            a.exists("/x", false).await.unwrap();
            let paused = Instant::now();
            assert!(e.pause_server(0, pause), "it led when it stopped");
            // The others elect a new leader once syncLimit passes, and B
            // writes through it (its server drops it when it elects).
            let wrote = loop {
                match b.set_data("/x", b"new", -1).await {
                    Ok(_) => break Instant::now(),
                    Err(ZkError::ConnectionLoss) => sleep(Duration::from_millis(100)).await,
                    Err(other) => panic!("{other:?}"),
                }
            };
            assert!(e.leader().is_some_and(|l| l != 0), "a new leader");
            // A reads through the stalled old leader: queued, answered on
            // resume from the old tree, after B's write completed.
            assert_eq!(a.current_server(), Some(0), "A waits on the paused leader");
            let read = madsim::task::spawn({
                let a = Arc::new(a);
                async move { a.get_data("/x", false).await }
            });
            sleep(pause.saturating_sub(paused.elapsed())).await;
            let resumed = Instant::now();
            e.resume_server(0);
            assert_eq!(e.fault_counts().deposed_while_paused, 1);
            let got = read.await.unwrap();
            let role = e.with_server(0, |x| x.describe());
            let (data, _) = got.unwrap_or_else(|err| panic!("{err:?}: {role}"));
            assert_eq!(data, b"old", "a stale read from the deposed leader");
            assert!(wrote < resumed);
            e.shutdown();
        })
    });
}

#[test]
fn sessions_outlive_a_majority_outage_longer_than_their_timeout() {
    common::sweep(BINARY, "majority_outage", 0x3_4000, 6, |seed| {
        runtime(seed).block_on(async {
            let e = Arc::new(Ensemble::start(EnsembleConfig::default()));
            let zk = e
                .client(2)
                .timeout_ms(T_MS)
                .flavour(Flavour::Java)
                .connect()
                .await
                .unwrap();
            zk.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
            zk.create("/p", b"kept", CreateMode::Persistent)
                .await
                .unwrap();
            let injected = place(
                &e,
                planned(
                    Fault::MajorityCrash,
                    FaultParams {
                        window: Some(Duration::from_millis(2 * T_MS)),
                        servers: Some(vec![0, 1]),
                        ..FaultParams::default()
                    },
                ),
                T_MS,
            )
            .await;
            assert!(!injected.skipped, "{injected}");
            // Back, with its session (the new leader tracks it anew), its
            // ephemeral and the data.
            let limit = Duration::from_millis(3 * T_MS);
            let (data, _) = retried(limit, || zk.get_data("/p", false)).await;
            assert_eq!(data, b"kept");
            assert!(retried(limit, || zk.exists("/e", false)).await.is_some());
            sleep(Duration::from_millis(2 * T_MS)).await;
            assert!(e.fault_counts().sessions_survived_outage >= 1);
            assert!(retried(limit, || zk.exists("/e", false)).await.is_some());
            e.shutdown();
        })
    });
}

#[test]
fn the_whole_ensemble_restarts_from_its_logs() {
    common::sweep(BINARY, "ensemble_outage", 0x3_5000, 6, |seed| {
        runtime(seed).block_on(async {
            let e = Arc::new(Ensemble::start(EnsembleConfig::default()));
            let zk = e.client(1).timeout_ms(T_MS).connect().await.unwrap();
            for i in 0..5 {
                zk.create(&format!("/n{i}"), b"", CreateMode::Persistent)
                    .await
                    .unwrap();
            }
            let injected = place(
                &e,
                planned(
                    Fault::EnsembleCrash,
                    FaultParams {
                        window: Some(Duration::from_millis(1500)),
                        ..FaultParams::default()
                    },
                ),
                T_MS,
            )
            .await;
            assert!(!injected.skipped, "{injected}");
            // Every server was down and is back, electing from its log.
            let elected = Instant::now();
            while e.leader().is_none() {
                assert!(elected.elapsed() < Duration::from_secs(20), "no leader");
                sleep(Duration::from_millis(10)).await;
            }
            for i in 0..5 {
                let path = format!("/n{i}");
                let found = retried(Duration::from_secs(10), || zk.exists(&path, false)).await;
                assert!(found.is_some(), "/n{i} survived");
            }
            e.shutdown();
        })
    });
}

#[test]
fn a_new_leader_crashes_while_it_syncs_and_the_ensemble_recovers() {
    common::sweep(BINARY, "new_leader_crash", 0x3_6000, 6, |seed| {
        runtime(seed).block_on(async {
            let e = Arc::new(Ensemble::start(EnsembleConfig::default()));
            let zk = e.client(1).timeout_ms(8000).connect().await.unwrap();
            zk.create("/kept", b"", CreateMode::Persistent)
                .await
                .unwrap();
            sleep(Duration::from_millis(100)).await;
            let injected = place(
                &e,
                planned(
                    Fault::NewLeaderCrash,
                    FaultParams {
                        window: Some(Duration::from_millis(6000)),
                        ..FaultParams::default()
                    },
                ),
                8000,
            )
            .await;
            assert!(!injected.skipped, "{injected}");
            assert_eq!(injected.params.server, Some(0), "the leader went first");
            assert_eq!(
                e.fault_counts().syncing_leader_crashes,
                1,
                "the next leader crashed mid-sync"
            );
            let found = retried(Duration::from_secs(20), || zk.exists("/kept", false)).await;
            assert!(found.is_some());
            assert!(e.leader().is_some());
            e.shutdown();
        })
    });
}

#[test]
fn three_way_and_long_partitions_are_drawn_as_described() {
    common::sweep(BINARY, "drawn_partitions", 0x3_7000, 6, |seed| {
        runtime(seed).block_on(async {
            let e = Arc::new(Ensemble::start(EnsembleConfig {
                servers: 5,
                ..EnsembleConfig::default()
            }));
            let config = NemesisConfig {
                interval_ms: (500, 500),
                ..NemesisConfig::new(vec![Fault::ThreeWayPartition, Fault::LongPartition], T_MS)
            };
            let until = Instant::now() + Duration::from_millis(30_000);
            let log = nemesis::run_planned(e.clone(), one_client(), &config, &[], until).await;
            let (mut three, mut long) = (0, 0);
            for f in log.iter().filter(|f| !f.skipped) {
                match f.fault {
                    Fault::ThreeWayPartition => {
                        three += 1;
                        let sides = f.params.sides.as_ref().expect("its sides");
                        assert_eq!(sides.len(), 3, "{f}");
                        assert!(sides.iter().all(|s| !s.is_empty()), "{f}");
                        let mut all: Vec<u32> = sides.concat();
                        all.sort_unstable();
                        assert_eq!(all, vec![0, 1, 2, 3, 4], "{f}");
                        let on = f.params.side_clients.as_ref().expect("its clients");
                        assert_eq!(on.concat(), vec![0], "{f}");
                    }
                    Fault::LongPartition => {
                        long += 1;
                        let w = f.params.window_ms();
                        assert!((T_MS..=3 * T_MS).contains(&w), "{f}");
                    }
                    other => panic!("{other} was not in the pool"),
                }
            }
            assert!(three > 0 && long > 0, "both drawn: {three} and {long}");
            e.shutdown();
        })
    });
}

/// One client slot, empty: faults aimed at a client find no session.
fn one_client() -> ClientSlots {
    Arc::new(std::sync::Mutex::new(vec![ClientSlot::default()]))
}

/// Places `fault` at once (the fault phase lasting a second) and runs the
/// nemesis until every server is back; returns it as injected.
async fn place(e: &Arc<Ensemble>, fault: PlannedFault, t_ms: u64) -> InjectedFault {
    let config = NemesisConfig::new(Vec::new(), t_ms);
    let until = Instant::now() + Duration::from_millis(1000);
    let mut log = nemesis::run_planned(e.clone(), one_client(), &config, &[fault], until).await;
    assert_eq!(log.len(), 1, "one fault placed, none drawn");
    log.remove(0)
}

/// `fault` placed at the start with `params`, every other parameter drawn.
fn planned(fault: Fault, params: FaultParams) -> PlannedFault {
    PlannedFault {
        params,
        ..PlannedFault::new(Duration::ZERO, fault)
    }
}
