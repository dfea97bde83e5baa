//! zoosim's own recipes, each family in its own module: its declarations
//! (name, variants, workload keys, properties, counters), its workload on
//! the simulated ensemble and the glue to its oracle in [`zoosim_core::check`].
//! A recipe is added by its module and one line in [`all`].

pub mod barrier;
pub mod configuration;
pub mod double_barrier;
pub mod lock;
pub mod membership;
pub mod queue;
pub mod two_phase_commit;

use super::recipe::RecipeRef;

/// Every built-in recipe, in the order `zoosim list` shows them.
pub fn all() -> Vec<RecipeRef> {
    vec![
        RecipeRef::new(lock::LOCK),
        RecipeRef::new(lock::SHARED_LOCK),
        RecipeRef::new(lock::REVOCABLE_LOCK),
        RecipeRef::new(lock::ELECTION),
        RecipeRef::new(queue::QUEUE),
        RecipeRef::new(queue::PRIORITY_QUEUE),
        RecipeRef::new(configuration::Configuration),
        RecipeRef::new(membership::GroupMembership),
        RecipeRef::new(barrier::Barrier),
        RecipeRef::new(double_barrier::DoubleBarrier),
        RecipeRef::new(two_phase_commit::TwoPhaseCommit),
    ]
}
