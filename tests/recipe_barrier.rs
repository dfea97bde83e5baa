//! The barrier on the simulated ensemble, under the generic randomized
//! fault mix: a coordinator raises and removes one barrier per round, four
//! clients wait on each; judged by the barrier oracle
//! (src/check/barrier.rs): nobody passes before the removal, and in the
//! quiet phase every wait on a removed barrier ends within the bound.
//!
//! `ZOOSIM_SEED=S` replays one seed; `ZOOSIM_SEEDS=N` widens the sweep.

#[cfg(not(madsim))]
compile_error!(
    "tests/recipe_barrier.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod common;

use madsim::runtime::Runtime;
use madsim::time::{sleep, Instant};
use zoosim::check::barrier::{check_barrier, BarrierEvent, BarrierReport};
use zoosim::check::Liveness;
use zoosim::ensemble::sim::nemesis::{self, ClientSlots, Fault, NemesisConfig};
use zoosim::recipes::barrier::BarrierVariant;
use zoosim::scenario::workload::barrier::{self, BarrierWorkload};
use zoosim::scenario::workload::now_ms;

const START_SEED: u64 = 0xba44_0000;
const SEEDS: u64 = 60;
const T_MS: u64 = 4000;
const FAULT_PHASE: Duration = Duration::from_secs(20);
const QUIET: Duration = Duration::from_secs(30);

fn run_seed(seed: u64, variant: BarrierVariant) -> (BarrierReport, BTreeMap<Fault, u64>) {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    runtime.block_on(async {
        let ensemble = common::recipe::ensemble(seed);
        let workload = BarrierWorkload {
            session_timeout_ms: T_MS,
            variant,
            ..BarrierWorkload::default()
        };
        let faults = nemesis::swarm();
        let slots: ClientSlots = Arc::default();
        let fault_end = Instant::now() + FAULT_PHASE;
        let until = fault_end + Duration::from_secs(3600);
        let (log, _tasks) = barrier::spawn(ensemble.clone(), slots.clone(), &workload, until);
        let nemesis_config = NemesisConfig::new(faults, T_MS);
        let injected =
            nemesis::run(ensemble.clone(), slots.clone(), &nemesis_config, fault_end).await;
        let quiet_from = now_ms();
        sleep(QUIET).await;
        let end_ms = now_ms();
        let log = log.lock().unwrap().clone();
        let log = common::recipe::with_crashes(log, &injected, || BarrierEvent::Crashed);
        let report = check_barrier(
            &log,
            Some(Liveness {
                from_ms: quiet_from,
                bound_ms: 20_000,
                end_ms,
            }),
        );
        common::recipe::show(&injected, &report, &log);
        let counts = common::recipe::fault_counts(&injected);
        (report, counts)
    })
}

#[test]
fn the_barrier_holds_under_all_faults() {
    let mut total = BarrierReport::default();
    let wide = common::recipe::sweep(
        "recipe_barrier",
        "the_barrier_holds",
        START_SEED,
        SEEDS,
        |seed| run_seed(seed, BarrierVariant::Correct),
        |r| {
            total.rounds += r.rounds;
            total.passes += r.passes;
            total.losses += r.losses;
        },
    );
    eprintln!("  {total}");
    if wide {
        common::recipe::assert_counted(&[
            ("rounds", total.rounds),
            ("passes", total.passes),
            ("sessions lost", total.losses),
        ]);
    }
}

/// The page's literal waiter (no sync) passes barriers it was told are up,
/// reading a lagging server: caught by the same generic mix.
#[test]
fn barrier_no_sync_is_caught() {
    let v = BarrierVariant::NoSync;
    let found = (0..30).find_map(|n| {
        let (r, _) = run_seed(START_SEED + n, v);
        (!r.is_ok()).then(|| (n + 1, r.violations[0].clone()))
    });
    let (n, why) = found.unwrap_or_else(|| panic!("{} survived 30 seeds", v.name()));
    eprintln!(
        "{}: caught at seed {} ({n} seeds): {why}",
        v.name(),
        START_SEED + n - 1
    );
    assert!(why.contains("before its barrier was removed"), "{why}");
}
