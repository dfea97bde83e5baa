//! Name service / configuration on the simulated ensemble, under the
//! generic randomized fault mix: four clients follow one node with watches
//! and raise the counter it holds by compare-and-set; judged by the config
//! oracle (src/check/config.rs): no lost update (count == version in every
//! read), monotonic reads within a session, and every live follower
//! converged to the final version after the quiet phase.
//!
//! `ZOOSIM_SEED=S` replays one seed; `ZOOSIM_SEEDS=N` widens the sweep.

#[cfg(not(madsim))]
compile_error!(
    "tests/recipe_config.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod common;

use madsim::runtime::Runtime;
use madsim::time::{sleep, Instant};
use zoosim::check::config::{check_config, ConfigEvent, ConfigReport};
use zoosim::client::ZkExt;
use zoosim::ensemble::sim::nemesis::{self, ClientSlots, Fault, NemesisConfig};
use zoosim::proto::CreateMode;
use zoosim::scenario::workload::config::{self, ConfigWorkload};

const START_SEED: u64 = 0xc0f1_0000;
const SEEDS: u64 = 60;
const T_MS: u64 = 4000;
const FAULT_PHASE: Duration = Duration::from_secs(20);
const QUIET: Duration = Duration::from_secs(30);

fn run_seed(seed: u64) -> (ConfigReport, BTreeMap<Fault, u64>) {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    runtime.block_on(async {
        let ensemble = common::recipe::ensemble(seed);
        let workload = ConfigWorkload {
            session_timeout_ms: T_MS,
            ..ConfigWorkload::default()
        };
        {
            let setup = ensemble.connect(0, T_MS).await.expect("connect");
            setup
                .create(&workload.path, b"0", CreateMode::Persistent)
                .await
                .expect("the node");
        }
        let faults = nemesis::swarm();
        let slots: ClientSlots = Arc::default();
        let fault_end = Instant::now() + FAULT_PHASE;
        let until = fault_end + Duration::from_secs(3600);
        let (log, _tasks) =
            config::spawn(ensemble.clone(), slots.clone(), &workload, fault_end, until);
        let nemesis_config = NemesisConfig::new(faults, T_MS);
        let injected =
            nemesis::run(ensemble.clone(), slots.clone(), &nemesis_config, fault_end).await;
        sleep(QUIET).await;
        let log = log.lock().unwrap().clone();
        let log = common::recipe::with_crashes(log, &injected, || ConfigEvent::Crashed);
        let leader = ensemble.leader().expect("a leader after the quiet phase");
        let final_version = ensemble.with_server(leader, |s| {
            s.tree().node(&workload.path).expect("the node").version
        });
        let live = common::recipe::live_clients(&ensemble, leader, &slots, workload.clients);
        let report = check_config(&log, final_version, &live);
        common::recipe::show(&injected, &report, &log);
        let counts = common::recipe::fault_counts(&injected);
        (report, counts)
    })
}

#[test]
fn the_configuration_holds_under_all_faults() {
    let mut total = ConfigReport::default();
    let wide = common::recipe::sweep(
        "recipe_config",
        "the_configuration_holds",
        START_SEED,
        SEEDS,
        run_seed,
        |r| {
            total.reads += r.reads;
            total.sets += r.sets;
            total.conflicts += r.conflicts;
            total.losses += r.losses;
        },
    );
    eprintln!("  {total}");
    if wide {
        common::recipe::assert_counted(&[
            ("reads", total.reads),
            ("sets", total.sets),
            ("conflicts", total.conflicts),
            ("sessions lost", total.losses),
        ]);
    }
}
