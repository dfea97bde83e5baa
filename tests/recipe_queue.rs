//! The queue and priority queue recipes on the simulated ensemble, under
//! the generic randomized fault mix (every fault kind, swarm-mixed per
//! seed), judged by the queue oracle (src/check/queue.rs): no item taken
//! twice, none lost, none invented, FIFO per consumer (plain queue), and
//! the queue drained in the quiet phase. Two producers and three consumers,
//! Java and Rust flavours alternating, 3 or 5 servers.
//!
//! `ZOOSIM_SEED=S` replays one seed; `ZOOSIM_SEEDS=N` widens the sweep;
//! `ZOOSIM_VERBOSE=1` prints the fault schedule and the report.

#[cfg(not(madsim))]
compile_error!(
    "tests/recipe_queue.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod common;

use madsim::runtime::Runtime;
use madsim::time::{sleep, Instant};
use zoosim::check::queue::{check_queue, QueueEvent, QueueReport};
use zoosim::ensemble::sim::nemesis::{self, ClientSlots, Fault, NemesisConfig};
use zoosim::scenario::workload::queue::{self, QueueWorkload};

const START_SEED: u64 = 0x9e9e_0000;
const SEEDS: u64 = 60;
const T_MS: u64 = 4000;
const FAULT_PHASE: Duration = Duration::from_secs(20);
const QUIET: Duration = Duration::from_secs(30);

fn run_seed(seed: u64, priority: bool) -> (QueueReport, BTreeMap<Fault, u64>) {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    runtime.block_on(async {
        let ensemble = common::recipe::ensemble(seed);
        let faults = nemesis::swarm();
        let slots: ClientSlots = Arc::default();
        let workload = QueueWorkload {
            priority,
            session_timeout_ms: T_MS,
            ..QueueWorkload::default()
        };
        let fault_end = Instant::now() + FAULT_PHASE;
        let until = fault_end + Duration::from_secs(3600);
        let (log, _tasks) =
            queue::spawn(ensemble.clone(), slots.clone(), &workload, fault_end, until);
        let config = NemesisConfig::new(faults, T_MS);
        let injected = nemesis::run(ensemble.clone(), slots.clone(), &config, fault_end).await;
        sleep(QUIET).await;
        let log = log.lock().unwrap().clone();
        let log = common::recipe::with_crashes(log, &injected, || QueueEvent::Crashed);
        let leader = ensemble.leader().expect("a leader after the quiet phase");
        let remaining: Vec<String> = ensemble.with_server(leader, |s| {
            let tree = s.tree();
            tree.node(&workload.dir)
                .map(|dir| {
                    dir.children
                        .iter()
                        .map(|c| {
                            let node = tree.node(&format!("{}/{c}", workload.dir)).unwrap();
                            String::from_utf8_lossy(&node.data).into_owned()
                        })
                        .collect()
                })
                .unwrap_or_default()
        });
        let report = check_queue(&log, &remaining, !priority, true);
        common::recipe::show(&injected, &report, &log);
        let counts = common::recipe::fault_counts(&injected);
        (report, counts)
    })
}

fn sweep(test: &str, priority: bool) {
    let mut total = QueueReport::default();
    let wide = common::recipe::sweep(
        "recipe_queue",
        test,
        START_SEED,
        SEEDS,
        |seed| run_seed(seed, priority),
        |r| {
            total.enqueued += r.enqueued;
            total.taken += r.taken;
            total.maybe_taken += r.maybe_taken;
            total.unresolved_claims += r.unresolved_claims;
            total.missed += r.missed;
            total.duplicates_possible += r.duplicates_possible;
            total.recovered_found += r.recovered_found;
            total.recovered_not_found += r.recovered_not_found;
        },
    );
    eprintln!("  {total}");
    if wide {
        common::recipe::assert_counted(&[
            ("items taken", total.taken),
            ("items missed (another consumer first)", total.missed),
            (
                "producer searches that found the item",
                total.recovered_found,
            ),
            ("producer searches that did not", total.recovered_not_found),
        ]);
    }
}

#[test]
fn the_queue_holds_under_all_faults() {
    sweep("the_queue_holds", false);
}

#[test]
fn the_priority_queue_holds_under_all_faults() {
    sweep("the_priority_queue_holds", true);
}
