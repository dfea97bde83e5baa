//! The HTML reports: what a seed's page and a run's index show, that
//! nothing from the data reaches a page unescaped, the JSON summaries,
//! and the page in a real browser (headless Chromium): it renders, its
//! script runs, and its screenshot shows the failure.

#[path = "support/report_sample.rs"]
mod sample;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use zoosim::report::*;

// ---------------------------------------------------------------------------
// What a seed's page shows.

#[test]
fn a_failing_seed_shows_the_verdict_the_replay_command_and_the_failure_first() {
    let r = sample::lock_failure();
    let html = render_seed(&r);
    assert!(html.contains("<span class=\"badge\">FAIL</span>"));
    // The failing property in words, at the top.
    let verdict_at = html.find("id=\"verdict\"").unwrap();
    let fenced = html.find("fenced-exclusion</span>: two holders").unwrap();
    assert!(fenced > verdict_at);
    assert!(html.contains("<span class=\"prop\">not linearizable</span> (model zookeeper)"));
    // The replay command, copyable.
    assert!(html.contains(&format!("readonly value=\"{}\"", r.replay_command)));
    // The minimal sub-history first, then the full timeline, then the
    // tables.
    let order: Vec<usize> = [
        "id=\"minimal\"",
        "id=\"tl-min-0\"",
        "id=\"tl-full\"",
        "id=\"lin\"",
        "id=\"checks\"",
        "id=\"ops\"",
    ]
    .iter()
    .map(|m| html.find(m).unwrap_or_else(|| panic!("{m} missing")))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    // The minimal timeline draws its three operations and no others.
    let min = &html[order[1]..order[2]];
    assert_eq!(min.matches("<g class=\"op ").count(), 3, "{min}");
    assert!(min.contains(sample::STUCK_LABEL));
    // The full timeline: every op, the stuck one highlighted (and in the
    // minimal sub-history), the prefix marked, the involved outlined.
    let full = &html[order[2]..order[3]];
    assert_eq!(full.matches("<g class=\"op ").count(), 18);
    assert!(full.contains("<g class=\"op ok stuck minimal\" "));
    assert_eq!(full.matches("class=\"pre-mark\"").count(), 7);
    let classes = op_classes(full);
    assert_eq!(
        classes.iter().filter(|c| c.contains(" involved")).count(),
        2
    );
    // Indeterminate: the ConnectionLoss has a dashed tail to the end; the
    // one that never returned is open-ended.
    assert_eq!(full.matches("class=\"tail\"").count(), 1);
    assert!(full.contains("<g class=\"op indet open\" "));
    // The faults across the lanes, with labels.
    assert_eq!(full.matches("<g class=\"span ").count(), 5);
    assert!(full.contains(">partition {3} | {1,2}</text>"));
    assert!(full.contains("<g class=\"span election\">"));
    // Watch and session events.
    assert!(full.contains("<g class=\"pt watch\""));
    assert_eq!(full.matches("<g class=\"pt session\"").count(), 4);
    // Hover: states before and after, the op's role.
    assert!(full
        .contains("state before: /lock: [b2-0002, c3-0003] (a1-0001 deleted at zxid 0x200000004)"));
    assert!(full.contains("▶ NOT LINEARIZABLE: cannot be linearized after the longest prefix"));
    // The table: one row per op, searchable, linked from the bars.
    let table = &html[order[5]..];
    assert_eq!(table.matches("<tr id=\"op-").count(), 18);
    assert!(table.contains("<tr id=\"op-9\" class=\"bad\">"));
    assert!(full.contains("<g class=\"op ok stuck minimal\" data-id=\"9\">"));
    assert!(table.contains("0x100000003"), "zxids in hex");
    // No problems in consistent data.
    assert!(r.problems().is_empty(), "{:?}", r.problems());
    assert!(!html.contains("inconsistent"));
}

/// The class attribute of every op bar in `html`.
fn op_classes(html: &str) -> Vec<String> {
    html.split("<g class=\"op ")
        .skip(1)
        .map(|rest| format!("op {}", &rest[..rest.find('"').unwrap()]))
        .collect()
}

#[test]
fn a_passing_seed_says_so_and_has_no_failure_sections() {
    let mut r = sample::lock_failure();
    for v in &mut r.verdicts {
        v.passed = true;
    }
    r.lin[0].verdict = LinVerdict::Linearizable;
    r.lin[0].cannot_linearize_next.clear();
    r.lin[0].minimal.clear();
    assert!(!r.failed());
    let html = render_seed(&r);
    assert!(html.contains("<span class=\"badge\">PASS</span>"));
    assert!(html.contains("Every check held."));
    assert!(!html.contains("id=\"minimal\""));
    assert!(op_classes(&html)
        .iter()
        .all(|c| !c.contains("stuck") && !c.contains("minimal")));
    assert_eq!(
        op_classes(&html)
            .iter()
            .filter(|c| c.contains("prefix"))
            .count(),
        7
    );
    assert!(!html.contains("data-fa="), "no failure to focus on");

    // Unknown is not a pass.
    r.lin[0].verdict = LinVerdict::Unknown;
    let html = render_seed(&r);
    assert!(html.contains("<span class=\"badge\">UNKNOWN</span>"));
    assert_eq!(json(&seed_summary_json(&r))["verdict"], "unknown");
}

#[test]
fn an_undecided_seed_says_undecided_with_its_reason_never_pass() {
    let mut r = sample::lock_failure();
    for v in &mut r.verdicts {
        v.passed = true;
    }
    r.lin[0].verdict = LinVerdict::Unknown;
    r.lin[0].cannot_linearize_next.clear();
    r.lin[0].minimal.clear();
    r.undecided = Some("step budget exhausted after 12 search steps <&>".into());
    let html = render_seed(&r);
    check_markup(&html).unwrap();
    assert!(html.contains(
        "<div class=\"verdict unknown\" id=\"verdict\"><span class=\"badge\">UNDECIDED</span>"
    ));
    assert!(!html.contains(">PASS<") && !html.contains("Every check held."));
    assert!(html.contains("step budget exhausted after 12 search steps &lt;&amp;&gt;"));
    let v = json(&seed_summary_json(&r));
    assert_eq!(v["verdict"], "undecided");
    assert_eq!(
        v["undecided"],
        "step budget exhausted after 12 search steps <&>"
    );
    // A failure is a failure, whatever the contract's verdict.
    r.verdicts[0].passed = false;
    let html = render_seed(&r);
    assert!(html.contains("<span class=\"badge\">FAIL</span>"));
    assert!(!html.contains("UNDECIDED"));
    let v = json(&seed_summary_json(&r));
    assert_eq!(v["verdict"], "fail");
    assert!(v.get("undecided").is_none());
}

#[test]
fn the_index_lists_undecided_seeds_with_their_reasons_apart_from_the_passes() {
    let mut ix = sample::index();
    ix.scenarios.truncate(1);
    let lock = &mut ix.scenarios[0];
    lock.verdicts[0].seeds.retain(|l| l.seed != 7);
    lock.undecided = vec![UndecidedSeed {
        seed: SeedLink {
            seed: 7,
            href: Some("lock/seed-7.html".into()),
        },
        why: "step budget exhausted after 9 search steps".into(),
    }];
    let html = render_index(&ix);
    check_markup(&html).unwrap();
    assert!(html.contains("<span class=\"badge\">UNDECIDED</span>"));
    assert!(!html.contains(">PASS<"));
    assert!(html.contains("1 scenario, 100 seeds run, 0 failing seeds, 1 undecided seed;"));
    assert!(html.contains("as expected; 1 seed undecided"));
    assert!(html.contains(
        "<td class=\"prop undecided\">UNDECIDED</td><td class=\"seeds\"><a href=\"lock/seed-7.html\">7</a>"
    ));
    assert!(html.contains("seed 7: contract undecided: step budget exhausted after 9 search steps"));
    // The passes' row has every seed but 7.
    assert!(html.contains("<span class=\"range\">0–6</span><span class=\"range\">8–99</span>"));
    let v = json(&index_summary_json(&ix));
    assert_eq!(v["verdict"], "undecided");
    assert_eq!(v["undecided_seeds"], 1);
    assert_eq!(
        v["rows"][0]["undecided"][0],
        serde_json::json!({"seed": 7, "why": "step budget exhausted after 9 search steps", "report": "lock/seed-7.html"})
    );
    assert_eq!(v["rows"][0]["failed_seeds"], serde_json::json!([]));
}

#[test]
fn inconsistent_data_is_shown_not_panicked_on() {
    let mut r = sample::lock_failure();
    r.lanes[4].ops[0].id = 1; // duplicate of client 1's first op
    r.lin[0].minimal.push(999);
    r.verdicts[0].ops.push(998);
    r.lanes[0].ops[1].end_us = Some(0); // ends before it starts
    r.spans.push(Span {
        start_us: 5,
        end_us: Some(1),
        label: "backwards".into(),
        kind: SpanKind::Other,
    });
    let problems = r.problems();
    assert_eq!(problems.len(), 5, "{problems:#?}");
    let html = render_seed(&r);
    assert!(html.contains("This report's data is inconsistent"));
    for p in [
        "operation id 1 is used twice",
        "names operation 999, which no lane has",
        "check &quot;fenced-exclusion&quot; names operation 998",
        "operation 4 ends (0 µs) before it starts",
        "span &quot;backwards&quot; ends before it starts",
    ] {
        assert!(html.contains(p), "{p}");
    }
    // An empty report renders too.
    let html = render_seed(&SeedReport::default());
    assert!(html.contains("PASS"));
    check_markup(&html).unwrap();
}

#[test]
fn a_large_history_opens_on_the_failure_and_keeps_every_op_in_the_table() {
    let r = sample::large(10_000);
    let html = render_seed(&r);
    check_markup(&html).unwrap();
    let full_at = html.find("id=\"tl-full\"").unwrap();
    let full_tag = &html[full_at..full_at + 300];
    assert!(full_tag.contains("data-start=\"focus\""), "{full_tag}");
    // Laid out at the zoom it opens at: the page's script moves nothing
    // on load.
    let z0 = &full_tag[full_tag.find("data-z0=\"").unwrap() + 9..];
    let z0: f64 = z0[..z0.find('"').unwrap()].parse().unwrap();
    assert!(z0 > 2.0, "{full_tag}");
    let (a, b) = (r.lin[0].minimal[0], *r.lin[0].minimal.last().unwrap());
    let find = |id| r.ops().find(|(_, o)| o.id == id).unwrap().1.clone();
    assert!(full_tag.contains(&format!(
        "data-fa=\"{}\"",
        find(a).start_us.min(find(b).start_us)
    )));
    assert_eq!(html.matches("<tr id=\"op-").count(), 10_000);
    // Labels are drawn only where they fit: even at the zoom it opens at,
    // many do not.
    let hidden = html.matches("display=\"none\">setData").count();
    assert!(hidden > 2_500, "{hidden}");
    // The small history fits the view and opens on the whole run.
    let small = render_seed(&sample::lock_failure());
    assert!(!small.contains("data-start=\"focus\""));
}

// ---------------------------------------------------------------------------
// Escaping: nothing from the data comes out unescaped.

/// What every string of the data is replaced with (plus its path).
const HOSTILE: &str = "</script><script>alert(1)</script>\"'><img src=x onerror=alert(1)> \
    ' onmouseover='alert(2)' & &amp; &#x3c; <!-- ]]></svg><svg onload=alert(3)> </title></textarea>\
    \u{0}\u{1b}[31m\u{7f} javascript:alert(4) ";

/// `value` with every string replaced by [`HOSTILE`], the bytes
/// `\xff<\xfe` shown by `show_bytes`, and the string's path.
fn poison(value: &mut Value, path: &str, paths: &mut Vec<String>) {
    // Enums' variant names stay: they are not strings the data chooses.
    const VARIANTS: &[&str] = &[
        "client",
        "server",
        "ok",
        "failed",
        "indeterminate",
        "watch",
        "session",
        "other",
        "crash",
        "partition",
        "network",
        "pause",
        "election",
        "linearizable",
        "not-linearizable",
        "unknown",
    ];
    let field = path.rsplit('.').next().unwrap_or("");
    match value {
        Value::String(s)
            if ["kind", "status", "verdict"].contains(&field) && VARIANTS.contains(&s.as_str()) => {
        }
        Value::String(s) => {
            let tag = format!("@{path}@");
            *s = format!("{HOSTILE}{}{tag}", show_bytes(b"\xff<\xfe"));
            paths.push(tag);
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                poison(v, &format!("{path}.{i}"), paths);
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                poison(v, &format!("{path}.{k}"), paths);
            }
        }
        _ => {}
    }
}

fn poisoned<T: serde::Serialize + serde::de::DeserializeOwned>(t: &T) -> (T, Vec<String>) {
    let mut v = serde_json::to_value(t).unwrap();
    let mut paths = Vec::new();
    poison(&mut v, "", &mut paths);
    (serde_json::from_value(v).unwrap(), paths)
}

#[test]
fn hostile_strings_in_every_field_come_out_escaped() {
    let (r, paths) = poisoned(&sample::lock_failure());
    assert!(paths.len() > 100, "{}", paths.len());
    let html = render_seed(&r);
    check_markup(&html).unwrap_or_else(|e| panic!("seed page: {e}"));
    let escaped = escape(&format!("{HOSTILE}{}", show_bytes(b"\xff<\xfe")));
    assert!(escaped.contains("\\xff&lt;\\xfe") && escaped.contains("\\u{1b}[31m"));
    // Every field is on the page, escaped (none silently dropped).
    for p in &paths {
        assert!(
            html.contains(&format!("{escaped}{p}")),
            "field {p} is not on the page escaped"
        );
    }

    let (ix, paths) = poisoned(&sample::index());
    let html = render_index(&ix);
    check_markup(&html).unwrap_or_else(|e| panic!("index page: {e}"));
    for p in paths {
        // Hrefs that are not plain relative paths are shown as text, not
        // linked: the seed number is there, the hostile href is not.
        if p.contains(".href@") {
            assert!(!html.contains(&p), "{p}");
        } else {
            assert!(html.contains(&format!("{escaped}{p}")), "field {p}");
        }
    }
    // The summaries are JSON that parses back to the same strings.
    let (r, _) = poisoned(&sample::lock_failure());
    let v = json(&seed_summary_json(&r));
    assert!(v["failed"][0]["detail"]
        .as_str()
        .unwrap()
        .starts_with(HOSTILE));
}

#[test]
fn the_markup_check_catches_an_unescaped_injection() {
    // The check above earns its trust by failing on a page that lets
    // data through.
    let ok = "<!DOCTYPE html>\n<html><body><p class=\"x\">a &lt; b</p><script>var a = \"<p>\";</script></body></html>";
    check_markup(ok).unwrap();
    for (bad, why) in [
        ("<p><img src=x onerror=alert(1)></p>", "tag <img>"),
        (
            "<p title=\"a\" onmouseover=\"x\">t</p>",
            "attribute onmouseover",
        ),
        (
            "<p class=\"a\"><b>x</b></p><script>1</script><script>2</script>",
            "2 script",
        ),
        ("<p>a < b</p>", "raw '<'"),
        ("<a href=\"javascript:alert(1)\">x</a>", "href"),
        ("<p class=\"a\"x\">y</p>", "attribute x\""),
        ("<p><!-- c --></p>", "comment"),
    ] {
        let err = check_markup(bad).expect_err(bad);
        assert!(err.contains(why), "{bad}: {err}");
    }
}

/// Tags, attributes and scripts on a page: only what the renderer writes
/// itself. Errors name what was found.
fn check_markup(html: &str) -> Result<(), String> {
    const TAGS: &[&str] = &[
        "html", "head", "meta", "title", "style", "script", "body", "svg", "defs", "pattern",
        "rect", "g", "text", "line", "path", "a", "div", "span", "button", "input", "label", "h1",
        "h2", "h3", "p", "b", "i", "code", "small", "ul", "li", "table", "colgroup", "col", "tr",
        "th", "td", "br",
    ];
    const ATTRS: &[&str] = &[
        "lang",
        "charset",
        "http-equiv",
        "content",
        "name",
        "class",
        "id",
        "style",
        "title",
        "width",
        "height",
        "x",
        "y",
        "x1",
        "x2",
        "y1",
        "y2",
        "rx",
        "d",
        "transform",
        "href",
        "xmlns",
        "patternunits",
        "patterntransform",
        "fill",
        "aria-hidden",
        "hidden",
        "for",
        "readonly",
        "value",
        "rowspan",
        "display",
    ];
    let b = html.as_bytes();
    let mut i = 0;
    let near = |i: usize| {
        html.get(i.saturating_sub(40)..(i + 40).min(html.len()))
            .unwrap_or("")
            .to_string()
    };
    while i < b.len() {
        if b[i] != b'<' {
            i += 1;
            continue;
        }
        if html[i..].starts_with("<!DOCTYPE html>") {
            i += 15;
            continue;
        }
        if html[i..].starts_with("<!--") {
            return Err(format!("a comment at {i}: {}", near(i)));
        }
        let close = b.get(i + 1) == Some(&b'/');
        let mut j = i + 1 + close as usize;
        let start = j;
        while j < b.len() && (b[j].is_ascii_alphanumeric()) {
            j += 1;
        }
        let name = html[start..j].to_ascii_lowercase();
        if name.is_empty() {
            return Err(format!("a raw '<' in text at {i}: {}", near(i)));
        }
        if !TAGS.contains(&name.as_str()) {
            return Err(format!("tag <{name}> at {i}: {}", near(i)));
        }
        // Attributes.
        loop {
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            if j >= b.len() {
                return Err(format!("unterminated tag <{name}>"));
            }
            if b[j] == b'>' || html[j..].starts_with("/>") {
                j += if b[j] == b'>' { 1 } else { 2 };
                break;
            }
            let a0 = j;
            while j < b.len() && !b" \t\n=/>".contains(&b[j]) {
                j += 1;
            }
            let attr = html[a0..j].to_ascii_lowercase();
            let data = attr.strip_prefix("data-").is_some_and(|r| {
                !r.is_empty()
                    && r.bytes()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            });
            if !(ATTRS.contains(&attr.as_str()) || data) || attr.starts_with("on") {
                return Err(format!(
                    "attribute {attr} on <{name}> at {a0}: {}",
                    near(a0)
                ));
            }
            let mut value = String::new();
            if b.get(j) == Some(&b'=') {
                j += 1;
                let q = b[j];
                if q != b'"' && q != b'\'' {
                    return Err(format!("unquoted value of {attr} at {j}"));
                }
                let end = html[j + 1..].find(q as char).ok_or("unterminated value")? + j + 1;
                value = html[j + 1..end].to_string();
                if value.contains('<') {
                    return Err(format!("a raw '<' in attribute {attr} at {j}"));
                }
                j = end + 1;
            }
            if attr == "href" {
                let ok = value
                    .strip_prefix("#op-")
                    .is_some_and(|n| n.parse::<u64>().is_ok())
                    || SeedLink {
                        seed: 0,
                        href: Some(value.clone()),
                    }
                    .safe_href()
                    .is_some();
                if !ok {
                    return Err(format!("href {value:?} at {a0}"));
                }
            }
        }
        // The script's and style's text is the renderer's own: skip it.
        if !close && (name == "script" || name == "style") {
            let end = format!("</{name}>");
            j = html[j..].find(&end).ok_or(format!("unclosed <{name}>"))? + j;
        }
        i = j;
    }
    let scripts = html.to_ascii_lowercase().matches("<script").count();
    if scripts != 1 {
        return Err(format!(
            "{scripts} script blocks (only the page's own one allowed)"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The JSON summaries and the index.

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

#[test]
fn a_minimal_history_of_one_operation_says_what_that_does_and_does_not_show() {
    let mut r = sample::lock_failure();
    let words = "One operation alone.";
    assert!(!render_seed(&r).contains(words));
    r.lin[0].minimal = vec![9];
    let html = render_seed(&r);
    let minimal =
        &html[html.find("id=\"minimal\"").unwrap()..html.find("id=\"timeline\"").unwrap()];
    assert!(minimal.contains(words), "{minimal}");
    assert!(minimal.contains("no order of this history's writes produces the state it needs"));
}

#[test]
fn a_failure_without_a_confirmed_minimal_history_says_so_where_it_would_be() {
    let mut r = sample::lock_failure();
    r.lin[0].minimal.clear();
    r.lin[0].minimal_note = Some("none confirmed: shrinking ran out of its budget".into());
    let html = render_seed(&r);
    let minimal =
        &html[html.find("id=\"minimal\"").unwrap()..html.find("id=\"timeline\"").unwrap()];
    assert!(minimal.contains("none confirmed: shrinking ran out of its budget"));
    assert!(
        !minimal.contains("id=\"tl-min-0\""),
        "no timeline of nothing"
    );
    let lin = &html[html.find("id=\"lin\"").unwrap()..];
    assert!(lin.contains("<b>Minimal failing sub-history:</b> none confirmed"));
}

#[test]
fn many_faults_keep_the_strip_a_few_rows_high_with_every_label_on_hover() {
    let strip_h = |html: &str| -> u32 {
        let at = html.find("class=\"strip-label\" style=\"height:").unwrap() + 34;
        html[at..at + 6]
            .split("px")
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let mut r = sample::lock_failure();
    let few = strip_h(&render_seed(&r));
    // Forty short faults close together: each label would need a row.
    for i in 0..40u64 {
        r.spans.push(Span {
            start_us: 1_000_000 + i * 20_000,
            end_us: Some(1_000_000 + i * 20_000 + 5_000),
            label: format!("link-delay server {} → {} +{i} ms", i % 3, (i + 1) % 3),
            kind: SpanKind::Network,
        });
    }
    let html = render_seed(&r);
    // As many rows as faults overlap (four, in the sample), not one per
    // label.
    assert!(
        strip_h(&html) <= 4 * 18 + 4,
        "{} px (was {few} px)",
        strip_h(&html)
    );
    // Each fault keeps its label (shown where it fits, else on hover).
    for i in 0..40 {
        assert!(html.contains(&format!("+{i} ms\n")), "fault {i}");
    }
    assert!(html.contains("class=\"chip-l\" data-a="));
}

#[test]
fn the_seed_summary_names_the_failure_and_the_minimal_sub_history() {
    let r = sample::lock_failure();
    let v = json(&seed_summary_json(&r));
    assert_eq!(v["verdict"], "fail");
    assert_eq!(v["seed"], 17);
    assert_eq!(v["failed"].as_array().unwrap().len(), 1);
    assert_eq!(v["failed"][0]["property"], "fenced-exclusion");
    assert_eq!(v["failed"][0]["detail"], sample::FENCED_DETAIL);
    assert_eq!(v["failed"][0]["ops"], serde_json::json!([8, 11]));
    assert_eq!(v["replay_command"], r.replay_command);
    assert_eq!(v["ops"], 18);
    assert_eq!(v["lin"][0]["verdict"], "not-linearizable");
    assert_eq!(v["lin"][0]["minimal"], serde_json::json!([1, 10, 9]));
    assert_eq!(v["lin"][0]["cannot_linearize_next"], serde_json::json!([9]));
    assert_eq!(v["lin"][0]["longest_prefix"], 7);
    assert_eq!(v["counters"][1]["name"], "fault:partition");
    // And the report itself round-trips through JSON.
    let back: SeedReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back, r);
}

#[test]
fn the_index_shows_scenarios_verdicts_seeds_and_coverage() {
    let ix = sample::index();
    let html = render_index(&ix);
    check_markup(&html).unwrap();
    assert!(html.contains("<span class=\"badge\">FAIL</span>"));
    assert!(html.contains(
        "2 scenarios, 200 seeds run, 2 failing seeds, 0 undecided seeds; 1 scenario not as expected; 1 coverage goal missed."
    ));
    assert!(html.contains("<a href=\"lock-no-fence/seed-17.html\">17</a>"));
    assert!(html.contains("<a href=\"lock-no-fence/seed-42.html\">42</a>"));
    // 100 passing seeds in one range; 98 around the two failures in three.
    assert!(html.contains("<span class=\"range\">0–99</span>"));
    assert!(html.contains(
        "<span class=\"range\">0–16</span><span class=\"range\">18–41</span><span class=\"range\">43–99</span>"
    ));
    assert!(html.contains("NOT as expected"));
    assert!(html.contains("<span class=\"goal-miss\">≥ 10 (missed)</span>"));
    assert!(html.contains("≥ 50 ✓"));

    let v = json(&index_summary_json(&ix));
    assert_eq!(v["verdict"], "fail");
    assert_eq!(v["seeds_run"], 200);
    assert_eq!(v["failed_seeds"], 2);
    assert_eq!(v["not_as_expected"], 1);
    assert_eq!(v["goals_missed"], 1);
    assert_eq!(v["rows"][1]["failed_seeds"], serde_json::json!([17, 42]));
    assert_eq!(
        v["rows"][1]["verdicts"][1]["reports"][0],
        serde_json::json!([17, "lock-no-fence/seed-17.html"])
    );

    // All as expected and goals met: a pass.
    let mut ok = ix.clone();
    ok.scenarios.truncate(1);
    let html = render_index(&ok);
    assert!(html.contains("<span class=\"badge\">PASS</span>"));
    assert_eq!(json(&index_summary_json(&ok))["verdict"], "pass");
}

// ---------------------------------------------------------------------------
// In a browser.

/// Headless Chromium, or None (and a loud SKIP) when it is not installed;
/// a failure instead when the environment requires it.
fn chromium() -> Option<PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        let required = ["ZOOSIM_REQUIRE_CHROMIUM", "ZOOSIM_REQUIRE_ZK"]
            .iter()
            .find(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
        if let Some(var) = required {
            panic!("chromium is not installed (apt-get install chromium) and {var} requires it");
        }
        eprintln!(
            "SKIP: chromium not installed (apt-get install chromium); the report's browser test did not run"
        );
    }
    found
}

/// Runs Chromium headless on `page` with `args`, in a fresh profile;
/// returns its stdout. Killed after 60 s.
fn run_chromium(bin: &Path, dir: &Path, profile: &str, args: &[String], page: &Path) -> String {
    let mut cmd = Command::new(bin);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", dir.join(profile).display()))
    .args(args)
    .arg(format!("file://{}", page.display()))
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let child = cmd.spawn().expect("starting chromium");
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    while !waiter.is_finished() {
        if Instant::now() > deadline {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("chromium did not finish within 60 s on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = waiter.join().unwrap().expect("chromium's output");
    assert!(
        out.status.success(),
        "chromium failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Decoded RGB(A) pixels of a PNG: (width, height, channels, bytes).
fn decode_png(path: &Path) -> (u32, u32, usize, Vec<u8>) {
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut reader = png::Decoder::new(file).read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    buf.truncate(info.buffer_size());
    let channels = info.color_type.samples();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    (info.width, info.height, channels, buf)
}

/// Pixels within `tol` of `rgb` in rows `rows`.
fn count_colour(
    png: &(u32, u32, usize, Vec<u8>),
    rgb: [u8; 3],
    tol: u8,
    rows: std::ops::Range<u32>,
) -> usize {
    let (w, _, ch, px) = png;
    let mut n = 0;
    for y in rows {
        for x in 0..*w {
            let i = ((y * w + x) as usize) * ch;
            if (0..3).all(|c| px[i + c].abs_diff(rgb[c]) <= tol) {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn the_report_renders_in_a_browser_and_its_screenshot_shows_the_failure() {
    let Some(bin) = chromium() else { return };
    let dir = std::env::temp_dir().join(format!("zoosim-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("lock-no-fence")).unwrap();
    let page = dir.join("lock-no-fence/seed-17.html");
    std::fs::write(&page, render_seed(&sample::lock_failure())).unwrap();
    std::fs::write(
        dir.join("lock-no-fence/seed-17.json"),
        seed_summary_json(&sample::lock_failure()),
    )
    .unwrap();
    let index = dir.join("index.html");
    std::fs::write(&index, render_index(&sample::index())).unwrap();

    // The DOM after the script ran: the failing operation and property
    // are there, and the script did its work (the zoom readout is
    // written only by it).
    let dom = run_chromium(&bin, &dir, "p1", &["--dump-dom".into()], &page);
    assert!(
        dom.contains(sample::STUCK_LABEL),
        "failing operation not in the DOM"
    );
    assert!(dom.contains("fenced-exclusion"));
    assert!(dom.contains(sample::FENCED_DETAIL));
    assert!(dom.contains("zoom ×1.00"), "the page's script did not run");
    assert!(dom.contains("class=\"op ok stuck minimal\" data-id=\"9\""));

    // The screenshot: not blank, and the failure is on it.
    let png = dir.join("seed-17.png");
    run_chromium(
        &bin,
        &dir,
        "p2",
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1400,1000".into(),
        ],
        &page,
    );
    let img = decode_png(&png);
    assert_eq!((img.0, img.1), (1400, 1000));
    let white = count_colour(&img, [255, 255, 255], 6, 0..1000);
    assert!(
        white < 1400 * 1000 * 95 / 100,
        "the screenshot is (nearly) blank"
    );
    // The FAIL badge (red) near the top, the minimal sub-history's orange
    // outline and the stuck operation's red outline below it.
    let red = [0xd6, 0x28, 0x28];
    assert!(
        count_colour(&img, red, 12, 0..250) > 500,
        "no FAIL badge on the screenshot"
    );
    assert!(
        count_colour(&img, [0xf0, 0x8c, 0x00], 12, 250..1000) > 50,
        "no minimal sub-history on the screenshot"
    );
    assert!(
        count_colour(&img, red, 12, 250..1000) > 50,
        "no highlighted failing operation on the screenshot"
    );
    if let Ok(keep) = std::env::var("ZOOSIM_REPORT_SCREENSHOT") {
        std::fs::copy(&png, &keep).unwrap();
        std::fs::copy(&page, format!("{keep}.html")).unwrap();
        // And a large page, to look at by hand.
        std::fs::write(
            format!("{keep}.large.html"),
            render_seed(&sample::large(10_000)),
        )
        .unwrap();
    }

    // A history too large to read whole opens zoomed in on the failure.
    let large = dir.join("large.html");
    std::fs::write(&large, render_seed(&sample::large(1_000))).unwrap();
    let dom = run_chromium(&bin, &dir, "p5", &["--dump-dom".into()], &large);
    let full = &dom[dom.find("id=\"tl-full\"").expect("the full timeline")..];
    let info = &full[full.find("class=\"z-info\">").expect("its zoom readout") + 20..];
    let zoom: f64 = info[..info.find('<').unwrap()]
        .trim_start_matches('×')
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {}", &info[..40]));
    assert!(
        zoom > 2.0,
        "the large history opened at zoom {zoom}, not on the failure"
    );

    // The index renders too, with its link to the seed's page.
    let dom = run_chromium(&bin, &dir, "p3", &["--dump-dom".into()], &index);
    assert!(dom.contains("href=\"lock-no-fence/seed-17.html\""));
    let png = dir.join("index.png");
    run_chromium(
        &bin,
        &dir,
        "p4",
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1400,1000".into(),
        ],
        &index,
    );
    let img = decode_png(&png);
    assert!(
        count_colour(&img, red, 12, 0..250) > 500,
        "no FAIL badge on the index"
    );
    if let Ok(keep) = std::env::var("ZOOSIM_REPORT_SCREENSHOT") {
        std::fs::copy(&png, format!("{keep}.index.png")).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `zoosim` run as a user runs it, from the crate's root: its stdout, after
/// checking it exited with `code`.
fn zoosim(args: &[&str], code: i32) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_zoosim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("zoosim runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(code),
        "{args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The page whose `file://` link follows `prefix` in `out`.
fn linked(out: &str, prefix: &str) -> PathBuf {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} in:\n{out}"));
    PathBuf::from(line[line.find("file://").expect("a link") + 7..].trim())
}

#[test]
fn real_failing_seeds_reports_written_by_the_command_show_their_failure_in_a_browser() {
    let Some(bin) = chromium() else { return };
    let dir = std::env::temp_dir().join(format!("zoosim-report-real-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display().to_string();

    // A recipe's bug: the first failing seed of a bug-* scenario, reported
    // by the run that finds it, with an index of the run.
    let out = zoosim(
        &[
            "run",
            "scenarios/bug-election-keep-leadership-after-expiry.toml",
            "--seeds",
            "4",
            // The scenario's first caught seed is its 3rd.
            "--seed-start",
            "281280512",
            "--report",
            &d,
        ],
        0,
    );
    let page = linked(
        &out,
        "report of bug-election-keep-leadership-after-expiry seed",
    );
    let index = linked(&out, "report index:");
    let dom = run_chromium(&bin, &dir, "r1", &["--dump-dom".into()], &page);
    assert!(dom.contains("<span class=\"prop\">told-is-told</span>: client 3 acted with token 78"));
    assert!(dom.contains("zoom ×"), "the page's script did not run");
    let red = [0xd6, 0x28, 0x28];

    // A broken ensemble (a follower answering writes itself): the write
    // that cannot be placed in any order is the failing operation, and
    // the contract, judged in every run, fails the replay (exit 1).
    let out = zoosim(
        &[
            "replay",
            "tests/data/broken/follower-local-write.toml",
            "--seed",
            &0xb40c0000u64.to_string(),
            "--report",
            &d,
        ],
        1,
    );
    let broken = linked(&out, "report:");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(broken.with_extension("json")).unwrap())
            .unwrap();
    let stuck = summary["lin"][0]["cannot_linearize_next"][0]
        .as_u64()
        .unwrap();
    let dom = run_chromium(&bin, &dir, "r3", &["--dump-dom".into()], &broken);
    assert!(dom.contains("<span class=\"prop\">writes-linearizable</span>"));
    let bar = format!("<g class=\"op ok stuck involved\" data-id=\"{stuck}\">");
    let at = dom.find(&bar).expect("the failing operation's bar");
    assert!(
        dom[at..at + 400].contains("set_data /config"),
        "{}",
        &dom[at..at + 400]
    );
    let shot = dir.join("broken.png");
    run_chromium(
        &bin,
        &dir,
        "r4",
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1400,1000".into(),
        ],
        &broken,
    );
    let img = decode_png(&shot);
    assert!(count_colour(&img, red, 12, 0..250) > 500, "no FAIL badge");
    assert!(
        count_colour(&img, red, 12, 250..1000) > 50,
        "the failing operation is not outlined on the screenshot"
    );

    // The run's index links the failing seed's page (relative), and
    // shows the run's verdict.
    let href = page.strip_prefix(&dir).unwrap().display().to_string();
    let html = std::fs::read_to_string(&index).unwrap();
    assert!(html.contains(&format!("href=\"{href}\"")), "{href}");
    let index_png = dir.join("index.png");
    run_chromium(
        &bin,
        &dir,
        "r5",
        &[
            format!("--screenshot={}", index_png.display()),
            "--window-size=1400,1000".into(),
        ],
        &index,
    );
    let green = [0x3f, 0x8f, 0x5f];
    assert!(
        count_colour(&decode_png(&index_png), green, 16, 0..250) > 200,
        "no PASS badge on the index (every scenario as expected)"
    );
    if let Ok(keep) = std::env::var("ZOOSIM_REPORT_SCREENSHOT") {
        let png = format!("{keep}.real-recipe.png");
        run_chromium(
            &bin,
            &dir,
            "r6",
            &[
                format!("--screenshot={png}"),
                "--window-size=1400,1000".into(),
            ],
            &page,
        );
        std::fs::copy(&shot, format!("{keep}.real-broken.png")).unwrap();
        std::fs::copy(&index_png, format!("{keep}.real-index.png")).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `<g class="op …" data-id="ID">` element of operation `id` in a
/// page: its classes and its hover text.
fn bar(html: &str, id: u64) -> (String, String) {
    let key = format!("\" data-id=\"{id}\"><title>");
    let at = html.find(&key).unwrap_or_else(|| panic!("no bar #{id}"));
    let class_at = html[..at].rfind("class=\"").unwrap() + 7;
    let title = &html[at + key.len()..];
    (
        html[class_at..at].to_owned(),
        title[..title.find("</title>").unwrap()].to_owned(),
    )
}

#[test]
fn an_oracle_failure_outlines_the_operations_it_rests_on() {
    // Mutual exclusion broken (a lock that sorts its nodes by full name):
    // the check names the two holders' acquisitions, and the page outlines
    // the operation each acted on, in the holders' own lanes.
    let dir = std::env::temp_dir().join(format!("zoosim-report-oracle-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = zoosim(
        &[
            "replay",
            "scenarios/bug-lock-sort-by-full-name.toml",
            "--seed",
            "281280512",
            "--report",
            &dir.display().to_string(),
        ],
        1,
    );
    let page = linked(&out, "report:");
    let summary = json(&std::fs::read_to_string(page.with_extension("json")).unwrap());
    let failed = summary["failed"].as_array().unwrap();
    let holders = failed
        .iter()
        .find(|f| f["property"] == "stale-beliefs-only-after-loss")
        .expect("the two holders");
    let detail = holders["detail"].as_str().unwrap();
    assert!(detail.starts_with("two holders: client 2"), "{detail}");
    let ops: Vec<u64> = holders["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(ops.len(), 2, "one operation per holder: {ops:?}");
    let html = std::fs::read_to_string(&page).unwrap();
    let lanes: Vec<String> = ops
        .iter()
        .map(|&id| {
            let (class, tip) = bar(&html, id);
            assert!(class.contains("involved"), "#{id}: {class}");
            assert!(
                tip.contains("involved in the failure of stale-beliefs-only-after-loss"),
                "{tip}"
            );
            tip.lines().next().unwrap().to_owned()
        })
        .collect();
    assert!(
        lanes[0].contains(" client 2 ") && lanes[1].contains(" client 0 "),
        "{lanes:?}"
    );
    // The herd it also shows: every woken waiter's operation.
    let herd = failed.iter().find(|f| f["property"] == "no-herd").unwrap();
    assert_eq!(herd["ops"].as_array().unwrap().len(), 3, "{herd}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_contracts_page_shows_the_model_states_around_the_failure() {
    let dir = std::env::temp_dir().join(format!("zoosim-report-states-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = zoosim(
        &[
            "replay",
            "tests/data/broken/follower-local-write.toml",
            "--seed",
            &0xb40c0000u64.to_string(),
            "--report",
            &dir.display().to_string(),
        ],
        1,
    );
    let page = linked(&out, "report:");
    let summary = json(&std::fs::read_to_string(page.with_extension("json")).unwrap());
    let html = std::fs::read_to_string(&page).unwrap();
    // The operations none of which can come next: the tree they could
    // not be applied to, and no state after.
    for id in summary["lin"][0]["cannot_linearize_next"]
        .as_array()
        .unwrap()
    {
        let (_, tip) = bar(&html, id.as_u64().unwrap());
        assert!(tip.contains("state before: /"), "{tip}");
        assert!(!tip.contains("state after:"), "{tip}");
    }
    // The prefix's last operations: the tree before and after each; the
    // first ones none (the page stays small).
    let prefix_len = summary["lin"][0]["longest_prefix"].as_u64().unwrap();
    assert!(prefix_len > 8, "{prefix_len}");
    let with_states = html.matches("state after:  ").count();
    assert_eq!(with_states, 8, "hover states on the last 8 prefix steps");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_history_files_page_says_it_is_a_file_not_a_seed() {
    let dir = std::env::temp_dir().join(format!("zoosim-report-file-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = zoosim(
        &[
            "lin",
            "tests/data/histories/etcd/etcd_000.log",
            "--model",
            "cas-register",
            "--report",
            &dir.display().to_string(),
        ],
        1,
    );
    // The links on standard output, as `run` and `replay` print theirs.
    assert_eq!(linked(&out, "report:"), dir.join("etcd_000.log.html"));
    assert_eq!(linked(&out, "report index:"), dir.join("index.html"));
    let html = std::fs::read_to_string(dir.join("etcd_000.log.html")).unwrap();
    let header = &html[html.find("<p class=\"sub\">").unwrap()..];
    let header = &header[..header.find("</p>").unwrap()];
    assert!(
        header.contains("history file <b>tests/data/histories/etcd/etcd_000.log</b>")
            && header.contains("format <b>Jepsen log")
            && header.contains("model <b>cas-register</b>")
            && header.contains("the file&#39;s line numbers"),
        "{header}"
    );
    assert!(
        !header.contains("seed") && !header.contains("simulated"),
        "{header}"
    );
    assert!(html.contains("<label for=\"replay\">Check again:</label>"));
    // Time is lines, and said so: the axis, the hover, the tables.
    assert!(html.contains(">line of the file</div>"));
    // (A failed cas is read as a compare that saw another value, so the
    // shortest failing run is at lines 67-71.)
    assert!(html.contains("called line 67, returned line 68 (1 line)"));
    assert!(
        html.contains(">line 67</text>"),
        "the minimal timeline's ticks"
    );
    assert!(!html.contains("67.000000 s") && !html.contains("67.000 s"));
    // The index speaks of files, not seeds.
    let index = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(index.contains("1 history file checked"));
    assert!(index.contains("<a href=\"etcd_000.log.html\">etcd_000.log.html</a>"));
    let body = &index[index.find("<body>").unwrap()..index.find("<script>").unwrap()];
    assert!(!body.to_lowercase().contains("seed"), "{body}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_undecided_seeds_page_and_the_index_say_undecided_in_a_browser_never_pass() {
    // tests/data/undecided: a seed whose contract the zxid-ordered pass
    // cannot order, so that with no search budget it is undecided.
    let dir = std::env::temp_dir().join(format!("zoosim-report-undecided-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display().to_string();
    let out = zoosim(
        &[
            "run",
            "tests/data/undecided/two-phase-commit.toml",
            "--seeds",
            "2",
            "--seed-start",
            "734003315",
            "--contract-steps",
            "0",
            "--report",
            &d,
        ],
        0,
    );
    // Its page is written and linked as a failing seed's is.
    let page = linked(&out, "report of two-phase-commit seed 734003316:");
    let index = linked(&out, "report index:");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<span class=\"badge\">UNDECIDED</span>"));
    assert!(html.contains("step budget exhausted after 0 search steps"));
    assert!(!html.contains(">PASS<"));
    let seed: Value =
        serde_json::from_str(&std::fs::read_to_string(page.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(seed["verdict"], "undecided");
    assert!(seed["replay_command"]
        .as_str()
        .unwrap()
        .ends_with("--contract-steps 0"));
    let ix: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("index.json")).unwrap()).unwrap();
    assert_eq!(
        (&ix["verdict"], &ix["undecided_seeds"]),
        (&"undecided".into(), &1.into())
    );
    let row = &ix["rows"][0];
    assert_eq!(row["undecided"][0]["seed"], 734003316);
    assert_eq!(
        row["undecided"][0]["report"],
        "two-phase-commit/seed-734003316.html"
    );
    // The decided seed alone passes.
    assert_eq!(row["verdicts"][0]["verdict"], "pass");
    assert_eq!(row["verdicts"][0]["seeds"], 1);

    let Some(bin) = chromium() else { return };
    let amber = [0xb7, 0x79, 0x1f];
    let green = [0x3f, 0x8f, 0x5f];
    for (name, p) in [("seed", &page), ("index", &index)] {
        let dom = run_chromium(&bin, &dir, &format!("u-{name}"), &["--dump-dom".into()], p);
        assert!(
            dom.contains("<span class=\"badge\">UNDECIDED</span>"),
            "{name}"
        );
        assert!(
            dom.contains("step budget exhausted after 0 search steps"),
            "{name}"
        );
        let png = dir.join(format!("{name}.png"));
        run_chromium(
            &bin,
            &dir,
            &format!("u-{name}-shot"),
            &[
                format!("--screenshot={}", png.display()),
                "--window-size=1200,900".into(),
            ],
            p,
        );
        let img = decode_png(&png);
        assert!(
            count_colour(&img, amber, 12, 0..250) > 500,
            "no amber UNDECIDED badge on the {name}'s screenshot"
        );
        assert!(
            count_colour(&img, green, 12, 0..250) < 50,
            "a green PASS on the {name}'s screenshot"
        );
        if let Ok(keep) = std::env::var("ZOOSIM_REPORT_SCREENSHOT") {
            std::fs::copy(&png, format!("{keep}.undecided-{name}.png")).unwrap();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
