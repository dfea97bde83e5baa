//! The revocable shared lock's model, as the simulation's revocable-lock
//! workload runs it: holders (every third writes, the others read, as in
//! the shared lock) ask for their side of a revocable lock at once, and
//! one more client, the last, revokes: it lists the lock's directory and
//! writes "unlock" into the lowest node, again whenever the lowest node
//! changes (recipes page, "Revocable Shared Locks"). A holder holds until
//! it is asked to let go; then it makes one fenced access and consents by
//! releasing. The holders' machine is [`Lock`] made revocable (or any
//! machine with the lock's commands and outcomes,
//! [`RevocableModel::with_machine`], for a deliberately broken copy); the
//! revoker's is [`Revoker`], driven by [`RevokeAll`], which does what the
//! workload's revoker does around it (list, pick the lowest node).
//!
//! The revoker's session is not faulted (its application is finished, for
//! the world, once it has started: faults hit the holders); it keeps
//! revoking while the lowest node is one it has not asked yet, and waits
//! on a child watch otherwise, so that every holder is asked in the end
//! (each becomes the lowest in turn).
//!
//! Properties (each a named value below):
//!
//! * always [`RW_EXCLUSION`], [`LIVE_HOLDER_NEVER_FENCED`], [`NO_HERD`] (with the
//!   readers' exception, each wake-up by the nearest blocker): as for the
//!   shared lock ([`super::shared_lock`]), over the holders;
//! * always [`SUSPEND_WHILE_DISCONNECTED`], [`TOLD_IS_TOLD`]: no holder
//!   makes its last access while its machine knows it is disconnected,
//!   nor after it was told its session ended (the oracle's, as for the
//!   lock);
//! * always [`NO_RECIPE_FAILURE`] (holders' and revoker's machines) and
//!   [`NO_ORPHANS`];
//! * eventually [`EVERY_REVOKED_HOLDER_LETS_GO`]: every holder whose process and
//!   session live is asked to let go, sees it (its machine reports
//!   `RevokeAsked`) and releases. Holders let go only when asked, so this
//!   is the revocation reaching them. Fairness: as for the lock (finite
//!   runs, weak fairness; crashed sessions always expire, broken
//!   connections always reconnect);
//! * sometimes: the resource is written and read, two readers hold
//!   together, a holder sees a revocation, the revoker finds a node gone,
//!   a waiter is woken, a holder releases, and with their faults the guid
//!   search finds its node, a suspended holder resumes, a lock is lost;
//!   and every fault in the budget is taken.

use std::collections::VecDeque;

use stateright::Property;

use zoosim_core::check::Property as Claim;

use super::lock::Acts;
use super::shared_lock::{
    access, blocks_shared, guid_of, mode_of, no_herd, readers_woken_together,
};
use super::{settled, Conn, Faults, Log, Maker, ModelError, RecipeModel, State, Told, World};
use zoosim_core::proto::{EventType, Op, Reply, SessionEvent, ZkError};
use zoosim_recipes::lock::{Lock, LockCommand, LockMode, LockOutcome, LockVariant};
use zoosim_recipes::revocable::{Revoker, RevokerCommand, RevokerOutcome};
use zoosim_recipes::{
    base_name, child_path, classify, sequence_of, Failure, Input, Machine, OpId, Output,
};

/// The lock's directory.
pub const DIR: &str = "/revocable";

pub use super::lock::LIVE_HOLDER_NEVER_FENCED;
pub use super::lock::{SUSPEND_WHILE_DISCONNECTED, TOLD_IS_TOLD};
pub use super::shared_lock::RW_EXCLUSION;
pub use super::NO_HERD;
pub use super::NO_ORPHANS;
pub use super::NO_RECIPE_FAILURE;
/// Every revoked live holder lets go: the unbounded `eventually` the
/// oracle's `revocation-honoured` bounds in time (so not its name).
pub const EVERY_REVOKED_HOLDER_LETS_GO: Claim = Claim::new(
    "every-revoked-holder-lets-go",
    "every holder whose process and session live is asked to let go, sees it, and releases",
);

/// Makes a holder's machine: `(dir, guid, mode)`.
pub type MakeMachine<M> = fn(&str, &str, LockMode) -> M;

/// A holder's machine: one side of the shared lock, made revocable.
pub fn revocable_lock(dir: &str, guid: &str, mode: LockMode) -> Lock {
    Lock::shared(dir, guid, mode, LockVariant::Correct).revocable()
}

/// The revocable shared lock as a model: `holders` holders and a revoker.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RevocableModel<M = Lock> {
    /// How many holders (the revoker is client number `holders`).
    pub holders: usize,
    make: Maker<MakeMachine<M>>,
}

/// What the model is, for `zoosim list`.
pub const ABOUT: &str = "the revocable shared lock: every client but the last holds \
     (every third writes) until asked to let go; the last revokes";

impl RevocableModel<Lock> {
    /// The model with `holders` revocable [`Lock`]s.
    pub fn new(holders: usize) -> RevocableModel<Lock> {
        RevocableModel {
            holders,
            make: Maker(revocable_lock),
        }
    }

    /// The model for a world of `clients` clients: the last revokes, the
    /// others hold (so at least 2).
    pub fn for_clients(clients: usize) -> Result<RevocableModel<Lock>, String> {
        if clients < 2 {
            return Err(format!(
                "the revocable lock's model takes at least 2 clients (a holder and the \
                 revoker), not {clients}"
            ));
        }
        Ok(RevocableModel::new(clients - 1))
    }
}

impl<M> RevocableModel<M> {
    /// The model over another holder machine, made by `make` (e.g. a
    /// deliberately broken copy).
    pub fn with_machine(holders: usize, make: MakeMachine<M>) -> RevocableModel<M> {
        RevocableModel {
            holders,
            make: Maker(make),
        }
    }
}

impl<M> RevocableModel<M>
where
    M: Machine<Command = LockCommand, Outcome = LockOutcome> + Send + Sync + 'static,
{
    /// The model's world: the holders and the revoker (`holders + 1`
    /// clients), with `faults`.
    pub fn world(self, faults: Faults) -> Result<World<Self>, ModelError> {
        if self.holders == 0 {
            return Err(ModelError::Size(
                "a revocable lock's model takes at least 1 holder".into(),
            ));
        }
        let clients = self.holders + 1;
        World::new(self, clients, faults)
    }
}

/// What the revoker's application asks of [`RevokeAll`]: start revoking.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct RevokeEveryone;

/// What [`RevokeAll`] reports: the [`Revoker`]'s outcomes, and failures of
/// its own listing.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum RevokeAllOutcome {
    /// The revoker's outcome for one node.
    Revoker(RevokerOutcome),
    /// The listing met an answer it has no way forward from.
    Failed(ZkError),
}

/// The revoker's application around a [`Revoker`], as the simulation's
/// revoker: list the directory (with a child watch), revoke the lowest
/// node (the holder's, or the first reader's) unless it has already, list
/// again; with nothing new to revoke, wait for the watch.
/// Its listing's request ids are odd, the [`Revoker`]'s (doubled) even.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct RevokeAll {
    dir: String,
    revoker: Revoker,
    started: bool,
    lists: OpId,
    /// The listing in flight (its id).
    listing: Option<OpId>,
    /// A listing lost to ConnectionLoss: list again once reconnected.
    relist: bool,
    /// A revocation is in progress in the [`Revoker`].
    revoking: bool,
    /// The node (base name) revoked last. The lowest node only ever moves
    /// up (sequence numbers grow), so a lowest node is new unless it is
    /// this one: no longer list of revoked nodes to keep.
    revoked: Option<String>,
    over: bool,
    out: VecDeque<Output<RevokeAllOutcome>>,
}

impl RevokeAll {
    /// A revoker of every node under `dir`.
    pub fn new(dir: &str) -> RevokeAll {
        RevokeAll {
            dir: dir.to_owned(),
            revoker: Revoker::new(),
            started: false,
            lists: 0,
            listing: None,
            relist: false,
            revoking: false,
            revoked: None,
            over: false,
            out: VecDeque::new(),
        }
    }

    /// Lists the directory, with a child watch: the next change of the
    /// directory wakes the revoker if it is idle then (while it revokes
    /// or lists, the list that follows shows the change anyway).
    fn list(&mut self) {
        let id = 2 * self.lists + 1;
        self.lists += 1;
        self.listing = Some(id);
        self.out.push_back(Output::Send(
            id,
            Op::GetChildren {
                path: self.dir.clone(),
                watch: true,
            },
        ));
    }

    fn stop(&mut self, outcome: RevokeAllOutcome) {
        self.over = true;
        self.out.push_back(Output::Outcome(outcome));
    }

    /// Moves the [`Revoker`]'s outputs out, its ids doubled; a finished
    /// revocation leads to the next listing.
    fn pump(&mut self) {
        while let Some(o) = self.revoker.poll() {
            match o {
                Output::Send(id, op) => self.out.push_back(Output::Send(2 * id, op)),
                Output::Outcome(o) => {
                    self.revoking = false;
                    let next = matches!(o, RevokerOutcome::Asked | RevokerOutcome::NotHeld);
                    let o = RevokeAllOutcome::Revoker(o);
                    if next {
                        self.out.push_back(Output::Outcome(o));
                        if !self.over {
                            self.list();
                        }
                    } else {
                        self.stop(o);
                    }
                }
            }
        }
    }

    fn on_list(&mut self, result: Result<Reply, ZkError>) {
        match result {
            Ok(Reply::GetChildren { children, .. }) => {
                let lowest = children
                    .iter()
                    .filter_map(|c| Some((sequence_of(c)?, c)))
                    .min()
                    .map(|(_, c)| c.clone());
                match lowest {
                    Some(name) if self.revoked.as_ref() != Some(&name) => {
                        self.revoking = true;
                        let node = child_path(&self.dir, &name);
                        self.revoked = Some(name);
                        self.revoker
                            .handle(Input::Command(RevokerCommand::Revoke { node }));
                        self.pump();
                    }
                    // Nothing new to revoke: the watch brings the next
                    // change.
                    _ => {}
                }
            }
            Ok(other) => unreachable!("revoker's listing: {other:?}"),
            Err(e) => match classify(e) {
                Failure::Unknown => self.relist = true,
                Failure::SessionEnded => {
                    self.stop(RevokeAllOutcome::Revoker(RevokerOutcome::Lost {
                        reason: ZkError::SessionExpired,
                    }))
                }
                Failure::Answer(e) => self.stop(RevokeAllOutcome::Failed(e)),
            },
        }
    }
}

impl Machine for RevokeAll {
    type Command = RevokeEveryone;
    type Outcome = RevokeAllOutcome;

    fn handle(&mut self, input: Input<RevokeEveryone>) {
        if self.over {
            return;
        }
        match input {
            Input::Command(RevokeEveryone) => {
                if !self.started {
                    self.started = true;
                    self.list();
                }
            }
            Input::Reply(id, result) if id % 2 == 1 => {
                if self.listing.take_if(|l| *l == id).is_some() {
                    self.on_list(result);
                }
            }
            Input::Reply(id, result) => {
                self.revoker.handle(Input::Reply(id / 2, result));
                self.pump();
            }
            Input::Watch(event) => {
                let changed =
                    event.event_type == EventType::NodeChildrenChanged && event.path == self.dir;
                // A revocation in progress lists again when it ends.
                if changed && !self.revoking && self.listing.is_none() {
                    self.list();
                }
            }
            Input::Session(event) => {
                self.revoker.handle(Input::Session(event));
                self.pump();
                if event == SessionEvent::Connected && self.relist && !self.over {
                    self.relist = false;
                    self.list();
                }
            }
        }
    }

    fn poll(&mut self) -> Option<Output<RevokeAllOutcome>> {
        self.out.pop_front()
    }
}

/// A client's machine: a holder's or the revoker's.
// Clippy sizes the generic holder as empty; a holder's `Lock` is as large
// as the revoker, and boxing either would cost every state a clone.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Party<M> {
    /// A holder's lock.
    Holder(M),
    /// The revoker.
    Revoker(RevokeAll),
}

/// A command to a [`Party`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum PartyCommand {
    /// To a holder's lock.
    Lock(LockCommand),
    /// To the revoker: start.
    Revoke,
}

/// An outcome of a [`Party`].
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum PartyOutcome {
    /// A holder's lock's.
    Lock(LockOutcome),
    /// The revoker's.
    Revoker(RevokeAllOutcome),
}

impl<M> Machine for Party<M>
where
    M: Machine<Command = LockCommand, Outcome = LockOutcome>,
{
    type Command = PartyCommand;
    type Outcome = PartyOutcome;

    fn handle(&mut self, input: Input<PartyCommand>) {
        match self {
            Party::Holder(m) => m.handle(match input {
                Input::Command(PartyCommand::Lock(c)) => Input::Command(c),
                // The application gives a holder lock commands only.
                Input::Command(PartyCommand::Revoke) => return,
                Input::Reply(id, r) => Input::Reply(id, r),
                Input::Watch(w) => Input::Watch(w),
                Input::Session(s) => Input::Session(s),
            }),
            Party::Revoker(m) => m.handle(match input {
                Input::Command(PartyCommand::Revoke) => Input::Command(RevokeEveryone),
                Input::Command(PartyCommand::Lock(_)) => return,
                Input::Reply(id, r) => Input::Reply(id, r),
                Input::Watch(w) => Input::Watch(w),
                Input::Session(s) => Input::Session(s),
            }),
        }
    }

    fn poll(&mut self) -> Option<Output<PartyOutcome>> {
        Some(match self {
            Party::Holder(m) => match m.poll()? {
                Output::Send(id, op) => Output::Send(id, op),
                Output::Outcome(o) => Output::Outcome(PartyOutcome::Lock(o)),
            },
            Party::Revoker(m) => match m.poll()? {
                Output::Send(id, op) => Output::Send(id, op),
                Output::Outcome(o) => Output::Outcome(PartyOutcome::Revoker(o)),
            },
        })
    }
}

/// Where a holder's application is.
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
pub enum App {
    /// A holder.
    Holder {
        /// A reader (else a writer).
        reader: bool,
        /// Where it is.
        at: At,
        /// It has been asked to let go (its machine reported
        /// `RevokeAsked`, maybe while it was still waiting).
        asked: bool,
        /// The node (base name) whose deletion woke it last, until it
        /// holds or is over.
        woken: Option<String>,
    },
    /// The revoker; `started` once it has been told to start.
    Revoker {
        /// It has been told to start.
        started: bool,
    },
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
    /// A machine refused a command or failed.
    pub failed: bool,
    /// A guid search after a lost create found the node.
    pub recovered: bool,
    /// A waiter was woken by a deletion.
    pub woken: bool,
    /// A suspended holder resumed.
    pub resumed: bool,
    /// A lock was lost.
    pub lost: bool,
    /// A holder released the lock.
    pub released: bool,
    /// A holder saw a revocation.
    pub asked: bool,
    /// The revoker found a node gone.
    pub not_held: bool,
    /// What the holders' accesses were told.
    pub acts: Acts,
}

impl<M> RecipeModel for RevocableModel<M>
where
    M: Machine<Command = LockCommand, Outcome = LockOutcome> + Send + Sync + 'static,
{
    type Machine = Party<M>;
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
        EVERY_REVOKED_HOLDER_LETS_GO,
    ];

    fn name(&self) -> &'static str {
        "revocable-lock"
    }

    fn dirs(&self) -> Vec<String> {
        vec![DIR.to_owned()]
    }

    fn client(&self, i: usize) -> (Party<M>, App) {
        if i >= self.holders {
            let app = App::Revoker { started: false };
            return (Party::Revoker(RevokeAll::new(DIR)), app);
        }
        let mode = mode_of(i);
        let app = App::Holder {
            reader: mode.is_shared(),
            at: At::Start,
            asked: false,
            woken: None,
        };
        (Party::Holder((self.make.0)(DIR, &guid_of(i), mode)), app)
    }

    fn wants(&self, app: &App) -> bool {
        match app {
            App::Revoker { started } => !started,
            App::Holder { at, asked, .. } => match at {
                At::Start => true,
                At::Holding { suspended, .. } => *asked && !suspended,
                _ => false,
            },
        }
    }

    /// As the lock's: the application acts on what its machine tells it.
    fn acts(&self, _: &Party<M>, app: &App, _: &Shared, _: Told) -> bool {
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
    ) -> PartyCommand {
        let access = matches!(
            app,
            App::Holder {
                at: At::Holding { .. },
                ..
            }
        );
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
    ) -> PartyCommand {
        let App::Holder { reader, at, .. } = app else {
            *app = App::Revoker { started: true };
            return PartyCommand::Revoke;
        };
        match *at {
            At::Holding { token, .. } => {
                // Asked to let go: one last fenced access, then consent.
                if access(&mut shared.fence, *reader, token, log) {
                    if *reader {
                        shared.read = true;
                    } else {
                        shared.written = true;
                    }
                } else if live {
                    shared.live_refused = true;
                }
                *at = At::Releasing;
                PartyCommand::Lock(LockCommand::Release)
            }
            _ => {
                *at = At::Waiting;
                PartyCommand::Lock(LockCommand::Acquire)
            }
        }
    }

    fn outcome(&self, app: &mut App, shared: &mut Shared, outcome: &PartyOutcome) {
        let lock = match (app, outcome) {
            (
                App::Holder {
                    at, asked, woken, ..
                },
                PartyOutcome::Lock(o),
            ) => (at, asked, woken, o),
            (_, PartyOutcome::Revoker(o)) => {
                match o {
                    RevokeAllOutcome::Revoker(RevokerOutcome::Asked) => {}
                    RevokeAllOutcome::Revoker(RevokerOutcome::NotHeld) => shared.not_held = true,
                    _ => shared.failed = true,
                }
                return;
            }
            _ => return,
        };
        let (at, asked, woken, outcome) = lock;
        match outcome {
            LockOutcome::Acquired { token, .. } => {
                *woken = None;
                *at = At::Holding {
                    token: *token,
                    suspended: false,
                };
            }
            LockOutcome::Suspended => {
                if let At::Holding { suspended, .. } = at {
                    *suspended = true;
                }
            }
            LockOutcome::Resumed => {
                if let At::Holding { suspended, .. } = at {
                    *suspended = false;
                    shared.resumed = true;
                }
            }
            LockOutcome::Released => {
                shared.released = true;
                *woken = None;
                *at = At::Done;
            }
            LockOutcome::Lost { .. } => {
                shared.lost = true;
                *woken = None;
                *at = At::Lost;
            }
            LockOutcome::Recovered { found } => shared.recovered |= *found,
            LockOutcome::Woken { path } => {
                shared.woken = true;
                *woken = Some(base_name(path).to_owned());
            }
            LockOutcome::RevokeAsked => {
                shared.asked = true;
                *asked = true;
            }
            LockOutcome::Refused { .. } | LockOutcome::Failed(_) => shared.failed = true,
        }
    }

    fn finished(&self, app: &App) -> bool {
        match app {
            // Started, the revoker runs on without faults (see the
            // module's doc).
            App::Revoker { started } => *started,
            App::Holder { at, .. } => matches!(at, At::Done | At::Lost),
        }
    }

    fn properties(&self, faults: &Faults) -> Vec<Property<World<Self>>> {
        let mut p = vec![
            Property::always(RW_EXCLUSION.name, |_, s: &State<Self>| {
                let live: Vec<bool> = s
                    .clients
                    .iter()
                    .filter(|c| c.session)
                    .filter_map(|c| match &c.app {
                        App::Holder {
                            reader,
                            at: At::Holding { .. },
                            ..
                        } => Some(*reader),
                        _ => None,
                    })
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
            Property::eventually(EVERY_REVOKED_HOLDER_LETS_GO.name, |_, s: &State<Self>| {
                s.clients.iter().all(|c| match &c.app {
                    App::Holder { at, .. } => *at == At::Done || c.crashed || !c.session,
                    App::Revoker { .. } => true,
                })
            }),
            Property::sometimes("resource-written", |_, s: &State<Self>| s.shared.written),
            Property::sometimes("revocation-seen", |_, s: &State<Self>| s.shared.asked),
            Property::sometimes("released", |_, s: &State<Self>| s.shared.released),
        ];
        // A reader from two holders on (client 1).
        if self.holders >= 2 {
            p.push(Property::sometimes(
                "resource-read",
                |_, s: &State<Self>| s.shared.read,
            ));
            p.push(Property::sometimes(
                "revoked-node-gone",
                |_, s: &State<Self>| s.shared.not_held,
            ));
            p.push(Property::sometimes("waiter-woken", |_, s: &State<Self>| {
                s.shared.woken
            }));
        }
        if self.holders >= 3 {
            p.push(Property::sometimes(
                "readers-hold-together",
                |_, s: &State<Self>| {
                    s.clients
                        .iter()
                        .filter(|c| {
                            matches!(
                                c.app,
                                App::Holder {
                                    reader: true,
                                    at: At::Holding { .. },
                                    ..
                                }
                            )
                        })
                        .count()
                        >= 2
                },
            ));
            p.push(Property::sometimes(
                "readers-woken-together",
                |_, s: &State<Self>| readers_woken_together(s.clients.len(), |i| woken(s, i)),
            ));
        }
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

/// Client `i`'s last wake-up and whether it reads (holders only).
fn woken<M>(s: &State<RevocableModel<M>>, i: usize) -> Option<(String, bool)>
where
    M: Machine<Command = LockCommand, Outcome = LockOutcome> + Send + Sync + 'static,
{
    match &s.clients[i].app {
        App::Holder {
            reader,
            woken: Some(p),
            ..
        } => Some((p.clone(), *reader)),
        _ => None,
    }
}
