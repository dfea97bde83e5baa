//! A recipe's machine with an observer beside it, so that a model's
//! "sometimes" properties can name the phases a recipe goes through even
//! where its outcomes do not show them (a double barrier that entered
//! because it saw `ready` already there, a membership create that met its
//! own node after a lost reply, ...).
//!
//! [`Observed`] hands every input to the machine unchanged and passes every
//! output on unchanged; it only adds, before an output, a
//! [`Seen::Phase`] outcome when the model's [`Phases`] recognise what the
//! machine just did from the input it was given and the output it gave.
//! What it keeps of the input lasts only until the machine is drained
//! (the world drains a machine after every input), so two runs whose
//! machines are in the same state meet in the same model state.
//!
//! # Phases cost states
//!
//! A phase reached is history: recorded in the state, it splits runs that
//! differ only in what happened on the way. So a model records phases only
//! when asked (`with_phases`): its properties are checked over the whole
//! state space without them, and each phase's "sometimes" is shown reached
//! by a run of the same model recording it, which stops at the first
//! witness (the behaviours are the same; only the record differs).
//!
//! Also [`at_end`], for an "eventually" whose excuse may only be judged
//! where a run ends.

use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;

use stateright::Model;

use super::{RecipeModel, State, World};
use zoosim_recipes::{Input, Machine, Output};

/// A model's reading of its machine: which phase (a name from the model's
/// list) an output shows, given the input it answers.
pub trait Phases<M: Machine>: Clone + Eq + Hash + Debug + Send + Sync {
    /// The phase that `output`, the machine's answer to `input`, shows.
    fn phase(input: &Input<M::Command>, output: &Output<M::Outcome>) -> Option<&'static str>;
}

/// What an [`Observed`] machine reports: the machine's own outcome, or a
/// phase the observer recognised.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Seen<O> {
    /// The machine's outcome, unchanged.
    Real(O),
    /// A phase the machine went through (see [`Phases`]).
    Phase(&'static str),
}

// Shown in a counterexample's step list: the outcome as the machine gave
// it, a phase as what it is.
impl<O: Debug> Debug for Seen<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Seen::Real(o) => o.fmt(f),
            Seen::Phase(p) => write!(f, "(phase: {p})"),
        }
    }
}

/// Machine `M` with the observer `P` beside it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Observed<M: Machine, P> {
    machine: M,
    /// The input being answered, until the machine is drained.
    input: Option<Input<M::Command>>,
    /// An output held back behind the phase it showed.
    held: Option<Output<Seen<M::Outcome>>>,
    phases: PhantomData<P>,
}

impl<M: Machine, P> Observed<M, P> {
    /// `machine`, observed.
    pub fn new(machine: M) -> Self {
        Observed {
            machine,
            input: None,
            held: None,
            phases: PhantomData,
        }
    }

    /// The machine underneath.
    pub fn machine(&self) -> &M {
        &self.machine
    }
}

impl<M: Machine, P: Phases<M>> Machine for Observed<M, P> {
    type Command = M::Command;
    type Outcome = Seen<M::Outcome>;

    fn handle(&mut self, input: Input<M::Command>) {
        self.machine.handle(input.clone());
        self.input = Some(input);
    }

    fn poll(&mut self) -> Option<Output<Seen<M::Outcome>>> {
        if let Some(out) = self.held.take() {
            return Some(out);
        }
        let Some(out) = self.machine.poll() else {
            self.input = None;
            return None;
        };
        let phase = self.input.as_ref().and_then(|i| P::phase(i, &out));
        let out = match out {
            Output::Send(id, op) => Output::Send(id, op),
            Output::Outcome(o) => Output::Outcome(Seen::Real(o)),
        };
        match phase {
            Some(p) => {
                self.held = Some(out);
                Some(Output::Outcome(Seen::Phase(p)))
            }
            None => Some(out),
        }
    }
}

/// The bit of phase `name` in `list` (a model's phase list); panics on a
/// name not in it, which is a model's own mistake.
pub fn bit(list: &[&str], name: &str) -> u32 {
    let i = list
        .iter()
        .position(|p| *p == name)
        .unwrap_or_else(|| panic!("phase {name:?} is not in the model's list {list:?}"));
    1 << i
}

/// Nothing can happen any more in `s`: no action is enabled (the world
/// lists only enabled actions). A run of a model is finite and ends in
/// such a state, so a condition judged here is judged at the end of every
/// run; an excuse that holds on the way (and stops holding later) is not
/// taken for one that holds at the end.
pub fn at_end<R: RecipeModel>(w: &World<R>, s: &State<R>) -> bool {
    let mut actions = Vec::new();
    w.actions(s, &mut actions);
    actions.is_empty()
}

/// A property's condition over a model's world and state (what
/// stateright's `Property` holds).
pub type Condition<R> = fn(&World<R>, &State<R>) -> bool;
