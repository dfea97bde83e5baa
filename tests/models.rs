//! The stateright models (src/models): the correct lock holds every
//! property over every interleaving of 3 clients with all faults, and
//! every "sometimes" is reached; each buggy variant, and a deliberately
//! broken copy of the correct machine, is caught with a shortest
//! counterexample, whose step list is kept in tests/snapshots/models/ (the
//! files are written, not compared, with `ZOOSIM_BLESS_MODELS=1`; review
//! the diff).

use std::path::PathBuf;

use zoosim::models::lock::{
    LockModel, EVERY_LIVE_CLIENT_ACQUIRES, MUTUAL_EXCLUSION, NO_HERD, NO_ORPHANS,
};
use zoosim::models::{check, render_path, shortest, Fault, Faults, Options, World};
use zoosim::proto::{Op, Reply};
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

/// The snapshot `name` is `text` (or is written, with ZOOSIM_BLESS_MODELS).
fn snapshot(name: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots/models")
        .join(format!("{name}.txt"));
    if std::env::var_os("ZOOSIM_BLESS_MODELS").is_some() {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("snapshot dir");
        std::fs::write(&path, text).expect("snapshot written");
        return;
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (write it with ZOOSIM_BLESS_MODELS=1)",
            path.display()
        )
    });
    assert_eq!(
        kept,
        text,
        "{} differs (ZOOSIM_BLESS_MODELS=1 rewrites it)",
        path.display()
    );
}

/// `world` fails `property`; its shortest counterexample has at most 15
/// steps and reads as the snapshot `name`.
fn caught<R: zoosim::models::Recipe>(world: &World<R>, property: &'static str, name: &str) {
    let path =
        shortest(world, property).unwrap_or_else(|| panic!("{name}: {property} not violated"));
    assert!(path.len() <= 15, "{name}: {} steps", path.len());
    let text = format!(
        "{name}: counterexample to {property} ({} steps)\n{}",
        path.len(),
        render_path(world, &path)
    );
    snapshot(name, &text);
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
    assert!(shortest(&lock(LockVariant::Herd, 2, Faults::NONE), NO_HERD).is_none());
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
        .verdict(EVERY_LIVE_CLIENT_ACQUIRES)
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

#[test]
fn each_property_is_checked_alone_when_asked() {
    let mut world = lock(LockVariant::Correct, 2, Faults::NONE);
    world.only = Some(NO_ORPHANS);
    let checked = check(&world, Options::default());
    let names: Vec<_> = checked.verdicts.iter().map(|v| v.name).collect();
    assert_eq!(names, [NO_ORPHANS]);
}

#[test]
fn bad_sizes_and_fault_lists_are_refused() {
    let e = World::new(LockModel::new(LockVariant::Correct), 0, Faults::NONE).unwrap_err();
    assert!(e.contains("1 to 8 clients, not 0"), "{e}");
    let e = Faults::parse("lost-reply,melt").unwrap_err();
    assert!(e.contains("unknown fault \"melt\""), "{e}");
    let e = Faults::parse("expiry=9").unwrap_err();
    assert!(e.contains("0 to 3"), "{e}");
    assert_eq!(
        Faults::parse("expiry=2, crash").expect("a list"),
        Faults {
            expiry: 2,
            crash: 1,
            ..Faults::NONE
        }
    );
}
