//! A priority queue's consumer broken on purpose, run by the same
//! workload and judged by the same oracle as the shipped one, to show that
//! `priority-order` fails on the bug it is for. Test-only: no variant of
//! the shipped recipe, and `zoosim list` never shows it.

use super::sim::running;
use super::workload::{self, QueueWorkload};
use super::{COUNTERS, KEYS, PRIORITY_PROPERTIES, PRIORITY_QUEUE};
use crate::proto::Reply;
use crate::recipes::queue::{Consumer, QueueCommand, QueueOutcome};
use crate::recipes::{sequence_of, Input, Machine, Output};
use crate::scenario::recipe::Recipe;
use crate::scenario::registry::Registry;
use crate::scenario::runner::run_one;
use crate::scenario::sim::{RunCtx, Running};
use crate::scenario::spec::parse_in;
use crate::scenario::verdict::Property;
use crate::scenario::workload::WorkloadKey;

/// A consumer that takes the oldest item whatever its priority: the
/// shipped consumer, shown only the lowest sequence number of each list.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(super) struct OldestFirst(Consumer);

impl Machine for OldestFirst {
    type Command = QueueCommand;
    type Outcome = QueueOutcome;

    fn handle(&mut self, input: Input<QueueCommand>) {
        let input = match input {
            Input::Reply(id, Ok(Reply::GetChildren { children, stat })) => {
                let oldest = children
                    .into_iter()
                    .filter(|c| sequence_of(c).is_some())
                    .min_by_key(|c| sequence_of(c));
                let children = oldest.into_iter().collect();
                Input::Reply(id, Ok(Reply::GetChildren { children, stat }))
            }
            other => other,
        };
        self.0.handle(input);
    }

    fn poll(&mut self) -> Option<Output<QueueOutcome>> {
        self.0.poll()
    }
}

/// The broken consumer as a recipe of its own, with the priority queue's
/// keys, oracle and counters.
#[derive(Clone, Copy, Debug)]
struct BrokenPriorityQueue;

impl Recipe for BrokenPriorityQueue {
    fn name(&self) -> &str {
        "broken-priority-queue-oldest-first"
    }
    fn workload_keys(&self) -> &[WorkloadKey] {
        KEYS
    }
    fn client_slots(&self, w: &crate::scenario::workload::Workload) -> usize {
        PRIORITY_QUEUE.client_slots(w)
    }
    fn properties(&self) -> &[Property] {
        PRIORITY_PROPERTIES
    }
    fn counters(&self) -> &[&str] {
        COUNTERS
    }
    fn start(&self, ctx: &mut RunCtx) -> Box<dyn Running> {
        let w = QueueWorkload::of(ctx, true);
        let log = workload::spawn_with(ctx, &w, |dir| OldestFirst(Consumer::new(dir, true)));
        running(log, w)
    }
}

fn scenario(recipe: &str) -> String {
    format!(
        r#"
format = 1
recipe = "{recipe}"
seed_start = 0x9e9f0000
[workload]
producers = 3
consumers = 2
think_ms_max = 20
[faults]
kinds = []
phase_ms = 3000
[quiet]
phase_ms = 6000
liveness_bound_ms = 5000
"#
    )
}

#[test]
fn a_consumer_that_takes_the_oldest_first_is_caught() {
    let property = crate::check::queue::PRIORITY_ORDER.name;
    let registry = Registry::new().with(BrokenPriorityQueue);
    let broken = parse_in(
        "broken.toml",
        &scenario("broken-priority-queue-oldest-first"),
        &registry,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = run_one(&broken, broken.seed_start).unwrap_or_else(|v| panic!("{v}"));
    let v = out
        .violations
        .iter()
        .find(|v| v.property == property)
        .unwrap_or_else(|| panic!("not caught: {:?}", out.violations));
    assert!(
        v.to_string().starts_with("priority-order: consumer "),
        "{v}"
    );
    assert!(v.detail.contains("while its list"), "{v}");
    // The shipped consumer, the same scenario: priority order kept.
    let shipped = parse_in("pq.toml", &scenario("priority-queue"), &Registry::new())
        .unwrap_or_else(|e| panic!("{e}"));
    let out = run_one(&shipped, shipped.seed_start).unwrap_or_else(|v| panic!("{v}"));
    assert!(out.violations.is_empty(), "{:?}", out.violations);
    assert!(out.counters["taken"] > 0);
}
