//! What ends a long command early, with what it found so far: a time
//! limit, a bound on the memory the process holds (measured, by
//! [`crate::memory`]), and a person's Ctrl-C or SIGTERM.
//!
//! The checkers poll a [`Watch`] through their budget's stop callback;
//! the model checker's threads, which take no callback, through a flag a
//! watching thread sets ([`watch_in_background`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::check::lin::Exhausted;
use crate::memory;

/// `mib` MiB in bytes, as a bound: saturated, never wrapped (a figure
/// past what memory counts means no bound).
pub(crate) fn mib_bytes(mib: u64) -> usize {
    usize::try_from(mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
}

/// Set by the first Ctrl-C (SIGINT, SIGTERM); a second finds it set. Also
/// the flag the simulator's seeds poll at every event
/// (`ensemble::sim::budget::stop_on`), which takes a flag, not a callback.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// What the first interrupt prints: what the command does next.
static ON_INTERRUPT: Mutex<&str> = Mutex::new("interrupted");

/// Makes the first Ctrl-C or SIGTERM set [`interrupted`] and print
/// `then` (what the command does next: "finishing the file in hand, then
/// what was found"), and the second end the process at once (exit 130).
/// Installed once per process; a later call only changes the message.
pub(crate) fn catch_interrupts(then: &'static str) {
    *ON_INTERRUPT.lock().unwrap_or_else(|e| e.into_inner()) = then;
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let set = ctrlc::set_handler(|| {
            if INTERRUPTED.swap(true, Ordering::Relaxed) {
                std::process::exit(130);
            }
            let then = *ON_INTERRUPT.lock().unwrap_or_else(|e| e.into_inner());
            eprintln!("\ninterrupted: {then} (Ctrl-C again to quit at once)");
        });
        if let Err(e) = set {
            eprintln!("warning: Ctrl-C will end the command without what it found: {e}");
        }
    });
}

/// Whether a Ctrl-C or SIGTERM came ([`catch_interrupts`]).
pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// The flag [`interrupted`] reads, for code that polls a flag.
#[cfg_attr(not(madsim), allow(dead_code))]
pub(crate) fn interrupt_flag() -> &'static AtomicBool {
    &INTERRUPTED
}

/// One job's limits: a deadline, a memory bound, interrupts. Once it has
/// said stop it keeps saying so (memory freed by the search it stopped
/// does not start the next stage of the job again).
#[derive(Debug)]
pub(crate) struct Watch {
    deadline: Option<Instant>,
    memory: Option<memory::Bound>,
    stopped: Cell<Option<Exhausted>>,
}

impl Watch {
    /// Limits from now: `time` (none: no time limit) and `memory_bytes`
    /// more than the process holds now (unbounded where memory is not
    /// counted: the checkers' estimates still hold).
    pub(crate) fn new(time: Option<Duration>, memory_bytes: usize) -> Watch {
        Watch {
            deadline: time.and_then(|t| Instant::now().checked_add(t)),
            memory: memory::Bound::from_now(memory_bytes),
            stopped: Cell::new(None),
        }
    }

    /// Why the job must stop, if it must.
    pub(crate) fn poll(&self) -> Option<Exhausted> {
        if let Some(why) = self.stopped.get() {
            return Some(why);
        }
        let why = if interrupted() {
            Some(Exhausted::Interrupted)
        } else if self.memory.is_some_and(|m| m.exceeded()) {
            Some(Exhausted::Memory)
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            Some(Exhausted::Stopped)
        } else {
            None
        };
        self.stopped.set(why);
        why
    }

    /// The bytes the job added to the process so far, where counted.
    pub(crate) fn used_bytes(&self) -> Option<usize> {
        self.memory.map(|m| m.used())
    }

    /// The memory bound, where memory is counted.
    pub(crate) fn memory_limit(&self) -> Option<usize> {
        self.memory.map(|m| m.limit())
    }
}

/// A [`Watch`] polled by a thread of its own every few milliseconds, for
/// work that takes no callback (the model checker's threads): they read
/// [`Background::stop`], a flag the thread sets. Dropping it ends the
/// thread.
pub(crate) struct Background {
    stop: Arc<AtomicBool>,
    why: Arc<Mutex<Option<Exhausted>>>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    /// Why the work was stopped, if it was.
    pub(crate) fn why(&self) -> Option<Exhausted> {
        *self.why.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The flag the work reads.
    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Watches `time` and `memory_bytes` (as [`Watch::new`]) and interrupts
/// from a thread of its own.
pub(crate) fn watch_in_background(time: Option<Duration>, memory_bytes: usize) -> Background {
    let stop = Arc::new(AtomicBool::new(false));
    let why = Arc::new(Mutex::new(None));
    let done = Arc::new(AtomicBool::new(false));
    let (s, w, d) = (stop.clone(), why.clone(), done.clone());
    let thread = std::thread::Builder::new()
        .name("zoosim-watch".into())
        .spawn(move || {
            let watch = Watch::new(time, memory_bytes);
            while !d.load(Ordering::Relaxed) {
                if let Some(reason) = watch.poll() {
                    *w.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
                    s.store(true, Ordering::Relaxed);
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
        .ok();
    Background {
        stop,
        why,
        done,
        thread,
    }
}
