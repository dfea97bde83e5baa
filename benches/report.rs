//! Rendering a report: a seed's page for a large history (10,000
//! operations over 20 clients, with faults and a linearizability failure)
//! and its JSON summary.
//!
//! `cargo bench --bench report`. What the page costs the browser (it
//! opens a 10,000-operation page zoomed on the failure) is seen by
//! opening one; this measures the renderer. In headless Chromium on a
//! loaded 2-core machine (`--screenshot`, wall time minus an empty
//! page's), the 10,000-operation page loads in about 3–4 s since the
//! operations table is laid out chunk by chunk as it scrolls into view
//! (about 10 s before); the timeline's SVG is most of what is left.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use zoosim::report::{render_index, render_seed, seed_summary_json};

#[path = "../tests/support/report_sample.rs"]
mod sample;

fn render(c: &mut Criterion) {
    let mut g = c.benchmark_group("report");
    for n in [1_000, 10_000] {
        let r = sample::large(n);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(format!("seed page, {n} ops"), |b| {
            b.iter(|| black_box(render_seed(black_box(&r))).len())
        });
    }
    let r = sample::large(10_000);
    g.bench_function("seed summary json, 10000 ops", |b| {
        b.iter(|| black_box(seed_summary_json(black_box(&r))).len())
    });
    let ix = sample::index();
    g.bench_function("index page", |b| {
        b.iter(|| black_box(render_index(black_box(&ix))).len())
    });
    g.finish();
}

criterion_group!(benches, render);
criterion_main!(benches);
