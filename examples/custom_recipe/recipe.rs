//! The compare-and-set counter ([`crate::counter`]) as a zoosim recipe:
//! clients that increment it in a loop across sessions, and the oracle
//! that judges the counter's final value against the increments the
//! clients were told about.
//!
//! Its properties, as named values ([`PROPERTIES`]): no lost increment,
//! no invented increment, unique values, progress, a well-formed counter,
//! and no recipe failure (zoosim's, which every recipe shares).
//!
//! Only zoosim's prelude is used, as from a crate of one's own.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use zoosim::prelude::madsim::rand::{thread_rng, Rng};
use zoosim::prelude::madsim::time::{sleep, timeout};
use zoosim::prelude::*;

use crate::counter::{CasCounter, CounterCommand, CounterOutcome};

/// The counter's znode.
pub const PATH: &str = "/counter";

/// The buggy variant: setData without a version.
pub const BLIND: &str = "cas-counter/blind-set";

/// What a client saw or did, in its outcome log.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Event {
    SessionStarted,
    /// An increment begins.
    Called,
    /// It is in: it wrote `value`.
    Acked {
        value: i64,
    },
    /// Its write's reply was lost.
    Maybe {
        value: i64,
    },
    /// Another increment came first; it retries.
    Conflict,
    SessionLost,
    /// The nemesis crashed the client (merged in by the judge).
    Crashed,
    Failed(String),
}

/// The final value is at least the number of acknowledged increments.
pub const NO_LOST_INCREMENT: Property = Property::new(
    "no-lost-increment",
    "the final value is at least the acknowledged increments",
);
/// It is at most the acknowledged ones plus the unknown ones (a lost
/// reply, a client crashed or a session lost mid-increment).
pub const NO_INVENTED_INCREMENT: Property = Property::new(
    "no-invented-increment",
    "the final value is at most the acknowledged plus the unknown increments",
);
/// No two acknowledged increments wrote the same value (one would have
/// overwritten the other).
pub const UNIQUE_VALUES: Property = Property::new(
    "unique-values",
    "no two acknowledged increments wrote the same value",
);
/// With a client alive at the end, some increment is acknowledged in the
/// quiet phase.
pub const PROGRESS: Property = Property::new(
    "progress",
    "with a live client, an increment is acknowledged in the quiet phase",
);
/// The counter's node holds a number.
pub const WELL_FORMED: Property =
    Property::new("well-formed", "the counter's node holds a decimal number");

pub const PROPERTIES: &[Property] = &[
    NO_LOST_INCREMENT,
    NO_INVENTED_INCREMENT,
    UNIQUE_VALUES,
    PROGRESS,
    NO_RECIPE_FAILURE,
    WELL_FORMED,
];

pub struct CasCounterRecipe;

impl Recipe for CasCounterRecipe {
    fn name(&self) -> &str {
        "cas-counter"
    }

    fn description(&self) -> &str {
        "a shared counter in one znode, incremented by setData at the version read"
    }

    fn variants(&self) -> &[&str] {
        &[BLIND]
    }

    fn workload_keys(&self) -> &[WorkloadKey] {
        const KEYS: &[WorkloadKey] = &[
            WorkloadKey::int("clients", "clients incrementing", 1, 64, 4),
            WorkloadKey::drawn(
                "think_ms_max",
                "a client's longest pause between two increments",
                0,
                60_000,
                &[0, 20, 100],
            ),
        ];
        KEYS
    }

    fn properties(&self) -> &[Property] {
        PROPERTIES
    }

    fn counters(&self) -> &[&str] {
        &[
            "increments-acked",
            "increments-maybe",
            "conflicts",
            "sessions-lost",
        ]
    }

    fn start(&self, ctx: &mut RunCtx) -> Box<dyn Running> {
        let log = OutcomeLog::new();
        let blind = ctx.variant() == Some(BLIND);
        let think_ms_max = ctx.value("think_ms_max") as u64;
        for c in 0..ctx.clients() {
            let log = log.clone();
            ctx.spawn_client(c, move |zk| {
                client_session(c, zk, blind, think_ms_max, log.clone())
            });
        }
        Box::new(Run { log })
    }
}

/// One session of client `c`: increments until the session is lost (true:
/// open another) or the client fails (false).
async fn client_session(
    c: usize,
    zk: Arc<SimZk>,
    blind: bool,
    think_ms_max: u64,
    log: OutcomeLog<Event>,
) -> bool {
    log.record(c, Event::SessionStarted);
    let counter = if blind {
        CasCounter::new(PATH).blind()
    } else {
        CasCounter::new(PATH)
    };
    let mut driver = Driver::new(&*zk, counter);
    loop {
        log.record(c, Event::Called);
        driver.command(CounterCommand::Increment);
        loop {
            match driver.next_outcome().await {
                CounterOutcome::Incremented { value } => {
                    log.record(c, Event::Acked { value });
                    break;
                }
                CounterOutcome::Maybe { value } => {
                    log.record(c, Event::Maybe { value });
                    break;
                }
                CounterOutcome::Conflict => log.record(c, Event::Conflict),
                CounterOutcome::Lost => {
                    log.record(c, Event::SessionLost);
                    let bound = Duration::from_millis(zk.session_timeout_ms());
                    let _ = timeout(bound, zk.close()).await;
                    return true;
                }
                CounterOutcome::Failed(e) => {
                    log.record(c, Event::Failed(format!("{e:?}")));
                    return false;
                }
            }
        }
        let think = thread_rng().gen_range(0..=think_ms_max);
        sleep(Duration::from_millis(think)).await;
    }
}

struct Run {
    log: OutcomeLog<Event>,
}

impl Running for Run {
    fn judge(self: Box<Self>, ctx: &JudgeCtx) -> Verdict {
        let log = ctx.with_crashes(self.log.entries(), || Event::Crashed);
        let mut verdict = Verdict::over_log(&log);
        let final_value = match ctx.final_node(PATH) {
            Err(no_leader) => Err(Violation::new(
                run_properties::ENSEMBLE_LIVENESS,
                no_leader.to_string(),
            )),
            Ok(None) => Ok(0),
            Ok(Some(node)) => String::from_utf8_lossy(&node.data).parse().map_err(|_| {
                Violation::new(
                    WELL_FORMED,
                    format!("the counter holds {:?}, not a number", node.data),
                )
            }),
        };
        let live = !ctx.live_clients().is_empty();
        let r = check(&log, final_value, ctx.liveness().from_ms, live);
        verdict.count("increments-acked", r.acked);
        verdict.count("increments-maybe", r.maybe);
        verdict.count("conflicts", r.conflicts);
        verdict.count("sessions-lost", r.losses);
        verdict.report = r.to_string();
        verdict.violations = r.violations;
        verdict
    }
}

/// What the oracle found.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Report {
    pub acked: u64,
    /// Lost replies, and increments cut short by a crash, a lost session
    /// or the end of the run.
    pub maybe: u64,
    pub conflicts: u64,
    pub losses: u64,
    pub final_value: Option<i64>,
    pub violations: Vec<Violation>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "increments acknowledged {}, unknown {}, conflicts {}, sessions lost {}; final value {}",
            self.acked,
            self.maybe,
            self.conflicts,
            self.losses,
            self.final_value
                .map_or("unknown".to_owned(), |v| v.to_string())
        )?;
        for v in &self.violations {
            writeln!(f, "VIOLATION: {v}")?;
        }
        Ok(())
    }
}

/// The oracle, pure: `log` in time order; `final_value` the counter at the
/// end (Err: why it could not be read); `quiet_from_ms` when the faults
/// stopped; `live` whether a client was alive at the end.
pub fn check(
    log: &[Entry<Event>],
    final_value: Result<i64, Violation>,
    quiet_from_ms: u64,
    live: bool,
) -> Report {
    let mut r = Report::default();
    // Per client: an increment begun and not yet answered.
    let mut open: BTreeMap<usize, bool> = BTreeMap::new();
    // Each acknowledged value: who wrote it, when.
    let mut written: BTreeMap<i64, (usize, u64)> = BTreeMap::new();
    let mut acked_in_quiet = false;
    // Values acknowledged twice (the first few are told in full).
    let mut overwritten = 0;
    for e in log {
        let c = e.client;
        let was_open = open.insert(c, false).unwrap_or(false);
        match &e.event {
            Event::Called => {
                open.insert(c, true);
            }
            Event::Conflict => {
                r.conflicts += 1;
                open.insert(c, was_open);
            }
            Event::Acked { value } => {
                r.acked += 1;
                acked_in_quiet |= e.at_ms >= quiet_from_ms;
                if let Some((other, at)) = written.insert(*value, (c, e.at_ms)) {
                    overwritten += 1;
                    if overwritten > 3 {
                        continue;
                    }
                    r.violations.push(Violation::new(
                        UNIQUE_VALUES,
                        format!(
                            "client {c} at {} ms and client {other} at {at} ms were both told \
                             they wrote {value}: one increment overwrote the other",
                            e.at_ms
                        ),
                    ));
                }
            }
            Event::Maybe { .. } => r.maybe += 1,
            Event::SessionLost | Event::Crashed => {
                r.losses += u64::from(e.event == Event::SessionLost);
                r.maybe += u64::from(was_open);
            }
            Event::Failed(why) => r.violations.push(Violation::new(
                NO_RECIPE_FAILURE,
                format!("client {c} failed at {} ms: {why}", e.at_ms),
            )),
            Event::SessionStarted => {}
        }
    }
    if overwritten > 3 {
        r.violations.push(Violation::new(
            UNIQUE_VALUES,
            format!("{} more values acknowledged twice", overwritten - 3),
        ));
    }
    // Increments the end of the run cut short.
    r.maybe += open.values().filter(|o| **o).count() as u64;
    match final_value {
        Err(why) => r.violations.push(why),
        Ok(f) => {
            r.final_value = Some(f);
            let (acked, maybe) = (r.acked as i64, r.maybe as i64);
            if f < acked {
                r.violations.push(Violation::new(
                    NO_LOST_INCREMENT,
                    format!(
                        "the counter ends at {f}, but {acked} increments were acknowledged \
                         ({maybe} unknown): {} lost",
                        acked - f
                    ),
                ));
            }
            if f > acked + maybe {
                r.violations.push(Violation::new(
                    NO_INVENTED_INCREMENT,
                    format!(
                        "the counter ends at {f}, but only {acked} increments were acknowledged \
                         and {maybe} unknown"
                    ),
                ));
            }
        }
    }
    if live && !acked_in_quiet {
        r.violations.push(Violation::new(
            PROGRESS,
            format!(
                "a client is alive, but no increment was acknowledged after the faults stopped \
                 at {quiet_from_ms} ms"
            ),
        ));
    }
    r
}

#[cfg(test)]
mod oracle_tests {
    use super::*;

    fn at(at_ms: u64, client: usize, event: Event) -> Entry<Event> {
        Entry {
            at_ms,
            client,
            event,
        }
    }

    fn run(value: i64) -> Vec<Entry<Event>> {
        vec![
            at(1, 0, Event::Called),
            at(2, 1, Event::Called),
            at(3, 0, Event::Acked { value: 1 }),
            at(4, 1, Event::Conflict),
            at(5, 1, Event::Acked { value }),
        ]
    }

    #[test]
    fn a_correct_run_passes() {
        let r = check(&run(2), Ok(2), 5, true);
        assert!(r.violations.is_empty(), "{r}");
        assert_eq!((r.acked, r.maybe, r.conflicts), (2, 0, 1));
    }

    #[test]
    fn an_overwritten_increment_is_lost_and_not_unique() {
        let r = check(&run(1), Ok(1), 0, true);
        assert_eq!(r.violations.len(), 2, "{r}");
        assert_eq!(r.violations[0].property, UNIQUE_VALUES.name, "{r}");
        assert_eq!(r.violations[1].property, NO_LOST_INCREMENT.name, "{r}");
    }

    #[test]
    fn unknown_increments_bound_the_value_from_above() {
        let mut log = run(2);
        log.push(at(6, 0, Event::Called));
        log.push(at(7, 0, Event::Maybe { value: 3 }));
        log.push(at(8, 1, Event::Called));
        log.push(at(9, 1, Event::Crashed));
        log.push(at(10, 2, Event::Called));
        assert!(check(&log, Ok(5), 0, true).violations.is_empty());
        let r = check(&log, Ok(6), 0, true);
        assert_eq!(r.maybe, 3);
        assert_eq!(r.violations[0].property, NO_INVENTED_INCREMENT.name, "{r}");
    }

    #[test]
    fn no_final_value_or_no_progress_fails() {
        let garbled = Violation::new(WELL_FORMED, "the counter holds \"x\"");
        let r = check(&run(2), Err(garbled.clone()), 0, false);
        assert_eq!(r.violations, vec![garbled], "{r}");
        let r = check(&run(2), Ok(2), 100, true);
        assert_eq!(r.violations[0].property, PROGRESS.name, "{r}");
        assert!(check(&run(2), Ok(2), 100, false).violations.is_empty());
    }

    #[test]
    fn a_failed_client_is_named() {
        let mut log = run(2);
        log.push(at(6, 0, Event::Failed("Unimplemented".into())));
        let r = check(&log, Ok(2), 0, true);
        assert_eq!(r.violations.len(), 1, "{r}");
        assert_eq!(r.violations[0].property, NO_RECIPE_FAILURE.name, "{r}");
    }
}
