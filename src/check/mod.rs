//! Pure checkers over what a run recorded: the recipe oracles, judged on
//! outcome logs (what each client saw and did, with simulated times) and on
//! the effects a fenced resource accepted.

pub mod barrier;
pub mod config;
pub mod double_barrier;
pub mod fence;
pub mod lock;
pub mod membership;
pub mod queue;
pub mod two_phase_commit;

/// One line of an outcome log: at `at_ms` (simulated time), `client` (a
/// process: it may go through several sessions) saw or did `event`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Entry<E> {
    pub at_ms: u64,
    pub client: usize,
    pub event: E,
}

/// The quiet phase after the faults: from `from_ms` on, whatever a live
/// client starts or has pending must finish within `bound_ms`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Liveness {
    pub from_ms: u64,
    pub bound_ms: u64,
    /// When the log ends: waits that could not have reached their bound by
    /// then are not judged.
    pub end_ms: u64,
}
