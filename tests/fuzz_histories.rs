//! Hostile history files, generated: arbitrary bytes, and the shipped
//! histories (zoosim's JSON lines and their EDN export, Jepsen logs, EDN
//! one map per line, Knossos's EDN vectors) mutated, go through every
//! reader: the JSON-lines reader (`history::json`), `parse_edn`,
//! `parse_log`, pairing into a model's operations, a check under a small
//! budget, and the whole `zoosim lin` command (through the library's
//! `cli::main_from`). Nothing may panic; a refusal names a line of the
//! file.
//!
//! Bounded for CI: a fixed number of cases (`ZOOSIM_FUZZ_CASES` scales
//! them); the suite prints its time and counts and fails if no case ran.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use zoosim::check::lin::cas_register::CasRegister;
use zoosim::check::lin::jepsen::{history, parse_edn, parse_log, Event, ParseError};
use zoosim::check::lin::kv::Kv;
use zoosim::check::lin::{check, Budget, Options};
use zoosim::history::json;
use zoosim::scenario::registry::Registry;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/histories");

/// The shipped histories the mutations start from.
fn shipped() -> Vec<(String, Vec<u8>)> {
    let names = [
        "zoosim/small-lock-seed-1.jsonl",
        "zoosim/small-lock-seed-1.edn",
        "etcd/etcd_000.log",
        "etcd/etcd_100.log",
        "kv/c01-ok.txt",
        "kv/c01-bad.txt",
        "jepsen/cas-register-bug.edn",
        "jepsen/immediate-failure.edn",
        "jepsen/cas-failure.edn",
        "jepsen/rethink-fail-smaller.edn",
    ];
    names
        .iter()
        .map(|n| {
            let p = Path::new(DATA).join(n);
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (n.to_string(), bytes)
        })
        .collect()
}

fn cases(default: u32) -> u32 {
    std::env::var("ZOOSIM_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(default, |scale| default.saturating_mul(scale.max(1)))
}

/// One change to a file's bytes.
#[derive(Clone, Debug)]
enum Mutation {
    /// These bytes go in at this fraction of the length (thousandths).
    Insert(u16, Vec<u8>),
    /// This many bytes go from this fraction of the length.
    Delete(u16, u16),
    /// The file ends at this fraction of its length.
    Cut(u16),
    /// Line n (mod how many) is repeated.
    RepeatLine(usize),
    /// Line n (mod how many) goes.
    DropLine(usize),
    /// The n-th number becomes this.
    Number(usize, String),
    /// An EDN value goes in after the n-th space or comma: between two
    /// tokens, where the reader gets to it (bytes put inside a token
    /// mostly make that token bad, which stops the reader there).
    Value(usize, String),
}

/// Fragments that matter to the readers: EDN's syntax, Jepsen's keys and
/// types, JSON's, numbers at the edges, bytes that are not UTF-8.
fn fragment() -> impl Strategy<Value = Vec<u8>> {
    let pieces: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        "(",
        ")",
        "#{",
        "#_",
        "##NaN",
        "#inst \"x\"",
        "#jepsen.history.Op",
        "\"",
        "\\",
        "\\u",
        "\\newline",
        ";",
        ",",
        "\n",
        " ",
        ":process",
        ":nemesis",
        ":type",
        ":invoke",
        ":ok",
        ":fail",
        ":info",
        ":f",
        ":read",
        ":write",
        ":cas",
        ":value",
        ":key",
        ":error {:a [1 2]}",
        "nil",
        "-1",
        "1.5",
        "7N",
        "1/0",
        "99999999999999999999",
        "\t",
        "INFO  jepsen.util - ",
        "{\"kind\":",
        "\"meta\"",
        "\"invoke\"",
        "\"complete\"",
        "null",
        "\u{e9}",
    ];
    let mut all: Vec<Vec<u8>> = pieces.iter().map(|p| p.as_bytes().to_vec()).collect();
    all.push(vec![0xff, 0xfe]);
    all.push(vec![0xe2, 0x82]); // a cut UTF-8 sequence
    prop::collection::vec(prop::sample::select(all), 1..4).prop_map(|v| v.concat())
}

fn edge_number() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_owned()),
        Just("-1".to_owned()),
        Just("9223372036854775807".to_owned()),
        Just("9223372036854775808".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("1e308".to_owned()),
        Just("0x10".to_owned()),
        Just("007".to_owned()),
        Just("1N".to_owned()),
        Just("nil".to_owned()),
        (0u64..1000).prop_map(|n| n.to_string()),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (0u16..1001, fragment()).prop_map(|(at, b)| Mutation::Insert(at, b)),
        2 => (0u16..1001, 1u16..40).prop_map(|(at, n)| Mutation::Delete(at, n)),
        1 => (0u16..1001).prop_map(Mutation::Cut),
        1 => any::<usize>().prop_map(Mutation::RepeatLine),
        1 => any::<usize>().prop_map(Mutation::DropLine),
        3 => (any::<usize>(), edge_number()).prop_map(|(i, v)| Mutation::Number(i, v)),
        4 => (any::<usize>(), edn_value()).prop_map(|(i, v)| Mutation::Value(i, v)),
    ]
}

fn at(len: usize, per_mille: u16) -> usize {
    len * usize::from(per_mille) / 1000
}

fn apply(text: &[u8], m: &Mutation) -> Vec<u8> {
    let mut out = text.to_vec();
    match m {
        Mutation::Insert(p, b) => {
            let k = at(out.len(), *p);
            out.splice(k..k, b.iter().copied());
        }
        Mutation::Delete(p, n) => {
            let k = at(out.len(), *p);
            let end = (k + usize::from(*n)).min(out.len());
            out.drain(k..end);
        }
        Mutation::Cut(p) => out.truncate(at(out.len(), *p)),
        Mutation::RepeatLine(i) | Mutation::DropLine(i) => {
            let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
            let k = i % lines.len();
            if matches!(m, Mutation::RepeatLine(_)) {
                lines.insert(k, lines[k]);
            } else {
                lines.remove(k);
            }
            out = lines.join(&b'\n');
        }
        Mutation::Number(i, v) => {
            let spans: Vec<(usize, usize)> = {
                let mut s = Vec::new();
                let mut k = 0;
                while k < text.len() {
                    if text[k].is_ascii_digit() {
                        let end = (k..text.len())
                            .find(|&j| !text[j].is_ascii_digit())
                            .unwrap_or(text.len());
                        s.push((k, end));
                        k = end;
                    } else {
                        k += 1;
                    }
                }
                s
            };
            if !spans.is_empty() {
                let (a, b) = spans[i % spans.len()];
                out.splice(a..b, v.bytes());
            }
        }
        Mutation::Value(i, v) => {
            let gaps: Vec<usize> = (0..text.len())
                .filter(|&k| matches!(text[k], b' ' | b','))
                .collect();
            if !gaps.is_empty() {
                let k = gaps[i % gaps.len()] + 1;
                out.splice(k..k, format!("{v} ").into_bytes());
            }
        }
    }
    out
}

/// EDN text of any kind of value, nested: what a real history may hold in
/// a key no model uses, or a nemesis event.
fn edn_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("nil".to_owned()),
        Just("true".to_owned()),
        any::<i64>().prop_map(|i| i.to_string()),
        Just("99999999999999999999999N".to_owned()),
        Just("7N".to_owned()),
        any::<f64>().prop_map(|x| format!("{x:?}")),
        Just("##NaN".to_owned()),
        Just("##Inf".to_owned()),
        Just("##-Inf".to_owned()),
        Just("1.25M".to_owned()),
        Just("-3/4".to_owned()),
        Just("\\a".to_owned()),
        Just("\\newline".to_owned()),
        Just("\\u00e9".to_owned()),
        "[a-z]{0,6}".prop_map(|s| format!("\"{s}\\n\\\"\\u0041\"")),
        "[a-z]{1,6}".prop_map(|s| format!(":{s}")),
        "[a-z]{1,6}".prop_map(|s| format!(":jepsen.history/{s}")),
        "[a-z]{1,6}".prop_map(|s| format!("{s}/sym")),
        Just("#inst \"2024-01-01T00:00:00Z\"".to_owned()),
        Just("#uuid \"f81d4fae-7dec-11d0-a765-00a0c91e6bf6\"".to_owned()),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(" "))),
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("({})", v.join(", "))),
            prop::collection::vec((inner.clone(), inner.clone()), 0..3).prop_map(|v| {
                // Distinct keys, as EDN requires: each made unique.
                let pairs: Vec<String> = v
                    .iter()
                    .enumerate()
                    .map(|(k, (a, b))| format!("[{k} {a}] {b}"))
                    .collect();
                format!("{{{}}}", pairs.join(", "))
            }),
            prop::collection::vec(inner.clone(), 0..3).prop_map(|v| {
                let items: Vec<String> = v
                    .iter()
                    .enumerate()
                    .map(|(k, a)| format!("[{k} {a}]"))
                    .collect();
                format!("#{{{}}}", items.join(" "))
            }),
            inner.clone().prop_map(|v| format!("#my.ns/Tag {v}")),
            inner
                .clone()
                .prop_map(|v| format!("#_ {v} ; a comment\n{v}")),
        ]
    })
}

/// Panics anywhere in the process, caught or not: `zoosim lin` catches a
/// panic in a check and reports it as a checker fault (exit 1), which
/// from outside looks like a violation, so the hook is what sees it.
static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        previous(info)
    }));
}

/// The number of lines of `text` (a last line without `\n` counts).
fn line_count(text: &[u8]) -> usize {
    text.split(|&b| b == b'\n').count()
}

/// A Jepsen reader's refusal names a line of the file and says briefly
/// what is wrong.
fn check_refusal(text: &[u8], e: &ParseError) {
    assert!(
        (1..=line_count(text)).contains(&e.line),
        "line {} of {}: {e}",
        e.line,
        line_count(text)
    );
    assert!(!e.what.is_empty() && e.what.len() < 400, "{e}");
}

/// What the readers made of one text, for the counts.
#[derive(Default)]
struct Tally {
    cases: Cell<u32>,
    read: Cell<u32>,
    refused: Cell<u32>,
    checked: Cell<u32>,
}

impl Tally {
    fn add(c: &Cell<u32>) {
        c.set(c.get() + 1)
    }
}

/// Every reader over `text`.
fn read_all(text: &[u8], tally: &Tally, dir: &Path) {
    Tally::add(&tally.cases);
    // zoosim's JSON lines.
    match json::parse_reader(text) {
        Ok(_) => Tally::add(&tally.read),
        Err(e) => {
            Tally::add(&tally.refused);
            // Line 0 is the file as a whole (empty, no meta line).
            assert!(e.line <= line_count(text), "line {}: {}", e.line, e.kind);
        }
    }
    // Jepsen's formats, each into both models, and a budgeted check.
    for events in [parse_edn(text), parse_log(text)] {
        match events {
            Ok(events) => {
                Tally::add(&tally.read);
                pair_and_check(text, &events, tally);
            }
            Err(e) => {
                Tally::add(&tally.refused);
                check_refusal(text, &e);
            }
        }
    }
    // The whole command, on a file, with each model.
    let file = dir.join("fuzz.history");
    std::fs::write(&file, text).unwrap();
    for model in ["cas-register", "kv", "zookeeper"] {
        let args = [
            "zoosim",
            "lin",
            file.to_str().unwrap(),
            "--model",
            model,
            "--max-steps",
            "20000",
            "--no-minimal",
        ];
        let _ = zoosim::cli::main_from(Registry::new(), args);
    }
}

fn pair_and_check(text: &[u8], events: &[Event], tally: &Tally) {
    let options = Options {
        budget: Budget {
            max_steps: 20_000,
            ..Budget::UNLIMITED
        },
        first_failure: true,
    };
    match history(&CasRegister, events) {
        Ok(ops) => {
            let _ = check(&CasRegister, &ops, &options).summary();
            Tally::add(&tally.checked);
        }
        Err(e) => check_refusal(text, &e),
    }
    match history(&Kv::default(), events) {
        Ok(ops) => {
            let _ = check(&Kv::default(), &ops, &options).summary();
            Tally::add(&tally.checked);
        }
        Err(e) => check_refusal(text, &e),
    }
}

#[test]
fn hostile_history_files_are_refused_with_a_line_never_a_panic() {
    count_panics();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let files = shipped();
    // Each shipped file as it is first: read, and by the right reader.
    let plain = Tally::default();
    for (name, text) in &files {
        read_all(text, &plain, dir.path());
        let ok = if name.ends_with(".jsonl") {
            json::parse_reader(&text[..]).is_ok()
        } else if name.ends_with(".log") {
            parse_log(text).is_ok()
        } else {
            parse_edn(text).is_ok()
        };
        assert!(ok, "{name} is not read");
    }
    let bytes = Tally::default();
    TestRunner::new(Config {
        cases: cases(300),
        failure_persistence: None,
        ..Config::default()
    })
    .run(&prop::collection::vec(any::<u8>(), 0..600), |b| {
        read_all(&b, &bytes, dir.path());
        Ok(())
    })
    .unwrap();
    let mutated = Tally::default();
    TestRunner::new(Config {
        cases: cases(400),
        failure_persistence: None,
        ..Config::default()
    })
    .run(
        &(
            any::<prop::sample::Index>(),
            prop::collection::vec(mutation(), 1..4),
        ),
        |(file, ms)| {
            let (_, text) = &files[file.index(files.len())];
            let text = ms.iter().fold(text.clone(), |t, m| apply(&t, m));
            read_all(&text, &mutated, dir.path());
            Ok(())
        },
    )
    .unwrap();
    // Well-formed histories with any EDN in the keys no model uses and in
    // nemesis events: read whole, each client event where its map opens.
    let generated = Tally::default();
    TestRunner::new(Config {
        cases: cases(200),
        failure_persistence: None,
        ..Config::default()
    })
    .run(
        &prop::collection::vec((edn_value(), edn_value(), any::<bool>()), 1..12),
        |ops| {
            let mut text = String::from("[");
            let mut lines = Vec::new();
            for (k, (extra, nemesis, spread)) in ops.iter().enumerate() {
                let sep = if *spread { ",\n  " } else { ", " };
                text.push_str(&format!(
                    "{{:process :nemesis,{sep}:type :info, :f :start, :value {nemesis}}}\n "
                ));
                for (ty, value) in [("invoke", "nil"), ("ok", "3")] {
                    lines.push(text.matches('\n').count() + 1);
                    text.push_str(&format!(
                        "#jepsen.history.Op{{:process {k},{sep}:type :{ty}, :f :read, \
                         :value {value}, :error {extra}, :time {k}}}\n "
                    ));
                }
            }
            text.push(']');
            read_all(text.as_bytes(), &generated, dir.path());
            let events = parse_edn(text.as_bytes())
                .map_err(|e| TestCaseError::fail(format!("{e} in\n{text}")))?;
            let got: Vec<usize> = events.iter().map(|e| e.line).collect();
            prop_assert_eq!(got, lines, "{}", text);
            Ok(())
        },
    )
    .unwrap();
    let show = |t: &Tally| {
        format!(
            "{} cases: {} reads, {} refusals, {} checks",
            t.cases.get(),
            t.read.get(),
            t.refused.get(),
            t.checked.get()
        )
    };
    eprintln!(
        "fuzz_histories: shipped {}; arbitrary bytes {}; mutated {}; generated {}; {:.1} s",
        show(&plain),
        show(&bytes),
        show(&mutated),
        show(&generated),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a reader panicked");
    assert!(
        bytes.cases.get() > 0 && mutated.cases.get() > 0,
        "no case ran"
    );
    // The mutations exercise both sides: some texts still read, and are
    // checked, others are refused.
    assert!(
        mutated.checked.get() > 0 && mutated.refused.get() > 0,
        "{}",
        show(&mutated)
    );
}
