//! A recipe in the simulation: what its `start` is given ([`RunCtx`]),
//! what it hands back ([`Running`]), what its judge sees once the quiet
//! phase is over ([`JudgeCtx`]), and the helpers every workload uses: an
//! outcome log stamped with simulated time ([`OutcomeLog`]), a client run
//! across sessions ([`RunCtx::spawn_client`], [`client_sessions`]), and the
//! count of clients done with their operations ([`Done`]).
//!
//! Each session runs on its own client node, so the nemesis's client
//! crashes and pauses stop the recipe code too; [`client_sessions`], on the
//! main node, opens the next session.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::time::{sleep, timeout, Instant, TimeHandle};

use super::workload::Workload;
use zoosim_client::Zk;
use zoosim_core::check::{Entry, Liveness};
use zoosim_core::fault::Fault;
use zoosim_core::tree::Node;
use zoosim_sim::msg::ServerId;
use zoosim_sim::sim::nemesis::{ClientSlots, InjectedFault};
use zoosim_sim::sim::{Ensemble, Flavour, SimZk};

use super::verdict::Verdict;

/// Simulated milliseconds since the run started (the time outcome logs
/// are stamped with).
pub fn now_ms() -> u64 {
    TimeHandle::current().elapsed().as_millis() as u64
}

/// A task a recipe's `start` asked for; the runner spawns it.
pub(super) type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A recipe's run, after `start`: judged once the quiet phase is over and
/// every task it spawned has been stopped where it was.
pub trait Running: Send {
    /// How the run learns that every client is done, to end before the
    /// quiet phase does (default: it asks [`Running::finished`] every
    /// 10 ms).
    fn ending(&self) -> Ending {
        Ending::Polled
    }

    /// True once every client has done all it will do (for
    /// [`Ending::Polled`]; default: never).
    fn finished(&self) -> bool {
        false
    }

    /// The run's verdict. Synchronous: the clients are stopped and the
    /// ensemble's final state is at hand ([`JudgeCtx::final_node`]).
    fn judge(self: Box<Self>, ctx: &JudgeCtx) -> Verdict;
}

/// When a run's clients are done (the run then ends early).
pub enum Ending {
    /// Never before the end of the quiet phase.
    QuietPhase,
    /// When [`Running::finished`] says so, asked every 10 ms.
    Polled,
    /// When `clients` clients have counted themselves `done` ([`finish`]):
    /// the runner is woken once, then (every wake-up is a scheduler step,
    /// which draws from the seed's RNG).
    Counted {
        /// The count the clients add themselves to.
        done: Finished,
        /// The count that ends the run.
        clients: usize,
    },
}

/// What one seed's run gives a recipe's [`super::recipe::Recipe::start`].
pub struct RunCtx {
    pub(super) ensemble: Arc<Ensemble>,
    pub(super) slots: ClientSlots,
    pub(super) recipe: String,
    pub(super) variant: Option<String>,
    /// Every declared key's value, lists drawn from for this seed.
    pub(super) values: Vec<(&'static str, i64)>,
    pub(super) session_timeout_ms: u64,
    pub(super) fault_end: Instant,
    pub(super) until: Instant,
    pub(super) setup: Option<Task>,
    pub(super) tasks: Vec<Task>,
}

impl RunCtx {
    /// The ensemble to open sessions on (`client(server)...connect()`),
    /// and whose final state a judge may read.
    pub fn ensemble(&self) -> &Arc<Ensemble> {
        &self.ensemble
    }

    /// The clients the nemesis aims its client faults at: a client's
    /// current session handle goes in its slot ([`RunCtx::spawn_client`]
    /// keeps it there), and `busy` marks one a fault would hurt most.
    pub fn slots(&self) -> &ClientSlots {
        &self.slots
    }

    /// The scenario's `clients` (0 for a recipe without that key).
    pub fn clients(&self) -> usize {
        self.values
            .iter()
            .find(|(k, _)| *k == "clients")
            .map_or(0, |(_, n)| (*n).max(0) as usize)
    }

    /// The buggy variant the scenario asks for, if any.
    pub fn variant(&self) -> Option<&str> {
        self.variant.as_deref()
    }

    /// A declared workload key's value (for a list, the one drawn for this
    /// seed). Panics on a key the recipe does not declare: a bug of the
    /// recipe, which fails the seed with this message.
    pub fn value(&self, key: &str) -> i64 {
        match self.values.iter().find(|(k, _)| *k == key) {
            Some((_, v)) => *v,
            None => panic!(
                "recipe {} reads workload key {key:?}, which it does not declare \
                 (Recipe::workload_keys)",
                self.recipe
            ),
        }
    }

    /// [`RunCtx::value`] of a key whose bounds are not negative.
    pub fn value_u64(&self, key: &str) -> u64 {
        u64::try_from(self.value(key)).unwrap_or_else(|_| {
            panic!(
                "recipe {} reads workload key {key:?} as a count, but its bounds allow {}",
                self.recipe,
                self.value(key)
            )
        })
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

    /// Runs `setup` to its end before any task starts (e.g. a node every
    /// client expects to exist). One per run.
    pub fn setup(&mut self, setup: impl Future<Output = ()> + Send + 'static) {
        assert!(
            self.setup.is_none(),
            "recipe {}: one setup per run",
            self.recipe
        );
        self.setup = Some(Box::pin(setup));
    }

    /// Runs `task` on the run's main node once `start` has returned (and
    /// the setup is done), in the order they were asked for; it is stopped
    /// when the run ends.
    pub fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.push(Box::pin(task));
    }

    /// Runs client `c` as every workload runs its clients: a session on a
    /// random server (Java-flavoured for even `c`, Rust for odd), its
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
    pub(super) ensemble: &'a Ensemble,
    pub(super) slots: &'a ClientSlots,
    pub(super) faults: &'a [InjectedFault],
    pub(super) liveness: Liveness,
    pub(super) workload: &'a Workload,
    pub(super) variant: Option<&'a str>,
}

impl JudgeCtx<'_> {
    /// The simulated ensemble, after the quiet phase.
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

    /// (simulated ms, client) of every client crash that happened: a
    /// crashed client cannot log its own end.
    pub fn crashed_clients(&self) -> Vec<(u64, usize)> {
        self.faults
            .iter()
            .filter(|f| f.fault == Fault::ClientCrash && !f.skipped)
            .map(|f| {
                let client = f.params.client.unwrap_or_else(|| {
                    panic!("the nemesis crashed a client without naming it: {f:?}")
                });
                (f.at.as_millis() as u64, client)
            })
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

    /// The scenario's `clients` (0 for a recipe without that key).
    pub fn clients(&self) -> usize {
        self.workload.clients().unwrap_or(0)
    }

    /// The scenario's workload (lists not drawn from).
    pub fn workload(&self) -> &Workload {
        self.workload
    }

    /// The scenario's recipe variant, if it names one.
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
    /// An empty log.
    pub fn new() -> Self {
        OutcomeLog::default()
    }

    /// `client` saw or did `event`, now.
    pub fn record(&self, client: usize, event: E) {
        let at_ms = now_ms();
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Entry {
                at_ms,
                client,
                event,
            });
        super::budget::note(super::budget::Event::Outcome);
    }

    /// The entries so far, in the order they were recorded (which is time
    /// order).
    pub fn entries(&self) -> Vec<Entry<E>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Client `c`'s flavour: even ones Java, odd ones Rust.
pub fn flavour_of(c: usize) -> Flavour {
    if c % 2 == 0 {
        Flavour::Java
    } else {
        Flavour::Rust
    }
}

/// Makes room for `n` clients in the nemesis's slots.
pub fn ensure_slots(slots: &ClientSlots, n: usize) {
    let mut s = slots.lock().unwrap();
    if s.len() < n {
        s.resize_with(n, Default::default);
    }
}

/// Client `c` across sessions: connects to a random server (retrying while
/// none answers), keeps the handle in its slot for the nemesis, and runs
/// `session` on the client's own node. `session` returns true when its
/// session is lost (a new one follows) and false when the client is done;
/// a crash of the node ends the client too. Stops opening sessions at
/// `until`.
pub async fn client_sessions<F, Fut>(
    c: usize,
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    flavour: Flavour,
    session_timeout_ms: u64,
    until: Instant,
    mut session: F,
) where
    F: FnMut(Arc<SimZk>) -> Fut,
    Fut: Future<Output = bool> + Send + 'static,
{
    let servers = ensemble.config().servers;
    while Instant::now() < until {
        let server = thread_rng().gen_range(0..servers);
        let Ok(zk) = ensemble
            .client(server)
            .scenario_client(c as u32)
            .timeout_ms(session_timeout_ms)
            .flavour(flavour)
            .connect()
            .await
        else {
            sleep(Duration::from_millis(200)).await;
            continue;
        };
        let zk = Arc::new(zk);
        // The first Connected belongs to the handshake, not to a reconnect.
        let _ = zk.try_next_event();
        slots.lock().unwrap()[c].zk = Some(zk.clone());
        let node = Handle::current()
            .get_node(zk.node())
            .expect("the client's node");
        match node.spawn(session(zk)).await {
            Ok(true) => slots.lock().unwrap()[c].zk = None,
            Ok(false) => return,
            Err(_) => {
                // Crashed: the handle is dead.
                slots.lock().unwrap()[c].zk = None;
                return;
            }
        }
    }
}

/// How many clients did all their operations: a run whose clients are
/// all done ends early.
pub type Finished = Arc<Done>;

/// The count behind [`Finished`]: clients that did all their operations.
#[derive(Default)]
pub struct Done {
    /// The count, and who waits for it to reach what.
    state: Mutex<(usize, Option<(usize, Waker)>)>,
}

impl Done {
    /// Clients counted so far.
    pub fn count(&self) -> usize {
        self.state.lock().unwrap().0
    }

    fn add(&self) {
        let mut st = self.state.lock().unwrap();
        st.0 += 1;
        // The waiter is woken once, when its count is reached: every
        // wake-up is a scheduler step, which draws from the seed's RNG.
        if st.1.as_ref().is_some_and(|(n, _)| st.0 >= *n) {
            if let Some((_, w)) = st.1.take() {
                w.wake();
            }
        }
    }

    /// Until `n` clients are done.
    pub async fn reach(&self, n: usize) {
        poll_fn(|cx| {
            let mut st = self.state.lock().unwrap();
            if st.0 >= n {
                Poll::Ready(())
            } else {
                st.1 = Some((n, cx.waker().clone()));
                Poll::Pending
            }
        })
        .await
    }
}

/// Client `c` did all its operations: out of the nemesis's reach, its
/// session closed, counted. False, for [`client_sessions`]: no session
/// follows.
pub async fn finish(slots: &ClientSlots, c: usize, zk: &SimZk, finished: &Finished) -> bool {
    slots.lock().unwrap()[c].zk = None;
    let _ = zk.close().await;
    finished.add();
    false
}

/// Closes a session a recipe gave up on (if it is not gone already), so
/// its ephemerals do not linger until it expires; true, for
/// [`client_sessions`]: open another.
pub async fn replace(zk: &SimZk) -> bool {
    let bound = Duration::from_millis(zk.session_timeout_ms());
    let _ = timeout(bound, zk.close()).await;
    true
}
