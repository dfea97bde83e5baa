//! The lock and leader election recipes on the simulated ensemble, under
//! the generic randomized fault mix (every fault kind, swarm-mixed per seed;
//! nothing placed by hand), judged by the lock oracle (src/check/lock.rs;
//! leadership is an exclusive role like a lock): fenced effects,
//! overlapping beliefs (stale only when a holder's session was lost), no
//! acting after being told the session ended, no herd, and liveness in the
//! quiet phase after the faults. Five clients, Java and Rust flavours
//! alternating, 3 or 5 servers, critical sections (leader terms) of 10 ms
//! to 1 s.
//!
//! Each buggy variant must be caught by the same mix within its budget of
//! seeds; the seeds to first failure are printed.
//!
//! `ZOOSIM_SEED=S` replays one seed; `ZOOSIM_SEEDS=N` widens the sweep;
//! `ZOOSIM_VERBOSE=1` prints the fault schedule.

#[cfg(not(madsim))]
compile_error!(
    "tests/recipe_exclusive.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

mod common;

use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Runtime;
use madsim::time::{sleep, Instant};
use zoosim::check::lock::{check_lock, LockEvent, LockReport};
use zoosim::check::Liveness;
use zoosim::ensemble::sim::nemesis::{self, ClientSlots, Fault, NemesisConfig};
use zoosim::recipes::election::{Election, ElectionVariant};
use zoosim::recipes::lock::{Lock, LockMode, LockVariant};
use zoosim::scenario::workload::exclusive::{self, Exclusive, ExclusiveWorkload, Make};
use zoosim::scenario::workload::now_ms;

const START_SEED: u64 = 0x10c4_0000;
const SEEDS: u64 = 60;
const T_MS: u64 = 4000;
const FAULT_PHASE: Duration = Duration::from_secs(20);
/// After the nemesis has healed everything.
const QUIET: Duration = Duration::from_secs(30);
/// Within the quiet phase, every wait must end this soon: a crashed
/// holder's session expires within T + 2 ticks, an election within
/// initLimit, a reconnect within seconds.
const LIVENESS_BOUND_MS: u64 = 20_000;

struct Seed {
    report: LockReport,
    faults: BTreeMap<Fault, u64>,
    digest: u64,
}

fn lock(variant: LockVariant) -> Make<Lock> {
    Arc::new(move |_, guid| Lock::with_variant("/locks/l", guid, variant))
}

fn election(variant: ElectionVariant) -> Make<Election> {
    Arc::new(move |_, guid| Election::with_variant("/app/election", guid, variant))
}

/// Clients 0 and 3 write, the others read.
fn rwlock(variant: LockVariant) -> Make<Lock> {
    Arc::new(move |c, guid| {
        let mode = if c % 3 == 0 {
            LockMode::Write
        } else {
            LockMode::Read
        };
        Lock::shared("/data/rw", guid, mode, variant)
    })
}

fn run_seed<M: Exclusive>(seed: u64, make: Make<M>, touches: u32) -> Seed {
    run_seed_with(seed, make, touches, None)
}

fn run_seed_with<M: Exclusive>(
    seed: u64,
    make: Make<M>,
    touches: u32,
    revoke_dir: Option<&str>,
) -> Seed {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    runtime.block_on(async {
        let ensemble = common::recipe::ensemble(seed);
        let faults = nemesis::swarm();
        let slots: ClientSlots = Arc::default();
        // Short and long critical sections: a long one is where a pause or
        // a partition of the holder bites.
        let hold_ms = [10, 100, 1000][thread_rng().gen_range(0..3)];
        let workload = ExclusiveWorkload {
            hold_ms,
            touches,
            revoke_dir: revoke_dir.map(str::to_owned),
            session_timeout_ms: T_MS,
            ..ExclusiveWorkload::default()
        };
        let fault_end = Instant::now() + FAULT_PHASE;
        // The clients run until the simulation ends with the quiet phase
        // (which starts when the nemesis returns).
        let until = fault_end + Duration::from_secs(3600);
        let (record, tasks) =
            exclusive::spawn(ensemble.clone(), slots.clone(), &workload, make, until);
        let config = NemesisConfig::new(faults, T_MS);
        let injected = nemesis::run(ensemble.clone(), slots.clone(), &config, fault_end).await;
        let quiet_from = now_ms();
        sleep(QUIET).await;
        let end_ms = now_ms();
        // Stop the clients where they are: the log ends here.
        let log = record.log.lock().unwrap().clone();
        drop(tasks);
        let log = common::recipe::with_crashes(log, &injected, || LockEvent::Crashed);
        let report = check_lock(
            &log,
            Some(Liveness {
                from_ms: quiet_from,
                bound_ms: LIVENESS_BOUND_MS,
                end_ms,
            }),
        );
        let counts = common::recipe::fault_counts(&injected);
        if std::env::var_os("ZOOSIM_VERBOSE").is_some() {
            for f in &injected {
                eprintln!("{f}");
            }
            eprintln!("{report}");
        }
        if std::env::var("ZOOSIM_VERBOSE").as_deref() == Ok("2") {
            for e in &log {
                eprintln!("{:>7} ms  client {}  {:?}", e.at_ms, e.client, e.event);
            }
            if let Some(l) = ensemble.leader() {
                let history = ensemble.history();
                for txn in history
                    .iter()
                    .filter(|t| format!("{:?}", t.body).contains("Create"))
                {
                    eprintln!("txn {:#x} session {} {:?}", txn.zxid, txn.session, txn.body);
                }
                let _ = l;
            }
        }
        let mut digest = std::collections::hash_map::DefaultHasher::new();
        log.hash(&mut digest);
        Seed {
            report,
            faults: counts,
            digest: digest.finish(),
        }
    })
}

fn sweep<M: Exclusive>(test: &str, make: Make<M>, touches: u32) {
    let seeds = common::seeds(START_SEED, SEEDS);
    let started = std::time::Instant::now();
    let mut total = LockReport::default();
    let mut faults: BTreeMap<Fault, u64> = BTreeMap::new();
    for (i, &seed) in seeds.iter().enumerate() {
        let once = std::panic::AssertUnwindSafe(make.clone());
        let s = common::replaying("recipe_exclusive", test, seed, move || {
            let once = once; // the whole wrapper, not its field
            run_seed(seed, once.0, touches)
        });
        assert!(
            s.report.is_ok(),
            "{test}: seed {seed}:\n{}\nreplay: ZOOSIM_SEED={seed} ZOOSIM_VERBOSE=1 \
             cargo test --test recipe_exclusive {test} -- --nocapture",
            s.report
        );
        if i < 2 {
            let again = run_seed(seed, make.clone(), touches);
            assert_eq!(s.digest, again.digest, "seed {seed} ran differently twice");
        }
        let r = &s.report;
        total.acquisitions += r.acquisitions;
        total.accesses_accepted += r.accesses_accepted;
        total.accesses_rejected += r.accesses_rejected;
        total.stale_beliefs += r.stale_beliefs;
        total.suspensions += r.suspensions;
        total.resumptions += r.resumptions;
        total.losses += r.losses;
        total.recovered_found += r.recovered_found;
        total.recovered_not_found += r.recovered_not_found;
        total.deletions_waking_someone += r.deletions_waking_someone;
        total.max_woken_per_deletion = total.max_woken_per_deletion.max(r.max_woken_per_deletion);
        for (f, n) in s.faults {
            *faults.entry(f).or_default() += n;
        }
    }
    eprintln!(
        "{test}: {} seeds in {:.1} s\n  {total}",
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    for (f, n) in &faults {
        eprintln!("  {:<24} {n:>5}", f.name());
    }
    if seeds.len() >= 50 {
        // A green sweep must mean the faults hit the recipe's hard paths.
        common::recipe::assert_every_fault(&faults);
        for (what, n) in [
            ("acquisitions", total.acquisitions),
            ("fenced accesses rejected", total.accesses_rejected),
            ("stale beliefs", total.stale_beliefs),
            ("holders suspended", total.suspensions),
            ("holders resumed", total.resumptions),
            ("sessions lost", total.losses),
            ("guid searches that found the node", total.recovered_found),
            ("guid searches that did not", total.recovered_not_found),
            (
                "deletions that woke a waiter",
                total.deletions_waking_someone,
            ),
        ] {
            assert!(n > 0, "{what} stayed at zero");
        }
    }
}

#[test]
fn the_lock_holds_under_all_faults() {
    sweep("the_lock_holds", lock(LockVariant::Correct), 2);
}

#[test]
fn the_shared_lock_holds_under_all_faults() {
    sweep("the_shared_lock_holds", rwlock(LockVariant::Correct), 2);
}

#[test]
fn leader_election_holds_under_all_faults() {
    sweep(
        "leader_election_holds",
        election(ElectionVariant::Correct),
        4,
    );
}

/// Runs seeds until the oracle (or an assertion) fails; returns how many
/// seeds that took, or None within the budget.
fn seeds_to_first_failure<M: Exclusive>(
    make: Make<M>,
    touches: u32,
    budget: u64,
) -> Option<(u64, String)> {
    for n in 0..budget {
        let seed = START_SEED + n;
        let make = make.clone();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_seed(seed, make, touches)
        }));
        match outcome {
            Ok(s) if s.report.is_ok() => continue,
            Ok(s) => return Some((n + 1, s.report.violations.join("; "))),
            Err(_) => return Some((n + 1, "panicked".into())),
        }
    }
    None
}

fn caught<M: Exclusive>(name: &str, make: Make<M>, touches: u32, budget: u64, expect: &str) {
    let started = std::time::Instant::now();
    let Some((n, why)) = seeds_to_first_failure(make, touches, budget) else {
        panic!("{name} survived {budget} seeds of the generic fault mix");
    };
    let first: String = why.chars().take(200).collect();
    eprintln!(
        "{name}: caught at seed {} ({n} seeds, {:.1} s): {first}",
        START_SEED + n - 1,
        started.elapsed().as_secs_f64(),
    );
    assert!(
        why.contains(expect),
        "{name} was caught, but not for {expect:?}: {why}"
    );
}

#[test]
fn blind_retry_is_caught() {
    let v = LockVariant::BlindRetry;
    caught(v.name(), lock(v), 2, 30, "liveness");
}

#[test]
fn herd_is_caught() {
    let v = LockVariant::Herd;
    caught(v.name(), lock(v), 2, 5, "herd");
}

#[test]
fn sort_by_full_name_is_caught() {
    let v = LockVariant::SortByFullName;
    caught(v.name(), lock(v), 2, 5, "two holders");
}

#[test]
fn stall_on_vanished_predecessor_is_caught() {
    let v = LockVariant::StallOnVanishedPredecessor;
    caught(v.name(), lock(v), 2, 20, "liveness");
}

#[test]
fn election_keep_leadership_after_expiry_is_caught() {
    let v = ElectionVariant::KeepLeadershipAfterExpiry;
    caught(v.name(), election(v), 4, 30, "told its session had ended");
}

#[test]
fn rwlock_reader_waits_on_any_is_caught() {
    let v = LockVariant::ReaderWaitsOnAny;
    caught(v.name(), rwlock(v), 2, 30, "waited on a reader");
}

/// Revocable shared lock: readers and writers as in the shared lock, each
/// node watched by its holder; a revoker asks the lowest node's holder to
/// let go every 0.3–1 s, and the holder consents. Judged by the same oracle,
/// plus: a holder asked to let go does so within the bound.
#[test]
fn the_revocable_lock_holds_under_all_faults() {
    let seeds = common::seeds(START_SEED, SEEDS);
    let started = std::time::Instant::now();
    let (mut asked, mut seen, mut honoured) = (0, 0, 0);
    for &seed in &seeds {
        let make: Make<Lock> = Arc::new(|c, guid| {
            let mode = if c % 3 == 0 {
                LockMode::Write
            } else {
                LockMode::Read
            };
            Lock::shared("/data/revocable", guid, mode, LockVariant::Correct).revocable()
        });
        let once = std::panic::AssertUnwindSafe(make);
        let s = common::replaying(
            "recipe_exclusive",
            "the_revocable_lock_holds",
            seed,
            move || {
                let once = once;
                run_seed_with(seed, once.0, 4, Some("/data/revocable"))
            },
        );
        assert!(
            s.report.is_ok(),
            "the_revocable_lock_holds: seed {seed}:\n{}\nreplay: ZOOSIM_SEED={seed} \
             ZOOSIM_VERBOSE=1 cargo test --test recipe_exclusive the_revocable_lock_holds \
             -- --nocapture",
            s.report
        );
        asked += s.report.revokes_called;
        seen += s.report.revokes_asked;
        honoured += s.report.revokes_honoured;
    }
    eprintln!(
        "the_revocable_lock_holds: {} seeds in {:.1} s: revocations asked {asked}, seen by \
         holders {seen}, honoured {honoured}",
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    if seeds.len() >= 50 {
        assert!(
            asked > 0 && seen > 0 && honoured > 0,
            "revocation never happened"
        );
    }
}
