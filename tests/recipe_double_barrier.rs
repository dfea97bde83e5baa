//! The double barrier on the simulated ensemble, under the generic
//! randomized fault mix: five clients go through one barrier per round
//! (threshold 3): enter, compute, leave; judged by the double-barrier
//! oracle (src/check/double_barrier.rs): nobody in before 3 asked to enter,
//! nobody out before everyone who entered asked to leave, and in the quiet
//! phase every enter and leave ends within the bound.
//!
//! `ZOOSIM_SEED=S` replays one seed; `ZOOSIM_SEEDS=N` widens the sweep.

#[cfg(not(madsim))]
compile_error!(
    "tests/recipe_double_barrier.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod common;

use madsim::runtime::Runtime;
use madsim::time::{sleep, Instant};
use zoosim::check::double_barrier::{
    check_double_barrier, DoubleBarrierEvent, DoubleBarrierReport,
};
use zoosim::check::Liveness;
use zoosim::ensemble::sim::nemesis::{self, ClientSlots, Fault, NemesisConfig};
use zoosim::scenario::workload::double_barrier::{self, DoubleBarrierWorkload};
use zoosim::scenario::workload::now_ms;

const START_SEED: u64 = 0xdb44_0000;
const SEEDS: u64 = 60;
const T_MS: u64 = 4000;
const FAULT_PHASE: Duration = Duration::from_secs(20);
const QUIET: Duration = Duration::from_secs(30);

fn run_seed(seed: u64) -> (DoubleBarrierReport, BTreeMap<Fault, u64>) {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    runtime.block_on(async {
        let ensemble = common::recipe::ensemble(seed);
        let workload = DoubleBarrierWorkload {
            session_timeout_ms: T_MS,
            ..DoubleBarrierWorkload::default()
        };
        let faults = nemesis::swarm();
        let slots: ClientSlots = Arc::default();
        let fault_end = Instant::now() + FAULT_PHASE;
        let until = fault_end + Duration::from_secs(3600);
        let (log, _tasks) =
            double_barrier::spawn(ensemble.clone(), slots.clone(), &workload, until);
        let nemesis_config = NemesisConfig::new(faults, T_MS);
        let injected =
            nemesis::run(ensemble.clone(), slots.clone(), &nemesis_config, fault_end).await;
        let quiet_from = now_ms();
        sleep(QUIET).await;
        let end_ms = now_ms();
        let log = log.lock().unwrap().clone();
        let log = common::recipe::with_crashes(log, &injected, || DoubleBarrierEvent::Crashed);
        let report = check_double_barrier(
            &log,
            workload.threshold,
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
fn the_double_barrier_holds_under_all_faults() {
    let mut total = DoubleBarrierReport::default();
    let wide = common::recipe::sweep(
        "recipe_double_barrier",
        "the_double_barrier_holds",
        START_SEED,
        SEEDS,
        run_seed,
        |r| {
            total.entries += r.entries;
            total.exits += r.exits;
            total.losses += r.losses;
        },
    );
    eprintln!("  {total}");
    if wide {
        common::recipe::assert_counted(&[
            ("entries", total.entries),
            ("exits", total.exits),
            ("sessions lost", total.losses),
        ]);
    }
}
