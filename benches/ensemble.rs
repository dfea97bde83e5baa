//! Speed of the simulated ensemble, three figures from one run of one
//! build (`cargo bench --bench ensemble`; pin to one core with
//! `taskset -c 0 cargo bench --bench ensemble`):
//!
//! (a) a dense mixed workload: 3 servers, 10 clients, no think time, half
//!     reads (getData) half writes (setData), in client operations per wall
//!     second and messages per operation;
//! (b) the floor: a raw madsim `Endpoint` ping-pong between two nodes, in
//!     messages per wall second;
//! (c) the ensemble's delivered messages per wall second on (a), and its
//!     ratio to (b) (target: at least 50 %).
//!
//! madsim is single-threaded, so every figure is one core's. Each figure
//! is the median of `ZOOSIM_BENCH_RUNS` runs (default 5). Wall time is
//! taken around the whole simulation (inside one, madsim's clock is the
//! simulated one); the dense phase dominates its setup (a few connects and
//! creates).

#[cfg(not(madsim))]
compile_error!("benches/ensemble.rs needs `--cfg madsim` (set by .cargo/config.toml)");

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use madsim::net::Endpoint;
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::{Handle, Runtime};
use zoosim::client::ZkExt;
use zoosim::ensemble::sim::{Ensemble, EnsembleConfig};
use zoosim::proto::CreateMode;

const CLIENTS: usize = 10;
const KEYS: usize = 20;
const SIMULATED: Duration = Duration::from_secs(20);
const PING_PONGS: u64 = 200_000;

struct Dense {
    ops: u64,
    delivered: u64,
    datagrams: u64,
    wall: Duration,
    simulated: Duration,
}

/// (a) and (c): the dense workload.
fn dense(seed: u64) -> Dense {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let started = Instant::now();
    let mut d = runtime.block_on(async {
        let ensemble = Arc::new(Ensemble::start(EnsembleConfig::default()));
        let setup = ensemble
            .client(0)
            .timeout_ms(10_000)
            .connect()
            .await
            .expect("connect");
        for k in 0..KEYS {
            setup
                .create(&format!("/k{k}"), b"0", CreateMode::Persistent)
                .await
                .expect("create");
        }
        let ops = Arc::new(AtomicU64::new(0));
        let mut clients = Vec::new();
        for c in 0..CLIENTS {
            let zk = ensemble
                .client((c % 3) as u32)
                .timeout_ms(10_000)
                .connect()
                .await
                .expect("connect");
            clients.push(zk);
        }
        let before = ensemble.net().stats();
        let sim_started = madsim::time::Instant::now();
        let until = sim_started + SIMULATED;
        let mut tasks = Vec::new();
        for zk in clients {
            let ops = ops.clone();
            let node = Handle::current().get_node(zk.node()).expect("client node");
            tasks.push(node.spawn(async move {
                while madsim::time::Instant::now() < until {
                    let key = format!("/k{}", thread_rng().gen_range(0..KEYS));
                    let ok = if thread_rng().gen_bool(0.5) {
                        zk.get_data(&key, false).await.is_ok()
                    } else {
                        zk.set_data(&key, b"v", -1).await.is_ok()
                    };
                    assert!(ok, "no faults: every operation succeeds");
                    ops.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        for t in tasks {
            t.await.expect("a client task");
        }
        Dense {
            ops: ops.load(Ordering::Relaxed),
            delivered: ensemble.net().stats().delivered - before.delivered,
            datagrams: ensemble.net().stats().datagrams - before.datagrams,
            wall: Duration::ZERO,
            simulated: sim_started.elapsed(),
        }
    });
    d.wall = started.elapsed();
    d
}

/// (b): two nodes bounce one datagram back and forth.
fn ping_pong(seed: u64) -> (u64, Duration) {
    let runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
    let started = Instant::now();
    let n = runtime.block_on(async {
        let handle = Handle::current();
        let a = handle
            .create_node()
            .name("a")
            .ip([10, 9, 0, 1].into())
            .build();
        let b = handle
            .create_node()
            .name("b")
            .ip([10, 9, 0, 2].into())
            .build();
        let b_addr: std::net::SocketAddr = "10.9.0.2:1".parse().unwrap();
        let a_addr: std::net::SocketAddr = "10.9.0.1:1".parse().unwrap();
        let echo = b.spawn(async move {
            let ep = Endpoint::bind(b_addr).await.unwrap();
            for _ in 0..PING_PONGS {
                let (msg, from) = ep.recv_from_raw(1).await.unwrap();
                ep.send_to_raw(from, 1, msg).await.unwrap();
            }
        });
        let pinger = a.spawn(async move {
            let ep = Endpoint::bind(a_addr).await.unwrap();
            for i in 0..PING_PONGS {
                ep.send_to_raw(b_addr, 1, Box::new(i)).await.unwrap();
                ep.recv_from_raw(1).await.unwrap();
            }
        });
        pinger.await.unwrap();
        echo.await.unwrap();
        2 * PING_PONGS
    });
    (n, started.elapsed())
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    xs[xs.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes
    // nothing: run once, briefly, as a smoke test.
    let benching = std::env::args().any(|a| a == "--bench");
    let runs: u64 = match std::env::var("ZOOSIM_BENCH_RUNS") {
        Ok(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("ZOOSIM_BENCH_RUNS must be a number, got {v:?}");
            std::process::exit(2)
        }),
        Err(_) if benching => 5,
        Err(_) => 1,
    };
    let mut ops_per_s = Vec::new();
    let mut msgs_per_op = Vec::new();
    let mut delivered_per_s = Vec::new();
    let mut raw_per_s = Vec::new();
    let mut sim_speed = Vec::new();
    let mut sim_ops = Vec::new();
    let mut per_datagram = Vec::new();
    for run in 0..runs {
        let d = dense(run + 1);
        let (raw, raw_wall) = ping_pong(run + 1);
        ops_per_s.push(d.ops as f64 / d.wall.as_secs_f64());
        msgs_per_op.push(d.delivered as f64 / d.ops as f64);
        delivered_per_s.push(d.delivered as f64 / d.wall.as_secs_f64());
        raw_per_s.push(raw as f64 / raw_wall.as_secs_f64());
        sim_speed.push(d.simulated.as_secs_f64() / d.wall.as_secs_f64());
        sim_ops.push(d.ops as f64 / d.simulated.as_secs_f64());
        per_datagram.push(d.delivered as f64 / d.datagrams as f64);
        assert!(d.ops > 0 && d.delivered > 0, "the workload did nothing");
    }
    let (a, mpo) = (median(ops_per_s), median(msgs_per_op));
    let (b, c) = (median(raw_per_s), median(delivered_per_s));
    println!("ensemble benchmark, {runs} run(s), medians:");
    println!("(a) dense workload, 3 servers, 10 clients, 50/50 getData/setData:");
    println!("    {a:>12.0} client ops per wall second");
    println!("    {mpo:>12.1} messages per op");
    println!(
        "    {:>12.0}x faster than simulated time",
        median(sim_speed)
    );
    println!(
        "    {:>12.0} client ops per simulated second (each client has one op in flight)",
        median(sim_ops)
    );
    println!("(b) raw madsim Endpoint ping-pong:");
    println!("    {b:>12.0} messages per wall second");
    println!("(c) ensemble delivered messages:");
    println!("    {c:>12.0} messages per wall second");
    println!(
        "    {:>12.2} messages per madsim datagram",
        median(per_datagram)
    );
    println!("    {:>12.0} % of (b)", 100.0 * c / b);
}
