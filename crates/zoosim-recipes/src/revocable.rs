//! Revocable shared locks (recipes page, "Revocable Shared Locks"): the
//! holder side is the lock made revocable ([`super::lock::Lock::revocable`]:
//! it reads its own node with a data watch and reports `RevokeAsked` when
//! "unlock" appears there); this is the revoker's side: setData(node,
//! "unlock"). NoNode means the node is gone already (released or expired).
//! The write is idempotent, so after ConnectionLoss it is simply sent again.
//!
//! ```
//! # use zoosim_client::local::{LocalConfig, LocalServer};
//! # use zoosim_recipes::lock::{Lock, LockClient, LockOutcome};
//! # use zoosim_recipes::revocable::{Revoker, RevokerClient};
//! # futures::executor::block_on(async {
//! let server = LocalServer::new(LocalConfig::default());
//! let (holder_zk, admin_zk) = (server.connect(4000), server.connect(4000));
//! let mut lock = LockClient::new(&holder_zk, Lock::read("/data/rw", "g1").revocable());
//! lock.acquire().await.expect("held");
//! let node = lock.driver().machine().node().expect("our node").to_owned();
//! let mut admin = RevokerClient::new(&admin_zk, Revoker::new());
//! assert_eq!(admin.revoke(&node).await, Ok(true));
//! // The holder hears of it and consents.
//! assert_eq!(lock.driver().next_outcome().await, LockOutcome::RevokeAsked);
//! lock.release().await.expect("released");
//! assert_eq!(admin.revoke(&node).await, Ok(false)); // gone now
//! # });
//! ```

use super::lock::REVOKE;
use super::{classify, Driver, Failure, Input, Io, Machine, Output, Pending};
use zoosim_client::Zk;
use zoosim_core::proto::{Op, Reply, SessionEvent, ZkError};

/// What the application asks of a [`Revoker`]; one revocation at a time.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum RevokerCommand {
    /// Ask the holder of `node` (a lock node's path) to let go.
    Revoke {
        /// The lock node's path.
        node: String,
    },
}

/// What a [`Revoker`] reports to the application.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum RevokerOutcome {
    /// The request is written into the node.
    Asked,
    /// The node is gone: nothing to revoke.
    NotHeld,
    /// The session ended while a revocation was in progress: start over with a new
    /// session.
    Lost {
        /// Why: `SessionExpired`.
        reason: ZkError,
    },
    /// A revocation arrived while another was in progress, or after the machine stopped;
    /// nothing changed.
    Refused,
    /// A ZooKeeper answer the recipe has no way forward from; the machine stops.
    Failed(ZkError),
}

/// The revocation in progress: the setData on `node`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Request {
    req: Pending,
    node: String,
    /// `req` met ConnectionLoss: sent again after a reconnect.
    lost: bool,
}

/// The revoker's state machine: writes "unlock" ([`REVOKE`]) into a holder's lock
/// node (see the module docs).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Revoker {
    io: Io<RevokerOutcome>,
    request: Option<Request>,
    over: bool,
}

impl Default for Revoker {
    fn default() -> Self {
        Revoker::new()
    }
}

impl Revoker {
    /// A revoker with no revocation in progress.
    pub fn new() -> Revoker {
        Revoker {
            io: Io::new(),
            request: None,
            over: false,
        }
    }

    fn send(&mut self, node: String) {
        let req = self.io.send(Op::SetData {
            path: node.clone(),
            data: REVOKE.to_vec(),
            version: -1,
        });
        self.request = Some(Request {
            req,
            node,
            lost: false,
        });
    }

    fn finish(&mut self, outcome: RevokerOutcome) {
        self.request = None;
        self.io.report(outcome);
    }
}

impl Machine for Revoker {
    type Command = RevokerCommand;
    type Outcome = RevokerOutcome;

    fn handle(&mut self, input: Input<RevokerCommand>) {
        match input {
            Input::Command(RevokerCommand::Revoke { node }) => {
                if self.over || self.request.is_some() {
                    self.io.report(RevokerOutcome::Refused);
                } else {
                    self.send(node);
                }
            }
            Input::Reply(id, result) => {
                // Taken out: every answer but a lost one ends the request.
                let Some(request) = self.request.take_if(|r| r.req.op == id) else {
                    return;
                };
                match result {
                    Ok(Reply::SetData(_)) => self.finish(RevokerOutcome::Asked),
                    Ok(other) => unreachable!("revoker: {other:?}"),
                    Err(ZkError::NoNode) => self.finish(RevokerOutcome::NotHeld),
                    Err(e) => match classify(e) {
                        Failure::SessionEnded => {
                            self.io.end();
                            self.over = true;
                            self.finish(RevokerOutcome::Lost {
                                reason: ZkError::SessionExpired,
                            });
                        }
                        Failure::Unknown if self.io.may_retry(request.req) => {
                            self.send(request.node)
                        }
                        Failure::Unknown => {
                            self.request = Some(Request {
                                lost: true,
                                ..request
                            })
                        }
                        Failure::Answer(e) => {
                            self.over = true;
                            self.finish(RevokerOutcome::Failed(e));
                        }
                    },
                }
            }
            Input::Watch(_) => {}
            Input::Session(event) => {
                if self.io.on_session(event) {
                    self.over = true;
                    if self.request.is_some() {
                        self.finish(RevokerOutcome::Lost {
                            reason: ZkError::SessionExpired,
                        });
                    }
                    return;
                }
                if event == SessionEvent::Connected {
                    if let Some(r) = self.request.take_if(|r| r.lost && self.io.may_retry(r.req)) {
                        self.send(r.node);
                    }
                }
            }
        }
    }

    fn poll(&mut self) -> Option<Output<RevokerOutcome>> {
        self.io.poll()
    }
}

/// The revoker for application code.
pub struct RevokerClient<'z, Z: Zk> {
    driver: Driver<'z, Z, Revoker>,
}

impl<'z, Z: Zk + Sync> RevokerClient<'z, Z> {
    /// A client running `revoker` over `zk`.
    pub fn new(zk: &'z Z, revoker: Revoker) -> Self {
        RevokerClient {
            driver: Driver::new(zk, revoker),
        }
    }

    /// Ok(true) if asked, Ok(false) if the node was gone.
    pub async fn revoke(&mut self, node: &str) -> Result<bool, ZkError> {
        self.driver.command(RevokerCommand::Revoke {
            node: node.to_owned(),
        });
        match self.driver.next_outcome().await {
            RevokerOutcome::Asked => Ok(true),
            RevokerOutcome::NotHeld => Ok(false),
            RevokerOutcome::Lost { reason } => Err(reason),
            RevokerOutcome::Failed(e) => Err(e),
            RevokerOutcome::Refused => Err(ZkError::ApiError),
        }
    }
}

#[cfg(test)]
#[path = "revocable_tests.rs"]
mod tests;
