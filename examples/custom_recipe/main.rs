//! zoosim with a recipe of one's own: a counter incremented by
//! compare-and-set ([`counter`]: the sans-IO machine; [`recipe`]: its
//! workload and oracle; [`model`]: its model), run by the whole `zoosim`
//! command.
//!
//!     cargo run --release --example custom_recipe -- run examples/custom_recipe/
//!     cargo run --release --example custom_recipe -- list examples/custom_recipe
//!     cargo run --release --example custom_recipe -- check cas-counter --variant cas-counter/blind-set
//!
//! `cas-counter.toml` passes under every fault; `bug-cas-counter-blind.toml`
//! (setData without a version) is caught losing increments, and so is
//! its model.

#[cfg(not(madsim))]
compile_error!("the simulation needs `--cfg madsim` (set by .cargo/config.toml)");

mod counter;
mod model;
mod recipe;

use std::process::ExitCode;

use zoosim::prelude::{main_with, Registry};

fn main() -> ExitCode {
    let registry = Registry::new()
        .with(recipe::CasCounterRecipe)
        .with_model(model::model())
        .invoked_as("cargo run --release --example custom_recipe --");
    main_with(registry)
}
