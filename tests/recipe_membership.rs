//! Group membership on the simulated ensemble, under the generic
//! randomized fault mix: five clients join one group with ephemerals,
//! follow it with watches and churn (leave, join again); judged by the
//! membership oracle (src/check/membership.rs): no invented members, the
//! final group is exactly the live joined sessions, and every live follower
//! converged to it after the quiet phase.
//!
//! `ZOOSIM_SEED=S` replays one seed; `ZOOSIM_SEEDS=N` widens the sweep.

#[cfg(not(madsim))]
compile_error!(
    "tests/recipe_membership.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod common;

use madsim::runtime::Runtime;
use madsim::time::{sleep, Instant};
use zoosim::check::membership::{check_membership, MembershipEvent, MembershipReport};
use zoosim::ensemble::sim::nemesis::{self, ClientSlots, Fault, NemesisConfig};
use zoosim::scenario::workload::membership::{self, member_name, MembershipWorkload};

const START_SEED: u64 = 0x9a0b_0000;
const SEEDS: u64 = 60;
const T_MS: u64 = 4000;
const FAULT_PHASE: Duration = Duration::from_secs(20);
const QUIET: Duration = Duration::from_secs(30);

fn run_seed(seed: u64) -> (MembershipReport, BTreeMap<Fault, u64>) {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    runtime.block_on(async {
        let ensemble = common::recipe::ensemble(seed);
        let workload = MembershipWorkload {
            session_timeout_ms: T_MS,
            ..MembershipWorkload::default()
        };
        let faults = nemesis::swarm();
        let slots: ClientSlots = Arc::default();
        let fault_end = Instant::now() + FAULT_PHASE;
        let until = fault_end + Duration::from_secs(3600);
        let (log, _tasks) =
            membership::spawn(ensemble.clone(), slots.clone(), &workload, fault_end, until);
        let nemesis_config = NemesisConfig::new(faults, T_MS);
        let injected =
            nemesis::run(ensemble.clone(), slots.clone(), &nemesis_config, fault_end).await;
        sleep(QUIET).await;
        let log = log.lock().unwrap().clone();
        let log = common::recipe::with_crashes(log, &injected, || MembershipEvent::Crashed);
        let leader = ensemble.leader().expect("a leader after the quiet phase");
        let final_members: Vec<String> = ensemble.with_server(leader, |s| {
            s.tree()
                .node(&workload.group)
                .map(|g| {
                    g.children
                        .iter()
                        .filter_map(|c| c.split_once('-').map(|(m, _)| m.to_owned()))
                        .collect()
                })
                .unwrap_or_default()
        });
        let live = common::recipe::live_clients(&ensemble, leader, &slots, workload.clients);
        let report = check_membership(&log, member_name, &final_members, &live);
        common::recipe::show(&injected, &report, &log);
        let counts = common::recipe::fault_counts(&injected);
        (report, counts)
    })
}

#[test]
fn group_membership_holds_under_all_faults() {
    let mut total = MembershipReport::default();
    let wide = common::recipe::sweep(
        "recipe_membership",
        "group_membership_holds",
        START_SEED,
        SEEDS,
        run_seed,
        |r| {
            total.joins += r.joins;
            total.leaves += r.leaves;
            total.views += r.views;
            total.losses += r.losses;
        },
    );
    eprintln!("  {total}");
    if wide {
        common::recipe::assert_counted(&[
            ("joins", total.joins),
            ("leaves", total.leaves),
            ("views", total.views),
            ("sessions lost", total.losses),
        ]);
    }
}
