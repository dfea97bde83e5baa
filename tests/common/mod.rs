//! Seed sweeps shared by the simulation tests: which seeds to run
//! (ZOOSIM_SEED replays one, ZOOSIM_SEEDS widens a sweep) and a failing
//! seed named with the one command that replays it.

#![allow(dead_code)] // each test binary uses a part

use std::panic::{catch_unwind, UnwindSafe};
use std::time::Instant;

/// The seeds to run: `ZOOSIM_SEED` alone, or `ZOOSIM_SEEDS` (default `n`)
/// from `start`.
pub fn seeds(start: u64, n: u64) -> Vec<u64> {
    if let Ok(s) = std::env::var("ZOOSIM_SEED") {
        let seed = s
            .parse()
            .unwrap_or_else(|_| panic!("ZOOSIM_SEED must be a number, got {s:?}"));
        return vec![seed];
    }
    let n = match std::env::var("ZOOSIM_SEEDS") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("ZOOSIM_SEEDS must be a number, got {v:?}")),
        Err(_) => n,
    };
    (start..start + n).collect()
}

/// Runs one seed; a panic becomes a failure naming the seed and the command
/// that replays it (`binary` is the test file's name, `test` a filter).
pub fn replaying<T>(binary: &str, test: &str, seed: u64, f: impl FnOnce() -> T + UnwindSafe) -> T {
    catch_unwind(f).unwrap_or_else(|e| {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!(
            "{test}: seed {seed} failed: {msg}\n\
             replay: ZOOSIM_SEED={seed} cargo test --test {binary} {test} -- --nocapture"
        )
    })
}

/// Runs `f` over [`seeds`], printing the sweep's wall time.
pub fn sweep<T>(
    binary: &str,
    test: &str,
    start: u64,
    n: u64,
    f: impl Fn(u64) -> T + std::panic::RefUnwindSafe,
) -> Vec<T> {
    let seeds = seeds(start, n);
    let started = Instant::now();
    let out = seeds
        .iter()
        .map(|&seed| replaying(binary, test, seed, || f(seed)))
        .collect();
    eprintln!(
        "{test}: {} seeds in {:.2} s",
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    out
}

/// The recipe sweeps' shared pieces (simulation only).
#[cfg(madsim)]
pub mod recipe {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use madsim::rand::{thread_rng, Rng};
    use zoosim::check::Entry;
    use zoosim::ensemble::msg::ServerId;
    use zoosim::ensemble::sim::nemesis::{ClientSlots, Fault, InjectedFault};
    use zoosim::ensemble::sim::{Ensemble, EnsembleConfig};

    /// This seed's ensemble: 5 servers on odd seeds, 3 on even ones;
    /// syncLimit 2–5 ticks, initLimit twice that.
    pub fn ensemble(seed: u64) -> Arc<Ensemble> {
        let servers = if seed % 2 == 1 { 5 } else { 3 };
        let sync_limit_ticks = thread_rng().gen_range(2..=5);
        Arc::new(Ensemble::start(EnsembleConfig {
            servers,
            sync_limit_ticks,
            init_limit_ticks: 2 * sync_limit_ticks,
            ..EnsembleConfig::default()
        }))
    }

    /// The log in time order, with the nemesis's client crashes in it (a
    /// crashed client cannot log its own end).
    pub fn with_crashes<E>(
        mut log: Vec<Entry<E>>,
        injected: &[InjectedFault],
        crashed: impl Fn() -> E,
    ) -> Vec<Entry<E>> {
        for f in injected.iter().filter(|f| f.fault == Fault::ClientCrash) {
            log.push(Entry {
                at_ms: f.at.as_millis() as u64,
                client: f.client.expect("a crash names its client"),
                event: crashed(),
            });
        }
        log.sort_by_key(|e| e.at_ms);
        log
    }

    pub fn fault_counts(injected: &[InjectedFault]) -> BTreeMap<Fault, u64> {
        let mut counts = BTreeMap::new();
        for f in injected {
            *counts.entry(f.fault).or_default() += 1;
        }
        counts
    }

    /// ZOOSIM_VERBOSE=1: the fault schedule and the report; =2: the log too.
    pub fn show<E: std::fmt::Debug>(
        injected: &[InjectedFault],
        report: &dyn std::fmt::Display,
        log: &[Entry<E>],
    ) {
        let verbose = std::env::var("ZOOSIM_VERBOSE").unwrap_or_default();
        if verbose.is_empty() {
            return;
        }
        for f in injected {
            eprintln!("{f}");
        }
        eprintln!("{report}");
        if verbose == "2" {
            for e in log {
                eprintln!("{:>7} ms  client {}  {:?}", e.at_ms, e.client, e.event);
            }
        }
    }

    /// A green sweep must mean something happened: each named count > 0.
    pub fn assert_counted(counts: &[(&str, u64)]) {
        for (what, n) in counts {
            assert!(*n > 0, "{what} stayed at zero");
        }
    }

    /// The clients alive at the end: a handle in the slot, its session
    /// still known to `leader`.
    pub fn live_clients(
        ensemble: &Ensemble,
        leader: ServerId,
        slots: &ClientSlots,
        clients: usize,
    ) -> Vec<usize> {
        use zoosim::client::Zk;
        let slots = slots.lock().unwrap();
        (0..clients)
            .filter(|&c| {
                slots[c].zk.as_ref().is_some_and(|zk| {
                    ensemble.with_server(leader, |s| s.tree().has_session(zk.session_id()))
                })
            })
            .collect()
    }

    /// A green sweep must mean every fault hit.
    pub fn assert_every_fault(faults: &BTreeMap<Fault, u64>) {
        for f in Fault::ALL {
            assert!(faults.get(&f).copied().unwrap_or(0) > 0, "no {f} injected");
        }
    }

    /// An oracle's report.
    pub trait Verdict: std::fmt::Display {
        fn ok(&self) -> bool;
    }

    macro_rules! verdicts {
        ($($t:ty),*) => {$(impl Verdict for $t {
            fn ok(&self) -> bool {
                self.is_ok()
            }
        })*};
    }
    verdicts!(
        zoosim::check::config::ConfigReport,
        zoosim::check::membership::MembershipReport,
        zoosim::check::barrier::BarrierReport,
        zoosim::check::double_barrier::DoubleBarrierReport,
        zoosim::check::two_phase_commit::TpcReport,
        zoosim::check::queue::QueueReport
    );

    /// Runs the seeds (see [`super::seeds`]); every report must be ok, else
    /// the failure names the seed and the command that replays it. `each`
    /// sees every report (for totals). Returns whether the sweep was wide
    /// enough for coverage goals (≥ 50 seeds), having checked that every
    /// fault hit.
    pub fn sweep<R: Verdict>(
        binary: &str,
        test: &str,
        start: u64,
        n: u64,
        run: impl Fn(u64) -> (R, BTreeMap<Fault, u64>) + std::panic::RefUnwindSafe,
        mut each: impl FnMut(&R),
    ) -> bool {
        let seeds = super::seeds(start, n);
        let started = std::time::Instant::now();
        let mut faults: BTreeMap<Fault, u64> = BTreeMap::new();
        for &seed in &seeds {
            let (r, f) = super::replaying(binary, test, seed, || run(seed));
            assert!(
                r.ok(),
                "{test}: seed {seed}:\n{r}\nreplay: ZOOSIM_SEED={seed} ZOOSIM_VERBOSE=1 \
                 cargo test --test {binary} {test} -- --nocapture"
            );
            each(&r);
            for (k, v) in f {
                *faults.entry(k).or_default() += v;
            }
        }
        eprintln!(
            "{test}: {} seeds in {:.1} s",
            seeds.len(),
            started.elapsed().as_secs_f64()
        );
        let wide = seeds.len() >= 50;
        if wide {
            assert_every_fault(&faults);
        }
        wide
    }
}
