//! `--report DIR` of `zoosim run`, `replay`, `lin` and `merge`: the
//! adapters from what a run or a checker produced (a seed's outcome, its
//! recorded history, the contract check's report, the linearizability
//! checker's verdict, a sweep's summary) to the report's data model
//! ([`crate::report`]), and the files they are written to.
//!
//! The renderer is pure and knows nothing of scenarios; everything that
//! knows both sides lives here, one function per source.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::check::contract::{self, ContractReport, ContractVerdict};
use crate::check::lin::{Checked, Model, Operation, Outcome as LinOutcome, Step, Verdict};
use crate::history::{Event, FaultRecord, History, Outcome, Role};
use crate::report::{
    self, CheckVerdict, Counter, HistoryFile, IndexReport, Lane, LaneKind, LinSection, LinVerdict,
    OpBar, OpStatus, Point, PointKind, PrefixStep, ScenarioRow, SeedLink, SeedReport, Span,
    SpanKind, UndecidedSeed, VerdictRow,
};
use crate::scenario::output;

/// Refuses a `--report` directory that is missing, not a directory or not
/// writable, before any seed runs (as `--history` does).
pub(super) fn check_dir(dir: &Path) -> Result<(), String> {
    super::histories::check_dir_for("--report", dir)
}

/// A path as a `file://` URL a terminal can open (bytes outside the
/// unreserved set and `/` percent-encoded), absolute.
pub(super) fn file_url(path: &Path) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut url = String::from("file://");
    for b in abs.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            url.push(b as char);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    url
}

/// Where a seed's page goes, relative to the report directory:
/// `<scenario>/seed-<S>.html` (the JSON summary beside it, `.json`).
pub(super) fn seed_href(scenario: &str, seed: u64) -> String {
    format!("{}/seed-{seed}.html", file_safe(scenario))
}

/// A name made safe as one path segment (and as a relative link).
fn file_safe(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    match s.trim_start_matches('.') {
        "" => "_".to_owned(),
        t => t.to_owned(),
    }
}

/// Writes `r`'s page and JSON summary at `dir/href` (and `.json`), making
/// the subdirectory; returns the page's path.
pub(super) fn write_seed(dir: &Path, href: &str, r: &SeedReport) -> Result<PathBuf, String> {
    let page = dir.join(href);
    if let Some(parent) = page.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("{}: cannot create: {e}", parent.display()))?;
        // A link planted there would take the pages elsewhere.
        output::check_dir(parent).map_err(|e| e.to_string())?;
    }
    output::write(&page, report::render_seed(r)).map_err(|e| format!("the report: {e}"))?;
    let json = page.with_extension("json");
    output::write(&json, report::seed_summary_json(r))
        .map_err(|e| format!("the report's summary: {e}"))?;
    Ok(page)
}

/// Writes the index page and its JSON summary into `dir`; returns the
/// page's path.
pub(super) fn write_index(dir: &Path, r: &IndexReport) -> Result<PathBuf, String> {
    let page = dir.join("index.html");
    output::write(&page, report::render_index(r)).map_err(|e| format!("the index: {e}"))?;
    let json = dir.join("index.json");
    output::write(&json, report::index_summary_json(r))
        .map_err(|e| format!("the index's summary: {e}"))?;
    Ok(page)
}

// ---------------------------------------------------------------------------
// A recorded history: lanes, instant marks, bands.

/// The timeline of a recorded history: one lane per scenario client (in
/// client order; sessions without a client after them), one per server
/// with its role changes; faults and elections as bands.
///
/// Every value from the history is cut short on the page (`crate::quote`:
/// a 50 MB value drawn whole made a page of hundreds of MB); an
/// operation's hover says so, and how to see it whole: `zoosim history
/// FILE --op ID`, where the history's `file` is known.
pub(super) fn timeline(h: &History, file: Option<&str>) -> (Vec<Lane>, Vec<Span>) {
    // Lanes: by client number, or by handle for sessions outside them.
    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Who {
        Client(u32),
        Handle(u32),
    }
    let who = |a: &crate::history::Actor| match a.client {
        Some(c) => Who::Client(c),
        None => Who::Handle(a.handle),
    };
    let mut lanes: BTreeMap<Who, Lane> = BTreeMap::new();
    let mut sessions: BTreeMap<Who, BTreeSet<String>> = BTreeMap::new();
    let us = |ns: u64| ns / 1_000;
    for p in h.ops() {
        let i = p.invoke;
        let w = who(&i.actor);
        if let Some(s) = i.session {
            sessions.entry(w).or_default().insert(s.to_string());
        }
        let mut cut = false;
        let (status, label, reply_detail, server, zxid, end_us) = match p.complete {
            None => (
                OpStatus::Indeterminate,
                format!("{} → (no reply)", op_words(&i.op)),
                "no reply before the history ended".to_owned(),
                None,
                None,
                None,
            ),
            Some((at, c)) => {
                let status = if c.outcome.is_indeterminate() {
                    OpStatus::Indeterminate
                } else if c.outcome.error().is_some() {
                    OpStatus::Failed
                } else {
                    OpStatus::Ok
                };
                (
                    status,
                    format!("{} → {}", op_words(&i.op), outcome_words(&c.outcome)),
                    format!(
                        "reply: {}",
                        fields(at, Event::Complete(c.clone()), &mut cut)
                    ),
                    c.server.map(|s| s.to_string()),
                    c.zxid,
                    Some(us(at)),
                )
            }
        };
        let session = i.session.map_or("none yet".to_owned(), |s| s.to_string());
        let label = {
            let c = crate::quote::Cut::of(&label, LABEL_CHARS);
            cut |= c.was_cut();
            c.finish(None)
        };
        let mut detail = format!(
            "handle {} · session {session}\ncall: {}\n{reply_detail}",
            i.actor.handle,
            fields(p.invoked_ns, Event::Invoke(i.clone()), &mut cut)
        );
        if cut {
            detail += &match file {
                Some(f) => format!(
                    "\nvalues cut short here; whole: zoosim history {} --op {}",
                    super::shell_word(f),
                    i.id.0
                ),
                None => "\nvalues cut short here (--history writes them whole)".to_owned(),
            };
        }
        lanes.entry(w).or_default().ops.push(OpBar {
            id: i.id.0,
            start_us: us(p.invoked_ns),
            end_us,
            label,
            status,
            server,
            zxid,
            detail,
            state_before: None,
            state_after: None,
        });
    }
    let mut servers: BTreeMap<u32, Lane> = (0..h.meta.servers)
        .map(|s| {
            (
                s,
                Lane {
                    label: format!("server {s}"),
                    kind: LaneKind::Server,
                    ..Lane::default()
                },
            )
        })
        .collect();
    let mut spans = Vec::new();
    let mut elections = Elections::default();
    let end_ns = h.records.last().map_or(0, |r| r.at_ns);
    for r in &h.records {
        match &r.event {
            Event::Watch(w) => lanes.entry(who(&w.actor)).or_default().points.push(Point {
                at_us: us(r.at_ns),
                label: crate::quote::cut(
                    &format!("{:?} {}", w.event.event_type, w.event.path),
                    LABEL_CHARS,
                )
                .into_owned(),
                kind: PointKind::Watch,
            }),
            Event::Session(s) => {
                let w = who(&s.actor);
                if let Some(id) = s.session {
                    sessions.entry(w).or_default().insert(id.to_string());
                }
                let mut label = format!("{:?}", s.state);
                if let Some(server) = s.server {
                    label += &format!(" to server {server}");
                }
                if let Some(id) = s.session {
                    label += &format!(" (session {id})");
                }
                lanes.entry(w).or_default().points.push(Point {
                    at_us: us(r.at_ns),
                    label,
                    kind: PointKind::Session,
                });
            }
            Event::Fault(f) if !f.skipped => spans.push(fault_span(us(r.at_ns), f, h.meta.servers)),
            Event::Role(role) => {
                let label = match role.role {
                    Role::Looking => "looking".to_owned(),
                    Role::Leading => "leading".to_owned(),
                    Role::Following(l) => format!("following {l}"),
                };
                servers.entry(role.server).or_default().points.push(Point {
                    at_us: us(r.at_ns),
                    label: format!(
                        "{label} (epoch {}, process {}{})",
                        role.epoch,
                        role.process,
                        if role.serving { ", serving" } else { "" }
                    ),
                    kind: PointKind::Other,
                });
                if let Some(span) = elections.change(us(r.at_ns), role) {
                    spans.push(span);
                }
            }
            _ => {}
        }
    }
    if let Some(start) = elections.open {
        spans.push(Span {
            start_us: start,
            end_us: None,
            label: "election: no leader to the end".to_owned(),
            kind: SpanKind::Election,
        });
    }
    let _ = end_ns;
    let mut out: Vec<Lane> = lanes
        .into_iter()
        .map(|(w, mut lane)| {
            let names = sessions.remove(&w).unwrap_or_default();
            let names: Vec<String> = names.into_iter().collect();
            let base = match w {
                Who::Client(c) => format!("client {c}"),
                Who::Handle(h) => format!("handle {h}, no client"),
            };
            lane.label = match names.len() {
                0 => base,
                1 => format!("{base} (session {})", names[0]),
                _ => format!("{base} (sessions {})", names.join(", ")),
            };
            lane.kind = LaneKind::Client;
            lane
        })
        .collect();
    out.extend(servers.into_values());
    (out, spans)
}

/// Elections from role changes: a band from the moment no server is a
/// serving leader to the moment one is.
#[derive(Default)]
struct Elections {
    roles: BTreeMap<u32, (Role, bool)>,
    /// An election under way since (µs).
    open: Option<u64>,
    /// A leader has been seen (the start-up election is not drawn).
    seen_leader: bool,
}

impl Elections {
    fn change(&mut self, at_us: u64, role: &crate::history::RoleChange) -> Option<Span> {
        self.roles.insert(role.server, (role.role, role.serving));
        let leader = self
            .roles
            .iter()
            .find(|(_, (r, serving))| *r == Role::Leading && *serving)
            .map(|(s, _)| *s);
        match (leader, self.open) {
            (None, None) if self.seen_leader => {
                self.open = Some(at_us);
                None
            }
            (Some(s), Some(start)) => {
                self.open = None;
                Some(Span {
                    start_us: start,
                    end_us: Some(at_us),
                    label: format!("election: server {s} leads (epoch {})", role.epoch),
                    kind: SpanKind::Election,
                })
            }
            (Some(_), None) => {
                self.seen_leader = true;
                None
            }
            _ => None,
        }
    }
}

/// A fault as a band: its kind, whom it hit, for how long.
fn fault_span(at_us: u64, f: &FaultRecord, servers: u32) -> Span {
    let side = |s: &[u32]| {
        let v: Vec<String> = s.iter().map(u32::to_string).collect();
        format!("{{{}}}", v.join(","))
    };
    let rest = |s: &[u32]| -> Vec<u32> { (0..servers).filter(|x| !s.contains(x)).collect() };
    let p = &f.params;
    let mut label = crate::quote::cut(&f.fault, crate::quote::WORD).into_owned();
    if let Some(split) = &p.split {
        label += &format!(" {} | {}", side(split), side(&rest(split)));
    }
    if let Some(down) = &p.servers {
        label += &format!(" servers {}", side(down));
    }
    if let Some(sides) = &p.sides {
        let sides: Vec<String> = sides.iter().map(|s| side(s)).collect();
        label += &format!(" {}", sides.join(" | "));
    }
    if let Some(c) = p.client {
        label += &format!(" client {c}");
    }
    match (p.server, p.to) {
        (Some(a), Some(b)) => label += &format!(" server {a} → {b}"),
        (Some(a), None) => label += &format!(" server {a}"),
        _ => {}
    }
    if p.delay_ms() > 0 {
        label += &format!(" +{} ms", p.delay_ms());
    }
    let mut window_ms = p.window_ms();
    let flips = p.flips_ms();
    if !flips.is_empty() {
        let sides: Vec<String> = flips.iter().map(|(s, _)| side(s)).collect();
        label += &format!(" flips {}", sides.join(" → "));
        window_ms = window_ms.max(flips.iter().map(|(_, ms)| ms).sum());
    }
    // Exhaustive over the fault kinds: a new one must say what band it is.
    use crate::fault::Fault as F;
    let kind = match F::from_name(&f.fault) {
        Some(
            F::ServerCrash
            | F::LeaderCrash
            | F::ClientCrash
            | F::ServerKill
            | F::MajorityCrash
            | F::EnsembleCrash
            | F::NewLeaderCrash,
        ) => SpanKind::Crash,
        Some(
            F::Partition
            | F::FlippingPartitions
            | F::LeaderIsolated
            | F::ThreeWayPartition
            | F::LongPartition,
        ) => SpanKind::Partition,
        Some(
            F::OneWayClog
            | F::LinkDelay
            | F::ClientCutOff
            | F::ClientIsolated
            | F::BrokenConnection
            | F::LostWriteReply,
        ) => SpanKind::Network,
        Some(F::ShortClientPause | F::LongClientPause | F::ServerPause) => SpanKind::Pause,
        // An expiry, or a kind this build does not know (a history from
        // elsewhere).
        Some(F::ForcedExpiry) | None => SpanKind::Other,
    };
    // Each lasts its window, an instant when it has none (a crashed
    // client: its lane shows it stopped; a band to the end of the run
    // would cover every other lane too).
    let end_us = Some(at_us.saturating_add(window_ms.saturating_mul(1000)));
    Span {
        start_us: at_us,
        end_us,
        label,
        kind,
    }
}

/// The most characters of an operation's label on a page.
const LABEL_CHARS: usize = 200;

/// A record's own fields as in its JSON line in the history file (every
/// argument of the op, every field of the reply), without those the page
/// shows elsewhere (kind, time, ids, actor, server, zxid); each value cut
/// short past [`crate::quote::VALUE`] characters (`cut` set if one was).
fn fields(at_ns: u64, event: Event, cut: &mut bool) -> String {
    let line = crate::history::json::record_line(&crate::history::Record { at_ns, event });
    match serde_json::from_str::<serde_json::Value>(&line) {
        Ok(serde_json::Value::Object(mut m)) => {
            for k in [
                "kind", "t", "id", "client", "handle", "session", "server", "zxid",
            ] {
                m.remove(k);
            }
            let parts: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k} {}", json_shown(v, cut)))
                .collect();
            parts.join(" · ")
        }
        _ => {
            let c = crate::quote::Cut::of(&line, FIELDS_CHARS);
            *cut |= c.was_cut();
            c.finish(None)
        }
    }
}

/// The most characters of one field of a record on a page (an op's
/// arguments: each string in it cut on its own first).
const FIELDS_CHARS: usize = 1_000;

/// A JSON value as a record's field shows it: each string (node data, a
/// path) cut short past [`crate::quote::VALUE`] characters, so that an
/// op's other arguments stay in sight beside a long one; the whole cut
/// past [`FIELDS_CHARS`] (`cut` set where anything was).
fn json_shown(v: &serde_json::Value, cut: &mut bool) -> String {
    use serde_json::Value;
    let whole = match v {
        Value::String(s) => {
            let mut c = crate::quote::Cut::new(crate::quote::VALUE);
            let _ = std::fmt::Write::write_str(&mut c, s);
            *cut |= c.was_cut();
            return c.finish_quoted(None);
        }
        Value::Object(m) => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k:?}:{}", json_shown(v, cut)))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => {
            let parts: Vec<String> = a.iter().map(|v| json_shown(v, cut)).collect();
            format!("[{}]", parts.join(","))
        }
        other => other.to_string(),
    };
    let c = crate::quote::Cut::of(&whole, FIELDS_CHARS);
    *cut |= c.was_cut();
    c.finish(None)
}

fn op_words(op: &crate::history::HistOp) -> String {
    match op {
        crate::history::HistOp::Zk(op) => contract::model::describe(op),
        crate::history::HistOp::CloseSession => "close".to_owned(),
    }
}

fn outcome_words(o: &Outcome) -> String {
    match o {
        Outcome::Ok(None) => "ok".to_owned(),
        Outcome::Ok(Some(r)) => match r.multi_error() {
            Some(e) => format!("{e:?}"),
            None => contract::model::describe_reply(Ok(r)),
        },
        Outcome::Err(e) => format!("{e:?}"),
    }
}

// ---------------------------------------------------------------------------
// The contract check's report.

/// The contract's verdicts (every guarantee judged: those before the one
/// that fails held on their own; later ones were not judged and are not
/// listed) and its section (the longest prefix the search could order and
/// the operations none of which can come next).
pub(super) fn contract_parts(c: &ContractReport) -> (Vec<CheckVerdict>, LinSection) {
    let mut verdicts = Vec::new();
    let mut section = LinSection {
        partition: None,
        model: "zookeeper (contract)".to_owned(),
        ..LinSection::default()
    };
    match &c.verdict {
        ContractVerdict::Holds => {
            for g in contract::GUARANTEES {
                verdicts.push(CheckVerdict {
                    name: g.name.to_owned(),
                    passed: true,
                    detail: g.what.to_owned(),
                    ops: Vec::new(),
                });
            }
            section.verdict = LinVerdict::Linearizable;
            section.detail = format!(
                "every guarantee of ZooKeeper's contract holds: {} sessions, {} operations placed, {}",
                c.sessions,
                c.placed,
                if c.fast {
                    "ordered by the replies' zxids (checked step by step on the model)".to_owned()
                } else {
                    format!("decided after {} search steps", c.steps)
                }
            );
        }
        ContractVerdict::Broken(b) if b.guarantee.name == contract::guarantees::CONTRACT.name => {
            // Proved broken, but which guarantee fails first is not known:
            // no guarantee is shown holding or failing on its own.
            verdicts.push(CheckVerdict {
                name: b.guarantee.name.to_owned(),
                passed: false,
                detail: b.detail.clone(),
                ops: b.ops.iter().map(|&o| o as u64).collect(),
            });
            section.verdict = LinVerdict::NotLinearizable;
            section.detail = format!(
                "the contract fails (which guarantee first was not determined within the \
                 budget): no order of the sessions' steps replays on ZooKeeper's data tree; \
                 the longest that does has {} operations",
                b.prefix.len()
            );
            broken_prefix(b, &mut section);
        }
        ContractVerdict::Broken(b) => {
            for g in contract::GUARANTEES {
                let broken = g.name == b.guarantee.name;
                verdicts.push(CheckVerdict {
                    name: g.name.to_owned(),
                    passed: !broken,
                    detail: if broken {
                        b.detail.clone()
                    } else {
                        format!("holds on its own: {}", g.what)
                    },
                    ops: if broken {
                        b.ops.iter().map(|&o| o as u64).collect()
                    } else {
                        Vec::new()
                    },
                });
                if broken {
                    break;
                }
            }
            section.verdict = LinVerdict::NotLinearizable;
            section.detail = format!(
                "{} fails: no order of the sessions' steps replays on ZooKeeper's data tree; \
                 the longest that does has {} operations",
                b.guarantee.name,
                b.prefix.len()
            );
            broken_prefix(b, &mut section);
        }
        ContractVerdict::Unknown(why) => {
            section.verdict = LinVerdict::Unknown;
            section.detail = format!("the contract check did not decide: {why}");
        }
        ContractVerdict::CheckerFault(why) => {
            verdicts.push(CheckVerdict {
                name: contract::guarantees::CHECKER.name.to_owned(),
                passed: false,
                detail: why.clone(),
                ops: Vec::new(),
            });
            section.verdict = LinVerdict::Unknown;
            section.detail = format!("the contract checker failed, so nothing was decided: {why}");
        }
    }
    (verdicts, section)
}

/// A broken contract's longest prefix and the operations none of which
/// can come next, into the report's section.
fn broken_prefix(b: &contract::Broken, section: &mut LinSection) {
    section.longest_prefix = b
        .prefix
        .iter()
        .map(|&op| PrefixStep {
            op: op as u64,
            state_after: String::new(),
        })
        .collect();
    section.cannot_linearize_next = b.ops.iter().map(|&o| o as u64).collect();
}

/// How many of the contract's longest prefix's last operations show the
/// model's states (the data tree before and after them) on their hover and
/// in the prefix's table: what the stuck operations could not follow. The
/// whole prefix's states would repeat the tree thousands of times on a
/// long run's page.
const CONTRACT_STATES_SHOWN: usize = 8;

/// Puts the contract's model states on the operations that explain a
/// broken guarantee: the last [`CONTRACT_STATES_SHOWN`] of the longest
/// prefix (before and after each, in the order found) and the operations
/// none of which can come next (the state they could not be placed in).
pub(super) fn contract_states(c: &ContractReport, lanes: &mut [Lane], section: &mut LinSection) {
    let ContractVerdict::Broken(b) = &c.verdict else {
        return;
    };
    let mut states: BTreeMap<u64, (String, Option<String>)> = BTreeMap::new();
    if b.prefix_states.len() == b.prefix.len() {
        let from = b.prefix.len().saturating_sub(CONTRACT_STATES_SHOWN);
        for (i, (&op, (before, after))) in b.prefix.iter().zip(&b.prefix_states).enumerate() {
            if i >= from {
                states.insert(op as u64, (before.clone(), Some(after.clone())));
                if let Some(step) = section.longest_prefix.get_mut(i) {
                    step.state_after = after.clone();
                }
            }
        }
    }
    if let Some(stuck) = &b.stuck_state {
        for &op in &b.ops {
            states
                .entry(op as u64)
                .or_insert_with(|| (stuck.clone(), None));
        }
    }
    for o in lanes.iter_mut().flat_map(|l| l.ops.iter_mut()) {
        if let Some((before, after)) = states.remove(&o.id) {
            o.state_before = Some(before);
            o.state_after = after;
        }
    }
}

/// A recorded zoosim history checked against the contract alone (`zoosim
/// lin --model zookeeper`): its timeline and the contract's verdicts.
pub(super) fn history_report(
    file: &str,
    h: &History,
    c: &ContractReport,
    replay: String,
) -> SeedReport {
    let (mut lanes, spans) = timeline(h, Some(file));
    let (verdicts, mut section) = contract_parts(c);
    contract_states(c, &mut lanes, &mut section);
    let m = &h.meta;
    // The meta line's names, cut short as every value from the file is.
    let name = |s: &str| crate::quote::cut(s, crate::quote::WORD).into_owned();
    SeedReport {
        title: format!("{file}: {} seed {}", name(&m.scenario), m.seed),
        scenario: name(m.file.as_deref().unwrap_or(&m.scenario)),
        seed: m.seed,
        commit: None,
        replay_command: replay,
        digest: String::new(),
        sim_ms: h.records.last().map_or(0, |r| r.at_ns / 1_000_000),
        params: vec![
            (
                "recorded from".to_owned(),
                format!(
                    "{} seed {}",
                    name(m.file.as_deref().unwrap_or(&m.scenario)),
                    m.seed
                ),
            ),
            ("servers".to_owned(), m.servers.to_string()),
            (
                "session timeout".to_owned(),
                format!("{} ms", m.session_timeout_ms),
            ),
            ("recorded by zoosim".to_owned(), name(&m.zoosim)),
        ],
        verdicts,
        counters: Vec::new(),
        lanes,
        spans,
        lin: vec![section],
        file: Some(HistoryFile {
            path: file.to_owned(),
            format: "zoosim history (JSON lines)".to_owned(),
            model: "zookeeper (ZooKeeper's contract)".to_owned(),
            time: None,
        }),
        undecided: None,
    }
}

// ---------------------------------------------------------------------------
// A simulated seed.

/// A seed's page: every oracle's verdict and the contract's, the recipe's
/// events on each client's lane beside its operations, the faults and
/// elections across, the counters with their goals.
#[cfg(madsim)]
pub(super) fn seed_report(
    s: &crate::scenario::spec::Scenario,
    run: &crate::scenario::runner::SeedRun,
    contract: Option<&ContractReport>,
    replay: String,
) -> SeedReport {
    use crate::scenario::verdict::run_properties;
    let (mut lanes, spans) = timeline(&run.history, None);
    let violations: Vec<&crate::check::Violation> = match &run.result {
        Ok(o) => o.violations.iter().collect(),
        Err(v) => vec![v],
    };
    let (contract_verdicts, section) = match contract {
        Some(c) => {
            let (v, mut s) = contract_parts(c);
            contract_states(c, &mut lanes, &mut s);
            (v, Some(s))
        }
        None => (Vec::new(), None),
    };
    // Every property the seed was judged on, failed or held; a contract
    // guarantee is listed once, from the contract's report.
    let contract_names: BTreeSet<&str> =
        contract_verdicts.iter().map(|v| v.name.as_str()).collect();
    let mut verdicts = Vec::new();
    let mut listed = BTreeSet::new();
    let judged = run.result.is_ok();
    let declared = s
        .recipe
        .properties()
        .iter()
        .chain(run_properties::ALL.iter());
    // The operations a failed property's first violation names (the one
    // its detail quotes; a buggy recipe can break one hundreds of times),
    // through the moments the oracle gave (typed, never read from text).
    let ops_of = |name: &str| -> Vec<u64> {
        violations
            .iter()
            .find(|v| v.property == name)
            .map_or_else(Vec::new, |v| moment_ops(&run.history, &v.at))
    };
    for p in declared {
        let failed: Vec<&&crate::check::Violation> =
            violations.iter().filter(|v| v.property == p.name).collect();
        if failed.is_empty() && !judged {
            continue; // a panic: nothing else was judged
        }
        listed.insert(p.name);
        verdicts.push(CheckVerdict {
            name: p.name.to_owned(),
            passed: failed.is_empty(),
            detail: match failed.as_slice() {
                [] => p.what.to_owned(),
                [v] => v.detail.clone(),
                [v, rest @ ..] => format!(
                    "{} (and {} more violation{} of {}: the replay command prints every one)",
                    v.detail,
                    rest.len(),
                    if rest.len() == 1 { "" } else { "s" },
                    p.name
                ),
            },
            ops: ops_of(p.name),
        });
    }
    for v in &violations {
        if !listed.contains(v.property) && !contract_names.contains(v.property) {
            verdicts.push(CheckVerdict {
                name: v.property.to_owned(),
                passed: false,
                detail: v.detail.clone(),
                ops: moment_ops(&run.history, &v.at),
            });
        }
    }
    // Failed first: the page lists them in this order.
    verdicts.extend(contract_verdicts);
    verdicts.sort_by_key(|v| v.passed);

    let mut params = Vec::new();
    let mut counters = Vec::new();
    let (sim_ms, digest) = match &run.result {
        Ok(o) => {
            params.push(("servers".to_owned(), o.drawn.servers.to_string()));
            params.push((
                "syncLimit".to_owned(),
                format!("{} ticks", o.drawn.sync_limit_ticks),
            ));
            params.push(("tickTime".to_owned(), format!("{} ms", o.drawn.tick_ms)));
            params.push((
                "session timeout".to_owned(),
                format!(
                    "{} ms (asked {} ms)",
                    o.drawn.negotiated_timeout_ms(),
                    o.drawn.session_timeout_ms
                ),
            ));
            for (k, v) in &o.drawn.values {
                params.push((k.clone(), v.to_string()));
            }
            params.push(("faults from".to_owned(), format!("{} ms", o.fault_start_ms)));
            params.push((
                "faults injected".to_owned(),
                o.faults.iter().filter(|f| !f.skipped).count().to_string(),
            ));
            // The recipe's own events, on their client's lane.
            for (line, &at_ms) in o.log.iter().zip(&o.event_ms) {
                if let Some((client, what)) = log_event(line) {
                    let label = format!("client {client}");
                    let lane = lanes
                        .iter_mut()
                        .find(|l| l.kind == LaneKind::Client && lane_is(&l.label, &label));
                    let point = Point {
                        at_us: at_ms.saturating_mul(1000),
                        label: what.to_owned(),
                        kind: PointKind::Other,
                    };
                    match lane {
                        Some(l) => l.points.push(point),
                        None => lanes.push(Lane {
                            label,
                            kind: LaneKind::Client,
                            ops: Vec::new(),
                            points: vec![point],
                        }),
                    }
                }
            }
            for (name, &value) in &o.counters {
                counters.push(Counter {
                    name: name.clone(),
                    value,
                    goal: s.coverage.contains(name).then_some(1),
                });
            }
            for g in &s.coverage {
                if !o.counters.contains_key(g) {
                    counters.push(Counter {
                        name: g.clone(),
                        value: 0,
                        goal: Some(1),
                    });
                }
            }
            (o.sim_ms, format!("{:016x}", o.digest))
        }
        Err(_) => (
            run.history
                .records
                .last()
                .map_or(0, |r| r.at_ns / 1_000_000),
            "none (the run panicked)".to_owned(),
        ),
    };
    // Client lanes first, in client order, then the servers.
    lanes.sort_by_key(|l| (l.kind == LaneKind::Server, lane_order(&l.label)));
    SeedReport {
        title: format!("{} seed {}", s.name, run.seed),
        scenario: if s.file.is_empty() {
            s.name.clone()
        } else {
            s.file.clone()
        },
        seed: run.seed,
        commit: crate::scenario::sweep::this_build().1,
        replay_command: replay,
        digest,
        sim_ms,
        params,
        verdicts,
        counters,
        lanes,
        spans,
        lin: section.into_iter().collect(),
        file: None,
        undecided: run.undecided().map(str::to_owned),
    }
}

/// Writes the seed's page and summary under `dir`, with the contract
/// check's report the runner made
/// ([`seed_href`]); returns the page's path.
#[cfg(madsim)]
pub(super) fn write_seed_run(
    dir: &Path,
    scenario: &crate::scenario::spec::Scenario,
    run: &crate::scenario::runner::SeedRun,
    replay: String,
) -> Result<PathBuf, String> {
    // The runner checked the contract as part of the seed's verdict; a
    // seed that panicked has no verdict (its history is partial), and one
    // whose history the check cannot take says so among its violations.
    let r = seed_report(scenario, run, run.contract.as_ref(), replay);
    write_seed(dir, &seed_href(&scenario.name, run.seed), &r)
}

/// The operations behind the moments an oracle's violation names (a
/// holder's acquisition, a waiter's wake-up): per moment, the client's
/// operation whose reply it had last received by then — what it acted
/// on — or, if none had returned yet, the last one it had called. Sorted,
/// without duplicates; a moment of a client with no operations names none.
#[cfg_attr(not(madsim), allow(dead_code))]
fn moment_ops(h: &History, at: &[crate::check::Moment]) -> Vec<u64> {
    if at.is_empty() {
        return Vec::new();
    }
    let by_client = h.ops_by_client();
    let mut out = BTreeSet::new();
    for m in at {
        let Some(ops) = u32::try_from(m.client)
            .ok()
            .and_then(|c| by_client.get(&Some(c)))
        else {
            continue;
        };
        // The moment's millisecond, whole: the recipe logs the event at
        // the instant the reply arrives, in ms.
        let by_ns = (m.at_ms.saturating_add(1)).saturating_mul(1_000_000);
        let replied = ops
            .iter()
            .filter_map(|p| p.complete.map(|(at, _)| (at, p.invoke.id.0)))
            .filter(|&(at, _)| at < by_ns)
            .max();
        let called = || {
            ops.iter()
                .filter(|p| p.invoked_ns < by_ns)
                .map(|p| (p.invoked_ns, p.invoke.id.0))
                .max()
        };
        if let Some((_, id)) = replied.or_else(called) {
            out.insert(id);
        }
    }
    out.into_iter().collect()
}

/// An outcome-log line (`<at> ms  client <c>  <event>`) split into the
/// client and the event; `None` for a line of another shape.
#[cfg_attr(not(madsim), allow(dead_code))]
fn log_event(line: &str) -> Option<(u64, &str)> {
    let (_, rest) = line.split_once(" ms  client ")?;
    let (client, what) = rest.split_once("  ")?;
    Some((client.parse().ok()?, what))
}

/// Whether a lane labelled `label` is `who`'s ("client 4 (session …)" is
/// client 4's, "client 41" is not).
#[cfg_attr(not(madsim), allow(dead_code))]
fn lane_is(label: &str, who: &str) -> bool {
    label == who || label.strip_prefix(who).is_some_and(|r| r.starts_with(" ("))
}

/// Lanes in number order ("client 2" before "client 10"), other labels
/// after.
#[cfg_attr(not(madsim), allow(dead_code))]
fn lane_order(label: &str) -> (u8, u64, String) {
    let num = |p: &str| {
        label
            .strip_prefix(p)
            .and_then(|r| r.split([' ', ',']).next())
            .and_then(|n| n.parse::<u64>().ok())
    };
    match (num("client "), num("server "), num("handle ")) {
        (Some(n), _, _) => (0, n, String::new()),
        (_, _, Some(n)) => (1, n, String::new()),
        (_, Some(n), _) => (2, n, String::new()),
        _ => (3, 0, label.to_owned()),
    }
}

// ---------------------------------------------------------------------------
// A Jepsen history checked by `zoosim lin`.

/// One line of the file per second on the timeline: Jepsen's histories
/// order events by line and carry no times the checker uses.
const LINE_US: u64 = 1_000_000;

/// The most characters of a model's state on a page.
const STATE_CHARS: usize = 1_000;

/// A Jepsen history's page: a lane per process, each operation from its
/// invocation's line to its completion's; per partition the verdict, the
/// longest linearizable prefix with the model's states, the operations
/// none of which can come next, and the minimal failing sub-history
/// (`minimal`: indices into `ops`, of the first failing partition).
#[allow(clippy::too_many_arguments)]
pub(super) fn lin_report<M: Model>(
    file: &str,
    format: &str,
    model_name: &str,
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    checked: &Checked,
    minimal: Option<&[usize]>,
    minimal_note: Option<&str>,
    command: String,
) -> SeedReport {
    let id = |i: usize| ops[i].call;
    // The models cut long values short in what they describe
    // (`crate::quote`); a state of many keys is cut here.
    let state = |s: String| match crate::quote::cut(&s, STATE_CHARS) {
        std::borrow::Cow::Borrowed(_) => s,
        std::borrow::Cow::Owned(cut) => cut,
    };
    let mut bars: Vec<OpBar> = ops
        .iter()
        .map(|o| {
            let label = model.describe_op(&o.input, o.output.as_ref());
            let mut detail = format!(
                "process {}: invoked on line {}, {}",
                o.client,
                o.call,
                match (o.output.is_known(), o.ret) {
                    (true, Some(r)) => format!("completed :ok on line {r}"),
                    (false, Some(r)) => format!("completed :info on line {r} (unknown outcome)"),
                    (_, None) => "never completed (unknown outcome)".to_owned(),
                }
            );
            if label.contains(crate::quote::ELLIPSIS) {
                detail += &format!("\na value cut short (…) is whole on those lines of {file}");
            }
            OpBar {
                id: o.call,
                start_us: o.call.saturating_mul(LINE_US),
                end_us: match o.output {
                    LinOutcome::Unknown => None,
                    LinOutcome::Known(_) => o.ret.map(|r| r.saturating_mul(LINE_US)),
                },
                label,
                status: match o.output {
                    LinOutcome::Known(_) => OpStatus::Ok,
                    LinOutcome::Unknown => OpStatus::Indeterminate,
                },
                server: None,
                zxid: None,
                detail,
                state_before: None,
                state_after: None,
            }
        })
        .collect();
    let mut sections = Vec::new();
    for p in &checked.partitions {
        let mut section = LinSection {
            partition: (!p.partition.key.is_empty()).then(|| p.partition.key.clone()),
            model: model_name.to_owned(),
            ..LinSection::default()
        };
        match &p.verdict {
            Verdict::Linearizable(order) => {
                section.verdict = LinVerdict::Linearizable;
                section.detail = format!(
                    "linearizable: an order of its {} operations explains every reply \
                     (states on hover)",
                    p.partition.ops.len()
                );
                // The states along the order found, for the hover.
                let mut now = model.init();
                for &i in order {
                    let before = model.describe_state(&now);
                    if let Step::To(next) = model.step(&now, &ops[i].input, ops[i].output.as_ref())
                    {
                        now = next;
                    }
                    bars[i].state_before = Some(state(before));
                    bars[i].state_after = Some(state(model.describe_state(&now)));
                }
            }
            Verdict::NotLinearizable(d) => {
                section.verdict = LinVerdict::NotLinearizable;
                section.detail = format!(
                    "no order of its {} operations explains every reply; the longest \
                     linearizable prefix has {}, then nothing can come before {} returns",
                    p.partition.ops.len(),
                    d.prefix.len(),
                    model.describe_op(&ops[d.deadline].input, ops[d.deadline].output.as_ref())
                );
                for step in &d.prefix {
                    bars[step.op].state_before = Some(state(step.before.clone()));
                    bars[step.op].state_after = Some(state(step.after.clone()));
                }
                section.longest_prefix = d
                    .prefix
                    .iter()
                    .map(|s| PrefixStep {
                        op: id(s.op),
                        state_after: state(s.after.clone()),
                    })
                    .collect();
                let mut stuck: Vec<u64> = d.candidates.iter().map(|&(c, _)| id(c)).collect();
                stuck.push(id(d.deadline));
                stuck.sort_unstable();
                stuck.dedup();
                section.cannot_linearize_next = stuck;
                if let Some(m) = minimal.filter(|m| m.iter().all(|i| p.partition.ops.contains(i))) {
                    section.minimal = m.iter().map(|&i| id(i)).collect();
                }
                section.minimal_note = minimal_note.map(str::to_owned);
            }
            Verdict::Unknown(why) => {
                section.verdict = LinVerdict::Unknown;
                section.detail = format!("unknown: {why} after {} steps", p.explored.steps);
            }
            Verdict::NotChecked => {
                section.verdict = LinVerdict::Unknown;
                section.detail =
                    "not checked: an earlier partition failed (--first-failure)".to_owned();
            }
        }
        sections.push(section);
    }
    // Many linearizable partitions say little each: the failing and
    // undecided ones first.
    sections.sort_by_key(|s| s.verdict == LinVerdict::Linearizable);
    let mut lanes: BTreeMap<u64, Lane> = BTreeMap::new();
    for (o, bar) in ops.iter().zip(bars) {
        lanes
            .entry(o.client)
            .or_insert_with(|| Lane {
                label: format!("process {}", o.client),
                kind: LaneKind::Client,
                ..Lane::default()
            })
            .ops
            .push(bar);
    }
    let last = ops
        .iter()
        .map(|o| o.ret.unwrap_or(o.call).max(o.call))
        .max()
        .unwrap_or(0);
    SeedReport {
        title: format!("{file} ({model_name})"),
        scenario: file.to_owned(),
        seed: 0,
        commit: crate::scenario::sweep::this_build().1,
        replay_command: command,
        digest: String::new(),
        sim_ms: last.saturating_mul(LINE_US) / 1000,
        params: vec![(
            "partitions".to_owned(),
            checked.partitions.len().to_string(),
        )],
        verdicts: Vec::new(),
        counters: Vec::new(),
        lanes: lanes.into_values().collect(),
        spans: Vec::new(),
        lin: sections,
        file: Some(HistoryFile {
            path: file.to_owned(),
            format: format.to_owned(),
            model: model_name.to_owned(),
            time: Some("the file's line numbers".to_owned()),
        }),
        undecided: None,
    }
}

/// The pages `zoosim lin --report` wrote, for its index: a row per file.
#[derive(Default)]
pub(super) struct LinPages {
    rows: Vec<ScenarioRow>,
    names: BTreeSet<String>,
}

impl LinPages {
    /// Writes `file`'s page (`<file name>.html`, a second file of the same
    /// name `<name>-2.html`, ...) and notes its verdict for the index.
    pub(super) fn write(
        &mut self,
        dir: &Path,
        file: &Path,
        verdict: &str,
        page: &SeedReport,
    ) -> Result<PathBuf, String> {
        let stem = file_safe(&file.file_name().map_or_else(
            || file.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ));
        let name = (1..)
            .map(|k| match k {
                1 => stem.clone(),
                k => format!("{stem}-{k}"),
            })
            // `index` is the index page's.
            .find(|n| n != "index" && !self.names.contains(n))
            .expect("a free name");
        self.names.insert(name.clone());
        let href = format!("{name}.html");
        let written = write_seed(dir, &href, page);
        self.rows.push(ScenarioRow {
            scenario: file.display().to_string(),
            expectation: "linearizable".to_owned(),
            as_expected: verdict == "linearizable",
            seeds_run: 1,
            verdicts: vec![VerdictRow {
                verdict: verdict.to_owned(),
                passed: verdict == "linearizable",
                seeds: vec![SeedLink {
                    seed: 0,
                    href: written.is_ok().then_some(href),
                }],
            }],
            undecided: Vec::new(),
            coverage: Vec::new(),
        });
        written
    }

    /// Notes a file that could not be checked (bad input).
    pub(super) fn error(&mut self, file: &Path, error: &str) {
        self.rows.push(ScenarioRow {
            scenario: file.display().to_string(),
            expectation: "linearizable".to_owned(),
            as_expected: false,
            seeds_run: 0,
            verdicts: vec![VerdictRow {
                verdict: format!("bad input: {error}"),
                passed: false,
                seeds: vec![SeedLink {
                    seed: 0,
                    href: None,
                }],
            }],
            undecided: Vec::new(),
            coverage: Vec::new(),
        });
    }

    /// Writes the index of every file checked.
    pub(super) fn write_index(self, dir: &Path, model: &str) -> Result<PathBuf, String> {
        let index = IndexReport {
            title: format!(
                "zoosim lin --model {model}: {} file{}",
                self.rows.len(),
                if self.rows.len() == 1 { "" } else { "s" }
            ),
            command: None,
            commit: crate::scenario::sweep::this_build().1,
            scenarios: self.rows,
            files: true,
        };
        write_index(dir, &index)
    }
}

// ---------------------------------------------------------------------------
// A sweep's index.

/// The index of a sweep (a run or a merge of shards): per scenario its
/// expectation, a row per verdict with its seeds (linked where `href`
/// gives a page), and its counters with the coverage goals. `seeds` gives
/// the seeds each scenario ran (by index in `sweep.scenarios`).
#[cfg(madsim)]
pub(super) fn index_report(
    sweep: &crate::scenario::sweep::SweepSummary,
    title: String,
    command: Option<String>,
    seeds: &dyn Fn(usize) -> Vec<u64>,
    href: &dyn Fn(&str, u64) -> Option<String>,
) -> IndexReport {
    let rows = sweep
        .scenarios
        .iter()
        .enumerate()
        .map(|(k, s)| {
            // Failing and undecided seeds are in no "pass" row.
            let not_passing: BTreeSet<u64> = s
                .failures
                .iter()
                .map(|f| f.seed)
                .chain(s.undecided.iter().map(|u| u.seed))
                .collect();
            let link = |seed: u64| SeedLink {
                seed,
                href: href(&s.name, seed),
            };
            let mut verdicts = Vec::new();
            let passing: Vec<SeedLink> = seeds(k)
                .into_iter()
                .filter(|x| !not_passing.contains(x))
                .map(link)
                .collect();
            if !passing.is_empty() {
                verdicts.push(VerdictRow {
                    verdict: "pass".to_owned(),
                    passed: true,
                    seeds: passing,
                });
            }
            // A row per failed property; a seed that broke two is in both.
            let mut by: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
            for f in &s.failures {
                let props: BTreeSet<&str> =
                    f.violations.iter().map(|v| v.property.as_str()).collect();
                for p in props {
                    by.entry(p).or_default().push(f.seed);
                }
            }
            for (p, list) in by {
                verdicts.push(VerdictRow {
                    verdict: p.to_owned(),
                    passed: false,
                    seeds: list.into_iter().map(link).collect(),
                });
            }
            let goals: BTreeSet<&str> = s.coverage.iter().map(|g| g.goal.as_str()).collect();
            let mut coverage: Vec<Counter> = s
                .counters
                .iter()
                .map(|(name, &value)| Counter {
                    name: name.clone(),
                    value,
                    goal: goals.contains(name.as_str()).then_some(1),
                })
                .collect();
            for g in &s.coverage {
                if !s.counters.contains_key(&g.goal) {
                    coverage.push(Counter {
                        name: g.goal.clone(),
                        value: g.count,
                        goal: Some(1),
                    });
                }
            }
            ScenarioRow {
                scenario: s.file.clone(),
                expectation: if s.expect_failure {
                    format!("fails within {} seeds", s.seeds.count)
                } else {
                    "passes every seed and meets its coverage goals".to_owned()
                },
                as_expected: s.passed,
                seeds_run: s.seeds_run,
                verdicts,
                undecided: s
                    .undecided
                    .iter()
                    .map(|u| UndecidedSeed {
                        seed: link(u.seed),
                        why: u.why.clone(),
                    })
                    .collect(),
                coverage,
            }
        })
        .collect();
    IndexReport {
        title,
        command,
        commit: sweep.commit.clone(),
        scenarios: rows,
        files: false,
    }
}

/// The seeds a summary's record of one scenario ran: its shards' seeds in
/// order, the first `seeds_run` of them (a scenario expected to fail stops
/// at its first failure).
#[cfg(madsim)]
pub(super) fn seeds_run(r: &crate::scenario::sweep::ScenarioRecord) -> Vec<u64> {
    let range = &r.seeds;
    (0..range.count)
        .filter(|i| range.shards.contains(&(i % range.of.max(1))))
        .map(|i| range.start + i)
        .take(usize::try_from(r.seeds_run).unwrap_or(usize::MAX))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::history::FaultParams;

    #[test]
    fn outcome_log_lines_split_into_client_and_event() {
        assert_eq!(
            log_event("      9 ms  client 1  Acquired { token: 1 }"),
            Some((1, "Acquired { token: 1 }"))
        );
        assert_eq!(log_event("9 ms client 1 Acquired"), None);
        assert_eq!(log_event("      9 ms  client x  Acquired"), None);
    }

    #[test]
    fn lanes_match_their_own_client_only() {
        assert!(lane_is("client 4 (session 0x1)", "client 4"));
        assert!(lane_is("client 4", "client 4"));
        assert!(!lane_is("client 41 (session 0x1)", "client 4"));
        let mut l = vec!["server 0", "client 10", "handle 3, no client", "client 2"];
        l.sort_by_key(|x| lane_order(x));
        assert_eq!(
            l,
            ["client 2", "client 10", "handle 3, no client", "server 0"]
        );
    }

    #[test]
    fn wide_outages_and_three_way_splits_say_what_they_hit() {
        let record = |fault: &str, params: FaultParams| FaultRecord {
            fault: fault.into(),
            params: FaultParams {
                window: Some(Duration::from_millis(1500)),
                ..params
            },
            skipped: false,
        };
        let crash = fault_span(
            0,
            &record(
                "majority-crash",
                FaultParams {
                    servers: Some(vec![0, 2]),
                    ..FaultParams::default()
                },
            ),
            3,
        );
        assert_eq!(crash.label, "majority-crash servers {0,2}");
        assert_eq!(crash.kind, SpanKind::Crash);
        assert_eq!(crash.end_us, Some(1_500_000));
        let split = fault_span(
            0,
            &record(
                "three-way-partition",
                FaultParams {
                    sides: Some(vec![vec![0, 3], vec![1], vec![2, 4]]),
                    ..FaultParams::default()
                },
            ),
            5,
        );
        assert_eq!(split.label, "three-way-partition {0,3} | {1} | {2,4}");
        assert_eq!(split.kind, SpanKind::Partition);
        assert_eq!(
            fault_span(0, &record("server-pause", FaultParams::default()), 3).kind,
            SpanKind::Pause
        );
    }

    #[test]
    fn names_become_one_safe_segment_and_urls_are_encoded() {
        assert_eq!(file_safe("../x y/z"), "_x_y_z");
        assert_eq!(file_safe(".."), "_");
        assert_eq!(seed_href("lock", 7), "lock/seed-7.html");
        assert_eq!(
            file_url(Path::new("/a b/c#d.html")),
            "file:///a%20b/c%23d.html"
        );
    }
}
