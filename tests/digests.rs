//! Behaviour pinned across refactors: the first 20 seeds of every scenario
//! in scenarios/ and of the example's (examples/custom_recipe/), each
//! run's digest (over its outcome log and its faults) and whether it
//! passed, compared with `tests/digests.txt`. A change that moves any
//! operation, outcome or fault of any of these runs fails here, naming
//! the scenario and seed.
//!
//! The file is written, not compared, with `ZOOSIM_BLESS_DIGESTS=1`; do
//! that only for a change meant to alter runs, and say why in its commit.

#[cfg(not(madsim))]
compile_error!(
    "tests/digests.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

#[path = "../examples/custom_recipe/counter.rs"]
mod counter;
#[path = "../examples/custom_recipe/recipe.rs"]
mod recipe;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use zoosim::scenario::files::{load_in, scenario_files};
use zoosim::scenario::registry::Registry;
use zoosim::scenario::runner::run_one;
use zoosim::scenario::spec::Scenario;

const SEEDS: u64 = 20;
const FILE: &str = "tests/digests.txt";

fn scenarios() -> Vec<Scenario> {
    let registry = Registry::new().with(recipe::CasCounterRecipe);
    let dirs = [
        PathBuf::from("scenarios"),
        PathBuf::from("examples/custom_recipe"),
    ];
    scenario_files(&dirs)
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .map(|f| load_in(f, &registry).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// One line per run: `file seed digest verdict`.
fn lines(all: &[Scenario]) -> Vec<String> {
    let work: Vec<(&Scenario, u64)> = all
        .iter()
        .flat_map(|s| (0..SEEDS).map(move |i| (s, s.seed_start + i)))
        .collect();
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<(usize, String)>> = Mutex::default();
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(s, seed)) = work.get(i) else {
                    break;
                };
                let line = match run_one(s, seed) {
                    Ok(o) => {
                        let verdict = if o.violations.is_empty() {
                            "pass"
                        } else {
                            "fail"
                        };
                        format!("{} {seed} {:016x} {verdict}", s.file, o.digest)
                    }
                    Err(why) => format!(
                        "{} {seed} - panicked:{}",
                        s.file,
                        why.detail.lines().next().unwrap_or("")
                    ),
                };
                out.lock().unwrap().push((i, line));
            });
        }
    });
    let mut out = out.into_inner().unwrap();
    out.sort();
    out.into_iter().map(|(_, l)| l).collect()
}

#[test]
fn the_first_seeds_of_every_scenario_run_as_committed() {
    let started = std::time::Instant::now();
    let all = scenarios();
    assert!(
        all.len() >= 26,
        "scenario files went missing: {}",
        all.len()
    );
    let got = lines(&all);
    eprintln!(
        "digests: {} runs of {} scenarios in {:.1} s",
        got.len(),
        all.len(),
        started.elapsed().as_secs_f64()
    );
    if std::env::var_os("ZOOSIM_BLESS_DIGESTS").is_some() {
        std::fs::write(FILE, got.join("\n") + "\n").expect("write tests/digests.txt");
        return;
    }
    let text = std::fs::read_to_string(FILE).expect("tests/digests.txt");
    let want: Vec<&str> = text.lines().collect();
    let differ: Vec<String> = want
        .iter()
        .zip(&got)
        .filter(|(w, g)| **w != g.as_str())
        .map(|(w, g)| format!("  committed: {w}\n  now:       {g}"))
        .collect();
    assert!(
        differ.is_empty() && want.len() == got.len(),
        "{} of {} runs differ from tests/digests.txt ({} committed, {} now):\n{}",
        differ.len(),
        got.len(),
        want.len(),
        got.len(),
        differ.join("\n")
    );
}
