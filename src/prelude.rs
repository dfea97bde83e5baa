//! What a recipe author needs, in one import: `use zoosim::prelude::*;`.
//!
//! A recipe is a sans-IO machine ([`Machine`], run by [`Driver`] over any
//! [`Zk`]), a [`Recipe`] that declares what scenario files may say about
//! it and starts its clients in the simulation ([`RunCtx`]), and a
//! [`Running`] that judges the run into a [`Verdict`] naming the
//! [`Property`] each violation breaks. [`Registry`] holds the recipes a
//! `zoosim` command ([`main_with`]) or a test ([`crate::testing`]) knows.
//!
//! A recipe's model ([`RecipeModel`]) puts its machine, with a few
//! clients, against every interleaving and fault of the model checker's
//! [`World`]; [`model_entry`] makes it something `zoosim check` runs, and
//! [`Registry::with_model`] registers it beside its recipe.

pub use crate::check::{Entry, Liveness, Property, Violation, NO_RECIPE_FAILURE};
pub use crate::cli::main_with;
pub use crate::client::{Zk, ZkExt};
pub use crate::models::{
    model_entry, settled, Faults, Listed, Log, ModelError, ModelProperty, RecipeModel, State, World,
};
pub use crate::proto::{CreateMode, Op, Reply, SessionEvent, Stat, WatchEvent, ZkError};
pub use crate::recipes::{classify, step, Driver, Failure, Input, Io, Machine, Output, Pending};
pub use crate::scenario::recipe::Recipe;
pub use crate::scenario::registry::Registry;
pub use crate::scenario::verdict::{run_properties, Verdict};
pub use crate::scenario::workload::{KeyKind, Workload, WorkloadError, WorkloadKey, WorkloadValue};

#[cfg(madsim)]
pub use crate::ensemble::sim::SimZk;
#[cfg(madsim)]
pub use crate::scenario::sim::{now_ms, Ending, JudgeCtx, NoLeader, OutcomeLog, RunCtx, Running};
/// The simulation's runtime, as zoosim uses it: a recipe's timers
/// (`madsim::time`) and randomness (`madsim::rand::thread_rng`, the only
/// source a seed replays) come from here.
#[cfg(madsim)]
pub use madsim;
