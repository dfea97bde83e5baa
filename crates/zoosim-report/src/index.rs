//! A whole run's index page: the totals, scenario × verdict × seeds with
//! links to the seeds' reports, and each scenario's coverage counters.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::escape::Esc;
use super::model::{IndexReport, ScenarioRow, SeedLink, UndecidedSeed};
use super::page::document;

/// The run's totals, derived from its rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub scenarios: usize,
    pub seeds_run: u64,
    /// Distinct (scenario, seed) pairs with some failed verdict.
    pub failed_seeds: usize,
    pub not_as_expected: usize,
    /// Coverage counters below their goals.
    pub goals_missed: usize,
    /// Seeds that passed with ZooKeeper's contract undecided.
    pub undecided_seeds: usize,
}

impl Totals {
    pub(crate) fn of(r: &IndexReport) -> Totals {
        Totals {
            scenarios: r.scenarios.len(),
            seeds_run: r.scenarios.iter().map(|s| s.seeds_run).sum(),
            failed_seeds: r.scenarios.iter().map(|s| failed_seeds(s).len()).sum(),
            not_as_expected: r.scenarios.iter().filter(|s| !s.as_expected).count(),
            goals_missed: r
                .scenarios
                .iter()
                .flat_map(|s| &s.coverage)
                .filter(|c| c.goal.is_some_and(|g| c.value < g))
                .count(),
            undecided_seeds: r.scenarios.iter().map(|s| s.undecided.len()).sum(),
        }
    }

    /// The run's verdict, as its badge says it: "fail" when a scenario
    /// was not as expected or a goal missed; else "undecided" when some
    /// seed's contract was left undecided; else "pass".
    pub(crate) fn verdict(&self) -> &'static str {
        if self.not_as_expected > 0 || self.goals_missed > 0 {
            "fail"
        } else if self.undecided_seeds > 0 {
            "undecided"
        } else {
            "pass"
        }
    }
}

/// The seeds of a scenario that failed some verdict.
pub(crate) fn failed_seeds(s: &ScenarioRow) -> BTreeSet<u64> {
    s.verdicts
        .iter()
        .filter(|v| !v.passed)
        .flat_map(|v| v.seeds.iter().map(|l| l.seed))
        .collect()
}

/// The run's index page: one self-contained HTML document.
pub fn render_index(r: &IndexReport) -> String {
    let t = Totals::of(r);
    let mut b = String::new();
    let _ = write!(b, "<h1>{}</h1><p class=\"sub\">", Esc(&r.title));
    if let Some(c) = &r.command {
        let _ = write!(b, "<code>{}</code>", Esc(c));
    }
    if let Some(c) = &r.commit {
        let sep = if r.command.is_some() { " · " } else { "" };
        let _ = write!(b, "{sep}commit <code>{}</code>", Esc(c));
    }
    b.push_str("</p>");
    let (class, badge) = match t.verdict() {
        "fail" => ("fail", "FAIL"),
        "undecided" => ("unknown", "UNDECIDED"),
        _ => ("pass", "PASS"),
    };
    let badge = format!(
        "<div class=\"verdict {class}\" id=\"verdict\"><span class=\"badge\">{badge}</span><div><p style=\"margin:4px 0\">",
    );
    b.push_str(&badge);
    if r.files {
        files(&mut b, r, &t);
    } else {
        scenarios(&mut b, r, &t);
    }
    if r.scenarios.iter().any(|s| !s.coverage.is_empty()) {
        coverage(&mut b, r);
    }
    document(&r.title, &b)
}

/// A run's rows: per scenario, its verdicts and their seeds.
fn scenarios(b: &mut String, r: &IndexReport, t: &Totals) {
    let _ = write!(
        b,
        "{} scenario{}, {} seeds run, {} failing seed{}, {} undecided seed{}; {} scenario{} not as expected; {} coverage goal{} missed.</p></div></div>",
        t.scenarios,
        plural(t.scenarios),
        t.seeds_run,
        t.failed_seeds,
        plural(t.failed_seeds),
        t.undecided_seeds,
        plural(t.undecided_seeds),
        t.not_as_expected,
        plural(t.not_as_expected),
        t.goals_missed,
        plural(t.goals_missed),
    );
    b.push_str(
        "<h2>Scenarios</h2><p class=\"note\">A failing or undecided seed links to its report where one was written. \
         An undecided seed broke no property, but ZooKeeper's contract could not be decided on it within the check's budget: \
         it is not counted as a pass.</p>\
         <table><tr><th>scenario</th><th>expected</th><th>seeds run</th><th>verdict</th><th>seeds</th></tr>",
    );
    for s in &r.scenarios {
        let has_undecided = !s.undecided.is_empty();
        let n = (s.verdicts.len() + usize::from(has_undecided)).max(1);
        let row = if s.as_expected { "good" } else { "bad" };
        let (v_class, v_text) = match (s.as_expected, has_undecided) {
            (false, _) => ("v", "NOT as expected".to_owned()),
            (true, true) => (
                "v undecided",
                format!(
                    "as expected; {} seed{} undecided",
                    s.undecided.len(),
                    plural(s.undecided.len())
                ),
            ),
            (true, false) => ("v", "as expected".to_owned()),
        };
        let _ = write!(
            b,
            "<tr class=\"{row}\"><td rowspan=\"{n}\"><b>{}</b></td><td rowspan=\"{n}\">{}<br><span class=\"{v_class}\">{v_text}</span></td>\
             <td class=\"num\" rowspan=\"{n}\">{}</td>",
            Esc(&s.scenario),
            Esc(&s.expectation),
            s.seeds_run,
        );
        if s.verdicts.is_empty() && !has_undecided {
            b.push_str("<td></td><td></td></tr>");
        }
        for (i, v) in s.verdicts.iter().enumerate() {
            if i > 0 {
                let _ = write!(b, "<tr class=\"{row}\">");
            }
            let _ = write!(
                b,
                "<td class=\"prop\" style=\"color:var(--{})\">{}</td><td class=\"seeds\">{} <span class=\"note\">({} seed{})</span></td></tr>",
                if v.passed { "ok" } else { "bad" },
                Esc(&v.verdict),
                seeds(&v.seeds),
                v.seeds.len(),
                plural(v.seeds.len()),
            );
        }
        if has_undecided {
            if !s.verdicts.is_empty() {
                let _ = write!(b, "<tr class=\"{row}\">");
            }
            undecided_row(b, &s.undecided);
        }
    }
    b.push_str("</table>");
}

/// How many undecided seeds of a scenario the index gives with their
/// reasons (all are linked above them).
const UNDECIDED_REASONS: usize = 20;

/// The cells of a scenario's "undecided" row: its seeds, then each one's
/// reason.
fn undecided_row(b: &mut String, list: &[UndecidedSeed]) {
    let links: Vec<SeedLink> = list.iter().map(|u| u.seed.clone()).collect();
    let _ = write!(
        b,
        "<td class=\"prop undecided\">UNDECIDED</td><td class=\"seeds\">{} <span class=\"note\">({} seed{})</span>",
        seeds(&links),
        list.len(),
        plural(list.len()),
    );
    for u in list.iter().take(UNDECIDED_REASONS) {
        let _ = write!(
            b,
            "<div class=\"why\">seed {}: contract undecided: {}</div>",
            u.seed.seed,
            Esc(&u.why)
        );
    }
    if list.len() > UNDECIDED_REASONS {
        let _ = write!(
            b,
            "<div class=\"why\">… and {} more (the run's summary gives every reason)</div>",
            list.len() - UNDECIDED_REASONS
        );
    }
    b.push_str("</td></tr>");
}

/// `zoosim lin`'s rows: per history file, its verdict and its page.
fn files(b: &mut String, r: &IndexReport, t: &Totals) {
    let _ = write!(
        b,
        "{} history file{} checked; {} not linearizable, undecided or unreadable.</p></div></div>",
        t.scenarios,
        plural(t.scenarios),
        t.not_as_expected,
    );
    b.push_str(
        "<h2>History files</h2><p class=\"note\">Each file links to its report where one was written.</p>\
         <table><tr><th>file</th><th>verdict</th><th>report</th></tr>",
    );
    for s in &r.scenarios {
        for v in &s.verdicts {
            let link = v.seeds.iter().find_map(|l| l.safe_href()).map_or_else(
                || "<span class=\"note\">none written</span>".to_owned(),
                |h| format!("<a href=\"{}\">{}</a>", Esc(h), Esc(h)),
            );
            let _ = write!(
                b,
                "<tr class=\"{}\"><td><b>{}</b></td><td class=\"prop\" style=\"color:var(--{})\">{}</td><td>{}</td></tr>",
                if s.as_expected { "good" } else { "bad" },
                Esc(&s.scenario),
                if v.passed { "ok" } else { "bad" },
                Esc(&v.verdict),
                link,
            );
        }
    }
    b.push_str("</table>");
}

/// Each scenario's coverage counters, with their goals.
fn coverage(b: &mut String, r: &IndexReport) {
    b.push_str("<h2>Coverage</h2>");
    for s in r.scenarios.iter().filter(|s| !s.coverage.is_empty()) {
        let _ = write!(
            b,
            "<h3>{}</h3><table><tr><th>counter</th><th>total</th><th>goal</th></tr>",
            Esc(&s.scenario)
        );
        for c in &s.coverage {
            let goal = match c.goal {
                Some(g) if c.value < g => {
                    format!("<span class=\"goal-miss\">≥ {g} (missed)</span>")
                }
                Some(g) => format!("≥ {g} ✓"),
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

/// Seeds as links where they have a safe one, runs of consecutive
/// unlinked seeds as ranges ("0–99"), so ten thousand passing seeds take
/// one line.
fn seeds(list: &[SeedLink]) -> String {
    let mut out = String::new();
    let mut run: Option<(u64, u64)> = None;
    let flush = |out: &mut String, run: &mut Option<(u64, u64)>| {
        if let Some((a, z)) = run.take() {
            if a == z {
                let _ = write!(out, "<span class=\"range\">{a}</span>");
            } else {
                let _ = write!(out, "<span class=\"range\">{a}–{z}</span>");
            }
        }
    };
    for l in list {
        match l.safe_href() {
            Some(h) => {
                flush(&mut out, &mut run);
                let _ = write!(out, "<a href=\"{}\">{}</a>", Esc(h), l.seed);
            }
            None => match &mut run {
                Some((_, z)) if z.checked_add(1) == Some(l.seed) => *z = l.seed,
                _ => {
                    flush(&mut out, &mut run);
                    run = Some((l.seed, l.seed));
                }
            },
        }
    }
    flush(&mut out, &mut run);
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(seed: u64, href: Option<&str>) -> SeedLink {
        SeedLink {
            seed,
            href: href.map(str::to_string),
        }
    }

    #[test]
    fn seeds_compress_to_ranges_and_links() {
        let list = [
            link(0, None),
            link(1, None),
            link(2, None),
            link(3, Some("x/seed-3.html")),
            link(4, None),
            link(6, None),
            link(7, Some("javascript:alert(1)")),
        ];
        assert_eq!(
            seeds(&list),
            "<span class=\"range\">0–2</span><a href=\"x/seed-3.html\">3</a>\
             <span class=\"range\">4</span><span class=\"range\">6–7</span>"
        );
    }

    #[test]
    fn only_relative_hrefs_are_links() {
        for bad in [
            "javascript:alert(1)",
            "JavaScript:x",
            "data:text/html,x",
            "/etc/passwd",
            "//evil.example/x",
            "../../x.html",
            "a/../../x.html",
            "file:///x",
            "a b.html",
            "",
            "\\\\host\\x",
        ] {
            assert_eq!(link(1, Some(bad)).safe_href(), None, "{bad:?}");
        }
        for good in [
            "seed-1.html",
            "lock/seed-1.html",
            "a/b.html#op-3",
            "x.html?y=1",
        ] {
            assert_eq!(link(1, Some(good)).safe_href(), Some(good));
        }
    }
}
