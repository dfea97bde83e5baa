//! Scenarios as data: TOML files naming a recipe (or one of its buggy
//! variants), the ensemble, the workload, the fault mix and the coverage
//! goals ([`spec`]: pure); what a recipe is to them ([`recipe`]: the trait
//! every recipe implements, zoosim's own in [`builtin`] and a user's
//! alike, and the registry); and, in the simulation, a recipe's run
//! ([`sim`]), one seed ([`run`]), the seed runner ([`runner`]) and the
//! shrinker ([`shrink`]).

pub mod builtin;
pub mod files;
pub mod recipe;
pub mod spec;

#[cfg(madsim)]
pub mod run;
#[cfg(madsim)]
pub mod runner;
#[cfg(madsim)]
pub mod shrink;
#[cfg(madsim)]
pub mod sim;
