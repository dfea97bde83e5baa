//! The coordination recipes' stateright models (crates/zoosim-models/src): the double
//! barrier, two-phase commit and group membership hold every property over
//! every interleaving of 2 clients with all faults, and every "sometimes"
//! is reached; at 3 clients, two-phase commit (all voting commit, and one
//! voting abort), membership without churn and the double barrier with all
//! faults, and the double barrier without faults (membership with churn at
//! 3: the ignored test); two-phase commit also with every site's vote
//! chosen by the run at 2 sites; a deliberately broken copy of each
//! machine, and the buggy variant `two-phase-commit/commit-before-all-votes`,
//! is caught with a shortest counterexample, kept as an insta snapshot
//! (tests/snapshots/models_coord__*.snap). Each check prints its states
//! and time (`-- --nocapture`).

#[path = "support/models.rs"]
mod support;

use std::time::Instant;

use zoosim::models::double_barrier::{
    DoubleBarrierModel, ENTER_SAFETY, EVERY_LIVE_CLIENT_PASSES, LEAVE_SAFETY,
};
use zoosim::models::membership::{MembershipModel, CONVERGENCE, MEMBER_NODES_ARE_SESSIONS};
use zoosim::models::two_phase_commit::{TwoPhaseCommitModel, AGREEMENT, VALIDITY};
use zoosim::models::{
    check, render_path, shortest, Checked, Fault, Faults, Options, RecipeModel, Search, World,
};
use zoosim::proto::{CreateMode, Op, Reply, SessionId};
use zoosim::recipes::double_barrier::{DoubleBarrier, DoubleBarrierCommand, DoubleBarrierOutcome};
use zoosim::recipes::membership::{Membership, MembershipCommand, MembershipOutcome};
use zoosim::recipes::two_phase_commit::TwoPhaseCommitVariant;
use zoosim::recipes::two_phase_commit::{Site, SiteCommand, SiteOutcome};
use zoosim::recipes::{Input, Machine, OpId, Output};

/// Checks `world` depth-first (fingerprints only: the largest models fit
/// in memory so), printing its size; asserts that every property holds.
fn holds_depth_first<R: RecipeModel>(what: &str, world: &World<R>) -> Checked {
    let options = Options {
        search: Search::Dfs,
        ..Options::default()
    };
    let checked = check(world, options);
    eprintln!("{what}: {} unique", checked.unique);
    assert!(checked.all_hold(), "{what}: {:#?}", checked.verdicts);
    checked
}

/// Checks `world` exhaustively, printing its size and time; asserts that
/// every property holds (every "sometimes" among them reached), every
/// fault was taken, and the search was real.
fn holds<R: RecipeModel>(what: &str, world: &World<R>, at_least: usize) -> Checked {
    let start = Instant::now();
    let checked = check(world, Options::default());
    eprintln!(
        "{what}: {} states, {} unique, depth {}, {:.2?}",
        checked.states,
        checked.unique,
        checked.depth,
        start.elapsed()
    );
    let failing: Vec<_> = checked.verdicts.iter().filter(|v| !v.holds).collect();
    assert!(failing.is_empty(), "{what}: failing: {failing:#?}");
    for f in Fault::ALL {
        if world.faults.of(f) > 0 {
            assert!(
                checked.verdict(f.property()).is_some_and(|v| v.holds),
                "{what}: {} not taken",
                f.property()
            );
        }
    }
    assert!(
        checked.unique >= at_least,
        "{what}: {} states only",
        checked.unique
    );
    checked
}

/// The "sometimes" properties `names` are all among `checked`'s verdicts,
/// and hold (reached).
fn reached(what: &str, checked: &Checked, names: &[&str]) {
    for n in names {
        assert!(
            checked
                .verdict(n)
                .is_some_and(|v| v.holds && v.kind == "sometimes"),
            "{what}: {n} never reached (or not a sometimes property)"
        );
    }
}

/// Each phase in `names` is reached in `world` (a model recording its
/// phases): one breadth-first run per phase, which stops at its first
/// witness (see crates/zoosim-models/src/observed.rs, "Phases cost states").
fn phases_reached<R: RecipeModel>(what: &str, world: &World<R>, names: &[&'static str]) {
    let start = Instant::now();
    for name in names {
        let mut one = world.clone();
        one.only = Some(name);
        let checked = check(&one, Options::default());
        reached(what, &checked, &[name]);
    }
    eprintln!(
        "{what}: {} phases reached, {:.2?}",
        names.len(),
        start.elapsed()
    );
}

/// `world` fails `property`; its shortest counterexample has at most 15
/// steps and reads as the snapshot `name`.
fn caught<R: RecipeModel>(
    world: &World<R>,
    property: zoosim::check::Property,
    name: &str,
) -> usize {
    let (steps, text) = support::counterexample(world, property.name, name);
    insta::assert_snapshot!(name, text);
    steps
}

// ---------------------------------------------------------------------
// Double barrier.

fn double_barrier(threshold: usize, clients: usize, faults: Faults) -> World<DoubleBarrierModel> {
    World::new(DoubleBarrierModel::new(threshold), clients, faults).expect("a valid size")
}

/// Every phase of the double barrier.
const DB_PHASES: [&str; 10] = zoosim::models::double_barrier::PHASES;

#[test]
fn the_double_barrier_holds_everything_at_two_clients_with_all_faults() {
    // x = 2 of 2: nobody computes before both are there.
    let both = holds(
        "double barrier x=2 of 2",
        &double_barrier(2, 2, Faults::ONE_EACH),
        10_000,
    );
    reached("x=2", &both, &["entered", "left", "session-lost"]);
    let phased = World::new(
        DoubleBarrierModel::new(2).with_phases(),
        2,
        Faults::ONE_EACH,
    )
    .expect("a valid size");
    phases_reached("double barrier x=2 of 2", &phased, &DB_PHASES);
}

/// Three clients, without faults (x = 3: 27,716 unique states; x = 2:
/// 64,273; under a second each here).
#[test]
fn the_double_barrier_holds_everything_at_three_clients_without_faults() {
    for x in [3, 2] {
        let what = format!("double barrier x={x} of 3");
        let checked = holds(&what, &double_barrier(x, 3, Faults::NONE), 20_000);
        reached(&what, &checked, &["entered", "left"]);
        let phased = World::new(DoubleBarrierModel::new(x).with_phases(), 3, Faults::NONE)
            .expect("a valid size");
        let phases: Vec<_> = DB_PHASES
            .into_iter()
            .filter(|p| !p.contains("lost-reply") && !p.contains("already-gone"))
            .collect();
        phases_reached(&what, &phased, &phases);
    }
}

/// Three clients with all faults (x = 2): the runs with at most one fault
/// in all are exactly the union, over the fault kinds, of the runs with at
/// most one fault of that kind, so each kind is checked on its own (a
/// test each, so that the harness runs them side by side): 2,096,576
/// unique states in all (every kind: 2.45M, the fault-free runs counted
/// once per kind), depth-first to keep the memory small.
fn double_barrier_holds_at_three_clients_with(fault: Fault) {
    let what = format!("double barrier x=2 of 3, {fault}");
    let faults = Faults::parse(fault.name()).expect("a fault's own name");
    let checked = holds_depth_first(&what, &double_barrier(2, 3, faults));
    reached(&what, &checked, &["entered", "left", fault.property()]);
    // A client learns that its session ended only after an expiry (a
    // crashed one never hears of it).
    if fault == Fault::ForcedExpiry {
        reached(&what, &checked, &["session-lost"]);
    }
    assert!(
        checked.unique >= 100_000,
        "{what}: {} states",
        checked.unique
    );
}

/// One test per fault kind; the match is exhaustive, so a new kind does
/// not compile until it has its test here.
macro_rules! double_barrier_at_three_clients {
    ($($test:ident: $fault:ident),* $(,)?) => {
        const _: fn(Fault) = |f| match f {
            $(Fault::$fault => {})*
        };
        $(
            #[test]
            fn $test() {
                double_barrier_holds_at_three_clients_with(Fault::$fault);
            }
        )*
    };
}

double_barrier_at_three_clients! {
    the_double_barrier_holds_everything_at_three_clients_with_a_lost_reply: LostReply,
    the_double_barrier_holds_everything_at_three_clients_with_a_lost_request: LostRequest,
    the_double_barrier_holds_everything_at_three_clients_with_a_broken_connection: BrokenConnection,
    the_double_barrier_holds_everything_at_three_clients_with_a_forced_expiry: ForcedExpiry,
    the_double_barrier_holds_everything_at_three_clients_with_a_client_crash: ClientCrash,
    the_double_barrier_holds_everything_at_three_clients_with_a_lagging_read: LaggingRead,
    the_double_barrier_holds_everything_at_three_clients_with_a_zombie_read: ZombieRead,
    the_double_barrier_holds_everything_at_three_clients_with_a_deposed_leader: DeposedLeader,
}

#[test]
fn a_short_barrier_is_excused() {
    // x = 2 of 2 with a crash: the barrier may never open, and that is
    // excused (one live client is short of 2).
    let world = double_barrier(2, 2, Faults::parse("client-crash").expect("a list"));
    let checked = check(&world, Options::default());
    assert!(checked.all_hold(), "{:#?}", checked.verdicts);
}

/// A broken copy of the double barrier that counts one process too few
/// when it decides whether enough are there: with everyone there, nobody
/// makes `ready`, and nobody is short of anything — a stall.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct CountsOneTooFew(DoubleBarrier);

fn counts_one_too_few(dir: &str, name: &str, s: SessionId, x: usize) -> CountsOneTooFew {
    CountsOneTooFew(DoubleBarrier::new(dir, name, s, x))
}

impl Machine for CountsOneTooFew {
    type Command = DoubleBarrierCommand;
    type Outcome = DoubleBarrierOutcome;

    fn handle(&mut self, input: Input<DoubleBarrierCommand>) {
        let input = match input {
            // Every list loses its first process (the enter's count is the
            // only list before anyone is in).
            Input::Reply(id, Ok(Reply::GetChildren { mut children, stat }))
                if !children.iter().any(|c| c == "ready") =>
            {
                if !children.is_empty() {
                    children.remove(0);
                }
                Input::Reply(id, Ok(Reply::GetChildren { children, stat }))
            }
            other => other,
        };
        self.0.handle(input);
    }

    fn poll(&mut self) -> Option<Output<DoubleBarrierOutcome>> {
        self.0.poll()
    }
}

#[test]
fn a_double_barrier_that_counts_one_too_few_stalls() {
    let world = World::new(
        DoubleBarrierModel::with_machine(2, counts_one_too_few),
        2,
        Faults::NONE,
    )
    .expect("a valid size");
    caught(
        &world,
        EVERY_LIVE_CLIENT_PASSES,
        "double-barrier-counts-one-too-few",
    );
}

/// A broken copy of the double barrier that counts one process too many
/// when it decides whether enough are there (an off-by-one: its own node
/// twice, say).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct CountsOneTooMany {
    inner: DoubleBarrier,
    /// The enter's count in flight (the list sent while entering).
    count: Option<OpId>,
    entering: bool,
}

fn counts_one_too_many(dir: &str, name: &str, s: SessionId, x: usize) -> CountsOneTooMany {
    CountsOneTooMany {
        inner: DoubleBarrier::new(dir, name, s, x),
        count: None,
        entering: false,
    }
}

impl Machine for CountsOneTooMany {
    type Command = DoubleBarrierCommand;
    type Outcome = DoubleBarrierOutcome;

    fn handle(&mut self, input: Input<DoubleBarrierCommand>) {
        let input = match input {
            Input::Command(c) => {
                self.entering = c == DoubleBarrierCommand::Enter;
                Input::Command(c)
            }
            Input::Reply(id, Ok(Reply::GetChildren { mut children, stat }))
                if Some(id) == self.count =>
            {
                children.push("phantom".into());
                Input::Reply(id, Ok(Reply::GetChildren { children, stat }))
            }
            other => other,
        };
        self.inner.handle(input);
    }

    fn poll(&mut self) -> Option<Output<DoubleBarrierOutcome>> {
        let out = self.inner.poll()?;
        if let Output::Send(id, Op::GetChildren { .. }) = &out {
            if self.entering {
                self.count = Some(*id);
            }
        }
        Some(out)
    }
}

/// A broken copy of the double barrier that leaves without waiting: its
/// leave's list comes back with only its own node in it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct LeavesAlone {
    inner: DoubleBarrier,
    name: String,
    leaving: bool,
}

fn leaves_alone(dir: &str, name: &str, s: SessionId, x: usize) -> LeavesAlone {
    LeavesAlone {
        inner: DoubleBarrier::new(dir, name, s, x),
        name: name.to_owned(),
        leaving: false,
    }
}

impl Machine for LeavesAlone {
    type Command = DoubleBarrierCommand;
    type Outcome = DoubleBarrierOutcome;

    fn handle(&mut self, input: Input<DoubleBarrierCommand>) {
        let input = match input {
            Input::Command(c) => {
                self.leaving |= c == DoubleBarrierCommand::Leave;
                Input::Command(c)
            }
            Input::Reply(id, Ok(Reply::GetChildren { children, stat })) if self.leaving => {
                let children = children.into_iter().filter(|c| *c == self.name).collect();
                Input::Reply(id, Ok(Reply::GetChildren { children, stat }))
            }
            other => other,
        };
        self.inner.handle(input);
    }

    fn poll(&mut self) -> Option<Output<DoubleBarrierOutcome>> {
        self.inner.poll()
    }
}

#[test]
fn a_double_barrier_that_counts_one_too_many_lets_a_client_compute_early() {
    let world = World::new(
        DoubleBarrierModel::with_machine(3, counts_one_too_many),
        3,
        Faults::NONE,
    )
    .expect("a valid size");
    caught(&world, ENTER_SAFETY, "double-barrier-counts-one-too-many");
}

#[test]
fn a_double_barrier_that_leaves_alone_leaves_early() {
    let world = World::new(
        DoubleBarrierModel::with_machine(3, leaves_alone),
        3,
        Faults::NONE,
    )
    .expect("a valid size");
    caught(&world, LEAVE_SAFETY, "double-barrier-leaves-alone");
}

// ---------------------------------------------------------------------
// Two-phase commit.

fn tpc_at(sites: usize, aborter: Option<usize>, faults: Faults) -> World<TwoPhaseCommitModel> {
    TwoPhaseCommitModel::new(sites, aborter)
        .world(faults)
        .expect("a valid size")
}

/// Checks two-phase commit at `sites` sites with all faults: all commit,
/// one site voting abort, and every site's vote chosen by the run.
fn tpc_holds(sites: usize, phases: &[&'static str]) {
    // Every site votes commit: commit, or abort only for a failed site.
    let what = format!("2pc all commit, {sites} sites");
    let commit = holds(&what, &tpc_at(sites, None, Faults::ONE_EACH), 1_000);
    reached(
        &what,
        &commit,
        &["commit-decided", "abort-decided", "aborted-for-failed-site"],
    );
    let phased = TwoPhaseCommitModel::new(sites, None)
        .with_phases()
        .world(Faults::ONE_EACH)
        .expect("a valid size");
    phases_reached(&what, &phased, phases);
    // The last site votes abort: everyone aborts.
    let what = format!("2pc one abort, {sites} sites");
    let abort = holds(
        &what,
        &tpc_at(sites, Some(sites - 1), Faults::ONE_EACH),
        1_000,
    );
    reached(
        &what,
        &abort,
        &["abort-decided", "aborted-on-an-abort-vote"],
    );
    assert!(abort.verdict("commit-decided").is_none());
    // Every site's vote chosen: commit or abort, both explored.
    let what = format!("2pc every vote chosen, {sites} sites");
    let every = (1u8 << sites) - 1;
    let chosen = TwoPhaseCommitModel::new(sites, None)
        .with_chosen_votes(every)
        .world(Faults::ONE_EACH)
        .expect("a valid size");
    let chosen = holds(&what, &chosen, abort.unique + commit.unique);
    reached(
        &what,
        &chosen,
        &[
            "commit-decided",
            "abort-decided",
            "aborted-on-an-abort-vote",
            "aborted-for-failed-site",
        ],
    );
}

#[test]
fn two_phase_commit_holds_everything_at_two_sites_with_all_faults() {
    tpc_holds(
        2,
        &[
            "own-vote-found-taken",
            "alive-node-found-after-lost-reply",
            "request-sent-again-after-reconnect",
            "site-lost",
        ],
    );
}

/// Three sites with all faults, every site voting commit (464,693 unique
/// states, breadth-first, about 20 s here): commit, and abort for a site
/// whose session ended. With the next test, the catalog's model at 3 sites
/// (the last site's vote chosen: the union of both, see
/// crates/zoosim-models/src/tests.rs).
#[test]
fn two_phase_commit_holds_everything_at_three_sites_with_all_faults() {
    let what = "2pc all commit, 3 sites, all faults";
    let commit = holds(what, &tpc_at(3, None, Faults::ONE_EACH), 100_000);
    reached(
        what,
        &commit,
        &["commit-decided", "abort-decided", "aborted-for-failed-site"],
    );
}

/// Three sites with all faults, one voting abort (378,530 unique states,
/// about 14 s here in the test build).
#[test]
fn two_phase_commit_with_an_abort_vote_holds_everything_at_three_sites_with_all_faults() {
    let what = "2pc one abort, 3 sites, all faults";
    let abort = holds(what, &tpc_at(3, Some(2), Faults::ONE_EACH), 100_000);
    reached(what, &abort, &["abort-decided", "aborted-on-an-abort-vote"]);
}

/// An abort written for a failed site (the simulation's coverage goal
/// `aborts-for-failed-sites` too): its shortest way there in the model
/// shows the window it takes: a site's session ends after its `alive`
/// node was seen and before its vote landed.
#[test]
fn an_abort_for_a_failed_site_is_reached_and_kept() {
    let world = TwoPhaseCommitModel::new(2, None)
        .with_phases()
        .world(Faults::parse("forced-expiry").expect("a list"))
        .expect("a valid size");
    let path = shortest(&world, "aborted-for-failed-site").expect("reached");
    let text = format!(
        "shortest run to an abort written for a failed site ({} steps)\n{}",
        path.len(),
        render_path(&world, &path)
    );
    insta::assert_snapshot!("tpc-aborted-for-failed-site", text);
}

#[test]
fn two_phase_commit_sizes_are_checked() {
    let e = TwoPhaseCommitModel::new(3, Some(3))
        .world(Faults::NONE)
        .unwrap_err();
    assert!(e.to_string().contains("not one of the 3 sites"), "{e}");
    let e = TwoPhaseCommitModel::new(2, None)
        .with_chosen_votes(0b100)
        .world(Faults::NONE)
        .unwrap_err();
    assert!(e.to_string().contains("not all among the 2 sites"), "{e}");
    let e = TwoPhaseCommitModel::new(2, Some(1))
        .with_chosen_votes(0b10)
        .world(Faults::NONE)
        .unwrap_err();
    assert!(e.to_string().contains("both vote abort and"), "{e}");
}

/// The buggy variant `two-phase-commit/commit-before-all-votes`, as
/// `zoosim check` builds it (the last site's vote chosen): a site that
/// has read every vote node, found no abort and took the empty ones as no
/// objection decides commit; the last site then votes abort. Caught
/// without faults, at 2 sites, breaking validity and agreement.
#[test]
fn a_site_that_commits_before_all_votes_are_in_is_caught() {
    let broken = TwoPhaseCommitModel::of_variant(TwoPhaseCommitVariant::CommitBeforeAllVotes, 2)
        .world(Faults::NONE)
        .expect("a valid size");
    let steps = caught(&broken, VALIDITY, "tpc-commit-before-all-votes");
    assert!(steps <= 8, "{steps} steps");
    caught(&broken, AGREEMENT, "tpc-commit-before-all-votes-agreement");
    // The correct site, in the same model, holds both.
    let correct = TwoPhaseCommitModel::of_variant(TwoPhaseCommitVariant::Correct, 2)
        .world(Faults::NONE)
        .expect("a valid size");
    holds("2pc, the catalog's model, 2 sites, no faults", &correct, 10);
}

/// A broken copy of a site that takes a vote node still empty (its site
/// has not voted yet) for a commit vote.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct EmptyIsCommit(Site);

fn empty_is_commit(tx: &str, me: usize, sites: usize) -> EmptyIsCommit {
    EmptyIsCommit(Site::new(tx, me, sites))
}

impl Machine for EmptyIsCommit {
    type Command = SiteCommand;
    type Outcome = SiteOutcome;

    fn handle(&mut self, input: Input<SiteCommand>) {
        let input = match input {
            Input::Reply(id, Ok(Reply::GetData { data, stat })) if data.is_empty() => Input::Reply(
                id,
                Ok(Reply::GetData {
                    data: b"commit".to_vec(),
                    stat,
                }),
            ),
            other => other,
        };
        self.0.handle(input);
    }

    fn poll(&mut self) -> Option<Output<SiteOutcome>> {
        self.0.poll()
    }
}

#[test]
fn a_site_that_takes_no_vote_for_commit_is_caught() {
    let broken = |aborter| {
        TwoPhaseCommitModel::with_machine(3, aborter, empty_is_commit)
            .world(Faults::NONE)
            .expect("a valid size")
    };
    caught(&broken(Some(2)), VALIDITY, "tpc-empty-vote-is-commit");
    caught(
        &broken(Some(2)),
        AGREEMENT,
        "tpc-empty-vote-is-commit-agreement",
    );
}

// ---------------------------------------------------------------------
// Group membership.

/// Checks membership at `clients` clients with all faults, with and
/// without churn.
fn membership_holds(clients: usize) {
    for churn in [false, true] {
        let what = format!("membership, churn {churn}, {clients} clients");
        let world = World::new(MembershipModel::new(churn), clients, Faults::ONE_EACH)
            .expect("a valid size");
        let checked = holds(&what, &world, 1_000);
        reached(&what, &checked, &["joined", "everyone-seen"]);
        let mut phases = vec![
            "listed-again-on-change",
            "own-node-found-after-lost-reply",
            "member-lost",
        ];
        if churn {
            reached(&what, &checked, &["left"]);
            phases.push("own-node-already-gone");
        }
        let phased = World::new(
            MembershipModel::new(churn).with_phases(),
            clients,
            Faults::ONE_EACH,
        )
        .expect("a valid size");
        phases_reached(&what, &phased, &phases);
    }
}

#[test]
fn membership_holds_everything_at_two_clients_with_all_faults() {
    membership_holds(2);
}

/// Three clients with all faults, without churn (92,264 unique states,
/// about two seconds here).
#[test]
fn membership_holds_everything_at_three_clients_with_all_faults_without_churn() {
    let what = "membership, no churn, 3 clients";
    let world = World::new(MembershipModel::new(false), 3, Faults::ONE_EACH).expect("a valid size");
    let checked = holds(what, &world, 50_000);
    reached(what, &checked, &["joined", "everyone-seen"]);
    let phased = World::new(
        MembershipModel::new(false).with_phases(),
        3,
        Faults::ONE_EACH,
    )
    .expect("a valid size");
    phases_reached(
        what,
        &phased,
        &[
            "listed-again-on-change",
            "own-node-found-after-lost-reply",
            "member-lost",
        ],
    );
}

/// Three clients with all faults and churn (the catalog's membership):
/// more than 2.4 million unique states, not finished within 12 GB
/// breadth-first; depth-first it keeps fingerprints only:
/// `-- --ignored`.
#[test]
#[ignore = "minutes: run with --ignored"]
fn membership_holds_everything_at_three_clients_with_all_faults_and_churn() {
    let what = "membership, churn, 3 clients, all faults";
    let world = World::new(MembershipModel::new(true), 3, Faults::ONE_EACH).expect("a valid size");
    let checked = holds_depth_first(what, &world);
    reached(what, &checked, &["joined", "everyone-seen", "left"]);
}

/// A broken copy of membership that lists the group without a watch: it
/// never hears of a change after its list.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct ListsWithoutWatch(Membership);

fn lists_without_watch(group: &str, member: &str, guid: &str) -> ListsWithoutWatch {
    ListsWithoutWatch(Membership::new(group, member, guid))
}

impl Machine for ListsWithoutWatch {
    type Command = MembershipCommand;
    type Outcome = MembershipOutcome;

    fn handle(&mut self, input: Input<MembershipCommand>) {
        self.0.handle(input);
    }

    fn poll(&mut self) -> Option<Output<MembershipOutcome>> {
        Some(match self.0.poll()? {
            Output::Send(id, Op::GetChildren { path, .. }) => {
                Output::Send(id, Op::GetChildren { path, watch: false })
            }
            other => other,
        })
    }
}

/// A copy of membership that drops a change coming while its list is in
/// flight (the machine's `relist`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct DropsChangeDuringList {
    inner: Membership,
    listing: Option<OpId>,
}

fn drops_change_during_list(group: &str, member: &str, guid: &str) -> DropsChangeDuringList {
    DropsChangeDuringList {
        inner: Membership::new(group, member, guid),
        listing: None,
    }
}

impl Machine for DropsChangeDuringList {
    type Command = MembershipCommand;
    type Outcome = MembershipOutcome;

    fn handle(&mut self, input: Input<MembershipCommand>) {
        match &input {
            Input::Watch(_) if self.listing.is_some() => return,
            Input::Reply(id, _) if Some(*id) == self.listing => self.listing = None,
            _ => {}
        }
        self.inner.handle(input);
    }

    fn poll(&mut self) -> Option<Output<MembershipOutcome>> {
        let out = self.inner.poll()?;
        if let Output::Send(id, Op::GetChildren { .. }) = &out {
            self.listing = Some(*id);
        }
        Some(out)
    }
}

/// No change is ever heard while a list is in flight (see
/// `membership::PHASES`): a copy that drops such changes behaves as the
/// real machine in every run — the machine's `relist` is never used.
#[test]
fn no_change_comes_while_a_membership_list_is_in_flight() {
    let world = World::new(
        MembershipModel::with_machine(false, drops_change_during_list),
        2,
        Faults::ONE_EACH,
    )
    .expect("a valid size");
    let checked = check(&world, Options::default());
    assert!(checked.all_hold(), "{:#?}", checked.verdicts);
}

/// A broken copy of membership whose member node is persistent: it stays
/// when its session ends.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct PersistentMember(Membership);

fn persistent_member(group: &str, member: &str, guid: &str) -> PersistentMember {
    PersistentMember(Membership::new(group, member, guid))
}

impl Machine for PersistentMember {
    type Command = MembershipCommand;
    type Outcome = MembershipOutcome;

    fn handle(&mut self, input: Input<MembershipCommand>) {
        self.0.handle(input);
    }

    fn poll(&mut self) -> Option<Output<MembershipOutcome>> {
        Some(match self.0.poll()? {
            Output::Send(id, Op::Create { path, data, .. }) => Output::Send(
                id,
                Op::Create {
                    path,
                    data,
                    mode: CreateMode::Persistent,
                },
            ),
            other => other,
        })
    }
}

#[test]
fn a_membership_that_lists_without_a_watch_does_not_converge() {
    let world = World::new(
        MembershipModel::with_machine(false, lists_without_watch),
        3,
        Faults::NONE,
    )
    .expect("a valid size");
    caught(&world, CONVERGENCE, "membership-lists-without-watch");
}

#[test]
fn a_membership_with_persistent_member_nodes_is_caught() {
    let world = World::new(
        MembershipModel::with_machine(false, persistent_member),
        2,
        Faults::NONE,
    )
    .expect("a valid size");
    caught(
        &world,
        MEMBER_NODES_ARE_SESSIONS,
        "membership-persistent-member-node",
    );
}
