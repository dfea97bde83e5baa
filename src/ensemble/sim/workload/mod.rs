//! Recipe workloads on the simulated ensemble: clients that run a recipe
//! machine in a loop, across sessions (a lost session is replaced by a new
//! one, as an application would), recording an outcome log for the
//! oracles in [`crate::check`].
//!
//! Each session runs on its own client node, so the nemesis's client
//! crashes and pauses stop the recipe code too; a supervisor on the main
//! node opens the next session.

pub mod barrier;
pub mod config;
pub mod double_barrier;
pub mod exclusive;
pub mod membership;
pub mod queue;

use madsim::time::TimeHandle;

/// Simulated milliseconds since the run started.
pub fn now_ms() -> u64 {
    TimeHandle::current().elapsed().as_millis() as u64
}
