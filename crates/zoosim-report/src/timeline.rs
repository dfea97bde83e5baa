//! A timeline: one lane per client (or server), operations as bars
//! (stacked when they overlap), instant marks, and faults as translucent
//! bands across every lane with their labels in a strip on top. Inline
//! SVG beside an HTML column of lane labels.
//!
//! The page's script zooms it by re-placing every element that carries
//! `data-a` (a start) and `data-b` (an end), in virtual units (µs since
//! the window's start, or steps on a compressed axis), with the same
//! formula as [`Scale::xv`]; without the script it is drawn as laid out
//! here, fitted to the view.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::escape::Esc;
use super::model::{Lane, LaneKind, OpBar, OpId, OpStatus, Point, PointKind, Span, SpanKind};

/// Width the timeline is fitted to at zoom 1 (px): a 1400 px window less
/// the label column and margins.
const VIEW_W: f64 = 1080.0;
/// Left padding inside the SVG (px).
const PAD_X: f64 = 8.0;
/// Right padding (px): room for the last tick's label.
const PAD_R: f64 = 36.0;
const AXIS_H: u32 = 24;
const STRIP_ROW: u32 = 18;
/// The most rows the faults strip takes to give every label room of its
/// own; past it labels are drawn only where they fit.
const MAX_STRIP_ROWS: usize = 3;
const ROW: u32 = 22;
const BAR_H: u32 = 14;
const POINT_ROW: u32 = 14;
const LANE_PAD: u32 = 6;
/// A text's estimated width per character (px, at the page's 11 px font).
const CHAR_W: f64 = 6.3;
/// The narrowest a bar is drawn (px), so an instant op stays visible.
const MIN_W: f64 = 2.0;

/// How an operation is highlighted, derived from the report's lists.
#[derive(Clone, Debug, Default)]
pub(crate) struct Roles {
    /// Named by a failed check (the check's names).
    pub involved: Vec<String>,
    /// Cannot be linearized after the longest prefix.
    pub stuck: bool,
    /// In the minimal failing sub-history.
    pub minimal: bool,
    /// Its place in the longest linearizable prefix (1-based) and the
    /// prefix's length.
    pub prefix: Option<(usize, usize)>,
}

/// The map from simulated time to x: linear, or compressed to equal
/// steps between successive event times (for a few operations spread
/// over a long run, where the order is what matters).
#[derive(Clone, Debug)]
pub(crate) struct Scale {
    /// The real window (µs).
    pub t0: u64,
    pub t1: u64,
    /// Compressed: the distinct event times, sorted; each gets a step.
    steps: Option<Vec<u64>>,
    /// The virtual window: what `data-a`/`data-b` and the script use.
    v1: u64,
    /// Pixels per virtual unit at zoom 1.
    pub k: f64,
    /// The zoom it is laid out at (1: fitted to the view).
    zoom: f64,
}

/// Virtual units per step of a compressed scale.
const STEP: u64 = 1000;

impl Scale {
    /// Linear, `[t0, t1]` fitted to the view.
    pub(crate) fn fit(t0: u64, t1: u64) -> Scale {
        let t1 = t1.max(t0 + 1);
        Scale {
            t0,
            t1,
            steps: None,
            v1: t1 - t0,
            k: (VIEW_W - 2.0 * PAD_X) / (t1 - t0) as f64,
            zoom: 1.0,
        }
    }

    /// Compressed over these event times, fitted to the view less
    /// `reserve_px` (room for labels after the last bars): half a step of
    /// margin at either end.
    pub(crate) fn compressed(mut times: Vec<u64>, reserve_px: f64) -> Scale {
        times.sort_unstable();
        times.dedup();
        if times.is_empty() {
            times.push(0);
        }
        let v1 = times.len() as u64 * STEP;
        Scale {
            t0: times[0],
            t1: *times.last().unwrap_or(&0),
            v1,
            k: ((VIEW_W - 2.0 * PAD_X - reserve_px.clamp(0.0, VIEW_W / 2.0)) / v1 as f64)
                .min(220.0 / STEP as f64),
            steps: Some(times),
            zoom: 1.0,
        }
    }

    /// Real time to virtual: µs since t0, or the step position.
    pub(crate) fn v(&self, t: u64) -> u64 {
        let Some(ts) = &self.steps else {
            return t.clamp(self.t0, self.t1) - self.t0;
        };
        let i = ts.partition_point(|&x| x <= t);
        if i == 0 {
            return 0;
        }
        if i == ts.len() {
            return if t == ts[i - 1] {
                self.at_step(i - 1)
            } else {
                self.v1
            };
        }
        // Between steps i-1 and i, linearly.
        let (a, b) = (ts[i - 1], ts[i]);
        self.at_step(i - 1) + (t - a) * STEP / (b - a).max(1)
    }

    fn at_step(&self, i: usize) -> u64 {
        STEP / 2 + i as u64 * STEP
    }

    /// The virtual end.
    pub(crate) fn v1(&self) -> u64 {
        self.v1
    }

    /// x (px, at the zoom it is laid out at) of a virtual position.
    pub(crate) fn xv(&self, v: u64) -> f64 {
        PAD_X + v as f64 * self.k * self.zoom
    }

    /// The zoom that shows virtual `[a, b]` with some margin across the
    /// view, as the page's script computes it for "show the failure".
    fn zoom_on(&self, a: u64, b: u64) -> f64 {
        let span = (b.saturating_sub(a)).max(1) as f64 * 1.3;
        ((VIEW_W - 2.0 * PAD_X) / (span * self.k)).clamp(1.0, 1e6)
    }
}

/// What one timeline draws.
pub(crate) struct Timeline<'a> {
    /// The DOM id of the timeline's container.
    pub id: &'a str,
    /// Lanes with the operations and points to draw on each (a lane with
    /// neither is still drawn).
    pub lanes: Vec<(&'a Lane, Vec<&'a OpBar>, Vec<&'a Point>)>,
    pub spans: Vec<&'a Span>,
    pub scale: Scale,
    pub roles: &'a BTreeMap<OpId, Roles>,
    /// The window to show first or on "show the failure" (µs), if any.
    pub focus: Option<(u64, u64)>,
    /// Open on the focus window rather than the whole run.
    pub start_on_focus: bool,
    /// Few operations: each on a row of its own, its label always shown
    /// (after the bar when it does not fit inside).
    pub spacious: bool,
    /// Each op's hover text.
    pub tip: &'a dyn Fn(&OpBar) -> String,
    /// What the time axis measures, in words ("simulated time").
    pub unit: &'a str,
    /// Time is a history file's line numbers ([`LINE_US`] per line): the
    /// axis is labelled in lines, never finer than one.
    pub lines: bool,
}

/// An op placed: virtual start and end, row, and the virtual position up
/// to which its row is free after it (`None`: always room).
struct Placed<'a> {
    op: &'a OpBar,
    a: u64,
    b: u64,
    row: usize,
    room: Option<u64>,
}

impl Timeline<'_> {
    /// The timeline's HTML: its controls, the label column and the SVG.
    ///
    /// A timeline that opens on its focus is laid out here at the zoom
    /// the script would pick for it, so that the page opens without the
    /// script moving every element once (seconds, on a large history).
    pub(crate) fn render(mut self, out: &mut String) {
        if self.start_on_focus {
            if let Some((a, b)) = self.focus {
                self.scale.zoom = self.scale.zoom_on(self.scale.v(a), self.scale.v(b));
            }
        }
        let sc = &self.scale;
        let spans = self.span_rows();
        let strip_rows = spans
            .iter()
            .map(|(_, r, _)| *r as u32 + 1)
            .max()
            .unwrap_or(0);
        let strip_h = strip_rows * STRIP_ROW + if strip_rows > 0 { 4 } else { 0 };
        let lanes_top = AXIS_H + strip_h;
        // Lay the lanes out: each op's row, rows per lane.
        let mut lane_rows = Vec::new();
        let mut y = lanes_top;
        for (_, ops, points) in &self.lanes {
            let placed = self.place(ops);
            let n = placed.iter().map(|p| p.row + 1).max().unwrap_or(1) as u32;
            let point_h = if points.is_empty() { 0 } else { POINT_ROW };
            let h = 2 * LANE_PAD + point_h + n * ROW;
            lane_rows.push((y, h, point_h, placed));
            y += h;
        }
        let height = y + 2;
        // Room on the right for labels drawn after their bars.
        let extra = if self.spacious {
            self.lanes
                .iter()
                .flat_map(|(_, ops, _)| ops)
                .map(|o| label_px(&o.label))
                .fold(0.0, f64::max)
                .ceil()
                + 12.0
        } else {
            0.0
        };
        let width = sc.xv(sc.v1()) + PAD_R + extra;

        let focus_attrs = match self.focus {
            Some((a, b)) => format!(" data-fa=\"{}\" data-fb=\"{}\"", sc.v(a), sc.v(b)),
            None => String::new(),
        };
        let _ = write!(
            out,
            "<div class=\"tl\" id=\"{id}\"{lines} data-t0=\"0\" data-t1=\"{v1}\" data-r0=\"{r0}\" data-k=\"{k}\" data-z0=\"{z0}\" data-px=\"{PAD_X}\" data-extra=\"{extra}\"{focus_attrs}{start}>\
             <div class=\"tl-ctl\"><button class=\"z-out\" title=\"zoom out\">−</button>\
             <button class=\"z-in\" title=\"zoom in\">+</button>\
             <button class=\"z-fit\">{fit}</button>{fbtn}\
             <span class=\"z-info\"></span></div>\
             <div class=\"tl-body\"><div class=\"tl-labels\"><div class=\"axis-label\" style=\"height:{AXIS_H}px\">{unit}</div>",
            id = Esc(self.id),
            v1 = sc.v1(),
            r0 = sc.t0,
            k = sc.k,
            z0 = sc.zoom,
            lines = if self.lines { " data-lines=\"1\"" } else { "" },
            start = if self.start_on_focus && self.focus.is_some() {
                " data-start=\"focus\""
            } else {
                ""
            },
            fit = if self.spacious { "fit" } else { "whole run" },
            fbtn = if self.focus.is_some() {
                "<button class=\"z-focus\">show the failure</button>"
            } else {
                ""
            },
            unit = Esc(&if sc.steps.is_some() {
                format!("{} (compressed)", self.unit)
            } else {
                self.unit.to_owned()
            }),
        );
        if strip_h > 0 {
            let _ = write!(
                out,
                "<div class=\"strip-label\" style=\"height:{strip_h}px\">faults · elections</div>"
            );
        }
        for ((lane, ops, _), (_, h, _, _)) in self.lanes.iter().zip(&lane_rows) {
            let kind = match lane.kind {
                LaneKind::Client => "client",
                LaneKind::Server => "server",
            };
            let _ = write!(
                out,
                "<div class=\"lane-label {kind}\" style=\"height:{h}px\" title=\"{l}\">{l}<small>{n} op{s}</small></div>",
                l = Esc(&lane.label),
                n = ops.len(),
                s = if ops.len() == 1 { "" } else { "s" },
            );
        }
        let _ = write!(
            out,
            "</div><div class=\"tl-scroll\"><svg class=\"tl-svg\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{height}\">",
            w = width.ceil(),
        );
        // Lane backgrounds, then bands, then the axis, then the content.
        for (i, (y, h, _, _)) in lane_rows.iter().enumerate() {
            let _ = write!(
                out,
                "<rect class=\"lane-bg{odd}\" x=\"0\" y=\"{y}\" width=\"100%\" height=\"{h}\"/>",
                odd = if i % 2 == 1 { " odd" } else { "" },
            );
        }
        for &span in &spans {
            self.span(out, span, lanes_top, height);
        }
        self.axis(out, height);
        for ((lane, _, points), (y, _, point_h, placed)) in self.lanes.iter().zip(&lane_rows) {
            for p in points {
                self.point(out, lane, p, y + LANE_PAD);
            }
            for p in placed {
                let top = y + LANE_PAD + point_h + p.row as u32 * ROW;
                self.op(out, p, top);
            }
        }
        out.push_str("</svg></div></div></div>");
    }

    /// Places a lane's ops: virtual extent, row, room after.
    fn place<'o>(&self, ops: &[&'o OpBar]) -> Vec<Placed<'o>> {
        let sc = &self.scale;
        let extent = |o: &OpBar| {
            let a = sc.v(o.start_us);
            let b = match o.end_us {
                Some(e) => sc.v(e.max(o.start_us)),
                None => sc.v1(),
            };
            (a, b.max(a))
        };
        let mut placed: Vec<Placed> = ops
            .iter()
            .map(|o| {
                let (a, b) = extent(o);
                Placed {
                    op: o,
                    a,
                    b,
                    row: 0,
                    room: None,
                }
            })
            .collect();
        if self.spacious {
            let mut order: Vec<usize> = (0..placed.len()).collect();
            order.sort_by_key(|&i| (placed[i].a, placed[i].b, placed[i].op.id));
            for (row, i) in order.into_iter().enumerate() {
                placed[i].row = row;
            }
            return placed;
        }
        let rows = pack(placed.iter().map(|p| (p.a, p.b)));
        for (p, row) in placed.iter_mut().zip(&rows) {
            p.row = *row;
        }
        // The room after each op: the next start on its row.
        let mut by_row: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, p) in placed.iter().enumerate() {
            by_row.entry(p.row).or_default().push(i);
        }
        for idx in by_row.values_mut() {
            idx.sort_by_key(|&i| (placed[i].a, placed[i].b));
            for w in 0..idx.len() {
                let room = idx.get(w + 1).map_or(sc.v1(), |&n| placed[n].a);
                placed[idx[w]].room = Some(room);
            }
        }
        placed
    }

    /// Spans in time order, each with its strip row and, when labels do
    /// not each get room of their own, the virtual position up to which
    /// its row is free after it. Labels get room of their own when that
    /// takes at most [`MAX_STRIP_ROWS`] rows; else the rows are packed by
    /// the spans alone (a strip a few rows high, however many faults) and
    /// a label is drawn only where it fits, the rest on hover.
    fn span_rows(&self) -> Vec<(&Span, usize, Option<u64>)> {
        let mut spans: Vec<&Span> = self.spans.clone();
        spans.sort_by_key(|s| (s.start_us, s.end_us));
        let sc = &self.scale;
        let k = sc.k * sc.zoom;
        let label_v = |s: &Span| ((label_px(&s.label) + 8.0) / k) as u64;
        let extent = |s: &Span| {
            let a = sc.v(s.start_us);
            let b = s.end_us.map_or(sc.v1(), |e| sc.v(e.max(s.start_us)));
            (a, b.max(a))
        };
        let rows = pack(spans.iter().map(|s| {
            let (a, b) = extent(s);
            (a, b.max(a + label_v(s)))
        }));
        if rows.iter().all(|&r| r < MAX_STRIP_ROWS) {
            return spans
                .into_iter()
                .zip(rows)
                .map(|(s, r)| (s, r, None))
                .collect();
        }
        let rows = pack(spans.iter().map(|s| extent(s)));
        let mut next_start: BTreeMap<usize, u64> = BTreeMap::new();
        let mut room = vec![sc.v1(); spans.len()];
        for i in (0..spans.len()).rev() {
            if let Some(&n) = next_start.get(&rows[i]) {
                room[i] = n;
            }
            next_start.insert(rows[i], extent(spans[i]).0);
        }
        spans
            .into_iter()
            .zip(rows)
            .zip(room)
            .map(|((s, r), room)| (s, r, Some(room)))
            .collect()
    }

    fn span(
        &self,
        out: &mut String,
        (s, row, room): (&Span, usize, Option<u64>),
        lanes_top: u32,
        height: u32,
    ) {
        let sc = &self.scale;
        let a = sc.v(s.start_us);
        let b = s.end_us.map_or(sc.v1(), |e| sc.v(e.max(s.start_us)));
        let x = sc.xv(a);
        let xb = sc.xv(b);
        let w = (xb - x).max(MIN_W);
        let kind = span_kind(s.kind);
        let y = AXIS_H + row as u32 * STRIP_ROW;
        let when = match s.end_us {
            Some(e) => format!("{} – {}", secs(s.start_us), secs(e)),
            None => format!("{} – end of run", secs(s.start_us)),
        };
        let _ = write!(
            out,
            "<g class=\"span {kind}\"><title>{kind}: {l}\n{when}</title>\
             <rect class=\"band\" data-a=\"{a}\" data-b=\"{b}\" x=\"{x:.1}\" y=\"{lanes_top}\" width=\"{w:.1}\" height=\"{bh}\"/>\
             <rect class=\"chip\" data-a=\"{a}\" data-b=\"{b}\" x=\"{x:.1}\" y=\"{y}\" width=\"{w:.1}\" height=\"{ch}\"/>",
            l = Esc(&s.label),
            bh = height - lanes_top,
            ch = STRIP_ROW - 2,
        );
        let ty = y + STRIP_ROW - 6;
        match room {
            None => {
                let _ = write!(
                    out,
                    "<text class=\"chip-l\" data-a=\"{a}\" data-dx=\"3\" x=\"{tx:.1}\" y=\"{ty}\">{l}</text></g>",
                    tx = x + 3.0,
                    l = Esc(&s.label),
                );
            }
            // Inside the chip if it fits, else after it if its row has
            // room, else on hover only (the script decides again on zoom,
            // as for an operation's label).
            Some(room) => {
                let label_w = label_px(&s.label);
                let (lx, hide) = if xb - x >= label_w {
                    (x + 3.0, false)
                } else if sc.xv(room) - xb >= label_w + 6.0 {
                    (xb + 4.0, false)
                } else {
                    (x + 3.0, true)
                };
                let _ = write!(
                    out,
                    "<text class=\"chip-l\" data-a=\"{a}\" data-b=\"{b}\" data-r=\"{room}\" data-w=\"{label_w:.0}\" x=\"{lx:.1}\" y=\"{ty}\"{hide}>{l}</text></g>",
                    hide = if hide { " display=\"none\"" } else { "" },
                    l = Esc(&s.label),
                );
            }
        }
    }

    fn axis(&self, out: &mut String, height: u32) {
        let sc = &self.scale;
        let fixed = sc.steps.is_some();
        let _ = write!(
            out,
            "<g class=\"axis\" data-h=\"{height}\"{f}><rect class=\"axis-bg\" x=\"0\" y=\"0\" width=\"100%\" height=\"{AXIS_H}\"/>",
            f = if fixed { " data-fixed=\"1\"" } else { "" },
        );
        let y1 = AXIS_H - 6;
        match &sc.steps {
            // Compressed: a tick at every event time, labelled with it
            // where there is room.
            Some(ts) => {
                let mut last_label = f64::MIN;
                for &t in ts {
                    let v = sc.v(t);
                    let x = sc.xv(v);
                    let _ = write!(
                        out,
                        "<line data-a=\"{v}\" data-b=\"{v}\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{y1}\" y2=\"{height}\"/>"
                    );
                    if x - last_label >= 64.0 {
                        last_label = x;
                        let _ = write!(
                            out,
                            "<text data-a=\"{v}\" data-dx=\"2\" x=\"{tx:.1}\" y=\"15\">{l}</text>",
                            tx = x + 2.0,
                            l = if self.lines {
                                line(t)
                            } else {
                                format!("{:.3} s", t as f64 / 1e6)
                            },
                        );
                    }
                }
            }
            None => {
                let mut step = tick_step(sc.k * sc.zoom);
                if self.lines {
                    step = step.max(LINE_US);
                }
                let mut v = 0;
                while v <= sc.v1() {
                    let x = sc.xv(v);
                    let _ = write!(
                        out,
                        "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{y1}\" y2=\"{height}\"/><text x=\"{tx:.1}\" y=\"15\">{l}</text>",
                        tx = x + 2.0,
                        l = if self.lines {
                            line(sc.t0 + v)
                        } else {
                            tick_label(sc.t0 + v, step)
                        },
                    );
                    v += step;
                }
            }
        }
        out.push_str("</g>");
    }

    fn point(&self, out: &mut String, lane: &Lane, p: &Point, top: u32) {
        let a = self.scale.v(p.at_us);
        let x = self.scale.xv(a);
        let (kind, shape) = match p.kind {
            PointKind::Watch => ("watch", "M0,-5L5,0L0,5L-5,0Z"),
            PointKind::Session => ("session", "M-4,-4H4V4H-4Z"),
            PointKind::Other => ("other", "M0,-5L5,4H-5Z"),
        };
        let y = top + POINT_ROW / 2;
        let _ = write!(
            out,
            "<g class=\"pt {kind}\" data-a=\"{a}\" data-y=\"{y}\" transform=\"translate({x:.1},{y})\">\
             <title>{kind} event at {t}\n{lane}\n{l}</title><path d=\"{shape}\"/></g>",
            t = secs(p.at_us),
            lane = Esc(&lane.label),
            l = Esc(&p.label),
        );
    }

    fn op(&self, out: &mut String, p: &Placed, top: u32) {
        let sc = &self.scale;
        let o = p.op;
        let (a, b) = (p.a, p.b);
        let x = sc.xv(a);
        let xb = sc.xv(b);
        let w = (xb - x).max(MIN_W);
        let status = match o.status {
            OpStatus::Ok => "ok",
            OpStatus::Failed => "failed",
            OpStatus::Indeterminate => "indet",
        };
        let mut class = format!("op {status}");
        let roles = self.roles.get(&o.id);
        if let Some(r) = roles {
            if r.stuck {
                class.push_str(" stuck");
            }
            if r.minimal {
                class.push_str(" minimal");
            }
            if !r.involved.is_empty() {
                class.push_str(" involved");
            }
            if r.prefix.is_some() {
                class.push_str(" prefix");
            }
        }
        if o.end_us.is_none() {
            class.push_str(" open");
        }
        let y = top + (ROW - BAR_H) / 2;
        let _ = write!(
            out,
            "<g class=\"{class}\" data-id=\"{id}\"><title>{tip}</title>\
             <rect class=\"bar\" data-a=\"{a}\" data-b=\"{b}\" x=\"{x:.1}\" y=\"{y}\" width=\"{w:.1}\" height=\"{BAR_H}\" rx=\"2\"/>",
            id = o.id,
            tip = Esc(&(self.tip)(o)),
        );
        // A ConnectionLoss may take effect after its reply: a dashed tail
        // to the end says so.
        if o.status == OpStatus::Indeterminate && o.end_us.is_some() && b < sc.v1() {
            let ly = y + BAR_H / 2;
            let _ = write!(
                out,
                "<line class=\"tail\" data-a=\"{b}\" data-b=\"{v1}\" x1=\"{xb:.1}\" x2=\"{x2:.1}\" y1=\"{ly}\" y2=\"{ly}\"/>",
                v1 = sc.v1(),
                x2 = sc.xv(sc.v1()),
            );
        }
        if let Some(r) = roles {
            if r.prefix.is_some() {
                let _ = write!(
                    out,
                    "<rect class=\"pre-mark\" data-a=\"{a}\" data-b=\"{b}\" x=\"{x:.1}\" y=\"{py}\" width=\"{w:.1}\" height=\"3\"/>",
                    py = y + BAR_H + 1,
                );
            }
            if r.stuck {
                let _ = write!(
                    out,
                    "<text class=\"x-mark\" data-a=\"{a}\" data-dx=\"-11\" x=\"{mx:.1}\" y=\"{ty}\">✗</text>",
                    mx = x - 11.0,
                    ty = y + BAR_H - 2,
                );
            }
        }
        // The label: inside the bar if it fits, else after it if its row
        // has room, else only on hover. The script decides again on zoom.
        let label_w = label_px(&o.label);
        let room = match p.room {
            Some(r) => r.to_string(),
            None => "inf".to_string(),
        };
        let (lx, cls, hide) = if xb - x >= label_w {
            (x + 3.0, "op-l", false)
        } else if p.room.is_none_or(|r| sc.xv(r) - xb >= label_w + 6.0) {
            (xb + 4.0, "op-l out", false)
        } else {
            (x + 3.0, "op-l", true)
        };
        let _ = write!(
            out,
            "<text class=\"{cls}\" data-a=\"{a}\" data-b=\"{b}\" data-r=\"{room}\" data-w=\"{label_w:.0}\" x=\"{lx:.1}\" y=\"{ty}\"{hide}>{l}</text></g>",
            ty = y + BAR_H - 3,
            hide = if hide { " display=\"none\"" } else { "" },
            l = Esc(&o.label),
        );
    }
}

/// A label's estimated width (px).
pub(crate) fn label_px(label: &str) -> f64 {
    label.chars().count() as f64 * CHAR_W + 6.0
}

/// The CSS class of a span's kind.
fn span_kind(k: SpanKind) -> &'static str {
    match k {
        SpanKind::Crash => "crash",
        SpanKind::Partition => "partition",
        SpanKind::Network => "network",
        SpanKind::Pause => "pause",
        SpanKind::Election => "election",
        SpanKind::Other => "other",
    }
}

/// Greedy interval packing: each interval (in the order given) goes on
/// the first row free at its start. Returns each one's row.
fn pack(intervals: impl Iterator<Item = (u64, u64)>) -> Vec<usize> {
    let mut items: Vec<(usize, u64, u64)> =
        intervals.enumerate().map(|(i, (a, b))| (i, a, b)).collect();
    let mut rows_of = vec![0; items.len()];
    items.sort_by_key(|&(i, a, b)| (a, b, i));
    let mut row_end: Vec<u64> = Vec::new();
    for (i, a, b) in items {
        let row = match row_end.iter().position(|&e| e <= a) {
            Some(r) => r,
            None => {
                row_end.push(0);
                row_end.len() - 1
            }
        };
        // An instant op still takes room: a bar is never narrower than a µs.
        row_end[row] = b.max(a + 1);
        rows_of[i] = row;
    }
    rows_of
}

/// A tick step (µs) so that ticks are at least ~90 px apart at `k` px/µs:
/// 1, 2 or 5 times a power of ten.
pub(crate) fn tick_step(k: f64) -> u64 {
    let min_us = 90.0 / k.max(1e-12);
    let mut step: u64 = 1;
    loop {
        for m in [1, 2, 5] {
            if (step * m) as f64 >= min_us {
                return step * m;
            }
        }
        if step > u64::MAX / 100 {
            return step;
        }
        step *= 10;
    }
}

/// A tick's label in seconds, with as many decimals as the step needs.
fn tick_label(t: u64, step: u64) -> String {
    let decimals = match step {
        s if s >= 1_000_000 => 0,
        s if s >= 100_000 => 1,
        s if s >= 10_000 => 2,
        s if s >= 1_000 => 3,
        s if s >= 100 => 4,
        s if s >= 10 => 5,
        _ => 6,
    };
    format!("{:.*} s", decimals, t as f64 / 1e6)
}

/// One line of a history file, on a timeline whose time is the file's
/// line numbers.
pub(crate) const LINE_US: u64 = 1_000_000;

/// A time on such a timeline, as the line it stands for.
pub(crate) fn line(us: u64) -> String {
    format!("line {}", us / LINE_US)
}

/// Simulated µs as seconds, to the µs.
pub(crate) fn secs(us: u64) -> String {
    format!("{}.{:06} s", us / 1_000_000, us % 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_stacks_only_what_overlaps() {
        // [0,10) and [10,20) share a row; [5,15) needs a second; the
        // open-ended one ([12, MAX)) a row of its own after 20.
        let rows = pack([(0, 10), (5, 15), (10, 20), (12, u64::MAX), (21, 30)].into_iter());
        assert_eq!(rows, vec![0, 1, 0, 2, 0]);
        // Instants at the same time do not share a row.
        assert_eq!(pack([(5, 5), (5, 5)].into_iter()), vec![0, 1]);
    }

    #[test]
    fn a_compressed_scale_gives_each_event_time_a_step() {
        let sc = Scale::compressed(vec![6_050_000, 100_000, 5_000_000, 130_000, 5_000_000], 0.0);
        assert_eq!((sc.t0, sc.t1, sc.v1()), (100_000, 6_050_000, 4 * STEP));
        // Each distinct time at the middle of its step; between two, in
        // proportion; outside, the margins.
        assert_eq!(sc.v(100_000), STEP / 2);
        assert_eq!(sc.v(130_000), STEP / 2 + STEP);
        assert_eq!(sc.v(5_000_000), STEP / 2 + 2 * STEP);
        assert_eq!(sc.v(6_050_000), STEP / 2 + 3 * STEP);
        assert_eq!(sc.v(115_000), STEP);
        assert_eq!(sc.v(0), 0);
        assert_eq!(sc.v(9_000_000), 4 * STEP);
        // Linear: µs from the window's start, clamped to it.
        let lin = Scale::fit(1_000, 11_000);
        assert_eq!(
            (lin.v(500), lin.v(6_000), lin.v(20_000), lin.v1()),
            (0, 5_000, 10_000, 10_000)
        );
    }

    #[test]
    fn ticks_are_round_and_far_enough_apart() {
        // 1 s over 1000 px: 0.1 s = 100 px apart.
        assert_eq!(tick_step(1000.0 / 1e6), 100_000);
        // 60 s over 1000 px: 90 px is 5.4 s, so 10 s.
        assert_eq!(tick_step(1000.0 / 60e6), 10_000_000);
        assert_eq!(tick_label(2_500_000, 500_000), "2.5 s");
        assert_eq!(tick_label(30_000_000, 10_000_000), "30 s");
        assert_eq!(secs(1_000_042), "1.000042 s");
    }
}
