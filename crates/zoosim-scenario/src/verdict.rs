//! What a run is judged into: a [`Verdict`] of named violations, counters
//! and the outcome log; the properties every run is judged on whatever
//! the recipe ([`run_properties`]); the counters every run reports
//! ([`ENSEMBLE_COUNTERS`]). Pure data.

use std::fmt;

pub use zoosim_core::check::{Property, Violation};

/// Properties every run is judged on, whatever the recipe.
pub mod run_properties {
    use super::Property;

    /// A panic in the simulation: an invariant asserted by the tree, a
    /// server, the client or a recipe machine failed.
    pub const INVARIANTS: Property = Property::new(
        "invariants",
        "no invariant asserted in the tree, the servers, the clients or a recipe machine fails",
    );
    /// The ensemble itself recovered: the final state can be read.
    pub const ENSEMBLE_LIVENESS: Property = Property::new(
        "ensemble-liveness",
        "a leader is established by the end of the quiet phase",
    );
    /// A recipe's verdict uses only what it declares.
    pub const DECLARED_NAMES: Property = Property::new(
        "declared-names",
        "a verdict names only the properties and counters its recipe declares",
    );
    /// The run did something: a seed whose clients logged no operation at
    /// all (every link slower than the session timeout, say) proves
    /// nothing, and must not pass.
    pub const PROGRESS: Property = Property::new(
        "workload-ran",
        "the clients log at least one operation over the run",
    );
    /// A seed stays within its budget of simulated events
    /// (crates/zoosim-sim/src/sim/budget.rs): a scenario that describes hours of busy
    /// clients, 128 clients on one queue or a fault every millisecond is
    /// stopped and told which keys made it so, not left to run for
    /// minutes and grow past a gigabyte.
    pub const SEED_BUDGET: Property = Property::new(
        "seed-budget",
        "a seed counts at most its budget of simulated events: outcomes, messages, faults, \
         connections, restarts (1,000,000 by default)",
    );
    /// All of them, as `zoosim list` shows them.
    pub const ALL: [Property; 5] = [
        INVARIANTS,
        ENSEMBLE_LIVENESS,
        DECLARED_NAMES,
        PROGRESS,
        SEED_BUDGET,
    ];
}

/// Counters every run reports: from the ensemble's servers (with what the
/// client faults caused: clients a partition left on a side without a
/// quorum, sessions served a tick or more after their expiry, isolated
/// clients whose session expired meanwhile; and what the server faults
/// caused: connections a killed server reset, peers that saw a kill at
/// once, leaders that resumed from a pause deposed, new leaders crashed
/// mid-sync, sessions that outlived a quorum outage; deletes the leader's
/// prep refused NotEmpty because a close of the node's children was
/// still outstanding, as ZooKeeper's does), and from
/// ZooKeeper's contract checked on what the clients saw (runs it decided
/// held; runs its search could not decide within its budget; runs the
/// zxid-ordered fast path decided without a search).
pub const ENSEMBLE_COUNTERS: [&str; 21] = [
    "elections-won",
    "session-expiries",
    "setwatches-replayed",
    "lost-replies",
    "truncations",
    "zxid-refusals",
    "reconnect-closes",
    "role-change-drops",
    "breakage-hits",
    "minority-clients",
    "served-after-expiry",
    "isolated-past-expiry",
    "client-resets",
    "peer-resets",
    "deposed-while-paused",
    "syncing-leader-crashes",
    "sessions-survived-outage",
    "not-empty-behind-close",
    "contract-held",
    "contract-undecided",
    "contract-fast",
];

/// What a judge found: the run passed when `violations` is empty. The
/// log (one line per outcome, in time order) is hashed into the seed's
/// digest and printed by `zoosim replay --trace`.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Verdict {
    /// The properties that failed, with the evidence.
    pub violations: Vec<Violation>,
    /// For a reader (`zoosim replay` prints it).
    pub report: String,
    /// Names from [`Recipe::counters`](super::recipe::Recipe::counters).
    pub counters: Vec<(String, u64)>,
    /// The outcome log, one line per entry.
    pub log: Vec<String>,
    /// When each log line's event happened (simulated ms since the start),
    /// in order: the shrinker tries faults where the workload was busy.
    /// May be empty.
    pub event_ms: Vec<u64>,
}

/// A counter an oracle's report carries: its name (in summaries,
/// coverage goals and `zoosim list`) and how it is read off the report.
/// A recipe declares each once, in one table that both
/// [`Recipe::counters`](super::recipe::Recipe::counters) (by [`counter_names`]) and its judge
/// ([`Verdict::counted`]) read.
pub struct Counter<R> {
    /// The counter's name.
    pub name: &'static str,
    /// Reads its count off a report.
    pub read: fn(&R) -> u64,
}

impl<R> Counter<R> {
    /// A counter named `name`, read by `read` (a `const fn`, for tables).
    pub const fn new(name: &'static str, read: fn(&R) -> u64) -> Counter<R> {
        Counter { name, read }
    }
}

/// The names of `counters`, in order: a recipe's
/// [`Recipe::counters`](super::recipe::Recipe::counters).
pub const fn counter_names<R, const N: usize>(counters: &[Counter<R>; N]) -> [&'static str; N] {
    let mut names = [""; N];
    let mut i = 0;
    while i < N {
        names[i] = counters[i].name;
        i += 1;
    }
    names
}

impl Verdict {
    /// A verdict over an outcome log, one line per entry
    /// (`at ms  client c  event`).
    pub fn over_log<E: fmt::Debug>(log: &[zoosim_core::check::Entry<E>]) -> Verdict {
        Verdict {
            log: log
                .iter()
                .map(|e| format!("{:>7} ms  client {}  {:?}", e.at_ms, e.client, e.event))
                .collect(),
            event_ms: log.iter().map(|e| e.at_ms).collect(),
            ..Verdict::default()
        }
    }

    /// A recipe oracle's verdict over `log`: its report, its violations and
    /// its counters (`(name, count)`, each a declared counter).
    pub fn judged<E: fmt::Debug>(
        log: &[zoosim_core::check::Entry<E>],
        report: &impl fmt::Display,
        violations: Vec<Violation>,
        counters: &[(&str, u64)],
    ) -> Verdict {
        let mut v = Verdict::over_log(log);
        for (name, n) in counters {
            v.count(name, *n);
        }
        v.report = report.to_string();
        v.violations = violations;
        v
    }

    /// [`Verdict::judged`] with the counters read off `report` by
    /// `counters`: each declared once, with its name
    /// ([`counter_names`] gives
    /// [`Recipe::counters`](super::recipe::Recipe::counters) the same
    /// list).
    pub fn counted<E: fmt::Debug, R: fmt::Display>(
        log: &[zoosim_core::check::Entry<E>],
        report: &R,
        violations: Vec<Violation>,
        counters: &[Counter<R>],
    ) -> Verdict {
        let counts: Vec<(&str, u64)> = counters
            .iter()
            .map(|c| (c.name, (c.read)(report)))
            .collect();
        Verdict::judged(log, report, violations, &counts)
    }

    /// The quiet phase ended without a leader: the final state cannot be
    /// read, a failure of the ensemble's liveness, not of the recipe.
    pub fn no_leader<E: fmt::Debug>(log: &[zoosim_core::check::Entry<E>]) -> Verdict {
        let why = "no leader after the quiet phase";
        let mut v = Verdict::over_log(log);
        v.violation(run_properties::ENSEMBLE_LIVENESS, why);
        v.report = why.to_owned();
        v
    }

    /// `property` failed: `detail` says how.
    pub fn violation(&mut self, property: Property, detail: impl Into<String>) {
        self.violations.push(Violation::new(property, detail));
    }

    /// Adds `n` to counter `name`.
    pub fn count(&mut self, name: &str, n: u64) {
        match self.counters.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => *v += n,
            None => self.counters.push((name.to_owned(), n)),
        }
    }

    /// No property failed.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}
