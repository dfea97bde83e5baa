//! The simulated network: every node's datagrams, their link latency, and
//! the network faults (cut links and extra delays, one way or both,
//! between any two nodes).
//!
//! Datagrams travel on zoosim's own path, not through madsim's `Endpoint`:
//! madsim sleeps on every send and every receive, and a madsim sleep is at
//! least 1 ms, so each hop cost 2 ms plus the link latency (a lock handoff
//! of ~9 hops took ~60 ms where a real localhost ensemble needs ~12) and
//! two timer events. Here a datagram is delivered into its receiver's
//! inbox after the link latency drawn from the seeded RNG (0 ms: at once,
//! behind whatever the scheduler runs first; madsim's clock has 1 ms
//! steps), and a dead node's inbox is gone with its tasks.
//!
//! ZooKeeper's links are TCP: a partition does not lose data, it stalls
//! it (the sender retransmits) until either the link heals, and everything
//! arrives in order, or one side's own timeout gives the connection up
//! (ZooKeeper's read timeouts and syncLimit), after which whatever still
//! arrives is ignored. So a datagram sent on a cut link waits in its
//! sender until the link heals (madsim's own clog would drop it), and a
//! delayed link adds its delay to every datagram. Order is restored by the
//! receiver's sequence numbers either way.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::future::Future;
use std::pin::Pin;
use std::task::{Poll, Waker};

use futures::channel::{mpsc, oneshot};
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use madsim::rand::{thread_rng, Rng};

use super::budget;
use super::{lock, Wire};

/// A one-way link between two nodes, by address.
pub(super) type Link = (IpAddr, IpAddr);

/// Counts of what the network faults did to traffic.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct NetStats {
    /// Datagrams that had to wait for a cut link to heal.
    pub held: u64,
    /// Datagrams that took an extra delay.
    pub delayed: u64,
    /// Messages sent.
    pub sent: u64,
    /// Datagrams they travelled in (messages to one destination leaving
    /// while a datagram to it is open share it).
    pub datagrams: u64,
    /// Datagrams received by a live node.
    pub delivered: u64,
}

#[derive(Default)]
struct NetState {
    cut: BTreeSet<Link>,
    delay_ms: BTreeMap<Link, u64>,
    /// Senders waiting for a heal (woken on every heal; they look again).
    waiting: Vec<oneshot::Sender<()>>,
    stats: NetStats,
}

/// Messages that travel together, and where they come from.
pub(crate) struct Datagram {
    pub from: SocketAddr,
    pub wires: Vec<Wire>,
}

/// A node's incoming datagrams; dropped with the node's tasks, after which
/// datagrams to it are lost (a dead process's socket).
pub(crate) type Inbox = mpsc::UnboundedReceiver<Datagram>;

/// A node's bound address: what its datagrams say they come from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Socket(SocketAddr);

impl Socket {
    pub(crate) fn addr(self) -> SocketAddr {
        self.0
    }
}

/// Shared by every node of one ensemble.
pub struct Network {
    /// Every datagram's latency is drawn from this range (inclusive).
    link_latency_ms: (u64, u64),
    inboxes: Mutex<BTreeMap<SocketAddr, mpsc::UnboundedSender<Datagram>>>,
    state: Mutex<NetState>,
    /// Whether any link is cut or delayed (the hot path skips the lock).
    faulty: AtomicBool,
    sent: AtomicU64,
    datagrams: AtomicU64,
    delivered: AtomicU64,
    /// Resets that reached a live connection.
    resets: AtomicU64,
}

impl Network {
    /// A network whose links each take `link_latency_ms` (min, max; the
    /// draw is uniform and per datagram).
    pub fn new(link_latency_ms: (u64, u64)) -> Network {
        assert!(
            link_latency_ms.0 <= link_latency_ms.1,
            "link latency range {link_latency_ms:?} is empty"
        );
        Network {
            link_latency_ms,
            inboxes: Mutex::default(),
            state: Mutex::default(),
            faulty: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            datagrams: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            resets: AtomicU64::new(0),
        }
    }

    /// Binds `addr` for the calling node: datagrams to it go to the inbox
    /// returned (a rebind, by a restarted node, replaces the old one).
    pub(crate) fn bind(&self, addr: SocketAddr) -> (Socket, Inbox) {
        let (tx, rx) = mpsc::unbounded();
        lock(&self.inboxes).insert(addr, tx);
        (Socket(addr), rx)
    }

    /// Hands `wires` to `to`'s inbox; lost if nothing is bound there or
    /// its node is dead.
    fn deliver(&self, from: SocketAddr, to: SocketAddr, wires: Vec<Wire>) {
        if let Some(inbox) = lock(&self.inboxes).get(&to) {
            let _ = inbox.unbounded_send(Datagram { from, wires });
        }
    }

    fn latency_ms(&self) -> u64 {
        match self.link_latency_ms {
            (lo, hi) if lo == hi => lo,
            (lo, hi) => thread_rng().gen_range(lo..=hi),
        }
    }

    /// Cuts `from → to` (datagrams wait until it heals).
    pub fn cut(&self, from: IpAddr, to: IpAddr) {
        lock(&self.state).cut.insert((from, to));
        self.faulty.store(true, Ordering::Relaxed);
    }

    /// Heals `from → to`.
    pub fn heal(&self, from: IpAddr, to: IpAddr) {
        let mut st = lock(&self.state);
        if st.cut.remove(&(from, to)) {
            for w in st.waiting.drain(..) {
                let _ = w.send(());
            }
        }
        self.faulty.store(
            !st.cut.is_empty() || !st.delay_ms.is_empty(),
            Ordering::Relaxed,
        );
    }

    /// Heals every cut and removes every delay.
    pub fn heal_all(&self) {
        let mut st = lock(&self.state);
        st.cut.clear();
        st.delay_ms.clear();
        for w in st.waiting.drain(..) {
            let _ = w.send(());
        }
        self.faulty.store(false, Ordering::Relaxed);
    }

    /// Every datagram on `from → to` takes `delay` more (zero removes it).
    pub fn delay(&self, from: IpAddr, to: IpAddr, delay: Duration) {
        let mut st = lock(&self.state);
        if delay.is_zero() {
            st.delay_ms.remove(&(from, to));
        } else {
            st.delay_ms.insert((from, to), delay.as_millis() as u64);
        }
        self.faulty.store(
            !st.cut.is_empty() || !st.delay_ms.is_empty(),
            Ordering::Relaxed,
        );
    }

    /// Whether the one-way link `from` → `to` is cut now.
    pub fn is_cut(&self, from: IpAddr, to: IpAddr) -> bool {
        lock(&self.state).cut.contains(&(from, to))
    }

    /// The links cut now, in order.
    pub fn cuts(&self) -> Vec<Link> {
        lock(&self.state).cut.iter().copied().collect()
    }

    /// One datagram's latency, drawn.
    pub(crate) fn draw_latency(&self) -> Duration {
        Duration::from_millis(self.latency_ms())
    }

    /// Sends a reset (a [`Wire::Reset`]) from a dead process, which has
    /// no outbox: the operating system sends it, after the link's latency,
    /// ahead of nothing. Lost on a cut link (the far end learns by
    /// silence).
    pub(crate) fn reset(self: &Arc<Self>, from: SocketAddr, to: SocketAddr, reset: Wire) {
        budget::note(budget::Event::Message);
        if self.is_cut(from.ip(), to.ip()) {
            return;
        }
        let latency = self.draw_latency();
        if latency.is_zero() {
            self.deliver(from, to, vec![reset]);
            return;
        }
        let net = self.clone();
        madsim::task::spawn(async move {
            madsim::time::sleep(latency).await;
            net.deliver(from, to, vec![reset]);
        });
    }

    /// A client acted on a reset of its connection.
    pub(crate) fn note_reset(&self) {
        self.resets.fetch_add(1, Ordering::Relaxed);
    }

    /// Resets that reached a live connection so far.
    pub(crate) fn resets_delivered(&self) -> u64 {
        self.resets.load(Ordering::Relaxed)
    }

    /// A node received a datagram.
    pub(crate) fn note_delivered(&self) {
        self.delivered.fetch_add(1, Ordering::Relaxed);
    }

    /// What the network did to traffic so far.
    pub fn stats(&self) -> NetStats {
        NetStats {
            sent: self.sent.load(Ordering::Relaxed),
            datagrams: self.datagrams.load(Ordering::Relaxed),
            delivered: self.delivered.load(Ordering::Relaxed),
            ..lock(&self.state).stats
        }
    }

    /// Sends without blocking the caller. The datagram waits while its
    /// link is cut and takes the link's delay and latency.
    pub(crate) fn send(
        self: &Arc<Self>,
        outbox: &Outbox,
        from: Socket,
        to: SocketAddr,
        wire: Wire,
    ) {
        let link = (from.addr().ip(), to.ip());
        self.sent.fetch_add(1, Ordering::Relaxed);
        budget::note(budget::Event::Message);
        let (cut, delay_ms) = if !self.faulty.load(Ordering::Relaxed) {
            (false, 0)
        } else {
            let mut st = lock(&self.state);
            let cut = st.cut.contains(&link);
            if cut {
                st.stats.held += 1;
            }
            (cut, st.delay_ms.get(&link).copied().unwrap_or(0))
        };
        if !cut && delay_ms == 0 {
            // The hot path: nothing to wait for but the latency.
            if outbox.push_coalesced(self, from.addr(), to, wire) {
                self.datagrams.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        self.datagrams.fetch_add(1, Ordering::Relaxed);
        let net = self.clone();
        outbox.push(async move {
            loop {
                let wait = {
                    let mut st = lock(&net.state);
                    if !st.cut.contains(&link) {
                        break;
                    }
                    let (tx, rx) = oneshot::channel();
                    st.waiting.push(tx);
                    rx
                };
                let _ = wait.await;
                budget::note(budget::Event::Wakeup);
            }
            // The delay in force when the datagram leaves.
            let delay_ms = {
                let mut st = lock(&net.state);
                let d = st.delay_ms.get(&link).copied().unwrap_or(0);
                if d > 0 {
                    st.stats.delayed += 1;
                }
                d
            };
            let wait_ms = delay_ms + net.latency_ms();
            if wait_ms > 0 {
                madsim::time::sleep(Duration::from_millis(wait_ms)).await;
            }
            net.deliver(from.addr(), to, vec![wire]);
        });
    }
}

type Sending = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Per (from, to), the messages of the datagram being filled.
type OpenDatagrams = BTreeMap<(SocketAddr, SocketAddr), Vec<Wire>>;

/// A node's datagrams on their way out, all driven by one task: a task
/// per datagram would cost madsim a spawn (and its bookkeeping) each, and
/// one task sending them in turn would serialise their simulated delays.
/// Dies with its node, like the datagrams of a crashed process.
#[derive(Clone)]
pub(crate) struct Outbox {
    queue: Arc<Mutex<Queue>>,
    /// Per link, the datagram being filled: messages for one destination
    /// that leave during its latency travel in it, as writes to one TCP
    /// socket share a segment.
    open: Arc<Mutex<OpenDatagrams>>,
}

/// New sends for the outbox task, and how to wake it (cheaper than a
/// channel: this is on every message's path).
#[derive(Default)]
struct Queue {
    new: Vec<Sending>,
    waker: Option<Waker>,
}

impl Outbox {
    /// Starts the node's outbox task (call it on that node).
    pub(crate) fn start() -> Outbox {
        let queue: Arc<Mutex<Queue>> = Arc::default();
        let q = queue.clone();
        madsim::task::spawn(async move {
            let mut in_flight = FuturesUnordered::new();
            // Runs as long as its node: a killed node's tasks are dropped.
            futures::future::poll_fn(|cx| -> Poll<()> {
                {
                    let mut q = lock(&q);
                    in_flight.extend(q.new.drain(..));
                    if q.waker.as_ref().is_none_or(|w| !w.will_wake(cx.waker())) {
                        q.waker = Some(cx.waker().clone());
                    }
                }
                while let Poll::Ready(Some(())) = in_flight.poll_next_unpin(cx) {}
                Poll::Pending
            })
            .await
        });
        Outbox {
            queue,
            open: Arc::default(),
        }
    }

    /// Adds `wire` to the open datagram for `to`; true if it opened one.
    /// A datagram of zero latency is delivered at once.
    fn push_coalesced(
        &self,
        net: &Arc<Network>,
        from: SocketAddr,
        to: SocketAddr,
        wire: Wire,
    ) -> bool {
        let key = (from, to);
        {
            let mut open = lock(&self.open);
            if let Some(batch) = open.get_mut(&key) {
                batch.push(wire);
                return false;
            }
            let latency_ms = net.latency_ms();
            if latency_ms == 0 {
                net.deliver(from, to, vec![wire]);
                return true;
            }
            open.insert(key, vec![wire]);
            let (open, net) = (self.open.clone(), net.clone());
            self.push(async move {
                madsim::time::sleep(Duration::from_millis(latency_ms)).await;
                // Closes the batch: later messages start the next one,
                // whose sequence numbers keep them behind this one.
                let batch = lock(&open).remove(&key).expect("an open batch");
                net.deliver(from, to, batch);
            });
        }
        true
    }

    fn push(&self, f: impl Future<Output = ()> + Send + 'static) {
        let mut q = lock(&self.queue);
        q.new.push(Box::pin(f));
        if q.new.len() == 1 {
            if let Some(w) = &q.waker {
                w.wake_by_ref();
            }
        }
    }
}
