//! The shrinker keeps the failure it was given: for every buggy variant's
//! scenario (zoosim's and the example's), the first seed caught is shrunk,
//! and the shrunk scenario — written out and read back, as a user gets it
//! — fails at that seed with the same named property as the original run.

#[cfg(not(madsim))]
compile_error!(
    "tests/shrink.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

#[path = "../examples/custom_recipe/counter.rs"]
mod counter;
#[path = "../examples/custom_recipe/recipe.rs"]
mod recipe;

use std::path::PathBuf;

use zoosim::scenario::files::{load_in, scenario_files};
use zoosim::scenario::registry::Registry;
use zoosim::scenario::runner::{run_one, run_scenario, RunOptions};
use zoosim::scenario::shrink::shrink;
use zoosim::scenario::spec::parse_in;

#[test]
fn every_shrunk_scenario_fails_with_its_originals_property() {
    let started = std::time::Instant::now();
    let registry = Registry::new().with(recipe::CasCounterRecipe);
    let dirs = [
        PathBuf::from("scenarios"),
        PathBuf::from("examples/custom_recipe"),
    ];
    let only = std::env::var("ZOOSIM_SCENARIO").unwrap_or_default();
    let bugs: Vec<_> = scenario_files(&dirs)
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .map(|f| load_in(f, &registry).unwrap_or_else(|e| panic!("{e}")))
        .filter(|s| s.expect_failure && s.name.contains(&only))
        .collect();
    assert!(
        bugs.len() >= 8 || !only.is_empty(),
        "{} buggy variants",
        bugs.len()
    );
    let mut properties = std::collections::BTreeSet::new();
    for s in &bugs {
        let t = std::time::Instant::now();
        let options = RunOptions {
            seeds: Some(s.test_seeds),
            seed_start: None,
            jobs: 1,
            shard: None,
            stop: None,
            progress: None,
        };
        let summary = run_scenario(s, &options, &|_| {}).expect("the seeds fit");
        let caught = summary
            .failures
            .first()
            .unwrap_or_else(|| panic!("{}: not caught", s.name));
        let original = caught.property();
        let shrunk = shrink(s, caught.seed, &|_| {})
            .unwrap_or_else(|e| panic!("{} seed {}: {e}", s.name, caught.seed));
        assert_eq!(
            shrunk.property, original,
            "{}: the shrink kept another property",
            s.name
        );
        // As the user gets it: the file, read back.
        let file = parse_in(&s.file, &shrunk.scenario.to_toml(), &registry)
            .unwrap_or_else(|e| panic!("{}: the shrunk file: {e}", s.name));
        let again = run_one(&file, shrunk.seed).expect("runs");
        assert!(
            again.violations.iter().any(|v| v.property == original),
            "{} seed {}: the shrunk scenario violates {:?}, not {original}",
            s.name,
            shrunk.seed,
            again.violations
        );
        properties.insert(original);
        eprintln!(
            "{:<46} seed {:>10}: {original}, {} runs, {:.1} s",
            s.name,
            caught.seed,
            shrunk.runs,
            t.elapsed().as_secs_f64()
        );
    }
    eprintln!(
        "shrink: {} scenarios in {:.1} s",
        bugs.len(),
        started.elapsed().as_secs_f64()
    );
    // The variants fail in different ways: more than one property is
    // kept, so "the same property" is a real constraint.
    assert!(properties.len() >= 2 || !only.is_empty(), "{properties:?}");
}
