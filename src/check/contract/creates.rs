//! Every create in a history, of any outcome: which session may have
//! made which node. The one-pass checks use it to tell a node that only
//! one create could have made ([`expiry::lingering`](super::expiry),
//! [`reappeared`](super::reappeared)).

use std::collections::BTreeMap;

use super::{Done, Seen, SessionLog};
use crate::proto::{MultiOp, MultiResult, Op, Reply};

/// Every create in a history (any outcome): who may have made which node.
pub(super) struct Creates<'h> {
    /// (session, path or sequential prefix, sequential, ephemeral).
    all: Vec<(usize, &'h str, bool, bool)>,
    /// The nodes creates said they made, by the session that made them.
    made: BTreeMap<&'h str, usize>,
}

impl<'h> Creates<'h> {
    pub(super) fn new(logs: &[SessionLog<'h>]) -> Creates<'h> {
        let mut all = Vec::new();
        let mut made = BTreeMap::new();
        for (i, log) in logs.iter().enumerate() {
            for seen in &log.seen {
                let Seen::Request {
                    op: Some(op), done, ..
                } = seen
                else {
                    continue;
                };
                let mut one = |path: &'h str, mode: crate::proto::CreateMode| {
                    all.push((i, path, mode.is_sequential(), mode.is_ephemeral()));
                };
                match op {
                    Op::Create { path, mode, .. } => one(path, *mode),
                    Op::Multi(ops) => {
                        for o in ops {
                            if let MultiOp::Create { path, mode, .. } = o {
                                one(path, *mode);
                            }
                        }
                    }
                    _ => {}
                }
                if let Done::Answered {
                    result: Ok(reply), ..
                } = done
                {
                    match reply {
                        Reply::Create { path, .. } => {
                            made.insert(path.as_str(), i);
                        }
                        Reply::Multi(results) => {
                            for r in results {
                                if let MultiResult::Create { path, .. } = r {
                                    made.insert(path.as_str(), i);
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        Creates { all, made }
    }

    /// The session that made `node` as an ephemeral node, if no create of
    /// any other session (nor a persistent one of its own) could have
    /// made a node of that name.
    pub(super) fn only_owner(&self, node: &str) -> Option<usize> {
        let owner = *self.made.get(node)?;
        let could = |&&(_, path, sequential, _): &&(usize, &str, bool, bool)| {
            if sequential {
                numbered_from(node, path)
            } else {
                node == path
            }
        };
        self.all
            .iter()
            .filter(could)
            .all(|&(s, _, _, ephemeral)| s == owner && ephemeral)
            .then_some(owner)
    }

    /// Whether `node` was made by one create (its reply names it) and no
    /// other create could make a node of that name: none names it
    /// exactly, and no sequential create of its prefix could, unless
    /// `recounted` (its parent was deleted somewhere in the history, so
    /// the parent's sequence may count from 0 again).
    pub(super) fn unique(&self, node: &str, recounted: bool) -> bool {
        if !self.made.contains_key(node) {
            return false;
        }
        let exact = (self.all.iter())
            .filter(|&&(_, path, sequential, _)| !sequential && path == node)
            .count();
        let numbered = (self.all.iter())
            .any(|&(_, path, sequential, _)| sequential && numbered_from(node, path));
        if numbered {
            exact == 0 && !recounted
        } else {
            exact == 1
        }
    }
}

/// Whether `node` is a name a sequential create of `path` makes: the path
/// and ten digits.
fn numbered_from(node: &str, path: &str) -> bool {
    node.len() == path.len() + 10
        && node.starts_with(path)
        && node[path.len()..].bytes().all(|b| b.is_ascii_digit())
}
