//! The exclusive-role family: the lock (with the GUID trick for lost
//! create replies), the shared read/write lock, the revocable shared lock
//! and leader election. One workload drives them all (clients acquire,
//! touch a fenced resource, hold, touch, release, think, again) and one
//! oracle judges them ([`crate::check::lock`]): leadership is judged as a
//! lock, one holder at a time with fenced effects.

#[cfg(madsim)]
mod workload;

use crate::check::lock::PROPERTIES;
use crate::recipes::election::ElectionVariant;
use crate::recipes::lock::LockVariant;
use crate::scenario::recipe::Recipe;
use crate::scenario::verdict::Property;
use crate::scenario::workload::WorkloadKey;

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

/// One recipe of the family.
#[derive(Clone, Copy, Debug)]
pub struct Exclusive(pub Kind);

/// The `lock` recipe.
pub const LOCK: Exclusive = Exclusive(Kind::Lock);
/// The `shared-lock` recipe.
pub const SHARED_LOCK: Exclusive = Exclusive(Kind::SharedLock);
/// The `revocable-lock` recipe.
pub const REVOCABLE_LOCK: Exclusive = Exclusive(Kind::RevocableLock);
/// The `election` recipe.
pub const ELECTION: Exclusive = Exclusive(Kind::Election);

const KEYS: &[WorkloadKey] = &[
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

const COUNTERS: &[&str] = &[
    "acquisitions",
    "accesses-accepted",
    "accesses-rejected",
    "stale-beliefs",
    "suspensions",
    "resumptions",
    "sessions-lost",
    "guid-found",
    "guid-not-found",
    "deletions-waking",
    "revokes-called",
    "revokes-asked",
    "revokes-honoured",
];

impl Recipe for Exclusive {
    fn name(&self) -> &str {
        match self.0 {
            Kind::Lock => "lock",
            Kind::SharedLock => "shared-lock",
            Kind::RevocableLock => "revocable-lock",
            Kind::Election => "election",
        }
    }

    fn description(&self) -> &str {
        match self.0 {
            Kind::Lock => "exclusive lock: sequential ephemeral nodes, watch the predecessor",
            Kind::SharedLock => "shared read/write lock: writers alone, readers together",
            Kind::RevocableLock => "shared lock whose holders let go when a revoker asks",
            Kind::Election => "leader election: the lowest sequential node leads",
        }
    }

    fn variants(&self) -> &[&str] {
        const LOCK: &[&str] = &[
            LockVariant::BlindRetry.name(),
            LockVariant::Herd.name(),
            LockVariant::SortByFullName.name(),
            LockVariant::StallOnVanishedPredecessor.name(),
        ];
        const SHARED: &[&str] = &[LockVariant::ReaderWaitsOnAny.name()];
        const ELECTION: &[&str] = &[ElectionVariant::KeepLeadershipAfterExpiry.name()];
        match self.0 {
            Kind::Lock => LOCK,
            Kind::SharedLock => SHARED,
            Kind::RevocableLock => &[],
            Kind::Election => ELECTION,
        }
    }

    fn workload_keys(&self) -> &[WorkloadKey] {
        KEYS
    }

    fn client_slots(&self, workload: &crate::scenario::workload::Workload) -> usize {
        // The revoker is one more client, the last.
        let clients = workload.clients().unwrap_or(0);
        clients + usize::from(self.0 == Kind::RevocableLock)
    }

    fn properties(&self) -> &[Property] {
        PROPERTIES
    }

    fn counters(&self) -> &[&str] {
        COUNTERS
    }

    #[cfg(madsim)]
    fn start(
        &self,
        ctx: &mut crate::scenario::sim::RunCtx,
    ) -> Box<dyn crate::scenario::sim::Running> {
        sim::start(self.0, ctx)
    }
}

#[cfg(madsim)]
mod sim {
    use std::sync::Arc;

    use super::workload::{self, ExclusiveRecord, ExclusiveWorkload, Make};
    use super::Kind;
    use crate::check::lock::{check_lock, LockEvent};
    use crate::recipes::election::{Election, ElectionVariant};
    use crate::recipes::lock::{Lock, LockMode, LockVariant};
    use crate::scenario::sim::{Ending, JudgeCtx, RunCtx, Running};
    use crate::scenario::verdict::Verdict;

    /// Clients 0 and 3 write, the others read.
    fn mode_of(c: usize) -> LockMode {
        if c % 3 == 0 {
            LockMode::Write
        } else {
            LockMode::Read
        }
    }

    pub(super) fn start(kind: Kind, ctx: &mut RunCtx) -> Box<dyn Running> {
        let variant = ctx.variant();
        let lock_variant = variant.and_then(LockVariant::from_name).unwrap_or_default();
        let revoke_dir = "/data/revocable";
        let w = ExclusiveWorkload {
            clients: ctx.clients(),
            hold_ms: ctx.value_u64("hold_ms"),
            touches: ctx.value_u64("touches") as u32,
            think_ms_max: ctx.value_u64("think_ms_max"),
            session_timeout_ms: ctx.session_timeout_ms(),
            revoke_dir: (kind == Kind::RevocableLock).then(|| revoke_dir.to_owned()),
            operations: ctx.value_u64("operations") as u32,
        };
        let record = match kind {
            Kind::Lock => {
                let make: Make<Lock> =
                    Arc::new(move |_, guid| Lock::with_variant("/locks/l", guid, lock_variant));
                workload::spawn(ctx, &w, make)
            }
            Kind::SharedLock => {
                let make: Make<Lock> = Arc::new(move |c, guid| {
                    Lock::shared("/data/rw", guid, mode_of(c), lock_variant)
                });
                workload::spawn(ctx, &w, make)
            }
            Kind::RevocableLock => {
                let make: Make<Lock> = Arc::new(move |c, guid| {
                    Lock::shared(revoke_dir, guid, mode_of(c), LockVariant::Correct).revocable()
                });
                workload::spawn(ctx, &w, make)
            }
            Kind::Election => {
                let v = variant
                    .and_then(ElectionVariant::from_name)
                    .unwrap_or_default();
                let make: Make<Election> =
                    Arc::new(move |_, guid| Election::with_variant("/app/election", guid, v));
                workload::spawn(ctx, &w, make)
            }
        };
        Box::new(Run {
            record,
            clients: w.clients,
        })
    }

    struct Run {
        record: ExclusiveRecord,
        clients: usize,
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
            let r = check_lock(&log, Some(ctx.liveness()));
            let counters = [
                ("acquisitions", r.acquisitions),
                ("accesses-accepted", r.accesses_accepted),
                ("accesses-rejected", r.accesses_rejected),
                ("stale-beliefs", r.stale_beliefs),
                ("suspensions", r.suspensions),
                ("resumptions", r.resumptions),
                ("sessions-lost", r.losses),
                ("guid-found", r.recovered_found),
                ("guid-not-found", r.recovered_not_found),
                ("deletions-waking", r.deletions_waking_someone),
                ("revokes-called", r.revokes_called),
                ("revokes-asked", r.revokes_asked),
                ("revokes-honoured", r.revokes_honoured),
            ];
            Verdict::judged(&log, &r, r.violations.clone(), &counters)
        }
    }
}
