//! Hostile scenario files, generated: arbitrary bytes, and the shipped
//! scenario files mutated (numbers swapped for edge values, strings for
//! other names, lines dropped, repeated or cut short), go through the
//! parser, and those that parse run one seed under a budget. Nothing may
//! panic: the parser refuses with a place in the file, and a run ends
//! with a verdict (a run may fail its properties, a mutated file asks for
//! odd things; it may not panic, which the runner reports as a violation
//! of `invariants`).
//!
//! Bounded for CI: a fixed number of cases (`ZOOSIM_FUZZ_CASES` scales
//! them), each run capped at 60 simulated seconds per phase and a budget
//! of 100,000 events (above the busiest shipped seed's count).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::cell::Cell;
use std::time::Instant;
use zoosim::scenario::runner::run_one_recorded;
use zoosim::scenario::spec::{parse, Scenario};

fn shipped() -> Vec<(String, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios");
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
        .expect("scenarios/")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("readable");
            (p.display().to_string(), text)
        })
        .collect();
    files.sort();
    assert!(files.len() >= 20, "{} scenario files", files.len());
    files
}

fn cases(default: u32) -> u32 {
    std::env::var("ZOOSIM_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(default, |scale| default.saturating_mul(scale.max(1)))
}

/// One change to a file's text.
#[derive(Clone, Debug)]
enum Mutation {
    /// The n-th number (mod how many) becomes this.
    Number(usize, String),
    /// The n-th quoted string becomes this.
    Quoted(usize, String),
    /// Line n (mod how many) goes.
    DropLine(usize),
    /// Line n is repeated.
    RepeatLine(usize),
    /// This line goes in at n.
    InsertLine(usize, String),
    /// The text ends at this fraction of its length (in thousandths).
    Cut(u16),
}

fn edge_number() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_owned()),
        Just("1".to_owned()),
        Just("-1".to_owned()),
        Just("65".to_owned()),
        Just("3600000".to_owned()),
        Just("9223372036854775807".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("1e9".to_owned()),
        Just("0x7fffffff".to_owned()),
        Just("[]".to_owned()),
        Just("[1, 2, 3]".to_owned()),
        Just("\"12\"".to_owned()),
        (0u64..100_000).prop_map(|n| n.to_string()),
    ]
}

fn edge_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("lock".to_owned()),
        Just("two-phase-commit".to_owned()),
        Just("leader-crash".to_owned()),
        Just("server-kill".to_owned()),
        Just("client-isolated".to_owned()),
        Just("three-way-partition".to_owned()),
        Just("fail".to_owned()),
        Just("fault:ensemble-crash".to_owned()),
        Just("lock/herd".to_owned()),
        "[a-z:/-]{0,20}",
    ]
}

fn edge_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("[faults]".to_owned()),
        Just("[[faults.at]]".to_owned()),
        Just("at_ms = 0".to_owned()),
        Just("fault = \"server-pause\"".to_owned()),
        Just("[workload]".to_owned()),
        Just("clients = 64".to_owned()),
        Just("servers = [1, 7]".to_owned()),
        Just("swarm = false".to_owned()),
        Just("goals = [\"client-resets\"]".to_owned()),
        "[a-z_]{1,12} = [0-9]{1,8}",
        "\\PC{0,40}",
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), edge_number()).prop_map(|(i, v)| Mutation::Number(i, v)),
        2 => (any::<usize>(), edge_string()).prop_map(|(i, v)| Mutation::Quoted(i, v)),
        1 => any::<usize>().prop_map(Mutation::DropLine),
        1 => any::<usize>().prop_map(Mutation::RepeatLine),
        2 => (any::<usize>(), edge_line()).prop_map(|(i, l)| Mutation::InsertLine(i, l)),
        1 => (0u16..1000).prop_map(Mutation::Cut),
    ]
}

/// Byte ranges of the tokens `is_start`/`is_part` pick out.
fn spans(text: &str, quoted: bool) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if quoted && b[i] == b'"' {
            if let Some(len) = text[i + 1..].find('"') {
                out.push((i + 1, i + 1 + len));
                i += len + 2;
                continue;
            }
        }
        if !quoted && b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
            let end = (i..b.len())
                .find(|&j| !(b[j].is_ascii_alphanumeric() || b[j] == b'_'))
                .unwrap_or(b.len());
            out.push((i, end));
            i = end;
            continue;
        }
        i += 1;
    }
    out
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    match m {
        Mutation::Number(i, v) | Mutation::Quoted(i, v) => {
            let quoted = matches!(m, Mutation::Quoted(..));
            let spans = spans(text, quoted);
            if spans.is_empty() {
                return text.to_owned();
            }
            let (a, b) = spans[i % spans.len()];
            format!("{}{v}{}", &text[..a], &text[b..])
        }
        Mutation::DropLine(i) if !lines.is_empty() => {
            let n = lines.len();
            lines.remove(i % n);
            lines.join("\n")
        }
        Mutation::RepeatLine(i) if !lines.is_empty() => {
            let n = lines.len();
            let l = lines[i % n].clone();
            lines.insert(i % n, l);
            lines.join("\n")
        }
        Mutation::InsertLine(i, l) => {
            let n = lines.len() + 1;
            lines.insert(i % n, l.clone());
            lines.join("\n")
        }
        Mutation::Cut(per_mille) => {
            let mut at = text.len() * usize::from(*per_mille) / 1000;
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text[..at].to_owned()
        }
        _ => text.to_owned(),
    }
}

/// A refusal names the file and, where it is about a place, the place.
fn check_refusal(text: &str) -> Option<Scenario> {
    match parse("fuzz.toml", text) {
        Ok(s) => Some(s),
        Err(e) => {
            let shown = e.to_string();
            assert!(shown.starts_with("fuzz.toml"), "{shown}");
            assert!(!e.message.is_empty(), "an empty message");
            assert!(shown.len() < 4_000, "{} bytes shown", shown.len());
            if e.line > 0 {
                assert!(e.line <= text.lines().count().max(1), "{shown}");
            }
            None
        }
    }
}

#[test]
fn arbitrary_bytes_are_refused_with_a_place_never_a_panic() {
    let started = Instant::now();
    let mut runner = TestRunner::new(Config {
        cases: cases(4096),
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&prop::collection::vec(any::<u8>(), 0..1024), |bytes| {
            check_refusal(&String::from_utf8_lossy(&bytes));
            Ok(())
        })
        .unwrap();
    eprintln!("arbitrary bytes: {:.1} s", started.elapsed().as_secs_f64());
}

#[test]
fn mutated_scenario_files_parse_or_are_refused_with_a_place() {
    let started = Instant::now();
    let files = shipped();
    let parsed = Cell::new(0u32);
    let refused = Cell::new(0u32);
    let mut runner = TestRunner::new(Config {
        cases: cases(8192),
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(
            &(
                any::<prop::sample::Index>(),
                prop::collection::vec(mutation(), 1..4),
            ),
            |(file, ms)| {
                let (_, text) = &files[file.index(files.len())];
                let text = ms.iter().fold(text.clone(), |t, m| apply(&t, m));
                match check_refusal(&text) {
                    Some(_) => parsed.set(parsed.get() + 1),
                    None => refused.set(refused.get() + 1),
                }
                Ok(())
            },
        )
        .unwrap();
    eprintln!(
        "mutated files: {} parsed, {} refused in {:.1} s",
        parsed.get(),
        refused.get(),
        started.elapsed().as_secs_f64()
    );
    let (parsed, refused) = (parsed.get(), refused.get());
    // Both sides were exercised, or the mutations are not testing much.
    assert!(
        parsed > 500 && refused > 500,
        "{parsed} parsed, {refused} refused"
    );
}

/// `s` with each phase at most 60 simulated seconds (faults placed later
/// dropped): a run of a mutated file is bounded in time as the budget
/// bounds it in events.
fn capped(mut s: Scenario) -> Scenario {
    const CAP_MS: u64 = 60_000;
    s.faults.phase_ms = s.faults.phase_ms.min(CAP_MS);
    let phase = s.faults.phase_ms;
    s.faults.at.retain(|f| f.at_ms < phase);
    s.quiet_ms = s.quiet_ms.min(CAP_MS);
    s.liveness_bound_ms = s.liveness_bound_ms.map(|b| b.min(s.quiet_ms));
    s
}

#[test]
fn mutated_scenario_files_that_parse_run_a_seed_without_a_panic() {
    // Read once per process, before any seed runs.
    std::env::set_var("ZOOSIM_SEED_BUDGET_EVENTS", "100000");
    let started = Instant::now();
    let files = shipped();
    let ran = Cell::new(0u32);
    let failed = Cell::new(0u32);
    let mut runner = TestRunner::new(Config {
        // About one mutated file in seven parses; the first 64 that do run.
        cases: cases(1000),
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(
            &(
                any::<prop::sample::Index>(),
                prop::collection::vec(mutation(), 1..3),
            ),
            |(file, ms)| {
                let (_, text) = &files[file.index(files.len())];
                let text = ms.iter().fold(text.clone(), |t, m| apply(&t, m));
                let Ok(s) = parse("fuzz.toml", &text) else {
                    return Ok(());
                };
                if ran.get() >= cases(64) {
                    return Ok(());
                }
                let s = capped(s);
                let run = run_one_recorded(&s, s.seed_start);
                ran.set(ran.get() + 1);
                match &run.result {
                    Ok(out) => failed.set(failed.get() + u32::from(out.failed())),
                    Err(panic) => {
                        return Err(TestCaseError::fail(format!(
                            "seed {} of\n{text}\npanicked: {}",
                            s.seed_start, panic.detail
                        )))
                    }
                }
                Ok(())
            },
        )
        .unwrap();
    eprintln!(
        "mutated files run: {} seeds ({} failed a property) in {:.1} s",
        ran.get(),
        failed.get(),
        started.elapsed().as_secs_f64()
    );
    let ran = ran.get();
    assert!(ran >= 50, "only {ran} of the mutated files parsed");
}
