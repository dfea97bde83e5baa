#![warn(missing_docs, unreachable_pub)]
//! stateright models: the recipes' own state machines ([`zoosim_recipes`])
//! against an abstract ZooKeeper built on [`zoosim_core::tree`], every
//! interleaving of a few clients, with faults as actions.
//!
//! The server is one [`DataTree`] and one [`WatchTable`]; each client is a
//! recipe machine, its application (what the simulation's workload does:
//! acquire, hold, release; enter, leave, ...), and one session with one
//! connection: a FIFO of requests to the server, replies and watch events
//! back in the order the server sent them. The actions are: the server
//! serves a client's next request; an application gives its machine a
//! command; a client notices that its connection broke, or reconnects; the
//! server expires a crashed client's session; a stale server (see "Zombie
//! reads and deposed leaders") closes its connection; and the faults, each bounded
//! per run ([`Faults`], counted in the state so that the state graph stays
//! acyclic, which the checker's `eventually` needs):
//!
//! * `lost-reply`: the server applies the request, the reply (and any
//!   event for that client in the same breath) is lost and the connection
//!   breaks: the client gets ConnectionLoss;
//! * `lost-request`: the request is lost and the connection breaks;
//! * `broken-connection`: the connection breaks; the client later reconnects with
//!   its session intact (its watches restored by SetWatches, with the
//!   events it missed), or learns that the session expired;
//! * `forced-expiry`: the server expires a client's session (its ephemerals
//!   deleted, watches fired); a connected client's connection breaks at
//!   that moment (the server expires only a session it lost touch with:
//!   the break and the expiry as one step is the same as a break whose
//!   expiry comes later, since the cut-off client does nothing at the
//!   server meanwhile; a break followed later by an expiry is still
//!   explored when a break fault came first);
//! * `client-crash`: the client process dies; its session lives on until the
//!   server expires it (which it always eventually does: that expiry is
//!   not a budgeted fault, so that liveness can be stated);
//! * `lagging-read`: a getData, exists or getChildren is answered from an
//!   older tree state, as a follower that lags behind the leader would
//!   (see "Stale reads");
//! * `zombie-read`: the server expires a client's session while the
//!   client's own server has not applied the expiry: its next read, and
//!   every read after it on that connection, is answered from the tree
//!   before the expiry (see "Zombie reads and deposed leaders");
//! * `deposed-leader`: the client's server is a leader cut off from its
//!   quorum that does not know it yet: its next read or sync, and every
//!   one after it on that connection, is answered from that leader's
//!   older tree (see the same section).
//!
//! Faults hit clients while they use the recipe (not once their
//! application is finished).
//!
//! # Stale reads
//!
//! One server stands for the ensemble; a lagging follower is modelled by
//! the read it answers. The server keeps the tree as it was before each
//! txn (`State::past`), and the `lagging-read` fault answers a client's
//! next read from any of those states that is not older than the zxid
//! the session has seen (the largest zxid of the replies it got: a
//! client never reconnects to a server behind it, and its server applies
//! its own writes before their replies, so it never misses a write whose
//! reply it saw). A write whose reply was lost may be missed: after the
//! reconnect the session's zxid is still below it, as with a follower
//! that has not applied it yet — ZooKeeper allows that, which is why the
//! lock's guid search syncs first. A sync goes through the leader and is
//! not stale here (a deposed leader answering one is the `deposed-leader`
//! fault, below); its reply brings the session's zxid up to date, so
//! reads after it see everything before it.
//!
//! The reply's zxid is the old state's (the session's zxid becomes the
//! larger of the two). A watch the read sets is set at that old point, as
//! the follower registers it against its own state: it fires for the
//! first change to it that the follower applies next. If one of the txns
//! since the old state is such a change, its event comes right after the
//! reply (the follower catching up, in order, before anything else on
//! that connection); otherwise the watch stands on the server like any
//! other. The follower catching up at once after the stale read is one
//! of the timings a lag allows; a longer lag shows as further stale reads
//! (each one a fault in the budget), or as the client acting later, which
//! the interleavings already cover for the events it would get.
//!
//! **The bound on past states loses nothing.** A state is kept only while
//! a stale read is still in the budget and some client that may still
//! read (not finished, session alive) has seen no later zxid: every state
//! dropped is older than every such client's zxid, so no stale read could
//! be answered from it any more. Once the budget is spent nothing is
//! kept, so runs that differ only in a past no read can reach meet again
//! (the module's "No history in the state").
//!
//! # Zombie reads and deposed leaders
//!
//! With one server for the ensemble, an expired session is never served
//! again and a sync is never stale, so two defences of the recipes are
//! indistinguishable from their absence: the election's confirmation of
//! its own node (sync, then exists) before it leads, and the barrier's
//! check through the leader (a multi with one `check`) before its first
//! exists. Two faults put a client on a connection to a server that
//! applies nothing more until it closes that connection, which it always
//! eventually does ([`Action::FrozenCloses`], not a budgeted fault). The
//! client cannot tell: its connection lives and its reads are answered.
//! That server answers reads from its own tree (the client's `frozen`); a
//! watch a read sets stays there and never fires (the library keeps it,
//! and SetWatches restores it on the next connection); a request it cannot
//! answer from its own tree makes it close the connection first:
//! ConnectionLoss, then Disconnected. Other faults do not hit a client on
//! such a connection, but for an expiry and a crash: a break or a lost
//! message is that server's closing, and its reads are stale already.
//!
//! **Zombie reads.** A session expires at the leader as one txn (the
//! close, which deletes its ephemerals), and each server that applies it
//! closes the session's connection if it holds one. Until the client's own
//! follower applies it, the session lives on there as a zombie: the
//! follower answers its reads from its tree before the close, the
//! session's ephemerals in it, and the client still believes its
//! connection lives. The `zombie-read` fault is that expiry met by a read:
//! the server expires the session of a client whose next request is a
//! getData, exists or getChildren (the others' watches fire as for
//! `forced-expiry`), and that read and every read after it on that
//! connection are answered from the tree just before the close. The
//! client cannot tell such answers from live ones until the connection
//! closes. What the fault adds, and what it rules out:
//!
//! * a client may ask, on a session already gone, and be answered from a
//!   world in which its session and ephemerals still exist, after the
//!   others have seen them go: an election's candidate, woken on that
//!   connection, lists the children and finds its node the lowest — which
//!   it was at no moment since it asked;
//! * never older than what the session has seen: the tree is the one
//!   just before the close, which holds every txn whose reply the client
//!   got (older still would be a `lagging-read` as well);
//! * never anything after the close: a follower applies txns in order,
//!   and the first one it applies is the close, which ends the
//!   connection;
//! * no write and no sync from the zombie succeeds: both reach the
//!   leader, which knows the session is gone, and the follower answers
//!   them only after applying the txns before them, the close first,
//!   which closes the connection: ConnectionLoss, and SessionExpired on
//!   the reconnect. (ZooKeeper may instead answer a write the leader
//!   prepared while the session was closing with SessionExpired on the
//!   still open connection; every machine takes that reply as the end of
//!   its session, as it takes the Expired the reconnect brings, so the
//!   model gives only the latter.) So a read made after a sync answered
//!   on the same connection is answered from a state no older than the
//!   sync's point, at which the session lived: the zombie may still answer
//!   it, but only for an expiry that came after the sync — the client's
//!   session then ended after it asked, which is the window any holder of
//!   a session has (an election's confirmation rests on this);
//! * no watch event reaches the zombie: its watches leave the server with
//!   the expiry, and the follower fires the ones it holds only by applying
//!   the close, which ends the connection.
//!
//! **Deposed leaders.** A leader cut off from its quorum serves its
//! clients until it notices (within syncLimit): reads from its own tree,
//! and syncs too — sync is not a quorum operation (ZOOKEEPER-1675) —
//! while a new leader commits new txns. The `deposed-leader` fault puts a
//! client whose next request is a read or a sync on such a server, frozen
//! at one of the past states (as for `lagging-read`, never older than what
//! the session has seen: a server refuses a session that has seen more
//! than it has). It answers that request and every read and sync after it
//! on that connection from that tree, and the session's zxid becomes that
//! tree's: a sync there brings nothing newer. A write cannot be committed
//! there: the leader steps down, closing the connection (ConnectionLoss,
//! the write not applied). The client's watches leave the live server
//! with the fault; SetWatches brings them back, with the session's stale
//! zxid, when it reconnects, and so brings what it missed. It stands for
//! the smallest case: one stale server, frozen at one point, for the rest
//! of one connection (a follower of that deposed leader, in the same
//! minority, answers alike). What it adds is a sync that is as stale as a
//! read, and reads that stay stale after it: only a write-path request (the
//! barrier's multi with one check) gets past such a server, by ending the
//! connection. Events the client took before the fault came from the live
//! server, which a server frozen earlier would not have sent: the model
//! is generous there (more runs, never fewer).
//!
//! # Reductions, and why each is sound
//!
//! Exploring every interleaving of every message is what makes naive
//! models blow up; these cut the state space without losing a behaviour a
//! property can tell apart:
//!
//! * **Messages on a live connection are taken when they arrive.** A reply
//!   or watch event reaching a connected client is handed to its machine
//!   in the same step that produced it (the serve of the request, or the
//!   write that fired the watch). Taking a message only changes that
//!   client's machine and application, and queues its next request, which
//!   the server still serves as a separate step: it commutes with every
//!   other client's action. The interleavings it drops are those where the
//!   message is still in flight when something happens to that same
//!   client: a reply in flight when the connection breaks is the
//!   `lost-reply` fault (kept); an event in flight when it breaks is lost
//!   and SetWatches replays it on reconnect — exactly what the client sees
//!   when the break comes just before the write, which is kept; a message
//!   in flight when the process crashes is lost with it, and a crashed
//!   client's machine no longer matters (it is reset, so the two orders
//!   are one state). The holder's window between acquiring and releasing,
//!   where a second holder would show, is an application step and stays.
//! * **A break is noticed at once unless the application could act.** A
//!   client whose connection broke takes the ConnectionLoss replies and
//!   the Disconnected event as one step, kept separate only while its
//!   application has a command to give (a holder that does not know yet
//!   that it is cut off, and may touch the protected resource meanwhile:
//!   the window the fencing token is for). Otherwise noticing commutes
//!   with every other action (nothing reaches a broken connection) and is
//!   folded into the break. Kept separate, the notice is followed by both
//!   orders: the holder acts first (the fence's case), or its machine is
//!   told Disconnected first and, if it still lets the application act
//!   (it did not suspend), the application acts told so — what the lock
//!   family's `suspend-while-disconnected` judges ([`Conn`]). A holder
//!   that does not want to act at the break cannot come to want it while
//!   cut off: it wants by what its machine told it, and nothing reaches
//!   the machine until it reconnects.
//! * **Applications start at once.** The commands an application gives in
//!   the initial state (ask for the lock, ...) are given before the first
//!   step: they only queue a request, and the server's serving it is the
//!   step that interleaves. A first command that is an application's
//!   choice ([`RecipeModel::choices`]: a site's vote) is given the same
//!   way, as the first steps of the run, one action per choice and
//!   nothing else enabled until every choice is made: the same runs as
//!   one initial state per combination of choices, while the model keeps
//!   one initial state (a counterexample is replayed from it).
//! * **Zxids are canonical.** The tree's zxids (each node's czxid, mzxid
//!   and pzxid, the last applied), the past states' and the zxid each
//!   client has seen are compared, never added to nor shown to a machine
//!   (the recipes read a stat's version and owner, not its zxids), and
//!   every comparison has a *cut* on one side: a SetWatches after a
//!   reconnect asks whether a kept node's mzxid or pzxid is above the
//!   session's zxid; a stale read compares past states' last zxids with
//!   the session's, and finds the change that fires its watch by
//!   comparing a node's zxids in two successive trees (where a node that
//!   changed carries the later tree's last zxid, and one that did not is
//!   the same). So the cuts are the zxids of the clients that may still
//!   compare theirs (see below), while past states are kept, their last
//!   zxids and today's, and a deposed leader's tree's last zxid (the one
//!   its reads give the client; that tree is relabelled as the past
//!   states are, and so is a zombie's); after every step each zxid becomes the
//!   number of cuts below it. Every comparison answers as before (`z >
//!   cut` exactly when more cuts lie below `z` than below the cut; the
//!   cuts keep their order), runs that differ only in how many txns came
//!   between two cuts, or in which of several nodes changed last, meet,
//!   and the next txn still gets a zxid above all. Whose zxid may still
//!   be compared: a client that will reconnect with its session (it is
//!   cut off now, or on a deposed leader's connection), or one not
//!   finished while a break or a stale read is still in the budget; the others' is never read again (a finished
//!   client is hit by no fault, a connected one's next reply sets it to
//!   the server's) and is set to 0. And a connected client's zxid is
//!   taken for the server's last one unless a stale read may still come:
//!   its watches are on the server, so any change to what it keeps has
//!   fired and been taken at once (removing it from what the library
//!   keeps), and every node it still keeps is at or below its zxid and
//!   the server's; a later break finds the same nodes unchanged, and every
//!   later txn is above both. (A lost reply breaks the connection in the
//!   same step as its txn: the client's zxid, taken before, stays below
//!   that txn, as it should.) With nothing left to compare every zxid is
//!   0. The tests in `tests.rs` check that the same states are
//!   reachable, zxids aside, with and without this, and that a version
//!   which also takes a cut-off client's zxid for the server's (so that
//!   SetWatches would not bring it what it missed) is caught.
//! * **No history in the state.** A recipe's shared record keeps only what
//!   its properties read (the fence's highest token, sticky flags), not
//!   logs or counters, so that runs that differ only in the past meet.
//!
//! # Symmetry
//!
//! Clients that run the same machine and application differ only by
//! their names: client `i`'s session id, its index in the server's watch
//! table, and its guid, which the nodes it creates carry (a base name
//! `<guid>-...`) and which the machines keep (their own node, a lock
//! waiter's predecessor). Where a recipe compares names only for
//! equality, never for order, renaming clients consistently maps runs to
//! runs: every state a renaming makes of a reachable state is reachable,
//! and its future is the renamed future; properties that count clients
//! or read flags answer alike. So with `--symmetry` every step ends with
//! the clients put in a canonical order (sorted by what each is, names
//! aside: its own nodes' names without its guid, its flags, application,
//! requests in flight and watches) and renamed to their new places
//! ([`RecipeModel::symmetry`] gives the names and renames a machine; the
//! world renames the tree, sessions, watch table, requests, the
//! library's watches and a frozen server's tree). The search then visits one state per class, and
//! the states it visits are the full model's (the test in `tests.rs`
//! checks that both reach the same classes). It is sound for the lock
//! (every variant but sort-by-full-name, which orders contenders by
//! guid) and the election (whose application keeps one node name, renamed
//! by [`RecipeModel::rename_app`]); the other models refuse it with their
//! reason. Counterexamples
//! are found again without it, so that clients keep their numbers from
//! step to step.
//!
//! A recipe's model ([`RecipeModel`]) says how its application drives the
//! machine and what it records, and states its properties beside it (one
//! file per recipe: [`lock`], [`barrier`]).
//!
//! Pure: no clock, thread or file. The checker is run by the command
//! (`zoosim check`) and the tests.

pub mod barrier;
mod catalog;
pub mod config;
pub mod cycle;
pub mod double_barrier;
pub mod election;
pub mod lock;
pub mod membership;
pub mod observed;
pub mod queue;
mod render;
pub mod revocable;
pub mod shared_lock;
pub mod two_phase_commit;

#[cfg(test)]
mod tests;

pub use catalog::{
    catalog, model_entry, Bounds, Listed, Make, Report, Spec, RENAMED as RENAMED_MODELS,
};

/// A property of a recipe's model, over its [`World`] (stateright's
/// property; its name is a claim's, [`RecipeModel::CLAIMS`], or a reach
/// goal's).
pub type ModelProperty<R> = Property<World<R>>;
pub use render::{
    check, render_path, shortest, shortest_within, Checked, Options, Search, Verdict,
};

use std::collections::{BTreeSet, VecDeque};
use std::fmt::{self, Debug};
use std::hash::Hash;
use std::sync::Arc;

use stateright::{Expectation, Model, Property};

use zoosim_core::proto::{
    CreateMode, EventType, Op, Reply, SessionEvent, SessionId, WatchEvent, WatchKind, ZkError, Zxid,
};
use zoosim_core::tree::{DataTree, TreeConfig, WatchTable};
use zoosim_recipes::{Input, Machine, OpId, Output};

/// How many of each fault a run may take (0: never).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Faults {
    /// A request applied whose reply is lost (the connection breaks).
    pub lost_reply: u8,
    /// A request lost before the server (the connection breaks).
    pub lost_request: u8,
    /// A connection that breaks, then reconnects or learns of an expiry.
    pub broken_connection: u8,
    /// A client's session expired by the server (its connection broken).
    pub forced_expiry: u8,
    /// A client process that dies (its session expires later).
    pub client_crash: u8,
    /// A read answered from an older tree state, as a lagging follower
    /// would (never older than what the session has seen).
    pub lagging_read: u8,
    /// A client's session expired by the server while the client's own
    /// server has not applied the close: its reads are answered from the
    /// tree before the expiry until that server catches up.
    pub zombie_read: u8,
    /// A client's server is a deposed leader: its reads and syncs are
    /// answered from its stale state until it steps down.
    pub deposed_leader: u8,
}

impl Faults {
    /// No fault at all.
    pub const NONE: Faults = Faults {
        lost_reply: 0,
        lost_request: 0,
        broken_connection: 0,
        forced_expiry: 0,
        client_crash: 0,
        lagging_read: 0,
        zombie_read: 0,
        deposed_leader: 0,
    };

    /// One of each.
    pub const ONE_EACH: Faults = Faults {
        lost_reply: 1,
        lost_request: 1,
        broken_connection: 1,
        forced_expiry: 1,
        client_crash: 1,
        lagging_read: 1,
        zombie_read: 1,
        deposed_leader: 1,
    };

    /// Parses `--faults`: `all`, `none`, or a comma-separated list of
    /// fault names ([`Fault::ALL`]), each optionally `=N` (default 1).
    pub fn parse(list: &str) -> Result<Faults, String> {
        match list.trim() {
            "all" => return Ok(Faults::ONE_EACH),
            "none" | "" => return Ok(Faults::NONE),
            _ => {}
        }
        let mut faults = Faults::NONE;
        for item in list.split(',') {
            let item = item.trim();
            let (name, n) = match item.split_once('=') {
                Some((name, n)) => {
                    let n: u8 = n.trim().parse().ok().filter(|n| *n <= 3).ok_or_else(|| {
                        format!("fault {item:?}: the count after '=' must be 0 to 3")
                    })?;
                    (name.trim(), n)
                }
                None => (item, 1),
            };
            let Some(f) = Fault::from_name(name) else {
                return Err(format!(
                    "unknown fault {name:?}; the faults are {}, or `all` / `none`",
                    Fault::ALL.map(Fault::name).join(", ")
                ));
            };
            *faults.of_mut(f) = n;
        }
        Ok(faults)
    }

    /// How many of fault `f` a run may take.
    pub fn of(&self, f: Fault) -> u8 {
        match f {
            Fault::LostReply => self.lost_reply,
            Fault::LostRequest => self.lost_request,
            Fault::BrokenConnection => self.broken_connection,
            Fault::ForcedExpiry => self.forced_expiry,
            Fault::ClientCrash => self.client_crash,
            Fault::LaggingRead => self.lagging_read,
            Fault::ZombieRead => self.zombie_read,
            Fault::DeposedLeader => self.deposed_leader,
        }
    }

    /// Faults of every kind together.
    pub fn total(&self) -> u32 {
        Fault::ALL.iter().map(|f| u32::from(self.of(*f))).sum()
    }

    fn of_mut(&mut self, f: Fault) -> &mut u8 {
        match f {
            Fault::LostReply => &mut self.lost_reply,
            Fault::LostRequest => &mut self.lost_request,
            Fault::BrokenConnection => &mut self.broken_connection,
            Fault::ForcedExpiry => &mut self.forced_expiry,
            Fault::ClientCrash => &mut self.client_crash,
            Fault::LaggingRead => &mut self.lagging_read,
            Fault::ZombieRead => &mut self.zombie_read,
            Fault::DeposedLeader => &mut self.deposed_leader,
        }
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on: Vec<String> = Fault::ALL
            .into_iter()
            .filter(|x| self.of(*x) > 0)
            .map(|x| format!("{}={}", x.name(), self.of(x)))
            .collect();
        if on.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&on.join(","))
        }
    }
}

/// A fault action. Its name is the simulation's where it is the same
/// fault ([`Fault::simulated`]); the two the simulation has no fault of
/// the same shape for have names that say how they differ: `lost-reply`
/// loses any request's reply (the simulation's `lost-write-reply` only a
/// write's) and `lost-request` a request before the server; a
/// `lagging-read` is a lagging follower's answer, which the simulation
/// gets from its partitions and clogs rather than as a fault, and so are
/// a `zombie-read` (a follower that has not applied a session's expiry)
/// and a `deposed-leader` (a leader cut off from its quorum, which the
/// simulation's partitions and server pauses make).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Fault {
    /// See [`Faults::lost_reply`].
    LostReply,
    /// See [`Faults::lost_request`].
    LostRequest,
    /// See [`Faults::broken_connection`].
    BrokenConnection,
    /// See [`Faults::forced_expiry`].
    ForcedExpiry,
    /// See [`Faults::client_crash`].
    ClientCrash,
    /// See [`Faults::lagging_read`].
    LaggingRead,
    /// See [`Faults::zombie_read`].
    ZombieRead,
    /// See [`Faults::deposed_leader`].
    DeposedLeader,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 8] = [
        Fault::LostReply,
        Fault::LostRequest,
        Fault::BrokenConnection,
        Fault::ForcedExpiry,
        Fault::ClientCrash,
        Fault::LaggingRead,
        Fault::ZombieRead,
        Fault::DeposedLeader,
    ];

    /// The simulation's fault this one is, where it is the same thing.
    pub const fn simulated(self) -> Option<zoosim_core::fault::Fault> {
        use zoosim_core::fault::Fault as Sim;
        match self {
            Fault::BrokenConnection => Some(Sim::BrokenConnection),
            Fault::ForcedExpiry => Some(Sim::ForcedExpiry),
            Fault::ClientCrash => Some(Sim::ClientCrash),
            Fault::LostReply
            | Fault::LostRequest
            | Fault::LaggingRead
            | Fault::ZombieRead
            | Fault::DeposedLeader => None,
        }
    }

    /// The fault's name, as `--faults` takes it: the simulation's
    /// fault's name where it is the same fault.
    pub fn name(self) -> &'static str {
        match (self, self.simulated()) {
            (_, Some(sim)) => sim.name(),
            (Fault::LostReply, None) => "lost-reply",
            (Fault::LostRequest, None) => "lost-request",
            (Fault::ZombieRead, None) => "zombie-read",
            (Fault::DeposedLeader, None) => "deposed-leader",
            (_, None) => "lagging-read",
        }
    }

    /// The name of the "sometimes" property that this fault was taken:
    /// `fault-<name>-taken`.
    pub const fn property(self) -> &'static str {
        match self {
            Fault::LostReply => "fault-lost-reply-taken",
            Fault::LostRequest => "fault-lost-request-taken",
            Fault::BrokenConnection => "fault-broken-connection-taken",
            Fault::ForcedExpiry => "fault-forced-expiry-taken",
            Fault::ClientCrash => "fault-client-crash-taken",
            Fault::LaggingRead => "fault-lagging-read-taken",
            Fault::ZombieRead => "fault-zombie-read-taken",
            Fault::DeposedLeader => "fault-deposed-leader-taken",
        }
    }

    /// The fault `name` names, by its name or its name before the models
    /// took the simulation's names ([`RENAMED_FAULTS`]).
    pub fn from_name(name: &str) -> Option<Fault> {
        let name = RENAMED_FAULTS
            .iter()
            .find(|(old, _)| *old == name)
            .map_or(name, |(_, new)| new);
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Model faults renamed to the simulation's names (or, for the stale
/// read, to a name that is not the simulation's deliberate server bug
/// `stale-read`): (old, new). `--faults` still takes the old names.
pub const RENAMED_FAULTS: [(&str, &str); 4] = [
    ("disconnect", "broken-connection"),
    ("expiry", "forced-expiry"),
    ("crash", "client-crash"),
    ("stale-read", "lagging-read"),
];

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What one step did, in words, for a counterexample's step list; off
/// (nothing built) while the checker explores.
#[derive(Debug, Default)]
pub struct Log(Option<Vec<String>>);

impl Log {
    /// A log that records.
    pub fn on() -> Log {
        Log(Some(Vec::new()))
    }

    /// A log that records nothing.
    pub fn off() -> Log {
        Log(None)
    }

    /// Records `what()` if recording.
    pub fn note(&mut self, what: impl FnOnce() -> String) {
        if let Some(v) = &mut self.0 {
            v.push(what());
        }
    }

    /// What was recorded.
    pub fn lines(self) -> Vec<String> {
        self.0.unwrap_or_default()
    }
}

/// A recipe as a model: how its application drives one machine per
/// client, what the applications record, and the properties over it.
pub trait RecipeModel: Clone + Eq + Hash + Debug + Send + Sync + 'static {
    /// The recipe's machine.
    type Machine: Machine + Send + Sync;
    /// One client's application: what it has done and will do.
    type App: Clone + Eq + Hash + Debug + Send + Sync;
    /// What the clients' applications share (a fenced resource, flags the
    /// properties read). Only what the properties need: see the module's
    /// "No history in the state".
    type Shared: Clone + Eq + Hash + Debug + Default + Send + Sync;

    /// The model's name (`zoosim check NAME`).
    fn name(&self) -> &'static str;
    /// Persistent nodes that exist before the run (the recipe's directory).
    fn dirs(&self) -> Vec<String>;
    /// Client `i`'s machine and application, at the start.
    fn client(&self, i: usize) -> (Self::Machine, Self::App);
    /// Whether the application has a command to give now.
    fn wants(&self, app: &Self::App) -> bool;
    /// Whether the application has a command to give now, given what the
    /// applications share (e.g. a barrier's waiter starts once the
    /// coordinator has told it the barrier is up): [`RecipeModel::wants`]
    /// unless a recipe says otherwise; [`RecipeModel::acts`], which the
    /// world asks, asks this one unless a recipe says otherwise. (A break
    /// is noticed at once when the application does not want to act at
    /// that moment, see "Reductions": news that makes it want later only
    /// queues a request, which the library holds until it reconnects.)
    fn wants_now(&self, app: &Self::App, shared: &Self::Shared) -> bool {
        let _ = shared;
        self.wants(app)
    }
    /// How the clients are renamed for the symmetry reduction
    /// (`--symmetry`, see "Symmetry"), where it is sound; else why not.
    /// None is built unless a recipe says so: a client's name is in the
    /// names of the nodes its machine makes and keeps, and renaming is
    /// sound only where the machine compares names for equality, never
    /// for order.
    fn symmetry(&self) -> Result<Symmetry<Self>, &'static str> {
        Err(
            "the model has no symmetry reduction: its machine keeps client names that the \
             world cannot rename, or reads their order",
        )
    }
    /// Whether the application gives a command now, given its machine and
    /// what the machine has been told of its connection: when
    /// [`RecipeModel::wants_now`], unless its client has been told that its
    /// session ended (the world holds such an application back). A model
    /// that judges what is done after that (`told-is-told`) lets it act
    /// whenever it wants, so that a machine that hides the end is caught;
    /// one whose application asks its machine before it acts (the
    /// election's: is it the leader?) reads `machine`.
    fn acts(
        &self,
        machine: &Self::Machine,
        app: &Self::App,
        shared: &Self::Shared,
        told: Told,
    ) -> bool {
        let _ = machine;
        told != Told::SessionEnded && self.wants_now(app, shared)
    }
    /// Renames the node names the application keeps (for the symmetry
    /// reduction, see "Symmetry"): `rename` maps a path or a bare base
    /// name to its new name (None: unchanged). Nothing unless a recipe
    /// says otherwise: most applications keep no name.
    fn rename_app(&self, app: &mut Self::App, rename: &dyn Fn(&str) -> Option<String>) {
        let _ = (app, rename);
    }
    /// The application gives its command (only when [`RecipeModel::acts`]):
    /// what it does first (e.g. an access to a fenced resource) goes into
    /// `shared`; `live` says whether its session is alive on the server.
    fn command(
        &self,
        app: &mut Self::App,
        shared: &mut Self::Shared,
        live: bool,
        log: &mut Log,
    ) -> <Self::Machine as Machine>::Command;
    /// [`RecipeModel::command`], told more of its client's connection
    /// ([`Conn`]: also what its machine has been told): what the world
    /// calls. A model that judges what an application does while its
    /// machine knows it is cut off, or after it was told its session
    /// ended, gives its command here.
    fn command_in(
        &self,
        app: &mut Self::App,
        shared: &mut Self::Shared,
        conn: Conn,
        log: &mut Log,
    ) -> <Self::Machine as Machine>::Command {
        self.command(app, shared, conn.live, log)
    }
    /// How many ways the application's next command may go: an
    /// application's choice the model explores (a site's vote, commit or
    /// abort). One unless a recipe says otherwise; with more, the command
    /// is given by [`Action::Choose`], one action per choice, and
    /// [`RecipeModel::choose`] is told which before
    /// [`RecipeModel::command`] is asked. Only for the application's
    /// first command: the world takes every choice before any other step
    /// (see "Reductions", "Applications start at once"), which is sound
    /// for a first command only.
    fn choices(&self, app: &Self::App) -> u8 {
        let _ = app;
        1
    }
    /// The application takes choice `k` (below [`RecipeModel::choices`])
    /// of its next command.
    fn choose(&self, app: &mut Self::App, k: u8) {
        let _ = (app, k);
    }
    /// The application takes an outcome of its machine.
    fn outcome(
        &self,
        app: &mut Self::App,
        shared: &mut Self::Shared,
        outcome: &<Self::Machine as Machine>::Outcome,
    );
    /// The application takes an outcome of its machine; `live` says
    /// whether its session was alive on the server when the client made
    /// the request whose answer led to it (for any other outcome: whether
    /// it is alive now). What a property about when an outcome may come
    /// needs: an election's candidate is elected only on an answer to a
    /// request made on a live session. [`RecipeModel::outcome`] unless a
    /// recipe says otherwise; the world calls this one.
    fn outcome_live(
        &self,
        app: &mut Self::App,
        shared: &mut Self::Shared,
        outcome: &<Self::Machine as Machine>::Outcome,
        live: bool,
    ) {
        let _ = live;
        self.outcome(app, shared, outcome);
    }
    /// The application has done all it set out to do.
    fn finished(&self, app: &Self::App) -> bool;
    /// What the model claims: every `always` and `eventually` property
    /// [`RecipeModel::properties`] may make, each declared once as a
    /// [`zoosim_core::check::Property`] (name and meaning) and shared with the
    /// recipe's oracle where the oracle checks the same thing. (Its
    /// `sometimes` properties are reach goals, not claims.)
    const CLAIMS: &'static [zoosim_core::check::Property];
    /// The recipe's properties, over the whole world; `faults` is the
    /// run's budget (a phase only a fault leads to is not expected to be
    /// reached without it). Each `always` and `eventually` one is named
    /// by one of [`RecipeModel::CLAIMS`].
    fn properties(&self, faults: &Faults) -> Vec<Property<World<Self>>>;
}

/// A model's machine maker (a function pointer), left out of the model's
/// comparison and hash: its address says nothing reliable, and states
/// never hold the model. With it a model derives `Eq` and `Hash` from its
/// other fields (its variant, its sizes).
#[derive(Clone, Copy)]
pub struct Maker<F>(pub F);

impl<F> PartialEq for Maker<F> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<F> Eq for Maker<F> {}

impl<F> std::hash::Hash for Maker<F> {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

impl<F> Debug for Maker<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Maker")
    }
}

/// How a recipe's clients are renamed (see "Symmetry"): the recipe's
/// shared record must name no client, and the names its applications keep
/// are renamed by [`RecipeModel::rename_app`].
pub struct Symmetry<R: RecipeModel> {
    /// The name client `i` gives its nodes (its guid): it is a node's
    /// base name's prefix, followed by `-`.
    pub name: fn(&R, usize) -> String,
    /// Makes a client's machine the client's named by the string, with
    /// every node name it keeps mapped by the function (None: unchanged).
    pub machine: RenameMachine<R::Machine>,
}

/// Renames a machine in place: `(machine, its new name, node name map)`;
/// the map gives a path's (or a bare base name's) new name, None when it
/// keeps its own.
pub type RenameMachine<M> = fn(&mut M, &str, &dyn Fn(&str) -> Option<String>);

/// A watch the client library keeps, to restore after a reconnect
/// (SetWatches' three lists).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Kept {
    /// A data watch (getData, or exists on a node that exists).
    Data,
    /// An exist watch on a node that does not exist.
    Exist,
    /// A child watch.
    Child,
}

/// What a client's machine has been told of its connection, as its
/// application acts.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Told {
    /// Nothing against it: connected, or cut off without having noticed
    /// yet (the machine has not been given Disconnected).
    Connected,
    /// Given Disconnected, and not Connected since: the break noticed,
    /// the session's fate not known yet.
    Disconnected,
    /// Told that its session ended.
    SessionEnded,
}

/// What the world tells an application as it gives a command
/// ([`RecipeModel::command_in`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Conn {
    /// The session is alive on the server.
    pub live: bool,
    /// What the client's machine has been told of its connection.
    pub told: Told,
}

/// One client: its machine, application and connection.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Client<R: RecipeModel> {
    /// The recipe's machine.
    pub machine: R::Machine,
    /// The application.
    pub app: R::App,
    /// The connection is up.
    pub connected: bool,
    /// The session lives on the server.
    pub session: bool,
    /// The client has learned that its session ended.
    pub told_ended: bool,
    /// The process died.
    pub crashed: bool,
    /// Requests sent, not yet served, in order.
    outbox: VecDeque<(OpId, Op)>,
    /// After a break the client has not noticed yet: the requests that
    /// will get ConnectionLoss (then comes Disconnected).
    unnoticed: Option<Vec<OpId>>,
    /// The highest zxid a reply has shown the client.
    last_zxid: Zxid,
    /// The watches the client library holds (set by a reply, used up by
    /// an event), by kind and path.
    kept: BTreeSet<(Kept, String)>,
    /// The connection is to a server that applies nothing more until it
    /// closes the connection (see "Zombie reads and deposed leaders"): a
    /// follower that has not applied the session's expiry (`zombie-read`:
    /// the session is gone on the server) or a deposed leader
    /// (`deposed-leader`: the session lives).
    frozen: Option<Frozen>,
}

/// A connection's server that applies nothing more (see "Zombie reads
/// and deposed leaders").
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Frozen {
    /// Its tree.
    tree: Arc<DataTree>,
    /// How many of the requests at the back of the client's outbox it
    /// sent after its session had expired (a zombie's): an answer to one
    /// of those answers a request made on a session already gone.
    late: u8,
}

impl<R: RecipeModel> Client<R> {
    /// Finished with the recipe: its application is done, or its session
    /// is over for it (it crashed, or learned that the session ended).
    fn finished(&self, recipe: &R) -> bool {
        self.crashed || self.told_ended || recipe.finished(&self.app)
    }

    /// What its machine has been told of its connection.
    pub fn told(&self) -> Told {
        if self.told_ended {
            Told::SessionEnded
        } else if !self.connected && self.unnoticed.is_none() {
            Told::Disconnected
        } else {
            Told::Connected
        }
    }

    /// Whether its application gives a command now ([`RecipeModel::acts`]).
    fn acts(&self, recipe: &R, shared: &R::Shared) -> bool {
        !self.crashed && recipe.acts(&self.machine, &self.app, shared, self.told())
    }
}

/// The clients of a state, each shared with the states it came from until
/// a step changes it (most steps change one client): indexing for a
/// change copies that one client only if another state still shares it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Clients<R: RecipeModel>(Vec<Arc<Client<R>>>);

/// A plain list (the Explorer shows states by their Debug text).
impl<R: RecipeModel> Debug for Clients<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<R: RecipeModel> Clients<R> {
    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Client `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&Client<R>> {
        self.0.get(i).map(|c| &**c)
    }

    /// The clients in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Client<R>> + '_ {
        self.0.iter().map(|c| &**c)
    }
}

impl<'a, R: RecipeModel> IntoIterator for &'a Clients<R> {
    type Item = &'a Client<R>;
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, Arc<Client<R>>>,
        fn(&'a Arc<Client<R>>) -> &'a Client<R>,
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|c| &**c)
    }
}

impl<R: RecipeModel> std::ops::Index<usize> for Clients<R> {
    type Output = Client<R>;
    fn index(&self, i: usize) -> &Client<R> {
        &self.0[i]
    }
}

impl<R: RecipeModel> std::ops::IndexMut<usize> for Clients<R> {
    fn index_mut(&mut self, i: usize) -> &mut Client<R> {
        Arc::make_mut(&mut self.0[i])
    }
}

/// The model's state: the server and the clients.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct State<R: RecipeModel> {
    /// The server's tree (shared with the states it came from until a
    /// step changes it: most steps do not, and cloning a tree per state
    /// generated was most of the checker's time).
    pub tree: Arc<DataTree>,
    /// The server's watches (shared as the tree is).
    watches: Arc<WatchTable<u8>>,
    /// The clients.
    pub clients: Clients<R>,
    /// What the applications share.
    pub shared: R::Shared,
    /// Faults taken so far.
    pub used: Faults,
    /// Sticky: one write's watch events reached more than one connection
    /// (a herd, for a recipe that promises none).
    pub herd: bool,
    /// The tree as it was before each txn that a stale read may still be
    /// answered from, oldest first (see the module's "Stale reads"):
    /// empty unless a stale read is still in the budget.
    past: Vec<Arc<DataTree>>,
}

/// An action of the model.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Action {
    /// The server serves client `c`'s next request.
    Serve(u8),
    /// Client `c`'s application gives its machine its next command.
    Command(u8),
    /// Client `c`'s application gives its next command taking choice `k`
    /// of those [`RecipeModel::choices`] offers.
    Choose(u8, u8),
    /// Client `c` notices its broken connection (ConnectionLoss for what
    /// was in flight, then Disconnected).
    Notice(u8),
    /// Client `c`'s library reconnects: with its session (SetWatches), or
    /// to learn that it expired.
    Reconnect(u8),
    /// A fault, on client `c`.
    Fault(Fault, u8),
    /// The server expires crashed client `c`'s session (it always
    /// eventually does: not a budgeted fault).
    ExpireCrashed(u8),
    /// The `lagging-read` fault: client `c`'s next request, a read, is
    /// answered from the tree as it was at the zxid (a lagging server).
    LaggingRead(u8, Zxid),
    /// The `deposed-leader` fault: client `c`'s server is a leader cut off
    /// from its quorum whose tree is as it was at the zxid; it answers the
    /// client's next request, a read or a sync, and what follows.
    DeposedLeader(u8, Zxid),
    /// Client `c`'s frozen server closes the connection (it always
    /// eventually does: not a budgeted fault): a zombie's follower
    /// applies the expiry, a deposed leader steps down.
    FrozenCloses(u8),
}

/// A recipe with `clients` clients and a fault budget: the model.
#[derive(Clone, Debug)]
pub struct World<R: RecipeModel> {
    /// The recipe.
    pub recipe: R,
    /// How many clients.
    pub clients: usize,
    /// How many of each fault a run may take.
    pub faults: Faults,
    /// How many faults one run may take in all (of any kinds, each within
    /// its own budget): what keeps runs with every kind enabled small.
    pub max_faults: u8,
    /// Check only this property (for a shortest counterexample: one
    /// property per breadth-first run); all when None.
    pub only: Option<&'static str>,
    /// Zxids in canonical form (see "Reductions"); off only in the test
    /// that shows the reduction loses nothing.
    canonical: bool,
    /// Clients in canonical order (see "Symmetry"), when the recipe has a
    /// sound renaming.
    symmetric: bool,
    /// With `symmetric`: each client's name (made once, not at every
    /// step).
    names: Vec<String>,
    /// A reduction made unsound on purpose (only the tests that show
    /// their check catches it set one).
    sabotage: Sabotage,
    /// The caller's stop: once set, the search ends (see [`StopFlag`]).
    stop: StopFlag,
}

/// Why a model cannot be made, checked or served as asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelError {
    /// A number of clients outside 1 to [`MAX_CLIENTS`].
    Clients(usize),
    /// The model cannot take this size (its own reason: the revocable
    /// lock needs a holder and a revoker, ...).
    Size(String),
    /// No variant of that name.
    Variant {
        /// The model asked.
        model: &'static str,
        /// The variant asked for.
        asked: String,
        /// Its variants.
        variants: Vec<&'static str>,
    },
    /// No sound symmetry reduction: why.
    NoSymmetry(&'static str),
    /// A property that claims something (`always`, `eventually`) without
    /// its meaning declared in [`RecipeModel::CLAIMS`].
    UndeclaredClaim {
        /// The model.
        model: &'static str,
        /// The property.
        property: &'static str,
    },
}

impl ModelError {
    /// The `zoosim check` option the error is about, if one.
    pub fn option(&self) -> Option<&'static str> {
        match self {
            ModelError::Clients(_) | ModelError::Size(_) => Some("--clients"),
            ModelError::Variant { .. } => Some("--variant"),
            ModelError::NoSymmetry(_) => Some("--symmetry"),
            ModelError::UndeclaredClaim { .. } => None,
        }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Clients(n) => {
                write!(f, "a model takes 1 to {MAX_CLIENTS} clients, not {n}")
            }
            ModelError::Size(why) => f.write_str(why),
            ModelError::Variant {
                model,
                asked,
                variants,
            } => write!(
                f,
                "the {model} model has no variant {asked:?}; it has {}",
                variants.join(", ")
            ),
            ModelError::NoSymmetry(why) => f.write_str(why),
            ModelError::UndeclaredClaim { model, property } => write!(
                f,
                "the {model} model's property {property:?} is not among its declared claims \
                 (RecipeModel::CLAIMS)"
            ),
        }
    }
}

impl std::error::Error for ModelError {}

/// A flag that ends a model check early (a memory bound, an interrupt),
/// set from outside while the checker's threads run. It ends the search
/// through a property of its own, [`STOPPED`], that fails once the flag
/// is set: the checker ends at a discovery of it
/// ([`render::check`]). Not by the model's boundary, which would make
/// every state the stop reaches a terminal one, and each an example of
/// an `eventually` property failing.
#[derive(Clone, Debug, Default)]
pub struct StopFlag(pub Option<std::sync::Arc<std::sync::atomic::AtomicBool>>);

impl StopFlag {
    /// Whether the flag is set.
    pub fn is_set(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// The property that ends a search its [`StopFlag`] stopped: not one of
/// the model's, never reported as a verdict.
pub const STOPPED: &str = "(search stopped)";

/// The lock family's, the election's, and the queue's with
/// [`queue::QueueModel::with_herd`]: the oracles' property.
pub use zoosim_core::check::NO_HERD;
/// Every model's: no refused command, no answer a machine cannot go on
/// from; the simulation's oracles check the same property, so it is
/// theirs.
pub use zoosim_core::check::NO_RECIPE_FAILURE;

/// Every model that checks it: once all clients are settled, no node is
/// left under the recipe's directories (each model says what settled
/// means for its clients).
pub const NO_ORPHANS: zoosim_core::check::Property = zoosim_core::check::Property::new(
    "no-orphans",
    "once every client is settled (finished, or crashed or told its session ended, with \
     nothing of it in flight), no node is left under the recipe's directories",
);

/// A deliberately unsound version of a reduction, for the tests that show
/// that comparing the reduced world with the full one catches it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
enum Sabotage {
    /// None: every reduction as it should be.
    #[default]
    None,
    /// Every client's zxid is taken for the server's last, a
    /// disconnected one's too (it would miss the changes SetWatches
    /// should bring it).
    EveryZxidIsTop,
}

/// The reach goal of a world whose runs may take two faults or more:
/// some run takes two (so the pairs were explored, not just allowed).
pub const TWO_FAULTS: &str = "two-faults-in-one-run";

/// How many faults one run takes in all unless told otherwise.
pub const DEFAULT_MAX_FAULTS: u8 = 1;

/// How many states `zoosim check` (and the benchmark) generate at most
/// unless told otherwise ([`Options::max_states`]): the largest models
/// take up to 6 GB breadth-first at this bound.
pub const DEFAULT_MAX_STATES: usize = 10_000_000;

/// The most clients a model takes.
pub const MAX_CLIENTS: usize = 8;

fn session(c: usize) -> SessionId {
    SessionId(0x100 + c as i64)
}

impl<R: RecipeModel> World<R> {
    /// The model of `recipe` with `clients` clients (1 to [`MAX_CLIENTS`])
    /// and `faults`.
    pub fn new(recipe: R, clients: usize, faults: Faults) -> Result<World<R>, ModelError> {
        if !(1..=MAX_CLIENTS).contains(&clients) {
            return Err(ModelError::Clients(clients));
        }
        let world = World {
            recipe,
            clients,
            faults,
            max_faults: DEFAULT_MAX_FAULTS,
            only: None,
            canonical: true,
            symmetric: false,
            names: Vec::new(),
            sabotage: Sabotage::None,
            stop: StopFlag::default(),
        };
        // A claim must have its meaning declared (`RecipeModel::CLAIMS`), so
        // that `zoosim list` and a verdict can say what was checked.
        for p in world.all_properties() {
            let claim = !matches!(p.expectation, Expectation::Sometimes);
            if claim && !R::CLAIMS.iter().any(|c| c.name == p.name) {
                return Err(ModelError::UndeclaredClaim {
                    model: world.recipe.name(),
                    property: p.name,
                });
            }
        }
        Ok(world)
    }

    /// Every property's name, in order (recipe's, then the faults').
    pub fn property_names(&self) -> Vec<&'static str> {
        self.all_properties().iter().map(|p| p.name).collect()
    }

    /// What this world claims ([`RecipeModel::CLAIMS`] it makes properties
    /// of, given its faults), with their meanings.
    pub fn claims(&self) -> Vec<zoosim_core::check::Property> {
        let names = self.property_names();
        R::CLAIMS
            .iter()
            .copied()
            .filter(|c| names.contains(&c.name))
            .collect()
    }

    fn all_properties(&self) -> Vec<Property<Self>> {
        let mut p = self.recipe.properties(&self.faults);
        for f in Fault::ALL {
            if self.faults.of(f) == 0 || self.max_faults == 0 {
                // A budget of zero makes its "sometimes" unreachable by design.
                continue;
            }
            p.push(match f {
                Fault::LostReply => {
                    Property::sometimes(f.property(), |_, s: &State<R>| s.used.lost_reply > 0)
                }
                Fault::LostRequest => {
                    Property::sometimes(f.property(), |_, s: &State<R>| s.used.lost_request > 0)
                }
                Fault::BrokenConnection => Property::sometimes(f.property(), |_, s: &State<R>| {
                    s.used.broken_connection > 0
                }),
                Fault::ForcedExpiry => {
                    Property::sometimes(f.property(), |_, s: &State<R>| s.used.forced_expiry > 0)
                }
                Fault::ClientCrash => {
                    Property::sometimes(f.property(), |_, s: &State<R>| s.used.client_crash > 0)
                }
                Fault::LaggingRead => {
                    Property::sometimes(f.property(), |_, s: &State<R>| s.used.lagging_read > 0)
                }
                Fault::ZombieRead => {
                    Property::sometimes(f.property(), |_, s: &State<R>| s.used.zombie_read > 0)
                }
                Fault::DeposedLeader => {
                    Property::sometimes(f.property(), |_, s: &State<R>| s.used.deposed_leader > 0)
                }
            });
        }
        if self.faults.total() >= 2 && self.max_faults >= 2 {
            // With room for two faults a run, some run must take two: else
            // "at most 2 a run" would claim pairs that were never explored.
            p.push(Property::sometimes(TWO_FAULTS, |_, s: &State<R>| {
                s.used.total() >= 2
            }));
        }
        p
    }

    fn may(&self, s: &State<R>, f: Fault) -> bool {
        s.used.of(f) < self.faults.of(f) && s.used.total() < u32::from(self.max_faults)
    }

    /// The same model reduced by the clients' symmetry (see "Symmetry"),
    /// or why the recipe has no sound one.
    pub fn with_symmetry(mut self) -> Result<World<R>, ModelError> {
        let sym = self.recipe.symmetry().map_err(ModelError::NoSymmetry)?;
        self.names = (0..self.clients)
            .map(|i| (sym.name)(&self.recipe, i))
            .collect();
        self.symmetric = true;
        Ok(self)
    }

    /// Whether the model is reduced by the clients' symmetry.
    pub fn is_symmetric(&self) -> bool {
        self.symmetric
    }

    /// The same model, its search ended once `stop` is set.
    pub fn with_stop(mut self, stop: StopFlag) -> World<R> {
        self.stop = stop;
        self
    }

    /// The same model with at most `n` faults in one run.
    pub fn with_max_faults(mut self, n: u8) -> World<R> {
        self.max_faults = n;
        self
    }

    /// Takes `action` in `s`, recording what happened in `log`; None if
    /// it is not enabled.
    pub fn step(&self, s: &mut State<R>, action: Action, log: &mut Log) -> Option<()> {
        // A stale read still in the budget may be answered from the tree
        // as it is now: keep it if this step changes it (one txn at most).
        let before =
            (self.stale_may_come(s) && self.writes(s, action)).then(|| Arc::clone(&s.tree));
        self.act(s, action, log)?;
        if let Some(t) = before {
            if t.last_zxid() != s.tree.last_zxid() {
                s.past.push(t);
            }
        }
        self.prune_past(s);
        self.canonical_zxids(s);
        if self.symmetric {
            self.canonical_clients(s);
        }
        Some(())
    }

    /// Puts the clients in canonical order (see "Symmetry"): sorted by
    /// what they are, names aside, and renamed to their new places.
    fn canonical_clients(&self, s: &mut State<R>) {
        let Ok(sym) = self.recipe.symmetry() else {
            return;
        };
        let names = &self.names;
        let keys: Vec<(Option<u64>, u64)> = (0..s.clients.len())
            .map(|i| client_key(s, i, &names[i]))
            .collect();
        let mut order: Vec<usize> = (0..s.clients.len()).collect();
        order.sort_by_key(|&i| (keys[i], i));
        if order.iter().enumerate().any(|(k, &i)| k != i) {
            self.rename_clients(s, &order, &sym, names);
        }
    }

    /// Renames the clients of `s`: new place `k` gets the client that was
    /// at `order[k]`, with every name, session and watch that was its.
    #[cfg(test)]
    pub(crate) fn permute(&self, s: &mut State<R>, order: &[usize]) {
        if let Ok(sym) = self.recipe.symmetry() {
            let names: Vec<String> = (0..self.clients)
                .map(|i| (sym.name)(&self.recipe, i))
                .collect();
            self.rename_clients(s, order, &sym, &names);
        }
    }

    /// In place: the nodes, watches and machines that keep their names
    /// (most of them) cost nothing.
    fn rename_clients(
        &self,
        s: &mut State<R>,
        order: &[usize],
        sym: &Symmetry<R>,
        names: &[String],
    ) {
        let mut to = vec![0; order.len()];
        for (k, &i) in order.iter().enumerate() {
            to[i] = k;
        }
        let rename = |p: &str| rename_path(p, names, &to);
        let base = |b: &str| rename_base(b, names, &to);
        let sessions = |x: SessionId| match (0..names.len()).find(|&i| session(i) == x) {
            Some(i) => session(to[i]),
            None => x,
        };
        Arc::make_mut(&mut s.tree).rename(sessions, base);
        for t in &mut s.past {
            Arc::make_mut(t).rename(sessions, base);
        }
        Arc::make_mut(&mut s.watches).rename(|c| to[usize::from(c)] as u8, rename);
        let mut old: Vec<Option<Arc<Client<R>>>> = std::mem::take(&mut s.clients.0)
            .into_iter()
            .map(Some)
            .collect();
        s.clients.0 = order
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let mut shared = old[i].take().expect("a permutation takes each client once");
                let c = Arc::make_mut(&mut shared);
                (sym.machine)(&mut c.machine, &names[k], &rename);
                self.recipe.rename_app(&mut c.app, &rename);
                for (_, op) in c.outbox.iter_mut() {
                    *op = op.map_paths(|p| rename(p).unwrap_or_else(|| p.to_owned()));
                }
                if c.kept.iter().any(|(_, p)| rename(p).is_some()) {
                    c.kept = std::mem::take(&mut c.kept)
                        .into_iter()
                        .map(|(kind, p)| (kind, rename(&p).unwrap_or(p)))
                        .collect();
                }
                if let Some(f) = &mut c.frozen {
                    Arc::make_mut(&mut f.tree).rename(sessions, base);
                }
                shared
            })
            .collect();
    }

    /// Whether client `c`'s zxid may still be compared in some run from
    /// `s`: by a stale read still in the budget (which past states may
    /// answer it), or by a SetWatches (it will reconnect with its session,
    /// now or after a break still in the budget). A finished client is hit
    /// by no fault, and a connected one's next reply sets its zxid to the
    /// server's whatever it was.
    fn zxid_observable(&self, s: &State<R>, c: &Client<R>) -> bool {
        if c.crashed || c.told_ended || !c.session {
            return false;
        }
        !c.connected
            || c.frozen.is_some()
            || (!c.finished(&self.recipe)
                && [
                    Fault::LaggingRead,
                    Fault::LostReply,
                    Fault::LostRequest,
                    Fault::BrokenConnection,
                    Fault::DeposedLeader,
                ]
                .into_iter()
                .any(|f| self.may(s, f)))
    }

    /// Whether a read may still be answered from a past tree: a
    /// `lagging-read` or a `deposed-leader` is still in the budget.
    fn stale_may_come(&self, s: &State<R>) -> bool {
        self.may(s, Fault::LaggingRead) || self.may(s, Fault::DeposedLeader)
    }

    /// Puts the state's zxids in canonical form (see "Reductions"): a
    /// zxid that may still be compared with the state's others is a cut
    /// (an observable client's, a past state's last one, and today's
    /// tree's last while past states are kept); every zxid becomes the
    /// number of cuts below it, so that every comparison made with a cut
    /// answers as before and nothing else is kept. A connected client's
    /// zxid is the server's last one unless a stale read may still come.
    fn canonical_zxids(&self, s: &mut State<R>) {
        if !self.canonical {
            return;
        }
        let stale = self.stale_may_come(s);
        let top = s.tree.last_zxid();
        let observable: Vec<bool> = s
            .clients
            .iter()
            .map(|c| self.zxid_observable(s, c))
            .collect();
        let mut cuts: Vec<Zxid> = Vec::new();
        for (i, seen) in observable.iter().enumerate() {
            let c = &s.clients[i];
            let zxid = if !*seen {
                0
            } else if (c.connected && c.frozen.is_none() && !stale)
                || self.sabotage == Sabotage::EveryZxidIsTop
            {
                // Its watches are on the server: any change to what it
                // keeps has fired and been taken, so only later txns are
                // news to it.
                top
            } else {
                c.last_zxid
            };
            if *seen {
                cuts.push(zxid);
            }
            // Written only when it changes: a client shared with the
            // state it came from stays shared.
            if c.last_zxid != zxid {
                s.clients[i].last_zxid = zxid;
            }
        }
        if !s.past.is_empty() {
            cuts.extend(s.past.iter().map(|t| t.last_zxid()));
            cuts.push(top);
        }
        // A deposed leader's tree: the zxid its reads give the client.
        cuts.extend(
            s.clients
                .iter()
                .filter(|c| c.session)
                .filter_map(|c| c.frozen.as_ref().map(|f| f.tree.last_zxid())),
        );
        cuts.sort_unstable();
        cuts.dedup();
        // Every comparison is `z > cut`, or between cuts: it answers as
        // before when z becomes the number of cuts below it (idempotent).
        let place = |z: Zxid| cuts.partition_point(|&c| c < z) as Zxid;
        if s.tree.zxids().any(|z| place(z) != z) {
            Arc::make_mut(&mut s.tree).relabel_zxids(place);
        }
        for (i, seen) in observable.iter().enumerate() {
            let z = s.clients[i].last_zxid;
            if *seen && place(z) != z {
                s.clients[i].last_zxid = place(z);
            }
        }
        for t in &mut s.past {
            if t.zxids().any(|z| place(z) != z) {
                Arc::make_mut(t).relabel_zxids(place);
            }
        }
        for i in 0..s.clients.len() {
            if s.clients[i]
                .frozen
                .as_ref()
                .is_some_and(|f| f.tree.zxids().any(|z| place(z) != z))
            {
                if let Some(f) = &mut s.clients[i].frozen {
                    Arc::make_mut(&mut f.tree).relabel_zxids(place);
                }
            }
        }
    }

    /// Whether `action` may apply a txn to the tree.
    fn writes(&self, s: &State<R>, action: Action) -> bool {
        match action {
            Action::Serve(c) => s.clients[usize::from(c)]
                .outbox
                .front()
                .is_some_and(|(_, op)| !is_read(op)),
            Action::ExpireCrashed(_)
            | Action::Fault(Fault::LostReply | Fault::ForcedExpiry | Fault::ZombieRead, _) => true,
            _ => false,
        }
    }

    /// Drops the past trees no stale read can be answered from any more:
    /// all of them once the budget is spent, else those older than every
    /// client that may still read stale has seen (see "Stale reads").
    fn prune_past(&self, s: &mut State<R>) {
        if s.past.is_empty() {
            return;
        }
        let floor = if self.stale_may_come(s) {
            s.clients
                .iter()
                .filter(|c| !c.finished(&self.recipe) && c.session)
                .map(|c| c.last_zxid)
                .min()
        } else {
            None
        };
        match floor {
            Some(floor) => s.past.retain(|t| t.last_zxid() >= floor),
            None => s.past.clear(),
        }
    }

    fn act(&self, s: &mut State<R>, action: Action, log: &mut Log) -> Option<()> {
        match action {
            Action::LaggingRead(c, at) => {
                let c = usize::from(c);
                if !self.may(s, Fault::LaggingRead) || !self.fault_enabled(s, Fault::LaggingRead, c)
                {
                    return None;
                }
                let from = s
                    .past
                    .iter()
                    .position(|t| t.last_zxid() == at && at >= s.clients[c].last_zxid)?;
                s.used.lagging_read += 1;
                s.serve_stale(&self.recipe, c, from, log);
            }
            Action::Serve(c) => {
                let c = usize::from(c);
                let client = &s.clients[c];
                if client.frozen.is_some() {
                    // Its frozen server answers (see "Zombie reads and
                    // deposed leaders").
                    if !client.connected || client.outbox.is_empty() {
                        return None;
                    }
                    s.serve_frozen(&self.recipe, c, log);
                    return Some(());
                }
                if !(client.connected && client.session && !client.outbox.is_empty()) {
                    return None;
                }
                s.serve(&self.recipe, c, false, log);
            }
            Action::DeposedLeader(c, at) => {
                let c = usize::from(c);
                if !self.may(s, Fault::DeposedLeader)
                    || !self.fault_enabled(s, Fault::DeposedLeader, c)
                {
                    return None;
                }
                let from = s
                    .past
                    .iter()
                    .position(|t| t.last_zxid() == at && at >= s.clients[c].last_zxid)?;
                s.used.deposed_leader += 1;
                log.note(|| {
                    format!(
                        "FAULT deposed-leader on client {c}: its server, a leader cut off from \
                         its quorum, is {} txn(s) behind and applies nothing more",
                        s.past.len() - from
                    )
                });
                // The client's watches now sit on a server that applies
                // nothing: off the live server (the library keeps them
                // for SetWatches).
                remove_connection(&mut s.watches, c);
                s.clients[c].frozen = Some(Frozen {
                    tree: Arc::clone(&s.past[from]),
                    late: 0,
                });
                s.serve_frozen(&self.recipe, c, log);
            }
            Action::FrozenCloses(c) => {
                let c = usize::from(c);
                if !(s.clients[c].connected && s.clients[c].frozen.is_some()) {
                    return None;
                }
                log.note(|| {
                    if s.clients[c].session {
                        format!("client {c}'s deposed leader steps down and closes the connection")
                    } else {
                        format!(
                            "client {c}'s server applies the expiry of its session and closes \
                             the connection"
                        )
                    }
                });
                s.break_connection(&self.recipe, c, log);
            }
            Action::Command(c) | Action::Choose(c, _) => {
                let c = usize::from(c);
                let client = &s.clients[c];
                if !client.acts(&self.recipe, &s.shared) {
                    return None;
                }
                let choices = self.recipe.choices(&client.app);
                let choice = match action {
                    Action::Choose(_, k) if choices > 1 && k < choices => Some(k),
                    Action::Command(_) if choices <= 1 => None,
                    _ => return None,
                };
                let conn = Conn {
                    live: client.session,
                    told: client.told(),
                };
                let State {
                    clients, shared, ..
                } = s;
                if let Some(k) = choice {
                    self.recipe.choose(&mut clients[c].app, k);
                }
                let cmd = self
                    .recipe
                    .command_in(&mut clients[c].app, shared, conn, log);
                match choice {
                    Some(k) => log.note(|| {
                        format!("client {c}'s application, choice {k} of {choices}: {cmd:?}")
                    }),
                    None => log.note(|| format!("client {c}'s application: {cmd:?}")),
                }
                s.clients[c].machine.handle(Input::Command(cmd));
                s.drain(&self.recipe, c, log);
            }
            Action::Notice(c) => {
                let c = usize::from(c);
                s.clients[c].unnoticed.as_ref()?;
                s.notice(&self.recipe, c, log);
            }
            Action::Reconnect(c) => {
                let c = usize::from(c);
                let client = &s.clients[c];
                if client.connected
                    || client.crashed
                    || client.told_ended
                    || client.unnoticed.is_some()
                {
                    return None;
                }
                s.reconnect(&self.recipe, c, log);
            }
            Action::ExpireCrashed(c) => {
                let c = usize::from(c);
                if !(s.clients[c].crashed && s.clients[c].session) {
                    return None;
                }
                log.note(|| format!("the server expires crashed client {c}'s session"));
                s.expire(&self.recipe, c, log);
            }
            Action::Fault(f, c) => {
                let c = usize::from(c);
                // A stale read is taken as Action::LaggingRead, which says
                // from when.
                if matches!(f, Fault::LaggingRead | Fault::DeposedLeader)
                    || !self.may(s, f)
                    || !self.fault_enabled(s, f, c)
                {
                    return None;
                }
                *s.used.of_mut(f) += 1;
                match f {
                    Fault::LostReply => {
                        log.note(|| format!("FAULT lost-reply on client {c}:"));
                        s.serve(&self.recipe, c, true, log);
                        s.break_connection(&self.recipe, c, log);
                    }
                    Fault::LostRequest => {
                        let (id, op) = s.clients[c].outbox.pop_front()?;
                        log.note(|| {
                            format!(
                                "FAULT lost-request on client {c}: {} never reaches the server",
                                op_text(&op)
                            )
                        });
                        // The lost request gets its ConnectionLoss too.
                        s.break_connection_with(&self.recipe, c, vec![id], log);
                    }
                    Fault::BrokenConnection => {
                        log.note(|| format!("FAULT broken-connection on client {c}"));
                        s.break_connection(&self.recipe, c, log);
                    }
                    Fault::ForcedExpiry => {
                        log.note(|| {
                            format!("FAULT forced-expiry: the server expires client {c}'s session")
                        });
                        if s.clients[c].connected {
                            // Noticed or not, as any break (the holder
                            // that does not know yet is the fence's case).
                            s.break_connection(&self.recipe, c, log);
                        }
                        s.expire(&self.recipe, c, log);
                    }
                    Fault::ClientCrash => {
                        log.note(|| format!("FAULT client-crash: client {c}'s process dies"));
                        s.crash(&self.recipe, c);
                    }
                    Fault::ZombieRead => {
                        log.note(|| {
                            format!(
                                "FAULT zombie-read: the server expires client {c}'s session; \
                                 client {c}'s own server has not applied the expiry"
                            )
                        });
                        // The follower's tree: everything before the
                        // expiry's txn, nothing after it.
                        let before = Arc::clone(&s.tree);
                        s.expire(&self.recipe, c, log);
                        s.clients[c].frozen = Some(Frozen {
                            tree: before,
                            late: 0,
                        });
                        s.serve_frozen(&self.recipe, c, log);
                    }
                    Fault::LaggingRead | Fault::DeposedLeader => unreachable!("refused above"),
                }
            }
        }
        Some(())
    }

    fn fault_enabled(&self, s: &State<R>, f: Fault, c: usize) -> bool {
        let client = &s.clients[c];
        if client.finished(&self.recipe) {
            return false;
        }
        if client.frozen.is_some() {
            // Its server answers nothing new until it closes the
            // connection, which it always does: a break or a lost
            // message on it is that close; a stale read it already is.
            return match f {
                Fault::ForcedExpiry => client.session,
                Fault::ClientCrash => true,
                _ => false,
            };
        }
        let serving = client.connected && client.session && !client.outbox.is_empty();
        match f {
            // A lost reply to a read is a lost request (the read changed
            // nothing but a watch, which the break removes): only writes.
            Fault::LostReply => {
                serving && client.outbox.front().is_some_and(|(_, op)| !is_read(op))
            }
            Fault::LostRequest => serving,
            // With a request queued, a break is the lost-request fault
            // (the same state): a plain disconnect has nothing in flight.
            Fault::BrokenConnection => client.connected && client.outbox.is_empty(),
            // A connected client's connection breaks first: the server
            // expires only sessions it has lost touch with.
            Fault::ForcedExpiry => client.session,
            Fault::ClientCrash => true,
            // A getData, exists or getChildren (a sync goes through the
            // leader: see "Stale reads"; a zombie's sync reaches the
            // leader, which knows the session is gone).
            Fault::LaggingRead | Fault::ZombieRead => {
                serving
                    && client
                        .outbox
                        .front()
                        .is_some_and(|(_, op)| is_read(op) && !matches!(op, Op::Sync { .. }))
            }
            // A deposed leader answers a read or a sync alike.
            Fault::DeposedLeader => {
                serving && client.outbox.front().is_some_and(|(_, op)| is_read(op))
            }
        }
    }
}

/// `path` (or a bare base name) with the client name it carries (a base
/// name that starts with `names[i]` and `-`) replaced by client
/// `to[i]`'s; None when it carries none, or its client keeps its place.
fn rename_path(path: &str, names: &[String], to: &[usize]) -> Option<String> {
    // A machine may keep a bare base name (a lock's predecessor).
    let (dir, base) = path.split_at(path.rfind('/').map_or(0, |k| k + 1));
    rename_base(base, names, to).map(|b| format!("{dir}{b}"))
}

/// A base name renamed as [`rename_path`] says.
fn rename_base(base: &str, names: &[String], to: &[usize]) -> Option<String> {
    names.iter().enumerate().find_map(|(i, name)| {
        let rest = base.strip_prefix(name.as_str())?;
        (rest.starts_with('-') && to[i] != i).then(|| format!("{}{rest}", names[to[i]]))
    })
}

/// What client `i` is, its name aside, as a sort key (see "Symmetry"):
/// the same for two clients a renaming swaps. First the lowest sequence
/// number among its own nodes (None, sorting first, when it has none),
/// then a hash of the rest: its own nodes' names without its name, its
/// flags, its application, what it has in flight and keeps watching.
///
/// The sequence number comes first because it is stable: a contender
/// keeps its place among the others for as long as its node stands, so
/// most steps leave the order as it was and nothing is renamed. Sorted
/// by the hash alone, any step of any client reshuffled them: 60 % of
/// the lock's steps at 4 clients renamed, against 20 % now, and the lock
/// at 5 clients with every fault checked in 9.8 s instead of 13.6 s.
fn client_key<R: RecipeModel>(s: &State<R>, i: usize, name: &str) -> (Option<u64>, u64) {
    use std::hash::Hasher;
    // The same order in every run (no random keys); Fx rather than
    // SipHash: this key is made for every client at every step, and
    // SipHash was a fifth of the lock's check.
    let mut h = rustc_hash::FxHasher::default();
    let mut seq: Option<u64> = None;
    for p in s.tree.ephemerals(session(i)) {
        let base = p.rsplit('/').next().unwrap_or(p);
        let digits = base.bytes().rev().take_while(u8::is_ascii_digit).count();
        if let Ok(n) = base[base.len() - digits..].parse::<u64>() {
            seq = Some(seq.map_or(n, |m| m.min(n)));
        }
        base.strip_prefix(name).unwrap_or(base).hash(&mut h);
    }
    let c = &s.clients[i];
    (c.connected, c.session, c.told_ended, c.crashed, c.last_zxid).hash(&mut h);
    c.app.hash(&mut h);
    for (_, op) in &c.outbox {
        op.name().hash(&mut h);
    }
    c.unnoticed.as_ref().map(Vec::len).hash(&mut h);
    for (k, _) in &c.kept {
        k.hash(&mut h);
    }
    c.frozen.is_some().hash(&mut h);
    (seq, h.finish())
}

/// The event a watch of `kind` on `path` fires for the change from tree
/// `a` to tree `b` (one txn), if any: what the server's trigger would be.
fn first_change(kind: WatchKind, path: &str, a: &DataTree, b: &DataTree) -> Option<EventType> {
    let (x, y) = (a.node(path), b.node(path));
    match (kind, x, y) {
        (WatchKind::Data, None, Some(_)) => Some(EventType::NodeCreated),
        (_, Some(_), None) => Some(EventType::NodeDeleted),
        // Deleted and made again in one multi: the delete comes first.
        (_, Some(x), Some(y)) if x.czxid != y.czxid => Some(EventType::NodeDeleted),
        (WatchKind::Data, Some(x), Some(y)) if x.mzxid != y.mzxid => {
            Some(EventType::NodeDataChanged)
        }
        (WatchKind::Child, Some(x), Some(y)) if x.pzxid != y.pzxid => {
            Some(EventType::NodeChildrenChanged)
        }
        _ => None,
    }
}

/// Fires the watches `triggers` reach (copying the shared table only
/// when one does).
fn fire(watches: &mut Arc<WatchTable<u8>>, triggers: &[WatchEvent]) -> Vec<(u8, WatchEvent)> {
    if triggers.iter().any(|t| watches.is_watched(&t.path)) {
        Arc::make_mut(watches).fire_all(triggers)
    } else {
        Vec::new()
    }
}

/// Drops client `c`'s watches from the server (copying the shared table
/// only when it has some).
fn remove_connection(watches: &mut Arc<WatchTable<u8>>, c: usize) {
    if watches.has_connection(c as u8) {
        Arc::make_mut(watches).remove_connection(c as u8);
    }
}

/// Whether a request is a read (served without a txn).
fn is_read(op: &Op) -> bool {
    matches!(
        op,
        Op::Exists { .. } | Op::GetData { .. } | Op::GetChildren { .. } | Op::Sync { .. }
    )
}

impl<R: RecipeModel> State<R> {
    /// Hands `input` to client `c`'s machine and drains it.
    fn hand(
        &mut self,
        recipe: &R,
        c: usize,
        input: Input<<R::Machine as Machine>::Command>,
        log: &mut Log,
    ) {
        self.clients[c].machine.handle(input);
        self.drain(recipe, c, log);
    }

    /// A watch event reaches connected client `c`: the watches it used up
    /// leave the library's list; an event matching none is dropped (the
    /// library delivers a path's event once, see
    /// [`WatchTable::set_watches`]).
    fn event(&mut self, recipe: &R, c: usize, event: WatchEvent, log: &mut Log) {
        let used: &[Kept] = match event.event_type {
            EventType::NodeChildrenChanged => &[Kept::Child],
            EventType::NodeDeleted => &[Kept::Data, Kept::Exist, Kept::Child],
            EventType::NodeCreated | EventType::NodeDataChanged => &[Kept::Data, Kept::Exist],
        };
        let client = &mut self.clients[c];
        let mut matched = false;
        for k in used {
            matched |= client.kept.remove(&(*k, event.path.clone()));
        }
        if !matched {
            return;
        }
        log.note(|| format!("client {c} gets {:?} {}", event.event_type, event.path));
        self.hand(recipe, c, Input::Watch(event), log);
    }

    /// The server serves client `c`'s next request. Watch events go to
    /// their connections and are taken at once; so is the reply, unless
    /// `lose_reply` (then the events for `c` itself are lost too: the
    /// connection breaks right after).
    fn serve(&mut self, recipe: &R, c: usize, lose_reply: bool, log: &mut Log) {
        let Some((id, op)) = self.clients[c].outbox.pop_front() else {
            return;
        };
        let (reply, kept) = if is_read(&op) {
            let (reply, watch) = self.tree.read(&op);
            let kept = watch.map(|(kind, path)| {
                Arc::make_mut(&mut self.watches).register(c as u8, kind, &path);
                let kept = match (&op, kind) {
                    (Op::Exists { .. }, _) if matches!(reply, Ok(Reply::Exists(None))) => {
                        Kept::Exist
                    }
                    (_, WatchKind::Data) => Kept::Data,
                    (_, WatchKind::Child) => Kept::Child,
                };
                (kept, path)
            });
            (reply, kept)
        } else {
            let applied = Arc::make_mut(&mut self.tree).execute(0, session(c), &op);
            let fired = fire(&mut self.watches, &applied.triggers);
            // ZooKeeper applies the txn (its watches fire, their events
            // go out) before it sends the reply.
            let reached: BTreeSet<u8> = fired.iter().map(|(x, _)| *x).collect();
            self.herd |= reached.len() > 1;
            log.note(|| {
                format!(
                    "the server serves client {c}'s {} → {}",
                    op_text(&op),
                    applied.reply.as_ref().map_or_else(String::new, reply_text)
                )
            });
            for (x, event) in fired {
                let x = usize::from(x);
                if x == c && lose_reply {
                    continue;
                }
                self.event(recipe, x, event, log);
            }
            let reply = applied.reply.expect("a client's txn has a reply");
            if lose_reply {
                log.note(|| "  the reply is lost and the connection breaks".into());
                // The request is answered ConnectionLoss by the break.
                self.clients[c].outbox.push_front((id, op));
                return;
            }
            self.clients[c].last_zxid = self.tree.last_zxid();
            self.hand(recipe, c, Input::Reply(id, reply), log);
            return;
        };
        log.note(|| {
            format!(
                "the server serves client {c}'s {} → {}",
                op_text(&op),
                reply_text(&reply)
            )
        });
        if lose_reply {
            // The watch was set on the server, but the library never
            // learns of it (the reply is lost): it is not restored.
            log.note(|| "  the reply is lost and the connection breaks".into());
            self.clients[c].outbox.push_front((id, op));
            return;
        }
        let client = &mut self.clients[c];
        client.last_zxid = client.last_zxid.max(self.tree.last_zxid());
        client.kept.extend(kept);
        self.hand(recipe, c, Input::Reply(id, reply), log);
    }

    /// The `lagging-read` fault: client `c`'s next request, a read, is
    /// answered from `self.past[from]`, as a follower that has applied only
    /// that much would answer it. A watch it sets is set at that point: the
    /// follower fires it for the first matching change it applies next, so
    /// if one of the txns since then is such a change, the event follows
    /// the reply at once (the follower catching up); otherwise the watch
    /// stands on the server as any other.
    fn serve_stale(&mut self, recipe: &R, c: usize, from: usize, log: &mut Log) {
        let Some((id, op)) = self.clients[c].outbox.pop_front() else {
            return;
        };
        let old = Arc::clone(&self.past[from]);
        let (reply, watch) = old.read(&op);
        log.note(|| {
            format!(
                "FAULT lagging-read on client {c}: a server {} txn(s) behind answers its {} → {}",
                self.past.len() - from,
                op_text(&op),
                reply_text(&reply)
            )
        });
        let mut fired = None;
        let kept = watch.map(|(kind, path)| {
            // The states after `old`, in order, ending with today's tree.
            let later = self.past[from + 1..]
                .iter()
                .map(|t| &**t)
                .chain(std::iter::once(&*self.tree));
            let mut prev = &*old;
            for next in later {
                if let Some(t) = first_change(kind, &path, prev, next) {
                    fired = Some(WatchEvent {
                        event_type: t,
                        path: path.clone(),
                    });
                    break;
                }
                prev = next;
            }
            if fired.is_none() {
                Arc::make_mut(&mut self.watches).register(c as u8, kind, &path);
            }
            let kept = match (&op, kind) {
                (Op::Exists { .. }, _) if matches!(reply, Ok(Reply::Exists(None))) => Kept::Exist,
                (_, WatchKind::Data) => Kept::Data,
                (_, WatchKind::Child) => Kept::Child,
            };
            (kept, path)
        });
        let client = &mut self.clients[c];
        client.last_zxid = client.last_zxid.max(old.last_zxid());
        client.kept.extend(kept);
        self.hand(recipe, c, Input::Reply(id, reply), log);
        if let Some(e) = fired {
            log.note(|| "  the lagging server catches up:".into());
            self.event(recipe, c, e, log);
        }
    }

    /// Client `c`'s next request reaches its frozen server (see "Zombie
    /// reads and deposed leaders"): a read (or a deposed leader's sync) is
    /// answered from its tree, a watch it sets stays on that server (the
    /// library keeps it, for SetWatches: it never fires there); anything
    /// else cannot be answered and the server closes the connection (a
    /// deposed leader cannot commit a write; a follower answers a sync or
    /// a write only after the txns before it, the expiry first, which
    /// closes the connection): ConnectionLoss.
    fn serve_frozen(&mut self, recipe: &R, c: usize, log: &mut Log) {
        let client = &self.clients[c];
        let (Some(frozen), Some((_, op))) = (&client.frozen, client.outbox.front()) else {
            return;
        };
        let tree = Arc::clone(&frozen.tree);
        // Sent on a session already gone: among the last `late` requests.
        let late = client.outbox.len() <= usize::from(frozen.late);
        let zombie = !client.session;
        if !is_read(op) || (zombie && matches!(op, Op::Sync { .. })) {
            log.note(|| {
                format!(
                    "client {c}'s {} cannot be answered before its server closes the connection",
                    op_text(op)
                )
            });
            self.break_connection(recipe, c, log);
            return;
        }
        let Some((id, op)) = self.clients[c].outbox.pop_front() else {
            return;
        };
        let (reply, watch) = tree.read(&op);
        log.note(|| {
            format!(
                "client {c}'s {} answers its {} → {}",
                if zombie {
                    "server, the expiry not applied yet,"
                } else {
                    "deposed server"
                },
                op_text(&op),
                reply_text(&reply)
            )
        });
        let client = &mut self.clients[c];
        client.last_zxid = client.last_zxid.max(tree.last_zxid());
        if let Some((kind, path)) = watch {
            let kept = match (&op, kind) {
                (Op::Exists { .. }, _) if matches!(reply, Ok(Reply::Exists(None))) => Kept::Exist,
                (_, WatchKind::Data) => Kept::Data,
                (_, WatchKind::Child) => Kept::Child,
            };
            client.kept.insert((kept, path));
        }
        if late {
            if let Some(f) = &mut client.frozen {
                f.late -= 1;
            }
        }
        // What the answer leads to comes of a request made while the
        // session lived, unless it was made on a zombie session.
        client.machine.handle(Input::Reply(id, reply));
        self.drain_as(recipe, c, Some(!late), log);
    }

    /// Client `c`'s connection breaks: every request not yet answered will
    /// get ConnectionLoss. Its watches leave the server (they come back
    /// with SetWatches on reconnect).
    fn break_connection(&mut self, recipe: &R, c: usize, log: &mut Log) {
        self.break_connection_with(recipe, c, Vec::new(), log);
    }

    fn break_connection_with(&mut self, recipe: &R, c: usize, mut lost: Vec<OpId>, log: &mut Log) {
        remove_connection(&mut self.watches, c);
        let client = &mut self.clients[c];
        client.connected = false;
        client.frozen = None;
        lost.extend(client.outbox.drain(..).map(|(id, _)| id));
        client.unnoticed = Some(lost);
        // Noticing is folded into the break unless the application could
        // act first (see the module's "Reductions").
        if !self.clients[c].acts(recipe, &self.shared) {
            self.notice(recipe, c, log);
        }
    }

    /// Client `c` notices its broken connection.
    fn notice(&mut self, recipe: &R, c: usize, log: &mut Log) {
        let lost = self.clients[c].unnoticed.take().unwrap_or_default();
        log.note(|| {
            format!(
                "client {c} gets ConnectionLoss for {} request(s), then Disconnected",
                lost.len()
            )
        });
        for id in lost {
            self.hand(
                recipe,
                c,
                Input::Reply(id, Err(ZkError::ConnectionLoss)),
                log,
            );
        }
        self.hand(recipe, c, Input::Session(SessionEvent::Disconnected), log);
    }

    /// The client library reconnects client `c`: with its session, the
    /// watches it kept are set again (the events it missed come now);
    /// without, it learns of the expiry.
    fn reconnect(&mut self, recipe: &R, c: usize, log: &mut Log) {
        if !self.clients[c].session {
            log.note(|| format!("client {c} reconnects: its session has expired"));
            let client = &mut self.clients[c];
            client.told_ended = true;
            let queued: Vec<OpId> = client.outbox.drain(..).map(|(id, _)| id).collect();
            client.kept.clear();
            for id in queued {
                self.hand(
                    recipe,
                    c,
                    Input::Reply(id, Err(ZkError::SessionExpired)),
                    log,
                );
            }
            self.hand(recipe, c, Input::Session(SessionEvent::Expired), log);
            return;
        }
        let client = &self.clients[c];
        let list = |k: Kept| -> Vec<String> {
            client
                .kept
                .iter()
                .filter(|(kind, _)| *kind == k)
                .map(|(_, p)| p.clone())
                .collect()
        };
        let (data, exist, child) = (list(Kept::Data), list(Kept::Exist), list(Kept::Child));
        let events = Arc::make_mut(&mut self.watches).set_watches(
            c as u8,
            &self.tree,
            client.last_zxid,
            &data,
            &exist,
            &child,
        );
        log.note(|| format!("client {c} reconnects with its session (SetWatches)"));
        self.clients[c].connected = true;
        self.hand(recipe, c, Input::Session(SessionEvent::Connected), log);
        for e in events {
            self.event(recipe, c, e, log);
        }
    }

    /// The server ends client `c`'s session: ephemerals deleted, watches
    /// fired for the others.
    fn expire(&mut self, recipe: &R, c: usize, log: &mut Log) {
        remove_connection(&mut self.watches, c);
        let triggers = Arc::make_mut(&mut self.tree).close_session(0, session(c));
        let fired = fire(&mut self.watches, &triggers);
        let reached: BTreeSet<u8> = fired.iter().map(|(x, _)| *x).collect();
        self.herd |= reached.len() > 1;
        self.clients[c].session = false;
        for (x, event) in fired {
            self.event(recipe, usize::from(x), event, log);
        }
    }

    /// Client `c`'s process dies. What it was is reset to one canonical
    /// dead client (only its application and session still matter), so
    /// that the orders of a crash and what the dead client would have
    /// taken meet in one state.
    fn crash(&mut self, recipe: &R, c: usize) {
        if self.clients[c].connected {
            remove_connection(&mut self.watches, c);
        }
        let (machine, _) = recipe.client(c);
        let client = &mut self.clients[c];
        client.machine = machine;
        client.crashed = true;
        client.connected = false;
        client.outbox.clear();
        client.unnoticed = None;
        client.kept.clear();
        client.last_zxid = 0;
        client.frozen = None;
    }

    /// Drains client `c`'s machine: requests go out, outcomes to the
    /// application.
    fn drain(&mut self, recipe: &R, c: usize, log: &mut Log) {
        self.drain_as(recipe, c, None, log);
    }

    /// [`State::drain`], the outcomes taken as coming of a request made
    /// while the session lived or not (`live`; None: whether it lives
    /// now, see [`RecipeModel::outcome_live`]).
    fn drain_as(&mut self, recipe: &R, c: usize, live: Option<bool>, log: &mut Log) {
        while let Some(out) = self.clients[c].machine.poll() {
            match out {
                Output::Send(id, op) => {
                    let client = &mut self.clients[c];
                    if client.told_ended {
                        // The library answers at once for a session it
                        // knows is gone.
                        client
                            .machine
                            .handle(Input::Reply(id, Err(ZkError::SessionExpired)));
                    } else {
                        // On a broken connection the library holds the
                        // request until it reconnects (Java's outgoing
                        // queue).
                        log.note(|| format!("  client {c} sends {}", op_text(&op)));
                        client.outbox.push_back((id, op));
                        if !client.session {
                            // A zombie's request (see Frozen::late).
                            if let Some(f) = &mut client.frozen {
                                f.late += 1;
                            }
                        }
                    }
                }
                Output::Outcome(o) => {
                    log.note(|| format!("  client {c}: {o:?}"));
                    let State {
                        clients, shared, ..
                    } = self;
                    let live = live.unwrap_or(clients[c].session);
                    recipe.outcome_live(&mut clients[c].app, shared, &o, live);
                }
            }
        }
    }
}

impl<R: RecipeModel> Model for World<R> {
    type State = State<R>;
    type Action = Action;

    fn init_states(&self) -> Vec<State<R>> {
        let mut tree = DataTree::new(TreeConfig::default());
        for c in 0..self.clients {
            tree.create_session(0, session(c), 10_000);
        }
        // The recipe's directories, made by the first session before the
        // run (persistent: they belong to nobody).
        for dir in self.recipe.dirs() {
            let applied = tree.execute(
                0,
                session(0),
                &Op::Create {
                    path: dir.clone(),
                    data: vec![],
                    mode: CreateMode::Persistent,
                },
            );
            assert!(
                matches!(applied.reply, Some(Ok(_))),
                "the model's directory {dir} could not be created: {:?}",
                applied.reply
            );
        }
        let clients = (0..self.clients)
            .map(|i| {
                let (machine, app) = self.recipe.client(i);
                Arc::new(Client {
                    machine,
                    app,
                    connected: true,
                    session: true,
                    told_ended: false,
                    crashed: false,
                    outbox: VecDeque::new(),
                    unnoticed: None,
                    last_zxid: 0,
                    kept: BTreeSet::new(),
                    frozen: None,
                })
            })
            .collect();
        let mut s = State {
            clients: Clients(clients),
            tree: Arc::new(tree),
            watches: Arc::new(WatchTable::new()),
            shared: R::Shared::default(),
            used: Faults::NONE,
            herd: false,
            past: Vec::new(),
        };
        // Applications start at once (see the module's "Reductions").
        // One command each: an application that wants another at once
        // gives it as a step of its own.
        // Clients keep their places until all have started (a step of
        // the reduced model reorders them).
        let mut unreduced = self.clone();
        unreduced.symmetric = false;
        for c in 0..self.clients {
            let client = &s.clients[c];
            if client.acts(&self.recipe, &s.shared) && self.recipe.choices(&client.app) <= 1 {
                unreduced
                    .step(&mut s, Action::Command(c as u8), &mut Log::off())
                    .expect("a wanted command is enabled");
            }
        }
        self.canonical_zxids(&mut s);
        if self.symmetric {
            self.canonical_clients(&mut s);
        }
        vec![s]
    }

    fn actions(&self, s: &State<R>, actions: &mut Vec<Action>) {
        // Choices first (see "Applications start at once"): the first
        // client with one to make offers it, and nothing else is enabled
        // until every choice is made.
        let choosing = s.clients.iter().enumerate().find_map(|(i, c)| {
            let n = if c.acts(&self.recipe, &s.shared) {
                self.recipe.choices(&c.app)
            } else {
                1
            };
            (n > 1).then_some((i as u8, n))
        });
        if let Some((i, n)) = choosing {
            actions.extend((0..n).map(|k| Action::Choose(i, k)));
            return;
        }
        for (i, c) in s.clients.iter().enumerate() {
            let i8 = i as u8;
            if c.crashed {
                if c.session {
                    actions.push(Action::ExpireCrashed(i8));
                }
                continue;
            }
            if c.connected && (c.session || c.frozen.is_some()) && !c.outbox.is_empty() {
                actions.push(Action::Serve(i8));
            }
            if c.connected && c.frozen.is_some() {
                actions.push(Action::FrozenCloses(i8));
            }
            if c.acts(&self.recipe, &s.shared) {
                actions.push(Action::Command(i8));
            }
            if c.unnoticed.is_some() {
                actions.push(Action::Notice(i8));
            } else if !c.connected && !c.told_ended {
                actions.push(Action::Reconnect(i8));
            }
            for f in Fault::ALL {
                if f == Fault::LaggingRead || f == Fault::DeposedLeader {
                    if self.may(s, f) && self.fault_enabled(s, f, i) {
                        // One action per older state the read may be
                        // answered from (none older than the session saw).
                        for t in s.past.iter().filter(|t| t.last_zxid() >= c.last_zxid) {
                            actions.push(if f == Fault::LaggingRead {
                                Action::LaggingRead(i8, t.last_zxid())
                            } else {
                                Action::DeposedLeader(i8, t.last_zxid())
                            });
                        }
                    }
                } else if self.may(s, f) && self.fault_enabled(s, f, i) {
                    actions.push(Action::Fault(f, i8));
                }
            }
        }
    }

    fn next_state(&self, last: &State<R>, action: Action) -> Option<State<R>> {
        let mut s = last.clone();
        self.step(&mut s, action, &mut Log::off())?;
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut p = self.all_properties();
        if let Some(only) = self.only {
            p.retain(|x| x.name == only);
        }
        if self.stop.0.is_some() {
            p.push(Property::always(STOPPED, |w: &Self, _| !w.stop.is_set()));
        }
        p
    }

    fn format_action(&self, action: &Action) -> String {
        match action {
            Action::Serve(c) => format!("server serves client {c}'s next request"),
            Action::Command(c) => format!("client {c}'s application gives a command"),
            Action::Choose(c, k) => format!("client {c}'s application gives a command, choice {k}"),
            Action::Notice(c) => format!("client {c} notices its connection broke"),
            Action::Reconnect(c) => format!("client {c} reconnects"),
            Action::Fault(f, c) => format!("FAULT {f} on client {c}"),
            Action::LaggingRead(c, z) => {
                format!("FAULT lagging-read on client {c}: its read answered as of zxid {z}")
            }
            Action::ExpireCrashed(c) => format!("server expires crashed client {c}'s session"),
            Action::DeposedLeader(c, z) => format!(
                "FAULT deposed-leader on client {c}: its server, deposed, answers as of zxid {z}"
            ),
            Action::FrozenCloses(c) => {
                format!("client {c}'s frozen server closes the connection")
            }
        }
    }
}

/// Every client is settled: finished with the recipe (done, crashed, or
/// told that its session ended), a crashed client's session expired, and
/// nothing of it in flight.
pub fn settled<R: RecipeModel>(w: &World<R>, s: &State<R>) -> bool {
    s.clients.iter().all(|c| {
        if c.crashed {
            !c.session
        } else {
            c.finished(&w.recipe) && c.outbox.is_empty() && c.unnoticed.is_none()
        }
    })
}

/// A request in words.
pub fn op_text(op: &Op) -> String {
    match op {
        Op::Create { path, mode, .. } => {
            let mode = match mode {
                CreateMode::EphemeralSequential => " (ephemeral sequential)",
                CreateMode::Ephemeral => " (ephemeral)",
                CreateMode::PersistentSequential => " (sequential)",
                _ => "",
            };
            format!("create {path}{mode}")
        }
        Op::Exists { path, watch: true } => format!("exists {path} +watch"),
        Op::GetData { path, watch: true } => format!("get_data {path} +watch"),
        Op::GetChildren { path, watch: true } => format!("get_children {path} +watch"),
        Op::Delete { path, .. }
        | Op::Exists { path, .. }
        | Op::GetData { path, .. }
        | Op::SetData { path, .. }
        | Op::GetChildren { path, .. }
        | Op::Sync { path } => format!("{} {path}", op.name()),
        Op::Multi(ops) => format!("multi of {}", ops.len()),
    }
}

/// A reply in words.
pub fn reply_text(reply: &Result<Reply, ZkError>) -> String {
    match reply {
        Err(e) => format!("{e:?}"),
        Ok(Reply::Create { path, .. }) => format!("created {path}"),
        Ok(Reply::Delete) => "deleted".into(),
        Ok(Reply::Exists(Some(_))) => "exists".into(),
        Ok(Reply::Exists(None)) => "does not exist".into(),
        Ok(Reply::GetData { data, .. }) => format!("data {:?}", String::from_utf8_lossy(data)),
        Ok(Reply::SetData(_)) => "set".into(),
        Ok(Reply::GetChildren { children, .. }) => format!("children [{}]", children.join(", ")),
        Ok(Reply::Sync) => "synced".into(),
        Ok(Reply::Multi(r)) => format!("multi: {} results", r.len()),
    }
}
