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
use zoosim::history::{Event, HistOp, History};
use zoosim::proto::Op;
use zoosim::scenario::files::{load, scenario_files};
use zoosim::scenario::run::{contract_budget, run_seed_recorded};
use zoosim::scenario::runner::run_one_recorded;

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
        ("sync-without-flush", "sync-read-fresh"),
        ("event-reordered", "event-order"),
        ("skip-session-moved-check", "lost-write-fifo"),
        ("zxid-lies", "client-zxids"),
        ("expired-ephemerals-linger", "expiry-takes-effect"),
        ("frozen-follower-serves-reads", "timeliness"),
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
    decided_on_the_fast_path(&history);
}

/// Runs the fast path on `history`'s steps under every rule, checks its
/// order's certificate, and returns what its remedies did; panics where
/// it sticks.
fn decided_on_the_fast_path(history: &History) -> contract::FastStats {
    let logs = contract::session_logs(history).unwrap();
    let (model, placed) = contract::build(&logs, contract::Rules::ALL);
    let mut stats = contract::FastStats::default();
    match contract::fast_path_counted(&model, &placed, &mut stats, None) {
        Ok(order) => contract::certify(&model, &placed, &order).unwrap_or_else(|r| panic!("{r}")),
        Err(stuck) => panic!(
            "the fast path stuck after {} of {} operations at {}",
            stuck.order.len(),
            placed.len(),
            stuck.op
        ),
    }
    stats
}

/// The fast path's endgame places sessions' trailing events even where an
/// expiry the pass had left for last must come a few steps back: in seed
/// 734003258 of two-phase-commit, two sessions received a
/// NodeChildrenChanged for an expired session's ephemerals between two
/// later writes (the servers closed that session long after its client
/// was told Expired: no quorum in between). The pass placed every step
/// and then stuck on those events, and the run was undecided; now it is
/// decided on the fast path, and the certificate accepts its order.
#[test]
fn trailing_events_are_placed_with_an_expiry_taken_back_into_the_order() {
    let s = load(&PathBuf::from("scenarios/two-phase-commit.toml")).unwrap();
    let (_, history) = run_seed_recorded(&s, 734003258);
    decided_on_the_fast_path(&history);
    let report = contract::check(&history, &contract_budget()).unwrap();
    assert_eq!(report.verdict, ContractVerdict::Holds);
    assert!(report.fast, "decided by the zxid-ordered pass");
}

/// The fast path swaps a write of unknown outcome it placed for another
/// not placed: in seed 734004611 of two-phase-commit a session sent the
/// same write again after losing its reply, and the pass placed the
/// attempt that never took effect; the stuck read is placed once the
/// other attempt stands in its place. It was undecided before the swap.
#[test]
fn an_unknown_write_placed_for_the_wrong_attempt_is_swapped_for_another() {
    let s = load(&PathBuf::from("scenarios/two-phase-commit.toml")).unwrap();
    let (_, history) = run_seed_recorded(&s, 734004611);
    let stats = decided_on_the_fast_path(&history);
    assert!(stats.moves >= 1, "decided without a move: {stats:?}");
    let report = contract::check(&history, &contract_budget()).unwrap();
    assert_eq!(report.verdict, ContractVerdict::Holds);
    assert!(report.fast, "decided by the zxid-ordered pass");
}

// ---------------------------------------------------------------------------
// The broken ensembles at their subtle rates (tests/data/broken/*-subtle.toml):
// each switch breaks a small fraction of its operations, and the contract
// check, with the budget a run gives it, still catches it, naming the
// guarantee, within SUBTLE_SEEDS seeds. The figures are in docs/CONTRACT.md
// ("Subtle breakage").

/// Seeds a subtle breakage gets to be caught in.
const SUBTLE_SEEDS: u64 = 20;

/// What a history holds, for the fraction a breakage touched: requests,
/// writes, unwatched reads, syncs, watch events received.
#[derive(Default)]
struct Tally {
    requests: usize,
    writes: usize,
    unwatched_reads: usize,
    syncs: usize,
    events: usize,
}

fn tally(h: &History) -> Tally {
    let mut t = Tally::default();
    for r in &h.records {
        match &r.event {
            Event::Invoke(i) => {
                t.requests += 1;
                match &i.op {
                    HistOp::Zk(Op::Sync { .. }) => t.syncs += 1,
                    HistOp::Zk(
                        Op::Exists { watch: false, .. }
                        | Op::GetData { watch: false, .. }
                        | Op::GetChildren { watch: false, .. },
                    ) => t.unwatched_reads += 1,
                    op if op.is_write() => t.writes += 1,
                    _ => {}
                }
            }
            Event::Watch(_) => t.events += 1,
            _ => {}
        }
    }
    t
}

/// Runs seeds of `tests/data/broken/{name}-subtle.toml` from its first
/// until the run's own contract verdict (with
/// `zoosim::scenario::run::contract_budget()`) is `guarantee` broken; at
/// most [`SUBTLE_SEEDS`]. Every seed before the catching one must hold
/// the contract (the breakage did not show there), except at most
/// `undecided` seeds the check could not decide within the run's budget
/// (`Unknown`, or a failure proven without a guarantee named,
/// "contract"): printed, and pinned at what was measured (docs/CONTRACT.md,
/// "Subtle breakage"), so that a checker that decides fewer fails here.
/// Another guarantee named before the catching seed fails.
/// `ZOOSIM_SUBTLE_SURVEY=1` prints every seed's figures and verdict, all
/// [`SUBTLE_SEEDS`] of them (for docs/CONTRACT.md's table).
fn subtle_breakage_is_caught(name: &str, guarantee: &str, undecided: usize) {
    let survey = std::env::var_os("ZOOSIM_SUBTLE_SURVEY").is_some();
    let mut caught = None;
    let started = Instant::now();
    let file = format!("tests/data/broken/{name}-subtle.toml");
    let s = load(&PathBuf::from(&file)).unwrap_or_else(|e| panic!("{e}"));
    let broken = s.ensemble.broken.expect("a broken ensemble");
    assert_eq!(broken.kind.name(), name, "{file}");
    assert!(!broken.is_default_rate(), "{file}: not a subtle rate");
    let mut before = Vec::new();
    let mut wrong = Vec::new();
    let mut unknown = Vec::new();
    for seed in s.seed_start..s.seed_start + SUBTLE_SEEDS {
        let run = run_one_recorded(&s, seed);
        let outcome = run
            .result
            .unwrap_or_else(|v| panic!("{file} seed {seed}: the run failed: {v}"));
        let hits = outcome.counters.get("breakage-hits").copied().unwrap_or(0);
        let t = tally(&run.history);
        let report = run
            .contract
            .unwrap_or_else(|| panic!("{file} seed {seed}: no contract verdict"));
        let figures = format!(
            "{hits} breakage hits; {} requests ({} writes, {} unwatched reads, {} syncs), \
             {} watch events; {} search steps",
            t.requests, t.writes, t.unwatched_reads, t.syncs, t.events, report.steps
        );
        if survey {
            let verdict = match &report.verdict {
                ContractVerdict::Broken(b) => format!("broken: {}", b.guarantee.name),
                ContractVerdict::Holds => "holds".to_owned(),
                other => format!("{other:?}"),
            };
            println!("SURVEY {name}-subtle seed {seed}: {verdict}; {figures}");
            if caught.is_some() {
                continue;
            }
        }
        match &report.verdict {
            ContractVerdict::Broken(b) if b.guarantee.name == guarantee => {
                caught = Some(seed);
                println!(
                    "{name}-subtle ({broken}): caught at seed {seed} ({} of {SUBTLE_SEEDS}) \
                     by {guarantee}: {figures}; {:.1} s",
                    before.len() + 1,
                    started.elapsed().as_secs_f64()
                );
                for line in &before {
                    println!("  before it: {line}");
                }
                assert!(
                    wrong.is_empty(),
                    "{file}: seeds before the catching one named another guarantee:\n{}",
                    wrong.join("\n")
                );
                assert!(
                    unknown.len() <= undecided,
                    "{file}: {} seeds before the catching one undecided, at most {undecided} \
                     allowed:\n{}",
                    unknown.len(),
                    unknown.join("\n")
                );
                if !survey {
                    return;
                }
            }
            ContractVerdict::Holds => before.push(format!("seed {seed}: holds; {figures}")),
            // A failure proven with no guarantee named: undecided which.
            ContractVerdict::Broken(b) if b.guarantee.name == "contract" => {
                let line = format!("seed {seed}: UNDECIDED (contract): {}; {figures}", b.detail);
                before.push(line.clone());
                unknown.push(line);
            }
            ContractVerdict::Broken(b) => {
                let line = format!(
                    "seed {seed}: {} named instead of {guarantee}: {}; {figures}",
                    b.guarantee.name, b.detail
                );
                before.push(line.clone());
                wrong.push(line);
            }
            ContractVerdict::Unknown(why) => {
                let line = format!("seed {seed}: UNDECIDED: {why}; {figures}");
                before.push(line.clone());
                unknown.push(line);
            }
            // A verdict this test does not know yet (a checker fault).
            #[allow(unreachable_patterns)]
            other => {
                let line = format!("seed {seed}: {other:?}; {figures}");
                before.push(line.clone());
                wrong.push(line);
            }
        }
    }
    if caught.is_some() {
        return;
    }
    panic!(
        "{file}: the contract did not catch {broken} in {SUBTLE_SEEDS} seeds ({:.1} s):\n{}",
        started.elapsed().as_secs_f64(),
        before.join("\n")
    );
}

#[test]
fn subtle_follower_local_write_is_caught() {
    subtle_breakage_is_caught("follower-local-write", "writes-linearizable", 0);
}

#[test]
fn subtle_skip_reconnect_zxid_rule_is_caught() {
    subtle_breakage_is_caught("skip-reconnect-zxid-rule", "sequential-consistency", 0);
}

#[test]
fn subtle_reply_before_quorum_is_caught() {
    subtle_breakage_is_caught("reply-before-quorum", "writes-linearizable", 0);
}

#[test]
fn subtle_stale_read_is_caught() {
    subtle_breakage_is_caught("stale-read", "sequential-consistency", 0);
}

#[test]
fn subtle_late_watch_event_is_caught() {
    subtle_breakage_is_caught("late-watch-event", "watch-before-data", 0);
}

#[test]
fn subtle_sync_without_flush_is_caught() {
    subtle_breakage_is_caught("sync-without-flush", "sync-read-fresh", 0);
}

#[test]
fn subtle_event_reordered_is_caught() {
    subtle_breakage_is_caught("event-reordered", "event-order", 0);
}

#[test]
fn subtle_skip_session_moved_check_is_caught() {
    subtle_breakage_is_caught("skip-session-moved-check", "lost-write-fifo", 0);
}

#[test]
fn subtle_zxid_lies_is_caught() {
    subtle_breakage_is_caught("zxid-lies", "client-zxids", 0);
}

#[test]
fn subtle_expired_ephemerals_linger_is_caught() {
    subtle_breakage_is_caught("expired-ephemerals-linger", "expiry-takes-effect", 0);
}

#[test]
fn subtle_frozen_follower_serves_reads_is_caught() {
    subtle_breakage_is_caught("frozen-follower-serves-reads", "timeliness", 0);
}

/// The weaker history a rung's search tries where it cannot decide the
/// whole ([`contract::reads_of`]), with events as well (the other
/// sessions' reads, events, disconnects and reconnects left out): on the
/// correct ensemble's histories, with watches, events, reconnects and
/// expiries, no session's weaker history fails, and most are decided.
#[test]
fn a_weaker_history_with_events_holds_on_the_correct_ensembles_histories() {
    let mut decided = 0;
    for (file, seeds) in [
        ("scenarios/two-phase-commit.toml", 2),
        ("scenarios/mix-expiries-under-contention.toml", 2),
        ("scenarios/revocable-lock.toml", 1),
    ] {
        let s = load(&PathBuf::from(file)).unwrap_or_else(|e| panic!("{e}"));
        for seed in s.seed_start..s.seed_start + seeds {
            let (_, history) = run_seed_recorded(&s, seed);
            let logs = contract::session_logs(&history).unwrap();
            let events: usize = (logs.iter())
                .map(|l| {
                    (l.seen.iter())
                        .filter(|x| matches!(x, contract::Seen::Event { .. }))
                        .count()
                })
                .sum();
            assert!(events > 0, "{file} seed {seed}: no watch events");
            for i in 0..logs.len() {
                let weak = contract::reads_of(&logs, i, true);
                let report = contract::check_logs(&weak, &contract_budget());
                match report.verdict {
                    ContractVerdict::Holds => decided += 1,
                    ContractVerdict::Unknown(_) => {}
                    other => panic!("{file} seed {seed}, session {i}: {other:?}"),
                }
            }
        }
    }
    assert!(decided > 20, "only {decided} weaker histories decided");
}

/// Expiry takes effect is checked on histories with server pauses too,
/// with the bound grown by the pauses' windows: in seed 2589853485 of
/// mix-server-pauses-lock a session told it expired at 11.2 s still had
/// its node listed at 40.3 s, its leader paused three times for 19.5 s in
/// all. The rule applies (a session was told it expired, and the bound is
/// stated) and the correct run holds.
#[test]
fn expiry_under_server_pauses_is_checked_with_the_pauses_in_the_bound() {
    let s = load(&PathBuf::from("scenarios/mix-server-pauses-lock.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let (_, history) = run_seed_recorded(&s, 2_589_853_485);
    let paused_ms: u64 = (history.records.iter())
        .filter_map(|r| match &r.event {
            Event::Fault(f) if !f.skipped && f.fault == "server-pause" => {
                Some(f.params.window_ms())
            }
            _ => None,
        })
        .sum();
    assert!(paused_ms > 0, "the run has no server pause");
    let logs = contract::session_logs(&history).unwrap();
    let told = logs.iter().filter(|log| {
        log.seen.iter().any(|seen| {
            matches!(
                seen,
                contract::Seen::State {
                    event: zoosim::proto::SessionEvent::Expired,
                    ..
                }
            )
        })
    });
    assert!(told.count() > 0, "no client was told its session expired");
    let bound = contract::expiry_bound_us(&history).expect("a bound on a paused history");
    assert!(bound >= paused_ms * 1_000, "bound {bound} µs");
    let report = contract::check(&history, &contract_budget()).unwrap();
    assert_eq!(report.verdict, ContractVerdict::Holds);
}

/// A follower paused for 8 s resumes with its old tree, takes a client's
/// reconnect and answers a read from that tree before it notices it lost
/// its leader, as ZooKeeper's followers do: the staleness bound grows by
/// the servers' pauses, so this correct run (configuration seed
/// 3237020579, found over 2,000 seeds) no longer fails `timeliness`.
#[test]
fn a_paused_followers_stale_read_is_within_the_bound() {
    let s = load(&PathBuf::from("scenarios/configuration.toml")).unwrap_or_else(|e| panic!("{e}"));
    let (_, history) = run_seed_recorded(&s, 3_237_020_579);
    let paused = history
        .records
        .iter()
        .any(|r| matches!(&r.event, Event::Fault(f) if !f.skipped && f.fault == "server-pause"));
    assert!(paused, "the run has no server pause");
    let report = contract::check(&history, &contract_budget()).unwrap();
    assert_eq!(report.verdict, ContractVerdict::Holds);
}
