//! The page around a report: the document, its one style sheet and its
//! one script, both inline and constant (nothing from the data is ever
//! written into them).

use super::escape::Esc;

/// A whole HTML document: `title` (escaped here) and `body` (already
/// HTML, every data string in it escaped by its writer).
pub(crate) fn document(title: &str, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + CSS.len() + JS.len() + 512);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    // No request may leave the page: the policy says so to the browser too.
    out.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">",
    );
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    out.push_str("<title>");
    out.push_str(&Esc(title).to_string());
    out.push_str("</title><style>");
    out.push_str(CSS);
    out.push_str("</style></head><body>");
    // The hatching of indeterminate operations, shared by every timeline.
    out.push_str(
        "<svg width=\"0\" height=\"0\" style=\"position:absolute\" aria-hidden=\"true\"><defs>\
         <pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">\
         <rect width=\"6\" height=\"6\" fill=\"#e4d9fd\"/><rect width=\"3\" height=\"6\" fill=\"#8b5cf6\"/></pattern></defs></svg>",
    );
    out.push_str(body);
    out.push_str("<div id=\"tip\" hidden></div><script>");
    out.push_str(JS);
    out.push_str("</script></body></html>\n");
    out
}

const CSS: &str = r#"
:root { --ok:#3f8f5f; --failed:#9aa1ab; --indet:#8b5cf6; --bad:#d62828; --min:#f08c00;
  --pre:#2b9348; --ink:#1d2330; --mute:#5f6775; --line:#d9dde3; --bg:#ffffff; }
* { box-sizing: border-box; }
body { margin: 0; padding: 16px 24px 40px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--ink); background: var(--bg); }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 14px; margin: 16px 0 6px; }
code, pre, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
.sub { color: var(--mute); margin: 0 0 12px; }
.verdict { display: flex; align-items: flex-start; gap: 16px; padding: 12px 16px; border-radius: 6px; margin: 8px 0 12px; }
.verdict.fail { background: #fdecec; border: 1px solid #f3b4b4; }
.verdict.pass { background: #eaf6ee; border: 1px solid #b6dec2; }
.verdict.unknown { background: #fff6e0; border: 1px solid #f1d38a; }
.badge { font-weight: 800; font-size: 22px; letter-spacing: 1px; padding: 2px 12px; border-radius: 4px; color: #fff; }
.fail .badge { background: var(--bad); } .pass .badge { background: var(--ok); } .unknown .badge { background: #b7791f; }
.failures { margin: 0; padding-left: 18px; }
.failures li { margin: 2px 0; }
.prop { font-weight: 700; }
.replay { display: flex; gap: 8px; align-items: center; margin: 6px 0 4px; }
.replay input { flex: 1; font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; padding: 5px 8px;
  border: 1px solid var(--line); border-radius: 4px; background: #f6f7f9; color: var(--ink); }
button { font: inherit; font-size: 12px; padding: 3px 9px; border: 1px solid #b9c0ca; border-radius: 4px; background: #f6f7f9; cursor: pointer; }
button:hover { background: #e9ecf0; }
.facts { color: var(--mute); font-size: 12.5px; }
.facts b { color: var(--ink); font-weight: 600; }
.problems { background: #fff6e0; border: 1px solid #f1d38a; padding: 8px 12px; border-radius: 6px; }
table { border-collapse: collapse; font-size: 12.5px; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f4f6; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.bad td { background: #fdecec; } tr.good .v { color: var(--ok); font-weight: 700; } tr.bad .v { color: var(--bad); font-weight: 700; }
tr.good .v.undecided, td.undecided { color: #b7791f; font-weight: 700; } .why { color: var(--mute); font-size: 12px; }
tr:target td { outline: 2px solid var(--min); background: #fff3d6; }
.ops-table { table-layout: fixed; width: 100%; min-width: 1500px; }
.ops-table td { overflow-wrap: anywhere; }
.ops-table col.c-id { width: 64px; } .ops-table col.c-lane { width: 200px; } .ops-table col.c-t { width: 96px; }
.ops-table col.c-took { width: 72px; } .ops-table col.c-st { width: 96px; } .ops-table col.c-srv { width: 56px; }
.ops-table col.c-zx { width: 120px; } .ops-table col.c-roles { width: 170px; } .ops-table col.c-state { width: 190px; }
.ops-table td.label { font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
.ops-table td.state { font-family: ui-monospace, "DejaVu Sans Mono", monospace; color: var(--mute); }
.ops-table td.roles { font-size: 12px; }
.ops-wrap { overflow-x: auto; }
.ops-chunk { content-visibility: auto; contain-intrinsic-size: auto 8000px; }
.legend { display: flex; flex-wrap: wrap; gap: 14px; font-size: 12px; color: var(--mute); margin: 4px 0 6px; }
.legend span { display: inline-flex; align-items: center; gap: 5px; }
.sw { display: inline-block; width: 22px; height: 11px; border-radius: 2px; }
.sw.ok { background: var(--ok); } .sw.failed { background: var(--failed); }
.sw.indet { background: repeating-linear-gradient(45deg, var(--indet) 0 3px, #e4d9fd 3px 6px); }
.sw.stuck { background: #fff; border: 2.5px solid var(--bad); } .sw.minimal { background: #fff; border: 2.5px solid var(--min); }
.sw.involved { background: #fff; border: 2px dashed var(--bad); } .sw.prefix { background: #fff; border-bottom: 3px solid var(--pre); }
.sw.band { background: rgba(232,93,4,.45); }
.tl { margin: 6px 0 10px; }
.tl-ctl { display: flex; gap: 6px; align-items: center; margin-bottom: 4px; }
.z-info { color: var(--mute); font-size: 12px; margin-left: 6px; }
.tl-body { display: flex; border: 1px solid var(--line); border-radius: 4px; }
.tl-labels { flex: 0 0 230px; border-right: 1px solid var(--line); background: #fafbfc; }
.lane-label { padding: 2px 8px; font-size: 12px; overflow: hidden; white-space: nowrap; text-overflow: ellipsis;
  border-top: 1px solid #eef0f3; display: flex; flex-direction: column; justify-content: center; }
.lane-label small { color: var(--mute); font-size: 11px; }
.lane-label.server { color: #6b4f1d; }
.tl-scroll { overflow-x: auto; flex: 1; }
svg.tl-svg { display: block; font: 11px ui-monospace, "DejaVu Sans Mono", Menlo, monospace; }
.lane-bg { fill: #ffffff; } .lane-bg.odd { fill: #f7f8fa; }
.axis-bg { fill: #f3f4f6; } .axis line { stroke: #e3e6ea; } .axis text { fill: var(--mute); }
.band { opacity: .12; } .chip { opacity: .55; } .chip-l { fill: #1d2330; font-size: 10.5px; }
.span.crash rect { fill: #d62828; } .span.partition rect { fill: #e85d04; } .span.network rect { fill: #f4a261; }
.span.pause rect { fill: #6c757d; } .span.election rect { fill: #e9c46a; } .span.other rect { fill: #457b9d; }
.op .bar { stroke: rgba(0,0,0,.25); stroke-width: .5; }
.op.ok .bar { fill: var(--ok); } .op.failed .bar { fill: var(--failed); }
.op.indet .bar { fill: url(#hatch); stroke: var(--indet); stroke-width: 1.2; }
.op.open .bar { stroke-dasharray: 6 3; }
.tail { stroke: var(--indet); stroke-width: 1.5; stroke-dasharray: 2 3; opacity: .7; }
.op.involved .bar { stroke: var(--bad); stroke-width: 2; stroke-dasharray: 4 2; }
.op.minimal .bar { stroke: var(--min); stroke-width: 2.5; stroke-dasharray: none; }
.op.stuck .bar { stroke: var(--bad); stroke-width: 3; stroke-dasharray: none; }
.pre-mark { fill: var(--pre); }
.x-mark { fill: var(--bad); font-weight: 700; font-size: 13px; }
.op-l { fill: #fff; pointer-events: none; }
.op.failed .op-l, .op.indet .op-l, .op-l.out { fill: #1d2330; paint-order: stroke; stroke: rgba(255,255,255,.85); stroke-width: 3px; }
.axis-label, .strip-label { font-size: 11px; color: var(--mute); padding: 4px 8px; white-space: nowrap; }
.strip-label { background: #fbfbfc; border-top: 1px solid #eef0f3; }
.op { cursor: pointer; } .op:hover .bar { filter: brightness(1.15); stroke: #000; }
.pt path { stroke: #fff; stroke-width: 1; } .pt.watch path { fill: #1971c2; } .pt.session path { fill: #495057; } .pt.other path { fill: #9c6644; }
#tip { position: fixed; z-index: 10; max-width: 560px; background: #1d2330; color: #f1f3f5; padding: 8px 10px; border-radius: 5px;
  font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", Menlo, monospace; white-space: pre-wrap; pointer-events: none; box-shadow: 0 4px 14px rgba(0,0,0,.25); }
.lin-list { font-size: 12.5px; }
.lin-list td.mono { white-space: pre-wrap; }
.seeds a { margin-right: 6px; }
.seeds .range { color: var(--mute); margin-right: 6px; }
.goal-miss { color: var(--bad); font-weight: 700; }
.note { color: var(--mute); font-size: 12.5px; }
"#;

/// The page's behaviour: zooming the timelines, the hover tooltip, a
/// bar's click to its table row, the replay command's copy button.
/// Everything works without it except those.
const JS: &str = r#"
(function () {
  "use strict";
  function tickStep(k) {
    var min = 90 / Math.max(k, 1e-12), step = 1;
    for (;;) { for (var m of [1, 2, 5]) if (step * m >= min) return step * m; step *= 10; }
  }
  function tickLabel(t, step) {
    var d = step >= 1e6 ? 0 : step >= 1e5 ? 1 : step >= 1e4 ? 2 : step >= 1e3 ? 3 : step >= 100 ? 4 : step >= 10 ? 5 : 6;
    return (t / 1e6).toFixed(d) + " s";
  }
  var NS = "http://www.w3.org/2000/svg";
  function lay(tl, zoom) {
    tl.zoom = zoom;
    var t0 = +tl.dataset.t0, t1 = +tl.dataset.t1, px = +tl.dataset.px, k = +tl.dataset.k * zoom;
    var X = function (t) { return px + (t - t0) * k; };
    var svg = tl.querySelector("svg");
    svg.setAttribute("width", Math.ceil(X(t1) + 36 + (+tl.dataset.extra || 0)));
    tl.querySelectorAll("[data-a]").forEach(function (e) {
      var a = X(+e.dataset.a), tag = e.tagName;
      if (tag === "rect") {
        e.setAttribute("x", a.toFixed(1));
        e.setAttribute("width", Math.max(2, X(+e.dataset.b) - a).toFixed(1));
      } else if (tag === "line") {
        e.setAttribute("x1", a.toFixed(1)); e.setAttribute("x2", X(+e.dataset.b).toFixed(1));
      } else if (tag === "text") {
        if (e.dataset.w !== undefined) {
          var b = X(+e.dataset.b), w = +e.dataset.w, r = e.dataset.r, show = true, out = false;
          if (b - a >= w) e.setAttribute("x", (a + 3).toFixed(1));
          else if (r === "inf" || X(+r) - b >= w + 6) { out = true; e.setAttribute("x", (b + 4).toFixed(1)); }
          else show = false;
          if (show) e.removeAttribute("display"); else e.setAttribute("display", "none");
          e.classList.toggle("out", out);
        } else {
          e.setAttribute("x", (a + (e.dataset.dx !== undefined ? +e.dataset.dx : 3)).toFixed(1));
        }
      } else if (tag === "g") {
        e.setAttribute("transform", "translate(" + a.toFixed(1) + "," + e.dataset.y + ")");
      }
    });
    var lines = tl.dataset.lines !== undefined;
    var axis = tl.querySelector("g.axis"), h = axis.dataset.h, step = tickStep(k), r0 = +tl.dataset.r0;
    if (lines) step = Math.max(step, 1e6);
    if (axis.dataset.fixed === undefined) axis.querySelectorAll("line, text").forEach(function (e) { e.remove(); });
    for (var t = Math.ceil(t0 / step) * step; axis.dataset.fixed === undefined && t <= t1; t += step) {
      var x = X(t), l = document.createElementNS(NS, "line"), s = document.createElementNS(NS, "text");
      l.setAttribute("x1", x.toFixed(1)); l.setAttribute("x2", x.toFixed(1));
      l.setAttribute("y1", "18"); l.setAttribute("y2", h);
      s.setAttribute("x", (x + 2).toFixed(1)); s.setAttribute("y", "15"); s.textContent = lines ? "line " + Math.round((r0 + t) / 1e6) : tickLabel(r0 + t, step);
      axis.appendChild(l); axis.appendChild(s);
    }
    showZoom(tl);
  }
  function showZoom(tl) {
    var info = tl.querySelector(".z-info");
    if (info) info.textContent = "zoom ×" + (tl.zoom < 10 ? tl.zoom.toFixed(2) : Math.round(tl.zoom));
  }
  function zoomAround(tl, zoom, tCenter) {
    var sc = tl.querySelector(".tl-scroll");
    var px = +tl.dataset.px, k0 = +tl.dataset.k, t0 = +tl.dataset.t0;
    if (tCenter === undefined) tCenter = t0 + (sc.scrollLeft + sc.clientWidth / 2 - px) / (k0 * tl.zoom);
    zoom = Math.min(Math.max(zoom, 1), 1e6);
    lay(tl, zoom);
    sc.scrollLeft = Math.max(0, px + (tCenter - t0) * k0 * zoom - sc.clientWidth / 2);
  }
  function focus(tl) {
    var a = +tl.dataset.fa, b = +tl.dataset.fb, sc = tl.querySelector(".tl-scroll");
    var span = Math.max(b - a, 1) * 1.3;
    var zoom = Math.max(1, (sc.clientWidth - 2 * +tl.dataset.px) / (span * +tl.dataset.k));
    zoomAround(tl, zoom, (a + b) / 2);
  }
  document.querySelectorAll(".tl").forEach(function (tl) {
    // The page comes laid out at this zoom (on the failure, for a large
    // history): only the view is scrolled to it, nothing is moved.
    tl.zoom = +tl.dataset.z0 || 1;
    showZoom(tl);
    if (tl.dataset.start === "focus" && tl.dataset.fa !== undefined) {
      var sc = tl.querySelector(".tl-scroll"), mid = (+tl.dataset.fa + +tl.dataset.fb) / 2;
      sc.scrollLeft = Math.max(0, +tl.dataset.px + (mid - +tl.dataset.t0) * +tl.dataset.k * tl.zoom - sc.clientWidth / 2);
    }
    tl.querySelector(".z-in").addEventListener("click", function () { zoomAround(tl, tl.zoom * 2); });
    tl.querySelector(".z-out").addEventListener("click", function () { zoomAround(tl, tl.zoom / 2); });
    tl.querySelector(".z-fit").addEventListener("click", function () { lay(tl, 1); tl.querySelector(".tl-scroll").scrollLeft = 0; });
    var f = tl.querySelector(".z-focus");
    if (f) f.addEventListener("click", function () { focus(tl); });
    tl.querySelector(".tl-scroll").addEventListener("wheel", function (ev) {
      if (!ev.ctrlKey) return;
      ev.preventDefault();
      zoomAround(tl, tl.zoom * (ev.deltaY < 0 ? 1.25 : 0.8));
    }, { passive: false });
  });
  // A bar's click goes to its row in the operations table (one
  // listener, rather than a link per bar: large histories load faster).
  document.addEventListener("click", function (ev) {
    var g = ev.target.closest && ev.target.closest("g.op");
    if (g) location.hash = "op-" + g.dataset.id;
  });
  var tip = document.getElementById("tip");
  document.addEventListener("mouseover", function (ev) {
    var g = ev.target.closest && ev.target.closest("g.op, g.pt, g.span");
    if (!g) { tip.hidden = true; return; }
    if (g.tipText === undefined) {
      var t = g.querySelector("title");
      g.tipText = t ? t.textContent : "";
      if (t) t.remove();
    }
    tip.textContent = g.tipText;
    tip.hidden = false;
  });
  document.addEventListener("mousemove", function (ev) {
    if (tip.hidden) return;
    var x = ev.clientX + 14, y = ev.clientY + 14, r = tip.getBoundingClientRect();
    if (x + r.width > window.innerWidth) x = Math.max(0, ev.clientX - r.width - 14);
    if (y + r.height > window.innerHeight) y = Math.max(0, ev.clientY - r.height - 14);
    tip.style.left = x + "px"; tip.style.top = y + "px";
  });
  document.querySelectorAll("button.copy").forEach(function (b) {
    b.addEventListener("click", function () {
      var input = document.getElementById(b.dataset.for);
      input.select();
      var done = function () { b.textContent = "copied"; setTimeout(function () { b.textContent = "copy"; }, 1500); };
      if (navigator.clipboard) navigator.clipboard.writeText(input.value).then(done, function () { document.execCommand("copy"); done(); });
      else { document.execCommand("copy"); done(); }
    });
  });
})();
"#;
