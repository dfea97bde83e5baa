//! The network faults of part 2: cut links and extra delays, one way or
//! both, between any two nodes.
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
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::oneshot;
use madsim::net::Endpoint;

use super::{lock, Wire, TAG};

/// A one-way link between two nodes, by address.
pub type Link = (IpAddr, IpAddr);

/// Counts of what the network faults did to traffic.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct NetStats {
    /// Datagrams that had to wait for a cut link to heal.
    pub held: u64,
    /// Datagrams that took an extra delay.
    pub delayed: u64,
    /// Datagrams sent.
    pub sent: u64,
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

/// Shared by every node of one ensemble.
#[derive(Default)]
pub struct Network {
    state: Mutex<NetState>,
}

impl Network {
    /// Cuts `from → to` (datagrams wait until it heals).
    pub fn cut(&self, from: IpAddr, to: IpAddr) {
        lock(&self.state).cut.insert((from, to));
    }

    /// Heals `from → to`.
    pub fn heal(&self, from: IpAddr, to: IpAddr) {
        let mut st = lock(&self.state);
        if st.cut.remove(&(from, to)) {
            for w in st.waiting.drain(..) {
                let _ = w.send(());
            }
        }
    }

    /// Heals every cut and removes every delay.
    pub fn heal_all(&self) {
        let mut st = lock(&self.state);
        st.cut.clear();
        st.delay_ms.clear();
        for w in st.waiting.drain(..) {
            let _ = w.send(());
        }
    }

    /// Every datagram on `from → to` takes `delay` more (zero removes it).
    pub fn delay(&self, from: IpAddr, to: IpAddr, delay: Duration) {
        let mut st = lock(&self.state);
        if delay.is_zero() {
            st.delay_ms.remove(&(from, to));
        } else {
            st.delay_ms.insert((from, to), delay.as_millis() as u64);
        }
    }

    pub fn is_cut(&self, from: IpAddr, to: IpAddr) -> bool {
        lock(&self.state).cut.contains(&(from, to))
    }

    /// The links cut now, in order.
    pub fn cuts(&self) -> Vec<Link> {
        lock(&self.state).cut.iter().copied().collect()
    }

    /// A node received a datagram.
    pub(crate) fn note_delivered(&self) {
        lock(&self.state).stats.delivered += 1;
    }

    pub fn stats(&self) -> NetStats {
        lock(&self.state).stats
    }

    /// Sends without blocking the caller: madsim's send costs simulated
    /// time, and a server must not stall its loop on it. The datagram waits
    /// while its link is cut and takes the link's delay.
    pub(crate) fn send(self: &Arc<Self>, endpoint: &Arc<Endpoint>, to: SocketAddr, wire: Wire) {
        let link = (endpoint_ip(endpoint), to.ip());
        let (cut, delay_ms) = {
            let mut st = lock(&self.state);
            st.stats.sent += 1;
            let cut = st.cut.contains(&link);
            if cut {
                st.stats.held += 1;
            }
            (cut, st.delay_ms.get(&link).copied().unwrap_or(0))
        };
        let endpoint = endpoint.clone();
        if !cut && delay_ms == 0 {
            // The hot path: one task, no more bookkeeping.
            madsim::task::spawn(async move {
                // A send to a dead node is dropped by the network, like a
                // datagram; TCP to a dead process fails the same way.
                let _ = endpoint.send_to_raw(to, TAG, Box::new(wire)).await;
            });
            return;
        }
        let net = self.clone();
        madsim::task::spawn(async move {
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
            if delay_ms > 0 {
                madsim::time::sleep(Duration::from_millis(delay_ms)).await;
            }
            let _ = endpoint.send_to_raw(to, TAG, Box::new(wire)).await;
        });
    }
}

/// The sending node's address (bound endpoints always have one).
fn endpoint_ip(endpoint: &Endpoint) -> IpAddr {
    endpoint.local_addr().expect("a bound endpoint").ip()
}
