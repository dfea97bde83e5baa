//! A generic linearizability checker: is there an order of a concurrent
//! history's operations, consistent with their real-time order, in which a
//! sequential [`Model`] gives every operation the output it saw?
//!
//! The search ([`check`]) is Wing and Gong's, with Lowe's just-in-time
//! linearization: the history becomes a list of call and return entries in
//! time order; the search linearizes an operation whose call it meets
//! (if the model accepts it there), lifts it out of the list and starts
//! over; meeting a return entry means an operation had to be linearized by
//! then and was not, so it undoes the last choice. A memo of (set of
//! operations linearized, model state) pairs already explored cuts every
//! path that reaches a configuration a second time. Models that split
//! into independent parts ([`Model::partition`], e.g. a map by key) are
//! checked part by part (P-compositionality).
//!
//! Operations whose outcome is unknown ([`Outcome::Unknown`]: Jepsen's
//! `:info`, a ZooKeeper ConnectionLoss) may take effect at any moment
//! after their call, or never: they have no return entry, so the search
//! may linearize them anywhere after their call and is done once every
//! operation with a known outcome is linearized.
//!
//! The search is bounded by a [`Budget`]; past it the verdict is
//! [`Verdict::Unknown`] with what was explored. For a history that is not
//! linearizable, [`minimal`] shrinks it to a small sub-history that still is
//! not. [`jepsen`] reads Jepsen's history formats (EDN with [`edn`]); [`cas_register`] and
//! [`kv`] are models.

use std::fmt;
use std::hash::Hash;

pub mod cas_register;
pub mod edn;
mod engine;
pub mod jepsen;
pub mod kv;
pub mod minimal;

#[cfg(test)]
mod brute;
#[cfg(test)]
mod edn_tests;
#[cfg(test)]
mod tests;

use engine::decide;
#[cfg(test)]
use engine::decide_after;
pub use engine::{check, check_partition, POLL_EVERY};

/// What an operation returned: a known output, or nothing known (the
/// client lost the connection, or timed out, before the answer).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Outcome<O> {
    /// The operation took effect and returned this.
    Known(O),
    /// The operation may have taken effect, at any time after its call, or
    /// never.
    Unknown,
}

impl<O> Outcome<O> {
    /// The outcome by reference.
    pub fn as_ref(&self) -> Outcome<&O> {
        match self {
            Outcome::Known(o) => Outcome::Known(o),
            Outcome::Unknown => Outcome::Unknown,
        }
    }

    /// Whether the outcome is known.
    pub fn is_known(&self) -> bool {
        matches!(self, Outcome::Known(_))
    }
}

/// One operation of a history: who called what, when, and what came back.
/// Times are any increasing clock shared by every client (simulated
/// milliseconds, or line numbers of a log); equal times count as
/// concurrent.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Operation<I, O> {
    /// The client (process) that called it.
    pub client: u64,
    /// What was called.
    pub input: I,
    /// What came back.
    pub output: Outcome<O>,
    /// When it was called.
    pub call: u64,
    /// When the answer (or the news that there is none) came back; `None`
    /// if never. An operation with an unknown outcome is open-ended
    /// whatever this says: it may take effect after the client gave up.
    pub ret: Option<u64>,
}

/// A history of operations of model `M`.
pub type History<M> = Vec<Operation<<M as Model>::Input, <M as Model>::Output>>;

/// What a model's step does to a state.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Step<S> {
    /// The operation cannot happen in this state with this outcome.
    Impossible,
    /// It can, and leaves the state as it was (a read). Saves a clone of
    /// a state that may be large (a data tree).
    Unchanged,
    /// It can, and the state becomes this.
    To(S),
}

/// An independent part of a history: the operations of one key. Parts
/// are checked one by one; the history is linearizable if each is.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Partition {
    /// What the part is, for reports (a key; empty for the whole history).
    pub key: String,
    /// Indices of its operations in the history, in history order.
    pub ops: Vec<usize>,
}

/// A sequential specification: the states an object goes through and
/// what each operation does to them.
pub trait Model {
    /// The object's state. Hashed and compared by the memo, never cloned
    /// by the checker (a step that changes nothing says
    /// [`Step::Unchanged`]).
    type State: Eq + Hash;
    /// An operation's call, with its arguments.
    type Input;
    /// An operation's output.
    type Output;

    /// The state before any operation.
    fn init(&self) -> Self::State;

    /// Applies `input`, which returned `output`, to `state`. With
    /// [`Outcome::Unknown`] the step says what the operation does if it
    /// takes effect (the checker itself covers "never").
    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: Outcome<&Self::Output>,
    ) -> Step<Self::State>;

    /// Whether this operation, with this outcome, leaves every state in
    /// which it can happen unchanged (a read; a cas that failed). The
    /// search then linearizes it as soon as it can happen, without trying
    /// to put it later: it can always be moved to the earliest point its
    /// call allows, changing nothing after it. Default: no (always safe).
    fn read_only(&self, input: &Self::Input, output: Outcome<&Self::Output>) -> bool {
        let _ = (input, output);
        false
    }

    /// Whether this operation, with this outcome, can happen in every
    /// state (a write that does not look at the state: a register's
    /// write, a map's put or append). The minimal failing sub-history
    /// ([`minimal`]) keeps every other operation (a read, a successful
    /// cas) only with writes that give it the state it needs, so that
    /// one is never shown failing only because its writes were dropped.
    /// Default: no (every operation is held to that).
    fn unconditional(&self, input: &Self::Input, output: Outcome<&Self::Output>) -> bool {
        let _ = (input, output);
        false
    }

    /// The bytes the search counts for each state it keeps, against
    /// [`Budget::max_memo_bytes`]. Default: the state's own size (what it
    /// holds elsewhere is not counted).
    fn state_bytes(&self) -> usize {
        std::mem::size_of::<Self::State>()
    }

    /// A coarser version of this model, if it has one: fewer states, and
    /// every history this model accepts it accepts too (mapping each of
    /// this model's states to one of its own, each step this model allows
    /// it allows between the mapped states). So a history it rejects is
    /// not linearizable, and its search says so after a fraction of the
    /// configurations this model's search would exhaust: e.g. a map that
    /// forgets the order of appends has a subset of them where this one
    /// has every order of that subset. The checker tries it on a part its
    /// own search does not decide quickly ([`check_partition`]). Default:
    /// none.
    fn coarser(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }

    /// Splits a history into independent parts (P-compositionality).
    /// Default: one part, the whole history.
    fn partition(&self, ops: &[Operation<Self::Input, Self::Output>]) -> Vec<Partition> {
        vec![Partition {
            key: String::new(),
            ops: (0..ops.len()).collect(),
        }]
    }

    /// An operation in words, for reports (e.g. `cas 1 -> 2: ok`).
    fn describe_op(&self, input: &Self::Input, output: Outcome<&Self::Output>) -> String;

    /// A state in words, for reports.
    fn describe_state(&self, state: &Self::State) -> String;
}

/// How far a search may go before it answers [`Verdict::Unknown`]. The
/// checker reads no clock: a caller with a deadline passes `stop`.
#[derive(Clone, Copy)]
pub struct Budget<'a> {
    /// Most search steps (tries of an operation, and undos), over all
    /// partitions.
    pub max_steps: u64,
    /// Most bytes the memo (and the states it holds) may take, per
    /// partition (approximate: the checker's own tables, plus each state's
    /// `size_of`).
    pub max_memo_bytes: usize,
    /// Polled every few thousand steps: `Some(why)` stops the search
    /// (a time limit, a measured memory bound, an interrupt).
    pub stop: Option<&'a dyn Fn() -> Option<Exhausted>>,
}

impl Budget<'_> {
    /// No limit but the machine's.
    pub const UNLIMITED: Budget<'static> = Budget {
        max_steps: u64::MAX,
        max_memo_bytes: usize::MAX,
        stop: None,
    };
}

impl fmt::Debug for Budget<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Budget")
            .field("max_steps", &self.max_steps)
            .field("max_memo_bytes", &self.max_memo_bytes)
            .field("stop", &self.stop.is_some())
            .finish()
    }
}

/// Options of [`check`].
#[derive(Clone, Copy, Debug)]
pub struct Options<'a> {
    /// The bound on the search.
    pub budget: Budget<'a>,
    /// Stop at the first partition that is not linearizable (the verdict
    /// is then known) instead of diagnosing every one.
    pub first_failure: bool,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            budget: Budget::UNLIMITED,
            first_failure: false,
        }
    }
}

/// Why a search stopped without a verdict.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Exhausted {
    /// [`Budget::max_steps`] reached.
    Steps,
    /// [`Budget::max_memo_bytes`] reached, or the memory the process
    /// holds past its bound (the binary's counting allocator, `zoosim::memory`).
    Memory,
    /// The time budget ran out ([`Budget::stop`]).
    Stopped,
    /// A person interrupted the search (Ctrl-C, SIGTERM).
    Interrupted,
}

impl fmt::Display for Exhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Exhausted::Steps => "step budget exhausted",
            Exhausted::Memory => "memory budget exhausted",
            Exhausted::Stopped => "stopped (time budget)",
            Exhausted::Interrupted => "interrupted",
        })
    }
}

/// What a search explored.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Explored {
    /// Search steps taken.
    pub steps: u64,
    /// Configurations (linearized set, state) in the memo at the end.
    pub memo_entries: usize,
    /// Distinct model states met.
    pub states: usize,
    /// The longest linearizable prefix found, in operations.
    pub deepest: usize,
}

/// One operation of a linearization, with the model state around it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Linearized {
    /// The operation's index in the history.
    pub op: usize,
    /// The model state before it, in words.
    pub before: String,
    /// The model state after it, in words.
    pub after: String,
}

/// Why a partition is not linearizable, for a person.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Diagnosis {
    /// The longest linearizable prefix the search found: operations in
    /// order, with states.
    pub prefix: Vec<Linearized>,
    /// After that prefix, the operation (with a known outcome) that
    /// returned first among those left: something had to be linearized
    /// before its return and nothing could.
    pub deadline: usize,
    /// The operations that could have come next after the prefix (called
    /// before `deadline` returned), each with whether the model accepts it
    /// in the prefix's final state (accepted ones led only to dead ends).
    pub candidates: Vec<(usize, bool)>,
}

/// The verdict on one partition.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Verdict {
    /// Linearizable; a witness order (history indices; operations with an
    /// unknown outcome appear only if they took effect).
    Linearizable(Vec<usize>),
    /// Not linearizable, with a diagnosis.
    NotLinearizable(Diagnosis),
    /// The budget ran out first.
    Unknown(Exhausted),
    /// Not checked: an earlier partition failed and the search was asked
    /// to stop at the first failure.
    NotChecked,
}

/// One partition's result.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PartitionResult {
    /// The partition.
    pub partition: Partition,
    /// Its verdict.
    pub verdict: Verdict,
    /// What its search explored.
    pub explored: Explored,
}

/// The result of [`check`]: one verdict per partition.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Checked {
    /// Every partition, in the model's order.
    pub partitions: Vec<PartitionResult>,
}

/// The overall verdict of a history.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Summary {
    /// Every partition is linearizable.
    Linearizable,
    /// Some partition is not.
    NotLinearizable,
    /// None failed, but some could not be decided within the budget.
    Unknown,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Summary::Linearizable => "linearizable",
            Summary::NotLinearizable => "not linearizable",
            Summary::Unknown => "unknown",
        })
    }
}

impl Checked {
    /// The overall verdict.
    pub fn summary(&self) -> Summary {
        if self
            .partitions
            .iter()
            .any(|p| matches!(p.verdict, Verdict::NotLinearizable(_)))
        {
            Summary::NotLinearizable
        } else if self
            .partitions
            .iter()
            .all(|p| matches!(p.verdict, Verdict::Linearizable(_)))
        {
            Summary::Linearizable
        } else {
            Summary::Unknown
        }
    }

    /// The partitions that are not linearizable.
    pub fn failing(&self) -> impl Iterator<Item = &PartitionResult> {
        self.partitions
            .iter()
            .filter(|p| matches!(p.verdict, Verdict::NotLinearizable(_)))
    }

    /// Search steps over all partitions.
    pub fn steps(&self) -> u64 {
        self.partitions.iter().map(|p| p.explored.steps).sum()
    }
}
