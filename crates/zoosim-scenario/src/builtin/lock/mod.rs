//! The exclusive-role family: the lock (with the GUID trick for lost
//! create replies), the shared read/write lock, the revocable shared lock
//! and leader election. One workload drives them all (clients acquire,
//! touch a fenced resource, hold, touch, release, think, again) and one
//! oracle judges them ([`zoosim_core::check::lock`]): leadership is judged as a
//! lock, one holder at a time with fenced effects.

#[cfg(madsim)]
mod workload;

#[cfg(all(test, madsim))]
pub(crate) mod broken;

use crate::recipe::Recipe;
use crate::verdict::{counter_names, Counter, Property};
use crate::workload::WorkloadKey;
use zoosim_core::check::lock::PROPERTIES;
use zoosim_recipes::election::ElectionVariant;
use zoosim_recipes::lock::LockVariant;

/// Which role the clients contend for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// The exclusive lock (`lock`).
    Lock,
    /// The shared read/write lock (`shared-lock`).
    SharedLock,
    /// The revocable shared lock (`revocable-lock`).
    RevocableLock,
    /// Leader election (`election`).
    Election,
}

/// One recipe of the family: what it declares is data here (one value
/// per recipe below), so only the machine each client runs differs by
/// code (`sim::start`).
#[derive(Clone, Copy, Debug)]
pub struct Exclusive {
    kind: Kind,
    name: &'static str,
    description: &'static str,
    variants: &'static [&'static str],
    keys: &'static [WorkloadKey],
    /// Where its nodes are.
    dir: &'static str,
}

impl Exclusive {
    /// The revocable lock runs a revoker beside its holders: one more
    /// client, the last.
    fn revoker(&self) -> bool {
        self.kind == Kind::RevocableLock
    }
}

/// The `lock` recipe.
pub const LOCK: Exclusive = Exclusive {
    kind: Kind::Lock,
    name: "lock",
    description: "exclusive lock: sequential ephemeral nodes, watch the predecessor",
    variants: &[
        LockVariant::BlindRetry.name(),
        LockVariant::Herd.name(),
        LockVariant::SortByFullName.name(),
        LockVariant::StallOnVanishedPredecessor.name(),
        LockVariant::SearchWithoutSync.name(),
    ],
    keys: KEYS,
    dir: "/locks/l",
};
/// The `shared-lock` recipe.
pub const SHARED_LOCK: Exclusive = Exclusive {
    kind: Kind::SharedLock,
    name: "shared-lock",
    description: "shared read/write lock: writers alone, readers together",
    variants: &[LockVariant::ReaderWaitsOnAny.name()],
    keys: KEYS,
    dir: "/data/rw",
};
/// Where the revocable lock's nodes are.
const REVOKE_DIR: &str = "/data/revocable";
/// The `revocable-lock` recipe.
pub const REVOCABLE_LOCK: Exclusive = Exclusive {
    kind: Kind::RevocableLock,
    name: "revocable-lock",
    description: "shared lock whose holders let go when a revoker asks",
    variants: &[],
    keys: REVOCABLE_KEYS,
    dir: REVOKE_DIR,
};
/// The `election` recipe.
pub const ELECTION: Exclusive = Exclusive {
    kind: Kind::Election,
    name: "election",
    description: "leader election: the lowest sequential node leads",
    variants: &[
        ElectionVariant::KeepLeadershipAfterExpiry.name(),
        ElectionVariant::ActWithoutConfirming.name(),
    ],
    keys: KEYS,
    dir: "/app/election",
};

/// Every recipe's keys of the family.
const BASE_KEYS: [WorkloadKey; 5] = [
    WorkloadKey::int("clients", "contending clients", 1, 64, 5),
    WorkloadKey::drawn(
        "hold_ms",
        "how long a holder holds (one is drawn per seed)",
        0,
        600_000,
        &[10, 100, 1000],
    ),
    WorkloadKey::int(
        "touches",
        "touches of the fenced resource per holding (at least 2 are made)",
        1,
        100,
        2,
    ),
    WorkloadKey::int(
        "think_ms_max",
        "a client's longest pause between holdings",
        0,
        600_000,
        50,
    ),
    WorkloadKey::int(
        "operations",
        "acquisitions per client, then it stops (0: until the run ends)",
        0,
        1_000_000,
        0,
    ),
];

const KEYS: &[WorkloadKey] = &BASE_KEYS;

/// The revocable lock's: the family's, and how many clients keep what
/// they hold until asked (so that an ignored revocation shows).
const REVOCABLE_KEYS: &[WorkloadKey] = &[
    BASE_KEYS[0],
    BASE_KEYS[1],
    BASE_KEYS[2],
    BASE_KEYS[3],
    BASE_KEYS[4],
    WorkloadKey::int(
        "keepers",
        "clients (the first ones) that hold until a revoker asks them to let go, touching \
         the resource all along",
        0,
        64,
        3,
    ),
];

/// The counters, each named once with how it is read off the oracle's
/// report: [`Recipe::counters`] and the judge read this one table.
const COUNTED: [Counter<zoosim_core::check::lock::LockReport>; 14] = [
    Counter::new("acquisitions", |r| r.acquisitions),
    Counter::new("accesses-accepted", |r| r.accesses_accepted),
    Counter::new("accesses-rejected", |r| r.accesses_rejected),
    Counter::new("stale-beliefs", |r| r.stale_beliefs),
    Counter::new("suspensions", |r| r.suspensions),
    Counter::new("resumptions", |r| r.resumptions),
    Counter::new("sessions-lost", |r| r.losses),
    Counter::new("guid-found", |r| r.recovered_found),
    Counter::new("guid-not-found", |r| r.recovered_not_found),
    Counter::new("deletions-waking", |r| r.deletions_waking_someone),
    Counter::new("revokes-called", |r| r.revokes_called),
    Counter::new("revokes-asked", |r| r.revokes_asked),
    Counter::new("revokes-honoured", |r| r.revokes_honoured),
    Counter::new("revokes-while-disconnected", |r| {
        r.revokes_while_disconnected
    }),
];
const COUNTERS: &[&str] = &counter_names(&COUNTED);

impl Recipe for Exclusive {
    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        self.description
    }

    fn variants(&self) -> &[&str] {
        self.variants
    }

    fn workload_keys(&self) -> &[WorkloadKey] {
        self.keys
    }

    fn client_slots(&self, workload: &crate::workload::Workload) -> usize {
        let clients = workload.clients().unwrap_or(0);
        clients + usize::from(self.revoker())
    }

    fn properties(&self) -> &[Property] {
        PROPERTIES
    }

    fn counters(&self) -> &[&str] {
        COUNTERS
    }

    #[cfg(madsim)]
    fn start(&self, ctx: &mut crate::sim::RunCtx) -> Box<dyn crate::sim::Running> {
        sim::start(self, ctx)
    }
}

#[cfg(madsim)]
mod sim {
    use std::sync::Arc;

    use super::workload::{self, ExclusiveRecord, ExclusiveWorkload, Make};
    use super::{Exclusive, Kind};
    use crate::sim::{Ending, JudgeCtx, RunCtx, Running};
    use crate::verdict::Verdict;
    use zoosim_core::check::lock::{check_lock, LockEvent, LIVENESS};
    use zoosim_core::tree::Owner;
    use zoosim_recipes::election::{Election, ElectionVariant};
    use zoosim_recipes::lock::{Lock, LockMode, LockVariant};

    /// Clients 0 and 3 write, the others read.
    pub(super) fn mode_of(c: usize) -> LockMode {
        if c % 3 == 0 {
            LockMode::Write
        } else {
            LockMode::Read
        }
    }

    /// The scenario's workload for `recipe`.
    pub(super) fn workload_of(recipe: &Exclusive, ctx: &RunCtx) -> ExclusiveWorkload {
        ExclusiveWorkload {
            clients: ctx.clients(),
            hold_ms: ctx.value_u64("hold_ms"),
            touches: ctx.value_u64("touches") as u32,
            think_ms_max: ctx.value_u64("think_ms_max"),
            session_timeout_ms: ctx.session_timeout_ms(),
            revoke_dir: recipe.revoker().then(|| recipe.dir.to_owned()),
            operations: ctx.value_u64("operations") as u32,
            keepers: if recipe.revoker() {
                ctx.value_u64("keepers") as usize
            } else {
                0
            },
        }
    }

    pub(super) fn start(recipe: &Exclusive, ctx: &mut RunCtx) -> Box<dyn Running> {
        let variant = ctx.variant();
        let lock_variant = variant.and_then(LockVariant::from_name).unwrap_or_default();
        let dir = recipe.dir;
        let w = workload_of(recipe, ctx);
        let record = match recipe.kind {
            Kind::Lock => {
                let make: Make<Lock> =
                    Arc::new(move |_, guid| Lock::with_variant(dir, guid, lock_variant));
                workload::spawn(ctx, &w, make)
            }
            Kind::SharedLock => {
                let make: Make<Lock> =
                    Arc::new(move |c, guid| Lock::shared(dir, guid, mode_of(c), lock_variant));
                workload::spawn(ctx, &w, make)
            }
            Kind::RevocableLock => {
                let make: Make<Lock> = Arc::new(move |c, guid| {
                    Lock::shared(dir, guid, mode_of(c), LockVariant::Correct).revocable()
                });
                workload::spawn(ctx, &w, make)
            }
            Kind::Election => {
                let v = variant
                    .and_then(ElectionVariant::from_name)
                    .unwrap_or_default();
                let make: Make<Election> =
                    Arc::new(move |_, guid| Election::with_variant(dir, guid, v));
                workload::spawn(ctx, &w, make)
            }
        };
        running(record, w.clients, dir)
    }

    /// The run of `clients` clients recording into `record`, their nodes
    /// in `dir`, judged by [`check_lock`].
    pub(super) fn running(
        record: ExclusiveRecord,
        clients: usize,
        dir: &'static str,
    ) -> Box<dyn Running> {
        Box::new(Run {
            record,
            clients,
            dir,
        })
    }

    /// Why clients may be stuck, from the end of the run: the directory's
    /// children with their owners (which client's session, live or ended;
    /// a node of a live session that its client does not take for its own
    /// is an orphan), and what each client's machine was doing.
    fn stuck_state(record: &ExclusiveRecord, dir: &str, ctx: &JudgeCtx) -> String {
        let Some(leader) = ctx.leader() else {
            return "no leader to read the final state from".to_owned();
        };
        let sessions = record.sessions.lock().unwrap().clone();
        let doing = record.doing.lock().unwrap().clone();
        let children = ctx.ensemble().with_server(leader, |s| {
            let tree = s.tree();
            let names: Vec<String> = tree
                .node(dir)
                .map(|n| n.children.iter().cloned().collect())
                .unwrap_or_default();
            names
                .into_iter()
                .map(|name| {
                    let owner = tree.node(&format!("{dir}/{name}")).map(|n| n.owner);
                    let whose = match owner {
                        Some(Owner::Ephemeral(sid)) => {
                            let client = sessions.get(&sid.0);
                            let live = tree.has_session(sid);
                            let who = client.map_or(format!("session {:#x}", sid.0), |c| {
                                format!("client {c}'s session {:#x}", sid.0)
                            });
                            let path = format!("{dir}/{name}");
                            let mine = client
                                .and_then(|c| doing.get(c))
                                .is_some_and(|(_, node)| node.as_deref() == Some(path.as_str()));
                            match (live, mine) {
                                (false, _) => format!("{who}, ended"),
                                (true, true) => format!("{who}, live"),
                                (true, false) => format!(
                                    "{who}, live, an orphan: its client's machine does not know it"
                                ),
                            }
                        }
                        Some(_) => "not ephemeral".to_owned(),
                        None => "gone".to_owned(),
                    };
                    format!("{name} ({whose})")
                })
                .collect::<Vec<_>>()
        });
        let children = if children.is_empty() {
            "none".to_owned()
        } else {
            children.join(", ")
        };
        let doing = doing
            .iter()
            .map(|(c, (d, _))| format!("client {c} {d}"))
            .collect::<Vec<_>>()
            .join("; ");
        format!("at the end, {dir} holds {children}; {doing}")
    }

    struct Run {
        record: ExclusiveRecord,
        clients: usize,
        dir: &'static str,
    }

    impl Running for Run {
        fn ending(&self) -> Ending {
            Ending::Counted {
                done: self.record.finished.clone(),
                clients: self.clients,
            }
        }

        fn judge(self: Box<Self>, ctx: &JudgeCtx) -> Verdict {
            let log = self.record.log.entries();
            let log = ctx.with_crashes(log, || LockEvent::Crashed);
            let mut r = check_lock(&log, Some(ctx.liveness()));
            // A liveness failure says why: the clients' nodes left at the
            // end and what each machine was waiting for.
            if r.violations.iter().any(|v| v.property == LIVENESS.name) {
                let why = stuck_state(&self.record, self.dir, ctx);
                for v in &mut r.violations {
                    if v.property == LIVENESS.name {
                        v.detail = format!("{}; {why}", v.detail);
                    }
                }
            }
            Verdict::counted(&log, &r, r.violations.clone(), &super::COUNTED)
        }
    }
}
