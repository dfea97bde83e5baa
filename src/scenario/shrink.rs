//! Shrinking a failing seed (delta debugging, Zeller's ddmin): the faults
//! the nemesis injected become a hand-placed schedule, random faults off;
//! then faults are dropped while the seed still fails, and the workload is
//! made smaller (fewer clients, fewer operations, a shorter fault phase).
//! The result is a scenario file that fails deterministically: one seed,
//! every fault written out.

use super::registry::Recipe;
use super::runner::run_one;
use super::spec::{Scenario, ScheduledFault};

#[derive(Clone, Debug)]
pub struct Shrunk {
    pub scenario: Scenario,
    pub seed: u64,
    /// The shrunk run's failure.
    pub failure: String,
    /// Seeds run while shrinking.
    pub runs: u64,
    /// Faults the shrunk run injected (placed ones, and random ones where
    /// the nemesis had to stay on).
    pub faults_injected: u64,
}

impl Shrunk {
    /// Faults injected plus workload operations (clients × operations per
    /// client); None where the workload is not bounded by a number of
    /// operations (only the lock family's is, so far).
    pub fn size(&self) -> Option<u64> {
        let s = &self.scenario;
        let bounded = matches!(
            s.recipe,
            Recipe::Lock | Recipe::SharedLock | Recipe::RevocableLock | Recipe::Election
        ) && s.workload.operations > 0;
        bounded.then(|| {
            self.faults_injected + s.workload.clients as u64 * u64::from(s.workload.operations)
        })
    }
}

struct Search<'a> {
    seed: u64,
    runs: u64,
    log: &'a dyn Fn(&str),
}

impl Search<'_> {
    /// The failure, if `candidate` still fails at the seed.
    fn fails(&mut self, candidate: &Scenario) -> Option<String> {
        self.runs += 1;
        match run_one(candidate, self.seed) {
            Ok(out) => out.failure,
            Err(panic) => Some(panic),
        }
    }
}

/// Shrinks `seed` of `s`; Err if the seed does not fail.
pub fn shrink(s: &Scenario, seed: u64, log: &dyn Fn(&str)) -> Result<Shrunk, String> {
    let mut search = Search { seed, runs: 0, log };
    let out = run_one(s, seed).map_err(|p| format!("seed {seed} panicked: {p}"))?;
    let Some(first) = out.failure.clone() else {
        return Err(format!(
            "seed {seed} of {} passes: nothing to shrink",
            s.name
        ));
    };
    let plan: Vec<ScheduledFault> = out
        .faults
        .iter()
        .map(|f| ScheduledFault {
            at_ms: (f.at.as_millis() as u64).saturating_sub(out.fault_start_ms),
            fault: f.fault,
            client: f.client,
            server: f.server.filter(|_| f.fault.takes_a_server()),
            window_ms: (!f.window.is_zero()).then_some(f.window.as_millis() as u64),
        })
        .filter(|f| f.at_ms < s.faults.phase_ms)
        .collect();
    let mut best = s.clone();
    best.seeds = 1;
    best.test_seeds = 1;
    best.seed_start = seed;
    best.expect_failure = true;
    best.coverage.clear();
    best.description = format!(
        "{} seed {seed}, shrunk: {}",
        s.name,
        first.lines().next().unwrap_or("")
    );
    let mut failure = first;
    // The injected faults, placed by hand, random ones off. The workload's
    // random draws shift with the nemesis's, so this may not fail; then
    // only the workload is shrunk, under the original nemesis.
    let mut placed = best.clone();
    placed.faults.kinds.clear();
    placed.faults.at = plan;
    if let Some(f) = search.fails(&placed) {
        (search.log)(&format!(
            "{} faults placed by hand still fail",
            placed.faults.at.len()
        ));
        best = placed;
        failure = f;
        failure = ddmin_faults(&mut search, &mut best, failure);
    } else {
        (search.log)("the placed faults do not fail: shrinking the workload only");
    }
    if best.faults.kinds.is_empty() && !best.faults.at.is_empty() {
        failure = compress_time(&mut search, &mut best, failure);
    }
    failure = shrink_workload(&mut search, &mut best, failure);
    let last = run_one(&best, seed).map_err(|p| format!("the shrunk seed panicked: {p}"))?;
    assert!(
        last.failure.is_some(),
        "a shrunk scenario fails by construction (same seed, same binary)"
    );
    Ok(Shrunk {
        scenario: best,
        seed,
        failure,
        runs: search.runs + 1,
        faults_injected: last.faults.len() as u64,
    })
}

/// ddmin over the planned faults, then one at a time (1-minimal).
fn ddmin_faults(search: &mut Search, best: &mut Scenario, mut failure: String) -> String {
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
            if let Some(f) = search.fails(&candidate) {
                (search.log)(&format!("{} faults", candidate.faults.at.len()));
                *best = candidate;
                failure = f;
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
        match search.fails(&candidate) {
            Some(f) => {
                *best = candidate;
                failure = f;
            }
            None => i += 1,
        }
    }
    failure
}

/// The schedule earlier: every fault at half its time, while the seed
/// still fails (fewer operations then span it).
fn compress_time(search: &mut Search, best: &mut Scenario, mut failure: String) -> String {
    loop {
        let mut c = best.clone();
        for f in &mut c.faults.at {
            f.at_ms /= 2;
        }
        if c.faults.at == best.faults.at {
            return failure;
        }
        match search.fails(&c) {
            Some(f) => {
                let last = c.faults.at.iter().map(|f| f.at_ms).max().unwrap_or(0);
                (search.log)(&format!("the faults by {last} ms"));
                *best = c;
                failure = f;
            }
            None => return failure,
        }
    }
}

/// Fewer clients, fewer operations, a shorter fault phase: each while the
/// seed still fails.
fn shrink_workload(search: &mut Search, best: &mut Scenario, mut failure: String) -> String {
    let exclusive = matches!(
        best.recipe,
        Recipe::Lock | Recipe::SharedLock | Recipe::RevocableLock | Recipe::Election
    );
    let mut try_it = |search: &mut Search, best: &mut Scenario, c: Scenario, what: &str| {
        if let Some(f) = search.fails(&c) {
            (search.log)(what);
            *best = c;
            failure = f;
            true
        } else {
            false
        }
    };
    // Clients: not below those the schedule aims at, nor what the recipe
    // needs.
    let aimed = best.faults.at.iter().filter_map(|f| f.client).max();
    let floor = match best.recipe {
        Recipe::TwoPhaseCommit => 2,
        Recipe::DoubleBarrier => best.workload.threshold,
        _ => 1,
    }
    .max(aimed.map_or(1, |c| c + 1));
    while best.workload.clients > floor {
        let mut c = best.clone();
        c.workload.clients -= 1;
        let what = format!("{} clients", c.workload.clients);
        if !try_it(search, best, c, &what) {
            break;
        }
    }
    if exclusive {
        // The fewest operations per client that still fail: doubling up
        // from one, then halving the gap.
        let mut hi = None;
        let mut ops = 1;
        while ops <= 64 {
            let mut c = best.clone();
            c.workload.operations = ops;
            let what = format!("{ops} operations per client");
            if try_it(search, best, c, &what) {
                hi = Some(ops);
                break;
            }
            ops *= 2;
        }
        if let Some(mut hi) = hi {
            let mut lo = hi / 2; // passes (or 0)
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                let mut c = best.clone();
                c.workload.operations = mid;
                let what = format!("{mid} operations per client");
                if try_it(search, best, c, &what) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
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
            try_it(search, best, c, &what);
        }
    }
    failure
}
