#![warn(missing_docs, unreachable_pub)]
//! Reports a person opens in a browser: one self-contained HTML page per
//! seed ([`render_seed`]) and one for a whole run ([`render_index`]), each
//! with a JSON summary beside it ([`seed_summary_json`],
//! [`index_summary_json`]).
//!
//! Pure: the renderers take data and return a `String`; the command
//! writes the files. The input is this module's own data model
//! ([`SeedReport`], [`IndexReport`]), so that any source — a simulated
//! run's history, a seed's outcome, the linearizability checker's verdict,
//! a real ensemble's history — reaches the page through a small adapter
//! above this module, and the page never depends on how a run was made.
//!
//! A page needs nothing but itself: CSS, the one script and the timelines
//! (SVG) are inline; no font, image, script or request leaves the file,
//! so it opens offline from `file://`. Every string that comes from the
//! data goes through one escaping function ([`escape`]); byte strings
//! (node data) are shown with [`show_bytes`] first.

mod escape;
mod index;
mod model;
mod page;
mod seed;
mod summary;
mod timeline;

pub use escape::{escape, hidden, show_bytes, terminal};
pub use index::render_index;
pub use model::{
    CheckVerdict, Counter, HistoryFile, IndexReport, Lane, LaneKind, LinSection, LinVerdict, OpBar,
    OpId, OpStatus, Point, PointKind, PrefixStep, ScenarioRow, SeedLink, SeedReport, Span,
    SpanKind, UndecidedSeed, VerdictRow,
};
pub use seed::render_seed;
pub use summary::{index_summary_json, seed_summary_json};
