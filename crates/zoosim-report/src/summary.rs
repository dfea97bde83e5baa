//! The JSON summaries written beside the pages: what a script or a CI
//! step needs without parsing HTML (the verdicts, the replay command, the
//! minimal failing sub-history's operations), not the whole timeline.

use serde::Serialize;

use super::index::{failed_seeds, Totals};
use super::model::{Counter, IndexReport, LinVerdict, OpId, SeedReport};

#[derive(Serialize)]
struct SeedSummary<'a> {
    scenario: &'a str,
    seed: u64,
    /// "fail", "undecided", "unknown" or "pass", as the page's badge.
    verdict: &'static str,
    /// Why ZooKeeper's contract was left undecided (verdict "undecided").
    #[serde(skip_serializing_if = "Option::is_none")]
    undecided: Option<&'a str>,
    failed: Vec<Failed<'a>>,
    replay_command: &'a str,
    digest: &'a str,
    commit: Option<&'a str>,
    sim_ms: u64,
    ops: usize,
    lin: Vec<LinSummary<'a>>,
    counters: &'a [Counter],
}

#[derive(Serialize)]
struct Failed<'a> {
    property: &'a str,
    detail: &'a str,
    ops: &'a [OpId],
}

#[derive(Serialize)]
struct LinSummary<'a> {
    partition: Option<&'a str>,
    model: &'a str,
    verdict: LinVerdict,
    detail: &'a str,
    longest_prefix: usize,
    cannot_linearize_next: &'a [OpId],
    minimal: &'a [OpId],
}

/// The seed's summary as one JSON object (pretty-printed): `scenario`,
/// `seed`, `verdict` ("fail", "undecided", "unknown", "pass"), `undecided`
/// (why, when the contract was left undecided), `failed` (property,
/// detail, ops), `replay_command`, `digest`, `commit`, `sim_ms`, `ops`,
/// `lin` (per section: verdict, longest prefix length, the stuck and the
/// minimal operations' ids) and `counters`.
pub fn seed_summary_json(r: &SeedReport) -> String {
    let unknown = r.lin.iter().any(|l| l.verdict == LinVerdict::Unknown);
    let s = SeedSummary {
        scenario: &r.scenario,
        seed: r.seed,
        verdict: if r.failed() {
            "fail"
        } else if r.undecided.is_some() {
            "undecided"
        } else if unknown {
            "unknown"
        } else {
            "pass"
        },
        undecided: r.undecided.as_deref().filter(|_| !r.failed()),
        failed: r
            .verdicts
            .iter()
            .filter(|v| !v.passed)
            .map(|v| Failed {
                property: &v.name,
                detail: &v.detail,
                ops: &v.ops,
            })
            .collect(),
        replay_command: &r.replay_command,
        digest: &r.digest,
        commit: r.commit.as_deref(),
        sim_ms: r.sim_ms,
        ops: r.ops().count(),
        lin: r
            .lin
            .iter()
            .map(|l| LinSummary {
                partition: l.partition.as_deref(),
                model: &l.model,
                verdict: l.verdict,
                detail: &l.detail,
                longest_prefix: l.longest_prefix.len(),
                cannot_linearize_next: &l.cannot_linearize_next,
                minimal: &l.minimal,
            })
            .collect(),
        counters: &r.counters,
    };
    to_json(&s)
}

#[derive(Serialize)]
struct IndexSummary<'a> {
    title: &'a str,
    command: Option<&'a str>,
    commit: Option<&'a str>,
    /// "pass" when every scenario did as expected and met its goals, and
    /// no seed was undecided; "undecided" when only that fails; else
    /// "fail".
    verdict: &'static str,
    scenarios: usize,
    seeds_run: u64,
    failed_seeds: usize,
    undecided_seeds: usize,
    not_as_expected: usize,
    goals_missed: usize,
    rows: Vec<ScenarioSummary<'a>>,
}

#[derive(Serialize)]
struct ScenarioSummary<'a> {
    scenario: &'a str,
    expectation: &'a str,
    as_expected: bool,
    seeds_run: u64,
    failed_seeds: Vec<u64>,
    verdicts: Vec<VerdictSummary<'a>>,
    undecided: Vec<UndecidedSummary<'a>>,
    coverage: &'a [Counter],
}

#[derive(Serialize)]
struct UndecidedSummary<'a> {
    seed: u64,
    why: &'a str,
    /// Its report, if one was written.
    report: Option<&'a str>,
}

#[derive(Serialize)]
struct VerdictSummary<'a> {
    verdict: &'a str,
    passed: bool,
    seeds: usize,
    /// The seeds' reports (only those written).
    reports: Vec<(u64, &'a str)>,
}

/// The run's summary as one JSON object (pretty-printed): the totals
/// (`verdict`, `scenarios`, `seeds_run`, `failed_seeds`,
/// `undecided_seeds`, `not_as_expected`, `goals_missed`) and per scenario
/// its failing seeds, verdicts (with the reports written), undecided
/// seeds (with why and the report) and coverage.
pub fn index_summary_json(r: &IndexReport) -> String {
    let t = Totals::of(r);
    let s = IndexSummary {
        title: &r.title,
        command: r.command.as_deref(),
        commit: r.commit.as_deref(),
        verdict: t.verdict(),
        scenarios: t.scenarios,
        seeds_run: t.seeds_run,
        failed_seeds: t.failed_seeds,
        undecided_seeds: t.undecided_seeds,
        not_as_expected: t.not_as_expected,
        goals_missed: t.goals_missed,
        rows: r
            .scenarios
            .iter()
            .map(|s| ScenarioSummary {
                scenario: &s.scenario,
                expectation: &s.expectation,
                as_expected: s.as_expected,
                seeds_run: s.seeds_run,
                failed_seeds: failed_seeds(s).into_iter().collect(),
                verdicts: s
                    .verdicts
                    .iter()
                    .map(|v| VerdictSummary {
                        verdict: &v.verdict,
                        passed: v.passed,
                        seeds: v.seeds.len(),
                        reports: v
                            .seeds
                            .iter()
                            .filter_map(|l| l.safe_href().map(|h| (l.seed, h)))
                            .collect(),
                    })
                    .collect(),
                undecided: s
                    .undecided
                    .iter()
                    .map(|u| UndecidedSummary {
                        seed: u.seed.seed,
                        why: &u.why,
                        report: u.seed.safe_href(),
                    })
                    .collect(),
                coverage: &s.coverage,
            })
            .collect(),
    };
    to_json(&s)
}

fn to_json(v: &impl Serialize) -> String {
    // Serializing these plain structs (string keys, no maps with other
    // keys, no floats) cannot fail.
    serde_json::to_string_pretty(v).expect("a summary serializes")
}
