//! Every model in the catalog (`zoosim list`), its correct variant checked
//! exhaustively with all faults (one of each kind per run, at most
//! `--max-faults` in all per run), breadth-first. `cargo bench --bench
//! models`.
//!
//! Each model, size and fault count prints what was checked (the
//! `checked:` sentence of `zoosim check`), states generated and unique,
//! depth and seconds from one untimed run, and the lock again with
//! `--symmetry`; criterion then times the lock at 3 clients, with and
//! without it. Sizes: `ZOOSIM_BENCH_CLIENTS` (default `3`), faults per
//! run: `ZOOSIM_BENCH_MAX_FAULTS` (default `1,2`), worker threads:
//! `ZOOSIM_BENCH_THREADS` (default 1); e.g.
//! `ZOOSIM_BENCH_CLIENTS=3,4,5 ZOOSIM_BENCH_MAX_FAULTS=2`. Every check
//! stops at `zoosim check`'s default bound (ten million states generated,
//! a few GB at most) and says so: a model too large for that is reported
//! as not exhaustive rather than taking the machine's memory.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use zoosim::models::{Faults, Options, Spec, DEFAULT_MAX_FAULTS, DEFAULT_MAX_STATES};
use zoosim::scenario::registry::Registry;

// The command's allocator (src/main.rs), so that the figures are the
// command's.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn spec(clients: usize, max_faults: u8, symmetry: bool) -> Spec {
    Spec {
        variant: None,
        clients,
        faults: Faults::ONE_EACH,
        max_faults,
        options: Options {
            max_states: Some(DEFAULT_MAX_STATES),
            threads: list("ZOOSIM_BENCH_THREADS", "1")[0],
            ..Options::default()
        },
        symmetry,
    }
}

/// The environment variable `var`'s comma-separated numbers, or `default`'s.
fn list<T: std::str::FromStr>(var: &str, default: &str) -> Vec<T> {
    let list = std::env::var(var).unwrap_or_else(|_| default.into());
    list.split(',')
        .map(|n| {
            n.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{var}: {list:?} is not a list of numbers"))
        })
        .collect()
}

fn models(c: &mut Criterion) {
    let sizes: Vec<usize> = list("ZOOSIM_BENCH_CLIENTS", "3");
    let most: Vec<u8> = list("ZOOSIM_BENCH_MAX_FAULTS", "1,2");
    let registry = Registry::new();
    let lock = registry.model("lock").expect("the lock has a model");
    let runs = registry
        .models()
        .map(|m| (m, false))
        .chain(std::iter::once((&*lock, true)));
    for (model, symmetry) in runs {
        for (&clients, &max_faults) in sizes.iter().flat_map(|c| most.iter().map(move |m| (c, m))) {
            let started = Instant::now();
            let report = match model.check(&spec(clients, max_faults, symmetry)) {
                Ok(r) => r,
                Err(e) => {
                    // A size the model cannot take (the revocable lock at
                    // 1 client): say so and go on.
                    eprintln!("{}, {clients} clients: {e}", model.name());
                    continue;
                }
            };
            let checked = &report.checked;
            eprintln!(
                "{}: {}: {} states generated, {} unique, depth {}, {:.2} s, {}",
                model.name(),
                report.bounds,
                checked.states,
                checked.unique,
                checked.depth,
                started.elapsed().as_secs_f64(),
                if !checked.conclusive {
                    "NOT EXHAUSTIVE (stopped at the bound)"
                } else if checked.all_hold() {
                    "every property holds"
                } else {
                    "SOME PROPERTY FAILS"
                }
            );
        }
    }
    let mut g = c.benchmark_group("models");
    g.sample_size(10).measurement_time(Duration::from_secs(30));
    // At 3 clients: ten samples of a larger size would take hours.
    g.bench_function("lock-3-clients-all-faults", |b| {
        b.iter(|| {
            lock.check(&spec(3, DEFAULT_MAX_FAULTS, false))
                .expect("a valid spec")
        })
    });
    g.bench_function("lock-3-clients-all-faults-symmetry", |b| {
        b.iter(|| {
            lock.check(&spec(3, DEFAULT_MAX_FAULTS, true))
                .expect("a valid spec")
        })
    });
    g.finish();
}

criterion_group!(benches, models);
criterion_main!(benches);
