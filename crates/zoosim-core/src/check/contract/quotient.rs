//! The contract's model for the rungs without events (writes; reads;
//! sync), searched over classes of states instead of states.
//!
//! Without events, nothing the model decides depends on the zxids and
//! times the tree stores (czxid, mzxid, pzxid, ctime, mtime, the tree's
//! last zxid), on what zxid a session has seen, or on whether it is
//! connected: those feed only the reconnect replay of watches, and
//! replies are compared with them zeroed ([`super::model::normalize`]).
//! Two states that agree on everything else — each znode's data,
//! versions, sequence counter, owner and children, the live sessions,
//! each session's next step and how many of its writes are decided — accept the same steps and lead to states
//! that agree again (the tree's prep reads none of the forgotten fields;
//! see [`Class`]). So the search may remember a class where it
//! remembered a state: a configuration whose class was explored and led
//! nowhere leads nowhere either. The classes are few where the states
//! are many: two writes that commute give different zxids in either
//! order, hence two states, but one class. This is what lets the weaker
//! rungs refute histories of hundreds of operations.
//!
//! The steps themselves are the model's, so an order this search finds
//! is a witness for the model as it stands.

use std::hash::{Hash, Hasher};

use super::model::{describe_tree, Input, State, ZkModel, STATE_BYTES};
use crate::check::lin::{self, Outcome, Step};
use crate::tree::{DataTree, Node};

/// [`ZkModel`] searched over [`Class`]es; only for rules without events
/// (where the forgotten fields decide nothing).
pub(super) struct Quotient<'a> {
    model: &'a ZkModel<'a>,
}

impl<'a> Quotient<'a> {
    /// The quotient of `model`, if its rules allow one (no events).
    pub(super) fn new(model: &'a ZkModel<'a>) -> Option<Quotient<'a>> {
        (!model.rules.events).then_some(Quotient { model })
    }
}

/// A model state, compared and hashed by what the rules without events
/// can tell apart (see the module docs): the tree without its zxids and
/// times, the live sessions, and each session's next step and decided writes. (A session is
/// closed exactly when the tree no longer has it, and no session ends
/// with trailing events when events are off.)
pub(super) struct Class {
    state: State,
    sessions: usize,
}

impl Class {
    fn tree(&self) -> &DataTree {
        self.state.tree()
    }
}

/// Calls `f` on every znode with its path, depth first, children in name
/// order: one order for equal trees.
fn each_node(tree: &DataTree, f: &mut impl FnMut(&str, &Node)) {
    fn visit(tree: &DataTree, path: &mut String, f: &mut impl FnMut(&str, &Node)) {
        let Some(node) = tree.node(path) else { return };
        f(path, node);
        let len = path.len();
        for c in &node.children {
            if len > 1 {
                path.push('/');
            }
            path.push_str(c);
            visit(tree, path, f);
            path.truncate(len);
        }
    }
    visit(tree, &mut "/".to_owned(), f);
}

/// The fields of a znode that the rules without events can see.
fn same_node(a: &Node, b: &Node) -> bool {
    a.data == b.data
        && a.version == b.version
        && a.aversion == b.aversion
        && a.child_creates == b.child_creates
        && a.owner == b.owner
        && a.children == b.children
}

impl PartialEq for Class {
    fn eq(&self, other: &Class) -> bool {
        let (a, b) = (self.tree(), other.tree());
        if self.sessions != other.sessions
            || a.node_count() != b.node_count()
            || !a.sessions().eq(b.sessions())
            || (0..self.sessions).any(|i| {
                self.state.next_step(i) != other.state.next_step(i)
                    || self.state.writes_done(i) != other.state.writes_done(i)
            })
        {
            return false;
        }
        // Same count: every node of `a` matching one of `b` is a match.
        let mut same = true;
        each_node(a, &mut |path, n| {
            same = same && b.node(path).is_some_and(|m| same_node(n, m));
        });
        same
    }
}

impl Eq for Class {}

impl Hash for Class {
    fn hash<H: Hasher>(&self, h: &mut H) {
        // Depth first with child counts: the structure and the names.
        each_node(self.tree(), &mut |path, n| {
            path.hash(h);
            n.data.hash(h);
            n.version.hash(h);
            n.aversion.hash(h);
            n.child_creates.hash(h);
            n.owner.hash(h);
            n.children.len().hash(h);
        });
        for (session, _) in self.tree().sessions() {
            session.hash(h);
        }
        for i in 0..self.sessions {
            self.state.next_step(i).hash(h);
            self.state.writes_done(i).hash(h);
        }
    }
}

impl<'a> lin::Model for Quotient<'a> {
    type State = Class;
    type Input = Input<'a>;
    type Output = ();

    fn init(&self) -> Class {
        Class {
            state: self.model.init(),
            sessions: self.model.sessions.len(),
        }
    }

    /// A [`Class`]: a state and a count (see [`STATE_BYTES`]).
    fn state_bytes(&self) -> usize {
        STATE_BYTES + std::mem::size_of::<usize>()
    }

    fn step(&self, class: &Class, input: &Input, _: Outcome<&()>) -> Step<Class> {
        match self.model.step(&class.state, input) {
            Some(state) => Step::To(Class {
                state,
                sessions: class.sessions,
            }),
            None => Step::Impossible,
        }
    }

    fn describe_op(&self, input: &Input, output: Outcome<&()>) -> String {
        lin::Model::describe_op(self.model, input, output)
    }

    fn describe_state(&self, class: &Class) -> String {
        describe_tree(class.tree())
    }
}
