//! Scripted-event tests of the double barrier machine: every branch of
//! enter and leave, lost replies, the previous session's node, the end of
//! the session.

use super::*;
use crate::step;
use zoosim_core::proto::{Stat, WatchEvent};

const ME: i64 = 7;

type Step = (Vec<(u64, Op)>, Vec<DoubleBarrierOutcome>);

fn barrier(threshold: usize) -> DoubleBarrier {
    DoubleBarrier::new("/db", "p2", SessionId(ME), threshold)
}

fn reply(m: &mut DoubleBarrier, id: u64, r: Result<Reply, ZkError>) -> Step {
    step(m, Input::Reply(id, r))
}

fn created(path: &str) -> Result<Reply, ZkError> {
    Ok(Reply::Create {
        path: path.into(),
        stat: Stat::default(),
    })
}

fn children(names: &[&str]) -> Result<Reply, ZkError> {
    Ok(Reply::GetChildren {
        children: names.iter().map(|n| n.to_string()).collect(),
        stat: Stat::default(),
    })
}

fn present(owner: i64) -> Result<Reply, ZkError> {
    Ok(Reply::Exists(Some(Stat {
        ephemeral_owner: owner,
        ..Stat::default()
    })))
}

fn event(event_type: EventType, path: &str) -> Input<DoubleBarrierCommand> {
    Input::Watch(WatchEvent {
        event_type,
        path: path.into(),
    })
}

fn exists(id: u64, path: &str) -> (u64, Op) {
    (
        id,
        Op::Exists {
            path: path.into(),
            watch: true,
        },
    )
}

fn list(id: u64) -> (u64, Op) {
    (
        id,
        Op::GetChildren {
            path: "/db".into(),
            watch: false,
        },
    )
}

fn delete_own(id: u64) -> (u64, Op) {
    (
        id,
        Op::Delete {
            path: "/db/p2".into(),
            version: -1,
        },
    )
}

/// Created ours and asked for `ready` (op 1 in flight).
fn entering(threshold: usize) -> DoubleBarrier {
    let mut m = barrier(threshold);
    let (s, _) = step(&mut m, Input::Command(DoubleBarrierCommand::Enter));
    assert_eq!(
        s,
        vec![(
            0,
            Op::Create {
                path: "/db/p2".into(),
                data: vec![],
                mode: CreateMode::Ephemeral
            }
        )]
    );
    assert_eq!(
        reply(&mut m, 0, created("/db/p2")).0,
        vec![exists(1, "/db/ready")]
    );
    m
}

/// In the barrier (entered through an existing `ready`), next op id 2.
fn inside() -> DoubleBarrier {
    let mut m = entering(2);
    assert_eq!(
        reply(&mut m, 1, present(0)).1,
        vec![DoubleBarrierOutcome::Entered]
    );
    m
}

#[test]
fn fewer_than_x_wait_for_ready_to_be_created() {
    let mut m = entering(3);
    assert_eq!(reply(&mut m, 1, Ok(Reply::Exists(None))).0, vec![list(2)]);
    // Two of three: wait, sending nothing (no polling).
    assert_eq!(reply(&mut m, 2, children(&["p1", "p2"])), (vec![], vec![]));
    // Other events do not wake it.
    assert_eq!(
        step(&mut m, event(EventType::NodeCreated, "/db/p3")),
        (vec![], vec![])
    );
    assert_eq!(
        step(&mut m, event(EventType::NodeDeleted, "/db/ready")),
        (vec![], vec![])
    );
    assert_eq!(
        step(&mut m, event(EventType::NodeCreated, "/db/ready")).1,
        vec![DoubleBarrierOutcome::Entered]
    );
}

#[test]
fn the_xth_process_creates_ready_and_a_racing_creator_counts_as_done() {
    let mut m = entering(2);
    reply(&mut m, 1, Ok(Reply::Exists(None)));
    // `ready` is not a process: two processes, the threshold is met.
    let (s, _) = reply(&mut m, 2, children(&["ready", "p1", "p2"]));
    assert_eq!(
        s,
        vec![(
            3,
            Op::Create {
                path: "/db/ready".into(),
                data: vec![],
                mode: CreateMode::Persistent
            }
        )]
    );
    let mut raced = m.clone();
    assert_eq!(
        reply(&mut m, 3, created("/db/ready")).1,
        vec![DoubleBarrierOutcome::Entered]
    );
    assert_eq!(
        reply(&mut raced, 3, Err(ZkError::NodeExists)).1,
        vec![DoubleBarrierOutcome::Entered]
    );
}

#[test]
fn ready_created_while_the_count_is_in_flight_is_not_missed() {
    let mut m = entering(3);
    reply(&mut m, 1, Ok(Reply::Exists(None)));
    // The exist watch fires before the list's reply arrives.
    assert_eq!(
        step(&mut m, event(EventType::NodeCreated, "/db/ready")),
        (vec![], vec![])
    );
    // The list was read before the others' nodes: it shows too few, yet
    // `ready` exists, so we are in.
    assert_eq!(
        reply(&mut m, 2, children(&["p2"])).1,
        vec![DoubleBarrierOutcome::Entered]
    );
}

#[test]
fn a_missing_barrier_node_is_created_with_its_parents() {
    let mut m = barrier(2);
    step(&mut m, Input::Command(DoubleBarrierCommand::Enter));
    let (s, _) = reply(&mut m, 0, Err(ZkError::NoNode));
    let paths: Vec<(String, CreateMode)> = s
        .iter()
        .map(|(_, op)| match op {
            Op::Create { path, mode, .. } => (path.clone(), *mode),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        paths,
        [
            ("/db".to_owned(), CreateMode::Persistent),
            ("/db/p2".to_owned(), CreateMode::Ephemeral)
        ]
    );
    // Replies to the parent's create are not awaited; the node's is.
    assert_eq!(reply(&mut m, 1, Err(ZkError::NodeExists)), (vec![], vec![]));
    assert_eq!(
        reply(&mut m, 2, created("/db/p2")).0,
        vec![exists(3, "/db/ready")]
    );
}

#[test]
fn node_exists_on_our_create_asks_whose_node_it_is() {
    let mut m = barrier(2);
    step(&mut m, Input::Command(DoubleBarrierCommand::Enter));
    assert_eq!(
        reply(&mut m, 0, Err(ZkError::NodeExists)).0,
        vec![exists(1, "/db/p2")]
    );
    // Ours: a create sent again after ConnectionLoss had been applied.
    let mut ours = m.clone();
    assert_eq!(
        reply(&mut ours, 1, present(ME)).0,
        vec![exists(2, "/db/ready")]
    );
    // Gone by now: create it.
    let mut gone = m.clone();
    let (s, _) = reply(&mut gone, 1, Ok(Reply::Exists(None)));
    assert!(matches!(&s[..], [(2, Op::Create { path, .. })] if path == "/db/p2"));
    // An older session's node (a restarted process): it must not count
    // twice, so wait for it to go, then create ours.
    assert_eq!(reply(&mut m, 1, present(ME - 1)), (vec![], vec![]));
    assert_eq!(
        step(&mut m, event(EventType::NodeCreated, "/db/ready")),
        (vec![], vec![])
    );
    let (s, _) = step(&mut m, event(EventType::NodeDeleted, "/db/p2"));
    assert!(
        matches!(&s[..], [(2, Op::Create { path, mode: CreateMode::Ephemeral, .. })] if path == "/db/p2")
    );
}

#[test]
fn leave_when_no_process_is_left() {
    let mut m = inside();
    assert_eq!(
        step(&mut m, Input::Command(DoubleBarrierCommand::Leave)).0,
        vec![list(2)]
    );
    assert_eq!(
        reply(&mut m, 2, children(&["ready"])).1,
        vec![DoubleBarrierOutcome::Left]
    );
    // Left: a second leave is refused, a new enter starts over.
    assert_eq!(
        step(&mut m, Input::Command(DoubleBarrierCommand::Leave)).1,
        vec![DoubleBarrierOutcome::Refused {
            command: DoubleBarrierCommand::Leave
        }]
    );
    let (s, _) = step(&mut m, Input::Command(DoubleBarrierCommand::Enter));
    assert!(matches!(&s[..], [(3, Op::Create { .. })]));
}

#[test]
fn the_only_process_deletes_its_node_and_is_out() {
    let mut m = inside();
    step(&mut m, Input::Command(DoubleBarrierCommand::Leave));
    assert_eq!(
        reply(&mut m, 2, children(&["p2", "ready"])).0,
        vec![delete_own(3)]
    );
    // Deleted, or already gone (a delete resent after a lost reply): list
    // again, as the page's "goto 1".
    let mut gone = m.clone();
    assert_eq!(reply(&mut m, 3, Ok(Reply::Delete)).0, vec![list(4)]);
    assert_eq!(reply(&mut gone, 3, Err(ZkError::NoNode)).0, vec![list(4)]);
    assert_eq!(
        reply(&mut m, 4, children(&[])).1,
        vec![DoubleBarrierOutcome::Left]
    );
}

#[test]
fn the_lowest_waits_on_the_highest() {
    let mut m = DoubleBarrier::new("/db", "p1", SessionId(ME), 2);
    step(&mut m, Input::Command(DoubleBarrierCommand::Enter));
    reply(&mut m, 0, created("/db/p1"));
    reply(&mut m, 1, present(0));
    step(&mut m, Input::Command(DoubleBarrierCommand::Leave));
    let (s, _) = reply(&mut m, 2, children(&["p3", "ready", "p1", "p2"]));
    assert_eq!(s, vec![exists(3, "/db/p3")]);
    // Gone already: list again at once.
    let mut gone = m.clone();
    assert_eq!(
        reply(&mut gone, 3, Ok(Reply::Exists(None))).0,
        vec![list(4)]
    );
    // Still there: wait for its event, not another's.
    assert_eq!(reply(&mut m, 3, present(1)), (vec![], vec![]));
    assert_eq!(
        step(&mut m, event(EventType::NodeDeleted, "/db/p2")),
        (vec![], vec![])
    );
    assert_eq!(
        step(&mut m, event(EventType::NodeDeleted, "/db/p3")).0,
        vec![list(4)]
    );
}

#[test]
fn a_higher_process_deletes_its_node_then_waits_on_the_lowest() {
    let mut m = inside();
    step(&mut m, Input::Command(DoubleBarrierCommand::Leave));
    assert_eq!(
        reply(&mut m, 2, children(&["p1", "p2", "p3"])).0,
        vec![delete_own(3)]
    );
    reply(&mut m, 3, Ok(Reply::Delete));
    // Ours gone, others left: wait on the lowest.
    assert_eq!(
        reply(&mut m, 4, children(&["p3", "p1"])).0,
        vec![exists(5, "/db/p1")]
    );
    reply(&mut m, 5, present(1));
    assert_eq!(
        step(&mut m, event(EventType::NodeDeleted, "/db/p1")).0,
        vec![list(6)]
    );
    assert_eq!(
        reply(&mut m, 6, children(&["ready"])).1,
        vec![DoubleBarrierOutcome::Left]
    );
}

#[test]
fn a_lost_reply_is_sent_again_only_after_a_reconnect() {
    // Every phase with a request in flight: (machine, op id, the op).
    let mut cases: Vec<(DoubleBarrier, (u64, Op))> = Vec::new();
    let mut m = barrier(2);
    let (s, _) = step(&mut m, Input::Command(DoubleBarrierCommand::Enter));
    cases.push((m.clone(), s[0].clone())); // creating
    let mut owning = m.clone();
    let (s, _) = reply(&mut owning, 0, Err(ZkError::NodeExists));
    cases.push((owning, s[0].clone()));
    let mut m = entering(2);
    cases.push((m.clone(), exists(1, "/db/ready")));
    let (s, _) = reply(&mut m, 1, Ok(Reply::Exists(None)));
    cases.push((m.clone(), s[0].clone())); // counting
    let (s, _) = reply(&mut m, 2, children(&["p1", "p2"]));
    cases.push((m.clone(), s[0].clone())); // making ready
    let mut m = inside();
    let (s, _) = step(&mut m, Input::Command(DoubleBarrierCommand::Leave));
    cases.push((m.clone(), s[0].clone())); // listing
    let (s, _) = reply(&mut m, 2, children(&["p1", "p2"]));
    cases.push((m.clone(), s[0].clone())); // deleting
    reply(&mut m, 3, Ok(Reply::Delete));
    let (s, _) = reply(&mut m, 4, children(&["p1"]));
    cases.push((m, s[0].clone())); // checking the lowest
    assert_eq!(cases.len(), 8);

    for (m, (id, op)) in cases {
        for error in [
            ZkError::ConnectionLoss,
            ZkError::SessionMoved,
            ZkError::OperationTimeout,
        ] {
            let mut m = m.clone();
            assert_eq!(reply(&mut m, id, Err(error)), (vec![], vec![]), "{op:?}");
            // Not while disconnected; after the reconnect, the same op.
            assert_eq!(
                step(&mut m, Input::Session(SessionEvent::Disconnected)),
                (vec![], vec![])
            );
            assert_eq!(
                step(&mut m, Input::Session(SessionEvent::Connected)),
                (vec![(id + 1, op.clone())], vec![]),
                "{error:?}"
            );
            // A second Connected sends nothing more.
            assert_eq!(
                step(&mut m, Input::Session(SessionEvent::Connected)),
                (vec![], vec![])
            );
        }
    }
}

#[test]
fn a_reply_lost_after_a_reconnect_is_sent_again_at_once() {
    let mut m = barrier(2);
    step(&mut m, Input::Command(DoubleBarrierCommand::Enter));
    // The session reconnected while the create was in flight: its loss
    // needs no further reconnect.
    step(&mut m, Input::Session(SessionEvent::Disconnected));
    step(&mut m, Input::Session(SessionEvent::Connected));
    let (s, _) = reply(&mut m, 0, Err(ZkError::ConnectionLoss));
    assert!(matches!(&s[..], [(1, Op::Create { path, .. })] if path == "/db/p2"));
}

#[test]
fn the_end_of_the_session_loses_the_barrier() {
    // An expired reply, an Expired event, a Closed event: each while
    // entering and while inside.
    let inputs: [Box<dyn Fn(u64) -> Input<DoubleBarrierCommand>>; 3] = [
        Box::new(|id| Input::Reply(id, Err(ZkError::SessionExpired))),
        Box::new(|_| Input::Session(SessionEvent::Expired)),
        Box::new(|_| Input::Session(SessionEvent::Closed)),
    ];
    for input in &inputs {
        let mut m = entering(2);
        assert_eq!(
            step(&mut m, input(1)),
            (
                vec![],
                vec![DoubleBarrierOutcome::Lost {
                    reason: ZkError::SessionExpired
                }]
            )
        );
        assert!(m.session_ended());
        assert_eq!(
            step(&mut m, Input::Command(DoubleBarrierCommand::Enter)).1,
            vec![DoubleBarrierOutcome::Refused {
                command: DoubleBarrierCommand::Enter
            }]
        );
    }
    // Inside, with nothing in flight: the Expired event ends it.
    let mut m = inside();
    assert_eq!(
        step(&mut m, Input::Session(SessionEvent::Expired)).1,
        vec![DoubleBarrierOutcome::Lost {
            reason: ZkError::SessionExpired
        }]
    );
    // An expired reply to a request no longer awaited ends it too.
    let mut m = entering(2);
    assert_eq!(
        reply(&mut m, 0, Err(ZkError::SessionExpired)).1,
        vec![DoubleBarrierOutcome::Lost {
            reason: ZkError::SessionExpired
        }]
    );
    // An idle machine has nothing to lose.
    let mut idle = barrier(2);
    assert_eq!(
        step(&mut idle, Input::Session(SessionEvent::Expired)),
        (vec![], vec![])
    );
    assert!(idle.session_ended());
}

#[test]
fn odd_answers_fail_and_stale_replies_are_ignored() {
    let mut m = entering(2);
    // A reply to an op not in flight changes nothing.
    assert_eq!(reply(&mut m, 0, created("/db/p2")), (vec![], vec![]));
    assert_eq!(reply(&mut m, 9, Err(ZkError::NoNode)), (vec![], vec![]));
    assert_eq!(
        reply(&mut m, 1, Err(ZkError::NoAuth)).1,
        vec![DoubleBarrierOutcome::Failed(ZkError::NoAuth)]
    );
    assert_eq!(
        step(&mut m, Input::Command(DoubleBarrierCommand::Enter)).1,
        vec![DoubleBarrierOutcome::Refused {
            command: DoubleBarrierCommand::Enter
        }]
    );
    // Commands out of turn are refused and change nothing.
    let mut m = inside();
    let before = m.clone();
    assert_eq!(
        step(&mut m, Input::Command(DoubleBarrierCommand::Enter)).1,
        vec![DoubleBarrierOutcome::Refused {
            command: DoubleBarrierCommand::Enter
        }]
    );
    assert_eq!(m, before);
}

#[test]
#[should_panic(expected = "a process name is one path component")]
fn a_process_may_not_be_named_ready() {
    DoubleBarrier::new("/db", "ready", SessionId(ME), 2);
}

#[test]
#[should_panic(expected = "a barrier of at least one process")]
fn a_barrier_needs_a_process() {
    DoubleBarrier::new("/db", "p1", SessionId(ME), 0);
}
