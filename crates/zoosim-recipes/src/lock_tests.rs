//! Scripted-event tests of the lock machine alone: no client, no runtime.
//! Each test feeds inputs by hand and checks the exact requests sent (ids
//! included where they matter) and the exact outcomes reported.

use super::*;
use crate::OpId;
use zoosim_core::proto::{Stat, WatchEvent};

type Step = (Vec<(OpId, Op)>, Vec<LockOutcome>);

// ---------------------------------------------------------------------------
// Driving the machine.

/// Everything the machine has queued: (requests, outcomes), each in order.
fn drain(m: &mut Lock) -> Step {
    let (mut sends, mut outcomes) = (Vec::new(), Vec::new());
    while let Some(o) = m.poll() {
        match o {
            Output::Send(id, op) => sends.push((id, op)),
            Output::Outcome(x) => outcomes.push(x),
        }
    }
    (sends, outcomes)
}

fn feed(m: &mut Lock, input: Input<LockCommand>) -> Step {
    m.handle(input);
    drain(m)
}

fn command(m: &mut Lock, c: LockCommand) -> Step {
    feed(m, Input::Command(c))
}

fn reply(m: &mut Lock, id: OpId, r: Result<Reply, ZkError>) -> Step {
    feed(m, Input::Reply(id, r))
}

fn session(m: &mut Lock, e: SessionEvent) -> Step {
    feed(m, Input::Session(e))
}

fn watch(m: &mut Lock, event_type: EventType, path: &str) -> Step {
    feed(
        m,
        Input::Watch(WatchEvent {
            event_type,
            path: path.into(),
        }),
    )
}

fn node_deleted(m: &mut Lock, path: &str) -> Step {
    watch(m, EventType::NodeDeleted, path)
}

/// The step sent exactly one request and reported nothing: that request.
fn one_send((sends, outcomes): Step) -> (OpId, Op) {
    assert!(outcomes.is_empty(), "unexpected outcomes {outcomes:?}");
    assert_eq!(sends.len(), 1, "expected one request, got {sends:?}");
    sends.into_iter().next().unwrap()
}

/// The step did nothing visible.
fn nothing(step: Step) {
    assert_eq!(step, (vec![], vec![]), "expected no output");
}

fn ops(sends: &[(OpId, Op)]) -> Vec<Op> {
    sends.iter().map(|(_, op)| op.clone()).collect()
}

// ---------------------------------------------------------------------------
// Replies.

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

fn synced() -> Result<Reply, ZkError> {
    Ok(Reply::Sync)
}

fn deleted() -> Result<Reply, ZkError> {
    Ok(Reply::Delete)
}

// ---------------------------------------------------------------------------
// Requests.

fn create_node(path: &str) -> Op {
    Op::Create {
        path: path.into(),
        data: vec![],
        mode: CreateMode::EphemeralSequential,
    }
}

fn create_dir(path: &str) -> Op {
    Op::Create {
        path: path.into(),
        data: vec![],
        mode: CreateMode::Persistent,
    }
}

fn list(dir: &str) -> Op {
    Op::GetChildren {
        path: dir.into(),
        watch: false,
    }
}

fn exists_watch(path: &str) -> Op {
    Op::Exists {
        path: path.into(),
        watch: true,
    }
}

fn delete(path: &str) -> Op {
    Op::Delete {
        path: path.into(),
        version: -1,
    }
}

fn sync(path: &str) -> Op {
    Op::Sync { path: path.into() }
}

// ---------------------------------------------------------------------------
// Outcomes.

fn acquired(node: &str, token: u64) -> LockOutcome {
    LockOutcome::Acquired {
        node: node.into(),
        token,
    }
}

fn woken(path: &str) -> LockOutcome {
    LockOutcome::Woken { path: path.into() }
}

fn lost(reason: ZkError) -> LockOutcome {
    LockOutcome::Lost { reason }
}

fn refused(command: LockCommand) -> LockOutcome {
    LockOutcome::Refused { command }
}

fn recovered(found: bool) -> LockOutcome {
    LockOutcome::Recovered { found }
}

// ---------------------------------------------------------------------------
// Scenarios: guid "g" on "/l" unless said otherwise.

const DIR: &str = "/l";
const PREFIX: &str = "/l/g-lock-";
/// Our node in most scenarios, sequence 5, and the one just below it.
const OURS: &str = "/l/g-lock-0000000005";
const OURS_NAME: &str = "g-lock-0000000005";
const PRED: &str = "/l/f-lock-0000000003";
const PRED_NAME: &str = "f-lock-0000000003";

/// Acquire sent: the machine and its create's id.
fn start(variant: LockVariant) -> (Lock, OpId) {
    let mut m = Lock::with_variant(DIR, "g", variant);
    let (id, op) = one_send(command(&mut m, LockCommand::Acquire));
    assert_eq!((id, op), (0, create_node(PREFIX)));
    assert!(m.is_waiting());
    (m, id)
}

/// The create came back as `node`: the machine and its list's id.
fn listing(variant: LockVariant, node: &str) -> (Lock, OpId) {
    let (mut m, id) = start(variant);
    let (id, op) = one_send(reply(&mut m, id, created(node)));
    assert_eq!((id, op), (1, list(DIR)));
    assert_eq!(m.node(), Some(node));
    (m, id)
}

/// Holding OURS (token 5).
fn held() -> Lock {
    let (mut m, id) = listing(LockVariant::Correct, OURS);
    let step = reply(&mut m, id, children(&[OURS_NAME]));
    assert_eq!(step, (vec![], vec![acquired(OURS, 5)]));
    assert!(m.is_holder());
    m
}

/// Where the machine is, for the tests that run over several places.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum At {
    /// The create is in flight.
    Creating,
    /// The create met ConnectionLoss; not yet reconnected.
    CreateLost,
    Syncing,
    Searching,
    Listing,
    /// exists(PRED) in flight.
    Checking,
    /// Watching PRED.
    Waiting,
    Held,
    Releasing,
}

const EVERYWHERE: [At; 9] = [
    At::Creating,
    At::CreateLost,
    At::Syncing,
    At::Searching,
    At::Listing,
    At::Checking,
    At::Waiting,
    At::Held,
    At::Releasing,
];

/// The machine at `at`, and the id of the request it waits for (if any).
fn reach(at: At) -> (Lock, Option<OpId>) {
    match at {
        At::Creating => {
            let (m, id) = start(LockVariant::Correct);
            (m, Some(id))
        }
        At::CreateLost => {
            let (mut m, id) = start(LockVariant::Correct);
            nothing(reply(&mut m, id, Err(ZkError::ConnectionLoss)));
            nothing(session(&mut m, SessionEvent::Disconnected));
            (m, None)
        }
        At::Syncing => {
            let (mut m, _) = reach(At::CreateLost);
            let (id, op) = one_send(session(&mut m, SessionEvent::Connected));
            assert_eq!((id, op), (1, sync(DIR)));
            (m, Some(id))
        }
        At::Searching => {
            let (mut m, id) = reach(At::Syncing);
            let (id, op) = one_send(reply(&mut m, id.unwrap(), synced()));
            assert_eq!((id, op), (2, list(DIR)));
            (m, Some(id))
        }
        At::Listing => {
            let (m, id) = listing(LockVariant::Correct, OURS);
            (m, Some(id))
        }
        At::Checking => {
            let (mut m, id) = listing(LockVariant::Correct, OURS);
            let (id, op) = one_send(reply(&mut m, id, children(&[OURS_NAME, PRED_NAME])));
            assert_eq!((id, op), (2, exists_watch(PRED)));
            (m, Some(id))
        }
        At::Waiting => {
            let (mut m, id) = reach(At::Checking);
            nothing(reply(&mut m, id.unwrap(), exists(true)));
            (m, None)
        }
        At::Held => (held(), None),
        At::Releasing => {
            let mut m = held();
            let (id, op) = one_send(command(&mut m, LockCommand::Release));
            assert_eq!((id, op), (2, delete(OURS)));
            (m, Some(id))
        }
    }
}

/// A command that must be refused and change nothing.
fn assert_refused(m: &mut Lock, c: LockCommand) {
    let before = m.clone();
    assert_eq!(command(m, c), (vec![], vec![refused(c)]));
    assert_eq!(*m, before, "a refused command changed the machine");
}

// ---------------------------------------------------------------------------
// Construction.

#[test]
fn a_new_lock_is_idle_and_quiet() {
    let mut m = Lock::new(DIR, "g");
    assert!(m.is_idle());
    assert!(!m.is_waiting());
    assert!(!m.is_holder());
    assert!(!m.is_over());
    assert!(!m.session_ended());
    assert_eq!(m.node(), None);
    assert_eq!(m.variant(), LockVariant::Correct);
    assert_eq!(m.mode(), LockMode::Exclusive);
    assert!(!m.mode().is_shared());
    assert_eq!(m.poll(), None);
    assert_eq!(LockVariant::default(), LockVariant::Correct);
    assert_eq!(
        Lock::with_variant(DIR, "g", LockVariant::Herd).variant(),
        LockVariant::Herd
    );
}

#[test]
#[should_panic(expected = "a guid is one non-empty path component")]
fn an_empty_guid_is_rejected() {
    Lock::new(DIR, "");
}

#[test]
#[should_panic(expected = "a guid is one non-empty path component")]
fn a_guid_with_a_slash_is_rejected() {
    Lock::new(DIR, "a/b");
}

// ---------------------------------------------------------------------------
// The happy path.

#[test]
fn acquire_hold_release_and_acquire_again() {
    let mut m = Lock::new(DIR, "g");
    let (id, op) = one_send(command(&mut m, LockCommand::Acquire));
    assert_eq!((id, op), (0, create_node("/l/g-lock-")));
    assert!(m.is_waiting());
    assert!(!m.is_idle());
    assert!(m.node().is_none());

    let (id, op) = one_send(reply(&mut m, 0, created("/l/g-lock-0000000004")));
    assert_eq!((id, op), (1, list("/l")));
    assert_eq!(m.node(), Some("/l/g-lock-0000000004"));
    assert!(m.is_waiting());
    assert!(!m.is_holder());

    let step = reply(
        &mut m,
        1,
        children(&["h-lock-0000000009", "g-lock-0000000004"]),
    );
    assert_eq!(step, (vec![], vec![acquired("/l/g-lock-0000000004", 4)]));
    assert!(m.is_holder());
    assert!(!m.is_waiting());
    assert!(!m.is_idle());

    let (id, op) = one_send(command(&mut m, LockCommand::Release));
    assert_eq!((id, op), (2, delete("/l/g-lock-0000000004")));
    assert!(!m.is_holder());
    assert!(!m.is_waiting());
    assert!(!m.is_idle());

    assert_eq!(
        reply(&mut m, 2, deleted()),
        (vec![], vec![LockOutcome::Released])
    );
    assert!(m.is_idle());
    assert!(m.node().is_none());
    assert!(!m.is_over());

    // Again, with a new node and a new token.
    let (id, op) = one_send(command(&mut m, LockCommand::Acquire));
    assert_eq!((id, op), (3, create_node("/l/g-lock-")));
    let (id, op) = one_send(reply(&mut m, 3, created("/l/g-lock-0000000010")));
    assert_eq!((id, op), (4, list("/l")));
    let step = reply(&mut m, 4, children(&["g-lock-0000000010"]));
    assert_eq!(step, (vec![], vec![acquired("/l/g-lock-0000000010", 10)]));
}

#[test]
fn a_lock_directly_under_the_root() {
    let mut m = Lock::new("/", "g");
    let (id, op) = one_send(command(&mut m, LockCommand::Acquire));
    assert_eq!(op, create_node("/g-lock-"));
    let (id, op) = one_send(reply(&mut m, id, created("/g-lock-0000000001")));
    assert_eq!(op, list("/"));
    let (id, op) = one_send(reply(
        &mut m,
        id,
        children(&["zookeeper", "a-lock-0000000000", "g-lock-0000000001"]),
    ));
    assert_eq!(op, exists_watch("/a-lock-0000000000"));
    nothing(reply(&mut m, id, exists(true)));
    let step = node_deleted(&mut m, "/a-lock-0000000000");
    assert_eq!(
        step,
        (vec![(3, list("/"))], vec![woken("/a-lock-0000000000")])
    );
}

// ---------------------------------------------------------------------------
// Waiting.

#[test]
fn a_waiter_watches_the_next_lower_node_by_sequence_not_by_name() {
    let (mut m, id) = listing(LockVariant::Correct, "/l/g-lock-0000000007");
    // "z" sorts after "g" by name but is lower by sequence; "h" is higher
    // by sequence though it sorts between them.
    let (id, op) = one_send(reply(
        &mut m,
        id,
        children(&[
            "h-lock-0000000008",
            "z-lock-0000000005",
            "g-lock-0000000007",
            "a-lock-0000000002",
        ]),
    ));
    assert_eq!(op, exists_watch("/l/z-lock-0000000005"));
    nothing(reply(&mut m, id, exists(true)));
    assert!(m.is_waiting());
    assert!(!m.is_holder());

    // The deletion of another node is reported but does not wake the wait.
    let step = node_deleted(&mut m, "/l/a-lock-0000000002");
    assert_eq!(step, (vec![], vec![woken("/l/a-lock-0000000002")]));
    assert!(m.is_waiting());

    // The predecessor's does: list again (no watch).
    let step = node_deleted(&mut m, "/l/z-lock-0000000005");
    assert_eq!(
        step,
        (vec![(3, list(DIR))], vec![woken("/l/z-lock-0000000005")])
    );
    let step = reply(
        &mut m,
        3,
        children(&["g-lock-0000000007", "h-lock-0000000008"]),
    );
    assert_eq!(step, (vec![], vec![acquired("/l/g-lock-0000000007", 7)]));
}

#[test]
fn children_that_are_not_lock_nodes_are_ignored() {
    let (mut m, id) = listing(LockVariant::Correct, OURS);
    let step = reply(
        &mut m,
        id,
        children(&[
            "config",
            "x-0000000001",      // no marker
            "f-read-0000000002", // a shared lock's node
            "e-lock-",           // no sequence number
            "d-lock-00000000ab", // not a sequence number
            "c-lock-000000001",  // nine digits
            OURS_NAME,
        ]),
    );
    assert_eq!(step, (vec![], vec![acquired(OURS, 5)]));
}

#[test]
fn any_event_on_the_predecessor_lists_again_but_only_a_deletion_counts_as_woken() {
    // The exist watch is spent by any event: a revoker's setData on the
    // predecessor fires NodeDataChanged, and waiting on for a NodeDeleted
    // would wait for ever (found by the revocable-lock sweep).
    for t in [
        EventType::NodeCreated,
        EventType::NodeDataChanged,
        EventType::NodeChildrenChanged,
    ] {
        let (mut m, _) = reach(At::Waiting);
        let (sends, outcomes) = watch(&mut m, t, PRED);
        assert!(outcomes.is_empty(), "{t:?}: {outcomes:?}");
        assert_eq!(sends.len(), 1, "{t:?}");
        assert_eq!(sends[0].1, list(DIR));
    }
}

#[test]
fn the_predecessors_deletion_before_the_exists_reply_does_not_list() {
    // Waking is done from Waiting only; in Checking the exists reply decides.
    let (mut m, id) = reach(At::Checking);
    assert_eq!(node_deleted(&mut m, PRED), (vec![], vec![woken(PRED)]));
    let (_, op) = one_send(reply(&mut m, id.unwrap(), exists(false)));
    assert_eq!(op, list(DIR));
}

#[test]
fn a_predecessor_gone_before_exists_means_listing_again() {
    let (mut m, id) = reach(At::Checking);
    let (id, op) = one_send(reply(&mut m, id.unwrap(), exists(false)));
    assert_eq!((id, op), (3, list(DIR)));
    // The new list shows another node below: watch that one.
    let (id, op) = one_send(reply(
        &mut m,
        id,
        children(&["a-lock-0000000001", OURS_NAME]),
    ));
    assert_eq!((id, op), (4, exists_watch("/l/a-lock-0000000001")));
    nothing(reply(&mut m, id, exists(true)));
    assert!(m.is_waiting());
}

#[test]
fn a_watch_event_while_idle_is_only_reported() {
    let mut m = Lock::new(DIR, "g");
    assert_eq!(node_deleted(&mut m, PRED), (vec![], vec![woken(PRED)]));
    assert!(m.is_idle());
}

// ---------------------------------------------------------------------------
// A missing dir.

#[test]
fn a_missing_dir_is_created_with_its_ancestors_then_the_node() {
    let mut m = Lock::new("/a/b/l", "g");
    let (id, _) = one_send(command(&mut m, LockCommand::Acquire));
    let (sends, outcomes) = reply(&mut m, id, Err(ZkError::NoNode));
    assert!(outcomes.is_empty());
    assert_eq!(
        sends,
        vec![
            (1, create_dir("/a")),
            (2, create_dir("/a/b")),
            (3, create_dir("/a/b/l")),
            (4, create_node("/a/b/l/g-lock-")),
        ]
    );
    assert!(m.is_waiting());
    // The parents' answers are ignored, whatever they are.
    nothing(reply(&mut m, 1, Err(ZkError::NodeExists)));
    nothing(reply(&mut m, 2, created("/a/b")));
    nothing(reply(&mut m, 3, Err(ZkError::ConnectionLoss)));
    nothing(reply(&mut m, 3, Err(ZkError::NoAuth)));
    assert!(m.is_waiting());
    assert!(!m.is_over());
    let (id, op) = one_send(reply(&mut m, 4, created("/a/b/l/g-lock-0000000000")));
    assert_eq!((id, op), (5, list("/a/b/l")));
    let step = reply(&mut m, 5, children(&["g-lock-0000000000"]));
    assert_eq!(
        step,
        (vec![], vec![acquired("/a/b/l/g-lock-0000000000", 0)])
    );
}

#[test]
fn a_missing_top_level_dir_is_created_then_the_node() {
    let (mut m, id) = start(LockVariant::Correct);
    let (sends, outcomes) = reply(&mut m, id, Err(ZkError::NoNode));
    assert!(outcomes.is_empty());
    assert_eq!(sends, vec![(1, create_dir("/l")), (2, create_node(PREFIX))]);
    // A second NoNode (the dir deleted again meanwhile): the same again.
    let (sends, _) = reply(&mut m, 2, Err(ZkError::NoNode));
    assert_eq!(ops(&sends), vec![create_dir("/l"), create_node(PREFIX)]);
}

// ---------------------------------------------------------------------------
// ConnectionLoss on the create: the guid search.

#[test]
fn a_lost_create_waits_for_the_reconnect_then_syncs_and_searches() {
    let (mut m, id) = start(LockVariant::Correct);
    nothing(reply(&mut m, id, Err(ZkError::ConnectionLoss)));
    nothing(session(&mut m, SessionEvent::Disconnected));
    assert!(m.is_waiting());
    let (id, op) = one_send(session(&mut m, SessionEvent::Connected));
    assert_eq!((id, op), (1, sync(DIR)));
    let (id, op) = one_send(reply(&mut m, id, synced()));
    assert_eq!((id, op), (2, list(DIR)));
}

#[test]
fn the_search_finds_the_lowest_node_and_decides_from_that_same_list() {
    let (mut m, id) = reach(At::Searching);
    let step = reply(
        &mut m,
        id.unwrap(),
        children(&["h-lock-0000000003", OURS_NAME]),
    );
    // Decided from the search's list, no second list: h (3) is below us.
    assert_eq!(
        step,
        (
            vec![(3, exists_watch("/l/h-lock-0000000003"))],
            vec![recovered(true)]
        )
    );
    assert_eq!(m.node(), Some(OURS));

    let (mut m, id) = reach(At::Searching);
    let step = reply(
        &mut m,
        id.unwrap(),
        children(&["h-lock-0000000009", "g-lock-0000000002"]),
    );
    assert_eq!(
        step,
        (
            vec![],
            vec![recovered(true), acquired("/l/g-lock-0000000002", 2)]
        )
    );
    assert!(m.is_holder());
}

#[test]
fn the_search_recognises_only_its_own_guid() {
    let (mut m, id) = reach(At::Searching);
    let step = reply(
        &mut m,
        id.unwrap(),
        children(&[
            "gg-lock-0000000001",
            "xg-lock-0000000002",
            "g-read-0000000003",
        ]),
    );
    assert_eq!(
        step,
        (vec![(3, create_node(PREFIX))], vec![recovered(false)])
    );
}

#[test]
fn not_found_creates_again_without_parents() {
    let (mut m, id) = reach(At::Searching);
    let step = reply(&mut m, id.unwrap(), children(&["h-lock-0000000003"]));
    assert_eq!(
        step,
        (vec![(3, create_node(PREFIX))], vec![recovered(false)])
    );
    assert_eq!(m.node(), None);
    let (id, op) = one_send(reply(&mut m, 3, created(OURS)));
    assert_eq!((id, op), (4, list(DIR)));
}

#[test]
fn a_search_of_a_missing_dir_creates_it_and_the_node() {
    let (mut m, id) = reach(At::Searching);
    let step = reply(&mut m, id.unwrap(), Err(ZkError::NoNode));
    assert_eq!(
        step,
        (
            vec![(3, create_dir(DIR)), (4, create_node(PREFIX))],
            vec![recovered(false)]
        )
    );
}

#[test]
fn a_sync_of_a_missing_dir_still_searches() {
    let (mut m, id) = reach(At::Syncing);
    let (id, op) = one_send(reply(&mut m, id.unwrap(), Err(ZkError::NoNode)));
    assert_eq!((id, op), (2, list(DIR)));
}

#[test]
fn a_connection_loss_reported_after_the_reconnect_is_acted_on_at_once() {
    let (mut m, id) = start(LockVariant::Correct);
    nothing(session(&mut m, SessionEvent::Disconnected));
    nothing(session(&mut m, SessionEvent::Connected));
    let (id, op) = one_send(reply(&mut m, id, Err(ZkError::ConnectionLoss)));
    assert_eq!((id, op), (1, sync(DIR)));
    // Also when the connection broke again since: the sync then meets its
    // own ConnectionLoss and waits for the next reconnect.
    let (mut m, id) = start(LockVariant::Correct);
    nothing(session(&mut m, SessionEvent::Disconnected));
    nothing(session(&mut m, SessionEvent::Connected));
    nothing(session(&mut m, SessionEvent::Disconnected));
    let (id, op) = one_send(reply(&mut m, id, Err(ZkError::ConnectionLoss)));
    assert_eq!(op, sync(DIR));
    nothing(reply(&mut m, id, Err(ZkError::ConnectionLoss)));
    assert_eq!(
        one_send(session(&mut m, SessionEvent::Connected)).1,
        sync(DIR)
    );
}

#[test]
fn a_lost_sync_or_search_is_sent_again_after_the_reconnect() {
    let (mut m, id) = reach(At::Syncing);
    nothing(reply(&mut m, id.unwrap(), Err(ZkError::ConnectionLoss)));
    nothing(session(&mut m, SessionEvent::Disconnected));
    let (id, op) = one_send(session(&mut m, SessionEvent::Connected));
    assert_eq!((id, op), (2, sync(DIR)));
    let (id, op) = one_send(reply(&mut m, id, synced()));
    assert_eq!((id, op), (3, list(DIR)));
    nothing(reply(&mut m, id, Err(ZkError::ConnectionLoss)));
    let (id, op) = one_send(session(&mut m, SessionEvent::Connected));
    assert_eq!((id, op), (4, list(DIR)));
    let step = reply(&mut m, id, children(&[OURS_NAME]));
    assert_eq!(step, (vec![], vec![recovered(true), acquired(OURS, 5)]));
}

#[test]
fn session_moved_and_operation_timeout_are_treated_as_connection_loss() {
    for e in [ZkError::SessionMoved, ZkError::OperationTimeout] {
        let (mut m, id) = start(LockVariant::Correct);
        nothing(reply(&mut m, id, Err(e)));
        assert_eq!(
            one_send(session(&mut m, SessionEvent::Connected)).1,
            sync(DIR)
        );

        let (mut m, id) = listing(LockVariant::Correct, OURS);
        nothing(reply(&mut m, id, Err(e)));
        let (id, op) = one_send(session(&mut m, SessionEvent::Connected));
        assert_eq!((id, op), (2, list(DIR)));
    }
}

// ---------------------------------------------------------------------------
// ConnectionLoss elsewhere: sent again after the reconnect.

#[test]
fn a_lost_list_is_sent_again_only_after_a_reconnect() {
    let (mut m, id) = listing(LockVariant::Correct, OURS);
    nothing(reply(&mut m, id, Err(ZkError::ConnectionLoss)));
    nothing(session(&mut m, SessionEvent::Disconnected));
    let (id, op) = one_send(session(&mut m, SessionEvent::Connected));
    assert_eq!((id, op), (2, list(DIR)));
    // Only once: a further Connected sends nothing.
    nothing(session(&mut m, SessionEvent::Connected));
    let step = reply(&mut m, id, children(&[OURS_NAME]));
    assert_eq!(step, (vec![], vec![acquired(OURS, 5)]));
}

#[test]
fn a_lost_exists_is_sent_again_only_after_a_reconnect() {
    let (mut m, id) = reach(At::Checking);
    nothing(reply(&mut m, id.unwrap(), Err(ZkError::ConnectionLoss)));
    nothing(session(&mut m, SessionEvent::Disconnected));
    let (id, op) = one_send(session(&mut m, SessionEvent::Connected));
    assert_eq!((id, op), (3, exists_watch(PRED)));
    nothing(reply(&mut m, id, exists(true)));
    let step = node_deleted(&mut m, PRED);
    assert_eq!(step, (vec![(4, list(DIR))], vec![woken(PRED)]));
}

#[test]
fn a_lost_delete_is_sent_again_and_no_node_then_means_done() {
    for answer in [Err(ZkError::NoNode), deleted()] {
        let (mut m, id) = reach(At::Releasing);
        nothing(reply(&mut m, id.unwrap(), Err(ZkError::ConnectionLoss)));
        nothing(session(&mut m, SessionEvent::Disconnected));
        let (id, op) = one_send(session(&mut m, SessionEvent::Connected));
        assert_eq!((id, op), (3, delete(OURS)));
        assert_eq!(
            reply(&mut m, id, answer),
            (vec![], vec![LockOutcome::Released])
        );
        assert!(m.is_idle());
        assert!(m.node().is_none());
    }
}

// ---------------------------------------------------------------------------
// Disconnected and Connected.

#[test]
fn a_holder_suspends_while_disconnected_and_resumes() {
    let mut m = held();
    assert_eq!(
        session(&mut m, SessionEvent::Disconnected),
        (vec![], vec![LockOutcome::Suspended])
    );
    assert!(!m.is_holder());
    assert!(!m.is_waiting());
    assert!(!m.is_over());
    nothing(session(&mut m, SessionEvent::Disconnected));
    assert_eq!(
        session(&mut m, SessionEvent::Connected),
        (vec![], vec![LockOutcome::Resumed])
    );
    assert!(m.is_holder());
    nothing(session(&mut m, SessionEvent::Connected));
    assert!(m.is_holder());
}

#[test]
fn a_waiter_reports_nothing_on_disconnect_or_reconnect() {
    for at in [At::Creating, At::Listing, At::Checking, At::Waiting] {
        let (mut m, _) = reach(at);
        nothing(session(&mut m, SessionEvent::Disconnected));
        assert!(m.is_waiting());
        nothing(session(&mut m, SessionEvent::Connected));
        assert!(m.is_waiting(), "{at:?}");
    }
    // The watch set before is still what wakes it.
    let (mut m, _) = reach(At::Waiting);
    nothing(session(&mut m, SessionEvent::Disconnected));
    nothing(session(&mut m, SessionEvent::Connected));
    assert_eq!(
        node_deleted(&mut m, PRED),
        (vec![(3, list(DIR))], vec![woken(PRED)])
    );
}

#[test]
fn an_acquisition_decided_while_disconnected_is_suspended_at_once() {
    let (mut m, id) = listing(LockVariant::Correct, OURS);
    nothing(session(&mut m, SessionEvent::Disconnected));
    let step = reply(&mut m, id, children(&[OURS_NAME]));
    assert_eq!(
        step,
        (vec![], vec![acquired(OURS, 5), LockOutcome::Suspended])
    );
    assert!(!m.is_holder());
    assert_eq!(
        session(&mut m, SessionEvent::Connected),
        (vec![], vec![LockOutcome::Resumed])
    );
    assert!(m.is_holder());
}

#[test]
fn a_suspended_holder_may_release() {
    let mut m = held();
    session(&mut m, SessionEvent::Disconnected);
    let (id, op) = one_send(command(&mut m, LockCommand::Release));
    assert_eq!((id, op), (2, delete(OURS)));
    // Reconnecting resumes nothing: the lock is being let go.
    nothing(session(&mut m, SessionEvent::Connected));
    assert_eq!(
        reply(&mut m, id, deleted()),
        (vec![], vec![LockOutcome::Released])
    );
}

// ---------------------------------------------------------------------------
// The end of the session.

#[test]
fn the_end_of_the_session_loses_the_lock_wherever_it_is() {
    for end in [SessionEvent::Expired, SessionEvent::Closed] {
        for at in EVERYWHERE {
            let (mut m, id) = reach(at);
            assert_eq!(
                session(&mut m, end),
                (vec![], vec![lost(ZkError::SessionExpired)]),
                "{end:?} at {at:?}"
            );
            assert!(m.is_over());
            assert!(m.session_ended());
            assert!(!m.is_holder());
            assert!(!m.is_waiting());
            // Nothing more is sent, whatever comes.
            if let Some(id) = id {
                nothing(reply(&mut m, id, Err(ZkError::ConnectionLoss)));
                nothing(reply(&mut m, id, Err(ZkError::SessionExpired)));
            }
            nothing(session(&mut m, SessionEvent::Connected));
            nothing(session(&mut m, SessionEvent::Expired));
            nothing(session(&mut m, SessionEvent::Disconnected));
            assert!(node_deleted(&mut m, PRED).0.is_empty());
            assert_refused(&mut m, LockCommand::Acquire);
        }
    }
}

#[test]
fn the_end_of_the_session_while_idle_reports_nothing_but_ends_it() {
    let mut m = Lock::new(DIR, "g");
    nothing(session(&mut m, SessionEvent::Expired));
    assert!(m.is_over());
    assert!(m.session_ended());
    assert_refused(&mut m, LockCommand::Acquire);
}

#[test]
fn a_session_expired_reply_ends_the_session() {
    for at in [
        At::Creating,
        At::Syncing,
        At::Searching,
        At::Listing,
        At::Checking,
        At::Releasing,
    ] {
        let (mut m, id) = reach(at);
        assert_eq!(
            reply(&mut m, id.unwrap(), Err(ZkError::SessionExpired)),
            (vec![], vec![lost(ZkError::SessionExpired)]),
            "{at:?}"
        );
        assert!(m.is_over());
        assert!(m.session_ended());
        nothing(session(&mut m, SessionEvent::Connected));
        assert_refused(&mut m, LockCommand::Acquire);
    }
}

#[test]
fn a_session_expired_reply_to_an_abandoned_request_ends_the_session_too() {
    // A parent's create.
    let (mut m, id) = start(LockVariant::Correct);
    reply(&mut m, id, Err(ZkError::NoNode));
    assert_eq!(
        reply(&mut m, 1, Err(ZkError::SessionExpired)),
        (vec![], vec![lost(ZkError::SessionExpired)])
    );
    assert!(m.is_over());
    assert!(m.session_ended());
    nothing(reply(&mut m, 2, created(OURS)));
    // After a release, while idle: nothing held, nothing reported.
    let (mut m, id) = reach(At::Listing);
    one_send(command(&mut m, LockCommand::Release));
    reply(&mut m, 2, deleted());
    nothing(reply(&mut m, id.unwrap(), Err(ZkError::SessionExpired)));
    assert!(m.is_over());
    assert!(m.session_ended());
}

/// Found by the review: Release after the session ended used to report
/// nothing, so LockClient::release() waited for ever.
#[test]
fn a_release_after_the_session_ended_is_refused() {
    for at in [At::Held, At::Waiting] {
        let (mut m, _) = reach(at);
        session(&mut m, SessionEvent::Expired);
        assert_refused(&mut m, LockCommand::Release);
    }
    let mut idle = Lock::new(DIR, "g");
    session(&mut idle, SessionEvent::Closed);
    assert_refused(&mut idle, LockCommand::Release);
}

// ---------------------------------------------------------------------------
// Our node or the dir gone.

#[test]
fn our_node_missing_from_the_list_is_a_loss() {
    let (mut m, id) = listing(LockVariant::Correct, OURS);
    let step = reply(
        &mut m,
        id,
        children(&["h-lock-0000000002", "g-lock-0000000004"]),
    );
    assert_eq!(step, (vec![], vec![lost(ZkError::NoNode)]));
    assert!(m.is_over());
    assert!(!m.is_holder());
    assert!(m.node().is_none());
    assert!(!m.session_ended(), "the session itself may be fine");
    assert_refused(&mut m, LockCommand::Acquire);
    assert_refused(&mut m, LockCommand::Release);
}

#[test]
fn our_node_missing_after_a_wake_is_a_loss() {
    let (mut m, _) = reach(At::Waiting);
    assert_eq!(
        node_deleted(&mut m, PRED),
        (vec![(3, list(DIR))], vec![woken(PRED)])
    );
    let id = 3;
    let step = reply(&mut m, id, children(&[]));
    assert_eq!(step, (vec![], vec![lost(ZkError::NoNode)]));
    assert!(m.is_over());
}

#[test]
fn a_list_of_a_missing_dir_is_a_loss() {
    let (mut m, id) = listing(LockVariant::Correct, OURS);
    assert_eq!(
        reply(&mut m, id, Err(ZkError::NoNode)),
        (vec![], vec![lost(ZkError::NoNode)])
    );
    assert!(m.is_over());
    assert!(m.node().is_none());
    assert!(!m.session_ended());
}

// ---------------------------------------------------------------------------
// Release while acquiring.

#[test]
fn release_while_listing_checking_or_waiting_deletes_the_node() {
    for at in [At::Listing, At::Checking, At::Waiting] {
        let (mut m, stale) = reach(at);
        let step = command(&mut m, LockCommand::Release);
        let (id, op) = one_send(step);
        assert_eq!(op, delete(OURS), "{at:?}");
        assert!(!m.is_waiting());
        assert!(!m.is_holder());
        // The abandoned request's reply is ignored.
        if let Some(stale) = stale {
            nothing(reply(&mut m, stale, children(&[OURS_NAME])));
            nothing(reply(&mut m, stale, exists(true)));
            nothing(reply(&mut m, stale, Err(ZkError::ConnectionLoss)));
        }
        // So is the predecessor's deletion, but for its report.
        assert_eq!(node_deleted(&mut m, PRED), (vec![], vec![woken(PRED)]));
        assert_eq!(
            reply(&mut m, id, deleted()),
            (vec![], vec![LockOutcome::Released])
        );
        assert!(m.is_idle());
        // And a fresh acquisition works.
        let (_, op) = one_send(command(&mut m, LockCommand::Acquire));
        assert_eq!(op, create_node(PREFIX));
    }
}

#[test]
fn release_after_a_lost_list_forgets_the_list() {
    let (mut m, id) = reach(At::Listing);
    nothing(reply(&mut m, id.unwrap(), Err(ZkError::ConnectionLoss)));
    let (id, op) = one_send(command(&mut m, LockCommand::Release));
    assert_eq!((id, op), (2, delete(OURS)));
    // The reconnect sends nothing more: the list is not sent again.
    nothing(session(&mut m, SessionEvent::Connected));
    assert_eq!(
        reply(&mut m, id, deleted()),
        (vec![], vec![LockOutcome::Released])
    );
}

#[test]
fn release_while_the_create_is_in_flight_deletes_the_node_once_known() {
    let (mut m, id) = start(LockVariant::Correct);
    nothing(command(&mut m, LockCommand::Release));
    assert!(m.is_waiting());
    let (id, op) = one_send(reply(&mut m, id, created(OURS)));
    assert_eq!((id, op), (1, delete(OURS)));
    assert_eq!(
        reply(&mut m, id, deleted()),
        (vec![], vec![LockOutcome::Released])
    );
    // The cancel is spent: the next acquisition lists, it does not delete.
    let (id, _) = one_send(command(&mut m, LockCommand::Acquire));
    assert_eq!(one_send(reply(&mut m, id, created(OURS))).1, list(DIR));
}

#[test]
fn release_while_the_create_meets_a_missing_dir() {
    let (mut m, id) = start(LockVariant::Correct);
    nothing(command(&mut m, LockCommand::Release));
    let (sends, _) = reply(&mut m, id, Err(ZkError::NoNode));
    assert_eq!(ops(&sends), vec![create_dir(DIR), create_node(PREFIX)]);
    let (_, op) = one_send(reply(&mut m, 2, created(OURS)));
    assert_eq!(op, delete(OURS));
}

#[test]
fn release_while_the_create_is_unknown_deletes_the_node_the_search_finds() {
    for at in [At::CreateLost, At::Syncing, At::Searching] {
        let (mut m, _) = reach(at);
        nothing(command(&mut m, LockCommand::Release));
        assert!(m.is_waiting(), "{at:?}");
        let (mut m, search) = match at {
            At::CreateLost => {
                let (id, _) = one_send(session(&mut m, SessionEvent::Connected));
                let (id, _) = one_send(reply(&mut m, id, synced()));
                (m, id)
            }
            At::Syncing => {
                let (id, _) = one_send(reply(&mut m, 1, synced()));
                (m, id)
            }
            _ => (m, 2),
        };
        assert_eq!(search, 2);
        // Found below another node: deleted, not waited for.
        let step = reply(&mut m, search, children(&["a-lock-0000000001", OURS_NAME]));
        assert_eq!(step, (vec![(3, delete(OURS))], vec![recovered(true)]));
        assert_eq!(
            reply(&mut m, 3, deleted()),
            (vec![], vec![LockOutcome::Released])
        );
        assert!(m.is_idle());
    }
}

#[test]
fn release_while_the_create_is_unknown_and_no_node_was_made() {
    for answer in [children(&["a-lock-0000000001"]), Err(ZkError::NoNode)] {
        let (mut m, id) = reach(At::Searching);
        nothing(command(&mut m, LockCommand::Release));
        assert_eq!(
            reply(&mut m, id.unwrap(), answer),
            (vec![], vec![recovered(false), LockOutcome::Released])
        );
        assert!(m.is_idle());
        assert!(m.node().is_none());
        // The cancel is spent.
        let (id, op) = one_send(command(&mut m, LockCommand::Acquire));
        assert_eq!((id, op), (3, create_node(PREFIX)));
        assert_eq!(one_send(reply(&mut m, id, created(OURS))).1, list(DIR));
    }
}

// ---------------------------------------------------------------------------
// Refusals and failures.

#[test]
fn acquire_is_refused_while_acquiring_holding_or_releasing() {
    for at in EVERYWHERE {
        let (mut m, _) = reach(at);
        assert_refused(&mut m, LockCommand::Acquire);
    }
}

#[test]
fn release_is_refused_when_there_is_nothing_to_release() {
    let mut idle = Lock::new(DIR, "g");
    assert_refused(&mut idle, LockCommand::Release);
    let (mut releasing, _) = reach(At::Releasing);
    assert_refused(&mut releasing, LockCommand::Release);
}

#[test]
fn an_answer_the_recipe_cannot_use_fails_it() {
    let cases = [
        (At::Creating, ZkError::NoAuth),
        (At::Creating, ZkError::NoChildrenForEphemerals),
        (At::Syncing, ZkError::NoAuth),
        (At::Searching, ZkError::NoAuth),
        (At::Listing, ZkError::NoAuth),
        (At::Checking, ZkError::NoAuth),
        (At::Releasing, ZkError::NoAuth),
        (At::Releasing, ZkError::BadVersion),
    ];
    for (at, e) in cases {
        let (mut m, id) = reach(at);
        let had = m.node().map(str::to_owned);
        assert_eq!(
            reply(&mut m, id.unwrap(), Err(e)),
            (vec![], vec![LockOutcome::Failed(e)]),
            "{at:?} {e:?}"
        );
        // The session lives on, and so may the node: it is still reported,
        // for the application to delete.
        assert_eq!(m.node(), had.as_deref(), "{at:?}");
        let known = matches!(at, At::Listing | At::Checking | At::Releasing);
        assert_eq!(had.is_some(), known, "{at:?}");
        assert!(m.is_over());
        assert!(!m.is_holder());
        assert!(!m.is_waiting());
        assert!(!m.session_ended());
        nothing(session(&mut m, SessionEvent::Connected));
        assert_refused(&mut m, LockCommand::Acquire);
        assert_refused(&mut m, LockCommand::Release);
    }
}

#[test]
#[should_panic(expected = "lock: Sync in Listing")]
fn a_reply_of_the_wrong_kind_is_a_bug() {
    let (mut m, id) = reach(At::Listing);
    m.handle(Input::Reply(id.unwrap(), synced()));
}

// ---------------------------------------------------------------------------
// The buggy variants.

#[test]
fn blind_retry_creates_again_without_syncing_or_searching() {
    let (mut m, id) = start(LockVariant::BlindRetry);
    nothing(reply(&mut m, id, Err(ZkError::ConnectionLoss)));
    nothing(session(&mut m, SessionEvent::Disconnected));
    let (id, op) = one_send(session(&mut m, SessionEvent::Connected));
    assert_eq!((id, op), (1, create_node(PREFIX)));
    // A second node: the first (if made) is an orphan the machine never
    // looks for.
    let (id, op) = one_send(reply(&mut m, id, created("/l/g-lock-0000000006")));
    assert_eq!((id, op), (2, list(DIR)));
    let (id, op) = one_send(reply(
        &mut m,
        id,
        children(&[OURS_NAME, "g-lock-0000000006"]),
    ));
    assert_eq!((id, op), (3, exists_watch(OURS)));

    // Lost after the reconnect: created again at once.
    let (mut m, id) = start(LockVariant::BlindRetry);
    session(&mut m, SessionEvent::Disconnected);
    session(&mut m, SessionEvent::Connected);
    let (id, op) = one_send(reply(&mut m, id, Err(ZkError::ConnectionLoss)));
    assert_eq!((id, op), (1, create_node(PREFIX)));
}

#[test]
fn herd_watches_the_lowest_node() {
    let (mut m, id) = listing(LockVariant::Herd, "/l/g-lock-0000000009");
    let names = [
        "a-lock-0000000001",
        "b-lock-0000000005",
        "g-lock-0000000009",
    ];
    let (id, op) = one_send(reply(&mut m, id, children(&names)));
    assert_eq!((id, op), (2, exists_watch("/l/a-lock-0000000001")));
    nothing(reply(&mut m, id, exists(true)));
    // Woken by the lowest's deletion, it lists and watches the new lowest.
    let step = node_deleted(&mut m, "/l/a-lock-0000000001");
    assert_eq!(
        step,
        (vec![(3, list(DIR))], vec![woken("/l/a-lock-0000000001")])
    );
    let (_, op) = one_send(reply(&mut m, 3, children(&names[1..])));
    assert_eq!(op, exists_watch("/l/b-lock-0000000005"));
    // The correct lock watches the next lower node.
    let (mut c, id) = listing(LockVariant::Correct, "/l/g-lock-0000000009");
    let (_, op) = one_send(reply(&mut c, id, children(&names)));
    assert_eq!(op, exists_watch("/l/b-lock-0000000005"));
}

#[test]
fn sort_by_full_name_puts_a_lower_guid_first_whatever_its_sequence() {
    let names = ["a-lock-0000000009", "b-lock-0000000001"];
    // a's holder thinks it holds...
    let mut a = Lock::with_variant(DIR, "a", LockVariant::SortByFullName);
    let (id, _) = one_send(command(&mut a, LockCommand::Acquire));
    let (id, _) = one_send(reply(&mut a, id, created("/l/a-lock-0000000009")));
    assert_eq!(
        reply(&mut a, id, children(&names)),
        (vec![], vec![acquired("/l/a-lock-0000000009", 9)])
    );
    // ...and b waits on a.
    let mut b = Lock::with_variant(DIR, "b", LockVariant::SortByFullName);
    let (id, _) = one_send(command(&mut b, LockCommand::Acquire));
    let (id, _) = one_send(reply(&mut b, id, created("/l/b-lock-0000000001")));
    let (_, op) = one_send(reply(&mut b, id, children(&names)));
    assert_eq!(op, exists_watch("/l/a-lock-0000000009"));
    // The correct lock: the other way round.
    let mut a = Lock::new(DIR, "a");
    let (id, _) = one_send(command(&mut a, LockCommand::Acquire));
    let (id, _) = one_send(reply(&mut a, id, created("/l/a-lock-0000000009")));
    let (_, op) = one_send(reply(&mut a, id, children(&names)));
    assert_eq!(op, exists_watch("/l/b-lock-0000000001"));
}

#[test]
fn stall_on_vanished_predecessor_waits_for_an_event_that_never_comes() {
    let (mut m, id) = listing(LockVariant::StallOnVanishedPredecessor, OURS);
    let (id, _) = one_send(reply(&mut m, id, children(&[PRED_NAME, OURS_NAME])));
    nothing(reply(&mut m, id, exists(false)));
    assert!(m.is_waiting());
    assert!(!m.is_holder());
    nothing(session(&mut m, SessionEvent::Disconnected));
    nothing(session(&mut m, SessionEvent::Connected));
    assert!(m.is_waiting());
    // While a predecessor that is there is waited on as usual.
    let (mut m, id) = listing(LockVariant::StallOnVanishedPredecessor, OURS);
    let (id, _) = one_send(reply(&mut m, id, children(&[PRED_NAME, OURS_NAME])));
    nothing(reply(&mut m, id, exists(true)));
    assert_eq!(
        node_deleted(&mut m, PRED),
        (vec![(3, list(DIR))], vec![woken(PRED)])
    );
}

#[test]
fn variant_names_round_trip() {
    let mut names: Vec<&str> = LockVariant::ALL.iter().map(|v| v.name()).collect();
    for v in LockVariant::ALL {
        assert_eq!(LockVariant::from_name(v.name()), Some(v));
    }
    assert_eq!(LockVariant::ALL[0], LockVariant::Correct);
    assert_eq!(LockVariant::Correct.name(), "lock");
    names.sort();
    names.dedup();
    assert_eq!(names.len(), LockVariant::ALL.len(), "names are distinct");
    assert_eq!(LockVariant::from_name("lock/nope"), None);
    assert_eq!(LockVariant::from_name(""), None);
    assert_eq!(LockVariant::from_name("LOCK"), None);
}

// ---------------------------------------------------------------------------
// Shared locks.

/// A shared-lock machine whose node is `node` and whose list is in flight.
fn shared_listing(mode: LockMode, variant: LockVariant, node: &str) -> (Lock, OpId) {
    let mut m = Lock::shared("/rw", "g", mode, variant);
    assert_eq!(m.mode(), mode);
    let (id, op) = one_send(command(&mut m, LockCommand::Acquire));
    let marker = if mode == LockMode::Read {
        "read"
    } else {
        "write"
    };
    assert_eq!(op, create_node(&format!("/rw/g-{marker}-")));
    let (id, op) = one_send(reply(&mut m, id, created(node)));
    assert_eq!(op, list("/rw"));
    (m, id)
}

#[test]
fn readers_wait_on_writers_only() {
    assert!(Lock::read("/rw", "g").mode().is_shared());
    assert!(!Lock::write("/rw", "g").mode().is_shared());
    assert_eq!(Lock::read("/rw", "g").mode(), LockMode::Read);
    assert_eq!(Lock::write("/rw", "g").mode(), LockMode::Write);
    // Only readers below (and an exclusive lock's node, ignored): held.
    let (mut r, id) = shared_listing(
        LockMode::Read,
        LockVariant::Correct,
        "/rw/g-read-0000000005",
    );
    let step = reply(
        &mut r,
        id,
        children(&[
            "a-read-0000000001",
            "x-lock-0000000000",
            "g-read-0000000005",
        ]),
    );
    assert_eq!(step, (vec![], vec![acquired("/rw/g-read-0000000005", 5)]));
    // Writers below: wait on the next lower writer, not the reader between.
    let (mut r, id) = shared_listing(
        LockMode::Read,
        LockVariant::Correct,
        "/rw/g-read-0000000005",
    );
    let (_, op) = one_send(reply(
        &mut r,
        id,
        children(&[
            "v-write-0000000001",
            "w-write-0000000002",
            "a-read-0000000003",
            "g-read-0000000005",
            "z-write-0000000007",
        ]),
    ));
    assert_eq!(op, exists_watch("/rw/w-write-0000000002"));
}

#[test]
fn writers_wait_on_the_next_lower_node_of_either_kind() {
    let names = [
        "w-write-0000000002",
        "a-read-0000000003",
        "g-write-0000000005",
    ];
    let (mut w, id) = shared_listing(
        LockMode::Write,
        LockVariant::Correct,
        "/rw/g-write-0000000005",
    );
    let (_, op) = one_send(reply(&mut w, id, children(&names)));
    assert_eq!(op, exists_watch("/rw/a-read-0000000003"));
    // Lowest of both kinds: held.
    let (mut w, id) = shared_listing(
        LockMode::Write,
        LockVariant::Correct,
        "/rw/g-write-0000000005",
    );
    let step = reply(
        &mut w,
        id,
        children(&[
            "x-lock-0000000001",
            "g-write-0000000005",
            "a-read-0000000006",
        ]),
    );
    assert_eq!(step, (vec![], vec![acquired("/rw/g-write-0000000005", 5)]));
}

#[test]
fn reader_waits_on_any_waits_on_a_reader() {
    let names = [
        "w-write-0000000002",
        "a-read-0000000003",
        "g-read-0000000005",
    ];
    let (mut b, id) = shared_listing(
        LockMode::Read,
        LockVariant::ReaderWaitsOnAny,
        "/rw/g-read-0000000005",
    );
    let (_, op) = one_send(reply(&mut b, id, children(&names)));
    assert_eq!(op, exists_watch("/rw/a-read-0000000003"));
    // With no writer below it still holds at once.
    let (mut b, id) = shared_listing(
        LockMode::Read,
        LockVariant::ReaderWaitsOnAny,
        "/rw/g-read-0000000005",
    );
    let step = reply(&mut b, id, children(&names[1..]));
    assert_eq!(step, (vec![], vec![acquired("/rw/g-read-0000000005", 5)]));
    // A writer of that variant is unaffected.
    let (mut w, id) = shared_listing(
        LockMode::Write,
        LockVariant::ReaderWaitsOnAny,
        "/rw/g-write-0000000005",
    );
    let (_, op) = one_send(reply(
        &mut w,
        id,
        children(&[
            "w-write-0000000002",
            "a-read-0000000003",
            "g-write-0000000005",
        ]),
    ));
    assert_eq!(op, exists_watch("/rw/a-read-0000000003"));
}

#[test]
fn a_readers_guid_search_looks_for_its_read_node() {
    let mut r = Lock::read("/rw", "g");
    let (id, _) = one_send(command(&mut r, LockCommand::Acquire));
    nothing(reply(&mut r, id, Err(ZkError::ConnectionLoss)));
    let (id, _) = one_send(session(&mut r, SessionEvent::Connected));
    let (id, op) = one_send(reply(&mut r, id, synced()));
    assert_eq!(op, list("/rw"));
    let step = reply(
        &mut r,
        id,
        children(&["g-write-0000000001", "g-read-0000000004"]),
    );
    // Its read node found; the write node of the same guid is someone's
    // (or a different machine's) and blocks it.
    assert_eq!(
        step,
        (
            vec![(3, exists_watch("/rw/g-write-0000000001"))],
            vec![recovered(true)]
        )
    );
    assert_eq!(r.node(), Some("/rw/g-read-0000000004"));
}

// ---------------------------------------------------------------------------
// Leader election: the same machine, confirming its node before it holds.

fn election_listing(keep_after_expiry: bool) -> (Lock, OpId) {
    let mut e = Lock::for_election("/e", "g", keep_after_expiry, true);
    let (id, op) = one_send(command(&mut e, LockCommand::Acquire));
    assert_eq!(op, create_node("/e/g-n_"));
    let (id, op) = one_send(reply(&mut e, id, created("/e/g-n_0000000003")));
    assert_eq!(op, list("/e"));
    (e, id)
}

/// The election's lowest node, its confirming sync in flight.
fn election_confirming(keep_after_expiry: bool) -> (Lock, OpId) {
    let (mut e, id) = election_listing(keep_after_expiry);
    let (id, op) = one_send(reply(
        &mut e,
        id,
        children(&["g-n_0000000003", "x-lock-0000000000"]),
    ));
    assert_eq!((id, op), (2, sync("/e")));
    (e, id)
}

#[test]
fn election_confirms_its_node_before_leading() {
    let (mut e, id) = election_confirming(false);
    assert!(e.is_waiting());
    assert!(!e.is_holder());
    let (id, op) = one_send(reply(&mut e, id, synced()));
    assert_eq!(
        (id, op),
        (
            3,
            Op::Exists {
                path: "/e/g-n_0000000003".into(),
                watch: false
            }
        )
    );
    let mut gone = e.clone();
    assert_eq!(
        reply(&mut e, id, exists(true)),
        (vec![], vec![acquired("/e/g-n_0000000003", 3)])
    );
    assert!(e.is_holder());
    // The node is gone after the sync: a stale list had shown it.
    assert_eq!(
        reply(&mut gone, id, exists(false)),
        (vec![], vec![lost(ZkError::NoNode)])
    );
    assert!(gone.is_over());
    assert!(gone.node().is_none());
    assert!(!gone.session_ended());
}

#[test]
fn the_election_that_acts_without_confirming_leads_on_its_child_list() {
    // election/act-without-confirming: lowest in the list is enough.
    let mut e = Lock::for_election("/e", "g", false, false);
    let (id, _) = one_send(command(&mut e, LockCommand::Acquire));
    let (id, op) = one_send(reply(&mut e, id, created("/e/g-n_0000000003")));
    assert_eq!(op, list("/e"));
    assert_eq!(
        reply(&mut e, id, children(&["g-n_0000000003"])),
        (vec![], vec![acquired("/e/g-n_0000000003", 3)])
    );
    assert!(e.is_holder());
}

#[test]
fn election_waits_on_the_next_lower_candidate() {
    let (mut e, id) = election_listing(false);
    let (_, op) = one_send(reply(
        &mut e,
        id,
        children(&["a-n_0000000001", "g-n_0000000003"]),
    ));
    assert_eq!(op, exists_watch("/e/a-n_0000000001"));
}

#[test]
fn election_confirmation_survives_connection_loss_and_disconnects() {
    let (mut e, id) = election_confirming(false);
    nothing(reply(&mut e, id, Err(ZkError::ConnectionLoss)));
    let (id, op) = one_send(session(&mut e, SessionEvent::Connected));
    assert_eq!((id, op), (3, sync("/e")));
    let (id, _) = one_send(reply(&mut e, id, synced()));
    nothing(reply(&mut e, id, Err(ZkError::ConnectionLoss)));
    nothing(session(&mut e, SessionEvent::Disconnected));
    let (id, op) = one_send(session(&mut e, SessionEvent::Connected));
    assert_eq!(
        (id, op),
        (
            5,
            Op::Exists {
                path: "/e/g-n_0000000003".into(),
                watch: false
            }
        )
    );
    // Confirmed while disconnected: elected and suspended.
    nothing(session(&mut e, SessionEvent::Disconnected));
    assert_eq!(
        reply(&mut e, id, exists(true)),
        (
            vec![],
            vec![acquired("/e/g-n_0000000003", 3), LockOutcome::Suspended]
        )
    );
}

#[test]
fn election_resigns_while_confirming() {
    // During the sync, and during the exists.
    let (mut e, id) = election_confirming(false);
    assert_refused(&mut e, LockCommand::Acquire);
    let (del, op) = one_send(command(&mut e, LockCommand::Release));
    assert_eq!(op, delete("/e/g-n_0000000003"));
    nothing(reply(&mut e, id, synced()));
    assert_eq!(
        reply(&mut e, del, deleted()),
        (vec![], vec![LockOutcome::Released])
    );

    let (mut e, id) = election_confirming(false);
    let (id, _) = one_send(reply(&mut e, id, synced()));
    assert_refused(&mut e, LockCommand::Acquire);
    let (del, op) = one_send(command(&mut e, LockCommand::Release));
    assert_eq!(op, delete("/e/g-n_0000000003"));
    nothing(reply(&mut e, id, exists(true)));
    assert_eq!(
        reply(&mut e, del, deleted()),
        (vec![], vec![LockOutcome::Released])
    );
}

#[test]
fn the_buggy_election_ignores_an_expiry_while_leading_until_it_resigns() {
    let (mut k, id) = election_confirming(true);
    let (id, _) = one_send(reply(&mut k, id, synced()));
    reply(&mut k, id, exists(true));
    session(&mut k, SessionEvent::Disconnected);
    nothing(session(&mut k, SessionEvent::Expired));
    assert!(k.is_holder());
    assert!(k.session_ended());
    assert!(!k.is_over());
    assert_eq!(
        command(&mut k, LockCommand::Release),
        (vec![], vec![lost(ZkError::SessionExpired)])
    );
    assert!(k.is_over());
    assert!(!k.is_holder());
    // An expiry while not leading ends it as usual.
    let (mut k, _) = election_confirming(true);
    assert_eq!(
        session(&mut k, SessionEvent::Expired),
        (vec![], vec![lost(ZkError::SessionExpired)])
    );
    // The correct election loses leadership at once.
    let (mut e, id) = election_confirming(false);
    let (id, _) = one_send(reply(&mut e, id, synced()));
    reply(&mut e, id, exists(true));
    assert_eq!(
        session(&mut e, SessionEvent::Expired),
        (vec![], vec![lost(ZkError::SessionExpired)])
    );
    assert!(!e.is_holder());
}

// ---------------------------------------------------------------------------
// Clone + Eq + Hash.

fn hash_of(m: &Lock) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut s = std::collections::hash_map::DefaultHasher::new();
    m.hash(&mut s);
    s.finish()
}

/// A script over most of the machine's state: a lost create, the search,
/// a wait, a wake, a hold, a suspension, a release.
fn script(m: &mut Lock) -> Vec<Step> {
    let mut steps = vec![command(m, LockCommand::Acquire)];
    steps.push(reply(m, 0, Err(ZkError::ConnectionLoss)));
    steps.push(session(m, SessionEvent::Disconnected));
    steps.push(session(m, SessionEvent::Connected));
    steps.push(reply(m, 1, synced()));
    steps.push(reply(m, 2, children(&[PRED_NAME, OURS_NAME])));
    steps.push(reply(m, 3, exists(true)));
    steps.push(node_deleted(m, PRED));
    steps.push(reply(m, 4, children(&[OURS_NAME])));
    steps.push(session(m, SessionEvent::Disconnected));
    steps.push(command(m, LockCommand::Release));
    steps.push(session(m, SessionEvent::Connected));
    steps.push(reply(m, 5, deleted()));
    steps
}

#[test]
fn machines_fed_alike_are_equal_and_hash_alike() {
    let mut a = Lock::new(DIR, "g");
    let mut b = Lock::new(DIR, "g");
    let sa = script(&mut a);
    let sb = script(&mut b);
    assert_eq!(sa, sb);
    assert_eq!(a, b);
    assert_eq!(hash_of(&a), hash_of(&b));
    // The script did what it says.
    assert_eq!(sa.last().unwrap().1, vec![LockOutcome::Released]);
    assert!(a.is_idle());
    // And equal at every step along the way.
    let mut c = Lock::new(DIR, "g");
    let mut d = c.clone();
    assert_eq!(c, d);
    c.handle(Input::Command(LockCommand::Acquire));
    assert_ne!(c, d, "a queued request is state");
    d.handle(Input::Command(LockCommand::Acquire));
    assert_eq!(c, d);
    assert_eq!(hash_of(&c), hash_of(&d));
}

#[test]
fn machines_that_differ_are_unequal() {
    assert_ne!(Lock::new(DIR, "g"), Lock::new(DIR, "h"));
    assert_ne!(Lock::new(DIR, "g"), Lock::new("/m", "g"));
    assert_ne!(
        Lock::new(DIR, "g"),
        Lock::with_variant(DIR, "g", LockVariant::Herd)
    );
    assert_ne!(Lock::new(DIR, "g"), Lock::read(DIR, "g"));
    // The same phase reached with different connection histories.
    let (mut a, _) = reach(At::Waiting);
    let (b, _) = reach(At::Waiting);
    session(&mut a, SessionEvent::Disconnected);
    session(&mut a, SessionEvent::Connected);
    assert_ne!(a, b);
}

#[test]
fn a_revocable_holder_watches_its_own_node_and_hears_unlock() {
    let mut m = Lock::read("/rw", "g").revocable();
    let run = crate::step::<Lock>;
    let (sends, _) = run(&mut m, Input::Command(LockCommand::Acquire));
    let created = Ok(Reply::Create {
        path: "/rw/g-read-0000000004".into(),
        stat: Stat::default(),
    });
    let (sends, _) = run(&mut m, Input::Reply(sends[0].0, created));
    // The data watch on our node first, then the list.
    assert_eq!(
        sends[0].1,
        Op::GetData {
            path: "/rw/g-read-0000000004".into(),
            watch: true
        }
    );
    assert!(matches!(sends[1].1, Op::GetChildren { .. }));
    let data = |d: &[u8]| {
        Ok(Reply::GetData {
            data: d.to_vec(),
            stat: Stat::default(),
        })
    };
    let (_, outs) = run(&mut m, Input::Reply(sends[0].0, data(b"")));
    assert!(outs.is_empty());
    let children = Ok(Reply::GetChildren {
        children: vec!["g-read-0000000004".into()],
        stat: Stat::default(),
    });
    let (_, outs) = run(&mut m, Input::Reply(sends[1].0, children));
    assert!(matches!(outs[0], LockOutcome::Acquired { token: 4, .. }));
    // A revoker writes "unlock": the watch fires, the machine reads again.
    let changed = Input::Watch(WatchEvent {
        event_type: EventType::NodeDataChanged,
        path: "/rw/g-read-0000000004".into(),
    });
    let (sends, outs) = run(&mut m, changed);
    assert!(outs.is_empty(), "our own node's event is not a wake-up");
    let (_, outs) = run(&mut m, Input::Reply(sends[0].0, data(REVOKE)));
    assert_eq!(outs, vec![LockOutcome::RevokeAsked]);
    assert!(m.revoke_asked());
    // Consent: release; our node's deletion event is not a wake-up either.
    let (sends, _) = run(&mut m, Input::Command(LockCommand::Release));
    let (_, outs) = run(&mut m, Input::Reply(sends[0].0, Ok(Reply::Delete)));
    assert_eq!(outs, vec![LockOutcome::Released]);
    assert!(!m.revoke_asked());
    let deleted = Input::Watch(WatchEvent {
        event_type: EventType::NodeDeleted,
        path: "/rw/g-read-0000000004".into(),
    });
    let (sends, outs) = run(&mut m, deleted);
    assert!(sends.is_empty());
    assert!(outs.is_empty());
}
