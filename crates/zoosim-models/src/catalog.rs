//! Every model, known generically: `zoosim check`, `zoosim list` and the
//! benchmark read this list, so adding a model is one line in
//! [`catalog`].

use std::fmt;

use zoosim_recipes::lock::LockVariant;

use crate::cycle::{find_cycle, Bound};

use super::{
    barrier, check, config, double_barrier, election, lock, membership, queue, render_path,
    revocable, shared_lock, two_phase_commit, Checked, Faults, ModelError, Options, RecipeModel,
    World, MAX_CLIENTS,
};

/// Every model, in the order `zoosim list` shows them. One line each:
/// what it is (a line of text), its variants (the correct one first),
/// their names, and the model of a variant for a number of clients (an
/// error for a size the model cannot take). A recipe without variants
/// passes `&[()]`, `|_| "name"` and `|_, _| Ok(Model::new())`.
// One line per model, kept so by hand (rustfmt would spread each over
// six): adding a model is adding a line.
#[rustfmt::skip]
pub fn catalog() -> Vec<Box<dyn Listed>> {
    vec![
        model_entry(lock::ABOUT, &lock::VARIANTS, |v| v.name(), |v, _| Ok(lock::LockModel::new(v))),
        model_entry(shared_lock::ABOUT, &shared_lock::VARIANTS, |v| if v == LockVariant::Correct { "shared-lock" } else { v.name() }, |v, _| Ok(shared_lock::SharedLockModel::new(v))),
        model_entry(revocable::ABOUT, &[()], |_| "revocable-lock", |_, n| revocable::RevocableModel::for_clients(n)),
        model_entry(election::ABOUT, &election::VARIANTS, |v| v.name(), |v, _| Ok(election::ElectionModel::new(v))),
        model_entry(barrier::ABOUT, &barrier::VARIANTS, |v| v.name(), |v, _| Ok(barrier::BarrierModel::new(v))),
        model_entry(double_barrier::ABOUT, &[()], |_| "double-barrier", |_, _| Ok(double_barrier::DoubleBarrierModel::new(2))),
        model_entry(queue::QUEUE_ABOUT, &[()], |_| "queue", |_, _| Ok(queue::QueueModel::plain())),
        model_entry(queue::PRIORITY_ABOUT, &[()], |_| "priority-queue", |_, _| Ok(queue::QueueModel::priority())),
        model_entry(config::ABOUT, &[()], |_| "configuration", |_, _| Ok(config::ConfigModel::new())),
        model_entry(membership::ABOUT, &[()], |_| "group-membership", |_, _| Ok(membership::MembershipModel::new(true))),
        model_entry(two_phase_commit::ABOUT, &two_phase_commit::VARIANTS, |v| v.name(), |v, n| Ok(two_phase_commit::TwoPhaseCommitModel::of_variant(v, n))),
    ]
}

/// Models renamed to their recipe's name in scenario files (one name per
/// recipe everywhere): (old, new). `zoosim check` still takes the old
/// names (`scenario::registry::Registry::model`).
pub const RENAMED: [(&str, &str); 2] = [
    ("config", "configuration"),
    ("membership", "group-membership"),
];

/// What to check: a variant, a size, faults and how to search.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The variant's name (`lock/herd`); the correct one when None.
    pub variant: Option<String>,
    /// How many clients.
    pub clients: usize,
    /// The fault budget.
    pub faults: Faults,
    /// How many faults one run may take in all.
    pub max_faults: u8,
    /// Search order and threads.
    pub options: Options,
    /// Reduce by the clients' symmetry.
    pub symmetry: bool,
}

/// A model's check, with its counterexamples rendered.
#[derive(Clone, Debug)]
pub struct Report {
    /// The model's name.
    pub model: &'static str,
    /// The variant checked.
    pub variant: &'static str,
    /// What the check covered: the claim its verdicts make.
    pub bounds: Bounds,
    /// What the checker found.
    pub checked: Checked,
    /// Each failing property's shortest counterexample: its name, its
    /// length in steps, and the step list in words.
    pub counterexamples: Vec<(&'static str, usize, String)>,
}

/// What one check covered, in the terms a verdict must name (clients,
/// fault kinds, faults per run, symmetry, and whether the search saw every
/// reachable state): a "holds" means no more than this.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// How many clients.
    pub clients: usize,
    /// The fault kinds and how many of each a run may take.
    pub faults: Faults,
    /// How many faults one run may take in all.
    pub max_faults: u8,
    /// Clients were reduced by their symmetry.
    pub symmetry: bool,
    /// The search saw every reachable state ([`Checked::conclusive`]).
    pub exhaustive: bool,
}

impl fmt::Display for Bounds {
    /// One sentence: "every interleaving of 3 clients against one server,
    /// with at most 2 faults a run (of: lost-reply=1, ...), no symmetry
    /// reduction" (the server stands for the ensemble; what else an
    /// ensemble does is a fault of its own).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let runs = if self.exhaustive {
            "every interleaving"
        } else {
            "some interleavings (NOT exhaustive)"
        };
        let n = self.clients;
        let clients = if n == 1 { "client" } else { "clients" };
        let most = self.faults.total().min(u32::from(self.max_faults));
        if most == 0 {
            write!(
                f,
                "{runs} of {n} {clients} against one server, without faults"
            )?;
        } else {
            let faults = if most == 1 { "fault" } else { "faults" };
            write!(
                f,
                "{runs} of {n} {clients} against one server, with at most {most} {faults} a \
                 run (of: {})",
                self.faults
            )?;
        }
        if self.symmetry {
            f.write_str(", reduced by the clients' symmetry")
        } else {
            f.write_str(", no symmetry reduction")
        }
    }
}

impl fmt::Display for Report {
    /// The verdicts, then the counterexamples (the command prints this
    /// under its own header).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for v in &self.checked.verdicts {
            let verdict = self.checked.verdict_text(v);
            writeln!(f, "  {:<10} {:<32} {verdict}", v.kind, v.name)?;
        }
        for v in &self.checked.verdicts {
            if v.found() && !v.is_sometimes() && v.counterexample.is_none() {
                writeln!(
                    f,
                    "\n{} fails; no shortest counterexample was found within the state bound",
                    v.name
                )?;
            }
        }
        for (name, steps, text) in &self.counterexamples {
            writeln!(f, "\ncounterexample to {name} ({steps} steps, shortest):")?;
            f.write_str(text)?;
        }
        Ok(())
    }
}

/// One model in the catalog, its recipe's type erased.
pub trait Listed: Send + Sync {
    /// The model's name (`zoosim check NAME`).
    fn name(&self) -> &'static str;
    /// What it is, in a line.
    fn about(&self) -> &'static str;
    /// Its variants' names, the correct one first.
    fn variants(&self) -> Vec<&'static str>;
    /// Every property's name (with every fault in the budget).
    fn properties(&self) -> Vec<&'static str>;
    /// What it claims (its `always` and `eventually` properties, with
    /// every fault in the budget), with their meanings: the oracle's
    /// value where the recipe's oracle checks the same.
    fn claims(&self) -> Vec<zoosim_core::check::Property>;
    /// Checks it as `spec` says.
    fn check(&self, spec: &Spec) -> Result<Report, ModelError>;
    /// Walks `spec`'s model's whole state graph for a cycle
    /// ([`crate::cycle`]): the number of distinct states if there is none,
    /// else what was found, in words. (The search options and symmetry
    /// of `spec` are not used: the walk is over the full model.)
    fn walk(&self, spec: &Spec, bound: Bound) -> Result<Result<usize, String>, ModelError>;
    /// Hands `spec`'s model to stateright's Explorer, which serves it on
    /// `addr` until the process ends (the command checks the address:
    /// loopback only, free); `ready` is called once the model is made.
    fn serve(&self, spec: &Spec, addr: &str, ready: &mut dyn FnMut()) -> Result<(), ModelError>;
}

/// Makes a variant's model for a number of clients, or says why it
/// cannot take that many (shown as [`ModelError::Size`]).
pub type Make<V, R> = fn(V, usize) -> Result<R, String>;

/// The size [`Listed::properties`] makes a model at: every model takes 2
/// clients.
const PROBE_CLIENTS: usize = 2;

/// A catalog entry: the recipe's model for each of `variants`, named by
/// `name`, made by `make`. The correct variant's name is the model's.
pub fn model_entry<V, R>(
    about: &'static str,
    variants: &'static [V],
    name: fn(V) -> &'static str,
    make: Make<V, R>,
) -> Box<dyn Listed>
where
    V: Copy + Send + Sync + 'static,
    R: RecipeModel,
{
    Box::new(Entry {
        about,
        variants,
        name,
        make,
    })
}

struct Entry<V: 'static, R> {
    about: &'static str,
    variants: &'static [V],
    name: fn(V) -> &'static str,
    make: Make<V, R>,
}

impl<V, R> Entry<V, R>
where
    V: Copy + Send + Sync + 'static,
    R: RecipeModel,
{
    fn world(&self, spec: &Spec) -> Result<(World<R>, &'static str), ModelError> {
        let variant = match &spec.variant {
            None => self.variants[0],
            Some(v) => self
                .variants
                .iter()
                .copied()
                // A variant's old name still finds it.
                .find(|x| (self.name)(*x) == zoosim_recipes::lock::renamed_variant(v))
                .ok_or_else(|| ModelError::Variant {
                    model: self.name(),
                    asked: v.clone(),
                    variants: self.variants(),
                })?,
        };
        if !(1..=MAX_CLIENTS).contains(&spec.clients) {
            return Err(ModelError::Clients(spec.clients));
        }
        let recipe = (self.make)(variant, spec.clients).map_err(ModelError::Size)?;
        let mut world =
            World::new(recipe, spec.clients, spec.faults)?.with_max_faults(spec.max_faults);
        if spec.symmetry {
            world = world.with_symmetry()?;
        }
        Ok((world, (self.name)(variant)))
    }

    /// The correct variant's world at [`PROBE_CLIENTS`] with every fault
    /// in the budget: what its properties and claims are read from.
    fn probe(&self) -> Option<World<R>> {
        let recipe = (self.make)(self.variants[0], PROBE_CLIENTS).ok()?;
        World::new(recipe, PROBE_CLIENTS, Faults::ONE_EACH).ok()
    }
}

impl<V, R> Listed for Entry<V, R>
where
    V: Copy + Send + Sync + 'static,
    R: RecipeModel,
{
    fn name(&self) -> &'static str {
        (self.name)(self.variants[0])
    }

    fn about(&self) -> &'static str {
        self.about
    }

    fn variants(&self) -> Vec<&'static str> {
        self.variants.iter().map(|v| (self.name)(*v)).collect()
    }

    fn properties(&self) -> Vec<&'static str> {
        self.probe().map(|w| w.property_names()).unwrap_or_default()
    }

    fn claims(&self) -> Vec<zoosim_core::check::Property> {
        self.probe().map(|w| w.claims()).unwrap_or_default()
    }

    fn check(&self, spec: &Spec) -> Result<Report, ModelError> {
        let (world, variant) = self.world(spec)?;
        let checked = check(&world, spec.options.clone());
        let counterexamples = checked
            .verdicts
            .iter()
            .filter_map(|v| {
                let path = v.counterexample.as_ref()?;
                Some((v.name, path.len(), render_path(&world, path)))
            })
            .collect();
        Ok(Report {
            model: world.recipe.name(),
            variant,
            bounds: Bounds {
                clients: spec.clients,
                faults: spec.faults,
                max_faults: spec.max_faults,
                symmetry: world.is_symmetric(),
                exhaustive: checked.conclusive,
            },
            checked,
            counterexamples,
        })
    }

    fn walk(&self, spec: &Spec, bound: Bound) -> Result<Result<usize, String>, ModelError> {
        let spec = Spec {
            symmetry: false,
            ..spec.clone()
        };
        let (world, _) = self.world(&spec)?;
        Ok(find_cycle(&world, bound).map_err(|c| c.to_string()))
    }

    fn serve(&self, spec: &Spec, addr: &str, ready: &mut dyn FnMut()) -> Result<(), ModelError> {
        let (world, _) = self.world(spec)?;
        ready();
        // Blocks, serving, until the process ends.
        let _checker = stateright::Model::checker(world).serve(addr);
        Ok(())
    }
}
