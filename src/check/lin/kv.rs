//! A key-value map of strings: get, put and append per key. A key never
//! written reads as the empty string. Keys are independent, so a history
//! is checked key by key, unless the model is told to keep it whole.

use std::collections::BTreeMap;
use std::rc::Rc;

use super::jepsen::{FromJepsen, Value};
use super::{Model, Operation, Outcome, Partition, Step};

/// The map model.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Kv {
    /// Check each key on its own (P-compositionality); `false` checks the
    /// history as one map (much slower: for comparison and tests).
    pub partitioned: bool,
}

impl Default for Kv {
    fn default() -> Self {
        Kv { partitioned: true }
    }
}

/// An operation on the map.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Op {
    /// Read a key.
    Get(String),
    /// Set a key's value.
    Put(String, String),
    /// Append to a key's value.
    Append(String, String),
}

impl Op {
    /// The key it works on.
    pub fn key(&self) -> &str {
        match self {
            Op::Get(k) | Op::Put(k, _) | Op::Append(k, _) => k,
        }
    }
}

/// What an operation returned.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Reply {
    /// A get's value.
    Value(String),
    /// A put or append took effect.
    Ok,
}

/// The map: (key, value) sorted by key, no empty values (so that a key
/// put to "" and a key never written are one state). Shared strings make
/// a state cheap to copy when one key changes.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct State(Vec<(Rc<str>, Rc<str>)>);

impl State {
    fn get(&self, key: &str) -> &str {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .map_or("", |i| &self.0[i].1)
    }

    fn with(&self, key: &str, value: String) -> State {
        let mut next = self.0.clone();
        match next.binary_search_by(|(k, _)| (**k).cmp(key)) {
            Ok(i) if value.is_empty() => {
                next.remove(i);
            }
            Ok(i) => next[i].1 = value.into(),
            Err(_) if value.is_empty() => {}
            Err(i) => next.insert(i, (key.into(), value.into())),
        }
        State(next)
    }
}

impl Model for Kv {
    type State = State;
    type Input = Op;
    type Output = Reply;

    fn init(&self) -> State {
        State::default()
    }

    fn step(&self, state: &State, input: &Op, output: Outcome<&Reply>) -> Step<State> {
        use Outcome::{Known, Unknown};
        match (input, output) {
            (Op::Get(k), Known(Reply::Value(v))) if state.get(k) == v => Step::Unchanged,
            (Op::Get(_), Unknown) => Step::Unchanged,
            (Op::Put(k, v), Known(Reply::Ok) | Unknown) => {
                if state.get(k) == v {
                    Step::Unchanged
                } else {
                    Step::To(state.with(k, v.clone()))
                }
            }
            (Op::Append(_, v), Known(Reply::Ok) | Unknown) if v.is_empty() => Step::Unchanged,
            (Op::Append(k, v), Known(Reply::Ok) | Unknown) => {
                Step::To(state.with(k, format!("{}{v}", state.get(k))))
            }
            _ => Step::Impossible,
        }
    }

    fn read_only(&self, input: &Op, _output: Outcome<&Reply>) -> bool {
        matches!(input, Op::Get(_))
    }

    fn partition(&self, ops: &[Operation<Op, Reply>]) -> Vec<Partition> {
        if !self.partitioned {
            return vec![Partition {
                key: String::new(),
                ops: (0..ops.len()).collect(),
            }];
        }
        let mut by_key: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, op) in ops.iter().enumerate() {
            by_key.entry(op.input.key()).or_default().push(i);
        }
        by_key
            .into_iter()
            .map(|(key, ops)| Partition {
                key: key.to_owned(),
                ops,
            })
            .collect()
    }

    fn describe_op(&self, input: &Op, output: Outcome<&Reply>) -> String {
        let out = match output {
            Outcome::Known(Reply::Value(v)) => format!("{v:?}"),
            Outcome::Known(Reply::Ok) => "ok".to_owned(),
            Outcome::Unknown => "unknown".to_owned(),
        };
        match input {
            Op::Get(k) => format!("get {k:?} -> {out}"),
            Op::Put(k, v) => format!("put {k:?} {v:?} -> {out}"),
            Op::Append(k, v) => format!("append {k:?} {v:?} -> {out}"),
        }
    }

    fn describe_state(&self, state: &State) -> String {
        let pairs: Vec<String> = state
            .0
            .iter()
            .map(|(k, v)| format!("{k:?}: {v:?}"))
            .collect();
        format!("{{{}}}", pairs.join(", "))
    }
}

impl FromJepsen for Kv {
    fn input(&self, f: &str, key: Option<&Value>, value: &Value) -> Result<Op, String> {
        let key = match key {
            Some(Value::Str(k)) => k.clone(),
            Some(Value::Int(k)) => k.to_string(),
            Some(k) => return Err(format!("a key must be a string, not {k}")),
            None => return Err(format!(":{f} has no :key")),
        };
        let text = || match value {
            Value::Str(v) => Ok(v.clone()),
            v => Err(format!(":{f} takes a string value, not {v}")),
        };
        match f {
            "get" => Ok(Op::Get(key)),
            "put" => Ok(Op::Put(key, text()?)),
            "append" => Ok(Op::Append(key, text()?)),
            f => Err(format!(
                "unknown operation :{f} for the key-value map (expected :get, :put or :append)"
            )),
        }
    }

    fn output(&self, input: &Op, value: &Value) -> Result<Reply, String> {
        match (input, value) {
            (Op::Get(_), Value::Str(v)) => Ok(Reply::Value(v.clone())),
            (Op::Get(_), Value::Nil) => Ok(Reply::Value(String::new())),
            (Op::Get(_), v) => Err(format!("a get returns a string, not {v}")),
            _ => Ok(Reply::Ok),
        }
    }
}
