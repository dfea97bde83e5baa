//! ZooKeeper's contract checked on recorded histories of the standard lock
//! scenario (`benches/scenarios/lock-standard.toml`: 10 clients × 50
//! acquisitions, ~2500 requests a seed), against the wall time of running
//! and recording that seed. `cargo bench --bench contract`.
//!
//! Target: the check adds at most 20 % to the seed's wall time. Criterion
//! times `contract::check` on three recorded histories; the seed's own
//! wall time (run and record, median of a few) is printed first, so that
//! the two figures come from the same process and machine.

#[cfg(not(madsim))]
compile_error!("benches/contract.rs needs `--cfg madsim` (set by .cargo/config.toml)");

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use zoosim::check::contract::{self, ContractVerdict};
use zoosim::check::lin::Budget;
use zoosim::scenario::files::load;
use zoosim::scenario::run::run_seed_recorded;

const SEEDS: [u64; 3] = [1, 2, 3];

fn contract(c: &mut Criterion) {
    let s =
        load(Path::new("benches/scenarios/lock-standard.toml")).unwrap_or_else(|e| panic!("{e}"));
    // Warm-up, untimed (allocator arenas, page faults).
    run_seed_recorded(&s, 1000);
    let mut histories = Vec::new();
    for seed in SEEDS {
        let mut wall = Vec::new();
        let mut h = None;
        for _ in 0..5 {
            let started = Instant::now();
            let (_, recorded) = run_seed_recorded(&s, seed);
            wall.push(started.elapsed().as_secs_f64() * 1000.0);
            h = Some(recorded);
        }
        wall.sort_by(f64::total_cmp);
        let h = h.expect("recorded");
        let started = Instant::now();
        let r = contract::check(&h, &Budget::UNLIMITED).expect("a recorded history");
        let once = started.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(
            r.verdict,
            ContractVerdict::Holds,
            "lock-standard seed {seed}"
        );
        println!(
            "lock-standard seed {seed}: {} operations placed, run and record median {:.1} ms, \
             contract check {once:.1} ms (fast path: {})",
            r.placed, wall[2], r.fast
        );
        histories.push((seed, h));
    }
    let mut g = c.benchmark_group("contract");
    g.sample_size(20).measurement_time(Duration::from_secs(5));
    for (seed, h) in &histories {
        g.bench_function(format!("lock-standard-seed-{seed}"), |b| {
            b.iter(|| black_box(contract::check(h, &Budget::UNLIMITED).expect("checks")))
        });
    }
    g.finish();
}

criterion_group!(benches, contract);
criterion_main!(benches);
