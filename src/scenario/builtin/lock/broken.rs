//! Copies of the lock broken on purpose, run by the same workload and
//! judged by the same oracle as the shipped recipe, to show that each of
//! the oracle's rules fails on the bug it is for. Test-only: they are no
//! variants of the shipped recipe and `zoosim list` never shows them.

use std::sync::Arc;

use super::sim::{dir_of, mode_of, running, workload_of, REVOKE_DIR};
use super::workload::{self, Exclusive, Make, Step};
use super::{Kind, COUNTERS, KEYS, REVOCABLE_KEYS, REVOCABLE_LOCK};
use crate::check::lock::{LockEvent, PROPERTIES};
use crate::recipes::lock::{Lock, LockCommand, LockOutcome, LockVariant};
use crate::recipes::{Input, Machine, Output};
use crate::scenario::recipe::Recipe;
use crate::scenario::registry::Registry;
use crate::scenario::runner::run_one;
use crate::scenario::sim::{RunCtx, Running};
use crate::scenario::spec::parse_in;
use crate::scenario::verdict::Property;
use crate::scenario::workload::WorkloadKey;

/// A lock whose holder never suspends: it is given Disconnected like any
/// machine, but keeps acting as holder until it releases or loses the
/// session (the naive lock every ZooKeeper FAQ warns about).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct NoSuspend {
    lock: Lock,
    held: bool,
}

impl Machine for NoSuspend {
    type Command = LockCommand;
    type Outcome = LockOutcome;

    fn handle(&mut self, input: Input<LockCommand>) {
        self.lock.handle(input);
    }

    fn poll(&mut self) -> Option<Output<LockOutcome>> {
        loop {
            let out = self.lock.poll()?;
            match &out {
                // The bug: a suspension is not passed on.
                Output::Outcome(LockOutcome::Suspended | LockOutcome::Resumed) => continue,
                Output::Outcome(LockOutcome::Acquired { .. }) => self.held = true,
                Output::Outcome(
                    LockOutcome::Released
                    | LockOutcome::Lost { .. }
                    | LockOutcome::Failed(_)
                    | LockOutcome::Refused { .. },
                ) => self.held = false,
                _ => {}
            }
            return Some(out);
        }
    }
}

impl Exclusive for NoSuspend {
    fn acquire() -> LockCommand {
        LockCommand::Acquire
    }
    fn release() -> LockCommand {
        LockCommand::Release
    }
    fn is_holder(&self) -> bool {
        self.held && !self.lock.session_ended()
    }
    fn is_suspended(&self) -> bool {
        false // the bug
    }
    fn is_shared(&self) -> bool {
        false
    }
    fn describe(&self) -> String {
        self.lock.describe()
    }
    fn node(&self) -> Option<&str> {
        self.lock.node()
    }
    fn session_ended(&self) -> bool {
        self.lock.session_ended()
    }
    fn judge(outcome: &LockOutcome) -> (LockEvent, Step) {
        <Lock as Exclusive>::judge(outcome)
    }
}

/// A revocable lock whose holder sees a revoker's request (its machine
/// reports `RevokeAsked`) and keeps the lock anyway.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct IgnoresRevoke(Lock);

impl Machine for IgnoresRevoke {
    type Command = LockCommand;
    type Outcome = LockOutcome;

    fn handle(&mut self, input: Input<LockCommand>) {
        self.0.handle(input);
    }

    fn poll(&mut self) -> Option<Output<LockOutcome>> {
        self.0.poll()
    }
}

impl Exclusive for IgnoresRevoke {
    fn acquire() -> LockCommand {
        LockCommand::Acquire
    }
    fn release() -> LockCommand {
        LockCommand::Release
    }
    fn is_holder(&self) -> bool {
        self.0.is_holder()
    }
    fn is_suspended(&self) -> bool {
        self.0.is_suspended()
    }
    fn is_shared(&self) -> bool {
        self.0.mode().is_shared()
    }
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn node(&self) -> Option<&str> {
        self.0.node()
    }
    fn session_ended(&self) -> bool {
        self.0.session_ended()
    }
    // The bug: `asked_to_release` is left at its default, never.
    fn judge(outcome: &LockOutcome) -> (LockEvent, Step) {
        <Lock as Exclusive>::judge(outcome)
    }
}

/// Which broken copy a [`Broken`] recipe runs.
#[derive(Clone, Copy, Debug)]
enum Flaw {
    /// [`NoSuspend`].
    NoSuspend,
    /// [`IgnoresRevoke`].
    IgnoresRevoke,
}

/// A broken copy as a recipe of its own, with the lock's keys, oracle and
/// counters.
#[derive(Clone, Copy, Debug)]
struct Broken(Flaw);

impl Recipe for Broken {
    fn name(&self) -> &str {
        match self.0 {
            Flaw::NoSuspend => "broken-lock-no-suspend",
            Flaw::IgnoresRevoke => "broken-revocable-ignores-revoke",
        }
    }
    fn workload_keys(&self) -> &[WorkloadKey] {
        match self.0 {
            Flaw::NoSuspend => KEYS,
            Flaw::IgnoresRevoke => REVOCABLE_KEYS,
        }
    }
    fn client_slots(&self, workload: &crate::scenario::workload::Workload) -> usize {
        REVOCABLE_LOCK.client_slots(workload)
    }
    fn properties(&self) -> &[Property] {
        PROPERTIES
    }
    fn counters(&self) -> &[&str] {
        COUNTERS
    }
    fn start(&self, ctx: &mut RunCtx) -> Box<dyn Running> {
        let kind = match self.0 {
            Flaw::NoSuspend => Kind::Lock,
            Flaw::IgnoresRevoke => Kind::RevocableLock,
        };
        let w = workload_of(kind, ctx);
        let record = match self.0 {
            Flaw::NoSuspend => {
                let make: Make<NoSuspend> = Arc::new(|_, guid| NoSuspend {
                    lock: Lock::new(dir_of(Kind::Lock), guid),
                    held: false,
                });
                workload::spawn(ctx, &w, make)
            }
            Flaw::IgnoresRevoke => {
                let make: Make<IgnoresRevoke> = Arc::new(|c, guid| {
                    IgnoresRevoke(
                        Lock::shared(REVOKE_DIR, guid, mode_of(c), LockVariant::Correct)
                            .revocable(),
                    )
                });
                workload::spawn(ctx, &w, make)
            }
        };
        running(record, w.clients, dir_of(kind))
    }
}

/// The first of `seeds` seeds of `toml` (run with the broken copies
/// registered) that violates `property`, and its violation's text.
fn first_caught(toml: &str, seeds: u64, property: &str) -> Option<(u64, String)> {
    let registry = Registry::new()
        .with(Broken(Flaw::NoSuspend))
        .with(Broken(Flaw::IgnoresRevoke));
    let s = parse_in("broken.toml", toml, &registry).unwrap_or_else(|e| panic!("{e}"));
    (s.seed_start..s.seed_start + seeds).find_map(|seed| {
        let out = run_one(&s, seed).unwrap_or_else(|v| panic!("seed {seed}: {v}"));
        out.violations
            .iter()
            .find(|v| v.property == property)
            .map(|v| (seed, v.to_string()))
    })
}

/// Holders hold for four seconds, touching the resource every 200 ms,
/// while leaders crash: a follower gives its leader up after syncLimit and
/// drops its clients, which stay disconnected until a new leader serves
/// (about a second).
fn disconnecting(recipe: &str) -> String {
    format!(
        r#"
format = 1
recipe = "{recipe}"
seed_start = 0x5a5b0000
[workload]
clients = 3
hold_ms = 4000
touches = 20
[faults]
kinds = ["leader-crash"]
swarm = false
phase_ms = 8000
[quiet]
phase_ms = 12000
"#
    )
}

#[test]
fn a_holder_that_acts_while_told_disconnected_is_caught() {
    let property = crate::check::lock::SUSPEND_WHILE_DISCONNECTED.name;
    let (seed, why) = first_caught(&disconnecting("broken-lock-no-suspend"), 10, property)
        .expect("the lock that never suspends is caught within 10 seeds");
    assert!(
        why.starts_with("suspend-while-disconnected: client "),
        "{why}"
    );
    assert!(why.contains("told it was disconnected at"), "{why}");
    // The shipped lock, same scenario and seeds up to that one: suspends.
    let shipped = disconnecting("lock");
    let registry = Registry::new();
    let s = parse_in("lock.toml", &shipped, &registry).unwrap_or_else(|e| panic!("{e}"));
    for seed in s.seed_start..=seed {
        let out = run_one(&s, seed).unwrap_or_else(|v| panic!("seed {seed}: {v}"));
        assert!(out.violations.is_empty(), "{:?}", out.violations);
        assert!(out.log.iter().any(|l| l.contains("Disconnected")));
    }
}

/// The revocable lock's scenario as shipped, with no faults: a keeper
/// that ignores the revoker holds for ever.
fn revoking(recipe: &str) -> String {
    format!(
        r#"
format = 1
recipe = "{recipe}"
seed_start = 0x4e0c0000
[workload]
touches = 4
[faults]
kinds = []
phase_ms = 3000
[quiet]
phase_ms = 8000
liveness_bound_ms = 5000
"#
    )
}

#[test]
fn a_holder_that_ignores_a_revocation_is_caught() {
    let property = crate::check::lock::REVOCATION_HONOURED.name;
    let (_, why) = first_caught(&revoking("broken-revocable-ignores-revoke"), 3, property)
        .expect("the holder that ignores revocations is caught within 3 seeds");
    assert!(why.starts_with("revocation-honoured: client "), "{why}");
    assert!(why.contains("(it saw the request at "), "{why}");
    assert!(why.ends_with("it never let go"), "{why}");
    let s = parse_in(
        "revocable.toml",
        &revoking("revocable-lock"),
        &Registry::new(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = run_one(&s, s.seed_start).unwrap_or_else(|v| panic!("{v}"));
    assert!(out.violations.is_empty(), "{:?}", out.violations);
    assert!(out.counters["revokes-honoured"] > 0, "{:?}", out.counters);
}

/// The first failing seed of a shipped buggy variant's scenario, and its
/// violation of `property`.
fn caught_in_file(file: &str, property: &str) -> String {
    let s =
        crate::scenario::files::load(std::path::Path::new(file)).unwrap_or_else(|e| panic!("{e}"));
    let out = run_one(&s, s.seed_start).unwrap_or_else(|v| panic!("{v}"));
    out.violations
        .iter()
        .find(|v| v.property == property)
        .unwrap_or_else(|| panic!("{file}: no {property} at its first seed: {out:?}"))
        .to_string()
}

#[test]
fn a_liveness_failure_says_where_the_clients_stuck() {
    let liveness = crate::check::lock::LIVENESS.name;
    // A waiter that found its predecessor gone and waits for an event that
    // never comes: it says so, and the nodes are there to see.
    let why = caught_in_file(
        "scenarios/bug-lock-stall-on-vanished-predecessor.toml",
        liveness,
    );
    assert!(why.contains("at the end, /locks/l holds "), "{why}");
    assert!(why.contains("'s session 0x"), "{why}");
    assert!(why.contains("waiting for "), "{why}");
    assert!(why.contains("to go (exists watch), own node "), "{why}");
    // A blind retry's first node, its session live, which its client's
    // machine does not know: an orphan that blocks everyone behind it.
    let why = caught_in_file("scenarios/bug-lock-blind-retry.toml", liveness);
    assert!(
        why.contains(", live, an orphan: its client's machine does not know it"),
        "{why}"
    );
}
