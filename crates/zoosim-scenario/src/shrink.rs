//! Shrinking a failing seed (delta debugging, Zeller's ddmin): the faults
//! the nemesis tried become a hand-placed schedule, random faults off;
//! then faults are dropped while the seed still fails, and the workload is
//! made smaller (fewer clients, fewer operations, a shorter fault phase).
//! The result is a scenario file that fails deterministically: one seed,
//! every fault written out.
//!
//! Placed faults replay the seed's run exactly: each carries every
//! parameter the nemesis drew and the instant it was due, the nemesis
//! draws from its own stream, and the seed's draws from the scenario's
//! lists are pinned (one draw each whatever the list). Past that first
//! step every candidate is a different run of the same seed, judged only
//! by whether it still fails.

use std::time::Duration;

use std::fmt;

use super::run::{lines, SeedOutcome};
use super::runner::run_one;
use super::spec::{Scenario, ScheduledFault};
use super::verdict::Violation;
use super::workload::WorkloadValue;
use zoosim_sim::sim::nemesis::InjectedFault;

/// A failing seed's scenario, shrunk: it still fails at `seed`,
/// violating `property`.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The shrunk scenario.
    pub scenario: Scenario,
    /// The seed it fails at (the original one).
    pub seed: u64,
    /// The property the original seed violated, which every step kept
    /// violating.
    pub property: &'static str,
    /// The shrunk run's violations (that property's among them).
    pub failure: Vec<Violation>,
    /// Seeds run while shrinking.
    pub runs: u64,
    /// Faults the shrunk run injected (placed ones, and random ones where
    /// the nemesis had to stay on).
    pub faults_injected: u64,
    /// Faults it tried, those that did not apply included (each placed
    /// fault is tried).
    pub faults_tried: u64,
}

impl Shrunk {
    /// Faults tried plus workload operations (clients × operations per
    /// client); None where the workload is not bounded by a number of
    /// operations.
    pub fn size(&self) -> Option<u64> {
        let s = &self.scenario;
        let ops = s.workload.operations().filter(|&n| n > 0)?;
        let clients = s.workload.clients().unwrap_or(1) as u64;
        Some(self.faults_tried + clients * ops)
    }
}

/// Why a seed could not be shrunk.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ShrinkError {
    /// The seed passes: nothing to shrink.
    Passes {
        /// The scenario's name.
        scenario: String,
        /// The seed.
        seed: u64,
    },
    /// The seed panicked before it could be judged (its run cannot be
    /// placed by hand).
    Panicked {
        /// The seed.
        seed: u64,
        /// The panic, as a violation.
        violation: Violation,
    },
    /// The shrunk scenario passes at the seed that failed at every step:
    /// a run is not a function of its seed on this binary.
    NotDeterministic {
        /// The seed.
        seed: u64,
    },
}

impl fmt::Display for ShrinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShrinkError::Passes { scenario, seed } => {
                write!(f, "seed {seed} of {scenario} passes: nothing to shrink")
            }
            ShrinkError::Panicked { seed, violation } => write!(f, "seed {seed}: {violation}"),
            ShrinkError::NotDeterministic { seed } => write!(
                f,
                "the shrunk scenario passes seed {seed}: the simulation is not deterministic"
            ),
        }
    }
}

impl std::error::Error for ShrinkError {}

/// The recipe's workload takes a number of operations.
fn bounded(s: &Scenario) -> bool {
    s.workload.operations().is_some()
}

/// Runs a shrink tries at most in its search for a smaller workload (a
/// small run takes a few milliseconds).
const EXPLORE_BUDGET: u64 = 1500;

struct Search<'a> {
    seed: u64,
    runs: u64,
    log: &'a dyn Fn(&str),
    /// The property the original seed violated: a candidate is kept only
    /// if it violates the same one.
    property: &'static str,
    /// The scenario's own lists to draw from (e.g. hold times): a
    /// candidate may take another of their values.
    drawn: Vec<(&'static str, Vec<i64>)>,
}

impl Search<'_> {
    fn run(&mut self, candidate: &Scenario) -> Result<SeedOutcome, Violation> {
        self.runs += 1;
        run_one(candidate, self.seed)
    }

    /// The violations, if `candidate` still violates the property at the
    /// seed (failing another way is not failing the same way).
    fn fails(&mut self, candidate: &Scenario) -> Option<Vec<Violation>> {
        let run = self.run(candidate);
        self.same_property(run)
    }

    /// A run's violations, if the property is among them.
    fn same_property(&self, run: Result<SeedOutcome, Violation>) -> Option<Vec<Violation>> {
        let violations = match run {
            Ok(out) => out.violations,
            Err(panic) => vec![panic],
        };
        violations
            .iter()
            .any(|v| v.property == self.property)
            .then_some(violations)
    }

    /// Takes `candidate` if it still fails.
    fn try_it(
        &mut self,
        best: &mut Scenario,
        failure: &mut Vec<Violation>,
        candidate: Scenario,
        what: &str,
    ) -> bool {
        match self.fails(&candidate) {
            Some(f) => {
                (self.log)(what);
                *best = candidate;
                *failure = f;
                true
            }
            None => false,
        }
    }
}

/// `s` for seed `seed` alone, with what `out` (that seed's run) drew from
/// the scenario's lists pinned: the same run, and the file says what it
/// runs.
fn pinned(s: &Scenario, seed: u64, out: &SeedOutcome) -> Scenario {
    let mut p = s.clone();
    p.seeds = 1;
    p.test_seeds = 1;
    p.seed_start = seed;
    p.coverage.clear();
    p.ensemble.servers = vec![out.drawn.servers];
    let ticks = out.drawn.sync_limit_ticks;
    p.ensemble.sync_limit_ticks = (ticks, ticks);
    p.ensemble.tick_ms = vec![out.drawn.tick_ms];
    p.ensemble.session_timeout_ms = vec![out.drawn.session_timeout_ms];
    for (key, v) in &out.drawn.values {
        p.set_workload(key, WorkloadValue::Drawn(vec![*v]))
            .unwrap_or_else(|e| panic!("pinning what seed {seed} drew for {key}: {e}"));
    }
    p
}

/// `s` at `out`'s seed with every fault its nemesis tried placed by hand
/// and the random ones off: the very same run (same digest).
pub fn placed_schedule(s: &Scenario, seed: u64, out: &SeedOutcome) -> Scenario {
    let mut p = pinned(s, seed, out);
    p.faults.kinds.clear();
    p.faults.at = out
        .faults
        .iter()
        .filter(|f| f.due < Duration::from_millis(s.faults.phase_ms))
        .map(placed_fault)
        .collect();
    p
}

/// Shrinks `seed` of `s`; Err if the seed does not fail.
pub fn shrink(s: &Scenario, seed: u64, log: &dyn Fn(&str)) -> Result<Shrunk, ShrinkError> {
    let out = run_one(s, seed).map_err(|violation| ShrinkError::Panicked { seed, violation })?;
    let Some(property) = out.violations.first().map(|v| v.property) else {
        return Err(ShrinkError::Passes {
            scenario: s.name.clone(),
            seed,
        });
    };
    let mut search = Search {
        seed,
        runs: 1,
        log,
        property,
        drawn: s
            .workload
            .iter()
            .filter_map(|(k, v)| match v {
                WorkloadValue::Drawn(choices) => Some((k, choices.clone())),
                WorkloadValue::Int(_) => None,
            })
            .collect(),
    };
    (search.log)(&format!("keeping {property} failing"));
    let first = out.violations.clone();
    let mut best = pinned(s, seed, &out);
    best.expect_failure = true;
    best.description = format!(
        "{} seed {seed}, shrunk: {}",
        s.name,
        lines(&first).lines().next().unwrap_or("")
    );
    let mut failure = first;
    // The faults tried, placed by hand, random ones off: the same run. If
    // it does not fail after all, only the workload is shrunk, under the
    // original nemesis.
    let mut placed = placed_schedule(s, seed, &out);
    placed.expect_failure = true;
    placed.description = best.description.clone();
    let replayed = search.run(&placed);
    let exact = matches!(&replayed, Ok(o) if o.digest == out.digest);
    match search.same_property(replayed) {
        Some(f) => {
            (search.log)(&format!(
                "{} faults placed by hand still fail{}",
                placed.faults.at.len(),
                if exact { " (the same run exactly)" } else { "" }
            ));
            best = placed;
            failure = f;
            // Fewer operations first, while the run is still the seed's:
            // a bound changes nothing until a client stops, so the bound
            // that still fails says when the failure happened, and the
            // faults after it go next.
            if bounded(&best) {
                fewest_operations(&mut search, &mut best, &mut failure);
            }
            failure = ddmin_faults(&mut search, &mut best, failure);
        }
        None => (search.log)("the placed faults do not fail: shrinking the workload only"),
    }
    if best.faults.kinds.is_empty() && !best.faults.at.is_empty() {
        failure = compress_time(&mut search, &mut best, failure);
    }
    failure = shrink_workload(&mut search, &mut best, failure);
    // Every candidate taken failed at this seed on this binary.
    let last = match search.run(&best) {
        Ok(last) if last.violations.iter().any(|v| v.property == property) => last,
        _ => return Err(ShrinkError::NotDeterministic { seed }),
    };
    Ok(Shrunk {
        scenario: best,
        seed,
        property,
        failure,
        runs: search.runs,
        faults_injected: last.faults.iter().filter(|f| !f.skipped).count() as u64,
        faults_tried: last.faults.len() as u64,
    })
}

/// `f` as a `[[faults.at]]`, every parameter written out, due at the same
/// instant.
fn placed_fault(f: &InjectedFault) -> ScheduledFault {
    let mut params = f.params.clone();
    // Only the keys the file takes for this kind: a leader isolation
    // names the leader it cut off, but is not placed by server; a
    // client crash's (zero) length is no `window_ms`. Flips and a delay
    // are there only for their own kinds. Lengths stay as drawn, whole
    // ms, so the scenario tried here is the one its file says.
    params.server = params.server.filter(|_| f.fault.takes_a_server());
    params.window = params.window.filter(|_| f.fault.has_a_window());
    let mut p = ScheduledFault {
        at_ms: 0,
        at_ns: 0,
        fault: f.fault,
        params,
    };
    p.set_at_nanos(f.due.as_nanos() as u64);
    p
}

/// ddmin over the planned faults, then one at a time (1-minimal).
fn ddmin_faults(
    search: &mut Search,
    best: &mut Scenario,
    mut failure: Vec<Violation>,
) -> Vec<Violation> {
    let mut n = 2;
    while best.faults.at.len() >= 2 {
        let faults = best.faults.at.clone();
        let chunk = faults.len().div_ceil(n);
        let mut reduced = false;
        for start in (0..faults.len()).step_by(chunk) {
            let mut candidate = best.clone();
            candidate.faults.at = faults
                .iter()
                .enumerate()
                .filter(|(i, _)| !(start..start + chunk).contains(i))
                .map(|(_, f)| f.clone())
                .collect();
            let what = format!("{} faults", candidate.faults.at.len());
            if search.try_it(best, &mut failure, candidate, &what) {
                n = (n - 1).max(2);
                reduced = true;
                break;
            }
        }
        if !reduced {
            if n >= faults.len() {
                break;
            }
            n = (2 * n).min(faults.len());
        }
    }
    let mut i = 0;
    while i < best.faults.at.len() {
        let mut candidate = best.clone();
        candidate.faults.at.remove(i);
        let what = format!("{} faults", candidate.faults.at.len());
        if !search.try_it(best, &mut failure, candidate, &what) {
            i += 1;
        }
    }
    failure
}

/// The schedule earlier: every fault at half its time, while the seed
/// still fails (fewer operations then span it).
fn compress_time(
    search: &mut Search,
    best: &mut Scenario,
    mut failure: Vec<Violation>,
) -> Vec<Violation> {
    loop {
        let mut c = best.clone();
        for f in &mut c.faults.at {
            f.set_at_nanos(f.at_nanos() / 2);
        }
        if c.faults.at == best.faults.at {
            return failure;
        }
        let last = c.faults.at.iter().map(|f| f.at_ms).max().unwrap_or(0);
        let what = format!("the faults by {last} ms");
        if !search.try_it(best, &mut failure, c, &what) {
            return failure;
        }
    }
}

/// The fewest clients the recipe runs with.
fn client_floor(s: &Scenario) -> usize {
    s.recipe.min_clients(&s.workload)
}

/// `s` with `clients` clients; faults aimed at a client no longer there
/// aim at another.
fn with_clients(s: &Scenario, clients: usize) -> Scenario {
    let mut c = s.clone();
    c.workload
        .put("clients", WorkloadValue::Int(clients as i64));
    let aimable = c.recipe.client_slots(&c.workload).max(1);
    for f in &mut c.faults.at {
        let p = &mut f.params;
        if let Some(k) = p.client {
            p.client = Some(k % aimable);
        }
        // A partition's side keeps the clients still there.
        if let Some(side) = &mut p.split_clients {
            side.retain(|&k| k < aimable);
        }
        for side in p.side_clients.iter_mut().flatten() {
            side.retain(|&k| k < aimable);
        }
    }
    c
}

/// `s` with `ops` operations per client.
fn with_operations(s: &Scenario, ops: u64) -> Scenario {
    let mut c = s.clone();
    c.workload.put("operations", WorkloadValue::Int(ops as i64));
    c
}

/// Fewer clients, fewer operations, a shorter fault phase: each while the
/// seed still fails.
fn shrink_workload(
    search: &mut Search,
    best: &mut Scenario,
    mut failure: Vec<Violation>,
) -> Vec<Violation> {
    let floor = client_floor(best);
    while let Some(clients) = best.workload.clients().filter(|&n| n > floor) {
        let c = with_clients(best, clients - 1);
        let what = format!("{} clients", clients - 1);
        if !search.try_it(best, &mut failure, c, &what) {
            break;
        }
    }
    if bounded(best) {
        fewest_operations(search, best, &mut failure);
        explore(search, best, &mut failure);
        if best.faults.at.len() >= 2 && best.faults.kinds.is_empty() {
            failure = ddmin_faults(search, best, failure);
        }
    }
    // The fault phase: up to just after the last planned fault.
    if best.faults.kinds.is_empty() {
        let last = best.faults.at.iter().map(|f| f.at_ms).max().unwrap_or(0);
        let phase = last + 1;
        if phase < best.faults.phase_ms {
            let mut c = best.clone();
            c.faults.phase_ms = phase;
            let what = format!("a fault phase of {phase} ms");
            search.try_it(best, &mut failure, c, &what);
        }
    }
    failure
}

/// The fewest operations per client that still fail: doubling up from
/// one (while below the bound there is), then halving the gap.
fn fewest_operations(search: &mut Search, best: &mut Scenario, failure: &mut Vec<Violation>) {
    let current = best.workload.operations().unwrap_or(0);
    let limit = match current {
        0 => 1 << 16,
        n => n,
    };
    let mut hi = (current > 0).then_some(current);
    let mut lo = 0; // passes (or none)
    let mut ops = 1;
    while ops < limit {
        let c = with_operations(best, ops);
        let what = format!("{ops} operations per client");
        if search.try_it(best, failure, c, &what) {
            hi = Some(ops);
            break;
        }
        lo = ops;
        ops *= 2;
    }
    let Some(mut hi) = hi else {
        return;
    };
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        let c = with_operations(best, mid);
        let what = format!("{mid} operations per client");
        if search.try_it(best, failure, c, &what) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
}

/// Smaller workloads, smallest first, each tried as it is and in
/// variants the size does not count (another of the scenario's hold
/// times; the faults moved to where the smaller workload runs), until one
/// fails or the budget is spent. A smaller workload is a different run:
/// what the fault hit may now happen elsewhere, or at another time.
fn explore(search: &mut Search, best: &mut Scenario, failure: &mut Vec<Violation>) {
    let clients = best.workload.clients().unwrap_or(1);
    let ops = best.workload.operations().unwrap_or(0) as usize;
    let mut sizes: Vec<(usize, usize)> = (client_floor(best)..=clients)
        .flat_map(|c| (1..=ops).map(move |o| (c, o)))
        .filter(|&(c, o)| c * o < clients * ops)
        .collect();
    // Smallest first; at one size, fewer clients first.
    sizes.sort_by_key(|&(c, o)| (c * o, c));
    let budget = search.runs + EXPLORE_BUDGET;
    for (c, o) in sizes {
        let base = with_operations(&with_clients(best, c), o as u64);
        let what = format!("{c} clients, {o} operations each");
        if try_variants(search, best, failure, base, &what, budget) {
            return;
        }
        if search.runs >= budget {
            (search.log)("the search for a smaller workload ran out of its budget");
            return;
        }
    }
}

/// Where in the run a moved schedule starts: fractions of the span the
/// workload runs...
const ANCHORS: [f64; 6] = [0.5, 0.2, 0.8, 0.35, 0.65, 0.05];
/// ...and as many instants the workload did something at (a fault often
/// has to hit an operation under way).
const EVENT_ANCHORS: usize = 8;

/// Tries `base` as it is, then with each other hold time, then (placed
/// faults only) with the schedule moved into the span its workload runs,
/// kept in order and squeezed to fit; takes the first that fails.
fn try_variants(
    search: &mut Search,
    best: &mut Scenario,
    failure: &mut Vec<Violation>,
    base: Scenario,
    what: &str,
    budget: u64,
) -> bool {
    let mut holds = vec![base.clone()];
    for (key, choices) in &search.drawn {
        for &h in choices {
            let pinned = WorkloadValue::Drawn(vec![h]);
            if base.workload.get(key) != Some(&pinned) {
                let mut v = base.clone();
                v.workload.put(key, pinned);
                holds.push(v);
            }
        }
    }
    for v in &holds {
        if search.runs >= budget {
            return false;
        }
        if search.try_it(best, failure, v.clone(), what) {
            return true;
        }
    }
    if !base.faults.kinds.is_empty() || base.faults.at.is_empty() {
        return false;
    }
    for v in holds {
        // Where the workload runs without the faults in its way (in the
        // fault phase's time).
        let mut quiet = v.clone();
        quiet.faults.at.clear();
        let Ok(run) = search.run(&quiet) else {
            continue;
        };
        let events: Vec<u64> = run
            .event_ms
            .iter()
            .filter_map(|&t| t.checked_sub(run.fault_start_ms))
            .map(|t| t * 1_000_000)
            .collect();
        let span_ns = events.last().copied().unwrap_or(0);
        let times = v.faults.at.iter().map(ScheduledFault::at_nanos);
        let (Some(first), Some(last)) = (times.clone().min(), times.max()) else {
            continue;
        };
        let width = last - first;
        let mut starts: Vec<u64> = ANCHORS
            .iter()
            .map(|a| (span_ns as f64 * a) as u64)
            .collect();
        let step = events.len().div_ceil(EVENT_ANCHORS).max(1);
        starts.extend(events.iter().step_by(step));
        starts.dedup();
        for start in starts {
            if search.runs >= budget {
                return false;
            }
            let room = span_ns.saturating_sub(start);
            let mut m = v.clone();
            for f in &mut m.faults.at {
                let offset = f.at_nanos() - first;
                // Squeezed to fit when it is wider than what is left.
                let offset = if width > room {
                    (offset as f64 * room as f64 / width as f64) as u64
                } else {
                    offset
                };
                f.set_at_nanos(start + offset);
            }
            if m.faults.at.iter().any(|f| f.at_ms >= m.faults.phase_ms) {
                continue;
            }
            if search.try_it(best, failure, m, what) {
                return true;
            }
        }
    }
    false
}
