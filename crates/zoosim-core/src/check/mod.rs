//! Pure checkers over what a run recorded: the recipe oracles, judged on
//! outcome logs (what each client saw and did, with simulated times) and on
//! the effects a fenced resource accepted. Each oracle names the
//! properties it checks (its `PROPERTIES`), and every violation it reports
//! names the one it breaks, so a failure says what went wrong before how.

use std::fmt;

pub mod barrier;
pub mod config;
pub mod contract;
pub mod double_barrier;
pub mod fence;
pub mod lin;
pub mod lock;
pub mod membership;
pub mod queue;
pub mod two_phase_commit;

/// One line of an outcome log: at `at_ms` (simulated time), `client` (a
/// process: it may go through several sessions) saw or did `event`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Entry<E> {
    /// Simulated time of the event, in milliseconds.
    pub at_ms: u64,
    /// The client (process) index, stable across its sessions.
    pub client: usize,
    /// What the client saw or did.
    pub event: E,
}

/// The quiet phase after the faults: from `from_ms` on, whatever a live
/// client starts or has pending must finish within `bound_ms`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Liveness {
    /// When the quiet phase starts (simulated ms).
    pub from_ms: u64,
    /// How long anything started or pending in the quiet phase may take (ms).
    pub bound_ms: u64,
    /// When the log ends: waits that could not have reached their bound by
    /// then are not judged.
    pub end_ms: u64,
}

impl Liveness {
    /// Whether a wait that had to end by `deadline` and ended at `done`
    /// (never, if `None`) missed it. A deadline past the log's end is not
    /// judged: the run stopped before the wait could have been late.
    pub(crate) fn missed(self, deadline: u64, done: Option<u64>) -> bool {
        deadline <= self.end_ms && done.is_none_or(|at| at > deadline)
    }
}

/// A property an oracle checks: a short kebab-case name and what it means.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Property {
    /// The short kebab-case name every violation of it carries.
    pub name: &'static str,
    /// What the property means, in one sentence.
    pub what: &'static str,
}

impl Property {
    /// A property named `name` meaning `what` (a `const fn`, for the oracles' constants).
    pub const fn new(name: &'static str, what: &'static str) -> Property {
        Property { name, what }
    }
}

impl fmt::Display for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.what)
    }
}

/// A property that failed in a run: which one, and the evidence.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Violation {
    /// The broken property's [`Property::name`].
    pub property: &'static str,
    /// The evidence: which clients, rounds or items, and when.
    pub detail: String,
    /// The log's events the evidence rests on (e.g. the two holders'
    /// acquisitions, each woken waiter's wake-up), so that a report can
    /// point at them rather than only quote `detail`. Empty when the
    /// oracle names none.
    pub at: Vec<Moment>,
}

/// A client's event that a [`Violation`] names: who, and when.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct Moment {
    /// The client (process) index, as in [`Entry::client`].
    pub client: usize,
    /// The event's simulated time, in milliseconds ([`Entry::at_ms`]).
    pub at_ms: u64,
}

impl Violation {
    /// A violation of `property` with `detail` as its evidence.
    pub fn new(property: Property, detail: impl Into<String>) -> Violation {
        Violation {
            property: property.name,
            detail: detail.into(),
            at: Vec::new(),
        }
    }

    /// The same, naming the events it rests on (see [`Violation::at`]).
    pub fn at(mut self, moments: impl IntoIterator<Item = Moment>) -> Violation {
        self.at.extend(moments);
        self
    }
}

impl<E> Entry<E> {
    /// This event as a [`Moment`] a violation can name.
    pub fn moment(&self) -> Moment {
        Moment {
            client: self.client,
            at_ms: self.at_ms,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.property, self.detail)
    }
}

/// Every recipe's: a `Failed` event is a client stuck, whatever the
/// recipe's other properties say (each oracle lists it, re-exported).
pub const NO_RECIPE_FAILURE: Property = Property::new(
    "no-recipe-failure",
    "no recipe meets an answer it has no way forward from, nor refuses a command",
);

/// Every recipe whose waiters watch others' nodes (the lock family and
/// the election; a queue's consumers are the page's herd): one property,
/// declared here so that the oracles and the models share it.
pub const NO_HERD: Property = Property::new(
    "no-herd",
    "a deletion wakes at most one waiter, or only readers; no reader waits on a reader's node",
);

/// The followers' recipes' (configuration, group membership): one
/// property, its state being the node's version or the group.
pub const CONVERGENCE: Property = Property::new(
    "convergence",
    "once changes stop (in a run: after the quiet phase), every live follower's last read \
     shows the final state (the node's final version; the final group)",
);

/// One violation of [`NO_RECIPE_FAILURE`] per `Failed` event, in log order;
/// `failed` picks a `Failed` event's error out of the recipe's events.
fn recipe_failures<'a, E: 'a>(
    log: &'a [Entry<E>],
    failed: impl Fn(&'a E) -> Option<&'a str> + 'a,
) -> impl Iterator<Item = Violation> + 'a {
    log.iter().filter_map(move |e| {
        let error = failed(&e.event)?;
        Some(
            Violation::new(
                NO_RECIPE_FAILURE,
                format!("client {} failed at {} ms: {error}", e.client, e.at_ms),
            )
            .at([e.moment()]),
        )
    })
}

/// What a caught panic says (its payload when a string), for the checker
/// faults that turn a panic in a check into a failure naming the checker
/// ([`contract::guarded`], `zoosim lin`).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message")
}
