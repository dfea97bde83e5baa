//! The linearizability checker on the bundled Jepsen histories
//! (tests/data/histories), parsing excluded.
//!
//! `cargo bench --bench lin`. Targets (release, one core): the etcd set
//! ≤ 1 ms a file on average (`lin/etcd-all` covers the 20 files) and the
//! slowest files (etcd_002, etcd_007) ≤ 100 ms each; kv c50-ok ≤ 250 ms;
//! kv c10-ok checked as one unpartitioned map ≤ 3 s; kv c50-bad's full
//! report (every key diagnosed, a minimal failing sub-history) ≤ 10 s.

use std::path::Path;
use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use zoosim::check::lin::cas_register::CasRegister;
use zoosim::check::lin::jepsen::{history, Format, FromJepsen};
use zoosim::check::lin::kv::Kv;
use zoosim::check::lin::minimal::minimal;
use zoosim::check::lin::{check, Budget, Operation, Options, Summary};

fn load<M: FromJepsen>(model: &M, rel: &str) -> Vec<Operation<M::Input, M::Output>> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/histories")
        .join(rel);
    let text = std::fs::read(&p).expect("the bundled histories");
    let events = Format::detect(&text).parse(&text).expect("a good history");
    history(model, &events).expect("a good history")
}

fn etcd(c: &mut Criterion) {
    let files: Vec<_> = (0..20)
        .map(|k| load(&CasRegister, &format!("etcd/etcd_{k:03}.log")))
        .collect();
    let mut g = c.benchmark_group("lin");
    g.bench_function("etcd-all", |b| {
        b.iter(|| {
            for ops in &files {
                black_box(check(&CasRegister, ops, &Options::default()).summary());
            }
        })
    });
    for k in [2, 7] {
        let ops = &files[k];
        g.bench_function(format!("etcd_{k:03}"), |b| {
            b.iter(|| {
                let s = check(&CasRegister, ops, &Options::default()).summary();
                assert_eq!(s, Summary::Linearizable);
            })
        });
    }
    g.finish();
}

fn kv(c: &mut Criterion) {
    let mut g = c.benchmark_group("lin");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    let partitioned = Kv::default();
    let ok50 = load(&partitioned, "kv/c50-ok.txt");
    g.bench_function("kv-c50-ok", |b| {
        b.iter(|| {
            let s = check(&partitioned, &ok50, &Options::default()).summary();
            assert_eq!(s, Summary::Linearizable);
        })
    });
    let whole = Kv {
        partitioned: false,
        ..Kv::default()
    };
    let ok10 = load(&whole, "kv/c10-ok.txt");
    g.bench_function("kv-c10-ok-unpartitioned", |b| {
        b.iter(|| {
            let s = check(&whole, &ok10, &Options::default()).summary();
            assert_eq!(s, Summary::Linearizable);
        })
    });
    let bad50 = load(&partitioned, "kv/c50-bad.txt");
    // The full report, as `zoosim lin` gives it: every key checked and
    // diagnosed, and a minimal failing sub-history: the smallest failing
    // keys first, until one shrinks (10M steps a key, 20M in all).
    g.bench_function("kv-c50-bad-report", |b| {
        b.iter(|| {
            let checked = check(&partitioned, &bad50, &Options::default());
            assert_eq!(checked.failing().count(), 10);
            let mut failing: Vec<_> = checked.failing().collect();
            failing.sort_by_key(|p| p.partition.ops.len());
            let mut left: u64 = 20_000_000;
            for p in failing {
                let budget = Budget {
                    max_steps: left.min(10_000_000),
                    ..Budget::UNLIMITED
                };
                let m = minimal(&partitioned, &bad50, &p.partition.ops, &budget);
                left = left.saturating_sub(m.as_ref().map_or(budget.max_steps, |m| m.steps));
                if m.is_some_and(|m| m.ops.len() < p.partition.ops.len()) || left == 0 {
                    break;
                }
            }
            black_box(left)
        })
    });
    g.finish();
}

criterion_group!(benches, etcd, kv);
criterion_main!(benches);
