//! Two-phase commit on the simulated ensemble, under the generic
//! randomized fault mix: a coordinator opens a transaction every 0.3–0.8 s,
//! four sites vote (commit mostly) and decide; judged by the 2PC oracle
//! (src/check/two_phase_commit.rs): agreement, commit only if every site
//! voted commit, and in the quiet phase every vote decided within the
//! bound (unless a site of that transaction crashed unvoted).
//!
//! `ZOOSIM_SEED=S` replays one seed; `ZOOSIM_SEEDS=N` widens the sweep.

#[cfg(not(madsim))]
compile_error!(
    "tests/recipe_two_phase_commit.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod common;

use madsim::runtime::Runtime;
use madsim::time::{sleep, Instant};
use zoosim::check::two_phase_commit::{check_tpc, TpcEvent, TpcReport};
use zoosim::check::Liveness;
use zoosim::ensemble::sim::nemesis::{self, ClientSlots, Fault, NemesisConfig};
use zoosim::scenario::workload::now_ms;
use zoosim::scenario::workload::two_phase_commit::{self, TpcWorkload};

const START_SEED: u64 = 0x2bc0_0000;
const SEEDS: u64 = 60;
const T_MS: u64 = 4000;
const FAULT_PHASE: Duration = Duration::from_secs(20);
const QUIET: Duration = Duration::from_secs(30);

fn run_seed(seed: u64) -> (TpcReport, BTreeMap<Fault, u64>) {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    runtime.block_on(async {
        let ensemble = common::recipe::ensemble(seed);
        let workload = TpcWorkload {
            session_timeout_ms: T_MS,
            ..TpcWorkload::default()
        };
        let faults = nemesis::swarm();
        let slots: ClientSlots = Arc::default();
        let fault_end = Instant::now() + FAULT_PHASE;
        let until = fault_end + Duration::from_secs(3600);
        let (log, _tasks) =
            two_phase_commit::spawn(ensemble.clone(), slots.clone(), &workload, fault_end, until);
        let nemesis_config = NemesisConfig::new(faults, T_MS);
        let injected =
            nemesis::run(ensemble.clone(), slots.clone(), &nemesis_config, fault_end).await;
        let quiet_from = now_ms();
        sleep(QUIET).await;
        let end_ms = now_ms();
        let log = log.lock().unwrap().clone();
        let log = common::recipe::with_crashes(log, &injected, || TpcEvent::Crashed);
        let sites: Vec<usize> = (1..=workload.sites).collect();
        let report = check_tpc(
            &log,
            &sites,
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
fn two_phase_commit_holds_under_all_faults() {
    let mut total = TpcReport::default();
    let wide = common::recipe::sweep(
        "recipe_two_phase_commit",
        "two_phase_commit_holds",
        START_SEED,
        SEEDS,
        run_seed,
        |r| {
            total.commits += r.commits;
            total.aborts += r.aborts;
            total.aborts_for_failed_sites += r.aborts_for_failed_sites;
            total.losses += r.losses;
        },
    );
    eprintln!("  {total}");
    if wide {
        common::recipe::assert_counted(&[
            ("commits", total.commits),
            ("aborts", total.aborts),
            (
                "aborts written for failed sites",
                total.aborts_for_failed_sites,
            ),
            ("sessions lost", total.losses),
        ]);
    }
}
