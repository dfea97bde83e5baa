//! Leader election and recovery on the simulated ensemble
//! (docs/ZOOKEEPER.md, "Sessions and expiry", "Crashes, partitions and lost
//! replies", "Zab: discovery, sync, broadcast"): a crashed leader is
//! replaced by the most up-to-date server in a newer epoch and no committed
//! write is lost;
//! an uncommitted write is either committed by the new leader or truncated
//! everywhere; an isolated follower serves stale reads until it notices,
//! then refuses clients; sessions get a fresh timeout from a new leader.
//! Many seeds each; a failure names its seed and the command that replays
//! it.

#[cfg(not(madsim))]
compile_error!(
    "tests/sim_elections.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::time::Duration;

mod common;

use madsim::runtime::Runtime;
use madsim::time::{sleep, Instant};
use zoosim::client::{Zk, ZkExt};
use zoosim::ensemble::msg::ServerId;
use zoosim::ensemble::sim::{Ensemble, EnsembleConfig, Flavour};
use zoosim::proto::{CreateMode, Op, ZkError};

const T_MS: u64 = 4000;

fn runtime(seed: u64) -> Runtime {
    Runtime::with_seed_and_config(seed, madsim::Config::default())
}

/// Waits (up to `limit`) for an established leader other than `not`.
async fn new_leader(ensemble: &Ensemble, not: ServerId, limit: Duration) -> ServerId {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(l) = ensemble.leader().filter(|&l| l != not) {
            return l;
        }
        assert!(Instant::now() < deadline, "no new leader within {limit:?}");
        sleep(Duration::from_millis(50)).await;
    }
}

/// Syncs, retrying while the client is between connections (an election
/// drops every connection; a Java client's request fails with the attempt
/// it waited for).
async fn sync_retrying(zk: &zoosim::ensemble::sim::SimZk) {
    for _ in 0..20 {
        match zk.sync("/").await {
            Ok(()) => return,
            Err(ZkError::ConnectionLoss) => sleep(Duration::from_millis(500)).await,
            Err(e) => panic!("sync: {e:?}"),
        }
    }
    panic!("no connection for 10 s");
}

/// Every live server's applied log is a prefix of the longest; after a
/// quiet spell they are all equal.
fn assert_replicas_agree(ensemble: &Ensemble) {
    let n = ensemble.config().servers;
    let logs: Vec<_> = (0..n)
        .map(|s| ensemble.with_server(s, |s| s.applied_log().to_vec()))
        .collect();
    for (s, log) in logs.iter().enumerate() {
        assert_eq!(
            log, &logs[0],
            "server {s}'s applied log differs from server 0's"
        );
    }
    for s in 0..n {
        ensemble.with_server(s, |s| s.tree().check_invariants().unwrap());
    }
}

#[test]
fn a_crashed_leader_is_replaced_and_no_committed_write_is_lost() {
    let took = common::sweep("sim_elections", "crashed_leader", 0xe1ec_0000, 50, |seed| {
        runtime(seed).block_on(async {
            let ensemble = Ensemble::start(EnsembleConfig::default());
            let a = ensemble
                .client(1)
                .timeout_ms(T_MS)
                .flavour(Flavour::Java)
                .connect()
                .await
                .unwrap();
            let b = ensemble
                .client(2)
                .timeout_ms(T_MS)
                .flavour(Flavour::Rust)
                .connect()
                .await
                .unwrap();
            a.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
            for i in 0..20 {
                let path = format!("/n{i}");
                b.create(&path, b"", CreateMode::Persistent).await.unwrap();
            }
            let epoch = ensemble.with_server(0, |s| s.current_epoch());
            ensemble.crash_server(0);
            let crashed = Instant::now();
            let leader = new_leader(&ensemble, 0, Duration::from_secs(10)).await;
            let elected = crashed.elapsed();
            assert!(ensemble.with_server(leader, |s| s.current_epoch()) > epoch);
            // Every client drops its connection and comes back, session intact.
            let write = a.create("/after", b"", CreateMode::Persistent).await;
            assert!(
                matches!(write, Ok(_) | Err(ZkError::ConnectionLoss)),
                "{write:?}"
            );
            sync_retrying(&a).await;
            for i in 0..20 {
                let path = format!("/n{i}");
                assert!(
                    a.exists(&path, false).await.unwrap().is_some(),
                    "{path} lost"
                );
            }
            assert!(
                a.exists("/e", false).await.unwrap().is_some(),
                "the ephemeral"
            );
            // The old leader comes back as a follower and catches up.
            ensemble.restart_server(0);
            b.create("/late", b"", CreateMode::Persistent)
                .await
                .unwrap();
            sleep(Duration::from_secs(8)).await;
            assert_eq!(ensemble.leader(), Some(leader));
            assert!(ensemble.with_server(0, |s| s.is_serving()));
            assert_replicas_agree(&ensemble);
            elected
        })
    });
    let mut took = took;
    took.sort();
    eprintln!(
        "crashed_leader: new leader after {:?} (min) .. {:?} (max)",
        took[0],
        took[took.len() - 1]
    );
}

#[test]
fn an_uncommitted_write_is_truncated_when_the_leader_is_cut_off() {
    let mut truncated = 0;
    common::sweep("sim_elections", "is_truncated", 0x7a0c_0000, 50, |seed| {
        runtime(seed).block_on(async {
            let ensemble = Ensemble::start(EnsembleConfig::default());
            let a = ensemble
                .client(0)
                .timeout_ms(T_MS)
                .no_failover()
                .connect()
                .await
                .unwrap();
            a.create("/before", b"", CreateMode::Persistent)
                .await
                .unwrap();
            ensemble.partition(&[&[0], &[1, 2]]);
            // Proposed by the cut-off leader, never acked by a quorum.
            let lost = a.create("/lost", b"", CreateMode::Persistent).await;
            assert_eq!(lost, Err(ZkError::ConnectionLoss));
            new_leader(&ensemble, 0, Duration::from_secs(15)).await;
            ensemble.heal();
            sleep(Duration::from_secs(8)).await;
            assert!(
                !ensemble.with_server(0, |s| s.is_leader()),
                "the old leader follows"
            );
            let stats = ensemble.with_server(0, |s| s.stats());
            assert!(stats.truncations >= 1, "{stats:?}");
            for s in 0..3 {
                ensemble.with_server(s, |s| {
                    assert!(s.tree().node("/before").is_some());
                    assert!(s.tree().node("/lost").is_none(), "truncated everywhere");
                });
            }
            assert_replicas_agree(&ensemble);
        })
    })
    .into_iter()
    .for_each(|()| truncated += 1);
    assert_eq!(truncated, common::seeds(0x7a0c_0000, 50).len());
}

#[test]
fn an_uncommitted_write_the_followers_logged_is_committed_by_the_new_leader() {
    common::sweep(
        "sim_elections",
        "committed_by_the_new_leader",
        0xc0ad_0000,
        50,
        |seed| {
            runtime(seed).block_on(async {
                let ensemble = Ensemble::start(EnsembleConfig::default());
                let a = ensemble
                    .client(0)
                    .timeout_ms(T_MS)
                    .no_failover()
                    .connect()
                    .await
                    .unwrap();
                let b = ensemble.client(1).timeout_ms(T_MS).connect().await.unwrap();
                // Acks cannot reach the leader: its proposal is logged by both
                // followers but never committed.
                ensemble.clog(1, 0);
                ensemble.clog(2, 0);
                let write = a.call(Op::Create {
                    path: "/logged".into(),
                    data: vec![],
                    mode: CreateMode::Persistent,
                });
                sleep(Duration::from_millis(300)).await;
                for s in 1..3 {
                    let logged = ensemble.with_server(s, |s| s.log().len() > s.applied_log().len());
                    assert!(logged, "server {s} logged the proposal");
                }
                ensemble.crash_server(0);
                ensemble.heal();
                assert_eq!(write.await, Err(ZkError::ConnectionLoss));
                new_leader(&ensemble, 0, Duration::from_secs(15)).await;
                sync_retrying(&b).await;
                assert!(
                    b.exists("/logged", false).await.unwrap().is_some(),
                    "committed by the new leader"
                );
                ensemble.restart_server(0);
                sleep(Duration::from_secs(8)).await;
                assert_replicas_agree(&ensemble);
            })
        },
    );
}

#[test]
fn an_isolated_follower_serves_stale_reads_until_it_notices_then_refuses_clients() {
    let noticed = common::sweep("sim_elections", "stale_reads", 0x57a1_0000, 50, |seed| {
        runtime(seed).block_on(async {
            let config = EnsembleConfig::default();
            let ensemble = Ensemble::start(config);
            let stale = ensemble
                .client(2)
                .timeout_ms(T_MS)
                .no_failover()
                .connect()
                .await
                .unwrap();
            let fresh = ensemble
                .client(0)
                .timeout_ms(T_MS)
                .no_failover()
                .connect()
                .await
                .unwrap();
            fresh
                .create("/x", b"1", CreateMode::Persistent)
                .await
                .unwrap();
            stale.sync("/").await.unwrap();
            ensemble.partition(&[&[2], &[0, 1]]);
            let cut = Instant::now();
            fresh.set_data("/x", b"2", -1).await.unwrap();
            // Still connected: the old value.
            let (data, _) = stale.get_data("/x", false).await.unwrap();
            assert_eq!(data, b"1", "a stale read from the minority");
            // It notices within syncLimit (plus a tick) and drops its
            // client; until then its reads are stale.
            let noticed = loop {
                if !ensemble.with_server(2, |s| s.is_serving()) {
                    break cut.elapsed();
                }
                match stale.get_data("/x", false).await {
                    Ok((data, _)) => assert_eq!(data, b"1"),
                    Err(e) => assert_eq!(e, ZkError::ConnectionLoss),
                }
                sleep(Duration::from_millis(50)).await;
            };
            let limit = config.tick_ms * (config.sync_limit_ticks + 2);
            assert!(
                noticed <= Duration::from_millis(limit),
                "noticed after {noticed:?}"
            );
            assert!(!ensemble.with_server(2, |s| s.is_serving()));
            // Outside a quorum it refuses new clients.
            let refused = ensemble
                .client(2)
                .timeout_ms(T_MS)
                .no_failover()
                .connect()
                .await;
            assert_eq!(refused.err(), Some(ZkError::ConnectionLoss));
            assert!(ensemble.with_server(2, |s| s.stats().not_serving_refusals) > 0);
            ensemble.heal();
            sleep(Duration::from_secs(6)).await;
            // (The stale client's session expired meanwhile: the minority
            // could not pass its pings on.)
            let again = ensemble
                .client(2)
                .timeout_ms(T_MS)
                .no_failover()
                .connect()
                .await
                .unwrap();
            let (data, _) = again.get_data("/x", false).await.unwrap();
            assert_eq!(data, b"2", "after the heal it catches up");
            noticed
        })
    });
    let max = noticed.iter().max().unwrap();
    eprintln!("stale_reads: the minority follower noticed within {max:?}");
}

#[test]
fn sessions_get_a_fresh_timeout_from_a_new_leader() {
    common::sweep("sim_elections", "fresh_timeout", 0xf5e5_0000, 50, |seed| {
        runtime(seed).block_on(async {
            let ensemble = Ensemble::start(EnsembleConfig::default());
            let zk = ensemble
                .client(1)
                .timeout_ms(T_MS)
                .no_failover()
                .connect()
                .await
                .unwrap();
            zk.create("/mine", b"", CreateMode::Ephemeral)
                .await
                .unwrap();
            let watcher = ensemble
                .client(2)
                .timeout_ms(T_MS)
                .no_failover()
                .connect()
                .await
                .unwrap();
            ensemble.crash_server(0);
            let crashed = Instant::now();
            new_leader(&ensemble, 0, Duration::from_secs(10)).await;
            // Silent for most of T after the new leader took over, which is
            // more than T after the last touch the old leader had.
            ensemble.pause_client(&zk, Duration::from_millis(T_MS * 3 / 4));
            sleep(Duration::from_millis(T_MS * 3 / 4 + 2000)).await;
            assert!(crashed.elapsed() > Duration::from_millis(T_MS));
            watcher.sync("/").await.unwrap();
            assert!(
                watcher.exists("/mine", false).await.unwrap().is_some(),
                "the session outlived its old expiry time"
            );
            assert!(zk.exists("/mine", false).await.unwrap().is_some());
        })
    });
}
