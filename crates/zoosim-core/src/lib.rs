#![warn(missing_docs, unreachable_pub)]
//! zoosim's pure core: what knows nothing of runtimes, sockets, files or
//! clocks, and what everything else speaks.
//!
//! [`proto`] holds ZooKeeper's wire types and [`path`] its path rules;
//! [`tree`] is ZooKeeper's data tree and watch table; [`history`] holds
//! client-level histories of runs and their JSON-lines and EDN forms;
//! [`check`] holds the oracles (linearizability, ZooKeeper's contract,
//! the recipes' own properties). [`fault`] and [`breakage`] name the
//! faults a run injects and the deliberate server bugs a scenario may turn
//! on; [`quote`] quotes input back to a person, cut short.

pub mod breakage;
pub mod check;
pub mod fault;
pub mod history;
pub mod path;
pub mod proto;
pub mod quote;
pub mod tree;
