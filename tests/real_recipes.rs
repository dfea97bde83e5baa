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
    let mut tasks = Vec::new();
    for c in 0..clients {
        let zk = connect(server).await;
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
    report(test, started);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_holder_session_passes_the_lock_on() {
    let test = "a_closed_holder_session_passes_the_lock_on";
    let Some(server) = shared_server(test) else {
        return;
    };
    let started = Instant::now();
    let dir = format!("{}/lock", fresh_root(test));
    let (a, b) = (connect(server).await, connect(server).await);
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
    let dir = format!("{}/queue", fresh_root(test));
    let log: Arc<Mutex<Vec<Entry<QueueEvent>>>> = Arc::default();
    let (producers, items) = (2usize, 15usize);
    let total = producers * items;
    let mut tasks = Vec::new();
    for p in 0..producers {
        let (zk, dir, log) = (connect(server).await, dir.clone(), log.clone());
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
        let (zk, dir, log) = (connect(server).await, dir.clone(), log.clone());
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
    let zk = connect(server).await;
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
    let root = fresh_root(test);
    // Three candidates: one leads at a time, each new leader's epoch larger.
    // Leaked: the candidates' tasks outlive this scope's borrows.
    let a = connect(server).await;
    let b: &'static RealZk = Box::leak(Box::new(connect(server).await));
    let c: &'static RealZk = Box::leak(Box::new(connect(server).await));
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
        connect(server).await,
        connect(server).await,
        connect(server).await,
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
    report(test, started);
}
