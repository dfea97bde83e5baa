//! Throughput of the data tree (prep + apply, and reads), one core.
//!
//! `cargo bench --bench tree`; criterion reports each case as elements
//! (ZooKeeper operations) per second. The target: ≥ 1 million
//! simple operations per second (create+delete pairs, exists, get_data).

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use zoosim::proto::{CreateMode, Op, Reply, SessionId};
use zoosim::tree::DataTree;

const S: SessionId = SessionId(1);

fn tree_with(children: usize) -> DataTree {
    let mut t = DataTree::default();
    t.create_session(0, S, 30_000);
    t.execute(0, S, &create("/p", CreateMode::Persistent));
    for i in 0..children {
        t.execute(
            0,
            S,
            &create(&format!("/p/c{i:05}"), CreateMode::Persistent),
        );
    }
    t
}

fn create(path: &str, mode: CreateMode) -> Op {
    Op::Create {
        path: path.into(),
        data: b"0123456789".to_vec(),
        mode,
    }
}

fn delete(path: &str) -> Op {
    Op::Delete {
        path: path.into(),
        version: -1,
    }
}

fn simple(c: &mut Criterion) {
    let mut g = c.benchmark_group("simple");
    for (name, children) in [("small parent", 10), ("parent with 10k children", 10_000)] {
        let mut t = tree_with(children);
        let (cr, de) = (create("/p/x", CreateMode::Persistent), delete("/p/x"));
        g.throughput(Throughput::Elements(2));
        g.bench_function(format!("create+delete pair, {name}"), |b| {
            b.iter(|| {
                black_box(t.execute(1, S, &cr));
                black_box(t.execute(1, S, &de));
            })
        });
        let exists = Op::Exists {
            path: "/p/c00005".into(),
            watch: false,
        };
        let get = Op::GetData {
            path: "/p/c00005".into(),
            watch: false,
        };
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("exists, {name}"), |b| {
            b.iter(|| black_box(t.read(&exists)))
        });
        g.bench_function(format!("get_data, {name}"), |b| {
            b.iter(|| black_box(t.read(&get)))
        });
    }
    g.finish();
}

fn wide(c: &mut Criterion) {
    let mut g = c.benchmark_group("parent with 10k children");
    let mut t = tree_with(10_000);
    let list = Op::GetChildren {
        path: "/p".into(),
        watch: false,
    };
    g.throughput(Throughput::Elements(1));
    g.bench_function("get_children (10k names)", |b| {
        b.iter(|| black_box(t.read(&list)))
    });
    let seq = create("/p/s-", CreateMode::EphemeralSequential);
    g.throughput(Throughput::Elements(2));
    g.bench_function("sequential ephemeral create+delete pair", |b| {
        b.iter(|| {
            let applied = t.execute(1, S, &seq);
            let Some(Ok(Reply::Create { path, .. })) = applied.reply else {
                panic!("{applied:?}")
            };
            black_box(t.execute(1, S, &delete(&path)));
        })
    });
    let deletes: Vec<_> = (0..10_000)
        .map(|i| delete(&format!("/p/c{i:05}")))
        .collect();
    g.throughput(Throughput::Elements(deletes.len() as u64));
    g.sample_size(10);
    g.bench_function("delete all 10k children", |b| {
        b.iter_batched_ref(
            || t.clone(),
            |t| {
                for d in &deletes {
                    black_box(t.execute(1, S, d));
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

/// Half reads, half writes over 1,000 nodes, as a server sees them.
fn mixed(c: &mut Criterion) {
    let mut g = c.benchmark_group("mixed");
    let mut t = tree_with(1000);
    let ops: Vec<Op> = (0..1000)
        .flat_map(|i| {
            let p = format!("/p/c{:05}", (i * 7919) % 1000);
            [
                Op::GetData {
                    path: p.clone(),
                    watch: false,
                },
                Op::SetData {
                    path: p.clone(),
                    data: b"v".to_vec(),
                    version: -1,
                },
                Op::Exists {
                    path: format!("{p}-x"),
                    watch: false,
                },
                create(&format!("{p}-x"), CreateMode::Ephemeral),
                Op::GetChildren {
                    path: p.clone(),
                    watch: false,
                },
                delete(&format!("{p}-x")),
            ]
        })
        .collect();
    g.throughput(Throughput::Elements(ops.len() as u64));
    g.bench_function("50% reads, 50% writes", |b| {
        b.iter(|| {
            for op in &ops {
                if op.is_write() {
                    black_box(t.execute(1, S, op));
                } else {
                    let _ = black_box(t.read(op));
                }
            }
        })
    });
    g.finish();
}

criterion_group!(benches, simple, wide, mixed);
criterion_main!(benches);
