//! The recipes against a real ZooKeeper 3.8 (the fixture's shared
//! standalone server), through the Rust client: the same state machines
//! the simulation runs, judged by the same oracles.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zoosim::check::fence::FencedResource;
use zoosim::check::lock::{check_lock, LockEvent};
use zoosim::check::Entry;
use zoosim::client::real::RealZk;
use zoosim::client::Zk;
use zoosim::real_server::{fresh_root, shared_server, RealServer};
use zoosim::recipes::lock::{Lock, LockClient, LockCommand, LockError, LockOutcome};
use zoosim::recipes::Driver;

const T_MS: u64 = 6000;

/// The history of a test's handles on the real server, checked against
/// ZooKeeper's contract when the test is done: the contract check must
/// find that it holds (a real server's history is the evidence that the
/// check raises no false alarm). Every handle connects through it, and so
/// does whatever creates the nodes the test works under (the check's
/// model starts from an empty tree).
struct Recording {
    recorder: zoosim::history::Recorder,
    handles: std::sync::atomic::AtomicU32,
}

impl Recording {
    fn new() -> Recording {
        Recording {
            recorder: zoosim::client::real::wall_recorder(),
            handles: Default::default(),
        }
    }

    async fn connect(&self, server: &RealServer) -> RealZk {
        let zk = connect(server).await;
        let h = self
            .handles
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let actor = zoosim::history::Actor {
            client: Some(h),
            handle: h,
        };
        // One standalone server: it answers everything, as server 0.
        zk.record(self.recorder.clone(), actor, 0);
        zk
    }

    /// Checks the history; returns how many operations it held.
    fn check(&self, test: &str) -> usize {
        use zoosim::check::contract::{check, ContractVerdict};
        use zoosim::history::{History, Meta, FORMAT_VERSION};
        use zoosim::real_server::{SYNC_LIMIT_TICKS, TICK_MS};
        let history = History {
            meta: Meta {
                format: FORMAT_VERSION,
                scenario: test.into(),
                file: None,
                seed: 0,
                zoosim: env!("CARGO_PKG_VERSION").into(),
                servers: 1,
                session_timeout_ms: T_MS,
                tick_ms: Some(TICK_MS),
                sync_limit_ticks: Some(SYNC_LIMIT_TICKS),
            },
            records: self.recorder.records(),
        };
        let ops = history.ops().len();
        let budget = zoosim::check::lin::Budget {
            max_steps: 2_000_000,
            max_memo_bytes: 128 << 20,
            stop: None,
        };
        let report = check(&history, &budget).expect("a history the check takes");
        eprintln!(
            "{test}: the real server's history of {ops} operations, {} sessions: contract {:?}",
            report.sessions, report.verdict
        );
        assert!(ops > 0 && report.placed > 0, "{test}: nothing recorded");
        assert_eq!(
            report.verdict,
            ContractVerdict::Holds,
            "{test}: the real server's history must satisfy the contract"
        );
        ops
    }
}

async fn connect(server: &RealServer) -> RealZk {
    RealZk::connect(&server.connect_string(), T_MS)
        .await
        .expect("connect")
}

fn report(test: &str, started: Instant) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "[timing] {test}: {:.2?}",
        started.elapsed()
    );
}

type Log = Arc<Mutex<Vec<Entry<LockEvent>>>>;

fn push(log: &Log, t0: Instant, client: usize, event: LockEvent) {
    log.lock().unwrap().push(Entry {
        at_ms: t0.elapsed().as_millis() as u64,
        client,
        event,
    });
}

/// One contender: `rounds` acquisitions, each touching the fenced resource
/// twice around a short hold.
async fn contend(
    client: usize,
    zk: RealZk,
    dir: String,
    rounds: usize,
    log: Log,
    resource: Arc<Mutex<FencedResource>>,
    t0: Instant,
) {
    let guid = format!("c{client}-{:x}", zk.session_id().0);
    let mut driver = Driver::new(&zk, Lock::new(&dir, &guid));
    for _ in 0..rounds {
        push(&log, t0, client, LockEvent::AcquireCalled { shared: false });
        driver.command(LockCommand::Acquire);
        loop {
            match driver.next_outcome().await {
                LockOutcome::Acquired { token, .. } => {
                    push(&log, t0, client, LockEvent::Acquired { token });
                    for touch in 0..2 {
                        if touch == 1 {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        let accepted = resource.lock().unwrap().access(token);
                        push(&log, t0, client, LockEvent::Access { token, accepted });
                    }
                    break;
                }
                LockOutcome::Woken { path } => push(&log, t0, client, LockEvent::Woken { path }),
                other => panic!("client {client}: unexpected {other:?} without faults"),
            }
        }
        push(&log, t0, client, LockEvent::ReleaseCalled);
        driver.command(LockCommand::Release);
        assert_eq!(driver.next_outcome().await, LockOutcome::Released);
        push(&log, t0, client, LockEvent::Released);
    }
    zk.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_is_exclusive_and_herd_free_on_a_real_server() {
    let test = "the_lock_is_exclusive_and_herd_free_on_a_real_server";
    let Some(server) = shared_server(test) else {
        return;
    };
    let started = Instant::now();
    // The lock's own dir and its parent are created by the recipe.
    let dir = format!("{}/locks/l", fresh_root(test));
    let log: Log = Arc::default();
    let resource = Arc::new(Mutex::new(FencedResource::new()));
    let (clients, rounds) = (5, 8);
    let recording = Recording::new();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let zk = recording.connect(server).await;
        let _ = zk.try_next_event();
        tasks.push(tokio::spawn(contend(
            c,
            zk,
            dir.clone(),
            rounds,
            log.clone(),
            resource.clone(),
            started,
        )));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("every client finishes")
            .expect("no client panics");
    }
    let log = log.lock().unwrap().clone();
    let r = check_lock(&log, None);
    eprintln!("{r}");
    assert!(r.is_ok(), "{r}");
    assert_eq!(r.acquisitions, (clients * rounds) as u64);
    assert_eq!(r.accesses_accepted, 2 * (clients * rounds) as u64);
    assert!(r.deletions_waking_someone > 0, "nobody ever waited");
    assert_eq!(r.max_woken_per_deletion, 1);
    // 5 x 8 rounds of create, list, exists, delete at least.
    assert!(recording.check(test) >= 4 * clients * rounds);
    report(test, started);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_holder_session_passes_the_lock_on() {
    let test = "a_closed_holder_session_passes_the_lock_on";
    let Some(server) = shared_server(test) else {
        return;
    };
    let started = Instant::now();
    let recording = Recording::new();
    let dir = format!("{}/lock", fresh_root(test));
    let (a, b) = (
        recording.connect(server).await,
        recording.connect(server).await,
    );
    let mut holder = LockClient::new(&a, Lock::new(&dir, "a"));
    let first = holder.acquire().await.expect("a acquires");
    assert!(holder.is_holder());
    let b_dir = dir.clone();
    let waiter = tokio::spawn(async move {
        let mut lock = LockClient::new(&b, Lock::new(&b_dir, "b"));
        let token = lock.acquire().await;
        (token, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "b must wait while a holds");
    // The holder's process dies: its session closes and its node goes.
    let closed_at = Instant::now();
    a.close().await.expect("close");
    let (token, at) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("b acquires once a's session is gone")
        .expect("b's task");
    let token = token.expect("b acquires");
    assert!(token > first, "tokens grow: {first} then {token}");
    eprintln!(
        "b acquired {:.0?} after a's session closed",
        at.duration_since(closed_at)
    );
    // a's machine learns it has lost everything.
    assert!(!holder.is_holder());
    assert_eq!(
        holder.release().await,
        Err(LockError::Lost(zoosim::proto::ZkError::SessionExpired))
    );
    recording.check(test);
    report(test, started);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_delivers_each_item_once_in_order_on_a_real_server() {
    use zoosim::check::queue::{check_queue, QueueEvent};
    use zoosim::recipes::queue::{Consumer, Producer, QueueClient, QueueCommand, QueueOutcome};
    use zoosim::recipes::sequence_of;

    let test = "the_queue_delivers_each_item_once_in_order_on_a_real_server";
    let Some(server) = shared_server(test) else {
        return;
    };
    let started = Instant::now();
    let recording = Recording::new();
    let dir = format!("{}/queue", fresh_root(test));
    let log: Arc<Mutex<Vec<Entry<QueueEvent>>>> = Arc::default();
    let (producers, items) = (2usize, 15usize);
    let total = producers * items;
    let mut tasks = Vec::new();
    for p in 0..producers {
        let (zk, dir, log) = (recording.connect(server).await, dir.clone(), log.clone());
        tasks.push(tokio::spawn(async move {
            let guid = format!("p{p}");
            let mut producer = QueueClient::new(&zk, Producer::new(&dir, &guid, None));
            for k in 0..items {
                let item = format!("p{p}-{k}");
                log.lock().unwrap().push(Entry {
                    at_ms: 0,
                    client: p,
                    event: QueueEvent::EnqueueCalled { item: item.clone() },
                });
                producer
                    .enqueue(item.clone().into_bytes())
                    .await
                    .expect("enqueue");
                log.lock().unwrap().push(Entry {
                    at_ms: 0,
                    client: p,
                    event: QueueEvent::Enqueued {
                        item,
                        duplicate_possible: false,
                    },
                });
            }
            zk.close().await.expect("close");
        }));
    }
    let consumers = 2usize;
    let mut takers = Vec::new();
    for c in 0..consumers {
        let (zk, dir, log) = (recording.connect(server).await, dir.clone(), log.clone());
        takers.push(tokio::spawn(async move {
            let client = producers + c;
            let mut driver = Driver::new(&zk, Consumer::new(&dir, false));
            loop {
                driver.command(QueueCommand::Take);
                let (name, data) = loop {
                    match driver.next_outcome().await {
                        QueueOutcome::Taken { name, data } => break (name, data),
                        QueueOutcome::Missed { .. }
                        | QueueOutcome::Claiming { .. }
                        | QueueOutcome::Woken => {}
                        other => panic!("consumer {c}: {other:?} without faults"),
                    }
                };
                let item = String::from_utf8(data).expect("utf-8 items");
                if item == "stop" {
                    break;
                }
                log.lock().unwrap().push(Entry {
                    at_ms: 0,
                    client,
                    event: QueueEvent::Taken {
                        item,
                        seq: sequence_of(&name).expect("a sequential name"),
                    },
                });
            }
            zk.close().await.expect("close");
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("every producer finishes")
            .expect("no producer panics");
    }
    // One poison pill per consumer, behind every item.
    let zk = recording.connect(server).await;
    let mut stopper = QueueClient::new(&zk, Producer::new(&dir, "stopper", None));
    for _ in 0..consumers {
        stopper
            .enqueue(b"stop".to_vec())
            .await
            .expect("enqueue stop");
    }
    for t in takers {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("every consumer finishes")
            .expect("no consumer panics");
    }
    let log = log.lock().unwrap().clone();
    let r = check_queue(&log, &[], true, true);
    eprintln!("{r}");
    assert!(r.is_ok(), "{r}");
    assert_eq!((r.enqueued, r.taken), (total as u64, total as u64));
    recording.check(test);
    report(test, started);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_and_shared_lock_on_a_real_server() {
    use zoosim::recipes::election::{Election, ElectionClient};

    let test = "election_and_shared_lock_on_a_real_server";
    let Some(server) = shared_server(test) else {
        return;
    };
    let started = Instant::now();
    let recording = Recording::new();
    let root = fresh_root(test);
    // Three candidates: one leads at a time, each new leader's epoch larger.
    // Leaked: the candidates' tasks outlive this scope's borrows.
    let a = recording.connect(server).await;
    let b: &'static RealZk = Box::leak(Box::new(recording.connect(server).await));
    let c: &'static RealZk = Box::leak(Box::new(recording.connect(server).await));
    let dir = format!("{root}/election");
    let mut ca = ElectionClient::new(&a, Election::new(&dir, "a"));
    let mut cb = ElectionClient::new(b, Election::new(&dir, "b"));
    let mut cc = ElectionClient::new(c, Election::new(&dir, "c"));
    let first = ca.lead().await.expect("a leads");
    let b_wait = tokio::spawn(async move {
        let epoch = cb.lead().await.expect("b leads");
        (epoch, cb.is_leader(), cb)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!b_wait.is_finished(), "b waits while a leads");
    ca.resign().await.expect("a resigns");
    let (second, b_leads, mut cb) = tokio::time::timeout(Duration::from_secs(10), b_wait)
        .await
        .expect("b is elected")
        .expect("b's task");
    assert!(b_leads && second > first, "epochs {first} then {second}");
    // c joins behind b, and b's session dies: c leads.
    let c_wait = tokio::spawn(async move { cc.lead().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    b.close().await.expect("close");
    let third = tokio::time::timeout(Duration::from_secs(10), c_wait)
        .await
        .expect("c is elected")
        .expect("c's task")
        .expect("c leads");
    assert!(third > second);
    assert!(!cb.is_leader(), "a closed session does not lead");

    // Shared lock: two readers hold together; a writer waits for both.
    let rw = format!("{root}/rw");
    let (r1, r2, w) = (
        recording.connect(server).await,
        recording.connect(server).await,
        recording.connect(server).await,
    );
    let mut l1 = LockClient::new(&r1, Lock::read(&rw, "r1"));
    let mut l2 = LockClient::new(&r2, Lock::read(&rw, "r2"));
    l1.acquire().await.expect("r1 reads");
    l2.acquire().await.expect("r2 reads too");
    let writer = tokio::spawn(async move {
        let mut lw = LockClient::new(&w, Lock::write(&rw, "w"));
        let token = lw.acquire().await.expect("w writes");
        (token, Instant::now())
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!writer.is_finished(), "the writer waits for the readers");
    l1.release().await.expect("r1 done");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !writer.is_finished(),
        "the writer waits for the last reader"
    );
    let released = Instant::now();
    l2.release().await.expect("r2 done");
    let (_, at) = tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .expect("the writer gets it")
        .expect("the writer's task");
    assert!(at >= released);
    recording.check(test);
    report(test, started);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_and_membership_on_a_real_server() {
    use zoosim::client::ZkExt;
    use zoosim::proto::CreateMode;
    use zoosim::recipes::config::{Config, ConfigClient};
    use zoosim::recipes::membership::{Membership, MembershipClient};

    let test = "configuration_and_membership_on_a_real_server";
    let Some(server) = shared_server(test) else {
        return;
    };
    let started = Instant::now();
    let root = fresh_root(test);
    // Configuration: a follower sees every compare-and-set; a stale one
    // conflicts.
    let path = format!("{root}-config");
    let recording = Recording::new();
    let (a, b) = (
        recording.connect(server).await,
        recording.connect(server).await,
    );
    a.create(&path, b"0", CreateMode::Persistent)
        .await
        .expect("node");
    let mut follower = ConfigClient::new(&a, Config::new(&path));
    assert_eq!(follower.read().await, Ok(Some((b"0".to_vec(), 0))));
    let mut writer = ConfigClient::new(&b, Config::new(&path));
    for v in 0..3 {
        let next = format!("{}", v + 1).into_bytes();
        assert_eq!(
            writer.compare_and_set(v, next.clone()).await,
            Ok(Some(v + 1))
        );
        let seen = tokio::time::timeout(Duration::from_secs(5), follower.next_change())
            .await
            .expect("the follower hears of it");
        assert_eq!(seen, Ok(Some((next, v + 1))));
    }
    assert_eq!(writer.compare_and_set(1, b"stale".to_vec()).await, Ok(None));

    // Membership: three join, one's session ends, the view follows.
    let group = format!("{root}/group");
    let members: Vec<RealZk> = vec![
        recording.connect(server).await,
        recording.connect(server).await,
        recording.connect(server).await,
    ];
    for (i, zk) in members.iter().enumerate() {
        let mut m = MembershipClient::new(zk, Membership::new(&group, &format!("m{i}"), "g"));
        m.join().await.expect("join");
    }
    let watcher = recording.connect(server).await;
    let mut view = MembershipClient::new(&watcher, Membership::new(&group, "watcher", "g"));
    assert_eq!(view.members().await.expect("list"), ["m0", "m1", "m2"]);
    members[1].close().await.expect("close");
    let after = tokio::time::timeout(Duration::from_secs(5), view.members())
        .await
        .expect("the view changes");
    assert_eq!(after.expect("list"), ["m0", "m2"]);
    recording.check(test);
    report(test, started);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn barriers_on_a_real_server() {
    use zoosim::recipes::barrier::{Barrier, BarrierClient};
    use zoosim::recipes::double_barrier::{DoubleBarrier, DoubleBarrierClient};

    let test = "barriers_on_a_real_server";
    let Some(server) = shared_server(test) else {
        return;
    };
    let started = Instant::now();
    let recording = Recording::new();
    let root = fresh_root(test);
    // Barrier: two waiters block until the coordinator removes it.
    let path = format!("{root}/barrier");
    let coordinator = recording.connect(server).await;
    let mut c = BarrierClient::new(&coordinator, Barrier::new(&path));
    c.set().await.expect("set");
    let mut waiters = Vec::new();
    for _ in 0..2 {
        let (zk, path) = (recording.connect(server).await, path.clone());
        waiters.push(tokio::spawn(async move {
            let mut w = BarrierClient::new(&zk, Barrier::new(&path));
            w.wait().await.expect("passes");
            Instant::now()
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        waiters.iter().all(|w| !w.is_finished()),
        "nobody passes a raised barrier"
    );
    let removed = Instant::now();
    c.remove().await.expect("removed");
    for w in waiters {
        let passed = tokio::time::timeout(Duration::from_secs(5), w)
            .await
            .expect("passes once removed")
            .expect("the waiter's task");
        assert!(passed >= removed);
    }
    // Double barrier of three: all enter together, all leave together.
    let dir = format!("{root}/double");
    let mut procs = Vec::new();
    for i in 0..3 {
        let (zk, dir) = (recording.connect(server).await, dir.clone());
        procs.push(tokio::spawn(async move {
            let session = zk.session_id();
            let mut p = DoubleBarrierClient::new(
                &zk,
                DoubleBarrier::new(&dir, &format!("p{i}"), session, 3),
            );
            p.enter().await.expect("enter");
            let entered = Instant::now();
            tokio::time::sleep(Duration::from_millis(50 * i)).await;
            let leaving = Instant::now();
            p.leave().await.expect("leave");
            (entered, leaving, Instant::now())
        }));
        // Staggered: the first two wait for the third.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut times = Vec::new();
    for p in procs {
        times.push(
            tokio::time::timeout(Duration::from_secs(10), p)
                .await
                .expect("the barrier completes")
                .expect("the process's task"),
        );
    }
    let last_leaving = times.iter().map(|t| t.1).max().unwrap();
    for (entered, _, left) in &times {
        assert!(
            *entered >= times[2].0 - Duration::from_millis(50),
            "nobody in before the third"
        );
        assert!(
            *left >= last_leaving,
            "nobody out before the last one leaves"
        );
    }
    recording.check(test);
    report(test, started);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_and_two_phase_commit_on_a_real_server() {
    use zoosim::client::ZkExt;
    use zoosim::proto::CreateMode;
    use zoosim::recipes::revocable::{Revoker, RevokerClient};
    use zoosim::recipes::two_phase_commit::{create_transaction, Site, SiteClient};

    let test = "revocation_and_two_phase_commit_on_a_real_server";
    let Some(server) = shared_server(test) else {
        return;
    };
    let started = Instant::now();
    let recording = Recording::new();
    let root = fresh_root(test);
    // Revocation: the holder hears "unlock" and lets go; the writer gets in.
    let rw = format!("{root}/rw");
    let (h, adm) = (
        recording.connect(server).await,
        recording.connect(server).await,
    );
    let mut holder = LockClient::new(&h, Lock::read(&rw, "h").revocable());
    holder.acquire().await.expect("held");
    let node = holder.driver().machine().node().expect("a node").to_owned();
    let mut admin = RevokerClient::new(&adm, Revoker::new());
    assert_eq!(admin.revoke(&node).await, Ok(true));
    let asked = tokio::time::timeout(Duration::from_secs(5), holder.driver().next_outcome())
        .await
        .expect("the holder hears of it");
    assert_eq!(asked, LockOutcome::RevokeAsked);
    holder.release().await.expect("released");
    assert_eq!(
        admin.revoke(&node).await,
        Ok(false),
        "nothing left to revoke"
    );

    // 2PC: all commit → commit; one abort → abort, everywhere.
    let base = recording.connect(server).await;
    base.create(&root, b"", CreateMode::Persistent).await.ok();
    for (k, votes) in [[true, true, true], [true, false, true]].iter().enumerate() {
        let tx = format!("{root}/tx{k}");
        base.call(create_transaction(&tx, 3))
            .await
            .expect("transaction");
        let mut sites = Vec::new();
        for (i, &commit) in votes.iter().enumerate() {
            let (zk, tx) = (recording.connect(server).await, tx.clone());
            sites.push(tokio::spawn(async move {
                let mut s = SiteClient::new(&zk, Site::new(&tx, i, 3));
                s.vote(commit).await.expect("vote");
                s.decision().await.expect("decision")
            }));
        }
        let all_commit = votes.iter().all(|&v| v);
        for s in sites {
            let d = tokio::time::timeout(Duration::from_secs(10), s)
                .await
                .expect("decides")
                .expect("the site's task");
            assert_eq!(d, all_commit, "transaction {k}");
        }
    }
    // A site whose session ends after its alive node, before voting: the
    // others write abort for it and abort.
    let tx = format!("{root}/tx-failed");
    base.call(create_transaction(&tx, 2))
        .await
        .expect("transaction");
    let doomed = recording.connect(server).await;
    doomed
        .create(&format!("{tx}/alive-s1"), b"", CreateMode::Ephemeral)
        .await
        .expect("alive");
    let survivor = recording.connect(server).await;
    let tx2 = tx.clone();
    let decided = tokio::spawn(async move {
        let mut s = SiteClient::new(&survivor, Site::new(&tx2, 0, 2));
        s.vote(true).await.expect("vote");
        s.decision().await.expect("decision")
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    doomed.close().await.expect("close");
    let d = tokio::time::timeout(Duration::from_secs(10), decided)
        .await
        .expect("decides after the failure")
        .expect("the site's task");
    assert!(!d, "a failed site's transaction aborts");
    let (vote, _) = base
        .get_data(&format!("{tx}/s1"), false)
        .await
        .expect("vote node");
    assert_eq!(vote, b"abort".to_vec(), "written for the failed site");
    recording.check(test);
    report(test, started);
}

/// The lock across a leader kill on a real 3-node ensemble: the holder is
/// suspended by the election's disconnect and resumes with its session;
/// the waiter gets the lock only after the holder releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_survives_a_leader_kill_on_a_real_ensemble() {
    use zoosim::real_server::RealEnsemble;

    let test = "the_lock_survives_a_leader_kill_on_a_real_ensemble";
    if shared_server(test).is_none() {
        return;
    }
    let started = Instant::now();
    let mut ensemble = tokio::task::spawn_blocking(|| RealEnsemble::start(3))
        .await
        .expect("the fixture's task")
        .expect("a 3-node ensemble");
    let connect_string = ensemble.connect_string();
    let a = RealZk::connect(&connect_string, T_MS)
        .await
        .expect("connect");
    let b = RealZk::connect(&connect_string, T_MS)
        .await
        .expect("connect");
    let dir = format!("{}/lock", fresh_root(test));
    let mut holder = LockClient::new(&a, Lock::new(&dir, "a"));
    let first = holder.acquire().await.expect("a holds");
    let waiter = tokio::spawn(async move {
        let mut lock = LockClient::new(&b, Lock::new(&dir, "b"));
        let token = lock.acquire().await.expect("b acquires");
        lock.release().await.expect("b releases");
        (token, Instant::now())
    });
    let leader = ensemble.leader().expect("a leader");
    let ensemble = tokio::task::spawn_blocking(move || {
        ensemble.kill(leader);
        ensemble
    })
    .await
    .expect("the kill");
    // Every election drops every client: suspended, then resumed with the
    // session intact.
    let mut saw = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !saw.contains(&LockOutcome::Resumed) && Instant::now() < deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        if let Ok(o) = tokio::time::timeout(left, holder.driver().next_outcome()).await {
            saw.push(o);
        }
    }
    assert!(
        saw.contains(&LockOutcome::Suspended) && saw.contains(&LockOutcome::Resumed),
        "the holder was suspended and resumed: {saw:?}"
    );
    assert!(holder.is_holder());
    assert!(!waiter.is_finished(), "the waiter must not get a held lock");
    let released = Instant::now();
    holder.release().await.expect("a releases");
    let (second, at) = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("b gets it")
        .expect("b's task");
    assert!(second > first && at >= released);
    drop(ensemble);
    report(test, started);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_priority_queue_serves_urgent_items_first_on_a_real_server() {
    use zoosim::recipes::queue::{Consumer, Producer, QueueClient};

    let test = "the_priority_queue_serves_urgent_items_first_on_a_real_server";
    let Some(server) = shared_server(test) else {
        return;
    };
    let started = Instant::now();
    let recording = Recording::new();
    let dir = format!("{}/pq", fresh_root(test));
    let zk = recording.connect(server).await;
    // Enqueued in this order, with these priorities (lower first).
    let items = [(5u8, "e"), (1, "a"), (5, "f"), (3, "c"), (1, "b"), (4, "d")];
    for (i, (priority, item)) in items.iter().enumerate() {
        let guid = format!("p{i}");
        let mut p = QueueClient::new(&zk, Producer::new(&dir, &guid, Some(*priority)));
        p.enqueue(item.as_bytes().to_vec()).await.expect("enqueue");
    }
    let mut consumer = QueueClient::new(&zk, Consumer::new(&dir, true));
    let mut taken = Vec::new();
    for _ in 0..items.len() {
        let data = consumer.take().await.expect("take");
        taken.push(String::from_utf8(data).expect("utf-8"));
    }
    // By priority, and by arrival within one priority.
    assert_eq!(taken, ["a", "b", "c", "d", "e", "f"]);
    recording.check(test);
    report(test, started);
}
