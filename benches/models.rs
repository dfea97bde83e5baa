//! The lock's stateright model, checked exhaustively with all faults (one
//! of each per run), breadth-first on one thread, at 3, 4 and 5 clients.
//! `cargo bench --bench models`.
//!
//! Each size's states (generated, unique) and depth are printed first, from
//! one untimed run, so that the times below them read against the state
//! counts of the same build. Target (issue 15's, for the step after this
//! one): 5 clients ≤ 10 s on one core.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use zoosim::models::lock::LockModel;
use zoosim::models::{check, Faults, Options, World};
use zoosim::recipes::lock::LockVariant;

fn world(clients: usize) -> World<LockModel> {
    World::new(
        LockModel::new(LockVariant::Correct),
        clients,
        Faults::ONE_EACH,
    )
    .expect("a valid size")
}

fn models(c: &mut Criterion) {
    for clients in [3, 4, 5] {
        let started = Instant::now();
        let checked = check(&world(clients), Options::default());
        eprintln!(
            "lock, {clients} clients, all faults: {} states generated, {} unique, depth {}, \
             {:.2} s, every property holds: {}",
            checked.states,
            checked.unique,
            checked.depth,
            started.elapsed().as_secs_f64(),
            checked.all_hold()
        );
    }
    let mut g = c.benchmark_group("models");
    g.sample_size(10).measurement_time(Duration::from_secs(30));
    for clients in [3, 4, 5] {
        let w = world(clients);
        g.bench_function(format!("lock-{clients}-clients-all-faults"), |b| {
            b.iter(|| check(&w, Options::default()))
        });
    }
    g.finish();
}

criterion_group!(benches, models);
criterion_main!(benches);
