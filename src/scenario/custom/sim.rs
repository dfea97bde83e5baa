//! A registered recipe in the simulation: what its `start` is given
//! ([`RunCtx`]), what it hands back ([`Running`]), and what its judge
//! sees once the quiet phase is over ([`JudgeCtx`]).

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};

use madsim::rand::{thread_rng, Rng};
use madsim::task::JoinHandle;
use madsim::time::Instant;

use super::{Verdict, WorkloadValue};
use crate::check::{Entry, Liveness};
use crate::client::Zk;
use crate::ensemble::fault::Fault;
use crate::ensemble::msg::ServerId;
use crate::ensemble::sim::nemesis::{ClientSlots, InjectedFault};
use crate::ensemble::sim::{Ensemble, SimZk};
use crate::scenario::spec::Scenario;
use crate::scenario::workload::{client_sessions, ensure_slots, flavour_of};
use crate::tree::Node;

/// Simulated milliseconds since the run started (the time outcome logs
/// are stamped with).
pub use crate::scenario::workload::now_ms;

/// A recipe's run, after `start`: judged once the quiet phase is over and
/// every task it spawned has been stopped where it was.
pub trait Running: Send {
    /// True once every client has done all it will do: the run then ends
    /// without waiting out the quiet phase (default: never).
    fn finished(&self) -> bool {
        false
    }

    /// The run's verdict. Synchronous: the clients are stopped and the
    /// ensemble's final state is at hand ([`JudgeCtx::final_node`]).
    fn judge(self: Box<Self>, ctx: &JudgeCtx) -> Verdict;
}

/// What one seed's run gives a recipe's [`super::CustomRecipe::start`].
pub struct RunCtx {
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    recipe: String,
    clients: usize,
    variant: Option<String>,
    /// Every declared key's value, lists drawn from for this seed.
    values: BTreeMap<String, i64>,
    session_timeout_ms: u64,
    fault_end: Instant,
    until: Instant,
    tasks: Vec<JoinHandle<()>>,
}

impl RunCtx {
    /// The ensemble to open sessions on (`connect_with`), and whose final
    /// state a judge may read.
    pub fn ensemble(&self) -> &Arc<Ensemble> {
        &self.ensemble
    }

    /// The clients the nemesis aims its client faults at: a client's
    /// current session handle goes in its slot ([`RunCtx::spawn_client`]
    /// keeps it there), and `busy` marks one a fault would hurt most.
    pub fn slots(&self) -> &ClientSlots {
        &self.slots
    }

    /// The scenario's `clients`.
    pub fn clients(&self) -> usize {
        self.clients
    }

    /// The buggy variant the scenario asks for, if any.
    pub fn variant(&self) -> Option<&str> {
        self.variant.as_deref()
    }

    /// A declared workload key's value (for a list, the one drawn for this
    /// seed). Panics on a key the recipe does not declare: a bug of the
    /// recipe, which fails the seed with this message.
    pub fn value(&self, key: &str) -> i64 {
        match self.values.get(key) {
            Some(v) => *v,
            None => panic!(
                "recipe {} reads workload key {key:?}, which it does not declare \
                 (CustomRecipe::workload_keys)",
                self.recipe
            ),
        }
    }

    /// The scenario's `ensemble.session_timeout_ms`.
    pub fn session_timeout_ms(&self) -> u64 {
        self.session_timeout_ms
    }

    /// When the nemesis stops (then the quiet phase: everything must
    /// finish).
    pub fn fault_end(&self) -> Instant {
        self.fault_end
    }

    /// Far past the end of the run: clients may run until then; the run
    /// ends under them.
    pub fn until(&self) -> Instant {
        self.until
    }

    /// Runs `task` on the run's main node; it is stopped when the run ends.
    pub fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.push(madsim::task::spawn(task));
    }

    /// Runs client `c` as the built-in workloads run theirs: a session on
    /// a random server (Java-flavoured for even `c`, Rust for odd), its
    /// handle in slot `c` for the nemesis, and `session` run with it on
    /// the client's own node (so a client crash or pause stops it too).
    /// `session` returns true when its session was lost (another is
    /// opened) and false when the client is done; a crashed client is
    /// done. Stopped when the run ends.
    pub fn spawn_client<F, Fut>(&mut self, c: usize, session: F)
    where
        F: FnMut(Arc<SimZk>) -> Fut + Send + 'static,
        Fut: Future<Output = bool> + Send + 'static,
    {
        ensure_slots(&self.slots, c + 1);
        let (e, slots, t, until) = (
            self.ensemble.clone(),
            self.slots.clone(),
            self.session_timeout_ms,
            self.until,
        );
        self.spawn(client_sessions(
            c,
            e,
            slots,
            flavour_of(c),
            t,
            until,
            session,
        ));
    }
}

/// The quiet phase ended without a leader: the final state cannot be read
/// (a liveness failure of the ensemble, not of the recipe).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct NoLeader;

impl fmt::Display for NoLeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no leader after the quiet phase")
    }
}

impl std::error::Error for NoLeader {}

/// What a judge sees: the ensemble after the quiet phase, the faults
/// injected, the clients, and the quiet phase's bounds.
pub struct JudgeCtx<'a> {
    ensemble: &'a Ensemble,
    slots: &'a ClientSlots,
    faults: &'a [InjectedFault],
    liveness: Liveness,
    clients: usize,
    variant: Option<&'a str>,
}

impl JudgeCtx<'_> {
    pub fn ensemble(&self) -> &Ensemble {
        self.ensemble
    }

    /// The established leader, if any.
    pub fn leader(&self) -> Option<ServerId> {
        self.ensemble.leader()
    }

    /// The node at `path` as the leader has it: the committed state the
    /// run ended with (None: no such node).
    pub fn final_node(&self, path: &str) -> Result<Option<Node>, NoLeader> {
        let leader = self.leader().ok_or(NoLeader)?;
        Ok(self
            .ensemble
            .with_server(leader, |s| s.tree().node(path).cloned()))
    }

    /// Every fault the nemesis injected, in order.
    pub fn faults(&self) -> &[InjectedFault] {
        self.faults
    }

    /// (simulated ms, client) of every client crash: a crashed client
    /// cannot log its own end.
    pub fn crashed_clients(&self) -> Vec<(u64, usize)> {
        self.faults
            .iter()
            .filter(|f| f.fault == Fault::ClientCrash)
            .filter_map(|f| Some((f.at.as_millis() as u64, f.client?)))
            .collect()
    }

    /// `log` with a `crashed()` entry for every client crash, in time
    /// order (entries at one time keep their order, crashes after).
    pub fn with_crashes<E>(
        &self,
        mut log: Vec<Entry<E>>,
        crashed: impl Fn() -> E,
    ) -> Vec<Entry<E>> {
        for (at_ms, client) in self.crashed_clients() {
            log.push(Entry {
                at_ms,
                client,
                event: crashed(),
            });
        }
        log.sort_by_key(|e| e.at_ms);
        log
    }

    /// The clients alive at the end: a session handle in their slot that
    /// the leader still knows (none without a leader).
    pub fn live_clients(&self) -> Vec<usize> {
        let Some(leader) = self.leader() else {
            return Vec::new();
        };
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        (0..slots.len())
            .filter(|&c| {
                slots[c].zk.as_ref().is_some_and(|zk| {
                    self.ensemble
                        .with_server(leader, |s| s.tree().has_session(zk.session_id()))
                })
            })
            .collect()
    }

    /// The quiet phase: from `from_ms` on, whatever a live client starts
    /// must finish within `bound_ms`; the log ends at `end_ms`.
    pub fn liveness(&self) -> Liveness {
        self.liveness
    }

    pub fn clients(&self) -> usize {
        self.clients
    }

    pub fn variant(&self) -> Option<&str> {
        self.variant
    }
}

/// An outcome log the clients append to and the judge reads: entries
/// stamped with the simulated time.
pub struct OutcomeLog<E>(Arc<Mutex<Vec<Entry<E>>>>);

impl<E> Clone for OutcomeLog<E> {
    fn clone(&self) -> Self {
        OutcomeLog(self.0.clone())
    }
}

impl<E> Default for OutcomeLog<E> {
    fn default() -> Self {
        OutcomeLog(Arc::default())
    }
}

impl<E: Clone> OutcomeLog<E> {
    pub fn new() -> Self {
        OutcomeLog::default()
    }

    /// `client` saw or did `event`, now.
    pub fn record(&self, client: usize, event: E) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Entry {
                at_ms: now_ms(),
                client,
                event,
            });
    }

    /// The entries so far, in the order they were recorded (which is time
    /// order).
    pub fn entries(&self) -> Vec<Entry<E>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Starts `s`'s registered recipe: its workload keys' values drawn, its
/// `start` called. The tasks are the runner's to stop.
pub(crate) fn start(
    s: &Scenario,
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    fault_end: Instant,
    until: Instant,
) -> (Box<dyn Running>, Vec<JoinHandle<()>>) {
    let spec = s
        .custom
        .as_ref()
        .expect("a scenario of a registered recipe names it");
    let values = spec
        .values()
        .iter()
        .map(|(k, v)| {
            // One draw whatever the list (as the built-in recipes'
            // `hold_ms`): gen_range rejects and draws again at random, so
            // a list pinned to one value by the shrinker would move every
            // later draw of the seed.
            let n = match v {
                WorkloadValue::Int(n) => *n,
                WorkloadValue::Drawn(d) => {
                    let bits: u64 = thread_rng().gen();
                    d[(bits % d.len() as u64) as usize]
                }
            };
            (k.clone(), n)
        })
        .collect();
    ensure_slots(&slots, s.workload.clients);
    let mut ctx = RunCtx {
        ensemble,
        slots,
        recipe: spec.name().to_owned(),
        clients: s.workload.clients,
        variant: s.variant.clone(),
        values,
        session_timeout_ms: s.ensemble.session_timeout_ms,
        fault_end,
        until,
        tasks: Vec::new(),
    };
    let running = spec.recipe().start(&mut ctx);
    (running, ctx.tasks)
}

/// Judges a registered recipe's run; a counter it does not declare is a
/// violation (coverage goals and `zoosim list` go by the declaration).
pub(crate) fn judge(
    running: Box<dyn Running>,
    s: &Scenario,
    ensemble: &Ensemble,
    slots: &ClientSlots,
    faults: &[InjectedFault],
    liveness: Liveness,
) -> Verdict {
    let ctx = JudgeCtx {
        ensemble,
        slots,
        faults,
        liveness,
        clients: s.workload.clients,
        variant: s.variant.as_deref(),
    };
    let mut verdict = running.judge(&ctx);
    if let Some(spec) = &s.custom {
        let declared = spec.recipe().counters();
        for (k, _) in &verdict.counters {
            if !declared.contains(&k.as_str()) {
                verdict.violations.push(format!(
                    "recipe {} reported counter {k:?}, which it does not declare \
                     (CustomRecipe::counters)",
                    spec.name()
                ));
            }
        }
    }
    verdict
}
