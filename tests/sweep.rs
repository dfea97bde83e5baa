//! Sweeps across machines as a user runs them: `zoosim run --shard i/N
//! --summary FILE` on each machine, then `zoosim merge` over the files.
//! Small seed counts keep each test to a few seconds.

use std::process::Command;

use serde_json::Value;

fn zoosim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_zoosim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("zoosim runs");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fresh directory for one test's files, removed when the test ends
/// (pass or panic).
fn scratch_dir(test: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("zoosim-sweep-{test}-"))
        .tempdir()
        .unwrap()
}

fn path(dir: &std::path::Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

fn json(file: &str) -> Value {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Runs `args` as shard i of `n` for each i, each writing
/// `<dir>/<stem>-i.json`; returns the files and each run's exit code.
fn shards(dir: &std::path::Path, stem: &str, n: u64, args: &[&str]) -> Vec<(String, i32)> {
    (0..n)
        .map(|i| {
            let file = path(dir, &format!("{stem}-{i}.json"));
            let shard = format!("{i}/{n}");
            let mut all = vec!["run"];
            all.extend_from_slice(args);
            all.extend_from_slice(&["--shard", &shard, "--summary", &file]);
            let (code, out, err) = zoosim(&all);
            assert!(code == 0 || code == 1, "{out}{err}");
            (file, code)
        })
        .collect()
}

fn merge(files: &[&str], extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["merge"];
    args.extend_from_slice(files);
    args.extend_from_slice(extra);
    zoosim(&args)
}

/// A scenario's record in a summary.
fn scenario<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {summary:#}"))
}

#[test]
fn three_shards_merged_give_the_unsharded_runs_verdict_seeds_and_counters() {
    let scratch = scratch_dir("equal");
    let dir = scratch.path();
    // A passing scenario, and one failing its coverage in 6 seeds (the
    // two-phase commit whose sites vote at once: an abort for a failed
    // site is then rare): both verdicts must come out of the merge as out
    // of the whole run. Seeds 1000..1005: the queue reaches all its goals
    // there (its own first seeds no longer reach guid-found since the
    // merge of the ordered stream with the quiet phase's move), the
    // two-phase commit misses aborts-for-failed-sites.
    let tpc = path(dir, "two-phase-commit.toml");
    let text = std::fs::read_to_string("scenarios/two-phase-commit.toml").unwrap();
    std::fs::write(&tpc, format!("{text}\n[workload]\nvote_ms_max = 0\n")).unwrap();
    let args = [
        "scenarios/queue.toml",
        tpc.as_str(),
        "--seed-start",
        "1000",
        "--seeds",
        "6",
        "--jobs",
        "2",
    ];
    let whole = path(dir, "whole.json");
    let mut run = vec!["run"];
    run.extend_from_slice(&args);
    run.extend_from_slice(&["--summary", &whole]);
    let (run_code, run_out, _) = zoosim(&run);
    assert_eq!(run_code, 1, "two-phase-commit misses a goal:\n{run_out}");
    assert!(run_out.contains(&format!("summary written to {whole}")));

    let parts = shards(dir, "part", 3, &args);
    let files: Vec<&str> = parts.iter().map(|(f, _)| f.as_str()).collect();
    let merged = path(dir, "merged.json");
    let (code, out, err) = merge(&files, &["--summary", &merged]);
    assert_eq!(code, run_code, "{out}{err}");
    assert!(out.contains("1 not as expected"), "{out}");

    let (whole, merged_json) = (json(&whole), json(&merged));
    assert_eq!(merged_json["passed"], whole["passed"]);
    assert_eq!(merged_json["merged_from"].as_array().unwrap().len(), 3);
    for name in ["queue", "two-phase-commit"] {
        let (w, m) = (scenario(&whole, name), scenario(&merged_json, name));
        for field in [
            "file",
            "sha256",
            "seeds_run",
            "failures",
            "sim_ms",
            "ops",
            "counters",
            "coverage",
            "missed_goals",
            "passed",
            "verdict",
        ] {
            assert_eq!(m[field], w[field], "{name}: {field}");
        }
        assert_eq!(m["seeds"]["shards"], serde_json::json!([0, 1, 2]));
        // Each shard alone ran a part of the seeds.
        let runs: Vec<u64> = files
            .iter()
            .map(|f| scenario(&json(f), name)["seeds_run"].as_u64().unwrap())
            .collect();
        assert_eq!(runs, [2, 2, 2], "{name}");
    }
    // The table is run's: the same verdict lines.
    let verdicts = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.starts_with("queue") || l.starts_with("two-phase-commit"))
            .map(|l| l.split("  ").last().unwrap().to_owned())
            .collect()
    };
    assert_eq!(verdicts(&out), verdicts(&run_out));
    assert!(out.contains("coverage goals at zero: aborts-for-failed-sites"));

    // A merged summary merges again, to the same verdict.
    let (again, out2, err2) = merge(&[&merged], &[]);
    assert_eq!(again, code, "{out2}{err2}");
    assert_eq!(verdicts(&out2), verdicts(&out));
}

#[test]
fn coverage_goals_are_judged_over_the_union_of_the_shards() {
    let scratch = scratch_dir("coverage");
    let dir = scratch.path();
    // The queue's goal guid-found is rare (about one seed in five): of
    // seeds 1004..1009 only one seed (1008) reaches it, and of 1032..1037
    // none.
    let reached = |files: &[(String, i32)]| -> Vec<bool> {
        files
            .iter()
            .map(|(f, _)| {
                let s = json(f);
                let goals = scenario(&s, "queue")["coverage"]
                    .as_array()
                    .unwrap()
                    .clone();
                goals
                    .iter()
                    .any(|g| g["goal"] == "guid-found" && g["reached"] == true)
            })
            .collect()
    };
    let one = shards(
        dir,
        "one",
        3,
        &[
            "scenarios/queue.toml",
            "--seed-start",
            "1004",
            "--seeds",
            "6",
        ],
    );
    assert_eq!(
        reached(&one).iter().filter(|r| **r).count(),
        1,
        "the seeds chosen no longer reach guid-found in exactly one shard: \
         pick others (the simulation changed)"
    );
    // A shard judges no coverage: each passes on its own.
    assert!(one.iter().all(|(_, code)| *code == 0));
    let files: Vec<&str> = one.iter().map(|(f, _)| f.as_str()).collect();
    let (code, out, err) = merge(&files, &[]);
    assert_eq!(code, 0, "reached in one shard is reached:\n{out}{err}");
    assert!(out.contains("all as expected"), "{out}");

    let none = shards(
        dir,
        "none",
        3,
        &[
            "scenarios/queue.toml",
            "--seed-start",
            "1032",
            "--seeds",
            "6",
        ],
    );
    assert_eq!(reached(&none), [false, false, false]);
    assert!(none.iter().all(|(_, code)| *code == 0));
    let files: Vec<&str> = none.iter().map(|(f, _)| f.as_str()).collect();
    let merged = path(dir, "none-merged.json");
    let (code, out, err) = merge(&files, &["--summary", &merged]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("FAILED: coverage goals at zero: guid-found"),
        "{out}"
    );
    // The failing merge's summary is written all the same.
    assert_eq!(
        scenario(&json(&merged), "queue")["missed_goals"],
        serde_json::json!(["guid-found"])
    );
}

#[test]
fn an_expected_failure_caught_in_one_shard_only_is_caught_after_the_merge() {
    let scratch = scratch_dir("caught");
    let dir = scratch.path();
    // Of seeds 281280521..281280526 (the scenario's own, from its 10th)
    // the election bug shows at 281280523 alone: index 2, shard 2 of 3.
    let parts = shards(
        dir,
        "part",
        3,
        &[
            "scenarios/bug-election-keep-leadership-after-expiry.toml",
            "--seed-start",
            "281280521",
            "--seeds",
            "6",
        ],
    );
    let failures: Vec<usize> = parts
        .iter()
        .map(|(f, _)| {
            let s = json(f);
            let r = &s["scenarios"][0];
            r["failures"].as_array().unwrap().len()
        })
        .collect();
    assert_eq!(
        failures,
        [0, 0, 1],
        "the seeds chosen no longer fail in shard 2 alone: pick others"
    );
    // A shard that did not catch it is no failure: the merge judges.
    assert!(parts.iter().all(|(_, code)| *code == 0));
    let s0 = json(&parts[0].0);
    assert!(s0["scenarios"][0]["verdict"]
        .as_str()
        .unwrap()
        .starts_with("not caught in this shard's 2 seeds"));

    let files: Vec<&str> = parts.iter().map(|(f, _)| f.as_str()).collect();
    let (code, out, err) = merge(&files, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("caught as expected at seed 281280523"),
        "{out}"
    );
    assert!(
        out.contains("replay: cargo run --release -- replay scenarios/bug-election"),
        "{out}"
    );
}

#[test]
fn shards_that_do_not_fit_together_are_refused_naming_the_file() {
    let scratch = scratch_dir("refused");
    let dir = scratch.path();
    let scenario_file = path(dir, "queue.toml");
    let original = std::fs::read_to_string("scenarios/queue.toml").unwrap();
    std::fs::write(&scenario_file, &original).unwrap();
    // Seeds that reach the queue's coverage goals (guid-found is rare), so
    // that the three shards that fit pass together.
    let args = [
        scenario_file.as_str(),
        "--seeds",
        "3",
        "--seed-start",
        "2661154829",
    ];
    let of3 = shards(dir, "of3", 3, &args);
    let [a, b, c] = [&of3[0].0, &of3[1].0, &of3[2].0].map(String::as_str);
    let refused = |files: &[&str], needles: &[&str]| {
        let (code, out, err) = merge(files, &[]);
        assert_eq!(code, 2, "{out}{err}");
        for needle in needles {
            assert!(err.contains(needle), "{needle:?} missing from:\n{err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    };
    // The three fit.
    assert_eq!(merge(&[a, b, c], &[]).0, 0);

    // A missing shard: which one, and the files given.
    refused(
        &[a, c],
        &[&format!(
            "scenario queue: shard 1/3 missing (given: 0/3 in {a}; 2/3 in {c})"
        )],
    );
    // A shard given twice.
    refused(
        &[a, b, b, c],
        &[&format!(
            "{b}: scenario queue shard 1/3 given twice (also in {b})"
        )],
    );
    // Another N.
    let of2 = shards(dir, "of2", 2, &args);
    refused(
        &[a, b, &of2[1].0],
        &[&format!(
            "{}: scenario queue split into 2 shards, but {a} into 3: different N",
            of2[1].0
        )],
    );
    // Another scenario file: the same path, another text.
    std::fs::write(
        &scenario_file,
        original.replace("2 producers", "two producers"),
    )
    .unwrap();
    let changed = shards(dir, "changed", 3, &args);
    refused(
        &[a, b, &changed[2].0],
        &[
            &format!(
                "{}: scenario queue ran {scenario_file} (sha256 ",
                changed[2].0
            ),
            &format!("but {a} ran {scenario_file}"),
            "the scenario file differs between shards",
        ],
    );
    // A truncated file: its name, line and column.
    let text = std::fs::read_to_string(c).unwrap();
    let cut = path(dir, "cut.json");
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    refused(
        &[a, b, &cut],
        &[
            &format!("{cut}:"),
            "not a valid zoosim summary: EOF while parsing",
            "(truncated?)",
        ],
    );
    // Not a summary at all, and a file that is not there.
    let other = path(dir, "other.json");
    std::fs::write(&other, "{\"hello\": 1}\n").unwrap();
    refused(
        &[&other, "no/such/summary.json"],
        &[
            &format!("{other}: not a zoosim summary"),
            "no/such/summary.json: cannot read the summary",
        ],
    );
}

#[test]
fn an_unwritable_summary_path_fails_before_any_seed_runs() {
    let scratch = scratch_dir("unwritable");
    let dir = scratch.path();
    let missing_dir = path(dir, "no-such-dir/summary.json");
    let (code, out, err) = zoosim(&[
        "run",
        "scenarios/queue.toml",
        "--seeds",
        "2",
        "--summary",
        &missing_dir,
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains(&format!("{missing_dir}: cannot write the summary")),
        "{err}"
    );
    assert!(!out.contains("seeds in"), "no seed ran:\n{out}");
    // A directory is no summary file either, for run and merge alike.
    let d = dir.display().to_string();
    let (code, _, err) = zoosim(&["run", "scenarios/queue.toml", "--summary", &d]);
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!("{d}: cannot write the summary: it is a directory")),
        "{err}"
    );
    let (code, _, err) = merge(&["whatever.json"], &["--summary", &missing_dir]);
    assert_eq!(code, 2);
    assert!(err.contains(&missing_dir), "{err}");
    // Nothing is left behind: no temporary file.
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}
