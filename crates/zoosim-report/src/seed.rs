//! One seed's page: the verdict and the replay command on top, the
//! minimal failing sub-history, the full timeline, the linearizability
//! findings, the checks and counters, and every operation in a table.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::escape::Esc;
use super::model::{LinSection, LinVerdict, OpBar, OpId, OpStatus, SeedReport};
use super::page::document;
use super::timeline::{label_px, line, secs, Roles, Scale, Timeline, LINE_US};

/// A full timeline with more operations than this opens on the failure
/// rather than on the whole run, where bars would be slivers.
const FOCUS_ABOVE_OPS: usize = 300;
/// At most this many minimal sub-histories get a timeline of their own
/// (one per failing partition); the rest are listed.
const MAX_MINIMAL_TIMELINES: usize = 8;

/// The seed's page: one self-contained HTML document.
pub fn render_seed(r: &SeedReport) -> String {
    let ctx = Ctx::new(r);
    let mut b = String::with_capacity(4096 + 600 * ctx.ops.len());
    ctx.header(&mut b);
    ctx.minimal(&mut b);
    ctx.full_timeline(&mut b);
    ctx.lin(&mut b);
    ctx.checks(&mut b);
    ctx.op_table(&mut b);
    document(&r.title, &b)
}

/// The report with its operations indexed and each one's roles derived.
struct Ctx<'a> {
    r: &'a SeedReport,
    /// Id → (lane index, op); the first of duplicates wins.
    ops: BTreeMap<OpId, (usize, &'a OpBar)>,
    roles: BTreeMap<OpId, Roles>,
    end_us: u64,
}

impl<'a> Ctx<'a> {
    fn new(r: &'a SeedReport) -> Ctx<'a> {
        let mut ops = BTreeMap::new();
        for (lane, op) in r.ops() {
            ops.entry(op.id).or_insert((lane, op));
        }
        let mut roles: BTreeMap<OpId, Roles> = BTreeMap::new();
        for v in r.verdicts.iter().filter(|v| !v.passed) {
            for &id in &v.ops {
                let involved = &mut roles.entry(id).or_default().involved;
                if !involved.contains(&v.name) {
                    involved.push(v.name.clone());
                }
            }
        }
        for l in &r.lin {
            let n = l.longest_prefix.len();
            for (i, s) in l.longest_prefix.iter().enumerate() {
                roles.entry(s.op).or_default().prefix = Some((i + 1, n));
            }
            for &id in &l.cannot_linearize_next {
                roles.entry(id).or_default().stuck = true;
            }
            for &id in &l.minimal {
                roles.entry(id).or_default().minimal = true;
            }
        }
        Ctx {
            r,
            ops,
            roles,
            end_us: r.end_us(),
        }
    }

    /// Whether time is a history file's line numbers (one line per
    /// second on the timeline) rather than a run's simulated time.
    fn lines(&self) -> bool {
        self.r.file.as_ref().is_some_and(|f| f.time.is_some())
    }

    /// What the timelines' time axis measures.
    fn unit(&self) -> &'static str {
        if self.lines() {
            "line of the file"
        } else {
            "simulated time"
        }
    }

    /// A moment, in the page's unit: "1.000042 s" or "line 85".
    fn at(&self, us: u64) -> String {
        if self.lines() {
            line(us)
        } else {
            secs(us)
        }
    }

    /// A length of time, in the page's unit: "11.0 ms" or "11 lines".
    fn took(&self, us: u64) -> String {
        if self.lines() {
            let n = us / LINE_US;
            format!("{n} line{}", if n == 1 { "" } else { "s" })
        } else {
            duration(us)
        }
    }

    fn lane_label(&self, id: OpId) -> &str {
        self.ops
            .get(&id)
            .map_or("?", |(l, _)| self.r.lanes[*l].label.as_str())
    }

    /// An operation's hover text: everything known about it.
    fn tip(&self, o: &OpBar) -> String {
        let mut t = format!("#{} {}\n{}\n", o.id, self.lane_label(o.id), o.label);
        let _ = match o.end_us {
            Some(e) => writeln!(
                t,
                "called {}, returned {} ({})",
                self.at(o.start_us),
                self.at(e),
                self.took(e.saturating_sub(o.start_us))
            ),
            None => writeln!(t, "called {}, never returned", self.at(o.start_us)),
        };
        let _ = write!(t, "status: {}", status_words(o.status));
        if let Some(s) = &o.server {
            let _ = write!(t, " · server {s}");
        }
        if let Some(z) = o.zxid {
            let _ = write!(t, " · zxid {}", zxid(z));
        }
        t.push('\n');
        if !o.detail.is_empty() {
            let _ = writeln!(t, "{}", o.detail);
        }
        if let Some(s) = &o.state_before {
            let _ = writeln!(t, "state before: {s}");
        }
        if let Some(s) = &o.state_after {
            let _ = writeln!(t, "state after:  {s}");
        }
        for w in self.role_words(o.id) {
            let _ = writeln!(t, "▶ {w}");
        }
        t.trim_end().to_string()
    }

    /// The operation's roles in words.
    fn role_words(&self, id: OpId) -> Vec<String> {
        let Some(r) = self.roles.get(&id) else {
            return Vec::new();
        };
        let mut w = Vec::new();
        if r.stuck {
            w.push("NOT LINEARIZABLE: cannot be linearized after the longest prefix".to_string());
        }
        if r.minimal {
            w.push("in the minimal failing sub-history".to_string());
        }
        if let Some((i, n)) = r.prefix {
            w.push(format!(
                "linearized as step {i} of the longest prefix ({n})"
            ));
        }
        for name in &r.involved {
            w.push(format!("involved in the failure of {name}"));
        }
        w
    }

    fn header(&self, b: &mut String) {
        let r = self.r;
        let _ = write!(b, "<h1>{}</h1><p class=\"sub\">", Esc(&r.title));
        match &r.file {
            Some(f) => {
                let _ = write!(
                    b,
                    "history file <b>{}</b> · format <b>{}</b> · model <b>{}</b>",
                    Esc(&f.path),
                    Esc(&f.format),
                    Esc(&f.model)
                );
            }
            None => {
                let _ = write!(
                    b,
                    "scenario <b>{}</b> · seed <b>{}</b>",
                    Esc(&r.scenario),
                    r.seed
                );
            }
        }
        if let Some(c) = &r.commit {
            let _ = write!(b, " · commit <code>{}</code>", Esc(c));
        }
        // A history checked from a file has no run digest.
        if !r.digest.is_empty() {
            let _ = write!(b, " · digest <code>{}</code>", Esc(&r.digest));
        }
        match r.file.as_ref().and_then(|f| f.time.as_ref()) {
            Some(time) => {
                let _ = write!(
                    b,
                    " · {} operations · time on the timeline: {}</p>",
                    self.ops.len(),
                    Esc(time)
                );
            }
            None => {
                let _ = write!(
                    b,
                    " · {} simulated · {} operations</p>",
                    duration(r.sim_ms.saturating_mul(1000)),
                    self.ops.len()
                );
            }
        }

        let failed_checks: Vec<_> = r.verdicts.iter().filter(|v| !v.passed).collect();
        let not_lin: Vec<&LinSection> = r
            .lin
            .iter()
            .filter(|l| l.verdict == LinVerdict::NotLinearizable)
            .collect();
        let unknown = r.lin.iter().any(|l| l.verdict == LinVerdict::Unknown);
        let (class, badge) = if r.failed() {
            ("fail", "FAIL")
        } else if r.undecided.is_some() {
            ("unknown", "UNDECIDED")
        } else if unknown {
            ("unknown", "UNKNOWN")
        } else {
            ("pass", "PASS")
        };
        let _ = write!(
            b,
            "<div class=\"verdict {class}\" id=\"verdict\"><span class=\"badge\">{badge}</span><div>"
        );
        let undecided = r.undecided.as_deref().filter(|_| !r.failed());
        if let Some(why) = undecided {
            let _ = write!(
                b,
                "<p style=\"margin:4px 0\" id=\"undecided\">No check failed, but ZooKeeper's contract \
                 was left <b>undecided</b>: its check ran out of budget before deciding \
                 (<span class=\"why\">{}</span>). Not a pass: a larger budget \
                 (<code>--contract-steps N</code>) may decide it.</p>",
                Esc(why)
            );
        } else if failed_checks.is_empty() && not_lin.is_empty() {
            let _ = write!(
                b,
                "<p style=\"margin:4px 0\">{}</p>",
                if unknown {
                    "No check failed, but the linearizability check ran out of budget: see below."
                } else {
                    "Every check held."
                }
            );
        } else {
            b.push_str("<ul class=\"failures\">");
            for v in &failed_checks {
                let _ = write!(
                    b,
                    "<li><span class=\"prop\">{}</span>: {}</li>",
                    Esc(&v.name),
                    Esc(&v.detail)
                );
            }
            for l in &not_lin {
                let _ = write!(
                    b,
                    "<li><span class=\"prop\">not linearizable</span>{} (model {}): {}</li>",
                    partition_words(l),
                    Esc(&l.model),
                    Esc(&l.detail)
                );
            }
            b.push_str("</ul>");
        }
        b.push_str("</div></div>");
        let _ = write!(
            b,
            "<div class=\"replay\"><label for=\"replay\">{}:</label>\
             <input id=\"replay\" readonly value=\"{}\">\
             <button class=\"copy\" data-for=\"replay\">copy</button></div>",
            if r.file.is_some() {
                "Check again"
            } else {
                "Replay"
            },
            Esc(&r.replay_command)
        );
        if !r.params.is_empty() {
            b.push_str("<p class=\"facts\">");
            for (i, (k, v)) in r.params.iter().enumerate() {
                let _ = write!(
                    b,
                    "{}{} = <b>{}</b>",
                    if i > 0 { " · " } else { "" },
                    Esc(k),
                    Esc(v)
                );
            }
            b.push_str("</p>");
        }
        let problems = r.problems();
        if !problems.is_empty() {
            b.push_str("<div class=\"problems\"><b>This report's data is inconsistent:</b><ul>");
            for p in &problems {
                let _ = write!(b, "<li>{}</li>", Esc(p));
            }
            b.push_str("</ul></div>");
        }
    }

    fn legend(&self, b: &mut String) {
        b.push_str(
            "<div class=\"legend\"><span><i class=\"sw ok\"></i>ok</span>\
             <span><i class=\"sw failed\"></i>failed (no effect)</span>\
             <span><i class=\"sw indet\"></i>indeterminate (may take effect later; dashed: never returned)</span>\
             <span><i class=\"sw stuck\"></i>✗ cannot be linearized</span>\
             <span><i class=\"sw minimal\"></i>minimal failing sub-history</span>\
             <span><i class=\"sw prefix\"></i>longest linearizable prefix</span>\
             <span><i class=\"sw involved\"></i>named by a failed check</span>\
             <span><i class=\"sw band\"></i>fault / partition / election</span>\
             <span>◆ watch event · ■ session event · ▲ other</span></div>",
        );
    }

    fn minimal(&self, b: &mut String) {
        let sections: Vec<&LinSection> = self
            .r
            .lin
            .iter()
            .filter(|l| l.verdict == LinVerdict::NotLinearizable && !l.minimal.is_empty())
            .collect();
        if sections.is_empty() {
            // A failure without one: say why where it would be.
            let notes: Vec<&LinSection> = self
                .r
                .lin
                .iter()
                .filter(|l| l.verdict == LinVerdict::NotLinearizable && l.minimal_note.is_some())
                .collect();
            if let Some(l) = notes.first() {
                let _ = write!(
                    b,
                    "<h2 id=\"minimal\">Minimal failing sub-history</h2><p class=\"note\">{}. \
                     The longest linearizable prefix and the operations that cannot follow it are below.</p>",
                    Esc(l.minimal_note.as_deref().unwrap_or(""))
                );
            }
            return;
        }
        b.push_str("<h2 id=\"minimal\">Minimal failing sub-history</h2>");
        let _ = write!(
            b,
            "<p class=\"note\">The fewest operations found that still cannot be put in any order that explains every reply. \
             Start here; the whole {} follows below. Its time axis is compressed: equal steps between successive \
             calls and replies, each tick labelled with its {}.</p>",
            if self.lines() { "history" } else { "run" },
            if self.lines() { "line of the file" } else { "simulated time" },
        );
        self.legend(b);
        for (i, l) in sections.iter().enumerate() {
            let ops: Vec<&OpBar> = l
                .minimal
                .iter()
                .filter_map(|id| self.ops.get(id).map(|(_, o)| *o))
                .collect();
            let _ = write!(
                b,
                "<h3>{} of {} operations{}, model {}</h3>",
                ops.len(),
                self.ops.len(),
                partition_words(l),
                Esc(&l.model)
            );
            if ops.len() == 1 {
                // A lone operation could read as "its writes were
                // dropped": say what the search checked.
                b.push_str(
                    "<p class=\"note\"><b>One operation alone.</b> Its reply is impossible from the model's \
                     initial state, and no order of this history's writes produces the state it needs (the \
                     search keeps an operation alone only when the checker decides that): nothing in the \
                     history wrote what it saw.</p>",
                );
            }
            if i >= MAX_MINIMAL_TIMELINES {
                let ids: Vec<String> = l.minimal.iter().map(|id| op_link(*id)).collect();
                let _ = write!(b, "<p class=\"note\">operations {}</p>", ids.join(", "));
                continue;
            }
            if ops.is_empty() {
                continue;
            }
            // Equal steps between successive calls and replies: the order
            // is what makes it fail, and the ops may be seconds apart.
            let times: Vec<u64> = ops
                .iter()
                .flat_map(|o| [Some(o.start_us), o.end_us.map(|e| e.max(o.start_us))])
                .flatten()
                .collect();
            let t0 = times.iter().copied().min().unwrap_or(0);
            let t1 = times.iter().copied().max().unwrap_or(0);
            let lanes = self
                .r
                .lanes
                .iter()
                .filter_map(|lane| {
                    let mine: Vec<&OpBar> = lane
                        .ops
                        .iter()
                        .filter(|o| l.minimal.contains(&o.id))
                        .collect();
                    let points = lane
                        .points
                        .iter()
                        .filter(|p| p.at_us >= t0 && p.at_us <= t1)
                        .collect();
                    (!mine.is_empty()).then_some((lane, mine, points))
                })
                .collect();
            let spans = self
                .r
                .spans
                .iter()
                .filter(|s| s.start_us <= t1 && s.end_us.is_none_or(|e| e >= t0))
                .collect();
            let tip = |o: &OpBar| self.tip(o);
            Timeline {
                id: &format!("tl-min-{i}"),
                lanes,
                spans,
                scale: Scale::compressed(
                    times,
                    ops.iter().map(|o| label_px(&o.label)).fold(0.0, f64::max) + 12.0,
                ),
                roles: &self.roles,
                focus: None,
                start_on_focus: false,
                spacious: true,
                tip: &tip,
                unit: self.unit(),
                lines: self.lines(),
            }
            .render(b);
        }
    }

    /// The window around the failure: the minimal sub-history's, else the
    /// stuck operations' (with the last steps of the prefix), else those a
    /// failed check names.
    fn focus(&self) -> Option<(u64, u64)> {
        let pick = |f: &dyn Fn(&Roles) -> bool| -> Option<(u64, u64)> {
            let ops: Vec<&OpBar> = self
                .roles
                .iter()
                .filter(|(_, r)| f(r))
                .filter_map(|(id, _)| self.ops.get(id).map(|(_, o)| *o))
                .collect();
            let a = ops.iter().map(|o| o.start_us).min()?;
            let b = ops
                .iter()
                .map(|o| o.end_us.unwrap_or(o.start_us).max(o.start_us))
                .max()?;
            Some((a, b.max(a + 1)))
        };
        // The stuck operations with the prefix's last steps before them:
        // what they could not follow.
        const CONTEXT: usize = 3;
        let stuck = pick(&|r| r.stuck).map(|(a, b)| {
            let before = pick(&|r| r.prefix.is_some_and(|(i, n)| i + CONTEXT > n));
            before.map_or((a, b), |(c, d)| (a.min(c), b.max(d)))
        });
        pick(&|r| r.minimal)
            .or(stuck)
            .or_else(|| pick(&|r| !r.involved.is_empty()))
    }

    fn full_timeline(&self, b: &mut String) {
        let r = self.r;
        b.push_str("<h2 id=\"timeline\">Timeline</h2>");
        let legend_shown = r
            .lin
            .iter()
            .any(|l| l.verdict == LinVerdict::NotLinearizable && !l.minimal.is_empty());
        let _ = write!(
            b,
            "<p class=\"note\">{}. One lane per client{}; hover a bar for its details and the model's state, \
             click it for its row in the table. Zoom with the buttons or Ctrl + wheel; scroll sideways.</p>",
            match r.file.as_ref().and_then(|f| f.time.as_ref()) {
                Some(t) => format!("Time is {}", Esc(t)),
                None => "Simulated time".to_owned(),
            },
            if r.lanes.iter().any(|l| l.kind == super::model::LaneKind::Server) {
                " and per server"
            } else {
                ""
            }
        );
        if !legend_shown {
            self.legend(b);
        }
        let lanes = r
            .lanes
            .iter()
            .map(|l| (l, l.ops.iter().collect(), l.points.iter().collect()))
            .collect();
        let tip = |o: &OpBar| self.tip(o);
        Timeline {
            id: "tl-full",
            lanes,
            spans: r.spans.iter().collect(),
            scale: Scale::fit(0, self.end_us),
            roles: &self.roles,
            focus: self.focus(),
            start_on_focus: self.ops.len() > FOCUS_ABOVE_OPS,
            spacious: false,
            tip: &tip,
            unit: self.unit(),
            lines: self.lines(),
        }
        .render(b);
    }

    fn lin(&self, b: &mut String) {
        if self.r.lin.is_empty() {
            return;
        }
        b.push_str("<h2 id=\"lin\">Linearizability</h2>");
        for l in &self.r.lin {
            let verdict = match l.verdict {
                LinVerdict::Linearizable => "linearizable",
                LinVerdict::NotLinearizable => "NOT linearizable",
                LinVerdict::Unknown => "unknown (budget ran out)",
            };
            let _ = write!(
                b,
                "<h3>{}{} — model {}</h3><p>{}</p>",
                verdict,
                partition_words(l),
                Esc(&l.model),
                Esc(&l.detail)
            );
            if !l.cannot_linearize_next.is_empty() {
                b.push_str("<p><b>Cannot be linearized next</b> (after the longest prefix, none of these fits the model's state):</p>");
                self.op_list(b, &l.cannot_linearize_next);
            }
            if !l.longest_prefix.is_empty() {
                // A checker that gives no states: no empty column.
                let states = l.longest_prefix.iter().any(|s| !s.state_after.is_empty());
                let _ = write!(
                    b,
                    "<p><b>Longest linearizable prefix</b> ({} operations, in the order found):</p>\
                     <table class=\"lin-list\"><tr><th>step</th><th>op</th><th>lane</th><th>operation</th>{}</tr>",
                    l.longest_prefix.len(),
                    if states { "<th>state after</th>" } else { "" }
                );
                for (i, s) in l.longest_prefix.iter().enumerate() {
                    let label = self.ops.get(&s.op).map_or("", |(_, o)| o.label.as_str());
                    let _ = write!(
                        b,
                        "<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td class=\"mono\">{}</td>",
                        i + 1,
                        op_link(s.op),
                        Esc(self.lane_label(s.op)),
                        Esc(label),
                    );
                    if states {
                        let _ = write!(b, "<td class=\"mono\">{}</td>", Esc(&s.state_after));
                    }
                    b.push_str("</tr>");
                }
                b.push_str("</table>");
            }
            if !l.minimal.is_empty() {
                b.push_str("<p><b>Minimal failing sub-history:</b></p>");
                self.op_list(b, &l.minimal);
            } else if let Some(note) = l
                .minimal_note
                .as_deref()
                .filter(|_| l.verdict == LinVerdict::NotLinearizable)
            {
                let _ = write!(
                    b,
                    "<p><b>Minimal failing sub-history:</b> {}.</p>",
                    Esc(note)
                );
            }
        }
    }

    /// A short table of the given operations.
    fn op_list(&self, b: &mut String, ids: &[OpId]) {
        b.push_str("<table class=\"lin-list\"><tr><th>op</th><th>lane</th><th>called</th><th>returned</th><th>operation</th></tr>");
        for &id in ids {
            let (label, start, end) = match self.ops.get(&id) {
                Some((_, o)) => (
                    o.label.as_str(),
                    self.at(o.start_us),
                    o.end_us.map_or("never".into(), |e| self.at(e)),
                ),
                None => ("(no such operation)", String::new(), String::new()),
            };
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"mono\">{}</td></tr>",
                op_link(id),
                Esc(self.lane_label(id)),
                start,
                end,
                Esc(label)
            );
        }
        b.push_str("</table>");
    }

    fn checks(&self, b: &mut String) {
        let r = self.r;
        b.push_str("<h2 id=\"checks\">Checks</h2>");
        if r.verdicts.is_empty() {
            b.push_str("<p class=\"note\">No check verdicts in this report.</p>");
        } else {
            b.push_str("<table><tr><th>property</th><th>verdict</th><th>detail</th><th>operations</th></tr>");
            for v in &r.verdicts {
                let ops: Vec<String> = v.ops.iter().map(|id| op_link(*id)).collect();
                let _ = write!(
                    b,
                    "<tr class=\"{}\"><td class=\"prop\">{}</td><td class=\"v\">{}</td><td>{}</td><td>{}</td></tr>",
                    if v.passed { "good" } else { "bad" },
                    Esc(&v.name),
                    if v.passed { "held" } else { "FAILED" },
                    Esc(&v.detail),
                    ops.join(" ")
                );
            }
            b.push_str("</table>");
        }
        if !r.counters.is_empty() {
            b.push_str(
                "<h3>Counters</h3><table><tr><th>counter</th><th>value</th><th>goal</th></tr>",
            );
            for c in &r.counters {
                let goal = match c.goal {
                    Some(g) if c.value < g => {
                        format!("<span class=\"goal-miss\">≥ {g} (missed)</span>")
                    }
                    Some(g) => format!("≥ {g}"),
                    None => String::new(),
                };
                let _ = write!(
                    b,
                    "<tr><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                    Esc(&c.name),
                    c.value,
                    goal
                );
            }
            b.push_str("</table>");
        }
    }

    fn op_table(&self, b: &mut String) {
        b.push_str("<h2 id=\"ops\">Operations</h2><p class=\"note\">Every operation, in call order (search with Ctrl-F).</p>");
        // Chunks of rows, each a table of its own with fixed column
        // widths that the browser lays out only when it scrolls into view
        // (`content-visibility`): a table of 10,000 rows laid out whole
        // took most of a large page's loading time. Ctrl-F and links to
        // rows still find every row.
        const COLS: &str = "<colgroup><col class=\"c-id\"><col class=\"c-lane\"><col class=\"c-t\"><col class=\"c-t\">\
            <col class=\"c-took\"><col class=\"c-st\"><col class=\"c-srv\"><col class=\"c-zx\"><col class=\"c-op\">\
            <col class=\"c-roles\"><col class=\"c-state\"><col class=\"c-state\"></colgroup>";
        const ROWS_PER_CHUNK: usize = 200;
        b.push_str("<div class=\"ops-wrap\"><table class=\"ops-table\">");
        b.push_str(COLS);
        b.push_str(
            "<tr><th>op</th><th>lane</th><th>called</th><th>returned</th><th>took</th>\
             <th>status</th><th>server</th><th>zxid</th><th>operation</th><th>roles</th><th>state before</th><th>state after</th></tr>",
        );
        b.push_str("</table>");
        let mut all: Vec<(usize, &OpBar)> = self.r.ops().collect();
        all.sort_by_key(|(lane, o)| (o.start_us, *lane, o.id));
        for (i, (lane, o)) in all.into_iter().enumerate() {
            if i % ROWS_PER_CHUNK == 0 {
                if i > 0 {
                    b.push_str("</table></div>");
                }
                b.push_str("<div class=\"ops-chunk\"><table class=\"ops-table\">");
                b.push_str(COLS);
            }
            let roles = self.role_words(o.id);
            let bad = self
                .roles
                .get(&o.id)
                .is_some_and(|r| r.stuck || r.minimal || !r.involved.is_empty());
            let detail = if o.detail.is_empty() {
                String::new()
            } else {
                format!("<br><span class=\"note\">{}</span>", Esc(&o.detail))
            };
            let _ = write!(
                b,
                "<tr id=\"op-{id}\"{class}><td class=\"num\">{id}</td><td class=\"lane\">{lane}</td><td class=\"num\">{start}</td>\
                 <td class=\"num\">{end}</td><td class=\"num\">{took}</td><td>{status}</td><td>{server}</td><td class=\"mono\">{zxid}</td>\
                 <td class=\"label\">{label}{detail}</td><td class=\"roles\">{roles}</td><td class=\"state\">{before}</td><td class=\"state\">{after}</td></tr>",
                id = o.id,
                class = if bad { " class=\"bad\"" } else { "" },
                lane = Esc(&self.r.lanes[lane].label),
                start = self.at(o.start_us),
                end = o.end_us.map_or("never".into(), |e| self.at(e)),
                took = o
                    .end_us
                    .map_or(String::new(), |e| self.took(e.saturating_sub(o.start_us))),
                status = status_words(o.status),
                server = Esc(o.server.as_deref().unwrap_or("")),
                zxid = o.zxid.map_or(String::new(), zxid),
                label = Esc(&o.label),
                roles = Esc(&roles.join("; ")),
                before = Esc(o.state_before.as_deref().unwrap_or("")),
                after = Esc(o.state_after.as_deref().unwrap_or("")),
            );
        }
        if !self.ops.is_empty() {
            b.push_str("</table></div>");
        }
        b.push_str("</div>");
    }
}

fn partition_words(l: &LinSection) -> String {
    match &l.partition {
        Some(p) => format!(" (partition <code>{}</code>)", Esc(p)),
        None => String::new(),
    }
}

fn op_link(id: OpId) -> String {
    format!("<a href=\"#op-{id}\">#{id}</a>")
}

fn status_words(s: OpStatus) -> &'static str {
    match s {
        OpStatus::Ok => "ok",
        OpStatus::Failed => "failed",
        OpStatus::Indeterminate => "indeterminate",
    }
}

/// A zxid as ZooKeeper prints it.
fn zxid(z: i64) -> String {
    format!("0x{z:x}")
}

/// A duration in µs, in the unit that reads best.
pub(crate) fn duration(us: u64) -> String {
    match us {
        u if u >= 1_000_000 => format!("{:.3} s", u as f64 / 1e6),
        u if u >= 1_000 => format!("{:.1} ms", u as f64 / 1e3),
        u => format!("{u} µs"),
    }
}
