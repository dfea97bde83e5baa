//! The nemesis: faults injected at seeded random times into a running
//! ensemble and its clients, for as long as a run's fault phase lasts.
//! Swarm testing (as TigerBeetle's VOPR does): each seed draws which fault
//! kinds are on ([`swarm`]), so a sweep covers many mixes.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::rand::{thread_rng, Rng, SeedableRng};
use madsim::task::JoinHandle;
use madsim::time::{sleep, Instant, TimeHandle};
use rand_xoshiro::Xoshiro256PlusPlus;

pub use crate::ensemble::fault::Fault;

use super::{server_addr, Ensemble, SimZk};
use crate::client::Zk;
use crate::ensemble::msg::ServerId;

/// A client the nemesis may aim at. Workloads keep `zk` current (None
/// between sessions, and once crashed: faults aimed at the client are
/// then skipped).
#[derive(Default)]
pub struct ClientSlot {
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

pub type ClientSlots = Arc<Mutex<Vec<ClientSlot>>>;

#[derive(Clone, Debug)]
pub struct NemesisConfig {
    pub faults: Vec<Fault>,
    /// Gap between two faults.
    pub interval_ms: (u64, u64),
    /// How long a network fault lasts.
    pub window_ms: (u64, u64),
    /// The clients' session timeout: pause lengths follow it.
    pub session_timeout_ms: u64,
}

impl NemesisConfig {
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

/// One fault as injected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InjectedFault {
    /// Simulated time since the run started.
    pub at: Duration,
    pub fault: Fault,
    pub client: Option<usize>,
    pub server: Option<ServerId>,
    pub window: Duration,
}

impl fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>9.3} s  {}", self.at.as_secs_f64(), self.fault)?;
        if let Some(c) = self.client {
            write!(f, " client {c}")?;
        }
        if let Some(s) = self.server {
            write!(f, " server {s}")?;
        }
        if !self.window.is_zero() {
            write!(f, " for {} ms", self.window.as_millis())?;
        }
        Ok(())
    }
}

/// A fault placed by hand (a scenario's `[[faults.at]]`): its time since
/// the fault phase began, and optional targets (drawn when absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedFault {
    pub at: Duration,
    pub fault: Fault,
    pub client: Option<usize>,
    pub server: Option<ServerId>,
    pub window: Option<Duration>,
}

/// Injects faults until `until`, then waits for every crashed server to
/// be back and heals every link, so a quiet phase can follow.
pub async fn run(
    ensemble: Arc<Ensemble>,
    clients: ClientSlots,
    config: &NemesisConfig,
    until: Instant,
) -> Vec<InjectedFault> {
    run_planned(ensemble, clients, config, &[], until).await
}

/// [`run`], with `plan`'s faults at their times as well (times counted
/// from now).
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
        let (fault, target) = match (next_planned, next_random) {
            (Some(p), r) if r.is_none_or(|r| p <= r) => {
                sleep(p.saturating_duration_since(Instant::now())).await;
                let planned = plan.pop_front().expect("the next planned fault");
                let window = planned
                    .window
                    .unwrap_or_else(|| Duration::from_millis(nemesis.rng.gen_range(wlo..=whi)));
                let target = Target {
                    client: planned.client,
                    server: planned.server,
                    window,
                    pinned_window: planned.window.is_some(),
                };
                (planned.fault, target)
            }
            (_, Some(r)) => {
                sleep(r.saturating_duration_since(Instant::now())).await;
                next_random = None;
                let fault = config.faults[nemesis.rng.gen_range(0..config.faults.len())];
                let window = Duration::from_millis(nemesis.rng.gen_range(wlo..=whi));
                let target = Target {
                    client: None,
                    server: None,
                    window,
                    pinned_window: false,
                };
                (fault, target)
            }
            _ => break,
        };
        if let Some(mut injected) = nemesis.inject(fault, &target, config) {
            injected.at = TimeHandle::current().elapsed();
            if std::env::var_os("ZOOSIM_VERBOSE").is_some() {
                eprintln!("{injected}");
            }
            log.push(injected);
        }
    }
    for task in nemesis.background.drain(..) {
        let _ = task.await;
    }
    nemesis.ensemble.heal();
    log
}

/// Where a fault aims and for how long.
struct Target {
    client: Option<usize>,
    server: Option<ServerId>,
    window: Duration,
    /// The window was given (a pause lasts exactly this long).
    pinned_window: bool,
}

struct Nemesis {
    ensemble: Arc<Ensemble>,
    clients: ClientSlots,
    /// Servers crashed and not yet restarted.
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

    fn inject(
        &mut self,
        fault: Fault,
        target: &Target,
        config: &NemesisConfig,
    ) -> Option<InjectedFault> {
        let window = target.window;
        let servers = self.servers();
        let mut injected = InjectedFault {
            at: Duration::ZERO,
            fault,
            client: None,
            server: None,
            window,
        };
        if fault.aims_at_a_client() {
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
            let c = if let Some(c) = target.client.filter(|&c| c < n) {
                c
            } else if !busy.is_empty() && self.rng.gen_bool(0.5) {
                busy[self.rng.gen_range(0..busy.len())]
            } else {
                self.rng.gen_range(0..n)
            };
            let zk = self.clients.lock().unwrap()[c].zk.clone()?;
            injected.client = Some(c);
            injected.window = Duration::ZERO;
            let pinned = target.pinned_window.then_some(window);
            return self
                .on_client(fault, c, &zk, window, pinned, config)
                .map(|w| {
                    injected.window = w;
                    injected
                });
        }
        match fault {
            Fault::ServerCrash | Fault::LeaderCrash => {
                let s = if let Some(s) = target.server.filter(|&s| s < servers) {
                    s
                } else if fault == Fault::ServerCrash {
                    self.rng.gen_range(0..servers)
                } else {
                    self.ensemble.leader()?
                };
                injected.server = Some(s);
                let outage = target.pinned_window.then_some(window);
                injected.window = self.crash_for_a_while(s, outage)?;
            }
            Fault::Partition => {
                let (a, b) = random_split(servers, &mut self.rng)?;
                self.ensemble.partition(&[&a, &b]);
                self.heal_later(across(&[a, b]), window);
            }
            Fault::FlippingPartitions => {
                let (e, until) = (self.ensemble.clone(), self.until);
                let flips = self.rng.gen_range(2..6);
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.rng.gen());
                injected.window = Duration::ZERO;
                self.background.push(madsim::task::spawn(async move {
                    for _ in 0..flips {
                        if Instant::now() + Duration::from_secs(3) > until {
                            break; // the quiet phase stays quiet
                        }
                        let Some((a, b)) = random_split(servers, &mut rng) else {
                            continue;
                        };
                        e.partition(&[&a, &b]);
                        sleep(Duration::from_millis(rng.gen_range(200..3000))).await;
                        for (x, y) in across(&[a, b]) {
                            e.net().heal(server_ip(x), server_ip(y));
                        }
                    }
                }));
            }
            Fault::LeaderIsolated => {
                let l = self.ensemble.leader()?;
                let rest: Vec<ServerId> = (0..servers).filter(|&s| s != l).collect();
                self.ensemble.partition(&[&[l], &rest]);
                injected.server = Some(l);
                self.heal_later(across(&[vec![l], rest]), window);
            }
            Fault::OneWayClog => {
                let a = target
                    .server
                    .filter(|&s| s < servers)
                    .unwrap_or_else(|| self.rng.gen_range(0..servers));
                let b = (a + self.rng.gen_range(1..servers)) % servers;
                self.ensemble.clog(a, b);
                injected.server = Some(a);
                self.heal_later(vec![(a, b)], window);
            }
            Fault::LinkDelay => {
                // Mostly from the leader, so a follower lags behind.
                let a = match (
                    target.server.filter(|&s| s < servers),
                    self.ensemble.leader(),
                ) {
                    (Some(s), _) => s,
                    (None, Some(l)) if self.rng.gen_bool(0.7) => l,
                    _ => self.rng.gen_range(0..servers),
                };
                let b = (a + self.rng.gen_range(1..servers)) % servers;
                let delay = Duration::from_millis(self.rng.gen_range(50..1500));
                self.ensemble.delay(a, b, delay);
                injected.server = Some(a);
                self.heal_later(vec![(a, b)], window);
            }
            _ => unreachable!("{fault} aims at a client"),
        }
        Some(injected)
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
                let window = Duration::from_millis(self.rng.gen_range(0..50));
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

    /// Takes server `s` down for 0.5–4 s, unless that would leave less
    /// than a quorum up.
    fn crash_for_a_while(&mut self, s: ServerId, outage: Option<Duration>) -> Option<Duration> {
        let servers = self.servers() as usize;
        {
            let mut d = self.down.lock().unwrap();
            if d.len() + 1 > (servers - 1) / 2 || !d.insert(s) {
                return None;
            }
        }
        self.ensemble.crash_server(s);
        let (e, down) = (self.ensemble.clone(), self.down.clone());
        let outage = outage.unwrap_or_else(|| Duration::from_millis(self.rng.gen_range(500..4000)));
        self.background.push(madsim::task::spawn(async move {
            sleep(outage).await;
            e.restart_server(s);
            down.lock().unwrap().remove(&s);
        }));
        Some(outage)
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

/// A random split of the servers in two, if neither side is empty.
fn random_split(servers: u32, rng: &mut impl Rng) -> Option<(Vec<ServerId>, Vec<ServerId>)> {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for s in 0..servers {
        if rng.gen_bool(0.5) {
            a.push(s);
        } else {
            b.push(s);
        }
    }
    (!a.is_empty() && !b.is_empty()).then_some((a, b))
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
