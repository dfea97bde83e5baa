//! The renderers' input: what a seed's page and a run's index show, as
//! plain data (serde both ways, so a report can also be kept as JSON and
//! drawn again).
//!
//! Times are simulated microseconds since the run's start. Operations are
//! named by an [`OpId`] unique in the report; everything that points at
//! operations (a failed check's `ops`, the linearizability section's
//! prefix, minimal sub-history and stuck operations) does so by id, and
//! the page derives each bar's highlighting from those lists, so one fact
//! is stated once and a bar can never disagree with the section that
//! explains it.

use serde::{Deserialize, Serialize};

/// An operation's id, unique within one [`SeedReport`].
pub type OpId = u64;

/// One seed's report: the verdicts, the timeline of every client's
/// operations with the faults across it, and the linearizability findings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SeedReport {
    /// The page's title, e.g. "lock.toml seed 17".
    pub title: String,
    /// The scenario (its file, as the user named it).
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// The commit the run was made on, if known.
    pub commit: Option<String>,
    /// The one command that replays this seed.
    pub replay_command: String,
    /// The run's digest, as printed by `zoosim replay`.
    pub digest: String,
    /// The run's length, simulated milliseconds.
    pub sim_ms: u64,
    /// What the seed drew or was given (name, value), e.g. ("clients", "5").
    pub params: Vec<(String, String)>,
    /// The verdict of every oracle and contract guarantee, failed or not.
    pub verdicts: Vec<CheckVerdict>,
    /// The run's counters (the recipe's, the faults', the ensemble's).
    pub counters: Vec<Counter>,
    /// One lane per client (and optionally per server), top to bottom.
    pub lanes: Vec<Lane>,
    /// Faults, partitions, elections: drawn as bands across every lane.
    pub spans: Vec<Span>,
    /// The linearizability checker's findings, one section per partition
    /// of the history it checked (one when the model does not partition).
    pub lin: Vec<LinSection>,
    /// Set when the page is about a history file checked on its own
    /// (`zoosim lin`), not a seed run: the header names the file, its
    /// format and model instead of a scenario and seed.
    #[serde(default)]
    pub file: Option<HistoryFile>,
    /// Set when no check failed but ZooKeeper's contract was left
    /// undecided (its check ran out of budget): why. The page's badge
    /// then says UNDECIDED, with the reason, never PASS.
    #[serde(default)]
    pub undecided: Option<String>,
}

/// A history file checked on its own: what its page says it is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HistoryFile {
    /// Its path, as given on the command line.
    pub path: String,
    /// Its format, in words (e.g. "Jepsen EDN operation maps").
    pub format: String,
    /// The model it was checked against (e.g. "kv").
    pub model: String,
    /// What the timeline's time stands for when it is not the run's
    /// simulated time, e.g. "the file's line numbers (1 s = 1 line)";
    /// `None`: a recorded run's simulated time.
    pub time: Option<String>,
}

/// One oracle's or contract guarantee's verdict.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckVerdict {
    /// The property, e.g. "fenced-exclusion" or "writes-linearizable".
    pub name: String,
    /// Whether it held.
    pub passed: bool,
    /// What it says (when passed) or how it failed, in words, e.g. "two
    /// holders: client 4 and client 1 …".
    pub detail: String,
    /// The operations the failure involves: outlined on the timeline.
    pub ops: Vec<OpId>,
}

/// A named count, with the goal it should reach if it has one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counter {
    /// The counter's name, e.g. "fault:partition".
    pub name: String,
    /// Its value.
    pub value: u64,
    /// The least value wanted (a coverage goal), if any.
    pub goal: Option<u64>,
}

/// What a lane stands for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LaneKind {
    /// A client's operations.
    #[default]
    Client,
    /// A server's (role changes, what it served).
    Server,
}

/// One row of the timeline: a client's (or server's) operations and the
/// instant events it saw.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Lane {
    /// E.g. "client 4 (session 0x1000002)" or "server 2".
    pub label: String,
    /// Client or server.
    pub kind: LaneKind,
    /// Its operations; overlapping ones are drawn on stacked rows.
    pub ops: Vec<OpBar>,
    /// Watch and session events, role changes: instant marks.
    pub points: Vec<Point>,
}

/// How an operation ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpStatus {
    /// Completed successfully.
    #[default]
    Ok,
    /// Completed with an error that says it did not take effect
    /// (NodeExists, NoNode, BadVersion, …; Jepsen's `:fail`).
    Failed,
    /// May or may not have taken effect, at any time after its call
    /// (ConnectionLoss, a lost reply, never returned).
    Indeterminate,
}

/// One operation, from its call to its reply.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpBar {
    /// Its id, unique in the report.
    pub id: OpId,
    /// When it was called (simulated µs).
    pub start_us: u64,
    /// When its reply arrived; `None`: never (drawn to the end of the run,
    /// open-ended).
    pub end_us: Option<u64>,
    /// Short: the op and its result, e.g. "create /lock/guid-…-lock- →
    /// /lock/…0003".
    pub label: String,
    /// How it ended.
    pub status: OpStatus,
    /// The server it went to, if known.
    pub server: Option<String>,
    /// The zxid the reply carried, if any.
    pub zxid: Option<i64>,
    /// Longer text for the hover and the table: full arguments, reply or
    /// error.
    pub detail: String,
    /// The model's state just before it took effect (in the linearization
    /// found), when the checker gives one. Keep it short (a diff or the
    /// touched part): it is written into the page for every operation.
    pub state_before: Option<String>,
    /// The model's state just after.
    pub state_after: Option<String>,
}

/// What an instant mark stands for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PointKind {
    /// A watch event delivered to the client.
    Watch,
    /// A session event (connected, disconnected, expired, …).
    Session,
    /// Anything else (a server's role change, a recipe's outcome).
    #[default]
    Other,
}

/// An instant event on a lane.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// When (simulated µs).
    pub at_us: u64,
    /// What, e.g. "NodeDeleted /lock/…0002".
    pub label: String,
    /// Its kind (its mark's shape and colour).
    pub kind: PointKind,
}

/// What a band across the lanes stands for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpanKind {
    /// A server down (crashed, until restarted).
    Crash,
    /// A network partition.
    Partition,
    /// Other network faults: clogs, delays, lost replies, cut-off clients.
    Network,
    /// A paused client or server.
    Pause,
    /// An election: no leader until it ends.
    Election,
    /// Anything else.
    #[default]
    Other,
}

/// A fault, partition or election: a band across every lane.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// When it began (simulated µs).
    pub start_us: u64,
    /// When it ended; `None`: it lasted to the end of the run.
    pub end_us: Option<u64>,
    /// E.g. "partition {1,2} | {3}" or "election: server 3 leads (epoch 2)".
    pub label: String,
    /// Its kind (its colour).
    pub kind: SpanKind,
}

/// The linearizability checker's verdict on one history (or partition).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinVerdict {
    /// Some order of the operations explains every reply.
    #[default]
    Linearizable,
    /// None does.
    NotLinearizable,
    /// The budget ran out first.
    Unknown,
}

/// One step of the longest linearizable prefix.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrefixStep {
    /// The operation linearized at this step.
    pub op: OpId,
    /// The model's state after it.
    pub state_after: String,
}

/// The linearizability checker's findings on one history or partition.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinSection {
    /// The partition (e.g. a key), `None` when the history was checked
    /// whole.
    pub partition: Option<String>,
    /// The sequential model, e.g. "zookeeper" or "cas-register".
    pub model: String,
    /// The verdict.
    pub verdict: LinVerdict,
    /// In words: why, or what was explored before the budget ran out.
    pub detail: String,
    /// The longest prefix the checker could linearize, in its order, with
    /// the model's state after each step.
    pub longest_prefix: Vec<PrefixStep>,
    /// The operations none of which can be linearized next after that
    /// prefix: where the history stops making sense.
    pub cannot_linearize_next: Vec<OpId>,
    /// A small subset of the operations that is still not linearizable
    /// (the minimal failing sub-history); shown first on the page.
    pub minimal: Vec<OpId>,
    /// Why a history that is not linearizable has no minimal failing
    /// sub-history (e.g. shrinking could not confirm one within its
    /// budget): said where it would be.
    #[serde(default)]
    pub minimal_note: Option<String>,
}

/// A whole run's index page: per scenario, its verdicts and their seeds,
/// and its coverage counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexReport {
    /// The page's title.
    pub title: String,
    /// The command the run was made with, if known.
    pub command: Option<String>,
    /// The commit the run was made on, if known.
    pub commit: Option<String>,
    /// One row group per scenario, in the order to show them.
    pub scenarios: Vec<ScenarioRow>,
    /// The rows are history files checked on their own (`zoosim lin`),
    /// one page each, not scenarios run over seeds: the page speaks of
    /// files and their reports, and shows no seed numbers.
    #[serde(default)]
    pub files: bool,
}

/// One scenario's results in a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScenarioRow {
    /// The scenario (its file, as the user named it).
    pub scenario: String,
    /// What it is expected to do, in words, e.g. "passes every seed" or
    /// "fails no-herd within 40 seeds".
    pub expectation: String,
    /// Whether it did.
    pub as_expected: bool,
    /// How many seeds were run.
    pub seeds_run: u64,
    /// Per verdict ("pass", or a failed property's name), its seeds.
    /// A seed in `undecided` is in no "pass" row.
    pub verdicts: Vec<VerdictRow>,
    /// Seeds that passed with ZooKeeper's contract undecided, with why.
    #[serde(default)]
    pub undecided: Vec<UndecidedSeed>,
    /// Coverage counters summed over the seeds, with their goals.
    pub coverage: Vec<Counter>,
}

/// The seeds of one scenario that came to one verdict.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VerdictRow {
    /// "pass", or the failed property's name.
    pub verdict: String,
    /// Whether this is a passing verdict.
    pub passed: bool,
    /// The seeds, in order.
    pub seeds: Vec<SeedLink>,
}

/// A seed that passed with ZooKeeper's contract undecided.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndecidedSeed {
    /// The seed, and its report if one was written.
    pub seed: SeedLink,
    /// Why the contract check did not decide.
    pub why: String,
}

/// A seed, and its report if one was written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedLink {
    /// The seed.
    pub seed: u64,
    /// Its report, relative to the index page (e.g. "lock/seed-17.html").
    /// Only relative paths are linked; anything else (a scheme such as
    /// `javascript:`, an absolute path) is shown as text.
    pub href: Option<String>,
}

impl SeedReport {
    /// Whether the seed failed: a check failed, or a history was found
    /// not linearizable.
    pub fn failed(&self) -> bool {
        self.verdicts.iter().any(|v| !v.passed)
            || self
                .lin
                .iter()
                .any(|l| l.verdict == LinVerdict::NotLinearizable)
    }

    /// The end of the timeline (simulated µs): the run's end or the last
    /// thing drawn, whichever is later.
    pub fn end_us(&self) -> u64 {
        let ops = self
            .lanes
            .iter()
            .flat_map(|l| &l.ops)
            .map(|o| o.end_us.unwrap_or(0).max(o.start_us));
        let points = self.lanes.iter().flat_map(|l| &l.points).map(|p| p.at_us);
        let spans = self
            .spans
            .iter()
            .map(|s| s.end_us.unwrap_or(0).max(s.start_us));
        ops.chain(points)
            .chain(spans)
            .fold(self.sim_ms.saturating_mul(1000), u64::max)
    }

    /// Every operation with its lane's index, in lane order.
    pub fn ops(&self) -> impl Iterator<Item = (usize, &OpBar)> {
        self.lanes
            .iter()
            .enumerate()
            .flat_map(|(i, l)| l.ops.iter().map(move |o| (i, o)))
    }

    /// What is inconsistent in the data, in words (the page shows these
    /// rather than refusing to render): duplicate operation ids, ids that
    /// name no operation, replies before their calls.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut ids = std::collections::BTreeMap::new();
        for (lane, op) in self.ops() {
            if let Some(first) = ids.insert(op.id, lane) {
                out.push(format!(
                    "operation id {} is used twice (lanes \"{}\" and \"{}\"): hover and links show one of them",
                    op.id, self.lanes[first].label, self.lanes[lane].label
                ));
            }
            if op.end_us.is_some_and(|e| e < op.start_us) {
                out.push(format!(
                    "operation {} ends ({} µs) before it starts ({} µs): drawn as an instant",
                    op.id,
                    op.end_us.unwrap_or(0),
                    op.start_us
                ));
            }
        }
        let mut unknown = |what: &str, id: OpId| {
            if !ids.contains_key(&id) {
                out.push(format!("{what} names operation {id}, which no lane has"));
            }
        };
        for v in &self.verdicts {
            for &id in &v.ops {
                unknown(&format!("check \"{}\"", v.name), id);
            }
        }
        for l in &self.lin {
            let what = match &l.partition {
                Some(p) => format!("the linearizability section of partition \"{p}\""),
                None => "the linearizability section".to_string(),
            };
            for id in l
                .longest_prefix
                .iter()
                .map(|s| s.op)
                .chain(l.cannot_linearize_next.iter().copied())
                .chain(l.minimal.iter().copied())
            {
                unknown(&what, id);
            }
        }
        for s in &self.spans {
            if s.end_us.is_some_and(|e| e < s.start_us) {
                out.push(format!(
                    "span \"{}\" ends before it starts: drawn as an instant",
                    s.label
                ));
            }
        }
        out
    }
}

impl SeedLink {
    /// The href if it is a plain relative path (no scheme, not absolute,
    /// no `..` out of the report directory); else `None`.
    pub fn safe_href(&self) -> Option<&str> {
        let h = self.href.as_deref()?;
        let first = h.split(['/', '?', '#']).next().unwrap_or("");
        let ok = !h.is_empty()
            && !h.starts_with('/')
            && !h.starts_with('\\')
            && !first.contains(':')
            && !h.split(['/', '\\']).any(|seg| seg == "..")
            && !h.chars().any(|c| c.is_control() || c.is_whitespace());
        ok.then_some(h)
    }
}
