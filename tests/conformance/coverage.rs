//! Counts (operation × outcome) pairs over a run, so a green suite shows
//! that the interesting outcomes really happened.

use std::collections::BTreeMap;

use zoosim::proto::{EventType, MultiOp, MultiResult, Op, Reply, ZkError};

use crate::gen::Step;
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
];

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

    /// Prints the table under `title`; fails naming every key of
    /// `required` below `min`.
    pub fn check_keys(&self, title: &str, required: &[&str], min: u64) -> Result<(), String> {
        eprintln!("{title} (operation × outcome: count):");
        for (k, v) in &self.counts {
            eprintln!("  {k:<72} {v:>6}");
        }
        let low: Vec<_> = required
            .iter()
            .filter(|k| self.counts.get(**k).copied().unwrap_or(0) < min)
            .collect();
        if low.is_empty() {
            Ok(())
        } else {
            Err(format!("{title}: coverage below {min} for: {low:?}"))
        }
    }

    pub fn add(&mut self, steps: &[Step], trace: &Trace) {
        let offset = trace.steps.len() - steps.len();
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
            for e in st.events.iter().flatten() {
                let key = match e.event_type {
                    EventType::NodeCreated => "event NodeCreated",
                    EventType::NodeDeleted => "event NodeDeleted",
                    EventType::NodeDataChanged => "event NodeDataChanged",
                    EventType::NodeChildrenChanged => "event NodeChildrenChanged",
                };
                self.bump(key);
            }
        }
    }

    /// Prints the table; fails naming every required pair below `min`.
    pub fn check(&self, min: u64) -> Result<(), String> {
        self.check_keys("conformance coverage", REQUIRED, min)
    }
}
