//! Differential conformance: generated multi-session sequences run on a
//! real ZooKeeper 3.8 and on `src/tree` + the watch table (through
//! `LocalServer`); every reply, error, created name, Stat field and watch
//! event must match (rules in harness.rs).
//!
//! `ZOOSIM_CONFORMANCE_CASES` changes the number of generated sequences
//! (default 500); the seed is fixed, and a failing case is shrunk.

mod coverage;
mod gen;
mod handwritten;
mod harness;
mod replay;

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use zoosim::client::local::LocalServer;
use zoosim::client::real::RealZk;
use zoosim::real_server::{fresh_root, shared_server};

use coverage::Coverage;

pub const SESSION_TIMEOUT_MS: u64 = 10_000;

pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

/// Connects `n` real sessions, one after another (so their createSession
/// txns are ordered like the model's).
pub async fn real_sessions(connect: &str, n: usize) -> Result<Vec<RealZk>, String> {
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let z = RealZk::connect(connect, SESSION_TIMEOUT_MS)
            .await
            .map_err(|e| format!("connecting real session {i}: {e}"))?;
        v.push(z);
    }
    Ok(v)
}

/// Runs one case on both sides and compares.
pub async fn differential(
    connect: &str,
    root: &str,
    sessions: usize,
    steps: &[gen::Step],
) -> Result<(harness::Trace, harness::Trace), String> {
    let real = real_sessions(connect, sessions).await?;
    let server = LocalServer::default();
    let model: Vec<_> = (0..sessions)
        .map(|_| server.connect(SESSION_TIMEOUT_MS))
        .collect();
    let real_trace = harness::run(&real, root, steps).await;
    let model_trace = harness::run(&model, root, steps).await;
    for z in &real {
        let _ = zoosim::client::Zk::close(z).await;
    }
    server
        .tree()
        .check_invariants()
        .map_err(|e| format!("model tree invariant: {e}"))?;
    harness::compare(&real_trace, &model_trace, root, steps)?;
    Ok((real_trace, model_trace))
}

#[test]
fn generated_sequences_match_the_real_server() {
    let Some(server) = shared_server("generated_sequences_match_the_real_server") else {
        return;
    };
    let started = Instant::now();
    let cases: u32 = std::env::var("ZOOSIM_CONFORMANCE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2000,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let connect = server.connect_string();
    let coverage = Mutex::new(Coverage::default());
    let case = Mutex::new(0u64);
    let result = runner.run(&gen::sequence(), |(sessions, steps)| {
        let n = {
            let mut c = case.lock().unwrap();
            *c += 1;
            *c
        };
        let root = fresh_root(&format!("gen{n}"));
        let (real, _) = runtime()
            .block_on(differential(&connect, &root, sessions, &steps))
            .map_err(TestCaseError::fail)?;
        coverage.lock().unwrap().add(&steps, &real);
        Ok(())
    });
    eprintln!(
        "conformance: {cases} generated sequences ({} runs with shrinking) in {:.1} s",
        case.lock().unwrap(),
        started.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("the real server and the model differ:\n{e}");
    }
    // At 500 cases most pairs are seen hundreds of times; 5 is a floor
    // that still fails if the generator stops reaching an outcome.
    let min = if cases >= 500 { 5 } else { 1 };
    coverage.lock().unwrap().check(min).unwrap();
}

#[test]
fn the_comparison_catches_differences() {
    // Guards against a comparison that passes everything: the model against
    // itself passes, and each kind of perturbation is caught.
    use gen::Step;
    use zoosim::proto::{CreateMode, Op, Reply};
    let steps = vec![
        Step::Op {
            session: 0,
            op: Op::Exists {
                path: "/a".into(),
                watch: true,
            },
        },
        Step::Op {
            session: 1,
            op: Op::Create {
                path: "/a".into(),
                data: vec![1],
                mode: CreateMode::Ephemeral,
            },
        },
        Step::Op {
            session: 1,
            op: Op::Create {
                path: "/s-".into(),
                data: vec![],
                mode: CreateMode::PersistentSequential,
            },
        },
    ];
    let trace = || {
        let server = LocalServer::default();
        let z = [server.connect(5000), server.connect(5000)];
        runtime().block_on(harness::run(&z, "/r", &steps))
    };
    let a = trace();
    harness::compare(&a, &trace(), "/r", &steps).expect("identical runs agree");
    assert_eq!(a.steps.len(), 4);
    assert_eq!(a.steps[2].events[0].len(), 1, "session 0 saw NodeCreated");

    let mut b = trace();
    b.steps[2].events[0].clear();
    assert!(
        harness::compare(&a, &b, "/r", &steps).is_err(),
        "missing event"
    );

    let mut b = trace();
    let Ok(Reply::Create { stat, .. }) = &mut b.steps[2].reply else {
        panic!()
    };
    stat.ephemeral_owner = 99;
    assert!(harness::compare(&a, &b, "/r", &steps).is_err(), "owner");

    let shifted = |by: i64| {
        let mut b = trace();
        let Ok(Reply::Create { stat, .. }) = &mut b.steps[3].reply else {
            panic!()
        };
        stat.czxid += by;
        stat.mzxid += by;
        stat.pzxid += by;
        b
    };
    assert!(
        harness::compare(&a, &shifted(100), "/r", &steps).is_ok(),
        "a monotone renaming is fine"
    );
    assert!(
        harness::compare(&a, &shifted(-1000), "/r", &steps).is_err(),
        "zxid order"
    );

    let mut b = trace();
    let Ok(Reply::Create { path, .. }) = &mut b.steps[3].reply else {
        panic!()
    };
    path.push('9');
    assert!(harness::compare(&a, &b, "/r", &steps).is_err(), "name");
}
