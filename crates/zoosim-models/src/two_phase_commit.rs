//! Two-phase commit's model: every client is a site of one transaction;
//! each votes (commit or abort), then waits for the decision (recipes
//! page, "Two-phased Commit"; the simulation's workload does the same,
//! transaction after transaction, each site voting abort now and then).
//! The machine is [`zoosim_recipes::two_phase_commit::Site`], correct or
//! a buggy variant ([`VARIANTS`]), or any machine with its commands and
//! outcomes ([`TwoPhaseCommitModel::with_machine`], for a deliberately
//! broken copy), observed ([`super::observed`]) so that the phases it
//! goes through can be named.
//!
//! # Votes
//!
//! A site's vote is fixed by the model (commit; abort for the one site
//! [`TwoPhaseCommitModel::new`] is told votes abort) or chosen in the run
//! ([`TwoPhaseCommitModel::with_chosen_votes`]): the site's application
//! votes commit or abort, both explored (an application's choice, see
//! [`super::RecipeModel::choices`], taken before the run's first step).
//! The catalog's model (`zoosim check two-phase-commit`) chooses the last
//! site's vote ([`chosen_sites`]) and has the others vote commit, so that
//! one check covers runs where everyone votes commit, runs with an abort
//! vote, and (with the `forced-expiry` or `client-crash` fault) a site
//! that fails before its vote lands, for which the others write abort.
//!
//! Only one site's vote is chosen because every site's is too large at 3
//! sites for a default check: with every fault (one a run) it is
//! 2,086,812 unique states (68 s, 1.6 GB here), against 843,224 (22 s) for
//! one chosen vote and 464,693 for all commit (every property held in
//! that larger check too). One chosen vote is the smallest design that
//! explores an abort vote, and enough for the bugs the properties are
//! for: a site deciding commit before a vote is in
//! (`two-phase-commit/commit-before-all-votes`) is caught when the one
//! vote it did not wait for is abort. The tests check every site's vote
//! chosen at 2 sites.
//!
//! The coordinator is not a client of the model: its one request (the
//! transaction node and every vote node, in one multi:
//! [`zoosim_recipes::two_phase_commit::create_transaction`]) is made
//! before the run, as the recipe's directories are. The simulation's sites
//! wait for that request to be done before they vote (a site whose
//! transaction is not there yet fails on NoNode), and a multi is all or
//! nothing, so starting from "created" leaves out no behaviour of the
//! sites.
//!
//! Properties (each a named value below), mirroring the simulation's
//! oracle ([`zoosim_core::check::two_phase_commit`]):
//!
//! * always [`AGREEMENT`]: no two sites decide differently;
//! * always [`VALIDITY`]: a site decides commit only if every site had
//!   voted commit;
//! * always [`ABORT_VALIDITY`] (the model's own, beyond the oracle): a
//!   site decides abort only if some site voted abort or some site's
//!   session had ended (the only failure the recipe aborts for: a lost
//!   reply, a lost request, a disconnect or a crash with the session
//!   alive must not make anyone abort);
//! * always [`NO_RECIPE_FAILURE`]: the machine never refuses a command nor
//!   meets an answer it has no way forward from;
//! * eventually [`EVERY_LIVE_SITE_DECIDES`]: every site whose process and
//!   session live decides — unless, at the end, some site crashed or lost
//!   its session without its vote ever landing on its node (classic 2PC
//!   blocking: without timers nobody can tell a site that died before its
//!   `alive` node was seen from a slow one; the oracle's excuse is any
//!   crash before deciding, this one is narrower: once a dead site's node
//!   holds a vote, or the abort another site wrote for it, everyone must
//!   decide). Fairness as in every model: runs are finite and end only
//!   when nothing is enabled; the server always expires a crashed site's
//!   session; a disconnected site always reconnects;
//! * sometimes: commit decided, abort decided, abort decided in a run
//!   with an abort vote (`aborted-on-an-abort-vote`), an abort written
//!   for a failed site (`aborted-for-failed-site`, with an expiry or a
//!   crash in the budget), and each phase in [`PHASES`] where the run's
//!   votes and faults lead to it — and every fault in the budget taken.
//!
//! No "no herd" and no "no orphans": every site watches every vote by
//! design, and the transaction's nodes are its record (persistent); the
//! `alive` nodes are ephemeral and go with their sessions.

use stateright::Property;

use zoosim_core::check::Property as Claim;

use super::observed::{at_end, bit, Condition, Observed, Phases, Seen};
use super::{Faults, Log, Maker, ModelError, RecipeModel, State, World};
use zoosim_core::proto::{Op, ZkError};
use zoosim_recipes::two_phase_commit::{Site, SiteCommand, SiteOutcome, TwoPhaseCommitVariant};
use zoosim_recipes::{Input, Machine, Output};

/// The transactions' parent.
pub const PARENT: &str = "/tpc";
/// The transaction's node.
pub const TX: &str = "/tpc/t0";

pub use zoosim_core::check::two_phase_commit::AGREEMENT;
pub use zoosim_core::check::two_phase_commit::VALIDITY;
/// Abort only if some site voted abort or some session ended.
pub const ABORT_VALIDITY: Claim = Claim::new(
    "abort-validity",
    "a transaction aborts only if some site voted abort or some site's session ended",
);
pub use super::NO_RECIPE_FAILURE;
/// Every live site decides: the unbounded `eventually` the oracle's
/// `liveness` bounds in time.
pub const EVERY_LIVE_SITE_DECIDES: Claim = Claim::new(
    "every-live-site-decides",
    "every site whose process and session live decides (unless a dead site's vote never landed)",
);

/// The phases the model names (an abort written for a failed site is
/// the machine's own outcome, so its "sometimes", `aborted-for-failed-site`,
/// needs no observer: see [`RecipeModel::properties`]).
pub const PHASES: [&str; 5] = [
    "lost-the-race-to-abort-for-a-site",
    "own-vote-found-taken",
    "alive-node-found-after-lost-reply",
    "request-sent-again-after-reconnect",
    "site-lost",
];

/// Two-phase commit's phases, read from what the machine does.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct TpcPhases;

impl<M> Phases<M> for TpcPhases
where
    M: Machine<Command = SiteCommand, Outcome = SiteOutcome>,
{
    fn phase(input: &Input<SiteCommand>, output: &Output<SiteOutcome>) -> Option<&'static str> {
        Some(match (input, output) {
            (Input::Reply(_, Err(ZkError::BadVersion)), Output::Send(_, Op::GetData { .. })) => {
                "lost-the-race-to-abort-for-a-site"
            }
            (_, Output::Outcome(SiteOutcome::Voted { ours: false })) => "own-vote-found-taken",
            (Input::Reply(_, Err(ZkError::NodeExists)), Output::Send(_, Op::SetData { .. })) => {
                "alive-node-found-after-lost-reply"
            }
            (Input::Session(_), Output::Send(..)) => "request-sent-again-after-reconnect",
            (_, Output::Outcome(SiteOutcome::Lost { .. })) => "site-lost",
            _ => return None,
        })
    }
}

/// Makes a client's machine: `(tx, me, sites)`.
pub type MakeMachine<M> = fn(&str, usize, usize) -> M;

/// What the model is, for `zoosim list`.
pub const ABOUT: &str = "two-phase commit: every client is a site of one transaction, \
     votes and waits for the decision; the last site's vote is the run's choice, commit or abort";

/// The variants, the correct one first.
pub const VARIANTS: [TwoPhaseCommitVariant; 2] = TwoPhaseCommitVariant::ALL;

/// The sites whose vote the catalog's model chooses at `sites` sites (a
/// bit each; the others vote commit): the last site's (see the module's
/// "Votes" for why only one).
pub fn chosen_sites(sites: usize) -> u8 {
    1 << sites.clamp(1, 8).saturating_sub(1)
}

/// Two-phase commit as a model: `sites` sites (the world must have that
/// many clients: [`TwoPhaseCommitModel::world`]), site `aborter` (if any)
/// voting abort, the sites in `chosen` voting as the run chooses, running
/// machine `M`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TwoPhaseCommitModel<M = Site> {
    /// How many sites (the world's clients).
    pub sites: usize,
    /// The site that votes abort; None: every site not in `chosen` votes
    /// commit.
    pub aborter: Option<usize>,
    /// The sites (a bit each) whose vote the model chooses: commit or
    /// abort, both explored.
    pub chosen: u8,
    /// The recipe's variant the machine runs (its name is the model's
    /// variant's).
    pub variant: TwoPhaseCommitVariant,
    /// Record the phases reached (see [`super::observed`]'s "Phases cost
    /// states").
    pub phases: bool,
    make: Maker<MakeMachine<M>>,
}

impl TwoPhaseCommitModel<Site> {
    /// The model of `sites` sites of [`Site`], `aborter` voting abort.
    pub fn new(sites: usize, aborter: Option<usize>) -> TwoPhaseCommitModel<Site> {
        TwoPhaseCommitModel::with_machine(sites, aborter, Site::new)
    }

    /// The catalog's model (`zoosim check two-phase-commit`) of
    /// `variant` at `sites` sites: the last site's vote chosen
    /// ([`chosen_sites`]), the others commit.
    pub fn of_variant(variant: TwoPhaseCommitVariant, sites: usize) -> TwoPhaseCommitModel<Site> {
        let make: MakeMachine<Site> = match variant {
            TwoPhaseCommitVariant::Correct => Site::new,
            TwoPhaseCommitVariant::CommitBeforeAllVotes => |tx, me, sites| {
                Site::with_variant(tx, me, sites, TwoPhaseCommitVariant::CommitBeforeAllVotes)
            },
        };
        let mut model = TwoPhaseCommitModel::with_machine(sites, None, make);
        model.variant = variant;
        model.with_chosen_votes(chosen_sites(sites))
    }
}

/// A bit for each of `sites` sites.
fn all_sites(sites: usize) -> u8 {
    u8::try_from((1u16 << sites.min(8)) - 1).unwrap_or(u8::MAX)
}

impl<M> TwoPhaseCommitModel<M>
where
    M: Machine<Command = SiteCommand, Outcome = SiteOutcome> + Send + Sync + 'static,
{
    /// The model over another machine with the site's commands and
    /// outcomes, made by `make` (e.g. a deliberately broken copy).
    pub fn with_machine(
        sites: usize,
        aborter: Option<usize>,
        make: MakeMachine<M>,
    ) -> TwoPhaseCommitModel<M> {
        TwoPhaseCommitModel {
            sites,
            aborter,
            chosen: 0,
            variant: TwoPhaseCommitVariant::Correct,
            phases: false,
            make: Maker(make),
        }
    }

    /// The same model with the votes of the sites in `chosen` (a bit
    /// each) chosen in the run: commit or abort, both explored.
    pub fn with_chosen_votes(mut self, chosen: u8) -> Self {
        self.chosen = chosen;
        self
    }

    /// The same model recording the phases reached, each a "sometimes"
    /// property.
    pub fn with_phases(mut self) -> Self {
        self.phases = true;
        self
    }

    /// The world of this model: one client per site, with `faults`. The
    /// recipe's directories (the transaction's vote nodes) depend on the
    /// number of sites, which the world does not tell a recipe, so the
    /// model carries it and makes its own world.
    pub fn world(self, faults: Faults) -> Result<World<Self>, ModelError> {
        if self.aborter.is_some_and(|a| a >= self.sites) {
            return Err(ModelError::Size(format!(
                "the aborting site {:?} is not one of the {} sites",
                self.aborter, self.sites
            )));
        }
        if self.chosen & !all_sites(self.sites) != 0 {
            return Err(ModelError::Size(format!(
                "the sites whose vote is chosen ({:#b}) are not all among the {} sites",
                self.chosen, self.sites
            )));
        }
        if self.aborter.is_some_and(|a| self.chosen & (1 << a) != 0) {
            return Err(ModelError::Size(format!(
                "site {:?} cannot both vote abort and have its vote chosen",
                self.aborter
            )));
        }
        let sites = self.sites;
        World::new(self, sites, faults)
    }
}

/// Where one site's application is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Step {
    /// About to vote.
    Start,
    /// Voted; waiting for the decision.
    Voting,
    /// Decided: commit (true) or abort.
    Decided(bool),
    /// Its session ended before the decision.
    Lost,
}

/// What the sites share: sticky flags and masks (a bit per site) for the
/// properties.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Shared {
    /// Sites that voted commit.
    pub commit_votes: u8,
    /// Sites that voted abort.
    pub abort_votes: u8,
    /// A site decided commit.
    pub committed: bool,
    /// A site decided abort.
    pub aborted: bool,
    /// A site wrote abort for a site whose session ended unvoted.
    pub aborted_for: bool,
    /// A site decided commit without every site's commit vote.
    pub invalid_commit: bool,
    /// The machine refused a command or failed.
    pub failed: bool,
    /// The phases reached ([`PHASES`], a bit each).
    pub phases: u32,
}

/// One site's application.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct App {
    /// The site's number.
    pub me: u8,
    /// Its vote: commit (true) or abort; None until the run chooses it
    /// (a site whose vote the model chooses).
    pub vote: Option<bool>,
    /// Where it is.
    pub step: Step,
}

impl<M> RecipeModel for TwoPhaseCommitModel<M>
where
    M: Machine<Command = SiteCommand, Outcome = SiteOutcome> + Send + Sync + 'static,
{
    type Machine = Observed<M, TpcPhases>;
    type App = App;
    type Shared = Shared;
    const CLAIMS: &'static [Claim] = &[
        AGREEMENT,
        VALIDITY,
        ABORT_VALIDITY,
        NO_RECIPE_FAILURE,
        EVERY_LIVE_SITE_DECIDES,
    ];

    fn name(&self) -> &'static str {
        "two-phase-commit"
    }

    fn dirs(&self) -> Vec<String> {
        // The coordinator's multi, done before the run (see the module).
        let mut d = vec![PARENT.to_owned(), TX.to_owned()];
        d.extend((0..self.sites).map(|i| format!("{TX}/s{i}")));
        d
    }

    fn client(&self, i: usize) -> (Self::Machine, App) {
        let app = App {
            me: i as u8,
            vote: (self.chosen & (1 << i) == 0).then_some(self.aborter != Some(i)),
            step: Step::Start,
        };
        (Observed::new((self.make.0)(TX, i, self.sites)), app)
    }

    fn wants(&self, app: &App) -> bool {
        app.step == Step::Start
    }

    fn choices(&self, app: &App) -> u8 {
        // Commit (choice 0) or abort (1), for a site whose vote is chosen.
        if app.step == Step::Start && app.vote.is_none() {
            2
        } else {
            1
        }
    }

    fn choose(&self, app: &mut App, k: u8) {
        app.vote = Some(k == 0);
    }

    fn command(&self, app: &mut App, shared: &mut Shared, _live: bool, _: &mut Log) -> SiteCommand {
        // A chosen vote is chosen before the command (`choices`).
        let Some(commit) = app.vote else {
            unreachable!("site {}: the world chooses its vote first", app.me)
        };
        if commit {
            shared.commit_votes |= 1 << app.me;
        } else {
            shared.abort_votes |= 1 << app.me;
        }
        app.step = Step::Voting;
        SiteCommand::Vote { commit }
    }

    fn outcome(&self, app: &mut App, shared: &mut Shared, outcome: &Seen<SiteOutcome>) {
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
            SiteOutcome::Decided { commit } => {
                if *commit {
                    shared.committed = true;
                    let all = (1u16 << self.sites) - 1;
                    shared.invalid_commit |= u16::from(shared.commit_votes) != all;
                } else {
                    shared.aborted = true;
                }
                app.step = Step::Decided(*commit);
            }
            SiteOutcome::Lost { .. } => app.step = Step::Lost,
            SiteOutcome::AbortedFor { .. } => shared.aborted_for = true,
            SiteOutcome::Voted { .. } => {}
            SiteOutcome::Refused | SiteOutcome::Failed(_) => shared.failed = true,
        }
    }

    fn finished(&self, app: &App) -> bool {
        matches!(app.step, Step::Decided(_) | Step::Lost)
    }

    fn properties(&self, faults: &Faults) -> Vec<Property<World<Self>>> {
        let mut p = vec![
            Property::always(AGREEMENT.name, |_, s: &State<Self>| {
                !(s.shared.committed && s.shared.aborted)
            }),
            Property::always(VALIDITY.name, |_, s: &State<Self>| !s.shared.invalid_commit),
            // Judged in every state, so in the one where the abort was
            // decided: an ended session is for good, a later one cannot
            // excuse it.
            Property::always(ABORT_VALIDITY.name, |_, s: &State<Self>| {
                !s.shared.aborted
                    || s.shared.abort_votes != 0
                    || s.clients.iter().any(|c| !c.session)
            }),
            Property::always(NO_RECIPE_FAILURE.name, |_, s: &State<Self>| {
                !s.shared.failed
            }),
            // "Every live site decided" is monotone along every run (a
            // decision, a crash and an ended session are for good); the
            // excuse is judged only in end states.
            Property::eventually(EVERY_LIVE_SITE_DECIDES.name, |w, s: &State<Self>| {
                s.clients
                    .iter()
                    .filter(|c| !c.crashed && c.session)
                    .all(|c| matches!(c.app.step, Step::Decided(_)))
                    || (blocked(s) && at_end(w, s))
            }),
        ];
        // A site that fails before its vote lands: its session ends (a
        // forced expiry, or the expiry that follows a crash).
        let failed_site = faults.forced_expiry > 0 || faults.client_crash > 0;
        let abort_vote = self.aborter.is_some() || self.chosen != 0;
        if self.aborter.is_none() {
            p.push(Property::sometimes(
                "commit-decided",
                |_, s: &State<Self>| s.shared.committed,
            ));
        }
        if abort_vote || failed_site {
            p.push(Property::sometimes(
                "abort-decided",
                |_, s: &State<Self>| s.shared.aborted,
            ));
        }
        if abort_vote {
            // Decided abort in a run where some site voted abort.
            p.push(Property::sometimes(
                "aborted-on-an-abort-vote",
                |_, s: &State<Self>| s.shared.aborted && s.shared.abort_votes != 0,
            ));
        }
        if failed_site {
            // A site's session ends before it voted, after another site
            // saw its alive node: that site writes abort for it.
            p.push(Property::sometimes(
                "aborted-for-failed-site",
                |_, s: &State<Self>| s.shared.aborted_for,
            ));
        }
        let reach: [Condition<Self>; 5] = [
            reached::<M, 0>,
            reached::<M, 1>,
            reached::<M, 2>,
            reached::<M, 3>,
            reached::<M, 4>,
        ];
        for (name, f) in PHASES.into_iter().zip(reach) {
            let expected = match name {
                // A site's session ends before it voted, after another
                // site saw its alive node: aborts are written for it (by
                // two sites at once, one loses the race); the site is
                // told its session is lost.
                "site-lost" => faults.forced_expiry > 0,
                "lost-the-race-to-abort-for-a-site" => faults.forced_expiry > 0 && self.sites >= 3,
                // A lost reply to the vote or to the alive node's create.
                "own-vote-found-taken" | "alive-node-found-after-lost-reply" => {
                    faults.lost_reply > 0
                }
                "request-sent-again-after-reconnect" => {
                    faults.lost_reply > 0 || faults.lost_request > 0
                }
                _ => true,
            };
            if expected && self.phases {
                p.push(Property::sometimes(name, f));
            }
        }
        p
    }
}

/// Some site crashed or lost its session, and its vote node holds no vote
/// (neither its own nor an abort written for it).
fn blocked<M>(s: &State<TwoPhaseCommitModel<M>>) -> bool
where
    M: Machine<Command = SiteCommand, Outcome = SiteOutcome> + Send + Sync + 'static,
{
    s.clients.iter().enumerate().any(|(i, c)| {
        (c.crashed || !c.session)
            && s.tree
                .node(&format!("{TX}/s{i}"))
                .is_some_and(|n| n.data.is_empty())
    })
}

/// Phase `I` of [`PHASES`] was reached.
fn reached<M, const I: usize>(
    _: &World<TwoPhaseCommitModel<M>>,
    s: &State<TwoPhaseCommitModel<M>>,
) -> bool
where
    M: Machine<Command = SiteCommand, Outcome = SiteOutcome> + Send + Sync + 'static,
{
    s.shared.phases & (1 << I) != 0
}
