//! The recipes a `zoosim` command knows: zoosim's own
//! ([`super::builtin::all`]), then a user's ([`Registry::with`]), each
//! declaration checked as it is registered; and their models (zoosim's
//! own from [`zoosim_models::catalog`], a user's by
//! [`Registry::with_model`]), each under the recipe of its name.

use std::fmt;
use std::sync::Arc;

use zoosim_models::Listed;

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
/// use zoosim_scenario::registry::Registry;
/// let registry = Registry::new();
/// assert!(registry.names().contains(&"lock"));
/// assert!(registry.errors().is_empty());
/// ```
#[derive(Clone)]
pub struct Registry {
    recipes: Vec<RecipeRef>,
    /// Each under the recipe of its name, at most one a recipe.
    models: Vec<Arc<dyn Listed>>,
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
            .field(
                "models",
                &self.models.iter().map(|m| m.name()).collect::<Vec<_>>(),
            )
            .field("errors", &self.errors)
            .finish()
    }
}

impl Registry {
    /// The built-in recipes.
    pub fn new() -> Registry {
        let mut r = Registry {
            recipes: Vec::new(),
            models: Vec::new(),
            errors: Vec::new(),
            invoked_as: None,
        };
        for recipe in super::builtin::all() {
            if let Err(e) = r.add(recipe) {
                panic!("a built-in recipe's declaration is refused: {e}");
            }
        }
        for model in zoosim_models::catalog() {
            if let Err(e) = r.register_model(model) {
                panic!("a built-in model is refused: {e}");
            }
        }
        r
    }

    /// Adds `model` (made by [`zoosim_models::model_entry`]) as the model of the
    /// recipe of its name, registered before it; a model that cannot be
    /// its (see [`Registry::register_model`]) is kept in
    /// [`Registry::errors`] instead. `zoosim check NAME` then checks it,
    /// and `zoosim list` shows it under its recipe.
    pub fn with_model(mut self, model: Box<dyn Listed>) -> Registry {
        if let Err(e) = self.register_model(model) {
            self.errors.push(e);
        }
        self
    }

    /// Adds `model` as the model of the registered recipe of its name, or
    /// says why not: no recipe of that name, a model of it registered
    /// already, a variant the recipe does not declare (the correct one
    /// has the recipe's name), or a claim named as one of the oracle's
    /// properties but meaning something else (a property name means one
    /// thing, in the oracle and in the model).
    pub fn register_model(&mut self, model: Box<dyn Listed>) -> Result<(), RegisterError> {
        let name = model.name();
        let err = |message: String| RegisterError {
            recipe: name.to_owned(),
            message,
        };
        let Some(recipe) = self.get(name) else {
            return Err(err(format!(
                "a model is registered after the recipe of its name, and no recipe is named \
                 {name:?}; the recipes are: {}",
                self.names().join(", ")
            )));
        };
        if self.models.iter().any(|m| m.name() == name) {
            return Err(err("a model of it is registered already".into()));
        }
        for v in model.variants().into_iter().skip(1) {
            if !recipe.variants().contains(&v) {
                return Err(err(format!(
                    "the model's variant {v:?} is not one of the recipe's: {}",
                    recipe.variants().join(", ")
                )));
            }
        }
        for claim in model.claims() {
            if let Some(p) = recipe.properties().iter().find(|p| p.name == claim.name) {
                if *p != claim {
                    return Err(err(format!(
                        "the model's claim {:?} means {:?}, the oracle's property of that name \
                         {:?}: give the model's claim a name of its own",
                        claim.name, claim.what, p.what
                    )));
                }
            }
        }
        self.models.push(Arc::from(model));
        Ok(())
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
            .chain(&zoosim_core::check::contract::GUARANTEES)
            .chain(&zoosim_core::check::contract::VERDICT_PROPERTIES)
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

    /// The model of the recipe called `name` (or of the name a built-in
    /// model had before [`zoosim_models::RENAMED_MODELS`]), or an error
    /// listing the models.
    pub fn model(&self, name: &str) -> Result<Arc<dyn Listed>, String> {
        let name = zoosim_models::RENAMED_MODELS
            .iter()
            .find(|(old, _)| *old == name)
            .map_or(name, |(_, new)| new);
        self.models
            .iter()
            .find(|m| m.name() == name)
            .cloned()
            .ok_or_else(|| {
                let names: Vec<&str> = self.models.iter().map(|m| m.name()).collect();
                format!(
                    "unknown model {name:?}; the models are {}",
                    names.join(", ")
                )
            })
    }

    /// Every model, built-in first, then in registration order.
    pub fn models(&self) -> impl Iterator<Item = &dyn Listed> {
        self.models.iter().map(|m| &**m)
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
