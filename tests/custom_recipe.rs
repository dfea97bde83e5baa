//! A recipe of the user's own under zoosim: the example's compare-and-set
//! counter (`examples/custom_recipe/`), registered as a crate of one's own
//! would, run through the runner with its scenario files: the correct one
//! passes with its counters up and faults hit, the buggy variant is
//! caught, a misspelt name is refused with its place and the registered
//! names, and the command lists it; and its model, registered beside it,
//! as `zoosim check` runs it: every claim holds over every interleaving
//! with every fault, and the buggy variant is caught with a shortest
//! counterexample (snapshot).

#[cfg(not(madsim))]
compile_error!(
    "tests/custom_recipe.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

#[path = "../examples/custom_recipe/counter.rs"]
mod counter;
#[path = "../examples/custom_recipe/model.rs"]
mod model;
#[path = "../examples/custom_recipe/recipe.rs"]
mod recipe;

use std::path::Path;
use std::process::ExitCode;

use zoosim::models::{Options, Spec};
use zoosim::prelude::{Faults, RecipeModel, Registry};
use zoosim::scenario::files::load_in;
use zoosim::scenario::runner::{run_one, run_scenario, RunOptions};
use zoosim::scenario::spec::Scenario;

fn registry() -> Registry {
    let r = Registry::new()
        .with(recipe::CasCounterRecipe)
        .with_model(model::model());
    assert!(r.errors().is_empty(), "{:?}", r.errors());
    r
}

fn scenario(file: &str) -> Scenario {
    let path = format!("examples/custom_recipe/{file}");
    load_in(Path::new(&path), &registry()).unwrap_or_else(|e| panic!("{e}"))
}

fn options(s: &Scenario) -> RunOptions {
    RunOptions {
        seeds: Some(s.test_seeds),
        seed_start: None,
        jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        shard: None,
        stop: None,
        progress: None,
    }
}

/// What a user's crate does: one call runs its scenario files as
/// `cargo test` (the correct recipe passes with its coverage goals, the
/// buggy one is caught).
#[test]
fn the_examples_scenarios_run_under_cargo_test() {
    let ran = zoosim::testing::run_scenarios(&registry(), "examples/custom_recipe");
    assert_eq!(ran.len(), 2);
    let (bug, summary) = &ran[0];
    assert!(bug.expect_failure && !summary.failures.is_empty());
}

#[test]
fn the_counter_passes_every_seed_with_its_counters_up_and_faults_hit() {
    let s = scenario("cas-counter.toml");
    assert_eq!(s.recipe_name(), "cas-counter");
    assert!(s.test_seeds >= 20);
    let started = std::time::Instant::now();
    let summary = run_scenario(&s, &options(&s), &|_| {}).expect("the seeds fit");
    eprintln!(
        "cas-counter: {} seeds in {:.1} s: {}; {:?}",
        summary.seeds_run,
        started.elapsed().as_secs_f64(),
        summary.verdict(),
        summary.counters
    );
    assert!(summary.passed(), "{}", summary.verdict());
    assert_eq!(summary.seeds_run, s.test_seeds);
    for counter in [
        "increments-acked",
        "increments-maybe",
        "conflicts",
        "sessions-lost",
    ] {
        assert!(summary.counters[counter] > 0, "{counter} stayed at zero");
    }
    let kinds_hit = summary
        .counters
        .iter()
        .filter(|(k, v)| k.starts_with("fault:") && **v > 0)
        .count();
    assert!(
        kinds_hit >= 10,
        "the nemesis hit the user's clients and servers with {kinds_hit} fault kinds: {:?}",
        summary.counters
    );
    // Client faults aim at the recipe's own clients.
    for f in ["client-crash", "lost-write-reply", "forced-expiry"] {
        assert!(summary.counters[&format!("fault:{f}")] > 0, "no {f}");
    }
}

#[test]
fn the_blind_variant_is_caught_within_its_seeds() {
    let s = scenario("bug-cas-counter-blind.toml");
    assert!(s.expect_failure);
    let summary = run_scenario(&s, &options(&s), &|_| {}).expect("the seeds fit");
    assert!(summary.passed(), "{}", summary.verdict());
    let property = summary.failures[0].property();
    assert!(
        [recipe::UNIQUE_VALUES.name, recipe::NO_LOST_INCREMENT.name].contains(&property),
        "{}",
        summary.failures[0].why()
    );
}

#[test]
fn a_seed_replays_exactly() {
    let s = scenario("cas-counter.toml");
    let a = run_one(&s, 7).expect("runs");
    let b = run_one(&s, 7).expect("runs");
    assert_eq!(a.digest, b.digest);
    assert_eq!(a.log, b.log);
    assert!(!a.log.is_empty(), "nothing happened");
    assert!(a.violations.is_empty(), "{:?}", a.violations);
    assert!(a.report.contains("increments acknowledged"), "{}", a.report);
}

#[test]
fn an_unknown_recipe_is_refused_with_its_place_and_the_registered_names() {
    let dir = std::env::temp_dir().join(format!("zoosim-custom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("typo.toml");
    std::fs::write(&file, "format = 1\nrecipe = \"cas-countr\"\n").unwrap();
    let e = load_in(&file, &registry())
        .expect_err("refused")
        .to_string();
    let want = format!(
        "{}:2:10: unknown recipe \"cas-countr\"; the recipes are: lock, ",
        file.display()
    );
    assert!(e.starts_with(&want), "{e}");
    assert!(e.ends_with("two-phase-commit, cas-counter"), "{e}");
    // A key the recipe does not declare, and a variant it does not have.
    std::fs::write(
        &file,
        "format = 1\nrecipe = \"cas-counter\"\nvariant = \"lock/herd\"\n",
    )
    .unwrap();
    let e = load_in(&file, &registry()).unwrap_err().to_string();
    assert!(
        e.contains(":3:11: unknown variant \"lock/herd\"; cas-counter's variants are: cas-counter/blind-set"),
        "{e}"
    );
    std::fs::write(
        &file,
        "format = 1\nrecipe = \"cas-counter\"\n[workload]\nclients = 3\nhold_ms = 10\n",
    )
    .unwrap();
    let e = load_in(&file, &registry()).unwrap_err().to_string();
    assert!(
        e.contains(":5:1: `hold_ms` is not a workload key of recipe cas-counter; it takes: clients, think_ms_max"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_command_lists_and_runs_the_registered_recipe() {
    let (text, unread) =
        zoosim::cli::list(&registry(), Some(Path::new("examples/custom_recipe"))).unwrap();
    assert_eq!(unread, 0, "{text}");
    for needle in [
        "  cas-counter  a shared counter",
        "variant cas-counter/blind-set",
        "workload key think_ms_max (0 to 60000",
        "property no-lost-increment",
        "counters: increments-acked, increments-maybe, conflicts, sessions-lost",
        "bug-cas-counter-blind",
        "model (`zoosim check cas-counter`): each client increments the counter twice",
        "variants: cas-counter, cas-counter/blind-set",
        "claim unique-values (the oracle's property above)",
        "claim every-live-client-increments: every client whose process",
        "reach goals (sometimes): increment-acked, conflict-met",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
    // The built-in command does not know it: a file it cannot read.
    let (builtin, unread) =
        zoosim::cli::list(&Registry::new(), Some(Path::new("examples/custom_recipe"))).unwrap();
    assert_eq!(unread, 2, "{builtin}");
    assert!(!builtin.contains("  cas-counter  "));
    assert!(
        builtin.contains("unknown recipe \"cas-counter\""),
        "{builtin}"
    );
    // The whole command, with the recipe: an expected failure is as expected.
    let run = |r: Registry, file: &str| {
        zoosim::cli::main_from(r, ["zoosim", "run", file, "--seeds", "5", "--jobs", "1"])
    };
    let bug = "examples/custom_recipe/bug-cas-counter-blind.toml";
    assert_eq!(run(registry(), bug), ExitCode::SUCCESS);
    // Without it, the file is refused; a registry with a bad declaration
    // is refused before anything runs.
    assert_eq!(run(Registry::new(), bug), ExitCode::from(2));
    let bad = Registry::new()
        .with(recipe::CasCounterRecipe)
        .with(recipe::CasCounterRecipe);
    assert_eq!(bad.errors().len(), 1);
    assert_eq!(run(bad, bug), ExitCode::from(2));
}

/// What `zoosim check cas-counter` runs: the registry's model.
fn check_model(variant: Option<&str>, faults: Faults) -> zoosim::models::Report {
    let spec = Spec {
        variant: variant.map(str::to_owned),
        clients: 2,
        faults,
        max_faults: 1,
        options: Options::default(),
        symmetry: false,
    };
    let model = registry().model("cas-counter").expect("registered");
    model.check(&spec).expect("a model of 2 clients")
}

/// The model checks the machine the simulation runs: with 2 clients, each
/// fault kind once, at most one a run, breadth-first and exhaustive, every
/// claim holds and every reach goal (each fault taken among them) is
/// reached.
#[test]
fn the_counters_model_holds_every_claim_under_every_fault() {
    let report = check_model(None, Faults::ONE_EACH);
    let checked = &report.checked;
    eprintln!(
        "cas-counter model: {} states, {} unique",
        checked.states, checked.unique
    );
    assert!(checked.conclusive, "not exhaustive: {report}");
    assert!(checked.all_hold(), "{report}");
    let names: Vec<&str> = checked.verdicts.iter().map(|v| v.name).collect();
    for claim in model::CounterModel::CLAIMS {
        assert!(
            names.contains(&claim.name),
            "{} unchecked: {names:?}",
            claim.name
        );
    }
    for fault in zoosim::models::Fault::ALL {
        assert!(names.contains(&fault.property()), "{fault:?}: {names:?}");
    }
    assert!(
        checked.unique > 1_000,
        "{} states: too few to mean much",
        checked.unique
    );
}

/// The blind write is caught by the model with no fault at all: two
/// clients read the same value and both write value + 1. The oracle's own
/// property is the one named; the counterexample is the snapshot's.
#[test]
fn the_blind_counters_model_is_caught_with_a_shortest_counterexample() {
    let report = check_model(Some(recipe::BLIND), Faults::NONE);
    assert!(report.checked.any_fails(), "{report}");
    let (name, steps, text) = report
        .counterexamples
        .iter()
        .find(|(name, _, _)| *name == recipe::UNIQUE_VALUES.name)
        .unwrap_or_else(|| panic!("unique-values not caught:\n{report}"));
    assert_eq!(*steps, 6, "{text}");
    insta::assert_snapshot!(
        "cas-counter-blind-set",
        format!("counterexample to {name} ({steps} steps)\n{text}")
    );
}

/// A model is registered beside its recipe, under its name: without the
/// recipe, or twice, it is refused and the command runs nothing.
#[test]
fn a_model_without_its_recipe_or_twice_is_refused() {
    let alone = Registry::new().with_model(model::model());
    let e = alone.errors()[0].to_string();
    assert!(e.contains("no recipe is named \"cas-counter\""), "{e}");
    let twice = registry().with_model(model::model());
    let e = twice.errors()[0].to_string();
    assert!(e.contains("a model of it is registered already"), "{e}");
    let check = |r: Registry| zoosim::cli::main_from(r, ["zoosim", "check", "cas-counter"]);
    assert_eq!(check(alone), ExitCode::from(2));
    assert_eq!(check(Registry::new()), ExitCode::from(2));
}
