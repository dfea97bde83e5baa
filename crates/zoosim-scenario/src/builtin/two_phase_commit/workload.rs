//! Two-phase commit, transaction after transaction: client 0 coordinates
//! (creates each transaction's nodes), clients 1.. are the sites, each
//! voting commit mostly and abort sometimes, then waiting for the decision.
//! A site whose session is lost comes back to the same transaction with a
//! new session. Every outcome goes into the log
//! [`zoosim_core::check::two_phase_commit`] judges.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::time::{sleep, timeout, Instant};

use crate::sim::{client_sessions, finish, flavour_of, replace, Finished, OutcomeLog, RunCtx};
use zoosim_client::Zk;
use zoosim_core::check::two_phase_commit::TpcEvent;
use zoosim_core::proto::{Reply, ZkError};
use zoosim_recipes::two_phase_commit::{
    create_transaction, Site, SiteCommand, SiteOutcome, TwoPhaseCommitVariant,
};
use zoosim_recipes::Driver;
use zoosim_sim::sim::nemesis::ClientSlots;
use zoosim_sim::sim::SimZk;

#[derive(Clone, Debug)]
pub(super) struct TpcWorkload {
    pub dir: String,
    /// Sites (clients 1..=sites); client 0 coordinates.
    pub sites: usize,
    pub abort_probability: f64,
    pub session_timeout_ms: u64,
    /// Transactions in all, after which everyone stops once the last is
    /// decided; 0: until the run ends.
    pub transactions: u32,
    /// A site's longest time between joining a transaction (its alive
    /// node) and voting (drawn per vote, from 0).
    pub vote_ms_max: u64,
    /// The sites' recipe variant (a buggy one reproduces its bug).
    pub variant: TwoPhaseCommitVariant,
}

pub(super) type TpcLog = OutcomeLog<TpcEvent>;

fn tx_path(w: &TpcWorkload, tx: u64) -> String {
    format!("{}/t{tx}", w.dir)
}

/// Starts the coordinator and the sites; the coordinator opens new
/// transactions until `open_until`.
pub(super) fn spawn(ctx: &mut RunCtx, w: &TpcWorkload) -> (TpcLog, Finished) {
    let (ensemble, slots) = (ctx.ensemble().clone(), ctx.slots().clone());
    let (open_until, until) = (ctx.fault_end(), ctx.until());
    let log = TpcLog::default();
    let finished = Finished::default();
    // The last transaction created (the harness's own bookkeeping).
    let created: Arc<Mutex<Option<u64>>> = Arc::default();
    for c in 0..=w.sites {
        let (e, s, w, l, t, f) = (
            ensemble.clone(),
            slots.clone(),
            w.clone(),
            log.clone(),
            created.clone(),
            finished.clone(),
        );
        ctx.spawn(async move {
            let next = Arc::new(Mutex::new((0u64, None::<bool>)));
            let timeout_ms = w.session_timeout_ms;
            let slots = s.clone();
            client_sessions(c, e, s, flavour_of(c), timeout_ms, until, |zk| {
                let (w, l, t, next) = (w.clone(), l.clone(), t.clone(), next.clone());
                let (slots, f) = (slots.clone(), f.clone());
                async move {
                    let lost = if c == 0 {
                        coordinate(zk.clone(), w, t, next, open_until).await
                    } else {
                        site(c, zk.clone(), w, l, t, next, &slots, until).await
                    };
                    match lost {
                        Some(lost) => lost,
                        None => finish(&slots, c, &zk, &f).await,
                    }
                }
            })
            .await
        })
    }
    (log, finished)
}

/// True when the session was lost; None once every transaction is open.
async fn coordinate(
    zk: Arc<SimZk>,
    w: TpcWorkload,
    created: Arc<Mutex<Option<u64>>>,
    next: Arc<Mutex<(u64, Option<bool>)>>,
    open_until: Instant,
) -> Option<bool> {
    // The parent, once.
    let _ = zk
        .call(zoosim_core::proto::Op::Create {
            path: w.dir.clone(),
            data: vec![],
            mode: zoosim_core::proto::CreateMode::Persistent,
        })
        .await;
    while Instant::now() < open_until {
        let tx = next.lock().unwrap().0;
        if w.transactions > 0 && tx >= u64::from(w.transactions) {
            return None;
        }
        match zk.call(create_transaction(&tx_path(&w, tx), w.sites)).await {
            Ok(reply @ Reply::Multi(_)) => match reply.multi_error() {
                None | Some(ZkError::NodeExists) => {}
                Some(_) => continue,
            },
            Ok(_) => {}
            Err(ZkError::SessionExpired) => return Some(replace(&zk).await),
            Err(_) => continue, // ConnectionLoss: send it again (all or nothing)
        }
        *created.lock().unwrap() = Some(tx);
        next.lock().unwrap().0 = tx + 1;
        sleep(Duration::from_millis(thread_rng().gen_range(300..800))).await;
    }
    Some(false)
}

/// True when the session was lost (the site comes back to the same
/// transaction); None once the last transaction is decided.
#[allow(clippy::too_many_arguments)]
async fn site(
    c: usize,
    zk: Arc<SimZk>,
    w: TpcWorkload,
    log: TpcLog,
    created: Arc<Mutex<Option<u64>>>,
    next: Arc<Mutex<(u64, Option<bool>)>>,
    slots: &ClientSlots,
    until: Instant,
) -> Option<bool> {
    loop {
        let tx = next.lock().unwrap().0;
        if w.transactions > 0 && tx >= u64::from(w.transactions) {
            return None;
        }
        if created.lock().unwrap().is_none_or(|t| t < tx) {
            if Instant::now() >= until {
                return Some(false);
            }
            sleep(Duration::from_millis(20)).await;
            continue;
        }
        // The vote is the site's for the transaction, kept across sessions.
        let commit = *next
            .lock()
            .unwrap()
            .1
            .get_or_insert_with(|| !thread_rng().gen_bool(w.abort_probability));
        log.record(c, TpcEvent::VoteCalled { tx, commit });
        let site = Site::with_variant(&tx_path(&w, tx), c - 1, w.sites, w.variant);
        let mut driver = Driver::new(&*zk, site);
        driver.command(SiteCommand::Vote { commit });
        // The site joins (its first request: the alive node), then takes
        // its time to vote. A site that fails in between is the one the
        // others abort for: it is marked busy meanwhile, so client faults
        // aim at it half the time.
        let pause = thread_rng().gen_range(0..=w.vote_ms_max);
        if pause > 0 {
            let left = until.saturating_duration_since(Instant::now());
            if timeout(left, driver.step()).await.is_err() {
                return Some(false);
            }
            slots.lock().unwrap()[c].busy = true;
            sleep(Duration::from_millis(pause)).await;
            slots.lock().unwrap()[c].busy = false;
        }
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match timeout(left, driver.next_outcome()).await {
                Ok(SiteOutcome::Decided { commit }) => {
                    log.record(c, TpcEvent::Decided { tx, commit });
                    break;
                }
                Ok(SiteOutcome::AbortedFor { .. }) => log.record(c, TpcEvent::AbortedFor { tx }),
                Ok(SiteOutcome::Voted { .. }) => {}
                Ok(SiteOutcome::Lost { .. }) => {
                    log.record(c, TpcEvent::Lost);
                    return Some(replace(&zk).await);
                }
                Ok(other) => {
                    log.record(
                        c,
                        TpcEvent::Failed {
                            error: format!("{other:?}"),
                        },
                    );
                    return Some(replace(&zk).await);
                }
                Err(_) => return Some(false),
            }
        }
        *next.lock().unwrap() = (tx + 1, None);
    }
}
