//! The double barrier's model: each client enters the barrier at once,
//! computes once inside, leaves, and is done (recipes page, "Double
//! Barriers"; the simulation's workload does the same, round after round).
//! The machine is [`zoosim_recipes::double_barrier::DoubleBarrier`] — or
//! any machine with its commands and outcomes
//! ([`DoubleBarrierModel::with_machine`], for a deliberately broken copy)
//! — observed ([`super::observed`]) so that the phases it goes through can
//! be named.
//!
//! Properties (each a named value below), mirroring the simulation's
//! oracle ([`zoosim_core::check::double_barrier`]):
//!
//! * always [`ENTER_SAFETY`]: nobody computes (is inside) before `x`
//!   processes have arrived at the server (their nodes created under the
//!   barrier). The oracle counts processes that *asked* to enter; here
//!   every application asks at the start, so the model counts arrivals at
//!   the server instead, which is stronger;
//! * always [`LEAVE_SAFETY`]: nobody is out before every process that was
//!   inside when it started to leave has asked to leave too, or has lost
//!   its session (the oracle's excuse; here judged on the server's truth
//!   at the moment of leaving: a session still alive there, even a
//!   crashed process's, still holds its node and is waited for);
//! * always [`NO_RECIPE_FAILURE`]: the machine never refuses a command nor
//!   meets an answer it has no way forward from;
//! * always [`NO_ORPHANS`]: once every client is settled no process node
//!   is left in the barrier (its `ready` node stays: persistent by design,
//!   one barrier node per round);
//! * eventually [`EVERY_LIVE_CLIENT_PASSES`]: every client whose process
//!   and session live enters and leaves — unless the barrier never opened
//!   and fewer than `x` clients are left alive at the end (the oracle's
//!   "a round short of x live processes is not judged for entry"; that
//!   excuse is judged only in end states, where nothing can happen any
//!   more). Fairness: every run is finite (faults are bounded, every step
//!   moves a machine or the server on) and ends only when no action is
//!   enabled, so no action that stays enabled is ignored for ever; the
//!   server always expires a crashed client's session and a disconnected
//!   client always reconnects;
//! * sometimes: a client enters, leaves, and each phase in [`PHASES`] is
//!   reached where the run's size and faults lead to it — and every fault
//!   in the budget is taken — so that nothing above passes for lack of
//!   reaching it.
//!
//! No "no herd" property: the recipe wakes every waiter by design (the
//! `ready` node's creation wakes everyone waiting to enter; the lowest
//! process's node going wakes every other one leaving).

use stateright::Property;

use zoosim_core::check::Property as Claim;

use super::observed::{at_end, bit, Condition, Observed, Phases, Seen};
use super::{settled, Faults, Log, Maker, RecipeModel, State, World};
use zoosim_core::proto::{EventType, Op, Reply, SessionId, ZkError};
use zoosim_recipes::double_barrier::{DoubleBarrier, DoubleBarrierCommand, DoubleBarrierOutcome};
use zoosim_recipes::{Input, Machine, Output};

/// The barrier node (one round's).
pub const DIR: &str = "/double/r0";
/// Its `ready` node.
pub const READY: &str = "/double/r0/ready";

pub use super::NO_ORPHANS;
pub use super::NO_RECIPE_FAILURE;
pub use zoosim_core::check::double_barrier::ENTER_SAFETY;
pub use zoosim_core::check::double_barrier::LEAVE_SAFETY;
/// Every live client enters and leaves: the unbounded `eventually` the
/// oracle's `liveness` bounds in time.
pub const EVERY_LIVE_CLIENT_PASSES: Claim = Claim::new(
    "every-live-client-passes",
    "every client whose process and session live enters and leaves (unless the barrier cannot \
     open)",
);

/// The phases the model names (each a "sometimes" property where the run
/// can reach it, see [`DoubleBarrierModel`]'s properties).
pub const PHASES: [&str; 10] = [
    // Enter.
    "made-ready",
    "lost-the-race-to-make-ready",
    "entered-through-ready-already-there",
    "ready-seen-while-counting",
    "woken-by-ready",
    "own-node-found-after-lost-reply",
    // Leave.
    "waited-on-another-to-leave",
    "woken-to-leave",
    "deleted-own-node",
    "own-node-already-gone",
];

/// The double barrier's phases, read from what the machine does.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct DoubleBarrierPhases;

impl<M> Phases<M> for DoubleBarrierPhases
where
    M: Machine<Command = DoubleBarrierCommand, Outcome = DoubleBarrierOutcome>,
{
    fn phase(
        input: &Input<DoubleBarrierCommand>,
        output: &Output<DoubleBarrierOutcome>,
    ) -> Option<&'static str> {
        use DoubleBarrierOutcome::Entered;
        Some(match (input, output) {
            (Input::Reply(_, Ok(Reply::Create { path, .. })), Output::Outcome(Entered))
                if path == READY =>
            {
                "made-ready"
            }
            (Input::Reply(_, Err(ZkError::NodeExists)), Output::Outcome(Entered)) => {
                "lost-the-race-to-make-ready"
            }
            (Input::Reply(_, Ok(Reply::Exists(Some(_)))), Output::Outcome(Entered)) => {
                "entered-through-ready-already-there"
            }
            (Input::Reply(_, Ok(Reply::GetChildren { .. })), Output::Outcome(Entered)) => {
                "ready-seen-while-counting"
            }
            (Input::Watch(e), Output::Outcome(Entered))
                if e.event_type == EventType::NodeCreated =>
            {
                "woken-by-ready"
            }
            (Input::Reply(_, Err(ZkError::NodeExists)), Output::Send(_, Op::Exists { .. })) => {
                "own-node-found-after-lost-reply"
            }
            (
                Input::Reply(_, Ok(Reply::GetChildren { .. })),
                Output::Send(_, Op::Exists { .. }),
            ) => "waited-on-another-to-leave",
            (Input::Watch(_), Output::Send(_, Op::GetChildren { .. })) => "woken-to-leave",
            (Input::Reply(_, Ok(Reply::Delete)), Output::Send(..)) => "deleted-own-node",
            (Input::Reply(_, Err(ZkError::NoNode)), Output::Send(_, Op::GetChildren { .. })) => {
                "own-node-already-gone"
            }
            _ => return None,
        })
    }
}

/// Makes a client's machine: `(dir, name, session, threshold)`.
pub type MakeMachine<M> = fn(&str, &str, SessionId, usize) -> M;

/// The double barrier as a model: `threshold` (`x`) processes to enter,
/// running machine `M`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DoubleBarrierModel<M = DoubleBarrier> {
    /// Processes it takes to enter (`x`).
    pub threshold: usize,
    /// Record the phases reached (see [`super::observed`]'s "Phases cost
    /// states").
    pub phases: bool,
    make: Maker<MakeMachine<M>>,
}

/// What the double barrier's model is, in a line (`zoosim list`).
pub const ABOUT: &str =
    "the double barrier (threshold 2): each client enters, computes once inside, leaves";

impl DoubleBarrierModel<DoubleBarrier> {
    /// The double barrier's model: `threshold` processes to enter (at
    /// least 1; at most the world's clients, or nobody ever enters).
    pub fn new(threshold: usize) -> DoubleBarrierModel<DoubleBarrier> {
        DoubleBarrierModel::with_machine(threshold, DoubleBarrier::new)
    }
}

impl<M> DoubleBarrierModel<M> {
    /// The model over another machine with the double barrier's commands
    /// and outcomes, made by `make` (e.g. a deliberately broken copy).
    pub fn with_machine(threshold: usize, make: MakeMachine<M>) -> DoubleBarrierModel<M> {
        DoubleBarrierModel {
            threshold: threshold.max(1),
            phases: false,
            make: Maker(make),
        }
    }

    /// The same model recording the phases reached, each a "sometimes"
    /// property.
    pub fn with_phases(mut self) -> Self {
        self.phases = true;
        self
    }
}

/// Client `i`'s session id on the model's server.
///
/// The world numbers sessions this way (`0x100 + i`) without saying so
/// publicly; the machine needs its own id to recognise its node after a
/// lost create reply (a wrong one would show as a stall in the model).
pub fn session_of(i: usize) -> SessionId {
    SessionId(0x100 + i as i64)
}

/// Where one client's application is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Step {
    /// About to enter.
    Start,
    /// Asked to enter.
    Entering,
    /// Inside: computes, then asks to leave.
    Inside,
    /// Asked to leave.
    Leaving,
    /// Out: done.
    Done,
    /// Its session ended (its node went with it).
    Lost,
}

/// One client's application.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct App {
    /// The client's number.
    pub me: u8,
    /// Where it is.
    pub step: Step,
}

/// What the clients share: masks of clients (a bit each) and sticky flags
/// for the properties (no logs: see the world's reductions).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Shared {
    /// Clients that entered.
    pub entered: u8,
    /// Clients that asked to leave.
    pub asked_leave: u8,
    /// For each client leaving: those that had entered when it asked to
    /// leave and have not asked to leave since (what [`LEAVE_SAFETY`]
    /// needs of the past: which of them it would leave behind). Kept up to
    /// date as clients ask to leave, and emptied once it is out or lost,
    /// rather than the mask of those inside at its ask kept for good:
    /// runs that differ only in who was inside then, among those who
    /// have asked since, meet.
    pub awaited: [u8; super::MAX_CLIENTS],
    /// Clients someone left before, though they were inside when it
    /// started to leave and had not asked to leave (excused if their
    /// session is gone: see [`LEAVE_SAFETY`]).
    pub left_behind: u8,
    /// A client left.
    pub left: bool,
    /// A client's session ended under it.
    pub lost: bool,
    /// The machine refused a command or failed.
    pub failed: bool,
    /// The phases reached ([`PHASES`], a bit each).
    pub phases: u32,
}

impl<M> RecipeModel for DoubleBarrierModel<M>
where
    M: Machine<Command = DoubleBarrierCommand, Outcome = DoubleBarrierOutcome>
        + Send
        + Sync
        + 'static,
{
    type Machine = Observed<M, DoubleBarrierPhases>;
    type App = App;
    type Shared = Shared;
    const CLAIMS: &'static [Claim] = &[
        ENTER_SAFETY,
        LEAVE_SAFETY,
        NO_RECIPE_FAILURE,
        NO_ORPHANS,
        EVERY_LIVE_CLIENT_PASSES,
    ];

    fn name(&self) -> &'static str {
        "double-barrier"
    }

    fn dirs(&self) -> Vec<String> {
        vec!["/double".to_owned(), DIR.to_owned()]
    }

    fn client(&self, i: usize) -> (Self::Machine, App) {
        let machine = (self.make.0)(DIR, &format!("c{i}"), session_of(i), self.threshold);
        let app = App {
            me: i as u8,
            step: Step::Start,
        };
        (Observed::new(machine), app)
    }

    fn wants(&self, app: &App) -> bool {
        matches!(app.step, Step::Start | Step::Inside)
    }

    fn command(
        &self,
        app: &mut App,
        shared: &mut Shared,
        _live: bool,
        log: &mut Log,
    ) -> DoubleBarrierCommand {
        match app.step {
            Step::Inside => {
                // The computation: one step inside, then leave.
                log.note(|| format!("client {} computes inside the barrier", app.me));
                let me = 1 << app.me;
                shared.asked_leave |= me;
                for a in &mut shared.awaited {
                    *a &= !me;
                }
                shared.awaited[usize::from(app.me)] = shared.entered & !shared.asked_leave;
                app.step = Step::Leaving;
                DoubleBarrierCommand::Leave
            }
            _ => {
                app.step = Step::Entering;
                DoubleBarrierCommand::Enter
            }
        }
    }

    fn outcome(&self, app: &mut App, shared: &mut Shared, outcome: &Seen<DoubleBarrierOutcome>) {
        let o = match outcome {
            Seen::Phase(p) => {
                if self.phases {
                    shared.phases |= bit(&PHASES, p);
                }
                return;
            }
            Seen::Real(o) => o,
        };
        match o {
            DoubleBarrierOutcome::Entered => {
                shared.entered |= 1 << app.me;
                app.step = Step::Inside;
            }
            DoubleBarrierOutcome::Left => {
                // Those inside when it asked to leave that have not asked
                // to leave yet: it left before them.
                shared.left_behind |= std::mem::take(&mut shared.awaited[usize::from(app.me)]);
                shared.left = true;
                app.step = Step::Done;
            }
            DoubleBarrierOutcome::Lost { .. } => {
                shared.awaited[usize::from(app.me)] = 0;
                shared.lost = true;
                app.step = Step::Lost;
            }
            DoubleBarrierOutcome::Refused { .. } | DoubleBarrierOutcome::Failed(_) => {
                shared.failed = true
            }
        }
    }

    fn finished(&self, app: &App) -> bool {
        matches!(app.step, Step::Done | Step::Lost)
    }

    fn properties(&self, faults: &Faults) -> Vec<Property<World<Self>>> {
        let mut p = vec![
            Property::always(ENTER_SAFETY.name, |w: &World<Self>, s: &State<Self>| {
                let inside = s.clients.iter().any(|c| c.app.step == Step::Inside);
                !inside || arrivals(s) >= w.recipe.threshold
            }),
            Property::always(LEAVE_SAFETY.name, |_, s: &State<Self>| {
                // Left behind with its session still alive on the server:
                // its node stood, and it had not asked to leave.
                s.clients
                    .iter()
                    .enumerate()
                    .all(|(i, c)| s.shared.left_behind & (1 << i) == 0 || !c.session)
            }),
            Property::always(NO_RECIPE_FAILURE.name, |_, s: &State<Self>| {
                !s.shared.failed
            }),
            Property::always(NO_ORPHANS.name, |w, s: &State<Self>| {
                !settled(w, s)
                    || s.tree
                        .node(DIR)
                        .is_none_or(|d| d.children.iter().all(|c| c == "ready"))
            }),
            // "Every live client is done" is monotone along every run (a
            // finished application, a crash and an ended session are for
            // good), so the checker's "held somewhere on the path" is the
            // same on every path into a state; the excuse is judged only
            // in end states.
            Property::eventually(EVERY_LIVE_CLIENT_PASSES.name, |w, s: &State<Self>| {
                let live = || s.clients.iter().filter(|c| !c.crashed && c.session);
                live().all(|c| c.app.step == Step::Done)
                    || (s.tree.node(READY).is_none()
                        && live().count() < w.recipe.threshold
                        && at_end(w, s))
            }),
            Property::sometimes("entered", |_, s: &State<Self>| s.shared.entered != 0),
            Property::sometimes("left", |_, s: &State<Self>| s.shared.left),
        ];
        // The phases, where the run can reach them: a race to make `ready`
        // and a wait for it take two processes to enter; entering through
        // a `ready` already there, a client behind the others; leaving
        // waits take two inside; the lost-reply phases take that fault.
        let x = self.threshold;
        let reach: [Condition<Self>; 10] = [
            reached::<M, 0>,
            reached::<M, 1>,
            reached::<M, 2>,
            reached::<M, 3>,
            reached::<M, 4>,
            reached::<M, 5>,
            reached::<M, 6>,
            reached::<M, 7>,
            reached::<M, 8>,
            reached::<M, 9>,
        ];
        for (name, f) in PHASES.into_iter().zip(reach) {
            let expected = match name {
                "own-node-found-after-lost-reply" | "own-node-already-gone" => {
                    faults.lost_reply > 0
                }
                "made-ready" | "deleted-own-node" => true,
                _ => x >= 2,
            };
            if expected && self.phases {
                p.push(Property::sometimes(name, f));
            }
        }
        if faults.forced_expiry > 0 {
            p.push(Property::sometimes("session-lost", |_, s: &State<Self>| {
                s.shared.lost
            }));
        }
        p
    }
}

/// Phase `I` of [`PHASES`] was reached.
fn reached<M, const I: usize>(
    _: &World<DoubleBarrierModel<M>>,
    s: &State<DoubleBarrierModel<M>>,
) -> bool
where
    M: Machine<Command = DoubleBarrierCommand, Outcome = DoubleBarrierOutcome>
        + Send
        + Sync
        + 'static,
{
    s.shared.phases & (1 << I) != 0
}

/// Processes that have arrived: nodes ever created in the barrier (its
/// child counter never goes down), but `ready`. A process creates its node
/// once (a create sent again meets its node and checks its owner).
fn arrivals<R: RecipeModel>(s: &State<R>) -> usize {
    let Some(dir) = s.tree.node(DIR) else {
        return 0;
    };
    let made = usize::try_from(dir.child_creates).unwrap_or(0);
    made - usize::from(s.tree.node(READY).is_some())
}
