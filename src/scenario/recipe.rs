//! What a recipe is to zoosim: the [`Recipe`] trait, which every built-in
//! recipe ([`super::builtin`]) and every recipe of a user's crate
//! implements alike, and the [`Registry`] that knows them.
//!
//! A recipe declares what scenario files may say about it — its name,
//! buggy variants, `[workload]` keys with their bounds and defaults (in
//! one place: the parser, `zoosim list`, the shrinker and the run all read
//! them from here), the properties its oracle checks and the counters it
//! reports — and, in the simulation, `start`s its clients and hands back a
//! [`super::sim::Running`] that judges the run into a [`Verdict`]. The
//! declarations are pure data; the run half exists under `--cfg madsim`.
//!
//! Adding a recipe: a module that implements [`Recipe`], and one line
//! that registers it (zoosim's own are listed in [`super::builtin::all`];
//! a user's crate calls [`Registry::with`]).

use std::fmt;
use std::sync::Arc;

pub use crate::check::{Property, Violation};

/// A recipe under scenario files, the nemesis and its own oracle.
///
/// Everything but `start` is a declaration: the parser accepts exactly
/// what is declared (with errors naming the file, line and column and the
/// accepted values), `zoosim list` shows it, coverage goals may name the
/// counters, and a verdict may name only the declared properties.
pub trait Recipe: Send + Sync + 'static {
    /// The name scenario files give as `recipe = "..."`: letters, digits
    /// and `-_/.`.
    fn name(&self) -> &str;

    /// One line for `zoosim list`.
    fn description(&self) -> &str {
        ""
    }

    /// The buggy variants it can be built in (`variant = "..."`), by name;
    /// by convention `<recipe>/<bug>`.
    fn variants(&self) -> &[&str] {
        &[]
    }

    /// The `[workload]` keys it takes, in the order files list them. A key
    /// named `clients` is the number of clients: the shrinker lowers it,
    /// and one named `operations` (operations per client, 0 for no bound)
    /// is what the shrinker counts.
    fn workload_keys(&self) -> &[WorkloadKey] {
        &[]
    }

    /// What a scenario's workload must satisfy beyond each key's bounds
    /// (e.g. a threshold no larger than the clients): Err names the key.
    fn check_workload(&self, _workload: &Workload) -> Result<(), WorkloadError> {
        Ok(())
    }

    /// How many clients the nemesis's client faults may aim at (a placed
    /// fault's `client` is below it): `clients` by default.
    fn client_slots(&self, workload: &Workload) -> usize {
        workload.clients().unwrap_or(0)
    }

    /// The fewest clients it runs with (the shrinker goes no lower).
    fn min_clients(&self, _workload: &Workload) -> usize {
        1
    }

    /// What its oracle checks, at least one.
    fn properties(&self) -> &[Property];

    /// The counters its verdicts report (coverage goals may name them, as
    /// they may `fault:<fault>` and the ensemble's counters).
    fn counters(&self) -> &[&str];

    /// One seed's run begins: spawn the clients
    /// ([`super::sim::RunCtx::spawn_client`], so the nemesis's client
    /// faults hit them too) and any other task; return what will judge the
    /// run once the quiet phase is over. Randomness comes from
    /// `madsim::rand::thread_rng()` only, so a seed replays exactly.
    #[cfg(madsim)]
    fn start(&self, ctx: &mut super::sim::RunCtx) -> Box<dyn super::sim::Running>;
}

/// Properties every run is judged on, whatever the recipe.
pub mod run_properties {
    use super::Property;

    /// A panic in the simulation: an invariant asserted by the tree, a
    /// server, the client or a recipe machine failed.
    pub const INVARIANTS: Property = Property::new(
        "invariants",
        "no invariant asserted in the tree, the servers, the clients or a recipe machine fails",
    );
    /// The ensemble itself recovered: the final state can be read.
    pub const ENSEMBLE_LIVENESS: Property = Property::new(
        "ensemble-liveness",
        "a leader is established by the end of the quiet phase",
    );
    /// A recipe's verdict uses only what it declares.
    pub const DECLARED_NAMES: Property = Property::new(
        "declared-names",
        "a verdict names only the properties and counters its recipe declares",
    );
    /// All of them, as `zoosim list` shows them.
    pub const ALL: [Property; 3] = [INVARIANTS, ENSEMBLE_LIVENESS, DECLARED_NAMES];
}

/// Counters every run reports, from the ensemble's servers.
pub const ENSEMBLE_COUNTERS: [&str; 8] = [
    "elections-won",
    "session-expiries",
    "setwatches-replayed",
    "lost-replies",
    "truncations",
    "zxid-refusals",
    "reconnect-closes",
    "role-change-drops",
];

/// A `[workload]` key a recipe takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct WorkloadKey {
    pub name: &'static str,
    /// What it sets, for `zoosim list`.
    pub doc: &'static str,
    pub kind: KeyKind,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KeyKind {
    /// One integer in `min..=max`.
    Int { min: i64, max: i64, default: i64 },
    /// An integer or a list of them, each in `min..=max`: one is drawn per
    /// seed (as `hold_ms` is for the locks), by one draw whatever the list.
    Drawn {
        min: i64,
        max: i64,
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
    pub key: String,
    pub message: String,
}

impl WorkloadError {
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
    /// Every declared key at its default.
    pub fn defaults(recipe: &dyn Recipe) -> Workload {
        Workload {
            values: recipe
                .workload_keys()
                .iter()
                .map(|k| (k.name, k.default_value()))
                .collect(),
        }
    }

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

    /// Sets a declared key of `recipe`, checked against its bounds and
    /// the recipe's rules between keys.
    pub fn set(
        &mut self,
        recipe: &dyn Recipe,
        key: &str,
        value: WorkloadValue,
    ) -> Result<(), WorkloadError> {
        let Some(k) = recipe.workload_keys().iter().find(|k| k.name == key) else {
            return Err(WorkloadError::new(
                key,
                format!("{} has no workload key {key:?}", recipe.name()),
            ));
        };
        k.check(&value)?;
        let mut next = self.clone();
        match next.values.iter_mut().find(|(n, _)| *n == key) {
            Some((_, v)) => *v = value,
            None => next.values.push((k.name, value)),
        }
        recipe.check_workload(&next)?;
        *self = next;
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

/// A shared handle on a recipe: scenarios hold one. Two are equal when
/// they name the same recipe.
#[derive(Clone)]
pub struct RecipeRef(Arc<dyn Recipe>);

impl RecipeRef {
    pub fn new(recipe: impl Recipe) -> RecipeRef {
        RecipeRef(Arc::new(recipe))
    }
}

impl std::ops::Deref for RecipeRef {
    type Target = dyn Recipe;
    fn deref(&self) -> &dyn Recipe {
        &*self.0
    }
}

impl PartialEq for RecipeRef {
    fn eq(&self, other: &Self) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for RecipeRef {}

impl fmt::Debug for RecipeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Recipe({})", self.0.name())
    }
}

/// What a judge found: the run passed when `violations` is empty. The
/// log (one line per outcome, in time order) is hashed into the seed's
/// digest and printed by `zoosim replay --trace`.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Verdict {
    pub violations: Vec<Violation>,
    /// For a reader (`zoosim replay` prints it).
    pub report: String,
    /// Names from [`Recipe::counters`].
    pub counters: Vec<(String, u64)>,
    pub log: Vec<String>,
    /// When each log line's event happened (simulated ms since the start),
    /// in order: the shrinker tries faults where the workload was busy.
    /// May be empty.
    pub event_ms: Vec<u64>,
}

impl Verdict {
    /// A verdict over an outcome log, one line per entry
    /// (`at ms  client c  event`).
    pub fn over_log<E: fmt::Debug>(log: &[crate::check::Entry<E>]) -> Verdict {
        Verdict {
            log: log
                .iter()
                .map(|e| format!("{:>7} ms  client {}  {:?}", e.at_ms, e.client, e.event))
                .collect(),
            event_ms: log.iter().map(|e| e.at_ms).collect(),
            ..Verdict::default()
        }
    }

    /// `property` failed: `detail` says how.
    pub fn violation(&mut self, property: Property, detail: impl Into<String>) {
        self.violations.push(Violation::new(property, detail));
    }

    /// Adds `n` to counter `name`.
    pub fn count(&mut self, name: &str, n: u64) {
        match self.counters.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => *v += n,
            None => self.counters.push((name.to_owned(), n)),
        }
    }

    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// A recipe declaration [`Registry::register`] refuses.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RegisterError {
    pub recipe: String,
    pub message: String,
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "recipe {:?}: {}", self.recipe, self.message)
    }
}

impl std::error::Error for RegisterError {}

/// The recipes a `zoosim` command knows: zoosim's own, then a user's.
///
/// ```
/// use zoosim::scenario::recipe::Registry;
/// let registry = Registry::new();
/// assert!(registry.names().contains(&"lock"));
/// assert!(registry.errors().is_empty());
/// ```
#[derive(Clone)]
pub struct Registry {
    recipes: Vec<RecipeRef>,
    errors: Vec<RegisterError>,
    invoked_as: Option<String>,
}

impl Default for Registry {
    fn default() -> Registry {
        Registry::new()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("recipes", &self.names())
            .field("errors", &self.errors)
            .finish()
    }
}

impl Registry {
    /// The built-in recipes.
    pub fn new() -> Registry {
        let mut r = Registry {
            recipes: Vec::new(),
            errors: Vec::new(),
            invoked_as: None,
        };
        for recipe in super::builtin::all() {
            if let Err(e) = r.add(recipe) {
                panic!("a built-in recipe's declaration is refused: {e}");
            }
        }
        r
    }

    /// Adds `recipe`; a declaration that cannot work (see
    /// [`Registry::register`]) is kept in [`Registry::errors`] instead,
    /// which the `zoosim` command reports before doing anything.
    pub fn with(mut self, recipe: impl Recipe) -> Registry {
        if let Err(e) = self.register(recipe) {
            self.errors.push(e);
        }
        self
    }

    /// Adds `recipe`, or says why not: a name that is empty, has other
    /// characters than letters, digits and `-_/.`, or is taken; no
    /// property; a workload key, variant, property or counter named twice;
    /// a key not in lowercase letters, digits and `_`, with min above max
    /// or a default out of its bounds; `clients` or `operations` not an
    /// integer key; a counter named as the ensemble's or `fault:...`.
    pub fn register(&mut self, recipe: impl Recipe) -> Result<(), RegisterError> {
        self.add(RecipeRef::new(recipe))
    }

    fn add(&mut self, recipe: RecipeRef) -> Result<(), RegisterError> {
        let name = recipe.name().to_owned();
        let err = |message: String| RegisterError {
            recipe: name.clone(),
            message,
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_/.".contains(c))
        {
            return Err(err("a name is letters, digits and -_/. (not empty)".into()));
        }
        if self.get(&name).is_some() {
            return Err(err("a recipe of that name is registered already".into()));
        }
        if recipe.properties().is_empty() {
            return Err(err("declares no property (what does it check?)".into()));
        }
        let twice = |names: Vec<&str>, kind: &str| -> Result<(), RegisterError> {
            for (i, n) in names.iter().enumerate() {
                if names[..i].contains(n) {
                    return Err(err(format!("{kind} {n:?} is declared twice")));
                }
            }
            Ok(())
        };
        twice(recipe.variants().to_vec(), "variant")?;
        twice(recipe.counters().to_vec(), "counter")?;
        let properties: Vec<&str> = recipe.properties().iter().map(|p| p.name).collect();
        twice(properties.clone(), "property")?;
        for p in run_properties::ALL {
            if properties.contains(&p.name) {
                return Err(err(format!(
                    "property {:?} is every run's own (zoosim list shows them)",
                    p.name
                )));
            }
        }
        let keys = recipe.workload_keys();
        twice(keys.iter().map(|k| k.name).collect(), "workload key")?;
        for c in recipe.counters() {
            if ENSEMBLE_COUNTERS.contains(c) || c.starts_with("fault:") {
                return Err(err(format!(
                    "counter {c:?} is the ensemble's or a fault's name"
                )));
            }
        }
        for k in keys {
            if k.name.is_empty()
                || !k
                    .name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                return Err(err(format!(
                    "workload key {:?} must be lowercase letters, digits and _",
                    k.name
                )));
            }
            let (min, max) = match k.kind {
                KeyKind::Int { min, max, .. } | KeyKind::Drawn { min, max, .. } => (min, max),
            };
            if min > max {
                return Err(err(format!(
                    "workload key {:?} has min {min} > max {max}",
                    k.name
                )));
            }
            if ["clients", "operations"].contains(&k.name)
                && (!matches!(k.kind, KeyKind::Int { .. }) || min < 0)
            {
                return Err(err(format!(
                    "workload key {:?} must be an integer key, at least 0",
                    k.name
                )));
            }
            k.check(&k.default_value())
                .map_err(|e| err(format!("the default of {e}")))?;
        }
        recipe
            .check_workload(&Workload::defaults(&*recipe))
            .map_err(|e| err(format!("its defaults break its own rule: {e}")))?;
        self.recipes.push(recipe);
        Ok(())
    }

    /// Declarations [`Registry::with`] refused.
    pub fn errors(&self) -> &[RegisterError] {
        &self.errors
    }

    /// The recipe called `name`.
    pub fn get(&self, name: &str) -> Option<&RecipeRef> {
        self.recipes.iter().find(|r| r.name() == name)
    }

    /// Every recipe, built-in first, then in registration order.
    pub fn recipes(&self) -> impl Iterator<Item = &RecipeRef> {
        self.recipes.iter()
    }

    /// Every name a scenario's `recipe` may take.
    pub fn names(&self) -> Vec<&str> {
        self.recipes.iter().map(|r| r.name()).collect()
    }

    /// How this `zoosim` is run, for the replay commands it prints
    /// (default `cargo run --release --`); e.g. `cargo run --release
    /// --example custom_recipe --`.
    pub fn invoked_as(mut self, command: impl Into<String>) -> Registry {
        self.invoked_as = Some(command.into());
        self
    }

    pub fn invocation(&self) -> &str {
        self.invoked_as
            .as_deref()
            .unwrap_or("cargo run --release --")
    }
}

#[cfg(test)]
#[path = "recipe_tests.rs"]
mod tests;
