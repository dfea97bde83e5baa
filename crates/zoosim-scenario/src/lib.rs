#![warn(missing_docs, unreachable_pub)]
//! Scenarios as data: TOML files naming a recipe (or one of its buggy
//! variants), the ensemble, the workload, the fault mix and the coverage
//! goals ([`spec`]: pure); what a recipe is to them ([`recipe`]: the trait
//! every recipe implements, zoosim's own in [`builtin`] and a user's
//! alike; its [`workload`] keys; the [`verdict`] its oracle gives; the
//! [`registry`] of the recipes a command knows); and, in the simulation,
//! what a recipe's run is given ([`sim`]), one seed ([`run`]), the seed
//! runner ([`runner`]), the shrinker ([`shrink`]) and sweeps across
//! machines ([`sweep`]: shards' summaries and their merge).
//!
//! Module order, bottom first: workload, verdict ← sim ← recipe ←
//! builtin ← registry ← spec ← files, run ← runner ← shrink, sweep. A
//! seed's [`budget`] of simulated events is the simulated ensemble's
//! (`ensemble::sim::budget`: its shell counts messages, connections and
//! restarts into it), read here.

pub mod builtin;
pub mod files;
pub mod output;
pub mod recipe;
pub mod registry;
pub mod spec;
pub mod verdict;
pub mod workload;

#[cfg(madsim)]
pub use zoosim_sim::sim::budget;
#[cfg(madsim)]
pub mod run;
#[cfg(madsim)]
pub mod runner;
#[cfg(madsim)]
pub mod shrink;
#[cfg(madsim)]
pub mod sim;
#[cfg(madsim)]
pub mod sweep;

#[cfg(all(test, madsim))]
mod broken_tests;
#[cfg(test)]
mod recipe_tests;
#[cfg(all(test, madsim))]
mod sweep_tests;
