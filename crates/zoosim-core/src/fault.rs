//! The fault vocabulary (pure): the names scenario files use. The
//! nemesis (`sim::nemesis`, simulation only) injects them.

use std::fmt;

/// A fault the nemesis can inject; each has a kebab-case name for scenario
/// files ([`Fault::name`]).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Fault {
    /// A random server crashes and restarts 0.5–4 s later with its durable
    /// log (never taking a quorum down).
    ServerCrash,
    /// The leader crashes and restarts likewise.
    LeaderCrash,
    /// A server's process is killed (kill -9, the OOM killer, a rolling
    /// restart) and starts again 0.5–4 s later: unlike a power-off, its
    /// operating system resets its connections at once, so its clients
    /// reconnect elsewhere and its followers look for a leader at once
    /// (the leader half the time; never taking a quorum down).
    ServerKill,
    /// A server stops for 0.1 s to 2T (a GC pause, a stalled disk) and
    /// resumes with its old view: the leader two times in three.
    ServerPause,
    /// A majority of the servers power off together and restart 0.5 s to
    /// 2T later from their durable logs.
    MajorityCrash,
    /// Every server powers off and restarts 0.5 s to 2T later: sessions
    /// live on if their clients reconnect within their timeout of the new
    /// leader.
    EnsembleCrash,
    /// The leader crashes, and the server elected next crashes while it
    /// syncs its followers; both restart after the outage.
    NewLeaderCrash,
    /// A random split of the servers in two (possibly leaving no quorum),
    /// healed after the window. The clients are placed on its sides too,
    /// most with their server: a client of a minority server keeps it until
    /// that server gives up, then finds no server that serves.
    Partition,
    /// A random split of the servers in three (each side a minority in
    /// an ensemble of 3 or 4), clients placed as in a partition.
    ThreeWayPartition,
    /// A random split in two held for T to 3T: longer than the session
    /// timeout.
    LongPartition,
    /// Two to five random splits in a row, each replacing the last.
    FlippingPartitions,
    /// The leader cut off from every other server.
    LeaderIsolated,
    /// One direction of one server-to-server link stalls.
    OneWayClog,
    /// One server-to-server link (mostly from the leader) takes 50–1500 ms
    /// extra per message.
    LinkDelay,
    /// A client cut off from its server, both ways.
    ClientCutOff,
    /// A client's machine cut off from every server for T/3 to 3T: it is
    /// Disconnected throughout, and its session expires when the cut
    /// outlasts T.
    ClientIsolated,
    /// A client's process dies (at most one per run).
    ClientCrash,
    /// The leader expires a client's session now, writes racing the close
    /// for up to 50 ms.
    ForcedExpiry,
    /// A client's connection breaks (ConnectionLoss, reconnect).
    BrokenConnection,
    /// The reply to a client's next write is lost after the write applied.
    LostWriteReply,
    /// A client process stalls for 0.1–T/2 (a short GC pause).
    ShortClientPause,
    /// A client process stalls for T–2T: its session expires meanwhile.
    LongClientPause,
}

impl Fault {
    /// Every fault, in declaration order (the order of `zoosim list`'s fault
    /// names and of [`Fault::from_name`]'s search).
    pub const ALL: [Fault; 22] = [
        Fault::ServerCrash,
        Fault::LeaderCrash,
        Fault::ServerKill,
        Fault::ServerPause,
        Fault::MajorityCrash,
        Fault::EnsembleCrash,
        Fault::NewLeaderCrash,
        Fault::Partition,
        Fault::ThreeWayPartition,
        Fault::LongPartition,
        Fault::FlippingPartitions,
        Fault::LeaderIsolated,
        Fault::OneWayClog,
        Fault::LinkDelay,
        Fault::ClientCutOff,
        Fault::ClientIsolated,
        Fault::ClientCrash,
        Fault::ForcedExpiry,
        Fault::BrokenConnection,
        Fault::LostWriteReply,
        Fault::ShortClientPause,
        Fault::LongClientPause,
    ];

    /// The fault's name in scenario files, e.g. `"leader-crash"`.
    pub fn name(self) -> &'static str {
        match self {
            Fault::ServerCrash => "server-crash",
            Fault::LeaderCrash => "leader-crash",
            Fault::ServerKill => "server-kill",
            Fault::ServerPause => "server-pause",
            Fault::MajorityCrash => "majority-crash",
            Fault::EnsembleCrash => "ensemble-crash",
            Fault::NewLeaderCrash => "new-leader-crash",
            Fault::Partition => "partition",
            Fault::ThreeWayPartition => "three-way-partition",
            Fault::LongPartition => "long-partition",
            Fault::FlippingPartitions => "flipping-partitions",
            Fault::LeaderIsolated => "leader-isolated",
            Fault::OneWayClog => "one-way-clog",
            Fault::LinkDelay => "link-delay",
            Fault::ClientCutOff => "client-cut-off",
            Fault::ClientIsolated => "client-isolated",
            Fault::ClientCrash => "client-crash",
            Fault::ForcedExpiry => "forced-expiry",
            Fault::BrokenConnection => "broken-connection",
            Fault::LostWriteReply => "lost-write-reply",
            Fault::ShortClientPause => "short-client-pause",
            Fault::LongClientPause => "long-client-pause",
        }
    }

    /// The fault named `name` ([`Fault::name`]'s inverse); `None` if no fault
    /// has that name.
    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }

    /// A fault aimed at one client (the others aim at servers or links).
    pub fn aims_at_a_client(self) -> bool {
        matches!(
            self,
            Fault::ClientCutOff
                | Fault::ClientIsolated
                | Fault::ClientCrash
                | Fault::ForcedExpiry
                | Fault::BrokenConnection
                | Fault::LostWriteReply
                | Fault::ShortClientPause
                | Fault::LongClientPause
        )
    }

    /// Faults that may name the server they hit in a scenario's schedule.
    pub fn takes_a_server(self) -> bool {
        matches!(
            self,
            Fault::ServerCrash
                | Fault::ServerKill
                | Fault::ServerPause
                | Fault::NewLeaderCrash
                | Fault::OneWayClog
                | Fault::LinkDelay
        )
    }

    /// Faults with a length: an outage, a network fault's window, a
    /// pause, a forced expiry's race window.
    pub fn has_a_window(self) -> bool {
        !matches!(
            self,
            Fault::FlippingPartitions
                | Fault::ClientCrash
                | Fault::BrokenConnection
                | Fault::LostWriteReply
        )
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
