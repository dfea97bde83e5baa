//! A priority queue's consumer broken on purpose, run by the same
//! workload and judged by the same oracle as the shipped one, to show that
//! `priority-order` fails on the bug it is for (the test is in
//! `scenario::broken_tests`). Test-only: no variant of
//! the shipped recipe, and `zoosim list` never shows it.

use super::sim::running;
use super::workload::{self, QueueWorkload};
use super::{COUNTERS, KEYS, PRIORITY_PROPERTIES, PRIORITY_QUEUE};
use crate::recipe::Recipe;
use crate::sim::{RunCtx, Running};
use crate::verdict::Property;
use crate::workload::WorkloadKey;
use zoosim_core::proto::Reply;
use zoosim_recipes::queue::{Consumer, QueueCommand, QueueOutcome};
use zoosim_recipes::{sequence_of, Input, Machine, Output};

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
pub(crate) struct BrokenPriorityQueue;

impl Recipe for BrokenPriorityQueue {
    fn name(&self) -> &str {
        "broken-priority-queue-oldest-first"
    }
    fn workload_keys(&self) -> &[WorkloadKey] {
        KEYS
    }
    fn client_slots(&self, w: &crate::workload::Workload) -> usize {
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
