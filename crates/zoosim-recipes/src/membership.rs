//! Group membership (recipes page, "Group Membership"): a member joins by
//! creating an EPHEMERAL child of the group node, so it leaves by deleting
//! it or when its session ends; anyone follows the group with
//! getChildren(watch), listing again on every NodeChildrenChanged.
//!
//! A member's node is `<member>-<guid>` (guid unique to the session): a
//! create sent again after ConnectionLoss that meets NodeExists has found
//! its own node — a previous session's node of the same member, which may
//! linger until that session expires, has another guid.
//!
//! ```
//! # use zoosim_client::local::{LocalConfig, LocalServer};
//! # use zoosim_recipes::membership::{Membership, MembershipClient};
//! # futures::executor::block_on(async {
//! let server = LocalServer::new(LocalConfig::default());
//! let zk = server.connect(4000);
//! let mut me = MembershipClient::new(&zk, Membership::new("/groups/workers", "w1", "g7"));
//! me.join().await.expect("joined");
//! assert_eq!(me.members().await.expect("listed"), vec!["w1".to_string()]);
//! # });
//! ```

use super::{
    assert_component, child_path, classify, Driver, Failure, Input, Io, Machine, Output, Pending,
};
use zoosim_client::Zk;
use zoosim_core::proto::{CreateMode, EventType, Op, Reply, SessionEvent, ZkError};

/// What the application asks of a [`Membership`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum MembershipCommand {
    /// Join the group (only when out); answered by [`MembershipOutcome::Joined`].
    Join,
    /// Leave the group (only when in); answered by [`MembershipOutcome::Left`].
    Leave,
    /// List the members and follow the group from now on.
    Follow,
}

/// What a [`Membership`] reports to the application.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum MembershipOutcome {
    /// Our member node exists: we are in the group.
    Joined,
    /// Our member node is deleted: we are out of the group.
    Left,
    /// The group's members (names, sorted), on every change while
    /// following.
    Members(Vec<String>),
    /// The session ended (our member node goes with it): following and membership stop;
    /// start over with a new session.
    Lost {
        /// Why: `SessionExpired` (also when the session expired or closed).
        reason: ZkError,
    },
    /// A command that makes no sense now (join unless out, leave unless in, follow while
    /// following, anything after the machine stopped); nothing changed.
    Refused {
        /// The command refused.
        command: MembershipCommand,
    },
    /// A ZooKeeper answer the recipe has no way forward from; the machine stops.
    Failed(ZkError),
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum Own {
    Out,
    Joining(Pending),
    In,
    Leaving(Pending),
}

/// The group membership state machine: one member of one group, and a follower of
/// the group's list (see the module docs).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Membership {
    group: String,
    member: String,
    guid: String,
    io: Io<MembershipOutcome>,
    own: Own,
    following: bool,
    list: Option<Pending>,
    relist: bool,
    lost_own: Option<Pending>,
    lost_list: Option<Pending>,
    over: bool,
}

impl Membership {
    /// `member` may not contain '-' (it separates the guid); `guid` unique
    /// to the session.
    pub fn new(group: &str, member: &str, guid: &str) -> Membership {
        assert_component("member name", member);
        assert!(
            !member.contains('-'),
            "a member name is one path component without '-', got {member:?}"
        );
        assert_component("guid", guid);
        Membership {
            group: group.to_owned(),
            member: member.to_owned(),
            guid: guid.to_owned(),
            io: Io::new(),
            own: Own::Out,
            following: false,
            list: None,
            relist: false,
            lost_own: None,
            lost_list: None,
            over: false,
        }
    }

    /// Whether our member node exists (joined, not left).
    pub fn is_member(&self) -> bool {
        self.own == Own::In
    }

    /// Whether a join or leave is in progress.
    pub fn is_busy(&self) -> bool {
        matches!(self.own, Own::Joining(_) | Own::Leaving(_))
    }

    /// Whether the machine's session has ended.
    pub fn session_ended(&self) -> bool {
        self.io.has_ended()
    }

    fn node(&self) -> String {
        child_path(&self.group, &format!("{}-{}", self.member, self.guid))
    }

    fn join(&mut self, with_parents: bool) {
        if with_parents {
            let group = self.group.clone();
            self.io.create_path(&group);
        }
        let req = self.io.send(Op::Create {
            path: self.node(),
            data: vec![],
            mode: CreateMode::Ephemeral,
        });
        self.own = Own::Joining(req);
    }

    fn leave(&mut self) {
        let req = self.io.send(Op::Delete {
            path: self.node(),
            version: -1,
        });
        self.own = Own::Leaving(req);
    }

    fn get(&mut self) {
        self.relist = false;
        let req = self.io.send(Op::GetChildren {
            path: self.group.clone(),
            watch: true,
        });
        self.list = Some(req);
    }

    fn end(&mut self, reason: ZkError) {
        if reason == ZkError::SessionExpired {
            self.io.end();
        }
        if !self.over {
            self.io.report(MembershipOutcome::Lost { reason });
        }
        self.over = true;
        self.own = Own::Out;
        self.list = None;
        self.lost_own = None;
        self.lost_list = None;
    }

    fn on_own(&mut self, pending: Pending, result: Result<Reply, ZkError>) {
        let joining = matches!(self.own, Own::Joining(_));
        match result {
            Ok(Reply::Create { .. }) | Err(ZkError::NodeExists) if joining => {
                self.own = Own::In;
                self.io.report(MembershipOutcome::Joined);
            }
            Err(ZkError::NoNode) if joining => self.join(true),
            Ok(Reply::Delete) | Err(ZkError::NoNode) => {
                self.own = Own::Out;
                self.io.report(MembershipOutcome::Left);
            }
            Ok(other) => unreachable!("membership: {other:?}"),
            Err(e) => match classify(e) {
                Failure::SessionEnded => self.end(ZkError::SessionExpired),
                Failure::Unknown if self.io.may_retry(pending) => self.resend_own(),
                Failure::Unknown => self.lost_own = Some(pending),
                Failure::Answer(e) => {
                    self.io.report(MembershipOutcome::Failed(e));
                    self.over = true;
                }
            },
        }
    }

    fn resend_own(&mut self) {
        match self.own {
            Own::Joining(_) => self.join(false),
            Own::Leaving(_) => self.leave(),
            _ => {}
        }
    }

    fn on_list(&mut self, pending: Pending, result: Result<Reply, ZkError>) {
        match result {
            Ok(Reply::GetChildren { children, .. }) => {
                let mut members: Vec<String> = children
                    .iter()
                    .filter_map(|c| c.split_once('-').map(|(m, _)| m.to_owned()))
                    .collect();
                members.sort();
                self.io.report(MembershipOutcome::Members(members));
                if self.relist {
                    self.get();
                }
            }
            // No group yet: follow its creation.
            Err(ZkError::NoNode) => {
                let req = self.io.send(Op::Exists {
                    path: self.group.clone(),
                    watch: true,
                });
                self.list = Some(req);
            }
            Ok(Reply::Exists(Some(_))) => self.get(),
            Ok(Reply::Exists(None)) => self.io.report(MembershipOutcome::Members(Vec::new())),
            Ok(other) => unreachable!("membership list: {other:?}"),
            Err(e) => match classify(e) {
                Failure::SessionEnded => self.end(ZkError::SessionExpired),
                Failure::Unknown if self.io.may_retry(pending) => self.get(),
                Failure::Unknown => self.lost_list = Some(pending),
                Failure::Answer(e) => {
                    self.io.report(MembershipOutcome::Failed(e));
                    self.over = true;
                }
            },
        }
    }
}

impl Machine for Membership {
    type Command = MembershipCommand;
    type Outcome = MembershipOutcome;

    fn handle(&mut self, input: Input<MembershipCommand>) {
        match input {
            Input::Command(command) if self.over => {
                self.io.report(MembershipOutcome::Refused { command })
            }
            Input::Command(MembershipCommand::Join) if self.own == Own::Out => self.join(false),
            Input::Command(MembershipCommand::Leave) if self.own == Own::In => self.leave(),
            Input::Command(MembershipCommand::Follow) if !self.following => {
                self.following = true;
                self.get();
            }
            Input::Command(command) => self.io.report(MembershipOutcome::Refused { command }),
            Input::Reply(id, result) => {
                let own = match self.own {
                    Own::Joining(p) | Own::Leaving(p) => Some(p),
                    _ => None,
                };
                if let Some(p) = self.list.filter(|p| p.op == id) {
                    self.list = None;
                    self.on_list(p, result);
                } else if let Some(p) = own.filter(|p| p.op == id) {
                    self.on_own(p, result);
                } else if result == Err(ZkError::SessionExpired) {
                    self.end(ZkError::SessionExpired);
                }
            }
            Input::Watch(event) => {
                if !self.following || self.over || event.path != self.group {
                    return;
                }
                if matches!(
                    event.event_type,
                    EventType::NodeChildrenChanged | EventType::NodeCreated
                ) {
                    if self.list.is_some() || self.lost_list.is_some() {
                        self.relist = true;
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
                    if self.lost_own.is_some_and(|p| self.io.may_retry(p)) {
                        self.lost_own = None;
                        self.resend_own();
                    }
                    if self.lost_list.is_some_and(|p| self.io.may_retry(p)) {
                        self.lost_list = None;
                        self.get();
                    }
                }
            }
        }
    }

    fn poll(&mut self) -> Option<Output<MembershipOutcome>> {
        self.io.poll()
    }
}

/// Group membership for application code.
pub struct MembershipClient<'z, Z: Zk> {
    driver: Driver<'z, Z, Membership>,
}

impl<'z, Z: Zk + Sync> MembershipClient<'z, Z> {
    /// A client running `membership` over `zk`.
    pub fn new(zk: &'z Z, membership: Membership) -> Self {
        MembershipClient {
            driver: Driver::new(zk, membership),
        }
    }

    /// Runs the machine until `done` picks an outcome (what it ends with),
    /// or one that says it failed.
    async fn until<T>(
        &mut self,
        done: impl Fn(MembershipOutcome) -> Option<T>,
    ) -> Result<T, ZkError> {
        loop {
            match self.driver.next_outcome().await {
                MembershipOutcome::Lost { reason } => return Err(reason),
                MembershipOutcome::Failed(e) => return Err(e),
                MembershipOutcome::Refused { .. } => return Err(ZkError::ApiError),
                o => {
                    if let Some(t) = done(o) {
                        return Ok(t);
                    }
                }
            }
        }
    }

    /// Joins the group.
    pub async fn join(&mut self) -> Result<(), ZkError> {
        self.driver.command(MembershipCommand::Join);
        self.until(|o| (o == MembershipOutcome::Joined).then_some(()))
            .await
    }

    /// Leaves the group.
    pub async fn leave(&mut self) -> Result<(), ZkError> {
        self.driver.command(MembershipCommand::Leave);
        self.until(|o| (o == MembershipOutcome::Left).then_some(()))
            .await
    }

    /// The members now (starting to follow on the first call); later calls
    /// wait for the next change.
    pub async fn members(&mut self) -> Result<Vec<String>, ZkError> {
        if !self.driver.machine().following {
            self.driver.command(MembershipCommand::Follow);
        }
        self.until(|o| match o {
            MembershipOutcome::Members(m) => Some(m),
            _ => None,
        })
        .await
    }

    /// The driver underneath, for finer control (single commands, outcomes one by one).
    pub fn driver(&mut self) -> &mut Driver<'z, Z, Membership> {
        &mut self.driver
    }
}

#[cfg(test)]
#[path = "membership_tests.rs"]
mod tests;
