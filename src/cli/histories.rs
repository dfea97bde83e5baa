//! `--history DIR` of `zoosim run` and `zoosim replay`, and `zoosim
//! history`: the files and the conversions (docs/HISTORY.md).

use std::io::BufReader;
use std::path::{Path, PathBuf};

use crate::history::{edn, json, Event, History};
use crate::scenario::output;

/// Whether `a` and `b` name one file (through links or `..` too).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Refuses a `--history` directory that is missing, not a directory or not
/// writable, before any seed runs.
#[cfg_attr(not(madsim), allow(dead_code))]
pub(super) fn check_dir(dir: &Path) -> Result<(), String> {
    check_dir_for("--history", dir)
}

/// Refuses the directory `flag` names if it is missing, not a directory or
/// not writable (the errors name the flag).
pub(super) fn check_dir_for(flag: &str, dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        return Err(format!(
            "{flag} {}: no such directory (create it first)",
            dir.display()
        ));
    }
    if !dir.is_dir() {
        return Err(format!("{flag} {}: not a directory", dir.display()));
    }
    // Writable: a probe file, created and removed.
    let probe = dir.join(format!(".zoosim-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| format!("{flag} {}: cannot write there: {e}", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Where seed `seed` of scenario `name` goes.
#[cfg_attr(not(madsim), allow(dead_code))]
pub(super) fn file_for(dir: &Path, name: &str, seed: u64) -> PathBuf {
    dir.join(format!("{name}-seed-{seed}.jsonl"))
}

/// Writes `history` to `path`: the bytes written.
#[cfg_attr(not(madsim), allow(dead_code))]
pub(super) fn write(path: &Path, history: &History) -> Result<u64, String> {
    let text = json::to_string(history);
    let bytes = text.len() as u64;
    output::write(path, text).map_err(|e| format!("the history: {e}"))?;
    Ok(bytes)
}

/// Reads a history file; errors name the file and line.
pub(super) fn read(path: &Path) -> Result<History, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    json::parse_reader(BufReader::new(f)).map_err(|e| match e.line {
        0 => format!("{}: {}", path.display(), e.kind),
        n => format!("{}:{n}: {}", path.display(), e.kind),
    })
}

/// `zoosim history FILE [--edn | --op ID] [-o OUT]`: a summary of the
/// history, its Jepsen EDN export, or one operation's records whole (to
/// OUT, or standard output).
pub(super) fn command(
    file: &Path,
    to_edn: bool,
    op: Option<u64>,
    out: Option<&Path>,
) -> Result<(), String> {
    let h = read(file)?;
    let text = match op {
        Some(id) => op_records(&h, id).ok_or_else(|| {
            format!(
                "{}: no operation {id} (the history has {} operations)",
                file.display(),
                h.ops().len()
            )
        })?,
        None if to_edn => edn::to_edn(&h),
        None => summary(&h),
    };
    match out {
        Some(o) => {
            if same_file(file, o) {
                return Err(format!(
                    "{}: is the history being read; -o must name another file",
                    o.display()
                ));
            }
            output::write(o, text).map_err(|e| e.to_string())
        }
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

/// Operation `id`'s records, whole, as JSON lines (the file's format): its
/// invocation, and its completion if it has one.
fn op_records(h: &History, id: u64) -> Option<String> {
    let mut out = String::new();
    for r in &h.records {
        let this = match &r.event {
            Event::Invoke(i) => i.id.0 == id,
            Event::Complete(c) => c.id.0 == id,
            _ => false,
        };
        if this {
            out += &json::record_line(r);
            out.push('\n');
        }
    }
    (!out.is_empty()).then_some(out)
}

/// What `zoosim history FILE` prints: the run, and how many records of
/// each kind, operations by outcome.
fn summary(h: &History) -> String {
    let m = &h.meta;
    // Names from the file, for a terminal: cut short (a 50 MB name is
    // not printed whole), control characters shown as escapes.
    let name =
        |s: &str| crate::report::terminal(&crate::quote::cut(s, crate::quote::WORD)).into_owned();
    let mut s = format!(
        "{} seed {} ({} servers, session timeout {} ms, zoosim {})\n",
        name(&m.scenario),
        m.seed,
        m.servers,
        m.session_timeout_ms,
        name(&m.zoosim)
    );
    let counts = h.counts();
    let kinds = ["invoke", "complete", "watch", "session", "fault", "role"];
    s += &kinds
        .iter()
        .map(|k| format!("{k} {}", counts.get(k).copied().unwrap_or(0)))
        .collect::<Vec<_>>()
        .join(", ");
    s.push('\n');
    let ops = h.ops();
    let open = ops.iter().filter(|p| p.complete.is_none()).count();
    let failed = ops
        .iter()
        .filter(|p| p.complete.is_some_and(|(_, c)| c.outcome.error().is_some()))
        .count();
    s += &format!(
        "{} operations: {} ok, {failed} failed, {open} never completed\n",
        ops.len(),
        ops.len() - failed - open
    );
    let last = h.records.last().map_or(0, |r| r.at_ns);
    let faults = h
        .records
        .iter()
        .filter(|r| matches!(&r.event, Event::Fault(f) if !f.skipped))
        .count();
    s += &format!(
        "{faults} faults injected; last record at {:.3} s\n",
        last as f64 / 1e9
    );
    s
}
