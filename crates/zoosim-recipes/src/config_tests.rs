//! Scripted-event tests of the configuration machine.

use super::*;
use crate::step;
use zoosim_core::proto::{Stat, WatchEvent};

fn data(d: &[u8], version: i32) -> Result<Reply, ZkError> {
    Ok(Reply::GetData {
        data: d.to_vec(),
        stat: Stat {
            version,
            ..Stat::default()
        },
    })
}

fn event(t: EventType) -> Input<ConfigCommand> {
    Input::Watch(WatchEvent {
        event_type: t,
        path: "/c".into(),
    })
}

fn get(id: u64) -> (u64, Op) {
    (
        id,
        Op::GetData {
            path: "/c".into(),
            watch: true,
        },
    )
}

#[test]
fn following_reads_and_rereads_on_every_change() {
    let mut m = Config::new("/c");
    let (s, _) = step(&mut m, Input::Command(ConfigCommand::Follow));
    assert_eq!(s, vec![get(0)]);
    let (_, o) = step(&mut m, Input::Reply(0, data(b"a", 0)));
    assert_eq!(
        o,
        vec![ConfigOutcome::Value {
            data: b"a".to_vec(),
            version: 0
        }]
    );
    for (i, t) in [
        EventType::NodeDataChanged,
        EventType::NodeCreated,
        EventType::NodeDeleted,
    ]
    .into_iter()
    .enumerate()
    {
        let (s, _) = step(&mut m, event(t));
        assert_eq!(s, vec![get(i as u64 + 1)]);
        step(&mut m, Input::Reply(i as u64 + 1, data(b"a", 0)));
    }
    // A change while a read is in flight: one read after it, not two.
    let (s, _) = step(&mut m, event(EventType::NodeDataChanged));
    assert_eq!(s, vec![get(4)]);
    let (s, _) = step(&mut m, event(EventType::NodeDataChanged));
    assert!(s.is_empty());
    let (s, _) = step(&mut m, Input::Reply(4, data(b"b", 1)));
    assert_eq!(s, vec![get(5)]);
    // Other paths are not ours; Follow twice is harmless.
    let (s, _) = step(
        &mut m,
        Input::Watch(WatchEvent {
            event_type: EventType::NodeDataChanged,
            path: "/other".into(),
        }),
    );
    assert!(s.is_empty());
    assert!(step(&mut m, Input::Command(ConfigCommand::Follow))
        .0
        .is_empty());
}

#[test]
fn a_missing_node_is_followed_until_it_appears() {
    let mut m = Config::new("/c");
    step(&mut m, Input::Command(ConfigCommand::Follow));
    let (s, _) = step(&mut m, Input::Reply(0, Err(ZkError::NoNode)));
    assert_eq!(
        s,
        vec![(
            1,
            Op::Exists {
                path: "/c".into(),
                watch: true
            }
        )]
    );
    let mut appeared = m.clone();
    let (_, o) = step(&mut m, Input::Reply(1, Ok(Reply::Exists(None))));
    assert_eq!(o, vec![ConfigOutcome::Missing]);
    let (s, _) = step(&mut m, event(EventType::NodeCreated));
    assert_eq!(s, vec![get(2)]);
    // Created between the getData and the exists: read it.
    let (s, _) = step(
        &mut appeared,
        Input::Reply(1, Ok(Reply::Exists(Some(Stat::default())))),
    );
    assert_eq!(s, vec![get(2)]);
}

#[test]
fn compare_and_set_and_its_conflicts() {
    let cas = |v: i32| {
        Input::Command(ConfigCommand::CompareAndSet {
            expected_version: v,
            data: b"x".to_vec(),
        })
    };
    let mut m = Config::new("/c");
    let (s, _) = step(&mut m, cas(3));
    assert_eq!(
        s,
        vec![(
            0,
            Op::SetData {
                path: "/c".into(),
                data: b"x".to_vec(),
                version: 3
            }
        )]
    );
    // One update at a time.
    assert_eq!(step(&mut m, cas(3)).1, vec![ConfigOutcome::Refused]);
    let mut conflict = m.clone();
    let mut gone = m.clone();
    let ok = Ok(Reply::SetData(Stat {
        version: 4,
        ..Stat::default()
    }));
    assert_eq!(
        step(&mut m, Input::Reply(0, ok)).1,
        vec![ConfigOutcome::Set { version: 4 }]
    );
    assert!(!m.is_updating());
    assert_eq!(
        step(&mut conflict, Input::Reply(0, Err(ZkError::BadVersion))).1,
        vec![ConfigOutcome::Conflict]
    );
    assert_eq!(
        step(&mut gone, Input::Reply(0, Err(ZkError::NoNode))).1,
        vec![ConfigOutcome::Conflict]
    );
}

#[test]
fn a_lost_update_is_read_back() {
    let mut m = Config::new("/c");
    step(
        &mut m,
        Input::Command(ConfigCommand::CompareAndSet {
            expected_version: 3,
            data: b"x".to_vec(),
        }),
    );
    let (s, _) = step(&mut m, Input::Reply(0, Err(ZkError::ConnectionLoss)));
    assert!(s.is_empty(), "nothing before a reconnect");
    let (s, _) = step(&mut m, Input::Session(SessionEvent::Connected));
    assert_eq!(
        s,
        vec![(
            1,
            Op::GetData {
                path: "/c".into(),
                watch: false
            }
        )]
    );
    let (mut ours, mut not_done, mut other) = (m.clone(), m.clone(), m.clone());
    assert_eq!(
        step(&mut ours, Input::Reply(1, data(b"x", 4))).1,
        vec![ConfigOutcome::Set { version: 4 }]
    );
    let (s, _) = step(&mut not_done, Input::Reply(1, data(b"old", 3)));
    assert!(
        matches!(&s[0].1, Op::SetData { version: 3, .. }),
        "sent again"
    );
    assert_eq!(
        step(&mut other, Input::Reply(1, data(b"y", 4))).1,
        vec![ConfigOutcome::Conflict]
    );
    // The read-back itself lost: read again after the next reconnect.
    let (s, _) = step(&mut m, Input::Reply(1, Err(ZkError::ConnectionLoss)));
    assert!(s.is_empty());
    let (s, _) = step(&mut m, Input::Session(SessionEvent::Connected));
    assert!(matches!(&s[0].1, Op::GetData { watch: false, .. }));
}

#[test]
fn a_lost_read_is_sent_again_after_a_reconnect() {
    let mut m = Config::new("/c");
    step(&mut m, Input::Command(ConfigCommand::Follow));
    let (s, _) = step(&mut m, Input::Reply(0, Err(ZkError::ConnectionLoss)));
    assert!(s.is_empty());
    // A change meanwhile does not send a second read.
    assert!(step(&mut m, event(EventType::NodeDataChanged)).0.is_empty());
    let (s, _) = step(&mut m, Input::Session(SessionEvent::Connected));
    assert_eq!(s, vec![get(1)]);
}

#[test]
fn the_end_of_the_session_and_odd_answers() {
    let mut m = Config::new("/c");
    step(&mut m, Input::Command(ConfigCommand::Follow));
    let (_, o) = step(&mut m, Input::Reply(0, Err(ZkError::SessionExpired)));
    assert_eq!(
        o,
        vec![ConfigOutcome::Lost {
            reason: ZkError::SessionExpired
        }]
    );
    assert!(m.session_ended());
    assert_eq!(
        step(&mut m, Input::Command(ConfigCommand::Follow)).1,
        vec![ConfigOutcome::Refused]
    );
    let mut e = Config::new("/c");
    step(&mut e, Input::Command(ConfigCommand::Follow));
    assert_eq!(
        step(&mut e, Input::Session(SessionEvent::Expired)).1.len(),
        1,
        "Lost once"
    );
    let mut f = Config::new("/c");
    step(&mut f, Input::Command(ConfigCommand::Follow));
    assert_eq!(
        step(&mut f, Input::Reply(0, Err(ZkError::NoAuth))).1,
        vec![ConfigOutcome::Failed(ZkError::NoAuth)]
    );
}
