//! Deliberately broken ensembles (pure): switches that make the simulated
//! servers break one of ZooKeeper's client guarantees each
//! (docs/ZOOKEEPER.md, "Consistency guarantees"). They exist only to prove
//! that a check of those guarantees can fail: a checker that passes every
//! run of the correct ensemble earns trust only by catching each of these.
//! Off by default; nothing in a correct run reads them.
//!
//! A scenario file turns one on with `[ensemble] broken = "<name>"`; each
//! server counts the times its breakage took effect
//! ([`ServerStats::breakage_hits`](super::server::ServerStats::breakage_hits),
//! the run's `breakage-hits` counter).

use std::fmt;

/// One guarantee broken on purpose (see the module docs). Each breaks
/// exactly one guarantee; everything else the servers do stays as in a
/// correct ensemble.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Breakage {
    /// Every third write a follower receives is answered by the follower
    /// itself, as if applied (prepped against its own tree), and never
    /// forwarded to the leader: the write is in no server's order, so
    /// writes are not linearizable.
    FollowerLocalWrite,
    /// A follower accepts a re-attaching session that has seen a later
    /// zxid than its own (ZooKeeper refuses it) and serves it at once from
    /// its own state, as a real follower may before its commit processor
    /// catches up: the session can see the tree go backwards across a
    /// reconnect. Replies carry at least the session's last zxid, so the
    /// client's zxids never go back; only the data does.
    SkipReconnectZxidRule,
    /// The leader answers its own clients' writes when it proposes them,
    /// before a quorum acked (the session's later requests still wait for
    /// the commit): if the leader loses its quorum, an acknowledged write
    /// can be truncated away.
    ReplyBeforeQuorum,
    /// Every second read without a watch is answered from a copy of the
    /// server's tree two txns behind its applied state: a session's reads
    /// go backwards and miss its own writes.
    StaleRead,
    /// Watch events are held back on their connection until a read of
    /// the same path has been answered (or the server's next tick): the
    /// client sees the data change before the event that announces it.
    LateWatchEvent,
    /// The leader preps a create's parent check against its committed
    /// tree instead of the proposed one (applied state plus the proposals
    /// in flight), as a `PrepRequestProcessor.getRecordForPath` that
    /// ignored the outstanding changes would: a child created in the same
    /// pipeline as its parent fails with NoNode while the parent's create
    /// is uncommitted. Not in [`Breakage::ALL`], so no scenario file can
    /// name it: it exists for the pipelined conformance test
    /// (tests/conformance/sim.rs), which must catch it; no scenario
    /// checker is claimed to.
    CreatePrepIgnoresInFlightParent,
    /// A follower applies every committed setData with empty data (its
    /// zxids, versions and Stats as the leader's): replicas that applied
    /// the same txns hold different trees. Not in [`Breakage::ALL`]: it
    /// exists for the conformance suite's comparison of the replicas
    /// (tests/conformance/sim.rs), which must catch it.
    FollowerEmptiesSetData,
}

impl Breakage {
    /// Every breakage, in declaration order.
    pub const ALL: [Breakage; 5] = [
        Breakage::FollowerLocalWrite,
        Breakage::SkipReconnectZxidRule,
        Breakage::ReplyBeforeQuorum,
        Breakage::StaleRead,
        Breakage::LateWatchEvent,
    ];

    /// The breakage's name in scenario files, e.g. `"stale-read"`.
    pub fn name(self) -> &'static str {
        match self {
            Breakage::FollowerLocalWrite => "follower-local-write",
            Breakage::SkipReconnectZxidRule => "skip-reconnect-zxid-rule",
            Breakage::ReplyBeforeQuorum => "reply-before-quorum",
            Breakage::StaleRead => "stale-read",
            Breakage::LateWatchEvent => "late-watch-event",
            Breakage::CreatePrepIgnoresInFlightParent => "create-prep-ignores-in-flight-parent",
            Breakage::FollowerEmptiesSetData => "follower-empties-set-data",
        }
    }

    /// The breakage named `name` ([`Breakage::name`]'s inverse); `None`
    /// if none has that name.
    pub fn from_name(name: &str) -> Option<Breakage> {
        Breakage::ALL.into_iter().find(|b| b.name() == name)
    }

    /// The guarantee it breaks, in words.
    pub fn guarantee(self) -> &'static str {
        match self {
            Breakage::FollowerLocalWrite => "writes are linearizable",
            Breakage::SkipReconnectZxidRule => {
                "a session never sees the tree go backwards across reconnects"
            }
            Breakage::ReplyBeforeQuorum => "an acknowledged write is never lost",
            Breakage::StaleRead => "a session's reads never go backwards and see its own writes",
            Breakage::LateWatchEvent => {
                "a client sees a watch event before the data change that triggered it"
            }
            Breakage::CreatePrepIgnoresInFlightParent => {
                "a session's writes are applied in its order, each seeing the ones before"
            }
            Breakage::FollowerEmptiesSetData => {
                "every server applies the same txns to the same state"
            }
        }
    }
}

impl fmt::Display for Breakage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_differ() {
        for b in Breakage::ALL {
            assert_eq!(Breakage::from_name(b.name()), Some(b));
            assert_eq!(b.to_string(), b.name());
        }
        let mut names: Vec<&str> = Breakage::ALL.iter().map(|b| b.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Breakage::ALL.len());
        assert_eq!(Breakage::from_name("stale_read"), None);
    }
}
