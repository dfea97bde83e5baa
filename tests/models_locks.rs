//! The models of the lock family beyond the exclusive lock (crates/zoosim-models/src):
//! the shared lock, the revocable shared lock and leader election. Each
//! correct recipe holds every property over every interleaving of 3
//! clients with all faults, and reaches every "sometimes"; each buggy
//! variant, and a deliberately broken copy of each correct machine, is
//! caught with a shortest counterexample (breadth-first, the property
//! named), whose step list is an insta snapshot (tests/snapshots/).

#[path = "support/models.rs"]
mod support;

use std::time::Instant;

use zoosim::models::election::{self, Candidate, ElectionModel};
use zoosim::models::revocable::{self, revocable_lock, RevocableModel};
use zoosim::models::shared_lock::{self, SharedLockModel};
use zoosim::models::{check, Checked, Fault, Faults, Options, World};
use zoosim::proto::{EventType, Reply};
use zoosim::recipes::election::{Election, ElectionCommand, ElectionOutcome, ElectionVariant};
use zoosim::recipes::lock::broken::NoSuspend;
use zoosim::recipes::lock::{Lock, LockCommand, LockMode, LockOutcome, LockVariant};
use zoosim::recipes::{Input, Machine, Output};

/// Checks `world` exhaustively (printing its size and time), asserts that
/// every property holds, that every fault's "sometimes" and each of
/// `phases` is among the verdicts and reached, and that the search was
/// not trivial.
fn holds_everything<R: zoosim::models::RecipeModel>(
    name: &str,
    world: &World<R>,
    phases: &[&str],
) -> Checked {
    let start = Instant::now();
    let checked = check(world, Options::default());
    eprintln!(
        "{name}: {} clients, faults {}: {} states, {} unique, depth {}, {:.2?}",
        world.clients,
        world.faults,
        checked.states,
        checked.unique,
        checked.depth,
        start.elapsed()
    );
    let failing: Vec<_> = checked.verdicts.iter().filter(|v| !v.holds).collect();
    assert!(failing.is_empty(), "{name}: failing: {failing:#?}");
    for f in Fault::ALL {
        assert!(
            checked.verdict(f.property()).is_some_and(|v| v.holds),
            "{name}: {} never taken",
            f.property()
        );
    }
    for p in phases {
        assert!(
            checked.verdict(p).is_some_and(|v| v.holds),
            "{name}: {p} never reached"
        );
    }
    assert!(
        checked.unique > 1_000,
        "{name}: {} states only",
        checked.unique
    );
    checked
}

/// `world` fails `property`; its shortest counterexample has at most 15
/// steps and reads as the snapshot `name`.
fn caught<R: zoosim::models::RecipeModel>(
    world: &World<R>,
    property: zoosim::check::Property,
    name: &str,
) {
    let (_, text) = support::counterexample(world, property.name, name);
    insta::assert_snapshot!(name, text);
}

// ---- the shared lock ----

fn shared(variant: LockVariant, clients: usize, faults: Faults) -> World<SharedLockModel> {
    World::new(SharedLockModel::new(variant), clients, faults).expect("a valid size")
}

#[test]
fn the_correct_shared_lock_holds_everything_at_three_clients_with_all_faults() {
    let world = shared(LockVariant::Correct, 3, Faults::ONE_EACH);
    holds_everything(
        "shared-lock",
        &world,
        &[
            "resource-written",
            "resource-read",
            "readers-hold-together",
            "readers-woken-together",
            "waiter-woken",
            "guid-search-found-node",
            "holder-resumed",
            "lock-lost",
            "released",
        ],
    );
}

#[test]
fn a_reader_waiting_on_any_node_is_woken_by_a_reader() {
    let world = shared(LockVariant::ReaderWaitsOnAny, 3, Faults::ONE_EACH);
    caught(
        &world,
        shared_lock::NO_HERD,
        "shared-lock-reader-waits-on-any",
    );
}

/// A broken copy of the correct shared lock: a reader reads the child
/// list without the write nodes (it takes every node below it for a
/// reader's), so it holds while a writer does.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct WriterBlind(Lock);

fn writer_blind(dir: &str, guid: &str, mode: LockMode, variant: LockVariant) -> WriterBlind {
    WriterBlind(Lock::shared(dir, guid, mode, variant))
}

impl Machine for WriterBlind {
    type Command = LockCommand;
    type Outcome = LockOutcome;

    fn handle(&mut self, input: Input<LockCommand>) {
        let input = match input {
            Input::Reply(id, Ok(Reply::GetChildren { children, stat }))
                if self.0.mode() == LockMode::Read =>
            {
                let children = children
                    .into_iter()
                    .filter(|c| !c.contains("-write-"))
                    .collect();
                Input::Reply(id, Ok(Reply::GetChildren { children, stat }))
            }
            other => other,
        };
        self.0.handle(input);
    }

    fn poll(&mut self) -> Option<Output<LockOutcome>> {
        self.0.poll()
    }
}

#[test]
fn a_shared_lock_whose_readers_do_not_see_writers_is_caught() {
    let broken = World::new(
        SharedLockModel::with_machine(LockVariant::Correct, writer_blind),
        2,
        Faults::NONE,
    )
    .expect("a valid size");
    let checked = check(&broken, Options::default());
    let v = checked
        .verdict(shared_lock::RW_EXCLUSION.name)
        .expect("the property");
    assert!(!v.holds, "{:#?}", checked.verdicts);
    caught(
        &broken,
        shared_lock::RW_EXCLUSION,
        "shared-lock-writer-blind",
    );
    // The same world with the real machine: all well.
    let real = check(
        &shared(LockVariant::Correct, 2, Faults::NONE),
        Options::default(),
    );
    assert!(real.all_hold(), "{:#?}", real.verdicts);
}

/// The lock whose holder never suspends (the copy the simulation's
/// oracle catches), as a writer or a reader of the shared lock.
#[test]
fn a_shared_lock_whose_holders_never_suspend_is_caught() {
    let broken = World::new(
        SharedLockModel::with_machine(LockVariant::Correct, |d, g, m, v| {
            NoSuspend::new(Lock::shared(d, g, m, v))
        }),
        2,
        Faults::ONE_EACH,
    )
    .expect("a valid size");
    caught(
        &broken,
        shared_lock::SUSPEND_WHILE_DISCONNECTED,
        "shared-lock-no-suspend",
    );
}

// ---- the revocable shared lock ----

/// Three clients: a writer, a reader and the revoker (three holders and
/// the revoker are over a million states: see the bench).
#[test]
fn the_revocable_lock_holds_everything_at_three_clients_with_all_faults() {
    let world = RevocableModel::new(2)
        .world(Faults::ONE_EACH)
        .expect("a valid size");
    holds_everything(
        "revocable-lock",
        &world,
        &[
            "resource-written",
            "resource-read",
            "revocation-seen",
            "released",
            "revoked-node-gone",
            "waiter-woken",
            "guid-search-found-node",
            "holder-resumed",
            "lock-lost",
        ],
    );
}

/// A broken copy of the revocable lock: deaf to its own node's data
/// changes (it drops every NodeDataChanged), so a revocation written after
/// it first read its node never reaches it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct RevokeDeaf(Lock);

fn revoke_deaf(dir: &str, guid: &str, mode: LockMode) -> RevokeDeaf {
    RevokeDeaf(revocable_lock(dir, guid, mode))
}

impl Machine for RevokeDeaf {
    type Command = LockCommand;
    type Outcome = LockOutcome;

    fn handle(&mut self, input: Input<LockCommand>) {
        if let Input::Watch(e) = &input {
            if e.event_type == EventType::NodeDataChanged {
                return;
            }
        }
        self.0.handle(input);
    }

    fn poll(&mut self) -> Option<Output<LockOutcome>> {
        self.0.poll()
    }
}

#[test]
fn a_revocable_lock_deaf_to_its_node_is_caught() {
    let broken = RevocableModel::with_machine(1, revoke_deaf)
        .world(Faults::NONE)
        .expect("a valid size");
    caught(
        &broken,
        revocable::EVERY_REVOKED_HOLDER_LETS_GO,
        "revocable-lock-deaf",
    );
    let real = RevocableModel::new(1)
        .world(Faults::NONE)
        .expect("a valid size");
    let checked = check(&real, Options::default());
    assert!(checked.all_hold(), "{:#?}", checked.verdicts);
}

/// The revocable lock's holder that never suspends: asked to let go, it
/// makes its last access while its machine knows it is cut off.
#[test]
fn a_revocable_lock_whose_holders_never_suspend_is_caught() {
    let broken = RevocableModel::with_machine(1, |d, g, m| NoSuspend::new(revocable_lock(d, g, m)))
        .world(Faults::ONE_EACH)
        .expect("a valid size");
    caught(
        &broken,
        revocable::SUSPEND_WHILE_DISCONNECTED,
        "revocable-lock-no-suspend",
    );
}

// ---- leader election ----

fn election(variant: ElectionVariant, clients: usize, faults: Faults) -> World<ElectionModel> {
    World::new(ElectionModel::new(variant), clients, faults).expect("a valid size")
}

#[test]
fn the_correct_election_holds_everything_at_three_clients_with_all_faults() {
    let world = election(ElectionVariant::Correct, 3, Faults::ONE_EACH);
    holds_everything(
        "election",
        &world,
        &[
            "leader-acted",
            "resigned",
            "candidate-woken",
            "guid-search-found-node",
            "leader-resumed",
            "leadership-lost",
        ],
    );
}

#[test]
fn a_leader_that_keeps_leading_after_expiry_is_caught() {
    let world = election(
        ElectionVariant::KeepLeadershipAfterExpiry,
        3,
        Faults::ONE_EACH,
    );
    caught(
        &world,
        election::TOLD_ENDS_LEADERSHIP,
        "election-keep-leadership-after-expiry",
    );
    // Its application asks it before acting, as the simulation's does:
    // the act after the end is caught as the oracle names it.
    caught(
        &world,
        election::TOLD_IS_TOLD,
        "election-keep-leadership-after-expiry-acts",
    );
    // Expiry is what it takes (forced, after a crash, or met by a zombie
    // read).
    let no_expiry = Faults {
        forced_expiry: 0,
        client_crash: 0,
        zombie_read: 0,
        ..Faults::ONE_EACH
    };
    let checked = check(
        &election(ElectionVariant::KeepLeadershipAfterExpiry, 2, no_expiry),
        Options::default(),
    );
    assert!(checked.all_hold(), "{:#?}", checked.verdicts);
}

/// The faults the models had before the zombie read and the deposed
/// leader: one server, which never serves an expired session again and
/// whose syncs are never stale.
const ONE_SERVER_FAULTS: Faults = Faults {
    zombie_read: 0,
    deposed_leader: 0,
    ..Faults::ONE_EACH
};

#[test]
fn an_election_that_acts_without_confirming_is_caught_by_a_zombie_read() {
    let world = election(ElectionVariant::ActWithoutConfirming, 3, Faults::ONE_EACH);
    caught(
        &world,
        election::ELECTED_ON_A_LIVE_SESSION,
        "election-act-without-confirming",
    );
    // The zombie read alone is what it takes: with every fault of the
    // one-server world the unconfirmed election holds everything, as the
    // correct one does.
    let checked = check(
        &election(ElectionVariant::ActWithoutConfirming, 3, ONE_SERVER_FAULTS),
        Options::default(),
    );
    assert!(checked.all_hold(), "{:#?}", checked.verdicts);
    let zombie = Faults {
        zombie_read: 1,
        ..Faults::NONE
    };
    let checked = check(
        &election(ElectionVariant::ActWithoutConfirming, 2, zombie),
        Options::default(),
    );
    assert!(
        checked
            .verdict(election::ELECTED_ON_A_LIVE_SESSION.name)
            .is_some_and(|v| !v.holds),
        "{:#?}",
        checked.verdicts
    );
}

/// A broken copy of the correct election whose confirmation's sync never
/// leaves the client (answered at once, as if synced): what is left of
/// the confirmation is the exists(), which a server that has not applied
/// the session's expiry answers as readily as the child list.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct SyncAnsweredLocally(Election);

fn sync_answered_locally(dir: &str, guid: &str, variant: ElectionVariant) -> SyncAnsweredLocally {
    SyncAnsweredLocally(Election::with_variant(dir, guid, variant))
}

impl Machine for SyncAnsweredLocally {
    type Command = ElectionCommand;
    type Outcome = ElectionOutcome;

    fn handle(&mut self, input: Input<ElectionCommand>) {
        self.0.handle(input);
    }

    fn poll(&mut self) -> Option<Output<ElectionOutcome>> {
        loop {
            match self.0.poll()? {
                Output::Send(id, zoosim::proto::Op::Sync { .. }) => {
                    self.0.handle(Input::Reply(id, Ok(Reply::Sync)));
                }
                out => return Some(out),
            }
        }
    }
}

impl Candidate for SyncAnsweredLocally {
    fn is_leader(&self) -> bool {
        self.0.is_leader()
    }
}

#[test]
fn an_election_whose_confirmation_does_not_sync_is_caught_by_a_zombie_read() {
    // The sync is what the confirmation rests on: without it the exists()
    // after a zombie's child list is the zombie's too.
    let zombie = Faults {
        zombie_read: 1,
        ..Faults::NONE
    };
    let broken = World::new(
        ElectionModel::with_machine(ElectionVariant::Correct, sync_answered_locally),
        2,
        zombie,
    )
    .expect("a valid size");
    let checked = check(&broken, Options::default());
    assert!(
        checked
            .verdict(election::ELECTED_ON_A_LIVE_SESSION.name)
            .is_some_and(|v| !v.holds),
        "{:#?}",
        checked.verdicts
    );
    let real = check(
        &election(ElectionVariant::Correct, 2, zombie),
        Options::default(),
    );
    assert!(real.all_hold(), "{:#?}", real.verdicts);
}

/// A broken copy of the correct election: a candidate that reads the
/// child list as if its own node were the only one, so it leads whoever
/// is below it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct SelfOnly {
    election: Election,
    guid: String,
}

fn self_only(dir: &str, guid: &str, variant: ElectionVariant) -> SelfOnly {
    SelfOnly {
        election: Election::with_variant(dir, guid, variant),
        guid: guid.to_owned(),
    }
}

impl Machine for SelfOnly {
    type Command = ElectionCommand;
    type Outcome = ElectionOutcome;

    fn handle(&mut self, input: Input<ElectionCommand>) {
        let input = match input {
            Input::Reply(id, Ok(Reply::GetChildren { children, stat })) => {
                let children = children
                    .into_iter()
                    .filter(|c| c.starts_with(&self.guid))
                    .collect();
                Input::Reply(id, Ok(Reply::GetChildren { children, stat }))
            }
            other => other,
        };
        self.election.handle(input);
    }

    fn poll(&mut self) -> Option<Output<ElectionOutcome>> {
        self.election.poll()
    }
}

impl Candidate for SelfOnly {
    fn is_leader(&self) -> bool {
        self.election.is_leader()
    }
}

#[test]
fn an_election_whose_candidates_see_only_themselves_is_caught() {
    let broken = World::new(
        ElectionModel::with_machine(ElectionVariant::Correct, self_only),
        2,
        Faults::NONE,
    )
    .expect("a valid size");
    caught(
        &broken,
        election::ONE_LEADER_PER_EPOCH,
        "election-self-only",
    );
    let real = check(
        &election(ElectionVariant::Correct, 2, Faults::NONE),
        Options::default(),
    );
    assert!(real.all_hold(), "{:#?}", real.verdicts);
}

/// A broken copy of the correct election whose leader leads while
/// suspended: it says it leads whenever it holds its node, connected or
/// not.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct LeadsSuspended(Election);

impl Machine for LeadsSuspended {
    type Command = ElectionCommand;
    type Outcome = ElectionOutcome;

    fn handle(&mut self, input: Input<ElectionCommand>) {
        self.0.handle(input);
    }

    fn poll(&mut self) -> Option<Output<ElectionOutcome>> {
        self.0.poll()
    }
}

impl Candidate for LeadsSuspended {
    fn is_leader(&self) -> bool {
        // The bug: a suspended leader still says it leads.
        self.0.is_leader() || self.0.is_suspended()
    }
}

#[test]
fn an_election_whose_leader_leads_while_suspended_is_caught() {
    let broken = World::new(
        ElectionModel::with_machine(ElectionVariant::Correct, |d, g, v| {
            LeadsSuspended(Election::with_variant(d, g, v))
        }),
        2,
        Faults::ONE_EACH,
    )
    .expect("a valid size");
    caught(
        &broken,
        election::SUSPEND_WHILE_DISCONNECTED,
        "election-leads-suspended",
    );
}

#[test]
fn a_revocable_lock_without_holders_is_refused() {
    let e = RevocableModel::new(0).world(Faults::NONE).unwrap_err();
    assert_eq!(e.option(), Some("--clients"));
    assert!(e.to_string().contains("at least 1 holder"), "{e}");
    // The revoker is the last client: three holders make a world of four.
    let world = RevocableModel::new(3)
        .world(Faults::NONE)
        .expect("a valid size");
    assert_eq!(world.clients, 4);
}
