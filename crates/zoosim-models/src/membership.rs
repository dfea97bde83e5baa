//! Group membership's model: each client follows the group at once, joins,
//! leaves and joins again (the simulation's churn, once), then stays a
//! member following the group (recipes page, "Group Membership"; the
//! simulation's workload does the same, with more churn). The machine is
//! [`zoosim_recipes::membership::Membership`] — or any machine with its
//! commands and outcomes ([`MembershipModel::with_machine`], for a
//! deliberately broken copy) — observed ([`super::observed`]) so that the
//! phases it goes through can be named.
//!
//! Properties (each a named value below), mirroring the simulation's
//! oracle ([`zoosim_core::check::membership`]):
//!
//! * always [`NO_INVENTED_MEMBER`]: every name in any member list a client
//!   is given is a member that had asked to join;
//! * always [`MEMBER_NODES_ARE_SESSIONS`]: every node in the group is an
//!   ephemeral of a session alive on the server, and bears the name of the
//!   client that session belongs to (members' nodes go with their
//!   sessions);
//! * always [`FINAL_GROUP`]: once every client is settled, the group is
//!   exactly the clients whose session is alive and whose application is
//!   a member (joined last, not left) — the oracle's check at the end of a
//!   run, here in every settled state;
//! * always [`NO_ORPHANS`]: once every client is settled, no node in the
//!   group belongs to a client that is not a live member (left, lost, or
//!   crashed);
//! * always [`NO_RECIPE_FAILURE`]: the machine never refuses a command nor
//!   meets an answer it has no way forward from;
//! * eventually [`CONVERGENCE`]: every client whose process and session
//!   live ends a member, and its last member list is the group as the
//!   server has it (the oracle's convergence after the quiet phase; judged
//!   in end states, where nothing can happen any more). Fairness as in
//!   every model: runs are finite and end only when nothing is enabled;
//!   the server always expires a crashed client's session; a disconnected
//!   client always reconnects (and SetWatches brings it the change it
//!   missed);
//! * sometimes: a client joins, leaves, sees everyone in the group, and
//!   each phase in [`PHASES`] where the run's faults lead to it — and
//!   every fault in the budget taken.
//!
//! No "no herd": every follower is woken by every change, by design.

use stateright::Property;

use zoosim_core::check::Property as Claim;

use super::observed::{at_end, bit, Condition, Observed, Phases, Seen};
use super::{settled, Faults, Log, Maker, RecipeModel, State, World};
use zoosim_core::proto::{Op, SessionId, ZkError};
use zoosim_core::tree::Owner;
use zoosim_recipes::membership::{Membership, MembershipCommand, MembershipOutcome};
use zoosim_recipes::{Input, Machine, Output};

/// The group's node.
pub const GROUP: &str = "/group";

pub use zoosim_core::check::membership::NO_INVENTED_MEMBER;
/// Every node in the group is an ephemeral of its member's live session.
pub const MEMBER_NODES_ARE_SESSIONS: Claim = Claim::new(
    "member-nodes-are-sessions",
    "every node in the group is an ephemeral of its member's live session",
);
pub use super::NO_ORPHANS;
pub use super::NO_RECIPE_FAILURE;
pub use zoosim_core::check::membership::CONVERGENCE;
pub use zoosim_core::check::membership::FINAL_GROUP;

/// The phases the model names.
///
/// Not among them: the machine's list again after a change that came while
/// a list was in flight. A change can only be heard through a watch set by
/// a list whose reply has come (ZooKeeper orders a reply before the events
/// after it, and a watch whose reply was lost is not restored), and the
/// machine sends a list only when it holds no such watch; no run of the
/// model reaches it (checked exhaustively at 2 clients with all faults).
pub const PHASES: [&str; 4] = [
    "listed-again-on-change",
    "own-node-found-after-lost-reply",
    "own-node-already-gone",
    "member-lost",
];

/// Membership's phases, read from what the machine does.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct MembershipPhases;

impl<M> Phases<M> for MembershipPhases
where
    M: Machine<Command = MembershipCommand, Outcome = MembershipOutcome>,
{
    fn phase(
        input: &Input<MembershipCommand>,
        output: &Output<MembershipOutcome>,
    ) -> Option<&'static str> {
        Some(match (input, output) {
            (Input::Watch(_), Output::Send(_, Op::GetChildren { .. })) => "listed-again-on-change",
            (
                Input::Reply(_, Err(ZkError::NodeExists)),
                Output::Outcome(MembershipOutcome::Joined),
            ) => "own-node-found-after-lost-reply",
            (Input::Reply(_, Err(ZkError::NoNode)), Output::Outcome(MembershipOutcome::Left)) => {
                "own-node-already-gone"
            }
            (_, Output::Outcome(MembershipOutcome::Lost { .. })) => "member-lost",
            _ => return None,
        })
    }
}

/// Makes a client's machine: `(group, member, guid)`.
pub type MakeMachine<M> = fn(&str, &str, &str) -> M;

/// Group membership as a model, running machine `M`; `churn`: each client
/// leaves and joins again once before it stays.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MembershipModel<M = Membership> {
    /// Each client leaves and joins again once.
    pub churn: bool,
    /// Record the phases reached (see [`super::observed`]'s "Phases cost
    /// states").
    pub phases: bool,
    make: Maker<MakeMachine<M>>,
}

/// What group membership's model is, in a line (`zoosim list`).
pub const ABOUT: &str =
    "group membership: each client follows the group, joins, leaves and joins again once";

impl MembershipModel<Membership> {
    /// The membership model over [`Membership`].
    pub fn new(churn: bool) -> MembershipModel<Membership> {
        MembershipModel::with_machine(churn, Membership::new)
    }
}

impl<M> MembershipModel<M> {
    /// The model over another machine with membership's commands and
    /// outcomes, made by `make` (e.g. a deliberately broken copy).
    pub fn with_machine(churn: bool, make: MakeMachine<M>) -> MembershipModel<M> {
        MembershipModel {
            churn,
            phases: false,
            make: Maker(make),
        }
    }

    /// The same model recording the phases reached, each a "sometimes"
    /// property.
    pub fn with_phases(mut self) -> Self {
        self.phases = true;
        self
    }
}

/// Client `i`'s member name (the simulation's).
pub fn member_name(i: usize) -> String {
    format!("m{i}")
}

/// Where one client's application is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Step {
    /// About to follow the group.
    Start,
    /// Following; about to join (`again`: after its churn's leave).
    ToJoin {
        /// The second join, after leaving.
        again: bool,
    },
    /// Asked to join.
    Joining {
        /// The second join, after leaving.
        again: bool,
    },
    /// A member; about to leave (the churn).
    ToLeave,
    /// Asked to leave.
    Leaving,
    /// A member for good: done.
    Member,
    /// Its session ended (its node went with it).
    Lost,
}

/// One client's application.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct App {
    /// The client's number.
    pub me: u8,
    /// Where it is.
    pub step: Step,
    /// The last member list it was given (a bit per client), if any.
    pub view: Option<u8>,
}

/// What the clients share: masks (a bit per client) and sticky flags for
/// the properties.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Shared {
    /// Clients that asked to join.
    pub asked_join: u8,
    /// A list held a name that had not asked to join.
    pub invented: bool,
    /// A client left.
    pub left: bool,
    /// The machine refused a command or failed.
    pub failed: bool,
    /// The phases reached ([`PHASES`], a bit each).
    pub phases: u32,
}

impl<M> RecipeModel for MembershipModel<M>
where
    M: Machine<Command = MembershipCommand, Outcome = MembershipOutcome> + Send + Sync + 'static,
{
    type Machine = Observed<M, MembershipPhases>;
    type App = App;
    type Shared = Shared;
    const CLAIMS: &'static [Claim] = &[
        NO_INVENTED_MEMBER,
        MEMBER_NODES_ARE_SESSIONS,
        FINAL_GROUP,
        NO_ORPHANS,
        NO_RECIPE_FAILURE,
        CONVERGENCE,
    ];

    fn name(&self) -> &'static str {
        "group-membership"
    }

    fn dirs(&self) -> Vec<String> {
        vec![GROUP.to_owned()]
    }

    fn client(&self, i: usize) -> (Self::Machine, App) {
        // One session per client in the model: one guid each.
        let machine = (self.make.0)(GROUP, &member_name(i), &format!("g{i}"));
        let app = App {
            me: i as u8,
            step: Step::Start,
            view: None,
        };
        (Observed::new(machine), app)
    }

    fn wants(&self, app: &App) -> bool {
        matches!(app.step, Step::Start | Step::ToJoin { .. } | Step::ToLeave)
    }

    fn command(
        &self,
        app: &mut App,
        shared: &mut Shared,
        _live: bool,
        _: &mut Log,
    ) -> MembershipCommand {
        match app.step {
            Step::Start => {
                app.step = Step::ToJoin { again: false };
                MembershipCommand::Follow
            }
            Step::ToLeave => {
                app.step = Step::Leaving;
                MembershipCommand::Leave
            }
            // Only ToJoin wants the join ([`RecipeModel::wants`]).
            step => {
                let again = matches!(step, Step::ToJoin { again: true });
                shared.asked_join |= 1 << app.me;
                app.step = Step::Joining { again };
                MembershipCommand::Join
            }
        }
    }

    fn outcome(&self, app: &mut App, shared: &mut Shared, outcome: &Seen<MembershipOutcome>) {
        let o = match outcome {
            Seen::Phase(p) => {
                if self.phases {
                    shared.phases |= bit(&PHASES, p);
                }
                return;
            }
            Seen::Real(o) => o,
        };
        match o {
            MembershipOutcome::Joined => {
                let again = matches!(app.step, Step::Joining { again: true });
                app.step = if self.churn && !again {
                    Step::ToLeave
                } else {
                    Step::Member
                };
            }
            MembershipOutcome::Left => {
                shared.left = true;
                app.step = Step::ToJoin { again: true };
            }
            MembershipOutcome::Members(names) => {
                let mut view = 0u8;
                for n in names {
                    match parse_member(n) {
                        Some(i) if shared.asked_join & (1 << i) != 0 => view |= 1 << i,
                        _ => shared.invented = true,
                    }
                }
                app.view = Some(view);
            }
            MembershipOutcome::Lost { .. } => {
                app.step = Step::Lost;
                app.view = None;
            }
            MembershipOutcome::Refused { .. } | MembershipOutcome::Failed(_) => {
                shared.failed = true
            }
        }
    }

    fn finished(&self, app: &App) -> bool {
        matches!(app.step, Step::Member | Step::Lost)
    }

    fn properties(&self, faults: &Faults) -> Vec<Property<World<Self>>> {
        let mut p = vec![
            Property::always(NO_INVENTED_MEMBER.name, |_, s: &State<Self>| {
                !s.shared.invented
            }),
            Property::always(MEMBER_NODES_ARE_SESSIONS.name, |_, s: &State<Self>| {
                members(s).iter().all(|(name, owner)| {
                    let Owner::Ephemeral(session) = owner else {
                        return false;
                    };
                    let Some(i) = parse_member(name) else {
                        return false;
                    };
                    *session == session_of(i)
                        && s.clients.get(i).is_some_and(|c| c.session)
                        && s.tree.has_session(*session)
                })
            }),
            Property::always(FINAL_GROUP.name, |w, s: &State<Self>| {
                !settled(w, s) || group_mask(s) == Some(live_members(s))
            }),
            Property::always(NO_ORPHANS.name, |w, s: &State<Self>| {
                !settled(w, s) || group_mask(s).is_some_and(|g| g & !live_members(s) == 0)
            }),
            Property::always(NO_RECIPE_FAILURE.name, |_, s: &State<Self>| {
                !s.shared.failed
            }),
            Property::eventually(CONVERGENCE.name, |w, s: &State<Self>| {
                let group = group_mask(s);
                at_end(w, s)
                    && s.clients
                        .iter()
                        .filter(|c| !c.crashed && c.session)
                        .all(|c| c.app.step == Step::Member && c.app.view == group)
            }),
            Property::sometimes("joined", |_, s: &State<Self>| {
                s.clients
                    .iter()
                    .any(|c| matches!(c.app.step, Step::ToLeave | Step::Member))
            }),
            Property::sometimes("everyone-seen", |w, s: &State<Self>| {
                let all = (1u16 << w.clients) - 1;
                s.clients
                    .iter()
                    .any(|c| c.app.view.is_some_and(|v| u16::from(v) == all))
            }),
        ];
        if self.churn {
            p.push(Property::sometimes("left", |_, s: &State<Self>| {
                s.shared.left
            }));
        }
        let reach: [Condition<Self>; 4] = [
            reached::<M, 0>,
            reached::<M, 1>,
            reached::<M, 2>,
            reached::<M, 3>,
        ];
        for (name, f) in PHASES.into_iter().zip(reach) {
            let expected = match name {
                "own-node-found-after-lost-reply" => faults.lost_reply > 0,
                "own-node-already-gone" => faults.lost_reply > 0 && self.churn,
                "member-lost" => faults.forced_expiry > 0,
                _ => true,
            };
            if expected && self.phases {
                p.push(Property::sometimes(name, f));
            }
        }
        p
    }
}

/// Client `i`'s session id on the model's server (see
/// [`super::double_barrier::session_of`]).
fn session_of(i: usize) -> SessionId {
    super::double_barrier::session_of(i)
}

/// The client a member name (`m<i>`, or a node `m<i>-<guid>`) is, if any.
fn parse_member(name: &str) -> Option<usize> {
    let member = name.split_once('-').map_or(name, |(m, _)| m);
    member.strip_prefix('m')?.parse().ok().filter(|i| *i < 8)
}

/// The group's nodes: name and owner.
fn members<R: RecipeModel>(s: &State<R>) -> Vec<(String, Owner)> {
    let Some(g) = s.tree.node(GROUP) else {
        return Vec::new();
    };
    g.children
        .iter()
        .filter_map(|c| {
            let node = s.tree.node(&format!("{GROUP}/{c}"))?;
            Some((c.clone(), node.owner))
        })
        .collect()
}

/// The group as the server has it (a bit per client), None if a node is
/// not a client's.
fn group_mask<R: RecipeModel>(s: &State<R>) -> Option<u8> {
    let mut g = 0u8;
    for (name, _) in members(s) {
        g |= 1 << parse_member(&name)?;
    }
    Some(g)
}

/// Clients whose process and session live and whose application is a
/// member (joined last, not left).
fn live_members<M>(s: &State<MembershipModel<M>>) -> u8
where
    M: Machine<Command = MembershipCommand, Outcome = MembershipOutcome> + Send + Sync + 'static,
{
    let mut m = 0u8;
    for (i, c) in s.clients.iter().enumerate() {
        if !c.crashed && c.session && matches!(c.app.step, Step::ToLeave | Step::Member) {
            m |= 1 << i;
        }
    }
    m
}

/// Phase `I` of [`PHASES`] was reached.
fn reached<M, const I: usize>(_: &World<MembershipModel<M>>, s: &State<MembershipModel<M>>) -> bool
where
    M: Machine<Command = MembershipCommand, Outcome = MembershipOutcome> + Send + Sync + 'static,
{
    s.shared.phases & (1 << I) != 0
}
