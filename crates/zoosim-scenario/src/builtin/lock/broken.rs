//! Copies of the lock broken on purpose, run by the same workload and
//! judged by the same oracle as the shipped recipe, to show that each of
//! the oracle's rules fails on the bug it is for (the tests are in
//! `scenario::broken_tests`). Test-only: they are no variants of the
//! shipped recipe and `zoosim list` never shows them.

use std::sync::Arc;

use super::sim::{mode_of, running, workload_of};
use super::workload::{self, Exclusive, Make, Step};
use super::{COUNTERS, KEYS, LOCK, REVOCABLE_KEYS, REVOCABLE_LOCK};
use crate::recipe::Recipe;
use crate::sim::{RunCtx, Running};
use crate::verdict::Property;
use crate::workload::WorkloadKey;
use zoosim_core::check::lock::{LockEvent, PROPERTIES};
use zoosim_recipes::lock::broken::NoSuspend;
use zoosim_recipes::lock::{Lock, LockCommand, LockOutcome, LockVariant};
use zoosim_recipes::{Input, Machine, Output};

/// The lock whose holder never suspends ([`NoSuspend`], the copy the
/// lock family's models run too), as the workload drives it.
impl Exclusive for NoSuspend {
    fn acquire() -> LockCommand {
        LockCommand::Acquire
    }
    fn release() -> LockCommand {
        LockCommand::Release
    }
    fn is_holder(&self) -> bool {
        NoSuspend::is_holder(self)
    }
    fn is_suspended(&self) -> bool {
        false // the bug
    }
    fn is_shared(&self) -> bool {
        false
    }
    fn describe(&self) -> String {
        self.lock().describe()
    }
    fn node(&self) -> Option<&str> {
        self.lock().node()
    }
    fn session_ended(&self) -> bool {
        self.lock().session_ended()
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
pub(crate) enum Flaw {
    /// [`NoSuspend`] (zoosim-recipes' `lock::broken`, shared with the
    /// lock family's models).
    NoSuspend,
    /// [`IgnoresRevoke`].
    IgnoresRevoke,
}

/// A broken copy as a recipe of its own, with the lock's keys, oracle and
/// counters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Broken(pub(crate) Flaw);

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
    fn client_slots(&self, workload: &crate::workload::Workload) -> usize {
        REVOCABLE_LOCK.client_slots(workload)
    }
    fn properties(&self) -> &[Property] {
        PROPERTIES
    }
    fn counters(&self) -> &[&str] {
        COUNTERS
    }
    fn start(&self, ctx: &mut RunCtx) -> Box<dyn Running> {
        let recipe = match self.0 {
            Flaw::NoSuspend => LOCK,
            Flaw::IgnoresRevoke => REVOCABLE_LOCK,
        };
        let w = workload_of(&recipe, ctx);
        let record = match self.0 {
            Flaw::NoSuspend => {
                let make: Make<NoSuspend> =
                    Arc::new(|_, guid| NoSuspend::new(Lock::new(LOCK.dir, guid)));
                workload::spawn(ctx, &w, make)
            }
            Flaw::IgnoresRevoke => {
                let make: Make<IgnoresRevoke> = Arc::new(|c, guid| {
                    IgnoresRevoke(
                        Lock::shared(REVOCABLE_LOCK.dir, guid, mode_of(c), LockVariant::Correct)
                            .revocable(),
                    )
                });
                workload::spawn(ctx, &w, make)
            }
        };
        running(record, w.clients, recipe.dir)
    }
}
