//! The seed runner: a scenario's seeds on all cores (each seed its own
//! simulation, so they are independent), optionally one shard of them, a
//! summary per scenario, and the verdict: a correct recipe must pass every
//! seed and reach its coverage goals; a buggy variant must fail within its
//! seeds (the first failing seed is reported).

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::budget::{self, Progress};
use super::run::{history_meta, judged, lines, run_seed_recording, SeedOutcome};
use super::spec::Scenario;
use super::verdict::{run_properties, Violation};
use zoosim_core::check::contract::ContractReport;
use zoosim_core::history::{Event, History, Record};
use zoosim_sim::sim::sim_recorder;

/// How to run a scenario's seeds ([`run_scenario`]).
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Overrides the scenario's seed count.
    pub seeds: Option<u64>,
    /// Overrides the scenario's first seed.
    pub seed_start: Option<u64>,
    /// Threads running seeds in parallel (0 counts as 1).
    pub jobs: usize,
    /// (i, n): only the seeds whose index is i modulo n (coverage goals are
    /// then reported, not enforced).
    pub shard: Option<(u64, u64)>,
    /// Set (by Ctrl-C) to stop handing out seeds and to stop the seeds in
    /// flight at their next simulated event ([`budget::stop_on`]): those
    /// are not counted, and the summary counts what ran
    /// ([`Summary::interrupted`]).
    pub stop: Option<&'static AtomicBool>,
    /// Where each thread shows its seed in flight (for a progress line
    /// within long seeds).
    pub progress: Option<Arc<Progress>>,
}

/// A failing seed, as the summary keeps it.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The failing seed.
    pub seed: u64,
    /// At least one.
    pub violations: Vec<Violation>,
}

impl Failure {
    /// Every violation, one per line.
    pub fn why(&self) -> String {
        lines(&self.violations)
    }

    /// The first violation's property: the one a shrink keeps failing.
    pub fn property(&self) -> &'static str {
        self.violations.first().map_or("", |v| v.property)
    }
}

/// A seed that passed undecided: no property failed, but ZooKeeper's
/// contract could not be decided on its history within the check's
/// budget. Not a failure, and not a clean pass either: it is listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undecided {
    /// The seed.
    pub seed: u64,
    /// Why the contract check did not decide (the search's own words).
    pub why: String,
}

/// What a scenario's sweep found. A scenario expected to fail stops at
/// its first failing seed; the others run every seed.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The scenario's name.
    pub name: String,
    /// The scenario's file.
    pub file: String,
    /// The scenario passes when a seed fails.
    pub expect_failure: bool,
    /// Seeds run and counted.
    pub seeds_run: u64,
    /// Failing seeds, lowest first.
    pub failures: Vec<Failure>,
    /// Seeds that passed with the contract undecided, lowest first.
    pub undecided: Vec<Undecided>,
    /// Simulated ms, summed over the seeds counted.
    pub sim_ms: u64,
    /// Wall-clock ms the sweep took.
    pub wall_ms: u64,
    /// Recipe operations logged, summed over the seeds counted.
    pub ops: u64,
    /// Every counter ([`SeedOutcome::counters`]), summed over the seeds
    /// counted.
    pub counters: BTreeMap<String, u64>,
    /// Coverage goals that stayed at zero.
    pub missed_goals: Vec<String>,
    /// All of the scenario's seeds were given, not one shard of them:
    /// coverage goals and an expected failure are judged.
    pub whole: bool,
    /// Stopped ([`RunOptions::stop`]) before its seeds were all run (and
    /// before the failure it expected): neither passed nor judged.
    pub interrupted: bool,
}

impl Summary {
    /// The scenario did what it should. Undecided seeds do not make it
    /// fail (they are listed in [`Summary::undecided`] and named by
    /// [`Summary::verdict`]).
    pub fn passed(&self) -> bool {
        !self.interrupted
            && passed(
                self.expect_failure,
                self.failures.len(),
                &self.missed_goals,
                self.whole,
            )
    }

    /// Why not, in a line.
    pub fn verdict(&self) -> String {
        let first = self.failures.first().map(|f| (f.seed, f.why()));
        let v = verdict(
            self.expect_failure,
            self.seeds_run,
            self.failures.len(),
            first.as_ref().map(|(seed, why)| (*seed, why.as_str())),
            &self.missed_goals,
            self.whole && !self.interrupted,
        );
        let v = if self.interrupted {
            interrupted_verdict(self.seeds_run, &v)
        } else {
            v
        };
        with_undecided(v, self.undecided.len())
    }
}

/// Whether a scenario did what it should, from its counts: a run's
/// [`Summary`] and a sweep's merged shards are judged alike. A shard
/// (`whole` false) fails only on an unexpected failure: whether an
/// expected one is caught, and coverage, are for all the shards together.
pub fn passed(expect_failure: bool, failures: usize, missed_goals: &[String], whole: bool) -> bool {
    if expect_failure {
        failures > 0 || !whole
    } else {
        failures == 0 && missed_goals.is_empty()
    }
}

/// [`passed`]'s verdict in a line (`whole` as there); `first` is the lowest failing seed and
/// its violations, one per line.
pub fn verdict(
    expect_failure: bool,
    seeds_run: u64,
    failures: usize,
    first: Option<(u64, &str)>,
    missed_goals: &[String],
    whole: bool,
) -> String {
    match (expect_failure, first) {
        (true, Some((seed, _))) => {
            format!("caught as expected at seed {seed} ({seeds_run} seeds)")
        }
        (true, None) if !whole => {
            format!("not caught in this shard's {seeds_run} seeds (judged over all shards)")
        }
        (true, None) => format!("NOT caught in {seeds_run} seeds"),
        (false, Some((seed, why))) => format!(
            "FAILED: {failures} of {seeds_run} seeds; first {seed}: {}",
            first_line(why)
        ),
        (false, None) if !missed_goals.is_empty() => format!(
            "FAILED: coverage goals at zero: {}",
            missed_goals.join(", ")
        ),
        (false, None) => "ok".to_owned(),
    }
}

/// A verdict with the seeds left undecided named after it, so that a
/// scenario with undecided seeds never reads as a clean "ok" (e.g. "ok
/// (2 undecided)").
pub fn with_undecided(verdict: String, undecided: usize) -> String {
    if undecided == 0 {
        verdict
    } else {
        format!("{verdict} ({undecided} undecided)")
    }
}

/// The verdict of a scenario whose run was interrupted after `seeds_run`
/// seeds, from what its counts say (`v`, judged as a shard's).
pub fn interrupted_verdict(seeds_run: u64, v: &str) -> String {
    if v.starts_with("FAILED") {
        format!("INTERRUPTED after {seeds_run} seeds; {v}")
    } else {
        format!("INTERRUPTED after {seeds_run} seeds (no failure so far; coverage not judged)")
    }
}

/// The coverage goals a sweep over all of a scenario's seeds left at zero.
/// Judged only where they mean something: a scenario expected to fail, or
/// one already failing, is judged by its failures.
pub fn missed_goals(
    expect_failure: bool,
    failures: usize,
    goals: &[String],
    counters: &BTreeMap<String, u64>,
) -> Vec<String> {
    if expect_failure || failures > 0 {
        return Vec::new();
    }
    goals
        .iter()
        .filter(|g| counters.get(*g).copied().unwrap_or(0) == 0)
        .cloned()
        .collect()
}

/// The first line of a failure, for one-line summaries.
pub fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// The seeds a run takes its shard of: (first seed, how many).
pub fn seed_range(s: &Scenario, o: &RunOptions) -> (u64, u64) {
    (
        o.seed_start.unwrap_or(s.seed_start),
        o.seeds.unwrap_or(s.seeds),
    )
}

/// A run's seeds that do not fit in a seed (u64): refused before any seed
/// runs, rather than wrapped round to 0 (or, in a debug build, a panic).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedOverflow {
    /// The scenario.
    pub scenario: String,
    /// The first seed.
    pub start: u64,
    /// How many were asked for.
    pub count: u64,
}

impl std::fmt::Display for SeedOverflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} seeds from {} pass the largest seed, {} (at most {} from there)",
            self.scenario,
            self.count,
            self.start,
            u64::MAX,
            u64::MAX - self.start + 1
        )
    }
}

impl std::error::Error for SeedOverflow {}

/// The seeds a run takes, in order, computed as they are asked for: a
/// sweep of 2^64 - 1 seeds holds no list of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seeds {
    start: u64,
    /// The shard's first index among the scenario's seeds, and the step.
    first: u64,
    step: u64,
    len: u64,
}

impl Seeds {
    /// How many seeds the run takes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the run takes none (a shard past a short range).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`th seed of the run (`i < len`).
    pub fn get(&self, i: u64) -> u64 {
        assert!(i < self.len, "seed index {i} of {}", self.len);
        // In range: checked by `seeds_of` for the whole range.
        self.start + self.first + i * self.step
    }

    /// The first `n` seeds of the run.
    pub fn take(&self, n: u64) -> impl Iterator<Item = u64> + '_ {
        (0..n.min(self.len)).map(|i| self.get(i))
    }
}

/// The seeds a run takes, or why they do not fit in a seed.
pub fn seeds_of(s: &Scenario, o: &RunOptions) -> Result<Seeds, SeedOverflow> {
    let (start, n) = seed_range(s, o);
    if n > 0 && start.checked_add(n - 1).is_none() {
        return Err(SeedOverflow {
            scenario: s.name.clone(),
            start,
            count: n,
        });
    }
    let (first, step) = o.shard.unwrap_or((0, 1));
    let len = if first < n {
        (n - first).div_ceil(step)
    } else {
        0
    };
    Ok(Seeds {
        start,
        first,
        step,
        len,
    })
}

/// One seed as run: its outcome (or its panic, an `invariants`
/// violation), what its clients saw, and the contract check's report.
#[derive(Clone, Debug)]
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// What the seed did; a panic in the simulation (an asserted
    /// invariant) is a failure like any other, of `invariants`.
    pub result: Result<SeedOutcome, Violation>,
    /// The client-level history, up to the panic if there was one.
    pub history: History,
    /// ZooKeeper's contract on the history: None when the run panicked
    /// (a partial history proves nothing) or the history was unreadable
    /// (then an `invariants` violation says so).
    pub contract: Option<ContractReport>,
}

impl SeedRun {
    /// The seed failed: a violation, or a panic.
    pub fn failed(&self) -> bool {
        !matches!(&self.result, Ok(out) if !out.failed())
    }

    /// The run was interrupted before its end ([`SeedOutcome::interrupted`]):
    /// neither failed nor passed.
    pub fn interrupted(&self) -> bool {
        matches!(&self.result, Ok(out) if out.interrupted)
    }

    /// Why the seed passed undecided ([`SeedOutcome::passed_undecided`]).
    pub fn undecided(&self) -> Option<&str> {
        self.result.as_ref().ok()?.passed_undecided()
    }
}

/// Runs one seed, recorded and judged by its oracle and by ZooKeeper's
/// contract ([`judged`]); a panic in the simulation (an asserted invariant) is a
/// failure like any other: of the `invariants` property.
pub fn run_one_recorded(s: &Scenario, seed: u64) -> SeedRun {
    let recorder = sim_recorder();
    let run = catch_unwind(AssertUnwindSafe(|| run_seed_recording(s, seed, &recorder)));
    match run {
        // Stopped by an interrupt: nothing to judge (and no time for it).
        Ok(outcome) if outcome.interrupted => SeedRun {
            seed,
            history: History {
                meta: history_meta(s, seed, outcome.drawn.servers),
                records: recorder.records(),
            },
            result: Ok(outcome),
            contract: None,
        },
        Ok(outcome) => {
            let (outcome, history, contract) = judged(s, seed, outcome, &recorder);
            SeedRun {
                seed,
                result: Ok(outcome),
                history,
                contract,
            }
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            let records = recorder.records();
            let servers = servers_seen(&records);
            SeedRun {
                seed,
                result: Err(Violation::new(
                    run_properties::INVARIANTS,
                    format!("panicked: {msg}"),
                )),
                history: History {
                    meta: history_meta(s, seed, servers),
                    records,
                },
                contract: None,
            }
        }
    }
}

/// [`run_one_recorded`]'s outcome alone.
pub fn run_one(s: &Scenario, seed: u64) -> Result<SeedOutcome, Violation> {
    run_one_recorded(s, seed).result
}

/// The servers a (partial) history shows announcing a role: all of them,
/// from the start of a run.
fn servers_seen(records: &[Record]) -> u32 {
    let seen: std::collections::BTreeSet<u32> = records
        .iter()
        .filter_map(|r| match &r.event {
            Event::Role(role) => Some(role.server),
            _ => None,
        })
        .collect();
    seen.len() as u32
}

/// Runs the scenario's seeds on `jobs` threads; `on_seed` is given every
/// seed as run (on the thread that ran it, in no particular order), with
/// its history: the place to write histories or reports, since the
/// summary keeps only what it counts. A scenario expected to fail stops
/// at its first failure.
/// Seeds that do not fit in a seed are refused before any runs.
pub fn run_scenario(
    s: &Scenario,
    o: &RunOptions,
    on_seed: &(dyn Fn(&SeedRun) + Sync),
) -> Result<Summary, SeedOverflow> {
    let seeds = seeds_of(s, o)?;
    let started = std::time::Instant::now();
    let next = AtomicU64::new(0);
    // Expected to fail: no seed after the lowest failing one is needed.
    let stop_after = AtomicU64::new(u64::MAX);
    let results: Mutex<Vec<(u64, Result<SeedOutcome, Violation>)>> = Mutex::default();
    let run_seeds = || loop {
        // Checked before a seed is taken: every seed taken is run, so the
        // seeds counted are the first ones, with no gap but the seeds an
        // interrupt stopped in flight (not counted: they did not end).
        if o.stop.is_some_and(|stop| stop.load(Ordering::Relaxed)) {
            break;
        }
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= seeds.len() || i > stop_after.load(Ordering::Relaxed) {
            break;
        }
        let seed = seeds.get(i);
        // Keep what the summary needs; a long sweep must not hold every
        // seed's outcome log.
        let run = run_one_recorded(s, seed);
        if run.interrupted() {
            // Neither a failure nor a pass: left out, and the summary says
            // the run was interrupted (fewer results than seeds).
            break;
        }
        if run.failed() && s.expect_failure {
            stop_after.fetch_min(i, Ordering::Relaxed);
        }
        on_seed(&run);
        let r = run.result.map(|mut out| {
            out.log = Vec::new();
            out.event_ms = Vec::new();
            out.faults = Vec::new();
            out.report = String::new();
            out
        });
        results.lock().unwrap().push((i, r));
    };
    std::thread::scope(|scope| {
        for _ in 0..o.jobs.max(1) {
            scope.spawn(|| {
                budget::publish_to(o.progress.as_ref().map(|p| p.gauge()));
                budget::stop_on(o.stop);
                run_seeds();
                budget::stop_on(None);
                budget::publish_to(None);
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(i, _)| *i);
    let limit = stop_after.load(Ordering::Relaxed);
    let caught = limit != u64::MAX;
    let interrupted = !caught && (results.len() as u64) < seeds.len();
    let mut summary = Summary {
        name: s.name.clone(),
        file: s.file.clone(),
        expect_failure: s.expect_failure,
        seeds_run: 0,
        failures: Vec::new(),
        undecided: Vec::new(),
        sim_ms: 0,
        wall_ms: started.elapsed().as_millis() as u64,
        ops: 0,
        counters: BTreeMap::new(),
        missed_goals: Vec::new(),
        // Shard 0/1 is the whole sweep.
        whole: o.shard.is_none_or(|(_, n)| n == 1),
        interrupted,
    };
    for (i, r) in results {
        if i > limit {
            continue; // ran in parallel past the first failure
        }
        summary.seeds_run += 1;
        match r {
            Ok(out) => {
                summary.sim_ms += out.sim_ms;
                summary.ops += out.ops;
                if let Some(why) = out.passed_undecided() {
                    summary.undecided.push(Undecided {
                        seed: out.seed,
                        why: why.to_owned(),
                    });
                }
                for (k, v) in out.counters {
                    *summary.counters.entry(k).or_default() += v;
                }
                if !out.violations.is_empty() {
                    summary.failures.push(Failure {
                        seed: out.seed,
                        violations: out.violations,
                    });
                }
            }
            Err(panic) => summary.failures.push(Failure {
                seed: seeds.get(i),
                violations: vec![panic],
            }),
        }
    }
    // A shard sees a part of the seeds: its coverage is reported, and the
    // whole sweep's is for whoever gathers the shards to judge (`zoosim
    // merge`).
    if summary.whole && !summary.interrupted {
        summary.missed_goals = missed_goals(
            s.expect_failure,
            summary.failures.len(),
            &s.coverage,
            &summary.counters,
        );
    }
    Ok(summary)
}

#[cfg(test)]
mod progress_tests {
    //! A long seed shows its progress ([`budget`]) while the runner runs it.
    use super::*;
    use crate::budget::PUBLISH_EVERY;
    use crate::spec::parse;

    #[test]
    fn a_long_seed_shows_its_progress_while_it_runs() {
        // One client, 0 ms holds: thousands of outcomes in a simulated
        // minute, published every PUBLISH_EVERY of them.
        let s = parse(
            "busy.toml",
            "format = 1\nrecipe = \"lock\"\nseeds = 1\nseed_start = 7\n\
             [workload]\nclients = 3\nhold_ms = 0\nthink_ms_max = 0\n\
             [faults]\nkinds = []\nphase_ms = 60000\n",
        )
        .expect("valid");
        let progress = Arc::new(Progress::default());
        let options = RunOptions {
            seeds: None,
            seed_start: None,
            jobs: 1,
            shard: None,
            stop: None,
            progress: Some(progress.clone()),
        };
        let seen: Mutex<Vec<(u64, u64, u64)>> = Mutex::default();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    seen.lock().unwrap().extend(progress.in_flight());
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            });
            let summary = run_scenario(&s, &options, &|_| {}).expect("the seeds fit");
            done.store(true, Ordering::Relaxed);
            assert_eq!(summary.seeds_run, 1);
            assert!(summary.ops > 3 * PUBLISH_EVERY, "{} ops", summary.ops);
        });
        let seen = seen.into_inner().unwrap();
        let moving: Vec<_> = seen.iter().filter(|(_, _, n)| *n > 0).collect();
        assert!(moving.iter().all(|(seed, _, _)| *seed == 7), "{moving:?}");
        // Seen at two points at least, the later further on.
        let first = moving.first().expect("progress published");
        let last = moving.last().unwrap();
        assert!(
            last.2 > first.2 && last.1 > first.1,
            "{first:?} .. {last:?}"
        );
        // Once the seed ended, nothing is in flight.
        assert!(progress.in_flight().is_empty());
    }
}
