//! Scripted-event tests of the barrier machine.

use super::*;
use crate::step;
use zoosim_core::proto::{EventType, MultiResult, Stat, WatchEvent};

fn exists(id: u64) -> (u64, Op) {
    (
        id,
        Op::Exists {
            path: "/b/x".into(),
            watch: true,
        },
    )
}

#[test]
fn set_and_remove_are_idempotent() {
    let mut m = Barrier::new("/b/x");
    let (s, _) = step(&mut m, Input::Command(BarrierCommand::Set));
    assert!(
        matches!(&s[0].1, Op::Create { path, mode: CreateMode::Persistent, .. } if path == "/b/x")
    );
    assert_eq!(
        step(&mut m, Input::Command(BarrierCommand::Wait)).1,
        vec![BarrierOutcome::Refused {
            command: BarrierCommand::Wait
        }]
    );
    let mut exists_already = m.clone();
    let mut no_parent = m.clone();
    let mut lost = m.clone();
    assert_eq!(
        step(
            &mut exists_already,
            Input::Reply(0, Err(ZkError::NodeExists))
        )
        .1,
        vec![BarrierOutcome::Set]
    );
    let (s, _) = step(&mut no_parent, Input::Reply(0, Err(ZkError::NoNode)));
    let paths: Vec<String> = s
        .iter()
        .map(|(_, op)| match op {
            Op::Create { path, .. } => path.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(paths, ["/b", "/b/x"]);
    step(&mut lost, Input::Reply(0, Err(ZkError::ConnectionLoss)));
    let (s, _) = step(&mut lost, Input::Session(SessionEvent::Connected));
    assert!(matches!(&s[0].1, Op::Create { .. }), "sent again");
    assert_eq!(
        step(
            &mut m,
            Input::Reply(
                0,
                Ok(Reply::Create {
                    path: "/b/x".into(),
                    stat: Stat::default()
                })
            )
        )
        .1,
        vec![BarrierOutcome::Set]
    );
    let (s, _) = step(&mut m, Input::Command(BarrierCommand::Remove));
    assert!(matches!(&s[0].1, Op::Delete { version: -1, .. }));
    let mut gone = m.clone();
    assert_eq!(
        step(&mut m, Input::Reply(1, Ok(Reply::Delete))).1,
        vec![BarrierOutcome::Removed]
    );
    assert_eq!(
        step(&mut gone, Input::Reply(1, Err(ZkError::NoNode))).1,
        vec![BarrierOutcome::Removed]
    );
}

#[test]
fn a_waiter_checks_through_the_leader_then_watches() {
    let mut m = Barrier::new("/b/x");
    let (s, _) = step(&mut m, Input::Command(BarrierCommand::Wait));
    assert_eq!(
        s,
        vec![(
            0,
            Op::Multi(vec![MultiOp::Check {
                path: "/b/x".into(),
                version: -1
            }])
        )]
    );
    let mut down = m.clone();
    let failed = Ok(Reply::Multi(vec![MultiResult::Failed(ZkError::NoNode)]));
    assert_eq!(
        step(&mut down, Input::Reply(0, failed)).1,
        vec![BarrierOutcome::Passed]
    );
    let (s, _) = step(
        &mut m,
        Input::Reply(0, Ok(Reply::Multi(vec![MultiResult::Check]))),
    );
    assert_eq!(s, vec![exists(1)]);
    let mut gone_meanwhile = m.clone();
    assert_eq!(
        step(
            &mut gone_meanwhile,
            Input::Reply(1, Ok(Reply::Exists(None)))
        )
        .1,
        vec![BarrierOutcome::Passed]
    );
    let (s, o) = step(
        &mut m,
        Input::Reply(1, Ok(Reply::Exists(Some(Stat::default())))),
    );
    assert!(s.is_empty(), "waiting");
    assert!(o.is_empty(), "waiting");
    let deleted = Input::Watch(WatchEvent {
        event_type: EventType::NodeDeleted,
        path: "/b/x".into(),
    });
    let (s, o) = step(&mut m, deleted);
    assert_eq!((s, o), (vec![exists(2)], vec![BarrierOutcome::Woken]));
    assert_eq!(
        step(&mut m, Input::Reply(2, Ok(Reply::Exists(None)))).1,
        vec![BarrierOutcome::Passed]
    );
    assert!(m.is_idle());
}

#[test]
fn the_literal_waiter_skips_the_check() {
    let mut m = Barrier::with_variant("/b/x", BarrierVariant::NoSync);
    assert_eq!(
        step(&mut m, Input::Command(BarrierCommand::Wait)).0,
        vec![exists(0)]
    );
    for v in BarrierVariant::ALL {
        assert_eq!(BarrierVariant::from_name(v.name()), Some(v));
    }
}

#[test]
fn the_sync_instead_of_check_waiter_syncs_then_looks() {
    let mut m = Barrier::with_variant("/b/x", BarrierVariant::SyncInsteadOfCheck);
    assert_eq!(
        step(&mut m, Input::Command(BarrierCommand::Wait)).0,
        vec![(
            0,
            Op::Sync {
                path: "/b/x".into()
            }
        )]
    );
    assert_eq!(
        step(&mut m, Input::Reply(0, Ok(Reply::Sync))).0,
        vec![exists(1)]
    );
    assert_eq!(
        step(&mut m, Input::Reply(1, Ok(Reply::Exists(None)))).1,
        vec![BarrierOutcome::Passed]
    );
}

#[test]
fn losses_and_failures() {
    let mut m = Barrier::new("/b/x");
    step(&mut m, Input::Command(BarrierCommand::Wait));
    step(&mut m, Input::Reply(0, Err(ZkError::ConnectionLoss)));
    let (s, _) = step(&mut m, Input::Session(SessionEvent::Connected));
    assert!(matches!(&s[0].1, Op::Multi(_)), "the check again");
    let mut failed = m.clone();
    assert_eq!(
        step(&mut m, Input::Session(SessionEvent::Expired)).1,
        vec![BarrierOutcome::Lost {
            reason: ZkError::SessionExpired
        }]
    );
    assert!(m.session_ended());
    assert!(matches!(
        step(&mut m, Input::Command(BarrierCommand::Set)).1[0],
        BarrierOutcome::Refused { .. }
    ));
    let odd = Ok(Reply::Multi(vec![MultiResult::Failed(ZkError::NoAuth)]));
    assert_eq!(
        step(&mut failed, Input::Reply(1, odd)).1,
        vec![BarrierOutcome::Failed(ZkError::NoAuth)]
    );
}
