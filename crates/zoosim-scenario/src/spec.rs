//! Scenario files: TOML, parsed and validated here (pure: no runtime, no
//! I/O but the caller's text). Every error names the file, the line and
//! column, and what would have been accepted.
//!
//! ```toml
//! format = 1
//! recipe = "lock"                     # see `zoosim list`
//! variant = "lock/herd"               # optional: a buggy variant
//! expect = "fail"                     # default "pass"
//! seeds = 200                         # `zoosim run`'s default
//! test_seeds = 20                     # how many `cargo test` runs
//!
//! [ensemble]
//! servers = [3, 5]                    # one is drawn per seed
//! session_timeout_ms = 4000
//! link_latency_ms = [0, 1]            # per datagram
//! broken = "stale-read"               # only to prove a check can fail;
//! # or with a rate: broken = { kind = "stale-read", one_in = 1000, lag_txns = 1 }
//!
//! [workload]
//! clients = 5
//! hold_ms = [10, 100, 1000]           # one is drawn per seed
//!
//! [faults]
//! kinds = ["leader-crash", "long-client-pause"]   # default: every fault
//! swarm = true                        # each seed draws a subset
//! phase_ms = 20000
//!
//! [[faults.at]]                       # explicit faults, at simulated times
//! at_ms = 2000
//! fault = "leader-crash"
//!
//! [quiet]
//! phase_ms = 15000
//! liveness_bound_ms = 10000
//!
//! [coverage]
//! goals = ["fault:leader-crash", "guid-found"]
//! ```

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::recipe::RecipeRef;
use super::registry::Registry;
use super::verdict::ENSEMBLE_COUNTERS;
use super::workload::{KeyKind, Workload, WorkloadError, WorkloadValue};
use zoosim_core::breakage::{Breakage, Broken};
use zoosim_core::fault::Fault;
use zoosim_core::history::FaultParams;

/// The scenario format this build reads.
pub const FORMAT: i64 = 1;

/// A bad scenario file: where, and what was wrong.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SpecError {
    /// The file, as named to the parser.
    pub file: String,
    /// 1-based; 0 when the error is about the whole file.
    pub line: usize,
    /// 1-based; 0 when `line` is.
    pub column: usize,
    /// What was wrong, and what would have been accepted.
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Messages quote what the file said (a key, a value): a 50 MB
        // key must not be echoed whole.
        let message = zoosim_core::quote::message(&self.message);
        if self.line == 0 {
            write!(f, "{}: {message}", self.file)
        } else {
            write!(f, "{}:{}:{}: {message}", self.file, self.line, self.column)
        }
    }
}

impl std::error::Error for SpecError {}

/// One explicit fault at a simulated time. Every parameter is optional
/// (drawn from the nemesis's stream when absent); the shrinker writes all
/// of them, so the fault is exactly the one the nemesis injected.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ScheduledFault {
    /// Since the fault phase began, in ms; below `faults.phase_ms`.
    pub at_ms: u64,
    /// Nanoseconds past `at_ms` (below a millisecond): the exact instant.
    pub at_ns: u32,
    /// What to inject.
    pub fault: Fault,
    /// The keys given for its parameters (each absent one is drawn from
    /// the seed, or is the leader); lengths are whole ms, as the file
    /// writes them.
    pub params: FaultParams,
}

impl ScheduledFault {
    /// Since the fault phase began, in nanoseconds.
    pub fn at_nanos(&self) -> u64 {
        self.at_ms * 1_000_000 + u64::from(self.at_ns)
    }

    /// Sets the time since the fault phase began, in nanoseconds (split
    /// into `at_ms` and `at_ns`).
    pub fn set_at_nanos(&mut self, ns: u64) {
        self.at_ms = ns / 1_000_000;
        self.at_ns = (ns % 1_000_000) as u32;
    }
}

/// The tickTimes a seed draws from when a scenario names none. With a long
/// tick, a follower cut off from its leader notices late (syncLimit
/// ticks), and may serve its clients after the leader has expired their
/// sessions; an election takes as long, so a scenario drawing longer ticks
/// (ZooKeeper's sample configuration has 2000 ms) needs a quiet phase and
/// liveness bound to match, and names them itself.
pub const DEFAULT_TICKS_MS: &[u64] = &[500];

/// The least liveness bound a seed gets when its scenario sets none.
pub const MIN_DEFAULT_LIVENESS_BOUND_MS: u64 = 10_000;

/// The liveness bound of a seed whose scenario sets none, from what the
/// seed drew: its negotiated session timeout `t_ms`, its tick and its
/// number of clients. At least [`MIN_DEFAULT_LIVENESS_BOUND_MS`], and
/// longer where these need it:
///
/// * one session timeout and a tick for the nodes of dead sessions ahead
///   of a waiter: a session's last touch can be the quiet phase's start
///   (a connect request held on a cut link arrives at the heal and
///   revalidates the session), and the leader expires on its ticks;
/// * one more for a live client whose connection died unseen: it gives
///   the connection up after its read timeout (2T/3) and reconnects, and
///   a server then closes a connection whose session moved meanwhile;
/// * a second per client: every handoff down a queue of waiters can wait
///   out a Java client's reconnect jitter (up to 1 s).
///
/// Lock seeds under three-way and long partitions (5 clients, T 4 s,
/// holds of 1 s) overran the former fixed 10 s by 70 ms on exactly this
/// path: dead sessions expiring T after the heal, then holders whose
/// releases each met a closed connection and a jittered reconnect.
pub fn default_liveness_bound_ms(t_ms: u64, tick_ms: u64, clients: usize) -> u64 {
    let clients = u64::try_from(clients).unwrap_or(u64::MAX);
    (2 * t_ms + tick_ms)
        .saturating_add(clients.saturating_mul(1_000))
        .max(MIN_DEFAULT_LIVENESS_BOUND_MS)
}

/// A scenario's `[ensemble]` table.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct EnsembleSpec {
    /// One is drawn per seed.
    pub servers: Vec<u32>,
    /// The servers' tickTime in ms, one drawn per seed (100–10000 each,
    /// default [`DEFAULT_TICKS_MS`]).
    pub tick_ms: Vec<u64>,
    /// The clients' requested session timeout in ms, one drawn per seed
    /// (1000–120000 each, default 4000); the servers negotiate it to 2–20
    /// ticks.
    pub session_timeout_ms: Vec<u64>,
    /// syncLimit, drawn per seed from this range (initLimit is twice it).
    pub sync_limit_ticks: (u32, u32),
    /// Every datagram's one-way latency, drawn per datagram.
    pub link_latency_ms: (u64, u64),
    /// A guarantee the servers break on purpose, and how often (default
    /// none), to prove that a check of the guarantees can fail.
    pub broken: Option<Broken>,
}

/// A scenario's `[faults]` table.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FaultSpec {
    /// The nemesis's pool; empty: no randomized faults.
    pub kinds: Vec<Fault>,
    /// Each seed draws its own subset of `kinds` (swarm testing).
    pub swarm: bool,
    /// How long the fault phase lasts, in simulated ms (default 20000; 0: no
    /// fault phase).
    pub phase_ms: u64,
    /// Gap between two randomized faults, drawn from this range in ms
    /// (default 300–1500).
    pub interval_ms: (u64, u64),
    /// How long a network fault lasts, drawn from this range in ms (default
    /// 500–4000).
    pub window_ms: (u64, u64),
    /// Faults placed by hand (`[[faults.at]]`), each within the fault phase.
    pub at: Vec<ScheduledFault>,
}

/// A parsed, validated scenario file: every key with its value, defaults
/// filled in.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Scenario {
    /// The file's stem.
    pub name: String,
    /// The file's path, as given.
    pub file: String,
    /// The file's `description` (empty when absent).
    pub description: String,
    /// The recipe it runs.
    pub recipe: RecipeRef,
    /// A buggy variant's name, or None for the correct recipe.
    pub variant: Option<String>,
    /// The scenario passes when a seed fails within `seeds`.
    pub expect_failure: bool,
    /// Seeds `zoosim run` runs (default 200; at most 200 when a failure is
    /// expected).
    pub seeds: u64,
    /// Seeds `cargo test` runs (default: `seeds`, at most 10).
    pub test_seeds: u64,
    /// The first seed (default 0); seeds are consecutive from it.
    pub seed_start: u64,
    /// The `[ensemble]` table.
    pub ensemble: EnsembleSpec,
    /// Every workload key the recipe declares, with its value.
    pub workload: Workload,
    /// The `[faults]` table.
    pub faults: FaultSpec,
    /// How long the quiet phase after the faults lasts, in simulated ms
    /// (1000–3600000, default 15000), or a seed's default liveness bound
    /// when that is longer. It starts once the faults are over and a
    /// leader is established.
    pub quiet_ms: u64,
    /// In the quiet phase, whatever a live client starts or has pending must
    /// finish within this many ms (at most `quiet_ms`). `None`: the default,
    /// drawn per seed by [`default_liveness_bound_ms`].
    pub liveness_bound_ms: Option<u64>,
    /// Counters that must be above zero summed over a run's seeds.
    pub coverage: Vec<String>,
    /// Overrides the contract check's step budget for each seed (`zoosim
    /// run --contract-steps N`; not a key of the file, which runs with
    /// the default, [`crate::run::CONTRACT_STEPS`]).
    pub contract_steps: Option<u64>,
}

impl Scenario {
    /// The scenario as a file that parses back to it (every key written
    /// out, so a shrunk scenario says exactly what it runs).
    pub fn to_toml(&self) -> String {
        use std::fmt::Write;
        let list = |v: &[u64]| {
            let items: Vec<String> = v.iter().map(u64::to_string).collect();
            format!("[{}]", items.join(", "))
        };
        let quoted = |v: &[&str]| {
            let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
            format!("[{}]", items.join(", "))
        };
        let mut out = String::new();
        let _ = writeln!(out, "format = {FORMAT}");
        let _ = writeln!(out, "description = {:?}", self.description);
        let _ = writeln!(out, "recipe = {:?}", self.recipe_name());
        if let Some(v) = &self.variant {
            let _ = writeln!(out, "variant = {v:?}");
        }
        let expect = if self.expect_failure { "fail" } else { "pass" };
        let _ = writeln!(out, "expect = {expect:?}");
        let _ = writeln!(out, "seeds = {}", self.seeds);
        let _ = writeln!(out, "test_seeds = {}", self.test_seeds);
        let _ = writeln!(out, "seed_start = {}", self.seed_start);
        let servers: Vec<u64> = self
            .ensemble
            .servers
            .iter()
            .map(|&n| u64::from(n))
            .collect();
        let _ = writeln!(out, "\n[ensemble]\nservers = {}", list(&servers));
        let _ = writeln!(out, "tick_ms = {}", list(&self.ensemble.tick_ms));
        let _ = writeln!(
            out,
            "session_timeout_ms = {}",
            list(&self.ensemble.session_timeout_ms)
        );
        let (lo, hi) = self.ensemble.sync_limit_ticks;
        let _ = writeln!(out, "sync_limit_ticks = [{lo}, {hi}]");
        let (lo, hi) = self.ensemble.link_latency_ms;
        let _ = writeln!(out, "link_latency_ms = [{lo}, {hi}]");
        if let Some(b) = self.ensemble.broken {
            if b.is_default_rate() {
                let _ = writeln!(out, "broken = {:?}", b.kind.name());
            } else {
                let _ = writeln!(out, "broken = {b}");
            }
        }
        let _ = writeln!(out, "\n[workload]");
        out.push_str(&self.workload.to_toml());
        let f = &self.faults;
        let kinds: Vec<&str> = f.kinds.iter().map(|k| k.name()).collect();
        let _ = writeln!(out, "\n[faults]\nkinds = {}", quoted(&kinds));
        let _ = writeln!(out, "swarm = {}", f.swarm);
        let _ = writeln!(out, "phase_ms = {}", f.phase_ms);
        let _ = writeln!(
            out,
            "interval_ms = [{}, {}]",
            f.interval_ms.0, f.interval_ms.1
        );
        let _ = writeln!(out, "window_ms = [{}, {}]", f.window_ms.0, f.window_ms.1);
        for a in &f.at {
            let _ = writeln!(out, "\n[[faults.at]]\nat_ms = {}", a.at_ms);
            if a.at_ns > 0 {
                let _ = writeln!(out, "at_ns = {}", a.at_ns);
            }
            let _ = writeln!(out, "fault = {:?}", a.fault.name());
            let p = &a.params;
            if let Some(c) = p.client {
                let _ = writeln!(out, "client = {c}");
            }
            if let Some(s) = p.server {
                let _ = writeln!(out, "server = {s}");
            }
            if let Some(t) = p.to {
                let _ = writeln!(out, "to = {t}");
            }
            let servers = |v: &[u32]| list(&v.iter().map(|&s| u64::from(s)).collect::<Vec<_>>());
            if let Some(side) = &p.split {
                let _ = writeln!(out, "split = {}", servers(side));
            }
            if let Some(clients) = &p.split_clients {
                let clients: Vec<u64> = clients.iter().map(|&c| c as u64).collect();
                let _ = writeln!(out, "split_clients = {}", list(&clients));
            }
            if let Some(set) = &p.servers {
                let _ = writeln!(out, "servers = {}", servers(set));
            }
            if let Some(sides) = &p.sides {
                let sides: Vec<String> = sides.iter().map(|s| servers(s)).collect();
                let _ = writeln!(out, "sides = [{}]", sides.join(", "));
            }
            if let Some(on) = &p.side_clients {
                let on: Vec<String> = on
                    .iter()
                    .map(|c| list(&c.iter().map(|&c| c as u64).collect::<Vec<_>>()))
                    .collect();
                let _ = writeln!(out, "side_clients = [{}]", on.join(", "));
            }
            if p.flips.is_some() {
                let flips = p.flips_ms();
                let sides: Vec<String> = flips.iter().map(|(side, _)| servers(side)).collect();
                let ms: Vec<u64> = flips.iter().map(|&(_, ms)| ms).collect();
                let _ = writeln!(out, "splits = [{}]", sides.join(", "));
                let _ = writeln!(out, "flip_ms = {}", list(&ms));
            }
            if let Some(d) = p.delay {
                let _ = writeln!(out, "delay_ms = {}", d.as_millis());
            }
            if let Some(w) = p.window {
                let _ = writeln!(out, "window_ms = {}", w.as_millis());
            }
        }
        let _ = writeln!(out, "\n[quiet]\nphase_ms = {}", self.quiet_ms);
        if let Some(bound) = self.liveness_bound_ms {
            let _ = writeln!(out, "liveness_bound_ms = {bound}");
        }
        let goals: Vec<&str> = self.coverage.iter().map(String::as_str).collect();
        let _ = writeln!(out, "\n[coverage]\ngoals = {}", quoted(&goals));
        out
    }

    /// The variant's name, or the recipe's.
    pub fn variant_name(&self) -> &str {
        self.variant.as_deref().unwrap_or(self.recipe_name())
    }

    /// The recipe's name.
    pub fn recipe_name(&self) -> &str {
        self.recipe.name()
    }

    /// Sets a workload key, checked as the parser checks it.
    pub fn set_workload(&mut self, key: &str, value: WorkloadValue) -> Result<(), WorkloadError> {
        let mut next = self.workload.clone();
        next.set(self.recipe.workload_keys(), key, value)?;
        self.recipe.check_workload(&next)?;
        self.workload = next;
        Ok(())
    }
}

// The file as written; every value spanned, for errors that point at it.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    format: Option<Spanned<i64>>,
    description: Option<String>,
    recipe: Spanned<String>,
    variant: Option<Spanned<String>>,
    expect: Option<Spanned<String>>,
    seeds: Option<Spanned<i64>>,
    test_seeds: Option<Spanned<i64>>,
    seed_start: Option<Spanned<i64>>,
    #[serde(default)]
    ensemble: RawEnsemble,
    workload: Option<Spanned<toml::Table>>,
    #[serde(default)]
    faults: RawFaults,
    #[serde(default)]
    quiet: RawQuiet,
    #[serde(default)]
    coverage: RawCoverage,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawEnsemble {
    servers: Option<Spanned<OneOrMany>>,
    tick_ms: Option<Spanned<OneOrMany>>,
    session_timeout_ms: Option<Spanned<OneOrMany>>,
    sync_limit_ticks: Option<Spanned<Vec<i64>>>,
    link_latency_ms: Option<Spanned<Vec<i64>>>,
    /// A breakage's name, or a table with its rate (read by hand, for
    /// errors that point at the key).
    broken: Option<Spanned<toml::Value>>,
}

/// An integer, or a list of integers to draw from per seed. Read by hand
/// rather than as an untagged enum, whose error ("data did not match any
/// variant of untagged enum OneOrMany") told a user nothing.
#[derive(Clone)]
enum OneOrMany {
    One(i64),
    Many(Vec<i64>),
}

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = OneOrMany;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a list of integers, e.g. 3 or [3, 5]")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<OneOrMany, E> {
                Ok(OneOrMany::One(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<OneOrMany, A::Error> {
                let mut values = Vec::new();
                while let Some(v) = seq.next_element::<i64>()? {
                    values.push(v);
                }
                Ok(OneOrMany::Many(values))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl OneOrMany {
    fn values(&self) -> Vec<i64> {
        match self {
            OneOrMany::One(v) => vec![*v],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFaults {
    kinds: Option<Spanned<Vec<Spanned<String>>>>,
    swarm: Option<bool>,
    phase_ms: Option<Spanned<i64>>,
    interval_ms: Option<Spanned<Vec<i64>>>,
    window_ms: Option<Spanned<Vec<i64>>>,
    #[serde(default)]
    at: Vec<Spanned<RawAt>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAt {
    at_ms: Spanned<i64>,
    at_ns: Option<Spanned<i64>>,
    fault: Spanned<String>,
    client: Option<Spanned<i64>>,
    server: Option<Spanned<i64>>,
    to: Option<Spanned<i64>>,
    split: Option<Spanned<Vec<i64>>>,
    split_clients: Option<Spanned<Vec<i64>>>,
    servers: Option<Spanned<Vec<i64>>>,
    sides: Option<Spanned<Vec<Vec<i64>>>>,
    side_clients: Option<Spanned<Vec<Vec<i64>>>>,
    splits: Option<Spanned<Vec<Vec<i64>>>>,
    flip_ms: Option<Spanned<Vec<i64>>>,
    delay_ms: Option<Spanned<i64>>,
    window_ms: Option<Spanned<i64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawQuiet {
    phase_ms: Option<Spanned<i64>>,
    liveness_bound_ms: Option<Spanned<i64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCoverage {
    #[serde(default)]
    goals: Vec<Spanned<String>>,
}

/// Parses and validates `text`, the contents of `file` (named in errors),
/// knowing the built-in recipes only.
pub fn parse(file: &str, text: &str) -> Result<Scenario, SpecError> {
    parse_in(file, text, &Registry::new())
}

/// [`parse`], knowing `registry`'s recipes too.
pub fn parse_in(file: &str, text: &str, registry: &Registry) -> Result<Scenario, SpecError> {
    let at = Locator {
        file,
        text,
        registry,
    };
    let raw: Raw = toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map(|s| at.line_col(s.start)).unwrap_or((0, 0));
        SpecError {
            file: file.to_owned(),
            line,
            column,
            message: e.message().trim().to_owned(),
        }
    })?;
    at.scenario(raw)
}

/// Ensemble counters that only some faults can move (read off where each
/// is counted): a goal on one is unreachable where none of them can fire.
const FAULT_COUNTERS: [(&str, &[Fault]); 5] = [
    ("client-resets", &[Fault::ServerKill]),
    ("deposed-while-paused", &[Fault::ServerPause]),
    ("syncing-leader-crashes", &[Fault::NewLeaderCrash]),
    (
        "sessions-survived-outage",
        &[Fault::MajorityCrash, Fault::EnsembleCrash],
    ),
    ("isolated-past-expiry", &[Fault::ClientIsolated]),
];

/// Why coverage goal `goal` can never be reached under `faults` and
/// `ensemble`, if it cannot: a run that can only fail its coverage is
/// refused before it runs.
fn unreachable_goal(goal: &str, faults: &FaultSpec, ensemble: &EnsembleSpec) -> Option<String> {
    let may_fire = |f: Fault| {
        (faults.phase_ms > 0 && faults.kinds.contains(&f)) || faults.at.iter().any(|a| a.fault == f)
    };
    if let Some(f) = goal.strip_prefix("fault:").and_then(Fault::from_name) {
        return (!may_fire(f)).then(|| {
            format!("fault {f} is neither in `faults.kinds` (with a fault phase) nor placed in `[[faults.at]]`")
        });
    }
    if goal == "breakage-hits" && ensemble.broken.is_none() {
        return Some("the ensemble has no `broken` breakage".to_owned());
    }
    let (_, needs) = FAULT_COUNTERS.iter().find(|(c, _)| *c == goal)?;
    if needs.iter().any(|&f| may_fire(f)) {
        return None;
    }
    let names: Vec<&str> = needs.iter().map(|f| f.name()).collect();
    Some(format!(
        "only {} can move it, and the scenario can inject none",
        names.join(" or ")
    ))
}

struct Locator<'a> {
    file: &'a str,
    text: &'a str,
    registry: &'a Registry,
}

impl Locator<'_> {
    fn line_col(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        (line, column)
    }

    fn err<T>(
        &self,
        span: std::ops::Range<usize>,
        message: impl Into<String>,
    ) -> Result<T, SpecError> {
        let (line, column) = self.line_col(span.start);
        Err(SpecError {
            file: self.file.to_owned(),
            line,
            column,
            message: message.into(),
        })
    }

    fn whole<T>(&self, message: impl Into<String>) -> Result<T, SpecError> {
        Err(SpecError {
            file: self.file.to_owned(),
            line: 0,
            column: 0,
            message: message.into(),
        })
    }

    /// A number in `lo..=hi`, or `default` when absent.
    fn int(
        &self,
        v: &Option<Spanned<i64>>,
        key: &str,
        lo: i64,
        hi: i64,
        default: i64,
    ) -> Result<u64, SpecError> {
        match v {
            None => Ok(default as u64),
            Some(s) if (lo..=hi).contains(s.get_ref()) => Ok(*s.get_ref() as u64),
            Some(s) => self.err(
                s.span(),
                format!("`{key}` must be between {lo} and {hi}, got {}", s.get_ref()),
            ),
        }
    }

    /// A number or a non-empty list to draw from, each in `min..=max`;
    /// `default` when absent.
    fn drawn_list(
        &self,
        v: &Option<Spanned<OneOrMany>>,
        key: &str,
        min: i64,
        max: i64,
        default: &[u64],
    ) -> Result<Vec<u64>, SpecError> {
        let Some(s) = v else {
            return Ok(default.to_vec());
        };
        let values = s.get_ref().values();
        if values.is_empty() || values.iter().any(|n| !(min..=max).contains(n)) {
            return self.err(
                s.span(),
                format!(
                    "`{key}` must be a number from {min} to {max}, or a list of them to draw \
                     from, got {values:?}"
                ),
            );
        }
        Ok(values.into_iter().map(|n| n as u64).collect())
    }

    /// A `[lo, hi]` pair with lo <= hi, each in `min..=max`.
    fn range(
        &self,
        v: &Option<Spanned<Vec<i64>>>,
        key: &str,
        min: i64,
        max: i64,
        default: (u64, u64),
    ) -> Result<(u64, u64), SpecError> {
        let Some(s) = v else {
            return Ok(default);
        };
        match s.get_ref().as_slice() {
            [a, b] if min <= *a && a <= b && *b <= max => Ok((*a as u64, *b as u64)),
            _ => self.err(
                s.span(),
                format!(
                    "`{key}` must be [low, high] with {min} <= low <= high <= {max}, got {:?}",
                    s.get_ref()
                ),
            ),
        }
    }

    fn scenario(&self, raw: Raw) -> Result<Scenario, SpecError> {
        match &raw.format {
            None => self.whole(format!(
                "no `format` key: add `format = {FORMAT}` at the top"
            ))?,
            Some(f) if *f.get_ref() != FORMAT => self.err(
                f.span(),
                format!(
                    "format {} is not read by this zoosim (it reads format {FORMAT})",
                    f.get_ref()
                ),
            )?,
            Some(_) => {}
        }
        let Some(recipe) = self.registry.get(raw.recipe.get_ref()).cloned() else {
            let names = self.registry.names();
            return self.err(
                raw.recipe.span(),
                format!(
                    "unknown recipe {:?}; the recipes are: {}",
                    raw.recipe.get_ref(),
                    names.join(", ")
                ),
            );
        };
        let recipe_name = recipe.name();
        let known = recipe.variants();
        let variant = match &raw.variant {
            None => None,
            Some(v) => {
                // A variant renamed since (its recipe's name as its
                // prefix) is still taken by its old name.
                let name = zoosim_recipes::lock::renamed_variant(v.get_ref());
                if !known.contains(&name) {
                    let accepted = if known.is_empty() {
                        format!("recipe {recipe_name} has no buggy variants")
                    } else {
                        format!("{recipe_name}'s variants are: {}", known.join(", "))
                    };
                    return self.err(
                        v.span(),
                        format!("unknown variant {:?}; {accepted}", v.get_ref()),
                    );
                }
                Some(name.to_owned())
            }
        };
        let expect_failure = match &raw.expect {
            None => false,
            Some(e) => match e.get_ref().as_str() {
                "pass" => false,
                "fail" => true,
                other => {
                    return self.err(
                        e.span(),
                        format!("`expect` is \"pass\" or \"fail\", got {other:?}"),
                    )
                }
            },
        };
        let seeds = self.int(&raw.seeds, "seeds", 1, 10_000_000, 200)?;
        if expect_failure && seeds > 200 {
            return self.err(
                raw.seeds.as_ref().expect("over the default").span(),
                format!(
                    "a scenario expected to fail must fail within 200 seeds; `seeds` is {seeds}"
                ),
            );
        }
        let test_seeds = self.int(
            &raw.test_seeds,
            "test_seeds",
            0,
            10_000_000,
            seeds.min(10) as i64,
        )?;
        let seed_start = self.int(&raw.seed_start, "seed_start", 0, i64::MAX, 0)?;

        let ensemble = self.ensemble(&raw.ensemble)?;
        let workload = self.workload(&recipe, &raw.workload)?;
        let faults = self.faults(&raw.faults, &ensemble, recipe.client_slots(&workload))?;
        let quiet_ms = self.int(
            &raw.quiet.phase_ms,
            "quiet.phase_ms",
            1000,
            3_600_000,
            15_000,
        )?;
        let liveness_bound_ms = self.int(
            &raw.quiet.liveness_bound_ms,
            "quiet.liveness_bound_ms",
            1,
            3_600_000,
            MIN_DEFAULT_LIVENESS_BOUND_MS as i64,
        )?;
        if liveness_bound_ms > quiet_ms {
            // The default bound over a short quiet phase: point at the phase.
            let at = match (&raw.quiet.liveness_bound_ms, &raw.quiet.phase_ms) {
                (Some(bound), _) => bound.span(),
                (None, Some(phase)) => phase.span(),
                (None, None) => 0..0,
            };
            return self.err(
                at,
                format!(
                    "`liveness_bound_ms` ({liveness_bound_ms}{}) exceeds the quiet phase \
                     ({quiet_ms} ms)",
                    if raw.quiet.liveness_bound_ms.is_none() {
                        ", the default"
                    } else {
                        ""
                    }
                ),
            );
        }
        let counters = recipe.counters();
        let mut coverage = Vec::new();
        for g in &raw.coverage.goals {
            let name = g.get_ref();
            let known = counters.contains(&name.as_str())
                || ENSEMBLE_COUNTERS.contains(&name.as_str())
                || name
                    .strip_prefix("fault:")
                    .is_some_and(|f| Fault::from_name(f).is_some());
            if !known {
                return self.err(
                    g.span(),
                    format!(
                        "unknown coverage goal {name:?}; {} counts: {}; the ensemble's: {}; \
                         and fault:<fault> for any fault",
                        recipe_name,
                        counters.join(", "),
                        ENSEMBLE_COUNTERS.join(", ")
                    ),
                );
            }
            if let Some(why) = unreachable_goal(name, &faults, &ensemble) {
                return self.err(
                    g.span(),
                    format!("coverage goal {name:?} can never be reached: {why}"),
                );
            }
            coverage.push(name.clone());
        }
        let name = std::path::Path::new(self.file)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.file.to_owned());
        Ok(Scenario {
            name,
            file: self.file.to_owned(),
            description: raw.description.unwrap_or_default(),
            recipe,
            variant,
            expect_failure,
            seeds,
            test_seeds,
            seed_start,
            ensemble,
            workload,
            faults,
            quiet_ms,
            liveness_bound_ms: raw
                .quiet
                .liveness_bound_ms
                .is_some()
                .then_some(liveness_bound_ms),
            coverage,
            contract_steps: None,
        })
    }

    fn ensemble(&self, raw: &RawEnsemble) -> Result<EnsembleSpec, SpecError> {
        let servers = match &raw.servers {
            None => vec![3, 5],
            Some(s) => {
                let values = s.get_ref().values();
                if values.is_empty() || values.iter().any(|&n| !(1..=9).contains(&n)) {
                    return self.err(
                        s.span(),
                        format!("`servers` must be 1 to 9 servers (or a list to draw from), got {values:?}"),
                    );
                }
                values.into_iter().map(|n| n as u32).collect()
            }
        };
        let tick_ms = self.drawn_list(
            &raw.tick_ms,
            "ensemble.tick_ms",
            100,
            10_000,
            DEFAULT_TICKS_MS,
        )?;
        // Requested; the servers clamp it to 2–20 ticks.
        let session_timeout_ms = self.drawn_list(
            &raw.session_timeout_ms,
            "ensemble.session_timeout_ms",
            1000,
            120_000,
            &[4000],
        )?;
        let (lo, hi) = self.range(
            &raw.sync_limit_ticks,
            "ensemble.sync_limit_ticks",
            1,
            50,
            (2, 5),
        )?;
        let link_latency_ms = self.range(
            &raw.link_latency_ms,
            "ensemble.link_latency_ms",
            0,
            10_000,
            (0, 1),
        )?;
        let broken = match &raw.broken {
            None => None,
            Some(b) => Some(self.broken(b)?),
        };
        Ok(EnsembleSpec {
            servers,
            tick_ms,
            session_timeout_ms,
            sync_limit_ticks: (lo as u32, hi as u32),
            link_latency_ms,
            broken,
        })
    }

    /// `[ensemble] broken`: a breakage's name (its gross default rate), or
    /// `{ kind = "<name>", one_in = N, lag_txns = N }` (each rate key
    /// optional, `lag_txns` for stale-read only); errors point at the key.
    fn broken(&self, raw: &Spanned<toml::Value>) -> Result<Broken, SpecError> {
        let span = raw.span();
        let at = |key: &str| inline_key_span(self.text, span.clone(), key);
        let kind = |name: &str, at: std::ops::Range<usize>| match Breakage::from_name(name) {
            Some(b) => Ok(b),
            None => {
                let names: Vec<&str> = Breakage::ALL.iter().map(|b| b.name()).collect();
                self.err(
                    at,
                    format!(
                        "unknown breakage {name:?}; the breakages are: {}",
                        names.join(", ")
                    ),
                )
            }
        };
        let table = match raw.get_ref() {
            toml::Value::String(name) => return kind(name, span).map(Broken::from),
            toml::Value::Table(t) => t,
            other => {
                return self.err(
                    span,
                    format!(
                        "`broken` must be a breakage's name, e.g. \"stale-read\", or a table \
                         with its rate, e.g. {{ kind = \"stale-read\", one_in = 1000, lag_txns = 1 }}; \
                         got {other}"
                    ),
                )
            }
        };
        const KEYS: [&str; 3] = ["kind", "one_in", "lag_txns"];
        if let Some(key) = table.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return self.err(
                at(key),
                format!(
                    "`{key}` is not a key of `broken`; it takes: {}",
                    KEYS.join(", ")
                ),
            );
        }
        let Some(name) = table.get("kind") else {
            return self.err(
                span,
                "`broken` needs `kind`, the breakage's name, e.g. kind = \"stale-read\"",
            );
        };
        let Some(name) = name.as_str() else {
            return self.err(
                at("kind"),
                format!("`kind` must be a breakage's name (a string), got {name}"),
            );
        };
        let mut broken = Broken::from(kind(name, at("kind"))?);
        for key in ["one_in", "lag_txns"] {
            let Some(v) = table.get(key) else {
                continue;
            };
            if key == "lag_txns" && !broken.kind.has_lag() {
                return self.err(
                    at(key),
                    format!(
                        "`lag_txns` applies to stale-read only, not to {}",
                        broken.kind
                    ),
                );
            }
            let n = v.as_integer().and_then(|n| u64::try_from(n).ok());
            let Some(n) = n else {
                return self.err(
                    at(key),
                    format!("`{key}` must be a positive integer, got {v}"),
                );
            };
            match key {
                "one_in" => broken.one_in = n,
                _ => broken.lag_txns = n,
            }
            if let Err(why) = broken.check() {
                return self.err(at(key), why);
            }
        }
        Ok(broken)
    }

    /// The `[workload]` section: every key the recipe declares (others
    /// refused), each within its bounds, then the recipe's rules between
    /// keys; errors point at the key.
    fn workload(
        &self,
        recipe: &RecipeRef,
        raw: &Option<Spanned<toml::Table>>,
    ) -> Result<Workload, SpecError> {
        let empty = toml::Table::new();
        let (table, section) = raw
            .as_ref()
            .map_or((&empty, 0..0), |t| (t.get_ref(), t.span()));
        let at = |key: &str| key_span(self.text, section.clone(), key);
        let keys = recipe.workload_keys();
        for key in table.keys() {
            if !keys.iter().any(|k| k.name == key) {
                let accepted: Vec<&str> = keys.iter().map(|k| k.name).collect();
                return self.err(
                    at(key),
                    format!(
                        "`{key}` is not a workload key of recipe {}; it takes: {}",
                        recipe.name(),
                        accepted.join(", ")
                    ),
                );
            }
        }
        let mut workload = Workload::defaults(recipe.workload_keys());
        for k in keys {
            let Some(v) = table.get(k.name) else {
                continue;
            };
            let value = match (k.kind, v) {
                (KeyKind::Int { .. }, toml::Value::Integer(n)) => Some(WorkloadValue::Int(*n)),
                (KeyKind::Drawn { .. }, toml::Value::Integer(n)) => {
                    Some(WorkloadValue::Drawn(vec![*n]))
                }
                (KeyKind::Drawn { .. }, toml::Value::Array(a)) => a
                    .iter()
                    .map(toml::Value::as_integer)
                    .collect::<Option<Vec<i64>>>()
                    .map(WorkloadValue::Drawn),
                _ => None,
            };
            let checked = match value {
                Some(value) => k.check(&value).map(|()| value),
                None => Err(WorkloadError::new(
                    k.name,
                    format!("{}, got {v}", k.takes()),
                )),
            };
            match checked {
                // Rules between keys are checked once all are read.
                Ok(value) => workload.put(k.name, value),
                Err(e) => return self.err(at(&e.key), e.message),
            }
        }
        match recipe.check_workload(&workload) {
            Ok(()) => Ok(workload),
            Err(e) => self.err(at(&e.key), e.message),
        }
    }

    fn fault_name(&self, name: &Spanned<String>) -> Result<Fault, SpecError> {
        Fault::from_name(name.get_ref()).map_or_else(
            || {
                let names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
                self.err(
                    name.span(),
                    format!(
                        "unknown fault {:?}; the faults are: {}",
                        name.get_ref(),
                        names.join(", ")
                    ),
                )
            },
            Ok,
        )
    }

    fn faults(
        &self,
        raw: &RawFaults,
        ensemble: &EnsembleSpec,
        clients: usize,
    ) -> Result<FaultSpec, SpecError> {
        let kinds = match &raw.kinds {
            None => Fault::ALL.to_vec(),
            Some(list) => {
                let mut kinds = Vec::new();
                for k in list.get_ref() {
                    let name = self.fault_name(k)?;
                    if kinds.contains(&name) {
                        return self.err(k.span(), format!("fault {name:?} is listed twice"));
                    }
                    kinds.push(name);
                }
                kinds
            }
        };
        let phase_ms = self.int(&raw.phase_ms, "faults.phase_ms", 0, 3_600_000, 20_000)?;
        let interval_ms = self.range(
            &raw.interval_ms,
            "faults.interval_ms",
            1,
            600_000,
            (300, 1500),
        )?;
        let window_ms = self.range(&raw.window_ms, "faults.window_ms", 1, 600_000, (500, 4000))?;
        let min_servers = *ensemble.servers.iter().min().expect("not empty");
        let mut at = Vec::new();
        for a in &raw.faults_at() {
            at.push(self.scheduled_fault(a, phase_ms, clients, min_servers)?);
        }
        at.sort_by_key(ScheduledFault::at_nanos);
        Ok(FaultSpec {
            kinds,
            swarm: raw.swarm.unwrap_or(true),
            phase_ms,
            interval_ms,
            window_ms,
            at,
        })
    }
}

impl Locator<'_> {
    /// One `[[faults.at]]`: each key in range and only on the faults it
    /// applies to. The keys are read family by family, always in this
    /// order, so a table with several mistakes is refused for the same
    /// one every time.
    fn scheduled_fault(
        &self,
        a: &RawAt,
        phase_ms: u64,
        clients: usize,
        min_servers: u32,
    ) -> Result<ScheduledFault, SpecError> {
        let fault = self.fault_name(&a.fault)?;
        let at_ms = self.int(&Some(a.at_ms.clone()), "at_ms", 0, 3_600_000, 0)?;
        if at_ms >= phase_ms {
            return self.err(
                a.at_ms.span(),
                format!("`at_ms` ({at_ms}) is not within the fault phase (`faults.phase_ms` = {phase_ms})"),
            );
        }
        let at_ns = self.int(&a.at_ns, "at_ns", 0, 999_999, 0)? as u32;
        let mut f = FaultParams::default();
        let keys = AtKeys {
            at: self,
            raw: a,
            fault,
            clients,
            min_servers,
        };
        keys.aim(&mut f)?;
        keys.link(&mut f)?;
        keys.partition_in_two(&mut f)?;
        keys.majority(&mut f)?;
        keys.partition_in_three(&mut f)?;
        keys.flipping_partitions(&mut f)?;
        keys.delay_and_window(&mut f)?;
        Ok(ScheduledFault {
            at_ms,
            at_ns,
            fault,
            params: f,
        })
    }
}

/// The parameter keys of one `[[faults.at]]` table, read for its fault
/// into a [`ScheduledFault`]'s parameters, a family of faults' keys at a
/// time: servers are those of the smallest ensemble drawn, clients the
/// scenario's.
struct AtKeys<'k> {
    at: &'k Locator<'k>,
    raw: &'k RawAt,
    fault: Fault,
    clients: usize,
    min_servers: u32,
}

impl AtKeys<'_> {
    /// A key the fault takes no parameter for is an error at the key.
    fn only<T>(
        &self,
        key: &Option<Spanned<T>>,
        applies: bool,
        name: &str,
    ) -> Result<(), SpecError> {
        match key {
            Some(v) if !applies => self
                .at
                .err(v.span(), format!("{} does not take `{name}`", self.fault)),
            _ => Ok(()),
        }
    }

    /// A server of the smallest ensemble.
    fn server_id(&self, v: &Spanned<i64>, key: &str) -> Result<u32, SpecError> {
        let last = i64::from(self.min_servers) - 1;
        Ok(self.at.int(&Some(v.clone()), key, 0, last, 0)? as u32)
    }

    /// A side of a split: servers of the smallest ensemble, once each.
    fn side(
        &self,
        v: &[i64],
        span: std::ops::Range<usize>,
        key: &str,
    ) -> Result<Vec<u32>, SpecError> {
        let mut out: Vec<u32> = Vec::new();
        for &s in v {
            if !(0..i64::from(self.min_servers)).contains(&s) || out.contains(&(s as u32)) {
                return self.at.err(
                    span,
                    format!(
                        "`{key}` lists servers 0 to {} once each, got {v:?}",
                        self.min_servers - 1
                    ),
                );
            }
            out.push(s as u32);
        }
        if out.is_empty() {
            return self
                .at
                .err(span, format!("`{key}` needs at least one server"));
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Clients of the scenario, each at most once in `seen`.
    fn client_list(
        &self,
        v: &[i64],
        span: std::ops::Range<usize>,
        key: &str,
        seen: &mut Vec<usize>,
    ) -> Result<Vec<usize>, SpecError> {
        let clients = self.clients;
        let mut out: Vec<usize> = Vec::new();
        for &c in v {
            if !(0..clients as i64).contains(&c) || seen.contains(&(c as usize)) {
                return self.at.err(
                    span,
                    format!(
                        "`{key}` lists clients 0 to {} once each, got {v:?}",
                        clients as i64 - 1,
                    ),
                );
            }
            seen.push(c as usize);
            out.push(c as usize);
        }
        out.sort_unstable();
        Ok(out)
    }

    /// `client` and `server`: both values are checked before whether the
    /// fault takes them, and a fault that does not is the error's place.
    fn aim(&self, f: &mut FaultParams) -> Result<(), SpecError> {
        let (a, fault) = (self.raw, self.fault);
        let client = match &a.client {
            None => None,
            Some(c) => {
                let last = self.clients as i64 - 1;
                Some(self.at.int(&Some(c.clone()), "client", 0, last, 0)? as usize)
            }
        };
        let server = match &a.server {
            None => None,
            Some(s) => Some(self.server_id(s, "server")?),
        };
        if client.is_some() && !fault.aims_at_a_client() {
            return self.at.err(
                a.fault.span(),
                format!("{fault} aims at servers: `client` does not apply"),
            );
        }
        if server.is_some() && !fault.takes_a_server() {
            return self
                .at
                .err(a.fault.span(), format!("{fault} does not take a `server`"));
        }
        (f.client, f.server) = (client, server);
        Ok(())
    }

    /// `to`, a link fault's far end: another server than `server`, the
    /// near end, which it needs.
    fn link(&self, f: &mut FaultParams) -> Result<(), SpecError> {
        let link = matches!(self.fault, Fault::OneWayClog | Fault::LinkDelay);
        self.only(&self.raw.to, link, "to")?;
        let Some(t) = &self.raw.to else {
            return Ok(());
        };
        let to = self.server_id(t, "to")?;
        match f.server {
            None => self
                .at
                .err(t.span(), "`to` needs `server`, the link's near end"),
            Some(s) if s == to => self
                .at
                .err(t.span(), "`to` must differ from `server`: a link joins two"),
            Some(_) => {
                f.to = Some(to);
                Ok(())
            }
        }
    }

    /// `split` and `split_clients`: one side of a partition in two, and
    /// the clients on it.
    fn partition_in_two(&self, f: &mut FaultParams) -> Result<(), SpecError> {
        let a = self.raw;
        let two_way = matches!(self.fault, Fault::Partition | Fault::LongPartition);
        self.only(&a.split, two_way, "split")?;
        if let Some(v) = &a.split {
            f.split = Some(self.side(v.get_ref(), v.span(), "split")?);
        }
        self.only(&a.split_clients, two_way, "split_clients")?;
        if let Some(v) = &a.split_clients {
            let on = self.client_list(v.get_ref(), v.span(), "split_clients", &mut Vec::new())?;
            f.split_clients = Some(on);
        }
        Ok(())
    }

    /// `servers`: the majority a majority crash takes down.
    fn majority(&self, f: &mut FaultParams) -> Result<(), SpecError> {
        let min_servers = self.min_servers;
        let servers = &self.raw.servers;
        self.only(servers, self.fault == Fault::MajorityCrash, "servers")?;
        let Some(v) = servers else {
            return Ok(());
        };
        let set = self.side(v.get_ref(), v.span(), "servers")?;
        if (set.len() as u32) < min_servers / 2 + 1 {
            return self.at.err(
                v.span(),
                format!(
                    "`servers` must be a majority of the ensemble ({} of {min_servers}), got {:?}",
                    min_servers / 2 + 1,
                    v.get_ref()
                ),
            );
        }
        f.servers = Some(set);
        Ok(())
    }

    /// `sides` and `side_clients`: a three-way partition's sides, and
    /// the clients on each.
    #[allow(clippy::type_complexity)]
    fn partition_in_three(&self, f: &mut FaultParams) -> Result<(), SpecError> {
        let a = self.raw;
        let three_way = self.fault == Fault::ThreeWayPartition;
        self.only(&a.sides, three_way, "sides")?;
        self.only(&a.side_clients, three_way, "side_clients")?;
        if let Some(v) = &a.sides {
            f.sides = Some(self.three_sides(v)?);
        }
        if let Some(v) = &a.side_clients {
            f.side_clients = Some(self.clients_on_three_sides(v)?);
        }
        Ok(())
    }

    /// Three sides that together hold every server once.
    fn three_sides(&self, v: &Spanned<Vec<Vec<i64>>>) -> Result<Vec<Vec<u32>>, SpecError> {
        let mut all: Vec<u32> = Vec::new();
        let mut sides = Vec::new();
        for s in v.get_ref() {
            let one = self.side(s, v.span(), "sides")?;
            if one.iter().any(|s| all.contains(s)) {
                return self.at.err(v.span(), "`sides` names a server on two sides");
            }
            all.extend(&one);
            sides.push(one);
        }
        if sides.len() != 3 || all.len() as u32 != self.min_servers {
            return self.at.err(
                v.span(),
                format!(
                    "`sides` are three sides that together hold every server (0 to {}) once, got {:?}",
                    self.min_servers - 1,
                    v.get_ref()
                ),
            );
        }
        Ok(sides)
    }

    /// Three lists that together hold every client once.
    fn clients_on_three_sides(
        &self,
        v: &Spanned<Vec<Vec<i64>>>,
    ) -> Result<Vec<Vec<usize>>, SpecError> {
        let mut seen = Vec::new();
        let mut on = Vec::new();
        for c in v.get_ref() {
            on.push(self.client_list(c, v.span(), "side_clients", &mut seen)?);
        }
        if on.len() != 3 || seen.len() != self.clients {
            return self.at.err(
                v.span(),
                format!(
                    "`side_clients` are three lists that together hold every client (0 to {}) once, got {:?}",
                    self.clients as i64 - 1,
                    v.get_ref()
                ),
            );
        }
        Ok(on)
    }

    /// `splits` and `flip_ms`: flipping partitions' splits, each with how
    /// long it holds; one key without the other is refused.
    fn flipping_partitions(&self, f: &mut FaultParams) -> Result<(), SpecError> {
        let a = self.raw;
        let flipping = self.fault == Fault::FlippingPartitions;
        self.only(&a.splits, flipping, "splits")?;
        self.only(&a.flip_ms, flipping, "flip_ms")?;
        match (&a.splits, &a.flip_ms) {
            (None, None) => Ok(()),
            (Some(v), Some(ms)) if v.get_ref().len() == ms.get_ref().len() => {
                let mut flips = Vec::new();
                for (s, &d) in v.get_ref().iter().zip(ms.get_ref()) {
                    if !(1..=600_000).contains(&d) {
                        return self.at.err(
                            ms.span(),
                            format!("`flip_ms` are milliseconds from 1 to 600000, got {d}"),
                        );
                    }
                    let held = Duration::from_millis(d as u64);
                    flips.push((self.side(s, v.span(), "splits")?, held));
                }
                f.flips = Some(flips);
                Ok(())
            }
            (Some(v), _) => self.at.err(
                v.span(),
                "`splits` and `flip_ms` go together, one duration per split",
            ),
            (None, Some(ms)) => self.at.err(
                ms.span(),
                "`flip_ms` needs `splits`, one split per duration",
            ),
        }
    }

    /// `delay_ms`, a link delay's extra time per message, and
    /// `window_ms`, how long a fault with a length lasts.
    fn delay_and_window(&self, f: &mut FaultParams) -> Result<(), SpecError> {
        let (delay, window) = (&self.raw.delay_ms, &self.raw.window_ms);
        self.only(delay, self.fault == Fault::LinkDelay, "delay_ms")?;
        if let Some(v) = delay {
            let ms = self.at.int(&Some(v.clone()), "delay_ms", 1, 600_000, 0)?;
            f.delay = Some(Duration::from_millis(ms));
        }
        self.only(window, self.fault.has_a_window(), "window_ms")?;
        // A forced expiry's race window may be nothing at all.
        let least = i64::from(self.fault != Fault::ForcedExpiry);
        if let Some(v) = window {
            let ms = self
                .at
                .int(&Some(v.clone()), "window_ms", least, 600_000, 0)?;
            f.window = Some(Duration::from_millis(ms));
        }
        Ok(())
    }
}

/// Where `key = ...` is in the `[workload]` section starting at
/// `section` (toml::Table keeps no spans for its keys); the section's own
/// span when the key is not found.
/// Where `key = ...` is inside the value spanning `value` (an inline
/// table, or a table of its own), for an error that points at the key;
/// the value's span if it is not found.
fn inline_key_span(text: &str, value: std::ops::Range<usize>, key: &str) -> std::ops::Range<usize> {
    let start = value.start.min(text.len());
    let end = value.end.clamp(start, text.len());
    let inner = &text[start..end];
    let found = inner.match_indices(key).find(|&(i, _)| {
        let before = inner[..i].chars().next_back();
        let after = inner[i + key.len()..].trim_start();
        before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'))
            && after.starts_with('=')
    });
    match found {
        Some((i, _)) => start + i..start + i + key.len(),
        None => key_span(text, value, key),
    }
}

fn key_span(text: &str, section: std::ops::Range<usize>, key: &str) -> std::ops::Range<usize> {
    let start = section.start.min(text.len());
    let rest = &text[start..];
    // The table's span may cover its header only: read on to the next
    // table header.
    let end = rest
        .match_indices("\n[")
        .next()
        .map_or(text.len(), |(i, _)| start + i + 1);
    let mut offset = start;
    for line in text[start..end].split_inclusive('\n') {
        let indent = line.len() - line.trim_start().len();
        let after = &line[indent..];
        if after
            .strip_prefix(key)
            .is_some_and(|r| r.trim_start().starts_with('='))
        {
            return offset + indent..offset + indent + key.len();
        }
        offset += line.len();
    }
    section
}

impl RawFaults {
    fn faults_at(&self) -> Vec<&RawAt> {
        self.at.iter().map(|a| a.get_ref()).collect()
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
