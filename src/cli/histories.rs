//! `--history DIR` of `zoosim run` and `zoosim replay`, and `zoosim
//! history`: the files and the conversions (docs/HISTORY.md).

use std::io::BufReader;
use std::path::{Path, PathBuf};

use crate::history::{edn, json, Event, History};

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
    std::fs::write(&probe, b"")
        .map_err(|e| format!("{flag} {}: cannot write there: {e}", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Where seed `seed` of scenario `name` goes.
#[cfg_attr(not(madsim), allow(dead_code))]
pub(super) fn file_for(dir: &Path, name: &str, seed: u64) -> PathBuf {
    dir.join(format!("{name}-seed-{seed}.jsonl"))
}

/// Writes `history` to `path`.
#[cfg_attr(not(madsim), allow(dead_code))]
pub(super) fn write(path: &Path, history: &History) -> Result<(), String> {
    std::fs::write(path, json::to_string(history))
        .map_err(|e| format!("{}: cannot write the history: {e}", path.display()))
}

/// Reads a history file; errors name the file and line.
pub(super) fn read(path: &Path) -> Result<History, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    json::parse_reader(BufReader::new(f)).map_err(|e| match e.line {
        0 => format!("{}: {}", path.display(), e.kind),
        n => format!("{}:{n}: {}", path.display(), e.kind),
    })
}

/// `zoosim history FILE [--edn] [-o OUT]`: a summary of the history, or
/// its Jepsen EDN export (to OUT, or standard output).
pub(super) fn command(file: &Path, to_edn: bool, out: Option<&Path>) -> Result<(), String> {
    let h = read(file)?;
    let text = if to_edn { edn::to_edn(&h) } else { summary(&h) };
    match out {
        Some(o) => {
            std::fs::write(o, text).map_err(|e| format!("{}: cannot write: {e}", o.display()))
        }
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

/// What `zoosim history FILE` prints: the run, and how many records of
/// each kind, operations by outcome.
fn summary(h: &History) -> String {
    let m = &h.meta;
    let mut s = format!(
        "{} seed {} ({} servers, session timeout {} ms, zoosim {})\n",
        m.scenario, m.seed, m.servers, m.session_timeout_ms, m.zoosim
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

/// What a recorded seed did: its outcome (or the panic's message, as the
/// runner reports it), and where its history went (or why not).
#[cfg(madsim)]
pub(super) type Recorded = (
    Result<crate::scenario::run::SeedOutcome, String>,
    Result<PathBuf, String>,
);

/// Runs `seed` of `s`, recording: its outcome (a panic is a violation of
/// `invariants`, as the runner reports it) and its history (up to the
/// panic, if one).
#[cfg(madsim)]
pub(super) fn run_recorded(
    s: &crate::scenario::spec::Scenario,
    seed: u64,
) -> (
    Result<crate::scenario::run::SeedOutcome, crate::scenario::verdict::Violation>,
    History,
) {
    use crate::ensemble::sim::Recorder;
    use crate::scenario::run::{history_meta, run_seed_recording};
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let recorder = Recorder::new();
    let run =
        catch_unwind(AssertUnwindSafe(|| run_seed_recording(s, seed, &recorder))).map_err(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            crate::scenario::verdict::Violation::new(
                crate::scenario::verdict::run_properties::INVARIANTS,
                format!("panicked: {msg}"),
            )
        });
    let servers = match &run {
        Ok(outcome) => outcome.drawn.servers,
        // The servers that announced a role: all of them, from the start.
        Err(_) => {
            let mut seen = std::collections::BTreeSet::new();
            for r in recorder.records() {
                if let Event::Role(role) = r.event {
                    seen.insert(role.server);
                }
            }
            seen.len() as u32
        }
    };
    let history = recorder.history(history_meta(s, seed, servers));
    (run, history)
}

/// Runs `seed` of `s`, recording, and writes its history into `dir`; a
/// seed that panics gets the history up to the panic.
#[cfg(madsim)]
pub(super) fn record_seed(dir: &Path, s: &crate::scenario::spec::Scenario, seed: u64) -> Recorded {
    let (run, history) = run_recorded(s, seed);
    let path = file_for(dir, &s.name, seed);
    let written = write(&path, &history).map(|()| path);
    (run.map_err(|v| v.to_string()), written)
}

/// Records every seed of `work` into `dir` on `jobs` threads; prints where
/// each went, in order. False if any could not be written (each said).
#[cfg(madsim)]
pub(super) fn record_seeds(
    dir: &Path,
    work: &[(&crate::scenario::spec::Scenario, u64)],
    jobs: usize,
) -> bool {
    let done = super::in_parallel(work, jobs, |&(s, seed)| record_seed(dir, s, seed).1);
    let mut ok = true;
    for r in done {
        match r {
            Ok(p) => println!("  history: {}", p.display()),
            Err(e) => {
                eprintln!("error: {e}");
                ok = false;
            }
        }
    }
    ok
}
