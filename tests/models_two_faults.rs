//! The two-fault tier: every model of the catalog at 2 clients, with
//! every fault kind and up to two faults in one run (`zoosim check MODEL
//! --clients 2 --max-faults 2`), holds every claim over every
//! interleaving, reaches every goal, and does take two faults in some
//! run; and its state graph has no cycle, which its `eventually` verdicts
//! rest on (`models::cycle`). One fault a run (the command's default) misses every bug that
//! needs two, such as a lost create reply followed by a lagging read
//! (tests/models.rs shows one); this tier is where pairs are explored
//! for every model. Larger sizes are in `benches/models.rs`.

use std::time::Instant;

use zoosim::models::cycle::Bound;
use zoosim::models::{catalog, Faults, Options, Spec, TWO_FAULTS};

fn two_faults_hold(name: &str) {
    let started = Instant::now();
    let model = catalog()
        .into_iter()
        .find(|m| m.name() == name)
        .unwrap_or_else(|| panic!("no model {name} in the catalog"));
    let spec = Spec {
        variant: None,
        clients: 2,
        faults: Faults::ONE_EACH,
        max_faults: 2,
        options: Options::default(),
        symmetry: false,
    };
    let report = model.check(&spec).unwrap_or_else(|e| panic!("{name}: {e}"));
    let checked = &report.checked;
    assert!(report.bounds.exhaustive, "{name}: not exhaustive");
    let failing: Vec<_> = checked.verdicts.iter().filter(|v| !v.holds).collect();
    assert!(failing.is_empty(), "{name}: {report}");
    // Not vacuous: some run took two faults.
    assert!(
        checked.verdict(TWO_FAULTS).is_some_and(|v| v.holds),
        "{name}: no run took two faults"
    );
    // The `eventually` verdicts mean something only if every run ends.
    let bound = Bound {
        states: 4 * checked.unique + 1000,
        depth: 10 * checked.depth + 100,
    };
    let walked = model
        .walk(&spec, bound)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .unwrap_or_else(|why| panic!("{name}: {why}"));
    assert!(walked >= checked.unique, "{name}: walked {walked}");
    println!(
        "{name}: {} ({} unique states, depth {}, acyclic) in {:.1} s",
        report.bounds,
        checked.unique,
        checked.depth,
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn lock() {
    two_faults_hold("lock");
}

#[test]
fn shared_lock() {
    two_faults_hold("shared-lock");
}

#[test]
fn revocable_lock() {
    two_faults_hold("revocable-lock");
}

#[test]
fn election() {
    two_faults_hold("election");
}

#[test]
fn barrier() {
    two_faults_hold("barrier");
}

#[test]
fn double_barrier() {
    two_faults_hold("double-barrier");
}

#[test]
fn queue() {
    two_faults_hold("queue");
}

#[test]
fn priority_queue() {
    two_faults_hold("priority-queue");
}

#[test]
fn configuration() {
    two_faults_hold("configuration");
}

#[test]
fn group_membership() {
    two_faults_hold("group-membership");
}

#[test]
fn two_phase_commit() {
    two_faults_hold("two-phase-commit");
}

/// Every model of the catalog is in this tier: a model added to the
/// catalog without its test here fails this.
#[test]
fn every_model_is_in_the_tier() {
    let source = include_str!("models_two_faults.rs");
    for m in catalog() {
        let call = format!("two_faults_hold(\"{}\")", m.name());
        assert!(source.contains(&call), "{} has no two-fault test", m.name());
    }
}
