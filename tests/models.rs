//! The stateright models (crates/zoosim-models/src): the correct lock holds every
//! property over every interleaving of 3 clients with all faults, and
//! every "sometimes" is reached; each buggy variant, and a deliberately
//! broken copy of the correct machine, is caught with a shortest
//! counterexample, whose step list is kept as an insta snapshot in
//! tests/snapshots/ (`cargo insta review`, or `INSTA_UPDATE=always`, to
//! accept a new one; review the diff).

#[path = "support/models.rs"]
mod support;

use zoosim::models::cycle::{find_cycle, Bound, Cyclic};
use zoosim::models::lock::{
    LockModel, EVERY_LIVE_CLIENT_ACQUIRES, MUTUAL_EXCLUSION, NO_HERD, NO_ORPHANS,
    SUSPEND_WHILE_DISCONNECTED, TOLD_IS_TOLD,
};
use zoosim::models::{check, shortest, Fault, Faults, Options, World};
use zoosim::proto::{MultiResult, Op, Reply, ZkError};
use zoosim::recipes::lock::broken::NoSuspend;
use zoosim::recipes::lock::{Lock, LockCommand, LockOutcome, LockVariant};
use zoosim::recipes::{Input, Machine, OpId, Output};

fn lock(variant: LockVariant, clients: usize, faults: Faults) -> World<LockModel> {
    World::new(LockModel::new(variant), clients, faults).expect("a valid size")
}

#[test]
fn the_correct_lock_holds_everything_at_three_clients_with_all_faults() {
    let world = lock(LockVariant::Correct, 3, Faults::ONE_EACH);
    let checked = check(&world, Options::default());
    let failing: Vec<_> = checked.verdicts.iter().filter(|v| !v.holds).collect();
    assert!(failing.is_empty(), "failing: {failing:#?}");
    // Not vacuous: every fault and every phase was reached (the sometimes
    // properties are among the verdicts), and the search was real.
    for f in Fault::ALL {
        assert!(
            checked.verdict(f.property()).is_some_and(|v| v.holds),
            "{}",
            f.property()
        );
    }
    for p in [
        "resource-accessed",
        "waiter-woken",
        "guid-search-found-node",
        "holder-resumed",
        "lock-lost",
        "released",
    ] {
        assert!(
            checked.verdict(p).is_some_and(|v| v.holds),
            "{p} never reached"
        );
    }
    assert!(checked.unique > 10_000, "{} states only", checked.unique);
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

#[test]
fn sort_by_full_name_breaks_mutual_exclusion() {
    let world = lock(LockVariant::SortByFullName, 3, Faults::ONE_EACH);
    caught(&world, MUTUAL_EXCLUSION, "lock-sort-by-full-name");
}

#[test]
fn the_herd_variant_wakes_two_waiters() {
    let world = lock(LockVariant::Herd, 3, Faults::ONE_EACH);
    caught(&world, NO_HERD, "lock-herd");
    // Two clients cannot make a herd: only one waits.
    assert!(shortest(&lock(LockVariant::Herd, 2, Faults::NONE), NO_HERD.name).is_none());
}

#[test]
fn stall_on_vanished_predecessor_never_acquires() {
    let world = lock(LockVariant::StallOnVanishedPredecessor, 3, Faults::ONE_EACH);
    caught(
        &world,
        EVERY_LIVE_CLIENT_ACQUIRES,
        "lock-stall-on-vanished-predecessor",
    );
}

#[test]
fn blind_retry_after_a_lost_reply_stalls_on_its_own_orphan() {
    let world = lock(LockVariant::BlindRetry, 3, Faults::ONE_EACH);
    caught(&world, EVERY_LIVE_CLIENT_ACQUIRES, "lock-blind-retry");
    // The fault is what it takes: without a lost reply nothing fails.
    let no_lost_reply = Faults {
        lost_reply: 0,
        ..Faults::ONE_EACH
    };
    let checked = check(
        &lock(LockVariant::BlindRetry, 2, no_lost_reply),
        Options::default(),
    );
    assert!(checked.all_hold(), "{:#?}", checked.verdicts);
}

/// A broken copy of the correct lock: its guid search after a lost create
/// reply never finds its node (the search's child list comes back without
/// the machine's own names), so it creates again — the bug the search is
/// there to prevent.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct SearchBlind {
    lock: Lock,
    guid: String,
    after_sync: bool,
    search: Option<OpId>,
}

fn search_blind(dir: &str, guid: &str, variant: LockVariant) -> SearchBlind {
    SearchBlind {
        lock: Lock::with_variant(dir, guid, variant),
        guid: guid.to_owned(),
        after_sync: false,
        search: None,
    }
}

impl Machine for SearchBlind {
    type Command = LockCommand;
    type Outcome = LockOutcome;

    fn handle(&mut self, input: Input<LockCommand>) {
        let input = match input {
            Input::Reply(id, Ok(Reply::GetChildren { children, stat }))
                if Some(id) == self.search =>
            {
                let children = children
                    .into_iter()
                    .filter(|c| !c.starts_with(&self.guid))
                    .collect();
                Input::Reply(id, Ok(Reply::GetChildren { children, stat }))
            }
            other => other,
        };
        self.lock.handle(input);
    }

    fn poll(&mut self) -> Option<Output<LockOutcome>> {
        let out = self.lock.poll()?;
        if let Output::Send(id, op) = &out {
            // The search is the child list sent right after the sync.
            match op {
                Op::Sync { .. } => self.after_sync = true,
                Op::GetChildren { .. } if self.after_sync => {
                    self.search = Some(*id);
                    self.after_sync = false;
                }
                _ => self.after_sync = false,
            }
        }
        Some(out)
    }
}

#[test]
fn a_lock_whose_guid_search_is_blind_is_caught() {
    let faults = Faults::parse("lost-reply").expect("a fault list");
    let broken = World::new(
        LockModel::with_machine(LockVariant::Correct, search_blind),
        2,
        faults,
    )
    .expect("a valid size");
    let checked = check(&broken, Options::default());
    let live = checked
        .verdict(EVERY_LIVE_CLIENT_ACQUIRES.name)
        .expect("the property");
    assert!(!live.holds, "{:#?}", checked.verdicts);
    caught(
        &broken,
        EVERY_LIVE_CLIENT_ACQUIRES,
        "lock-guid-search-blind",
    );
    // The same world with the real machine: all well.
    let real = check(&lock(LockVariant::Correct, 2, faults), Options::default());
    assert!(real.all_hold(), "{:#?}", real.verdicts);
}

/// The lock's guid search after a lost create reply syncs first. Without
/// the sync, the search's list may come from a server that has not
/// applied the create: it finds nothing, creates again, and waits behind
/// its own first node for ever. That takes two faults in one run, a lost
/// reply and a lagging read: with at most one (the command's default)
/// every model passes it.
#[test]
fn a_guid_search_without_sync_takes_two_faults_and_is_caught() {
    let variant = LockVariant::SearchWithoutSync;
    let one = lock(variant, 3, Faults::ONE_EACH)
        .with_symmetry()
        .expect("the lock has a symmetry reduction");
    let checked = check(&one, Options::default());
    assert!(checked.all_hold(), "{:#?}", checked.verdicts);
    let two = lock(variant, 2, Faults::ONE_EACH).with_max_faults(2);
    caught(
        &two,
        EVERY_LIVE_CLIENT_ACQUIRES,
        "lock-guid-search-without-sync",
    );
    // The correct lock, the same two faults a run: all well.
    let real = lock(LockVariant::Correct, 2, Faults::ONE_EACH).with_max_faults(2);
    assert!(check(&real, Options::default()).all_hold());
}

/// A broken copy of the lock whose waiter polls its predecessor with
/// exists() (no watch) and, whatever the answer, polls again: once its
/// predecessor is gone it goes round the same states for ever and never
/// acquires. The checker judges `eventually` only where a run ends, so it
/// reports `every-live-client-acquires` as holding; the cycle walk is
/// what catches it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Poller {
    lock: Lock,
    poll: Option<(OpId, Op)>,
    again: bool,
}

fn poller(dir: &str, guid: &str, variant: LockVariant) -> Poller {
    Poller {
        lock: Lock::with_variant(dir, guid, variant),
        poll: None,
        again: false,
    }
}

impl Machine for Poller {
    type Command = LockCommand;
    type Outcome = LockOutcome;

    fn handle(&mut self, input: Input<LockCommand>) {
        match &input {
            Input::Reply(id, _) if self.poll.as_ref().is_some_and(|(p, _)| p == id) => {
                self.again = true;
            }
            _ => self.lock.handle(input),
        }
    }

    fn poll(&mut self) -> Option<Output<LockOutcome>> {
        if self.again {
            self.again = false;
            let (id, op) = self.poll.clone().expect("polling");
            return Some(Output::Send(id, op));
        }
        let out = self.lock.poll()?;
        if let Output::Send(id, Op::Exists { path, watch: true }) = out {
            let op = Op::Exists { path, watch: false };
            self.poll = Some((id, op.clone()));
            return Some(Output::Send(id, op));
        }
        Some(out)
    }
}

#[test]
fn a_livelocked_waiter_passes_the_checker_and_is_caught_by_the_cycle_walk() {
    let broken = World::new(
        LockModel::with_machine(LockVariant::Correct, poller),
        2,
        Faults::NONE,
    )
    .expect("a valid size");
    let checked = check(&broken, Options::default());
    assert!(
        checked
            .verdict(EVERY_LIVE_CLIENT_ACQUIRES.name)
            .is_some_and(|v| v.holds),
        "the checker alone does not see it: {:#?}",
        checked.verdicts
    );
    let bound = Bound {
        states: 100_000,
        depth: 1_000,
    };
    let found = find_cycle(&broken, bound).expect_err("a cycle");
    let text = found.to_string();
    assert!(text.starts_with("a cycle: after "), "{text}");
    let Cyclic::Cycle { cycle, .. } = found else {
        panic!("{text}")
    };
    assert_eq!(cycle.len(), 1, "one serve of the poll: {text}");
    // The lock's own machine, the same world: no cycle, every run ends.
    let real = lock(LockVariant::Correct, 2, Faults::NONE);
    assert!(find_cycle(&real, bound).is_ok());
}

/// The lock whose holder never suspends: the copy the simulation's
/// oracle catches (zoosim-scenario's broken_tests), run by the model.
fn no_suspend(dir: &str, guid: &str, variant: LockVariant) -> NoSuspend {
    NoSuspend::new(Lock::with_variant(dir, guid, variant))
}

#[test]
fn a_lock_whose_holder_never_suspends_is_caught() {
    let broken = World::new(
        LockModel::with_machine(LockVariant::Correct, no_suspend),
        3,
        Faults::ONE_EACH,
    )
    .expect("a valid size");
    caught(&broken, SUSPEND_WHILE_DISCONNECTED, "lock-no-suspend");
    // A break the holder notices is what it takes: with only the faults
    // that break no connection, the broken copy passes everything.
    let no_break = Faults::parse("client-crash,lagging-read").expect("a fault list");
    let world = World::new(
        LockModel::with_machine(LockVariant::Correct, no_suspend),
        2,
        no_break,
    )
    .expect("a valid size");
    let checked = check(&world, Options::default());
    assert!(checked.all_hold(), "{:#?}", checked.verdicts);
}

/// A broken copy of the correct lock that takes any news of its session
/// for a resume: told that its session expired while it held (suspended),
/// it reports `Resumed` instead of `Lost`, so its application acts on a
/// lock that is gone (and its release, which the machine refuses, is
/// reported done).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct ResumesOnExpiry {
    lock: Lock,
    held: bool,
}

fn resumes_on_expiry(dir: &str, guid: &str, variant: LockVariant) -> ResumesOnExpiry {
    ResumesOnExpiry {
        lock: Lock::with_variant(dir, guid, variant),
        held: false,
    }
}

impl Machine for ResumesOnExpiry {
    type Command = LockCommand;
    type Outcome = LockOutcome;

    fn handle(&mut self, input: Input<LockCommand>) {
        self.lock.handle(input);
    }

    fn poll(&mut self) -> Option<Output<LockOutcome>> {
        let out = self.lock.poll()?;
        Some(match out {
            Output::Outcome(LockOutcome::Acquired { .. }) => {
                self.held = true;
                out
            }
            // The bug.
            Output::Outcome(LockOutcome::Lost {
                reason: ZkError::SessionExpired,
            }) if self.held => Output::Outcome(LockOutcome::Resumed),
            Output::Outcome(LockOutcome::Refused {
                command: LockCommand::Release,
            }) if self.held => {
                self.held = false;
                Output::Outcome(LockOutcome::Released)
            }
            Output::Outcome(LockOutcome::Released | LockOutcome::Lost { .. }) => {
                self.held = false;
                out
            }
            other => other,
        })
    }
}

#[test]
fn a_lock_that_resumes_after_its_session_expired_is_caught() {
    let broken = World::new(
        LockModel::with_machine(LockVariant::Correct, resumes_on_expiry),
        3,
        Faults::ONE_EACH,
    )
    .expect("a valid size");
    caught(&broken, TOLD_IS_TOLD, "lock-resumes-on-expiry");
    // Expiry is what it takes (forced, after a crash, or met by a zombie
    // read).
    let no_expiry = Faults {
        forced_expiry: 0,
        client_crash: 0,
        zombie_read: 0,
        ..Faults::ONE_EACH
    };
    let world = World::new(
        LockModel::with_machine(LockVariant::Correct, resumes_on_expiry),
        2,
        no_expiry,
    )
    .expect("a valid size");
    let checked = check(&world, Options::default());
    assert!(checked.all_hold(), "{:#?}", checked.verdicts);
}

#[test]
fn each_property_is_checked_alone_when_asked() {
    let mut world = lock(LockVariant::Correct, 2, Faults::NONE);
    world.only = Some(NO_ORPHANS.name);
    let checked = check(&world, Options::default());
    let names: Vec<_> = checked.verdicts.iter().map(|v| v.name).collect();
    assert_eq!(names, [NO_ORPHANS.name]);
}

#[test]
fn bad_sizes_and_fault_lists_are_refused() {
    let e = World::new(LockModel::new(LockVariant::Correct), 0, Faults::NONE).unwrap_err();
    assert_eq!(e, zoosim::models::ModelError::Clients(0));
    assert!(e.to_string().contains("1 to 8 clients, not 0"), "{e}");
    let e = Faults::parse("lost-reply,melt").unwrap_err();
    assert!(e.contains("unknown fault \"melt\""), "{e}");
    let e = Faults::parse("forced-expiry=9").unwrap_err();
    assert!(e.contains("0 to 3"), "{e}");
    assert_eq!(
        Faults::parse("forced-expiry=2, client-crash").expect("a list"),
        Faults {
            forced_expiry: 2,
            client_crash: 1,
            ..Faults::NONE
        }
    );
}

mod barrier {
    use super::*;
    use zoosim::models::barrier::{
        BarrierModel, BARRIER_SAFETY, EVERY_LIVE_CLIENT_FINISHES, NO_ORPHANS as BARRIER_ORPHANS,
    };
    use zoosim::recipes::barrier::{Barrier, BarrierCommand, BarrierOutcome, BarrierVariant};

    fn barrier(variant: BarrierVariant, clients: usize, faults: Faults) -> World<BarrierModel> {
        World::new(BarrierModel::new(variant), clients, faults).expect("a valid size")
    }

    #[test]
    fn the_correct_barrier_holds_everything_at_three_clients_with_all_faults() {
        let world = barrier(BarrierVariant::Correct, 3, Faults::ONE_EACH);
        let started = std::time::Instant::now();
        let checked = check(&world, Options::default());
        eprintln!(
            "barrier, 3 clients, all faults: {} states, {} unique, depth {}, {:.2} s",
            checked.states,
            checked.unique,
            checked.depth,
            started.elapsed().as_secs_f64()
        );
        let failing: Vec<_> = checked.verdicts.iter().filter(|v| !v.holds).collect();
        assert!(failing.is_empty(), "failing: {failing:#?}");
        for f in Fault::ALL {
            assert!(
                checked.verdict(f.property()).is_some_and(|v| v.holds),
                "{}",
                f.property()
            );
        }
        for p in [
            "barrier-raised",
            "waiter-woken",
            "waiter-passed",
            "barrier-removed",
            BARRIER_ORPHANS.name,
        ] {
            assert!(checked.verdict(p).is_some_and(|v| v.holds), "{p}");
        }
    }

    #[test]
    fn the_no_sync_waiter_passes_a_raised_barrier_reading_a_lagging_server() {
        let world = barrier(BarrierVariant::NoSync, 3, Faults::ONE_EACH);
        caught(&world, BARRIER_SAFETY, "barrier-no-sync");
        // A stale read is what it takes (a lagging follower's, or a
        // deposed leader's): without them the page's waiter is as safe as
        // the correct one.
        let no_stale = Faults {
            lagging_read: 0,
            deposed_leader: 0,
            ..Faults::ONE_EACH
        };
        let checked = check(
            &barrier(BarrierVariant::NoSync, 3, no_stale),
            Options::default(),
        );
        assert!(checked.all_hold(), "{:#?}", checked.verdicts);
    }

    #[test]
    fn the_waiter_that_syncs_instead_of_checking_passes_a_barrier_on_a_deposed_leader() {
        let world = barrier(BarrierVariant::SyncInsteadOfCheck, 3, Faults::ONE_EACH);
        caught(&world, BARRIER_SAFETY, "barrier-sync-instead-of-check");
        // A deposed leader is what it takes: with every fault of the
        // one-server world (a sync there is never stale) the waiter that
        // syncs is as safe as the correct one, and with the deposed
        // leader alone it is caught.
        let one_server = Faults {
            zombie_read: 0,
            deposed_leader: 0,
            ..Faults::ONE_EACH
        };
        let checked = check(
            &barrier(BarrierVariant::SyncInsteadOfCheck, 3, one_server),
            Options::default(),
        );
        assert!(checked.all_hold(), "{:#?}", checked.verdicts);
        let deposed = Faults {
            deposed_leader: 1,
            ..Faults::NONE
        };
        let checked = check(
            &barrier(BarrierVariant::SyncInsteadOfCheck, 2, deposed),
            Options::default(),
        );
        assert!(
            checked
                .verdict(BARRIER_SAFETY.name)
                .is_some_and(|v| !v.holds),
            "{:#?}",
            checked.verdicts
        );
    }

    /// A broken copy of the correct barrier: its waiter takes the leader
    /// check's "the barrier is up" for "down", and passes.
    #[derive(Clone, PartialEq, Eq, Hash, Debug)]
    struct CheckBackwards(Barrier);

    fn check_backwards(path: &str, variant: BarrierVariant) -> CheckBackwards {
        CheckBackwards(Barrier::with_variant(path, variant))
    }

    impl Machine for CheckBackwards {
        type Command = BarrierCommand;
        type Outcome = BarrierOutcome;

        fn handle(&mut self, input: Input<BarrierCommand>) {
            let input = match input {
                Input::Reply(id, Ok(Reply::Multi(r))) if r == [MultiResult::Check] => Input::Reply(
                    id,
                    Ok(Reply::Multi(vec![MultiResult::Failed(ZkError::NoNode)])),
                ),
                other => other,
            };
            self.0.handle(input);
        }

        fn poll(&mut self) -> Option<Output<BarrierOutcome>> {
            self.0.poll()
        }
    }

    #[test]
    fn a_barrier_that_reads_its_leader_check_backwards_is_caught() {
        let broken = World::new(
            BarrierModel::with_machine(BarrierVariant::Correct, check_backwards),
            2,
            Faults::NONE,
        )
        .expect("a valid size");
        caught(&broken, BARRIER_SAFETY, "barrier-check-backwards");
        let real = check(
            &barrier(BarrierVariant::Correct, 2, Faults::NONE),
            Options::default(),
        );
        assert!(real.all_hold(), "{:#?}", real.verdicts);
    }

    #[test]
    fn a_deaf_waiter_never_passes() {
        // Liveness earns trust too: a waiter whose watch events are lost
        // waits for ever once it saw the barrier up.
        #[derive(Clone, PartialEq, Eq, Hash, Debug)]
        struct Deaf(Barrier);
        impl Machine for Deaf {
            type Command = BarrierCommand;
            type Outcome = BarrierOutcome;
            fn handle(&mut self, input: Input<BarrierCommand>) {
                if !matches!(input, Input::Watch(_)) {
                    self.0.handle(input);
                }
            }
            fn poll(&mut self) -> Option<Output<BarrierOutcome>> {
                self.0.poll()
            }
        }
        let broken = World::new(
            BarrierModel::with_machine(BarrierVariant::Correct, |p, v| {
                Deaf(Barrier::with_variant(p, v))
            }),
            2,
            Faults::NONE,
        )
        .expect("a valid size");
        let path = shortest(&broken, EVERY_LIVE_CLIENT_FINISHES.name).expect("caught");
        assert!(path.len() <= 15, "{} steps", path.len());
    }
}
