//! Scenario files under `cargo test`, in a recipe author's own crate as in
//! zoosim's: one call from a `#[test]` runs every scenario file in a
//! directory for its `test_seeds`, judged as `zoosim run` judges it — a
//! correct recipe passes every seed and reaches its coverage goals, a buggy
//! variant is caught within its seeds — and fails with the one command
//! that replays the first bad seed.
//!
//! ```text
//! #[test]
//! fn my_scenarios() {
//!     zoosim::testing::run_scenarios(&Registry::new().with(MyRecipe), "scenarios/");
//! }
//! ```
//!
//! Environment: `ZOOSIM_SEEDS=N` runs N seeds of each scenario instead;
//! `ZOOSIM_SEED=S` runs only seed S (one seed proves no coverage goal);
//! `ZOOSIM_SCENARIO=name` only the scenarios whose name contains it.

use std::path::Path;

use crate::scenario::files::{load_in, scenario_files};
use crate::scenario::registry::Registry;
use crate::scenario::runner::{run_scenario, RunOptions, Summary};
use crate::scenario::spec::Scenario;

/// Runs every scenario file in `dir` (see the module's docs) and panics,
/// naming each scenario not as expected with its first failing seed's
/// violations and replay commands. Returns each scenario with its summary,
/// for further checks (e.g. that every fault hit somewhere).
pub fn run_scenarios(registry: &Registry, dir: impl AsRef<Path>) -> Vec<(Scenario, Summary)> {
    let dir = dir.as_ref();
    let started = std::time::Instant::now();
    let only = std::env::var("ZOOSIM_SCENARIO").unwrap_or_default();
    assert!(
        registry.errors().is_empty(),
        "the registry refused recipes: {:?}",
        registry.errors()
    );
    let files = scenario_files(&[dir.to_path_buf()]).unwrap_or_else(|e| panic!("{e}"));
    let scenarios: Vec<Scenario> = files
        .iter()
        .map(|f| load_in(f, registry).unwrap_or_else(|e| panic!("{e}")))
        .filter(|s| s.name.contains(&only))
        .collect();
    let one_seed = env_u64("ZOOSIM_SEED");
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut bad = Vec::new();
    let mut out = Vec::new();
    for s in scenarios {
        let options = match one_seed {
            Some(seed) => RunOptions {
                seeds: Some(1),
                seed_start: Some(seed),
                jobs: 1,
                shard: None,
                stop: None,
                progress: None,
            },
            None => RunOptions {
                seeds: Some(env_u64("ZOOSIM_SEEDS").unwrap_or(s.test_seeds)),
                seed_start: None,
                jobs,
                shard: None,
                stop: None,
                progress: None,
            },
        };
        if options.seeds == Some(0) {
            continue;
        }
        let summary = match run_scenario(&s, &options, &|_| {}) {
            Ok(summary) => summary,
            Err(e) => {
                bad.push(e.to_string());
                continue;
            }
        };
        eprintln!(
            "{:<42} {:>4} seeds {:>6.1} s  {}",
            s.name,
            summary.seeds_run,
            summary.wall_ms as f64 / 1000.0,
            summary.verdict()
        );
        // One seed of a coverage sweep proves no coverage goal.
        let ok = summary.passed()
            || (one_seed.is_some() && !s.expect_failure && summary.failures.is_empty());
        if !ok {
            let hint = summary
                .failures
                .first()
                .map(|f| {
                    format!(
                        "\n{}\n  replay: {}\n  or: ZOOSIM_SCENARIO={} ZOOSIM_SEED={} cargo test",
                        f.why(),
                        crate::cli::replay_command(registry, &s.file, f.seed),
                        s.name,
                        f.seed
                    )
                })
                .unwrap_or_default();
            bad.push(format!("{}: {}{hint}", s.name, summary.verdict()));
        }
        out.push((s, summary));
    }
    eprintln!(
        "{}: {} scenarios in {:.1} s",
        dir.display(),
        out.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        !out.is_empty() || !only.is_empty(),
        "{}: no scenario ran",
        dir.display()
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    out
}

/// The scenarios whose seeds ZooKeeper's contract left undecided above
/// `percent` % of their seeds run (counter `contract-undecided`), each as
/// a line naming it and its figures: the cap is per scenario, so that no
/// one scenario can be mostly undecided behind the others' decided seeds.
pub fn undecided_over_cap(ran: &[(Scenario, Summary)], percent: u64) -> Vec<String> {
    ran.iter()
        .filter_map(|(s, summary)| {
            let undecided = summary.counters.get("contract-undecided").copied()?;
            let seeds = summary.seeds_run;
            (undecided.saturating_mul(100) > seeds.saturating_mul(percent)).then(|| {
                format!(
                    "{}: {undecided} of {seeds} seeds undecided by the contract check, over {percent} %",
                    s.name
                )
            })
        })
        .collect()
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, got {v:?}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::spec::parse;

    fn ran(name: &str, seeds: u64, undecided: u64) -> (Scenario, Summary) {
        let s = parse(&format!("{name}.toml"), "format = 1\nrecipe = \"lock\"\n").expect("valid");
        let summary = Summary {
            name: s.name.clone(),
            file: s.file.clone(),
            expect_failure: false,
            seeds_run: seeds,
            failures: Vec::new(),
            undecided: Vec::new(),
            sim_ms: 0,
            wall_ms: 0,
            ops: 0,
            counters: [("contract-undecided".to_owned(), undecided)].into(),
            missed_goals: Vec::new(),
            whole: true,
            interrupted: false,
        };
        (s, summary)
    }

    #[test]
    fn the_undecided_cap_is_per_scenario_not_over_the_sum() {
        // 3 of 110 seeds in all (under 5 %), but 3 of 10 in one scenario.
        let all = [ran("calm", 100, 0), ran("hard", 10, 3)];
        assert_eq!(
            undecided_over_cap(&all, 5),
            ["hard: 3 of 10 seeds undecided by the contract check, over 5 %"]
        );
        // At the cap is within it.
        assert!(undecided_over_cap(&[ran("edge", 20, 1)], 5).is_empty());
    }
}
