//! The deliberately broken ensembles (`zoosim::ensemble::breakage`): each
//! switch takes effect, shown two ways.
//!
//! * Directly: a few clients driven by hand into the situation the switch
//!   breaks, and what they see compared with what the correct ensemble
//!   shows them in the same steps (an acknowledged write in no server's
//!   order, a session's read older than what it saw, an acknowledged write
//!   truncated away, a watch event after a read showing its change, a
//!   read after a sync missing a write completed before it, two watch
//!   events in the wrong order).
//! * Through the scenario files in `tests/data/broken/` (outside
//!   `scenarios/`, so the sweep of the correct ensemble never runs them;
//!   each breakage has one at its gross default rate, `<name>.toml`, and
//!   one at a subtle rate, `<name>-subtle.toml`): every seed of each
//!   file's `test_seeds` hits its breakage (a subtle file's, together:
//!   at a subtle rate a seed may never meet it)
//!   (`breakage-hits` above zero; `ZOOSIM_SEEDS=N` runs N seeds of each
//!   instead), and the same seeds with the switch off never do.

#[cfg(not(madsim))]
compile_error!(
    "tests/sim_broken.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::path::PathBuf;

mod common;

use zoosim::ensemble::breakage::Breakage;
use zoosim::scenario::files::{load, scenario_files};
use zoosim::scenario::runner::run_one;
use zoosim::scenario::spec::Scenario;

const DIR: &str = "tests/data/broken";

fn broken_scenarios() -> Vec<Scenario> {
    scenario_files(&[PathBuf::from(DIR)])
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .map(|f| load(f).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

fn hits(s: &Scenario, seed: u64) -> (u64, String) {
    let o = run_one(s, seed).unwrap_or_else(|e| panic!("{}: seed {seed}: {}", s.name, e.detail));
    let hits = o.counters.get("breakage-hits").copied().unwrap_or(0);
    let failure = o.failure().unwrap_or_else(|| "passed".into());
    (hits, format!("{} ops; {failure}", o.ops))
}

/// Two files per breakage, at its default rate and at a subtle one, each
/// hitting it in every one of its test seeds.
#[test]
fn every_broken_scenario_hits_its_breakage_in_every_seed() {
    let started = std::time::Instant::now();
    let all = broken_scenarios();
    for b in Breakage::ALL {
        let files = |default_rate: bool| -> Vec<&str> {
            all.iter()
                .filter(|s| {
                    s.ensemble
                        .broken
                        .is_some_and(|r| r.kind == b && r.is_default_rate() == default_rate)
                })
                .map(|s| s.name.as_str())
                .collect()
        };
        assert_eq!(
            files(true),
            vec![b.name()],
            "{b}: one file at its default rate"
        );
        let subtle = format!("{b}-subtle");
        assert_eq!(
            files(false),
            vec![subtle.as_str()],
            "{b}: one at a subtle rate"
        );
    }
    assert_eq!(all.len(), 2 * Breakage::ALL.len());
    for s in &all {
        assert!(s.expect_failure, "{}: a broken ensemble must fail", s.name);
        let broken = s.ensemble.broken.expect("broken");
        let mut hit = Vec::new();
        for seed in common::seeds(s.seed_start, s.test_seeds) {
            let (n, what) = hits(s, seed);
            eprintln!("{:<34} seed {seed}: {n:>5} hits; {what}", s.name);
            hit.push((seed, n));
        }
        let missed: Vec<u64> = hit.iter().filter(|h| h.1 == 0).map(|h| h.0).collect();
        let replay = |seed: u64| format!("replay: cargo run -- replay {} --seed {seed}", s.file);
        if broken.is_default_rate() {
            // Gross: every seed meets it.
            if let Some(&seed) = missed.first() {
                panic!(
                    "{}: seed {seed} never hit {broken}\n{}",
                    s.name,
                    replay(seed)
                );
            }
        } else {
            // Subtle: a seed may never meet it (docs/CONTRACT.md, "Subtle
            // breakage"), the test seeds together must.
            assert!(
                missed.len() < hit.len(),
                "{}: none of seeds {:?} hit {broken}\n{}",
                s.name,
                missed,
                replay(s.seed_start)
            );
        }
    }
    eprintln!("broken scenarios: {:.1} s", started.elapsed().as_secs_f64());
}

/// The same seeds with the switch off: nothing is ever hit.
#[test]
fn with_the_switch_off_nothing_is_hit() {
    for mut s in broken_scenarios() {
        s.ensemble.broken = None;
        let (n, _) = hits(&s, s.seed_start);
        assert_eq!(n, 0, "{}: hits without a breakage", s.name);
    }
}

// ---------------------------------------------------------------------------
// Directly: each switch's situation driven by hand, the broken ensemble
// against the correct one.

mod direct {
    use std::time::Duration;

    use madsim::runtime::Runtime;
    use madsim::time::{sleep, timeout};
    use zoosim::client::{Zk, ZkExt};
    use zoosim::ensemble::breakage::Breakage;
    use zoosim::ensemble::sim::{Ensemble, EnsembleConfig, SimZk};
    use zoosim::proto::{ClientEvent, CreateMode, EventType, SessionEvent, WatchEvent, ZkError};
    use zoosim::tree::{TxnBody, TxnOp};

    const SEEDS: std::ops::Range<u64> = 0xb40c_9000..0xb40c_9003;

    /// Runs `f` on a fresh ensemble, with `broken`, for a few seeds.
    fn each_seed<T: std::fmt::Debug + PartialEq>(
        broken: Option<Breakage>,
        f: impl AsyncFn(&Ensemble) -> T,
    ) -> T {
        let mut seen = None;
        for seed in SEEDS {
            let out =
                Runtime::with_seed_and_config(seed, madsim::Config::default()).block_on(async {
                    let e = Ensemble::start(EnsembleConfig {
                        broken: broken.map(Into::into),
                        ..EnsembleConfig::default()
                    });
                    let out = f(&e).await;
                    e.shutdown();
                    out
                });
            // Every seed tells the same story.
            if let Some(first) = &seen {
                assert_eq!(&out, first, "seed {seed} differs ({broken:?})");
            }
            seen = Some(out);
        }
        seen.expect("a seed")
    }

    fn hits(e: &Ensemble) -> u64 {
        (0..e.config().servers)
            .map(|s| e.with_server(s, |s| s.stats().breakage_hits))
            .sum()
    }

    fn created(e: &Ensemble, path: &str) -> bool {
        e.history()
            .iter()
            .any(|t| matches!(&t.body, TxnBody::Op(TxnOp::Create { path: p, .. }) if p == path))
    }

    fn on_some_replica(e: &Ensemble, path: &str) -> bool {
        (0..e.config().servers).any(|s| e.with_server(s, |s| s.tree().node(path).is_some()))
    }

    fn events(zk: &SimZk) -> Vec<ClientEvent> {
        std::iter::from_fn(|| zk.try_next_event())
            .filter(|e| matches!(e, ClientEvent::Watch(_)))
            .collect()
    }

    /// follower-local-write: the third write through a follower is
    /// acknowledged, yet in no server's order: another client creates the
    /// same node after it.
    #[test]
    fn a_write_a_follower_answered_itself_is_in_no_order() {
        let run = |broken| {
            each_seed(broken, async |e: &Ensemble| {
                let a = e.client(1).no_failover().connect().await.unwrap();
                let b = e.client(0).no_failover().connect().await.unwrap();
                for p in ["/w1", "/w2", "/w3"] {
                    a.create(p, b"a", CreateMode::Persistent).await.unwrap();
                }
                b.sync("/").await.unwrap();
                let seen_by_b = b.exists("/w3", false).await.unwrap().is_some();
                let b_creates = b.create("/w3", b"b", CreateMode::Persistent).await;
                (created(e, "/w2"), seen_by_b, b_creates.map(|_| ()), hits(e))
            })
        };
        assert_eq!(run(None), (true, true, Err(ZkError::NodeExists), 0));
        assert_eq!(
            run(Some(Breakage::FollowerLocalWrite)),
            (true, false, Ok(()), 1),
            "a's acknowledged create of /w3 is in no order: b sees none and creates it"
        );
    }

    /// skip-reconnect-zxid-rule: a session that saw /x created moves to a
    /// follower that has not applied it yet (its link from the leader is
    /// slow); taken at once, it reads that /x does not exist.
    #[test]
    fn a_session_taken_by_a_lagging_follower_sees_the_tree_go_backwards() {
        let run = |broken| {
            each_seed(broken, async |e: &Ensemble| {
                // The leader first, then follower 1.
                let a = e.client_list(&[0, 1]).connect().await.unwrap();
                sleep(Duration::from_millis(100)).await;
                e.delay(0, 1, Duration::from_secs(2));
                a.create("/x", b"", CreateMode::Persistent).await.unwrap();
                a.break_connection();
                let server = loop {
                    if let Some(s) = a.current_server() {
                        break s;
                    }
                    sleep(Duration::from_millis(1)).await;
                };
                let x = a.exists("/x", false).await.unwrap().is_some();
                (server, x, hits(e) > 0)
            })
        };
        // The follower refuses it; back on the leader, /x is there.
        assert_eq!(run(None), (0, true, false));
        assert_eq!(
            run(Some(Breakage::SkipReconnectZxidRule)),
            (1, false, true),
            "taken by the lagging follower, the session no longer sees its own /x"
        );
    }

    /// reply-before-quorum: the leader, cut off from its followers,
    /// acknowledges a create it can never commit; the next leader never
    /// had it, and the old one's copy is truncated when it rejoins.
    #[test]
    fn an_acknowledged_write_is_truncated_away() {
        let run = |broken| {
            each_seed(broken, async |e: &Ensemble| {
                let a = e.client(0).no_failover().connect().await.unwrap();
                sleep(Duration::from_millis(100)).await;
                e.partition(&[&[0], &[1, 2]]);
                let acked = timeout(
                    Duration::from_secs(1),
                    a.create("/lost", b"", CreateMode::Persistent),
                )
                .await
                .is_ok_and(|r| r.is_ok());
                // A new leader on the majority side; then server 0 rejoins
                // and syncs with it.
                sleep(Duration::from_secs(8)).await;
                e.heal();
                sleep(Duration::from_secs(8)).await;
                let leader = e.leader().is_some_and(|l| l != 0);
                let synced = e.with_server(0, |s| s.is_serving());
                let truncated = e.with_server(0, |s| s.stats().truncations > 0);
                (
                    acked,
                    leader && synced,
                    truncated,
                    created(e, "/lost") || on_some_replica(e, "/lost"),
                    hits(e),
                )
            })
        };
        assert_eq!(run(None), (false, true, true, false, 0));
        assert_eq!(
            run(Some(Breakage::ReplyBeforeQuorum)),
            (true, true, true, false, 1),
            "the create of /lost was acknowledged and is on no replica"
        );
    }

    /// stale-read: a session creates /s and reads it twice without a
    /// watch; the second read comes from a copy of the tree from before
    /// the create.
    #[test]
    fn a_session_reads_a_state_older_than_its_own_write() {
        let run = |broken| {
            each_seed(broken, async |e: &Ensemble| {
                let a = e.client(0).no_failover().connect().await.unwrap();
                a.create("/s", b"", CreateMode::Persistent).await.unwrap();
                let first = a.exists("/s", false).await.unwrap().is_some();
                let second = a.exists("/s", false).await.unwrap().is_some();
                (first, second, hits(e))
            })
        };
        assert_eq!(run(None), (true, true, 0));
        assert_eq!(
            run(Some(Breakage::StaleRead)),
            (true, false, 1),
            "the second read no longer shows the session's own create"
        );
    }

    /// late-watch-event: a watched node changes; its watcher hears of it
    /// only after a read that already shows the new data.
    #[test]
    fn a_read_shows_new_data_before_its_watch_event() {
        let run = |broken| {
            each_seed(broken, async |e: &Ensemble| {
                let a = e.client(0).no_failover().connect().await.unwrap();
                let b = e.client(1).no_failover().connect().await.unwrap();
                a.create("/w", b"0", CreateMode::Persistent).await.unwrap();
                a.get_data("/w", true).await.unwrap();
                b.set_data("/w", b"1", -1).await.unwrap();
                sleep(Duration::from_millis(20)).await;
                let before = events(&a).len();
                let (data, _) = a.get_data("/w", false).await.unwrap();
                sleep(Duration::from_millis(5)).await;
                let after = events(&a);
                (before, data, after, hits(e))
            })
        };
        let changed = vec![ClientEvent::Watch(WatchEvent {
            event_type: EventType::NodeDataChanged,
            path: "/w".into(),
        })];
        assert_eq!(run(None), (1, b"1".to_vec(), vec![], 0));
        assert_eq!(
            run(Some(Breakage::LateWatchEvent)),
            (0, b"1".to_vec(), changed, 1),
            "the read showed data 1 before the event of its change"
        );
    }

    /// sync-without-flush: a session on a follower whose link from the
    /// leader is slow syncs after another session's create completed, and
    /// reads: answered without the leader's flush, the read misses it.
    #[test]
    fn a_read_after_sync_misses_a_write_completed_before_it() {
        let run = |broken| {
            each_seed(broken, async |e: &Ensemble| {
                let a = e.client(0).no_failover().connect().await.unwrap();
                let b = e.client(1).no_failover().connect().await.unwrap();
                sleep(Duration::from_millis(100)).await;
                e.delay(0, 1, Duration::from_secs(1));
                a.create("/x", b"", CreateMode::Persistent).await.unwrap();
                b.sync("/").await.unwrap();
                let seen = b.exists("/x", false).await.unwrap().is_some();
                (seen, hits(e))
            })
        };
        assert_eq!(run(None), (true, 0));
        assert_eq!(
            run(Some(Breakage::SyncWithoutFlush)),
            (false, 1),
            "the read after the sync misses /x, created before the sync was called"
        );
    }

    /// event-reordered: a session watches two nodes; another changes both,
    /// one after the other; the watcher hears of the second change first.
    #[test]
    fn two_watch_events_arrive_in_the_wrong_order() {
        let run = |broken| {
            each_seed(broken, async |e: &Ensemble| {
                let a = e.client(0).no_failover().connect().await.unwrap();
                let b = e.client(1).no_failover().connect().await.unwrap();
                for p in ["/e1", "/e2"] {
                    a.create(p, b"0", CreateMode::Persistent).await.unwrap();
                    a.get_data(p, true).await.unwrap();
                }
                let (r1, r2) =
                    futures::join!(b.set_data("/e1", b"1", -1), b.set_data("/e2", b"1", -1));
                r1.unwrap();
                r2.unwrap();
                sleep(Duration::from_millis(20)).await;
                let got: Vec<String> = events(&a)
                    .into_iter()
                    .map(|e| match e {
                        ClientEvent::Watch(w) => w.path,
                        other => format!("{other:?}"),
                    })
                    .collect();
                (got, hits(e))
            })
        };
        assert_eq!(run(None), (vec!["/e1".to_owned(), "/e2".to_owned()], 0));
        assert_eq!(
            run(Some(Breakage::EventReordered)),
            (vec!["/e2".to_owned(), "/e1".to_owned()], 1),
            "the change of /e2, the later txn, is announced first"
        );
    }

    /// expired-ephemerals-linger: a session is expired; its client,
    /// re-attaching after its connection broke, is told so, yet its
    /// ephemeral node stays on every replica.
    #[test]
    fn an_expired_sessions_ephemeral_node_stays() {
        let run = |broken| {
            each_seed(broken, async |e: &Ensemble| {
                let a = e.client(1).no_failover().connect().await.unwrap();
                a.create("/eph", b"", CreateMode::Ephemeral).await.unwrap();
                assert!(e.expire_session(a.session_id()), "a live session");
                sleep(Duration::from_millis(500)).await;
                a.break_connection();
                sleep(Duration::from_secs(2)).await;
                let told = std::iter::from_fn(|| a.try_next_event())
                    .any(|ev| ev == ClientEvent::Session(SessionEvent::Expired));
                (told, on_some_replica(e, "/eph"), hits(e))
            })
        };
        assert_eq!(run(None), (true, false, 0));
        assert_eq!(
            run(Some(Breakage::ExpiredEphemeralsLinger)),
            (true, true, 1),
            "the client is told it expired, and its node stays"
        );
    }

    /// frozen-follower-serves-reads: follower 1 freezes after its 20th
    /// tick (10 s at the default tickTime of 500 ms) for 50 ticks; a
    /// session on it, still connected, reads that /x does not exist 7 s
    /// after another session's create of /x completed, longer than the
    /// timeliness bound (the 4 s session timeout plus syncLimit's 5 ticks,
    /// 6.5 s); once the freeze is over it sees /x.
    #[test]
    fn a_read_on_a_frozen_follower_misses_a_write_completed_long_before() {
        let run = |broken| {
            each_seed(broken, async |e: &Ensemble| {
                let a = e.client(0).no_failover().connect().await.unwrap();
                let b = e.client(1).no_failover().connect().await.unwrap();
                a.create("/before", b"", CreateMode::Persistent)
                    .await
                    .unwrap();
                sleep(Duration::from_secs(11)).await;
                a.create("/x", b"", CreateMode::Persistent).await.unwrap();
                sleep(Duration::from_secs(7)).await;
                let before = b.exists("/before", false).await.unwrap().is_some();
                let x = b.exists("/x", false).await.unwrap().is_some();
                sleep(Duration::from_secs(18)).await;
                let x_later = b.exists("/x", false).await.unwrap().is_some();
                (before, x, x_later, b.current_server(), hits(e))
            })
        };
        assert_eq!(run(None), (true, true, true, Some(1), 0));
        assert_eq!(
            run(Some(Breakage::FrozenFollowerServesReads)),
            (true, false, true, Some(1), 2),
            "the session on the frozen follower misses /x, created 7 s before its read"
        );
    }
}
