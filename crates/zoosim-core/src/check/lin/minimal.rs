//! Shrinking a history that is not linearizable to a small part of it
//! that still is not: the part a person should read first.
//!
//! First a cut in time (the shortest run of operations, by call, that
//! fails: a binary search), then delta debugging over the operations left
//! (Zeller's ddmin: drop halves, then quarters, ... down to single
//! operations). Every candidate is judged by the engine itself, and only
//! a verdict counts: a candidate the engine does not decide within its
//! steps is not a failure, so what is returned is always shown not
//! linearizable.
//!
//! Dropping a write can make a read impossible, which would leave a
//! useless "minimal" history: a lone read of a value whose writes were
//! dropped fails, but shows nothing. So each conditional operation of a
//! candidate (one that cannot happen in every state: a read, a successful
//! cas; see [`Model::unconditional`]) must keep its footing, judged once
//! per operation against the other writes of the history being shrunk
//! (its operations that may change the state):
//!
//! - one those writes explain (it is linearizable with them) must be
//!   explained by the candidate's own writes: the failure then comes from
//!   the operations together, and dropping writes cannot be its cause;
//! - one they do not explain (a stale read: the value was written, but
//!   not then) must have the state it needs produced by the candidate's
//!   own writes in some order: the candidate then shows the writes that
//!   wrote the value and why it could not be read then;
//! - one that no order of them can give the state it needs (a value
//!   never written) may stand alone: it fails on its own;
//! - one neither test decides is held to the first rule, the strictest.
//!
//! "In some order" is the operation checked with its call and reply
//! moved to the two ends of the history (so that it may be placed
//! anywhere). A test counts only when the engine decides it within its
//! steps; an undecided one rejects the candidate. When the search ends
//! within its budget and no test of its last round was left undecided,
//! the result is 1-minimal in that sense: dropping any one of its
//! operations makes it linearizable or leaves one without its footing.
//! Each operation keeps its own call and return times.

use std::collections::BTreeMap;

use super::{decide, Budget, Exhausted, Model, Operation, Verdict};

/// The steps one test of a candidate's operation against its writes may
/// take.
const QUICK_STEPS: u64 = 20_000;

/// The steps each of an operation's two tests against the whole
/// history's writes may take (once per operation: worth more than a
/// candidate's test).
const FOOTING_STEPS: u64 = 100_000;

/// The steps the engine may take to show one candidate not linearizable
/// (one hard candidate does not spend the whole budget: it is rejected).
const CANDIDATE_STEPS: u64 = 2_000_000;

/// A small failing sub-history.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Minimal {
    /// Its operations (indices into the history), in history order.
    pub ops: Vec<usize>,
    /// Whether dropping any one of them is known to make it linearizable
    /// or to leave a read without its footing (false when the budget ran
    /// out first, or a test of the last round was not decided).
    pub one_minimal: bool,
    /// Engine runs it took.
    pub checks: u64,
    /// Engine steps it took (over all runs).
    pub steps: u64,
}

/// How a read stands against the writes of the history being shrunk
/// (see the module's documentation).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Footing {
    /// Linearizable with them.
    Explained,
    /// Not linearizable with them, and some order of them may produce
    /// its value.
    Stale,
    /// No order of them produces its value.
    Unwritten,
    /// Not decided within the budget.
    Undecided,
}

/// Shrinks `subset` (indices into `ops`, a history that is not
/// linearizable) within `budget` (its steps over all the engine's runs).
/// `None` if the engine does not show `subset` not linearizable within
/// the budget.
pub fn minimal<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    subset: &[usize],
    budget: &Budget<'_>,
) -> Option<Minimal>
where
    M::Input: Clone,
    M::Output: Clone,
{
    let mut shrink = Shrink::new(model, ops, subset, budget);
    // The history itself needs no footing test (it is what was recorded)
    // and may take the whole budget.
    if shrink.verdict(subset, u64::MAX) != Some(false) {
        return None;
    }
    let mut by_call: Vec<usize> = subset.to_vec();
    by_call.sort_by_key(|&i| (ops[i].call, i));
    // The shortest prefix in call order that fails (binary search; not
    // monotone in general, but `hi` always names a failing prefix).
    let (mut lo, mut hi) = (1, by_call.len());
    while lo < hi && !shrink.exhausted {
        let mid = lo + (hi - lo) / 2;
        if shrink.fails(&by_call[..mid]) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let mut current: Vec<usize> = by_call[..hi].to_vec();
    let mut parts = 2;
    let mut settled = current.len() < 2;
    while current.len() >= 2 && !shrink.exhausted {
        let undecided_before = shrink.undecided;
        let chunks = split(&current, parts);
        let mut reduced = false;
        for chunk in &chunks {
            if chunk.len() < current.len() && shrink.fails(chunk) {
                current = chunk.clone();
                parts = 2;
                reduced = true;
                break;
            }
        }
        if !reduced {
            for k in 0..chunks.len() {
                let rest: Vec<usize> = chunks
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != k)
                    .flat_map(|(_, c)| c.iter().copied())
                    .collect();
                if shrink.fails(&rest) {
                    current = rest;
                    parts = (parts - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if parts >= current.len() {
                // Every single operation was tried: 1-minimal, unless a
                // test of this round gave no answer.
                settled = shrink.undecided == undecided_before;
                break;
            }
            parts = (parts * 2).min(current.len());
        }
        if current.len() < 2 {
            settled = true;
        }
    }
    current.sort_unstable();
    Some(Minimal {
        ops: current,
        one_minimal: settled && !shrink.exhausted,
        checks: shrink.checks,
        steps: shrink.steps,
    })
}

/// `items` in `parts` runs of nearly equal length.
fn split(items: &[usize], parts: usize) -> Vec<Vec<usize>> {
    let parts = parts.clamp(1, items.len().max(1));
    (0..parts)
        .map(|k| items[k * items.len() / parts..(k + 1) * items.len() / parts].to_vec())
        .filter(|c| !c.is_empty())
        .collect()
}

struct Shrink<'a, 'b, M: Model> {
    model: &'a M,
    /// The history, then a copy of each conditional operation of the
    /// history being shrunk with its call and reply moved to that
    /// history's two ends (placed anywhere: see the module's
    /// documentation).
    ops: Vec<Operation<M::Input, M::Output>>,
    /// Per conditional operation: its copy's index in `ops`.
    anywhere: BTreeMap<usize, usize>,
    budget: &'a Budget<'b>,
    /// The writes (operations that may change the state) of the history
    /// being shrunk.
    original_writes: Vec<usize>,
    /// Per conditional operation: its footing (computed once).
    footing: BTreeMap<usize, Footing>,
    steps: u64,
    checks: u64,
    /// Tests that gave no answer within their budget.
    undecided: u64,
    exhausted: bool,
}

impl<'a, 'b, M: Model> Shrink<'a, 'b, M>
where
    M::Input: Clone,
    M::Output: Clone,
{
    fn new(
        model: &'a M,
        ops: &[Operation<M::Input, M::Output>],
        original: &[usize],
        budget: &'a Budget<'b>,
    ) -> Self {
        let first = original.iter().map(|&i| ops[i].call).min().unwrap_or(0);
        let last = original
            .iter()
            .map(|&i| ops[i].ret.unwrap_or(0).max(ops[i].call))
            .max()
            .unwrap_or(0);
        let mut all = ops.to_vec();
        let mut anywhere = BTreeMap::new();
        for &i in original {
            if !model.unconditional(&ops[i].input, ops[i].output.as_ref()) {
                anywhere.insert(i, all.len());
                all.push(Operation {
                    call: first,
                    ret: Some(last.saturating_add(1)),
                    ..ops[i].clone()
                });
            }
        }
        let original_writes = original
            .iter()
            .copied()
            .filter(|&i| !model.read_only(&ops[i].input, ops[i].output.as_ref()))
            .collect();
        Shrink {
            model,
            ops: all,
            anywhere,
            budget,
            original_writes,
            footing: BTreeMap::new(),
            steps: 0,
            checks: 0,
            undecided: 0,
            exhausted: false,
        }
    }

    /// Whether `subset` (part of the history being shrunk) is a failing
    /// history worth showing: each of its conditional operations keeps
    /// its footing (see the module's documentation), and the engine shows
    /// it not linearizable. The engine's test comes first: most
    /// candidates are linearizable, and it takes one run where the
    /// footing takes one per operation.
    fn fails(&mut self, subset: &[usize]) -> bool {
        if self.verdict(subset, CANDIDATE_STEPS) != Some(false) {
            return false;
        }
        let writes: Vec<usize> = subset
            .iter()
            .copied()
            .filter(|&i| {
                !self
                    .model
                    .read_only(&self.ops[i].input, self.ops[i].output.as_ref())
            })
            .collect();
        for &o in subset {
            let Some(&wide) = self.anywhere.get(&o) else {
                continue;
            };
            let test = match self.footing(o) {
                Footing::Unwritten => continue,
                Footing::Stale => wide,
                Footing::Explained | Footing::Undecided => o,
            };
            let alone = with(&writes, o, test);
            if self.verdict(&alone, QUICK_STEPS) != Some(true) {
                return false;
            }
        }
        true
    }

    /// Conditional operation `o`'s footing against the writes of the
    /// history being shrunk.
    fn footing(&mut self, o: usize) -> Footing {
        if let Some(&known) = self.footing.get(&o) {
            return known;
        }
        let writes = self.original_writes.clone();
        let in_time = self.verdict(&with(&writes, o, o), FOOTING_STEPS);
        let footing = if in_time == Some(true) {
            Footing::Explained
        } else {
            let wide = self.anywhere[&o];
            match (
                in_time,
                self.verdict(&with(&writes, o, wide), FOOTING_STEPS),
            ) {
                (_, Some(false)) => Footing::Unwritten,
                // Not produced by those writes is undecided, but not
                // explained by them is decided: whatever the candidate's
                // writes produce, its failure is no artefact of dropping.
                (Some(false), _) => Footing::Stale,
                _ => Footing::Undecided,
            }
        };
        self.footing.insert(o, footing);
        footing
    }

    /// Whether `subset` is linearizable, if the engine decides within
    /// `steps` (and what is left of the budget; once that is spent the
    /// search is over).
    fn verdict(&mut self, subset: &[usize], steps: u64) -> Option<bool> {
        let left = self.budget.max_steps.saturating_sub(self.steps);
        let budget = Budget {
            max_steps: steps.min(left),
            ..*self.budget
        };
        let (verdict, explored) = decide(self.model, &self.ops, subset, &budget, false);
        self.steps += explored.steps;
        self.checks += 1;
        match verdict {
            Verdict::Linearizable(_) => Some(true),
            Verdict::NotLinearizable(_) => Some(false),
            Verdict::Unknown(why) => {
                if steps >= left || why != Exhausted::Steps {
                    self.exhausted = true;
                }
                self.undecided += 1;
                None
            }
            Verdict::NotChecked => None,
        }
    }
}

/// `writes` without `op`, then `test` (`op` or its copy placed anywhere).
fn with(writes: &[usize], op: usize, test: usize) -> Vec<usize> {
    let mut v: Vec<usize> = writes.iter().copied().filter(|&w| w != op).collect();
    v.push(test);
    v
}
