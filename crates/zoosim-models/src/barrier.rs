//! The barrier's model, as the simulation's barrier workload runs it (one
//! round): client 0 coordinates — it raises the barrier, then removes it
//! — and every other client waits on the barrier once the coordinator has
//! told it the barrier is up (out of band, as the workload's waiters
//! learn which round is raised). The machine is
//! [`zoosim_recipes::barrier::Barrier`], correct,
//! [`BarrierVariant::NoSync`] (the recipes page's waiter, without the
//! check through the leader) or [`BarrierVariant::SyncInsteadOfCheck`]
//! (a sync where the check should be) — or any machine with the barrier's commands
//! and outcomes ([`BarrierModel::with_machine`], for a deliberately broken
//! copy).
//!
//! Properties (each a named value below), mirroring the simulation's
//! barrier oracle:
//!
//! * always [`BARRIER_SAFETY`]: no waiter passes before the coordinator
//!   asked for the barrier's removal (it was told the barrier is up; a
//!   waiter that reads a lagging server may not see it — the `lagging-read`
//!   fault is what catches the no-sync waiter, and the `deposed-leader`
//!   fault, whose sync is as stale as its reads, the waiter that syncs
//!   instead of checking);
//! * always [`NO_RECIPE_FAILURE`]: the machine never refuses a command nor
//!   meets an answer it has no way forward from;
//! * always [`NO_ORPHANS`]: once every client is settled, nothing is left
//!   under the barrier's directory unless the coordinator died before
//!   removing the barrier (then it stays up: the recipe has nobody else to
//!   remove it);
//! * eventually [`EVERY_LIVE_CLIENT_FINISHES`]: a coordinator whose
//!   process and session live raises and removes the barrier, and every
//!   live waiter passes — unless the coordinator died before it could
//!   (the barrier is then up for good, or was never raised, and no waiter
//!   can pass: the recipe's known limit, not a bug). Fairness as for the
//!   lock ([`super::lock`]): every run is finite and ends only when no
//!   action is enabled; the server always expires a crashed client's
//!   session and a disconnected client always reconnects;
//! * sometimes: the barrier is raised, a waiter waits on its watch and is
//!   woken, a waiter passes, the barrier is removed — and every fault in
//!   the budget is taken.
//!
//! No herd property: removing a barrier wakes every waiter by design.

use stateright::Property;

use zoosim_core::check::Property as Claim;

use super::{settled, Faults, Log, Maker, RecipeModel, State, World};
use zoosim_recipes::barrier::{Barrier, BarrierCommand, BarrierOutcome, BarrierVariant};
use zoosim_recipes::Machine;

/// What the model is, for `zoosim list`.
pub const ABOUT: &str =
    "the barrier: client 0 raises then removes it; the others wait on it once told it is up";

/// The barrier's directory.
pub const DIR: &str = "/barrier";
/// The barrier node.
pub const NODE: &str = "/barrier/b";

pub use super::NO_ORPHANS;
pub use super::NO_RECIPE_FAILURE;
pub use zoosim_core::check::barrier::BARRIER_SAFETY;
/// The coordinator raises and removes, every waiter passes: the
/// unbounded `eventually` the oracle's `liveness` bounds in time.
pub const EVERY_LIVE_CLIENT_FINISHES: Claim = Claim::new(
    "every-live-client-finishes",
    "a coordinator whose process and session live raises and removes the barrier; every such \
     waiter passes",
);

/// Makes a client's machine: `(path, variant)`.
pub type MakeMachine<M> = fn(&str, BarrierVariant) -> M;

/// The barrier as a model, running `variant` of machine `M`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BarrierModel<M = Barrier> {
    /// The machine's variant.
    pub variant: BarrierVariant,
    make: Maker<MakeMachine<M>>,
}

impl BarrierModel<Barrier> {
    /// The barrier's model for `variant` of [`Barrier`].
    pub fn new(variant: BarrierVariant) -> BarrierModel<Barrier> {
        BarrierModel {
            variant,
            make: Maker(Barrier::with_variant),
        }
    }
}

impl<M> BarrierModel<M> {
    /// The barrier's model over another machine with the barrier's
    /// commands and outcomes, made by `make` (e.g. a deliberately broken
    /// copy).
    pub fn with_machine(variant: BarrierVariant, make: MakeMachine<M>) -> BarrierModel<M> {
        BarrierModel {
            variant,
            make: Maker(make),
        }
    }
}

/// The barrier's variants, the correct one first.
pub const VARIANTS: [BarrierVariant; 3] = BarrierVariant::ALL;

/// Where one client's application is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum App {
    /// The coordinator, about to raise the barrier.
    Raise,
    /// The coordinator asked to raise it.
    Raising,
    /// The coordinator raised it (and told the waiters); about to remove it.
    Up,
    /// The coordinator asked to remove it.
    Removing,
    /// A waiter, not told yet that the barrier is up.
    Idle,
    /// A waiter waiting on the barrier.
    Waiting,
    /// Done: the coordinator removed the barrier, or the waiter passed it.
    Done,
    /// The session ended under a command.
    Lost,
}

/// What the clients share: what the coordinator has told the waiters and
/// sticky flags for the properties (no counts, no logs).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Shared {
    /// The coordinator raised the barrier (the waiters may wait).
    pub raised: bool,
    /// The coordinator asked for the barrier's removal.
    pub remove_called: bool,
    /// The coordinator's removal completed.
    pub removed: bool,
    /// A waiter passed before the removal was asked for.
    pub early: bool,
    /// A waiter passed.
    pub passed: bool,
    /// A waiter was woken by a watch event.
    pub woken: bool,
    /// The machine refused a command or failed.
    pub failed: bool,
}

impl<M> RecipeModel for BarrierModel<M>
where
    M: Machine<Command = BarrierCommand, Outcome = BarrierOutcome> + Send + Sync + 'static,
{
    type Machine = M;
    type App = App;
    type Shared = Shared;
    const CLAIMS: &'static [Claim] = &[
        BARRIER_SAFETY,
        NO_RECIPE_FAILURE,
        NO_ORPHANS,
        EVERY_LIVE_CLIENT_FINISHES,
    ];

    fn name(&self) -> &'static str {
        "barrier"
    }

    fn dirs(&self) -> Vec<String> {
        vec![DIR.to_owned()]
    }

    fn client(&self, i: usize) -> (M, App) {
        let app = if i == 0 { App::Raise } else { App::Idle };
        ((self.make.0)(NODE, self.variant), app)
    }

    fn wants(&self, app: &App) -> bool {
        matches!(app, App::Raise | App::Up)
    }

    fn wants_now(&self, app: &App, shared: &Shared) -> bool {
        self.wants(app) || (*app == App::Idle && shared.raised)
    }

    fn command(
        &self,
        app: &mut App,
        shared: &mut Shared,
        _live: bool,
        log: &mut Log,
    ) -> BarrierCommand {
        match *app {
            App::Raise => {
                *app = App::Raising;
                BarrierCommand::Set
            }
            App::Up => {
                log.note(|| "the coordinator asks for the barrier's removal".into());
                shared.remove_called = true;
                *app = App::Removing;
                BarrierCommand::Remove
            }
            _ => {
                *app = App::Waiting;
                BarrierCommand::Wait
            }
        }
    }

    fn outcome(&self, app: &mut App, shared: &mut Shared, outcome: &BarrierOutcome) {
        match outcome {
            BarrierOutcome::Set => {
                // The coordinator tells the waiters (out of band).
                shared.raised = true;
                *app = App::Up;
            }
            BarrierOutcome::Removed => {
                shared.removed = true;
                *app = App::Done;
            }
            BarrierOutcome::Passed => {
                shared.passed = true;
                shared.early |= !shared.remove_called;
                *app = App::Done;
            }
            BarrierOutcome::Woken => shared.woken = true,
            BarrierOutcome::Lost { .. } => *app = App::Lost,
            BarrierOutcome::Refused { .. } | BarrierOutcome::Failed(_) => shared.failed = true,
        }
    }

    fn finished(&self, app: &App) -> bool {
        matches!(app, App::Done | App::Lost)
    }

    fn properties(&self, _faults: &Faults) -> Vec<Property<World<Self>>> {
        vec![
            Property::always(BARRIER_SAFETY.name, |_, s: &State<Self>| !s.shared.early),
            Property::always(NO_RECIPE_FAILURE.name, |_, s: &State<Self>| {
                !s.shared.failed
            }),
            Property::always(NO_ORPHANS.name, |w, s: &State<Self>| {
                !settled(w, s)
                    || s.tree.node(DIR).is_none_or(|d| d.children.is_empty())
                    || (coordinator_gone(s) && !s.shared.removed)
            }),
            // Monotone along every run (finished, crashed, expired and
            // "the coordinator is gone with the barrier up or never
            // raised" are all for good): see the lock's liveness.
            Property::eventually(EVERY_LIVE_CLIENT_FINISHES.name, |_, s: &State<Self>| {
                let live = |c: &super::Client<Self>| !c.crashed && c.session;
                let coordinator = &s.clients[0];
                let coordinator_done = !live(coordinator) || coordinator.app == App::Done;
                let stuck =
                    coordinator_gone(s) && (s.tree.node(NODE).is_some() || !s.shared.raised);
                let waiters_done = s
                    .clients
                    .iter()
                    .skip(1)
                    .all(|c| !live(c) || c.app == App::Done);
                coordinator_done && (waiters_done || stuck)
            }),
            Property::sometimes("barrier-raised", |_, s: &State<Self>| s.shared.raised),
            Property::sometimes("waiter-woken", |w, s: &State<Self>| {
                s.shared.woken || w.clients < 2
            }),
            Property::sometimes("waiter-passed", |w, s: &State<Self>| {
                s.shared.passed || w.clients < 2
            }),
            Property::sometimes("barrier-removed", |_, s: &State<Self>| s.shared.removed),
        ]
    }
}

/// The coordinator's process or session has ended: nobody will raise or
/// remove the barrier any more.
fn coordinator_gone<M>(s: &State<BarrierModel<M>>) -> bool
where
    M: Machine<Command = BarrierCommand, Outcome = BarrierOutcome> + Send + Sync + 'static,
{
    let c = &s.clients[0];
    c.crashed || !c.session
}
