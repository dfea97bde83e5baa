//! Copies of the lock broken on purpose (see the module's mention in
//! [`super`]): the simulation's oracle (`suspend-while-disconnected`) and
//! the lock family's models judge the same machine.

use super::{Lock, LockCommand, LockOutcome};
use crate::{Input, Machine, Output};

/// A lock whose holder never suspends: its machine is given Disconnected
/// like any, but the `Suspended` and `Resumed` it reports are not passed
/// on, so its application keeps acting as holder until it releases or
/// loses the session (the naive lock every ZooKeeper FAQ warns about).
/// Any [`Lock`] (exclusive, one side of a shared lock, revocable) can be
/// so broken.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct NoSuspend {
    lock: Lock,
    /// Acquired, and not released, lost or failed since: what the broken
    /// holder believes.
    held: bool,
}

impl NoSuspend {
    /// `lock`, broken.
    pub fn new(lock: Lock) -> NoSuspend {
        NoSuspend { lock, held: false }
    }

    /// What the broken holder checks before it acts: it holds, the
    /// session not known to be over (a suspension aside: the bug).
    pub fn is_holder(&self) -> bool {
        self.held && !self.lock.session_ended()
    }

    /// The lock underneath (its node, what it is doing, its session).
    pub fn lock(&self) -> &Lock {
        &self.lock
    }
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
