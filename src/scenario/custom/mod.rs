//! Users' own recipes: a crate puts its coordination code (a sans-IO
//! machine run by [`crate::recipes::Driver`], or plain async code over
//! [`crate::client::Zk`]) under scenario files, the nemesis and its own
//! oracle, next to the built-in recipes.
//!
//! A recipe author implements [`CustomRecipe`]: what scenario files may
//! say about it (its name, buggy variants, `[workload]` keys, properties
//! and counters: pure data, checked by the parser and shown by `zoosim
//! list`), and, in the simulation, `start` (spawn the clients, get back a
//! [`Running`]) and [`Running::judge`] (after the quiet phase: violations,
//! a report, counters and the outcome log, which feed the digest, replay
//! and the runner's summary as the built-in recipes' do). A [`Registry`]
//! holds the recipes a `zoosim` command knows besides the built-in ones;
//! [`crate::cli::main_with`] is the whole command with them.
//!
//! ```text
//! use zoosim::scenario::custom::{CustomRecipe, Registry, RunCtx, Running, JudgeCtx, Verdict, WorkloadKey};
//!
//! struct CasCounter;
//!
//! impl CustomRecipe for CasCounter {
//!     fn name(&self) -> &str { "cas-counter" }
//!     fn workload_keys(&self) -> &[WorkloadKey] {
//!         const KEYS: &[WorkloadKey] =
//!             &[WorkloadKey::int("think_ms_max", "pause between increments", 0, 60_000, 50)];
//!         KEYS
//!     }
//!     fn properties(&self) -> &[&str] { &["no-lost-increment: ..."] }
//!     fn counters(&self) -> &[&str] { &["increments-acked"] }
//!     fn start(&self, ctx: &mut RunCtx) -> Box<dyn Running> { /* ctx.spawn_client(c, ...) */ }
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     zoosim::cli::main_with(Registry::new().with(CasCounter))
//! }
//! ```
//!
//! The madsim half ([`RunCtx`], [`Running`], [`JudgeCtx`], [`OutcomeLog`])
//! exists under `--cfg madsim` only, as the simulation does; a user's crate
//! builds with it too (madsim requires it of every crate in the build).

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

#[cfg(madsim)]
pub(crate) mod sim;
/// The simulation's runtime, as zoosim uses it: a recipe's timers
/// (`madsim::time`) and randomness (`madsim::rand::thread_rng`, the only
/// source a seed replays) come from here.
#[cfg(madsim)]
pub use madsim;
#[cfg(madsim)]
pub use sim::{now_ms, JudgeCtx, NoLeader, OutcomeLog, RunCtx, Running};

use super::registry::{Recipe, ENSEMBLE_COUNTERS};

/// A recipe of the user's, run by scenario files as the built-in ones are.
///
/// Everything but [`CustomRecipe::start`] is a declaration: the parser
/// accepts exactly what is declared (with errors naming the file, line and
/// column and the accepted values), `zoosim list` shows it, coverage goals
/// may name the counters.
pub trait CustomRecipe: Send + Sync + 'static {
    /// The name scenario files give as `recipe = "..."`: letters, digits
    /// and `-_/.`, not a built-in recipe's name.
    fn name(&self) -> &str;

    /// One line for `zoosim list`.
    fn description(&self) -> &str {
        ""
    }

    /// The buggy variants it can be built in (`variant = "..."`), by name;
    /// by convention `<recipe>/<bug>`. [`RunCtx::variant`] says which one
    /// a run asks for.
    fn variants(&self) -> &[&str] {
        &[]
    }

    /// The `[workload]` keys it takes besides `clients`, which every
    /// recipe takes (1 to 64, default [`CustomRecipe::default_clients`]).
    fn workload_keys(&self) -> &[WorkloadKey] {
        &[]
    }

    /// `clients` when a scenario does not say.
    fn default_clients(&self) -> usize {
        3
    }

    /// What its oracle checks, in words (`name: what`), at least one.
    fn properties(&self) -> &[&str];

    /// The counters its [`Verdict`]s report (coverage goals may name them,
    /// as they may `fault:<fault>` and the ensemble's counters).
    fn counters(&self) -> &[&str];

    /// One seed's run begins: spawn the clients ([`RunCtx::spawn_client`],
    /// so the nemesis's client faults hit them too) and any other task
    /// ([`RunCtx::spawn`]); return what will judge the run once the quiet
    /// phase is over. Randomness comes from `madsim::rand::thread_rng()`
    /// only, so a seed replays exactly.
    #[cfg(madsim)]
    fn start(&self, ctx: &mut RunCtx) -> Box<dyn Running>;
}

/// A `[workload]` key a recipe takes, for the parser and `zoosim list`.
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
    /// seed (as `hold_ms` is for the locks).
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

    fn default_value(&self) -> WorkloadValue {
        match self.kind {
            KeyKind::Int { default, .. } => WorkloadValue::Int(default),
            KeyKind::Drawn { default, .. } => WorkloadValue::Drawn(default.to_vec()),
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
#[derive(Clone, PartialEq, Eq, Debug)]
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

/// A scenario's registered recipe and its workload keys' values (every
/// declared key, defaults filled in).
#[derive(Clone)]
pub struct CustomSpec {
    recipe: Arc<dyn CustomRecipe>,
    values: BTreeMap<String, WorkloadValue>,
}

impl CustomSpec {
    pub fn recipe(&self) -> &dyn CustomRecipe {
        &*self.recipe
    }

    pub fn name(&self) -> &str {
        self.recipe.name()
    }

    /// Every declared key's value, by name.
    pub fn values(&self) -> &BTreeMap<String, WorkloadValue> {
        &self.values
    }

    /// Sets a declared key (for tools that rewrite scenarios); Err for an
    /// undeclared key or a value outside its bounds.
    pub fn set(&mut self, key: &str, value: WorkloadValue) -> Result<(), String> {
        let Some(k) = self.recipe.workload_keys().iter().find(|k| k.name == key) else {
            return Err(format!("{} has no workload key {key:?}", self.name()));
        };
        check_value(k, &value)?;
        self.values.insert(key.to_owned(), value);
        Ok(())
    }

    /// The `[workload]` section's lines, for [`super::spec::Scenario::to_toml`].
    pub(crate) fn workload_toml(&self, clients: usize) -> String {
        let mut out = format!("clients = {clients}\n");
        for (k, v) in &self.values {
            out.push_str(&format!("{k} = {v}\n"));
        }
        out
    }
}

impl PartialEq for CustomSpec {
    fn eq(&self, other: &Self) -> bool {
        self.recipe.name() == other.recipe.name() && self.values == other.values
    }
}

impl Eq for CustomSpec {}

impl fmt::Debug for CustomSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CustomSpec")
            .field("recipe", &self.recipe.name())
            .field("values", &self.values)
            .finish()
    }
}

/// What a judge found: the run passed when `violations` is empty. The
/// log (one line per outcome, in time order) is hashed into the seed's
/// digest and printed by `zoosim replay --trace`.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Verdict {
    /// One line each (the first one is the summary's).
    pub violations: Vec<String>,
    /// For a reader (`zoosim replay` prints it).
    pub report: String,
    /// Names from [`CustomRecipe::counters`]; an undeclared name fails the
    /// run.
    pub counters: Vec<(String, u64)>,
    pub log: Vec<String>,
    /// When each log line's event happened (simulated ms since the start),
    /// in order: the shrinker tries faults where the workload was busy.
    /// May be empty.
    pub event_ms: Vec<u64>,
}

impl Verdict {
    /// A verdict over an outcome log, its lines written as the built-in
    /// recipes' are (`at ms  client c  event`).
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

    pub fn violation(&mut self, what: impl Into<String>) {
        self.violations.push(what.into());
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

/// The recipes a `zoosim` command knows besides the built-in ones.
///
/// ```
/// use zoosim::scenario::custom::Registry;
/// let registry = Registry::new();
/// assert!(registry.names().contains(&"lock"));
/// assert!(registry.errors().is_empty());
/// ```
#[derive(Clone, Default)]
pub struct Registry {
    recipes: Vec<Arc<dyn CustomRecipe>>,
    errors: Vec<String>,
    invoked_as: Option<String>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.recipes.iter().map(|r| r.name()).collect();
        f.debug_struct("Registry")
            .field("recipes", &names)
            .field("errors", &self.errors)
            .finish()
    }
}

impl Registry {
    /// The built-in recipes only.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Adds `recipe`; a declaration that cannot work (see
    /// [`Registry::register`]) is kept in [`Registry::errors`] instead,
    /// which the `zoosim` command reports before doing anything.
    pub fn with(mut self, recipe: impl CustomRecipe) -> Registry {
        if let Err(e) = self.register(recipe) {
            self.errors.push(e);
        }
        self
    }

    /// Adds `recipe`, or says why not: a name that is empty, has other
    /// characters than letters, digits and `-_/.`, or is taken (by a
    /// built-in recipe or an earlier one); no property; a workload key,
    /// variant or counter named twice; a key named `clients` (every recipe
    /// has it) or with a default out of its bounds; a counter named as the
    /// ensemble's or `fault:...`; `default_clients` not in 1 to 64.
    pub fn register(&mut self, recipe: impl CustomRecipe) -> Result<(), String> {
        let name = recipe.name().to_owned();
        let what = format!("recipe {name:?}");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_/.".contains(c))
        {
            return Err(format!(
                "{what}: a name is letters, digits and -_/. (not empty)"
            ));
        }
        if Recipe::from_name(&name).is_some() {
            return Err(format!("{what}: a built-in recipe has that name"));
        }
        if self.get(&name).is_some() {
            return Err(format!("{what}: registered twice"));
        }
        if recipe.properties().is_empty() {
            return Err(format!(
                "{what}: declares no property (what does it check?)"
            ));
        }
        if !(1..=64).contains(&recipe.default_clients()) {
            return Err(format!(
                "{what}: default_clients must be 1 to 64, is {}",
                recipe.default_clients()
            ));
        }
        let twice = |names: Vec<&str>, kind: &str| -> Result<(), String> {
            for (i, n) in names.iter().enumerate() {
                if names[..i].contains(n) {
                    return Err(format!("{what}: {kind} {n:?} is declared twice"));
                }
            }
            Ok(())
        };
        twice(recipe.variants().to_vec(), "variant")?;
        twice(recipe.counters().to_vec(), "counter")?;
        let keys = recipe.workload_keys();
        twice(keys.iter().map(|k| k.name).collect(), "workload key")?;
        for c in recipe.counters() {
            if ENSEMBLE_COUNTERS.contains(c) || c.starts_with("fault:") {
                return Err(format!(
                    "{what}: counter {c:?} is the ensemble's or a fault's name"
                ));
            }
        }
        for k in keys {
            if k.name == "clients" {
                return Err(format!(
                    "{what}: `clients` is every recipe's key (see default_clients)"
                ));
            }
            if k.name.is_empty()
                || !k
                    .name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                return Err(format!(
                    "{what}: workload key {:?} must be lowercase letters, digits and _",
                    k.name
                ));
            }
            let (min, max) = match k.kind {
                KeyKind::Int { min, max, .. } | KeyKind::Drawn { min, max, .. } => (min, max),
            };
            if min > max {
                return Err(format!(
                    "{what}: workload key {:?} has min {min} > max {max}",
                    k.name
                ));
            }
            check_value(k, &k.default_value())
                .map_err(|e| format!("{what}: the default of {e}"))?;
        }
        self.recipes.push(Arc::new(recipe));
        Ok(())
    }

    /// Declarations [`Registry::with`] refused.
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// The registered recipe called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn CustomRecipe>> {
        self.recipes.iter().find(|r| r.name() == name)
    }

    /// The registered recipes, in registration order.
    pub fn recipes(&self) -> impl Iterator<Item = &dyn CustomRecipe> {
        self.recipes.iter().map(|r| &**r)
    }

    /// The recipe a scenario's `recipe = name` names: a built-in one, or
    /// [`Recipe::Custom`] for a registered one.
    pub fn recipe(&self, name: &str) -> Option<Recipe> {
        Recipe::from_name(name).or(self.get(name).map(|_| Recipe::Custom))
    }

    /// Every name a scenario's `recipe` may take: built-in, then registered.
    pub fn names(&self) -> Vec<&str> {
        Recipe::ALL
            .iter()
            .map(|r| r.name())
            .chain(self.recipes.iter().map(|r| r.name()))
            .collect()
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

/// `value` is within `key`'s bounds; Err says what the key takes.
fn check_value(key: &WorkloadKey, value: &WorkloadValue) -> Result<(), String> {
    let ok = match (key.kind, value) {
        (KeyKind::Int { min, max, .. }, WorkloadValue::Int(n)) => (min..=max).contains(n),
        (KeyKind::Drawn { min, max, .. }, WorkloadValue::Drawn(v)) => {
            !v.is_empty() && v.iter().all(|n| (min..=max).contains(n))
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{}, got {value}", takes(key)))
    }
}

/// What `key` takes, as an error says it.
fn takes(key: &WorkloadKey) -> String {
    match key.kind {
        KeyKind::Int { min, max, .. } => format!(
            "`workload.{}` must be an integer between {min} and {max}",
            key.name
        ),
        KeyKind::Drawn { min, max, .. } => format!(
            "`workload.{}` must be an integer ({min} to {max}) or a non-empty list of them",
            key.name
        ),
    }
}

/// Reads a registered recipe's `[workload]` table: `clients` and its
/// declared keys, every other key refused. Err: the offending key (to be
/// located in the file) and the message.
pub(crate) fn parse_workload(
    recipe: &Arc<dyn CustomRecipe>,
    table: &toml::Table,
) -> Result<(usize, CustomSpec), (String, String)> {
    let keys = recipe.workload_keys();
    for key in table.keys() {
        if key != "clients" && !keys.iter().any(|k| k.name == key) {
            let mut accepted = vec!["clients"];
            accepted.extend(keys.iter().map(|k| k.name));
            return Err((
                key.clone(),
                format!(
                    "`{key}` is not a workload key of recipe {}; it takes: {}",
                    recipe.name(),
                    accepted.join(", ")
                ),
            ));
        }
    }
    let clients = match table.get("clients") {
        None => recipe.default_clients(),
        Some(toml::Value::Integer(n)) if (1..=64).contains(n) => *n as usize,
        Some(v) => {
            return Err((
                "clients".into(),
                format!("`workload.clients` must be an integer between 1 and 64, got {v}"),
            ))
        }
    };
    let mut values = BTreeMap::new();
    for k in keys {
        let value = match table.get(k.name) {
            None => k.default_value(),
            Some(v) => {
                let value = match (k.kind, v) {
                    (KeyKind::Int { .. }, toml::Value::Integer(n)) => Some(WorkloadValue::Int(*n)),
                    (KeyKind::Drawn { .. }, toml::Value::Integer(n)) => {
                        Some(WorkloadValue::Drawn(vec![*n]))
                    }
                    (KeyKind::Drawn { .. }, toml::Value::Array(a)) => a
                        .iter()
                        .map(toml::Value::as_integer)
                        .collect::<Option<Vec<i64>>>()
                        .map(WorkloadValue::Drawn),
                    _ => None,
                };
                match value {
                    Some(value) if check_value(k, &value).is_ok() => value,
                    _ => return Err((k.name.to_owned(), format!("{}, got {v}", takes(k)))),
                }
            }
        };
        values.insert(k.name.to_owned(), value);
    }
    Ok((
        clients,
        CustomSpec {
            recipe: recipe.clone(),
            values,
        },
    ))
}

/// Where `key = ...` is in the `[workload]` section starting at
/// `section` (toml::Table keeps no spans for its keys); the section's own
/// span when the key is not found.
pub(crate) fn key_span(text: &str, section: Range<usize>, key: &str) -> Range<usize> {
    let start = section.start.min(text.len());
    let rest = &text[start..];
    // The table's span may cover its header only: read on to the next
    // table header.
    let end = rest
        .match_indices("\n[")
        .next()
        .map_or(text.len(), |(i, _)| start + i + 1);
    let mut offset = start;
    for line in text[start..end].split_inclusive('\n') {
        let indent = line.len() - line.trim_start().len();
        let after = &line[indent..];
        if after
            .strip_prefix(key)
            .is_some_and(|r| r.trim_start().starts_with('='))
        {
            return offset + indent..offset + indent + key.len();
        }
        offset += line.len();
    }
    section
}

#[cfg(test)]
mod tests;
