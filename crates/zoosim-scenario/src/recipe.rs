//! What a recipe is to zoosim: the [`Recipe`] trait, which every built-in
//! recipe ([`super::builtin`]) and every recipe of a user's crate
//! implements alike, and the [`Registry`](super::registry::Registry) that
//! knows them.
//!
//! A recipe declares what scenario files may say about it — its name,
//! buggy variants, `[workload]` keys with their bounds and defaults (in
//! one place: the parser, `zoosim list`, the shrinker and the run all read
//! them from here), the properties its oracle checks and the counters it
//! reports — and, in the simulation, `start`s its clients and hands back a
//! [`super::sim::Running`] that judges the run into a
//! [`Verdict`](super::verdict::Verdict). The declarations are pure data;
//! the run half exists under `--cfg madsim`.
//!
//! Adding a recipe: a module that implements [`Recipe`], and one line
//! that registers it (zoosim's own are listed in [`super::builtin::all`];
//! a user's crate calls [`super::registry::Registry::with`]).

use std::fmt;
use std::sync::Arc;

use super::verdict::Property;
use super::workload::{Workload, WorkloadError, WorkloadKey};

/// A recipe under scenario files, the nemesis and its own oracle.
///
/// Everything but `start` is a declaration: the parser accepts exactly
/// what is declared (with errors naming the file, line and column and the
/// accepted values), `zoosim list` shows it, coverage goals may name the
/// counters, and a verdict may name only the declared properties.
pub trait Recipe: Send + Sync + 'static {
    /// The name scenario files give as `recipe = "..."`: letters, digits
    /// and `-_/.`.
    fn name(&self) -> &str;

    /// One line for `zoosim list`.
    fn description(&self) -> &str {
        ""
    }

    /// The buggy variants it can be built in (`variant = "..."`), by name;
    /// by convention `<recipe>/<bug>`.
    fn variants(&self) -> &[&str] {
        &[]
    }

    /// The `[workload]` keys it takes, in the order files list them. A key
    /// named `clients` is the number of clients: the shrinker lowers it,
    /// and one named `operations` (operations per client, 0 for no bound)
    /// is what the shrinker counts.
    fn workload_keys(&self) -> &[WorkloadKey] {
        &[]
    }

    /// What a scenario's workload must satisfy beyond each key's bounds
    /// (e.g. a threshold no larger than the clients): Err names the key.
    fn check_workload(&self, _workload: &Workload) -> Result<(), WorkloadError> {
        Ok(())
    }

    /// How many clients the nemesis's client faults may aim at (a placed
    /// fault's `client` is below it): `clients` by default.
    fn client_slots(&self, workload: &Workload) -> usize {
        workload.clients().unwrap_or(0)
    }

    /// The fewest clients it runs with (the shrinker goes no lower).
    fn min_clients(&self, _workload: &Workload) -> usize {
        1
    }

    /// What its oracle checks, at least one.
    fn properties(&self) -> &[Property];

    /// The counters its verdicts report (coverage goals may name them, as
    /// they may `fault:<fault>` and the ensemble's counters).
    fn counters(&self) -> &[&str];

    /// One seed's run begins: spawn the clients
    /// ([`super::sim::RunCtx::spawn_client`], so the nemesis's client
    /// faults hit them too) and any other task; return what will judge the
    /// run once the quiet phase is over. Randomness comes from
    /// `madsim::rand::thread_rng()` only, so a seed replays exactly.
    #[cfg(madsim)]
    fn start(&self, ctx: &mut super::sim::RunCtx) -> Box<dyn super::sim::Running>;
}

/// A shared handle on a recipe: scenarios hold one. Two are equal when
/// they name the same recipe.
#[derive(Clone)]
pub struct RecipeRef(Arc<dyn Recipe>);

impl RecipeRef {
    /// A handle on `recipe`.
    pub fn new(recipe: impl Recipe) -> RecipeRef {
        RecipeRef(Arc::new(recipe))
    }
}

impl std::ops::Deref for RecipeRef {
    type Target = dyn Recipe;
    fn deref(&self) -> &dyn Recipe {
        &*self.0
    }
}

impl PartialEq for RecipeRef {
    fn eq(&self, other: &Self) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for RecipeRef {}

impl fmt::Debug for RecipeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Recipe({})", self.0.name())
    }
}
