//! The simulated ensemble (3 servers, no faults) against the real server:
//! the generated sequences, each session on its own server, must give the
//! same answers. Sessions sync before each op and before each flush, since
//! an ensemble may legitimately serve a session stale reads.

use std::sync::Mutex;
use std::time::Instant;

use madsim::runtime::Runtime;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use zoosim::ensemble::sim::{Ensemble, EnsembleConfig};
use zoosim::real_server::{fresh_root, shared_server, RealServer};

use crate::{gen, harness, real_sessions, run_and_snapshot, runtime, SESSION_TIMEOUT_MS};

/// The simulated side of one case.
fn sim_run(seed: u64, root: &str, sessions: usize, steps: &[gen::Step]) -> harness::Trace {
    let rt = Runtime::with_seed_and_config(seed, madsim::Config::default());
    rt.block_on(async {
        let ensemble = Ensemble::start(EnsembleConfig::default());
        let servers = ensemble.config().servers;
        let mut zks = Vec::new();
        for i in 0..sessions {
            let server = i as u32 % servers;
            zks.push(
                ensemble
                    .client(server)
                    .timeout_ms(SESSION_TIMEOUT_MS)
                    .connect()
                    .await
                    .expect("connect"),
            );
        }
        let reader = async {
            ensemble
                .client(0)
                .timeout_ms(SESSION_TIMEOUT_MS)
                .connect()
                .await
                .map_err(|e| e.to_string())
        };
        let trace = run_and_snapshot(&zks, reader, root, steps, true)
            .await
            .expect("the simulated ensemble answers");
        for s in 0..servers {
            ensemble
                .with_server(s, |s| s.tree().check_invariants())
                .expect("tree invariants");
        }
        trace
    })
}

#[test]
fn generated_sequences_on_the_simulated_ensemble_match_the_real_server() {
    if shared_server("generated_sequences_on_the_simulated_ensemble").is_none() {
        return;
    }
    let started = Instant::now();
    let server = RealServer::start().expect("a dedicated real server");
    let connect = server.connect_string();
    let cases: u32 = std::env::var("ZOOSIM_SIM_CONFORMANCE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 1000,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[11; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let case = Mutex::new(0u64);
    let result = runner.run(&gen::sequence(), |(sessions, steps)| {
        let n = {
            let mut c = case.lock().unwrap();
            *c += 1;
            *c
        };
        let root = fresh_root(&format!("sim{n}"));
        let real = runtime()
            .block_on(async {
                let zks = real_sessions(&connect, sessions).await?;
                let reader = async { Ok(real_sessions(&connect, 1).await?.remove(0)) };
                run_and_snapshot(&zks, reader, &root, &steps, true).await
            })
            .map_err(TestCaseError::fail)?;
        let sim = sim_run(n, &root, sessions, &steps);
        harness::compare(&real, &sim, &root, &steps, true)
            .map_err(|e| TestCaseError::fail(format!("simulation seed {n}: {e}")))?;
        Ok(())
    });
    eprintln!(
        "sim conformance: {cases} generated sequences ({} runs with shrinking) in {:.1} s",
        case.lock().unwrap(),
        started.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("the simulated ensemble and the real server differ:\n{e}");
    }
}
