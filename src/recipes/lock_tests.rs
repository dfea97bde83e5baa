//! Scripted-event tests of the lock machine: every branch, fed by hand.

use super::*;
use crate::proto::{Stat, WatchEvent};

fn drain(m: &mut Lock) -> (Vec<(u64, Op)>, Vec<LockOutcome>) {
    let (mut sends, mut outcomes) = (Vec::new(), Vec::new());
    while let Some(o) = m.poll() {
        match o {
            Output::Send(id, op) => sends.push((id, op)),
            Output::Outcome(x) => outcomes.push(x),
        }
    }
    (sends, outcomes)
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

fn exists(there: bool) -> Result<Reply, ZkError> {
    Ok(Reply::Exists(there.then(Stat::default)))
}

fn deleted(path: &str) -> Input<LockCommand> {
    Input::Watch(WatchEvent {
        event_type: EventType::NodeDeleted,
        path: path.into(),
    })
}

fn only_send(m: &mut Lock) -> (u64, Op) {
    let (sends, _) = drain(m);
    assert_eq!(sends.len(), 1, "{sends:?}");
    sends.into_iter().next().unwrap()
}

/// A lock of guid "g" on /l whose create came back as `node`.
fn created_lock(variant: LockVariant, node: &str) -> Lock {
    let mut m = Lock::with_variant("/l", "g", variant);
    m.handle(Input::Command(LockCommand::Acquire));
    let (id, op) = only_send(&mut m);
    assert_eq!(
        op,
        Op::Create {
            path: "/l/g-lock-".into(),
            data: vec![],
            mode: CreateMode::EphemeralSequential
        }
    );
    m.handle(Input::Reply(id, created(node)));
    m
}

#[test]
fn the_lowest_node_holds_and_release_deletes_it() {
    let mut m = created_lock(LockVariant::Correct, "/l/g-lock-0000000004");
    let (id, op) = only_send(&mut m);
    assert_eq!(
        op,
        Op::GetChildren {
            path: "/l".into(),
            watch: false
        }
    );
    m.handle(Input::Reply(
        id,
        children(&["g-lock-0000000004", "other", "h-lock-0000000009"]),
    ));
    let (_, out) = drain(&mut m);
    assert_eq!(
        out,
        vec![LockOutcome::Acquired {
            node: "/l/g-lock-0000000004".into(),
            token: 4
        }]
    );
    assert!(m.is_holder());
    m.handle(Input::Command(LockCommand::Release));
    let (id, op) = only_send(&mut m);
    assert_eq!(
        op,
        Op::Delete {
            path: "/l/g-lock-0000000004".into(),
            version: -1
        }
    );
    assert!(!m.is_holder());
    m.handle(Input::Reply(id, Ok(Reply::Delete)));
    assert_eq!(drain(&mut m).1, vec![LockOutcome::Released]);
    assert!(m.is_idle() && m.node().is_none());
    // Again: a new node.
    m.handle(Input::Command(LockCommand::Acquire));
    assert!(matches!(only_send(&mut m).1, Op::Create { .. }));
}

#[test]
fn a_waiter_watches_the_next_lower_node_by_sequence_not_name() {
    let mut m = created_lock(LockVariant::Correct, "/l/g-lock-0000000007");
    let (id, _) = only_send(&mut m);
    // "z" sorts after "g" by name but is lower by sequence.
    m.handle(Input::Reply(
        id,
        children(&[
            "a-lock-0000000002",
            "g-lock-0000000007",
            "z-lock-0000000005",
        ]),
    ));
    let (id, op) = only_send(&mut m);
    assert_eq!(
        op,
        Op::Exists {
            path: "/l/z-lock-0000000005".into(),
            watch: true
        }
    );
    m.handle(Input::Reply(id, exists(true)));
    assert!(m.is_waiting() && drain(&mut m).0.is_empty());
    // An unrelated deletion is reported but does not wake the wait.
    m.handle(deleted("/l/a-lock-0000000002"));
    let (sends, out) = drain(&mut m);
    assert!(sends.is_empty());
    assert_eq!(
        out,
        vec![LockOutcome::Woken {
            path: "/l/a-lock-0000000002".into()
        }]
    );
    m.handle(deleted("/l/z-lock-0000000005"));
    let (id, op) = only_send(&mut m);
    assert!(matches!(op, Op::GetChildren { watch: false, .. }));
    m.handle(Input::Reply(id, children(&["g-lock-0000000007"])));
    assert!(matches!(
        drain(&mut m).1[0],
        LockOutcome::Acquired { token: 7, .. }
    ));
}

#[test]
fn a_predecessor_gone_before_exists_means_listing_again() {
    let mut m = created_lock(LockVariant::Correct, "/l/g-lock-0000000003");
    let (id, _) = only_send(&mut m);
    m.handle(Input::Reply(
        id,
        children(&["a-lock-0000000001", "g-lock-0000000003"]),
    ));
    let (id, _) = only_send(&mut m);
    m.handle(Input::Reply(id, exists(false)));
    assert!(matches!(only_send(&mut m).1, Op::GetChildren { .. }));
    // The buggy variant waits instead.
    let mut b = created_lock(
        LockVariant::StallOnVanishedPredecessor,
        "/l/g-lock-0000000003",
    );
    let (id, _) = only_send(&mut b);
    b.handle(Input::Reply(
        id,
        children(&["a-lock-0000000001", "g-lock-0000000003"]),
    ));
    let (id, _) = only_send(&mut b);
    b.handle(Input::Reply(id, exists(false)));
    assert!(drain(&mut b).0.is_empty() && b.is_waiting());
}

#[test]
fn a_missing_parent_is_created_first() {
    let mut m = Lock::new("/a/l", "g");
    m.handle(Input::Command(LockCommand::Acquire));
    let (id, _) = only_send(&mut m);
    m.handle(Input::Reply(id, Err(ZkError::NoNode)));
    let (sends, _) = drain(&mut m);
    let paths: Vec<(&str, CreateMode)> = sends
        .iter()
        .map(|(_, op)| match op {
            Op::Create { path, mode, .. } => (path.as_str(), *mode),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        paths,
        vec![
            ("/a", CreateMode::Persistent),
            ("/a/l", CreateMode::Persistent),
            ("/a/l/g-lock-", CreateMode::EphemeralSequential)
        ]
    );
    // The parents' answers are ignored; the node's goes on.
    m.handle(Input::Reply(sends[0].0, Err(ZkError::NodeExists)));
    m.handle(Input::Reply(sends[1].0, created("/a/l")));
    assert!(drain(&mut m).0.is_empty());
    m.handle(Input::Reply(sends[2].0, created("/a/l/g-lock-0000000000")));
    assert!(matches!(only_send(&mut m).1, Op::GetChildren { .. }));
}

/// A lock whose create met ConnectionLoss.
fn lost_create(variant: LockVariant) -> Lock {
    let mut m = Lock::with_variant("/l", "g", variant);
    m.handle(Input::Command(LockCommand::Acquire));
    let (id, _) = only_send(&mut m);
    m.handle(Input::Reply(id, Err(ZkError::ConnectionLoss)));
    assert!(
        drain(&mut m).0.is_empty(),
        "nothing sent before a reconnect"
    );
    m.handle(Input::Session(SessionEvent::Disconnected));
    m
}

#[test]
fn after_a_lost_create_the_guid_search_syncs_then_lists() {
    let mut m = lost_create(LockVariant::Correct);
    m.handle(Input::Session(SessionEvent::Connected));
    let (id, op) = only_send(&mut m);
    assert_eq!(op, Op::Sync { path: "/l".into() });
    m.handle(Input::Reply(id, Ok(Reply::Sync)));
    let (id, op) = only_send(&mut m);
    assert!(matches!(op, Op::GetChildren { watch: false, .. }));
    // Found: decides from that same list, no second list.
    let mut found = m.clone();
    found.handle(Input::Reply(
        id,
        children(&["g-lock-0000000002", "h-lock-0000000003"]),
    ));
    let (sends, out) = drain(&mut found);
    assert!(sends.is_empty());
    assert_eq!(
        out,
        vec![
            LockOutcome::Recovered { found: true },
            LockOutcome::Acquired {
                node: "/l/g-lock-0000000002".into(),
                token: 2
            }
        ]
    );
    // Not found: create again.
    m.handle(Input::Reply(id, children(&["h-lock-0000000003"])));
    let (sends, out) = drain(&mut m);
    assert_eq!(out, vec![LockOutcome::Recovered { found: false }]);
    assert!(matches!(&sends[0].1, Op::Create { path, .. } if path == "/l/g-lock-"));
}

#[test]
fn a_connection_loss_reported_after_the_reconnect_is_acted_on_at_once() {
    let mut m = Lock::new("/l", "g");
    m.handle(Input::Command(LockCommand::Acquire));
    let (id, _) = only_send(&mut m);
    m.handle(Input::Session(SessionEvent::Disconnected));
    m.handle(Input::Session(SessionEvent::Connected));
    m.handle(Input::Reply(id, Err(ZkError::ConnectionLoss)));
    assert_eq!(only_send(&mut m).1, Op::Sync { path: "/l".into() });
}

#[test]
fn the_search_copes_with_a_missing_dir_and_sync_errors() {
    let mut m = lost_create(LockVariant::Correct);
    m.handle(Input::Session(SessionEvent::Connected));
    let (id, _) = only_send(&mut m);
    m.handle(Input::Reply(id, Err(ZkError::NoNode)));
    let (id, op) = only_send(&mut m);
    assert!(matches!(op, Op::GetChildren { .. }));
    m.handle(Input::Reply(id, Err(ZkError::NoNode)));
    let (sends, out) = drain(&mut m);
    assert_eq!(out, vec![LockOutcome::Recovered { found: false }]);
    assert_eq!(sends.len(), 2, "parent, then the node: {sends:?}");
}

#[test]
fn blind_retry_creates_again_without_looking() {
    let mut m = lost_create(LockVariant::BlindRetry);
    m.handle(Input::Session(SessionEvent::Connected));
    assert!(matches!(only_send(&mut m).1, Op::Create { .. }));
}

#[test]
fn reads_and_deletes_are_sent_again_only_after_a_reconnect() {
    let mut m = created_lock(LockVariant::Correct, "/l/g-lock-0000000001");
    let (id, _) = only_send(&mut m);
    m.handle(Input::Reply(id, Err(ZkError::SessionMoved)));
    assert!(drain(&mut m).0.is_empty());
    m.handle(Input::Session(SessionEvent::Connected));
    let (id, op) = only_send(&mut m);
    assert!(matches!(op, Op::GetChildren { .. }));
    m.handle(Input::Reply(
        id,
        children(&["f-lock-0000000000", "g-lock-0000000001"]),
    ));
    let (id, _) = only_send(&mut m);
    m.handle(Input::Reply(id, Err(ZkError::ConnectionLoss)));
    m.handle(Input::Session(SessionEvent::Connected));
    assert!(matches!(
        only_send(&mut m).1,
        Op::Exists { watch: true, .. }
    ));
    // A release whose delete is lost: sent again, NoNode then = done.
    let mut h = created_lock(LockVariant::Correct, "/l/g-lock-0000000001");
    let (id, _) = only_send(&mut h);
    h.handle(Input::Reply(id, children(&["g-lock-0000000001"])));
    drain(&mut h);
    h.handle(Input::Command(LockCommand::Release));
    let (id, _) = only_send(&mut h);
    h.handle(Input::Reply(id, Err(ZkError::ConnectionLoss)));
    h.handle(Input::Session(SessionEvent::Connected));
    let (id, op) = only_send(&mut h);
    assert!(matches!(op, Op::Delete { .. }));
    h.handle(Input::Reply(id, Err(ZkError::NoNode)));
    assert_eq!(drain(&mut h).1, vec![LockOutcome::Released]);
}

#[test]
fn a_holder_suspends_while_disconnected_and_resumes() {
    let mut m = created_lock(LockVariant::Correct, "/l/g-lock-0000000001");
    let (id, _) = only_send(&mut m);
    m.handle(Input::Session(SessionEvent::Disconnected));
    // Decided while disconnected: acquired, and suspended at once.
    m.handle(Input::Reply(id, children(&["g-lock-0000000001"])));
    let (_, out) = drain(&mut m);
    assert_eq!(out.len(), 2);
    assert_eq!(out[1], LockOutcome::Suspended);
    assert!(!m.is_holder());
    m.handle(Input::Session(SessionEvent::Connected));
    assert_eq!(drain(&mut m).1, vec![LockOutcome::Resumed]);
    assert!(m.is_holder());
    m.handle(Input::Session(SessionEvent::Disconnected));
    assert_eq!(drain(&mut m).1, vec![LockOutcome::Suspended]);
    // A waiter does not report anything on a disconnect.
    let mut w = created_lock(LockVariant::Correct, "/l/g-lock-0000000002");
    let (id, _) = only_send(&mut w);
    w.handle(Input::Reply(
        id,
        children(&["f-lock-0000000001", "g-lock-0000000002"]),
    ));
    drain(&mut w);
    w.handle(Input::Session(SessionEvent::Disconnected));
    assert!(drain(&mut w).1.is_empty());
}

#[test]
fn the_end_of_the_session_loses_everything() {
    for end in [
        Input::Session(SessionEvent::Expired),
        Input::Session(SessionEvent::Closed),
    ] {
        let mut m = created_lock(LockVariant::Correct, "/l/g-lock-0000000001");
        let (id, _) = only_send(&mut m);
        m.handle(Input::Reply(id, children(&["g-lock-0000000001"])));
        drain(&mut m);
        m.handle(end);
        assert_eq!(
            drain(&mut m).1,
            vec![LockOutcome::Lost {
                reason: ZkError::SessionExpired
            }]
        );
        assert!(m.is_over() && m.session_ended() && !m.is_holder());
        m.handle(Input::Command(LockCommand::Acquire));
        let (sends, out) = drain(&mut m);
        assert!(sends.is_empty());
        assert_eq!(
            out,
            vec![LockOutcome::Refused {
                command: LockCommand::Acquire
            }]
        );
    }
    // A SessionExpired reply, even to a request the machine moved on from.
    let mut m = Lock::new("/a/l", "g");
    m.handle(Input::Command(LockCommand::Acquire));
    let (id, _) = only_send(&mut m);
    m.handle(Input::Reply(id, Err(ZkError::NoNode)));
    let (sends, _) = drain(&mut m);
    m.handle(Input::Reply(sends[0].0, Err(ZkError::SessionExpired)));
    assert!(m.is_over() && m.session_ended());
}

#[test]
fn a_vanished_own_node_or_dir_is_a_loss() {
    let mut m = created_lock(LockVariant::Correct, "/l/g-lock-0000000001");
    let (id, _) = only_send(&mut m);
    m.handle(Input::Reply(id, children(&["h-lock-0000000002"])));
    assert_eq!(
        drain(&mut m).1,
        vec![LockOutcome::Lost {
            reason: ZkError::NoNode
        }]
    );
    assert!(!m.session_ended(), "the session itself may be fine");
    let mut d = created_lock(LockVariant::Correct, "/l/g-lock-0000000001");
    let (id, _) = only_send(&mut d);
    d.handle(Input::Reply(id, Err(ZkError::NoNode)));
    assert!(d.is_over());
}

#[test]
fn release_while_waiting_or_while_the_create_is_unknown() {
    // Waiting: the node is deleted; the stale exists reply is ignored.
    let mut m = created_lock(LockVariant::Correct, "/l/g-lock-0000000002");
    let (id, _) = only_send(&mut m);
    m.handle(Input::Reply(
        id,
        children(&["f-lock-0000000001", "g-lock-0000000002"]),
    ));
    let (exists_id, _) = only_send(&mut m);
    m.handle(Input::Command(LockCommand::Release));
    let (id, op) = only_send(&mut m);
    assert!(matches!(op, Op::Delete { .. }));
    m.handle(Input::Reply(exists_id, exists(true)));
    m.handle(Input::Reply(id, Ok(Reply::Delete)));
    assert_eq!(drain(&mut m).1, vec![LockOutcome::Released]);
    // Unknown create: the node is deleted as soon as the search finds it.
    let mut u = lost_create(LockVariant::Correct);
    u.handle(Input::Command(LockCommand::Release));
    u.handle(Input::Session(SessionEvent::Connected));
    let (id, _) = only_send(&mut u);
    u.handle(Input::Reply(id, Ok(Reply::Sync)));
    let (id, _) = only_send(&mut u);
    let mut found = u.clone();
    found.handle(Input::Reply(id, children(&["g-lock-0000000005"])));
    let (sends, _) = drain(&mut found);
    assert!(matches!(&sends[0].1, Op::Delete { path, .. } if path == "/l/g-lock-0000000005"));
    u.handle(Input::Reply(id, children(&[])));
    let (sends, out) = drain(&mut u);
    assert!(sends.is_empty());
    assert_eq!(
        out,
        vec![
            LockOutcome::Recovered { found: false },
            LockOutcome::Released
        ]
    );
    // Release while the create is in flight: deleted once it is back.
    let mut c = Lock::new("/l", "g");
    c.handle(Input::Command(LockCommand::Acquire));
    let (id, _) = only_send(&mut c);
    c.handle(Input::Command(LockCommand::Release));
    c.handle(Input::Reply(id, created("/l/g-lock-0000000009")));
    assert!(matches!(only_send(&mut c).1, Op::Delete { .. }));
}

#[test]
fn commands_out_of_place_are_refused_and_odd_answers_fail() {
    let mut m = created_lock(LockVariant::Correct, "/l/g-lock-0000000001");
    m.handle(Input::Command(LockCommand::Acquire));
    let (_, out) = drain(&mut m);
    assert_eq!(
        out,
        vec![LockOutcome::Refused {
            command: LockCommand::Acquire
        }]
    );
    let mut idle = Lock::new("/l", "g");
    idle.handle(Input::Command(LockCommand::Release));
    assert!(matches!(drain(&mut idle).1[0], LockOutcome::Refused { .. }));
    let mut f = created_lock(LockVariant::Correct, "/l/g-lock-0000000001");
    let (id, _) = only_send(&mut f);
    f.handle(Input::Reply(id, Err(ZkError::NoAuth)));
    assert_eq!(drain(&mut f).1, vec![LockOutcome::Failed(ZkError::NoAuth)]);
    assert!(f.is_over());
}

#[test]
fn the_buggy_orders_and_watches() {
    // Herd: everyone watches the lowest.
    let mut h = created_lock(LockVariant::Herd, "/l/g-lock-0000000009");
    let (id, _) = only_send(&mut h);
    h.handle(Input::Reply(
        id,
        children(&[
            "a-lock-0000000001",
            "b-lock-0000000005",
            "g-lock-0000000009",
        ]),
    ));
    assert!(
        matches!(only_send(&mut h).1, Op::Exists { path, .. } if path == "/l/a-lock-0000000001")
    );
    // Sort by full name: a lower guid with a higher sequence goes first.
    let mut s = created_lock(LockVariant::SortByFullName, "/l/a-lock-0000000009");
    let (id, _) = only_send(&mut s);
    s.handle(Input::Reply(
        id,
        children(&["a-lock-0000000009", "b-lock-0000000001"]),
    ));
    assert!(matches!(
        drain(&mut s).1[0],
        LockOutcome::Acquired { token: 9, .. }
    ));
    // Names and their round trip.
    for v in LockVariant::ALL {
        assert_eq!(LockVariant::from_name(v.name()), Some(v));
    }
    assert_eq!(LockVariant::from_name("lock/nope"), None);
}

#[test]
fn readers_wait_on_writers_only() {
    let mut r = Lock::read("/rw", "g");
    r.handle(Input::Command(LockCommand::Acquire));
    let (id, op) = only_send(&mut r);
    assert!(matches!(op, Op::Create { path, .. } if path == "/rw/g-read-"));
    r.handle(Input::Reply(id, created("/rw/g-read-0000000005")));
    let mut r2 = r.clone();
    let (id, _) = only_send(&mut r);
    // Only readers below: held.
    r.handle(Input::Reply(
        id,
        children(&["a-read-0000000001", "g-read-0000000005"]),
    ));
    assert!(matches!(
        drain(&mut r).1[0],
        LockOutcome::Acquired { token: 5, .. }
    ));
    // A writer below: wait on it, not on the reader between.
    let (id, _) = only_send(&mut r2);
    r2.handle(Input::Reply(
        id,
        children(&[
            "w-write-0000000002",
            "a-read-0000000003",
            "g-read-0000000005",
        ]),
    ));
    assert!(
        matches!(only_send(&mut r2).1, Op::Exists { path, .. } if path == "/rw/w-write-0000000002")
    );
    // A writer waits on the next lower node of either kind.
    let mut w = Lock::write("/rw", "g");
    w.handle(Input::Command(LockCommand::Acquire));
    let (id, _) = only_send(&mut w);
    w.handle(Input::Reply(id, created("/rw/g-write-0000000005")));
    let (id, _) = only_send(&mut w);
    w.handle(Input::Reply(
        id,
        children(&[
            "w-write-0000000002",
            "a-read-0000000003",
            "g-write-0000000005",
        ]),
    ));
    assert!(
        matches!(only_send(&mut w).1, Op::Exists { path, .. } if path == "/rw/a-read-0000000003")
    );
    // The buggy reader waits on the reader.
    let mut b = Lock::shared("/rw", "g", LockMode::Read, LockVariant::ReaderWaitsOnAny);
    b.handle(Input::Command(LockCommand::Acquire));
    let (id, _) = only_send(&mut b);
    b.handle(Input::Reply(id, created("/rw/g-read-0000000005")));
    let (id, _) = only_send(&mut b);
    b.handle(Input::Reply(
        id,
        children(&[
            "w-write-0000000002",
            "a-read-0000000003",
            "g-read-0000000005",
        ]),
    ));
    assert!(
        matches!(only_send(&mut b).1, Op::Exists { path, .. } if path == "/rw/a-read-0000000003")
    );
}

#[test]
fn election_confirms_its_node_before_leading() {
    let mut e = Lock::for_election("/e", "g", false);
    e.handle(Input::Command(LockCommand::Acquire));
    let (id, op) = only_send(&mut e);
    assert!(matches!(op, Op::Create { path, .. } if path == "/e/g-n_"));
    e.handle(Input::Reply(id, created("/e/g-n_0000000003")));
    let (id, _) = only_send(&mut e);
    e.handle(Input::Reply(id, children(&["g-n_0000000003"])));
    let (id, op) = only_send(&mut e);
    assert_eq!(op, Op::Sync { path: "/e".into() });
    e.handle(Input::Reply(id, Ok(Reply::Sync)));
    let (id, op) = only_send(&mut e);
    assert_eq!(
        op,
        Op::Exists {
            path: "/e/g-n_0000000003".into(),
            watch: false
        }
    );
    let mut gone = e.clone();
    e.handle(Input::Reply(id, exists(true)));
    assert!(matches!(
        drain(&mut e).1[0],
        LockOutcome::Acquired { token: 3, .. }
    ));
    // The node is gone after the sync: a stale list had shown it.
    gone.handle(Input::Reply(id, exists(false)));
    assert_eq!(
        drain(&mut gone).1,
        vec![LockOutcome::Lost {
            reason: ZkError::NoNode
        }]
    );
    // The buggy election ignores an expiry while leading, until it resigns.
    let mut k = Lock::for_election("/e", "g", true);
    k.handle(Input::Command(LockCommand::Acquire));
    let (id, _) = only_send(&mut k);
    k.handle(Input::Reply(id, created("/e/g-n_0000000001")));
    let (id, _) = only_send(&mut k);
    k.handle(Input::Reply(id, children(&["g-n_0000000001"])));
    let (id, _) = only_send(&mut k);
    k.handle(Input::Reply(id, Ok(Reply::Sync)));
    let (id, _) = only_send(&mut k);
    k.handle(Input::Reply(id, exists(true)));
    drain(&mut k);
    k.handle(Input::Session(SessionEvent::Expired));
    assert!(drain(&mut k).1.is_empty() && k.is_holder() && k.session_ended());
    k.handle(Input::Command(LockCommand::Release));
    let (sends, out) = drain(&mut k);
    assert!(sends.is_empty());
    assert!(matches!(out[0], LockOutcome::Lost { .. }));
}

#[test]
fn machines_fed_alike_are_equal() {
    let a = created_lock(LockVariant::Correct, "/l/g-lock-0000000001");
    let b = created_lock(LockVariant::Correct, "/l/g-lock-0000000001");
    assert_eq!(a, b);
    use std::hash::{Hash, Hasher};
    let h = |m: &Lock| {
        let mut s = std::collections::hash_map::DefaultHasher::new();
        m.hash(&mut s);
        s.finish()
    };
    assert_eq!(h(&a), h(&b));
}
