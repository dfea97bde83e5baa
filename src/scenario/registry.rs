//! The recipes a `zoosim` command knows: zoosim's own
//! ([`super::builtin::all`]), then a user's ([`Registry::with`]), each
//! declaration checked as it is registered.

use std::fmt;

use super::recipe::{Recipe, RecipeRef};
use super::verdict::{run_properties, ENSEMBLE_COUNTERS};
use super::workload::{KeyKind, Workload};

/// A recipe declaration [`Registry::register`] refuses.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RegisterError {
    /// The refused recipe's name.
    pub recipe: String,
    /// What is wrong with its declaration.
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
/// use zoosim::scenario::registry::Registry;
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
        for p in run_properties::ALL
            .iter()
            .chain(&crate::check::contract::GUARANTEES)
            .chain(&crate::check::contract::VERDICT_PROPERTIES)
        {
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
            .check_workload(&Workload::defaults(recipe.workload_keys()))
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

    /// How this `zoosim` is run: [`Registry::invoked_as`]'s command, or
    /// `cargo run --release --`.
    pub fn invocation(&self) -> &str {
        self.invoked_as
            .as_deref()
            .unwrap_or("cargo run --release --")
    }
}
