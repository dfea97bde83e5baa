//! The fast path: one greedy pass that places the history's operations in
//! the order their replies' zxids suggest, each one verified by the model
//! within its time window. A correct ensemble's zxid order is the order
//! the model needs, so for its histories the pass is the whole check; the
//! zxids decide nothing, though: an order the model accepts is a witness,
//! and an operation the model refuses where its zxid puts it is tried
//! again later (deferred) or after an operation of unknown effect, never
//! accepted on the zxid's word.

use std::collections::HashSet;

use super::model::{State, STATE_BYTES};
use super::{Input, Placed, StepKind, ZkModel};
use crate::check::lin::{self, check_partition, Budget, Operation, Outcome, Step, Verdict};
use crate::proto::{MultiOp, Op, Zxid};

/// How many of the next operations in zxid order a local search may
/// place before a stuck one, and how many steps it may take: enough for
/// the few operations a zxid order gets wrong, small enough that a search
/// that cannot succeed costs little (the full search then decides).
const WINDOW: usize = 48;
const WINDOW_STEPS: u64 = 20_000;

/// How many remaining steps of a session a local search may place before
/// that session's end: a session that ends on the servers while its
/// client is cut off has a few left (a Disconnected, a close).
const ENDING_STEPS: usize = 4;

/// How often (in operations placed) the pass keeps its state, and how
/// many of those states it keeps: a step that is stuck where an earlier
/// choice of the pass went wrong (an operation of unknown effect placed
/// to explain an event that a later write explains: seed 274137095 of
/// mix-lost-replies) is searched again from an earlier kept state, with
/// everything placed since taken back.
const CHECKPOINT_EVERY: usize = 24;
const CHECKPOINTS: usize = 4;
/// How far behind the pass's place the nearer points of a search from an
/// earlier state lie ([`Pass::restart_points`]).
const NEAR_POINTS: [usize; 3] = [3, 8, 16];
/// How many of the last operations placed [`Pass::place_by_move`] moves
/// among ([`moves`]).
const MOVE_SPAN: usize = 32;
/// The steps the searches from kept states may take in all, over the
/// three passes: a correct run's stuck step is placed in a few thousand;
/// a broken run's cannot be, and this bounds what the attempt costs it.
const RESTART_STEPS: u64 = 40_000;
/// The steps a local search may take first without the creates of
/// unknown outcome (those not taken back from the order), a session's end
/// tried first.
const CAP_STEPS: u64 = 2_500;
const CAPS: [u32; 4] = [1, 2, 4, 8];
const CAPPED_RESTART_STEPS: u64 = 40_000;
const ENDGAME_STEPS: u64 = 40_000;
const ENDGAME_CAP_STEPS: u64 = 20_000;

/// A kept state of the pass: how many operations were placed, the model
/// state and the time then.
#[derive(Clone)]
struct Checkpoint {
    placed: usize,
    state: State,
    now: u64,
}

/// Where the fast path stopped: an operation it could not place by the
/// time its window closed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Stuck {
    /// When the operation it could not place returned (`u64::MAX`: only
    /// operations of unknown effect were left, at the end).
    pub at_us: u64,
    /// The operation it could not place (an index into the placed list).
    pub op: usize,
    /// The operations it had placed, in order: a verified prefix.
    pub order: Vec<usize>,
}

/// What the fast path did beyond its greedy pass: how often its remedies
/// carried it past a stuck step (for tests that must show a path was
/// exercised; nothing decides by them).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FastStats {
    /// Local searches from where the pass stood that placed a stuck step.
    pub searches: u64,
    /// Searches from an earlier kept state that placed a stuck step (the
    /// operations placed since taken back and placed again).
    pub restarts: u64,
    /// Stuck steps placed after moving one operation placed before them,
    /// or swapping one of unknown effect for another ([`swaps`]).
    pub moves: u64,
}

/// The order the pass tries a session step in: (zxid, reads after the
/// write of their zxid, call time, step index).
type Key = (Zxid, u8, u64, u32);

/// Each session step's place in the zxid order. A step whose reply
/// carries a zxid goes there (a write before the reads that report its
/// zxid). A step without one (a disconnect, a reconnect) goes after the
/// last write that had completed anywhere when the client saw it — the
/// state the ensemble had then — kept between its session's neighbours'
/// zxids so that the session's own order is kept.
fn keys(model: &ZkModel, placed: &[Placed]) -> Vec<Key> {
    // Completed writes by completion time, with the largest zxid so far.
    let mut done: Vec<(u64, Zxid)> = placed
        .iter()
        .filter_map(|p| match (&p.input, p.hint, p.ret_us) {
            (
                Input::Step {
                    kind: StepKind::Write { .. },
                    ..
                },
                Some(z),
                Some(r),
            ) => Some((r, z)),
            _ => None,
        })
        .collect();
    done.sort_unstable();
    let mut top = 0;
    for d in &mut done {
        top = top.max(d.1);
        d.1 = top;
    }
    let latest = |t: u64| match done.partition_point(|d| d.0 <= t) {
        0 => 0,
        n => done[n - 1].1,
    };
    // Writes by call time.
    let mut called: Vec<(u64, Zxid)> = placed
        .iter()
        .filter_map(|p| match (&p.input, p.hint) {
            (
                Input::Step {
                    kind: StepKind::Write { .. },
                    ..
                },
                Some(z),
            ) => Some((p.call_us, z)),
            _ => None,
        })
        .collect();
    called.sort_unstable();
    // The smallest zxid of the writes called after each: a write called
    // after another returned comes after it in zxid order.
    let mut first_after = vec![Zxid::MAX; called.len() + 1];
    for (n, c) in called.iter().enumerate().rev() {
        first_after[n] = first_after[n + 1].min(c.1);
    }
    let before_next_called = |t: u64| first_after[called.partition_point(|c| c.0 <= t)];
    let mut steps: Vec<Vec<usize>> = vec![Vec::new(); model.sessions.len()];
    for (i, p) in placed.iter().enumerate() {
        if let Input::Step { session, .. } = p.input {
            steps[session].push(i);
        }
    }
    let mut keys = vec![(Zxid::MAX, 0, 0, 0); placed.len()];
    for list in &steps {
        // The key of each step's next hinted step: its zxid, and 1 for a
        // read (which comes after the write of its zxid), 0 for a write.
        let mut next = vec![(Zxid::MAX, 0); list.len()];
        let mut ahead = (Zxid::MAX, 0);
        for (j, &i) in list.iter().enumerate().rev() {
            next[j] = ahead;
            if let (Some(h), Input::Step { kind, .. }) = (placed[i].hint, &placed[i].input) {
                ahead = (
                    h,
                    u8::from(matches!(kind, StepKind::Read { .. } | StepKind::Sync)),
                );
            }
        }
        let mut prev: Zxid = 0;
        for (j, &i) in list.iter().enumerate() {
            let p = &placed[i];
            let Input::Step { k, kind, .. } = &p.input else {
                continue;
            };
            keys[i] = match p.hint {
                Some(h) => {
                    let read = matches!(kind, StepKind::Read { .. } | StepKind::Sync);
                    // A read a lagging server answered carries an old zxid,
                    // but cannot come before a write that completed before
                    // its earliest time: placed by its zxid, it would move
                    // the pass's time past the windows of the steps between
                    // (two-phase-commit seed 734003228: two reads of epoch 2
                    // called after a session's steps of epoch 3 returned).
                    let h = if read { h.max(latest(p.call_us)) } else { h };
                    prev = prev.max(h);
                    (h, u8::from(read), p.call_us, *k)
                }
                None => {
                    let t = p.ret_us.unwrap_or(u64::MAX);
                    // A close (whose reply carries no zxid) goes as late
                    // as its time allows: the reads that still saw its
                    // session's ephemerals come first, and those that no
                    // longer did are deferred until it is placed. A
                    // reconnect or a disconnect goes where the ensemble
                    // was when the client saw it.
                    let close = matches!(kind, StepKind::Close);
                    let z = if close {
                        // Just before the first write called after it
                        // returned (its zxid is below that one's): placed
                        // too early, a close cannot be taken back, while
                        // the reads that no longer saw its ephemerals are
                        // deferred until it is placed, or a local search
                        // places it before them (seed 3901816832 of
                        // mix-expiries-under-contention: a read returned
                        // after the close did and still saw them).
                        before_next_called(t).saturating_sub(1)
                    } else {
                        latest(t)
                    }
                    .max(prev);
                    if z >= next[j].0 {
                        // Just before the session's next step: after the
                        // write of its zxid if that step is a read (seed
                        // 1309409284 of revocable-lock: a reconnect whose
                        // watch replay saw a delete of that zxid).
                        (next[j].0, next[j].1, 0, *k)
                    } else if close {
                        // After the reads of that zxid too.
                        (z, 2, p.ret_us.unwrap_or(u64::MAX), *k)
                    } else {
                        // Among the reads of that zxid, by time.
                        (z, 1, p.ret_us.unwrap_or(u64::MAX), *k)
                    }
                }
            };
        }
    }
    keys
}

/// The greedy pass's state: the model state, the time reached (the
/// latest call placed: nothing placed later may have returned before it),
/// and what is placed.
struct Pass<'a> {
    model: &'a ZkModel<'a>,
    placed: &'a [Placed<'a>],
    state: State,
    now: u64,
    order: Vec<usize>,
    used: Vec<bool>,
    /// Each session's steps, by step index.
    steps: Vec<Vec<usize>>,
    /// Each session's trailing-events input, if any.
    end: Vec<Option<usize>>,
    /// The last few kept states, oldest first.
    checkpoints: Vec<Checkpoint>,
    /// The steps left for searches from kept states (shared by the
    /// passes).
    restart_steps: &'a mut u64,
    /// Likewise, for the searches with few operations of unknown effect
    /// (and every search from a kept state once those have carried this
    /// pass past a step).
    capped_steps: &'a mut u64,
    /// Whether the searches with few operations of unknown effect carried
    /// this pass past a step.
    rescued: bool,
    /// What the remedies did (shared by the passes).
    stats: &'a mut FastStats,
    /// The steps each search with few operations of unknown effect may
    /// take ([`CAP_STEPS`]; more in the endgame, [`Pass::finish`]).
    cap_steps: u64,
    /// Whether the searches leave out the writes of unknown outcome not
    /// yet placed (the endgame's first round, [`Pass::finish`]).
    without_new_writes: bool,
    /// The caller's stop ([`Budget::stop`]): polled before each rescue
    /// and by the searches, so that a pass over a history whose every
    /// rescue is a long search still ends at the caller's time or memory
    /// bound (10,000 unanswered creates took a minute past a 2 s bound).
    stop: Stop<'a>,
}

/// A caller's stop, as [`Budget::stop`].
pub(super) type Stop<'a> = Option<&'a dyn Fn() -> Option<lin::Exhausted>>;

impl Pass<'_> {
    /// Places `i` if its window allows and the model accepts it.
    fn place(&mut self, i: usize) -> bool {
        if self.used[i] {
            return true;
        }
        let p = &self.placed[i];
        let at = self.now.max(p.call_us);
        if p.ret_us.is_some_and(|r| at > r) {
            return false;
        }
        if !self.model.step_in_place(&mut self.state, &p.input) {
            return false;
        }
        self.now = at;
        self.order.push(i);
        self.used[i] = true;
        true
    }

    /// Places all of `chain` in order, or none of it.
    fn place_all(&mut self, chain: &[usize]) -> bool {
        let saved = (self.state.clone(), self.now, self.order.len());
        for &i in chain {
            if !self.place(i) {
                self.state = saved.0;
                self.now = saved.1;
                for j in self.order.drain(saved.2..) {
                    self.used[j] = false;
                }
                return false;
            }
        }
        true
    }

    /// Places `i` after one operation of unknown effect (tried in call
    /// order, only those called before `i` returned): an indeterminate
    /// write, or a session's end on the servers — which comes after the
    /// session's remaining steps, placed with it.
    fn place_after_loose(&mut self, i: usize, loose: &[usize]) -> bool {
        let deadline = self.placed[i].ret_us.unwrap_or(u64::MAX);
        for &j in loose.iter().rev() {
            if self.used[j] || self.placed[j].call_us > deadline {
                continue;
            }
            let mut chain = Vec::new();
            if let Input::Expire { session } | Input::End { session, .. } = self.placed[j].input {
                let from = self.state.next_step(session) as usize;
                chain.extend(self.steps[session][from..].iter().copied());
                if matches!(self.placed[j].input, Input::Expire { .. }) {
                    chain.extend(self.end[session]);
                }
                if chain.contains(&i) {
                    continue;
                }
            }
            chain.push(j);
            chain.push(i);
            if self.place_all(&chain) {
                return true;
            }
        }
        false
    }

    /// Places `d`, which the model refused where the pass tried it, by
    /// the remedies in turn: after one operation of unknown effect; by a
    /// local search from here; from an earlier kept state; then, where
    /// those fail, by the searches with few operations of unknown effect
    /// ([`CAPS`]), from here and from the kept states. The last come last
    /// so that a pass the first three carry through does just what it
    /// did without them; once they have carried a pass, its searches from
    /// kept states spend their steps, not the others' (so that a pass
    /// after it starts as it did without them).
    fn rescue(
        &mut self,
        d: usize,
        upcoming: &[usize],
        deferred: &[usize],
        loose: &[usize],
    ) -> bool {
        if self.stop.is_some_and(|stop| stop().is_some()) {
            return false;
        }
        if self.place_after_loose(d, loose)
            || self.place_by_search(d, upcoming, deferred, loose, None)
            || self.place_by_restart(d, upcoming, deferred, loose, &[None])
        {
            return true;
        }
        let few = CAPS.map(Some);
        let rescued = few
            .iter()
            .any(|&cap| self.place_by_search(d, upcoming, deferred, loose, cap))
            || self.place_by_restart(d, upcoming, deferred, loose, &few);
        self.rescued |= rescued;
        rescued || self.place_by_move(d, loose)
    }

    /// Places `d` after moving operations among the last [`MOVE_SPAN`]
    /// placed ([`moves`], then [`swaps`]): the searches place everything
    /// again and spend their steps on orders of the many reads in between
    /// before they reach the one choice that was wrong. Each order tried is placed by
    /// the model and the time windows, like any other.
    fn place_by_move(&mut self, d: usize, loose: &[usize]) -> bool {
        let Some(oldest) = self.checkpoints.first() else {
            return false;
        };
        let from = self
            .order
            .len()
            .saturating_sub(MOVE_SPAN)
            .max(oldest.placed);
        let Some(base) = self.state_at(from) else {
            return false;
        };
        let (state, now, order) = (self.state.clone(), self.now, self.order.clone());
        let tail: Vec<usize> = self.order.split_off(from);
        for &j in &tail {
            self.used[j] = false;
        }
        // The operations of unknown effect not placed that may go in
        // among them: a session's end only once all its steps are placed.
        let deadline = self.placed[d].ret_us.unwrap_or(u64::MAX);
        let spare: Vec<usize> = (loose.iter().copied())
            .filter(|&j| !self.used[j] && self.placed[j].call_us <= deadline)
            .filter(|&j| match self.placed[j].input {
                Input::Expire { session } | Input::End { session, .. } => {
                    self.state.next_step(session) == self.model.sessions[session].steps
                        && !tail
                            .iter()
                            .any(|&k| self.placed[k].input.session() == session)
                }
                _ => true,
            })
            .collect();
        let swapped = swaps(self.placed, &tail, &spare).map(|mut chain| {
            chain.push(d);
            chain
        });
        for chain in moves(self.placed, &tail, d, &spare).chain(swapped) {
            self.state = base.state.clone();
            self.now = base.now;
            if self.place_all(&chain) {
                self.checkpoints.retain(|k| k.placed <= from);
                self.stats.moves += 1;
                return true;
            }
        }
        self.state = state;
        self.now = now;
        self.order = order;
        for &j in &tail {
            self.used[j] = true;
        }
        false
    }

    /// The state after the first `at` operations of the order, replayed
    /// from the kept state before it (`None` if none is kept before it).
    fn state_at(&self, at: usize) -> Option<Checkpoint> {
        let base = self.checkpoints.iter().rev().find(|k| k.placed <= at)?;
        let mut state = base.state.clone();
        let mut now = base.now;
        for &i in &self.order[base.placed..at] {
            let accepted = self.model.step_in_place(&mut state, &self.placed[i].input);
            // The order is a verified prefix: its steps replay.
            assert!(accepted, "a placed operation does not replay");
            now = now.max(self.placed[i].call_us);
        }
        Some(Checkpoint {
            placed: at,
            state,
            now,
        })
    }

    /// A local search for a way to place `d` from here: the operations
    /// that returned before `d` was called (they must come first), the
    /// next [`WINDOW`] operations in zxid order, what was deferred and the
    /// operations of unknown effect called by then, any of which may come
    /// first; the model and the time windows decide (the lin engine, from
    /// this pass's state), with at most `cap` operations of unknown effect
    /// if capped. On success they are placed in the order found.
    fn place_by_search(
        &mut self,
        d: usize,
        upcoming: &[usize],
        deferred: &[usize],
        loose: &[usize],
        cap: Option<u32>,
    ) -> bool {
        let mut steps = if cap.is_some() {
            self.cap_steps
        } else {
            WINDOW_STEPS
        };
        let attempt = Attempt { redo: &[], cap };
        let placed = self.search_from_here(d, upcoming, deferred, loose, attempt, &mut steps);
        self.stats.searches += u64::from(placed);
        placed
    }

    /// [`Pass::place_by_search`] from an earlier kept state: everything
    /// placed since is taken back and searched again with the rest (its
    /// session steps must be placed again, its operations of unknown
    /// effect may). Each of `caps` is tried from every kept state, the
    /// most recent first, before the next; on failure the pass is as it
    /// was. The search without a cap starts from no state before the
    /// first kept after 24 operations.
    fn place_by_restart(
        &mut self,
        d: usize,
        upcoming: &[usize],
        deferred: &[usize],
        loose: &[usize],
        caps: &[Option<u32>],
    ) -> bool {
        // Spent (a broken history's pass sticks at every step): nothing to
        // try, so no copy of the state to make.
        let few = |cap: Option<u32>, pass: &Pass<'_>| cap.is_some() || pass.rescued;
        if caps.iter().all(|&cap| {
            (if few(cap, self) {
                *self.capped_steps
            } else {
                *self.restart_steps
            }) == 0
        }) {
            return false;
        }
        let (state, now, order) = (self.state.clone(), self.now, self.order.clone());
        let points = self.restart_points();
        for &cap in caps {
            for point in &points {
                let pool = match (cap, few(cap, self)) {
                    (Some(_), _) => (*self.capped_steps).min(self.cap_steps),
                    (None, true) => *self.capped_steps,
                    (None, false) => *self.restart_steps,
                };
                if pool == 0 {
                    break;
                }
                let from = point.placed;
                if from == 0 && cap.is_none() {
                    continue;
                }
                // Every kept state describes a prefix of the order as it
                // stands: those newer than a successful restart's point are
                // dropped when it succeeds (below), so none lies past the
                // end.
                assert!(
                    from <= self.order.len(),
                    "a kept state at {from} operations, past the order's {}",
                    self.order.len()
                );
                let redo: Vec<usize> = self.order.split_off(from);
                for &j in &redo {
                    self.used[j] = false;
                }
                self.state = point.state.clone();
                self.now = point.now;
                let mut steps = pool;
                let placed = self.search_from_here(
                    d,
                    upcoming,
                    deferred,
                    loose,
                    Attempt { redo: &redo, cap },
                    &mut steps,
                );
                let spent = pool - steps;
                if few(cap, self) {
                    *self.capped_steps -= spent;
                } else {
                    *self.restart_steps -= spent;
                }
                if placed {
                    // The kept states after this one describe the order
                    // that was taken back: resuming from one of them later
                    // would pair its state with operations no longer
                    // placed before it (a wrong witness, or a step placed
                    // twice).
                    self.checkpoints.retain(|k| k.placed <= from);
                    debug_assert!(
                        self.kept_states_match(),
                        "a kept state does not match the order after a restart from {from} operations"
                    );
                    self.stats.restarts += 1;
                    return true;
                }
                self.state = state.clone();
                self.now = now;
                self.order = order.clone();
                for &j in &redo {
                    self.used[j] = true;
                }
            }
        }
        false
    }

    /// Where a search from an earlier state may start, the most recent
    /// first: the kept states, and a few points just behind where the pass
    /// stands ([`NEAR_POINTS`]), their states replayed from the kept state
    /// before them. A choice a few operations back is the usual culprit
    /// (two-phase-commit seed 734003281: a write placed by its zxid just
    /// before an expiry whose zxid no reply carries, while a session's
    /// events show the expiry came first), and a kept state may be up to
    /// [`CHECKPOINT_EVERY`] operations further back, where a search must
    /// place all of them again.
    fn restart_points(&self) -> Vec<Checkpoint> {
        let mut points: Vec<Checkpoint> = Vec::new();
        for back in NEAR_POINTS {
            let Some(at) = self.order.len().checked_sub(back) else {
                continue;
            };
            if self.checkpoints.iter().any(|k| k.placed == at)
                || points.iter().any(|p| p.placed == at)
            {
                continue;
            }
            points.extend(self.state_at(at));
        }
        points.extend(self.checkpoints.iter().cloned());
        points.sort_by_key(|p| std::cmp::Reverse(p.placed));
        points
    }

    /// Whether every kept state is the state the order as it stands
    /// reaches at the kept point (replayed from the start: for debug
    /// builds, after each restart). A kept state that does not match is
    /// one a later restart would resume from with the wrong operations
    /// before it.
    fn kept_states_match(&self) -> bool {
        let mut state = self.model.init();
        let mut n = 0;
        for c in &self.checkpoints {
            if c.placed > self.order.len() {
                return false;
            }
            for &i in &self.order[n..c.placed] {
                if !self.model.step_in_place(&mut state, &self.placed[i].input) {
                    return false;
                }
            }
            n = c.placed;
            if state != c.state {
                return false;
            }
        }
        true
    }

    /// The search of [`Pass::place_by_search`], with `attempt.redo`
    /// (taken back from the order) to place again, within `steps` (less
    /// what it took, on return).
    fn search_from_here(
        &mut self,
        d: usize,
        upcoming: &[usize],
        deferred: &[usize],
        loose: &[usize],
        attempt: Attempt<'_>,
        steps: &mut u64,
    ) -> bool {
        let Attempt { redo, cap } = attempt;
        // A step that never returned is not searched for (it may come
        // anywhere later); a session's trailing events come after
        // everything of theirs, at any time ([`Pass::finish`]).
        let deadline = match (&self.placed[d].input, self.placed[d].ret_us) {
            (_, Some(r)) => r,
            (Input::End { .. }, None) => u64::MAX,
            _ => return false,
        };
        // Membership of `must` and `may` in sets, not by scanning them:
        // with thousands of operations of unknown effect (10,000
        // unanswered creates) the scans made each rescue quadratic.
        let mut must = vec![d];
        let mut may: Vec<usize> = Vec::new();
        let mut in_must: HashSet<usize> = HashSet::from([d]);
        let mut in_may: HashSet<usize> = HashSet::new();
        for &j in redo {
            // What happened must be placed again: the steps, and the
            // sessions' trailing events.
            if matches!(self.placed[j].input, Input::Step { .. } | Input::End { .. }) {
                must.push(j);
                in_must.insert(j);
            } else {
                may.push(j);
                in_may.insert(j);
            }
        }
        // The steps that come before a session's end in `may`.
        let mut ending: HashSet<usize> = HashSet::new();
        let open = |j: usize, pass: &Pass<'_>| !pass.used[j] && j != d;
        for &j in upcoming.iter().chain(deferred) {
            if !open(j, self) || in_must.contains(&j) || in_may.contains(&j) {
                continue;
            }
            let p = &self.placed[j];
            if p.ret_us.is_some_and(|r| r < self.placed[d].call_us) {
                must.push(j);
                in_must.insert(j);
            } else if p.call_us <= deadline && may.len() < 2 * WINDOW {
                may.push(j);
                in_may.insert(j);
            }
        }
        for &j in loose {
            if !open(j, self) || self.placed[j].call_us > deadline || in_may.contains(&j) {
                continue;
            }
            // A session's end comes after its remaining steps (a
            // Disconnected it saw long after, say, has no zxid to put it
            // near): they may come first too.
            if let Input::Expire { session } | Input::End { session, .. } = self.placed[j].input {
                let from = self.state.next_step(session) as usize;
                let rest = &self.steps[session][from..];
                if rest.len() > ENDING_STEPS || rest.contains(&d) {
                    continue;
                }
                for &k in rest {
                    if !in_must.contains(&k) && in_may.insert(k) {
                        may.push(k);
                    }
                    ending.insert(k);
                }
            }
            may.push(j);
            in_may.insert(j);
        }
        // With few operations of unknown effect (see CAPS): those and the
        // steps that must come before a session's end alone, one of each
        // kind (the same write of a session retried), sessions' ends
        // tried first and writes that create last.
        let redone: HashSet<usize> = redo.iter().copied().collect();
        if cap.is_some() {
            let rank = |j: &usize| match &self.placed[*j].input {
                Input::Expire { .. } | Input::End { .. } => 0,
                input if creates(input) => 2,
                _ => 1,
            };
            let mut seen: HashSet<&Input> = HashSet::new();
            may.retain(|&j| {
                let input = &self.placed[j].input;
                match input {
                    Input::Step { .. } => ending.contains(&j),
                    Input::Indeterminate { .. } if !redone.contains(&j) => seen.insert(input),
                    _ => true,
                }
            });
            may.sort_by_key(rank);
        }
        if self.without_new_writes {
            may.retain(|&j| {
                !matches!(self.placed[j].input, Input::Indeterminate { .. }) || redone.contains(&j)
            });
        }
        self.search_order(&must, &may, cap, steps)
    }

    /// The engine's search from here for an order of `must` (all placed)
    /// and any of `may`, within `steps` (less what it took, on return);
    /// on success the order found is placed.
    fn search_order(
        &mut self,
        must: &[usize],
        may: &[usize],
        cap: Option<u32>,
        steps: &mut u64,
    ) -> bool {
        let all: Vec<usize> = must.iter().chain(may).copied().collect();
        let ops: Vec<Operation<Input, ()>> = all
            .iter()
            .enumerate()
            .map(|(n, &j)| {
                let p = &self.placed[j];
                Operation {
                    client: 0,
                    input: p.input.clone(),
                    output: if n < must.len() {
                        Outcome::Known(())
                    } else {
                        Outcome::Unknown
                    },
                    call: p.call_us.max(self.now),
                    ret: p.ret_us,
                }
            })
            .collect();
        let from = From {
            model: self.model,
            start: &self.state,
            cap,
        };
        let budget = Budget {
            max_steps: *steps,
            max_memo_bytes: 16 << 20,
            stop: self.stop,
        };
        let subset: Vec<usize> = (0..ops.len()).collect();
        let (verdict, explored) = check_partition(&from, &ops, &subset, &budget);
        *steps = steps.saturating_sub(explored.steps);
        let Verdict::Linearizable(order) = verdict else {
            return false;
        };
        let chain: Vec<usize> = order.into_iter().map(|n| all[n]).collect();
        let chain = self.without_needless_loose(chain);
        self.place_all(&chain)
    }

    /// `chain` (an order the model accepts from here) without each of its
    /// operations of unknown effect that it holds without: those stay
    /// loose, for a later step that needs them. The search places such an
    /// operation wherever the model lets it, needed or not, and one placed
    /// early for nothing can contradict a later read the pass cannot then
    /// place (seed 1459879936 of mix-leader-crash-storm: a session's end
    /// and three lost writes placed seconds before reads that show they
    /// had not happened yet, further back than the kept states reach).
    fn without_needless_loose(&mut self, mut chain: Vec<usize>) -> Vec<usize> {
        let mut k = 0;
        while k < chain.len() {
            if !matches!(self.placed[chain[k]].input, Input::Step { .. }) {
                let mut without = chain.clone();
                without.remove(k);
                if self.fits(&without) {
                    chain = without;
                    continue;
                }
            }
            k += 1;
        }
        chain
    }

    /// Whether all of `chain` can be placed in order from here (nothing is
    /// placed).
    fn fits(&mut self, chain: &[usize]) -> bool {
        let saved = (self.state.clone(), self.now, self.order.len());
        let fits = self.place_all(chain);
        if fits {
            self.state = saved.0;
            self.now = saved.1;
            for j in self.order.drain(saved.2..) {
                self.used[j] = false;
            }
        }
        fits
    }

    /// The endgame, once every session step is placed. A session's
    /// trailing events were received, so its [`Input::End`] must be
    /// placed, and first: a loose write placed before it would have to be
    /// among its events if it triggers one of its watches. Each is placed
    /// where it stands, else after one loose operation, else by the
    /// searches with few operations of unknown effect, from here and from
    /// the kept states, else by the searches without a cap — the capped
    /// ones first because here the loose operations are all that is left
    /// and an uncapped search over all of them spends its steps for
    /// nothing (two-phase-commit seed 734003258: two sessions' trailing
    /// events need an expiry placed a few steps back, before the last
    /// writes, which the pass had placed after them). The endgame has
    /// steps of its own ([`ENDGAME_STEPS`]), not what the pass left. The
    /// other loose operations happened after everything seen, or never:
    /// each is placed last where the model takes it (in call order, until
    /// none more fits) and left out where it does not. `Err` names the
    /// end it could not place.
    fn finish(&mut self, loose: &[usize]) -> Result<(), usize> {
        *self.restart_steps = (*self.restart_steps).max(ENDGAME_STEPS);
        *self.capped_steps = (*self.capped_steps).max(ENDGAME_STEPS);
        self.cap_steps = ENDGAME_CAP_STEPS;
        let ends: Vec<usize> = loose
            .iter()
            .copied()
            .filter(|&j| matches!(self.placed[j].input, Input::End { .. }))
            .collect();
        for end in ends {
            if self.used[end] || self.place(end) {
                continue;
            }
            let open: Vec<usize> = loose.iter().copied().filter(|&j| !self.used[j]).collect();
            let few = CAPS.map(Some);
            let mut placed = self.place_after_loose(end, &open);
            // First without the writes of unknown outcome still loose:
            // each may be placed anywhere, and a search with a dozen of
            // them spends its steps on where they go, when what is
            // missing is an expiry (the seed above: placed in 1,485 steps
            // without them, not in 20,000 with them).
            for without in [true, false] {
                self.without_new_writes = without;
                placed = placed
                    || few
                        .iter()
                        .any(|&cap| self.place_by_search(end, &[], &[], &open, cap))
                    || self.place_by_restart(end, &[], &[], &open, &few)
                    || self.place_by_search(end, &[], &[], &open, None)
                    || self.place_by_restart(end, &[], &[], &open, &[None]);
            }
            self.without_new_writes = false;
            if !placed && !self.place_by_move(end, &open) {
                return Err(end);
            }
        }
        let mut left: Vec<usize> = loose.iter().copied().filter(|&j| !self.used[j]).collect();
        loop {
            let before = left.len();
            left.retain(|&j| !self.place(j));
            if left.len() == before {
                break;
            }
        }
        // A restart above may have taken back an end placed before it;
        // every restart's search places the ends it took back (they are
        // required), so none is left here.
        debug_assert!(
            left.iter()
                .all(|&j| !matches!(self.placed[j].input, Input::End { .. })),
            "a session's trailing events left unplaced"
        );
        Ok(())
    }

    /// Places what was deferred and now fits, until nothing more does.
    fn drain(&mut self, deferred: &mut Vec<usize>) {
        loop {
            let before = deferred.len();
            deferred.retain(|&d| !self.place(d));
            if deferred.len() == before {
                return;
            }
        }
    }
}

/// The fast path: the session steps in zxid order ([`keys`]); a step the
/// model refuses there is tried after an operation of unknown effect, and
/// else deferred and tried again after each later placement, until its
/// window would close. The operations of unknown effect not needed on the
/// way are placed last (or never happen). `Ok(order)` is a witness that
/// the history satisfies the rules; `Err` says nothing about the history,
/// only where this pass stopped.
pub fn fast_path(model: &ZkModel, placed: &[Placed]) -> Result<Vec<usize>, Stuck> {
    fast_path_counted(model, placed, &mut FastStats::default(), None)
}

/// [`fast_path`], counting into `stats` what its remedies did, and
/// giving up (stuck where it was) when `stop` says so.
pub fn fast_path_counted(
    model: &ZkModel,
    placed: &[Placed],
    stats: &mut FastStats,
    stop: Stop<'_>,
) -> Result<Vec<usize>, Stuck> {
    let keys = keys(model, placed);
    // A step the model refuses where its zxid puts it is usually waiting
    // for an operation of unknown effect (tried at once), or for one that
    // comes a little later in zxid order (tried by deferring it); each
    // order of the two remedies decides histories the other does not.
    // A third waits as long as it can: a deferred step is tried after an
    // operation of unknown effect only before a write is placed (which
    // may change what the step needs: seed 1309409292 of revocable-lock,
    // a read of a version an unanswered setData made, then a delete).
    let mut best: Option<Stuck> = None;
    let mut restart_steps = RESTART_STEPS;
    let mut capped_steps = CAPPED_RESTART_STEPS;
    for remedy in [Remedy::LooseFirst, Remedy::Defer, Remedy::DeferUntilWrite] {
        let budgets = Budgets {
            restart_steps: &mut restart_steps,
            capped_steps: &mut capped_steps,
            stats,
            stop,
        };
        // The first pass always runs (a stopped one ends at its first
        // rescue), so that there is a stuck step to report.
        if best.is_some() && stop.is_some_and(|stop| stop().is_some()) {
            break;
        }
        match pass(model, placed, &keys, remedy, budgets) {
            Ok(order) => return Ok(order),
            Err(s) => {
                if best.as_ref().is_none_or(|b| s.order.len() > b.order.len()) {
                    best = Some(s);
                }
            }
        }
    }
    Err(best.expect("the first pass ran"))
}

/// What a pass does first with a step the model refuses where its zxid
/// puts it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Remedy {
    /// Try it after an operation of unknown effect, else defer it.
    LooseFirst,
    /// Defer it; after an operation of unknown effect only when its
    /// window closes.
    Defer,
    /// Defer it; after an operation of unknown effect before the next
    /// write is placed, or when its window closes.
    DeferUntilWrite,
}

/// What the passes of one fast path share: the steps left for the
/// searches from kept states, and the counts of what the remedies did.
struct Budgets<'b> {
    restart_steps: &'b mut u64,
    capped_steps: &'b mut u64,
    stats: &'b mut FastStats,
    stop: Stop<'b>,
}

/// One greedy pass (see [`fast_path`]) with the given remedy.
fn pass(
    model: &ZkModel,
    placed: &[Placed],
    keys: &[Key],
    remedy: Remedy,
    budgets: Budgets<'_>,
) -> Result<Vec<usize>, Stuck> {
    let Budgets {
        restart_steps,
        capped_steps,
        stats,
        stop,
    } = budgets;
    let (mut sure, mut loose): (Vec<usize>, Vec<usize>) =
        (0..placed.len()).partition(|&i| matches!(placed[i].input, Input::Step { .. }));
    sure.sort_by_key(|&i| keys[i]);
    loose.sort_by_key(|&i| (placed[i].call_us, i));
    let mut steps = vec![Vec::new(); model.sessions.len()];
    let mut end = vec![None; model.sessions.len()];
    for (i, p) in placed.iter().enumerate() {
        match p.input {
            Input::Step { session, .. } => steps[session].push(i),
            Input::End { session, .. } => end[session] = Some(i),
            _ => {}
        }
    }
    let mut pass = Pass {
        model,
        placed,
        state: model.init(),
        now: 0,
        order: Vec::with_capacity(placed.len()),
        used: vec![false; placed.len()],
        steps,
        end,
        checkpoints: Vec::new(),
        restart_steps,
        capped_steps,
        rescued: false,
        stats,
        cap_steps: CAP_STEPS,
        without_new_writes: false,
        stop,
    };
    let mut deferred: Vec<usize> = Vec::new();
    let stuck = |pass: Pass<'_>, d: usize| Stuck {
        at_us: placed[d].ret_us.unwrap_or(u64::MAX),
        op: d,
        order: pass.order,
    };
    for (n, &i) in sure.iter().enumerate() {
        if pass.used[i] {
            continue;
        }
        if pass
            .checkpoints
            .last()
            .is_none_or(|c| c.placed + CHECKPOINT_EVERY <= pass.order.len())
        {
            if pass.checkpoints.len() == CHECKPOINTS {
                pass.checkpoints.remove(0);
            }
            pass.checkpoints.push(Checkpoint {
                placed: pass.order.len(),
                state: pass.state.clone(),
                now: pass.now,
            });
        }
        // Placing `i` moves time to its call: what was deferred and
        // returned before then must be placed first, or never can be.
        while let Some(at) = deferred
            .iter()
            .position(|&d| placed[d].ret_us.is_some_and(|r| r < placed[i].call_us))
        {
            let d = deferred.remove(at);
            let upcoming = &sure[n..(n + WINDOW).min(sure.len())];
            if !pass.rescue(d, upcoming, &deferred, &loose) {
                return Err(stuck(pass, d));
            }
            deferred.retain(|&j| !pass.used[j]);
            pass.drain(&mut deferred);
        }
        if pass.used[i] {
            continue;
        }
        if remedy == Remedy::DeferUntilWrite
            && !deferred.is_empty()
            && matches!(
                placed[i].input,
                Input::Step {
                    kind: StepKind::Write { .. } | StepKind::Close,
                    ..
                }
            )
        {
            for d in std::mem::take(&mut deferred) {
                if !pass.used[d] && !pass.place_after_loose(d, &loose) {
                    deferred.push(d);
                }
            }
            pass.drain(&mut deferred);
        }
        if pass.used[i] {
            continue;
        }
        let loose_first = remedy == Remedy::LooseFirst;
        if pass.place(i) || (loose_first && pass.place_after_loose(i, &loose)) {
            pass.drain(&mut deferred);
        } else {
            deferred.push(i);
        }
    }
    while !deferred.is_empty() {
        let d = deferred.remove(0);
        if !pass.rescue(d, &[], &deferred, &loose) {
            return Err(stuck(pass, d));
        }
        deferred.retain(|&j| !pass.used[j]);
        pass.drain(&mut deferred);
    }
    match pass.finish(&loose) {
        Ok(()) => Ok(pass.order),
        Err(d) => Err(stuck(pass, d)),
    }
}

/// What a local search places again, and how many operations of unknown
/// effect it may place ([`CAPS`]; None: any).
#[derive(Clone, Copy)]
struct Attempt<'s> {
    /// Taken back from the order (a search from a kept state).
    redo: &'s [usize],
    cap: Option<u32>,
}

/// The orders [`Pass::place_by_move`] tries for `tail` (placed in this
/// order, verified) and then `d`, each ending with `d`, at most
/// `2 · tail.len()²` of them:
/// - first, every operation called after `d` returned moved after `d`: one
///   placed by its zxid before `d` though called after `d` returned (a
///   read a lagging server answered) closes `d`'s window (two-phase-commit
///   seed 734003228);
/// - then each operation, the latest first, moved to each other place in
///   the tail, its session's operations in between moved with it so that
///   they stay on the same side (a write placed by its zxid before an
///   expiry whose zxid no reply carries, while a session's events show the
///   expiry came first, the session's last step with it: two-phase-commit
///   seed 734003281);
/// - or, for one of unknown effect, taken out;
/// - last, each of `spare` (operations of unknown effect not placed)
///   inserted at each place in the tail, the latest first (an expiry
///   whose events a session received before those of an expiry placed
///   since: two-phase-commit seed 734003286).
fn moves<'a>(
    placed: &'a [Placed],
    tail: &'a [usize],
    d: usize,
    spare: &'a [usize],
) -> impl Iterator<Item = Vec<usize>> + 'a {
    let late = placed[d].ret_us.map(|r| {
        let (after, before): (Vec<usize>, Vec<usize>) =
            tail.iter().partition(|&&j| placed[j].call_us > r);
        before.into_iter().chain([d]).chain(after).collect()
    });
    let session = move |j: usize| placed[j].input.session();
    let moved = (0..tail.len()).rev().flat_map(move |x| {
        let moved = tail[x];
        let mine = move |j: &&usize| session(**j) == session(moved);
        let out = !matches!(placed[moved].input, Input::Step { .. } | Input::End { .. });
        let earlier = (0..x).map(move |t| {
            let between = &tail[t..x];
            (tail[..t].iter())
                .chain(between.iter().filter(mine))
                .chain([&moved])
                .chain(between.iter().filter(move |j| !mine(j)))
                .chain(&tail[x + 1..])
                .chain([&d])
                .copied()
                .collect()
        });
        let later = (x + 2..=tail.len()).map(move |t| {
            let between = &tail[x + 1..t];
            (tail[..x].iter())
                .chain(between.iter().filter(move |j| !mine(j)))
                .chain([&moved])
                .chain(between.iter().filter(mine))
                .chain(&tail[t..])
                .chain([&d])
                .copied()
                .collect()
        });
        let without = out.then(|| {
            (tail[..x].iter())
                .chain(&tail[x + 1..])
                .chain([&d])
                .copied()
                .collect()
        });
        earlier.chain(later).chain(without)
    });
    let inserted = spare.iter().flat_map(move |&j| {
        (0..=tail.len()).rev().map(move |t| {
            (tail[..t].iter())
                .chain([&j])
                .chain(&tail[t..])
                .chain([&d])
                .copied()
                .collect()
        })
    });
    late.into_iter().chain(moved).chain(inserted)
}

/// The orders [`Pass::place_by_move`] tries last for `tail`: one operation
/// of unknown effect in it swapped for one of `spare` — in its place
/// first, then at each other place. Where a session sent the same write
/// again after losing its reply, the pass may have placed the attempt
/// that did not take effect (two-phase-commit seeds 734003412, 734004134,
/// 734004328, 734004611 and 734004804, all decided by a swap).
fn swaps<'a>(
    placed: &'a [Placed],
    tail: &'a [usize],
    spare: &'a [usize],
) -> impl Iterator<Item = Vec<usize>> + 'a {
    let loose = (0..tail.len())
        .rev()
        .filter(|&x| !matches!(placed[tail[x]].input, Input::Step { .. }));
    loose.flat_map(move |x| {
        let mut rest = tail.to_vec();
        rest.remove(x);
        let places = std::iter::once(x).chain((0..=rest.len()).rev().filter(move |&t| t != x));
        let places: Vec<usize> = places.collect();
        spare.iter().flat_map(move |&j| {
            let rest = rest.clone();
            places.clone().into_iter().map(move |t| {
                let mut v = rest.clone();
                v.insert(t, j);
                v
            })
        })
    })
}

/// Whether `input` is a write of unknown outcome that may create a node
/// (a create, or a multi with one).
fn creates(input: &Input) -> bool {
    match input {
        Input::Indeterminate { op, .. } => match op {
            Op::Create { .. } => true,
            Op::Multi(ops) => ops.iter().any(|o| matches!(o, MultiOp::Create { .. })),
            _ => false,
        },
        _ => false,
    }
}

/// The contract's model started from a given state (a local search after
/// a verified prefix), with at most `cap` operations of unknown effect
/// placed, if capped: the state counts them.
struct From<'a> {
    model: &'a ZkModel<'a>,
    start: &'a State,
    cap: Option<u32>,
}

impl<'a> lin::Model for From<'a> {
    type State = (State, u32);
    type Input = Input<'a>;
    type Output = ();

    fn init(&self) -> (State, u32) {
        (self.start.clone(), 0)
    }

    fn state_bytes(&self) -> usize {
        STATE_BYTES
    }

    fn step(&self, state: &(State, u32), input: &Input, _: Outcome<&()>) -> Step<(State, u32)> {
        let (state, n) = state;
        // A session's trailing events are required where they are
        // searched for (the endgame), so they are not one of the few.
        let loose = matches!(input, Input::Indeterminate { .. } | Input::Expire { .. });
        let counted = loose && self.cap.is_some();
        if counted && self.cap.is_some_and(|cap| *n >= cap) {
            return Step::Impossible;
        }
        match self.model.step(state, input) {
            // An operation of unknown effect that changes nothing is not
            // one of the few.
            Some(next) if counted && next == *state => Step::Unchanged,
            Some(next) => Step::To((next, n + u32::from(counted))),
            None => Step::Impossible,
        }
    }

    fn describe_op(&self, input: &Input, output: Outcome<&()>) -> String {
        lin::Model::describe_op(self.model, input, output)
    }

    fn describe_state(&self, state: &(State, u32)) -> String {
        lin::Model::describe_state(self.model, &state.0)
    }
}
