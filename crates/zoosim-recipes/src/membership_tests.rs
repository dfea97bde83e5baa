//! Scripted-event tests of the group membership machine.

use super::*;
use crate::step;
use zoosim_core::proto::{Stat, WatchEvent};

fn children(names: &[&str]) -> Result<Reply, ZkError> {
    Ok(Reply::GetChildren {
        children: names.iter().map(|n| n.to_string()).collect(),
        stat: Stat::default(),
    })
}

#[test]
fn join_leave_and_the_resent_create() {
    let mut m = Membership::new("/g/x", "m1", "k");
    let (s, _) = step(&mut m, Input::Command(MembershipCommand::Join));
    assert_eq!(
        s,
        vec![(
            0,
            Op::Create {
                path: "/g/x/m1-k".into(),
                data: vec![],
                mode: CreateMode::Ephemeral
            }
        )]
    );
    assert!(m.is_busy());
    let (mut exists, mut no_parent, mut lost) = (m.clone(), m.clone(), m.clone());
    assert_eq!(
        step(&mut exists, Input::Reply(0, Err(ZkError::NodeExists))).1,
        vec![MembershipOutcome::Joined]
    );
    let (s, _) = step(&mut no_parent, Input::Reply(0, Err(ZkError::NoNode)));
    assert_eq!(s.len(), 3, "/g, /g/x, then the member: {s:?}");
    step(&mut lost, Input::Reply(0, Err(ZkError::ConnectionLoss)));
    let (s, _) = step(&mut lost, Input::Session(SessionEvent::Connected));
    assert!(matches!(&s[0].1, Op::Create { .. }));
    let created = Ok(Reply::Create {
        path: "/g/x/m1-k".into(),
        stat: Stat::default(),
    });
    assert_eq!(
        step(&mut m, Input::Reply(0, created)).1,
        vec![MembershipOutcome::Joined]
    );
    assert!(m.is_member());
    assert!(matches!(
        step(&mut m, Input::Command(MembershipCommand::Join)).1[0],
        MembershipOutcome::Refused { .. }
    ));
    let (s, _) = step(&mut m, Input::Command(MembershipCommand::Leave));
    assert!(matches!(&s[0].1, Op::Delete { path, .. } if path == "/g/x/m1-k"));
    let mut gone = m.clone();
    assert_eq!(
        step(&mut m, Input::Reply(1, Ok(Reply::Delete))).1,
        vec![MembershipOutcome::Left]
    );
    assert_eq!(
        step(&mut gone, Input::Reply(1, Err(ZkError::NoNode))).1,
        vec![MembershipOutcome::Left]
    );
    assert!(matches!(
        step(&mut m, Input::Command(MembershipCommand::Leave)).1[0],
        MembershipOutcome::Refused { .. }
    ));
}

#[test]
fn following_lists_with_a_watch_and_relists_on_change() {
    let mut m = Membership::new("/g", "w", "k");
    let (s, _) = step(&mut m, Input::Command(MembershipCommand::Follow));
    assert_eq!(
        s,
        vec![(
            0,
            Op::GetChildren {
                path: "/g".into(),
                watch: true
            }
        )]
    );
    let changed = || {
        Input::Watch(WatchEvent {
            event_type: EventType::NodeChildrenChanged,
            path: "/g".into(),
        })
    };
    // A change while listing: one more list after.
    assert!(step(&mut m, changed()).0.is_empty());
    let (s, o) = step(&mut m, Input::Reply(0, children(&["m2-a", "m1-b"])));
    assert_eq!(
        o,
        vec![MembershipOutcome::Members(vec!["m1".into(), "m2".into()])]
    );
    assert_eq!(s.len(), 1);
    step(&mut m, Input::Reply(1, children(&[])));
    let (s, _) = step(&mut m, changed());
    assert_eq!(
        s,
        vec![(
            2,
            Op::GetChildren {
                path: "/g".into(),
                watch: true
            }
        )]
    );
    // Lost list: again after the reconnect.
    step(&mut m, Input::Reply(2, Err(ZkError::ConnectionLoss)));
    let (s, _) = step(&mut m, Input::Session(SessionEvent::Connected));
    assert_eq!(s.len(), 1);
}

#[test]
fn a_missing_group_is_followed_until_created() {
    let mut m = Membership::new("/g", "w", "k");
    step(&mut m, Input::Command(MembershipCommand::Follow));
    let (s, _) = step(&mut m, Input::Reply(0, Err(ZkError::NoNode)));
    assert_eq!(
        s,
        vec![(
            1,
            Op::Exists {
                path: "/g".into(),
                watch: true
            }
        )]
    );
    let mut appeared = m.clone();
    assert_eq!(
        step(&mut m, Input::Reply(1, Ok(Reply::Exists(None)))).1,
        vec![MembershipOutcome::Members(vec![])]
    );
    let created = Input::Watch(WatchEvent {
        event_type: EventType::NodeCreated,
        path: "/g".into(),
    });
    assert_eq!(step(&mut m, created).0.len(), 1);
    let (s, _) = step(
        &mut appeared,
        Input::Reply(1, Ok(Reply::Exists(Some(Stat::default())))),
    );
    assert!(matches!(&s[0].1, Op::GetChildren { .. }));
}

#[test]
fn the_end_of_the_session() {
    let mut m = Membership::new("/g", "m1", "k");
    step(&mut m, Input::Command(MembershipCommand::Join));
    assert_eq!(
        step(&mut m, Input::Reply(0, Err(ZkError::SessionExpired))).1,
        vec![MembershipOutcome::Lost {
            reason: ZkError::SessionExpired
        }]
    );
    assert!(m.session_ended());
    assert!(!m.is_member());
    assert!(matches!(
        step(&mut m, Input::Command(MembershipCommand::Follow)).1[0],
        MembershipOutcome::Refused { .. }
    ));
    let mut f = Membership::new("/g", "m1", "k");
    step(&mut f, Input::Command(MembershipCommand::Join));
    assert_eq!(
        step(&mut f, Input::Reply(0, Err(ZkError::NoAuth))).1,
        vec![MembershipOutcome::Failed(ZkError::NoAuth)]
    );
}

#[test]
#[should_panic(expected = "without '-'")]
fn a_member_name_may_not_hold_the_separator() {
    let _ = Membership::new("/g", "a-b", "k");
}
