//! A shared counter in one znode, incremented by compare-and-set: read
//! the value and its version, write value + 1 with `setData(path, data,
//! version)`. ZooKeeper applies the write only if the version is still the
//! one read, so two clients that read the same value cannot both succeed.
//!
//! A sans-IO state machine over zoosim's [`Machine`] interface (it never
//! touches a socket or a clock), so zoosim's [`zoosim::recipes::Driver`]
//! runs it over any `Zk` (the simulated ensemble, a real server).
//!
//! * `Increment`: getData; NoNode creates the node with "0" and reads
//!   again. setData(value + 1, version): `Incremented`; BadVersion:
//!   another increment came first, `Conflict`, read and try again.
//! * ConnectionLoss on a read: read again once reconnected. On the
//!   setData: the write may or may not have been applied, and a version
//!   check cannot tell ours from another's: `Maybe`, and the increment is
//!   over (retrying could count it twice).
//! * Session expired: `Lost` (a `Maybe` first if a write was in flight).
//!
//! The buggy variant writes blindly (`version` -1): two clients that read
//! the same value both write value + 1, and one increment is lost.

use zoosim::prelude::{
    classify, CreateMode, Failure, Input, Io, Machine, Op, Output, Pending, Reply, ZkError,
};

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum CounterCommand {
    Increment,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum CounterOutcome {
    /// Our increment is in: it wrote `value`.
    Incremented { value: i64 },
    /// The write's reply was lost: it may or may not be in.
    Maybe { value: i64 },
    /// Another increment came first; reading again to retry.
    Conflict,
    /// The session ended: nothing more is sent.
    Lost,
    /// An answer the recipe cannot work with (a node that is not a number).
    Failed(ZkError),
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Step {
    Idle,
    Reading(Pending),
    Creating(Pending),
    Writing(Pending, i64),
    /// A read or create met ConnectionLoss: read again once reconnected.
    AwaitingReconnect(Pending),
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct CasCounter {
    path: String,
    blind: bool,
    io: Io<CounterOutcome>,
    step: Step,
    /// `Lost` was reported.
    over: bool,
}

impl CasCounter {
    pub fn new(path: &str) -> CasCounter {
        CasCounter {
            path: path.to_owned(),
            blind: false,
            io: Io::new(),
            step: Step::Idle,
            over: false,
        }
    }

    /// The buggy variant: setData without a version.
    pub fn blind(mut self) -> CasCounter {
        self.blind = true;
        self
    }

    fn read(&mut self) {
        let p = self.io.send(Op::GetData {
            path: self.path.clone(),
            watch: false,
        });
        self.step = Step::Reading(p);
    }

    fn end(&mut self) {
        if std::mem::replace(&mut self.over, true) {
            return;
        }
        self.io.end();
        if let Step::Writing(_, value) = self.step {
            self.io.report(CounterOutcome::Maybe { value });
        }
        self.step = Step::Idle;
        self.io.report(CounterOutcome::Lost);
    }

    /// A failed read or create: what now.
    fn on_failure(&mut self, pending: Pending, e: ZkError) {
        match classify(e) {
            Failure::SessionEnded => self.end(),
            Failure::Unknown if self.io.may_retry(pending) => self.read(),
            Failure::Unknown => self.step = Step::AwaitingReconnect(pending),
            Failure::Answer(e) => self.fail(e),
        }
    }

    fn fail(&mut self, e: ZkError) {
        self.step = Step::Idle;
        self.io.report(CounterOutcome::Failed(e));
    }

    fn on_reply(&mut self, id: u64, result: Result<Reply, ZkError>) {
        match (self.step, result) {
            (Step::Reading(p), Ok(Reply::GetData { data, stat })) if p.op == id => {
                let Some(value) = std::str::from_utf8(&data)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                else {
                    return self.fail(ZkError::BadArguments);
                };
                let version = if self.blind { -1 } else { stat.version };
                let p = self.io.send(Op::SetData {
                    path: self.path.clone(),
                    data: (value + 1).to_string().into_bytes(),
                    version,
                });
                self.step = Step::Writing(p, value + 1);
            }
            (Step::Reading(p), Err(ZkError::NoNode)) if p.op == id => {
                let p = self.io.send(Op::Create {
                    path: self.path.clone(),
                    data: b"0".to_vec(),
                    mode: CreateMode::Persistent,
                });
                self.step = Step::Creating(p);
            }
            (Step::Reading(p), Err(e)) if p.op == id => self.on_failure(p, e),
            (Step::Creating(p), Ok(_) | Err(ZkError::NodeExists)) if p.op == id => self.read(),
            (Step::Creating(p), Err(e)) if p.op == id => self.on_failure(p, e),
            (Step::Writing(p, value), Ok(Reply::SetData(_))) if p.op == id => {
                self.step = Step::Idle;
                self.io.report(CounterOutcome::Incremented { value });
            }
            (Step::Writing(p, _), Err(ZkError::BadVersion)) if p.op == id => {
                self.io.report(CounterOutcome::Conflict);
                self.read();
            }
            (Step::Writing(p, value), Err(e)) if p.op == id => match classify(e) {
                Failure::SessionEnded => self.end(),
                Failure::Unknown => {
                    self.step = Step::Idle;
                    self.io.report(CounterOutcome::Maybe { value });
                }
                Failure::Answer(e) => self.fail(e),
            },
            (_, Err(ZkError::SessionExpired)) => self.end(),
            _ => {}
        }
    }
}

impl Machine for CasCounter {
    type Command = CounterCommand;
    type Outcome = CounterOutcome;

    fn handle(&mut self, input: Input<CounterCommand>) {
        match input {
            Input::Command(CounterCommand::Increment) => {
                if self.over {
                    self.io.report(CounterOutcome::Lost);
                } else if self.step == Step::Idle {
                    self.read();
                }
            }
            Input::Reply(id, result) => self.on_reply(id, result),
            Input::Watch(_) => {}
            Input::Session(event) => {
                if self.over {
                    return;
                }
                if self.io.on_session(event) {
                    return self.end();
                }
                if let Step::AwaitingReconnect(p) = self.step {
                    if self.io.may_retry(p) {
                        self.read();
                    }
                }
            }
        }
    }

    fn poll(&mut self) -> Option<Output<CounterOutcome>> {
        self.io.poll()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zoosim::prelude::step;
    use zoosim::prelude::{SessionEvent, Stat};

    fn read_reply(value: &str, version: i32) -> Result<Reply, ZkError> {
        Ok(Reply::GetData {
            data: value.as_bytes().to_vec(),
            stat: Stat {
                version,
                ..Stat::default()
            },
        })
    }

    #[test]
    fn an_increment_reads_then_writes_at_the_version_read() {
        let mut m = CasCounter::new("/c");
        let (sends, _) = step(&mut m, Input::Command(CounterCommand::Increment));
        assert!(matches!(sends[..], [(0, Op::GetData { .. })]));
        let (sends, _) = step(&mut m, Input::Reply(0, read_reply("41", 7)));
        assert!(
            matches!(&sends[..], [(1, Op::SetData { data, version: 7, .. })] if data == b"42"),
            "{sends:?}"
        );
        let (_, outs) = step(&mut m, Input::Reply(1, Ok(Reply::SetData(Stat::default()))));
        assert_eq!(outs, vec![CounterOutcome::Incremented { value: 42 }]);
    }

    #[test]
    fn a_conflict_reads_again_and_a_lost_write_is_maybe() {
        let mut m = CasCounter::new("/c");
        step(&mut m, Input::Command(CounterCommand::Increment));
        step(&mut m, Input::Reply(0, read_reply("1", 1)));
        let (sends, outs) = step(&mut m, Input::Reply(1, Err(ZkError::BadVersion)));
        assert_eq!(outs, vec![CounterOutcome::Conflict]);
        assert!(matches!(sends[..], [(2, Op::GetData { .. })]));
        step(&mut m, Input::Reply(2, read_reply("2", 2)));
        let (sends, outs) = step(&mut m, Input::Reply(3, Err(ZkError::ConnectionLoss)));
        assert_eq!(outs, vec![CounterOutcome::Maybe { value: 3 }]);
        assert!(sends.is_empty(), "never written twice");
    }

    #[test]
    fn a_lost_read_waits_for_the_reconnect_and_expiry_ends_it() {
        let mut m = CasCounter::new("/c");
        step(&mut m, Input::Command(CounterCommand::Increment));
        let (sends, _) = step(&mut m, Input::Reply(0, Err(ZkError::ConnectionLoss)));
        assert!(sends.is_empty());
        step(&mut m, Input::Session(SessionEvent::Disconnected));
        let (sends, _) = step(&mut m, Input::Session(SessionEvent::Connected));
        assert!(matches!(sends[..], [(1, Op::GetData { .. })]));
        // A missing node is created, then read.
        let (sends, _) = step(&mut m, Input::Reply(1, Err(ZkError::NoNode)));
        assert!(matches!(sends[..], [(2, Op::Create { .. })]));
        let (sends, _) = step(&mut m, Input::Reply(2, Err(ZkError::NodeExists)));
        assert!(matches!(sends[..], [(3, Op::GetData { .. })]));
        step(&mut m, Input::Reply(3, read_reply("0", 0)));
        let (_, outs) = step(&mut m, Input::Session(SessionEvent::Expired));
        assert_eq!(
            outs,
            vec![CounterOutcome::Maybe { value: 1 }, CounterOutcome::Lost]
        );
        // The write's own SessionExpired comes after: reported once.
        let (_, outs) = step(&mut m, Input::Reply(4, Err(ZkError::SessionExpired)));
        assert!(outs.is_empty(), "{outs:?}");
        let (sends, outs) = step(&mut m, Input::Command(CounterCommand::Increment));
        assert!(sends.is_empty());
        assert_eq!(outs, vec![CounterOutcome::Lost]);
    }

    #[test]
    fn the_blind_variant_writes_without_a_version() {
        let mut m = CasCounter::new("/c").blind();
        step(&mut m, Input::Command(CounterCommand::Increment));
        let (sends, _) = step(&mut m, Input::Reply(0, read_reply("5", 9)));
        assert!(matches!(sends[..], [(1, Op::SetData { version: -1, .. })]));
    }
}
