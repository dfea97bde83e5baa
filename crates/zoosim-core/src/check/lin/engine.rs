//! The search itself: Lowe's just-in-time linearization over a doubly
//! linked list of call and return entries, with an undo stack and a memo
//! of explored (linearized set, state) configurations.
//!
//! Memory is what bounds such a search, so the memo keeps no per-entry
//! allocation: linearized sets live side by side in one arena of words,
//! the table holds only indices into it, and a set's hash is kept up to
//! date as operations come and go (one random word per operation, xor-ed
//! in and out), so finding a configuration costs one hash of nothing.
//! Model states are interned: each distinct state is stored once and the
//! memo and the undo stack name it by number.

use std::hash::{Hash, Hasher};

use hashbrown::HashTable;

use super::{
    Budget, Checked, Diagnosis, Exhausted, Explored, Linearized, Model, Operation, Options,
    PartitionResult, Step, Verdict,
};

/// No entry: the end of the list.
const NIL: u32 = u32::MAX;

/// How often (in steps) the memory bound and the stop callback are polled.
/// Often: a step of the ZooKeeper contract's model over a history of
/// 10,000 sessions took 15 ms, and 4,096 of them a minute past a 2 s
/// bound; a poll (a clock read and a few counters) costs nanoseconds.
pub const POLL_EVERY: u64 = 64;

/// The first round's step budget per partition (see [`check`]).
const FIRST_ROUND_STEPS: u64 = 1 << 16;

/// Checks every partition of `ops` against `model` (see the module's
/// documentation), within `options.budget` (its step bound is shared by
/// all partitions).
///
/// Partitions are checked in rounds: each undecided one gets a step
/// budget that grows eightfold from round to round (a partition that runs
/// out is started again with more). So the easy partitions are decided
/// first, a failing one is found without waiting on a hard one before it
/// (`first_failure` then stops there), and the work lost to restarts is a
/// bounded fraction of the last round's.
pub fn check<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    options: &Options<'_>,
) -> Checked {
    let partitions = model.partition(ops);
    let mut results: Vec<Option<(Verdict, Explored)>> = vec![None; partitions.len()];
    let mut used: u64 = 0;
    let mut round = FIRST_ROUND_STEPS;
    'rounds: loop {
        for (k, partition) in partitions.iter().enumerate() {
            if results[k].is_some() {
                continue;
            }
            let failed = results
                .iter()
                .any(|r| matches!(r, Some((Verdict::NotLinearizable(_), _))));
            if failed && options.first_failure {
                break 'rounds;
            }
            let left = options.budget.max_steps.saturating_sub(used);
            // The last undecided partition waits on nothing: all it may.
            let alone = results.iter().filter(|r| r.is_none()).count() == 1;
            let round = if alone { u64::MAX } else { round };
            let budget = Budget {
                max_steps: left.min(round),
                ..options.budget
            };
            let (verdict, explored) = check_partition(model, ops, &partition.ops, &budget);
            used = used.saturating_add(explored.steps);
            // Out of this round's steps only: again in the next round.
            let again = verdict == Verdict::Unknown(Exhausted::Steps) && round < left;
            if !again {
                results[k] = Some((verdict, explored));
            }
        }
        if results.iter().all(Option::is_some) || used >= options.budget.max_steps {
            break;
        }
        round = round.saturating_mul(8);
    }
    let partitions = partitions
        .into_iter()
        .zip(results)
        .map(|(partition, result)| {
            let (verdict, explored) = result.unwrap_or((
                if options.first_failure {
                    Verdict::NotChecked
                } else {
                    Verdict::Unknown(Exhausted::Steps)
                },
                Explored::default(),
            ));
            PartitionResult {
                partition,
                verdict,
                explored,
            }
        })
        .collect();
    Checked { partitions }
}

/// The steps the model's own search takes on a partition before a coarser
/// model ([`Model::coarser`]), if there is one, is tried.
const FIRST_SLICE: u64 = 1 << 16;

/// The steps the search for a diagnosis may take once a coarser model has
/// shown a partition is not linearizable.
const DIAGNOSIS_STEPS: u64 = 1 << 20;

/// Checks the operations `subset` (indices into `ops`) as one history,
/// whatever the model's partitions.
///
/// The model's own search runs first. If it is not decided within a first
/// slice of steps and the model has a coarser version
/// ([`Model::coarser`]), that one is searched: a history it rejects is
/// not linearizable (its few states are exhausted quickly where the
/// model's many are not), and the diagnosis is then found by the model's
/// search on the coarser search's longest prefix; a history it accepts
/// comes with a witness order, which the model's search then follows
/// first (it is right about everything but what the coarser model
/// forgets).
pub fn check_partition<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    subset: &[usize],
    budget: &Budget<'_>,
) -> (Verdict, Explored) {
    decide(model, ops, subset, budget, true)
}

/// [`check_partition`], and with `diagnose` false a failure shown by the
/// coarser model comes with the model's own deepest prefix so far rather
/// than with a search for the longest (for callers that need only the
/// verdict).
pub(super) fn decide<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    subset: &[usize],
    budget: &Budget<'_>,
    diagnose: bool,
) -> (Verdict, Explored) {
    decide_after(model, ops, subset, budget, diagnose, FIRST_SLICE)
}

/// [`decide`], the model's own search first taking at most `slice` steps
/// (tests pass 0 to go to the coarser model at once).
pub(super) fn decide_after<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    subset: &[usize],
    budget: &Budget<'_>,
    diagnose: bool,
    slice: u64,
) -> (Verdict, Explored) {
    let mut search = Search::new(model, ops, subset, None);
    let coarser = model.coarser();
    let first = match coarser {
        Some(_) => Budget {
            max_steps: (budget.max_steps / 4).min(slice),
            ..*budget
        },
        None => *budget,
    };
    let outcome = search.run(&first);
    let (Some(coarser), Err(Exhausted::Steps)) = (coarser, outcome) else {
        return search.finish(outcome, 0);
    };
    if first.max_steps >= budget.max_steps {
        return search.finish(outcome, 0);
    }
    let mut used = search.steps;
    let left = |used: u64| Budget {
        max_steps: budget.max_steps.saturating_sub(used),
        ..*budget
    };
    let mut coarse = Search::new(&coarser, ops, subset, None);
    let coarse_outcome = coarse.run(&left(used));
    used = used.saturating_add(coarse.steps);
    match coarse_outcome {
        Ok(false) if !diagnose => {
            search.stack.clear();
            let (verdict, explored) = search.finish(Ok(false), 0);
            (
                verdict,
                Explored {
                    steps: used,
                    ..explored
                },
            )
        }
        Ok(false) => {
            // Not linearizable. The coarser search's longest prefix is at
            // least as long as any of the model's; the model's search on
            // its operations alone orders them, unless the coarser model
            // forgot what rules that prefix out (then the model's own
            // deepest prefix so far stands).
            let prefix: Vec<usize> = coarse.deepest.iter().map(|&i| subset[i as usize]).collect();
            let rank = (0..prefix.len() as u32).collect();
            let mut guided = Search::new(model, ops, &prefix, Some(rank));
            guided.stage_by_reads();
            let diagnosis_budget = Budget {
                max_steps: DIAGNOSIS_STEPS.min(left(used).max_steps),
                ..*budget
            };
            let found = guided.run(&diagnosis_budget);
            used = used.saturating_add(guided.steps);
            if found == Ok(true) {
                let position: std::collections::BTreeMap<usize, u32> = subset
                    .iter()
                    .enumerate()
                    .map(|(k, &g)| (g, k as u32))
                    .collect();
                let order: Vec<u32> = guided
                    .stack
                    .iter()
                    .map(|&(i, _)| position[&prefix[i as usize]])
                    .collect();
                if order.len() >= search.deepest.len() {
                    search.deepest = order;
                }
            }
            search.stack.clear();
            let (verdict, explored) = search.finish(Ok(false), 0);
            let explored = Explored {
                steps: used,
                memo_entries: explored.memo_entries.max(coarse.memo.len()),
                states: explored.states.max(coarse.states.len()),
                ..explored
            };
            (verdict, explored)
        }
        Ok(true) => {
            // Linearizable for the coarser model: the model's search again,
            // first kept to the coarser witness's stages (usually right,
            // and fast), then free (trying first what the witness did).
            let order: Vec<u32> = coarse.stack.iter().map(|&(i, _)| i).collect();
            let mut staged = Search::new(model, ops, subset, Some(coarse.rank_of(&order)));
            staged.stage_by_reads();
            let staged_budget = Budget {
                max_steps: DIAGNOSIS_STEPS.min(left(used).max_steps),
                ..*budget
            };
            let outcome = staged.run(&staged_budget);
            used = used.saturating_add(staged.steps);
            if outcome == Ok(true) {
                return staged.finish(outcome, used - staged.steps);
            }
            let mut again = Search::new(model, ops, subset, Some(coarse.rank_of(&order)));
            let outcome = again.run(&left(used));
            again.finish(outcome, used)
        }
        Err(why) => {
            let (verdict, explored) = search.finish(Err(why), 0);
            (
                verdict,
                Explored {
                    steps: used,
                    ..explored
                },
            )
        }
    }
}

/// One entry of the list: an operation's call or return.
#[derive(Clone, Copy)]
struct Entry {
    /// The operation (index into the subset).
    op: u32,
    /// A call entry (else a return entry).
    call: bool,
    prev: u32,
    next: u32,
}

struct Search<'a, M: Model> {
    model: &'a M,
    ops: &'a [Operation<M::Input, M::Output>],
    subset: &'a [usize],
    /// Entry 0 is the list's head (a sentinel); then entries in time order.
    entries: Vec<Entry>,
    /// Per operation: its call entry, and its return entry (`NIL` for an
    /// operation whose outcome is unknown: it need never be linearized).
    call_entry: Vec<u32>,
    ret_entry: Vec<u32>,
    /// Per operation: its word in the linearized set's hash.
    zobrist: Vec<u64>,
    /// Words per linearized set.
    words: usize,
    /// The linearized set and its hash.
    bits: Vec<u64>,
    bits_hash: u64,
    /// Interned model states, and each one's hash (so that growing the
    /// table hashes no state again: a model's state can be a whole data
    /// tree).
    states: Vec<M::State>,
    state_hashes: Vec<u64>,
    state_table: HashTable<u32>,
    /// The memo: indices of configurations, whose sets are `arena[k *
    /// words..]` and states `memo_state[k]`.
    memo: HashTable<u32>,
    arena: Vec<u64>,
    memo_state: Vec<u32>,
    /// Per configuration: its hash (so that growing the table hashes
    /// nothing again).
    memo_hash: Vec<u64>,
    /// The undo stack: operations linearized, with the state before each.
    stack: Vec<(u32, u32)>,
    /// Per operation: read-only ([`Model::read_only`]).
    read_only: Vec<bool>,
    /// Per stack entry: linearized as a read-only operation the moment
    /// it could be, so undoing it undoes the choice before it too.
    forced: Vec<bool>,
    /// The state now.
    current: u32,
    /// Operations with a known outcome: how many, how many linearized.
    known: usize,
    known_done: usize,
    steps: u64,
    /// The longest linearized prefix met at a dead end.
    deepest: Vec<u32>,
    /// The order in which candidates are tried: `None`, as the list has
    /// them (by call; the cursor is then an entry), else by this rank per
    /// operation (the cursor is then the least rank left to try).
    rank: Option<Vec<u32>>,
    /// With a rank, optionally: per operation its stage, and per stage how
    /// many of its operations with a known outcome are left. Only the
    /// first stage with some left (and those before it) may go next.
    stages: Option<(Vec<u32>, Vec<u32>)>,
}

/// No candidate left to try (a cursor past every entry and every rank).
const DONE: u32 = u32::MAX;

impl<'a, M: Model> Search<'a, M> {
    fn new(
        model: &'a M,
        ops: &'a [Operation<M::Input, M::Output>],
        subset: &'a [usize],
        rank: Option<Vec<u32>>,
    ) -> Self {
        let n = subset.len();
        // (time, return?, op): a call sorts before a return at the same
        // time, so equal times count as concurrent (the lenient reading).
        let mut events: Vec<(u64, bool, u32)> = Vec::with_capacity(2 * n);
        let mut known = 0;
        for (i, &g) in subset.iter().enumerate() {
            let op = &ops[g];
            events.push((op.call, false, i as u32));
            if op.output.is_known() {
                known += 1;
                let ret = op.ret.unwrap_or(u64::MAX).max(op.call);
                events.push((ret, true, i as u32));
            }
        }
        events.sort_unstable();
        let mut entries = Vec::with_capacity(events.len() + 1);
        entries.push(Entry {
            op: NIL,
            call: false,
            prev: NIL,
            next: if events.is_empty() { NIL } else { 1 },
        });
        let mut call_entry = vec![NIL; n];
        let mut ret_entry = vec![NIL; n];
        for (k, &(_, ret, op)) in events.iter().enumerate() {
            let at = k as u32 + 1;
            entries.push(Entry {
                op,
                call: !ret,
                prev: at - 1,
                next: if k + 1 == events.len() { NIL } else { at + 1 },
            });
            if ret {
                ret_entry[op as usize] = at;
            } else {
                call_entry[op as usize] = at;
            }
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let zobrist = (0..n).map(|_| splitmix(&mut seed)).collect();
        let words = n.div_ceil(64).max(1);
        let mut search = Search {
            model,
            ops,
            subset,
            entries,
            call_entry,
            ret_entry,
            zobrist,
            words,
            bits: vec![0; words],
            bits_hash: 0,
            states: Vec::new(),
            state_hashes: Vec::new(),
            state_table: HashTable::new(),
            memo: HashTable::new(),
            arena: Vec::new(),
            memo_state: Vec::new(),
            memo_hash: Vec::new(),
            stack: Vec::new(),
            read_only: subset
                .iter()
                .map(|&g| model.read_only(&ops[g].input, ops[g].output.as_ref()))
                .collect(),
            forced: Vec::new(),
            current: 0,
            known,
            known_done: 0,
            steps: 0,
            deepest: Vec::new(),
            rank,
            stages: None,
        };
        search.current = search.intern(model.init());
        search
    }

    /// Ok(true): linearizable (the stack is a witness); Ok(false): not.
    fn run(&mut self, budget: &Budget<'_>) -> Result<bool, Exhausted> {
        let mut at = self.first();
        loop {
            if self.known_done == self.known {
                return Ok(true);
            }
            if self.steps >= budget.max_steps {
                return Err(Exhausted::Steps);
            }
            self.steps += 1;
            if self.steps % POLL_EVERY == 0 {
                if self.memory() > budget.max_memo_bytes {
                    return Err(Exhausted::Memory);
                }
                if let Some(why) = budget.stop.and_then(|stop| stop()) {
                    return Err(why);
                }
            }
            // The list always holds the return entry of an operation not
            // yet linearized while one is left, so a candidate is tried
            // or the configuration is a dead end.
            if let Some(i) = self.candidate(at) {
                let op = &self.ops[self.subset[i]];
                let next = match self.model.step(
                    &self.states[self.current as usize],
                    &op.input,
                    op.output.as_ref(),
                ) {
                    Step::Impossible => {
                        at = self.after(i);
                        continue;
                    }
                    Step::Unchanged => self.current,
                    Step::To(state) => self.intern(state),
                };
                let known = op.output.is_known();
                if !known && next == self.current {
                    // An operation that need not take effect, taking
                    // effect without effect: the configuration it leads
                    // to has one fewer choice than this one (where it can
                    // still come later, or never), so it is not worth a
                    // visit.
                    at = self.after(i);
                    continue;
                }
                if self.erases_unknown(i, next) {
                    at = self.after(i);
                    continue;
                }
                self.flip(i);
                if self.remember(next) {
                    self.forced.push(self.read_only[i] && next == self.current);
                    self.stack.push((i as u32, self.current));
                    self.current = next;
                    self.lift(i);
                    if known {
                        self.known_done += 1;
                        if let Some((of, left)) = &mut self.stages {
                            left[of[i] as usize] -= 1;
                        }
                    }
                    at = self.first();
                } else {
                    self.flip(i);
                    // A read that can happen here but was explored from
                    // here before: this configuration is a dead end too
                    // (see below); otherwise try the next.
                    at = if self.read_only[i] && next == self.current {
                        DONE
                    } else {
                        self.after(i)
                    };
                }
            } else {
                if self.stack.len() > self.deepest.len() {
                    self.deepest = self.stack.iter().map(|&(i, _)| i).collect();
                }
                // Undo the last choice, and the read-only operations
                // linearized right after it were no choice: a read that
                // can happen now is as well here as anywhere later, so a
                // dead end after it is one without it.
                loop {
                    let Some((i, before)) = self.stack.pop() else {
                        return Ok(false);
                    };
                    let forced = self.forced.pop().unwrap_or(false);
                    let i = i as usize;
                    self.flip(i);
                    self.current = before;
                    self.unlift(i);
                    if self.ops[self.subset[i]].output.is_known() {
                        self.known_done -= 1;
                        if let Some((of, left)) = &mut self.stages {
                            left[of[i] as usize] += 1;
                        }
                    }
                    if !forced {
                        at = self.after(i);
                        break;
                    }
                }
            }
        }
    }

    /// Whether operation `i`, leading to state `next`, would follow an
    /// operation of unknown outcome (the last linearized) whose effect it
    /// erases: it leads to `next` from the state before that one too. Then
    /// the configuration it leads to is subsumed by the one reached by
    /// placing `i` first and the unknown one later or never (the same
    /// state and known operations, one fewer choice spent), which the
    /// search explores from the configuration before: so operations of
    /// unknown outcome are placed only where what follows needs them, and
    /// a run of them (each erasing the one before) is never tried.
    fn erases_unknown(&self, i: usize, next: u32) -> bool {
        let Some(&(top, before)) = self.stack.last() else {
            return false;
        };
        if self.ops[self.subset[top as usize]].output.is_known() {
            return false;
        }
        let op = &self.ops[self.subset[i]];
        match self
            .model
            .step(&self.states[before as usize], &op.input, op.output.as_ref())
        {
            Step::Impossible => false,
            Step::Unchanged => before == next,
            Step::To(state) => self.states[next as usize] == state,
        }
    }

    /// The cursor at a configuration just reached: every candidate left.
    fn first(&self) -> u32 {
        match self.rank {
            None => self.entries[0].next,
            Some(_) => 0,
        }
    }

    /// The cursor once operation `i` (in the list) has been tried.
    fn after(&self, i: usize) -> u32 {
        match &self.rank {
            None => self.entries[self.call_entry[i] as usize].next,
            Some(rank) => rank[i].saturating_add(1),
        }
    }

    /// The operation to try at cursor `at`, if any: a call entry before
    /// the list's first return entry (an operation that may come next),
    /// the next one in the list, or the one of least rank not below `at`.
    fn candidate(&self, at: u32) -> Option<usize> {
        match &self.rank {
            None => {
                if at == NIL {
                    return None;
                }
                let entry = self.entries[at as usize];
                entry.call.then_some(entry.op as usize)
            }
            Some(rank) => {
                if at == DONE {
                    return None;
                }
                let stage = self.stages.as_ref().map(|(of, left)| {
                    let now = left.iter().position(|&n| n > 0).unwrap_or(left.len());
                    (of, now as u32)
                });
                let mut best: Option<(u32, usize)> = None;
                let mut e = self.entries[0].next;
                while e != NIL {
                    let entry = self.entries[e as usize];
                    if !entry.call {
                        break;
                    }
                    let r = rank[entry.op as usize];
                    let staged = stage.is_none_or(|(of, now)| of[entry.op as usize] <= now);
                    if r >= at && staged && best.is_none_or(|(b, _)| r < b) {
                        best = Some((r, entry.op as usize));
                    }
                    e = entry.next;
                }
                best.map(|(_, i)| i)
            }
        }
    }

    /// The verdict and what was explored, from [`Search::run`]'s outcome
    /// (`extra` steps taken by other searches on the way).
    fn finish(&self, outcome: Result<bool, Exhausted>, extra: u64) -> (Verdict, Explored) {
        let explored = Explored {
            steps: self.steps.saturating_add(extra),
            memo_entries: self.memo.len(),
            states: self.states.len(),
            deepest: self.deepest.len().max(self.stack.len()),
        };
        let verdict = match outcome {
            Ok(true) => Verdict::Linearizable(
                self.stack
                    .iter()
                    .map(|&(i, _)| self.subset[i as usize])
                    .collect(),
            ),
            Ok(false) => Verdict::NotLinearizable(self.diagnose()),
            Err(why) => Verdict::Unknown(why),
        };
        (verdict, explored)
    }

    /// Cuts the search's operations, in rank order, into stages that each
    /// end with a read-only operation, and keeps the search to them in
    /// order: the coarser model's prefix has its reads where they can be,
    /// and what it may have wrong is the order within a stage. (A
    /// restriction: it may miss an order the model allows.)
    fn stage_by_reads(&mut self) {
        let Some(rank) = &self.rank else {
            return;
        };
        let mut by_rank: Vec<usize> = (0..self.subset.len()).collect();
        by_rank.sort_by_key(|&i| rank[i]);
        let mut of = vec![0u32; self.subset.len()];
        let mut left = vec![0u32];
        for i in by_rank {
            let stage = left.len() - 1;
            of[i] = stage as u32;
            if self.ops[self.subset[i]].output.is_known() {
                left[stage] += 1;
            }
            if self.read_only[i] {
                left.push(0);
            }
        }
        self.stages = Some((of, left));
    }

    /// Ranks for a search on the same operations that tries first what
    /// `order` did: its operations in its order, then the others.
    fn rank_of(&self, order: &[u32]) -> Vec<u32> {
        let n = self.subset.len() as u32;
        let mut rank: Vec<u32> = (0..n).map(|i| n + i).collect();
        for (k, &i) in order.iter().enumerate() {
            rank[i as usize] = k as u32;
        }
        rank
    }

    /// Adds or removes operation `i` from the linearized set.
    fn flip(&mut self, i: usize) {
        self.bits[i / 64] ^= 1 << (i % 64);
        self.bits_hash ^= self.zobrist[i];
    }

    /// Records (linearized set, `state`); false if it was there already.
    fn remember(&mut self, state: u32) -> bool {
        let hash = mix(self.bits_hash ^ u64::from(state).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let (words, arena, memo_state, memo_hash, bits) = (
            self.words,
            &self.arena,
            &self.memo_state,
            &self.memo_hash,
            &self.bits,
        );
        let found = self.memo.find(hash, |&k| {
            let k = k as usize;
            memo_hash[k] == hash
                && memo_state[k] == state
                && arena[k * words..(k + 1) * words]
                    .iter()
                    .zip(bits)
                    .all(|(a, b)| a == b)
        });
        if found.is_some() {
            return false;
        }
        let k = self.memo_state.len() as u32;
        self.arena.extend_from_slice(&self.bits);
        self.memo_state.push(state);
        self.memo_hash.push(hash);
        let memo_hash = &self.memo_hash;
        self.memo.insert_unique(hash, k, |&k| memo_hash[k as usize]);
        true
    }

    /// The number of `state`, stored if new.
    fn intern(&mut self, state: M::State) -> u32 {
        let hash = state_hash(&state);
        let (states, hashes) = (&self.states, &self.state_hashes);
        if let Some(&id) = self.state_table.find(hash, |&id| {
            hashes[id as usize] == hash && states[id as usize] == state
        }) {
            return id;
        }
        let id = self.states.len() as u32;
        self.states.push(state);
        self.state_hashes.push(hash);
        let hashes = &self.state_hashes;
        self.state_table
            .insert_unique(hash, id, |&id| hashes[id as usize]);
        id
    }

    /// Takes operation `i`'s entries out of the list.
    fn lift(&mut self, i: usize) {
        self.unlink(self.call_entry[i]);
        if self.ret_entry[i] != NIL {
            self.unlink(self.ret_entry[i]);
        }
    }

    /// Puts operation `i`'s entries back, in the reverse order.
    fn unlift(&mut self, i: usize) {
        if self.ret_entry[i] != NIL {
            self.relink(self.ret_entry[i]);
        }
        self.relink(self.call_entry[i]);
    }

    fn unlink(&mut self, e: u32) {
        let Entry { prev, next, .. } = self.entries[e as usize];
        self.entries[prev as usize].next = next;
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
    }

    fn relink(&mut self, e: u32) {
        let Entry { prev, next, .. } = self.entries[e as usize];
        self.entries[prev as usize].next = e;
        if next != NIL {
            self.entries[next as usize].prev = e;
        }
    }

    /// Bytes the search holds, approximately. (The states' hashes are
    /// left out: the bound stops a search at the step it always did, so
    /// that keeping them changes no verdict.)
    fn memory(&self) -> usize {
        self.arena.capacity() * 8
            + self.memo_state.capacity() * 4
            + self.memo_hash.capacity() * 8
            + self.memo.allocation_size()
            + self.state_table.allocation_size()
            + self.states.capacity() * self.model.state_bytes()
            + self.entries.capacity() * std::mem::size_of::<Entry>()
    }

    /// Why the search failed: its deepest dead end, replayed with states.
    fn diagnose(&self) -> Diagnosis {
        let model = self.model;
        let op = |i: u32| &self.ops[self.subset[i as usize]];
        let mut state = model.init();
        let mut prefix = Vec::with_capacity(self.deepest.len());
        let mut done = vec![false; self.subset.len()];
        for &i in &self.deepest {
            let before = model.describe_state(&state);
            if let Step::To(next) = model.step(&state, &op(i).input, op(i).output.as_ref()) {
                state = next;
            }
            prefix.push(Linearized {
                op: self.subset[i as usize],
                before,
                after: model.describe_state(&state),
            });
            done[i as usize] = true;
        }
        // The first return entry (entries are numbered in time order) of
        // an operation left. A dead end is a return entry met, so there is
        // one; 0 is only a fallback that cannot be reached.
        let deadline = (0..self.subset.len())
            .filter(|&i| !done[i] && self.ret_entry[i] != NIL)
            .min_by_key(|&i| self.ret_entry[i])
            .unwrap_or(0);
        let candidates = (0..self.subset.len())
            .filter(|&i| !done[i] && self.call_entry[i] < self.ret_entry[deadline])
            .map(|i| {
                let accepted = !matches!(
                    model.step(&state, &op(i as u32).input, op(i as u32).output.as_ref()),
                    Step::Impossible
                );
                (self.subset[i], accepted)
            })
            .collect();
        Diagnosis {
            prefix,
            deadline: self.subset[deadline],
            candidates,
        }
    }
}

fn state_hash<S: Hash>(state: &S) -> u64 {
    let mut h = FastHasher(0);
    state.hash(&mut h);
    h.finish()
}

/// A quick hasher for the memo's own tables (no untrusted keys, no order
/// that leaks: the tables are only looked up, never iterated).
struct FastHasher(u64);

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let mut last = [0u8; 8];
        let rest = chunks.remainder();
        last[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 56));
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        mix(self.0)
    }
}

/// SplitMix64's finalizer: spreads every input bit over the word.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The next word of a SplitMix64 stream (fixed seed: runs repeat).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    mix(*state)
}
