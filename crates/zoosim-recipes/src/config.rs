//! Name service and configuration (recipes page, "Name Service and
//! Configuration"): a node's data, followed with a watch and re-read on
//! every change, and updated by a versioned setData, ZooKeeper's
//! compare-and-set.
//!
//! * Follow: getData(path, watch). NodeDataChanged, NodeCreated or
//!   NodeDeleted: read again (watches are one-shot; the re-read re-arms).
//!   A missing node is followed with exists(watch) until it appears.
//! * Compare-and-set: setData(path, data, version). BadVersion: someone
//!   else updated first (`Conflict`). ConnectionLoss: the outcome is
//!   unknown, so once reconnected the machine reads the node: the next
//!   version holding our data is ours (`Set`); the expected version still
//!   there means it did not happen, and it is sent again; anything else is
//!   `Conflict` (someone else's update came first, or ours was overwritten:
//!   it cannot be told apart, and the caller must read and decide).
//!
//! ```
//! # use zoosim_client::local::{LocalConfig, LocalServer};
//! # use zoosim_client::ZkExt;
//! # use zoosim_core::proto::CreateMode;
//! # use zoosim_recipes::config::{Config, ConfigClient};
//! # futures::executor::block_on(async {
//! let server = LocalServer::new(LocalConfig::default());
//! let zk = server.connect(4000);
//! zk.create("/app-config", b"v1", CreateMode::Persistent).await.unwrap();
//! let mut config = ConfigClient::new(&zk, Config::new("/app-config"));
//! let (data, version) = config.read().await.expect("read").expect("present");
//! assert_eq!(data, b"v1".to_vec());
//! assert_eq!(config.compare_and_set(version, b"v2".to_vec()).await, Ok(Some(1)));
//! # });
//! ```

use super::{classify, Driver, Failure, Input, Io, Machine, Output, Pending};
use zoosim_client::Zk;
use zoosim_core::proto::{EventType, Op, Reply, SessionEvent, ZkError};

/// What the application asks of a [`Config`].
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum ConfigCommand {
    /// Read the node and follow it from now on.
    Follow,
    /// Replace the data if the version is still `expected_version`.
    CompareAndSet {
        /// The version the node must still have for the update to happen.
        expected_version: i32,
        /// The node's new data.
        data: Vec<u8>,
    },
}

/// What a [`Config`] reports to the application.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum ConfigOutcome {
    /// The node's data as read (every read while following).
    Value {
        /// The node's data.
        data: Vec<u8>,
        /// The node's version with that data.
        version: i32,
    },
    /// The node does not exist (followed until it does).
    Missing,
    /// Our update is in, as `version`.
    Set {
        /// The node's version after our update.
        version: i32,
    },
    /// The update did not happen: another came first (or, after a lost
    /// reply, ours cannot be told from another's).
    Conflict,
    /// The session ended: following and any update stop; start over with a new session.
    Lost {
        /// Why: `SessionExpired` (also when the session expired or closed).
        reason: ZkError,
    },
    /// A command the machine cannot take now: an update while one is in progress, or any
    /// command after the machine stopped (session ended, or `Failed`). Nothing changed.
    Refused,
    /// A ZooKeeper answer the recipe has no way forward from; the machine stops.
    Failed(ZkError),
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Step {
    /// setData in flight.
    Setting,
    /// After a lost setData: reading to learn what happened.
    Checking,
}

/// The one update in progress.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Update {
    step: Step,
    req: Pending,
    /// `req` met ConnectionLoss: once reconnected, what happened is learned
    /// by reading. Kept with the update it belongs to, so a lost update
    /// without an update cannot be represented.
    lost: bool,
    expected: i32,
    data: Vec<u8>,
}

/// The configuration node's state machine: a follower and one update at a
/// time, independently.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Config {
    path: String,
    io: Io<ConfigOutcome>,
    following: bool,
    /// The follow read in flight, and whether it is an exists().
    read: Option<(Pending, bool)>,
    /// A change was notified while a read was in flight: read again after.
    reread: bool,
    update: Option<Update>,
    /// The follow read that met ConnectionLoss, to send again after a
    /// reconnect.
    lost_read: Option<Pending>,
    over: bool,
}

impl Config {
    /// A configuration machine for the node `path`, neither following nor updating yet.
    pub fn new(path: &str) -> Config {
        Config {
            path: path.to_owned(),
            io: Io::new(),
            following: false,
            read: None,
            reread: false,
            update: None,
            lost_read: None,
            over: false,
        }
    }

    /// Whether the machine's session has ended.
    pub fn session_ended(&self) -> bool {
        self.io.has_ended()
    }

    /// Whether an update is in progress.
    pub fn is_updating(&self) -> bool {
        self.update.is_some()
    }

    fn get(&mut self) {
        let req = self.io.send(Op::GetData {
            path: self.path.clone(),
            watch: true,
        });
        self.read = Some((req, false));
    }

    fn set(&mut self, expected_version: i32, data: Vec<u8>) {
        let req = self.io.send(Op::SetData {
            path: self.path.clone(),
            data: data.clone(),
            version: expected_version,
        });
        self.update = Some(Update {
            step: Step::Setting,
            req,
            lost: false,
            expected: expected_version,
            data,
        });
    }

    fn check(&mut self, expected_version: i32, data: Vec<u8>) {
        let req = self.io.send(Op::GetData {
            path: self.path.clone(),
            watch: false,
        });
        self.update = Some(Update {
            step: Step::Checking,
            req,
            lost: false,
            expected: expected_version,
            data,
        });
    }

    fn end(&mut self, reason: ZkError) {
        if reason == ZkError::SessionExpired {
            self.io.end();
        }
        if !self.over {
            self.io.report(ConfigOutcome::Lost { reason });
        }
        self.over = true;
        self.read = None;
        self.update = None;
        self.lost_read = None;
    }

    fn on_read(&mut self, pending: Pending, was_exists: bool, result: Result<Reply, ZkError>) {
        match result {
            Ok(Reply::GetData { data, stat }) => self.io.report(ConfigOutcome::Value {
                data,
                version: stat.version,
            }),
            // Created between our getData and exists: read it.
            Ok(Reply::Exists(Some(_))) => return self.get(),
            Ok(Reply::Exists(None)) => self.io.report(ConfigOutcome::Missing),
            Ok(other) => unreachable!("config read: {other:?}"),
            Err(ZkError::NoNode) if !was_exists => {
                let req = self.io.send(Op::Exists {
                    path: self.path.clone(),
                    watch: true,
                });
                self.read = Some((req, true));
                return;
            }
            Err(e) => {
                return match classify(e) {
                    Failure::SessionEnded => self.end(ZkError::SessionExpired),
                    Failure::Unknown if self.io.may_retry(pending) => self.get(),
                    Failure::Unknown => self.lost_read = Some(pending),
                    Failure::Answer(e) => {
                        self.io.report(ConfigOutcome::Failed(e));
                        self.over = true;
                    }
                };
            }
        }
        if std::mem::take(&mut self.reread) {
            self.get();
        }
    }

    /// The reply to `update`'s request (taken out of the machine: it is
    /// over unless put back).
    fn on_update(&mut self, update: Update, result: Result<Reply, ZkError>) {
        let (expected, ours) = (update.expected, &update.data);
        match (update.step, result) {
            (Step::Setting, Ok(Reply::SetData(stat))) => self.io.report(ConfigOutcome::Set {
                version: stat.version,
            }),
            (Step::Checking, Ok(Reply::GetData { data, stat })) => {
                if stat.version == expected + 1 && data == *ours {
                    self.io.report(ConfigOutcome::Set {
                        version: stat.version,
                    });
                } else if stat.version == expected {
                    // The lost setData never happened: send it again.
                    self.set(expected, update.data);
                } else {
                    self.io.report(ConfigOutcome::Conflict);
                }
            }
            (step, Ok(other)) => unreachable!("config update: {other:?} to {step:?}"),
            (_, Err(ZkError::BadVersion)) | (_, Err(ZkError::NoNode)) => {
                self.io.report(ConfigOutcome::Conflict)
            }
            (_, Err(e)) => match classify(e) {
                Failure::SessionEnded => self.end(ZkError::SessionExpired),
                Failure::Unknown => {
                    // Whatever was lost, what happened is learned by reading.
                    if self.io.may_retry(update.req) {
                        self.check(expected, update.data);
                    } else {
                        self.update = Some(Update {
                            lost: true,
                            ..update
                        });
                    }
                }
                Failure::Answer(e) => {
                    self.io.report(ConfigOutcome::Failed(e));
                    self.over = true;
                }
            },
        }
    }
}

impl Machine for Config {
    type Command = ConfigCommand;
    type Outcome = ConfigOutcome;

    fn handle(&mut self, input: Input<ConfigCommand>) {
        match input {
            Input::Command(_) if self.over => self.io.report(ConfigOutcome::Refused),
            Input::Command(ConfigCommand::Follow) => {
                if !self.following {
                    self.following = true;
                    self.get();
                }
            }
            Input::Command(ConfigCommand::CompareAndSet {
                expected_version,
                data,
            }) => {
                if self.update.is_some() {
                    self.io.report(ConfigOutcome::Refused);
                } else {
                    self.set(expected_version, data);
                }
            }
            Input::Reply(id, result) => {
                if let Some((p, was_exists)) = self.read.filter(|(p, _)| p.op == id) {
                    self.read = None;
                    self.on_read(p, was_exists, result);
                } else if let Some(update) = self.update.take_if(|u| u.req.op == id) {
                    self.on_update(update, result);
                } else if result == Err(ZkError::SessionExpired) {
                    self.end(ZkError::SessionExpired);
                }
            }
            Input::Watch(event) => {
                if event.path != self.path || !self.following || self.over {
                    return;
                }
                if matches!(
                    event.event_type,
                    EventType::NodeDataChanged | EventType::NodeCreated | EventType::NodeDeleted
                ) {
                    if self.read.is_some() || self.lost_read.is_some() {
                        self.reread = true;
                    } else {
                        self.get();
                    }
                }
            }
            Input::Session(event) => {
                if self.io.on_session(event) {
                    return self.end(ZkError::SessionExpired);
                }
                if event == SessionEvent::Connected {
                    if self.lost_read.is_some_and(|p| self.io.may_retry(p)) {
                        self.lost_read = None;
                        self.get();
                    }
                    if let Some(update) =
                        self.update.take_if(|u| u.lost && self.io.may_retry(u.req))
                    {
                        self.check(update.expected, update.data);
                    }
                }
            }
        }
    }

    fn poll(&mut self) -> Option<Output<ConfigOutcome>> {
        self.io.poll()
    }
}

/// The configuration node for application code.
pub struct ConfigClient<'z, Z: Zk> {
    driver: Driver<'z, Z, Config>,
}

impl<'z, Z: Zk + Sync> ConfigClient<'z, Z> {
    /// A client running `config` over `zk`.
    pub fn new(zk: &'z Z, config: Config) -> Self {
        ConfigClient {
            driver: Driver::new(zk, config),
        }
    }

    /// Starts following and returns the first read: (data, version), or
    /// None if the node does not exist.
    pub async fn read(&mut self) -> Result<Option<(Vec<u8>, i32)>, ZkError> {
        self.driver.command(ConfigCommand::Follow);
        loop {
            match self.driver.next_outcome().await {
                ConfigOutcome::Value { data, version } => return Ok(Some((data, version))),
                ConfigOutcome::Missing => return Ok(None),
                ConfigOutcome::Lost { reason } => return Err(reason),
                ConfigOutcome::Failed(e) => return Err(e),
                _ => {}
            }
        }
    }

    /// Waits for the next change of the followed node.
    pub async fn next_change(&mut self) -> Result<Option<(Vec<u8>, i32)>, ZkError> {
        self.read().await
    }

    /// Ok(Some(version)) if set, Ok(None) on a conflict.
    pub async fn compare_and_set(
        &mut self,
        expected_version: i32,
        data: Vec<u8>,
    ) -> Result<Option<i32>, ZkError> {
        self.driver.command(ConfigCommand::CompareAndSet {
            expected_version,
            data,
        });
        loop {
            match self.driver.next_outcome().await {
                ConfigOutcome::Set { version } => return Ok(Some(version)),
                ConfigOutcome::Conflict => return Ok(None),
                ConfigOutcome::Lost { reason } => return Err(reason),
                ConfigOutcome::Failed(e) => return Err(e),
                ConfigOutcome::Refused => return Err(ZkError::ApiError),
                _ => {}
            }
        }
    }

    /// The driver underneath, for finer control (single commands, outcomes one by one).
    pub fn driver(&mut self) -> &mut Driver<'z, Z, Config> {
        &mut self.driver
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
