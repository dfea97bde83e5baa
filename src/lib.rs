#![warn(missing_docs, unreachable_pub)]
//! zoosim: ZooKeeper's recipes, made correct under failure and proven so.
//!
//! The pure core — [`proto`], [`path`], [`tree`] — knows nothing of
//! runtimes, sockets, files or clocks. [`client`] holds the async `Zk` trait
//! recipes use and its implementations; [`real_server`] starts real
//! ZooKeeper servers for tests. [`cli`] is the `zoosim` command, which a
//! crate with its own recipes ([`scenario::recipe`], [`prelude`]) runs as its
//! own, and [`testing`] runs its scenario files under `cargo test`.

pub use zoosim_core::{breakage, check, fault, history, path, proto, quote, tree};

pub mod cli;
pub use zoosim_client as client;
pub use zoosim_sim as ensemble;
pub mod memory;
pub use zoosim_models as models;
pub mod prelude;
pub mod real_server;
pub use zoosim_recipes as recipes;
pub use zoosim_report as report;
pub use zoosim_scenario as scenario;
#[cfg(madsim)]
pub mod testing;
pub mod trace;
