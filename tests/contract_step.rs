//! The contract model's in-place step (`ZkModel::step_in_place`, which the
//! fast path uses instead of copying the state at every step) leaves the
//! state exactly as it was when it refuses an input: a refused write is
//! taken back through the tree's undo journal and the events it queued.
//! Checked on real recorded histories, where refusals of every kind
//! (reply mismatches, events not yet queued, steps out of turn) abound.

#[cfg(not(madsim))]
compile_error!(
    "tests/contract_step.rs needs --cfg madsim (set in .cargo/config.toml; a RUSTFLAGS \
     environment variable replaces it)"
);

use std::path::Path;
use std::time::Instant;

use zoosim::check::contract::{self, fast_path, Input, Rules, StepKind};
use zoosim::scenario::files::load;
use zoosim::scenario::run::run_seed_recorded;

#[test]
fn a_refused_step_changes_nothing() {
    let started = Instant::now();
    // How often a refused write with watch events was taken back: the
    // undo path this test is about must be exercised.
    let mut refused_writes = 0u64;
    let mut refused = 0u64;
    for (file, seeds) in [
        ("scenarios/lock.toml", 2),
        ("scenarios/barrier.toml", 1),
        ("scenarios/shared-lock.toml", 1),
        ("scenarios/queue.toml", 1),
    ] {
        let s = load(Path::new(file)).unwrap_or_else(|e| panic!("{e}"));
        for seed in s.seed_start..s.seed_start + seeds {
            let (_, h) = run_seed_recorded(&s, seed);
            let logs = contract::session_logs(&h).expect("a recorded history");
            let (model, placed) = contract::build(&logs, Rules::ALL);
            let Ok(order) = fast_path(&model, &placed) else {
                continue;
            };
            let mut state = model.init();
            for (n, &i) in order.iter().enumerate() {
                // At every 3rd prefix, try every input to come that is
                // its session's next (the others are refused at once).
                if n % 3 == 0 {
                    for later in &order[n..] {
                        if let Input::Step { session, k, .. } = placed[*later].input {
                            if state.next_step(session) != k {
                                continue;
                            }
                        }
                        let mut tried = state.clone();
                        if !model.step_in_place(&mut tried, &placed[*later].input) {
                            refused += 1;
                            if let Input::Step {
                                kind: StepKind::Write { .. },
                                ..
                            } = placed[*later].input
                            {
                                refused_writes += 1;
                            }
                            assert!(
                                tried == state,
                                "{file} seed {seed}: refusing {:?} at prefix {n} changed the state",
                                placed[*later].input
                            );
                        }
                    }
                }
                assert!(
                    model.step_in_place(&mut state, &placed[i].input),
                    "{file} seed {seed}: the fast path's own order refused at {n}"
                );
            }
        }
    }
    println!(
        "{refused} refusals ({refused_writes} of writes) left the state unchanged, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(refused_writes > 0, "no refused write was tried");
}
