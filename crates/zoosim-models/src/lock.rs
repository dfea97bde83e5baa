//! The lock's model: each client asks for the lock at once, makes one
//! access to a resource fenced by the lock's token while it holds it, and
//! releases it (recipes page, "Locks", with the guid for a create whose
//! reply was lost). The machine is [`zoosim_recipes::lock::Lock`], correct
//! or one of its [`LockVariant`]s — or any machine with the lock's
//! commands and outcomes ([`LockModel::with_machine`], for a deliberately
//! broken copy).
//!
//! Properties (each a named value below):
//!
//! * always [`MUTUAL_EXCLUSION`]: no two clients hold the lock while both
//!   their sessions are alive on the server (a holder whose session has
//!   expired without it knowing yet is ZooKeeper's known window, which the
//!   fence is for);
//! * always [`LIVE_HOLDER_NEVER_FENCED`]: the fenced resource never refuses the
//!   access of a holder whose session is alive (its token is below one
//!   the resource has already accepted: the lock went to someone newer
//!   while this holder's node still stood);
//! * always [`SUSPEND_WHILE_DISCONNECTED`] (the oracle's): no holder
//!   accesses the resource while its machine knows it is cut off — given
//!   Disconnected (the break noticed) and not Connected since. A holder
//!   that acts before it has noticed the break is the fence's case, not
//!   this;
//! * always [`TOLD_IS_TOLD`] (the oracle's): no holder accesses the
//!   resource after its client was told its session ended (the world lets
//!   an application that still wants to act do so, so that a machine
//!   that hides the end is caught);
//! * always [`NO_HERD`]: one write's watch events reach at most one
//!   connection;
//! * always [`NO_RECIPE_FAILURE`]: the machine never refuses a command nor
//!   meets an answer it has no way forward from;
//! * always [`NO_ORPHANS`]: once every client is settled (done, crashed
//!   and expired, or told its session ended) no node is left under the
//!   lock's directory;
//! * eventually [`EVERY_LIVE_CLIENT_ACQUIRES`]: every client whose
//!   process and session live acquires and releases. Fairness: every run
//!   of the model is finite (faults are bounded, every step moves a
//!   machine or the server on), and a run ends only when no action is
//!   enabled, so no action that stays enabled is ignored for ever (weak
//!   fairness); the server always expires a crashed client's session and
//!   a disconnected client always reconnects;
//! * sometimes: the resource is accessed, a waiter is woken, the guid
//!   search finds a node whose create reply was lost, a suspended holder
//!   resumes, a lock is lost, a client finishes — and every fault in the
//!   budget is taken (see [`super::Fault::property`]) — so that nothing
//!   above passes for lack of reaching it.

use stateright::Property;

use zoosim_core::check::Property as Claim;

use super::{
    settled, Conn, Faults, Log, Maker, RecipeModel, RenameMachine, State, Symmetry, Told, World,
};
use zoosim_recipes::lock::{Lock, LockCommand, LockOutcome, LockVariant};
use zoosim_recipes::Machine;

/// What the model is, for `zoosim list`.
pub const ABOUT: &str =
    "the exclusive lock: each client acquires, makes one fenced access, releases";

/// The directory the clients lock.
pub const DIR: &str = "/lock";

/// No two clients hold while both their sessions are alive.
pub const MUTUAL_EXCLUSION: Claim = Claim::new(
    "mutual-exclusion",
    "no two clients hold the lock while both their sessions are alive",
);
/// The fence never refuses a live holder. Not the oracle's
/// `fenced-exclusion` (accepted effects in token order, each from the
/// token's holder at the time), so not its name: the lock family's
/// models and the election's share this one.
pub const LIVE_HOLDER_NEVER_FENCED: Claim = Claim::new(
    "live-holder-never-fenced",
    "the fenced resource never refuses a holder (or an elected leader) whose session is alive",
);
pub use super::NO_HERD;
pub use super::NO_ORPHANS;
pub use super::NO_RECIPE_FAILURE;
/// No holder acts while its machine knows it is disconnected: the
/// oracle's, judged on the world (the lock family's models and the
/// election's share it).
pub use zoosim_core::check::lock::SUSPEND_WHILE_DISCONNECTED;
/// No holder acts after being told its session ended: the oracle's,
/// judged on the world (the lock family's models and the election's
/// share it).
pub use zoosim_core::check::lock::TOLD_IS_TOLD;
/// Every live client acquires and releases: the unbounded `eventually`
/// the oracle's `liveness` bounds in time.
pub const EVERY_LIVE_CLIENT_ACQUIRES: Claim = Claim::new(
    "every-live-client-acquires",
    "every client whose process and session live acquires and releases",
);

/// Makes a client's machine: `(dir, guid, variant)`.
pub type MakeMachine<M> = fn(&str, &str, LockVariant) -> M;

/// The lock as a model, running `variant` of machine `M`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockModel<M = Lock> {
    /// The machine's variant.
    pub variant: LockVariant,
    make: Maker<MakeMachine<M>>,
    /// Renames a client's machine, for the symmetry reduction (known for
    /// [`Lock`] only).
    rename: Option<Maker<RenameMachine<M>>>,
}

impl LockModel<Lock> {
    /// The lock's model for `variant` of [`Lock`].
    pub fn new(variant: LockVariant) -> LockModel<Lock> {
        LockModel {
            variant,
            make: Maker(Lock::with_variant),
            rename: Some(Maker(Lock::rename)),
        }
    }
}

impl<M> LockModel<M> {
    /// The lock's model over another machine with the lock's commands and
    /// outcomes, made by `make` (e.g. a deliberately broken copy).
    pub fn with_machine(variant: LockVariant, make: MakeMachine<M>) -> LockModel<M> {
        LockModel {
            variant,
            make: Maker(make),
            rename: None,
        }
    }
}

/// The lock's buggy variants the model knows (the exclusive lock's; the
/// shared lock's reader variant needs the shared lock's model).
pub const VARIANTS: [LockVariant; 6] = [
    LockVariant::Correct,
    LockVariant::BlindRetry,
    LockVariant::Herd,
    LockVariant::SortByFullName,
    LockVariant::StallOnVanishedPredecessor,
    LockVariant::SearchWithoutSync,
];

/// Where one client's application is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum App {
    /// About to ask for the lock.
    Start,
    /// Asked; waiting for it.
    Waiting,
    /// Holds it with `token` (its access is fenced by it); `suspended`
    /// while its machine says its connection is broken (it must not act).
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

/// What a holder's acts were told, as sticky flags for
/// [`SUSPEND_WHILE_DISCONNECTED`] and [`TOLD_IS_TOLD`] (the lock family's
/// models and the election's keep one in what their clients share).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Acts {
    /// A holder acted while its machine knew it was disconnected.
    pub while_disconnected: bool,
    /// A holder acted after it was told its session ended.
    pub after_told_ended: bool,
}

impl Acts {
    /// A holder acts, its connection as `conn` says: noted if it should
    /// not have.
    pub(crate) fn note(&mut self, conn: Conn, log: &mut Log) {
        match conn.told {
            Told::Connected => {}
            Told::Disconnected => {
                self.while_disconnected = true;
                log.note(|| "  ... while its machine knows it is DISCONNECTED".into());
            }
            Told::SessionEnded => {
                self.after_told_ended = true;
                log.note(|| "  ... after it was TOLD ITS SESSION ENDED".into());
            }
        }
    }
}

/// What the clients share: the fence's highest token, and sticky flags
/// for the properties (no counts, no logs: see the module's reductions).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Shared {
    /// The highest token the fenced resource accepted.
    pub fence: Option<u64>,
    /// The fence accepted an access.
    pub accessed: bool,
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

impl<M> RecipeModel for LockModel<M>
where
    M: Machine<Command = LockCommand, Outcome = LockOutcome> + Send + Sync + 'static,
{
    type Machine = M;
    type App = App;
    type Shared = Shared;
    const CLAIMS: &'static [Claim] = &[
        MUTUAL_EXCLUSION,
        LIVE_HOLDER_NEVER_FENCED,
        SUSPEND_WHILE_DISCONNECTED,
        TOLD_IS_TOLD,
        NO_HERD,
        NO_RECIPE_FAILURE,
        NO_ORPHANS,
        EVERY_LIVE_CLIENT_ACQUIRES,
    ];

    fn name(&self) -> &'static str {
        "lock"
    }

    fn dirs(&self) -> Vec<String> {
        vec![DIR.to_owned()]
    }

    /// Sound where the machine compares guids only for equality: every
    /// variant but sort-by-full-name, which orders contenders by guid.
    /// Then clients differ only by their guids (in their nodes' names,
    /// their sessions, the server's watch table), which the world renames
    /// consistently; the application and the shared record name nobody
    /// (a token is a sequence number).
    fn symmetry(&self) -> Result<Symmetry<Self>, &'static str> {
        if self.variant == LockVariant::SortByFullName {
            return Err(
                "the sort-by-full-name lock orders contenders by guid: clients with \
                        other guids behave otherwise, so they are not interchangeable",
            );
        }
        let Some(Maker(rename)) = self.rename else {
            return Err("this machine has no renaming (only the lock's own machine has)");
        };
        Ok(Symmetry {
            name: |_, i| guid(i),
            machine: rename,
        })
    }

    fn client(&self, i: usize) -> (M, App) {
        // Guids that do not sort like the clients' order of creation, as
        // random ones would not (the sort-by-full-name bug needs it).
        ((self.make.0)(DIR, &guid(i), self.variant), App::Start)
    }

    fn wants(&self, app: &App) -> bool {
        matches!(
            app,
            App::Start
                | App::Holding {
                    suspended: false,
                    ..
                }
        )
    }

    /// The application acts on what its machine tells it, whatever the
    /// world knows: a holder whose machine hides a suspension or the
    /// session's end acts, and is judged for it.
    fn acts(&self, _: &M, app: &App, _: &Shared, _: Told) -> bool {
        self.wants(app)
    }

    /// A holder's command is its access: judged by what its machine had
    /// been told.
    fn command_in(
        &self,
        app: &mut App,
        shared: &mut Shared,
        conn: Conn,
        log: &mut Log,
    ) -> LockCommand {
        let access = matches!(app, App::Holding { .. });
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
        match *app {
            App::Holding { token, .. } => {
                // The critical section: one fenced access, then release.
                // A holder whose session has expired (it does not know
                // yet) is what the fence is for: its access may be
                // refused. A live holder's must not be.
                let accepted = shared.fence.is_none_or(|h| token >= h);
                log.note(|| {
                    format!(
                        "the holder accesses the resource with token {token}: {}",
                        if accepted { "accepted" } else { "REFUSED" }
                    )
                });
                if accepted {
                    shared.fence = Some(token);
                    shared.accessed = true;
                } else if live {
                    shared.live_refused = true;
                }
                *app = App::Releasing;
                LockCommand::Release
            }
            _ => {
                *app = App::Waiting;
                LockCommand::Acquire
            }
        }
    }

    fn outcome(&self, app: &mut App, shared: &mut Shared, outcome: &LockOutcome) {
        match outcome {
            LockOutcome::Acquired { token, .. } => {
                *app = App::Holding {
                    token: *token,
                    suspended: false,
                };
            }
            LockOutcome::Suspended => {
                if let App::Holding { suspended, .. } = app {
                    *suspended = true;
                }
            }
            LockOutcome::Resumed => {
                if let App::Holding { suspended, .. } = app {
                    *suspended = false;
                    shared.resumed = true;
                }
            }
            LockOutcome::Released => {
                shared.released = true;
                *app = App::Done;
            }
            LockOutcome::Lost { .. } => {
                shared.lost = true;
                *app = App::Lost;
            }
            LockOutcome::Recovered { found } => shared.recovered |= *found,
            LockOutcome::Woken { .. } => shared.woken = true,
            LockOutcome::RevokeAsked => {}
            LockOutcome::Refused { .. } | LockOutcome::Failed(_) => shared.failed = true,
        }
    }

    fn finished(&self, app: &App) -> bool {
        matches!(app, App::Done | App::Lost)
    }

    fn properties(&self, faults: &Faults) -> Vec<Property<World<Self>>> {
        let mut p = vec![
            Property::always(MUTUAL_EXCLUSION.name, |_, s: &State<Self>| holders(s) <= 1),
            Property::always(LIVE_HOLDER_NEVER_FENCED.name, |_, s: &State<Self>| {
                !s.shared.live_refused
            }),
            Property::always(SUSPEND_WHILE_DISCONNECTED.name, |_, s: &State<Self>| {
                !s.shared.acts.while_disconnected
            }),
            Property::always(TOLD_IS_TOLD.name, |_, s: &State<Self>| {
                !s.shared.acts.after_told_ended
            }),
            Property::always(NO_HERD.name, |_, s: &State<Self>| !s.herd),
            Property::always(NO_RECIPE_FAILURE.name, |_, s: &State<Self>| {
                !s.shared.failed
            }),
            Property::always(NO_ORPHANS.name, |w, s: &State<Self>| {
                !settled(w, s) || s.tree.node(DIR).is_none_or(|d| d.children.is_empty())
            }),
            // Monotone along every run (a finished application, a crash
            // and an expired session are for good), so the checker's
            // "held somewhere on the path" is the same on every path into
            // a state: the joins of the state graph lose nothing.
            Property::eventually(EVERY_LIVE_CLIENT_ACQUIRES.name, |_, s: &State<Self>| {
                s.clients
                    .iter()
                    .all(|c| c.app == App::Done || c.crashed || !c.session)
            }),
            Property::sometimes("resource-accessed", |_, s: &State<Self>| s.shared.accessed),
            Property::sometimes("released", |_, s: &State<Self>| s.shared.released),
        ];
        // The phases only faults lead to, where their faults are in the
        // budget (a waiter is woken in any run of two clients or more).
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

/// Client `i`'s guid. Guids that do not sort like the clients' order of
/// creation, as random ones would not (the sort-by-full-name bug needs
/// it).
fn guid(i: usize) -> String {
    format!("g{}", 9 - i)
}

/// Clients that hold the lock with their session alive on the server
/// (suspended or not, crashed or not: their node stands, so nobody else
/// may hold).
fn holders<M>(s: &State<LockModel<M>>) -> usize
where
    M: Machine<Command = LockCommand, Outcome = LockOutcome> + Send + Sync + 'static,
{
    s.clients
        .iter()
        .filter(|c| c.session && matches!(c.app, App::Holding { .. }))
        .count()
}
