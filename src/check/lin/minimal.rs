//! Shrinking a history that is not linearizable to a small part of it
//! that still is not: the part a person should read first.
//!
//! First a cut in time (the shortest run of operations, by call, that
//! fails: a binary search, kept only where the engine confirms a
//! failure), then delta debugging over the operations left (Zeller's
//! ddmin: drop halves, then quarters, ... down to single operations).
//! Every candidate is judged by the engine itself, so the result is not
//! linearizable whatever was dropped. Dropping a write can make a read
//! impossible, which would leave a useless "minimal" history (one read of
//! a value whose write was dropped): a candidate counts only if each of
//! its reads that the whole history's writes explain (is linearizable
//! with them) is explained by the candidate's own writes. (A test that
//! is not decided within a few thousand steps does not count against a
//! candidate: this rule is for a useful result, the failure is exact.) When the search ends within its
//! budget the result is 1-minimal in that sense: dropping any one of its
//! operations makes it linearizable or leaves such a read. Each operation
//! keeps its own call and return times.

use std::collections::BTreeMap;

use super::{decide, Budget, Model, Operation, Verdict};

/// The steps one test of a read against the writes may take.
const QUICK_STEPS: u64 = 20_000;

/// A small failing sub-history.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Minimal {
    /// Its operations (indices into the history), in history order.
    pub ops: Vec<usize>,
    /// Whether dropping any one of them is known to make it linearizable
    /// or to leave a read that no write explains (false when the budget
    /// ran out first).
    pub one_minimal: bool,
    /// Engine runs it took.
    pub checks: u64,
}

/// Shrinks `subset` (indices into `ops`, a history that is not
/// linearizable) within `budget` (its steps over all the engine's runs).
/// `None` if `subset` is not shown to fail within the budget.
pub fn minimal<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    subset: &[usize],
    budget: &Budget<'_>,
) -> Option<Minimal> {
    let mut shrink = Shrink {
        model,
        ops,
        budget,
        original: subset,
        explained: BTreeMap::new(),
        steps: 0,
        checks: 0,
        exhausted: false,
    };
    if !shrink.fails(subset) {
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
    while current.len() >= 2 && !shrink.exhausted {
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
                break;
            }
            parts = (parts * 2).min(current.len());
        }
    }
    current.sort_unstable();
    Some(Minimal {
        ops: current,
        one_minimal: !shrink.exhausted,
        checks: shrink.checks,
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
    ops: &'a [Operation<M::Input, M::Output>],
    budget: &'a Budget<'b>,
    /// The history being shrunk.
    original: &'a [usize],
    /// Per read: whether the original history's writes explain it.
    explained: BTreeMap<usize, bool>,
    steps: u64,
    checks: u64,
    exhausted: bool,
}

impl<M: Model> Shrink<'_, '_, M> {
    /// Whether `subset` is a failing history worth showing: the engine
    /// shows it not linearizable, yet each of its read-only operations
    /// ([`Model::read_only`]) is linearizable with all its other
    /// operations that change state. So a read of a value whose write was
    /// dropped does not count as the failure: the result shows operations
    /// that each make sense alone and fail together.
    fn fails(&mut self, subset: &[usize]) -> bool {
        if !self.not_linearizable(subset) {
            return false;
        }
        let read_only = |i: usize| {
            self.model
                .read_only(&self.ops[i].input, self.ops[i].output.as_ref())
        };
        let writes: Vec<usize> = subset.iter().copied().filter(|&i| !read_only(i)).collect();
        let reads: Vec<usize> = subset.iter().copied().filter(|&i| read_only(i)).collect();
        for r in reads {
            if !self.explained_at_first(r) {
                // A read no write of the whole history explains is a
                // failure on its own, and a fine one to show.
                continue;
            }
            let mut alone = writes.clone();
            alone.push(r);
            if self.quick_verdict(&alone) == Some(false) {
                return false;
            }
        }
        true
    }

    /// Whether read `r` is linearizable with every operation of the
    /// history being shrunk that changes state (computed once per read).
    fn explained_at_first(&mut self, r: usize) -> bool {
        if let Some(&known) = self.explained.get(&r) {
            return known;
        }
        let mut alone: Vec<usize> = self
            .original
            .iter()
            .copied()
            .filter(|&i| {
                !self
                    .model
                    .read_only(&self.ops[i].input, self.ops[i].output.as_ref())
            })
            .collect();
        alone.push(r);
        let known = self.quick_verdict(&alone) == Some(true);
        self.explained.insert(r, known);
        known
    }

    /// Whether `subset` is linearizable, if the engine says so within
    /// [`QUICK_STEPS`]: the reads' test is a heuristic for a useful
    /// result, so it may give up (the result stays a failing history).
    fn quick_verdict(&mut self, subset: &[usize]) -> Option<bool> {
        let budget = Budget {
            max_steps: QUICK_STEPS.min(self.budget.max_steps.saturating_sub(self.steps)),
            ..*self.budget
        };
        let (verdict, explored) = decide(self.model, self.ops, subset, &budget, false);
        self.steps += explored.steps;
        self.checks += 1;
        match verdict {
            Verdict::Linearizable(_) => Some(true),
            Verdict::NotLinearizable(_) => Some(false),
            _ => None,
        }
    }

    /// Whether the engine shows `subset` not linearizable (an unknown
    /// verdict counts as no).
    fn not_linearizable(&mut self, subset: &[usize]) -> bool {
        let budget = Budget {
            max_steps: self.budget.max_steps.saturating_sub(self.steps),
            ..*self.budget
        };
        let (verdict, explored) = decide(self.model, self.ops, subset, &budget, false);
        self.steps += explored.steps;
        self.checks += 1;
        match verdict {
            Verdict::NotLinearizable(_) => true,
            Verdict::Unknown(_) => {
                self.exhausted = true;
                false
            }
            _ => false,
        }
    }
}
