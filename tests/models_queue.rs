//! The queue's, the priority queue's and the configuration's stateright
//! models (crates/zoosim-models/src/queue.rs, crates/zoosim-models/src/config.rs): each correct recipe
//! holds every property over every interleaving of 3 clients with all
//! faults, and every "sometimes" is reached; a deliberately broken copy of
//! each machine is caught by its model with a shortest counterexample,
//! kept as an insta snapshot (tests/snapshots/; `cargo insta review`).

#[path = "support/models.rs"]
mod support;

use std::time::Instant;

use zoosim::models::config::{self, ConfigModel};
use zoosim::models::queue::{self, QueueModel};
use zoosim::models::{check, shortest, Checked, Fault, Faults, Options, RecipeModel, World};
use zoosim::proto::{Op, Reply, ZkError};
use zoosim::recipes::config::{Config, ConfigCommand, ConfigOutcome};
use zoosim::recipes::queue::{Consumer, QueueCommand, QueueOutcome};
use zoosim::recipes::{Input, Machine, OpId, Output};

/// Checks `world` exhaustively, printing its size and time; asserts that
/// every property holds (every "sometimes" reached, every fault taken).
fn holds<R: RecipeModel>(world: &World<R>) -> Checked {
    let t = Instant::now();
    let checked = check(world, Options::default());
    eprintln!(
        "{} at {} clients, faults {}: {} states generated, {} unique, depth {}, {:.2?}",
        world.recipe.name(),
        world.clients,
        world.faults,
        checked.states,
        checked.unique,
        checked.depth,
        t.elapsed()
    );
    let failing: Vec<_> = checked.verdicts.iter().filter(|v| !v.holds).collect();
    assert!(failing.is_empty(), "failing: {failing:#?}");
    for f in Fault::ALL {
        assert!(
            checked.verdict(f.property()).is_some_and(|v| v.holds),
            "{}",
            f.property()
        );
    }
    checked
}

/// `world` fails `property`; its shortest counterexample has at most 15
/// steps and reads as the insta snapshot `name`.
fn caught<R: RecipeModel>(world: &World<R>, property: zoosim::check::Property, name: &str) {
    let (_, text) = support::counterexample(world, property.name, name);
    insta::assert_snapshot!(name, text);
}

#[test]
fn the_queue_holds_everything_at_three_clients_with_all_faults() {
    let world = World::new(QueueModel::plain(), 3, Faults::ONE_EACH).expect("a valid size");
    let checked = holds(&world);
    for p in [
        queue::NO_LOSS.name,
        queue::NO_DUPLICATE.name,
        queue::NONE_INVENTED.name,
        queue::FIFO_PER_CONSUMER.name,
        queue::NO_RECIPE_FAILURE.name,
        queue::EVERY_ITEM_CONSUMED.name,
        "item-enqueued",
        "item-taken",
        "consumer-took-two",
        "take-missed",
        "waiter-woken",
        "guid-search-found-item",
        "guid-search-found-nothing",
        "delete-outcome-unknown",
        "recreated-item-taken-twice",
        "session-lost",
        "claim-left-unresolved",
    ] {
        assert!(checked.verdict(p).is_some_and(|v| v.holds), "{p}");
    }
    assert!(checked.unique > 5_000, "{} states only", checked.unique);
}

#[test]
fn the_priority_queue_holds_everything_at_three_clients_with_all_faults() {
    let world = World::new(QueueModel::priority(), 3, Faults::ONE_EACH).expect("a valid size");
    let checked = holds(&world);
    for p in [
        queue::NO_LOSS.name,
        queue::NO_DUPLICATE.name,
        queue::PRIORITY_ORDER.name,
        queue::EVERY_ITEM_CONSUMED.name,
        "more-urgent-item-overtook",
        "consumer-took-two",
        "recreated-item-taken-twice",
    ] {
        assert!(checked.verdict(p).is_some_and(|v| v.holds), "{p}");
    }
    // More than one consumer: clients 1 and 2 both take.
    let model = QueueModel::priority();
    assert_eq!(model.producers(), 1);
    assert!(checked.verdict("take-missed").is_some_and(|v| v.holds));
    // The plain queue's order is not the priority queue's.
    assert!(checked.verdict(queue::FIFO_PER_CONSUMER.name).is_none());
    assert!(checked.unique > 2_000, "{} states only", checked.unique);
}

#[test]
fn the_configuration_holds_everything_at_three_clients_with_all_faults() {
    let world = World::new(ConfigModel::new(), 3, Faults::ONE_EACH).expect("a valid size");
    let checked = holds(&world);
    for p in [
        config::NO_LOST_UPDATE.name,
        config::MONOTONIC_READS.name,
        config::SET_MEANS_SET.name,
        config::WATCH_REARMED.name,
        config::NO_RECIPE_FAILURE.name,
        config::CONVERGENCE.name,
        "value-read",
        "update-set",
        "update-conflict",
        "change-followed",
        "lost-update-reply-resolved",
        "session-lost",
    ] {
        assert!(checked.verdict(p).is_some_and(|v| v.holds), "{p}");
    }
    assert!(checked.unique > 5_000, "{} states only", checked.unique);
}

/// The queue's consumers all watch the queue's node (the recipes page's
/// design): one enqueue wakes every waiting consumer. Not among the
/// queue's properties; shown here so that the claim is checked.
#[test]
fn one_enqueue_wakes_every_waiting_consumer() {
    let world = World::new(QueueModel::plain().with_herd(), 3, Faults::NONE).expect("a valid size");
    caught(&world, queue::NO_HERD, "queue-herd");
    // With one consumer there is no herd.
    let one = World::new(QueueModel::plain().with_herd(), 2, Faults::ONE_EACH).expect("a size");
    assert!(shortest(&one, queue::NO_HERD.name).is_none());
}

/// A broken copy of the consumer: NoNode on its (first) delete is taken as
/// done — the item is reported taken although another consumer deleted it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct NoNodeIsMine {
    consumer: Consumer,
    deleting: Option<OpId>,
}

fn no_node_is_mine(dir: &str, priority: bool) -> NoNodeIsMine {
    NoNodeIsMine {
        consumer: Consumer::new(dir, priority),
        deleting: None,
    }
}

impl Machine for NoNodeIsMine {
    type Command = QueueCommand;
    type Outcome = QueueOutcome;

    fn handle(&mut self, input: Input<QueueCommand>) {
        let input = match input {
            Input::Reply(id, Err(ZkError::NoNode)) if Some(id) == self.deleting => {
                Input::Reply(id, Ok(Reply::Delete))
            }
            other => other,
        };
        self.consumer.handle(input);
    }

    fn poll(&mut self) -> Option<Output<QueueOutcome>> {
        let out = self.consumer.poll()?;
        if let Output::Send(id, op) = &out {
            self.deleting = matches!(op, Op::Delete { .. }).then_some(*id);
        }
        Some(out)
    }
}

#[test]
fn a_queue_consumer_that_takes_no_node_as_done_is_caught() {
    let faults = Faults::NONE;
    let broken = World::new(QueueModel::with_consumer(false, no_node_is_mine), 3, faults)
        .expect("a valid size");
    let checked = check(&broken, Options::default());
    assert!(
        checked
            .verdict(queue::NO_DUPLICATE.name)
            .is_some_and(|v| !v.holds),
        "{:#?}",
        checked.verdicts
    );
    caught(&broken, queue::NO_DUPLICATE, "queue-no-node-is-mine");
}

/// A broken copy of the priority consumer: blind to priorities (it orders
/// its list by sequence number alone, as a plain queue's would). The list
/// it gets shows every item as priority 00 (`queue-00-<real name>`), and
/// its requests and outcomes are mapped back to the real names.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct PriorityBlind {
    consumer: Consumer,
}

const BLIND: &str = "queue-00-";

fn priority_blind(dir: &str, priority: bool) -> PriorityBlind {
    PriorityBlind {
        consumer: Consumer::new(dir, priority),
    }
}

/// `queue-00-<PP-rest>` back to `queue-<PP-rest>`.
fn real(name: &str) -> String {
    match name.find(BLIND) {
        Some(at) => format!("{}queue-{}", &name[..at], &name[at + BLIND.len()..]),
        None => name.to_owned(),
    }
}

impl Machine for PriorityBlind {
    type Command = QueueCommand;
    type Outcome = QueueOutcome;

    fn handle(&mut self, input: Input<QueueCommand>) {
        let input = match input {
            Input::Reply(id, Ok(Reply::GetChildren { children, stat })) => {
                let children = children
                    .into_iter()
                    .map(|c| match c.strip_prefix("queue-") {
                        Some(rest) => format!("{BLIND}{rest}"),
                        None => c,
                    })
                    .collect();
                Input::Reply(id, Ok(Reply::GetChildren { children, stat }))
            }
            other => other,
        };
        self.consumer.handle(input);
    }

    fn poll(&mut self) -> Option<Output<QueueOutcome>> {
        Some(match self.consumer.poll()? {
            Output::Send(id, Op::GetData { path, watch }) => Output::Send(
                id,
                Op::GetData {
                    path: real(&path),
                    watch,
                },
            ),
            Output::Send(id, Op::Delete { path, version }) => Output::Send(
                id,
                Op::Delete {
                    path: real(&path),
                    version,
                },
            ),
            Output::Outcome(o) => Output::Outcome(match o {
                QueueOutcome::Claiming { name, data } => QueueOutcome::Claiming {
                    name: real(&name),
                    data,
                },
                QueueOutcome::Taken { name, data } => QueueOutcome::Taken {
                    name: real(&name),
                    data,
                },
                QueueOutcome::Missed { name } => QueueOutcome::Missed { name: real(&name) },
                QueueOutcome::MaybeTaken { name, data } => QueueOutcome::MaybeTaken {
                    name: real(&name),
                    data,
                },
                other => other,
            }),
            other => other,
        })
    }
}

#[test]
fn a_priority_consumer_blind_to_priorities_is_caught() {
    let broken = World::new(
        QueueModel::with_consumer(true, priority_blind),
        3,
        Faults::ONE_EACH,
    )
    .expect("a valid size");
    let checked = check(&broken, Options::default());
    assert!(
        checked
            .verdict(queue::PRIORITY_ORDER.name)
            .is_some_and(|v| !v.holds),
        "{:#?}",
        checked.verdicts
    );
    // Blind as it is, it loses nothing and takes nothing twice.
    for p in [
        queue::NO_LOSS.name,
        queue::NO_DUPLICATE.name,
        queue::EVERY_ITEM_CONSUMED.name,
    ] {
        assert!(checked.verdict(p).is_some_and(|v| v.holds), "{p}");
    }
    caught(&broken, queue::PRIORITY_ORDER, "priority-queue-blind");
}

/// A broken copy of the configuration machine: only its first read sets a
/// watch; the re-reads after a change do not re-arm it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct RearmNever {
    config: Config,
    watched_once: bool,
}

fn rearm_never(path: &str) -> RearmNever {
    RearmNever {
        config: Config::new(path),
        watched_once: false,
    }
}

impl Machine for RearmNever {
    type Command = ConfigCommand;
    type Outcome = ConfigOutcome;

    fn handle(&mut self, input: Input<ConfigCommand>) {
        self.config.handle(input);
    }

    fn poll(&mut self) -> Option<Output<ConfigOutcome>> {
        Some(match self.config.poll()? {
            Output::Send(id, Op::GetData { path, watch: true }) => {
                let watch = !self.watched_once;
                self.watched_once = true;
                Output::Send(id, Op::GetData { path, watch })
            }
            other => other,
        })
    }
}

#[test]
fn a_configuration_that_does_not_rearm_its_watch_is_caught() {
    let broken =
        World::new(ConfigModel::with_machine(rearm_never), 3, Faults::NONE).expect("a size");
    let checked = check(&broken, Options::default());
    for p in [config::WATCH_REARMED, config::CONVERGENCE] {
        assert!(
            checked.verdict(p.name).is_some_and(|v| !v.holds),
            "{p}: {:#?}",
            checked.verdicts
        );
    }
    caught(&broken, config::WATCH_REARMED, "config-rearm-never");
    caught(&broken, config::CONVERGENCE, "config-rearm-never-diverges");
}

#[test]
fn queue_sizes_are_checked() {
    let e = QueueModel::plain().with_sizes(3, 3).unwrap_err();
    assert!(
        e.contains("1 to 8 items in all, not 3 producers of 3"),
        "{e}"
    );
    assert!(QueueModel::plain().with_sizes(0, 1).is_err());
    let m = QueueModel::plain().with_sizes(2, 2).expect("4 items");
    assert_eq!((m.producers(), m.items()), (2, 2));
}
