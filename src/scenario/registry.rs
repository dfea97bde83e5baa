//! What a scenario file may name: the recipes, their buggy variants, the
//! workload keys each recipe takes, the properties its oracle checks and
//! the counters a coverage goal may name. Pure data, shared by the parser
//! (to reject unknown names with the accepted ones) and `zoosim list`.

use crate::recipes::barrier::BarrierVariant;
use crate::recipes::election::ElectionVariant;
use crate::recipes::lock::LockVariant;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Recipe {
    Lock,
    SharedLock,
    RevocableLock,
    Election,
    Queue,
    PriorityQueue,
    Configuration,
    GroupMembership,
    Barrier,
    DoubleBarrier,
    TwoPhaseCommit,
    /// A recipe registered by the user's crate
    /// ([`super::custom::Registry`]): the scenario's `custom` says which.
    /// Not in [`Recipe::ALL`]; its names, keys and counters are its own.
    Custom,
}

impl Recipe {
    pub const ALL: [Recipe; 11] = [
        Recipe::Lock,
        Recipe::SharedLock,
        Recipe::RevocableLock,
        Recipe::Election,
        Recipe::Queue,
        Recipe::PriorityQueue,
        Recipe::Configuration,
        Recipe::GroupMembership,
        Recipe::Barrier,
        Recipe::DoubleBarrier,
        Recipe::TwoPhaseCommit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Recipe::Lock => "lock",
            Recipe::SharedLock => "shared-lock",
            Recipe::RevocableLock => "revocable-lock",
            Recipe::Election => "election",
            Recipe::Queue => "queue",
            Recipe::PriorityQueue => "priority-queue",
            Recipe::Configuration => "configuration",
            Recipe::GroupMembership => "group-membership",
            Recipe::Barrier => "barrier",
            Recipe::DoubleBarrier => "double-barrier",
            Recipe::TwoPhaseCommit => "two-phase-commit",
            Recipe::Custom => "custom",
        }
    }

    pub fn from_name(name: &str) -> Option<Recipe> {
        Recipe::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The buggy variants this recipe can be built in, by name.
    pub fn variants(self) -> Vec<&'static str> {
        match self {
            Recipe::Lock => vec![
                LockVariant::BlindRetry.name(),
                LockVariant::Herd.name(),
                LockVariant::SortByFullName.name(),
                LockVariant::StallOnVanishedPredecessor.name(),
            ],
            Recipe::SharedLock => vec![LockVariant::ReaderWaitsOnAny.name()],
            Recipe::Election => vec![ElectionVariant::KeepLeadershipAfterExpiry.name()],
            Recipe::Barrier => vec![BarrierVariant::NoSync.name()],
            _ => vec![],
        }
    }

    /// The `[workload]` keys this recipe takes (`clients` for all).
    pub fn workload_keys(self) -> &'static [&'static str] {
        match self {
            Recipe::Lock | Recipe::SharedLock | Recipe::RevocableLock | Recipe::Election => &[
                "clients",
                "hold_ms",
                "touches",
                "think_ms_max",
                "operations",
            ],
            Recipe::Queue | Recipe::PriorityQueue => &["producers", "consumers", "think_ms_max"],
            Recipe::Configuration => &["clients", "think_ms_max"],
            Recipe::GroupMembership => &["clients", "churn_ms_max"],
            Recipe::Barrier => &["clients", "hold_ms_max", "operations"],
            Recipe::DoubleBarrier => &["clients", "threshold", "compute_ms_max", "operations"],
            Recipe::TwoPhaseCommit => &["clients", "abort_percent", "operations"],
            Recipe::Custom => &[],
        }
    }

    /// What the recipe's oracle checks, in words.
    pub fn properties(self) -> &'static [&'static str] {
        match self {
            Recipe::Lock | Recipe::RevocableLock => &[
                "fenced-exclusion: accepted effects in token order, each from the holder",
                "stale-beliefs-only-after-loss: overlapping beliefs only when a session was lost",
                "told-is-told: nobody acts after being told its session ended",
                "no-herd: a deletion wakes at most one waiter",
                "liveness: every acquire and release ends in the quiet phase",
            ],
            Recipe::SharedLock => &[
                "fenced-read-write-exclusion: writers alone, readers see the last write",
                "stale-beliefs-only-after-loss",
                "told-is-told",
                "no-herd: only readers share a wake-up; no reader woken by a reader",
                "liveness",
            ],
            Recipe::Election => &[
                "single-acting-leader: fenced effects in epoch order",
                "told-is-told",
                "no-herd",
                "liveness: a new leader after the old one fails",
            ],
            Recipe::Queue => &[
                "no-loss, no-duplicate (unless flagged possible), none invented",
                "fifo per consumer",
                "liveness: drained in the quiet phase",
            ],
            Recipe::PriorityQueue => &[
                "no-loss, no-duplicate (unless flagged possible), none invented",
                "liveness: drained in the quiet phase",
            ],
            Recipe::Configuration => &[
                "no-lost-update: count == version in every read",
                "monotonic-reads within a session",
                "convergence: every live follower sees the final version",
            ],
            Recipe::GroupMembership => &[
                "no-invented-member",
                "final-group: exactly the live joined sessions",
                "convergence: every live follower sees the final group",
            ],
            Recipe::Barrier => &[
                "barrier-safety: nobody passes before the removal was asked for",
                "liveness",
            ],
            Recipe::DoubleBarrier => &[
                "enter-safety: nobody in before x asked to enter",
                "leave-safety: nobody out before everyone inside asked to leave",
                "liveness",
            ],
            Recipe::TwoPhaseCommit => &[
                "agreement: every site decides the same",
                "validity: commit only if every site voted commit",
                "liveness: every vote decided unless a site crashed undecided",
            ],
            Recipe::Custom => &[],
        }
    }

    /// The counters a run of this recipe reports (coverage goals may name
    /// them, as may `fault:<fault>` and the ensemble's counters).
    pub fn counters(self) -> &'static [&'static str] {
        match self {
            Recipe::Lock | Recipe::SharedLock | Recipe::RevocableLock | Recipe::Election => &[
                "acquisitions",
                "accesses-accepted",
                "accesses-rejected",
                "stale-beliefs",
                "suspensions",
                "resumptions",
                "sessions-lost",
                "guid-found",
                "guid-not-found",
                "deletions-waking",
                "revokes-called",
                "revokes-asked",
                "revokes-honoured",
            ],
            Recipe::Queue | Recipe::PriorityQueue => &[
                "enqueued",
                "taken",
                "maybe-taken",
                "unresolved-claims",
                "missed",
                "duplicates-possible",
                "guid-found",
                "guid-not-found",
            ],
            Recipe::Configuration => &["reads", "sets", "conflicts", "sessions-lost"],
            Recipe::GroupMembership => &["joins", "leaves", "views", "sessions-lost"],
            Recipe::Barrier => &["rounds", "passes", "sessions-lost"],
            Recipe::DoubleBarrier => &["entries", "exits", "sessions-lost"],
            Recipe::TwoPhaseCommit => &[
                "commits",
                "aborts",
                "aborts-for-failed-sites",
                "sessions-lost",
            ],
            Recipe::Custom => &[],
        }
    }
}

/// Counters every run reports, from the ensemble's servers.
pub const ENSEMBLE_COUNTERS: [&str; 8] = [
    "elections-won",
    "session-expiries",
    "setwatches-replayed",
    "lost-replies",
    "truncations",
    "zxid-refusals",
    "reconnect-closes",
    "role-change-drops",
];

/// Whether `variant` names a buggy variant of `recipe`.
pub fn is_variant_of(recipe: Recipe, variant: &str) -> bool {
    recipe.variants().contains(&variant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_every_variant_is_known_to_its_recipe_module() {
        for r in Recipe::ALL {
            assert_eq!(Recipe::from_name(r.name()), Some(r));
            for v in r.variants() {
                let known = LockVariant::from_name(v).is_some()
                    || ElectionVariant::from_name(v).is_some()
                    || BarrierVariant::from_name(v).is_some();
                assert!(known, "{v}");
            }
            assert!(!r.counters().is_empty() && !r.properties().is_empty());
        }
        assert_eq!(Recipe::from_name("mutex"), None);
    }
}
