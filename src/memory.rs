//! The memory the process holds, measured: a global allocator that counts
//! the bytes allocated and not yet freed.
//!
//! The checkers' own bounds estimate what their tables and states take,
//! and an estimate can be wrong by a factor: `zoosim lin --memory-mib
//! 300` on a ZooKeeper history of 10,000 unanswered creates grew to
//! 3 GB, and `zoosim check lock --clients 4 --max-faults 2` aborted on a
//! failed allocation with nothing printed. A bound the commands keep is a
//! bound on bytes counted here, at every allocation and free, so what
//! stops a job is what the machine gives it.
//!
//! The `zoosim` binary installs [`Counting`] as its global allocator; a
//! crate that runs [`crate::cli::main_with`] from its own binary can do
//! the same (`#[global_allocator] static A: Counting<System> =
//! Counting::new(System);`). Without it [`live_bytes`] is `None` and the
//! commands fall back to the checkers' estimates.
//!
//! The count is spread over [`SLOTS`] counters, each on its own cache
//! line, a thread picking one when it first allocates: two threads
//! allocating at once (a sweep's seeds, the model checker's workers) do
//! not contend on one line. A slot goes negative where a thread frees
//! what another allocated; only the sum means anything.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

/// Counters the threads' allocations are spread over.
const SLOTS: usize = 16;

/// One counter on its own cache line.
#[repr(align(128))]
struct Slot(AtomicIsize);

#[allow(clippy::declare_interior_mutable_const)] // only to build the array
const ZERO: Slot = Slot(AtomicIsize::new(0));
static COUNTS: [Slot; SLOTS] = [ZERO; SLOTS];
/// The next slot a thread takes.
static NEXT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Const-initialized and without a destructor, so reading it inside
    // the allocator neither allocates nor fails during a thread's exit.
    static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's slot.
fn slot() -> &'static AtomicIsize {
    let i = MINE.with(|m| {
        let i = m.get();
        if i != usize::MAX {
            return i;
        }
        let i = NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS;
        m.set(i);
        i
    });
    &COUNTS[i].0
}

/// Adds `n` bytes (negative: freed) to the count.
fn add(n: isize) {
    slot().fetch_add(n, Ordering::Relaxed);
}

/// A global allocator that counts the bytes `A` holds for the process.
#[derive(Debug)]
pub struct Counting<A>(A);

impl<A> Counting<A> {
    /// `inner`, counted.
    pub const fn new(inner: A) -> Counting<A> {
        Counting(inner)
    }
}

// SAFETY: every call is forwarded to the inner allocator with the same
// arguments and its result returned unchanged; the counting touches only
// atomics and a const thread-local, and never allocates.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded (see the impl).
        let p = unsafe { self.0.alloc(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded (see the impl).
        let p = unsafe { self.0.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded (see the impl).
        unsafe { self.0.dealloc(ptr, layout) };
        add(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded (see the impl).
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            add(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// The bytes allocated and not yet freed by the whole process, where
/// [`Counting`] is the global allocator; `None` where it is not (nothing
/// was ever counted).
pub fn live_bytes() -> Option<usize> {
    let sum: isize = COUNTS.iter().map(|s| s.0.load(Ordering::Relaxed)).sum();
    // Any process that got this far has allocated (its arguments, at
    // least): a zero sum means the counter is not installed.
    (sum > 0).then_some(sum as usize)
}

/// A bound on the memory one job may add to what the process held when
/// it began (measured by [`Counting`]).
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    start: usize,
    limit: usize,
}

impl Bound {
    /// A bound of `limit` bytes from now; `None` where the process's
    /// memory is not counted.
    pub fn from_now(limit: usize) -> Option<Bound> {
        live_bytes().map(|start| Bound { start, limit })
    }

    /// The bytes the job added so far.
    pub fn used(&self) -> usize {
        live_bytes().unwrap_or(0).saturating_sub(self.start)
    }

    /// Whether the job passed its bound.
    pub fn exceeded(&self) -> bool {
        self.used() > self.limit
    }

    /// The bound, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }
}
