//! Clients contending for one lock: acquire, touch the fenced resource,
//! hold, touch it again, release, think, again — under whatever the nemesis
//! does. Every outcome goes into the log [`crate::check::lock`] judges.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::task::JoinHandle;
use madsim::time::{sleep, timeout, Instant};

use super::now_ms;
use crate::check::fence::FencedResource;
use crate::check::lock::LockEvent;
use crate::check::Entry;
use crate::client::Zk;
use crate::ensemble::sim::nemesis::ClientSlots;
use crate::ensemble::sim::{Ensemble, Flavour, SimZk};
use crate::recipes::lock::{Lock, LockCommand, LockOutcome, LockVariant};
use crate::recipes::Driver;

#[derive(Clone, Debug)]
pub struct LockWorkload {
    pub clients: usize,
    pub variant: LockVariant,
    pub dir: String,
    pub hold_ms: u64,
    pub think_ms_max: u64,
    pub session_timeout_ms: u64,
}

impl Default for LockWorkload {
    fn default() -> Self {
        LockWorkload {
            clients: 5,
            variant: LockVariant::Correct,
            dir: "/locks/l".into(),
            hold_ms: 10,
            think_ms_max: 50,
            session_timeout_ms: 4000,
        }
    }
}

/// What a lock run records, shared by its clients.
#[derive(Clone, Default)]
pub struct LockRecord {
    pub log: Arc<Mutex<Vec<Entry<LockEvent>>>>,
    pub resource: Arc<Mutex<FencedResource>>,
}

impl LockRecord {
    fn push(&self, client: usize, event: LockEvent) {
        self.log.lock().unwrap().push(Entry {
            at_ms: now_ms(),
            client,
            event,
        });
    }
}

/// Starts the clients (even ones Java-flavoured, odd ones Rust); they stop
/// at `until`. Each client's handle is kept in its slot for the nemesis.
pub fn spawn(
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    workload: &LockWorkload,
    until: Instant,
) -> (LockRecord, Vec<JoinHandle<()>>) {
    let record = LockRecord::default();
    {
        let mut s = slots.lock().unwrap();
        if s.len() < workload.clients {
            s.resize_with(workload.clients, Default::default);
        }
    }
    let tasks = (0..workload.clients)
        .map(|c| {
            let (e, s, w, r) = (
                ensemble.clone(),
                slots.clone(),
                workload.clone(),
                record.clone(),
            );
            madsim::task::spawn(supervise(c, e, s, w, r, until))
        })
        .collect();
    (record, tasks)
}

/// Why a session's loop ended.
enum SessionEnd {
    /// Lost or failed: open a new session.
    Replace,
    /// `until` reached.
    Done,
}

async fn supervise(
    c: usize,
    ensemble: Arc<Ensemble>,
    slots: ClientSlots,
    w: LockWorkload,
    record: LockRecord,
    until: Instant,
) {
    let flavour = if c % 2 == 0 {
        Flavour::Java
    } else {
        Flavour::Rust
    };
    let servers = ensemble.config().servers;
    while Instant::now() < until {
        let server = thread_rng().gen_range(0..servers);
        let zk = match ensemble
            .connect_with(server, w.session_timeout_ms, flavour)
            .await
        {
            Ok(zk) => Arc::new(zk),
            Err(_) => {
                sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        // The first Connected belongs to the handshake, not to a reconnect.
        let _ = zk.try_next_event();
        slots.lock().unwrap()[c].zk = Some(zk.clone());
        let node = Handle::current()
            .get_node(zk.node())
            .expect("the client's node");
        let guid = format!("c{c}-{:08x}", thread_rng().gen::<u32>());
        let run = node.spawn(session(
            c,
            slots.clone(),
            zk.clone(),
            guid,
            w.clone(),
            record.clone(),
            until,
        ));
        let ended = run.await;
        let slot = &mut slots.lock().unwrap()[c];
        slot.zk = None;
        slot.busy = false;
        match ended {
            Ok(SessionEnd::Replace) => continue,
            // Done, or the node was crashed: this client is finished.
            _ => return,
        }
    }
}

async fn session(
    c: usize,
    slots: ClientSlots,
    zk: Arc<SimZk>,
    guid: String,
    w: LockWorkload,
    record: LockRecord,
    until: Instant,
) -> SessionEnd {
    let mut driver = Driver::new(&*zk, Lock::with_variant(&w.dir, &guid, w.variant));
    let end = loop {
        if Instant::now() >= until {
            break SessionEnd::Done;
        }
        record.push(c, LockEvent::AcquireCalled);
        driver.command(LockCommand::Acquire);
        let token = match wait(&mut driver, c, &record, until).await {
            Some(LockOutcome::Acquired { token, .. }) => {
                slots.lock().unwrap()[c].busy = true;
                token
            }
            Some(_) => break SessionEnd::Replace,
            None => break SessionEnd::Done,
        };
        // The critical section: check, touch the resource, work, touch it
        // again. The second touch is not preceded by a check, as in any
        // real application: a pause or a partition during the work is
        // exactly when a holder acts on a lock it has lost, and the fencing
        // token is what stops it.
        driver.pump();
        if log_outcomes(&mut driver, c, &record) {
            return close(&zk).await;
        }
        if driver.machine().is_holder() {
            for touch in 0..2 {
                if touch == 1 {
                    sleep(Duration::from_millis(w.hold_ms)).await;
                }
                let accepted = record.resource.lock().unwrap().access(token);
                record.push(c, LockEvent::Access { token, accepted });
            }
        }
        // What happened meanwhile ends the belief first (a suspension, the
        // session's loss), not the release.
        driver.pump();
        if log_outcomes(&mut driver, c, &record) {
            return close(&zk).await;
        }
        record.push(c, LockEvent::ReleaseCalled);
        slots.lock().unwrap()[c].busy = false;
        driver.command(LockCommand::Release);
        match wait(&mut driver, c, &record, until).await {
            Some(LockOutcome::Released) => {}
            Some(_) => break SessionEnd::Replace,
            None => break SessionEnd::Done,
        }
        let think = thread_rng().gen_range(0..=w.think_ms_max);
        sleep(Duration::from_millis(think)).await;
    };
    match end {
        SessionEnd::Replace => close(&zk).await,
        SessionEnd::Done => SessionEnd::Done,
    }
}

/// Closes a session the recipe gave up on (if it is not gone already), so
/// its ephemerals do not linger until it expires.
async fn close(zk: &SimZk) -> SessionEnd {
    let bound = Duration::from_millis(zk.session_timeout_ms());
    let _ = timeout(bound, zk.close()).await;
    SessionEnd::Replace
}

/// Runs the machine until an outcome that ends the wait (acquired,
/// released, lost, failed), logging every outcome; None at `until`.
async fn wait(
    driver: &mut Driver<'_, SimZk, Lock>,
    c: usize,
    record: &LockRecord,
    until: Instant,
) -> Option<LockOutcome> {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let outcome = timeout(left, driver.next_outcome()).await.ok()?;
        log(c, record, &outcome);
        if matches!(
            outcome,
            LockOutcome::Acquired { .. }
                | LockOutcome::Released
                | LockOutcome::Lost { .. }
                | LockOutcome::Failed(_)
                | LockOutcome::Refused { .. }
        ) {
            return Some(outcome);
        }
    }
}

/// Logs the outcomes already reported; true if one ended the session's
/// use (lost or failed).
fn log_outcomes(driver: &mut Driver<'_, SimZk, Lock>, c: usize, record: &LockRecord) -> bool {
    let mut over = false;
    while let Some(o) = driver.take_outcome() {
        log(c, record, &o);
        over |= matches!(o, LockOutcome::Lost { .. } | LockOutcome::Failed(_));
    }
    over
}

fn log(c: usize, record: &LockRecord, outcome: &LockOutcome) {
    let event = match outcome {
        LockOutcome::Acquired { token, .. } => LockEvent::Acquired { token: *token },
        LockOutcome::Suspended => LockEvent::Suspended,
        LockOutcome::Resumed => LockEvent::Resumed,
        LockOutcome::Released => LockEvent::Released,
        LockOutcome::Recovered { found } => LockEvent::Recovered { found: *found },
        LockOutcome::Woken { path } => LockEvent::Woken { path: path.clone() },
        LockOutcome::Lost { .. } => LockEvent::Lost,
        LockOutcome::Refused { command } => LockEvent::Failed {
            error: format!("{command:?} refused"),
        },
        LockOutcome::Failed(e) => LockEvent::Failed {
            error: format!("{e:?}"),
        },
    };
    record.push(c, event);
}
