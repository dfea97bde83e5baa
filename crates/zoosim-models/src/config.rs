//! The configuration's (name service's) model: one node holds a counter,
//! "0" in version 0; every client follows it (reads it with a watch, and
//! reads again on every change) and, once it has read it, raises the counter
//! by one with a compare-and-set from the version it read — as the
//! simulation's workload does — then goes on following for as long as it
//! lives. Two clients update, once each; the others only follow. Why that
//! is enough: two updates from one version is what a conflict, and a lost
//! update, needs; a third updater only repeats the update's phases (set,
//! lost reply, check read, resend) that the first two already reach under
//! every fault, while a pure follower is the reader that must converge
//! with nothing of its own to wait for ([`ConfigModel::with_updaters`]
//! makes every client update). The machine is
//! [`zoosim_recipes::config::Config`] — or, for a deliberately broken copy,
//! any machine with its commands and outcomes ([`ConfigModel::with_machine`])
//! — behind [`Watched`], which hands every input and output through
//! unchanged and only notes whether the client library holds a watch on
//! the node or a watching read is in flight, which [`WATCH_REARMED`] reads.
//!
//! The world makes its directories empty: the model reads an empty node as
//! counter 0 (the workload writes "0" first).
//!
//! Properties (each a named value below), mirroring the simulation's
//! oracle ([`zoosim_core::check::config`]):
//!
//! * always [`NO_LOST_UPDATE`]: every value read has counter == version
//!   (two updates both succeeding from one version would break it);
//! * always [`MONOTONIC_READS`]: a client's reads never go back a version
//!   (one session per client: a client whose session ends stops);
//! * always [`SET_MEANS_SET`]: a successful update names the version right
//!   after the one it expected;
//! * always [`WATCH_REARMED`]: a live, connected follower always holds a
//!   watch on the node or has a watching read of it in flight — every
//!   change it has not read yet will reach it;
//! * always [`NO_RECIPE_FAILURE`]: the machine never refuses a command nor
//!   meets an answer it has no way forward from;
//! * eventually [`CONVERGENCE`]: once no update can happen any more, every
//!   live follower's last read is the node's final version. Fairness:
//!   every run of the model is finite and ends only when no action is
//!   enabled (weak fairness); the server always expires a crashed client's
//!   session and a disconnected client always reconnects; the predicate is
//!   monotone along every run (no write can come back, a live follower
//!   that read the final version reads only it again, dead clients stay
//!   dead), so the checker's joins of the state graph lose nothing;
//! * sometimes: a value read, an update set, an update in conflict (two
//!   clients from one version), a change followed (a newer version read
//!   after an older one), an update whose reply was lost resolved by
//!   reading, a session lost — each where the clients and faults make it
//!   possible — and every fault in the budget.
//!
//! Not a property: no herd (every follower must hear of every change: one
//! write waking them all is the recipe's point) and no orphans (it makes
//! no ephemeral nodes).

use stateright::Property;

use zoosim_core::check::Property as Claim;

use super::{Faults, Log, Maker, RecipeModel, State, World};
use zoosim_core::proto::{Op, Reply, ZkError};
use zoosim_recipes::config::{Config, ConfigCommand, ConfigOutcome};
use zoosim_recipes::{Input, Machine, OpId, Output};

/// The configuration node.
pub const NODE: &str = "/config";

pub use zoosim_core::check::config::MONOTONIC_READS;
pub use zoosim_core::check::config::NO_LOST_UPDATE;
pub use zoosim_core::check::config::SET_MEANS_SET;
/// A live, connected follower holds a watch or has a watching read in
/// flight.
pub const WATCH_REARMED: Claim = Claim::new(
    "watch-rearmed",
    "a follower whose session is alive and connected holds a watch on the node or has a \
     watching read in flight",
);
pub use super::NO_RECIPE_FAILURE;
pub use zoosim_core::check::config::CONVERGENCE;

/// Makes a client's machine: `(path)`.
pub type MakeMachine<M> = fn(&str) -> M;

/// The configuration as a model, over machine `M`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConfigModel<M = Config> {
    /// Clients `0..updaters` update once; the others only follow.
    pub updaters: usize,
    make: Maker<MakeMachine<M>>,
}

/// What the configuration's model is, in a line (`zoosim list`).
pub const ABOUT: &str =
    "the configuration: every client follows one node; two of them update it once by compare-and-set";

impl ConfigModel<Config> {
    /// The configuration's model over [`Config`].
    pub fn new() -> ConfigModel<Config> {
        ConfigModel::with_machine(Config::new)
    }
}

impl Default for ConfigModel<Config> {
    fn default() -> Self {
        ConfigModel::new()
    }
}

impl<M> ConfigModel<M> {
    /// The configuration's model over another machine with the
    /// configuration's commands and outcomes, made by `make` (e.g. a
    /// deliberately broken copy).
    pub fn with_machine(make: MakeMachine<M>) -> ConfigModel<M> {
        ConfigModel {
            updaters: 2,
            make: Maker(make),
        }
    }

    /// The same model with `n` clients that update.
    pub fn with_updaters(mut self, n: usize) -> ConfigModel<M> {
        self.updaters = n;
        self
    }
}

/// A client's machine, handed every input and output unchanged, with what
/// the client library holds for it: a watch on the node, a watching read
/// in flight.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Watched<M> {
    /// The machine.
    pub machine: M,
    /// Told to follow.
    pub following: bool,
    /// Its session ended or it stopped (Lost, Failed).
    pub over: bool,
    /// A watching read (getData or exists with a watch) in flight.
    pub pending: Option<OpId>,
    /// The library holds a watch on the node (a watching read was answered
    /// and no event has used the watch since).
    pub armed: bool,
    /// The setData in flight.
    pub setting: Option<OpId>,
    /// A setData met ConnectionLoss (its outcome was unknown).
    pub set_lost: bool,
}

impl<M> Machine for Watched<M>
where
    M: Machine<Command = ConfigCommand, Outcome = ConfigOutcome>,
{
    type Command = ConfigCommand;
    type Outcome = ConfigOutcome;

    fn handle(&mut self, input: Input<ConfigCommand>) {
        match &input {
            Input::Command(ConfigCommand::Follow) => self.following = true,
            Input::Reply(id, r) if Some(*id) == self.pending => {
                self.pending = None;
                // A read answered (NoNode to a getData sets no watch).
                if matches!(r, Ok(Reply::GetData { .. } | Reply::Exists(_))) {
                    self.armed = true;
                }
            }
            Input::Reply(id, r) if Some(*id) == self.setting => {
                self.setting = None;
                self.set_lost |= *r == Err(ZkError::ConnectionLoss);
            }
            Input::Watch(e) if e.path == NODE => self.armed = false,
            _ => {}
        }
        self.machine.handle(input);
    }

    fn poll(&mut self) -> Option<Output<ConfigOutcome>> {
        let out = self.machine.poll()?;
        match &out {
            Output::Send(id, Op::GetData { watch: true, .. } | Op::Exists { watch: true, .. }) => {
                self.pending = Some(*id)
            }
            Output::Send(id, Op::SetData { .. }) => self.setting = Some(*id),
            Output::Outcome(ConfigOutcome::Lost { .. } | ConfigOutcome::Failed(_)) => {
                self.over = true
            }
            _ => {}
        }
        Some(out)
    }
}

impl<M> Watched<M> {
    fn new(machine: M) -> Watched<M> {
        Watched {
            machine,
            following: false,
            over: false,
            pending: None,
            armed: false,
            setting: None,
            set_lost: false,
        }
    }
}

/// Where a client's update is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Update {
    /// Not asked yet (it waits for a first read).
    NotYet,
    /// Asked, from `expected`.
    Sent {
        /// The version it expects.
        expected: i32,
    },
    /// Answered (set or in conflict).
    Done,
}

/// One client's application.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct App {
    /// Told its machine to follow.
    pub started: bool,
    /// Its last read: (version, counter).
    pub view: Option<(i32, i64)>,
    /// Its update.
    pub update: Update,
    /// Its session ended or its machine stopped.
    pub over: bool,
}

/// What the clients share: sticky flags for the properties.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Shared {
    /// A read showed counter != version.
    pub lost_update: bool,
    /// A client read an older version after a newer one.
    pub backwards: bool,
    /// A set named another version than expected + 1.
    pub set_wrong: bool,
    /// The machine refused a command or failed.
    pub failed: bool,
    /// A value was read.
    pub read: bool,
    /// An update was set.
    pub set: bool,
    /// An update met a conflict.
    pub conflict: bool,
    /// A client read a newer version after an older one.
    pub followed: bool,
    /// A session was lost.
    pub lost: bool,
}

impl<M> RecipeModel for ConfigModel<M>
where
    M: Machine<Command = ConfigCommand, Outcome = ConfigOutcome> + Send + Sync + 'static,
{
    type Machine = Watched<M>;
    type App = App;
    type Shared = Shared;
    const CLAIMS: &'static [Claim] = &[
        NO_LOST_UPDATE,
        MONOTONIC_READS,
        SET_MEANS_SET,
        WATCH_REARMED,
        NO_RECIPE_FAILURE,
        CONVERGENCE,
    ];

    fn name(&self) -> &'static str {
        "configuration"
    }

    fn dirs(&self) -> Vec<String> {
        vec![NODE.to_owned()]
    }

    fn client(&self, i: usize) -> (Watched<M>, App) {
        let app = App {
            started: false,
            view: None,
            update: if i < self.updaters {
                Update::NotYet
            } else {
                Update::Done
            },
            over: false,
        };
        (Watched::new((self.make.0)(NODE)), app)
    }

    fn wants(&self, app: &App) -> bool {
        !app.over && (!app.started || (app.view.is_some() && app.update == Update::NotYet))
    }

    fn command(&self, app: &mut App, _: &mut Shared, _: bool, _: &mut Log) -> ConfigCommand {
        if !app.started {
            app.started = true;
            return ConfigCommand::Follow;
        }
        let (version, count) = app.view.expect("an update is asked after a read");
        app.update = Update::Sent { expected: version };
        ConfigCommand::CompareAndSet {
            expected_version: version,
            data: (count + 1).to_string().into_bytes(),
        }
    }

    fn outcome(&self, app: &mut App, shared: &mut Shared, outcome: &ConfigOutcome) {
        match outcome {
            ConfigOutcome::Value { data, version } => {
                // The world's node starts empty: counter 0.
                let count = match std::str::from_utf8(data) {
                    Ok("") => 0,
                    Ok(s) => s.parse().unwrap_or(-1),
                    Err(_) => -1,
                };
                shared.read = true;
                shared.lost_update |= count != i64::from(*version);
                if let Some((last, _)) = app.view {
                    shared.backwards |= *version < last;
                    shared.followed |= *version > last;
                }
                app.view = Some((*version, count));
            }
            ConfigOutcome::Missing => {}
            ConfigOutcome::Set { version } => {
                if let Update::Sent { expected } = app.update {
                    shared.set_wrong |= *version != expected + 1;
                }
                shared.set = true;
                app.update = Update::Done;
            }
            ConfigOutcome::Conflict => {
                shared.conflict = true;
                app.update = Update::Done;
            }
            ConfigOutcome::Lost { .. } => {
                shared.lost = true;
                app.over = true;
            }
            ConfigOutcome::Refused | ConfigOutcome::Failed(_) => {
                shared.failed = true;
                app.over = true;
            }
        }
    }

    fn finished(&self, app: &App) -> bool {
        app.over
    }

    fn properties(&self, faults: &Faults) -> Vec<Property<World<Self>>> {
        let mut p = vec![
            Property::always(NO_LOST_UPDATE.name, |_, s: &State<Self>| {
                !s.shared.lost_update
            }),
            Property::always(MONOTONIC_READS.name, |_, s: &State<Self>| {
                !s.shared.backwards
            }),
            Property::always(SET_MEANS_SET.name, |_, s: &State<Self>| !s.shared.set_wrong),
            Property::always(WATCH_REARMED.name, |_, s: &State<Self>| {
                s.clients.iter().all(|c| {
                    let m = &c.machine;
                    let follower = !c.crashed
                        && c.session
                        && !c.told_ended
                        && c.connected
                        && m.following
                        && !m.over;
                    !follower || m.armed || m.pending.is_some()
                })
            }),
            Property::always(NO_RECIPE_FAILURE.name, |_, s: &State<Self>| {
                !s.shared.failed
            }),
            Property::eventually(CONVERGENCE.name, |_, s: &State<Self>| converged(s)),
            Property::sometimes("value-read", |_, s: &State<Self>| s.shared.read),
            Property::sometimes("update-set", |_, s: &State<Self>| s.shared.set),
            Property::sometimes("update-conflict", |w: &World<Self>, s: &State<Self>| {
                s.shared.conflict || w.clients < 2
            }),
            Property::sometimes("change-followed", |w: &World<Self>, s: &State<Self>| {
                s.shared.followed || w.clients < 2
            }),
        ];
        if faults.lost_reply > 0 || faults.lost_request > 0 {
            p.push(Property::sometimes(
                "lost-update-reply-resolved",
                |_, s: &State<Self>| {
                    s.clients
                        .iter()
                        .any(|c| c.machine.set_lost && c.app.update == Update::Done)
                },
            ));
        }
        if faults.forced_expiry > 0 {
            p.push(Property::sometimes("session-lost", |_, s: &State<Self>| {
                s.shared.lost
            }));
        }
        p
    }
}

/// [`CONVERGENCE`]'s predicate: no update can happen any more, and every
/// live follower's last read is the node's version.
fn converged<M>(s: &State<ConfigModel<M>>) -> bool
where
    M: Machine<Command = ConfigCommand, Outcome = ConfigOutcome> + Send + Sync + 'static,
{
    let Some(node) = s.tree.node(NODE) else {
        return false;
    };
    s.clients.iter().all(|c| {
        let alive = !c.crashed && c.session && !c.app.over;
        if !alive {
            return true;
        }
        c.app.update == Update::Done && c.app.view.is_some_and(|(v, _)| v == node.version)
    })
}
