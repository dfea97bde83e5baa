//! The nemesis: faults injected at seeded random times into a running
//! ensemble and its clients, for as long as a run's fault phase lasts.
//! Swarm testing (as TigerBeetle's VOPR does): each seed draws which fault
//! kinds are on ([`swarm`]), so a sweep covers many mixes.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::rand::seq::SliceRandom;
use madsim::rand::{thread_rng, Rng, SeedableRng};
use madsim::task::JoinHandle;
use madsim::time::{sleep, Instant, TimeHandle};
use rand_xoshiro::Xoshiro256PlusPlus;

pub use zoosim_core::fault::Fault;

use super::{server_addr, Ensemble, SimZk};
use crate::msg::ServerId;
use zoosim_client::Zk;
use zoosim_core::history::{FaultParams, FaultRecord};
use zoosim_core::proto::SessionId;

/// A client the nemesis may aim at. Workloads keep `zk` current (None
/// between sessions, and once crashed: faults aimed at the client are
/// then skipped).
#[derive(Default)]
pub struct ClientSlot {
    /// The client's current session handle; `None` between sessions and once
    /// crashed.
    pub zk: Option<Arc<SimZk>>,
    /// Set by the nemesis when it crashed this client.
    pub crashed: bool,
    /// How long the nemesis has paused this client, in all.
    pub paused_ms: u64,
    /// The client holds something a fault would hurt most (a lock,
    /// leadership): client faults aim at such clients half the time, as
    /// Jepsen's nemeses aim at primaries.
    pub busy: bool,
}

/// Every client slot, indexed by client number, shared by the workload and
/// the nemesis.
pub type ClientSlots = Arc<Mutex<Vec<ClientSlot>>>;

/// What the nemesis injects and how often; [`NemesisConfig::new`] gives
/// the default timings.
#[derive(Clone, Debug)]
pub struct NemesisConfig {
    /// The faults it draws from (uniformly).
    pub faults: Vec<Fault>,
    /// Gap between two faults.
    pub interval_ms: (u64, u64),
    /// How long a network fault lasts.
    pub window_ms: (u64, u64),
    /// The clients' (negotiated) session timeout: pause and isolation
    /// lengths follow it.
    pub session_timeout_ms: u64,
}

impl NemesisConfig {
    /// Injects `faults`, one every 300–1500 ms, network faults lasting
    /// 500–4000 ms.
    pub fn new(faults: Vec<Fault>, session_timeout_ms: u64) -> NemesisConfig {
        NemesisConfig {
            faults,
            interval_ms: (300, 1500),
            window_ms: (500, 4000),
            session_timeout_ms,
        }
    }
}

/// This seed's fault mix: each kind on with probability 1/2, at least one.
pub fn swarm() -> Vec<Fault> {
    let mut on: Vec<Fault> = Fault::ALL
        .into_iter()
        .filter(|_| thread_rng().gen_bool(0.5))
        .collect();
    if on.is_empty() {
        on.push(Fault::ALL[thread_rng().gen_range(0..Fault::ALL.len())]);
    }
    on
}

/// One fault as injected (or tried), with every parameter the nemesis
/// drew, so that placing it by hand ([`PlannedFault`]) injects exactly it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InjectedFault {
    /// Simulated time since the run started.
    pub at: Duration,
    /// When it was due, since the nemesis began: a fault placed at this
    /// time (a [`PlannedFault`]'s `at`) is due at the very same instant,
    /// and runs at the same `at`.
    pub due: Duration,
    /// What was injected.
    pub fault: Fault,
    /// Whom it hit and for how long: those of its kind's parameters that
    /// applied (a length of zero, or none, for a fault without one).
    pub params: FaultParams,
    /// The fault did not apply (no session to aim at, a crash that would
    /// cost the quorum, no leader, a second client crash, ...). Kept so a
    /// schedule placed by hand wakes the nemesis at the same instants: each
    /// wake-up is a scheduler step, which draws from the seed's RNG.
    pub skipped: bool,
}

impl fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (at, fault, params) = (self.at.as_secs_f64(), self.fault, &self.params);
        write!(f, "{at:>9.3} s  {fault}{params}")?;
        if self.skipped {
            write!(f, " (skipped)")?;
        }
        Ok(())
    }
}

impl InjectedFault {
    /// The fault as a history records it.
    pub fn record(&self) -> FaultRecord {
        FaultRecord {
            fault: self.fault.name().to_owned(),
            params: self.params.recorded(),
            skipped: self.skipped,
        }
    }
}

/// A fault placed by hand (a scenario's `[[faults.at]]`): its time since
/// the fault phase began, and optional parameters (drawn when absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedFault {
    /// When it is due, since the fault phase began.
    pub at: Duration,
    /// What to inject.
    pub fault: Fault,
    /// The parameters placed; the nemesis draws the absent ones.
    pub params: FaultParams,
}

impl PlannedFault {
    /// `fault` due `at` after the fault phase began, every parameter drawn.
    pub fn new(at: Duration, fault: Fault) -> PlannedFault {
        PlannedFault {
            at,
            fault,
            params: FaultParams::default(),
        }
    }
}

/// Injects faults until `until`, then waits for every crashed server to
/// be back, heals every link and waits (up to a minute) for an
/// established leader, so a quiet phase can follow. Returns the faults
/// that applied.
pub async fn run(
    ensemble: Arc<Ensemble>,
    clients: ClientSlots,
    config: &NemesisConfig,
    until: Instant,
) -> Vec<InjectedFault> {
    let mut log = run_planned(ensemble, clients, config, &[], until).await;
    log.retain(|f| !f.skipped);
    log
}

/// [`run`], with `plan`'s faults at their times as well (times counted
/// from now). Returns every fault tried, skipped ones marked.
pub async fn run_planned(
    ensemble: Arc<Ensemble>,
    clients: ClientSlots,
    config: &NemesisConfig,
    plan: &[PlannedFault],
    until: Instant,
) -> Vec<InjectedFault> {
    let mut nemesis = Nemesis {
        ensemble,
        clients,
        down: Arc::default(),
        background: Vec::new(),
        client_crashed: false,
        until,
        // The nemesis's own stream, seeded by one draw: a schedule placed
        // by hand draws the same from the run's RNG as the random one it
        // came from, so the workload sees the same draws.
        rng: Xoshiro256PlusPlus::seed_from_u64(thread_rng().gen()),
    };
    let start = Instant::now();
    let mut plan: std::collections::VecDeque<PlannedFault> = plan.iter().cloned().collect();
    plan.make_contiguous().sort_by_key(|p| p.at);
    let mut log = Vec::new();
    let (lo, hi) = config.interval_ms;
    let (wlo, whi) = config.window_ms;
    // The random faults draw from the RNG in the same order with or
    // without a plan: interval, then fault and window.
    let mut next_random: Option<Instant> = None;
    loop {
        if next_random.is_none()
            && !config.faults.is_empty()
            && Instant::now() + Duration::from_secs(1) < until
        {
            let gap = Duration::from_millis(nemesis.rng.gen_range(lo..=hi));
            next_random = Some(Instant::now() + gap);
        }
        let next_planned = plan.front().map(|p| start + p.at).filter(|&t| t < until);
        // No fault once the fault phase is over: the quiet phase is quiet.
        let due_random = next_random.filter(|&r| r < until);
        let (fault, target, due) = match (next_planned, due_random) {
            (Some(p), r) if r.is_none_or(|r| p <= r) => {
                sleep(p.saturating_duration_since(Instant::now())).await;
                let planned = plan.pop_front().expect("the next planned fault");
                let window = planned
                    .params
                    .window
                    .unwrap_or_else(|| Duration::from_millis(nemesis.rng.gen_range(wlo..=whi)));
                let target = Target {
                    given: planned.params,
                    window,
                };
                (planned.fault, target, p)
            }
            (_, Some(r)) => {
                sleep(r.saturating_duration_since(Instant::now())).await;
                next_random = None;
                let fault = config.faults[nemesis.rng.gen_range(0..config.faults.len())];
                let window = Duration::from_millis(nemesis.rng.gen_range(wlo..=whi));
                let target = Target {
                    given: FaultParams::default(),
                    window,
                };
                (fault, target, r)
            }
            _ => break,
        };
        // The history shows the fault before what it caused.
        let recorded_from = nemesis.ensemble.recorder().map(|r| r.len());
        // Tried, applied or skipped: each costs a record and its draws.
        super::budget::note(super::budget::Event::Fault);
        let mut injected = nemesis.inject(fault, &target, config);
        injected.at = TimeHandle::current().elapsed();
        injected.due = due.duration_since(start);
        if let (Some(r), Some(at)) = (nemesis.ensemble.recorder(), recorded_from) {
            r.fault_at(at, injected.record());
        }
        if std::env::var_os("ZOOSIM_VERBOSE").is_some() {
            eprintln!("{injected}");
        }
        log.push(injected);
    }
    for task in nemesis.background.drain(..) {
        let _ = task.await;
    }
    nemesis.ensemble.heal();
    // The quiet phase begins once the ensemble serves again: servers back
    // from an outage of a quorum, or a quorum's links just healed, still
    // elect, and a liveness bound counted from the restart or the heal
    // would count the election (13 of 8,000 seeds of the lock under the
    // quorum outages and three-way or long partitions overran it by a few
    // hundred ms). Bounded, so that an ensemble that never recovers ends.
    let give_up = Instant::now() + Duration::from_secs(60);
    while nemesis.ensemble.leader().is_none() && Instant::now() < give_up {
        sleep(Duration::from_millis(10)).await;
    }
    log
}

/// Where a fault aims and how.
struct Target {
    /// Each parameter given, or None to draw it; a window given is
    /// pinned (a pause lasts exactly this long).
    given: FaultParams,
    /// The window: the given one, else drawn from the config's range
    /// (some faults draw their own length instead).
    window: Duration,
}

/// How a server goes down.
#[derive(Clone, Copy)]
enum Death {
    /// A power-off: noticed by silence.
    PowerOff,
    /// A process kill: its connections reset at once.
    Kill,
}

struct Nemesis {
    ensemble: Arc<Ensemble>,
    clients: ClientSlots,
    /// Servers crashed and not yet restarted, or paused and not yet
    /// resumed.
    down: Arc<Mutex<BTreeSet<ServerId>>>,
    /// Restarts and heals still to come.
    background: Vec<JoinHandle<()>>,
    client_crashed: bool,
    until: Instant,
    rng: Xoshiro256PlusPlus,
}

impl Nemesis {
    fn servers(&self) -> u32 {
        self.ensemble.config().servers
    }

    /// Injects `fault`; the record says with what, or that it was skipped.
    fn inject(&mut self, fault: Fault, target: &Target, config: &NemesisConfig) -> InjectedFault {
        let mut injected = InjectedFault {
            at: Duration::ZERO,
            due: Duration::ZERO,
            fault,
            params: FaultParams {
                window: fault.has_a_window().then_some(target.window),
                ..FaultParams::default()
            },
            skipped: false,
        };
        if self.try_inject(target, config, &mut injected).is_none() {
            injected.skipped = true;
        }
        injected
    }

    /// Fills `injected` in as parameters are drawn; None if the fault
    /// could not apply. Each family of faults draws its own parameters,
    /// in the order the pinned runs depend on.
    fn try_inject(
        &mut self,
        target: &Target,
        config: &NemesisConfig,
        injected: &mut InjectedFault,
    ) -> Option<()> {
        let fault = injected.fault;
        if fault.aims_at_a_client() {
            return self.hit_a_client(target, config, injected);
        }
        match fault {
            // Server processes: one stops; a majority or every server
            // powers off; or the leader crashes, then its successor.
            Fault::ServerCrash | Fault::LeaderCrash | Fault::ServerKill | Fault::ServerPause => {
                self.stop_one_server(target, config, injected)
            }
            Fault::MajorityCrash | Fault::EnsembleCrash => {
                self.crash_servers_together(target, config, injected)
            }
            Fault::NewLeaderCrash => self.crash_leader_then_successor(target, injected),
            // Network partitions between servers (and their clients).
            Fault::Partition | Fault::LongPartition => {
                self.partition_in_two(target, config, injected)
            }
            Fault::ThreeWayPartition => self.partition_in_three(target, injected),
            Fault::FlippingPartitions => self.flip_partitions(target, injected),
            Fault::LeaderIsolated => self.isolate_leader(target.window, injected),
            // One server-to-server link.
            Fault::OneWayClog | Fault::LinkDelay => self.degrade_a_link(target, injected),
            _ => unreachable!("{fault} aims at a client"),
        }
    }

    /// A client fault: aims at a client, then injects on its machine
    /// (isolation) or its session (every other client fault).
    fn hit_a_client(
        &mut self,
        target: &Target,
        config: &NemesisConfig,
        injected: &mut InjectedFault,
    ) -> Option<()> {
        let fault = injected.fault;
        let window = target.window;
        let pinned = target.given.window;
        let c = self.aimed_client(target)?;
        injected.params.client = Some(c);
        if fault == Fault::ClientIsolated {
            // The machine, not a session: a client between sessions
            // is cut off as well (it cannot open its next one).
            if self.clients.lock().unwrap()[c].crashed {
                return None;
            }
            injected.params.window = Some(self.isolate(c, pinned, config));
            return Some(());
        }
        let zk = self.clients.lock().unwrap()[c].zk.clone()?;
        injected.params.window = Some(self.on_client(fault, c, &zk, window, pinned, config)?);
        Some(())
    }

    /// The client a client fault aims at: the placed one, else a busy
    /// client with a session half the time, else any; None if there are
    /// no clients.
    fn aimed_client(&mut self, target: &Target) -> Option<usize> {
        let n = self.clients.lock().unwrap().len();
        if n == 0 {
            return None;
        }
        let busy: Vec<usize> = {
            let slots = self.clients.lock().unwrap();
            (0..n)
                .filter(|&c| slots[c].busy && slots[c].zk.is_some())
                .collect()
        };
        Some(if let Some(c) = target.given.client.filter(|&c| c < n) {
            c
        } else if !busy.is_empty() && self.rng.gen_bool(0.5) {
            busy[self.rng.gen_range(0..busy.len())]
        } else {
            self.rng.gen_range(0..n)
        })
    }

    /// Server crash, leader crash, server kill, server pause: one server
    /// stops for a while (a crash or kill never costs the quorum).
    fn stop_one_server(
        &mut self,
        target: &Target,
        config: &NemesisConfig,
        injected: &mut InjectedFault,
    ) -> Option<()> {
        let fault = injected.fault;
        let servers = self.servers();
        // A window given pins the outage or the stall; else each draws its own.
        let pinned = target.given.window;
        match fault {
            Fault::ServerCrash | Fault::LeaderCrash => {
                let s = if let Some(s) = target.given.server.filter(|&s| s < servers) {
                    s
                } else if fault == Fault::ServerCrash {
                    self.rng.gen_range(0..servers)
                } else {
                    self.ensemble.leader()?
                };
                injected.params.server = Some(s);
                injected.params.window =
                    Some(self.crash_for_a_while(s, pinned, Death::PowerOff)?);
            }
            Fault::ServerKill => {
                let s = self.aimed_server(target, |rng| rng.gen_bool(0.5));
                injected.params.server = Some(s);
                injected.params.window = Some(self.crash_for_a_while(s, pinned, Death::Kill)?);
            }
            Fault::ServerPause => {
                let s = self.aimed_server(target, |rng| rng.gen_range(0..3) < 2);
                injected.params.server = Some(s);
                let t = config.session_timeout_ms.max(101);
                let stall = pinned
                    .unwrap_or_else(|| Duration::from_millis(self.rng.gen_range(100..=2 * t)));
                injected.params.window = Some(stall);
                self.pause_for(s, stall)?;
            }
            _ => unreachable!("{fault} stops more than one server"),
        }
        Some(())
    }

    /// Majority crash, ensemble crash: a majority (the placed one, else
    /// drawn) or every server powers off for 0.5 s to 2T.
    fn crash_servers_together(
        &mut self,
        target: &Target,
        config: &NemesisConfig,
        injected: &mut InjectedFault,
    ) -> Option<()> {
        let fault = injected.fault;
        let servers = self.servers();
        let set = match (&target.given.servers, fault) {
            (Some(set), _) => set.iter().copied().filter(|&s| s < servers).collect(),
            (None, Fault::EnsembleCrash) => (0..servers).collect(),
            (None, _) => {
                let mut all: Vec<ServerId> = (0..servers).collect();
                all.shuffle(&mut self.rng);
                let mut set = all[..servers as usize / 2 + 1].to_vec();
                set.sort_unstable();
                set
            }
        };
        if fault == Fault::MajorityCrash {
            injected.params.servers = Some(set.clone());
        }
        let t = config.session_timeout_ms.max(501);
        let pinned = target.given.window;
        let outage =
            pinned.unwrap_or_else(|| Duration::from_millis(self.rng.gen_range(500..=2 * t)));
        injected.params.window = Some(outage);
        self.outage(&set, outage)
    }

    /// New leader crash: the leader (or the placed server) crashes, then
    /// its successor while it syncs, both for 0.5–4 s.
    fn crash_leader_then_successor(
        &mut self,
        target: &Target,
        injected: &mut InjectedFault,
    ) -> Option<()> {
        let first = match target.given.server.filter(|&s| s < self.servers()) {
            Some(s) => s,
            None => self.ensemble.leader()?,
        };
        injected.params.server = Some(first);
        let pinned = target.given.window;
        let outage = pinned.unwrap_or_else(|| Duration::from_millis(self.rng.gen_range(500..4000)));
        injected.params.window = Some(outage);
        self.crash_new_leader(first, outage)
    }

    /// Partition, long partition: the servers split in two (a long
    /// partition for T to 3T), the clients placed on either side.
    fn partition_in_two(
        &mut self,
        target: &Target,
        config: &NemesisConfig,
        injected: &mut InjectedFault,
    ) -> Option<()> {
        let servers = self.servers();
        let window = if injected.fault == Fault::LongPartition && target.given.window.is_none() {
            let t = config.session_timeout_ms.max(1);
            let w = Duration::from_millis(self.rng.gen_range(t..=3 * t));
            injected.params.window = Some(w);
            w
        } else {
            target.window
        };
        let side = match &target.given.split {
            Some(side) => side.clone(),
            None => random_split(servers, &mut self.rng),
        };
        let (a, b) = sides(servers, &side);
        // A side with every server (or none) cuts nothing; it is
        // written as every server.
        injected.params.split = Some(if a.is_empty() { b.clone() } else { a.clone() });
        if a.is_empty() || b.is_empty() {
            return None;
        }
        let on_a = match &target.given.split_clients {
            Some(clients) => clients.clone(),
            None => self.place_clients(&a),
        };
        injected.params.split_clients = Some(on_a.clone());
        let n = self.clients.lock().unwrap().len();
        let on_b = (0..n).filter(|c| !on_a.contains(c)).collect();
        self.split_for(vec![a, b], vec![on_a, on_b], window);
        Some(())
    }

    /// Three-way partition: the servers split in three (needs three),
    /// the clients placed among the sides.
    fn partition_in_three(&mut self, target: &Target, injected: &mut InjectedFault) -> Option<()> {
        let servers = self.servers();
        if servers < 3 {
            return None; // no three sides
        }
        let sides = match &target.given.sides {
            Some(sides) => sides.clone(),
            None => three_way_split(servers, &mut self.rng),
        };
        injected.params.sides = Some(sides.clone());
        let on = match &target.given.side_clients {
            Some(on) => on.clone(),
            None => self.place_clients_among(&sides),
        };
        injected.params.side_clients = Some(on.clone());
        self.split_for(sides, on, target.window);
        Some(())
    }

    /// Flipping partitions: splits in a row (placed, else drawn), played
    /// out in the background until the quiet phase nears; always applies.
    fn flip_partitions(&mut self, target: &Target, injected: &mut InjectedFault) -> Option<()> {
        let servers = self.servers();
        let flips = match &target.given.flips {
            Some(flips) => flips.clone(),
            None => self.draw_flips(),
        };
        injected.params.flips = Some(flips.clone());
        let (e, until) = (self.ensemble.clone(), self.until);
        self.background.push(madsim::task::spawn(async move {
            for (side, d) in flips {
                if Instant::now() + Duration::from_secs(3) > until {
                    break; // the quiet phase stays quiet
                }
                let (a, b) = sides(servers, &side);
                if a.is_empty() || b.is_empty() {
                    continue;
                }
                e.partition(&[&a, &b]);
                sleep(d).await;
                for (x, y) in across(&[a, b]) {
                    e.net().heal(server_ip(x), server_ip(y));
                }
            }
        }));
        Some(())
    }

    /// Two to five splits, each held 200–3000 ms, drawn from a stream of
    /// their own (seeded by one draw); a split that cuts nothing is
    /// dropped.
    fn draw_flips(&mut self) -> Vec<(Vec<ServerId>, Duration)> {
        let servers = self.servers();
        let n = self.rng.gen_range(2..6);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.rng.gen());
        let mut flips = Vec::new();
        for _ in 0..n {
            let side = random_split(servers, &mut rng);
            let (a, b) = sides(servers, &side);
            if a.is_empty() || b.is_empty() {
                continue; // no flip, no time
            }
            let d = Duration::from_millis(rng.gen_range(200..3000));
            flips.push((a, d));
        }
        flips
    }

    /// Leader isolated: the leader cut off from every other server for
    /// `window`; None without a leader.
    fn isolate_leader(&mut self, window: Duration, injected: &mut InjectedFault) -> Option<()> {
        let l = self.ensemble.leader()?;
        let rest: Vec<ServerId> = (0..self.servers()).filter(|&s| s != l).collect();
        self.ensemble.partition(&[&[l], &rest]);
        injected.params.server = Some(l);
        self.heal_later(across(&[vec![l], rest]), window);
        Some(())
    }

    /// One-way clog, link delay: one direction of one server-to-server
    /// link stalls, or takes longer per message.
    fn degrade_a_link(&mut self, target: &Target, injected: &mut InjectedFault) -> Option<()> {
        let fault = injected.fault;
        let servers = self.servers();
        if servers < 2 {
            return None; // no link
        }
        let a = match (
            target.given.server.filter(|&s| s < servers),
            self.ensemble.leader(),
        ) {
            (Some(s), _) => s,
            // A delay mostly from the leader, so a follower lags.
            (None, Some(l)) if fault == Fault::LinkDelay && self.rng.gen_bool(0.7) => l,
            _ => self.rng.gen_range(0..servers),
        };
        injected.params.server = Some(a);
        let b = match target.given.to.filter(|&t| t < servers && t != a) {
            Some(b) => b,
            None => (a + self.rng.gen_range(1..servers)) % servers,
        };
        injected.params.to = Some(b);
        if fault == Fault::OneWayClog {
            self.ensemble.clog(a, b);
        } else {
            let given = target.given.delay;
            let delay =
                given.unwrap_or_else(|| Duration::from_millis(self.rng.gen_range(50..1500)));
            injected.params.delay = Some(delay);
            self.ensemble.delay(a, b, delay);
        }
        self.heal_later(vec![(a, b)], target.window);
        Some(())
    }

    /// A fault aimed at client `c`; returns its window if injected.
    fn on_client(
        &mut self,
        fault: Fault,
        c: usize,
        zk: &Arc<SimZk>,
        window: Duration,
        pinned: Option<Duration>,
        config: &NemesisConfig,
    ) -> Option<Duration> {
        let t = config.session_timeout_ms;
        match fault {
            Fault::ClientCutOff => {
                let s = zk.current_server()?;
                self.ensemble.cut_client(zk, s);
                let (e, ip) = (self.ensemble.clone(), zk.addr().ip());
                self.background.push(madsim::task::spawn(async move {
                    sleep(window).await;
                    e.net().heal(ip, server_ip(s));
                    e.net().heal(server_ip(s), ip);
                }));
                Some(window)
            }
            Fault::ClientCrash => {
                if self.client_crashed {
                    return None;
                }
                self.client_crashed = true;
                {
                    // Dead now: later faults aimed at it must be skipped.
                    let mut slots = self.clients.lock().unwrap();
                    slots[c].crashed = true;
                    slots[c].zk = None;
                }
                self.ensemble.crash_client(zk);
                Some(Duration::ZERO)
            }
            Fault::ForcedExpiry => {
                let window =
                    pinned.unwrap_or_else(|| Duration::from_millis(self.rng.gen_range(0..50)));
                self.ensemble
                    .expire_session_with_window(zk.session_id(), window)
                    .then_some(window)
            }
            Fault::BrokenConnection => {
                zk.break_connection();
                Some(Duration::ZERO)
            }
            Fault::LostWriteReply => self
                .ensemble
                .lose_next_write_reply(zk)
                .then_some(Duration::ZERO),
            Fault::ShortClientPause | Fault::LongClientPause => {
                let stall = if let Some(p) = pinned {
                    p.as_millis() as u64
                } else if fault == Fault::ShortClientPause {
                    self.rng.gen_range(100..(t / 2).max(101))
                } else {
                    t + self.rng.gen_range(0..t.max(1))
                };
                self.clients.lock().unwrap()[c].paused_ms += stall;
                self.ensemble.pause_client(zk, Duration::from_millis(stall));
                Some(Duration::from_millis(stall))
            }
            _ => unreachable!("{fault} aims at servers"),
        }
    }

    /// Which clients go on side `a` of a partition: a connected client
    /// goes with its server three times in four (it keeps talking to it),
    /// else to the other side (cut off from it, it fails over there); a
    /// client between connections goes either way.
    fn place_clients(&mut self, a: &[ServerId]) -> Vec<usize> {
        let servers: Vec<Option<ServerId>> = {
            let slots = self.clients.lock().unwrap();
            slots
                .iter()
                .map(|slot| slot.zk.as_ref().and_then(|zk| zk.current_server()))
                .collect()
        };
        let mut on_a = Vec::new();
        for (c, server) in servers.into_iter().enumerate() {
            let side_a = match server {
                Some(s) => a.contains(&s) == self.rng.gen_bool(0.75),
                None => self.rng.gen_bool(0.5),
            };
            if side_a {
                on_a.push(c);
            }
        }
        on_a
    }

    /// Cuts client `c`'s machine off from every server for `pinned`, or
    /// for T/3 to 3T; returns how long.
    fn isolate(&mut self, c: usize, pinned: Option<Duration>, config: &NemesisConfig) -> Duration {
        let t = config.session_timeout_ms.max(3);
        let window =
            pinned.unwrap_or_else(|| Duration::from_millis(self.rng.gen_range(t / 3..=3 * t)));
        let all: Vec<ServerId> = (0..self.servers()).collect();
        let session = self.clients.lock().unwrap()[c]
            .zk
            .as_ref()
            .map(|zk| zk.session_id());
        self.ensemble.cut_off_client(c as u32, &all);
        let e = self.ensemble.clone();
        self.background.push(madsim::task::spawn(async move {
            sleep(window).await;
            if let Some(session) = session {
                e.note_isolation_end(session);
            }
            e.reconnect_client(c as u32, &all);
        }));
        window
    }

    /// Takes server `s` down for 0.5–4 s, unless that would leave less
    /// than a quorum up.
    fn crash_for_a_while(
        &mut self,
        s: ServerId,
        outage: Option<Duration>,
        death: Death,
    ) -> Option<Duration> {
        let servers = self.servers() as usize;
        {
            let mut d = self.down.lock().unwrap();
            if d.len() + 1 > (servers - 1) / 2 || !d.insert(s) {
                return None;
            }
        }
        match death {
            Death::PowerOff => self.ensemble.crash_server(s),
            Death::Kill => self.ensemble.kill_server(s),
        }
        let (e, down) = (self.ensemble.clone(), self.down.clone());
        let outage = outage.unwrap_or_else(|| Duration::from_millis(self.rng.gen_range(500..4000)));
        self.background.push(madsim::task::spawn(async move {
            sleep(outage).await;
            e.restart_server(s);
            down.lock().unwrap().remove(&s);
        }));
        Some(outage)
    }

    /// The server a server fault hits: the placed one, else the leader
    /// when there is one and `leader_first` draws so, else any.
    fn aimed_server(
        &mut self,
        target: &Target,
        leader_first: impl FnOnce(&mut Xoshiro256PlusPlus) -> bool,
    ) -> ServerId {
        let servers = self.servers();
        match (
            target.given.server.filter(|&s| s < servers),
            self.ensemble.leader(),
        ) {
            (Some(s), _) => s,
            (None, Some(l)) if leader_first(&mut self.rng) => l,
            _ => self.rng.gen_range(0..servers),
        }
    }

    /// Stops server `s` for `stall`; None if it is down or paused.
    fn pause_for(&mut self, s: ServerId, stall: Duration) -> Option<()> {
        if !self.down.lock().unwrap().insert(s) {
            return None;
        }
        self.ensemble.pause_server(s, stall);
        let (e, down) = (self.ensemble.clone(), self.down.clone());
        self.background.push(madsim::task::spawn(async move {
            sleep(stall).await;
            e.resume_server(s);
            down.lock().unwrap().remove(&s);
        }));
        Some(())
    }

    /// Powers `set` off together (a quorum, or every server) and restarts
    /// them together after `outage`; None if one of them is down or
    /// paused already. Counts the sessions that outlive the outage: live
    /// before it, and still live a session timeout and a tick after a
    /// leader is established again (the new leader gives every session of
    /// its tree a fresh timeout; a client that reconnects in it keeps its
    /// session).
    fn outage(&mut self, set: &[ServerId], outage: Duration) -> Option<()> {
        {
            let mut d = self.down.lock().unwrap();
            if set.is_empty() || set.iter().any(|s| d.contains(s)) {
                return None;
            }
            d.extend(set.iter().copied());
        }
        let before: Vec<SessionId> = self
            .ensemble
            .leader()
            .map(|l| {
                self.ensemble
                    .with_server(l, |s| s.tree().sessions().map(|(id, _)| id).collect())
            })
            .unwrap_or_default();
        for &s in set {
            self.ensemble.crash_server(s);
        }
        let (e, down, set) = (self.ensemble.clone(), self.down.clone(), set.to_vec());
        self.background.push(madsim::task::spawn(async move {
            sleep(outage).await;
            for &s in &set {
                e.restart_server(s);
            }
            down.lock().unwrap().retain(|s| !set.contains(s));
            // Counted aside, so the quiet phase starts on time.
            madsim::task::spawn(async move {
                if before.is_empty() {
                    return;
                }
                let t = e.config().tick_ms;
                let give_up = Instant::now() + Duration::from_secs(60);
                let leader = loop {
                    if let Some(l) = e.leader() {
                        break l;
                    }
                    if Instant::now() > give_up {
                        return;
                    }
                    sleep(Duration::from_millis(t)).await;
                };
                let timeout = e
                    .with_server(leader, |s| s.tree().sessions().map(|(_, t)| t).max())
                    .unwrap_or(0);
                sleep(Duration::from_millis(timeout + 2 * t)).await;
                let Some(l) = e.leader() else {
                    return;
                };
                let survived = e.with_server(l, |s| {
                    before
                        .iter()
                        .filter(|&&id| s.tree().has_session(id))
                        .count()
                });
                e.count_fault(|c| c.sessions_survived_outage += survived as u64);
            });
        }));
        Some(())
    }

    /// Crashes `first` (the leader, unless placed otherwise), then the
    /// next server to lead while it is still syncing its followers (with
    /// 3 servers, the quorum goes with it); both restart `outage` after
    /// the first crash.
    fn crash_new_leader(&mut self, first: ServerId, outage: Duration) -> Option<()> {
        if !self.down.lock().unwrap().insert(first) {
            return None;
        }
        self.ensemble.crash_server(first);
        let trap = self.ensemble.trap_syncing_leader();
        let (e, down) = (self.ensemble.clone(), self.down.clone());
        let back = Instant::now() + outage;
        self.background.push(madsim::task::spawn(async move {
            let wait = back.saturating_duration_since(Instant::now());
            let second = match madsim::time::timeout(wait, trap).await {
                Ok(Ok(n)) if e.is_syncing_leader(n) && down.lock().unwrap().insert(n) => {
                    e.crash_server(n);
                    e.count_fault(|c| c.syncing_leader_crashes += 1);
                    Some(n)
                }
                _ => None,
            };
            madsim::time::sleep_until(back).await;
            for s in std::iter::once(first).chain(second) {
                e.restart_server(s);
                down.lock().unwrap().remove(&s);
            }
        }));
        Some(())
    }

    /// Partitions the servers into `sides` for `window`, each side's
    /// clients (`on[i]`, by scenario number) cut off from every other
    /// side's servers.
    fn split_for(&mut self, sides: Vec<Vec<ServerId>>, on: Vec<Vec<usize>>, window: Duration) {
        let refs: Vec<&[ServerId]> = sides.iter().map(Vec::as_slice).collect();
        self.ensemble.partition(&refs);
        let mut placed = Vec::new();
        for (i, clients) in on.iter().enumerate() {
            let away: Vec<ServerId> = sides
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .flat_map(|(_, side)| side.iter().copied())
                .collect();
            for &c in clients {
                self.ensemble.cut_off_client(c as u32, &away);
                placed.push((c as u32, away.clone()));
            }
        }
        let links = across(&sides);
        let e = self.ensemble.clone();
        self.background.push(madsim::task::spawn(async move {
            sleep(window).await;
            for (x, y) in links {
                e.net().heal(server_ip(x), server_ip(y));
            }
            for (c, away) in placed {
                e.reconnect_client(c, &away);
            }
        }));
    }

    /// Which side of `sides` each client goes on: a connected client with
    /// its server three times in four, else on another side, drawn; a
    /// client between connections on any side.
    fn place_clients_among(&mut self, sides: &[Vec<ServerId>]) -> Vec<Vec<usize>> {
        let servers: Vec<Option<ServerId>> = {
            let slots = self.clients.lock().unwrap();
            slots
                .iter()
                .map(|slot| slot.zk.as_ref().and_then(|zk| zk.current_server()))
                .collect()
        };
        let mut on = vec![Vec::new(); sides.len()];
        for (c, server) in servers.into_iter().enumerate() {
            let own = server.and_then(|s| sides.iter().position(|side| side.contains(&s)));
            let side = match own {
                Some(i) if self.rng.gen_bool(0.75) => i,
                Some(i) => (i + self.rng.gen_range(1..sides.len())) % sides.len(),
                None => self.rng.gen_range(0..sides.len()),
            };
            on[side].push(c);
        }
        on
    }

    /// Undoes a network fault after a while.
    fn heal_later(&mut self, links: Vec<(ServerId, ServerId)>, how_long: Duration) {
        let e = self.ensemble.clone();
        self.background.push(madsim::task::spawn(async move {
            sleep(how_long).await;
            for (a, b) in links {
                e.net().heal(server_ip(a), server_ip(b));
                e.delay(a, b, Duration::ZERO);
            }
        }));
    }
}

fn server_ip(s: ServerId) -> std::net::IpAddr {
    server_addr(s).ip()
}

/// A random split of `servers` (at least 3) in three sides, none empty,
/// each in order, the sides ordered by their first server.
fn three_way_split(servers: u32, rng: &mut impl Rng) -> Vec<Vec<ServerId>> {
    let mut all: Vec<ServerId> = (0..servers).collect();
    all.shuffle(rng);
    let mut sides = vec![Vec::new(); 3];
    for (i, s) in all.into_iter().enumerate() {
        let side = if i < 3 { i } else { rng.gen_range(0..3) };
        sides[side].push(s);
    }
    for side in &mut sides {
        side.sort_unstable();
    }
    sides.sort();
    sides
}

/// One side of a random split of the servers in two (either side may
/// come out empty).
fn random_split(servers: u32, rng: &mut impl Rng) -> Vec<ServerId> {
    (0..servers).filter(|_| rng.gen_bool(0.5)).collect()
}

/// `side` and the other servers, each in order.
fn sides(servers: u32, side: &[ServerId]) -> (Vec<ServerId>, Vec<ServerId>) {
    (0..servers).partition(|s| side.contains(s))
}

/// Every ordered pair of servers on different sides.
fn across(sides: &[Vec<ServerId>]) -> Vec<(ServerId, ServerId)> {
    let mut links = Vec::new();
    for (i, a) in sides.iter().enumerate() {
        for (j, b) in sides.iter().enumerate() {
            if i != j {
                links.extend(a.iter().flat_map(|&x| b.iter().map(move |&y| (x, y))));
            }
        }
    }
    links
}
