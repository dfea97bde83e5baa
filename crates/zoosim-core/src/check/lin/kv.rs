//! A key-value map of strings: get, put and append per key. A key never
//! written reads as the empty string. Keys are independent, so a history
//! is checked key by key, unless the model is told to keep it whole.
//!
//! Its coarser version ([`Kv::ordered`] false, [`Model::coarser`])
//! forgets the order of appends: where the map has every order of a set of
//! concurrent appends, it has the set. It shows a stale read in a history
//! with many appends in flight after a few thousand steps where the map's
//! search takes millions.

use std::collections::BTreeMap;
use std::rc::Rc;

use super::edn::shown;
use super::jepsen::{FromJepsen, Value};
use super::{Model, Operation, Outcome, Partition, Step};

/// The map model.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Kv {
    /// Check each key on its own (P-compositionality); `false` checks the
    /// history as one map (much slower: for comparison and tests).
    pub partitioned: bool,
    /// Whether the order of appends matters: `true` is the map itself.
    /// `false` is its coarser version, which keeps per key the last value
    /// put and the values appended since, in no order, and lets a get read
    /// them in any order: it accepts every history the map accepts.
    pub ordered: bool,
}

impl Default for Kv {
    fn default() -> Self {
        Kv {
            partitioned: true,
            ordered: true,
        }
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

/// The map's state: (key, value) sorted by key, no empty values (so that
/// a key put to "" and a key never written are one state). Shared strings
/// make a state cheap to copy when one key changes.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct State(Repr);

impl Default for State {
    fn default() -> Self {
        State(Repr::Map(Vec::new()))
    }
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum Repr {
    /// The map's.
    Map(Vec<(Rc<str>, Rc<str>)>),
    /// The coarser model's: per key, what is known of its value.
    Unordered(Vec<(Rc<str>, Bag)>),
}

/// A value as the coarser model knows it: the last value put (or "") and
/// the values appended since, sorted (their order forgotten). Never empty
/// (no put of "" without appends).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Bag {
    put: Rc<str>,
    appended: Vec<Rc<str>>,
}

impl Bag {
    /// Whether the value may be `value`: the put value followed by the
    /// appended ones in some order.
    fn may_read(&self, value: &str) -> bool {
        let Some(rest) = value.strip_prefix(&*self.put) else {
            return false;
        };
        if rest.len() != self.appended.iter().map(|a| a.len()).sum::<usize>() {
            return false;
        }
        let mut used = vec![false; self.appended.len()];
        let mut budget = TILING_STEPS;
        tiles(rest, &self.appended, &mut used, &mut budget)
    }
}

/// The tries [`tiles`] may make before it answers yes: the coarser model
/// may accept more than it must, never less.
const TILING_STEPS: u32 = 10_000;

/// Whether `rest` is the `parts` not `used` yet, in some order (yes, too,
/// once `budget` runs out). Equal parts are tried once per position.
fn tiles(rest: &str, parts: &[Rc<str>], used: &mut [bool], budget: &mut u32) -> bool {
    if rest.is_empty() {
        return used.iter().all(|&u| u);
    }
    if *budget == 0 {
        return true;
    }
    *budget -= 1;
    for k in 0..parts.len() {
        if used[k] || (k > 0 && !used[k - 1] && parts[k - 1] == parts[k]) {
            continue;
        }
        if let Some(after) = rest.strip_prefix(&*parts[k]) {
            used[k] = true;
            let ok = tiles(after, parts, used, budget);
            used[k] = false;
            if ok {
                return true;
            }
        }
    }
    false
}

/// `pairs` with `key` set to `value`, or removed (`None`).
fn with<V: Clone>(pairs: &[(Rc<str>, V)], key: &str, value: Option<V>) -> Vec<(Rc<str>, V)> {
    let mut next = pairs.to_vec();
    match (next.binary_search_by(|(k, _)| (**k).cmp(key)), value) {
        (Ok(i), None) => {
            next.remove(i);
        }
        (Ok(i), Some(v)) => next[i].1 = v,
        (Err(_), None) => {}
        (Err(i), Some(v)) => next.insert(i, (key.into(), v)),
    }
    next
}

fn lookup<'a, V>(pairs: &'a [(Rc<str>, V)], key: &str) -> Option<&'a V> {
    pairs
        .binary_search_by(|(k, _)| (**k).cmp(key))
        .ok()
        .map(|i| &pairs[i].1)
}

impl Kv {
    fn step_map(pairs: &[(Rc<str>, Rc<str>)], input: &Op, output: Outcome<&Reply>) -> Step<State> {
        use Outcome::{Known, Unknown};
        let get = |k: &str| lookup(pairs, k).map_or("", |v| &**v);
        let set = |k: &str, v: String| {
            let v = (!v.is_empty()).then(|| Rc::from(v));
            Step::To(State(Repr::Map(with(pairs, k, v))))
        };
        match (input, output) {
            (Op::Get(k), Known(Reply::Value(v))) if get(k) == v => Step::Unchanged,
            (Op::Get(_), Unknown) => Step::Unchanged,
            (Op::Put(k, v), Known(Reply::Ok) | Unknown) => {
                if get(k) == v {
                    Step::Unchanged
                } else {
                    set(k, v.clone())
                }
            }
            (Op::Append(_, v), Known(Reply::Ok) | Unknown) if v.is_empty() => Step::Unchanged,
            (Op::Append(k, v), Known(Reply::Ok) | Unknown) => set(k, format!("{}{v}", get(k))),
            _ => Step::Impossible,
        }
    }

    fn step_unordered(
        pairs: &[(Rc<str>, Bag)],
        input: &Op,
        output: Outcome<&Reply>,
    ) -> Step<State> {
        use Outcome::{Known, Unknown};
        let set = |k: &str, bag: Option<Bag>| Step::To(State(Repr::Unordered(with(pairs, k, bag))));
        match (input, output) {
            (Op::Get(k), Known(Reply::Value(v))) => {
                let may = lookup(pairs, k).map_or(v.is_empty(), |bag| bag.may_read(v));
                if may {
                    Step::Unchanged
                } else {
                    Step::Impossible
                }
            }
            (Op::Get(_), Unknown) => Step::Unchanged,
            (Op::Put(k, v), Known(Reply::Ok) | Unknown) => {
                let bag = (!v.is_empty()).then(|| Bag {
                    put: v.as_str().into(),
                    appended: Vec::new(),
                });
                if lookup(pairs, k) == bag.as_ref() {
                    Step::Unchanged
                } else {
                    set(k, bag)
                }
            }
            (Op::Append(_, v), Known(Reply::Ok) | Unknown) if v.is_empty() => Step::Unchanged,
            (Op::Append(k, v), Known(Reply::Ok) | Unknown) => {
                let mut bag = lookup(pairs, k).cloned().unwrap_or(Bag {
                    put: "".into(),
                    appended: Vec::new(),
                });
                let v: Rc<str> = v.as_str().into();
                let at = bag.appended.partition_point(|a| *a <= v);
                bag.appended.insert(at, v);
                set(k, Some(bag))
            }
            _ => Step::Impossible,
        }
    }
}

impl Model for Kv {
    type State = State;
    type Input = Op;
    type Output = Reply;

    fn init(&self) -> State {
        State(if self.ordered {
            Repr::Map(Vec::new())
        } else {
            Repr::Unordered(Vec::new())
        })
    }

    fn step(&self, state: &State, input: &Op, output: Outcome<&Reply>) -> Step<State> {
        match &state.0 {
            Repr::Map(pairs) => Kv::step_map(pairs, input, output),
            Repr::Unordered(pairs) => Kv::step_unordered(pairs, input, output),
        }
    }

    fn read_only(&self, input: &Op, _output: Outcome<&Reply>) -> bool {
        matches!(input, Op::Get(_))
    }

    fn unconditional(&self, input: &Op, _output: Outcome<&Reply>) -> bool {
        matches!(input, Op::Put(..) | Op::Append(..))
    }

    fn coarser(&self) -> Option<Kv> {
        self.ordered.then_some(Kv {
            ordered: false,
            ..*self
        })
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

    // Keys and values are quoted cut short (`crate::quote`): a 50 MB
    // value described whole made 52 MB of terminal output and, once per
    // state on the page, a 367 MB report. The operation's lines, beside
    // every description, say where the whole is.
    fn describe_op(&self, input: &Op, output: Outcome<&Reply>) -> String {
        let out = match output {
            Outcome::Known(Reply::Value(v)) => q(v),
            Outcome::Known(Reply::Ok) => "ok".to_owned(),
            Outcome::Unknown => "unknown".to_owned(),
        };
        match input {
            Op::Get(k) => format!("get {} -> {out}", q(k)),
            Op::Put(k, v) => format!("put {} {} -> {out}", q(k), q(v)),
            Op::Append(k, v) => format!("append {} {} -> {out}", q(k), q(v)),
        }
    }

    fn describe_state(&self, state: &State) -> String {
        let pairs: Vec<String> = match &state.0 {
            Repr::Map(pairs) => pairs
                .iter()
                .map(|(k, v)| format!("{}: {}", q(k), q(v)))
                .collect(),
            Repr::Unordered(pairs) => pairs
                .iter()
                .map(|(k, bag)| {
                    let appended: Vec<String> = bag.appended.iter().map(|a| q(a)).collect();
                    format!(
                        "{}: {} + any order of [{}]",
                        q(k),
                        q(&bag.put),
                        appended.join(", ")
                    )
                })
                .collect(),
        };
        format!("{{{}}}", pairs.join(", "))
    }
}

/// A key or value as a description quotes it: cut short past
/// [`crate::quote::VALUE`] characters, with its length.
fn q(s: &str) -> String {
    crate::quote::quoted(s, crate::quote::VALUE)
}

impl FromJepsen for Kv {
    fn input(&self, f: &str, key: Option<&Value>, value: &Value) -> Result<Op, String> {
        let key = match key {
            Some(Value::Str(k)) => k.clone(),
            Some(Value::Int(k)) => k.to_string(),
            Some(k) => return Err(format!("a key must be a string, not {}", shown(k))),
            None => return Err(format!(":{f} has no :key")),
        };
        let text = || match value {
            Value::Str(v) => Ok(v.clone()),
            v => Err(format!(":{f} takes a string value, not {}", shown(v))),
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
            (Op::Get(_), v) => Err(format!("a get returns a string, not {}", shown(v))),
            // A put's or an append's `:ok` echoes the value written, or
            // says nothing (nil): where it carries another, the history
            // contradicts itself (see the register's `output`), refused.
            (_, Value::Nil) => Ok(Reply::Ok),
            (Op::Put(_, w) | Op::Append(_, w), Value::Str(v)) if v == w => Ok(Reply::Ok),
            (Op::Put(_, w) | Op::Append(_, w), v) => Err(format!(
                "the :ok of {} {} carries another value, {}: its completion must echo the value \
                 written, or be nil",
                if matches!(input, Op::Put(..)) {
                    "a put of"
                } else {
                    "an append of"
                },
                q(w),
                shown(v)
            )),
        }
    }
}
