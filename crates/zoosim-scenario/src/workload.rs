//! A recipe's `[workload]`: the keys it declares ([`WorkloadKey`], with
//! their bounds and defaults: the one place the parser, `zoosim list`,
//! the shrinker and a run read them from) and a scenario's values for
//! them ([`Workload`]). Pure data.

use std::fmt;

/// A `[workload]` key a recipe takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct WorkloadKey {
    /// The key's name in `[workload]`.
    pub name: &'static str,
    /// What it sets, for `zoosim list`.
    pub doc: &'static str,
    /// Its type, bounds and default.
    pub kind: KeyKind,
}

/// What a [`WorkloadKey`] takes: its type, bounds and default.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KeyKind {
    /// One integer in `min..=max`.
    Int {
        /// The least value accepted.
        min: i64,
        /// The greatest value accepted.
        max: i64,
        /// The value when the file sets none.
        default: i64,
    },
    /// An integer or a list of them, each in `min..=max`: one is drawn per
    /// seed (as `hold_ms` is for the locks), by one draw whatever the list.
    Drawn {
        /// The least value accepted.
        min: i64,
        /// The greatest value accepted.
        max: i64,
        /// The choices when the file sets none.
        default: &'static [i64],
    },
}

impl WorkloadKey {
    /// An integer key.
    pub const fn int(
        name: &'static str,
        doc: &'static str,
        min: i64,
        max: i64,
        default: i64,
    ) -> WorkloadKey {
        WorkloadKey {
            name,
            doc,
            kind: KeyKind::Int { min, max, default },
        }
    }

    /// A key whose value is drawn per seed from a list.
    pub const fn drawn(
        name: &'static str,
        doc: &'static str,
        min: i64,
        max: i64,
        default: &'static [i64],
    ) -> WorkloadKey {
        WorkloadKey {
            name,
            doc,
            kind: KeyKind::Drawn { min, max, default },
        }
    }

    /// The value when the file sets none.
    pub fn default_value(&self) -> WorkloadValue {
        match self.kind {
            KeyKind::Int { default, .. } => WorkloadValue::Int(default),
            KeyKind::Drawn { default, .. } => WorkloadValue::Drawn(default.to_vec()),
        }
    }

    /// `value` is of this key's kind and within its bounds.
    pub fn check(&self, value: &WorkloadValue) -> Result<(), WorkloadError> {
        let ok = match (self.kind, value) {
            (KeyKind::Int { min, max, .. }, WorkloadValue::Int(n)) => (min..=max).contains(n),
            (KeyKind::Drawn { min, max, .. }, WorkloadValue::Drawn(v)) => {
                !v.is_empty() && v.iter().all(|n| (min..=max).contains(n))
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(WorkloadError::new(
                self.name,
                format!("{}, got {value}", self.takes()),
            ))
        }
    }

    /// What the key takes, as an error says it.
    pub fn takes(&self) -> String {
        match self.kind {
            KeyKind::Int { min, max, .. } => format!(
                "`workload.{}` must be an integer between {min} and {max}",
                self.name
            ),
            KeyKind::Drawn { min, max, .. } => format!(
                "`workload.{}` must be an integer ({min} to {max}) or a non-empty list of them",
                self.name
            ),
        }
    }

    /// The key as `zoosim list` shows it.
    pub fn describe(&self) -> String {
        let (what, default) = match self.kind {
            KeyKind::Int { min, max, default } => (format!("{min} to {max}"), default.to_string()),
            KeyKind::Drawn { min, max, default } => (
                format!("{min} to {max}, or a list drawn from per seed"),
                WorkloadValue::Drawn(default.to_vec()).to_string(),
            ),
        };
        let doc = if self.doc.is_empty() {
            String::new()
        } else {
            format!(": {}", self.doc)
        };
        format!("{} ({what}; default {default}){doc}", self.name)
    }
}

/// A workload key's value as a scenario file set it (or its default).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum WorkloadValue {
    /// A [`KeyKind::Int`] key's value.
    Int(i64),
    /// The choices; one is drawn per seed.
    Drawn(Vec<i64>),
}

impl fmt::Display for WorkloadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkloadValue::Int(n) => write!(f, "{n}"),
            WorkloadValue::Drawn(v) => {
                let items: Vec<String> = v.iter().map(i64::to_string).collect();
                write!(f, "[{}]", items.join(", "))
            }
        }
    }
}

/// A workload key given a value it does not take, or a workload that
/// breaks a rule between keys: the key (for the parser to point at) and
/// what was wrong.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WorkloadError {
    /// The workload key at fault.
    pub key: String,
    /// What was wrong.
    pub message: String,
}

impl WorkloadError {
    /// `key`'s value is wrong: `message` says how.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> WorkloadError {
        WorkloadError {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for WorkloadError {}

/// A scenario's `[workload]`: every key its recipe declares, with the
/// file's value or the default, in declaration order.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct Workload {
    values: Vec<(&'static str, WorkloadValue)>,
}

impl Workload {
    /// Every key at its default.
    pub fn defaults(keys: &[WorkloadKey]) -> Workload {
        Workload {
            values: keys.iter().map(|k| (k.name, k.default_value())).collect(),
        }
    }

    /// `key`'s value; None for a key its recipe does not declare.
    pub fn get(&self, key: &str) -> Option<&WorkloadValue> {
        self.values.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// An integer key's value; None for a key not declared or drawn.
    pub fn int(&self, key: &str) -> Option<i64> {
        match self.get(key)? {
            WorkloadValue::Int(n) => Some(*n),
            WorkloadValue::Drawn(_) => None,
        }
    }

    /// The number of clients, where the recipe has a `clients` key.
    pub fn clients(&self) -> Option<usize> {
        self.int("clients").map(|n| n.max(0) as usize)
    }

    /// Operations per client (0: unbounded), where the recipe takes them.
    pub fn operations(&self) -> Option<u64> {
        self.int("operations").map(|n| n.max(0) as u64)
    }

    /// Every key and its value, in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &WorkloadValue)> {
        self.values.iter().map(|(k, v)| (*k, v))
    }

    /// Sets one of `keys`, checked against its bounds (the rules between
    /// keys are the recipe's: [`crate::spec::Scenario::set_workload`]
    /// checks both).
    pub fn set(
        &mut self,
        keys: &[WorkloadKey],
        key: &str,
        value: WorkloadValue,
    ) -> Result<(), WorkloadError> {
        let Some(k) = keys.iter().find(|k| k.name == key) else {
            let names: Vec<&str> = keys.iter().map(|k| k.name).collect();
            return Err(WorkloadError::new(
                key,
                format!(
                    "no workload key {key:?}; the keys are: {}",
                    names.join(", ")
                ),
            ));
        };
        k.check(&value)?;
        self.put(k.name, value);
        Ok(())
    }

    /// Sets a key with no check (the parser checks every key, then the
    /// rules between them).
    pub(crate) fn put(&mut self, key: &'static str, value: WorkloadValue) {
        match self.values.iter_mut().find(|(n, _)| *n == key) {
            Some((_, v)) => *v = value,
            None => self.values.push((key, value)),
        }
    }

    /// The `[workload]` section's lines.
    pub fn to_toml(&self) -> String {
        self.values
            .iter()
            .map(|(k, v)| format!("{k} = {v}\n"))
            .collect()
    }
}
