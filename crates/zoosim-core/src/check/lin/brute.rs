//! A checker that cannot be clever: every order of the operations that
//! respects real time, each run through the model. Exponential; for
//! small histories in tests, as the engine's reference.

use super::{Model, Operation, Step};

/// Whether some order of `ops` (each operation with a known outcome
/// exactly once, each with an unknown one at most once) that respects
/// real time (a before b if a returned strictly before b was called)
/// is accepted by the model.
pub(super) fn linearizable<M: Model>(model: &M, ops: &[Operation<M::Input, M::Output>]) -> bool
where
    M::State: Clone,
{
    let mut placed = vec![false; ops.len()];
    search(model, ops, &model.init(), &mut placed)
}

fn ret(op: &Operation<impl Sized, impl Sized>) -> u64 {
    if op.output.is_known() {
        op.ret.unwrap_or(u64::MAX).max(op.call)
    } else {
        u64::MAX
    }
}

fn search<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    state: &M::State,
    placed: &mut [bool],
) -> bool
where
    M::State: Clone,
{
    if ops
        .iter()
        .zip(placed.iter())
        .all(|(op, &p)| p || !op.output.is_known())
    {
        return true;
    }
    for x in 0..ops.len() {
        if placed[x] {
            continue;
        }
        // Nothing left may have returned before x was called.
        let blocked = (0..ops.len()).any(|y| !placed[y] && y != x && ret(&ops[y]) < ops[x].call);
        if blocked {
            continue;
        }
        let next = match model.step(state, &ops[x].input, ops[x].output.as_ref()) {
            Step::Impossible => continue,
            Step::Unchanged => state.clone(),
            Step::To(s) => s,
        };
        placed[x] = true;
        let ok = search(model, ops, &next, placed);
        placed[x] = false;
        if ok {
            return true;
        }
    }
    false
}
