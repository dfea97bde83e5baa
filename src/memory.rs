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
//! Each thread keeps its own running count and adds it to the process's
//! only once it has moved by [`FLUSH_BYTES`] either way: an atomic add at
//! every allocation and free cost 8 % of a model check and 10 % of a
//! simulation sweep (farm-bench, pair by pair, against the same binary
//! uncounted); with a thread-local add the two ratios were 0.97 and 0.95,
//! within the machine's noise. The price is
//! precision: the process's count misses under [`FLUSH_BYTES`] per thread,
//! and a thread that exits takes its last few KiB uncounted with it.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

/// How far a thread's count may move before it is added to the process's.
pub const FLUSH_BYTES: isize = 64 << 10;

/// The process's count, flushed from the threads' own.
static TOTAL: AtomicIsize = AtomicIsize::new(0);
/// Whether anything was ever counted (the allocator is installed).
static COUNTED: AtomicBool = AtomicBool::new(false);

thread_local! {
    // Const-initialized and without a destructor, so reading it inside
    // the allocator neither allocates nor fails during a thread's exit.
    static PENDING: Cell<isize> = const { Cell::new(0) };
}

/// Adds `n` bytes (negative: freed) to this thread's count, and that to
/// the process's once it has moved by [`FLUSH_BYTES`].
#[inline]
fn add(n: isize) {
    PENDING.with(|p| {
        let v = p.get() + n;
        if v.unsigned_abs() >= FLUSH_BYTES as usize {
            p.set(0);
            flush(v);
        } else {
            p.set(v);
        }
    });
}

#[cold]
fn flush(v: isize) {
    TOTAL.fetch_add(v, Ordering::Relaxed);
    COUNTED.store(true, Ordering::Relaxed);
}

/// Adds this thread's own count to the process's now.
fn flush_mine() {
    let v = PENDING.with(|p| p.replace(0));
    if v != 0 {
        flush(v);
    }
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
    // The caller's own count is exact; other threads' are behind by under
    // FLUSH_BYTES each. Any process that got this far has allocated (its
    // arguments, at least): nothing counted means no counter installed.
    flush_mine();
    COUNTED
        .load(Ordering::Relaxed)
        .then(|| TOTAL.load(Ordering::Relaxed).max(0) as usize)
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
