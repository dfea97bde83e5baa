//! Sweeps across machines: a run's results as a JSON summary (`zoosim run
//! --summary FILE`, one per shard of a CI matrix or a batch array job),
//! and shards' summaries merged into one verdict (`zoosim merge`), with
//! the coverage goals judged over the union of the shards.
//!
//! A summary says which build ran it (zoosim's version and commit), and
//! per scenario: its file and the SHA-256 of the file's text, the seeds it
//! was given (a range and a shard of it: `start..start + count`, the
//! seeds whose index modulo `of` is in `shards`), the seeds run, the
//! failing seeds with their violations and replay commands, the seeds
//! that passed with ZooKeeper's contract undecided (with the reason and
//! replay command), simulated time, operations, counters and coverage
//! goals. A merge checks that the
//! shards fit together (one build, one file, one seed range, one shard
//! count, every shard exactly once) and says exactly what does not; its
//! result is a summary too, so merges can be merged (e.g. two directories'
//! sweeps, each merged on its own).
//!
//! The merge itself is pure ([`merge`]); reading and writing files are the
//! two functions at the bottom ([`read`], [`SummaryFile`]). The command
//! (`zoosim merge`) keeps the [`Source`]s it merged, for an index page
//! over the shards' reports to be written from them.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::output;
use super::runner::{self, RunOptions, Summary};
use super::spec::Scenario;

/// The `format` field of every summary.
pub const FORMAT: &str = "zoosim-summary";

/// The summary format's version this zoosim writes (it reads this one and
/// every older one in [`READS`]).
pub const VERSION: u32 = 2;

/// The summary format versions this zoosim reads: 1 had no `undecided`
/// fields (they read as empty; its counter `contract-undecided` still
/// counts those seeds).
pub const READS: std::ops::RangeInclusive<u32> = 1..=VERSION;

/// A sweep's results: one `zoosim run` (a shard or all of it), or a merge
/// of shards.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct SweepSummary {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// The zoosim version that ran the seeds.
    pub zoosim: String,
    /// The commit it was built from, where the build knew it.
    pub commit: Option<String>,
    /// The `run` command's options; none for a merge.
    pub command: Option<CommandLine>,
    /// A merge's input files, as given to it; empty for a run.
    pub merged_from: Vec<String>,
    /// Per scenario, in the order run.
    pub scenarios: Vec<ScenarioRecord>,
    /// Every scenario did what it should (derived: a merge judges again).
    /// Undecided seeds do not make it false: they are counted beside it,
    /// in `undecided`.
    pub passed: bool,
    /// Seeds that passed with ZooKeeper's contract undecided, over every
    /// scenario (derived; each scenario lists its own).
    #[serde(default)]
    pub undecided: u64,
}

/// What `zoosim run` was told.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct CommandLine {
    /// `--seeds`, if given.
    pub seeds: Option<u64>,
    /// `--seed-start`, if given.
    pub seed_start: Option<u64>,
    /// `--shard i/n`, if given.
    pub shard: Option<Shard>,
}

/// Shard `index` of `of`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Shard {
    /// 0-based.
    pub index: u64,
    /// How many shards the seeds are split into.
    pub of: u64,
}

/// The seeds a scenario was given: of `start..start + count`, those whose
/// index (seed - start) modulo `of` is one of `shards`. An unsharded run is
/// shard 0 of 1.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct SeedRange {
    /// The first seed of the whole sweep.
    pub start: u64,
    /// Seeds in the whole sweep.
    pub count: u64,
    /// How many shards the sweep is split into.
    pub of: u64,
    /// The shards given here, ascending.
    pub shards: Vec<u64>,
}

impl SeedRange {
    /// Every shard is here: coverage goals can be judged.
    pub fn complete(&self) -> bool {
        (self.shards.len() as u64) == self.of
    }

    fn range(&self) -> String {
        format!("{}..{}", self.start, self.start.saturating_add(self.count))
    }

    /// How many seeds its shards hold: of indices `0..count`, those equal
    /// to a shard modulo `of`.
    pub fn given(&self) -> u64 {
        let (whole, rest) = (self.count / self.of.max(1), self.count % self.of.max(1));
        (self.shards.iter())
            .map(|&i| whole + u64::from(i < rest))
            .sum()
    }
}

impl fmt::Display for SeedRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seeds {}", self.range())?;
        if !self.complete() {
            let shards: Vec<String> = self
                .shards
                .iter()
                .map(|i| format!("{i}/{}", self.of))
                .collect();
            write!(f, ", shard {}", shards.join(", "))?;
        }
        Ok(())
    }
}

/// One scenario's results in a summary.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ScenarioRecord {
    /// The scenario's name.
    pub name: String,
    /// Its file, as given to `zoosim run`.
    pub file: String,
    /// SHA-256 of the file's text, in hex ([`content_hash`]).
    pub sha256: String,
    /// The scenario passes when a seed fails.
    pub expect_failure: bool,
    /// The seeds it was given.
    pub seeds: SeedRange,
    /// Seeds run (fewer than given where a scenario expected to fail
    /// stopped at its first failure).
    pub seeds_run: u64,
    /// Failing seeds, lowest first.
    pub failures: Vec<FailureRecord>,
    /// Seeds that passed with ZooKeeper's contract undecided (its check
    /// ran out of budget), lowest first: not failures, but not clean
    /// passes either.
    #[serde(default)]
    pub undecided: Vec<UndecidedRecord>,
    /// Simulated ms, summed over the seeds run.
    pub sim_ms: u64,
    /// Wall-clock ms, summed over the shards.
    pub wall_ms: u64,
    /// Recipe operations, summed over the seeds run.
    pub ops: u64,
    /// Every counter, summed over the seeds run.
    pub counters: BTreeMap<String, u64>,
    /// The scenario's coverage goals and their counts here.
    pub coverage: Vec<Goal>,
    /// Goals left at zero: judged only when every shard is here (derived).
    pub missed_goals: Vec<String>,
    /// The scenario did what it should (derived).
    pub passed: bool,
    /// The verdict in a line, as `zoosim run` prints it (derived).
    pub verdict: String,
    /// The run was stopped (Ctrl-C) before its seeds were all run: what
    /// it found is kept, but it is not passed, and not merged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// A coverage goal: a counter that must not stay at zero over the sweep.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Goal {
    /// The counter's name.
    pub goal: String,
    /// Its count here.
    pub count: u64,
    /// `count > 0`.
    pub reached: bool,
}

/// A failing seed.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct FailureRecord {
    /// The seed.
    pub seed: u64,
    /// The properties it broke, at least one.
    pub violations: Vec<ViolationRecord>,
    /// The command that replays it.
    pub replay: String,
}

impl FailureRecord {
    /// Every violation, one per line, as a run prints them.
    pub fn why(&self) -> String {
        self.violations
            .iter()
            .map(|v| format!("{}: {}", v.property, v.detail))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A seed that passed with ZooKeeper's contract undecided.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct UndecidedRecord {
    /// The seed.
    pub seed: u64,
    /// Why the contract check did not decide.
    pub why: String,
    /// The command that replays it.
    pub replay: String,
}

/// A broken property and the evidence.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ViolationRecord {
    /// The property's name.
    pub property: String,
    /// How it broke.
    pub detail: String,
}

/// SHA-256 of a scenario file's text, in lowercase hex.
pub fn content_hash(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// This zoosim's version, and the commit it was built from where the
/// build knew it (a build outside a git checkout does not).
pub fn this_build() -> (String, Option<String>) {
    let commit = option_env!("ZOOSIM_COMMIT").filter(|c| !c.is_empty() && *c != "unknown");
    (
        env!("CARGO_PKG_VERSION").to_owned(),
        commit.map(str::to_owned),
    )
}

impl SweepSummary {
    /// A run's summary by this build.
    pub fn of_run(command: CommandLine, scenarios: Vec<ScenarioRecord>) -> SweepSummary {
        let (zoosim, commit) = this_build();
        SweepSummary {
            format: FORMAT.to_owned(),
            version: VERSION,
            zoosim,
            commit,
            command: Some(command),
            merged_from: Vec::new(),
            passed: scenarios.iter().all(|s| s.passed),
            undecided: undecided_seeds(&scenarios),
            scenarios,
        }
    }

    /// As written to a file: pretty JSON, ending in a newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a summary serializes");
        s.push('\n');
        s
    }

    /// Some seed passed with the contract undecided.
    pub fn any_undecided(&self) -> bool {
        self.scenarios.iter().any(|s| !s.undecided.is_empty())
    }

    fn build(&self) -> String {
        format!(
            "zoosim {} (commit {})",
            self.zoosim,
            self.commit.as_deref().unwrap_or("unknown")
        )
    }
}

/// Undecided seeds over `scenarios`.
fn undecided_seeds(scenarios: &[ScenarioRecord]) -> u64 {
    scenarios.iter().map(|s| s.undecided.len() as u64).sum()
}

impl ScenarioRecord {
    /// What `summary`, the sweep of `scenario` (whose file's text hashes
    /// to `sha256`) with `options`, found; `replay` gives a failing
    /// seed's replay command.
    pub fn of_run(
        summary: &Summary,
        scenario: &Scenario,
        sha256: String,
        options: &RunOptions,
        replay: &dyn Fn(u64) -> String,
    ) -> ScenarioRecord {
        let (start, count) = runner::seed_range(scenario, options);
        let (of, shards) = options.shard.map_or((1, vec![0]), |(i, n)| (n, vec![i]));
        let mut record = ScenarioRecord {
            name: summary.name.clone(),
            file: summary.file.clone(),
            sha256,
            expect_failure: summary.expect_failure,
            seeds: SeedRange {
                start,
                count,
                of,
                shards,
            },
            seeds_run: summary.seeds_run,
            failures: summary
                .failures
                .iter()
                .map(|f| FailureRecord {
                    seed: f.seed,
                    violations: f
                        .violations
                        .iter()
                        .map(|v| ViolationRecord {
                            property: v.property.to_owned(),
                            detail: v.detail.clone(),
                        })
                        .collect(),
                    replay: replay(f.seed),
                })
                .collect(),
            undecided: summary
                .undecided
                .iter()
                .map(|u| UndecidedRecord {
                    seed: u.seed,
                    why: u.why.clone(),
                    replay: replay(u.seed),
                })
                .collect(),
            sim_ms: summary.sim_ms,
            wall_ms: summary.wall_ms,
            ops: summary.ops,
            counters: summary.counters.clone(),
            coverage: scenario
                .coverage
                .iter()
                .map(|g| Goal {
                    goal: g.clone(),
                    count: 0,
                    reached: false,
                })
                .collect(),
            missed_goals: Vec::new(),
            passed: false,
            verdict: String::new(),
            interrupted: summary.interrupted,
        };
        record.judge();
        record
    }

    /// Fills in the derived fields from the counts: the goals' counts,
    /// the goals missed and whether an expected failure was caught (both
    /// judged only when every shard is here), the verdict.
    fn judge(&mut self) {
        for g in &mut self.coverage {
            g.count = self.counters.get(&g.goal).copied().unwrap_or(0);
            g.reached = g.count > 0;
        }
        self.missed_goals = if self.seeds.complete() && !self.interrupted {
            let goals: Vec<String> = self.coverage.iter().map(|g| g.goal.clone()).collect();
            runner::missed_goals(
                self.expect_failure,
                self.failures.len(),
                &goals,
                &self.counters,
            )
        } else {
            Vec::new()
        };
        let whole = self.seeds.complete() && !self.interrupted;
        self.passed = !self.interrupted
            && runner::passed(
                self.expect_failure,
                self.failures.len(),
                &self.missed_goals,
                whole,
            );
        let first = self.failures.first().map(|f| (f.seed, f.why()));
        self.verdict = runner::verdict(
            self.expect_failure,
            self.seeds_run,
            self.failures.len(),
            first.as_ref().map(|(seed, why)| (*seed, why.as_str())),
            &self.missed_goals,
            whole,
        );
        if self.interrupted {
            self.verdict = runner::interrupted_verdict(self.seeds_run, &self.verdict);
        }
        self.verdict =
            runner::with_undecided(std::mem::take(&mut self.verdict), self.undecided.len());
    }
}

/// A summary read from a file, for [`merge`].
#[derive(Clone, Debug)]
pub struct Source {
    /// The file, as given.
    pub file: String,
    /// What it holds.
    pub summary: SweepSummary,
}

/// Why shards' summaries do not fit together.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum MergeError {
    /// Run by another zoosim version or commit than the first file.
    DifferentBuild {
        /// The file.
        file: String,
        /// Its build.
        build: String,
        /// The first file.
        first_file: String,
        /// The first file's build.
        first_build: String,
    },
    /// One file holds a scenario twice.
    ScenarioTwice {
        /// The file.
        file: String,
        /// The scenario's name.
        scenario: String,
    },
    /// The scenario's file differs from the first shard's (by content).
    DifferentScenarioFile {
        /// The scenario's name.
        scenario: String,
        /// The summary file.
        file: String,
        /// The scenario file it ran, and its hash.
        ran: (String, String),
        /// The first summary file holding the scenario.
        first_file: String,
        /// The scenario file that one ran, and its hash.
        first_ran: (String, String),
    },
    /// Another seed range than the first shard's.
    DifferentSeeds {
        /// The scenario's name.
        scenario: String,
        /// The summary file.
        file: String,
        /// Its range, `a..b`.
        seeds: String,
        /// The first summary file holding the scenario.
        first_file: String,
        /// That one's range.
        first_seeds: String,
    },
    /// Another shard count N than the first shard's.
    DifferentShardCount {
        /// The scenario's name.
        scenario: String,
        /// The summary file.
        file: String,
        /// Its N.
        of: u64,
        /// The first summary file holding the scenario.
        first_file: String,
        /// That one's N.
        first_of: u64,
    },
    /// A shard given by two files.
    ShardTwice {
        /// The scenario's name.
        scenario: String,
        /// The shard.
        shard: Shard,
        /// The first file giving it.
        first_file: String,
        /// The second.
        file: String,
    },
    /// A run stopped before its seeds were all run: its counts are not a
    /// shard's.
    Interrupted {
        /// The summary file.
        file: String,
        /// The scenario's name.
        scenario: String,
        /// Seeds it ran.
        seeds_run: u64,
    },
    /// A sum over the shards past what a u64 holds (a tampered file).
    Overflow {
        /// The file whose figure took the sum past it.
        file: String,
        /// The scenario's name.
        scenario: String,
        /// The figure.
        what: String,
    },
    /// Shards no file gives.
    MissingShards {
        /// The scenario's name.
        scenario: String,
        /// How many shards there are.
        of: u64,
        /// The ones missing.
        missing: Vec<u64>,
        /// The ones given: (file, its shards).
        given: Vec<(String, Vec<u64>)>,
    },
}

fn shards(list: &[u64], of: u64) -> String {
    list.iter()
        .map(|i| format!("{i}/{of}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeError::DifferentBuild {
                file,
                build,
                first_file,
                first_build,
            } => write!(
                f,
                "{file}: run by {build}, but {first_file} by {first_build}: \
                 the shards of a sweep must come from one build"
            ),
            MergeError::ScenarioTwice { file, scenario } => {
                write!(f, "{file}: scenario {scenario} appears twice")
            }
            MergeError::Interrupted {
                file,
                scenario,
                seeds_run,
            } => write!(
                f,
                "{file}: scenario {scenario} was interrupted after {seeds_run} seeds: \
                 run its shard again to merge it"
            ),
            MergeError::DifferentScenarioFile {
                scenario,
                file,
                ran,
                first_file,
                first_ran,
            } => write!(
                f,
                "{file}: scenario {scenario} ran {} (sha256 {}), but {first_file} ran {} \
                 (sha256 {}): the scenario file differs between shards",
                ran.0,
                short(&ran.1),
                first_ran.0,
                short(&first_ran.1)
            ),
            MergeError::DifferentSeeds {
                scenario,
                file,
                seeds,
                first_file,
                first_seeds,
            } => write!(
                f,
                "{file}: scenario {scenario} ran seeds {seeds}, but {first_file} seeds \
                 {first_seeds}: the shards' seed ranges differ"
            ),
            MergeError::DifferentShardCount {
                scenario,
                file,
                of,
                first_file,
                first_of,
            } => write!(
                f,
                "{file}: scenario {scenario} split into {of} shards, but {first_file} into \
                 {first_of}: different N"
            ),
            MergeError::ShardTwice {
                scenario,
                shard,
                first_file,
                file,
            } => write!(
                f,
                "{file}: scenario {scenario} shard {}/{} given twice (also in {first_file})",
                shard.index, shard.of
            ),
            MergeError::Overflow {
                file,
                scenario,
                what,
            } => write!(
                f,
                "{file}: scenario {scenario}: its {what} takes the shards' sum past \
                 18446744073709551615; the file cannot be right"
            ),
            MergeError::MissingShards {
                scenario,
                of,
                missing,
                given,
            } => {
                let given: Vec<String> = given
                    .iter()
                    .map(|(file, list)| format!("{} in {file}", shards(list, *of)))
                    .collect();
                write!(
                    f,
                    "scenario {scenario}: shard{} {} missing (given: {})",
                    if missing.len() == 1 { "" } else { "s" },
                    shards(missing, *of),
                    given.join("; ")
                )
            }
        }
    }
}

impl std::error::Error for MergeError {}

/// A hash, shortened for a message.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// Merges shards' summaries into one: per scenario (matched by name,
/// in the order first seen), the seeds run, operations, times and
/// counters summed, the failures merged lowest seed first, and the
/// coverage goals judged over the union once every shard is there.
/// Every way the shards do not fit together is reported, not only the
/// first.
pub fn merge(sources: &[Source]) -> Result<SweepSummary, Vec<MergeError>> {
    let mut errors = Vec::new();
    let Some(first) = sources.first() else {
        return Err(errors);
    };
    for s in &sources[1..] {
        if (&s.summary.zoosim, &s.summary.commit) != (&first.summary.zoosim, &first.summary.commit)
        {
            errors.push(MergeError::DifferentBuild {
                file: s.file.clone(),
                build: s.summary.build(),
                first_file: first.file.clone(),
                first_build: first.summary.build(),
            });
        }
    }
    // Each scenario's records with their files, in the order first seen.
    let mut order: Vec<&str> = Vec::new();
    let mut by_name: BTreeMap<&str, Vec<(&str, &ScenarioRecord)>> = BTreeMap::new();
    for s in sources {
        let mut seen = std::collections::BTreeSet::new();
        for r in &s.summary.scenarios {
            if !seen.insert(r.name.as_str()) {
                errors.push(MergeError::ScenarioTwice {
                    file: s.file.clone(),
                    scenario: r.name.clone(),
                });
                continue;
            }
            if r.interrupted {
                errors.push(MergeError::Interrupted {
                    file: s.file.clone(),
                    scenario: r.name.clone(),
                    seeds_run: r.seeds_run,
                });
                continue;
            }
            let records = by_name.entry(&r.name).or_default();
            if records.is_empty() {
                order.push(&r.name);
            }
            records.push((&s.file, r));
        }
    }
    let mut merged = Vec::new();
    for name in order {
        match merge_scenario(&by_name[name]) {
            Ok(r) => merged.push(r),
            Err(e) => errors.extend(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(SweepSummary {
        format: FORMAT.to_owned(),
        version: VERSION,
        zoosim: first.summary.zoosim.clone(),
        commit: first.summary.commit.clone(),
        command: None,
        merged_from: sources.iter().map(|s| s.file.clone()).collect(),
        passed: merged.iter().all(|s| s.passed),
        undecided: undecided_seeds(&merged),
        scenarios: merged,
    })
}

/// One scenario's shards (at least one), each with its file.
fn merge_scenario(records: &[(&str, &ScenarioRecord)]) -> Result<ScenarioRecord, Vec<MergeError>> {
    let mut errors = Vec::new();
    let (first_file, first) = records[0];
    // Which file gave each shard.
    let mut given: BTreeMap<u64, &str> = BTreeMap::new();
    for &(file, r) in records {
        let scenario = || r.name.clone();
        if r.sha256 != first.sha256 {
            errors.push(MergeError::DifferentScenarioFile {
                scenario: scenario(),
                file: file.to_owned(),
                ran: (r.file.clone(), r.sha256.clone()),
                first_file: first_file.to_owned(),
                first_ran: (first.file.clone(), first.sha256.clone()),
            });
        }
        if (r.seeds.start, r.seeds.count) != (first.seeds.start, first.seeds.count) {
            errors.push(MergeError::DifferentSeeds {
                scenario: scenario(),
                file: file.to_owned(),
                seeds: r.seeds.range(),
                first_file: first_file.to_owned(),
                first_seeds: first.seeds.range(),
            });
        }
        if r.seeds.of != first.seeds.of {
            errors.push(MergeError::DifferentShardCount {
                scenario: scenario(),
                file: file.to_owned(),
                of: r.seeds.of,
                first_file: first_file.to_owned(),
                first_of: first.seeds.of,
            });
            continue;
        }
        for &i in &r.seeds.shards {
            match given.entry(i) {
                Entry::Occupied(earlier) => errors.push(MergeError::ShardTwice {
                    scenario: scenario(),
                    shard: Shard {
                        index: i,
                        of: r.seeds.of,
                    },
                    first_file: earlier.get().to_string(),
                    file: file.to_owned(),
                }),
                Entry::Vacant(v) => {
                    v.insert(file);
                }
            }
        }
    }
    let of = first.seeds.of;
    let missing: Vec<u64> = (0..of).filter(|i| !given.contains_key(i)).collect();
    if !missing.is_empty() {
        errors.push(MergeError::MissingShards {
            scenario: first.name.clone(),
            of,
            missing,
            given: records
                .iter()
                .filter(|(_, r)| r.seeds.of == of)
                .map(|(file, r)| (file.to_string(), r.seeds.shards.clone()))
                .collect(),
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut out = first.clone();
    out.seeds.shards = given.into_keys().collect();
    for &(file, r) in &records[1..] {
        // Sums past u64 come only from tampered files: refused, never
        // wrapped into a small number.
        let overflow = |what: &str| {
            vec![MergeError::Overflow {
                file: file.to_owned(),
                scenario: first.name.clone(),
                what: what.to_owned(),
            }]
        };
        let add = |sum: &mut u64, v: u64, what: &str| {
            *sum = sum.checked_add(v).ok_or_else(|| overflow(what))?;
            Ok::<(), Vec<MergeError>>(())
        };
        add(&mut out.seeds_run, r.seeds_run, "seeds_run")?;
        add(&mut out.sim_ms, r.sim_ms, "sim_ms")?;
        add(&mut out.wall_ms, r.wall_ms, "wall_ms")?;
        add(&mut out.ops, r.ops, "ops")?;
        for (k, v) in &r.counters {
            add(out.counters.entry(k.clone()).or_default(), *v, k)?;
        }
        out.failures.extend(r.failures.iter().cloned());
        out.undecided.extend(r.undecided.iter().cloned());
    }
    out.failures.sort_by_key(|f| f.seed);
    out.undecided.sort_by_key(|u| u.seed);
    out.judge();
    Ok(out)
}

/// A summary that could not be read.
#[derive(Debug)]
pub enum SummaryError {
    /// The file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        doing: &'static str,
        /// Why it failed.
        error: std::io::Error,
    },
    /// Not JSON, truncated, or not shaped as a summary: where, and why.
    Json {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column (0 at the start of an empty file).
        column: usize,
        /// serde_json's message, without its position.
        message: String,
    },
    /// A summary whose content cannot be right (not made by `zoosim run`).
    Invalid {
        /// The file.
        file: String,
        /// What is wrong.
        what: String,
    },
    /// Larger than any summary `zoosim run` writes ([`MAX_SUMMARY_BYTES`]).
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// JSON, but not a zoosim summary.
    NotASummary {
        /// The file.
        file: String,
    },
    /// The summary cannot be written where it was asked for.
    Output(output::OutputError),
    /// A summary in a format version this zoosim does not read.
    Version {
        /// The file.
        file: String,
        /// Its version.
        version: u64,
    },
}

impl fmt::Display for SummaryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SummaryError::Io { path, doing, error } => {
                write!(f, "{}: cannot {doing}: {error}", path.display())
            }
            SummaryError::Json {
                file,
                line,
                column,
                message,
            } => {
                // serde_json says column 0 where no character was read
                // (an empty file): no column to name there.
                write!(f, "{file}:{line}:")?;
                if *column > 0 {
                    write!(f, "{column}:")?;
                }
                write!(f, " not a valid zoosim summary: {message}")
            }
            SummaryError::Invalid { file, what } => write!(f, "{file}: {what}"),
            SummaryError::Output(output::OutputError::Io { path, error }) => {
                write!(f, "{}: cannot write the summary: {error}", path.display())
            }
            SummaryError::Output(e) => write!(f, "the summary: {e}"),
            SummaryError::TooLarge { path } => write!(
                f,
                "{}: larger than {} MiB, the most a summary may be (one lists about 100 \
                 bytes per failing or undecided seed: millions of them); not read",
                path.display(),
                MAX_SUMMARY_BYTES >> 20
            ),
            SummaryError::NotASummary { file } => write!(
                f,
                "{file}: not a zoosim summary (no \"format\": \"{FORMAT}\"); \
                 `zoosim run --summary FILE` writes one"
            ),
            SummaryError::Version { file, version } => write!(
                f,
                "{file}: summary format version {version}; this zoosim reads versions {} to {}",
                READS.start(),
                READS.end()
            ),
        }
    }
}

impl std::error::Error for SummaryError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SummaryError::Io { error, .. } => Some(error),
            SummaryError::Output(e) => Some(e),
            _ => None,
        }
    }
}

/// Parses the text of summary `file`.
pub fn parse(file: &str, text: &str) -> Result<SweepSummary, SummaryError> {
    let json = |e: serde_json::Error| {
        let message = e.to_string();
        // serde_json appends " at line L column C": the position goes first.
        let mut message = match message.rfind(" at line ") {
            Some(at) => message[..at].to_owned(),
            None => message,
        };
        // serde names a missing field, not one of the wrong type: the key
        // before the error's position does.
        if e.classify() == serde_json::error::Category::Data && !message.starts_with("missing") {
            let line = text.lines().nth(e.line().saturating_sub(1)).unwrap_or("");
            if let Some(k) = zoosim_core::history::json::key_before(line, e.column()) {
                message = format!(
                    "field {}: {message}",
                    zoosim_core::quote::quoted(k, zoosim_core::quote::WORD)
                );
            }
        }
        // A value quoted in it may be megabytes long.
        let mut message = zoosim_core::quote::message(&message).into_owned();
        // Only an input that ends early may have been cut short.
        if e.classify() == serde_json::error::Category::Eof {
            message.push_str(" (truncated?)");
        }
        SummaryError::Json {
            file: file.to_owned(),
            line: e.line(),
            column: e.column(),
            message,
        }
    };
    // The format and version first, so that another format or version is
    // named as such rather than as a missing field.
    #[derive(Deserialize)]
    struct Header {
        format: Option<serde_json::Value>,
        version: Option<serde_json::Value>,
    }
    let header: Header = serde_json::from_str(text).map_err(json)?;
    if header.format.as_ref().and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(SummaryError::NotASummary {
            file: file.to_owned(),
        });
    }
    match header.version.as_ref().and_then(|v| v.as_u64()) {
        Some(v) if u32::try_from(v).is_ok_and(|v| READS.contains(&v)) => {}
        Some(version) => {
            return Err(SummaryError::Version {
                file: file.to_owned(),
                version,
            })
        }
        // Missing or not a number: serde names it below, with its place.
        None => {}
    }
    let summary: SweepSummary = serde_json::from_str(text).map_err(json)?;
    for r in &summary.scenarios {
        let s = &r.seeds;
        if s.of == 0
            || s.shards.is_empty()
            || s.shards.windows(2).any(|w| w[0] >= w[1])
            || s.shards.iter().any(|&i| i >= s.of)
        {
            return Err(SummaryError::Invalid {
                file: file.to_owned(),
                what: format!(
                    "scenario {}: shards {:?} of {} is not a set of shards i/n with 0 <= i < n",
                    r.name, s.shards, s.of
                ),
            });
        }
        // A tampered count would make a merge claim seeds nobody ran.
        let given = s.given();
        let reported = (r.failures.len() as u64).saturating_add(r.undecided.len() as u64);
        if r.seeds_run > given || reported > r.seeds_run {
            return Err(SummaryError::Invalid {
                file: file.to_owned(),
                what: format!(
                    "scenario {}: {} seeds run, with {} failing or undecided, but its {} hold \
                     {given} seeds",
                    r.name, r.seeds_run, reported, r.seeds
                ),
            });
        }
    }
    Ok(summary)
}

/// The largest summary [`read`] reads: a summary lists about 100 bytes
/// per failing or undecided seed, so this is millions of them, while a
/// gigabyte file (tampered, or not a summary) no longer ends in an
/// allocation abort.
pub const MAX_SUMMARY_BYTES: u64 = 256 << 20;

/// Reads summary `path` (at most [`MAX_SUMMARY_BYTES`], however it says
/// it is long: a special file that never ends is refused the same way).
pub fn read(path: &Path) -> Result<SweepSummary, SummaryError> {
    use std::io::Read as _;
    let io = |error| SummaryError::Io {
        path: path.to_owned(),
        doing: "read the summary",
        error,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let too_large = || SummaryError::TooLarge {
        path: path.to_owned(),
    };
    if f.metadata().is_ok_and(|m| m.len() > MAX_SUMMARY_BYTES) {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    f.take(MAX_SUMMARY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_SUMMARY_BYTES {
        return Err(too_large());
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (at byte {})", e.utf8_error().valid_up_to()),
        ))
    })?;
    parse(&path.display().to_string(), &text)
}

/// A summary file to be written at the end of a command, checked
/// writable before it starts ([`output::Pending`]: absent or a regular
/// file, written beside it and renamed into place, so that the file is
/// either the old one or the whole new one).
#[derive(Debug)]
pub struct SummaryFile(output::Pending);

impl SummaryFile {
    /// Checks that `path` can be written, by creating its temporary file.
    pub fn create(path: &Path) -> Result<SummaryFile, SummaryError> {
        if path.is_dir() {
            return Err(SummaryError::Io {
                path: path.to_owned(),
                doing: "write the summary",
                error: std::io::Error::other("it is a directory"),
            });
        }
        output::Pending::create(path)
            .map(SummaryFile)
            .map_err(SummaryError::Output)
    }

    /// The file it writes.
    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Writes `summary` and renames it into place.
    pub fn write(self, summary: &SweepSummary) -> Result<(), SummaryError> {
        (self.0)
            .commit(summary.to_json().as_bytes())
            .map_err(SummaryError::Output)
    }
}
