#![warn(missing_docs, unreachable_pub)]
//! The simulated ZooKeeper ensemble.
//!
//! [`server`] is one server as a pure state machine (no runtime, clock or
//! socket), speaking the messages of [`msg`]; the simulator's shell, built
//! only under `--cfg madsim`, runs servers and clients as madsim nodes and
//! delivers those messages as datagrams.

pub use zoosim_core::{breakage, fault};
pub mod msg;
pub mod server;

#[cfg(madsim)]
pub mod sim;
