//! One seed of a scenario: an ensemble, the recipe's workload, the nemesis
//! (the scenario's pool, swarm-drawn, plus its planned faults), a quiet
//! phase, then the recipe's oracle. Everything random comes from the
//! seed's madsim RNG, so a seed replays exactly; the digest (over the
//! outcome log and the faults) shows it.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Runtime;
use madsim::task::JoinHandle;
use madsim::time::{sleep, timeout, Instant};

use super::budget;
use super::sim::{ensure_slots, now_ms, Ending, JudgeCtx, RunCtx, Running, Task};
use super::spec::{default_liveness_bound_ms, Scenario};
use super::verdict::Verdict;
use super::verdict::{run_properties, Violation};
use futures::future::{select, Either};
use zoosim_core::check::contract::{self, ContractReport, ContractVerdict};
use zoosim_core::check::lin::Budget;
use zoosim_core::check::Liveness;
use zoosim_core::fault::Fault;
use zoosim_core::history::{History, Meta, FORMAT_VERSION};
use zoosim_sim::sim::nemesis::{self, ClientSlots, InjectedFault, NemesisConfig, PlannedFault};
use zoosim_sim::sim::{sim_recorder, Ensemble, EnsembleConfig, Recorder};

/// What one seed did.
#[derive(Clone, Debug)]
pub struct SeedOutcome {
    /// The seed run.
    pub seed: u64,
    /// The properties that failed, with the evidence: none when every
    /// property held.
    pub violations: Vec<Violation>,
    /// The oracle's report, for a reader.
    pub report: String,
    /// The recipe's counters, `fault:<name>` and the ensemble's.
    pub counters: BTreeMap<String, u64>,
    /// Every fault the nemesis injected or skipped, in order.
    pub faults: Vec<InjectedFault>,
    /// Recipe operations logged (acquisitions, takes, reads, ...).
    pub ops: u64,
    /// When each outcome-log entry was made, in order (simulated ms since
    /// the start): when the workload did things, and stopped.
    pub event_ms: Vec<u64>,
    /// Simulated ms from the start to the run's end.
    pub sim_ms: u64,
    /// When the fault phase began (simulated ms since the start): planned
    /// faults' times count from here.
    pub fault_start_ms: u64,
    /// What the seed drew from the scenario's lists and ranges.
    pub drawn: Drawn,
    /// Hash of the outcome log and the faults ([`digest`]): equal for
    /// equal runs, on every platform and toolchain.
    pub digest: u64,
    /// The outcome log, one line per entry (for `--trace` and reports).
    pub log: Vec<String>,
    /// Why ZooKeeper's contract was left undecided on the seed's history
    /// (its search ran out of budget): None when the contract was decided,
    /// or not checked.
    pub undecided: Option<String>,
    /// The run was interrupted (the first Ctrl-C or SIGTERM of `zoosim
    /// run`) before its end: nothing was judged, so it neither failed nor
    /// passed, and the runner does not count it.
    pub interrupted: bool,
}

impl SeedOutcome {
    /// Some property failed.
    pub fn failed(&self) -> bool {
        !self.violations.is_empty()
    }

    /// The violations, one per line (None when every property held).
    pub fn failure(&self) -> Option<String> {
        self.failed().then(|| lines(&self.violations))
    }

    /// Why the seed passed undecided: no property failed, but ZooKeeper's
    /// contract could not be decided within its budget. None for a seed
    /// that failed (its failure is its verdict) or was decided.
    pub fn passed_undecided(&self) -> Option<&str> {
        self.undecided.as_deref().filter(|_| !self.failed())
    }
}

/// Violations one per line, each with its property's name.
pub fn lines(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a seed drew from the scenario's lists and ranges. Each is one
/// draw from the run's RNG whatever the list, so the shrinker can pin it
/// without moving any later draw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drawn {
    /// The ensemble's size.
    pub servers: u32,
    /// The servers' syncLimit, in ticks.
    pub sync_limit_ticks: u32,
    /// The servers' tickTime, in ms.
    pub tick_ms: u64,
    /// The session timeout the clients request, in ms (the servers
    /// negotiate it to 2–20 ticks: [`Drawn::negotiated_timeout_ms`]).
    pub session_timeout_ms: u64,
    /// Each drawn workload key's value (e.g. the locks' `hold_ms`).
    pub values: Vec<(String, i64)>,
}

impl Drawn {
    /// The session timeout the servers grant: the requested one clamped to
    /// 2–20 ticks.
    pub fn negotiated_timeout_ms(&self) -> u64 {
        zoosim_sim::server::ServerConfig::new(0, 1, self.tick_ms).negotiate(self.session_timeout_ms)
    }
}

/// One of `choices`, by one draw whatever the list (so a list pinned to
/// one value moves no later draw).
fn pick<T: Copy>(choices: &[T]) -> T {
    let bits: u64 = thread_rng().gen();
    choices[(bits % choices.len() as u64) as usize]
}

/// Runs `seed` of `scenario` in a fresh simulation, judged by the
/// recipe's oracle and by ZooKeeper's contract on what its clients saw
/// ([`judge_contract`]).
pub fn run_seed(scenario: &Scenario, seed: u64) -> SeedOutcome {
    run_seed_recorded(scenario, seed).0
}

/// [`run_seed`], and the run's client-level history (every run is
/// recorded: the contract is checked on it; recording changes nothing of
/// the run, its digest included).
pub fn run_seed_recorded(scenario: &Scenario, seed: u64) -> (SeedOutcome, History) {
    let recorder = sim_recorder();
    let outcome = run_seed_recording(scenario, seed, &recorder);
    let (outcome, history, _) = judged(scenario, seed, outcome, &recorder);
    (outcome, history)
}

/// A finished run's history, taken from its recorder, and the run judged
/// by ZooKeeper's contract on it ([`judge_contract`]).
pub fn judged(
    scenario: &Scenario,
    seed: u64,
    mut outcome: SeedOutcome,
    recorder: &Recorder,
) -> (SeedOutcome, History, Option<ContractReport>) {
    let mut meta = history_meta(scenario, seed, outcome.drawn.servers);
    meta.session_timeout_ms = outcome.drawn.session_timeout_ms;
    meta.tick_ms = Some(outcome.drawn.tick_ms);
    meta.sync_limit_ticks = Some(u64::from(outcome.drawn.sync_limit_ticks));
    let history = recorder.history(meta);
    // A seed stopped before its end (over its budget) has its verdict, and
    // a history cut off where it stopped: checking it would spend on it
    // the time its budget is there to bound (47 s of the 73 a seed of 64
    // producers and 64 consumers took, stopped at 1.5 million events),
    // and judge a run that did not end.
    let stopped = outcome.interrupted
        || outcome
            .violations
            .iter()
            .any(|v| v.property == run_properties::SEED_BUDGET.name);
    let contract = if stopped {
        None
    } else {
        judge_contract(&mut outcome, &history, &contract_budget_for(scenario))
    };
    (outcome, history, contract)
}

/// Runs `seed` of `scenario`, recording into `recorder`, which keeps what
/// was recorded if the run panics (the history up to the panic). Judged
/// by the recipe's oracle only: [`judge_contract`] is the caller's, on
/// the recorder's history.
pub fn run_seed_recording(scenario: &Scenario, seed: u64, recorder: &Recorder) -> SeedOutcome {
    simulate(scenario, seed, Some(recorder.clone()))
}

/// Runs `seed` of `scenario` unrecorded, judged by the recipe's oracle
/// alone: the baseline against which the cost of recording and of the
/// contract check is measured (benches/scenarios.rs).
pub fn run_seed_unrecorded(scenario: &Scenario, seed: u64) -> SeedOutcome {
    simulate(scenario, seed, None)
}

/// `seed` of `scenario` in a fresh simulation, recorded or not.
fn simulate(scenario: &Scenario, seed: u64, recorder: Option<Recorder>) -> SeedOutcome {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let owned = scenario.clone();
    budget::arm(seed);
    // Disarmed however the seed ends (a panic is a verdict too).
    struct Disarm;
    impl Drop for Disarm {
        fn drop(&mut self) {
            budget::disarm();
        }
    }
    let _disarm = Disarm;
    runtime.block_on(async move { run(&owned, seed, recorder).await })
}

/// The contract check's budget for a seed's history: steps and bytes,
/// never time, so that a seed's verdict replays on any machine.
///
/// Small, because it is spent on every seed the fast path cannot order,
/// and a larger one decides few more: at 2 million steps, 10 of 348 seeds
/// (20 of each scenario) were still undecided, each costing ~10 s.
pub fn contract_budget() -> Budget<'static> {
    Budget {
        max_steps: CONTRACT_STEPS,
        max_memo_bytes: 32 << 20,
        stop: None,
    }
}

/// The contract check's step budget for a seed, unless the scenario's
/// run overrides it ([`Scenario::contract_steps`]).
pub const CONTRACT_STEPS: u64 = 100_000;

/// [`contract_budget`] with the scenario's override of its steps, if any
/// (`zoosim run --contract-steps N`).
pub fn contract_budget_for(scenario: &Scenario) -> Budget<'static> {
    Budget {
        max_steps: scenario.contract_steps.unwrap_or(CONTRACT_STEPS),
        ..contract_budget()
    }
}

/// Judges a run by ZooKeeper's client contract on its history
/// (docs/CONTRACT.md): a broken guarantee is a violation under the
/// guarantee's name, like an oracle's; a run the search cannot decide
/// within `budget` ([`contract_budget`]) is counted (`contract-undecided`,
/// one of the [`ENSEMBLE_COUNTERS`](super::verdict::ENSEMBLE_COUNTERS))
/// and the reason kept ([`SeedOutcome::undecided`]), not failed.
/// A history the check cannot read is a simulator defect: an
/// `invariants` violation.
pub fn judge_contract(
    outcome: &mut SeedOutcome,
    history: &History,
    budget: &Budget<'_>,
) -> Option<ContractReport> {
    let report = match contract::check(history, budget) {
        Ok(r) => r,
        Err(e) => {
            outcome.violations.push(Violation::new(
                super::verdict::run_properties::INVARIANTS,
                format!("the recorded history is unreadable by the contract check: {e}"),
            ));
            return None;
        }
    };
    let mut count = |name: &str, hit: bool| {
        *outcome.counters.entry(name.to_owned()).or_default() += u64::from(hit);
    };
    count("contract-held", report.verdict == ContractVerdict::Holds);
    if let ContractVerdict::Unknown(why) = &report.verdict {
        outcome.undecided = Some(why.clone());
    }
    count("contract-undecided", outcome.undecided.is_some());
    count("contract-fast", report.fast);
    if let Some(v) = report.violation() {
        outcome.violations.push(v);
    }
    Some(report)
}

/// The `meta` line of `seed`'s history of `scenario`, run on `servers`
/// servers (the session timeout: the scenario's first, and no tickTime
/// or syncLimit; a run's history has the ones its seed drew).
pub fn history_meta(scenario: &Scenario, seed: u64, servers: u32) -> Meta {
    Meta {
        format: FORMAT_VERSION,
        scenario: scenario.name.clone(),
        file: (!scenario.file.is_empty()).then(|| scenario.file.clone()),
        seed,
        zoosim: env!("CARGO_PKG_VERSION").to_owned(),
        servers,
        session_timeout_ms: scenario.ensemble.session_timeout_ms[0],
        tick_ms: None,
        sync_limit_ticks: None,
    }
}

/// The run's digest: equal for equal runs, and the same on every platform
/// and toolchain (docs/HISTORY.md, "The digest"). The first 8 bytes, read
/// big-endian, of the SHA-256 of:
///
/// * `outcome-log <n>\n`, with `n` the number of log lines in decimal;
/// * each outcome-log line, followed by `\n`;
/// * `faults <m>\n`, with `m` the number of faults tried (skipped ones too);
/// * each fault's [`fault_line`], followed by `\n`.
pub fn digest(log: &[String], faults: &[InjectedFault]) -> u64 {
    let mut h = Sha256::new();
    h.update(format!("outcome-log {}\n", log.len()));
    for line in log {
        h.update(line.as_bytes());
        h.update(b"\n");
    }
    h.update(format!("faults {}\n", faults.len()));
    for f in faults {
        h.update(fault_line(f));
        h.update(b"\n");
    }
    let sum = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&sum[..8]);
    u64::from_be_bytes(first)
}

/// A fault as the digest reads it: space-separated, times in ns,
/// `-` for an absent part, lists as comma-separated server numbers:
/// `at due kind client server to split servers sides flips delay window
/// skipped`, where `sides` is `/`-separated sides and `flips` is
/// `;`-separated `side/ns` pairs (e.g.
/// `1369000100 1368000000 partition - - - 1 - - - 0 3582000000 false`).
pub fn fault_line(f: &InjectedFault) -> String {
    fn opt<T: ToString>(v: Option<T>) -> String {
        v.map_or("-".into(), |v| v.to_string())
    }
    fn side(s: &[u32]) -> String {
        s.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
    }
    let p = &f.params;
    let flips = match p.flips.as_deref() {
        None | Some([]) => "-".to_string(),
        Some(flips) => flips
            .iter()
            .map(|(s, d)| format!("{}/{}", side(s), d.as_nanos()))
            .collect::<Vec<_>>()
            .join(";"),
    };
    format!(
        "{} {} {} {} {} {} {} {} {} {} {} {} {}",
        f.at.as_nanos(),
        f.due.as_nanos(),
        f.fault.name(),
        opt(p.client),
        opt(p.server),
        opt(p.to),
        p.split.as_deref().map_or("-".into(), side),
        p.servers.as_deref().map_or("-".into(), side),
        p.sides.as_ref().map_or("-".into(), |sides| {
            sides.iter().map(|s| side(s)).collect::<Vec<_>>().join("/")
        }),
        flips,
        p.delay.unwrap_or_default().as_nanos(),
        p.window.unwrap_or_default().as_nanos(),
        f.skipped
    )
}

async fn run(s: &Scenario, seed: u64, recorder: Option<Recorder>) -> SeedOutcome {
    let (ensemble, drawn) = ensemble(s, recorder);
    let pool = fault_pool(s);
    let slots: ClientSlots = Arc::default();
    let fault_end = Instant::now() + Duration::from_millis(s.faults.phase_ms);
    // Clients run on through the quiet phase; the run ends under them.
    let until = fault_end + Duration::from_secs(3600);
    let plan: Vec<PlannedFault> = s
        .faults
        .at
        .iter()
        .map(|f| PlannedFault {
            at: Duration::from_nanos(f.at_nanos()),
            fault: f.fault,
            params: f.params.clone(),
        })
        .collect();
    let nemesis_config = NemesisConfig {
        interval_ms: s.faults.interval_ms,
        window_ms: s.faults.window_ms,
        ..NemesisConfig::new(pool, drawn.negotiated_timeout_ms())
    };
    let started = start_recipe(
        s,
        ensemble.clone(),
        slots.clone(),
        drawn.session_timeout_ms,
        fault_end,
        until,
    );
    if let Some(setup) = started.setup {
        setup.await;
    }
    let tasks: Vec<JoinHandle<()>> = started.tasks.into_iter().map(madsim::task::spawn).collect();
    let running = started.running;
    let fault_start_ms = now_ms();
    let nemesis = nemesis::run_planned(
        ensemble.clone(),
        slots.clone(),
        &nemesis_config,
        &plan,
        fault_end,
    );
    // The budget is awaited beside each phase: it wakes nothing unless
    // the seed goes over it or is interrupted, so a seed within it runs as
    // without it.
    let injected = match select(Box::pin(nemesis), Box::pin(budget::stopped())).await {
        Either::Left((injected, _)) => injected,
        Either::Right((why, _)) => return stopped(s, seed, &ensemble, &tasks, drawn, why),
    };
    let quiet_from = now_ms();
    let bound_ms = s.liveness_bound_ms.unwrap_or_else(|| {
        default_liveness_bound_ms(
            drawn.negotiated_timeout_ms(),
            drawn.tick_ms,
            slots.lock().unwrap().len(),
        )
    });
    // A default bound drawn longer than the quiet phase stretches the
    // phase, so that what it bounds is judged.
    let quiet_ms = if s.liveness_bound_ms.is_none() {
        s.quiet_ms.max(bound_ms)
    } else {
        s.quiet_ms
    };
    let quiet = Duration::from_millis(quiet_ms);
    // A run whose clients are all done ends then (or at the end of the
    // quiet phase). A counted ending wakes this task only then (each
    // wake-up draws from the seed's RNG), so a run with a bound is the run
    // without one until a client stops.
    let quiet_phase = async {
        match running.ending() {
            Ending::Counted { done, clients } => {
                let _ = timeout(quiet, done.reach(clients)).await;
            }
            Ending::Polled => {
                let end = Instant::now() + quiet;
                while Instant::now() < end && !running.finished() {
                    sleep(Duration::from_millis(10)).await;
                }
            }
            Ending::QuietPhase => sleep(quiet).await,
        }
    };
    if let Either::Right((why, _)) =
        select(Box::pin(quiet_phase), Box::pin(budget::stopped())).await
    {
        return stopped(s, seed, &ensemble, &tasks, drawn, why);
    }
    let liveness = Liveness {
        from_ms: quiet_from,
        bound_ms,
        end_ms: now_ms(),
    };
    // Stop the clients where they are: the log ends here.
    for task in &tasks {
        task.abort();
    }
    let verdict = judge(s, running, &ensemble, &slots, &injected, liveness);
    // Unfinished tasks would outlive the runtime (see Ensemble::shutdown).
    ensemble.shutdown();
    let mut counters: BTreeMap<String, u64> = BTreeMap::new();
    for (k, v) in &verdict.counters {
        *counters.entry(k.to_string()).or_default() += v;
    }
    for f in injected.iter().filter(|f| !f.skipped) {
        *counters.entry(format!("fault:{}", f.fault)).or_default() += 1;
    }
    for (k, v) in ensemble_counters(&ensemble) {
        counters.insert(k.to_owned(), v);
    }
    counters.insert(
        "minority-clients".to_owned(),
        minority_clients(&injected, drawn.servers, slots.lock().unwrap().len()),
    );
    let digest = digest(&verdict.log, &injected);
    SeedOutcome {
        seed,
        violations: verdict.violations,
        report: verdict.report,
        ops: verdict.log.len() as u64,
        event_ms: verdict.event_ms,
        counters,
        faults: injected,
        sim_ms: now_ms(),
        fault_start_ms,
        drawn: Drawn {
            values: started
                .drawn
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            ..drawn
        },
        digest,
        log: verdict.log,
        undecided: None,
        interrupted: false,
    }
}

/// A seed stopped before its end ([`budget`]): its clients and servers
/// stopped where they were. Over its budget, one violation, of
/// `seed-budget`, saying what was counted and naming what made the run so
/// long or so busy; interrupted, no verdict at all
/// ([`SeedOutcome::interrupted`]).
fn stopped(
    s: &Scenario,
    seed: u64,
    ensemble: &Ensemble,
    tasks: &[JoinHandle<()>],
    drawn: Drawn,
    why: budget::Stop,
) -> SeedOutcome {
    for task in tasks {
        task.abort();
    }
    ensemble.shutdown();
    let (counts, limit) = budget::counted();
    let at_ms = now_ms();
    let violations = match why {
        budget::Stop::OverBudget => vec![Violation::new(
            run_properties::SEED_BUDGET,
            over_budget(s, &counts, limit, at_ms),
        )],
        budget::Stop::Interrupted => Vec::new(),
    };
    SeedOutcome {
        seed,
        violations,
        report: String::new(),
        ops: counts.outcomes,
        event_ms: Vec::new(),
        counters: BTreeMap::new(),
        faults: Vec::new(),
        sim_ms: at_ms,
        fault_start_ms: 0,
        drawn,
        digest: digest(&[], &[]),
        log: Vec::new(),
        undecided: None,
        interrupted: why == budget::Stop::Interrupted,
    }
}

/// Why a seed went over its budget: what it counted, by kind, and the
/// scenario keys to change.
fn over_budget(s: &Scenario, counts: &budget::Counts, limit: u64, at_ms: u64) -> String {
    let secs = at_ms.max(1) as f64 / 1000.0;
    // Frequent faults, long phases, or a busy workload. Faults come first:
    // each one sets off messages, elections and reconnections, so a seed of
    // faults every few ms is over its budget within a simulated minute, its
    // messages the larger count. A shipped scenario tries one fault in
    // thousands of events; here one in a hundred.
    let cause = if counts.faults.saturating_mul(100) >= counts.total() {
        format!(
            "its faults are frequent: {} tried in {secs:.1} simulated s, one every {} to {} ms \
             (`faults.interval_ms`); raise `faults.interval_ms`, or shorten `faults.phase_ms`",
            counts.faults, s.faults.interval_ms.0, s.faults.interval_ms.1
        )
    } else if at_ms > 600_000 {
        // The first past ten simulated minutes is the phases' doing.
        format!(
            "its phases make it long: `faults.phase_ms` = {} and `quiet.phase_ms` = {}; \
             shorten them",
            s.faults.phase_ms, s.quiet_ms
        )
    } else {
        let fewer = if s.workload.clients().is_some() {
            "lower `workload.clients`"
        } else {
            "run fewer clients in `[workload]`"
        };
        format!(
            "its workload is busy: {} clients sent {:.0} messages and logged {:.0} outcomes \
             per simulated second; {fewer}, or lengthen the holds and pauses in `[workload]`",
            shown_clients(s),
            counts.messages as f64 / secs,
            counts.outcomes as f64 / secs,
        )
    };
    format!(
        "stopped at simulated {secs:.1} s after {} events ({counts}), over a seed's budget of \
         {limit} events (for its memory and time): {cause}",
        counts.total(),
    )
}

/// How many clients the scenario runs (producers and consumers together,
/// where a recipe counts them so).
fn shown_clients(s: &Scenario) -> String {
    match s.workload.clients() {
        Some(n) => n.to_string(),
        None => match s.recipe.client_slots(&s.workload) {
            0 => "its".to_owned(),
            n => n.to_string(),
        },
    }
}

/// The seed's ensemble, and what it drew for it (size, syncLimit,
/// tickTime, session timeout; its workload values come later).
fn ensemble(s: &Scenario, recorder: Option<Recorder>) -> (Arc<Ensemble>, Drawn) {
    let servers = pick(&s.ensemble.servers);
    let (lo, hi) = s.ensemble.sync_limit_ticks;
    let ticks: Vec<u32> = (lo..=hi).collect();
    let sync_limit_ticks = pick(&ticks);
    let tick_ms = pick(&s.ensemble.tick_ms);
    let session_timeout_ms = pick(&s.ensemble.session_timeout_ms);
    let config = EnsembleConfig {
        servers,
        tick_ms,
        sync_limit_ticks: u64::from(sync_limit_ticks),
        init_limit_ticks: 2 * u64::from(sync_limit_ticks),
        link_latency_ms: s.ensemble.link_latency_ms,
        broken: s.ensemble.broken,
    };
    let e = Arc::new(match recorder {
        Some(r) => Ensemble::start_recording(config, r),
        None => Ensemble::start(config),
    });
    let drawn = Drawn {
        servers,
        sync_limit_ticks,
        tick_ms,
        session_timeout_ms,
        values: Vec::new(),
    };
    (e, drawn)
}

/// This seed's random faults: the scenario's pool, or (swarm) each kind of
/// it on with probability 1/2, at least one. One draw from the run's RNG
/// whatever the pool, so a schedule placed by hand in place of the random
/// one leaves the workload's draws as they were.
fn fault_pool(s: &Scenario) -> Vec<Fault> {
    let bits: u64 = thread_rng().gen();
    let kinds = &s.faults.kinds;
    if !s.faults.swarm || kinds.is_empty() {
        return kinds.clone();
    }
    let on: Vec<Fault> = kinds
        .iter()
        .enumerate()
        .filter(|(i, _)| bits >> (i % 64) & 1 == 1)
        .map(|(_, k)| *k)
        .collect();
    if on.is_empty() {
        return vec![kinds[(bits >> 32) as usize % kinds.len()]];
    }
    on
}

fn ensemble_counters(e: &Ensemble) -> Vec<(&'static str, u64)> {
    let mut total = zoosim_sim::server::ServerStats::default();
    for id in 0..e.config().servers {
        let s = e.with_server(id, |s| s.stats());
        total.elections_won += s.elections_won;
        total.expiries += s.expiries;
        total.replayed_events += s.replayed_events;
        total.lost_replies += s.lost_replies;
        total.truncations += s.truncations;
        total.zxid_refusals += s.zxid_refusals;
        total.reconnect_closes += s.reconnect_closes;
        total.role_change_drops += s.role_change_drops;
        total.breakage_hits += s.breakage_hits;
        total.not_empty_behind_close += s.not_empty_behind_close;
        total.peer_resets += s.peer_resets;
    }
    let faults = e.fault_counts();
    vec![
        ("elections-won", total.elections_won),
        ("session-expiries", total.expiries),
        ("setwatches-replayed", total.replayed_events),
        ("lost-replies", total.lost_replies),
        ("truncations", total.truncations),
        ("zxid-refusals", total.zxid_refusals),
        ("reconnect-closes", total.reconnect_closes),
        ("role-change-drops", total.role_change_drops),
        ("breakage-hits", total.breakage_hits),
        ("not-empty-behind-close", total.not_empty_behind_close),
        ("served-after-expiry", e.served_after_expiry().len() as u64),
        ("isolated-past-expiry", e.isolated_past_expiry()),
        ("client-resets", faults.client_resets),
        ("peer-resets", total.peer_resets),
        ("deposed-while-paused", faults.deposed_while_paused),
        ("syncing-leader-crashes", faults.syncing_leader_crashes),
        ("sessions-survived-outage", faults.sessions_survived_outage),
    ]
}

/// Clients the partitions placed on a side without a quorum: cut off from
/// the servers that can serve (at once, or once their own server gives
/// up), summed over the partitions.
fn minority_clients(faults: &[InjectedFault], servers: u32, clients: usize) -> u64 {
    let quorum = servers as usize / 2 + 1;
    let mut n = 0;
    for f in faults.iter().filter(|f| !f.skipped) {
        let p = &f.params;
        if let (Some(sides), Some(on)) = (&p.sides, &p.side_clients) {
            for (side, clients) in sides.iter().zip(on) {
                if side.len() < quorum {
                    n += clients.len() as u64;
                }
            }
            continue;
        }
        let (Some(split), Some(on_split)) = (&p.split, &p.split_clients) else {
            continue;
        };
        if split.len() < quorum {
            n += on_split.len() as u64;
        } else if servers as usize - split.len() < quorum {
            // Every client not on the split's side is on the other.
            n += clients.saturating_sub(on_split.len()) as u64;
        }
    }
    n
}

/// What the runner needs of a started run.
struct Started {
    running: Box<dyn Running>,
    setup: Option<Task>,
    tasks: Vec<Task>,
    /// What each drawn key drew (the shrinker pins it).
    drawn: Vec<(&'static str, i64)>,
}

/// Starts `recipe`: its drawn keys drawn (one draw each, in declaration
/// order, so a list pinned to one value moves no later draw), the
/// nemesis's slots made, its `start` called. The tasks are the runner's to
/// spawn (after the setup) and to stop.
fn start_recipe(
    s: &Scenario,
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    session_timeout_ms: u64,
    fault_end: Instant,
    until: Instant,
) -> Started {
    use crate::workload::WorkloadValue;
    let (recipe, workload) = (&*s.recipe, &s.workload);
    let mut drawn = Vec::new();
    let values = workload
        .iter()
        .map(|(k, v)| {
            let n = match v {
                WorkloadValue::Int(n) => *n,
                WorkloadValue::Drawn(d) => {
                    let n = pick(d);
                    drawn.push((k, n));
                    n
                }
            };
            (k, n)
        })
        .collect();
    ensure_slots(&slots, recipe.client_slots(workload));
    let mut ctx = RunCtx {
        ensemble,
        slots,
        recipe: recipe.name().to_owned(),
        variant: s.variant.clone(),
        values,
        session_timeout_ms,
        fault_end,
        until,
        setup: None,
        tasks: Vec::new(),
    };
    let running = recipe.start(&mut ctx);
    Started {
        running,
        setup: ctx.setup,
        tasks: ctx.tasks,
        drawn,
    }
}

/// Judges a run; a verdict naming a property or counter its recipe does
/// not declare is a violation (coverage goals and `zoosim list` go by the
/// declarations).
fn judge(
    s: &Scenario,
    running: Box<dyn Running>,
    ensemble: &Ensemble,
    slots: &ClientSlots,
    faults: &[InjectedFault],
    liveness: Liveness,
) -> Verdict {
    use super::verdict::run_properties::{DECLARED_NAMES, ENSEMBLE_LIVENESS, INVARIANTS, PROGRESS};
    let ctx = JudgeCtx {
        ensemble,
        slots,
        faults,
        liveness,
        workload: &s.workload,
        variant: s.variant.as_deref(),
    };
    let recipe = &*s.recipe;
    let mut verdict = running.judge(&ctx);
    let declared = recipe.counters();
    let mut undeclared = Vec::new();
    for (k, _) in &verdict.counters {
        if !declared.contains(&k.as_str()) {
            undeclared.push(format!(
                "recipe {} reported counter {k:?}, which it does not declare (Recipe::counters)",
                recipe.name()
            ));
        }
    }
    for v in &verdict.violations {
        let own = recipe.properties().iter().any(|p| p.name == v.property);
        let run = [ENSEMBLE_LIVENESS, INVARIANTS]
            .iter()
            .any(|p| p.name == v.property);
        if !own && !run {
            undeclared.push(format!(
                "recipe {} reported a violation of {:?}, a property it does not declare \
                 (Recipe::properties)",
                recipe.name(),
                v.property
            ));
        }
    }
    for d in undeclared {
        verdict.violation(DECLARED_NAMES, d);
    }
    if verdict.log.is_empty() {
        verdict.violation(
            PROGRESS,
            format!(
                "the clients logged no operation in {} simulated ms: nothing was tested \
                 (are the links slower than the session timeout, or every limit at its \
                 maximum?)",
                ctx.liveness.end_ms
            ),
        );
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use zoosim_core::fault::Fault;
    use zoosim_core::history::FaultParams;

    fn partition() -> InjectedFault {
        InjectedFault {
            at: Duration::from_nanos(1_369_000_100),
            due: Duration::from_nanos(1_368_000_000),
            fault: Fault::Partition,
            params: FaultParams {
                split: Some(vec![1]),
                window: Some(Duration::from_millis(3582)),
                ..FaultParams::default()
            },
            skipped: false,
        }
    }

    /// The digest is its documented definition (docs/HISTORY.md): the
    /// expected values come from `sha256sum` over the bytes written out by
    /// hand, not from this code.
    #[test]
    fn the_digest_is_sha256_over_the_documented_bytes() {
        let f = partition();
        assert_eq!(
            fault_line(&f),
            "1369000100 1368000000 partition - - - 1 - - - 0 3582000000 false"
        );
        // printf 'outcome-log 0\nfaults 0\n' | sha256sum
        assert_eq!(digest(&[], &[]), 0x24a7622ce2dc9e1f);
        // printf 'outcome-log 2\na\nb c\nfaults 1\n<the line above>\n' | sha256sum
        let log = ["a".to_string(), "b c".to_string()];
        assert_eq!(digest(&log, std::slice::from_ref(&f)), 0xe91216a1473dc15b);
        // Where a line ends counts: "a","b c" is not "a b","c".
        let moved = ["a b".to_string(), "c".to_string()];
        let one = std::slice::from_ref(&f);
        assert_ne!(digest(&moved, one), digest(&log, one));
        // A fault's flips and skip are in its line.
        let mut g = f;
        g.params.flips = Some(vec![(vec![0, 2], Duration::from_millis(5))]);
        g.skipped = true;
        assert_eq!(
            fault_line(&g),
            "1369000100 1368000000 partition - - - 1 - - 0,2/5000000 0 3582000000 true"
        );
    }
}
