//! Counts (operation × outcome) pairs over a run, so a green suite shows
//! that the interesting outcomes really happened.

use std::collections::{BTreeMap, BTreeSet};

use zoosim::proto::{EventType, MultiOp, MultiResult, Op, Reply, ZkError};

use crate::gen::{rooted, Step};
use crate::harness::Trace;

#[derive(Default, Debug)]
pub struct Coverage {
    pub counts: BTreeMap<String, u64>,
}

/// The pairs a run must reach at least `min` times each: outcomes the
/// server decides (client-side answers such as a bad path, a closed handle
/// or an empty multi are counted in the table but prove nothing of it).
pub const REQUIRED: &[&str] = &[
    "create ok",
    "create ok sequential",
    "create ok ephemeral",
    "create NodeExists",
    "create NoNode",
    "create NoChildrenForEphemerals",
    "create Unimplemented",
    "delete ok",
    "delete NoNode",
    "delete BadVersion",
    "delete NotEmpty",
    "set_data ok",
    "set_data NoNode",
    "set_data BadVersion",
    "exists some",
    "exists none",
    "get_data ok",
    "get_data NoNode",
    "get_children ok",
    "get_children NoNode",
    "sync ok",
    "multi ok",
    "multi aborted",
    "multi aborted before its last op",
    // Each kind of sub-operation with each way it can end inside a multi.
    "multi/create ok",
    "multi/delete ok",
    "multi/set_data ok",
    "multi/check ok",
    "multi/create rolled back",
    "multi/check rolled back",
    "multi/create NodeExists",
    "multi/delete NoNode",
    "multi/check BadVersion",
    "multi/create not reached",
    "close deleted watched ephemerals",
    "event NodeCreated",
    "event NodeDeleted",
    "event NodeDataChanged",
    "event NodeChildrenChanged",
    // Each event by each kind of watch that can deliver it alone, and a
    // delete both tables notify (delivered once).
    "event NodeCreated via exists",
    "event NodeDataChanged via getData",
    "event NodeDataChanged via exists",
    "event NodeDeleted via getData",
    "event NodeDeleted via exists",
    "event NodeDeleted via getChildren",
    "event NodeDeleted via a data and a child watch, once",
    "event NodeChildrenChanged via getChildren",
];

/// Runs `batch` (`cases` generated cases, returning the run's result and
/// the required keys still below their floor) until the floors are
/// reached or three batches have run. `batch` gets the generator's seed
/// for that batch: the run's seed for the first, then seeds derived from
/// it ([`batch_seed`]), so each batch has cases of its own and the run's
/// seed alone replays all of them. The run's seed is new each run, so a
/// rare outcome can miss its floor by chance in one batch; a generator
/// that stopped reaching it misses it in all three. Returns the last
/// result and how many cases ran.
pub fn run_to_floor<R>(
    suite: &str,
    seed: u64,
    cases: u32,
    mut batch: impl FnMut(u64) -> (Result<(), R>, Vec<&'static str>),
) -> (Result<(), R>, u32) {
    let mut ran = 0;
    for i in 0.. {
        let (result, missing) = batch(batch_seed(seed, i));
        ran += cases;
        if result.is_err() || missing.is_empty() || ran >= 3 * cases {
            return (result, ran);
        }
        eprintln!(
            "{suite}: after {ran} cases, below the coverage floor: {missing:?}; {cases} more"
        );
    }
    unreachable!("the loop returns by its third batch")
}

/// The generator's seed for batch `i` of a run with seed `seed`: `seed`
/// itself for the first. A proptest runner that has run its cases runs no
/// more (its count of passed cases is kept), so each batch needs a runner
/// of its own, and a seed of its own for new cases.
pub fn batch_seed(seed: u64, i: u64) -> u64 {
    seed.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// The client call that armed a watch, as the coverage keys name it.
type Armer = &'static str;

/// The watch a read armed, if it did (a failed getData or getChildren
/// sets none; exists sets one whether the node exists or not).
fn armed_by(op: &Op, reply: &Result<Reply, ZkError>) -> Option<(String, Armer)> {
    match (op, reply) {
        (Op::GetData { path, watch: true }, Ok(_)) => Some((path.clone(), "getData")),
        (Op::Exists { path, watch: true }, Ok(_)) => Some((path.clone(), "exists")),
        (Op::GetChildren { path, watch: true }, Ok(_)) => Some((path.clone(), "getChildren")),
        _ => None,
    }
}

/// Whether a watch armed by `armer` fires on `event` (the server's data
/// table holds getData's and exists's watches, its child table
/// getChildren's; a deletion fires both).
fn delivers(armer: Armer, event: EventType) -> bool {
    match armer {
        "getChildren" => matches!(
            event,
            EventType::NodeChildrenChanged | EventType::NodeDeleted
        ),
        _ => event != EventType::NodeChildrenChanged,
    }
}

/// Which armed watches each session holds, per path, as the steps go:
/// what delivered each event.
#[derive(Default)]
struct Armed {
    by: BTreeMap<(usize, String), BTreeSet<Armer>>,
}

impl Armed {
    /// The keys of `event` delivered to `session`: the watches it used.
    fn deliver(&mut self, session: usize, path: &str, event: EventType) -> Vec<String> {
        let key = (session, path.to_owned());
        let set = self.by.entry(key.clone()).or_default();
        let used: Vec<Armer> = set.iter().copied().filter(|a| delivers(a, event)).collect();
        set.retain(|a| !delivers(a, event));
        if set.is_empty() {
            self.by.remove(&key);
        }
        let via = if used.is_empty() {
            "nothing armed".to_owned()
        } else {
            used.join("+")
        };
        let mut keys = vec![format!("event {event:?} via {via}")];
        if used.len() > 1 && used.contains(&"getChildren") {
            // Both of the server's tables held the session's watch: one
            // event all the same.
            keys.push(format!(
                "event {event:?} via a data and a child watch, once"
            ));
        }
        keys
    }

    fn arm(&mut self, session: usize, path: String, armer: Armer) {
        self.by.entry((session, path)).or_default().insert(armer);
    }

    fn close(&mut self, session: usize) {
        self.by.retain(|(s, _), _| *s != session);
    }
}

pub fn outcome(op: &Op, reply: &Result<Reply, ZkError>) -> Vec<String> {
    let name = op.name();
    let mut out = Vec::new();
    match reply {
        Err(ZkError::SessionExpired) => out.push("any SessionExpired".into()),
        Err(e) => out.push(format!("{name} {e:?}")),
        Ok(Reply::Exists(s)) => out.push(format!(
            "exists {}",
            if s.is_some() { "some" } else { "none" }
        )),
        Ok(r @ Reply::Multi(results)) => {
            if let Op::Multi(ops) = op {
                out.extend(sub_outcomes(ops, results));
            }
            out.extend(multi_outcome(r, results));
        }
        Ok(_) => {
            out.push(format!("{name} ok"));
            if let Op::Create { mode, .. } = op {
                if mode.is_sequential() {
                    out.push("create ok sequential".into());
                }
                if mode.is_ephemeral() {
                    out.push("create ok ephemeral".into());
                }
            }
        }
    }
    out
}

/// "multi/<sub-operation> <how it ended>" for each sub-operation of a
/// multi: ok, rolled back (it passed, and a later one failed), the error
/// it failed with, or not reached (after the failing one).
fn sub_outcomes(ops: &[MultiOp], results: &[MultiResult]) -> Vec<String> {
    ops.iter()
        .zip(results)
        .map(|(o, r)| {
            let name = match o {
                MultiOp::Create { .. } => "create",
                MultiOp::Delete { .. } => "delete",
                MultiOp::SetData { .. } => "set_data",
                MultiOp::Check { .. } => "check",
            };
            let how = match r {
                MultiResult::RolledBack => "rolled back".to_owned(),
                MultiResult::Failed(ZkError::RuntimeInconsistency) => "not reached".to_owned(),
                MultiResult::Failed(e) => format!("{e:?}"),
                _ => "ok".to_owned(),
            };
            format!("multi/{name} {how}")
        })
        .collect()
}

/// The multi as a whole: ok, empty, or aborted (with its error).
fn multi_outcome(r: &Reply, results: &[MultiResult]) -> Vec<String> {
    let mut out = Vec::new();
    match r.multi_error() {
        Some(e) => {
            out.push("multi aborted".into());
            out.push(format!("multi aborted {e:?}"));
            if results.last() == Some(&MultiResult::Failed(ZkError::RuntimeInconsistency)) {
                out.push("multi aborted before its last op".into());
            }
        }
        None if results.is_empty() => out.push("multi empty".into()),
        None => out.push("multi ok".into()),
    }
    out
}

impl Coverage {
    /// Counts one more of `key`.
    pub fn bump(&mut self, key: &str) {
        *self.counts.entry(key.to_owned()).or_default() += 1;
    }

    /// How many times `key` was seen.
    pub fn count(&self, key: &str) -> u64 {
        self.counts.get(key).copied().unwrap_or(0)
    }

    /// The keys of `required` seen fewer than `min` times.
    pub fn missing(&self, required: &[&'static str], min: u64) -> Vec<&'static str> {
        required
            .iter()
            .copied()
            .filter(|k| self.count(k) < min)
            .collect()
    }

    /// Prints the table under `title`; fails naming every key of
    /// `required` below `min`.
    pub fn check_keys(&self, title: &str, required: &[&str], min: u64) -> Result<(), String> {
        eprintln!("{title} (operation × outcome: count):");
        for (k, v) in &self.counts {
            eprintln!("  {k:<72} {v:>6}");
        }
        let low: Vec<_> = required.iter().filter(|k| self.count(k) < min).collect();
        if low.is_empty() {
            Ok(())
        } else {
            Err(format!("{title}: coverage below {min} for: {low:?}"))
        }
    }

    /// Counts the outcomes of a run of `steps` under `root`, and which
    /// kind of watch delivered each event.
    pub fn add(&mut self, steps: &[Step], trace: &Trace, root: &str) {
        let offset = trace.steps.len() - steps.len();
        let mut armed = Armed::default();
        for (step, st) in steps.iter().zip(&trace.steps[offset..]) {
            let keys = match step {
                Step::Op { op, .. } => outcome(op, &st.reply),
                Step::Close { .. } => {
                    let mut keys = vec![match &st.reply {
                        Ok(_) => "close ok".to_owned(),
                        Err(e) => format!("close {e:?}"),
                    }];
                    let deleted = st.events.iter().flatten();
                    if deleted
                        .filter(|e| e.event_type == EventType::NodeDeleted)
                        .count()
                        > 0
                    {
                        keys.push("close deleted watched ephemerals".into());
                    }
                    keys
                }
            };
            for k in keys {
                self.bump(&k);
            }
            for (session, events) in st.events.iter().enumerate() {
                for e in events {
                    let key = match e.event_type {
                        EventType::NodeCreated => "event NodeCreated",
                        EventType::NodeDeleted => "event NodeDeleted",
                        EventType::NodeDataChanged => "event NodeDataChanged",
                        EventType::NodeChildrenChanged => "event NodeChildrenChanged",
                    };
                    self.bump(key);
                    for k in armed.deliver(session, &e.path, e.event_type) {
                        self.bump(&k);
                    }
                }
            }
            match step {
                Step::Op { session, op } => {
                    if let Some((path, armer)) = armed_by(&rooted(root, op), &st.reply) {
                        armed.arm(*session, path, armer);
                    }
                }
                Step::Close { session } => armed.close(*session),
            }
        }
    }

    /// Prints the table; fails naming every required pair below `min`.
    pub fn check(&self, min: u64) -> Result<(), String> {
        self.check_keys("conformance coverage", REQUIRED, min)
    }
}
