//! `zoosim replay` (one seed of a scenario, exactly, with its trace,
//! history and report) and `zoosim shrink` (a failing seed to a small
//! scenario that fails the same way).

use std::path::PathBuf;

use super::UndecidedArgs;
// What only the simulation's build runs.
#[cfg(madsim)]
use {
    super::{
        check_writable, contract_line, histories, replay_command, replay_of, reports, shown,
        with_budget, EXIT_UNDECIDED,
    },
    crate::scenario::{registry::Registry, runner},
    std::process::ExitCode,
};

/// A scenario file and one of its seeds: what `replay` and `shrink` take.
#[derive(clap::Args)]
pub(super) struct SeedArgs {
    pub(super) scenario: PathBuf,
    #[arg(long)]
    pub(super) seed: u64,
}

#[cfg(madsim)]
impl SeedArgs {
    /// The scenario, read and checked, and the seed.
    fn load(&self, registry: &Registry) -> Result<(crate::scenario::spec::Scenario, u64), String> {
        let s =
            crate::scenario::files::load_in(&self.scenario, registry).map_err(|e| e.to_string())?;
        Ok((s, self.seed))
    }
}

/// `zoosim replay`'s arguments.
#[derive(clap::Args)]
pub(super) struct ReplayArgs {
    #[command(flatten)]
    pub(super) seed: SeedArgs,
    /// Trace the run (client requests, replies, watch events, session
    /// states, faults, servers' roles; RUST_LOG filters, e.g.
    /// RUST_LOG=zoosim::fault,zoosim::server), then print the fault
    /// schedule and the outcome log.
    #[arg(long)]
    pub(super) trace: bool,
    /// Write the seed's history to DIR/<scenario>-seed-<S>.jsonl.
    #[arg(long, value_name = "DIR")]
    pub(super) history: Option<PathBuf>,
    /// Write the seed's report (a self-contained HTML page and a JSON
    /// summary) to DIR/<scenario>/seed-<S>.html and .json. DIR must
    /// exist.
    #[arg(long, value_name = "DIR")]
    pub(super) report: Option<PathBuf>,
    #[command(flatten)]
    pub(super) undecided: UndecidedArgs,
}

/// `zoosim shrink`'s arguments.
#[derive(clap::Args)]
pub(super) struct ShrinkArgs {
    #[command(flatten)]
    pub(super) seed: SeedArgs,
    /// Where to write it (default: <scenario>-seed-<S>.toml here).
    #[arg(long)]
    pub(super) out: Option<PathBuf>,
    /// Replace the file if it exists.
    #[arg(long)]
    pub(super) force: bool,
}

/// Runs `zoosim replay`: exit 0 passed, 1 failed, 2 when an output could
/// not be written, 3 passed undecided under `--fail-on-undecided`.
#[cfg(madsim)]
pub(super) fn command(args: ReplayArgs, registry: &Registry) -> Result<ExitCode, String> {
    let ReplayArgs {
        seed,
        trace,
        history,
        report,
        undecided,
    } = args;
    let (s, seed) = seed.load(registry)?;
    let s = with_budget(s, undecided.contract_steps);
    if let Some(dir) = &history {
        histories::check_dir(dir)?;
    }
    if let Some(dir) = &report {
        reports::check_dir(dir)?;
    }
    if trace {
        crate::trace::install()?;
    }
    let run = runner::run_one_recorded(&s, seed);
    // The history and the report are written whatever the run did, a
    // panic too.
    let replay = replay_of(registry, &s, seed);
    let unwritten = !write_outputs(&s, &run, history.as_deref(), report.as_deref(), replay);
    // A seed that passed undecided says so on its last line.
    let contract = run
        .contract
        .as_ref()
        .filter(|_| run.undecided().is_none())
        .map(contract_line);
    let out = run.result.map_err(|e| e.to_string())?;
    if trace {
        print_trace(&out);
    }
    println!("{}", out.report);
    if let Some(line) = contract {
        println!("{line}");
    }
    println!(
        "{} seed {seed}: {} simulated s, {} ops, digest {:016x}",
        s.name,
        out.sim_ms as f64 / 1000.0,
        out.ops,
        out.digest
    );
    Ok(match out.failure() {
        Some(why) => {
            println!("FAILED: {why}");
            ExitCode::from(1)
        }
        None => {
            let undecided_why = out.passed_undecided();
            match undecided_why {
                Some(why) => println!("passed (contract undecided: {why})"),
                None => println!("passed"),
            }
            if unwritten {
                ExitCode::from(2)
            } else if undecided.fail_on_undecided && undecided_why.is_some() {
                ExitCode::from(EXIT_UNDECIDED)
            } else {
                ExitCode::SUCCESS
            }
        }
    })
}

/// Writes `run`'s history into `history` and its report into `report`
/// (each when given), saying where; false when one was not written.
#[cfg(madsim)]
fn write_outputs(
    s: &crate::scenario::spec::Scenario,
    run: &runner::SeedRun,
    history: Option<&std::path::Path>,
    report: Option<&std::path::Path>,
    replay: String,
) -> bool {
    let mut written = true;
    if let Some(dir) = history {
        let path = histories::file_for(dir, &s.name, run.seed);
        match histories::write(&path, &run.history) {
            Ok(_) => println!("history: {}", path.display()),
            Err(e) => {
                eprintln!("error: {e}");
                written = false;
            }
        }
    }
    if let Some(dir) = report {
        match reports::write_seed_run(dir, s, run, replay) {
            Ok(page) => println!("report: {}", reports::file_url(&page)),
            Err(e) => {
                eprintln!("error: {e}");
                written = false;
            }
        }
    }
    written
}

/// `--trace`'s tail: the fault schedule and the outcome log.
#[cfg(madsim)]
fn print_trace(out: &crate::scenario::run::SeedOutcome) {
    println!("faults:");
    for f in &out.faults {
        println!("  {f}");
    }
    println!("outcome log:");
    for line in &out.log {
        println!("  {line}");
    }
}

/// Runs `zoosim shrink`: the shrunk scenario written, or an error.
#[cfg(madsim)]
pub(super) fn shrink(args: ShrinkArgs, registry: &Registry) -> Result<ExitCode, String> {
    let ShrinkArgs { seed, out, force } = args;
    let (s, seed) = seed.load(registry)?;
    let out = out.unwrap_or_else(|| PathBuf::from(format!("{}-seed-{seed}.toml", s.name)));
    if out.exists() && !force {
        return Err(format!(
            "{}: exists; --force replaces it, --out names another file",
            out.display()
        ));
    }
    // A shrink works for minutes: an output it cannot write is
    // refused before, not after.
    check_writable(&out)?;
    let started = std::time::Instant::now();
    let shrunk = crate::scenario::shrink::shrink(&s, seed, &|step| eprintln!("  {step}"))
        .map_err(|e| e.to_string())?;
    crate::scenario::output::write(&out, shrunk.scenario.to_toml()).map_err(|e| e.to_string())?;
    // The size the shrinker minimises: faults tried plus clients
    // times operations.
    let size = shrunk
        .size()
        .map_or_else(|| "unbounded".to_owned(), |n| n.to_string());
    println!(
        "{} seed {seed}: shrunk to size {size}: {} clients, {} operations each, and {} \
         faults injected ({} placed by hand, random faults {}) in {} runs, {:.1} s",
        s.name,
        shown(shrunk.scenario.workload.clients()),
        shown(shrunk.scenario.workload.operations()),
        shrunk.faults_injected,
        shrunk.scenario.faults.at.len(),
        if shrunk.scenario.faults.kinds.is_empty() {
            "off"
        } else {
            "on"
        },
        shrunk.runs,
        started.elapsed().as_secs_f64()
    );
    let same: Vec<String> = shrunk
        .failure
        .iter()
        .filter(|v| v.property == shrunk.property)
        .map(ToString::to_string)
        .collect();
    println!("fails with: {}", runner::first_line(&same.join("\n")));
    println!(
        "written to {}; replay: {}",
        out.display(),
        replay_command(registry, &out.display().to_string(), seed)
    );
    Ok(ExitCode::SUCCESS)
}
