//! Deliberately broken ensembles (pure): switches that make the simulated
//! servers break one of ZooKeeper's client guarantees each
//! (docs/ZOOKEEPER.md, "Consistency guarantees"). They exist only to prove
//! that a check of those guarantees can fail: a checker that passes every
//! run of the correct ensemble earns trust only by catching each of these.
//! Off by default; nothing in a correct run reads them.
//!
//! A scenario file turns one on with `[ensemble] broken = "<name>"`, at
//! its gross default rate, or with a table that sets how often it strikes
//! ([`Broken`]): `broken = { kind = "stale-read", one_in = 1000,
//! lag_txns = 1 }`. Each server counts the times its breakage took effect
//! (`ServerStats::breakage_hits` in the simulated ensemble,
//! the run's `breakage-hits` counter).
//!
//! A rate is a deterministic counter on each server, never a random draw:
//! `one_in = N` breaks the N-th, 2N-th, ... of the breakage's
//! opportunities on that server (each variant's docs say what one is), so
//! the same seed gives the same trace, and the correct ensemble draws
//! nothing more.

use std::fmt;

/// One guarantee broken on purpose (see the module docs). Each breaks
/// exactly one guarantee; everything else the servers do stays as in a
/// correct ensemble.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Breakage {
    /// Every third write a follower receives (`one_in`: writes a
    /// follower receives) is answered by the follower itself, as if applied (prepped against its own tree), and never
    /// forwarded to the leader: the write is in no server's order, so
    /// writes are not linearizable.
    FollowerLocalWrite,
    /// A follower accepts a re-attaching session that has seen a later
    /// zxid than its own (ZooKeeper refuses it) and serves it at once from
    /// its own state, as a real follower may before its commit processor
    /// catches up: the session can see the tree go backwards across a
    /// reconnect. Replies carry at least the session's last zxid, so the
    /// client's zxids never go back; only the data does. `one_in`: such
    /// re-attaches (every one by default); the others are refused.
    SkipReconnectZxidRule,
    /// The leader answers its own clients' writes when it proposes them,
    /// before a quorum acked (the session's later requests still wait for
    /// the commit): if the leader loses its quorum, an acknowledged write
    /// can be truncated away. `one_in`: writes of the leader's own clients
    /// (every one by default).
    ReplyBeforeQuorum,
    /// Every second read without a watch (`one_in`: unwatched reads) is
    /// answered from a copy of the server's tree two txns (`lag_txns`)
    /// behind its applied state: a session's reads go backwards and miss
    /// its own writes.
    StaleRead,
    /// Watch events (`one_in`: events sent while none is held; every one
    /// by default) are held back on their connection until a read of the
    /// same path has been answered (or the server's next tick), and the
    /// events after them behind them: the client sees the data change
    /// before the event that announces it.
    LateWatchEvent,
    /// A follower answers a sync itself, at once, from its own applied
    /// state, without the leader's flush (`one_in`: syncs a follower
    /// receives; every one by default): a read after the sync may miss a
    /// write that completed before the sync was called.
    SyncWithoutFlush,
    /// A watch event (`one_in`: events sent while none is held; every one
    /// by default) is held back on its connection, and sent right behind
    /// the next event of a later txn on that connection: the client gets
    /// the two in the wrong order. Held events go out in order, with no
    /// overtaking, before any reply on the connection (so no reply ever
    /// shows a change before its event) and at the server's next tick.
    EventReordered,
    /// The leader applies a write that comes from a connection its
    /// session has moved away from, instead of failing it with
    /// SessionMoved (`one_in`: such writes on the leader; every one by
    /// default). A write whose client lost the connection, still on its
    /// way from the old server when the session re-attached elsewhere and
    /// wrote again, then takes effect after the session's later write.
    SkipSessionMovedCheck,
    /// A server answers a read (`one_in`: reads whose reply carries a
    /// Stat) with a Stat whose mzxid is one below the true one: the data
    /// and versions are right, but the zxid names no write that set that
    /// version.
    ZxidLies,
    /// The leader expires a session (`one_in`: sessions it expires, by
    /// timeout or by a forced expiry; every one by default) but never
    /// proposes its closeSession: the session is marked closing, so its
    /// writes fail with SessionExpired and a client that re-attaches is
    /// told it expired, yet its ephemerals stay. A later leader takes the
    /// session over with a fresh timeout and expires it again (and, at
    /// `one_in` above 1, may close it then: minutes late).
    ExpiredEphemeralsLinger,
    /// A serving follower freezes (`one_in`: ticks of a serving follower
    /// that is not frozen; every 20th by default): every commit it
    /// receives is queued, not applied, for [`Breakage::freeze_ticks`] of
    /// its ticks (longer than any session's timeliness bound), then all
    /// are applied at once. (A tick, not a commit: a freeze then starts
    /// wherever the workload is, not in step with its cycle of writes.) Meanwhile it keeps
    /// logging and acking proposals and answering pings and heartbeats on
    /// time, so the leader keeps it in its quorum and its clients stay
    /// connected, and it answers reads from its frozen tree; its clients'
    /// writes and syncs are answered only once applied, after the freeze.
    /// A read there misses writes that completed longer than the bound
    /// before it was called: the clients' view is not up to date within
    /// the time bound.
    FrozenFollowerServesReads,
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
    /// Every breakage a scenario file can name, in declaration order.
    pub const ALL: [Breakage; 11] = [
        Breakage::FollowerLocalWrite,
        Breakage::SkipReconnectZxidRule,
        Breakage::ReplyBeforeQuorum,
        Breakage::StaleRead,
        Breakage::LateWatchEvent,
        Breakage::SyncWithoutFlush,
        Breakage::EventReordered,
        Breakage::SkipSessionMovedCheck,
        Breakage::ZxidLies,
        Breakage::ExpiredEphemeralsLinger,
        Breakage::FrozenFollowerServesReads,
    ];

    /// Its gross default rate: one opportunity in this many breaks.
    pub fn default_one_in(self) -> u64 {
        match self {
            Breakage::FollowerLocalWrite => 3,
            Breakage::StaleRead => 2,
            Breakage::FrozenFollowerServesReads => 20,
            _ => 1,
        }
    }

    /// [`Breakage::FrozenFollowerServesReads`]: how many of its own ticks
    /// a follower stays frozen, given the ensemble's syncLimit. A session's
    /// timeliness bound is its granted timeout (at most 20 ticks) plus
    /// syncLimit ticks (docs/CONTRACT.md, "Timeliness"); a freeze of twice
    /// the longest bound any session can have outlasts every session's
    /// bound by at least as long again, so that reads made in the second
    /// half of the freeze miss writes completed more than the bound before
    /// them, whatever timeout the session asked for.
    pub fn freeze_ticks(sync_limit_ticks: u64) -> u64 {
        2 * (20 + sync_limit_ticks)
    }

    /// Whether its rate has a lag (`lag_txns`): only [`Breakage::StaleRead`].
    pub fn has_lag(self) -> bool {
        self == Breakage::StaleRead
    }

    /// The breakage's name in scenario files, e.g. `"stale-read"`.
    pub fn name(self) -> &'static str {
        match self {
            Breakage::FollowerLocalWrite => "follower-local-write",
            Breakage::SkipReconnectZxidRule => "skip-reconnect-zxid-rule",
            Breakage::ReplyBeforeQuorum => "reply-before-quorum",
            Breakage::StaleRead => "stale-read",
            Breakage::LateWatchEvent => "late-watch-event",
            Breakage::SyncWithoutFlush => "sync-without-flush",
            Breakage::EventReordered => "event-reordered",
            Breakage::SkipSessionMovedCheck => "skip-session-moved-check",
            Breakage::ZxidLies => "zxid-lies",
            Breakage::ExpiredEphemeralsLinger => "expired-ephemerals-linger",
            Breakage::FrozenFollowerServesReads => "frozen-follower-serves-reads",
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
            Breakage::SyncWithoutFlush => {
                "a read after sync sees every write that completed before the sync was called"
            }
            Breakage::EventReordered => {
                "a client receives its watch events in the order of the changes that triggered them"
            }
            Breakage::SkipSessionMovedCheck => {
                "a write of unknown outcome never takes effect after a later write of its session"
            }
            Breakage::ZxidLies => "a Stat's mzxid is the zxid of the write that set its version",
            Breakage::ExpiredEphemeralsLinger => {
                "once a client is told its session expired, the session's ephemerals go"
            }
            Breakage::FrozenFollowerServesReads => {
                "a client's view is up to date within a time bound"
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

/// A breakage switched on, and how often it strikes: one of its
/// opportunities in `one_in` on each server (a deterministic counter; see
/// the module docs), and for [`Breakage::StaleRead`] how far behind its
/// stale copy of the tree is. `Broken::from(kind)` is the gross default
/// rate every test of the switch was written for.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Broken {
    /// What breaks.
    pub kind: Breakage,
    /// One opportunity in this many breaks (at least 1: every one).
    pub one_in: u64,
    /// [`Breakage::StaleRead`]: txns the stale copy of the tree trails the
    /// applied state by (at least 1); unused by the others.
    pub lag_txns: u64,
}

impl Broken {
    /// The largest `one_in` a scenario may give.
    pub const MAX_ONE_IN: u64 = 1_000_000;
    /// The largest `lag_txns` a scenario may give.
    pub const MAX_LAG_TXNS: u64 = 1_000;
    /// [`Breakage::StaleRead`]'s default lag.
    pub const DEFAULT_LAG_TXNS: u64 = 2;

    /// Whether this is the kind's gross default rate (written back as the
    /// plain name).
    pub fn is_default_rate(&self) -> bool {
        *self == Broken::from(self.kind)
    }

    /// What is wrong with the rate, if anything (for a scenario's error).
    pub fn check(&self) -> Result<(), String> {
        if !(1..=Broken::MAX_ONE_IN).contains(&self.one_in) {
            return Err(format!(
                "`one_in` must be 1 to {} (one opportunity in this many breaks; 1: every one), got {}",
                Broken::MAX_ONE_IN,
                self.one_in
            ));
        }
        if !(1..=Broken::MAX_LAG_TXNS).contains(&self.lag_txns) {
            return Err(format!(
                "`lag_txns` must be 1 to {} (txns the stale copy trails by), got {}",
                Broken::MAX_LAG_TXNS,
                self.lag_txns
            ));
        }
        Ok(())
    }
}

impl From<Breakage> for Broken {
    fn from(kind: Breakage) -> Broken {
        Broken {
            kind,
            one_in: kind.default_one_in(),
            lag_txns: Broken::DEFAULT_LAG_TXNS,
        }
    }
}

impl fmt::Display for Broken {
    /// The name alone at the default rate, else the rate's table as a
    /// scenario file writes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_default_rate() {
            return f.write_str(self.kind.name());
        }
        write!(
            f,
            "{{ kind = {:?}, one_in = {}",
            self.kind.name(),
            self.one_in
        )?;
        if self.kind.has_lag() {
            write!(f, ", lag_txns = {}", self.lag_txns)?;
        }
        f.write_str(" }")
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

    #[test]
    fn a_rate_is_shown_as_written_and_checked() {
        let gross = Broken::from(Breakage::StaleRead);
        assert_eq!((gross.one_in, gross.lag_txns), (2, 2));
        assert_eq!(gross.to_string(), "stale-read");
        assert_eq!(gross.check(), Ok(()));
        let subtle = Broken {
            one_in: 1000,
            lag_txns: 1,
            ..gross
        };
        assert_eq!(
            subtle.to_string(),
            "{ kind = \"stale-read\", one_in = 1000, lag_txns = 1 }"
        );
        let reordered = Broken {
            one_in: 5,
            ..Broken::from(Breakage::EventReordered)
        };
        assert_eq!(
            reordered.to_string(),
            "{ kind = \"event-reordered\", one_in = 5 }"
        );
        let zero = Broken { one_in: 0, ..gross };
        assert!(zero.check().unwrap_err().contains("`one_in` must be 1 to"));
        let lag = Broken {
            lag_txns: 0,
            ..gross
        };
        assert!(lag.check().unwrap_err().contains("`lag_txns` must be 1 to"));
    }
}
