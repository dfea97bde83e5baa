//! The simulated ensemble with a fixed leader and no faults yet: random
//! pipelined workloads over many seeds; replicas must converge to the same
//! applied log and tree, every client's replies come in issue order (the
//! client asserts it) with zxids that never go back, and a seed replays to
//! the same event-log hash on any thread.
//!
//! `ZOOSIM_SEED=S` runs one seed; `ZOOSIM_SEEDS=N` widens the sweep.

#[cfg(not(madsim))]
compile_error!(
    "tests/sim_ensemble.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Instant;

mod common;

/// Runs a seed; a failure names it with its replay command.
fn checked(seed: u64) -> Outcome {
    common::replaying("sim_ensemble", "", seed, || run_seed(seed))
}

use futures::future::join_all;
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Runtime;
use zoosim::client::{Zk, ZkExt};
use zoosim::ensemble::sim::{Ensemble, EnsembleConfig};
use zoosim::proto::{ClientEvent, CreateMode, Op, Reply, ZkError};

const START_SEED: u64 = 0x5eed_0000;

type Log = Arc<Mutex<Vec<String>>>;

fn random_op() -> Op {
    let mut rng = thread_rng();
    let paths = ["/a", "/b", "/a/x", "/a/y", "/e"];
    let path = paths[rng.gen_range(0..paths.len())].to_owned();
    let version = [-1, -1, 0, 1][rng.gen_range(0..4)];
    match rng.gen_range(0..9) {
        0 => Op::Create {
            path,
            data: b"d".to_vec(),
            mode: CreateMode::Persistent,
        },
        1 => Op::Create {
            path: format!("{path}-"),
            data: vec![],
            mode: CreateMode::PersistentSequential,
        },
        2 => Op::Create {
            path,
            data: vec![],
            mode: CreateMode::Ephemeral,
        },
        3 => Op::Delete { path, version },
        4 => Op::SetData {
            path,
            data: b"v".to_vec(),
            version,
        },
        5 => Op::GetData { path, watch: true },
        6 => Op::Exists { path, watch: true },
        7 => Op::GetChildren {
            path: "/a".into(),
            watch: true,
        },
        _ => Op::Sync { path },
    }
}

fn summary(r: &Result<Reply, ZkError>) -> String {
    match r {
        Ok(Reply::Create { path, .. }) => format!("created {path}"),
        Ok(Reply::Exists(s)) => format!("exists {}", s.is_some()),
        Ok(Reply::GetData { stat, .. }) => format!("data v{}", stat.version),
        Ok(Reply::GetChildren { children, .. }) => format!("{} children", children.len()),
        Ok(Reply::SetData(stat)) => format!("set v{}", stat.version),
        Ok(other) => format!("{other:?}"),
        Err(e) => format!("{e:?}"),
    }
}

/// What one seed did: its event-log hash and counts of what happened.
#[derive(Default, Clone, Copy, PartialEq, Debug)]
struct Outcome {
    hash: u64,
    ops_ok: u64,
    ops_failed: u64,
    watch_events: u64,
    txns: u64,
}

impl Outcome {
    fn add(&mut self, o: &Outcome) {
        self.ops_ok += o.ops_ok;
        self.ops_failed += o.ops_failed;
        self.watch_events += o.watch_events;
        self.txns += o.txns;
    }
}

/// One seed.
fn run_seed(seed: u64) -> Outcome {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    runtime.block_on(async {
        let log: Log = Arc::default();
        let ensemble = Arc::new(Ensemble::start(EnsembleConfig::default()));
        let clients = 3;
        let mut tasks = Vec::new();
        for c in 0..clients {
            let ensemble = ensemble.clone();
            let log = log.clone();
            tasks.push(madsim::task::spawn(async move {
                let zk = ensemble
                    .client(c % ensemble.config().servers)
                    .timeout_ms(10_000)
                    .connect()
                    .await
                    .expect("connect");
                let mut last_zxid = 0;
                let mut counts = Outcome::default();
                for round in 0..6 {
                    // A pipelined batch: issued at once, answered in order.
                    let ops: Vec<Op> = (0..thread_rng().gen_range(1..6))
                        .map(|_| random_op())
                        .collect();
                    let replies = join_all(ops.iter().map(|op| zk.call(op.clone()))).await;
                    for (op, r) in ops.iter().zip(&replies) {
                        match r {
                            Ok(_) => counts.ops_ok += 1,
                            Err(_) => counts.ops_failed += 1,
                        }
                        log.lock().unwrap().push(format!(
                            "c{c} r{round} {} -> {}",
                            op.name(),
                            summary(r)
                        ));
                    }
                    assert!(zk.last_zxid() >= last_zxid, "a client's zxid went back");
                    last_zxid = zk.last_zxid();
                    while let Some(e) = zk.try_next_event() {
                        if let ClientEvent::Watch(_) = e {
                            counts.watch_events += 1;
                        }
                        log.lock().unwrap().push(format!("c{c} event {e:?}"));
                    }
                }
                if c == 0 {
                    zk.close().await.expect("close");
                    assert_eq!(zk.exists("/", false).await, Err(ZkError::SessionExpired));
                    return (counts, Some(zk.session_id()));
                }
                (counts, None)
            }));
        }
        let mut closed = Vec::new();
        let mut outcome = Outcome::default();
        for t in tasks {
            let (counts, session) = t.await.expect("client task");
            outcome.add(&counts);
            closed.extend(session);
        }
        // Quiet: let the last commits reach every server.
        madsim::time::sleep(std::time::Duration::from_secs(1)).await;
        let logs: Vec<Vec<i64>> = (0..3)
            .map(|s| ensemble.with_server(s, |s| s.applied_zxids().collect()))
            .collect();
        assert!(
            logs.iter().all(|l| l == &logs[0]),
            "replicas' applied logs differ"
        );
        let tree = ensemble.with_server(0, |s| s.tree().clone());
        tree.check_invariants().expect("tree invariants");
        for s in 1..3 {
            assert!(
                ensemble.with_server(s, |s| s.tree() == &tree),
                "replica {s} differs"
            );
        }
        for session in closed {
            assert!(!tree.has_session(session), "the closed session is gone");
            assert!(
                tree.ephemerals(session).next().is_none(),
                "the closed session's ephemerals are gone"
            );
        }
        let mut h = DefaultHasher::new();
        log.lock().unwrap().hash(&mut h);
        logs[0].hash(&mut h);
        outcome.hash = h.finish();
        outcome.txns = logs[0].len() as u64;
        outcome
    })
}

#[test]
fn fixed_leader_broadcast_over_seeds() {
    let started = Instant::now();
    let seeds = common::seeds(START_SEED, 100);
    let mut total = Outcome::default();
    for &seed in &seeds {
        total.add(&checked(seed));
    }
    eprintln!(
        "sim_ensemble: {} seeds in {:.1} s: {} ops succeeded, {} failed, {} watch events, {} txns applied",
        seeds.len(),
        started.elapsed().as_secs_f64(),
        total.ops_ok,
        total.ops_failed,
        total.watch_events,
        total.txns
    );
    // A green run must mean something happened.
    assert!(total.ops_ok > 0 && total.ops_failed > 0, "{total:?}");
    assert!(total.watch_events > 0 && total.txns > 0, "{total:?}");
}

#[test]
fn a_seed_replays_to_the_same_hash_on_any_thread() {
    let seeds: Vec<u64> = (START_SEED..START_SEED + 50).collect();
    let hash = |s: u64| checked(s).hash;
    let first: Vec<u64> = seeds.iter().map(|&s| hash(s)).collect();
    // Reused thread, second time.
    let again: Vec<u64> = seeds.iter().map(|&s| hash(s)).collect();
    assert_eq!(first, again, "same thread, second run");
    // Fresh threads, and two in parallel.
    let halves: Vec<Vec<u64>> = seeds
        .chunks(25)
        .map(|chunk| chunk.to_vec())
        .map(|chunk| std::thread::spawn(move || chunk.iter().map(|&s| checked(s).hash).collect()))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().expect("thread"))
        .collect();
    assert_eq!(halves.concat(), first, "fresh, parallel threads");
    let distinct: std::collections::BTreeSet<_> = first.iter().collect();
    assert!(distinct.len() > 40, "different seeds give different runs");
}

/// A fingerprint of the sources the simulation is built from, so hash
/// files of another version are not compared.
fn source_fingerprint() -> u64 {
    fn walk(dir: &std::path::Path, files: &mut Vec<std::path::PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, files);
            } else {
                files.push(p);
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("Cargo.lock"), root.join(file!())];
    walk(&root.join("src"), &mut files);
    // The workspace's other crates (crates/zoosim-*) are compiled in too.
    walk(&root.join("crates"), &mut files);
    let mut h = DefaultHasher::new();
    for f in files {
        std::fs::read(&f).unwrap_or_default().hash(&mut h);
    }
    h.finish()
}

/// Debug and release builds of one version must give the same hashes. Each
/// profile writes the first 20 seeds' hashes under target/; when the other
/// profile's file is there for the same sources (run both: `cargo test
/// --test sim_ensemble` and `cargo test --release --test sim_ensemble`),
/// they must agree.
#[test]
fn hashes_agree_between_debug_and_release() {
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let other = if cfg!(debug_assertions) {
        "release"
    } else {
        "debug"
    };
    let mut lines = vec![format!("sources {:016x}", source_fingerprint())];
    lines.extend((START_SEED..START_SEED + 20).map(|s| format!("{s} {:016x}", checked(s).hash)));
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let mine = dir.join(format!("zoosim-sim-hashes-{profile}.txt"));
    let theirs = dir.join(format!("zoosim-sim-hashes-{other}.txt"));
    std::fs::create_dir_all(&dir).expect("target/ is writable");
    std::fs::write(&mine, lines.join("\n")).expect("write the hash file");
    let text = std::fs::read_to_string(&theirs).unwrap_or_default();
    let theirs_lines: Vec<&str> = text.lines().collect();
    if theirs_lines.first() == Some(&lines[0].as_str()) {
        assert_eq!(
            theirs_lines,
            lines.iter().map(String::as_str).collect::<Vec<_>>(),
            "{profile} and {other} builds of the same sources disagree ({} vs {})",
            mine.display(),
            theirs.display()
        );
        eprintln!("20 seed hashes agree between the {profile} and {other} builds");
    } else {
        eprintln!(
            "hashes written to {}; run the {other} build of these sources to compare",
            mine.display()
        );
    }
}
