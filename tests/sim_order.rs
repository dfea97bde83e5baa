//! One ordered stream of replies and events, and pipelined requests: the
//! orders a real client produces, shown happening and handled.
//!
//! * in the simulator, a watch event the server sent while pipelined
//!   requests were in flight comes before their replies, and every reply
//!   sits on the right side of it (reads before it show the old data,
//!   reads after it the new);
//! * a broken connection fails the requests in flight with ConnectionLoss
//!   in issue order, then Disconnected; a close while disconnected fails
//!   the held ones with SessionExpired, then Closed;
//! * the Driver sends every request a machine queues at once;
//! * the lock, driven over a scripted handle, takes a NodeDeleted that
//!   comes before the reply of its exists() and still acquires.

#[cfg(not(madsim))]
compile_error!(
    "tests/sim_order.rs needs `--cfg madsim`, which .cargo/config.toml sets; \
     a RUSTFLAGS environment variable replaces it: add `--cfg madsim` to it"
);

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::task::Poll;
use std::time::Duration;

mod common;

use futures::FutureExt;
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Runtime;
use madsim::time::{sleep, timeout};
use zoosim::client::{Delivery, Ticket, Zk, ZkExt};
use zoosim::ensemble::sim::{Ensemble, EnsembleConfig, SimZk};
use zoosim::proto::{
    ClientEvent, CreateMode, EventType, Op, Reply, SessionEvent, SessionId, Stat, WatchEvent,
    ZkError,
};
use zoosim::recipes::lock::{Lock, LockCommand, LockOutcome};
use zoosim::recipes::{Driver, Input, Machine, OpId, Output};

const T_MS: u64 = 4000;

fn runtime(seed: u64) -> Runtime {
    Runtime::with_seed_and_config(seed, madsim::Config::default())
}

fn config() -> EnsembleConfig {
    EnsembleConfig {
        servers: 3,
        ..EnsembleConfig::default()
    }
}

async fn next(zk: &impl Zk) -> Delivery {
    timeout(Duration::from_secs(5), zk.next_delivery())
        .await
        .expect("a delivery within 5 s")
}

/// Empties the stream (the first Connected, say).
fn drain(zk: &impl Zk) -> Vec<Delivery> {
    std::iter::from_fn(|| zk.try_next_delivery()).collect()
}

#[test]
fn a_write_fires_its_own_sessions_watch_before_its_reply_and_the_pipelined_read_behind_it() {
    common::sweep(
        "sim_order",
        "a_write_fires_its_own",
        0x0de5_0000,
        10,
        |seed| {
            runtime(seed).block_on(async {
                let e = Ensemble::start(config());
                let a = e.client(0).timeout_ms(T_MS).connect().await.unwrap();
                a.create("/x", b"0", CreateMode::Persistent).await.unwrap();
                assert!(a.exists("/x", true).await.unwrap().is_some());
                drain(&a);
                let set = a.submit(Op::SetData {
                    path: "/x".into(),
                    data: b"1".to_vec(),
                    version: -1,
                });
                let get = a.submit(Op::GetData {
                    path: "/x".into(),
                    watch: false,
                });
                let changed = Delivery::Event(ClientEvent::Watch(WatchEvent {
                    event_type: EventType::NodeDataChanged,
                    path: "/x".into(),
                }));
                assert_eq!(next(&a).await, changed, "the notification first");
                assert!(
                    matches!(next(&a).await, Delivery::Reply(t, Ok(Reply::SetData(_))) if t == set)
                );
                match next(&a).await {
                    Delivery::Reply(t, Ok(Reply::GetData { data, .. })) if t == get => {
                        assert_eq!(data, b"1")
                    }
                    other => panic!("expected the read's reply, got {other:?}"),
                }
                assert_eq!(drain(&a), vec![]);
            })
        },
    );
}

#[test]
fn another_clients_write_lands_among_pipelined_reads_exactly_where_the_server_sent_it() {
    let overtaken = common::sweep(
        "sim_order",
        "another_clients_write",
        0x0de6_0000,
        10,
        |seed| {
            runtime(seed).block_on(async {
                let e = Ensemble::start(config());
                let a = e.client(0).timeout_ms(T_MS).connect().await.unwrap();
                let b = e.client(1).timeout_ms(T_MS).connect().await.unwrap();
                a.create("/x", b"", CreateMode::Persistent).await.unwrap();
                a.exists("/x", true).await.unwrap();
                drain(&a);
                let writer = madsim::task::spawn(async move {
                    sleep(Duration::from_millis(thread_rng().gen_range(20..200))).await;
                    b.set_data("/x", b"new", -1).await.unwrap();
                    b
                });
                // Four reads in flight at all times, a new one per reply, until
                // the event has come and four more replies after it.
                let read = || Op::GetData {
                    path: "/x".into(),
                    watch: false,
                };
                let mut in_flight: VecDeque<Ticket> = (0..4).map(|_| a.submit(read())).collect();
                let (mut before, mut after, mut behind) = (0, 0, 0);
                let mut event_seen = false;
                while !(event_seen && after >= 4) {
                    match next(&a).await {
                        Delivery::Reply(t, Ok(Reply::GetData { data, .. })) => {
                            assert_eq!(Some(t), in_flight.pop_front(), "replies in issue order");
                            let new = data == b"new";
                            assert_eq!(new, event_seen, "a read on the wrong side of the event");
                            if event_seen {
                                after += 1;
                            } else {
                                before += 1;
                            }
                            if !event_seen || after < 4 {
                                in_flight.push_back(a.submit(read()));
                            }
                        }
                        Delivery::Event(ClientEvent::Watch(w)) => {
                            assert_eq!(w.event_type, EventType::NodeDataChanged);
                            assert!(!event_seen, "one event");
                            event_seen = true;
                            // Sent before the event, answered after it.
                            behind = in_flight.len();
                        }
                        other => panic!("unexpected {other:?}"),
                    }
                }
                writer.await.unwrap();
                assert!(before > 0, "reads answered before the write");
                behind
            })
        },
    );
    // Every seed: requests that were in flight when the notification was
    // sent have their replies delivered after it.
    assert!(overtaken.iter().all(|&n| n > 0), "{overtaken:?}");
}

#[test]
fn a_break_fails_the_requests_in_flight_in_issue_order_then_disconnected() {
    common::sweep("sim_order", "a_break_fails", 0x0de7_0000, 10, |seed| {
        runtime(seed).block_on(async {
            let e = Ensemble::start(config());
            let a = e.client(0).timeout_ms(T_MS).connect().await.unwrap();
            drain(&a);
            let create = |i: u32| Op::Create {
                path: format!("/n{i}"),
                data: vec![],
                mode: CreateMode::Persistent,
            };
            let sent: Vec<Ticket> = (0..3).map(|i| a.submit(create(i))).collect();
            a.break_connection();
            let mut want: Vec<Delivery> = sent
                .iter()
                .map(|&t| Delivery::Reply(t, Err(ZkError::ConnectionLoss)))
                .collect();
            want.push(Delivery::Event(ClientEvent::Session(
                SessionEvent::Disconnected,
            )));
            assert_eq!(drain(&a), want);
            // Held while disconnected; the close ends the handle: they fail
            // with SessionExpired, in issue order, then Closed.
            let held: Vec<Ticket> = (3..5).map(|i| a.submit(create(i))).collect();
            a.close().await.unwrap();
            let mut want: Vec<Delivery> = held
                .iter()
                .map(|&t| Delivery::Reply(t, Err(ZkError::SessionExpired)))
                .collect();
            want.push(Delivery::Event(ClientEvent::Session(SessionEvent::Closed)));
            assert_eq!(drain(&a), want);
        })
    });
}

/// Reads `/` n times at once; reports the ids in the order the replies came.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
struct Burst {
    next: OpId,
    waiting: usize,
    replies: Vec<OpId>,
    out: VecDeque<Output<Vec<OpId>>>,
}

impl Machine for Burst {
    type Command = usize;
    type Outcome = Vec<OpId>;

    fn handle(&mut self, input: Input<usize>) {
        match input {
            Input::Command(n) => {
                for _ in 0..n {
                    let op = Op::GetData {
                        path: "/".into(),
                        watch: false,
                    };
                    self.out.push_back(Output::Send(self.next, op));
                    self.next += 1;
                }
                self.waiting = n;
            }
            Input::Reply(id, Ok(_)) => {
                self.replies.push(id);
                self.waiting -= 1;
                if self.waiting == 0 {
                    let replies = std::mem::take(&mut self.replies);
                    self.out.push_back(Output::Outcome(replies));
                }
            }
            Input::Reply(_, Err(e)) => panic!("read failed: {e:?}"),
            Input::Watch(_) | Input::Session(_) => {}
        }
    }

    fn poll(&mut self) -> Option<Output<Vec<OpId>>> {
        self.out.pop_front()
    }
}

/// A SimZk that counts the submitted requests whose replies have not been
/// taken yet, and the most there ever were.
struct Counting<'a> {
    zk: &'a SimZk,
    outstanding: AtomicUsize,
    most: AtomicUsize,
}

impl Counting<'_> {
    fn taken(&self, d: &Delivery) {
        if let Delivery::Reply(..) = d {
            self.outstanding.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Zk for Counting<'_> {
    fn session_id(&self) -> SessionId {
        self.zk.session_id()
    }
    fn session_timeout_ms(&self) -> u64 {
        self.zk.session_timeout_ms()
    }
    fn call(&self, op: Op) -> impl Future<Output = Result<Reply, ZkError>> + Send {
        self.zk.call(op)
    }
    fn submit(&self, op: Op) -> Ticket {
        let now = self.outstanding.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.zk.submit(op)
    }
    async fn next_delivery(&self) -> Delivery {
        let d = self.zk.next_delivery().await;
        self.taken(&d);
        d
    }
    fn try_next_delivery(&self) -> Option<Delivery> {
        let d = self.zk.try_next_delivery()?;
        self.taken(&d);
        Some(d)
    }
    fn next_event(&self) -> impl Future<Output = ClientEvent> + Send {
        self.zk.next_event()
    }
    fn try_next_event(&self) -> Option<ClientEvent> {
        self.zk.try_next_event()
    }
    fn close(&self) -> impl Future<Output = Result<(), ZkError>> + Send {
        self.zk.close()
    }
}

#[test]
fn the_driver_sends_every_queued_request_before_the_first_reply() {
    common::sweep("sim_order", "the_driver_sends", 0x0de8_0000, 5, |seed| {
        runtime(seed).block_on(async {
            let e = Ensemble::start(config());
            let zk = e.client(0).timeout_ms(T_MS).connect().await.unwrap();
            let counting = Counting {
                zk: &zk,
                outstanding: AtomicUsize::new(0),
                most: AtomicUsize::new(0),
            };
            let mut driver = Driver::new(&counting, Burst::default());
            driver.command(5);
            let replies = timeout(Duration::from_secs(5), driver.next_outcome())
                .await
                .expect("the burst is answered");
            assert_eq!(replies, vec![0, 1, 2, 3, 4], "answered in issue order");
            assert_eq!(
                counting.most.load(Ordering::SeqCst),
                5,
                "all five in flight at once"
            );
            assert_eq!(driver.in_flight(), 0);
        })
    });
}

/// A handle whose stream the test writes: what the machine sent is kept,
/// deliveries are queued by hand, and waiting on an empty stream pends.
#[derive(Default)]
struct Scripted {
    sent: Mutex<Vec<(Ticket, Op)>>,
    stream: Mutex<VecDeque<Delivery>>,
}

impl Scripted {
    fn push(&self, d: Delivery) {
        self.stream.lock().unwrap().push_back(d);
    }

    fn reply_to_last(&self, r: Result<Reply, ZkError>) {
        let (t, _) = self
            .sent
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("a request");
        self.push(Delivery::Reply(t, r));
    }

    fn last_op(&self) -> Op {
        self.sent
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("a request")
            .1
    }
}

impl Zk for Scripted {
    fn session_id(&self) -> SessionId {
        SessionId(1)
    }
    fn session_timeout_ms(&self) -> u64 {
        T_MS
    }
    async fn call(&self, _op: Op) -> Result<Reply, ZkError> {
        Err(ZkError::ConnectionLoss)
    }
    fn submit(&self, op: Op) -> Ticket {
        let mut sent = self.sent.lock().unwrap();
        let t = Ticket(sent.len() as u64);
        sent.push((t, op));
        t
    }
    fn next_delivery(&self) -> impl Future<Output = Delivery> + Send {
        futures::future::poll_fn(|_| match self.try_next_delivery() {
            Some(d) => Poll::Ready(d),
            None => Poll::Pending,
        })
    }
    fn try_next_delivery(&self) -> Option<Delivery> {
        self.stream.lock().unwrap().pop_front()
    }
    fn next_event(&self) -> impl Future<Output = ClientEvent> + Send {
        futures::future::pending()
    }
    fn try_next_event(&self) -> Option<ClientEvent> {
        None
    }
    async fn close(&self) -> Result<(), ZkError> {
        Ok(())
    }
}

/// Runs the driver until it waits on an empty stream (each wait given up
/// at once: the driver must lose nothing), and returns what it reported.
fn settle(driver: &mut Driver<'_, Scripted, Lock>) -> Vec<LockOutcome> {
    while driver.step().now_or_never().is_some() {}
    std::iter::from_fn(|| driver.take_outcome()).collect()
}

fn stat() -> Stat {
    Stat {
        czxid: 5,
        mzxid: 5,
        ..Stat::default()
    }
}

/// The lock waits behind `p-lock-1`; its exists() on it is in flight when
/// the predecessor goes. The server can send that in two orders, both
/// handled: the delete before the exists (a NodeDeleted from an earlier
/// watch first, then "gone"), or after it ("there", then NodeDeleted).
#[test]
fn the_lock_acquires_whether_the_deletion_comes_before_or_after_its_exists_reply() {
    for event_first in [true, false] {
        let zk = Scripted::default();
        let mut driver = Driver::new(&zk, Lock::new("/l", "g"));
        driver.command(LockCommand::Acquire);
        assert_eq!(settle(&mut driver), vec![]);
        assert!(matches!(zk.last_op(), Op::Create { path, .. } if path == "/l/g-lock-"));
        zk.reply_to_last(Ok(Reply::Create {
            path: "/l/g-lock-0000000002".into(),
            stat: stat(),
        }));
        assert_eq!(settle(&mut driver), vec![]);
        assert!(matches!(zk.last_op(), Op::GetChildren { path, .. } if path == "/l"));
        zk.reply_to_last(Ok(Reply::GetChildren {
            children: vec!["g-lock-0000000002".into(), "p-lock-0000000001".into()],
            stat: stat(),
        }));
        assert_eq!(settle(&mut driver), vec![]);
        let pred = "/l/p-lock-0000000001";
        assert_eq!(
            zk.last_op(),
            Op::Exists {
                path: pred.into(),
                watch: true
            }
        );
        let deleted = Delivery::Event(ClientEvent::Watch(WatchEvent {
            event_type: EventType::NodeDeleted,
            path: pred.into(),
        }));
        // An unrelated event on the way changes nothing.
        zk.push(Delivery::Event(ClientEvent::Watch(WatchEvent {
            event_type: EventType::NodeChildrenChanged,
            path: "/elsewhere".into(),
        })));
        if event_first {
            zk.push(deleted);
            zk.reply_to_last(Ok(Reply::Exists(None)));
        } else {
            zk.reply_to_last(Ok(Reply::Exists(Some(stat()))));
            zk.push(deleted);
        }
        let woken = LockOutcome::Woken { path: pred.into() };
        assert_eq!(
            settle(&mut driver),
            vec![woken],
            "event first: {event_first}"
        );
        assert!(
            matches!(zk.last_op(), Op::GetChildren { path, .. } if path == "/l"),
            "lists again (event first: {event_first})"
        );
        zk.reply_to_last(Ok(Reply::GetChildren {
            children: vec!["g-lock-0000000002".into()],
            stat: stat(),
        }));
        assert_eq!(
            settle(&mut driver),
            vec![LockOutcome::Acquired {
                node: "/l/g-lock-0000000002".into(),
                token: 2,
            }],
            "event first: {event_first}"
        );
        // Nothing left unanswered, nothing sent twice.
        let sent = zk.sent.lock().unwrap().len();
        assert_eq!(sent, 4, "create, list, exists, list again");
        assert_eq!(driver.in_flight(), 0);
    }
}
