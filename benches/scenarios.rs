//! Wall time of one seed of the standard lock scenarios
//! (`benches/scenarios/*.toml`: 10 clients × 50 acquisitions, 10 ms hold;
//! alone, with a leader crash at 2 s, with a waiter's session expiring),
//! and the runner's seeds per second over `scenarios/`.
//! `cargo bench --bench scenarios`; `ZOOSIM_BENCH_RUNS` seeds per figure
//! (default 20, after 3 untimed warm-up seeds), median and min, one
//! thread.
//!
//! A real 3-node ZooKeeper on these machines takes 6.1 s, 8.3 s and 8.9 s
//! for the three lock scenarios; the goal is 30, 40 and 45 ms.

#[cfg(not(madsim))]
compile_error!("benches/scenarios.rs needs `--cfg madsim` (set by .cargo/config.toml)");

use std::path::{Path, PathBuf};
use std::time::Instant;

use zoosim::check::contract;
use zoosim::ensemble::sim::sim_recorder;
use zoosim::scenario::files::{load, scenario_files};
use zoosim::scenario::run::{
    contract_budget, history_meta, run_seed_recording, run_seed_unrecorded,
};
use zoosim::scenario::runner::{run_one, run_scenario, RunOptions};
use zoosim::scenario::spec::Scenario;

fn scenario(path: &str) -> Scenario {
    load(Path::new(path)).unwrap_or_else(|e| panic!("{e}"))
}

fn main() {
    let runs: u64 = std::env::var("ZOOSIM_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    for (name, goal_ms) in [
        ("lock-standard", 30.0),
        ("lock-leader-crash", 40.0),
        ("lock-waiter-expiry", 45.0),
    ] {
        let s = scenario(&format!("benches/scenarios/{name}.toml"));
        // Warm-up, untimed: the first runs of a process pay for growing the
        // allocator's arenas and faulting in pages.
        for seed in 0..3 {
            run_one(&s, 1000 + seed).expect("runs");
        }
        let mut wall_ms = Vec::new();
        let mut sim_ms = 0;
        for seed in 1..=runs {
            let started = Instant::now();
            let out = run_one(&s, seed).expect("runs");
            wall_ms.push(started.elapsed().as_secs_f64() * 1000.0);
            assert!(
                out.violations.is_empty(),
                "{name} seed {seed}: {:?}",
                out.violations
            );
            sim_ms += out.sim_ms;
        }
        wall_ms.sort_by(f64::total_cmp);
        let median = wall_ms[wall_ms.len() / 2];
        println!(
            "{name:<20} median {median:>7.1} ms  min {:>7.1} ms  (goal {goal_ms} ms; {:.1} simulated s per seed, {:.0}x faster than simulated time)",
            wall_ms[0],
            sim_ms as f64 / runs as f64 / 1000.0,
            sim_ms as f64 / runs as f64 / median
        );
    }
    contract_cost(runs);
    // The runner over every shipped scenario, a few seeds each, one thread.
    let files = scenario_files(&[PathBuf::from("scenarios")]).unwrap_or_else(|e| panic!("{e}"));
    let options = RunOptions {
        seeds: Some(runs),
        seed_start: None,
        jobs: 1,
        shard: None,
        stop: None,
        progress: None,
    };
    let started = Instant::now();
    let mut seeds = 0;
    for f in files {
        let s = load(&f).unwrap_or_else(|e| panic!("{e}"));
        let summary = run_scenario(&s, &options, &|_| {}).expect("the seeds fit");
        assert!(
            summary.failures.is_empty() || s.expect_failure,
            "{}",
            s.name
        );
        seeds += summary.seeds_run;
    }
    let wall = started.elapsed().as_secs_f64();
    println!(
        "runner: {seeds} seeds of scenarios/ in {wall:.1} s on one thread: {:.1} seeds/s",
        seeds as f64 / wall
    );
}

/// What recording a seed and checking ZooKeeper's contract on its history
/// add to the standard lock seed's wall time (the target: at most 20 %),
/// median over `runs` seeds of each: the bare run, the recorded run, and
/// the check alone.
fn contract_cost(runs: u64) {
    let s = scenario("benches/scenarios/lock-standard.toml");
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (mut bare, mut recorded, mut check) = (Vec::new(), Vec::new(), Vec::new());
    let mut undecided = 0;
    for seed in 1..=runs {
        let t = Instant::now();
        run_seed_unrecorded(&s, seed);
        bare.push(t.elapsed().as_secs_f64() * 1000.0);
        let recorder = sim_recorder();
        let t = Instant::now();
        let out = run_seed_recording(&s, seed, &recorder);
        let history = recorder.history(history_meta(&s, seed, out.drawn.servers));
        recorded.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        let r = contract::check(&history, &contract_budget()).expect("a readable history");
        check.push(t.elapsed().as_secs_f64() * 1000.0);
        match r.verdict {
            contract::ContractVerdict::Holds => {}
            contract::ContractVerdict::Unknown(_) => undecided += 1,
            contract::ContractVerdict::Broken(b) => {
                panic!(
                    "lock-standard seed {seed}: {}: {}",
                    b.guarantee.name, b.detail
                )
            }
            contract::ContractVerdict::CheckerFault(why) => {
                panic!("lock-standard seed {seed}: the contract checker failed: {why}")
            }
        }
    }
    let (bare, recorded, check) = (median(bare), median(recorded), median(check));
    println!(
        "lock-standard cost: bare run {bare:.1} ms, recorded {recorded:.1} ms (+{:.0} %), \
         contract check {check:.1} ms (+{:.0} %); recorded and checked +{:.0} % \
         (target <= 20 %); {undecided} of {runs} undecided",
        (recorded / bare - 1.0) * 100.0,
        check / bare * 100.0,
        ((recorded + check) / bare - 1.0) * 100.0,
    );
}
