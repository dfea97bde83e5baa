//! One seed of a scenario: an ensemble, the recipe's workload, the nemesis
//! (the scenario's pool, swarm-drawn, plus its planned faults), a quiet
//! phase, then the recipe's oracle. Everything random comes from the
//! seed's madsim RNG, so a seed replays exactly; the digest (over the
//! outcome log and the faults) shows it.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Runtime;
use madsim::task::JoinHandle;
use madsim::time::{sleep, timeout, Instant};

use super::registry::Recipe;
use super::spec::Scenario;
use super::workload::{self, now_ms};
use crate::check::{self, Entry, Liveness};
use crate::client::{Zk, ZkExt};
use crate::ensemble::fault::Fault;
use crate::ensemble::sim::nemesis::{
    self, ClientSlots, InjectedFault, NemesisConfig, PlannedFault,
};
use crate::ensemble::sim::{Ensemble, EnsembleConfig};
use crate::proto::CreateMode;
use crate::recipes::barrier::BarrierVariant;
use crate::recipes::election::{Election, ElectionVariant};
use crate::recipes::lock::{Lock, LockMode, LockVariant};

/// What one seed did.
#[derive(Clone, Debug)]
pub struct SeedOutcome {
    pub seed: u64,
    /// The oracle's verdict: None when every property held.
    pub failure: Option<String>,
    /// The oracle's report, for a reader.
    pub report: String,
    /// The recipe's counters, `fault:<name>` and the ensemble's.
    pub counters: BTreeMap<String, u64>,
    pub faults: Vec<InjectedFault>,
    /// Recipe operations logged (acquisitions, takes, reads, ...).
    pub ops: u64,
    /// When each outcome-log entry was made, in order (simulated ms since
    /// the start): when the workload did things, and stopped.
    pub event_ms: Vec<u64>,
    pub sim_ms: u64,
    /// When the fault phase began (simulated ms since the start): planned
    /// faults' times count from here.
    pub fault_start_ms: u64,
    /// What the seed drew from the scenario's lists and ranges.
    pub drawn: Drawn,
    /// Hash of the outcome log and the faults: equal for equal runs.
    pub digest: u64,
    /// The outcome log, one line per entry (for `--trace` and reports).
    pub log: Vec<String>,
}

/// What a seed drew from the scenario's lists and ranges. Each is one
/// draw from the run's RNG whatever the list, so the shrinker can pin it
/// without moving any later draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drawn {
    pub servers: u32,
    pub sync_limit_ticks: u32,
    /// None for recipes that hold nothing.
    pub hold_ms: Option<u64>,
}

/// One of `choices`, by one draw.
fn pick<T: Copy>(choices: &[T]) -> T {
    let bits: u64 = thread_rng().gen();
    choices[(bits % choices.len() as u64) as usize]
}

/// What the recipe's part of a run hands back.
struct Judged {
    failure: Option<String>,
    report: String,
    counters: Vec<(String, u64)>,
    log: Vec<String>,
    event_ms: Vec<u64>,
    digest: u64,
}

/// Runs `seed` of `scenario` in a fresh simulation.
pub fn run_seed(scenario: &Scenario, seed: u64) -> SeedOutcome {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let scenario = scenario.clone();
    runtime.block_on(async move { run(&scenario, seed).await })
}

async fn run(s: &Scenario, seed: u64) -> SeedOutcome {
    let (ensemble, servers, sync_limit_ticks) = ensemble(s);
    let t_ms = s.ensemble.session_timeout_ms;
    let pool = fault_pool(s);
    let hold_ms = matches!(
        s.recipe,
        Recipe::Lock | Recipe::SharedLock | Recipe::RevocableLock | Recipe::Election
    )
    .then(|| pick(&s.workload.hold_ms));
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
            client: f.client,
            server: f.server,
            to: f.to,
            split: f.split.clone(),
            flips: f.flips.as_ref().map(|flips| {
                flips
                    .iter()
                    .map(|(side, ms)| (side.clone(), Duration::from_millis(*ms)))
                    .collect()
            }),
            delay: f.delay_ms.map(Duration::from_millis),
            window: f.window_ms.map(Duration::from_millis),
        })
        .collect();
    let nemesis_config = NemesisConfig {
        interval_ms: s.faults.interval_ms,
        window_ms: s.faults.window_ms,
        ..NemesisConfig::new(pool, t_ms)
    };
    let started = Started {
        ensemble: ensemble.clone(),
        slots: slots.clone(),
        fault_end,
        until,
    };
    let (pending, tasks) = start(s, &started, hold_ms.unwrap_or(0)).await;
    let fault_start_ms = now_ms();
    let injected = nemesis::run_planned(
        ensemble.clone(),
        slots.clone(),
        &nemesis_config,
        &plan,
        fault_end,
    )
    .await;
    let quiet_from = now_ms();
    let quiet = Duration::from_millis(s.quiet_ms);
    // Clients with a number of operations: the run ends when all have
    // done theirs (or at the end of the quiet phase). This task wakes only
    // then (each wake-up draws from the seed's RNG), so a run with a bound
    // is the run without one until a client stops.
    match pending.finished() {
        Some(done) => {
            let _ = timeout(quiet, done.reach(s.workload.clients)).await;
        }
        None if matches!(pending, Pending::Custom(_)) => {
            // A registered recipe says when it is done: look every 10 ms.
            let end = Instant::now() + quiet;
            while Instant::now() < end && !pending.custom_finished() {
                sleep(Duration::from_millis(10)).await;
            }
        }
        None => sleep(quiet).await,
    }
    let liveness = Liveness {
        from_ms: quiet_from,
        bound_ms: s.liveness_bound_ms,
        end_ms: now_ms(),
    };
    // Stop the clients where they are: the log ends here.
    for task in &tasks {
        task.abort();
    }
    let judged = pending.judge(s, &started, &injected, liveness);
    // Unfinished tasks would outlive the runtime (see Ensemble::shutdown).
    ensemble.shutdown();
    let mut counters: BTreeMap<String, u64> = BTreeMap::new();
    for (k, v) in &judged.counters {
        *counters.entry(k.to_string()).or_default() += v;
    }
    for f in injected.iter().filter(|f| !f.skipped) {
        *counters.entry(format!("fault:{}", f.fault)).or_default() += 1;
    }
    for (k, v) in ensemble_counters(&ensemble) {
        counters.insert(k.to_owned(), v);
    }
    let mut digest = DefaultHasher::new();
    judged.digest.hash(&mut digest);
    format!("{injected:?}").hash(&mut digest);
    SeedOutcome {
        seed,
        failure: judged.failure,
        report: judged.report,
        ops: judged.log.len() as u64,
        event_ms: judged.event_ms,
        counters,
        faults: injected,
        sim_ms: now_ms(),
        fault_start_ms,
        drawn: Drawn {
            servers,
            sync_limit_ticks,
            hold_ms,
        },
        digest: digest.finish(),
        log: judged.log,
    }
}

/// The seed's ensemble, its size and syncLimit.
fn ensemble(s: &Scenario) -> (Arc<Ensemble>, u32, u32) {
    let servers = pick(&s.ensemble.servers);
    let (lo, hi) = s.ensemble.sync_limit_ticks;
    let ticks: Vec<u32> = (lo..=hi).collect();
    let sync_limit_ticks = pick(&ticks);
    let e = Arc::new(Ensemble::start(EnsembleConfig {
        servers,
        sync_limit_ticks: u64::from(sync_limit_ticks),
        init_limit_ticks: 2 * u64::from(sync_limit_ticks),
        link_latency_ms: s.ensemble.link_latency_ms,
        ..EnsembleConfig::default()
    }));
    (e, servers, sync_limit_ticks)
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
    let mut total = crate::ensemble::server::ServerStats::default();
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
    }
    vec![
        ("elections-won", total.elections_won),
        ("session-expiries", total.expiries),
        ("setwatches-replayed", total.replayed_events),
        ("lost-replies", total.lost_replies),
        ("truncations", total.truncations),
        ("zxid-refusals", total.zxid_refusals),
        ("reconnect-closes", total.reconnect_closes),
        ("role-change-drops", total.role_change_drops),
    ]
}

struct Started {
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    fault_end: Instant,
    until: Instant,
}

/// A recipe's workload, running; judged once the quiet phase is over.
enum Pending {
    Exclusive(workload::exclusive::ExclusiveRecord),
    Queue(workload::queue::QueueLog, String, bool),
    Config(workload::config::ConfigLog, String, usize),
    Membership(workload::membership::MembershipLog, String, usize),
    Barrier(workload::barrier::BarrierLog, workload::Finished),
    DoubleBarrier(
        workload::double_barrier::DoubleBarrierLog,
        usize,
        workload::Finished,
    ),
    TwoPhaseCommit(
        workload::two_phase_commit::TpcLog,
        usize,
        workload::Finished,
    ),
    /// A registered recipe's run (`super::custom`).
    Custom(Box<dyn super::custom::Running>),
}

fn mode_of(c: usize) -> LockMode {
    // Clients 0 and 3 write, the others read.
    if c % 3 == 0 {
        LockMode::Write
    } else {
        LockMode::Read
    }
}

async fn start(s: &Scenario, st: &Started, hold_ms: u64) -> (Pending, Vec<JoinHandle<()>>) {
    use workload::*;
    let w = &s.workload;
    let t = s.ensemble.session_timeout_ms;
    let (e, slots) = (st.ensemble.clone(), st.slots.clone());
    let variant = s.variant.as_deref();
    let lock_variant = variant.and_then(LockVariant::from_name).unwrap_or_default();
    let exclusive = |revoke_dir: Option<&str>| exclusive::ExclusiveWorkload {
        clients: w.clients,
        hold_ms,
        touches: w.touches,
        think_ms_max: w.think_ms_max,
        session_timeout_ms: t,
        revoke_dir: revoke_dir.map(str::to_owned),
        operations: w.operations,
    };
    match s.recipe {
        Recipe::Lock => {
            let make: exclusive::Make<Lock> =
                Arc::new(move |_, guid| Lock::with_variant("/locks/l", guid, lock_variant));
            let (record, tasks) = exclusive::spawn(e, slots, &exclusive(None), make, st.until);

            (Pending::Exclusive(record), tasks)
        }
        Recipe::SharedLock => {
            let make: exclusive::Make<Lock> =
                Arc::new(move |c, guid| Lock::shared("/data/rw", guid, mode_of(c), lock_variant));
            let (record, tasks) = exclusive::spawn(e, slots, &exclusive(None), make, st.until);

            (Pending::Exclusive(record), tasks)
        }
        Recipe::RevocableLock => {
            let dir = "/data/revocable";
            let make: exclusive::Make<Lock> = Arc::new(move |c, guid| {
                Lock::shared(dir, guid, mode_of(c), LockVariant::Correct).revocable()
            });
            let (record, tasks) = exclusive::spawn(e, slots, &exclusive(Some(dir)), make, st.until);

            (Pending::Exclusive(record), tasks)
        }
        Recipe::Election => {
            let v = variant
                .and_then(ElectionVariant::from_name)
                .unwrap_or_default();
            let make: exclusive::Make<Election> =
                Arc::new(move |_, guid| Election::with_variant("/app/election", guid, v));
            let (record, tasks) = exclusive::spawn(e, slots, &exclusive(None), make, st.until);

            (Pending::Exclusive(record), tasks)
        }
        Recipe::Queue | Recipe::PriorityQueue => {
            let priority = s.recipe == Recipe::PriorityQueue;
            let q = queue::QueueWorkload {
                producers: w.producers,
                consumers: w.consumers,
                priority,
                think_ms_max: w.think_ms_max,
                session_timeout_ms: t,
                ..queue::QueueWorkload::default()
            };
            let (log, tasks) = queue::spawn(e, slots, &q, st.fault_end, st.until);

            (Pending::Queue(log, q.dir, priority), tasks)
        }
        Recipe::Configuration => {
            let c = config::ConfigWorkload {
                clients: w.clients,
                think_ms_max: w.think_ms_max,
                session_timeout_ms: t,
                ..config::ConfigWorkload::default()
            };
            {
                let setup = e
                    .client(0)
                    .timeout_ms(t)
                    .connect()
                    .await
                    .expect("a setup session");
                setup
                    .create(&c.path, b"0", CreateMode::Persistent)
                    .await
                    .expect("the configuration node");
                let _ = setup.close().await;
            }
            let (log, tasks) = config::spawn(e, slots, &c, st.fault_end, st.until);

            (Pending::Config(log, c.path, c.clients), tasks)
        }
        Recipe::GroupMembership => {
            let m = membership::MembershipWorkload {
                clients: w.clients,
                churn_ms_max: w.churn_ms_max,
                session_timeout_ms: t,
                ..membership::MembershipWorkload::default()
            };
            let (log, tasks) = membership::spawn(e, slots, &m, st.fault_end, st.until);

            (Pending::Membership(log, m.group, m.clients), tasks)
        }
        Recipe::Barrier => {
            let b = barrier::BarrierWorkload {
                clients: w.clients,
                hold_ms_max: w.hold_ms_max,
                session_timeout_ms: t,
                variant: variant
                    .and_then(BarrierVariant::from_name)
                    .unwrap_or_default(),
                rounds: w.operations,
                ..barrier::BarrierWorkload::default()
            };
            let (log, finished, tasks) = barrier::spawn(e, slots, &b, st.until);

            (Pending::Barrier(log, finished), tasks)
        }
        Recipe::DoubleBarrier => {
            let d = double_barrier::DoubleBarrierWorkload {
                clients: w.clients,
                threshold: w.threshold,
                compute_ms_max: w.compute_ms_max,
                session_timeout_ms: t,
                rounds: w.operations,
                ..double_barrier::DoubleBarrierWorkload::default()
            };
            let (log, finished, tasks) = double_barrier::spawn(e, slots, &d, st.until);

            (Pending::DoubleBarrier(log, d.threshold, finished), tasks)
        }
        Recipe::TwoPhaseCommit => {
            let p = two_phase_commit::TpcWorkload {
                sites: w.clients - 1,
                abort_probability: f64::from(w.abort_percent) / 100.0,
                session_timeout_ms: t,
                transactions: w.operations,
                ..two_phase_commit::TpcWorkload::default()
            };
            let (log, finished, tasks) =
                two_phase_commit::spawn(e, slots, &p, st.fault_end, st.until);

            (Pending::TwoPhaseCommit(log, p.sites, finished), tasks)
        }
        Recipe::Custom => {
            let (running, tasks) = super::custom::sim::start(s, e, slots, st.fault_end, st.until);
            (Pending::Custom(running), tasks)
        }
    }
}

/// The log in time order, with the nemesis's client crashes in it (a
/// crashed client cannot log its own end).
fn with_crashes<E>(
    log: &Mutex<Vec<Entry<E>>>,
    injected: &[InjectedFault],
    crashed: impl Fn() -> E,
) -> Vec<Entry<E>>
where
    E: Clone,
{
    let mut log = log.lock().unwrap().clone();
    for f in injected
        .iter()
        .filter(|f| f.fault == Fault::ClientCrash && !f.skipped)
    {
        log.push(Entry {
            at_ms: f.at.as_millis() as u64,
            client: f.client.expect("a crash names its client"),
            event: crashed(),
        });
    }
    log.sort_by_key(|e| e.at_ms);
    log
}

fn judged<E: Debug>(
    log: &[Entry<E>],
    violations: &[String],
    report: &dyn std::fmt::Display,
    counters: Vec<(&'static str, u64)>,
) -> Judged {
    let lines: Vec<String> = log
        .iter()
        .map(|e| format!("{:>7} ms  client {}  {:?}", e.at_ms, e.client, e.event))
        .collect();
    let mut digest = DefaultHasher::new();
    lines.hash(&mut digest);
    Judged {
        failure: (!violations.is_empty()).then(|| violations.join("\n")),
        report: report.to_string(),
        counters: counters
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        log: lines,
        event_ms: log.iter().map(|e| e.at_ms).collect(),
        digest: digest.finish(),
    }
}

/// The clients alive at the end: a handle in the slot, its session still
/// known to the leader.
fn live_clients(st: &Started, leader: u32, clients: usize) -> Vec<usize> {
    let slots = st.slots.lock().unwrap();
    (0..clients)
        .filter(|&c| {
            slots.get(c).and_then(|s| s.zk.as_ref()).is_some_and(|zk| {
                st.ensemble
                    .with_server(leader, |s| s.tree().has_session(zk.session_id()))
            })
        })
        .collect()
}

impl Pending {
    /// The count of clients done, for workloads with a number of
    /// operations.
    fn finished(&self) -> Option<workload::Finished> {
        match self {
            Pending::Exclusive(record) => Some(record.finished.clone()),
            Pending::Barrier(_, f)
            | Pending::DoubleBarrier(_, _, f)
            | Pending::TwoPhaseCommit(_, _, f) => Some(f.clone()),
            _ => None,
        }
    }

    /// Whether a registered recipe's run says it is done.
    fn custom_finished(&self) -> bool {
        matches!(self, Pending::Custom(running) if running.finished())
    }

    fn judge(
        self,
        s: &Scenario,
        st: &Started,
        injected: &[InjectedFault],
        liveness: Liveness,
    ) -> Judged {
        use check::barrier::{check_barrier, BarrierEvent};
        use check::config::{check_config, ConfigEvent};
        use check::double_barrier::{check_double_barrier, DoubleBarrierEvent};
        use check::lock::{check_lock, LockEvent};
        use check::membership::{check_membership, MembershipEvent};
        use check::queue::{check_queue, QueueEvent};
        use check::two_phase_commit::{check_tpc, TpcEvent};
        let leader = st.ensemble.leader();
        match self {
            Pending::Exclusive(record) => {
                let log = with_crashes(&record.log, injected, || LockEvent::Crashed);
                let r = check_lock(&log, Some(liveness));
                let counters = vec![
                    ("acquisitions", r.acquisitions),
                    ("accesses-accepted", r.accesses_accepted),
                    ("accesses-rejected", r.accesses_rejected),
                    ("stale-beliefs", r.stale_beliefs),
                    ("suspensions", r.suspensions),
                    ("resumptions", r.resumptions),
                    ("sessions-lost", r.losses),
                    ("guid-found", r.recovered_found),
                    ("guid-not-found", r.recovered_not_found),
                    ("deletions-waking", r.deletions_waking_someone),
                    ("revokes-called", r.revokes_called),
                    ("revokes-asked", r.revokes_asked),
                    ("revokes-honoured", r.revokes_honoured),
                ];
                judged(&log, &r.violations, &r, counters)
            }
            Pending::Queue(log, dir, priority) => {
                let log = with_crashes(&log, injected, || QueueEvent::Crashed);
                let remaining: Vec<String> = match leader {
                    None => Vec::new(),
                    Some(l) => st.ensemble.with_server(l, |s| {
                        let tree = s.tree();
                        tree.node(&dir)
                            .map(|d| {
                                d.children
                                    .iter()
                                    .filter_map(|c| tree.node(&format!("{dir}/{c}")))
                                    .map(|n| String::from_utf8_lossy(&n.data).into_owned())
                                    .collect()
                            })
                            .unwrap_or_default()
                    }),
                };
                let r = check_queue(&log, &remaining, !priority, true);
                let counters = vec![
                    ("enqueued", r.enqueued),
                    ("taken", r.taken),
                    ("maybe-taken", r.maybe_taken),
                    ("unresolved-claims", r.unresolved_claims),
                    ("missed", r.missed),
                    ("duplicates-possible", r.duplicates_possible),
                    ("guid-found", r.recovered_found),
                    ("guid-not-found", r.recovered_not_found),
                ];
                judged(&log, &r.violations, &r, counters)
            }
            Pending::Config(log, path, clients) => {
                let log = with_crashes(&log, injected, || ConfigEvent::Crashed);
                let Some(l) = leader else {
                    return no_leader(&log);
                };
                let final_version = st
                    .ensemble
                    .with_server(l, |s| s.tree().node(&path).map_or(0, |n| n.version));
                let live = live_clients(st, l, clients);
                let r = check_config(&log, final_version, &live);
                let counters = vec![
                    ("reads", r.reads),
                    ("sets", r.sets),
                    ("conflicts", r.conflicts),
                    ("sessions-lost", r.losses),
                ];
                judged(&log, &r.violations, &r, counters)
            }
            Pending::Membership(log, group, clients) => {
                let log = with_crashes(&log, injected, || MembershipEvent::Crashed);
                let Some(l) = leader else {
                    return no_leader(&log);
                };
                let final_members: Vec<String> = st.ensemble.with_server(l, |s| {
                    s.tree()
                        .node(&group)
                        .map(|g| {
                            g.children
                                .iter()
                                .filter_map(|c| c.split_once('-').map(|(m, _)| m.to_owned()))
                                .collect()
                        })
                        .unwrap_or_default()
                });
                let live = live_clients(st, l, clients);
                let r = check_membership(
                    &log,
                    workload::membership::member_name,
                    &final_members,
                    &live,
                );
                let counters = vec![
                    ("joins", r.joins),
                    ("leaves", r.leaves),
                    ("views", r.views),
                    ("sessions-lost", r.losses),
                ];
                judged(&log, &r.violations, &r, counters)
            }
            Pending::Barrier(log, _) => {
                let log = with_crashes(&log, injected, || BarrierEvent::Crashed);
                let r = check_barrier(&log, Some(liveness));
                let counters = vec![
                    ("rounds", r.rounds),
                    ("passes", r.passes),
                    ("sessions-lost", r.losses),
                ];
                judged(&log, &r.violations, &r, counters)
            }
            Pending::DoubleBarrier(log, threshold, _) => {
                let log = with_crashes(&log, injected, || DoubleBarrierEvent::Crashed);
                let r = check_double_barrier(&log, threshold, Some(liveness));
                let counters = vec![
                    ("entries", r.entries),
                    ("exits", r.exits),
                    ("sessions-lost", r.losses),
                ];
                judged(&log, &r.violations, &r, counters)
            }
            Pending::TwoPhaseCommit(log, sites, _) => {
                let log = with_crashes(&log, injected, || TpcEvent::Crashed);
                let sites: Vec<usize> = (1..=sites).collect();
                let r = check_tpc(&log, &sites, Some(liveness));
                let counters = vec![
                    ("commits", r.commits),
                    ("aborts", r.aborts),
                    ("aborts-for-failed-sites", r.aborts_for_failed_sites),
                    ("sessions-lost", r.losses),
                ];
                judged(&log, &r.violations, &r, counters)
            }
            Pending::Custom(running) => {
                let v = super::custom::sim::judge(
                    running,
                    s,
                    &st.ensemble,
                    &st.slots,
                    injected,
                    liveness,
                );
                let mut digest = DefaultHasher::new();
                v.log.hash(&mut digest);
                Judged {
                    failure: (!v.violations.is_empty()).then(|| v.violations.join("\n")),
                    report: v.report,
                    counters: v.counters,
                    log: v.log,
                    event_ms: v.event_ms,
                    digest: digest.finish(),
                }
            }
        }
    }
}

/// The quiet phase ended without a leader: nothing final can be read, and
/// that is a liveness failure of the ensemble, not of the recipe.
fn no_leader<E: Debug>(log: &[Entry<E>]) -> Judged {
    let why = vec!["no leader after the quiet phase".to_owned()];
    judged(log, &why, &"no leader after the quiet phase", Vec::new())
}
