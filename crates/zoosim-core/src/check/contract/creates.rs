//! Every create in a history, of any outcome: which session may have
//! made which node. The one-pass checks use it to tell a node that only
//! one create could have made ([`expiry::lingering`](super::expiry),
//! [`reappeared`](super::reappeared)).

use std::collections::BTreeMap;

use super::{Done, Seen, SessionLog};
use crate::proto::{MultiOp, MultiResult, Op, Reply};

/// Creates of one name: each one's session and whether it asked for an
/// ephemeral node.
type Makers = [(usize, bool)];

/// Every create in a history (any outcome): who may have made which node.
pub(super) struct Creates<'h> {
    /// The creates by (path or sequential prefix, sequential): each one's
    /// session and whether it asked for an ephemeral node.
    by_name: BTreeMap<(&'h str, bool), Vec<(usize, bool)>>,
    /// The nodes creates said they made, by the session that made them.
    made: BTreeMap<&'h str, usize>,
}

impl<'h> Creates<'h> {
    pub(super) fn new(logs: &[SessionLog<'h>]) -> Creates<'h> {
        let mut by_name: BTreeMap<(&'h str, bool), Vec<(usize, bool)>> = BTreeMap::new();
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
                    (by_name.entry((path, mode.is_sequential())).or_default())
                        .push((i, mode.is_ephemeral()));
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
        Creates { by_name, made }
    }

    /// The creates that could make a node named `node`: those of exactly
    /// that path (not sequential), and the sequential ones of its prefix
    /// where it ends in ten digits.
    fn makers<'a>(&'a self, node: &'a str) -> (&'a Makers, &'a Makers) {
        // The map, its keys' lifetime shortened to `node`'s to look it up.
        let by_name: &'a BTreeMap<(&'a str, bool), Vec<(usize, bool)>> = &self.by_name;
        let of = |key| by_name.get(&key).map_or(&[][..], Vec::as_slice);
        let numbered = node.len() >= 10
            && node.as_bytes()[node.len() - 10..]
                .iter()
                .all(u8::is_ascii_digit);
        let sequential = if numbered {
            of((&node[..node.len() - 10], true))
        } else {
            &[]
        };
        (of((node, false)), sequential)
    }

    /// The session that made `node` as an ephemeral node, if no create of
    /// any other session (nor a persistent one of its own) could have
    /// made a node of that name.
    pub(super) fn only_owner(&self, node: &str) -> Option<usize> {
        let owner = *self.made.get(node)?;
        let (exact, sequential) = self.makers(node);
        (exact.iter().chain(sequential))
            .all(|&(s, ephemeral)| s == owner && ephemeral)
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
        match self.makers(node) {
            (exact, []) => exact.len() == 1,
            (exact, _) => exact.is_empty() && !recounted,
        }
    }
}
