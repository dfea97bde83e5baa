//! Scripted-event tests of the two-phase commit site: voting, deciding,
//! aborting for a failed site, lost replies, the end of the session.

use super::*;
use crate::step;
use zoosim_core::proto::{Stat, WatchEvent};

type Step = (Vec<(u64, Op)>, Vec<SiteOutcome>);

fn reply(m: &mut Site, id: u64, r: Result<Reply, ZkError>) -> Step {
    step(m, Input::Reply(id, r))
}

fn vote(commit: bool) -> Input<SiteCommand> {
    Input::Command(SiteCommand::Vote { commit })
}

fn set(stat_version: i32) -> Result<Reply, ZkError> {
    Ok(Reply::SetData(Stat {
        version: stat_version,
        ..Stat::default()
    }))
}

fn data(d: &[u8]) -> Result<Reply, ZkError> {
    Ok(Reply::GetData {
        data: d.to_vec(),
        stat: Stat::default(),
    })
}

fn children(names: &[&str]) -> Result<Reply, ZkError> {
    Ok(Reply::GetChildren {
        children: names.iter().map(|n| n.to_string()).collect(),
        stat: Stat::default(),
    })
}

fn event(event_type: EventType, path: &str) -> Input<SiteCommand> {
    Input::Watch(WatchEvent {
        event_type,
        path: path.into(),
    })
}

fn read(id: u64, site: usize) -> (u64, Op) {
    (
        id,
        Op::GetData {
            path: format!("/tx/s{site}"),
            watch: true,
        },
    )
}

fn list_alive(id: u64) -> (u64, Op) {
    (
        id,
        Op::GetChildren {
            path: "/tx".into(),
            watch: true,
        },
    )
}

fn write_vote(id: u64, site: usize, d: &[u8]) -> (u64, Op) {
    (
        id,
        Op::SetData {
            path: format!("/tx/s{site}"),
            data: d.to_vec(),
            version: 0,
        },
    )
}

/// Site 0 of 2 after its commit vote is on its node: reads of s0 (op 2),
/// s1 (op 3) and the alive list (op 4) in flight.
fn voted() -> Site {
    voted_as(TwoPhaseCommitVariant::Correct)
}

/// [`voted`], running `variant`.
fn voted_as(variant: TwoPhaseCommitVariant) -> Site {
    let mut m = Site::with_variant("/tx", 0, 2, variant);
    assert_eq!(
        step(&mut m, vote(true)).0,
        vec![(
            0,
            Op::Create {
                path: "/tx/alive-s0".into(),
                data: vec![],
                mode: CreateMode::Ephemeral
            }
        )]
    );
    assert_eq!(
        reply(
            &mut m,
            0,
            Ok(Reply::Create {
                path: "/tx/alive-s0".into(),
                stat: Stat::default()
            })
        )
        .0,
        vec![write_vote(1, 0, b"commit")]
    );
    assert_eq!(
        reply(&mut m, 1, set(1)),
        (
            vec![read(2, 0), read(3, 1), list_alive(4)],
            vec![SiteOutcome::Voted { ours: true }]
        )
    );
    m
}

#[test]
fn the_coordinator_creates_the_transaction_and_every_vote_node_at_once() {
    let Op::Multi(ops) = create_transaction("/tx", 3) else {
        panic!("a multi");
    };
    let paths: Vec<&str> = ops
        .iter()
        .map(|op| match op {
            MultiOp::Create {
                path,
                mode: CreateMode::Persistent,
                data,
            } if data.is_empty() => path.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(paths, ["/tx", "/tx/s0", "/tx/s1", "/tx/s2"]);
}

#[test]
fn all_commit_votes_decide_commit() {
    let mut m = voted();
    assert_eq!(reply(&mut m, 2, data(b"commit")), (vec![], vec![]));
    // s1 has not voted yet: its data watch calls us back.
    assert_eq!(reply(&mut m, 3, data(b"")), (vec![], vec![]));
    assert_eq!(m.decision(), None);
    assert_eq!(
        step(&mut m, event(EventType::NodeDataChanged, "/tx/s1")).0,
        vec![read(5, 1)]
    );
    assert_eq!(
        reply(&mut m, 5, data(b"commit")).1,
        vec![SiteOutcome::Decided { commit: true }]
    );
    assert_eq!(m.decision(), Some(true));
    // Decided: later events and reads change nothing.
    assert_eq!(
        step(&mut m, event(EventType::NodeDataChanged, "/tx/s1")),
        (vec![], vec![])
    );
    assert_eq!(reply(&mut m, 4, children(&["s0", "s1"])), (vec![], vec![]));
    assert_eq!(m.decision(), Some(true));
}

#[test]
fn one_abort_decides_abort_before_the_other_votes_are_read() {
    let mut m = voted();
    assert_eq!(
        reply(&mut m, 3, data(b"abort")).1,
        vec![SiteOutcome::Decided { commit: false }]
    );
    // Our own commit read afterwards does not change it.
    assert_eq!(reply(&mut m, 2, data(b"commit")), (vec![], vec![]));
    assert_eq!(m.decision(), Some(false));
}

/// The buggy variant decides commit on an empty node read (its site has
/// not voted), where the correct site waits (above).
#[test]
fn commit_before_all_votes_takes_an_empty_vote_node_as_no_objection() {
    let mut m = voted_as(TwoPhaseCommitVariant::CommitBeforeAllVotes);
    assert_eq!(m.variant(), TwoPhaseCommitVariant::CommitBeforeAllVotes);
    assert_eq!(reply(&mut m, 2, data(b"commit")), (vec![], vec![]));
    assert_eq!(
        reply(&mut m, 3, data(b"")).1,
        vec![SiteOutcome::Decided { commit: true }]
    );
    // An abort it has read still decides abort.
    let mut m = voted_as(TwoPhaseCommitVariant::CommitBeforeAllVotes);
    assert_eq!(
        reply(&mut m, 3, data(b"abort")).1,
        vec![SiteOutcome::Decided { commit: false }]
    );
    for v in TwoPhaseCommitVariant::ALL {
        assert_eq!(TwoPhaseCommitVariant::from_name(v.name()), Some(v));
    }
    assert_eq!(
        TwoPhaseCommitVariant::from_name("two-phase-commit/none"),
        None
    );
}

#[test]
fn a_vote_node_with_anything_else_counts_as_not_voted() {
    let mut m = voted();
    reply(&mut m, 2, data(b"commit"));
    assert_eq!(reply(&mut m, 3, data(b"maybe")), (vec![], vec![]));
    assert_eq!(m.decision(), None);
}

#[test]
fn a_taken_vote_node_is_read_back_not_overwritten() {
    // BadVersion on our vote: our own resent vote, or an abort written
    // for us, came first. Either way the node's word is final.
    let mut m = Site::new("/tx", 1, 2);
    step(&mut m, vote(true));
    // Our alive node exists already: a resent create.
    assert_eq!(
        reply(&mut m, 0, Err(ZkError::NodeExists)).0,
        vec![write_vote(1, 1, b"commit")]
    );
    assert_eq!(
        reply(&mut m, 1, Err(ZkError::BadVersion)),
        (
            vec![read(2, 0), read(3, 1), list_alive(4)],
            vec![SiteOutcome::Voted { ours: false }]
        )
    );
    assert_eq!(
        reply(&mut m, 3, data(b"abort")).1,
        vec![SiteOutcome::Decided { commit: false }]
    );
}

#[test]
fn an_abort_vote_is_written_as_abort() {
    let mut m = Site::new("/tx", 1, 3);
    step(&mut m, vote(false));
    let (s, _) = reply(&mut m, 0, Err(ZkError::NodeExists));
    assert_eq!(s, vec![write_vote(1, 1, b"abort")]);
}

#[test]
fn a_site_that_dies_unvoted_is_voted_abort_for() {
    let mut m = voted();
    reply(&mut m, 2, data(b"commit"));
    reply(&mut m, 3, data(b""));
    // Both sites alive: nothing to do.
    assert_eq!(
        reply(&mut m, 4, children(&["s0", "s1", "alive-s0", "alive-s1"])),
        (vec![], vec![])
    );
    assert_eq!(
        step(&mut m, event(EventType::NodeChildrenChanged, "/tx")).0,
        vec![list_alive(5)]
    );
    let mut raced = m.clone();
    // s1's alive node is gone and it has not voted: abort for it.
    assert_eq!(
        reply(&mut m, 5, children(&["s0", "s1", "alive-s0"])).0,
        vec![write_vote(6, 1, b"abort")]
    );
    assert_eq!(
        reply(&mut m, 6, set(1)),
        (vec![read(7, 1)], vec![SiteOutcome::AbortedFor { site: 1 }])
    );
    assert_eq!(
        reply(&mut m, 7, data(b"abort")).1,
        vec![SiteOutcome::Decided { commit: false }]
    );
    // s1's vote came first: read it, and abide by it.
    reply(&mut raced, 5, children(&["s0", "s1", "alive-s0"]));
    assert_eq!(
        reply(&mut raced, 6, Err(ZkError::BadVersion)),
        (vec![read(7, 1)], vec![])
    );
    assert_eq!(
        reply(&mut raced, 7, data(b"commit")).1,
        vec![SiteOutcome::Decided { commit: true }]
    );
}

#[test]
fn a_site_is_aborted_for_only_if_seen_alive_and_read_unvoted() {
    // Never seen alive (it may not have started yet): no abort.
    let mut m = voted();
    reply(&mut m, 2, data(b"commit"));
    reply(&mut m, 3, data(b""));
    assert_eq!(
        reply(&mut m, 4, children(&["s0", "s1", "alive-s0"])),
        (vec![], vec![])
    );
    // Seen alive, but its vote not read yet: no abort.
    let mut m = voted();
    reply(&mut m, 4, children(&["alive-s0", "alive-s1"]));
    step(&mut m, event(EventType::NodeChildrenChanged, "/tx"));
    assert_eq!(reply(&mut m, 5, children(&["alive-s0"])), (vec![], vec![]));
    // Seen alive and gone twice: one abort only.
    let mut m = voted();
    reply(&mut m, 2, data(b"commit"));
    reply(&mut m, 3, data(b""));
    reply(&mut m, 4, children(&["alive-s0", "alive-s1"]));
    step(&mut m, event(EventType::NodeChildrenChanged, "/tx"));
    step(&mut m, event(EventType::NodeChildrenChanged, "/tx"));
    let (s, _) = reply(&mut m, 5, children(&["alive-s0"]));
    assert_eq!(s, vec![write_vote(7, 1, b"abort")]);
    assert_eq!(reply(&mut m, 6, children(&["alive-s0"])), (vec![], vec![]));
}

#[test]
fn lost_replies_are_sent_again_after_a_reconnect() {
    // Every purpose: alive, vote, read, list, abort-for.
    let mut cases: Vec<(Site, (u64, Op))> = Vec::new();
    let mut m = Site::new("/tx", 0, 2);
    let (s, _) = step(&mut m, vote(true));
    cases.push((m.clone(), s[0].clone()));
    let (s, _) = reply(&mut m, 0, Err(ZkError::NodeExists));
    cases.push((m.clone(), s[0].clone()));
    let m = voted();
    cases.push((m.clone(), read(3, 1)));
    cases.push((m.clone(), list_alive(4)));
    let mut m = voted();
    reply(&mut m, 3, data(b""));
    reply(&mut m, 4, children(&["alive-s1"]));
    step(&mut m, event(EventType::NodeChildrenChanged, "/tx"));
    let (s, _) = reply(&mut m, 5, children(&[]));
    cases.push((m, s[0].clone()));
    assert_eq!(cases.len(), 5);

    for (m, (id, op)) in cases {
        for error in [
            ZkError::ConnectionLoss,
            ZkError::SessionMoved,
            ZkError::OperationTimeout,
        ] {
            let mut m = m.clone();
            assert_eq!(reply(&mut m, id, Err(error)), (vec![], vec![]), "{op:?}");
            step(&mut m, Input::Session(SessionEvent::Disconnected));
            let (s, o) = step(&mut m, Input::Session(SessionEvent::Connected));
            assert!(o.is_empty());
            assert_eq!(s.len(), 1, "{error:?} {op:?}: {s:?}");
            assert_eq!(s[0].1, op, "{error:?}");
            assert_eq!(
                step(&mut m, Input::Session(SessionEvent::Connected)),
                (vec![], vec![])
            );
        }
    }
}

#[test]
fn several_lost_requests_wait_for_one_reconnect_together() {
    let mut m = voted();
    for id in [2, 3, 4] {
        assert_eq!(
            reply(&mut m, id, Err(ZkError::ConnectionLoss)),
            (vec![], vec![])
        );
    }
    let (s, _) = step(&mut m, Input::Session(SessionEvent::Connected));
    assert_eq!(s, vec![read(5, 0), read(6, 1), list_alive(7)]);
    // Lost again on the new connection: it waits for the next one.
    assert_eq!(
        reply(&mut m, 6, Err(ZkError::ConnectionLoss)),
        (vec![], vec![])
    );
    let (s, _) = step(&mut m, Input::Session(SessionEvent::Connected));
    assert_eq!(s, vec![read(8, 1)]);
}

#[test]
fn the_end_of_the_session_before_the_decision_is_lost() {
    for input in [
        Input::Reply(3, Err(ZkError::SessionExpired)),
        Input::Reply(99, Err(ZkError::SessionExpired)),
        Input::Session(SessionEvent::Expired),
        Input::Session(SessionEvent::Closed),
    ] {
        let mut m = voted();
        assert_eq!(
            step(&mut m, input.clone()),
            (
                vec![],
                vec![SiteOutcome::Lost {
                    reason: ZkError::SessionExpired
                }]
            ),
            "{input:?}"
        );
        assert!(m.session_ended());
        // Nothing more comes of it.
        assert_eq!(reply(&mut m, 2, data(b"commit")), (vec![], vec![]));
        assert_eq!(step(&mut m, vote(true)).1, vec![SiteOutcome::Refused]);
    }
    // After the decision, the end of the session loses nothing.
    let mut m = voted();
    reply(&mut m, 3, data(b"abort"));
    assert_eq!(
        step(&mut m, Input::Session(SessionEvent::Expired)),
        (vec![], vec![])
    );
    assert_eq!(m.decision(), Some(false));
}

#[test]
fn a_second_vote_and_odd_answers() {
    let mut m = voted();
    assert_eq!(
        step(&mut m, vote(false)),
        (vec![], vec![SiteOutcome::Refused])
    );
    // A reply to nothing in flight changes nothing.
    assert_eq!(reply(&mut m, 42, data(b"abort")), (vec![], vec![]));
    assert_eq!(m.decision(), None);
    // The transaction does not exist: the vote fails.
    let mut m = Site::new("/tx", 0, 2);
    step(&mut m, vote(true));
    step(&mut m, Input::Reply(0, Err(ZkError::NodeExists)));
    assert_eq!(
        reply(&mut m, 1, Err(ZkError::NoNode)).1,
        vec![SiteOutcome::Failed(ZkError::NoNode)]
    );
    assert_eq!(step(&mut m, vote(true)).1, vec![SiteOutcome::Refused]);
}

#[test]
#[should_panic(expected = "site 2 of 2")]
fn a_site_number_is_below_the_number_of_sites() {
    Site::new("/tx", 2, 2);
}
