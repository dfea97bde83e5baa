//! The compare-and-set counter's model: the same machine
//! ([`crate::counter::CasCounter`]) as the simulation runs, each client
//! incrementing twice (so that between the two its connection can break
//! with nothing in flight), against every interleaving of requests, replies,
//! watch events and faults that zoosim's model checker explores
//! (`zoosim check cas-counter`).
//!
//! Its claims are the oracle's properties where it checks the same thing
//! (one vocabulary: [`crate::recipe::PROPERTIES`]), read once every
//! client is settled:
//!
//! * always [`UNIQUE_VALUES`]: no two acknowledged increments wrote the
//!   same value;
//! * always [`NO_LOST_INCREMENT`]: the counter ends at least at the
//!   acknowledged increments;
//! * always [`NO_INVENTED_INCREMENT`]: and at most at those plus the ones
//!   whose end is unknown (a lost reply, a client crashed mid-increment);
//! * always [`NO_RECIPE_FAILURE`];
//! * eventually [`EVERY_LIVE_CLIENT_INCREMENTS`], a claim of its own: the
//!   oracle's `progress` is bounded in time, the model's is not.
//!
//! Only zoosim's prelude is used, as from a crate of one's own.

use zoosim::prelude::*;

use crate::counter::{CasCounter, CounterCommand, CounterOutcome};
use crate::recipe::{BLIND, NO_INVENTED_INCREMENT, NO_LOST_INCREMENT, PATH, UNIQUE_VALUES};

/// What the model is, for `zoosim list`.
pub const ABOUT: &str = "each client increments the counter twice";

/// How many increments each client makes.
pub const INCREMENTS: u8 = 2;

/// Every client whose process and session live ends its increment.
pub const EVERY_LIVE_CLIENT_INCREMENTS: Property = Property::new(
    "every-live-client-increments",
    "every client whose process and session live ends its increment (acknowledged, or unknown)",
);

/// The variants, the correct one first: whether the write is blind.
pub const VARIANTS: [bool; 2] = [false, true];

/// The model of `zoosim check cas-counter`, for [`Registry::with_model`].
pub fn model() -> Box<dyn Listed> {
    model_entry(
        ABOUT,
        &VARIANTS,
        |blind| if blind { BLIND } else { "cas-counter" },
        |blind, _clients| Ok(CounterModel { blind }),
    )
}

/// The counter as a model: the correct machine, or the blind one.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct CounterModel {
    pub blind: bool,
}

/// Where one client's application is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum App {
    /// About to increment, with this many increments left (this one
    /// included).
    Idle(u8),
    /// Incrementing (reading, writing, or retrying after a conflict), with
    /// this many left after this one.
    Incrementing(u8),
    /// Its increments ended: acknowledged, or unknown.
    Done,
    /// The session ended under it.
    Lost,
}

/// What the properties need, and nothing more (no logs: every field is
/// part of a state's identity).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Shared {
    /// Increments acknowledged.
    pub acked: u8,
    /// Increments whose end is unknown (the write's reply was lost).
    pub unknown: u8,
    /// The values acknowledged increments wrote, as bits.
    pub written: u16,
    /// Two acknowledged increments wrote the same value.
    pub overwritten: bool,
    /// An increment met a conflict and retried.
    pub conflict: bool,
    /// The machine failed.
    pub failed: bool,
}

/// Where an application goes once an increment ends.
fn next(app: App) -> App {
    match app {
        App::Incrementing(0) => App::Done,
        App::Incrementing(left) => App::Idle(left),
        other => other,
    }
}

/// The counter's value in `s`'s tree (0 before it is made).
fn value(s: &State<CounterModel>) -> u32 {
    s.tree
        .node(PATH)
        .and_then(|n| std::str::from_utf8(&n.data).ok()?.parse().ok())
        .unwrap_or(0)
}

impl RecipeModel for CounterModel {
    type Machine = CasCounter;
    type App = App;
    type Shared = Shared;
    const CLAIMS: &'static [Property] = &[
        UNIQUE_VALUES,
        NO_LOST_INCREMENT,
        NO_INVENTED_INCREMENT,
        NO_RECIPE_FAILURE,
        EVERY_LIVE_CLIENT_INCREMENTS,
    ];

    fn name(&self) -> &'static str {
        "cas-counter"
    }

    fn dirs(&self) -> Vec<String> {
        Vec::new()
    }

    fn client(&self, _i: usize) -> (CasCounter, App) {
        let machine = CasCounter::new(PATH);
        let machine = if self.blind { machine.blind() } else { machine };
        (machine, App::Idle(INCREMENTS))
    }

    fn wants(&self, app: &App) -> bool {
        matches!(app, App::Idle(_))
    }

    fn command(
        &self,
        app: &mut App,
        _shared: &mut Shared,
        _live: bool,
        _log: &mut Log,
    ) -> CounterCommand {
        if let App::Idle(left) = *app {
            *app = App::Incrementing(left - 1);
        }
        CounterCommand::Increment
    }

    fn outcome(&self, app: &mut App, shared: &mut Shared, outcome: &CounterOutcome) {
        match outcome {
            CounterOutcome::Incremented { value } => {
                shared.acked += 1;
                let bit = 1u16 << (*value).clamp(0, 15) as u32;
                shared.overwritten |= shared.written & bit != 0;
                shared.written |= bit;
                *app = next(*app);
            }
            CounterOutcome::Maybe { .. } => {
                shared.unknown += 1;
                *app = next(*app);
            }
            CounterOutcome::Conflict => shared.conflict = true,
            CounterOutcome::Lost => *app = App::Lost,
            CounterOutcome::Failed(_) => shared.failed = true,
        }
    }

    fn finished(&self, app: &App) -> bool {
        matches!(app, App::Done | App::Lost)
    }

    fn properties(&self, _faults: &Faults) -> Vec<ModelProperty<Self>> {
        vec![
            ModelProperty::always(UNIQUE_VALUES.name, |_, s: &State<Self>| {
                !s.shared.overwritten
            }),
            ModelProperty::always(NO_LOST_INCREMENT.name, |w, s: &State<Self>| {
                !settled(w, s) || value(s) >= u32::from(s.shared.acked)
            }),
            ModelProperty::always(NO_INVENTED_INCREMENT.name, |w, s: &State<Self>| {
                // A client that crashed mid-increment may have written.
                let crashed = s
                    .clients
                    .iter()
                    .filter(|c| c.crashed && matches!(c.app, App::Incrementing(_)))
                    .count() as u32;
                !settled(w, s) || value(s) <= u32::from(s.shared.acked + s.shared.unknown) + crashed
            }),
            ModelProperty::always(NO_RECIPE_FAILURE.name, |_, s: &State<Self>| {
                !s.shared.failed
            }),
            ModelProperty::eventually(EVERY_LIVE_CLIENT_INCREMENTS.name, |_, s: &State<Self>| {
                s.clients
                    .iter()
                    .all(|c| c.crashed || !c.session || matches!(c.app, App::Done | App::Lost))
            }),
            ModelProperty::sometimes("increment-acked", |_, s: &State<Self>| s.shared.acked > 0),
            ModelProperty::sometimes("conflict-met", |w, s: &State<Self>| {
                s.shared.conflict || w.clients < 2
            }),
        ]
    }
}
