//! Recorded histories of real runs: recording changes no run, a history
//! has every kind of record its scenario guarantees, it reads back as it
//! was written, its EDN export is a well-formed Jepsen history; and the
//! `--history` / `zoosim history` commands.

#[cfg(not(madsim))]
compile_error!(
    "tests/history.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use zoosim::ensemble::sim::sim_recorder;
use zoosim::history::{edn, json, Event, HistOp, History, Outcome, Role};
use zoosim::scenario::files::{load, scenario_files};
use zoosim::scenario::run::{
    history_meta, run_seed_recorded, run_seed_recording, run_seed_unrecorded,
};
use zoosim::scenario::spec::Scenario;

/// Seeds of each scenario compared with and without recording.
const SEEDS: u64 = 3;

fn scenarios() -> Vec<Scenario> {
    scenario_files(&[PathBuf::from("scenarios")])
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .map(|f| load(f).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

#[test]
fn recording_changes_no_run_of_any_scenario() {
    let all = scenarios();
    assert!(all.len() >= 20, "scenario files went missing");
    let work: Vec<(&Scenario, u64)> = all
        .iter()
        .flat_map(|s| (0..SEEDS).map(move |i| (s, s.seed_start + i)))
        .collect();
    let next = AtomicUsize::new(0);
    let differ: Mutex<Vec<String>> = Mutex::default();
    let digests: Mutex<Vec<u64>> = Mutex::default();
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(s, seed)) = work.get(i) else {
                    break;
                };
                // Judged by the oracle alone on both sides: the contract
                // check needs the history, which only the recorded run has.
                let plain = run_seed_unrecorded(s, seed);
                let recorder = sim_recorder();
                let recorded = run_seed_recording(s, seed, &recorder);
                let history = recorder.history(history_meta(s, seed, recorded.drawn.servers));
                if (plain.digest, plain.failed()) != (recorded.digest, recorded.failed()) {
                    differ.lock().unwrap().push(format!(
                        "{} seed {seed}: {:016x} without recording, {:016x} with",
                        s.file, plain.digest, recorded.digest
                    ));
                }
                // What was recorded reads back as it was.
                let text = json::to_string(&history);
                assert_eq!(
                    json::parse(&text).as_ref(),
                    Ok(&history),
                    "{} seed {seed}",
                    s.file
                );
                digests.lock().unwrap().push(plain.digest);
            });
        }
    });
    let differ = differ.into_inner().unwrap();
    assert!(
        differ.is_empty(),
        "recording changed runs:\n{}",
        differ.join("\n")
    );
    // The comparison can fail: different runs have different digests.
    let mut d = digests.into_inner().unwrap();
    d.sort();
    d.dedup();
    assert!(d.len() > work.len() / 2, "digests do not tell runs apart");
}

/// The first of explicit-leader-crash's seeds where both of its placed
/// faults applied (a forced expiry is skipped when no session is there to
/// aim at).
fn leader_crash_history() -> History {
    let s = load(&PathBuf::from("scenarios/explicit-leader-crash.toml")).unwrap();
    for seed in s.seed_start..s.seed_start + 10 {
        let (outcome, h) = run_seed_recorded(&s, seed);
        assert!(!outcome.failed(), "{:?}", outcome.failure());
        if outcome.faults.iter().all(|f| !f.skipped) {
            return h;
        }
    }
    panic!("no seed of ten applied both faults");
}

#[test]
fn a_history_has_every_kind_of_record_its_scenario_guarantees() {
    let h = leader_crash_history();
    assert_eq!(h.meta.scenario, "explicit-leader-crash");
    assert_eq!(
        h.meta.file.as_deref(),
        Some("scenarios/explicit-leader-crash.toml")
    );
    let n = h.counts();
    let count = |k: &str| n.get(k).copied().unwrap_or(0);
    // Ten clients, each opens a session and locks at least once.
    assert!(count("invoke") >= 20, "{n:?}");
    assert!(count("complete") >= 20, "{n:?}");
    assert!(count("session") >= 10, "{n:?}");
    // Waiters watch their predecessors: the holders' releases fire them.
    assert!(count("watch") >= 1, "{n:?}");
    // The two placed faults, by their scenario names.
    let faults: Vec<&str> = h
        .records
        .iter()
        .filter_map(|r| match &r.event {
            Event::Fault(f) if !f.skipped => Some(f.fault.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(faults, ["leader-crash", "forced-expiry"], "{n:?}");
    // The crash: a new leader of a later epoch, and the crashed server's
    // second process.
    let roles: Vec<_> = h
        .records
        .iter()
        .filter_map(|r| match &r.event {
            Event::Role(role) => Some(role),
            _ => None,
        })
        .collect();
    assert!(
        roles
            .iter()
            .take(h.meta.servers as usize)
            .all(|r| r.epoch == 1),
        "{roles:?}"
    );
    assert!(
        roles.iter().any(|r| r.role == Role::Leading && r.epoch > 1),
        "{roles:?}"
    );
    assert!(roles.iter().any(|r| r.process == 2), "{roles:?}");
    // Clients that finish close their sessions.
    let closes = h
        .ops()
        .into_iter()
        .filter(|p| p.invoke.op == HistOp::CloseSession)
        .filter(|p| matches!(p.complete, Some((_, c)) if c.outcome == Outcome::Ok(None)))
        .count();
    assert!(closes >= 1, "{n:?}");
    // The forced expiry ends a session: an Expired, and requests failing
    // with SessionExpired or ConnectionLoss with no server.
    assert!(h.records.iter().any(|r| matches!(
        &r.event,
        Event::Session(s) if s.state == zoosim::proto::SessionEvent::Expired
    )));
    // Every reply from a server carries its zxid; local endings none.
    for p in h.ops() {
        if let Some((_, c)) = p.complete {
            if p.invoke.op == HistOp::CloseSession {
                assert_eq!(c.zxid, None);
            } else {
                assert_eq!(c.server.is_some(), c.zxid.is_some(), "{c:?}");
            }
        }
    }
    // Each handle's requests complete in issue order (xid order).
    let mut last: BTreeMap<u32, i64> = BTreeMap::new();
    let xid_of: BTreeMap<_, _> = h
        .ops()
        .iter()
        .map(|p| (p.invoke.id, p.invoke.xid))
        .collect();
    for r in &h.records {
        if let Event::Complete(c) = &r.event {
            if let Some(xid) = xid_of[&c.id] {
                let prev = last.insert(c.actor.handle, xid).unwrap_or(0);
                assert!(
                    xid > prev,
                    "handle {} completes {xid} after {prev}",
                    c.actor.handle
                );
            }
        }
    }
}

/// The EDN text's op maps, as (type, process, index) with the brackets
/// and strings checked: the text is one balanced vector.
fn edn_ops(text: &str) -> Vec<(String, u64, u64)> {
    let mut depth: i64 = 0;
    let mut in_str = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '[' | '{' => depth += 1,
            ']' | '}' => {
                depth -= 1;
                assert!(depth >= 0, "unbalanced EDN");
            }
            _ => {}
        }
    }
    assert!(depth == 0 && !in_str, "unbalanced EDN");
    assert!(text.starts_with('[') && text.trim_end().ends_with(']'));
    let field = |line: &str, key: &str| -> String {
        let at = line
            .find(&format!(":{key} "))
            .unwrap_or_else(|| panic!("no :{key} in {line}"));
        line[at + key.len() + 2..]
            .split([',', '}'])
            .next()
            .unwrap()
            .trim()
            .to_owned()
    };
    text.lines()
        .map(|l| {
            (
                field(l, "type"),
                field(l, "process").parse().unwrap(),
                field(l, "index").parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn the_edn_export_of_a_run_is_a_well_formed_jepsen_history() {
    let h = leader_crash_history();
    let ops = edn_ops(&edn::to_edn(&h));
    assert_eq!(ops.len(), 2 * h.ops().len());
    // Per process: invoke, completion, invoke, ...; never an invoke after
    // an :info; indexes in order.
    let mut open: BTreeMap<u64, bool> = BTreeMap::new();
    let mut retired = std::collections::BTreeSet::new();
    for (i, (ty, p, index)) in ops.iter().enumerate() {
        assert_eq!(*index, i as u64);
        assert!(!retired.contains(p), "process {p} used after its :info");
        let was_open = open.insert(*p, ty == ":invoke").unwrap_or(false);
        match ty.as_str() {
            ":invoke" => assert!(!was_open, "process {p} invokes twice at {i}"),
            ":ok" | ":fail" | ":info" => assert!(was_open, "process {p} completes at {i} unopened"),
            other => panic!("type {other}"),
        }
        if ty == ":info" {
            retired.insert(*p);
        }
    }
    assert!(open.values().all(|o| !o), "ops left open");
    // The checker of this test catches a broken export.
    let broken = edn::to_edn(&h).replacen(":type :ok", ":type :invoke", 1);
    let caught = std::panic::catch_unwind(|| {
        let ops = edn_ops(&broken);
        let mut open: BTreeMap<u64, bool> = BTreeMap::new();
        for (ty, p, _) in ops {
            let was = open.insert(p, ty == ":invoke").unwrap_or(false);
            assert!(!(ty == ":invoke" && was), "process {p} invokes twice");
        }
    });
    assert!(caught.is_err(), "a doubled invoke went unnoticed");
}

// ---------------------------------------------------------------------------
// The commands.

fn zoosim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_zoosim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("RUST_LOG")
        .output()
        .expect("zoosim runs");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A directory of its own, removed when the test ends (pass or panic).
fn scratch_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("zoosim-history-{name}-"))
        .tempdir()
        .unwrap()
}

#[test]
fn a_missing_or_unusable_history_dir_is_refused_before_any_seed_runs() {
    let (code, out, err) = zoosim(&["run", "scenarios/lock.toml", "--history", "/no/such/dir"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("--history /no/such/dir: no such directory"),
        "{err}"
    );
    assert!(!out.contains("seeds"), "seeds ran: {out}");
    let dir = scratch_dir("file");
    let file = dir.path().join("plain");
    std::fs::write(&file, "").unwrap();
    let f = file.display().to_string();
    let (code, _, err) = zoosim(&[
        "replay",
        "scenarios/lock.toml",
        "--seed",
        "1",
        "--history",
        &f,
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("not a directory"), "{err}");
    let (code, _, err) = zoosim(&["run", "scenarios/lock.toml", "--history-all"]);
    assert_eq!(code, 2);
    assert!(err.contains("--history"), "{err}");
}

#[test]
fn replay_writes_its_history_which_reads_back_and_exports_to_edn() {
    let dir = scratch_dir("replay");
    let d = dir.path().display().to_string();
    let (code, out, err) = zoosim(&[
        "replay",
        "scenarios/queue.toml",
        "--seed",
        "3",
        "--history",
        &d,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let file = dir.path().join("queue-seed-3.jsonl");
    assert!(
        out.contains(&format!("history: {}", file.display())),
        "{out}"
    );
    let f = file.display().to_string();
    let (code, summary, err) = zoosim(&["history", &f]);
    assert_eq!(code, 0, "{err}");
    assert!(summary.starts_with("queue seed 3 ("), "{summary}");
    assert!(summary.contains("operations:"), "{summary}");
    let edn_file = dir.path().join("queue.edn").display().to_string();
    let (code, _, err) = zoosim(&["history", &f, "--edn", "-o", &edn_file]);
    assert_eq!(code, 0, "{err}");
    let edn = std::fs::read_to_string(&edn_file).unwrap();
    assert!(!edn_ops(&edn).is_empty());
    // The same digest as without --history.
    let (_, plain, _) = zoosim(&["replay", "scenarios/queue.toml", "--seed", "3"]);
    let digest = |o: &str| o.lines().find(|l| l.contains("digest")).map(str::to_owned);
    assert_eq!(digest(&out), digest(&plain));
    // A truncated file: its line, and no panic.
    let text = std::fs::read_to_string(&file).unwrap();
    let cut = dir.path().join("cut.jsonl");
    std::fs::write(&cut, &text[..text.find('\n').unwrap() + 20]).unwrap();
    let (code, _, err) = zoosim(&["history", &cut.display().to_string()]);
    assert_eq!(code, 2);
    assert!(err.contains("cut.jsonl:2: not a JSON object"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn run_writes_the_histories_of_failing_seeds_only_unless_asked_for_all() {
    let dir = scratch_dir("run");
    let d = dir.path().display().to_string();
    // An expected failure: its first failing seed gets a history.
    let (code, out, err) = zoosim(&[
        "run",
        "scenarios/bug-lock-herd.toml",
        "--seeds",
        "20",
        "--history",
        &d,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let written: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(!written.is_empty(), "{out}");
    assert!(out.contains("history: "), "{out}");
    let dir = scratch_dir("all");
    let d = dir.path().display().to_string();
    let (code, out, err) = zoosim(&[
        "run",
        "scenarios/queue.toml",
        "--seeds",
        "2",
        // Seeds whose producers' guid search finds a node (a coverage
        // goal, reached in about one seed in five).
        "--seed-start",
        "2661154829",
        "--history",
        &d,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "passing seeds written"
    );
    let (code, out, err) = zoosim(&[
        "run",
        "scenarios/queue.toml",
        "--seeds",
        "2",
        // Seeds whose producers' guid search finds a node (a coverage
        // goal, reached in about one seed in five).
        "--seed-start",
        "2661154829",
        "--history",
        &d,
        "--history-all",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2, "{out}");
}
