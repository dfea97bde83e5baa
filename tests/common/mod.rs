//! Seed sweeps shared by the simulation tests: which seeds to run
//! (ZOOSIM_SEED replays one, ZOOSIM_SEEDS widens a sweep) and a failing
//! seed named with the one command that replays it.

#![allow(dead_code)] // each test binary uses a part

use std::panic::{catch_unwind, UnwindSafe};
use std::time::Instant;

/// The seeds to run: `ZOOSIM_SEED` alone, or `ZOOSIM_SEEDS` (default `n`)
/// from `start`.
pub fn seeds(start: u64, n: u64) -> Vec<u64> {
    if let Ok(s) = std::env::var("ZOOSIM_SEED") {
        let seed = s
            .parse()
            .unwrap_or_else(|_| panic!("ZOOSIM_SEED must be a number, got {s:?}"));
        return vec![seed];
    }
    let n = match std::env::var("ZOOSIM_SEEDS") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("ZOOSIM_SEEDS must be a number, got {v:?}")),
        Err(_) => n,
    };
    (start..start + n).collect()
}

/// Runs one seed; a panic becomes a failure naming the seed and the command
/// that replays it (`binary` is the test file's name, `test` a filter).
pub fn replaying<T>(binary: &str, test: &str, seed: u64, f: impl FnOnce() -> T + UnwindSafe) -> T {
    catch_unwind(f).unwrap_or_else(|e| {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!(
            "{test}: seed {seed} failed: {msg}\n\
             replay: ZOOSIM_SEED={seed} cargo test --test {binary} {test} -- --nocapture"
        )
    })
}

/// Runs `f` over [`seeds`], printing the sweep's wall time.
pub fn sweep<T>(
    binary: &str,
    test: &str,
    start: u64,
    n: u64,
    f: impl Fn(u64) -> T + std::panic::RefUnwindSafe,
) -> Vec<T> {
    let seeds = seeds(start, n);
    let started = Instant::now();
    let out = seeds
        .iter()
        .map(|&seed| replaying(binary, test, seed, || f(seed)))
        .collect();
    eprintln!(
        "{test}: {} seeds in {:.2} s",
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    out
}
