//! Scripted-event tests of the revoker machine.

use super::*;
use crate::step;
use zoosim_core::proto::Stat;

fn revoke() -> Input<RevokerCommand> {
    Input::Command(RevokerCommand::Revoke {
        node: "/l/n-0000000001".into(),
    })
}

#[test]
fn a_revoke_writes_unlock_and_reports_what_it_found() {
    let mut m = Revoker::new();
    let (s, _) = step(&mut m, revoke());
    assert_eq!(
        s,
        vec![(
            0,
            Op::SetData {
                path: "/l/n-0000000001".into(),
                data: REVOKE.to_vec(),
                version: -1
            }
        )]
    );
    assert_eq!(
        step(&mut m, revoke()).1,
        vec![RevokerOutcome::Refused],
        "one at a time"
    );
    let mut gone = m.clone();
    assert_eq!(
        step(&mut m, Input::Reply(0, Ok(Reply::SetData(Stat::default())))).1,
        vec![RevokerOutcome::Asked]
    );
    assert_eq!(
        step(&mut gone, Input::Reply(0, Err(ZkError::NoNode))).1,
        vec![RevokerOutcome::NotHeld]
    );
    // Free again.
    assert_eq!(step(&mut m, revoke()).0.len(), 1);
}

#[test]
fn a_lost_revoke_is_sent_again_and_a_lost_session_ends_it() {
    let mut m = Revoker::new();
    step(&mut m, revoke());
    let (s, _) = step(&mut m, Input::Reply(0, Err(ZkError::ConnectionLoss)));
    assert!(s.is_empty());
    let (s, _) = step(&mut m, Input::Session(SessionEvent::Connected));
    assert!(matches!(&s[0].1, Op::SetData { .. }));
    let mut expired = m.clone();
    assert_eq!(
        step(&mut m, Input::Reply(1, Err(ZkError::SessionExpired))).1,
        vec![RevokerOutcome::Lost {
            reason: ZkError::SessionExpired
        }]
    );
    assert_eq!(step(&mut m, revoke()).1, vec![RevokerOutcome::Refused]);
    assert_eq!(
        step(&mut expired, Input::Session(SessionEvent::Expired)).1,
        vec![RevokerOutcome::Lost {
            reason: ZkError::SessionExpired
        }]
    );
    let mut odd = Revoker::default();
    step(&mut odd, revoke());
    assert_eq!(
        step(&mut odd, Input::Reply(0, Err(ZkError::NoAuth))).1,
        vec![RevokerOutcome::Failed(ZkError::NoAuth)]
    );
}
