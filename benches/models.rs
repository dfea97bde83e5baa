//! Every model in the catalog (`zoosim list`), its correct variant checked
//! exhaustively with all faults (one of each kind per run, at most one
//! fault in all per run: the default `--max-faults 1`), breadth-first on
//! one thread, at 3, 4 and 5 clients. `cargo bench --bench models`.
//!
//! Each model and size prints states generated and unique, depth and
//! seconds from one untimed run; criterion then times the lock at 5
//! clients, the target (≤ 10 s on one core).

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use zoosim::models::{catalog, find, Faults, Options, Spec, DEFAULT_MAX_FAULTS};

fn spec(clients: usize) -> Spec {
    Spec {
        variant: None,
        clients,
        faults: Faults::ONE_EACH,
        max_faults: DEFAULT_MAX_FAULTS,
        options: Options::default(),
        symmetry: false,
    }
}

fn models(c: &mut Criterion) {
    for model in catalog() {
        for clients in [3, 4, 5] {
            let started = Instant::now();
            let report = model.check(&spec(clients)).expect("a valid spec");
            let checked = &report.checked;
            eprintln!(
                "{}, {clients} clients, all faults: {} states generated, {} unique, depth {}, \
                 {:.2} s, every property holds: {}",
                model.name(),
                checked.states,
                checked.unique,
                checked.depth,
                started.elapsed().as_secs_f64(),
                checked.all_hold()
            );
        }
    }
    let lock = find("lock").expect("the lock is in the catalog");
    let mut g = c.benchmark_group("models");
    g.sample_size(10).measurement_time(Duration::from_secs(30));
    g.bench_function("lock-5-clients-all-faults", |b| {
        b.iter(|| lock.check(&spec(5)).expect("a valid spec"))
    });
    g.finish();
}

criterion_group!(benches, models);
criterion_main!(benches);
