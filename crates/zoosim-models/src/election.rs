//! Leader election's model, as the simulation's election workload runs it
//! (judged as a lock): each client joins at once; once elected it makes
//! one act of leadership on a resource fenced by its epoch, and resigns
//! (recipes page, "Leader Election", with the lock's guid recovery and the
//! confirmation of the own node before leading). The machine is
//! [`zoosim_recipes::election::Election`], correct,
//! [`ElectionVariant::KeepLeadershipAfterExpiry`] (CURATOR-696) or
//! [`ElectionVariant::ActWithoutConfirming`] (no sync + exists() before
//! leading) — or any
//! [`Candidate`] ([`ElectionModel::with_machine`], for a deliberately
//! broken copy).
//!
//! **Epoch.** What the model can see of an epoch is the lowest node under
//! the election's directory: its owner is the one leader ZooKeeper's
//! state allows, and its sequence number is the epoch that leader stamps
//! its acts with (every later leader's is larger). A client *leads* when
//! its machine says so ([`Candidate::is_leader`]: what the application
//! checks before every act of leadership, as the simulation's workload
//! does; so a machine that says it leads when it should not is acted on).
//!
//! Properties (each a named value below):
//!
//! * always [`ONE_LEADER_PER_EPOCH`]: a client that leads with its session
//!   alive on the server owns the current epoch's node (the lowest) — so
//!   at most one live leader at a time, the one the epoch names. A leader
//!   whose session has expired without it knowing yet is ZooKeeper's
//!   window, which the epoch's fence is for;
//! * always [`SUSPEND_WHILE_DISCONNECTED`] (the oracle's): no leader acts
//!   while its machine knows it is disconnected (given Disconnected, not
//!   Connected since);
//! * always [`TOLD_IS_TOLD`] (the oracle's): no leader acts after it was
//!   told its session ended;
//! * always [`ELECTED_ON_A_LIVE_SESSION`]: a candidate is elected only by
//!   the answer to a request it made while its session was alive on the
//!   server, so that its node was the lowest at a moment after it asked.
//!   Its session may end after that, even before the answer comes (the
//!   fence's window); but a candidate that asks on a session already gone
//!   — its child list read from a server that has not applied the expiry
//!   yet (the `zombie-read` fault) — would lead on a node that was not
//!   the lowest at any moment since it asked. The confirmation before
//!   leading (a sync, which such a server cannot answer before it applies
//!   the expiry) is what rules it out, and what
//!   `election/act-without-confirming` lacks;
//! * always [`TOLD_ENDS_LEADERSHIP`]: a client that has been told its session
//!   ended does not lead. The belief [`TOLD_IS_TOLD`]'s act follows from,
//!   judged on its own: it fails a step sooner, and also for a leader
//!   whose application has no act left to make;
//! * always [`LIVE_HOLDER_NEVER_FENCED`]: the fenced resource never refuses the
//!   act of a leader whose session is alive;
//! * always [`NO_HERD`]: one write's (or expiry's) watch events reach at
//!   most one connection, and a candidate is woken only by the deletion of
//!   its nearest blocker (the next lower node still standing), never while
//!   a nearer one still stands;
//! * always [`NO_RECIPE_FAILURE`], [`NO_ORPHANS`]: as for the lock;
//! * eventually [`EVERY_LIVE_CANDIDATE_LEADS`]: every candidate whose
//!   process and session live is elected and resigns. Fairness as for the
//!   lock: every run is finite and ends only when no action is enabled
//!   (weak fairness), the server always expires a crashed client's
//!   session and a disconnected client always reconnects;
//! * sometimes: a leader acts, a candidate is woken, a leader resigns, and
//!   with their faults the guid search finds its node, a suspended leader
//!   resumes, leadership is lost; and every fault in the budget is taken.

use stateright::Property;

use zoosim_core::check::Property as Claim;

use super::lock::Acts;
use super::shared_lock::{no_herd, own_node};
use super::{
    settled, Conn, Faults, Log, Maker, RecipeModel, RenameMachine, State, Symmetry, Told, World,
};
use zoosim_recipes::election::{Election, ElectionCommand, ElectionOutcome, ElectionVariant};
use zoosim_recipes::{base_name, sequence_of, Machine};

/// The election's directory.
pub const DIR: &str = "/election";

/// A live leader owns the lowest node: one leader per epoch.
pub const ONE_LEADER_PER_EPOCH: Claim = Claim::new(
    "one-leader-per-epoch",
    "a leader whose session is alive owns the lowest node: one leader per epoch",
);
/// A candidate is elected only by the answer to a request made while its
/// session lived on the server.
pub const ELECTED_ON_A_LIVE_SESSION: Claim = Claim::new(
    "elected-on-a-live-session",
    "a candidate is elected only by the answer to a request it made while its session was \
     alive on the server, so its node was the lowest at a moment after it asked (the session \
     may end after that: the fence's window)",
);
/// A client told its session ended no longer believes it leads. Not the
/// oracle's `told-is-told` (nobody *acts* after being told, which the
/// model judges too), so not its name.
pub const TOLD_ENDS_LEADERSHIP: Claim = Claim::new(
    "told-ends-leadership",
    "a candidate told its session ended no longer believes it leads",
);
pub use super::lock::LIVE_HOLDER_NEVER_FENCED;
pub use super::lock::{SUSPEND_WHILE_DISCONNECTED, TOLD_IS_TOLD};
pub use super::NO_HERD;
pub use super::NO_ORPHANS;
pub use super::NO_RECIPE_FAILURE;
/// Every live candidate leads and resigns: the unbounded `eventually`
/// the oracle's `liveness` bounds in time.
pub const EVERY_LIVE_CANDIDATE_LEADS: Claim = Claim::new(
    "every-live-candidate-leads",
    "every candidate whose process and session live is elected, acts and resigns",
);

/// What the election's model is, in a line (`zoosim list`).
pub const ABOUT: &str =
    "leader election: each client joins; once elected it acts once, stamped with its epoch, and resigns";

/// The election's variants the model knows.
pub const VARIANTS: [ElectionVariant; 3] = ElectionVariant::ALL;

/// A candidate's machine as the model drives it: the election's commands
/// and outcomes, and whether it leads now.
pub trait Candidate:
    Machine<Command = ElectionCommand, Outcome = ElectionOutcome> + Send + Sync + 'static
{
    /// True while leading and connected: what the application checks
    /// before every act of leadership.
    fn is_leader(&self) -> bool;
}

impl Candidate for Election {
    fn is_leader(&self) -> bool {
        Election::is_leader(self)
    }
}

/// Makes a client's machine: `(dir, guid, variant)`.
pub type MakeMachine<M> = fn(&str, &str, ElectionVariant) -> M;

/// Leader election as a model, running `variant` of machine `M`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ElectionModel<M = Election> {
    /// The machine's variant.
    pub variant: ElectionVariant,
    make: Maker<MakeMachine<M>>,
    /// How the machine is renamed (`--symmetry`): the election's own has
    /// [`Election::rename`]; another machine has none.
    rename: Option<Maker<RenameMachine<M>>>,
}

impl ElectionModel<Election> {
    /// The election's model for `variant` of [`Election`].
    pub fn new(variant: ElectionVariant) -> ElectionModel<Election> {
        ElectionModel {
            variant,
            make: Maker(Election::with_variant),
            rename: Some(Maker(Election::rename)),
        }
    }
}

impl<M> ElectionModel<M> {
    /// The model over another [`Candidate`], made by `make` (e.g. a
    /// deliberately broken copy).
    pub fn with_machine(variant: ElectionVariant, make: MakeMachine<M>) -> ElectionModel<M> {
        ElectionModel {
            variant,
            make: Maker(make),
            rename: None,
        }
    }
}

/// Where one client's application is.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum At {
    /// About to join.
    Start,
    /// A candidate, not elected yet; `woken` is the node whose deletion
    /// woke it last (what [`NO_HERD`] judges).
    Candidate {
        /// The node (base name) whose deletion woke it last.
        woken: Option<String>,
    },
    /// Elected with `epoch`: it acts once its machine says it leads
    /// (not while suspended).
    Leading {
        /// The epoch (its node's sequence number).
        epoch: u64,
    },
    /// Asked to resign.
    Resigning,
    /// Resigned: done.
    Done,
    /// Leadership or candidacy lost (the session ended, the node vanished).
    Lost,
}

/// What the clients share: the fence, and sticky flags for the properties.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Shared {
    /// The highest epoch the fenced resource accepted.
    pub fence: Option<u64>,
    /// The fence accepted an act.
    pub acted: bool,
    /// The fence refused a leader whose session was alive.
    pub live_refused: bool,
    /// The machine refused a command or failed.
    pub failed: bool,
    /// A guid search after a lost create found the node.
    pub recovered: bool,
    /// A candidate was woken by a deletion.
    pub woken: bool,
    /// A suspended leader resumed.
    pub resumed: bool,
    /// Leadership or candidacy was lost.
    pub lost: bool,
    /// A leader resigned.
    pub resigned: bool,
    /// What the leaders' acts were told.
    pub acts: Acts,
    /// A candidate was elected by the answer to a request made on a
    /// session already gone on the server.
    pub elected_dead: bool,
}

impl<M: Candidate> RecipeModel for ElectionModel<M> {
    type Machine = M;
    type App = At;
    type Shared = Shared;
    const CLAIMS: &'static [Claim] = &[
        ONE_LEADER_PER_EPOCH,
        SUSPEND_WHILE_DISCONNECTED,
        TOLD_IS_TOLD,
        ELECTED_ON_A_LIVE_SESSION,
        TOLD_ENDS_LEADERSHIP,
        LIVE_HOLDER_NEVER_FENCED,
        NO_HERD,
        NO_RECIPE_FAILURE,
        NO_ORPHANS,
        EVERY_LIVE_CANDIDATE_LEADS,
    ];

    fn name(&self) -> &'static str {
        "election"
    }

    fn dirs(&self) -> Vec<String> {
        vec![DIR.to_owned()]
    }

    fn client(&self, i: usize) -> (M, At) {
        let guid = super::shared_lock::guid_of(i);
        ((self.make.0)(DIR, &guid, self.variant), At::Start)
    }

    /// Candidates are interchangeable: the election, the lock's algorithm,
    /// compares guids for equality only (contenders are ordered by
    /// sequence number), and the application keeps one name, the node
    /// whose deletion woke it, renamed with the rest.
    fn symmetry(&self) -> Result<Symmetry<Self>, &'static str> {
        let Some(Maker(rename)) = self.rename else {
            return Err("this machine has no renaming (only the election's own machine has)");
        };
        Ok(Symmetry {
            name: |_, i| super::shared_lock::guid_of(i),
            machine: rename,
        })
    }

    fn rename_app(&self, app: &mut At, rename: &dyn Fn(&str) -> Option<String>) {
        if let At::Candidate { woken: Some(node) } = app {
            if let Some(new) = rename(node) {
                *node = new;
            }
        }
    }

    /// What the application means to do, its machine aside.
    fn wants(&self, app: &At) -> bool {
        matches!(app, At::Start | At::Leading { .. })
    }

    /// A leader acts when its machine says it leads, whatever the world
    /// knows (the simulation's workload checks the same before every
    /// act): a machine that leads while suspended, or after the session
    /// ended, is acted on and judged for it.
    fn acts(&self, machine: &M, app: &At, _: &Shared, _: Told) -> bool {
        match app {
            At::Start => true,
            At::Leading { .. } => machine.is_leader(),
            _ => false,
        }
    }

    /// A leader's command follows its act: judged by what its machine had
    /// been told.
    fn command_in(
        &self,
        app: &mut At,
        shared: &mut Shared,
        conn: Conn,
        log: &mut Log,
    ) -> ElectionCommand {
        let act = matches!(app, At::Leading { .. });
        let cmd = self.command(app, shared, conn.live, log);
        if act {
            shared.acts.note(conn, log);
        }
        cmd
    }

    fn command(
        &self,
        app: &mut At,
        shared: &mut Shared,
        live: bool,
        log: &mut Log,
    ) -> ElectionCommand {
        match *app {
            At::Leading { epoch, .. } => {
                // One act of leadership, stamped with the epoch, then
                // resign. A leader whose session has expired (it does not
                // know yet) is what the fence is for.
                let accepted = shared.fence.is_none_or(|h| epoch >= h);
                log.note(|| {
                    format!(
                        "the leader acts with epoch {epoch}: {}",
                        if accepted { "accepted" } else { "REFUSED" }
                    )
                });
                if accepted {
                    shared.fence = Some(epoch);
                    shared.acted = true;
                } else if live {
                    shared.live_refused = true;
                }
                *app = At::Resigning;
                ElectionCommand::Resign
            }
            _ => {
                *app = At::Candidate { woken: None };
                ElectionCommand::Join
            }
        }
    }

    fn outcome(&self, app: &mut At, shared: &mut Shared, outcome: &ElectionOutcome) {
        match outcome {
            ElectionOutcome::Elected { epoch } => *app = At::Leading { epoch: *epoch },
            // The application asks its machine before it acts: a
            // suspension is news it need not keep.
            ElectionOutcome::Suspended => {}
            ElectionOutcome::Resumed => {
                if let At::Leading { .. } = app {
                    shared.resumed = true;
                }
            }
            ElectionOutcome::Resigned => {
                shared.resigned = true;
                *app = At::Done;
            }
            ElectionOutcome::Lost { .. } => {
                shared.lost = true;
                *app = At::Lost;
            }
            ElectionOutcome::Recovered { found } => shared.recovered |= *found,
            ElectionOutcome::Woken { path } => {
                shared.woken = true;
                if let At::Candidate { woken } = app {
                    *woken = Some(base_name(path).to_owned());
                }
            }
            ElectionOutcome::Refused { .. } | ElectionOutcome::Failed(_) => shared.failed = true,
        }
    }

    fn outcome_live(
        &self,
        app: &mut At,
        shared: &mut Shared,
        outcome: &ElectionOutcome,
        live: bool,
    ) {
        if matches!(outcome, ElectionOutcome::Elected { .. }) && !live {
            shared.elected_dead = true;
        }
        self.outcome(app, shared, outcome);
    }

    fn finished(&self, app: &At) -> bool {
        matches!(app, At::Done | At::Lost)
    }

    fn properties(&self, faults: &Faults) -> Vec<Property<World<Self>>> {
        let mut p = vec![
            Property::always(ONE_LEADER_PER_EPOCH.name, |_, s: &State<Self>| {
                let epoch = lowest(s);
                (0..s.clients.len()).all(|i| {
                    let c = &s.clients[i];
                    !(c.session && c.machine.is_leader()) || own_node(s, DIR, i) == epoch
                })
            }),
            Property::always(SUSPEND_WHILE_DISCONNECTED.name, |_, s: &State<Self>| {
                !s.shared.acts.while_disconnected
            }),
            Property::always(TOLD_IS_TOLD.name, |_, s: &State<Self>| {
                !s.shared.acts.after_told_ended
            }),
            Property::always(ELECTED_ON_A_LIVE_SESSION.name, |_, s: &State<Self>| {
                !s.shared.elected_dead
            }),
            Property::always(TOLD_ENDS_LEADERSHIP.name, |_, s: &State<Self>| {
                s.clients
                    .iter()
                    .all(|c| !(c.told_ended && c.machine.is_leader()))
            }),
            Property::always(LIVE_HOLDER_NEVER_FENCED.name, |_, s: &State<Self>| {
                !s.shared.live_refused
            }),
            Property::always(NO_HERD.name, |_, s: &State<Self>| {
                !s.herd
                    && no_herd(
                        s,
                        DIR,
                        |i| match &s.clients[i].app {
                            At::Candidate { woken: Some(p) } => Some((p.clone(), false)),
                            _ => None,
                        },
                        |_| |name: &str| name.contains("-n_"),
                    )
            }),
            Property::always(NO_RECIPE_FAILURE.name, |_, s: &State<Self>| {
                !s.shared.failed
            }),
            Property::always(NO_ORPHANS.name, |w, s: &State<Self>| {
                !settled(w, s) || s.tree.node(DIR).is_none_or(|d| d.children.is_empty())
            }),
            // Monotone along every run, as the lock's.
            Property::eventually(EVERY_LIVE_CANDIDATE_LEADS.name, |_, s: &State<Self>| {
                s.clients
                    .iter()
                    .all(|c| c.app == At::Done || c.crashed || !c.session)
            }),
            Property::sometimes("leader-acted", |_, s: &State<Self>| s.shared.acted),
            Property::sometimes("resigned", |_, s: &State<Self>| s.shared.resigned),
        ];
        p.push(Property::sometimes(
            "candidate-woken",
            |w, s: &State<Self>| s.shared.woken || w.clients < 2,
        ));
        if faults.lost_reply > 0 {
            p.push(Property::sometimes(
                "guid-search-found-node",
                |_, s: &State<Self>| s.shared.recovered,
            ));
        }
        if faults.broken_connection > 0 {
            p.push(Property::sometimes(
                "leader-resumed",
                |_, s: &State<Self>| s.shared.resumed,
            ));
        }
        if faults.forced_expiry > 0 {
            p.push(Property::sometimes(
                "leadership-lost",
                |_, s: &State<Self>| s.shared.lost,
            ));
        }
        p
    }
}

/// The current epoch's node: the lowest under [`DIR`] (its base name).
fn lowest<R: RecipeModel>(s: &State<R>) -> Option<&str> {
    s.tree
        .node(DIR)?
        .children
        .iter()
        .filter_map(|c| Some((sequence_of(c)?, c.as_str())))
        .min()
        .map(|(_, c)| c)
}
