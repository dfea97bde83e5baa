//! `zoosim run`: scenario files' seeds in parallel, with a progress bar,
//! the summary table, and what a run keeps (histories, reports, shrunk
//! scenarios, the summary file for `zoosim merge`).

use std::path::PathBuf;

use super::{parse_shard, UndecidedArgs};
// What only the simulation's build runs.
#[cfg(madsim)]
use {
    super::{
        as_expected, clamp_threads, exit_code, histories, histories_note, long_seeds_line,
        replay_of, reports, run_line, shown, watch, with_budget, Keep, Sweep, Written,
        WrittenReport,
    },
    crate::scenario::files::{load_source_in, scenario_files},
    crate::scenario::{registry::Registry, runner, spec::Scenario, sweep},
    std::path::Path,
    std::process::ExitCode,
};

/// `zoosim run`'s arguments.
#[derive(clap::Args)]
pub(super) struct RunArgs {
    #[arg(required = true)]
    pub(super) paths: Vec<PathBuf>,
    /// Seeds per scenario (default: each file's `seeds`; at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) seeds: Option<u64>,
    /// The first seed (default: each file's `seed_start`).
    #[arg(long)]
    pub(super) seed_start: Option<u64>,
    /// Threads (default: every core).
    #[arg(long)]
    pub(super) jobs: Option<usize>,
    /// Run only shard i of n (0-based), e.g. --shard 2/8.
    #[arg(long, value_parser = parse_shard)]
    pub(super) shard: Option<(u64, u64)>,
    /// Shrink each unexpected failure's first seed into shrunk/.
    #[arg(long)]
    pub(super) shrink: bool,
    /// Write the history of each failing or undecided seed (every
    /// seed with --history-all) to DIR/<scenario>-seed-<S>.jsonl, as
    /// the seed ends (every seed is recorded as it runs). DIR must
    /// exist.
    #[arg(long, value_name = "DIR")]
    pub(super) history: Option<PathBuf>,
    /// With --history: every seed's history, not only failing and
    /// undecided ones'.
    #[arg(long, requires = "history")]
    pub(super) history_all: bool,
    /// Write a report of each failing or undecided seed (every seed
    /// with --report-all) to DIR/<scenario>/seed-<S>.html (a
    /// self-contained page) and .json, and an index of the run to
    /// DIR/index.html. DIR must exist.
    #[arg(long, value_name = "DIR")]
    pub(super) report: Option<PathBuf>,
    /// With --report: every seed's report, not only failing and
    /// undecided ones'.
    #[arg(long, requires = "report")]
    pub(super) report_all: bool,
    /// Write the results as JSON to FILE (also when the run fails), for
    /// `zoosim merge` to combine shards.
    #[arg(long, value_name = "FILE")]
    pub(super) summary: Option<PathBuf>,
    #[command(flatten)]
    pub(super) undecided: UndecidedArgs,
}

/// Runs `zoosim run`: every file read and every output checked before a
/// seed runs; see [`run_all`] for the exit codes.
#[cfg(madsim)]
pub(super) fn command(args: RunArgs, registry: &Registry) -> Result<ExitCode, String> {
    let RunArgs {
        paths,
        seeds,
        seed_start,
        jobs,
        shard,
        shrink,
        history,
        history_all,
        report,
        report_all,
        summary,
        undecided,
    } = args;
    check_outputs(history.as_deref(), report.as_deref(), shrink)?;
    let line = run_line(&paths, seeds, seed_start, shard, undecided);
    // Every file is read and checked before any seed runs, and the
    // summary's file is known to be writable.
    let (scenarios, hashes) = load_all(&paths, registry, undecided)?;
    let summary = summary
        .as_deref()
        .map(sweep::SummaryFile::create)
        .transpose()
        .map_err(|e| e.to_string())?;
    let options = runner::RunOptions {
        seeds,
        seed_start,
        jobs: clamp_threads("--jobs", jobs),
        shard,
        stop: Some(watch::interrupt_flag()),
        progress: Some(std::sync::Arc::default()),
    };
    let command = sweep::CommandLine {
        seeds,
        seed_start,
        shard: shard.map(|(index, of)| sweep::Shard { index, of }),
    };
    let out = Sweep {
        command,
        line,
        hashes,
        summary,
    };
    run_all(
        &scenarios,
        &options,
        shrink,
        out,
        Keep {
            history: history.as_deref().map(|d| (d, history_all)),
            report: report.as_deref().map(|d| (d, report_all)),
        },
        undecided.fail_on_undecided,
        registry,
    )
}

/// Every output directory a run writes to, checked before any seed runs
/// (a failure found in an hour's run must not end in "cannot write").
#[cfg(madsim)]
fn check_outputs(
    history: Option<&Path>,
    report: Option<&Path>,
    shrink: bool,
) -> Result<(), String> {
    if let Some(dir) = history {
        histories::check_dir(dir)?;
    }
    if let Some(dir) = report {
        reports::check_dir(dir)?;
    }
    if shrink {
        // Where the shrunk scenarios go: shrunk/, or here to make it.
        let shrunk = Path::new("shrunk");
        let (dir, what) = match shrunk.exists() {
            true => (shrunk, "shrunk/"),
            false => (Path::new("."), "the current directory (for shrunk/)"),
        };
        histories::check_dir_for("--shrink", dir)
            .map_err(|e| format!("{e} [writing to {what}]"))?;
    }
    Ok(())
}

/// Every scenario file under `paths`, read and checked, with its
/// contract budget, and each file's content hash (for the summary).
#[cfg(madsim)]
fn load_all(
    paths: &[PathBuf],
    registry: &Registry,
    undecided: UndecidedArgs,
) -> Result<(Vec<Scenario>, Vec<String>), String> {
    let mut scenarios = Vec::new();
    let mut hashes = Vec::new();
    let mut names: std::collections::BTreeMap<String, PathBuf> = Default::default();
    for f in scenario_files(paths).map_err(|e| e.to_string())? {
        let (s, text) = load_source_in(&f, registry).map_err(|e| e.to_string())?;
        // A scenario's name keys its summary line, its history files and
        // its report pages: two of one name would write over each
        // other's.
        if let Some(first) = names.insert(s.name.clone(), f.clone()) {
            return Err(format!(
                "{} and {}: two scenarios named {:?} (a scenario is named by its file name; \
                 their summaries, histories and reports would overwrite each other's): \
                 rename one",
                first.display(),
                f.display(),
                s.name
            ));
        }
        scenarios.push(with_budget(s, undecided.contract_steps));
        hashes.push(sweep::content_hash(&text));
    }
    Ok((scenarios, hashes))
}

/// The progress bar, and the thread that names the long seeds in flight
/// on it (or, without a terminal, in a line every 30 s).
#[cfg(madsim)]
struct Progress {
    bar: indicatif::ProgressBar,
    /// The scenario running.
    running: std::sync::Arc<std::sync::Mutex<String>>,
    /// The ticker's stop flag and thread.
    ticker: Option<(
        std::sync::Arc<std::sync::atomic::AtomicBool>,
        std::thread::JoinHandle<()>,
    )>,
}

#[cfg(madsim)]
impl Progress {
    /// A bar of `total` seeds; a ticker when the run reports progress.
    fn start(total: u64, options: &runner::RunOptions) -> Progress {
        use indicatif::{ProgressBar, ProgressStyle};
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} seeds  {msg}  [{elapsed}]")
                .expect("a valid template"),
        );
        // The scenario running, and its seeds in flight that have counted
        // thousands of events: a long seed shows how far it got.
        let running = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let ticker = options.progress.clone().map(|progress| {
            let (bar, running) = (bar.clone(), running.clone());
            let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let stop = done.clone();
            let thread = std::thread::spawn(move || {
                // Without a terminal (a CI log) the bar is hidden: a line
                // every 30 s while a seed is long, so the log shows it
                // moving.
                let mut ticks = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(250));
                    ticks += 1;
                    let name = running.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    let in_flight = progress.in_flight();
                    let line = long_seeds_line(&name, &in_flight);
                    if bar.is_hidden() {
                        if ticks % 120 == 0 && in_flight.iter().any(|(_, _, n)| *n > 0) {
                            eprintln!("still running: {line}");
                        }
                    } else {
                        bar.set_message(line);
                    }
                }
            });
            (done, thread)
        });
        Progress {
            bar,
            running,
            ticker,
        }
    }

    /// `name`'s seeds run now.
    fn scenario(&self, name: &str) {
        self.bar.set_message(name.to_owned());
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = name.to_owned();
    }

    /// The run is over: the ticker stops and the bar goes.
    fn finish(self) {
        if let Some((done, thread)) = self.ticker {
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = thread.join();
        }
        self.bar.finish_and_clear();
    }
}

/// What the seeds of a run left: each scenario's summary (those run, in
/// order: an interrupt stops before the rest), and the histories and
/// reports written as seeds ended.
#[cfg(madsim)]
struct Ran {
    summaries: Vec<runner::Summary>,
    histories: Vec<Written>,
    reports: Vec<WrittenReport>,
}

/// Runs every scenario's seeds, keeping each seed's history and report
/// as `keep` says as the seed ends; stops at an interrupt.
#[cfg(madsim)]
fn run_seeds(
    scenarios: &[Scenario],
    options: &runner::RunOptions,
    keep: &Keep,
    registry: &Registry,
    all_seeds: &[runner::Seeds],
    progress: &Progress,
) -> Result<Ran, String> {
    let mut summaries = Vec::new();
    // Histories are written as their seeds end (the summary keeps only
    // counts); where each went is printed after the table, in seed order.
    let histories: std::sync::Mutex<Vec<Written>> = std::sync::Mutex::default();
    // Reports likewise (the contract check and the page made on the
    // thread that ran the seed).
    let reports: std::sync::Mutex<Vec<WrittenReport>> = std::sync::Mutex::default();
    for (k, s) in scenarios.iter().enumerate() {
        if watch::interrupted() {
            break;
        }
        progress.scenario(&s.name);
        let on_seed = |run: &runner::SeedRun| {
            // Failing and undecided seeds are kept; every seed with --*-all.
            let shown = run.failed() || run.undecided().is_some();
            if let Some((dir, all)) = keep.report {
                if all || shown {
                    let replay = replay_of(registry, s, run.seed);
                    let r = reports::write_seed_run(dir, s, run, replay);
                    reports
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((k, run.seed, shown, r));
                }
            }
            if let Some((dir, all)) = keep.history {
                if all || shown {
                    let path = histories::file_for(dir, &s.name, run.seed);
                    let r = histories::write(&path, &run.history).map(|bytes| (path, bytes));
                    histories
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((k, run.seed, r));
                }
            }
            progress.bar.inc(1);
        };
        let summary = runner::run_scenario(s, options, &on_seed).map_err(|e| e.to_string())?;
        // A scenario that stopped early: its unrun seeds leave the bar.
        progress
            .bar
            .inc(all_seeds[k].len().saturating_sub(summary.seeds_run));
        summaries.push(summary);
    }
    Ok(Ran {
        summaries,
        histories: histories.into_inner().unwrap_or_else(|e| e.into_inner()),
        reports: reports.into_inner().unwrap_or_else(|e| e.into_inner()),
    })
}

/// Runs every seed of `scenarios`, prints the table and what was kept,
/// and writes the summary: exit 0 all as expected, 1 not, 2 an output
/// not written (with nothing else wrong), 3 undecided seeds under
/// `--fail-on-undecided`, 130 interrupted.
#[cfg(madsim)]
pub(super) fn run_all(
    scenarios: &[Scenario],
    options: &runner::RunOptions,
    shrink: bool,
    out: Sweep,
    keep: Keep,
    fail_on_undecided: bool,
    registry: &Registry,
) -> Result<ExitCode, String> {
    // Every scenario's seeds are checked to fit before any runs.
    let mut all_seeds = Vec::new();
    for s in scenarios {
        all_seeds.push(runner::seeds_of(s, options).map_err(|e| e.to_string())?);
    }
    let total: u64 = all_seeds
        .iter()
        .fold(0u64, |sum, seeds| sum.saturating_add(seeds.len()));
    let progress = Progress::start(total, options);
    let started = std::time::Instant::now();
    watch::catch_interrupts("stopping the seeds in flight, then the summary so far");
    let ran = run_seeds(scenarios, options, &keep, registry, &all_seeds, &progress);
    progress.finish();
    let Ran {
        summaries,
        histories,
        reports,
    } = ran?;
    let interrupted = watch::interrupted();
    let records: Vec<sweep::ScenarioRecord> = summaries
        .iter()
        .zip(scenarios)
        .zip(out.hashes)
        .map(|((summary, s), hash)| {
            sweep::ScenarioRecord::of_run(summary, s, hash, options, &|seed| {
                replay_of(registry, s, seed)
            })
        })
        .collect();
    let record = sweep::SweepSummary::of_run(out.command, records);
    // Written before anything else can go wrong (a shrink's file, say);
    // an error writing it is the command's error, after the table.
    let written = out.summary.map(|f| {
        let path = f.path().display().to_string();
        f.write(&record).map(|()| path)
    });
    let bad = super::print_table(&record);
    let seeds: u64 = summaries.iter().map(|s| s.seeds_run).sum();
    let wall = started.elapsed().as_secs_f64();
    // After the summary, so that a failed write loses nothing of it.
    let mut unwritten = shrink && !shrink_failures(&summaries, scenarios);
    unwritten |= !list_histories(histories, keep.history);
    if let Some((dir, _)) = keep.report {
        let title = format!(
            "zoosim run: {} scenarios, {seeds} seeds",
            record.scenarios.len()
        );
        let ran = RanPages {
            scenarios,
            summaries: &summaries,
            options,
            record: &record,
        };
        unwritten |= !ran.write_pages(dir, reports, title, out.line.clone());
    }
    println!(
        "{} scenarios, {seeds} seeds in {wall:.1} s ({:.1} seeds/s): {}",
        summaries.len(),
        seeds as f64 / wall.max(1e-9),
        as_expected(bad, record.undecided)
    );
    if interrupted {
        let unrun: Vec<&str> = scenarios[summaries.len()..]
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        println!(
            "interrupted: the summary above is what ran{}",
            match unrun.is_empty() {
                true => String::new(),
                false => format!("; not run: {}", unrun.join(", ")),
            }
        );
    }
    match written {
        Some(Err(e)) => return Err(e.to_string()),
        Some(Ok(path)) => println!("summary written to {path}"),
        None => {}
    }
    Ok(if interrupted {
        // As a shell reports a command ended by SIGINT.
        ExitCode::from(130)
    } else if unwritten && bad == 0 {
        ExitCode::from(2)
    } else {
        exit_code(bad, fail_on_undecided && record.any_undecided())
    })
}

/// `--shrink`: each unexpected failure's first seed shrunk into shrunk/,
/// never over a file already there. False when one could not be written
/// or shrunk (the others go on: the summary is printed and written
/// already).
#[cfg(madsim)]
fn shrink_failures(summaries: &[runner::Summary], scenarios: &[Scenario]) -> bool {
    let mut all_written = true;
    for (s, scenario) in summaries.iter().zip(scenarios) {
        let Some(f) = s.failures.first().filter(|_| !s.expect_failure) else {
            continue;
        };
        if let Err(e) = std::fs::create_dir_all("shrunk") {
            eprintln!("error: shrunk/: {e}");
            return false;
        }
        let out = (1..)
            .map(|k| match k {
                1 => PathBuf::from(format!("shrunk/{}-seed-{}.toml", s.name, f.seed)),
                k => PathBuf::from(format!("shrunk/{}-seed-{}-{k}.toml", s.name, f.seed)),
            })
            .find(|p| !p.exists())
            .expect("a free name");
        let shrunk = match crate::scenario::shrink::shrink(scenario, f.seed, &|_| {}) {
            Ok(shrunk) => shrunk,
            Err(e) => {
                eprintln!("error: cannot shrink {} seed {}: {e}", s.name, f.seed);
                all_written = false;
                continue;
            }
        };
        if let Err(e) = crate::scenario::output::write(&out, shrunk.scenario.to_toml()) {
            eprintln!("error: {e}");
            all_written = false;
            continue;
        }
        println!(
            "  shrunk {} seed {} into {} ({} faults placed by hand, {} clients)",
            s.name,
            f.seed,
            out.display(),
            shrunk.scenario.faults.at.len(),
            shown(shrunk.scenario.workload.clients())
        );
    }
    all_written
}

/// Prints where each kept history went, in seed order, then a note (or a
/// warning, past a size) of their bytes. False when one was not written.
#[cfg(madsim)]
fn list_histories(mut written: Vec<Written>, keep: Option<(&Path, bool)>) -> bool {
    written.sort_by_key(|(k, seed, _)| (*k, *seed));
    let (mut kept, mut kept_bytes, mut all_written) = (0, 0u64, true);
    for (_, _, r) in written {
        match r {
            Ok((p, bytes)) => {
                println!("  history: {}", p.display());
                kept += 1;
                kept_bytes = kept_bytes.saturating_add(bytes);
            }
            Err(e) => {
                eprintln!("error: {e}");
                all_written = false;
            }
        }
    }
    if let Some((dir, all)) = keep.filter(|_| kept > 0) {
        eprintln!("{}", histories_note(kept, kept_bytes, dir, all));
    }
    all_written
}

/// What a run's report pages are drawn from.
#[cfg(madsim)]
struct RanPages<'a> {
    scenarios: &'a [Scenario],
    summaries: &'a [runner::Summary],
    options: &'a runner::RunOptions,
    record: &'a sweep::SweepSummary,
}

#[cfg(madsim)]
impl RanPages<'_> {
    /// Keeps the seed pages the summaries count (prints where the failing
    /// and undecided ones are) and writes the index over them. False when
    /// a page or the index was not written.
    fn write_pages(
        &self,
        dir: &Path,
        mut written: Vec<WrittenReport>,
        title: String,
        line: String,
    ) -> bool {
        let mut all_written = true;
        written.sort_by_key(|(k, seed, _, _)| (*k, *seed));
        // Seeds a scenario expected to fail ran past its first failure (in
        // parallel) are not counted in its summary: their pages go.
        let counted: Vec<std::collections::BTreeSet<u64>> = self
            .summaries
            .iter()
            .zip(self.scenarios)
            .map(|(sum, s)| {
                runner::seeds_of(s, self.options)
                    .map(|seeds| seeds.take(sum.seeds_run).collect())
                    .unwrap_or_default()
            })
            .collect();
        let mut pages = std::collections::BTreeSet::new();
        for (k, seed, shown, w) in written {
            let s = &self.scenarios[k];
            match w {
                Ok(path) if !counted[k].contains(&seed) => {
                    let _ = std::fs::remove_file(&path);
                    let _ = std::fs::remove_file(path.with_extension("json"));
                }
                Ok(path) => {
                    if shown {
                        println!(
                            "  report of {} seed {seed}: {}",
                            s.name,
                            reports::file_url(&path)
                        );
                    }
                    pages.insert((s.name.clone(), seed));
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    all_written = false;
                }
            }
        }
        let record = self.record;
        let index = reports::index_report(
            record,
            title,
            Some(line),
            &|k| reports::seeds_run(&record.scenarios[k]),
            &|name, seed| {
                pages
                    .contains(&(name.to_owned(), seed))
                    .then(|| reports::seed_href(name, seed))
            },
        );
        match reports::write_index(dir, &index) {
            Ok(path) => println!("report index: {}", reports::file_url(&path)),
            Err(e) => {
                eprintln!("error: {e}");
                all_written = false;
            }
        }
        all_written
    }
}
