//! `zoosim lin`: check history files for linearizability against a model.
//!
//! A new model is one entry in [`MODELS`] and one arm in [`check_text`];
//! a new history format is one variant of `jepsen::Format` (or a
//! sibling reader producing operations the same way).

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::check::lin::cas_register::CasRegister;
use crate::check::lin::jepsen::{history, Format, FromJepsen, ParseError};
use crate::check::lin::kv::Kv;
use crate::check::lin::minimal::minimal;
use crate::check::lin::{
    check, Budget, Checked, Exhausted, Model, Operation, Options, Outcome, Summary, Verdict,
};
use crate::history::Read;

/// The models `--model` may name, with what each is.
pub(crate) const MODELS: &[(&str, &str)] = &[
    (
        "cas-register",
        "a register of integers (starts nil): read, write, cas [from to]",
    ),
    (
        "kv",
        "a map of strings (a missing key reads \"\"): get, put, append; checked key by key",
    ),
    (
        "zookeeper",
        "ZooKeeper's client contract on a zoosim history (JSON lines, `--history`): writes \
         linearizable, session FIFO, sequentially consistent reads, sync, watch events",
    ),
];

const MIB: u64 = 1 << 20;

/// The search steps one file may take by default (`--max-steps`): the
/// check, and the search for a minimal failing sub-history on top.
const DEFAULT_MAX_STEPS: u64 = 100_000_000;

/// After this long a check shows its progress on standard error.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// Without a terminal, a line of progress this often.
const PROGRESS_LINE_EVERY: Duration = Duration::from_secs(30);

/// The exit statuses, for `--help`.
const EXIT_STATUS: &str = "Exit status (with several files, the first that applies):
  2  bad input: a file unreadable, malformed (reported as file:line: what),
     or with nothing to check; an unknown model
  1  a violation: some file is not linearizable (or breaks the contract),
     or a checker fault (the check itself failed: a defect of zoosim)
  3  unknown: some file could not be decided within the budget
     (--max-steps, --memory-mib, --budget-ms)
  0  every file is linearizable
  130  interrupted (Ctrl-C, SIGTERM): what was found so far is printed";

/// Exit status: every file linearizable.
const EXIT_LINEARIZABLE: u8 = 0;
/// Exit status: some file not linearizable (or the contract broken).
const EXIT_VIOLATION: u8 = 1;
/// Exit status: bad input.
const EXIT_BAD_INPUT: u8 = 2;
/// Exit status: some file undecided within the budget.
const EXIT_UNKNOWN: u8 = 3;
/// Exit status: interrupted (Ctrl-C, SIGTERM), as a shell reports it.
const EXIT_INTERRUPTED: u8 = 130;

/// How bad an exit status is, for the status of several files: bad input,
/// then a violation, then unknown, then linearizable.
fn rank(code: u8) -> u8 {
    match code {
        EXIT_BAD_INPUT => 3,
        EXIT_VIOLATION => 2,
        EXIT_UNKNOWN => 1,
        _ => 0,
    }
}

/// The steps the search for a minimal sub-history may take over all
/// failing partitions (on top of the time budget, if any): it runs the
/// engine many times over.
const MINIMAL_STEPS: u64 = 20_000_000;

/// The steps it may take on one failing partition.
const MINIMAL_STEPS_PER_PART: u64 = 10_000_000;

/// `zoosim lin`'s arguments.
#[derive(clap::Args)]
#[command(after_help = EXIT_STATUS)]
pub(crate) struct LinArgs {
    /// History files (Jepsen's log format, or EDN operation maps: one per
    /// line, or a vector of them, as Jepsen writes).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The model the histories are checked against: cas-register, kv or
    /// zookeeper (a zoosim history, against ZooKeeper's contract).
    #[arg(long)]
    model: String,
    /// One JSON object per file, one per line, instead of text.
    #[arg(long)]
    json: bool,
    /// Give up on a file after this many milliseconds (verdict unknown).
    /// No time limit without it.
    #[arg(long)]
    budget_ms: Option<u64>,
    /// Search steps a file may take (the check, then the search for a
    /// minimal failing sub-history); past it: verdict unknown, with what
    /// was explored.
    #[arg(long, default_value_t = DEFAULT_MAX_STEPS)]
    max_steps: u64,
    /// Memory the check of one file may take, in MiB: the bytes the
    /// process allocates past what it held when the file's check began,
    /// measured (past it: verdict unknown, with what was explored).
    #[arg(long, default_value_t = 2048)]
    memory_mib: u64,
    /// Refuse files larger than this, in MiB (a figure too large to count
    /// in bytes means no limit).
    #[arg(long, default_value_t = 256)]
    max_file_mib: u64,
    /// Check each history as one whole, even where the model splits it
    /// into independent parts (kv: by key). Much slower.
    #[arg(long)]
    no_partition: bool,
    /// Stop at the first part that is not linearizable instead of
    /// diagnosing every part.
    #[arg(long)]
    first_failure: bool,
    /// Do not shrink a failing history to a minimal failing part.
    #[arg(long)]
    no_minimal: bool,
    /// Write a report per file (a self-contained HTML page and a JSON
    /// summary, DIR/<file>.html and .json) and an index of them
    /// (DIR/index.html). DIR must exist.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
}

/// What one file came to.
struct FileReport {
    ops: usize,
    partitions: usize,
    summary: Summary,
    failing: Vec<String>,
    unknown: Vec<(String, String)>,
    steps: u64,
    /// Lines that explain a failure, for a person.
    diagnosis: Vec<String>,
    /// The minimal failing sub-history's operations, described, and
    /// whether it is 1-minimal.
    minimal: Option<(Vec<String>, bool)>,
    /// Why a failing history has no minimal failing sub-history.
    minimal_note: Option<String>,
    /// The file's report, when `--report` asks for one.
    page: Option<crate::report::SeedReport>,
}

/// Runs `zoosim lin`. Exit: 2 bad input (an unreadable or malformed file,
/// one with nothing to check, an unknown model), else 1 some file not
/// linearizable, else 3 some file unknown, else 0 ([`EXIT_STATUS`]).
pub(crate) fn run(args: &LinArgs) -> Result<ExitCode, String> {
    if !MODELS.iter().any(|(name, _)| *name == args.model) {
        let mut msg = format!(
            "unknown model {}; the models are:",
            crate::quote::quoted(&args.model, crate::quote::WORD)
        );
        for (name, what) in MODELS {
            let _ = write!(msg, "\n  {name}  {what}");
        }
        return Err(msg);
    }
    if let Some(dir) = &args.report {
        super::reports::check_dir(dir)?;
    }
    let mut pages = super::reports::LinPages::default();
    let mut worst = EXIT_LINEARIZABLE;
    let mut exit = |code: u8| {
        if rank(code) > rank(worst) {
            worst = code;
        }
    };
    // `None`: more bytes than a u64 counts, no limit.
    let limit = args.max_file_mib.checked_mul(MIB);
    super::watch::catch_interrupts(
        "ending the check in hand; what it explored follows, the files after it are not checked",
    );
    for file in &args.files {
        if super::watch::interrupted() {
            break;
        }
        let started = Instant::now();
        let result = read_limited(file, limit)
            .map_err(FileError::Input)
            .and_then(|text| {
                guard(&args.model, file, || {
                    check_text(args, file, &text, started).map_err(|e| match e.line {
                        0 => format!("{}: {}", file.display(), e.what),
                        line => format!("{}:{line}: {}", file.display(), e.what),
                    })
                })
            });
        let millis = started.elapsed().as_secs_f64() * 1000.0;
        match result {
            Ok(mut report) => {
                exit(match report.summary {
                    Summary::Linearizable => EXIT_LINEARIZABLE,
                    Summary::NotLinearizable => EXIT_VIOLATION,
                    Summary::Unknown => EXIT_UNKNOWN,
                });
                let written = match (&args.report, report.page.take()) {
                    (Some(dir), Some(page)) => {
                        Some(pages.write(dir, file, verdict_word(report.summary), &page))
                    }
                    _ => None,
                };
                // The page's link on standard output, as `run` and
                // `replay` print theirs: in the file's JSON object with
                // --json (one object per file), else after its text.
                let url = match &written {
                    Some(Ok(path)) => Some(super::reports::file_url(path)),
                    _ => None,
                };
                if args.json {
                    let mut line = json_line(file, &report, millis);
                    if let Some(url) = &url {
                        line["report"] = serde_json::Value::from(url.as_str());
                    }
                    println!("{line}");
                } else {
                    print!("{}", text_report(file, &report, millis));
                    if let Some(url) = &url {
                        println!("  report: {url}");
                    }
                }
                if let Some(Err(e)) = written {
                    eprintln!("error: {e}");
                    exit(EXIT_BAD_INPUT);
                }
            }
            Err(e) => {
                let (code, verdict, e) = match e {
                    FileError::Input(e) => (EXIT_BAD_INPUT, "error", e),
                    FileError::Checker(e) => (EXIT_VIOLATION, "checker-fault", e),
                };
                exit(code);
                pages.error(file, &e);
                eprintln!("error: {e}");
                if args.json {
                    let line = serde_json::json!({
                        "file": file.display().to_string(),
                        "verdict": verdict,
                        "error": e,
                    });
                    println!("{line}");
                }
            }
        }
    }
    let interrupted = super::watch::interrupted();
    if interrupted {
        eprintln!(
            "interrupted: the verdicts above are what was checked; the file interrupted is \
             unknown, and any after it were not checked"
        );
    }
    if let Some(dir) = &args.report {
        match pages.write_index(dir, &args.model) {
            // With --json standard output is one object per file: the
            // index's link goes to standard error there.
            Ok(path) if args.json => {
                eprintln!("report index: {}", super::reports::file_url(&path))
            }
            Ok(path) => println!("report index: {}", super::reports::file_url(&path)),
            Err(e) => {
                eprintln!("error: {e}");
                exit(EXIT_BAD_INPUT);
            }
        }
    }
    Ok(ExitCode::from(if interrupted {
        EXIT_INTERRUPTED
    } else {
        worst
    }))
}

/// Why a file got no verdict.
#[derive(Debug)]
enum FileError {
    /// Bad input: unreadable, malformed, nothing to check (exit 2).
    Input(String),
    /// The check itself failed (it panicked): a failure that names the
    /// checker (exit 1), reported like any file's, never a crash that
    /// loses the other files' verdicts.
    Checker(String),
}

/// Runs one file's `check` for `model`, a panic in it caught and turned
/// into a [`FileError::Checker`] naming the model and the file (the
/// contract's check catches its own, as a `contract-checker` failure).
fn guard(
    model: &str,
    file: &Path,
    check: impl FnOnce() -> Result<FileReport, String>,
) -> Result<FileReport, FileError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(check)) {
        Ok(result) => result.map_err(FileError::Input),
        Err(panic) => {
            let msg = crate::check::panic_message(panic.as_ref());
            Err(FileError::Checker(format!(
                "{}: checker fault: the {model} check panicked ({msg}); a defect of zoosim, \
                 not a verdict on the history",
                file.display()
            )))
        }
    }
}

/// The file's bytes, refused past `limit` (`None`: no limit) before more
/// than that is read (a special file that never ends is refused the same
/// way).
fn read_limited(file: &Path, limit: Option<u64>) -> Result<Vec<u8>, String> {
    let name = file.display();
    let f = std::fs::File::open(file).map_err(|e| format!("{name}: cannot open: {e}"))?;
    let too_big = |size: String, limit: u64| {
        format!(
            "{name}: {size}, larger than the limit of {} MiB (--max-file-mib raises it)",
            limit / MIB
        )
    };
    if let Ok(meta) = f.metadata() {
        if meta.is_dir() {
            return Err(format!("{name}: is a directory, not a history file"));
        }
        if let Some(limit) = limit.filter(|&l| meta.len() > l) {
            return Err(too_big(format!("{} MiB", meta.len().div_ceil(MIB)), limit));
        }
    }
    let mut bytes = Vec::new();
    // One byte past the limit tells a file over it from one at it.
    let read = match limit.and_then(|l| l.checked_add(1)) {
        Some(most) => f.take(most).read_to_end(&mut bytes),
        None => (&f).read_to_end(&mut bytes),
    };
    read.map_err(|e| format!("{name}: cannot read: {e}"))?;
    if let Some(limit) = limit.filter(|&l| bytes.len() as u64 > l) {
        return Err(too_big("more than that".to_owned(), limit));
    }
    Ok(bytes)
}

/// Reads and checks one history with the model `args.model` names.
fn check_text(
    args: &LinArgs,
    file: &Path,
    text: &[u8],
    started: Instant,
) -> Result<FileReport, ParseError> {
    let file = Some(file);
    match args.model.as_str() {
        "cas-register" => check_with(&CasRegister, args, file, text, started),
        "kv" => check_with(
            &Kv {
                partitioned: !args.no_partition,
                ..Kv::default()
            },
            args,
            file,
            text,
            started,
        ),
        "zookeeper" => check_contract(args, file, text, started),
        // `run` refused any other name.
        other => Err(ParseError {
            line: 0,
            what: format!("unknown model {other:?}"),
        }),
    }
}

fn check_with<M: FromJepsen>(
    model: &M,
    args: &LinArgs,
    file: Option<&Path>,
    text: &[u8],
    started: Instant,
) -> Result<FileReport, ParseError>
where
    M::Input: Clone,
    M::Output: Clone,
{
    // From before the parse: reading a history takes memory too (a
    // Jepsen log about eight times its size), and counts in the bound.
    let progress = Progress::new(file, args, started);
    let format = Format::detect(text);
    let reading = format.parse_until(text, &|| progress.watch.poll().is_some())?;
    let events = match reading {
        Read::Whole(events) => events,
        Read::Stopped { line, records } => {
            return Ok(progress.stopped_reading(Read::Stopped { line, records }))
        }
    };
    let ops = history(model, &events)?;
    something_to_check(events.len(), &ops)?;
    // Polled with the events still held: the most reading takes.
    if progress.watch.poll().is_some() {
        return Ok(progress.stopped_reading(Read::Whole(ops.len())));
    }
    drop(events);
    let stop = || progress.poll();
    let budget = Budget {
        max_steps: args.max_steps,
        max_memo_bytes: super::watch::mib_bytes(args.memory_mib),
        stop: Some(&stop),
    };
    let checked = check(
        model,
        &ops,
        &Options {
            budget,
            first_failure: args.first_failure,
        },
    );
    let mut report = FileReport {
        ops: ops.len(),
        partitions: checked.partitions.len(),
        summary: checked.summary(),
        failing: checked.failing().map(|p| p.partition.key.clone()).collect(),
        unknown: checked
            .partitions
            .iter()
            .filter_map(|p| match &p.verdict {
                Verdict::Unknown(why) => Some((p.partition.key.clone(), undecided(p, *why))),
                _ => None,
            })
            .collect(),
        steps: checked.steps(),
        diagnosis: diagnose(model, &ops, &checked),
        minimal: None,
        minimal_note: None,
        page: None,
    };
    let mut minimal_ops = None;
    if !args.no_minimal {
        // The smallest failing partitions first (they shrink fastest),
        // until one shrinks below its whole within the budget.
        let mut failing: Vec<_> = checked.failing().collect();
        failing.sort_by_key(|p| p.partition.ops.len());
        let mut left = MINIMAL_STEPS.min(args.max_steps.saturating_sub(checked.steps()));
        let mut tried = 0;
        for p in failing {
            if left == 0 {
                break;
            }
            tried += 1;
            let cap = left.min(MINIMAL_STEPS_PER_PART);
            let budget = Budget {
                max_steps: cap,
                ..budget
            };
            let m = minimal(model, &ops, &p.partition.ops, &budget);
            left = left.saturating_sub(m.as_ref().map_or(cap, |m| m.steps));
            if let Some(m) = m.filter(|m| m.ops.len() < p.partition.ops.len()) {
                let described = m.ops.iter().map(|&i| describe(model, &ops[i])).collect();
                report.minimal = Some((described, m.one_minimal));
                minimal_ops = Some(m.ops);
                break;
            }
        }
        if minimal_ops.is_none() && tried > 0 {
            report.minimal_note = Some(format!(
                "none confirmed: shrinking found no failing sub-history smaller than the whole \
                 partition within its budget ({tried} failing partition{} tried)",
                if tried == 1 { "" } else { "s" }
            ));
        }
    }
    if let Some(file) = args.report.as_ref().and(file) {
        report.page = Some(super::reports::lin_report(
            &file.display().to_string(),
            match format {
                Format::Log => "Jepsen log (jepsen.util lines)",
                Format::Edn => "Jepsen EDN operation maps",
            },
            &args.model,
            model,
            &ops,
            &checked,
            minimal_ops.as_deref(),
            report.minimal_note.as_deref(),
            format!(
                "zoosim lin {} --model {}",
                super::shell_word(&file.display().to_string()),
                super::shell_word(&args.model)
            ),
        ));
    }
    Ok(report)
}

/// ZooKeeper's contract on a zoosim history: one verdict, the broken
/// guarantee named.
fn check_contract(
    args: &LinArgs,
    file: Option<&Path>,
    text: &[u8],
    started: Instant,
) -> Result<FileReport, ParseError> {
    use crate::check::contract::{self, ContractVerdict};
    let progress = Progress::new(file, args, started);
    let text = std::str::from_utf8(text).map_err(|e| ParseError {
        line: 0,
        what: format!("not UTF-8 text (a zoosim history is JSON lines): {e}"),
    })?;
    let reading = crate::history::json::parse_reader_until(text.as_bytes(), &|| {
        progress.watch.poll().is_some()
    })
    .map_err(|e| ParseError {
        line: e.line,
        what: e.kind.to_string(),
    })?;
    let history = match reading {
        Read::Whole(history) => history,
        Read::Stopped { line, records } => {
            return Ok(progress.stopped_reading(Read::Stopped { line, records }))
        }
    };
    contract_has_something_to_check(&history)?;
    if progress.watch.poll().is_some() {
        return Ok(progress.stopped_reading(Read::Whole(history.ops().len())));
    }
    let stop = || progress.poll();
    let budget = Budget {
        max_steps: args.max_steps,
        max_memo_bytes: super::watch::mib_bytes(args.memory_mib),
        stop: Some(&stop),
    };
    let r = contract::check(&history, &budget).map_err(|e| ParseError {
        line: 0,
        what: e.to_string(),
    })?;
    let mut report = FileReport {
        ops: history.ops().len(),
        partitions: 1,
        summary: Summary::Linearizable,
        failing: Vec::new(),
        unknown: Vec::new(),
        steps: r.steps,
        diagnosis: Vec::new(),
        minimal: None,
        minimal_note: None,
        page: None,
    };
    if let Some(file) = args.report.as_ref().and(file) {
        report.page = Some(super::reports::history_report(
            &file.display().to_string(),
            &history,
            &r,
            format!(
                "zoosim lin {} --model zookeeper",
                super::shell_word(&file.display().to_string())
            ),
        ));
    }
    match r.verdict {
        ContractVerdict::Holds => {}
        ContractVerdict::Broken(b) => {
            report.summary = Summary::NotLinearizable;
            report.failing.push(b.guarantee.name.to_owned());
            report
                .diagnosis
                .push(format!("{}: {}", b.guarantee.name, b.detail));
            let ops: Vec<String> = b.ops.iter().map(|o| format!("op {o}")).collect();
            report
                .diagnosis
                .push(format!("operations involved: {}", ops.join(", ")));
        }
        ContractVerdict::Unknown(why) => {
            report.summary = Summary::Unknown;
            let raise = match progress.watch.poll() {
                Some(why) => raise(why),
                None => "--max-steps raises it",
            };
            report
                .unknown
                .push(("contract".to_owned(), format!("{why} ({raise})")));
        }
        ContractVerdict::CheckerFault(why) => {
            report.summary = Summary::NotLinearizable;
            report.failing.push("contract-checker".to_owned());
            report.diagnosis.push(format!("contract-checker: {why}"));
        }
    }
    Ok(report)
}

/// Refuses a Jepsen history that checks nothing (of `events` events, the
/// operations `ops`): no events, every operation failed, or no operation
/// with a known outcome. Any such history is linearizable, which says
/// nothing about the system that wrote it.
fn something_to_check<I, O>(events: usize, ops: &[Operation<I, O>]) -> Result<(), ParseError> {
    let nothing = |why: String| {
        Err(ParseError::new(
            0,
            format!("nothing to check: {why}; refused rather than called linearizable"),
        ))
    };
    if events == 0 {
        return nothing(
            "the file has no client events (it is empty, blank, or has only :nemesis events)"
                .into(),
        );
    }
    if ops.is_empty() {
        return nothing(format!(
            "every operation of its {events} events failed (:fail, did not take effect)"
        ));
    }
    if !ops.iter().any(|op| op.output.is_known()) {
        return nothing(format!(
            "the outcome of every one of its {} operations is unknown (:info, or never \
             completed): any order of them is possible",
            ops.len()
        ));
    }
    Ok(())
}

/// Refuses a zoosim history whose operations the contract check would not
/// see: none at all (only metadata and other records), or none that
/// reached a server (every handle without a session, every completion
/// refused by the client itself).
fn contract_has_something_to_check(history: &crate::history::History) -> Result<(), ParseError> {
    use crate::check::contract::{session_logs, Seen};
    let nothing = |why: String| {
        Err(ParseError::new(
            0,
            format!("nothing to check: {why}; refused rather than called linearizable"),
        ))
    };
    let ops = history.ops();
    if ops.is_empty() {
        return nothing(
            "the history has no operations (only its meta line, and records that are not \
             requests)"
                .into(),
        );
    }
    // A history the contract refuses is reported by the check itself.
    let Ok(logs) = session_logs(history) else {
        return Ok(());
    };
    let checked = logs
        .iter()
        .flat_map(|l| &l.seen)
        .filter(|s| matches!(s, Seen::Request { .. }))
        .count();
    if checked == 0 {
        let refused = ops
            .iter()
            .filter(|o| o.complete.is_some_and(|(_, c)| c.server.is_none()))
            .count();
        return nothing(format!(
            "none of its {} operations reached a server: {} completed without one (refused by \
             the client), the others are of handles that never had a session",
            ops.len(),
            refused
        ));
    }
    Ok(())
}

/// What an undecided part's search explored, and what raises its bound.
fn undecided(p: &crate::check::lin::PartitionResult, why: Exhausted) -> String {
    let e = &p.explored;
    let raise = raise(why);
    format!(
        "{why} after {} steps ({raise}): {} configurations in the memo, {} distinct states, \
         the longest linearizable prefix found has {} of the {} operations",
        e.steps,
        e.memo_entries,
        e.states,
        e.deepest,
        p.partition.ops.len()
    )
}

/// A file whose reading reached a bound (its memory, an interrupt):
/// mid-file (`Stopped`, with the events read), or once read whole into
/// `Whole(operations)`: unknown, nothing searched.
fn stopped_reading(read: Read<usize>, why: Exhausted) -> FileReport {
    // Stopped mid-read, no operation was formed yet: the events read are
    // named in the message, not counted as operations.
    let (ops, at) = match read {
        Read::Whole(ops) => (ops, format!("once read, {ops} operations")),
        Read::Stopped { line, records } => {
            (0, format!("stopped at line {line}, {records} events read"))
        }
    };
    FileReport {
        ops,
        partitions: 1,
        summary: Summary::Unknown,
        failing: Vec::new(),
        unknown: vec![(
            "history".to_owned(),
            format!(
                "{why} while reading the history ({at}), before any search ({})",
                raise(why)
            ),
        )],
        steps: 0,
        diagnosis: Vec::new(),
        minimal: None,
        minimal_note: None,
        page: None,
    }
}

/// What raises the bound a search stopped at.
fn raise(why: Exhausted) -> &'static str {
    match why {
        Exhausted::Steps => "--max-steps raises it",
        Exhausted::Memory => "--memory-mib raises it",
        Exhausted::Stopped => "--budget-ms raises it",
        Exhausted::Interrupted => "stopped by Ctrl-C or SIGTERM",
    }
}

/// One file's check's progress on standard error, polled by the search
/// (every few thousand steps, through its stop callback): a spinner on a
/// terminal once the check has taken [`PROGRESS_AFTER`], else a line every
/// [`PROGRESS_LINE_EVERY`]. It also ends the search at `--budget-ms`.
struct Progress {
    file: String,
    started: Instant,
    watch: super::watch::Watch,
    polls: std::cell::Cell<u64>,
    shown: std::cell::Cell<Instant>,
    bar: std::cell::OnceCell<indicatif::ProgressBar>,
}

impl Progress {
    fn new(file: Option<&Path>, args: &LinArgs, started: Instant) -> Progress {
        Progress {
            file: file.map_or_else(String::new, |f| f.display().to_string()),
            started,
            watch: super::watch::Watch::new(
                args.budget_ms
                    .map(|ms| Duration::from_millis(ms).saturating_sub(started.elapsed())),
                super::watch::mib_bytes(args.memory_mib),
            ),
            polls: std::cell::Cell::new(0),
            shown: std::cell::Cell::new(started),
            bar: std::cell::OnceCell::new(),
        }
    }

    /// The report of a reading the watch stopped (see
    /// [`stopped_reading`]).
    fn stopped_reading(&self, read: Read<usize>) -> FileReport {
        // The watch is sticky: it says again why it stopped the reading.
        let why = self.watch.poll().unwrap_or(Exhausted::Stopped);
        stopped_reading(read, why)
    }

    /// Called every few dozen search steps: why to stop, if the check
    /// must.
    fn poll(&self) -> Option<Exhausted> {
        let polls = self.polls.get() + 1;
        self.polls.set(polls);
        if let Some(why) = self.watch.poll() {
            return Some(why);
        }
        let now = Instant::now();
        let elapsed = now - self.started;
        if elapsed < PROGRESS_AFTER || now - self.shown.get() < Duration::from_millis(100) {
            return None;
        }
        let bar = self.bar.get_or_init(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                    .expect("a valid template"),
            );
            bar
        });
        let steps = polls.saturating_mul(crate::check::lin::POLL_EVERY);
        let mut line = format!("checking {}: over {steps} search steps", self.file);
        if let (Some(used), Some(limit)) = (self.watch.used_bytes(), self.watch.memory_limit()) {
            let _ = write!(
                line,
                ", {} of {} MiB",
                used as u64 / MIB,
                limit as u64 / MIB
            );
        }
        if bar.is_hidden() {
            if now - self.shown.get() >= PROGRESS_LINE_EVERY {
                eprintln!("{line} in {:.0} s", elapsed.as_secs_f64());
                self.shown.set(now);
            }
        } else {
            bar.set_message(line);
            bar.tick();
            self.shown.set(now);
        }
        None
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.get() {
            bar.finish_and_clear();
        }
    }
}

/// An operation in words, with its client and lines.
fn describe<M: Model>(model: &M, op: &Operation<M::Input, M::Output>) -> String {
    let ret = match (op.ret, &op.output) {
        (_, Outcome::Unknown) => "open-ended".to_owned(),
        (Some(r), _) => r.to_string(),
        (None, _) => "never".to_owned(),
    };
    format!(
        "process {} [line {} to {ret}]: {}",
        op.client,
        op.call,
        model.describe_op(&op.input, op.output.as_ref())
    )
}

/// A state on a diagnosis line: its start, and its length when cut.
fn clip(s: &str) -> std::borrow::Cow<'_, str> {
    crate::quote::cut(s, 200)
}

/// The first failing partition's diagnosis, in lines.
fn diagnose<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    checked: &Checked,
) -> Vec<String> {
    let Some(p) = checked.failing().next() else {
        return Vec::new();
    };
    let Verdict::NotLinearizable(d) = &p.verdict else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    let part = if p.partition.key.is_empty() {
        "the history".to_owned()
    } else {
        format!("key {:?}", p.partition.key)
    };
    lines.push(format!(
        "{part}: the longest linearizable prefix has {} of its {} operations{}",
        d.prefix.len(),
        p.partition.ops.len(),
        if d.prefix.is_empty() {
            ""
        } else {
            "; it ends:"
        }
    ));
    let skip = d.prefix.len().saturating_sub(3);
    for step in &d.prefix[skip..] {
        lines.push(format!(
            "  {}   state {} -> {}",
            describe(model, &ops[step.op]),
            clip(&step.before),
            clip(&step.after)
        ));
    }
    let end = d
        .prefix
        .last()
        .map_or_else(|| model.describe_state(&model.init()), |s| s.after.clone());
    lines.push(format!(
        "then nothing can be linearized before this returns, in state {}:",
        clip(&end)
    ));
    lines.push(format!("  {}", describe(model, &ops[d.deadline])));
    for &(c, accepted) in &d.candidates {
        lines.push(format!(
            "  could come next: {} ({})",
            describe(model, &ops[c]),
            if accepted {
                "possible here, but leads to a dead end"
            } else {
                "impossible in that state"
            }
        ));
    }
    lines
}

fn verdict_word(s: Summary) -> &'static str {
    match s {
        Summary::Linearizable => "linearizable",
        Summary::NotLinearizable => "not-linearizable",
        Summary::Unknown => "unknown",
    }
}

fn text_report(file: &Path, r: &FileReport, millis: f64) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "{}: {} ({} ops, {} partition{}, {millis:.1} ms)",
        file.display(),
        r.summary,
        r.ops,
        r.partitions,
        if r.partitions == 1 { "" } else { "s" }
    );
    if r.partitions > 1 && !r.failing.is_empty() {
        let keys: Vec<String> = r.failing.iter().map(|k| format!("{k:?}")).collect();
        let _ = write!(out, "; failing keys {}", keys.join(", "));
    }
    out.push('\n');
    for (key, why) in &r.unknown {
        let _ = writeln!(
            out,
            "  unknown{}: {why}",
            if key.is_empty() {
                String::new()
            } else {
                format!(" for key {key:?}")
            }
        );
    }
    for line in &r.diagnosis {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(note) = &r.minimal_note {
        let _ = writeln!(out, "  minimal failing sub-history: {note}");
    }
    if let Some((ops, one_minimal)) = &r.minimal {
        let _ = writeln!(
            out,
            "  minimal failing sub-history: {} operation{}{}",
            ops.len(),
            if ops.len() == 1 { "" } else { "s" },
            if *one_minimal {
                " (dropping any one makes it linearizable)"
            } else {
                " (search budget ran out: may not be minimal)"
            }
        );
        for op in ops {
            let _ = writeln!(out, "    {op}");
        }
    }
    out
}

fn json_line(file: &Path, r: &FileReport, millis: f64) -> serde_json::Value {
    serde_json::json!({
        "file": file.display().to_string(),
        "verdict": verdict_word(r.summary),
        "ops": r.ops,
        "millis": (millis * 1000.0).round() / 1000.0,
        "partitions": r.partitions,
        "failing_partitions": r.failing,
        "unknown_partitions": r.unknown.iter().map(|(k, why)| serde_json::json!({"key": k, "why": why})).collect::<Vec<_>>(),
        "steps": r.steps,
        "diagnosis": r.diagnosis,
        "minimal_ops": r.minimal.as_ref().map(|(ops, _)| ops.len()),
        "minimal": r.minimal.as_ref().map(|(ops, _)| ops),
        "minimal_is_one_minimal": r.minimal.as_ref().map(|(_, one)| one),
        "minimal_note": r.minimal_note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_a_check_is_a_checker_fault_naming_the_model_and_file() {
        let file = Path::new("h/etcd_001.log");
        let got = guard("kv", file, || panic!("deliberately broken check"));
        match got {
            Err(FileError::Checker(e)) => {
                assert!(
                    e.starts_with("h/etcd_001.log: checker fault: the kv check"),
                    "{e}"
                );
                assert!(e.contains("deliberately broken check"), "{e}");
            }
            Err(FileError::Input(e)) => panic!("expected a checker fault, got bad input: {e}"),
            Ok(_) => panic!("expected a checker fault, got a verdict"),
        }
        // Bad input stays bad input.
        let got = guard("kv", file, || Err("h/etcd_001.log:3: bad line".to_owned()));
        assert!(matches!(got, Err(FileError::Input(e)) if e.ends_with("bad line")));
    }
}
