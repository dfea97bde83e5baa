//! A compare-and-set register: it holds one integer or nothing (`nil`, at
//! the start), and is read, written, or compared-and-set.

use super::edn::shown;
use super::jepsen::{FromJepsen, Value};
use super::{Model, Outcome, Step};

/// The register model. Its state is the value held (`None`: nil).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CasRegister;

/// An operation on the register.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Op {
    /// Read the value.
    Read,
    /// Write a value.
    Write(i64),
    /// Set `to` if the value is `from`.
    Cas {
        /// The value expected.
        from: i64,
        /// The value set.
        to: i64,
    },
}

/// What an operation returned.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Reply {
    /// A read's value (`None`: nil).
    Read(Option<i64>),
    /// A write, or a cas that set its value.
    Ok,
    /// A cas that found another value and set nothing.
    CasFailed,
}

fn show(v: Option<i64>) -> String {
    v.map_or_else(|| "nil".to_owned(), |v| v.to_string())
}

impl Model for CasRegister {
    type State = Option<i64>;
    type Input = Op;
    type Output = Reply;

    fn init(&self) -> Option<i64> {
        None
    }

    fn step(&self, state: &Option<i64>, input: &Op, output: Outcome<&Reply>) -> Step<Option<i64>> {
        use Outcome::{Known, Unknown};
        match (input, output) {
            (Op::Read, Known(Reply::Read(v))) if v == state => Step::Unchanged,
            // A read whose answer is unknown changes nothing.
            (Op::Read, Unknown) => Step::Unchanged,
            (Op::Write(v), Known(Reply::Ok) | Unknown) => Step::To(Some(*v)),
            (Op::Cas { from, to }, Known(Reply::Ok) | Unknown) if *state == Some(*from) => {
                Step::To(Some(*to))
            }
            // A cas of unknown outcome that finds another value fails.
            (Op::Cas { .. }, Unknown) => Step::Unchanged,
            (Op::Cas { from, .. }, Known(Reply::CasFailed)) if *state != Some(*from) => {
                Step::Unchanged
            }
            _ => Step::Impossible,
        }
    }

    fn read_only(&self, input: &Op, output: Outcome<&Reply>) -> bool {
        matches!(
            (input, output),
            (Op::Read, _) | (Op::Cas { .. }, Outcome::Known(Reply::CasFailed))
        )
    }

    fn unconditional(&self, input: &Op, _output: Outcome<&Reply>) -> bool {
        matches!(input, Op::Write(_))
    }

    fn describe_op(&self, input: &Op, output: Outcome<&Reply>) -> String {
        let out = match output {
            Outcome::Known(Reply::Read(v)) => show(*v),
            Outcome::Known(Reply::Ok) => "ok".to_owned(),
            Outcome::Known(Reply::CasFailed) => "failed".to_owned(),
            Outcome::Unknown => "unknown".to_owned(),
        };
        match input {
            Op::Read => format!("read -> {out}"),
            Op::Write(v) => format!("write {v} -> {out}"),
            Op::Cas { from, to } => format!("cas {from} -> {to}: {out}"),
        }
    }

    fn describe_state(&self, state: &Option<i64>) -> String {
        show(*state)
    }
}

/// Why the register refuses an integer beyond 64 bits: it holds an
/// `i64`, and a value it cannot hold must not be taken for another.
fn too_big(v: &str) -> String {
    format!(
        "the integer {} does not fit in 64 bits (the register holds 64-bit integers)",
        crate::quote::cut(v, 40)
    )
}

impl FromJepsen for CasRegister {
    fn input(&self, f: &str, _key: Option<&Value>, value: &Value) -> Result<Op, String> {
        match (f, value) {
            ("read", _) => Ok(Op::Read),
            ("write", Value::Int(v)) => Ok(Op::Write(*v)),
            ("cas", Value::Vector(v)) => match v.as_slice() {
                [Value::Int(from), Value::Int(to)] => Ok(Op::Cas {
                    from: *from,
                    to: *to,
                }),
                [Value::BigInt(v), _] | [_, Value::BigInt(v)] => Err(too_big(v)),
                _ => Err(format!(
                    "a cas takes [from to], two integers, not {}",
                    shown(value)
                )),
            },
            ("write", Value::BigInt(v)) => Err(too_big(v)),
            ("write", v) => Err(format!("a write takes an integer, not {}", shown(v))),
            ("cas", v) => Err(format!("a cas takes [from to], not {}", shown(v))),
            (f, _) => Err(format!(
                "unknown operation :{f} for the cas register (expected :read, :write or :cas)"
            )),
        }
    }

    fn output(&self, input: &Op, value: &Value) -> Result<Reply, String> {
        match (input, value) {
            (Op::Read, Value::Nil) => Ok(Reply::Read(None)),
            (Op::Read, Value::Int(v)) => Ok(Reply::Read(Some(*v))),
            (Op::Read, Value::BigInt(v)) => Err(too_big(v)),
            (Op::Read, v) => Err(format!(
                "a read returns an integer or nil, not {}",
                shown(v)
            )),
            // A write's or a cas's `:ok` echoes what the invocation asked
            // (Jepsen copies the invocation into its completion), or says
            // nothing (nil). Knossos takes the completion's value as what
            // happened; the checker takes the invocation's (a read's
            // value alone comes from its `:ok`). Where the two differ the
            // history contradicts itself, and either choice could make a
            // verdict of it that the system never earned: refused, both
            // values named.
            (_, Value::Nil) => Ok(Reply::Ok),
            (Op::Write(w), Value::Int(v)) if v == w => Ok(Reply::Ok),
            (Op::Write(_), Value::BigInt(v)) => Err(too_big(v)),
            (Op::Write(w), v) => Err(format!(
                "the :ok of a write of {w} carries another value, {}: a write's completion \
                 must echo the value written, or be nil",
                shown(v)
            )),
            (Op::Cas { from, to }, Value::Vector(v)) if matches!(v.as_slice(), [Value::Int(a), Value::Int(b)] if a == from && b == to) => {
                Ok(Reply::Ok)
            }
            (Op::Cas { from, to }, v) => Err(format!(
                "the :ok of a cas [{from} {to}] carries another value, {}: a cas's completion \
                 must echo [from to], or be nil",
                shown(v)
            )),
        }
    }

    /// A failed cas compared and found another value than `from`, at
    /// some moment between its call and its return: it stays in the
    /// history as a read of "not `from`". A failed read or write did not
    /// happen (it is left out).
    fn failed(&self, input: &Op, _value: &Value) -> Result<Option<Reply>, String> {
        Ok(match input {
            Op::Cas { .. } => Some(Reply::CasFailed),
            Op::Read | Op::Write(_) => None,
        })
    }
}
