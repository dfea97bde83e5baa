//! The merge of shards' summaries, on summaries made by hand: what is
//! summed and judged, and every way shards can fail to fit (each caught,
//! with the file named). `tests/sweep.rs` runs the real command.

use std::collections::BTreeMap;

use super::sweep::*;

/// Shard `index` of `of` of scenario `name`: `seeds_run` seeds, failing
/// at `failing`, with `counters`.
fn record(
    name: &str,
    index: u64,
    of: u64,
    seeds_run: u64,
    failing: &[u64],
    counters: &[(&str, u64)],
) -> ScenarioRecord {
    ScenarioRecord {
        name: name.to_owned(),
        file: format!("scenarios/{name}.toml"),
        sha256: content_hash(name),
        expect_failure: false,
        seeds: SeedRange {
            start: 100,
            count: 12,
            of,
            shards: vec![index],
        },
        seeds_run,
        failures: failing
            .iter()
            .map(|&seed| FailureRecord {
                seed,
                violations: vec![ViolationRecord {
                    property: "mutual-exclusion".into(),
                    detail: format!("two holders at seed {seed}"),
                }],
                replay: format!("zoosim replay scenarios/{name}.toml --seed {seed} --trace"),
            })
            .collect(),
        undecided: Vec::new(),
        sim_ms: 1000 * seeds_run,
        wall_ms: 10,
        ops: 7 * seeds_run,
        counters: counters
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect::<BTreeMap<_, _>>(),
        coverage: vec![Goal {
            goal: "rare".into(),
            count: 0,
            reached: false,
        }],
        missed_goals: Vec::new(),
        passed: true,
        verdict: String::new(),
        interrupted: false,
    }
}

fn source(file: &str, scenarios: Vec<ScenarioRecord>) -> Source {
    Source {
        file: file.to_owned(),
        summary: SweepSummary::of_run(
            CommandLine {
                seeds: None,
                seed_start: None,
                shard: None,
            },
            scenarios,
        ),
    }
}

fn errors(sources: &[Source]) -> Vec<String> {
    merge(sources)
        .expect_err("the shards do not fit")
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn counts_are_summed_failures_merged_lowest_first_and_coverage_judged_over_the_union() {
    let merged = merge(&[
        source(
            "a.json",
            vec![record("lock", 0, 3, 4, &[109], &[("rare", 0)])],
        ),
        source("b.json", vec![record("lock", 2, 3, 4, &[], &[("rare", 0)])]),
        source(
            "c.json",
            vec![record("lock", 1, 3, 4, &[104, 107], &[("rare", 2)])],
        ),
    ])
    .expect("the shards fit");
    assert_eq!(merged.merged_from, ["a.json", "b.json", "c.json"]);
    let lock = &merged.scenarios[0];
    assert_eq!(lock.seeds.shards, [0, 1, 2]);
    assert_eq!((lock.seeds_run, lock.sim_ms, lock.ops), (12, 12_000, 84));
    let seeds: Vec<u64> = lock.failures.iter().map(|f| f.seed).collect();
    assert_eq!(seeds, [104, 107, 109]);
    assert_eq!(lock.counters["rare"], 2);
    assert!(lock.coverage[0].reached);
    assert!(!lock.passed && !merged.passed);
    assert!(
        lock.verdict
            .starts_with("FAILED: 3 of 12 seeds; first 104: mutual-exclusion"),
        "{}",
        lock.verdict
    );
}

#[test]
fn a_goal_reached_in_no_shard_fails_the_merge_though_each_shard_passed() {
    let shards: Vec<Source> = (0..2)
        .map(|i| {
            source(
                &format!("{i}.json"),
                vec![record("lock", i, 2, 6, &[], &[])],
            )
        })
        .collect();
    assert!(
        shards.iter().all(|s| s.summary.passed),
        "a shard judges no goal"
    );
    let merged = merge(&shards).unwrap();
    assert!(!merged.passed);
    assert_eq!(merged.scenarios[0].missed_goals, ["rare"]);
    assert_eq!(
        merged.scenarios[0].verdict,
        "FAILED: coverage goals at zero: rare"
    );
}

#[test]
fn an_expected_failure_is_caught_at_the_lowest_seed_any_shard_caught() {
    let mut shards: Vec<Source> = [(0, vec![]), (1, vec![110]), (2, vec![105])]
        .into_iter()
        .map(|(i, failing)| {
            let mut r = record("bug", i, 3, 4, &failing, &[]);
            r.expect_failure = true;
            source(&format!("{i}.json"), vec![r])
        })
        .collect();
    let merged = merge(&shards).unwrap();
    assert!(merged.passed);
    assert_eq!(
        merged.scenarios[0].verdict,
        "caught as expected at seed 105 (12 seeds)"
    );
    // Caught nowhere: not as expected.
    for s in &mut shards {
        s.summary.scenarios[0].failures.clear();
    }
    let merged = merge(&shards).unwrap();
    assert!(!merged.passed);
    assert_eq!(merged.scenarios[0].verdict, "NOT caught in 12 seeds");
}

#[test]
fn every_misfit_is_named_with_its_file() {
    // Another build.
    let mut b = source("b.json", vec![record("lock", 1, 2, 6, &[], &[])]);
    b.summary.commit = Some("0123456789ab".into());
    let a = source("a.json", vec![record("lock", 0, 2, 6, &[], &[])]);
    let e = errors(&[a.clone(), b]);
    assert!(
        e.iter().any(|e| e.starts_with("b.json: run by zoosim")
            && e.contains("(commit 0123456789ab), but a.json by zoosim")),
        "{e:?}"
    );

    // Another seed range.
    let mut r = record("lock", 1, 2, 6, &[], &[]);
    r.seeds.count = 20;
    let e = errors(&[a.clone(), source("b.json", vec![r])]);
    assert_eq!(
        e,
        [
            "b.json: scenario lock ran seeds 100..120, but a.json seeds 100..112: \
          the shards' seed ranges differ"
        ]
    );

    // A scenario twice in one file, and one no file has every shard of.
    let e = errors(&[
        a.clone(),
        source(
            "b.json",
            vec![
                record("lock", 1, 2, 6, &[], &[]),
                record("lock", 1, 2, 6, &[], &[]),
                record("queue", 1, 2, 6, &[], &[]),
            ],
        ),
    ]);
    assert_eq!(
        e,
        [
            "b.json: scenario lock appears twice",
            "scenario queue: shard 0/2 missing (given: 1/2 in b.json)",
        ]
    );
}

#[test]
fn a_summary_is_read_back_as_written_and_bad_ones_are_refused_with_their_place() {
    let s = source("a.json", vec![record("lock", 0, 1, 12, &[104], &[])]).summary;
    let text = s.to_json();
    assert_eq!(parse("a.json", &text).unwrap(), s);

    let newer = text.replace("\"version\": 2", "\"version\": 3");
    assert_eq!(
        parse("a.json", &newer).unwrap_err().to_string(),
        "a.json: summary format version 3; this zoosim reads versions 1 to 2"
    );
    let e = parse("a.json", &text.replace("\"seeds_run\"", "\"seeds_ran\""))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("a.json:") && e.contains("missing field `seeds_run`"),
        "{e}"
    );
    let e = parse("a.json", &text[..text.len() - 40])
        .unwrap_err()
        .to_string();
    let line = text[..text.len() - 40].lines().count();
    assert!(
        e.starts_with(&format!("a.json:{line}:")) && e.contains("EOF while parsing"),
        "{e}"
    );
    let bad_shard = text.replace("\"of\": 1", "\"of\": 0");
    assert!(parse("a.json", &bad_shard)
        .unwrap_err()
        .to_string()
        .contains("scenario lock: shards [0] of 0 is not a set of shards"));
    assert_eq!(
        parse("x.json", "[1, 2]").unwrap_err().to_string(),
        "x.json: not a zoosim summary (no \"format\": \"zoosim-summary\"); \
         `zoosim run --summary FILE` writes one"
    );
    let e = parse("x.json", "").unwrap_err().to_string();
    assert!(
        e.starts_with("x.json:1: not a valid zoosim summary: EOF") && e.ends_with("(truncated?)"),
        "{e}"
    );
    // A value of the wrong type is no sign of a cut file.
    let text = format!(
        "{{\"format\": \"{FORMAT}\", \"version\": {}, \"scenarios\": 5}}",
        READS.end()
    );
    let e = parse("x.json", &text).unwrap_err().to_string();
    assert!(
        e.contains("invalid type") && !e.contains("truncated"),
        "{e}"
    );
}

/// `record` with `undecided` seeds (no failures), as a run with the
/// contract undecided on them writes it.
fn undecided(index: u64, of: u64, seeds: &[u64]) -> ScenarioRecord {
    let mut r = record("lock", index, of, 6, &[], &[("rare", 1)]);
    r.undecided = seeds
        .iter()
        .map(|&seed| UndecidedRecord {
            seed,
            why: format!("step budget exhausted at seed {seed}"),
            replay: format!("zoosim replay scenarios/lock.toml --seed {seed} --trace"),
        })
        .collect();
    r
}

#[test]
fn undecided_seeds_are_merged_lowest_first_counted_and_named_in_the_verdict() {
    let merged = merge(&[
        source("a.json", vec![undecided(0, 2, &[110, 102])]),
        source("b.json", vec![undecided(1, 2, &[105])]),
    ])
    .expect("the shards fit");
    let lock = &merged.scenarios[0];
    let seeds: Vec<u64> = lock.undecided.iter().map(|u| u.seed).collect();
    assert_eq!(seeds, [102, 105, 110]);
    assert_eq!(lock.undecided[1].why, "step budget exhausted at seed 105");
    // Passed (undecided is no failure), but never a clean "ok".
    assert!(lock.passed && merged.passed);
    assert_eq!(lock.verdict, "ok (3 undecided)");
    assert_eq!(merged.undecided, 3);
    assert!(merged.any_undecided());
    // Written and read back with the field.
    let text = merged.to_json();
    assert!(text.contains("\"undecided\": 3"), "{text}");
    assert_eq!(parse("m.json", &text).unwrap(), merged);
}

#[test]
fn a_version_1_summary_without_undecided_fields_is_still_read_and_merged() {
    let s = source(
        "a.json",
        vec![record("lock", 0, 1, 12, &[], &[("rare", 1)])],
    )
    .summary;
    let mut json: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
    json["version"] = 1.into();
    json.as_object_mut().unwrap().remove("undecided");
    for r in json["scenarios"].as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("undecided");
    }
    let text = serde_json::to_string_pretty(&json).unwrap();
    assert!(!text.contains("undecided"), "{text}");
    let old = parse("old.json", &text).expect("version 1 is read");
    assert_eq!(old.version, 1);
    assert!(old.scenarios[0].undecided.is_empty() && !old.any_undecided());
    let merged = merge(&[Source {
        file: "old.json".into(),
        summary: old,
    }])
    .expect("merges");
    assert_eq!((merged.version, merged.undecided), (VERSION, 0));
    assert!(merged.passed);
}
