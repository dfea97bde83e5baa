//! Scenarios as data: TOML files naming a recipe (or one of its buggy
//! variants), the ensemble, the workload, the fault mix and the coverage
//! goals ([`spec`], [`registry`]: pure); and, in the simulation, the
//! workloads ([`workload`]) and the seed runner ([`run`]). Users' own
//! recipes join them through [`custom`].

pub mod custom;
pub mod files;
pub mod registry;
pub mod spec;

#[cfg(madsim)]
pub mod run;
#[cfg(madsim)]
pub mod runner;
#[cfg(madsim)]
pub mod shrink;
#[cfg(madsim)]
pub mod workload;
