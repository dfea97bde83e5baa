//! A seed's budget of simulated events, what a long seed shows while it
//! runs, and how an interrupt reaches it.
//!
//! A scenario that parses may still describe a seed that runs for
//! minutes: an hour of busy clients (it grew past a gigabyte and printed
//! nothing), 64 producers and 64 consumers on one queue, or a fault every
//! millisecond for a simulated hour. What such a seed spends its time and
//! memory on is simulated events, so every one of them is counted
//! ([`Event`]): the outcomes its clients log (with the history the
//! recorder keeps beside them, what its memory grows with), the messages
//! its clients and servers send one another, the faults the nemesis tries
//! (skipped ones too: each costs a draw and a record), the connections
//! its clients open, and its servers' restarts. Past [`event_budget`]
//! events the seed is stopped and fails the `seed-budget` property, which
//! says what was counted, by kind, and names the scenario keys that made
//! the seed long. The count is of simulated events, never of time or
//! bytes measured, so a seed over budget is over it on every machine and
//! replays alike.
//!
//! A simulation runs on the thread that started it, so the count lives in
//! a thread-local, armed at each seed's start; the ensemble's shell counts
//! its messages, connections and restarts into it ([`note`]), as the
//! recipes' outcome logs and the nemesis do. The runner's threads each
//! publish their seed's progress in a [`Gauge`] every [`PUBLISH_EVERY`]
//! events, for a progress line to read, and may be given a flag
//! ([`stop_on`]) that, once set (the first Ctrl-C), stops their seed in
//! flight at its next event: [`stopped`] is ready then, with
//! [`Stop::Interrupted`]. A seed nobody interrupts runs exactly as
//! without the flag: it is read, never waited on.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use madsim::time::TimeHandle;

/// The events a seed may count, unless `ZOOSIM_SEED_BUDGET_EVENTS` says
/// otherwise. Measured over 30 seeds of each shipped scenario, the
/// busiest averages about 53,000 events a seed (explicit-leader-crash)
/// and the largest seed counted about 71,000 (mix-outages-double-barrier):
/// this is 19 times the one and 14 times the other. Of a seed's events
/// at most about a quarter are outcomes (64 producers and 64 consumers:
/// 22 %), so it also keeps a seed's outcome log and history within the
/// 250,000 outcomes the budget counted before it counted events (about
/// 320 MB). A seed of 64 producers and 64 consumers reaches it at a
/// simulated 15 s, a fault every millisecond at a simulated 75 s.
pub const DEFAULT_EVENT_BUDGET: u64 = 1_000_000;

/// How often (in events) a seed publishes its progress.
pub const PUBLISH_EVERY: u64 = 1024;

/// The environment variable that sets the budget (a positive integer).
pub const BUDGET_VAR: &str = "ZOOSIM_SEED_BUDGET_EVENTS";

/// The events a seed may count: [`DEFAULT_EVENT_BUDGET`], or the value of
/// `ZOOSIM_SEED_BUDGET_EVENTS` (read once per process; the tests set it
/// low to reach the budget quickly, or high to make a seed long).
pub fn event_budget() -> u64 {
    static BUDGET: OnceLock<u64> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        std::env::var(BUDGET_VAR)
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(DEFAULT_EVENT_BUDGET)
    })
}

/// A simulated event a seed's budget counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A client logged an outcome (the recipe's log and the history).
    Outcome,
    /// A message sent between a client and a server or two servers (a
    /// reset sent for a dead process too).
    Message,
    /// A message held on a cut link woken to look again: every heal wakes
    /// every held message (on any link), so under frequent partitions
    /// this, not the messages sent, is the network's work.
    Wakeup,
    /// A fault the nemesis tried, applied or skipped.
    Fault,
    /// A client opened a connection (its first, or a reconnection).
    Connect,
    /// A crashed server restarted.
    Restart,
}

/// A seed's events so far, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Outcomes logged.
    pub outcomes: u64,
    /// Messages sent.
    pub messages: u64,
    /// Held messages woken by a heal.
    pub wakeups: u64,
    /// Faults tried.
    pub faults: u64,
    /// Connections opened.
    pub connects: u64,
    /// Server restarts.
    pub restarts: u64,
}

impl Counts {
    /// Every event counted.
    pub fn total(&self) -> u64 {
        self.outcomes
            .saturating_add(self.messages)
            .saturating_add(self.wakeups)
            .saturating_add(self.faults)
            .saturating_add(self.connects)
            .saturating_add(self.restarts)
    }

    fn add(&mut self, event: Event) {
        let n = match event {
            Event::Outcome => &mut self.outcomes,
            Event::Message => &mut self.messages,
            Event::Wakeup => &mut self.wakeups,
            Event::Fault => &mut self.faults,
            Event::Connect => &mut self.connects,
            Event::Restart => &mut self.restarts,
        };
        *n = n.saturating_add(1);
    }
}

/// By kind, busiest first: "1191108 messages, 342431 outcomes, 1488
/// connections opened, 20 faults tried, 8 server restarts, 0 wake-ups of
/// held messages".
impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kinds = [
            (self.messages, "messages"),
            (self.wakeups, "wake-ups of held messages"),
            (self.outcomes, "outcomes"),
            (self.faults, "faults tried"),
            (self.connects, "connections opened"),
            (self.restarts, "server restarts"),
        ];
        // Stable: equal counts keep the order above.
        kinds.sort_by_key(|&(n, _)| std::cmp::Reverse(n));
        let shown: Vec<String> = kinds.iter().map(|(n, k)| format!("{n} {k}")).collect();
        f.write_str(&shown.join(", "))
    }
}

/// Why a seed's [`stopped`] is ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// It counted more events than its budget.
    OverBudget,
    /// Its run was interrupted (the first Ctrl-C or SIGTERM).
    Interrupted,
}

/// One runner thread's seed in flight, as a progress line shows it.
#[derive(Debug, Default)]
pub struct Gauge {
    /// The seed running (meaningful while `events` or `sim_ms` moves).
    pub seed: AtomicU64,
    /// Its simulated time at the last publication, in ms.
    pub sim_ms: AtomicU64,
    /// Its events counted at the last publication.
    pub events: AtomicU64,
    /// 1 while a seed runs, 0 between seeds.
    pub running: AtomicU64,
}

/// The gauges of a run's threads, for whoever shows progress.
#[derive(Debug, Default)]
pub struct Progress {
    gauges: Mutex<Vec<Arc<Gauge>>>,
}

impl Progress {
    /// A new gauge, for a thread that runs seeds.
    pub fn gauge(&self) -> Arc<Gauge> {
        let g = Arc::new(Gauge::default());
        self.gauges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(g.clone());
        g
    }

    /// The seeds in flight: (seed, simulated ms, events), by seed.
    pub fn in_flight(&self) -> Vec<(u64, u64, u64)> {
        let gauges = self.gauges.lock().unwrap_or_else(|e| e.into_inner());
        let mut seeds: Vec<(u64, u64, u64)> = gauges
            .iter()
            .filter(|g| g.running.load(Ordering::Relaxed) == 1)
            .map(|g| {
                (
                    g.seed.load(Ordering::Relaxed),
                    g.sim_ms.load(Ordering::Relaxed),
                    g.events.load(Ordering::Relaxed),
                )
            })
            .collect();
        seeds.sort_unstable();
        seeds
    }
}

#[derive(Default)]
struct State {
    counts: Counts,
    total: u64,
    limit: u64,
    /// Counting for a seed (between [`arm`] and [`disarm`]): events
    /// outside one (an ensemble driven by a unit test) stop nothing.
    armed: bool,
    stop: Option<Stop>,
    waker: Option<Waker>,
    gauge: Option<Arc<Gauge>>,
    interrupt: Option<&'static AtomicBool>,
}

impl State {
    fn stop(&mut self, why: Stop) {
        if self.stop.is_none() {
            self.stop = Some(why);
            if let Some(w) = self.waker.take() {
                w.wake();
            }
        }
    }
}

thread_local! {
    static STATE: RefCell<State> = RefCell::default();
}

/// The seeds this thread runs from now on publish their progress to
/// `gauge` (None: to none).
pub fn publish_to(gauge: Option<Arc<Gauge>>) {
    STATE.with(|s| s.borrow_mut().gauge = gauge);
}

/// The seeds this thread runs from now on stop at their next event once
/// `flag` is set ([`Stop::Interrupted`]); None: nothing interrupts them.
pub fn stop_on(flag: Option<&'static AtomicBool>) {
    STATE.with(|s| s.borrow_mut().interrupt = flag);
}

/// Arms the budget for `seed`, starting on this thread.
#[doc(hidden)]
pub fn arm(seed: u64) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if let Some(g) = &s.gauge {
            g.seed.store(seed, Ordering::Relaxed);
            g.sim_ms.store(0, Ordering::Relaxed);
            g.events.store(0, Ordering::Relaxed);
            g.running.store(1, Ordering::Relaxed);
        }
        s.counts = Counts::default();
        s.total = 0;
        s.limit = event_budget();
        s.armed = true;
        s.stop = None;
        s.waker = None;
    });
}

/// The seed on this thread ended: its gauge shows none.
#[doc(hidden)]
pub fn disarm() {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if let Some(g) = &s.gauge {
            g.running.store(0, Ordering::Relaxed);
        }
        s.armed = false;
        s.waker = None;
    });
}

/// One `event` of the seed on this thread: counted; past the budget, or
/// once the thread's interrupt flag is set, the seed's [`stopped`] is
/// woken (once).
#[doc(hidden)]
pub fn note(event: Event) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if !s.armed {
            return;
        }
        s.counts.add(event);
        s.total = s.total.saturating_add(1);
        if s.total % PUBLISH_EVERY == 0 {
            if let Some(g) = &s.gauge {
                if let Some(time) = TimeHandle::try_current() {
                    g.sim_ms
                        .store(time.elapsed().as_millis() as u64, Ordering::Relaxed);
                }
                g.events.store(s.total, Ordering::Relaxed);
            }
        }
        if s.total > s.limit {
            s.stop(Stop::OverBudget);
        } else if s.interrupt.is_some_and(|f| f.load(Ordering::Relaxed)) {
            s.stop(Stop::Interrupted);
        }
    });
}

/// The events counted so far by the seed on this thread, and its limit.
#[doc(hidden)]
pub fn counted() -> (Counts, u64) {
    STATE.with(|s| {
        let s = s.borrow();
        (s.counts, s.limit)
    })
}

/// Ready once the seed on this thread is over its budget or interrupted,
/// with which. Pending until then, and woken only then: awaiting it
/// beside a phase schedules nothing, so a seed within its budget and not
/// interrupted runs exactly as without it.
#[doc(hidden)]
pub fn stopped() -> impl Future<Output = Stop> {
    Stopped
}

struct Stopped;

impl Future for Stopped {
    type Output = Stop;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Stop> {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            match s.stop {
                Some(why) => Poll::Ready(why),
                None => {
                    s.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_show_every_kind_busiest_first() {
        let mut c = Counts::default();
        for _ in 0..3 {
            c.add(Event::Fault);
        }
        c.add(Event::Message);
        c.add(Event::Outcome);
        c.add(Event::Outcome);
        assert_eq!(c.total(), 6);
        assert_eq!(
            c.to_string(),
            "3 faults tried, 2 outcomes, 1 messages, 0 wake-ups of held messages, \
             0 connections opened, 0 server restarts"
        );
    }

    #[test]
    fn an_unarmed_thread_counts_nothing_and_an_armed_one_stops_past_its_limit() {
        note(Event::Message);
        assert_eq!(counted().0.total(), 0);
        arm(1);
        STATE.with(|s| s.borrow_mut().limit = 2);
        note(Event::Message);
        note(Event::Fault);
        assert_eq!(STATE.with(|s| s.borrow().stop), None);
        note(Event::Restart);
        assert_eq!(STATE.with(|s| s.borrow().stop), Some(Stop::OverBudget));
        assert_eq!(counted().0.restarts, 1);
        disarm();
    }

    #[test]
    fn a_set_interrupt_flag_stops_the_seed_at_its_next_event() {
        static FLAG: AtomicBool = AtomicBool::new(false);
        stop_on(Some(&FLAG));
        arm(2);
        note(Event::Outcome);
        assert_eq!(STATE.with(|s| s.borrow().stop), None);
        FLAG.store(true, Ordering::Relaxed);
        note(Event::Message);
        assert_eq!(STATE.with(|s| s.borrow().stop), Some(Stop::Interrupted));
        disarm();
        stop_on(None);
    }
}
