//! Clients contending for one exclusive role — a lock, or leadership —
//! acquire it, touch the fenced resource, hold it, touch it again, release
//! it, think, and again, under whatever the nemesis does. Every outcome goes
//! into the log [`zoosim_core::check::lock`] judges (leadership is judged as a
//! lock: one holder at a time, fenced effects, no herd, liveness).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::time::{sleep, timeout, Instant};

use crate::sim::{client_sessions, finish, flavour_of, replace, Finished, OutcomeLog, RunCtx};
use zoosim_client::Zk;
use zoosim_core::check::fence::FencedResource;
use zoosim_core::check::lock::LockEvent;
use zoosim_core::proto::{Op, Reply, ZkError};
use zoosim_recipes::election::{Election, ElectionCommand, ElectionOutcome};
use zoosim_recipes::lock::{Lock, LockCommand, LockOutcome};
use zoosim_recipes::revocable::{Revoker, RevokerCommand, RevokerOutcome};
use zoosim_recipes::{sequence_of, Driver, Machine, Noted};
use zoosim_sim::sim::nemesis::ClientSlots;
use zoosim_sim::sim::{Ensemble, Flavour, SimZk};

/// What the workload needs of a recipe machine holding an exclusive role.
pub(super) trait Exclusive: Machine<Command: Send, Outcome: Send> + Send + 'static {
    fn acquire() -> Self::Command;
    fn release() -> Self::Command;
    fn is_holder(&self) -> bool;
    /// Held, but suspended (disconnected, the session's fate unknown).
    fn is_suspended(&self) -> bool;
    /// A shared lock's reader: it may hold with other readers, and reads.
    fn is_shared(&self) -> bool;
    fn session_ended(&self) -> bool;
    /// What the machine is doing, in words (which node it waits on, which
    /// it holds): kept for a liveness failure to say where a client stuck.
    fn describe(&self) -> String;
    /// The machine's own node (full path), once it has one.
    fn node(&self) -> Option<&str>;
    /// Asked to let go (a revocable lock's revoker): end the critical
    /// section and release.
    fn asked_to_release(&self) -> bool {
        false
    }
    /// The outcome in the oracle's terms, and what it means for the loop.
    fn judge(outcome: &Self::Outcome) -> (LockEvent, Step);
}

/// What an outcome means for the client's loop.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Step {
    Acquired(u64),
    Released,
    /// Lost or failed: this session is done.
    Over,
    /// Anything else: keep going.
    Other,
}

impl Exclusive for Lock {
    fn acquire() -> LockCommand {
        LockCommand::Acquire
    }
    fn release() -> LockCommand {
        LockCommand::Release
    }
    fn is_holder(&self) -> bool {
        Lock::is_holder(self)
    }
    fn is_suspended(&self) -> bool {
        Lock::is_suspended(self)
    }
    fn is_shared(&self) -> bool {
        self.mode().is_shared()
    }
    fn describe(&self) -> String {
        Lock::describe(self)
    }
    fn node(&self) -> Option<&str> {
        Lock::node(self)
    }
    fn asked_to_release(&self) -> bool {
        self.revoke_asked()
    }
    fn session_ended(&self) -> bool {
        Lock::session_ended(self)
    }
    fn judge(outcome: &LockOutcome) -> (LockEvent, Step) {
        match outcome {
            LockOutcome::Acquired { token, .. } => (
                LockEvent::Acquired { token: *token },
                Step::Acquired(*token),
            ),
            LockOutcome::Suspended => (LockEvent::Suspended, Step::Other),
            LockOutcome::Resumed => (LockEvent::Resumed, Step::Other),
            LockOutcome::Released => (LockEvent::Released, Step::Released),
            LockOutcome::Recovered { found } => {
                (LockEvent::Recovered { found: *found }, Step::Other)
            }
            LockOutcome::Woken { path } => (LockEvent::Woken { path: path.clone() }, Step::Other),
            LockOutcome::Lost { .. } => (LockEvent::Lost, Step::Over),
            LockOutcome::RevokeAsked => (LockEvent::RevokeAsked, Step::Other),
            LockOutcome::Refused { command } => (
                LockEvent::Failed {
                    error: format!("{command:?} refused"),
                },
                Step::Over,
            ),
            LockOutcome::Failed(e) => (
                LockEvent::Failed {
                    error: format!("{e:?}"),
                },
                Step::Over,
            ),
        }
    }
}

impl Exclusive for Election {
    fn acquire() -> ElectionCommand {
        ElectionCommand::Join
    }
    fn release() -> ElectionCommand {
        ElectionCommand::Resign
    }
    fn is_holder(&self) -> bool {
        self.is_leader()
    }
    fn is_suspended(&self) -> bool {
        Election::is_suspended(self)
    }
    fn is_shared(&self) -> bool {
        false
    }
    fn describe(&self) -> String {
        Election::describe(self)
    }
    fn node(&self) -> Option<&str> {
        Election::node(self)
    }
    fn session_ended(&self) -> bool {
        Election::session_ended(self)
    }
    fn judge(outcome: &ElectionOutcome) -> (LockEvent, Step) {
        match outcome {
            ElectionOutcome::Elected { epoch } => (
                LockEvent::Acquired { token: *epoch },
                Step::Acquired(*epoch),
            ),
            ElectionOutcome::Suspended => (LockEvent::Suspended, Step::Other),
            ElectionOutcome::Resumed => (LockEvent::Resumed, Step::Other),
            ElectionOutcome::Resigned => (LockEvent::Released, Step::Released),
            ElectionOutcome::Recovered { found } => {
                (LockEvent::Recovered { found: *found }, Step::Other)
            }
            ElectionOutcome::Woken { path } => {
                (LockEvent::Woken { path: path.clone() }, Step::Other)
            }
            ElectionOutcome::Lost { .. } => (LockEvent::Lost, Step::Over),
            ElectionOutcome::Refused { command } => (
                LockEvent::Failed {
                    error: format!("{command:?} refused"),
                },
                Step::Over,
            ),
            ElectionOutcome::Failed(e) => (
                LockEvent::Failed {
                    error: format!("{e:?}"),
                },
                Step::Over,
            ),
        }
    }
}

/// Makes client `c`'s machine for a new session from its guid.
pub(super) type Make<M> = Arc<dyn Fn(usize, &str) -> M + Send + Sync>;

#[derive(Clone, Debug)]
pub(super) struct ExclusiveWorkload {
    pub clients: usize,
    pub hold_ms: u64,
    /// Touches of the resource per holding: the first and the middle ones
    /// after checking the role is still held, the last one (after the hold)
    /// without, as any application does.
    pub touches: u32,
    pub think_ms_max: u64,
    pub session_timeout_ms: u64,
    /// A revocable lock's dir: one more client (the last) revokes the
    /// lowest node there every 0.3–1 s.
    pub revoke_dir: Option<String>,
    /// Acquisitions per client, after which it closes its session and
    /// stops; 0: it goes on until the run ends.
    pub operations: u32,
    /// Clients `0..keepers` hold until asked to let go (a revocable lock's
    /// revoker), touching the resource all along, instead of for
    /// `hold_ms`: a revocation ignored then shows as a holding that never
    /// ends.
    pub keepers: usize,
}

/// What a client's machine was doing, in words, and its own node.
pub(super) type Doing = (String, Option<String>);

/// What a lock run records, shared by its clients.
#[derive(Clone, Default)]
pub(super) struct ExclusiveRecord {
    pub log: OutcomeLog<LockEvent>,
    pub resource: Arc<Mutex<FencedResource>>,
    /// Acquisitions released, per client.
    pub completed: Arc<Mutex<BTreeMap<usize, u32>>>,
    /// Clients that did all their operations.
    pub finished: Finished,
    /// Per client: what its machine was doing when last seen (after its
    /// last step), and its own node, for a liveness failure to say where
    /// it stuck.
    pub doing: Arc<Mutex<BTreeMap<usize, Doing>>>,
    /// Which client each session was (by session id), to name the owners
    /// of the nodes left in the lock's directory.
    pub sessions: Arc<Mutex<BTreeMap<i64, usize>>>,
}

impl ExclusiveRecord {
    /// Client `c`'s machine, as it is now.
    fn seen<M: Exclusive>(&self, c: usize, machine: &M) {
        let node = machine.node().map(str::to_owned);
        self.doing
            .lock()
            .unwrap()
            .insert(c, (machine.describe(), node));
    }
}

/// Starts the clients (even ones Java-flavoured, odd ones Rust); they stop
/// at `until`. Each client's handle is kept in its slot for the nemesis.
pub(super) fn spawn<M: Exclusive>(
    ctx: &mut RunCtx,
    workload: &ExclusiveWorkload,
    make: Make<M>,
) -> ExclusiveRecord {
    let record = ExclusiveRecord::default();
    let (ensemble, slots, until) = (ctx.ensemble().clone(), ctx.slots().clone(), ctx.until());
    for c in 0..workload.clients {
        let (e, s, w, r, m) = (
            ensemble.clone(),
            slots.clone(),
            workload.clone(),
            record.clone(),
            make.clone(),
        );
        ctx.spawn(supervise(c, e, s, w, r, m, until));
    }
    if let Some(dir) = workload.revoke_dir.clone() {
        let c = workload.clients;
        // The revoker's handle stays out of the nemesis's slots (client
        // faults aimed at it are skipped): keepers hold until it asks, so
        // a crashed revoker would stall every waiter for good. Its
        // requests still meet every server and network fault.
        let own = ClientSlots::default();
        crate::sim::ensure_slots(&own, c + 1);
        let (e, w, r) = (ensemble.clone(), workload.clone(), record.clone());
        ctx.spawn(revoke(c, e, own, w, r, dir, until));
    }
    record
}

/// The revoker: asks the holder of the lowest node to let go, now and
/// then, across sessions.
async fn revoke(
    c: usize,
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    w: ExclusiveWorkload,
    record: ExclusiveRecord,
    dir: String,
    until: Instant,
) {
    let t = w.session_timeout_ms;
    client_sessions(c, ensemble, slots, Flavour::Java, t, until, |zk| {
        revoke_session(c, zk, record.clone(), dir.clone(), until)
    })
    .await
}

/// True when the session was lost.
async fn revoke_session(
    c: usize,
    zk: Arc<SimZk>,
    record: ExclusiveRecord,
    dir: String,
    until: Instant,
) -> bool {
    let mut driver = Driver::new(&*zk, Revoker::new());
    loop {
        sleep(Duration::from_millis(thread_rng().gen_range(300..1000))).await;
        if Instant::now() >= until {
            return false;
        }
        // Which node to revoke is the revoker's business: the lowest.
        let children = match zk
            .call(Op::GetChildren {
                path: dir.clone(),
                watch: false,
            })
            .await
        {
            Ok(Reply::GetChildren { children, .. }) => children,
            Err(ZkError::SessionExpired) => return true,
            _ => continue,
        };
        let Some((token, name)) = children
            .iter()
            .filter_map(|n| Some((sequence_of(n)?, n)))
            .min()
        else {
            continue;
        };
        driver.command(RevokerCommand::Revoke {
            node: format!("{dir}/{name}"),
        });
        let left = until.saturating_duration_since(Instant::now());
        match timeout(left, driver.next_outcome()).await {
            Ok(RevokerOutcome::Asked) => record.log.record(c, LockEvent::RevokeCalled { token }),
            Ok(RevokerOutcome::NotHeld) => {}
            Ok(RevokerOutcome::Lost { .. }) => return replace(&zk).await,
            Ok(other) => record.log.record(
                c,
                LockEvent::Failed {
                    error: format!("revoker: {other:?}"),
                },
            ),
            Err(_) => return false,
        }
    }
}

async fn supervise<M: Exclusive>(
    c: usize,
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    w: ExclusiveWorkload,
    record: ExclusiveRecord,
    make: Make<M>,
    until: Instant,
) {
    let t = w.session_timeout_ms;
    let s = slots.clone();
    client_sessions(c, ensemble, slots, flavour_of(c), t, until, |zk| {
        let guid = format!("c{c}-{:08x}", thread_rng().gen::<u32>());
        let machine = make(c, &guid);
        let (s, w, record) = (s.clone(), w.clone(), record.clone());
        async move {
            let lost = session(c, s.clone(), zk, machine, w, record, until).await;
            s.lock().unwrap()[c].busy = false;
            lost
        }
    })
    .await
}

async fn session<M: Exclusive>(
    c: usize,
    slots: ClientSlots,
    zk: Arc<SimZk>,
    machine: M,
    w: ExclusiveWorkload,
    record: ExclusiveRecord,
    until: Instant,
) -> bool {
    // Every session event the machine is given goes into the log, in its
    // place: the oracle judges a holder that acts while its machine knows
    // it is disconnected.
    let mut driver = Driver::new(&*zk, machine).noting_sessions();
    record.sessions.lock().unwrap().insert(zk.session_id().0, c);
    let mut told_ended = false;
    let end = loop {
        if Instant::now() >= until {
            break false;
        }
        let done = record
            .completed
            .lock()
            .unwrap()
            .get(&c)
            .copied()
            .unwrap_or(0);
        if w.operations > 0 && done >= w.operations {
            return finish(&slots, c, &zk, &record.finished).await;
        }
        let shared = driver.machine().is_shared();
        record.log.record(c, LockEvent::AcquireCalled { shared });
        driver.command(M::acquire());
        let token = match wait(&mut driver, c, &record, until, &mut told_ended).await {
            Some(Step::Acquired(token)) => {
                slots.lock().unwrap()[c].busy = true;
                token
            }
            Some(_) => break true,
            None => break false,
        };
        // The critical section. The last touch, after the hold, is not
        // preceded by a check, as in any real application: a pause or a
        // partition during the work is exactly when a holder acts on a
        // role it has lost, and the fencing token is what stops it.
        // A keeper checks before every touch and has no last one: it
        // holds until asked to let go (or it lost the role).
        let keeper = c < w.keepers;
        let touches = if keeper { u32::MAX } else { w.touches.max(2) };
        let pace = w.hold_ms / u64::from(w.touches.max(2) - 1);
        for touch in 0..touches {
            if keeper {
                if Instant::now() >= until {
                    return false;
                }
                // A keeper's machine runs while it keeps the lock (a
                // revocation is a watch event and a read away); the check
                // below comes after, right before the touch.
                let pause = Duration::from_millis(pace.max(10));
                if touch > 0 && keep(&mut driver, c, &record, pause, &mut told_ended).await {
                    return replace(&zk).await;
                }
            }
            if touch + 1 < touches {
                driver.pump();
                if log_outcomes(&mut driver, c, &record, &mut told_ended) {
                    return replace(&zk).await;
                }
                let asked = driver.machine().asked_to_release();
                if keeper && !asked && driver.machine().is_suspended() {
                    // A keeper waits out a suspension, touching nothing:
                    // a revocation made meanwhile reaches it once back.
                    continue;
                }
                if !driver.machine().is_holder() || asked {
                    break; // lost it, or consenting to a revocation
                }
            }
            if touch > 0 && !keeper {
                sleep(Duration::from_millis(pace)).await;
            }
            let accepted = {
                let mut resource = record.resource.lock().unwrap();
                if shared {
                    resource.read(token)
                } else {
                    resource.access(token)
                }
            };
            record.log.record(c, LockEvent::Access { token, accepted });
        }
        // What happened meanwhile ends the belief first (a suspension, the
        // session's loss), not the release.
        driver.pump();
        if log_outcomes(&mut driver, c, &record, &mut told_ended) {
            return replace(&zk).await;
        }
        record.log.record(c, LockEvent::ReleaseCalled);
        slots.lock().unwrap()[c].busy = false;
        driver.command(M::release());
        match wait(&mut driver, c, &record, until, &mut told_ended).await {
            Some(Step::Released) => {
                *record.completed.lock().unwrap().entry(c).or_default() += 1;
            }
            Some(_) => break true,
            None => break false,
        }
        if told_ended {
            // Released as the session ended (seed 1515062343 of
            // shared-lock): the next acquire needs a new session.
            break true;
        }
        let think = thread_rng().gen_range(0..=w.think_ms_max);
        sleep(Duration::from_millis(think)).await;
    };
    if end {
        replace(&zk).await
    } else {
        false
    }
}

/// Runs the machine until an outcome that ends the wait (acquired,
/// released, over), logging every outcome; None at `until`.
async fn wait<M: Exclusive>(
    driver: &mut Driver<'_, SimZk, M>,
    c: usize,
    record: &ExclusiveRecord,
    until: Instant,
    told_ended: &mut bool,
) -> Option<Step> {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let noted = next(driver, c, record, left).await?;
        let step = log(driver, c, record, &noted, told_ended);
        if step != Step::Other {
            return Some(step);
        }
    }
}

/// As `driver.next_noted()` within `left` (None after it), noting what
/// the machine is doing after every step.
async fn next<M: Exclusive>(
    driver: &mut Driver<'_, SimZk, M>,
    c: usize,
    record: &ExclusiveRecord,
    left: Duration,
) -> Option<Noted<M::Outcome>> {
    let next = async {
        loop {
            record.seen(c, driver.machine());
            if let Some(noted) = driver.take_noted() {
                return noted;
            }
            driver.step().await;
        }
    };
    timeout(left, next).await.ok()
}

/// A keeper's pause between touches: its machine runs, what it reports
/// logged as it comes; true if that ended the session's use.
async fn keep<M: Exclusive>(
    driver: &mut Driver<'_, SimZk, M>,
    c: usize,
    record: &ExclusiveRecord,
    pause: Duration,
    told_ended: &mut bool,
) -> bool {
    let end = Instant::now() + pause;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let Some(noted) = next(driver, c, record, left).await else {
            return false;
        };
        if log(driver, c, record, &noted, told_ended) == Step::Over {
            return true;
        }
    }
}

/// Logs the outcomes already reported; true if one ended the session's
/// use.
fn log_outcomes<M: Exclusive>(
    driver: &mut Driver<'_, SimZk, M>,
    c: usize,
    record: &ExclusiveRecord,
    told_ended: &mut bool,
) -> bool {
    let mut over = false;
    record.seen(c, driver.machine());
    while let Some(noted) = driver.take_noted() {
        over |= log(driver, c, record, &noted, told_ended) == Step::Over;
    }
    if !*told_ended && driver.machine().session_ended() {
        *told_ended = true;
        record.log.record(c, LockEvent::SessionEnded);
    }
    over
}

fn log<M: Exclusive>(
    driver: &Driver<'_, SimZk, M>,
    c: usize,
    record: &ExclusiveRecord,
    noted: &Noted<M::Outcome>,
    told_ended: &mut bool,
) -> Step {
    let (event, step) = match noted {
        Noted::Outcome(outcome) => M::judge(outcome),
        Noted::Session(event) => (LockEvent::Session { event: *event }, Step::Other),
    };
    record.log.record(c, event);
    if !*told_ended && driver.machine().session_ended() {
        *told_ended = true;
        record.log.record(c, LockEvent::SessionEnded);
    }
    step
}
