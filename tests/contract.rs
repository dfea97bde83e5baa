//! ZooKeeper's contract, checked on recorded histories of simulated runs:
//! the correct ensemble passes it on every scenario in scenarios/, and each
//! deliberately broken ensemble (tests/data/broken/) is caught with the
//! guarantee it breaks named.

#[cfg(not(madsim))]
compile_error!(
    "tests/contract.rs needs --cfg madsim (set in .cargo/config.toml; a RUSTFLAGS \
     environment variable replaces it)"
);

use std::path::PathBuf;
use std::time::Instant;

use zoosim::check::contract::{self, ContractVerdict};
use zoosim::check::lin::Budget;
use zoosim::scenario::files::{load, scenario_files};
use zoosim::scenario::run::{contract_budget, run_seed_recorded};

fn budget() -> Budget<'static> {
    Budget {
        max_steps: 2_000_000,
        max_memo_bytes: 128 << 20,
        stop: None,
    }
}

fn seeds() -> u64 {
    std::env::var("ZOOSIM_CONTRACT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

#[test]
fn the_correct_ensemble_keeps_the_contract_in_every_scenario() {
    let started = Instant::now();
    let files = scenario_files(&[PathBuf::from("scenarios")]).unwrap();
    let mut checked = 0;
    let mut placed = 0;
    let mut failures = Vec::new();
    let mut unknown = Vec::new();
    for f in &files {
        let s = load(f).unwrap_or_else(|e| panic!("{e}"));
        for seed in s.seed_start..s.seed_start + seeds() {
            let (_, h) = run_seed_recorded(&s, seed);
            let r = contract::check(&h, &budget()).unwrap_or_else(|e| panic!("{e}"));
            checked += 1;
            placed += r.placed;
            match r.verdict {
                ContractVerdict::Holds => {}
                // The search could not decide within its budget: not a
                // pass, and not a violation either (reported below).
                ContractVerdict::Unknown(why) => {
                    unknown.push(format!("{} seed {seed}: {why}", s.name))
                }
                ContractVerdict::Broken(b) => failures.push(format!(
                    "{} seed {seed}: {}: {}",
                    s.name, b.guarantee.name, b.detail
                )),
                ContractVerdict::CheckerFault(why) => {
                    failures.push(format!("{} seed {seed}: checker fault: {why}", s.name))
                }
            }
        }
    }
    println!(
        "contract: {checked} runs, {placed} operations placed, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    for u in &unknown {
        println!("UNDECIDED (search budget): {u}");
    }
    assert!(placed > 1000, "the histories held almost nothing: {placed}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The fast path (zxid order, deferral, a local search where it sticks)
    // decides every run checked here: an undecided run is a failure.
    assert!(unknown.is_empty(), "undecided runs: {}", unknown.join("\n"));
}

/// Each broken ensemble's history fails the contract, with the guarantee
/// it breaks named.
#[test]
fn each_broken_ensemble_fails_the_contract() {
    let started = Instant::now();
    let expect = [
        ("follower-local-write", "writes-linearizable"),
        ("late-watch-event", "watch-before-data"),
        ("skip-reconnect-zxid-rule", "sequential-consistency"),
        ("reply-before-quorum", "writes-linearizable"),
        ("stale-read", "sequential-consistency"),
    ];
    let mut wrong = Vec::new();
    for (name, guarantee) in expect {
        let s = load(&PathBuf::from(format!("tests/data/broken/{name}.toml"))).unwrap();
        let seed = s.seed_start;
        let (_, h) = run_seed_recorded(&s, seed);
        let r = contract::check(&h, &budget()).unwrap();
        let got = match &r.verdict {
            ContractVerdict::Broken(b) => format!("broken: {}: {}", b.guarantee.name, b.detail),
            other => format!("{other:?}"),
        };
        println!("{name} seed {seed}: {got}");
        let ok = matches!(&r.verdict, ContractVerdict::Broken(b) if b.guarantee.name == guarantee);
        if !ok {
            wrong.push(format!("{name}: expected {guarantee}, got {got}"));
        }
    }
    println!("broken ensembles: {:.1} s", started.elapsed().as_secs_f64());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The three broken ensembles whose guarantees need no events are caught
/// in every test seed within the budget a run gives its check (the
/// search over classes of states refutes them; see docs/CONTRACT.md).
/// Not in every seed there is: of reply-before-quorum's seeds
/// 3020693504..3020693508, 3020693505 is undecided within that budget
/// (53 of 2205 operations ordered at best); its test seeds start after it.
#[test]
fn broken_reads_and_writes_are_caught_within_a_runs_budget() {
    let expect = [
        ("skip-reconnect-zxid-rule", "sequential-consistency"),
        ("reply-before-quorum", "writes-linearizable"),
        ("stale-read", "sequential-consistency"),
    ];
    let mut wrong = Vec::new();
    for (name, guarantee) in expect {
        let s = load(&PathBuf::from(format!("tests/data/broken/{name}.toml"))).unwrap();
        for seed in s.seed_start..s.seed_start + s.test_seeds {
            let (_, h) = run_seed_recorded(&s, seed);
            let r = contract::check(&h, &contract_budget()).unwrap();
            match &r.verdict {
                ContractVerdict::Broken(b) if b.guarantee.name == guarantee => {}
                other => wrong.push(format!(
                    "{name} seed {seed}: expected {guarantee}, got {other:?}"
                )),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The fast path takes back its own choices: in seed 274137095 of
/// mix-lost-replies its zxid order places a lost delete to explain an
/// event that a later, answered delete explains, and the answered delete
/// then finds no node. It is decided on the fast path all the same, by a
/// search from a state kept before that choice (and was stuck without).
#[test]
fn a_wrong_early_choice_is_searched_again_from_a_kept_state() {
    let s = load(&PathBuf::from("scenarios/mix-lost-replies.toml")).unwrap();
    let (_, history) = run_seed_recorded(&s, 274137095);
    let logs = contract::session_logs(&history).unwrap();
    let (model, placed) = contract::build(&logs, contract::Rules::ALL);
    if let Err(stuck) = contract::fast_path(&model, &placed) {
        panic!(
            "the fast path stuck after {} of {} operations at {}",
            stuck.order.len(),
            placed.len(),
            stuck.op
        );
    }
}
