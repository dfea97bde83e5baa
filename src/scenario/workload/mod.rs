//! Recipe workloads on the simulated ensemble: clients that run a recipe
//! machine in a loop, across sessions (a lost session is replaced by a new
//! one, as an application would), recording an outcome log for the
//! oracles in [`crate::check`].
//!
//! Each session runs on its own client node, so the nemesis's client
//! crashes and pauses stop the recipe code too; [`client_sessions`], on the
//! main node, opens the next session.

pub mod barrier;
pub mod config;
pub mod double_barrier;
pub mod exclusive;
pub mod membership;
pub mod queue;
pub mod two_phase_commit;

use std::future::{poll_fn, Future};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;

use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::time::{sleep, timeout, Instant, TimeHandle};

use crate::client::Zk;
use crate::ensemble::sim::nemesis::ClientSlots;
use crate::ensemble::sim::{Ensemble, Flavour, SimZk};

/// Simulated milliseconds since the run started.
pub fn now_ms() -> u64 {
    TimeHandle::current().elapsed().as_millis() as u64
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

#[derive(Default)]
pub struct Done {
    /// The count, and who waits for it to reach what.
    state: Mutex<(usize, Option<(usize, Waker)>)>,
}

impl Done {
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
