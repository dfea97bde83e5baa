//! A seed's budget, and what a long seed shows while it runs.
//!
//! A scenario that parses may still describe hours of busy clients: such a
//! seed ran for minutes, grew past a gigabyte and printed nothing. Every
//! outcome a client logs is counted (with the history the recorder keeps
//! beside it, it is what a seed's memory and time grow with); past
//! [`outcome_budget`] the seed is stopped and fails the `seed-budget`
//! property, naming the scenario keys that made it long. The count is of
//! simulated events, never of time or bytes measured, so a seed over
//! budget is over it on every machine and replays alike.
//!
//! A simulation runs on the thread that started it, so the count lives in
//! a thread-local, armed at each seed's start. The runner's threads each
//! publish their seed's progress in a [`Gauge`] every [`PUBLISH_EVERY`]
//! outcomes, for a progress line to read.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

/// The outcomes a seed may log, unless `ZOOSIM_SEED_BUDGET_OUTCOMES` says
/// otherwise: 25 times what the busiest shipped scenario's seeds log on
/// average (explicit-leader-crash: about 10,000, over 2,000 seeds). A
/// seed of 8 busy lock clients stopped at 500,000 had grown to 640 MB
/// with its history; at this budget, about half that.
pub const DEFAULT_OUTCOME_BUDGET: u64 = 250_000;

/// How often (in outcomes) a seed publishes its progress.
pub const PUBLISH_EVERY: u64 = 1024;

/// The outcomes a seed may log: [`DEFAULT_OUTCOME_BUDGET`], or the value
/// of `ZOOSIM_SEED_BUDGET_OUTCOMES` (read once per process; the tests set
/// it low to reach the budget quickly).
pub fn outcome_budget() -> u64 {
    static BUDGET: OnceLock<u64> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        std::env::var("ZOOSIM_SEED_BUDGET_OUTCOMES")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(DEFAULT_OUTCOME_BUDGET)
    })
}

/// One runner thread's seed in flight, as a progress line shows it.
#[derive(Debug, Default)]
pub struct Gauge {
    /// The seed running (meaningful while `outcomes` or `sim_ms` moves).
    pub seed: AtomicU64,
    /// Its simulated time at the last publication, in ms.
    pub sim_ms: AtomicU64,
    /// Its outcomes logged at the last publication.
    pub outcomes: AtomicU64,
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

    /// The seeds in flight: (seed, simulated ms, outcomes), by seed.
    pub fn in_flight(&self) -> Vec<(u64, u64, u64)> {
        let gauges = self.gauges.lock().unwrap_or_else(|e| e.into_inner());
        let mut seeds: Vec<(u64, u64, u64)> = gauges
            .iter()
            .filter(|g| g.running.load(Ordering::Relaxed) == 1)
            .map(|g| {
                (
                    g.seed.load(Ordering::Relaxed),
                    g.sim_ms.load(Ordering::Relaxed),
                    g.outcomes.load(Ordering::Relaxed),
                )
            })
            .collect();
        seeds.sort_unstable();
        seeds
    }
}

#[derive(Default)]
struct State {
    logged: u64,
    limit: u64,
    over: bool,
    waker: Option<Waker>,
    gauge: Option<Arc<Gauge>>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::default();
}

/// The seeds this thread runs from now on publish their progress to
/// `gauge` (None: to none).
pub fn publish_to(gauge: Option<Arc<Gauge>>) {
    STATE.with(|s| s.borrow_mut().gauge = gauge);
}

/// Arms the budget for `seed`, starting on this thread.
pub(crate) fn arm(seed: u64) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if let Some(g) = &s.gauge {
            g.seed.store(seed, Ordering::Relaxed);
            g.sim_ms.store(0, Ordering::Relaxed);
            g.outcomes.store(0, Ordering::Relaxed);
            g.running.store(1, Ordering::Relaxed);
        }
        s.logged = 0;
        s.limit = outcome_budget();
        s.over = false;
        s.waker = None;
    });
}

/// The seed on this thread ended: its gauge shows none.
pub(crate) fn disarm() {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if let Some(g) = &s.gauge {
            g.running.store(0, Ordering::Relaxed);
        }
        s.waker = None;
    });
}

/// A client logged an outcome at simulated `now_ms`: counted; past the
/// budget, the seed's [`exceeded`] is woken (once).
pub(crate) fn note_outcome(now_ms: u64) {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.logged += 1;
        if s.logged % PUBLISH_EVERY == 0 {
            if let Some(g) = &s.gauge {
                g.sim_ms.store(now_ms, Ordering::Relaxed);
                g.outcomes.store(s.logged, Ordering::Relaxed);
            }
        }
        if s.logged > s.limit && !s.over {
            s.over = true;
            if let Some(w) = s.waker.take() {
                w.wake();
            }
        }
    });
}

/// The outcomes logged so far by the seed on this thread, and its limit.
pub(crate) fn logged() -> (u64, u64) {
    STATE.with(|s| {
        let s = s.borrow();
        (s.logged, s.limit)
    })
}

/// Ready once the seed on this thread is over its budget. Pending until
/// then, and woken only then: awaiting it beside a phase schedules
/// nothing, so a seed within its budget runs exactly as without it.
pub(crate) fn exceeded() -> impl Future<Output = ()> {
    Exceeded
}

struct Exceeded;

impl Future for Exceeded {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        STATE.with(|s| {
            let mut s = s.borrow_mut();
            if s.over {
                Poll::Ready(())
            } else {
                s.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        })
    }
}
