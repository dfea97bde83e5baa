//! `zoosim check MODEL`: checks a stateright model of a recipe
//! exhaustively and prints the search's size and speed, every property's
//! verdict, and a shortest counterexample for each that fails.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use crate::models::lock::{LockModel, VARIANTS};
use crate::models::{check, render_path, Faults, Options, Recipe, Search, World, MAX_CLIENTS};
use crate::recipes::lock::LockVariant;

/// The models `zoosim check` knows, with what each is.
pub(crate) const MODELS: &[(&str, &str)] = &[(
    "lock",
    "the exclusive lock (src/recipes/lock.rs): each client acquires, makes one fenced \
     access, releases",
)];

/// `zoosim check`'s arguments.
#[derive(clap::Args)]
pub(crate) struct CheckArgs {
    /// The model (`zoosim list` shows them): lock.
    model: String,
    /// How many clients.
    #[arg(long, default_value_t = 3)]
    clients: usize,
    /// The recipe's variant (a buggy one, to see it caught), e.g.
    /// lock/herd; the correct one by default.
    #[arg(long)]
    variant: Option<String>,
    /// The faults a run may take: `all` (one of each, the default),
    /// `none`, or a list such as `lost-reply,expiry=2`.
    #[arg(long, default_value = "all")]
    faults: String,
    /// How many faults one run may take in all (each kind also within its
    /// own budget). 1 explores every kind; 2 explores their pairs too, an
    /// order of magnitude more states.
    #[arg(long, default_value_t = crate::models::DEFAULT_MAX_FAULTS)]
    max_faults: u8,
    /// Search depth-first instead of breadth-first (counterexamples are
    /// still re-found breadth-first, so they are shortest).
    #[arg(long)]
    dfs: bool,
    /// Reduce by the clients' symmetry (not available for the models
    /// here: see the error it gives).
    #[arg(long)]
    symmetry: bool,
    /// Worker threads for the exhaustive search.
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

/// Runs `zoosim check`: exit 0 when every property holds, 1 when one
/// fails, an error (exit 2) for bad arguments.
pub(crate) fn run(args: &CheckArgs) -> Result<ExitCode, String> {
    let faults = Faults::parse(&args.faults).map_err(|e| format!("--faults: {e}"))?;
    if !(1..=MAX_CLIENTS).contains(&args.clients) {
        return Err(format!(
            "--clients: a model takes 1 to {MAX_CLIENTS} clients, not {}",
            args.clients
        ));
    }
    if args.threads == 0 {
        return Err("--threads: at least 1".into());
    }
    match args.model.as_str() {
        "lock" => {
            let variant = match &args.variant {
                None => LockVariant::Correct,
                Some(name) => VARIANTS
                    .into_iter()
                    .find(|v| v.name() == name)
                    .ok_or_else(|| {
                        format!(
                            "--variant: the lock model has no variant {name:?}; it has {}",
                            VARIANTS.map(LockVariant::name).join(", ")
                        )
                    })?,
            };
            if args.symmetry {
                return Err(
                    "--symmetry: the lock model has no sound symmetry reduction: each \
                     client's guid is part of its node's name and of its machine's state, \
                     and the order of guids is what the lock's sort (and its \
                     sort-by-full-name bug) reads, so clients are not interchangeable"
                        .into(),
                );
            }
            let world = World::new(LockModel::new(variant), args.clients, faults)?
                .with_max_faults(args.max_faults);
            Ok(report(&world, args, variant.name()))
        }
        other => Err(format!(
            "unknown model {other:?}; the models are {}",
            MODELS.iter().map(|m| m.0).collect::<Vec<_>>().join(", ")
        )),
    }
}

fn report<R: Recipe>(world: &World<R>, args: &CheckArgs, variant: &str) -> ExitCode {
    let options = Options {
        search: if args.dfs { Search::Dfs } else { Search::Bfs },
        threads: args.threads,
    };
    let started = Instant::now();
    let checked = check(world, options);
    let seconds = started.elapsed().as_secs_f64();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "model {} ({variant}), {} clients, faults {} (at most {} a run), {} with {} thread(s)",
        world.recipe.name(),
        world.clients,
        world.faults,
        world.max_faults,
        if args.dfs {
            "depth-first"
        } else {
            "breadth-first"
        },
        options.threads
    );
    let _ = writeln!(
        out,
        "states: {} generated, {} unique, depth {}; {:.2} s ({:.0} states/s, counterexamples included)",
        checked.states,
        checked.unique,
        checked.depth,
        seconds,
        checked.states as f64 / seconds.max(1e-9)
    );
    for v in &checked.verdicts {
        let verdict = match (v.holds, v.kind) {
            (true, "sometimes") => "reached",
            (false, "sometimes") => "NEVER REACHED",
            (true, _) => "holds",
            (false, _) => "FAILS",
        };
        let _ = writeln!(out, "  {:<10} {:<32} {verdict}", v.kind, v.name);
    }
    for v in &checked.verdicts {
        if let Some(path) = &v.counterexample {
            let _ = writeln!(
                out,
                "\ncounterexample to {} ({} steps, shortest):",
                v.name,
                path.len()
            );
            out.push_str(&render_path(world, path));
        }
    }
    print!("{out}");
    if checked.all_hold() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// What `zoosim list` says about the models.
pub(crate) fn list() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "models (`zoosim check MODEL`):");
    for (name, what) in MODELS {
        let _ = writeln!(out, "  {name}  {what}");
    }
    let _ = writeln!(
        out,
        "    variants: {}",
        VARIANTS.map(LockVariant::name).join(", ")
    );
    if let Ok(w) = World::new(LockModel::new(LockVariant::Correct), 1, Faults::ONE_EACH) {
        let _ = writeln!(out, "    properties: {}", w.property_names().join(", "));
    }
    let _ = writeln!(
        out,
        "  model faults (`--faults`): {}",
        crate::models::Fault::ALL
            .map(crate::models::Fault::name)
            .join(", ")
    );
    out
}
