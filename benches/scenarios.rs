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

use zoosim::scenario::files::{load, scenario_files};
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
    // The runner over every shipped scenario, a few seeds each, one thread.
    let files = scenario_files(&[PathBuf::from("scenarios")]).unwrap_or_else(|e| panic!("{e}"));
    let options = RunOptions {
        seeds: Some(runs),
        seed_start: None,
        jobs: 1,
        shard: None,
    };
    let started = Instant::now();
    let mut seeds = 0;
    for f in files {
        let s = load(&f).unwrap_or_else(|e| panic!("{e}"));
        let summary = run_scenario(&s, &options, &|| {});
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
