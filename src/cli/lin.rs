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
    check, Budget, Checked, Model, Operation, Options, Outcome, Summary, Verdict,
};

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

/// The steps the search for a minimal sub-history may take over all
/// failing partitions (on top of the time budget, if any): it runs the
/// engine many times over.
const MINIMAL_STEPS: u64 = 20_000_000;

/// The steps it may take on one failing partition.
const MINIMAL_STEPS_PER_PART: u64 = 10_000_000;

/// `zoosim lin`'s arguments.
#[derive(clap::Args)]
pub(crate) struct LinArgs {
    /// History files (Jepsen's log format or EDN maps, one per line).
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
    #[arg(long)]
    budget_ms: Option<u64>,
    /// Memory the search of one partition may take, in MiB (past it:
    /// verdict unknown).
    #[arg(long, default_value_t = 2048)]
    memory_mib: u64,
    /// Refuse files larger than this, in MiB.
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

/// Runs `zoosim lin`. Exit: 0 every file linearizable, 1 some not (or
/// unknown), 2 bad input (an unreadable or malformed file, an unknown
/// model).
pub(crate) fn run(args: &LinArgs) -> Result<ExitCode, String> {
    if !MODELS.iter().any(|(name, _)| *name == args.model) {
        let mut msg = format!("unknown model {:?}; the models are:", args.model);
        for (name, what) in MODELS {
            let _ = write!(msg, "\n  {name}  {what}");
        }
        return Err(msg);
    }
    if let Some(dir) = &args.report {
        super::reports::check_dir(dir)?;
    }
    let mut pages = super::reports::LinPages::default();
    let mut worst = 0u8;
    for file in &args.files {
        let started = Instant::now();
        let result = read_limited(file, args.max_file_mib.saturating_mul(MIB)).and_then(|text| {
            check_text(args, file, &text, started)
                .map_err(|e| format!("{}:{}: {}", file.display(), e.line, e.what))
        });
        let millis = started.elapsed().as_secs_f64() * 1000.0;
        match result {
            Ok(mut report) => {
                worst = worst.max(match report.summary {
                    Summary::Linearizable => 0,
                    _ => 1,
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
                    worst = 2;
                }
            }
            Err(e) => {
                worst = 2;
                pages.error(file, &e);
                eprintln!("error: {e}");
                if args.json {
                    let line = serde_json::json!({
                        "file": file.display().to_string(),
                        "verdict": "error",
                        "error": e,
                    });
                    println!("{line}");
                }
            }
        }
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
                worst = 2;
            }
        }
    }
    Ok(ExitCode::from(worst))
}

/// The file's bytes, refused past `limit` before more than that is read
/// (a special file that never ends is refused the same way).
fn read_limited(file: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let name = file.display();
    let f = std::fs::File::open(file).map_err(|e| format!("{name}: cannot open: {e}"))?;
    let too_big = |size: String| {
        format!(
            "{name}: {size}, larger than the limit of {} MiB (--max-file-mib raises it)",
            limit / MIB
        )
    };
    if let Ok(meta) = f.metadata() {
        if meta.is_dir() {
            return Err(format!("{name}: is a directory, not a history file"));
        }
        if meta.len() > limit {
            return Err(too_big(format!("{} MiB", meta.len().div_ceil(MIB))));
        }
    }
    let mut bytes = Vec::new();
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{name}: cannot read: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(too_big("more than that".to_owned()));
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
    let format = Format::detect(text);
    let events = format.parse(text)?;
    let ops = history(model, &events)?;
    let deadline = args.budget_ms.map(|ms| started + Duration::from_millis(ms));
    let stop = move || deadline.is_some_and(|d| Instant::now() >= d);
    let budget = Budget {
        max_steps: u64::MAX,
        max_memo_bytes: usize::try_from(args.memory_mib.saturating_mul(MIB)).unwrap_or(usize::MAX),
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
                Verdict::Unknown(why) => Some((p.partition.key.clone(), why.to_string())),
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
        let mut left = MINIMAL_STEPS;
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
                Format::Edn => "Jepsen EDN maps, one per line",
            },
            &args.model,
            model,
            &ops,
            &checked,
            minimal_ops.as_deref(),
            report.minimal_note.as_deref(),
            format!("zoosim lin {} --model {}", file.display(), args.model),
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
    let text = std::str::from_utf8(text).map_err(|e| ParseError {
        line: 0,
        what: format!("not UTF-8 text (a zoosim history is JSON lines): {e}"),
    })?;
    let history = crate::history::json::parse(text).map_err(|e| ParseError {
        line: e.line,
        what: e.kind.to_string(),
    })?;
    let deadline = args.budget_ms.map(|ms| started + Duration::from_millis(ms));
    let stop = move || deadline.is_some_and(|d| Instant::now() >= d);
    let budget = Budget {
        max_steps: u64::MAX,
        max_memo_bytes: usize::try_from(args.memory_mib.saturating_mul(MIB)).unwrap_or(usize::MAX),
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
            format!("zoosim lin {} --model zookeeper", file.display()),
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
            report.unknown.push(("contract".to_owned(), why));
        }
        ContractVerdict::CheckerFault(why) => {
            report.summary = Summary::NotLinearizable;
            report.failing.push("contract-checker".to_owned());
            report.diagnosis.push(format!("contract-checker: {why}"));
        }
    }
    Ok(report)
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

/// At most `n` characters of `s`.
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
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
            clip(&step.before, 60),
            clip(&step.after, 60)
        ));
    }
    let end = d
        .prefix
        .last()
        .map_or_else(|| model.describe_state(&model.init()), |s| s.after.clone());
    lines.push(format!(
        "then nothing can be linearized before this returns, in state {}:",
        clip(&end, 60)
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
