//! Raw randomized workloads under the part-1 faults, swarm-mixed (each seed
//! draws which fault kinds are on): follower crash and restart, client
//! crash, forced expiry (with a closing window), broken connection, lost
//! write reply, client pause (shorter and longer than the session timeout).
//!
//! Checked on every seed: replicas' applied logs are prefixes of one
//! another (equal after the quiet phase); tree invariants (no ephemeral of a
//! dead session); each live session owns exactly the ephemerals its client
//! knows of (up to writes whose outcome it never learned); expired and
//! crashed clients' sessions are gone; clients assert their own FIFO and
//! monotone zxids. Coverage: every fault kind and the client outcomes they
//! cause must happen across the sweep.
//!
//! `ZOOSIM_SEED=S` replays one seed; `ZOOSIM_SEEDS=N` widens the sweep.

#[cfg(not(madsim))]
compile_error!(
    "tests/sim_faults.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use madsim::rand::{thread_rng, Rng};
use madsim::runtime::{Handle, Runtime};
use madsim::time::{sleep, timeout, Instant};
use zoosim::client::Zk;
use zoosim::ensemble::sim::{Ensemble, EnsembleConfig, Flavour, SimZk};
use zoosim::proto::{ClientEvent, CreateMode, Op, SessionEvent, ZkError};
use zoosim::tree::TxnBody;

const START_SEED: u64 = 0xfa17_0000;
const T_MS: u64 = 4000;
const CLIENTS: usize = 4;
const FAULT_PHASE: Duration = Duration::from_secs(20);

const KINDS: [&str; 7] = [
    "follower crash+restart",
    "client crash",
    "forced expiry",
    "broken connection",
    "lost write reply",
    "short client pause",
    "long client pause",
];

/// What a client knows of its own session.
#[derive(Default)]
struct Record {
    /// Ephemerals it created and did not delete, as acknowledged.
    ephemerals: BTreeSet<String>,
    /// Paths of writes that ended in ConnectionLoss: outcome unknown.
    unknown: BTreeSet<String>,
    expired: bool,
    crashed: bool,
    connection_losses: u64,
    reconnects: u64,
    ops_ok: u64,
}

#[derive(Default, Debug)]
struct Tally {
    faults: BTreeMap<&'static str, u64>,
    counts: BTreeMap<&'static str, u64>,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        for (k, v) in &other.faults {
            *self.faults.entry(k).or_default() += v;
        }
        for (k, v) in &other.counts {
            *self.counts.entry(k).or_default() += v;
        }
    }
}

async fn workload(c: usize, zk: Arc<SimZk>, record: Arc<Mutex<Record>>, until: Instant) {
    let mut k = 0;
    while Instant::now() < until {
        k += 1;
        let mine = format!("/c{c}-e{}", k % 4);
        let shared = ["/a", "/b", "/a/x"][thread_rng().gen_range(0..3)].to_owned();
        let op = match thread_rng().gen_range(0..8) {
            0 | 1 => Op::Create {
                path: mine.clone(),
                data: vec![],
                mode: CreateMode::Ephemeral,
            },
            2 => Op::Delete {
                path: mine.clone(),
                version: -1,
            },
            3 => Op::Create {
                path: shared.clone(),
                data: vec![],
                mode: CreateMode::Persistent,
            },
            4 => Op::SetData {
                path: shared.clone(),
                data: b"v".to_vec(),
                version: -1,
            },
            5 => Op::Exists {
                path: shared.clone(),
                watch: true,
            },
            6 => Op::GetChildren {
                path: "/".into(),
                watch: true,
            },
            _ => Op::Sync { path: "/".into() },
        };
        let result = match timeout(Duration::from_millis(3 * T_MS), zk.call(op.clone())).await {
            Ok(r) => r,
            Err(_) => panic!("client {c}: {} hung for 3T", op.name()),
        };
        let stop = {
            let mut rec = record.lock().unwrap();
            match (&op, &result) {
                (Op::Create { path, mode, .. }, Ok(_)) if mode.is_ephemeral() => {
                    rec.ephemerals.insert(path.clone());
                    rec.unknown.remove(path);
                }
                (Op::Delete { path, .. }, Ok(_) | Err(ZkError::NoNode)) => {
                    // Definitely gone now.
                    rec.ephemerals.remove(path);
                    rec.unknown.remove(path);
                }
                (op, Err(ZkError::ConnectionLoss)) if op.is_write() => {
                    rec.connection_losses += 1;
                    if let Op::Create { path, .. } | Op::Delete { path, .. } = op {
                        rec.unknown.insert(path.clone());
                    }
                }
                (_, Err(ZkError::ConnectionLoss)) => rec.connection_losses += 1,
                (_, Err(ZkError::SessionExpired)) => rec.expired = true,
                _ => {}
            }
            if result.is_ok() {
                rec.ops_ok += 1;
            }
            while let Some(e) = zk.try_next_event() {
                match e {
                    ClientEvent::Session(SessionEvent::Connected) => rec.reconnects += 1,
                    ClientEvent::Session(SessionEvent::Expired) => rec.expired = true,
                    _ => {}
                }
            }
            rec.expired
        };
        if stop {
            return;
        }
        sleep(Duration::from_millis(thread_rng().gen_range(0..200))).await;
    }
}

fn run_seed(seed: u64) -> Tally {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    runtime.block_on(async {
        let mut tally = Tally::default();
        // Odd seeds run five servers.
        let servers = if seed % 2 == 1 { 5 } else { 3 };
        let ensemble = Arc::new(Ensemble::start(EnsembleConfig {
            servers,
            ..EnsembleConfig::default()
        }));
        // Swarm testing: this seed's fault mix.
        let mut on: Vec<&'static str> = KINDS
            .iter()
            .copied()
            .filter(|_| thread_rng().gen_bool(0.5))
            .collect();
        if on.is_empty() {
            on.push(KINDS[thread_rng().gen_range(0..KINDS.len())]);
        }
        let mut clients = Vec::new();
        let mut records = Vec::new();
        let until = Instant::now() + FAULT_PHASE;
        let mut tasks = Vec::new();
        for c in 0..CLIENTS {
            let flavour = if c % 2 == 0 {
                Flavour::Java
            } else {
                Flavour::Rust
            };
            let zk = Arc::new(
                ensemble
                    .connect_with(thread_rng().gen_range(0..servers), T_MS, flavour)
                    .await
                    .expect("connect"),
            );
            let _ = zk.try_next_event(); // the first Connected
            let record = Arc::new(Mutex::new(Record::default()));
            // On the client's own node: its crashes and pauses stop it too.
            let node = Handle::current().get_node(zk.node()).expect("client node");
            tasks.push(node.spawn(workload(c, zk.clone(), record.clone(), until)));
            clients.push(zk);
            records.push(record);
        }
        // The nemesis.
        // Followers down now; each restart timer takes its own out.
        let down: Arc<Mutex<BTreeSet<u32>>> = Arc::default();
        let mut client_crashed = false;
        while Instant::now() + Duration::from_secs(1) < until {
            sleep(Duration::from_millis(thread_rng().gen_range(300..1500))).await;
            let kind = on[thread_rng().gen_range(0..on.len())];
            let c = thread_rng().gen_range(0..CLIENTS);
            let zk = &clients[c];
            let injected = match kind {
                "follower crash+restart" => {
                    let f = thread_rng().gen_range(1..servers);
                    // Never a quorum down: the leader would keep serving
                    // with writes stuck (it does not step down yet).
                    let room = down.lock().unwrap().len() < (servers as usize - 1) / 2;
                    if room && down.lock().unwrap().insert(f) {
                        ensemble.crash_server(f);
                        let (e, down) = (ensemble.clone(), down.clone());
                        let outage = Duration::from_millis(thread_rng().gen_range(500..3000));
                        madsim::task::spawn(async move {
                            sleep(outage).await;
                            e.restart_server(f);
                            down.lock().unwrap().remove(&f);
                        });
                        true
                    } else {
                        false
                    }
                }
                "client crash" if !client_crashed && !records[c].lock().unwrap().expired => {
                    client_crashed = true;
                    records[c].lock().unwrap().crashed = true;
                    ensemble.crash_client(zk);
                    true
                }
                "client crash" => false,
                "forced expiry" => {
                    let window = Duration::from_millis(thread_rng().gen_range(0..50));
                    ensemble.expire_session_with_window(zk.session_id(), window);
                    true
                }
                "broken connection" => {
                    zk.break_connection();
                    true
                }
                "lost write reply" => ensemble.lose_next_write_reply(zk),
                "short client pause" => {
                    let stall = thread_rng().gen_range(100..T_MS / 2);
                    ensemble.pause_client(zk, Duration::from_millis(stall));
                    true
                }
                "long client pause" => {
                    let stall = T_MS + thread_rng().gen_range(0..T_MS);
                    ensemble.pause_client(zk, Duration::from_millis(stall));
                    true
                }
                other => unreachable!("{other}"),
            };
            if injected {
                *tally.faults.entry(kind).or_default() += 1;
            }
        }
        for (c, t) in tasks.into_iter().enumerate() {
            let done = t.await;
            let crashed = records[c].lock().unwrap().crashed;
            assert!(done.is_ok() || crashed, "client {c}'s workload died");
        }
        // Quiet phase: everything heals (restarts are at most 3 s away).
        sleep(Duration::from_secs(12)).await;
        let logs: Vec<Vec<i64>> = (0..servers)
            .map(|s| ensemble.with_server(s, |s| s.applied_zxids().collect()))
            .collect();
        for a in &logs {
            for b in &logs {
                let n = a.len().min(b.len());
                assert_eq!(
                    a[..n],
                    b[..n],
                    "applied logs are not prefixes of one another"
                );
            }
        }
        assert!(
            logs.iter().all(|l| l == &logs[0]),
            "after the quiet phase the replicas agree"
        );
        let tree = ensemble.with_server(0, |s| s.tree().clone());
        for s in 0..servers {
            ensemble.with_server(s, |s| {
                s.tree().check_invariants().unwrap();
                assert!(s.tree() == &tree, "replica {} differs", s.id());
            });
        }
        for (c, zk) in clients.iter().enumerate() {
            let rec = records[c].lock().unwrap();
            let session = zk.session_id();
            if rec.crashed {
                assert!(
                    !tree.has_session(session),
                    "client {c} crashed; its session must expire"
                );
                continue;
            }
            if !tree.has_session(session) {
                // Expired (forced, or a long pause): nothing of it remains.
                assert!(tree.ephemerals(session).next().is_none());
                *tally
                    .counts
                    .entry("sessions expired under a live client")
                    .or_default() += 1;
                continue;
            }
            let actual: BTreeSet<String> = tree.ephemerals(session).map(str::to_owned).collect();
            let known = &rec.ephemerals;
            for p in known.difference(&actual) {
                assert!(
                    rec.unknown.contains(p),
                    "client {c}: acknowledged ephemeral {p} is missing"
                );
            }
            for p in actual.difference(known) {
                assert!(
                    rec.unknown.contains(p),
                    "client {c}: ephemeral {p} it never created"
                );
            }
            *tally.counts.entry("live sessions checked").or_default() += 1;
        }
        for rec in &records {
            let rec = rec.lock().unwrap();
            *tally.counts.entry("client ops ok").or_default() += rec.ops_ok;
            *tally.counts.entry("ConnectionLoss seen").or_default() += rec.connection_losses;
            *tally.counts.entry("reconnects").or_default() += rec.reconnects;
            *tally
                .counts
                .entry("SessionExpired seen by a client")
                .or_default() += u64::from(rec.expired);
        }
        let moved = ensemble.with_server(0, |s| {
            s.log()
                .iter()
                .filter(|e| e.txn.body == TxnBody::Error(ZkError::SessionMoved))
                .count() as u64
        });
        *tally.counts.entry("SessionMoved txns").or_default() += moved;
        for s in 0..servers {
            let st = ensemble.with_server(s, |s| s.stats());
            *tally.counts.entry("refusals by the zxid rule").or_default() += st.zxid_refusals;
            *tally
                .counts
                .entry("refusals while not serving")
                .or_default() += st.not_serving_refusals;
            *tally
                .counts
                .entry("SetWatches events replayed")
                .or_default() += st.replayed_events;
            *tally.counts.entry("expiries by the leader").or_default() += st.expiries;
            *tally
                .counts
                .entry("write replies lost (applied)")
                .or_default() += st.lost_replies;
        }
        tally
    })
}

#[test]
fn raw_workloads_under_part_one_faults() {
    let seeds = common::seeds(START_SEED, 100);
    let started = std::time::Instant::now();
    let mut total = Tally::default();
    for &seed in &seeds {
        let tally = common::replaying("sim_faults", "", seed, || run_seed(seed));
        total.add(&tally);
    }
    eprintln!(
        "sim_faults: {} seeds in {:.1} s",
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    for (k, v) in total.faults.iter().chain(total.counts.iter()) {
        eprintln!("  {k:<40} {v:>6}");
    }
    if seeds.len() >= 50 {
        // A green sweep must mean the faults hit and clients felt them.
        for kind in KINDS {
            assert!(
                total.faults.get(kind).copied().unwrap_or(0) > 0,
                "no {kind} injected"
            );
        }
        for key in [
            "ConnectionLoss seen",
            "reconnects",
            "SessionExpired seen by a client",
            "sessions expired under a live client",
            "live sessions checked",
            "SessionMoved txns",
            "SetWatches events replayed",
            "expiries by the leader",
            "write replies lost (applied)",
        ] {
            assert!(
                total.counts.get(key).copied().unwrap_or(0) > 0,
                "{key} stayed at zero"
            );
        }
    }
}
