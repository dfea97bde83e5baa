//! The `zoosim` command: run scenario files over many seeds, replay one
//! seed, shrink a failing one, list what scenarios may name, check
//! histories for linearizability (`zoosim lin`), check a recipe's model
//! (`zoosim check`). It lives in
//! the library so that a crate with its own recipes gets the whole
//! command with them: its `main` is
//!
//! ```text
//! fn main() -> std::process::ExitCode {
//!     zoosim::cli::main_with(Registry::new().with(MyRecipe))
//! }
//! ```
//!
//! as zoosim's own is `main_with(Registry::new())`.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::scenario::files::{load_in, scenario_files};
use crate::scenario::registry::Registry;
#[cfg(madsim)]
use crate::scenario::spec::Scenario;
#[cfg(madsim)]
use crate::scenario::sweep;
use crate::scenario::verdict::{run_properties, ENSEMBLE_COUNTERS};

mod histories;
mod lin;
mod models;
mod replay;
mod reports;
mod run;
mod watch;

#[derive(Parser)]
#[command(
    name = "zoosim",
    version,
    about = "ZooKeeper recipes under simulated failure"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run scenario files (or every *.toml in the directories given).
    Run(run::RunArgs),
    /// Combine shards' `run --summary` files into one verdict, with the
    /// coverage goals judged over all the shards.
    Merge {
        /// The shards' summaries (every shard of every scenario once).
        #[arg(required = true, value_name = "FILES")]
        files: Vec<PathBuf>,
        /// Write the merged summary to FILE (it can be merged again).
        #[arg(long, value_name = "FILE")]
        summary: Option<PathBuf>,
        /// Write one index page over all the shards to DIR/index.html,
        /// linking the seeds' reports found under DIR (the shards' `run
        /// --report` directories copied into one). DIR must exist.
        #[arg(long, value_name = "DIR")]
        report: Option<PathBuf>,
        /// Exit 3 when every scenario is as expected but some seed passed
        /// with ZooKeeper's contract undecided.
        #[arg(long)]
        fail_on_undecided: bool,
    },
    /// Replay one seed of a scenario exactly.
    Replay(replay::ReplayArgs),
    /// Read a history file (from --history): print a summary, or export
    /// it as a Jepsen EDN history.
    History {
        file: PathBuf,
        /// Write Jepsen EDN (a vector of op maps) instead of a summary.
        #[arg(long)]
        edn: bool,
        /// Where to write (default: standard output).
        #[arg(short, long, value_name = "OUT")]
        out: Option<PathBuf>,
        /// Print operation ID's records (its invocation and completion)
        /// as they are in the file, whole: where a page or a message cut
        /// a long value short, this shows it.
        #[arg(long, value_name = "ID", conflicts_with = "edn")]
        op: Option<u64>,
    },
    /// Shrink a failing seed to a small scenario that fails the same way,
    /// written as a new scenario file.
    Shrink(replay::ShrinkArgs),
    /// The recipes, their variants, workload keys, properties and
    /// counters; the faults; the scenarios in a directory.
    List {
        /// A directory of scenario files, or one file (default:
        /// `scenarios`, when there is one).
        dir: Option<PathBuf>,
    },
    /// Check history files for linearizability against a model
    /// (Jepsen's log format or EDN maps): a verdict per file.
    Lin(lin::LinArgs),
    /// Check a stateright model of a recipe over every interleaving of a
    /// few clients: states, each property's verdict, shortest
    /// counterexamples.
    Check(models::CheckArgs),
}

/// What `run` and `replay` do about ZooKeeper's contract left undecided:
/// its check's budget, and whether an undecided seed fails the command.
#[derive(clap::Args, Clone, Copy, Debug)]
struct UndecidedArgs {
    /// The contract check's budget of search steps per seed (default
    /// 100000). Steps, never time, so a verdict replays on any machine; a
    /// seed's replay command carries it. A larger budget decides more
    /// seeds, slower; 0 leaves every seed the zxid-ordered pass cannot
    /// order undecided.
    #[arg(long, value_name = "N")]
    contract_steps: Option<u64>,
    /// Exit 3 when every scenario is as expected but some seed passed
    /// with ZooKeeper's contract undecided (its check ran out of budget):
    /// for CI that wants every seed decided.
    #[arg(long)]
    fail_on_undecided: bool,
}

/// The exit code of a command that did all it should, but found a seed
/// with ZooKeeper's contract undecided, under `--fail-on-undecided`.
pub const EXIT_UNDECIDED: u8 = 3;

fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("--shard takes i/n with 0 <= i < n, e.g. 0/4; got {s:?}");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (u64, u64) = (i.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok((i, n))
}

/// The `zoosim` command over the process's arguments, knowing the
/// built-in recipes and `registry`'s. Exit codes: 0 all as expected, 1 a
/// scenario not as expected (or a replayed seed failed), 2 bad input (or
/// a file that could not be written), 3 all as expected but some seed's
/// contract undecided, under `--fail-on-undecided` ([`EXIT_UNDECIDED`]),
/// 130 interrupted.
pub fn main_with(registry: Registry) -> ExitCode {
    // A closed pipe (`zoosim replay ... --trace | head -1`) ends the
    // command quietly, as it ends Unix tools. Rust ignores SIGPIPE, so each
    // later write would fail instead: the trace reported every failure,
    // then a print panicked.
    #[cfg(unix)]
    // SAFETY: called before any thread is started; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    main_from(registry, std::env::args_os())
}

/// [`main_with`] over `args` (the first is the program's name).
pub fn main_from<I, T>(registry: Registry, args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // Usage errors exit 2, --help and --version 0, as clap's own.
            // clap quotes a bad argument whole (up to 128 KiB): an error
            // that does is printed with it cut short.
            let text = e.render().to_string();
            match crate::quote::words(&text, crate::quote::WORD) {
                std::borrow::Cow::Owned(cut) if e.use_stderr() => {
                    use std::io::Write;
                    let _ = write!(std::io::stderr(), "{cut}");
                }
                _ => {
                    let _ = e.print();
                }
            }
            return ExitCode::from(e.exit_code().clamp(0, 255) as u8);
        }
    };
    if !registry.errors().is_empty() {
        for e in registry.errors() {
            say_error(&e.to_string());
        }
        return ExitCode::from(2);
    }
    quiet_output_panics();
    let ran =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli.command, &registry)));
    match ran {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            say_error(&e);
            ExitCode::from(2)
        }
        Err(panic) => {
            let msg = crate::check::panic_message(panic.as_ref()).to_owned();
            if is_output_failure(&msg) {
                say_error(&msg);
                ExitCode::from(2)
            } else {
                std::panic::resume_unwind(panic)
            }
        }
    }
}

/// The threads a `--jobs`/`--threads` option asks for, at most this
/// machine's cores (a note on stderr when cut): each is a CPU-bound
/// worker, so more only slow the run (`--jobs 1000000` made 20 seeds
/// take 52 s instead of 0.5 s). `None`: every core.
pub(crate) fn clamp_threads(flag: &str, asked: Option<usize>) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match asked {
        None => cores,
        Some(n) if n > cores => {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "note: {flag} {n} is more than this machine's {cores} cores; using {cores}"
            );
            cores
        }
        Some(n) => n.max(1),
    }
}

/// `error: <e>` on stderr, if stderr can take it (`2>/dev/full` must
/// still end in exit 2, not a panic).
fn say_error(e: &str) {
    use std::io::Write;
    // A word longer than any path (PATH_MAX) is input quoted whole that
    // slipped past its own cut: cut it here.
    let e = crate::quote::words(e, 4096);
    let _ = writeln!(std::io::stderr(), "error: {e}");
}

/// Whether a panic is `print!`'s on a stream that cannot be written (a
/// full disk under stdout or stderr): the output's failure, not
/// zoosim's, told in one line with exit 2.
fn is_output_failure(msg: &str) -> bool {
    msg.starts_with("failed printing to stdout") || msg.starts_with("failed printing to stderr")
}

/// A panic hook that keeps quiet about [`is_output_failure`] panics
/// (the caller reports them) and hands every other to the default hook.
fn quiet_output_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = crate::check::panic_message(info.payload());
            if !is_output_failure(msg) {
                default(info);
            }
        }));
    });
}

/// The command that replays `seed` of the scenario in `file` with this
/// `zoosim`.
pub fn replay_command(registry: &Registry, file: &str, seed: u64) -> String {
    format!(
        "{} replay {} --seed {seed} --trace",
        registry.invocation(),
        shell_word(file)
    )
}

/// `word` quoted for a POSIX shell where it needs it (a file named
/// `$(touch x).toml` pastes as one word and runs nothing).
pub(crate) fn shell_word(word: &str) -> String {
    match shlex::try_quote(word) {
        Ok(quoted) => quoted.into_owned(),
        // Only a NUL makes quoting fail, and no path holds one: drop it
        // rather than print a command that is not what it seems.
        Err(_) => shell_word(&word.replace('\0', "")),
    }
}

/// [`replay_command`] for `seed` of `s`, with the contract check's budget
/// it ran with when that was not the default (so the verdict replays).
#[cfg(madsim)]
fn replay_of(registry: &Registry, s: &Scenario, seed: u64) -> String {
    let mut line = replay_command(registry, &s.file, seed);
    if let Some(n) = s.contract_steps {
        let _ = write!(line, " --contract-steps {n}");
    }
    line
}

/// Loads `file` with the contract check's budget `steps` overrides.
#[cfg(madsim)]
fn with_budget(mut s: Scenario, steps: Option<u64>) -> Scenario {
    if steps.is_some() {
        s.contract_steps = steps;
    }
    s
}

#[cfg(madsim)]
fn run(command: Command, registry: &Registry) -> Result<ExitCode, String> {
    match command {
        Command::Run(args) => run::command(args, registry),
        Command::Merge {
            files,
            summary,
            report,
            fail_on_undecided,
        } => merge(
            &files,
            summary.as_deref(),
            report.as_deref(),
            fail_on_undecided,
        ),
        Command::Replay(args) => replay::command(args, registry),
        Command::Shrink(args) => replay::shrink(args, registry),
        Command::List { dir } => list_command(registry, dir.as_deref()),
        Command::Lin(args) => lin::run(&args),
        Command::Check(args) => models::run(&args, registry),
        Command::History { file, edn, out, op } => {
            histories::command(&file, edn, op, out.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The contract check's verdict on a seed, in a line.
#[cfg(madsim)]
fn contract_line(r: &crate::check::contract::ContractReport) -> String {
    use crate::check::contract::ContractVerdict;
    let how = if r.fast {
        "ordered by the zxid hints".to_owned()
    } else {
        format!("{} search steps", r.steps)
    };
    match &r.verdict {
        ContractVerdict::Holds => format!(
            "ZooKeeper's contract holds: {} sessions, {} operations placed, {how}",
            r.sessions, r.placed
        ),
        ContractVerdict::Broken(b) => format!(
            "ZooKeeper's contract is BROKEN: {}: {}",
            b.guarantee.name, b.detail
        ),
        ContractVerdict::Unknown(why) => {
            format!("ZooKeeper's contract: undecided within the search budget ({why})")
        }
        ContractVerdict::CheckerFault(why) => {
            format!("ZooKeeper's contract: the CHECKER FAILED (a defect of zoosim): {why}")
        }
    }
}

/// What a run's summary needs besides the results: the command line,
/// each scenario file's hash, and where to write it (if asked).
#[cfg(madsim)]
struct Sweep {
    command: sweep::CommandLine,
    /// The command as typed (near enough), for the report's index.
    line: String,
    hashes: Vec<String>,
    summary: Option<sweep::SummaryFile>,
}

/// What a run keeps of its seeds besides the summary: histories and
/// reports, each in a directory, of failing seeds or (flag) of all.
#[cfg(madsim)]
struct Keep<'a> {
    history: Option<(&'a Path, bool)>,
    report: Option<(&'a Path, bool)>,
}

/// `zoosim run` with its options, as the index page shows it.
#[cfg(madsim)]
fn run_line(
    paths: &[PathBuf],
    seeds: Option<u64>,
    seed_start: Option<u64>,
    shard: Option<(u64, u64)>,
    undecided: UndecidedArgs,
) -> String {
    let mut line = String::from("zoosim run");
    for p in paths {
        let _ = write!(line, " {}", p.display());
    }
    if let Some(n) = seeds {
        let _ = write!(line, " --seeds {n}");
    }
    if let Some(n) = seed_start {
        let _ = write!(line, " --seed-start {n}");
    }
    if let Some((i, n)) = shard {
        let _ = write!(line, " --shard {i}/{n}");
    }
    if let Some(n) = undecided.contract_steps {
        let _ = write!(line, " --contract-steps {n}");
    }
    if undecided.fail_on_undecided {
        line.push_str(" --fail-on-undecided");
    }
    line
}

/// A history written as its seed ended: (scenario's index, seed, the
/// file and its bytes, or why not).
#[cfg(madsim)]
type Written = (usize, u64, Result<(PathBuf, u64), String>);

/// Past this many bytes of histories kept by one run, its note after the
/// run is a warning (200 lock seeds with `--history-all` made 232 MB,
/// unannounced).
const HISTORY_WARN_BYTES: u64 = 100 << 20;

/// The line after a run that kept `count` histories of `bytes` in all in
/// `dir`: a note, or past [`HISTORY_WARN_BYTES`] a warning saying what
/// keeps less.
#[cfg_attr(not(madsim), allow(dead_code))]
fn histories_note(count: usize, bytes: u64, dir: &Path, all: bool) -> String {
    let what = format!(
        "{count} histor{} written to {}: {} ({:.1} MiB)",
        if count == 1 { "y" } else { "ies" },
        dir.display(),
        crate::quote::bytes(usize::try_from(bytes).unwrap_or(usize::MAX)),
        bytes as f64 / (1u64 << 20) as f64
    );
    if bytes <= HISTORY_WARN_BYTES {
        return format!("note: {what}");
    }
    let each = bytes / count.max(1) as u64;
    format!(
        "warning: {what}, about {} MiB a seed{}",
        each.div_ceil(1 << 20),
        if all {
            "; --history-all keeps every seed's history, without it only failing and undecided \
             seeds' are kept"
        } else {
            ""
        }
    )
}

/// A report written as its seed ended: (scenario's index, seed, whether
/// it failed or was undecided, the page or why not).
#[cfg(madsim)]
type WrittenReport = (usize, u64, bool, Result<PathBuf, String>);

/// The progress bar's message: the scenario running, and each of its
/// seeds in flight that has counted thousands of events (seed, simulated
/// time, events of its budget: `budget`), so that a long seed shows it is
/// moving, and how near its budget it is.
#[cfg(madsim)]
fn long_seeds_line(scenario: &str, in_flight: &[(u64, u64, u64)]) -> String {
    let mut line = scenario.to_owned();
    let budget = crate::scenario::budget::event_budget();
    for (seed, sim_ms, events) in in_flight.iter().filter(|(_, _, n)| *n > 0) {
        let _ = write!(
            line,
            "  seed {seed}: {:.0} s simulated, {events} of {budget} events",
            *sim_ms as f64 / 1000.0
        );
    }
    line
}

/// Refuses an output file that cannot be written (its directory missing
/// or read-only, or something other than a regular file there), before
/// the work that would fill it; leaves no file behind that was not
/// there.
#[cfg_attr(not(madsim), allow(dead_code))]
fn check_writable(out: &Path) -> Result<(), String> {
    crate::scenario::output::Pending::create(out)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The summary table `zoosim run` and `zoosim merge` print: a line per
/// scenario, its coverage goals, its failing seeds and its undecided ones
/// with their replay commands. Returns how many scenarios are not as
/// expected.
#[cfg(madsim)]
fn print_table(sweep: &sweep::SweepSummary) -> usize {
    use crate::scenario::runner::first_line;
    println!(
        "{:<40} {:>6} {:>6} {:>9} {:>9} {:>8} {:>10}  verdict",
        "scenario", "seeds", "fails", "undecided", "sim s", "wall s", "ops"
    );
    for s in &sweep.scenarios {
        println!(
            "{:<40} {:>6} {:>6} {:>9} {:>9.0} {:>8.1} {:>10}  {}",
            crate::report::terminal(&s.name),
            s.seeds_run,
            s.failures.len(),
            s.undecided.len(),
            s.sim_ms as f64 / 1000.0,
            s.wall_ms as f64 / 1000.0,
            s.ops,
            s.verdict
        );
    }
    let commit = sweep.commit.as_deref().unwrap_or("unknown");
    let mut bad = 0;
    for s in &sweep.scenarios {
        if !s.coverage.is_empty() {
            let goals: Vec<String> = s
                .coverage
                .iter()
                .map(|g| format!("{} {}", g.goal, g.count))
                .collect();
            println!("  {}: coverage {}", s.name, goals.join(", "));
        }
        if !s.passed {
            bad += 1;
        }
        let shown = if s.expect_failure { 1 } else { 3 };
        for f in s.failures.iter().take(shown) {
            let tag = if s.expect_failure { "caught" } else { "FAILED" };
            println!(
                "  {tag} {} seed {} (commit {commit}): {}\n    replay: {}",
                s.name,
                f.seed,
                first_line(&f.why()),
                f.replay
            );
        }
        print_undecided(s, commit);
    }
    bad
}

/// How many of a scenario's undecided seeds the table lists (all are in
/// the summary file and the report's index).
#[cfg(madsim)]
const UNDECIDED_SHOWN: usize = 3;

/// A scenario's undecided seeds, each with the reason (shortened) and its
/// replay command, as failures are listed.
#[cfg(madsim)]
fn print_undecided(s: &sweep::ScenarioRecord, commit: &str) {
    for u in s.undecided.iter().take(UNDECIDED_SHOWN) {
        println!(
            "  UNDECIDED {} seed {} (commit {commit}): contract undecided: {}\n    replay: {}",
            s.name,
            u.seed,
            shortened(&u.why, 100),
            u.replay
        );
    }
    let more = s.undecided.len().saturating_sub(UNDECIDED_SHOWN);
    if more > 0 {
        println!(
            "  ... and {more} more undecided seed{} of {} (--summary lists them all)",
            if more == 1 { "" } else { "s" },
            s.name
        );
    }
}

/// The first line of `s`, cut to at most `max` characters (with "…").
#[cfg(madsim)]
fn shortened(s: &str, max: usize) -> String {
    let line = crate::scenario::runner::first_line(s);
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

/// The last line's verdict: how many scenarios were not as expected, and
/// how many seeds were left undecided.
#[cfg(madsim)]
fn as_expected(bad: usize, undecided: u64) -> String {
    let verdict = if bad == 0 {
        "all as expected".to_owned()
    } else {
        format!("{bad} not as expected")
    };
    match undecided {
        0 => verdict,
        1 => format!("{verdict}; 1 seed undecided"),
        n => format!("{verdict}; {n} seeds undecided"),
    }
}

/// 1 when a scenario was not as expected; else [`EXIT_UNDECIDED`] when
/// `undecided` (some seed undecided, and `--fail-on-undecided`); else 0.
#[cfg(madsim)]
fn exit_code(bad: usize, undecided: bool) -> ExitCode {
    if bad > 0 {
        ExitCode::from(1)
    } else if undecided {
        ExitCode::from(EXIT_UNDECIDED)
    } else {
        ExitCode::SUCCESS
    }
}

/// `zoosim merge`: reads every summary (all bad ones named), checks that
/// they fit together, prints the merged table and writes the merged
/// summary (if asked).
#[cfg(madsim)]
fn merge(
    files: &[PathBuf],
    summary: Option<&Path>,
    report: Option<&Path>,
    fail_on_undecided: bool,
) -> Result<ExitCode, String> {
    if let Some(dir) = report {
        reports::check_dir(dir)?;
    }
    let out = summary
        .map(sweep::SummaryFile::create)
        .transpose()
        .map_err(|e| e.to_string())?;
    let mut sources = Vec::new();
    let mut errors = Vec::new();
    for f in files {
        match sweep::read(f) {
            Ok(summary) => sources.push(sweep::Source {
                file: f.display().to_string(),
                summary,
            }),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if errors.is_empty() {
        match sweep::merge(&sources) {
            Ok(merged) => {
                // One index over the shards: each scenario's seeds are
                // those its shards ran, its pages those found under DIR.
                let index = report.map(|dir| {
                    let title = format!(
                        "zoosim merge of {} summaries ({} scenarios)",
                        sources.len(),
                        merged.scenarios.len()
                    );
                    let seeds = |k: usize| {
                        let name = &merged.scenarios[k].name;
                        let mut all: Vec<u64> = sources
                            .iter()
                            .flat_map(|src| &src.summary.scenarios)
                            .filter(|r| &r.name == name)
                            .flat_map(reports::seeds_run)
                            .collect();
                        all.sort_unstable();
                        all.dedup();
                        all
                    };
                    let href = |name: &str, seed: u64| {
                        let h = reports::seed_href(name, seed);
                        dir.join(&h).is_file().then_some(h)
                    };
                    let index = reports::index_report(&merged, title, None, &seeds, &href);
                    reports::write_index(dir, &index)
                });
                let written = out.map(|f| {
                    let path = f.path().display().to_string();
                    f.write(&merged).map(|()| path)
                });
                let bad = print_table(&merged);
                let seeds: u64 = merged.scenarios.iter().map(|s| s.seeds_run).sum();
                println!(
                    "{} scenarios, {seeds} seeds from {} summaries: {}",
                    merged.scenarios.len(),
                    sources.len(),
                    as_expected(bad, merged.undecided)
                );
                match written {
                    Some(Err(e)) => return Err(e.to_string()),
                    Some(Ok(path)) => println!("merged summary written to {path}"),
                    None => {}
                }
                match index {
                    Some(Err(e)) => return Err(e),
                    Some(Ok(path)) => println!("report index: {}", reports::file_url(&path)),
                    None => {}
                }
                return Ok(exit_code(bad, fail_on_undecided && merged.any_undecided()));
            }
            Err(e) => errors.extend(e.iter().map(ToString::to_string)),
        }
    }
    Err(errors.join("\nerror: "))
}

#[cfg(not(madsim))]
fn run(command: Command, registry: &Registry) -> Result<ExitCode, String> {
    match command {
        Command::List { dir } => list_command(registry, dir.as_deref()),
        Command::Lin(args) => lin::run(&args),
        Command::Check(args) => models::run(&args, registry),
        Command::History { file, edn, out, op } => {
            histories::command(&file, edn, op, out.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        _ => Err(
            "this zoosim was built without the simulation (--cfg madsim, which \
                  .cargo/config.toml sets; a RUSTFLAGS variable replaces it)"
                .into(),
        ),
    }
}

/// A count for a summary line ("-" where the recipe has no such key).
#[cfg(madsim)]
fn shown(n: Option<impl std::fmt::Display>) -> String {
    n.map_or_else(|| "-".to_owned(), |n| n.to_string())
}

/// `zoosim list`: prints [`list`]; exit 2 when a scenario file in it
/// could not be read.
fn list_command(registry: &Registry, dir: Option<&Path>) -> Result<ExitCode, String> {
    let (listing, unread) = list(registry, dir)?;
    print!("{listing}");
    match unread {
        0 => Ok(ExitCode::SUCCESS),
        n => Err(format!(
            "{n} scenario file(s) could not be read (listed above with why)"
        )),
    }
}

/// What `zoosim list` prints: the recipes (built-in, then `registry`'s),
/// their variants, workload keys, properties and counters; the faults;
/// the scenarios in `dir` (if it is a directory); and how many of those
/// could not be read (each listed with why).
pub fn list(registry: &Registry, dir: Option<&Path>) -> Result<(String, usize), String> {
    // A path given must hold scenarios (a directory of them, or one file):
    // checked before anything is printed. None given: `scenarios`, when
    // the current directory has one.
    let listed = match dir {
        Some(p) => Some((
            p.to_path_buf(),
            scenario_files(&[p.to_path_buf()]).map_err(|e| e.to_string())?,
        )),
        None => {
            let p = PathBuf::from("scenarios");
            match p.is_dir() {
                true => Some((p.clone(), scenario_files(&[p]).map_err(|e| e.to_string())?)),
                false => None,
            }
        }
    };
    // Read first: each recipe lists the scenarios that run it.
    let loaded: Vec<(PathBuf, Result<Scenario, String>)> = match &listed {
        Some((_, files)) => files
            .iter()
            .map(|f| (f.clone(), load_in(f, registry).map_err(|e| e.to_string())))
            .collect(),
        None => Vec::new(),
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "recipes (variant names go in `variant = ...`; each with its oracle's properties, its \
         model and its scenarios):"
    );
    for r in registry.recipes() {
        let _ = writeln!(out, "  {}  {}", r.name(), r.description());
        for v in r.variants() {
            let _ = writeln!(out, "    variant {v}");
        }
        for k in r.workload_keys() {
            let _ = writeln!(out, "    workload key {}", k.describe());
        }
        for p in r.properties() {
            let _ = writeln!(out, "    property {p}");
        }
        let _ = writeln!(out, "    counters: {}", r.counters().join(", "));
        match models::model_lines(registry, r.name(), r.properties()) {
            Some(lines) => out.push_str(&lines),
            None => {
                let _ = writeln!(out, "    model: none (`zoosim check` has no model of it)");
            }
        }
        if listed.is_some() {
            let mine: Vec<String> = loaded
                .iter()
                .filter_map(|(_, s)| s.as_ref().ok())
                .filter(|s| s.recipe.name() == r.name())
                .map(|s| crate::report::terminal(&s.name).into_owned())
                .collect();
            let _ = writeln!(
                out,
                "    scenarios: {}",
                if mine.is_empty() {
                    "none".to_owned()
                } else {
                    mine.join(", ")
                }
            );
        }
    }
    out.push_str(&models::list_rest());
    let _ = writeln!(out, "properties of every run:");
    for p in run_properties::ALL {
        let _ = writeln!(out, "  property {p}");
    }
    let _ = writeln!(
        out,
        "ZooKeeper's contract, checked on every run's history (docs/CONTRACT.md):"
    );
    for p in crate::check::contract::GUARANTEES
        .iter()
        .chain(&crate::check::contract::VERDICT_PROPERTIES)
    {
        let _ = writeln!(out, "  property {p}");
    }
    let _ = writeln!(out, "ensemble counters: {}", ENSEMBLE_COUNTERS.join(", "));
    let _ = writeln!(
        out,
        "faults (`faults.kinds`, `[[faults.at]] fault = ...`, coverage `fault:<name>`):"
    );
    for f in crate::fault::Fault::ALL {
        let _ = writeln!(out, "  {f}");
    }
    let mut unread = 0;
    if let Some((dir, _)) = &listed {
        let _ = writeln!(out, "scenarios in {}:", dir.display());
        for (_, loaded) in &loaded {
            match loaded {
                Ok(s) => {
                    let _ = writeln!(
                        out,
                        "  {:<40} {:<36} {} seeds{}  {}",
                        crate::report::terminal(&s.name),
                        s.variant_name(),
                        s.seeds,
                        if s.expect_failure {
                            ", expected to fail"
                        } else {
                            ""
                        },
                        // Text from the file: it may not drive the terminal.
                        crate::report::terminal(&s.description)
                    );
                }
                Err(e) => {
                    unread += 1;
                    let _ = writeln!(out, "  {e}");
                }
            }
        }
    }
    Ok((out, unread))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_histories_get_a_warning_that_says_what_keeps_fewer() {
        let dir = Path::new("reports/h");
        let at = HISTORY_WARN_BYTES;
        assert!(histories_note(200, at, dir, true).starts_with("note: 200 histories written"));
        // 200 lock seeds with --history-all: 232 MB.
        let w = histories_note(200, 232_000_000, dir, true);
        assert!(
            w.starts_with("warning: 200 histories written to reports/h: 232,000,000 bytes"),
            "{w}"
        );
        assert!(w.contains("about 2 MiB a seed"), "{w}");
        assert!(
            w.contains("without it only failing and undecided seeds' are kept"),
            "{w}"
        );
        // Without --history-all, the failing ones alone were that large:
        // no advice to drop a flag that was not given.
        let w = histories_note(3, at + 1, dir, false);
        assert!(w.starts_with("warning: 3 histories"), "{w}");
        assert!(!w.contains("--history-all"), "{w}");
        assert!(histories_note(1, 10, dir, false).contains("1 history written"));
    }
}
