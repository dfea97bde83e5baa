//! The certificate behind every "holds": the witness order a search
//! returned, replayed from the initial state through the model under the
//! time-window rule, with the bookkeeping a witness must satisfy. It
//! shares nothing with the searches but the model's step (the fast path's
//! kept states, its local searches and the engine's memo are not trusted:
//! a defect in any of them shows here as a refused certificate, never as
//! a false "holds"). One pass, O(operations).

use std::fmt;

use super::model::ZkModel;
use super::{Input, Placed};

/// Why a witness order is not a witness.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Refused {
    /// Where in the order it went wrong (`None`: at the end).
    pub at: Option<usize>,
    /// What went wrong.
    pub why: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Some(n) => write!(f, "the witness's operation {n}: {}", self.why),
            None => write!(f, "the witness as a whole: {}", self.why),
        }
    }
}

/// Checks that `order` (indices into `placed`) is a witness that the
/// history `placed` stands for satisfies `model`'s rules:
///
/// * it replays from `model.init()`, each operation accepted by the model
///   in the state the ones before it left;
/// * each operation takes effect at the earliest time its window and the
///   operations before it allow (its call, or the previous one's point if
///   later), and that time is not after its return: an operation that
///   returned before another was called comes first;
/// * every session step and every session's trailing events are placed
///   exactly once; a write of unknown outcome and a session's end on the
///   servers at most once (they may never have happened);
/// * at the end, every session has taken all its steps.
pub fn certify(model: &ZkModel<'_>, placed: &[Placed<'_>], order: &[usize]) -> Result<(), Refused> {
    let refuse = |at: Option<usize>, why: String| Err(Refused { at, why });
    let mut state = model.init();
    let mut now: u64 = 0;
    let mut seen = vec![false; placed.len()];
    for (n, &i) in order.iter().enumerate() {
        let Some(p) = placed.get(i) else {
            return refuse(Some(n), format!("index {i} names no operation"));
        };
        if std::mem::replace(&mut seen[i], true) {
            return refuse(Some(n), format!("operation {i} is placed twice"));
        }
        let at = now.max(p.call_us);
        if let Some(ret) = p.ret_us {
            if at > ret {
                return refuse(
                    Some(n),
                    format!(
                        "operation {i} returned at {ret} us, before the point {at} us the \
                         operations ahead of it leave it"
                    ),
                );
            }
        }
        if !model.step_in_place(&mut state, &p.input) {
            return refuse(
                Some(n),
                format!("the model refuses operation {i} in the state the witness reaches"),
            );
        }
        now = at;
    }
    for (i, p) in placed.iter().enumerate() {
        let required = matches!(p.input, Input::Step { .. } | Input::End { .. });
        if required && !seen[i] {
            return refuse(
                None,
                format!("operation {i}, which happened, is never placed"),
            );
        }
    }
    for (s, spec) in model.sessions.iter().enumerate() {
        if state.next_step(s) != spec.steps {
            return refuse(
                None,
                format!(
                    "session {} took {} of its {} steps",
                    spec.id,
                    state.next_step(s),
                    spec.steps
                ),
            );
        }
    }
    Ok(())
}
