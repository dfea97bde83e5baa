//! The shared (read/write) lock's model, as the simulation's shared-lock
//! workload runs it: client 0 (and every third) writes, the others read;
//! each asks for its side of the lock at once, makes one access to a
//! resource fenced by the lock's token while it holds it — a writer's
//! write raises the fence, a reader's read is only fenced by it — and
//! releases (recipes page, "Shared Locks"). The machine is
//! [`zoosim_recipes::lock::Lock`] in read or write mode, correct or
//! [`LockVariant::ReaderWaitsOnAny`] — or any machine with the lock's
//! commands and outcomes ([`SharedLockModel::with_machine`], for a
//! deliberately broken copy).
//!
//! Properties (each a named value below):
//!
//! * always [`RW_EXCLUSION`]: no writer holds while another client holds,
//!   both sessions alive on the server (readers may hold together; a
//!   holder whose session has expired without it knowing yet is
//!   ZooKeeper's window, which the fence is for);
//! * always [`LIVE_HOLDER_NEVER_FENCED`]: the fenced resource never refuses the
//!   access of a holder whose session is alive (the simulation's oracle:
//!   writes come in token order, reads are no older than the last write);
//! * always [`SUSPEND_WHILE_DISCONNECTED`], [`TOLD_IS_TOLD`]: no holder
//!   accesses the resource while its machine knows it is disconnected,
//!   nor after it was told its session ended (the oracle's, as for the
//!   lock);
//! * always [`NO_HERD`], with the readers' exception: the deletion of a
//!   node wakes at most one client unless every client it wakes is a
//!   reader; and a client is woken only by the deletion of its **nearest
//!   blocker** — for a writer the next lower node of either kind, for a
//!   reader the next lower write node — so no reader is woken by a
//!   reader's node, and nobody is woken while a node between the deleted
//!   one and its own still blocks it. That second half is what "no client
//!   woken only to wait again" can honestly mean here: a writer behind two
//!   readers is woken by the nearer reader's release and waits again on
//!   the other one (the recipe's own design: a writer watches the next
//!   lower node), as is a waiter whose predecessor gave up (expired,
//!   crashed) without holding; neither wake-up was for nothing;
//! * always [`NO_RECIPE_FAILURE`], [`NO_ORPHANS`]: as for the lock;
//! * eventually [`EVERY_LIVE_CLIENT_ACQUIRES`]: every client whose process
//!   and session live acquires and releases. Fairness as for the lock:
//!   every run is finite and ends only when no action is enabled (weak
//!   fairness), the server always expires a crashed client's session and
//!   a disconnected client always reconnects;
//! * sometimes: the resource is written and read, two readers hold
//!   together, one deletion wakes two readers, a waiter is woken, a client
//!   releases, and with their faults the guid search finds its node, a
//!   suspended holder resumes, a lock is lost; and every fault in the
//!   budget is taken.

use std::collections::BTreeSet;

use stateright::Property;

use zoosim_core::check::Property as Claim;

use super::lock::Acts;
use super::{settled, Conn, Faults, Log, Maker, RecipeModel, State, Told, World};
use zoosim_recipes::lock::{Lock, LockCommand, LockMode, LockOutcome, LockVariant};
use zoosim_recipes::{base_name, sequence_of, Machine};

/// The directory the clients lock.
pub const DIR: &str = "/rw";

/// No writer holds together with another holder, both sessions alive.
pub const RW_EXCLUSION: Claim = Claim::new(
    "read-write-exclusion",
    "no writer holds the lock together with another holder while both their sessions are alive",
);
pub use super::lock::EVERY_LIVE_CLIENT_ACQUIRES;
pub use super::lock::LIVE_HOLDER_NEVER_FENCED;
pub use super::lock::{SUSPEND_WHILE_DISCONNECTED, TOLD_IS_TOLD};
pub use super::NO_HERD;
pub use super::NO_ORPHANS;
pub use super::NO_RECIPE_FAILURE;

/// Makes a client's machine: `(dir, guid, mode, variant)`.
pub type MakeMachine<M> = fn(&str, &str, LockMode, LockVariant) -> M;

/// What the shared lock's model is, in a line (`zoosim list`).
pub const ABOUT: &str =
    "the shared read/write lock: clients 0, 3, ... write, the others read; one fenced access each";

/// The shared lock's variants the model knows.
pub const VARIANTS: [LockVariant; 2] = [LockVariant::Correct, LockVariant::ReaderWaitsOnAny];

/// Client `i`'s side of the lock, as the simulation's workload assigns it:
/// every third client (0, 3, ...) writes, the others read.
pub fn mode_of(i: usize) -> LockMode {
    if i % 3 == 0 {
        LockMode::Write
    } else {
        LockMode::Read
    }
}

/// Client `i`'s guid. Guids that do not sort like the clients' order of
/// creation, as random ones would not.
pub fn guid_of(i: usize) -> String {
    format!("g{}", 9 - i)
}

/// The shared lock as a model, running `variant` of machine `M`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedLockModel<M = Lock> {
    /// The machine's variant.
    pub variant: LockVariant,
    make: Maker<MakeMachine<M>>,
}

impl SharedLockModel<Lock> {
    /// The shared lock's model for `variant` of [`Lock`].
    pub fn new(variant: LockVariant) -> SharedLockModel<Lock> {
        SharedLockModel {
            variant,
            make: Maker(Lock::shared),
        }
    }
}

impl<M> SharedLockModel<M> {
    /// The model over another machine with the lock's commands and
    /// outcomes, made by `make` (e.g. a deliberately broken copy).
    pub fn with_machine(variant: LockVariant, make: MakeMachine<M>) -> SharedLockModel<M> {
        SharedLockModel {
            variant,
            make: Maker(make),
        }
    }
}

/// Where one client's application is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum At {
    /// About to ask for the lock.
    Start,
    /// Asked; waiting for it.
    Waiting,
    /// Holds it with `token`; `suspended` while its connection is broken.
    Holding {
        /// The fencing token.
        token: u64,
        /// The connection broke; not acting.
        suspended: bool,
    },
    /// Asked to release it.
    Releasing,
    /// Released: done.
    Done,
    /// The lock was lost (the session ended or the node vanished).
    Lost,
}

/// One client's application.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct App {
    /// A reader (else a writer).
    pub reader: bool,
    /// Where it is.
    pub at: At,
    /// The node (base name) whose deletion woke it last, until it holds
    /// or is over: what [`NO_HERD`] judges.
    pub woken: Option<String>,
}

/// What the clients share: the fence, and sticky flags for the properties.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Shared {
    /// The highest token a write access was accepted with.
    pub fence: Option<u64>,
    /// The fence accepted a write.
    pub written: bool,
    /// The fence accepted a read.
    pub read: bool,
    /// The fence refused a holder whose session was alive.
    pub live_refused: bool,
    /// The machine refused a command or failed.
    pub failed: bool,
    /// A guid search after a lost create found the node.
    pub recovered: bool,
    /// A waiter was woken by a deletion.
    pub woken: bool,
    /// A suspended holder resumed.
    pub resumed: bool,
    /// A lock was lost.
    pub lost: bool,
    /// A client released the lock.
    pub released: bool,
    /// What the holders' accesses were told.
    pub acts: Acts,
}

/// A holder's access to the fenced resource with `token` (a write raises
/// the fence, a read is only fenced by it: the simulation's
/// `FencedResource`). Returns whether it was accepted.
pub(super) fn access(fence: &mut Option<u64>, reader: bool, token: u64, log: &mut Log) -> bool {
    let accepted = fence.is_none_or(|h| token >= h);
    log.note(|| {
        format!(
            "the holder {} the resource with token {token}: {}",
            if reader { "reads" } else { "writes" },
            if accepted { "accepted" } else { "REFUSED" }
        )
    });
    if accepted && !reader {
        *fence = Some(token);
    }
    accepted
}

/// Whether the deletion of `deleted` may wake the waiter whose node is
/// `own` (both base names under the recipe's directory, whose children
/// now are `children`): `deleted` blocked it (`blocks`), and no node still
/// standing between the two blocks it — the deleted node was its nearest
/// blocker.
pub(super) fn nearest_blocker(
    children: &BTreeSet<String>,
    own: &str,
    blocks: impl Fn(&str) -> bool,
    deleted: &str,
) -> bool {
    let (Some(d), Some(o)) = (sequence_of(deleted), sequence_of(own)) else {
        return false;
    };
    blocks(deleted)
        && d < o
        && !children
            .iter()
            .any(|c| blocks(c) && sequence_of(c).is_some_and(|s| d < s && s < o))
}

/// What blocks a shared lock's waiter: any node blocks a writer, only a
/// write node a reader.
pub(super) fn blocks_shared(reader: bool) -> impl Fn(&str) -> bool {
    move |name: &str| name.contains("-write-") || (!reader && name.contains("-read-"))
}

/// Client `i`'s node under `dir` (its base name), found by its guid.
pub(super) fn own_node<'t, R: RecipeModel>(
    s: &'t State<R>,
    dir: &str,
    i: usize,
) -> Option<&'t str> {
    let prefix = format!("{}-", guid_of(i));
    s.tree
        .node(dir)?
        .children
        .iter()
        .find(|c| c.starts_with(&prefix))
        .map(String::as_str)
}

/// [`NO_HERD`] over the clients' last wake-ups (`woken(i)`: the node that
/// woke client `i` and whether it reads; `blocks(reader)`: what blocks
/// such a waiter): one deletion woke one client or only readers, each by
/// its nearest blocker.
pub(super) fn no_herd<R: RecipeModel, B: Fn(&str) -> bool>(
    s: &State<R>,
    dir: &str,
    woken: impl Fn(usize) -> Option<(String, bool)>,
    blocks: impl Fn(bool) -> B,
) -> bool {
    let wakes: Vec<(usize, String, bool)> = (0..s.clients.len())
        .filter_map(|i| woken(i).map(|(p, r)| (i, p, r)))
        .collect();
    let children = s.tree.node(dir).map(|n| &n.children);
    wakes.iter().all(|(i, path, reader)| {
        let with: Vec<_> = wakes.iter().filter(|w| &w.1 == path).collect();
        let herd = with.len() > 1 && with.iter().any(|w| !w.2);
        let nearest = match (children, own_node(s, dir, *i)) {
            (Some(children), Some(own)) => nearest_blocker(children, own, blocks(*reader), path),
            // Its own node is gone (its session ended with the same
            // step): nothing to wait for any more.
            _ => true,
        };
        !herd && nearest
    })
}

/// Two clients woken by the same deletion, both readers.
pub(super) fn readers_woken_together(
    n: usize,
    woken: impl Fn(usize) -> Option<(String, bool)>,
) -> bool {
    let readers: Vec<String> = (0..n)
        .filter_map(|i| woken(i).filter(|w| w.1).map(|w| w.0))
        .collect();
    readers
        .iter()
        .enumerate()
        .any(|(k, p)| readers[k + 1..].contains(p))
}

impl<M> RecipeModel for SharedLockModel<M>
where
    M: Machine<Command = LockCommand, Outcome = LockOutcome> + Send + Sync + 'static,
{
    type Machine = M;
    type App = App;
    type Shared = Shared;
    const CLAIMS: &'static [Claim] = &[
        RW_EXCLUSION,
        LIVE_HOLDER_NEVER_FENCED,
        SUSPEND_WHILE_DISCONNECTED,
        TOLD_IS_TOLD,
        NO_HERD,
        NO_RECIPE_FAILURE,
        NO_ORPHANS,
        EVERY_LIVE_CLIENT_ACQUIRES,
    ];

    fn name(&self) -> &'static str {
        "shared-lock"
    }

    fn dirs(&self) -> Vec<String> {
        vec![DIR.to_owned()]
    }

    fn client(&self, i: usize) -> (M, App) {
        let mode = mode_of(i);
        let app = App {
            reader: mode.is_shared(),
            at: At::Start,
            woken: None,
        };
        ((self.make.0)(DIR, &guid_of(i), mode, self.variant), app)
    }

    fn wants(&self, app: &App) -> bool {
        matches!(
            app.at,
            At::Start
                | At::Holding {
                    suspended: false,
                    ..
                }
        )
    }

    /// As the lock's: the application acts on what its machine tells it.
    fn acts(&self, _: &M, app: &App, _: &Shared, _: Told) -> bool {
        self.wants(app)
    }

    /// As the lock's: a holder's command is its access, judged by what its
    /// machine had been told.
    fn command_in(
        &self,
        app: &mut App,
        shared: &mut Shared,
        conn: Conn,
        log: &mut Log,
    ) -> LockCommand {
        let access = matches!(app.at, At::Holding { .. });
        let cmd = self.command(app, shared, conn.live, log);
        if access {
            shared.acts.note(conn, log);
        }
        cmd
    }

    fn command(
        &self,
        app: &mut App,
        shared: &mut Shared,
        live: bool,
        log: &mut Log,
    ) -> LockCommand {
        match app.at {
            At::Holding { token, .. } => {
                // The critical section: one fenced access, then release.
                // A holder whose session has expired (it does not know
                // yet) is what the fence is for: its access may be
                // refused. A live holder's must not be.
                if access(&mut shared.fence, app.reader, token, log) {
                    if app.reader {
                        shared.read = true;
                    } else {
                        shared.written = true;
                    }
                } else if live {
                    shared.live_refused = true;
                }
                app.at = At::Releasing;
                LockCommand::Release
            }
            _ => {
                app.at = At::Waiting;
                LockCommand::Acquire
            }
        }
    }

    fn outcome(&self, app: &mut App, shared: &mut Shared, outcome: &LockOutcome) {
        match outcome {
            LockOutcome::Acquired { token, .. } => {
                app.woken = None;
                app.at = At::Holding {
                    token: *token,
                    suspended: false,
                };
            }
            LockOutcome::Suspended => {
                if let At::Holding { suspended, .. } = &mut app.at {
                    *suspended = true;
                }
            }
            LockOutcome::Resumed => {
                if let At::Holding { suspended, .. } = &mut app.at {
                    *suspended = false;
                    shared.resumed = true;
                }
            }
            LockOutcome::Released => {
                shared.released = true;
                app.woken = None;
                app.at = At::Done;
            }
            LockOutcome::Lost { .. } => {
                shared.lost = true;
                app.woken = None;
                app.at = At::Lost;
            }
            LockOutcome::Recovered { found } => shared.recovered |= *found,
            LockOutcome::Woken { path } => {
                shared.woken = true;
                app.woken = Some(base_name(path).to_owned());
            }
            LockOutcome::RevokeAsked => {}
            LockOutcome::Refused { .. } | LockOutcome::Failed(_) => shared.failed = true,
        }
    }

    fn finished(&self, app: &App) -> bool {
        matches!(app.at, At::Done | At::Lost)
    }

    fn properties(&self, faults: &Faults) -> Vec<Property<World<Self>>> {
        let mut p = vec![
            Property::always(RW_EXCLUSION.name, |_, s: &State<Self>| {
                let live: Vec<bool> = s
                    .clients
                    .iter()
                    .filter(|c| c.session && matches!(c.app.at, At::Holding { .. }))
                    .map(|c| c.app.reader)
                    .collect();
                live.len() <= 1 || live.iter().all(|reader| *reader)
            }),
            Property::always(LIVE_HOLDER_NEVER_FENCED.name, |_, s: &State<Self>| {
                !s.shared.live_refused
            }),
            Property::always(SUSPEND_WHILE_DISCONNECTED.name, |_, s: &State<Self>| {
                !s.shared.acts.while_disconnected
            }),
            Property::always(TOLD_IS_TOLD.name, |_, s: &State<Self>| {
                !s.shared.acts.after_told_ended
            }),
            Property::always(NO_HERD.name, |_, s: &State<Self>| {
                no_herd(s, DIR, |i| woken(s, i), blocks_shared)
            }),
            Property::always(NO_RECIPE_FAILURE.name, |_, s: &State<Self>| {
                !s.shared.failed
            }),
            Property::always(NO_ORPHANS.name, |w, s: &State<Self>| {
                !settled(w, s) || s.tree.node(DIR).is_none_or(|d| d.children.is_empty())
            }),
            // Monotone along every run, as the lock's.
            Property::eventually(EVERY_LIVE_CLIENT_ACQUIRES.name, |_, s: &State<Self>| {
                s.clients
                    .iter()
                    .all(|c| c.app.at == At::Done || c.crashed || !c.session)
            }),
            Property::sometimes("resource-written", |_, s: &State<Self>| s.shared.written),
            Property::sometimes("resource-read", |_, s: &State<Self>| s.shared.read),
            Property::sometimes("released", |_, s: &State<Self>| s.shared.released),
        ];
        // Two readers exist from three clients on; a waiter from two.
        p.push(Property::sometimes(
            "readers-hold-together",
            |w, s: &State<Self>| {
                w.clients < 3
                    || s.clients
                        .iter()
                        .filter(|c| c.app.reader && matches!(c.app.at, At::Holding { .. }))
                        .count()
                        >= 2
            },
        ));
        p.push(Property::sometimes(
            "readers-woken-together",
            |w, s: &State<Self>| {
                w.clients < 3 || readers_woken_together(s.clients.len(), |i| woken(s, i))
            },
        ));
        p.push(Property::sometimes("waiter-woken", |w, s: &State<Self>| {
            s.shared.woken || w.clients < 2
        }));
        if faults.lost_reply > 0 {
            p.push(Property::sometimes(
                "guid-search-found-node",
                |_, s: &State<Self>| s.shared.recovered,
            ));
        }
        if faults.broken_connection > 0 {
            p.push(Property::sometimes(
                "holder-resumed",
                |_, s: &State<Self>| s.shared.resumed,
            ));
        }
        if faults.forced_expiry > 0 {
            p.push(Property::sometimes("lock-lost", |_, s: &State<Self>| {
                s.shared.lost
            }));
        }
        p
    }
}

/// Client `i`'s last wake-up and whether it reads.
fn woken<M>(s: &State<SharedLockModel<M>>, i: usize) -> Option<(String, bool)>
where
    M: Machine<Command = LockCommand, Outcome = LockOutcome> + Send + Sync + 'static,
{
    let app = &s.clients[i].app;
    app.woken.clone().map(|p| (p, app.reader))
}
