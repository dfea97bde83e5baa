//! Is a model's state graph acyclic? stateright judges an `eventually`
//! property on the paths it explores and counts a run as over only where
//! no action is enabled: on a cycle (a machine that polls, a retry that
//! comes back to where it was) a run never ends, the checker never sees it
//! end, and an `eventually` that the cycle never meets is reported as
//! holding. So every `eventually` claim rests on the graph being acyclic,
//! which the world promises (faults are bounded and every step moves a
//! machine or the server on) and this module checks: a depth-first walk
//! that finds a state reached again from itself, or says the graph is
//! larger than the bound it was given (a machine whose states grow without
//! end, which would otherwise keep the checker busy for ever).
//!
//! States are told apart by a 64-bit hash, as the checker itself does.
//! Pure and deterministic: fixed-key hashing throughout (no random hash
//! seeds), so the same model walks the same way every time.

use std::collections::hash_map::DefaultHasher;
use std::fmt;
use std::hash::{Hash, Hasher};

use rustc_hash::FxHashMap;
use stateright::Model;

/// What [`find_cycle`] found that makes the graph unfit for `eventually`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cyclic<A> {
    /// A path from an initial state to a state, then the actions that lead
    /// from that state back to itself.
    Cycle {
        /// From an initial state to the first state of the cycle.
        prefix: Vec<A>,
        /// From that state back to it.
        cycle: Vec<A>,
    },
    /// More than the bound's distinct states, or a path longer than the
    /// bound's depth: the graph may be infinite (a livelock whose states
    /// keep changing).
    TooLarge {
        /// Distinct states seen before the walk gave up.
        states: usize,
        /// The longest path seen.
        depth: usize,
    },
}

impl<A: fmt::Debug> fmt::Display for Cyclic<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cyclic::Cycle { prefix, cycle } => write!(
                f,
                "a cycle: after {} step(s) ({prefix:?}) the run comes back to the same state \
                 after {} more ({cycle:?}); a run can go on for ever, so `eventually` \
                 verdicts do not hold",
                prefix.len(),
                cycle.len()
            ),
            Cyclic::TooLarge { states, depth } => write!(
                f,
                "no end in sight: {states} distinct states and paths of {depth} steps without \
                 the walk ending; a run may go on for ever (states that keep changing)"
            ),
        }
    }
}

/// The bound on a [`find_cycle`] walk.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// Most distinct states.
    pub states: usize,
    /// Longest path.
    pub depth: usize,
}

fn fingerprint<S: Hash>(s: &S) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// On the walk's path (grey) or finished with everything below it (black).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Colour {
    Grey,
    Black,
}

/// One state on the walk's path: the action that led here, and the
/// actions still to try from it.
struct Frame<M: Model> {
    state: M::State,
    fp: u64,
    via: Option<M::Action>,
    todo: Vec<M::Action>,
}

/// Walks `model`'s whole state graph depth-first: `Ok(n)` with its number
/// of distinct states when it is acyclic, else what was found. Sound as
/// far as 64-bit hashes tell states apart; exact as to which states are
/// reached (it takes the model's own actions and boundary).
pub fn find_cycle<M>(model: &M, bound: Bound) -> Result<usize, Cyclic<M::Action>>
where
    M: Model,
    M::State: Hash,
    M::Action: Clone,
{
    let mut colour: FxHashMap<u64, Colour> = FxHashMap::default();
    let mut depth = 0;
    for init in model.init_states() {
        if !model.within_boundary(&init) {
            continue;
        }
        let fp = fingerprint(&init);
        if colour.contains_key(&fp) {
            continue;
        }
        colour.insert(fp, Colour::Grey);
        let mut stack = vec![frame(model, init, fp, None)];
        while let Some(top) = stack.last_mut() {
            let Some(action) = top.todo.pop() else {
                colour.insert(top.fp, Colour::Black);
                stack.pop();
                continue;
            };
            let Some(next) = model.next_state(&top.state, action.clone()) else {
                continue;
            };
            if !model.within_boundary(&next) {
                continue;
            }
            let fp = fingerprint(&next);
            match colour.get(&fp) {
                Some(Colour::Black) => {}
                Some(Colour::Grey) => {
                    let at = stack
                        .iter()
                        .position(|f| f.fp == fp)
                        .expect("a grey state is on the path");
                    let prefix: Vec<M::Action> =
                        stack[1..=at].iter().filter_map(|f| f.via.clone()).collect();
                    let mut cycle: Vec<M::Action> = stack[at + 1..]
                        .iter()
                        .filter_map(|f| f.via.clone())
                        .collect();
                    cycle.push(action);
                    return Err(Cyclic::Cycle { prefix, cycle });
                }
                None => {
                    colour.insert(fp, Colour::Grey);
                    stack.push(frame(model, next, fp, Some(action)));
                    depth = depth.max(stack.len() - 1);
                    if colour.len() > bound.states || depth > bound.depth {
                        return Err(Cyclic::TooLarge {
                            states: colour.len(),
                            depth,
                        });
                    }
                }
            }
        }
    }
    Ok(colour.len())
}

fn frame<M: Model>(model: &M, state: M::State, fp: u64, via: Option<M::Action>) -> Frame<M> {
    let mut todo = Vec::new();
    model.actions(&state, &mut todo);
    // Popped from the back: reversed, the first action is tried first.
    todo.reverse();
    Frame {
        state,
        fp,
        via,
        todo,
    }
}
