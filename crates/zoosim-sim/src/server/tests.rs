//! The server state machine over an in-memory network that keeps each link
//! FIFO but interleaves links in a seeded order.

use std::collections::{BTreeMap, VecDeque};

use super::*;
use zoosim_core::proto::{CreateMode, EventType, Reply};

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Node {
    Server(ServerId),
    Conn(ConnId),
}

enum Msg {
    Peer(ServerId, PeerMsg),
    Client(ClientMsg),
    Server(ServerMsg),
}

struct Net {
    servers: Vec<Server>,
    /// conn → the server holding it.
    homes: BTreeMap<ConnId, ServerId>,
    links: BTreeMap<(Node, Node), VecDeque<Msg>>,
    inbox: BTreeMap<ConnId, Vec<ServerMsg>>,
    rng: u64,
    now_ms: i64,
}

impl Net {
    fn new(n: u32, seed: u64) -> Net {
        let servers = (0..n)
            .map(|id| Server::new(ServerConfig::new(id, n, 500)))
            .collect();
        Net {
            servers,
            homes: BTreeMap::new(),
            links: BTreeMap::new(),
            inbox: BTreeMap::new(),
            rng: seed.wrapping_mul(6364136223846793005).wrapping_add(1),
            now_ms: 0,
        }
    }

    fn send(&mut self, from: Node, outs: Vec<Output>) {
        for o in outs {
            let (to, msg) = match (from, o) {
                (Node::Server(s), Output::Peer { to, msg }) => {
                    (Node::Server(to), Msg::Peer(s, msg))
                }
                (_, Output::Client { conn, msg }) => (Node::Conn(conn), Msg::Server(msg)),
                (Node::Conn(_), Output::Peer { .. }) => unreachable!(),
            };
            self.links.entry((from, to)).or_default().push_back(msg);
        }
    }

    fn client(&mut self, conn: ConnId, msg: ClientMsg) {
        let home = self.homes[&conn];
        self.links
            .entry((Node::Conn(conn), Node::Server(home)))
            .or_default()
            .push_back(Msg::Client(msg));
    }

    /// Delivers one message from a pseudo-randomly chosen non-empty link.
    fn step(&mut self) -> bool {
        let busy: Vec<_> = self
            .links
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(k, _)| *k)
            .collect();
        if busy.is_empty() {
            return false;
        }
        self.rng = self
            .rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (from, to) = busy[(self.rng >> 33) as usize % busy.len()];
        let msg = self
            .links
            .get_mut(&(from, to))
            .unwrap()
            .pop_front()
            .unwrap();
        self.now_ms += 1;
        let mut out = Vec::new();
        match (to, msg) {
            (Node::Server(s), Msg::Peer(from, m)) => {
                self.servers[s as usize].on_peer(self.now_ms, from, m, &mut out)
            }
            (Node::Server(s), Msg::Client(m)) => {
                let Node::Conn(conn) = from else {
                    unreachable!()
                };
                self.servers[s as usize].on_client(self.now_ms, conn, m, &mut out)
            }
            (Node::Conn(c), Msg::Server(m)) => self.inbox.entry(c).or_default().push(m),
            _ => unreachable!(),
        }
        self.send(to, out);
        true
    }

    fn run(&mut self) {
        while self.step() {}
    }

    fn connect(&mut self, conn: ConnId, home: ServerId) -> SessionId {
        self.homes.insert(conn, home);
        self.client(
            conn,
            ClientMsg::Connect {
                session: None,
                last_zxid: 0,
                timeout_ms: 4000,
                watches: Default::default(),
            },
        );
        self.run();
        match self.inbox.get_mut(&conn).and_then(|v| v.pop()) {
            Some(ServerMsg::Connected {
                session,
                timeout_ms,
            }) => {
                assert_eq!(timeout_ms, 4000);
                session
            }
            other => panic!("{other:?}"),
        }
    }

    fn replies(&self, conn: ConnId) -> Vec<(i64, Zxid, Result<Reply, ZkError>)> {
        self.inbox
            .get(&conn)
            .into_iter()
            .flatten()
            .filter_map(|m| match m {
                ServerMsg::Reply { xid, zxid, result } => Some((*xid, *zxid, result.clone())),
                _ => None,
            })
            .collect()
    }
}

fn create(path: &str, mode: CreateMode) -> Op {
    Op::Create {
        path: path.into(),
        data: vec![],
        mode,
    }
}

#[test]
fn writes_replicate_in_zxid_order_on_every_server() {
    for seed in 0..50 {
        let mut net = Net::new(3, seed);
        for conn in 0..3 {
            net.connect(conn, conn as ServerId);
        }
        for i in 0..10 {
            for conn in 0..3u64 {
                let op = create(&format!("/c{conn}-"), CreateMode::PersistentSequential);
                net.client(conn, ClientMsg::Request { xid: i, op });
            }
        }
        net.run();
        let logs: Vec<Vec<Zxid>> = net
            .servers
            .iter()
            .map(|s| s.applied_zxids().collect())
            .collect();
        assert_eq!(logs[0].len(), 3 + 30, "3 sessions + 30 creates");
        assert!(
            logs.iter().all(|l| l == &logs[0]),
            "seed {seed}: replicas differ"
        );
        assert!(net
            .servers
            .iter()
            .all(|s| s.tree() == net.servers[0].tree()));
        let mut all = Vec::new();
        for conn in 0..3 {
            let r = net.replies(conn);
            let xids: Vec<_> = r.iter().map(|(x, _, _)| *x).collect();
            assert_eq!(xids, (0..10).collect::<Vec<_>>(), "FIFO per connection");
            assert!(r.windows(2).all(|w| w[0].1 < w[1].1), "zxids grow");
            let names: Vec<_> = r
                .iter()
                .map(|(_, _, res)| match res {
                    Ok(Reply::Create { path, .. }) => path.clone(),
                    other => panic!("{other:?}"),
                })
                .collect();
            let seqs: Vec<i64> = names
                .iter()
                .map(|n| n[n.len() - 10..].parse().unwrap())
                .collect();
            assert!(
                seqs.windows(2).all(|w| w[0] < w[1]),
                "sequence follows zxid order"
            );
            all.extend(seqs);
        }
        all.sort();
        assert_eq!(
            all,
            (0..30).collect::<Vec<_>>(),
            "one counter, no gaps, no repeats"
        );
    }
}

#[test]
fn reads_wait_for_the_connections_earlier_writes() {
    for seed in 0..50 {
        let mut net = Net::new(3, seed);
        net.connect(7, 2);
        net.client(
            7,
            ClientMsg::Request {
                xid: 1,
                op: create("/a", CreateMode::Persistent),
            },
        );
        net.client(
            7,
            ClientMsg::Request {
                xid: 2,
                op: Op::Exists {
                    path: "/a".into(),
                    watch: false,
                },
            },
        );
        net.run();
        let r = net.replies(7);
        assert_eq!(r.len(), 2);
        assert!(
            matches!(r[1].2, Ok(Reply::Exists(Some(_)))),
            "seed {seed}: read your writes"
        );
    }
}

#[test]
fn failed_writes_are_sequenced_too() {
    let mut net = Net::new(3, 1);
    net.connect(1, 1);
    for xid in 0..2 {
        net.client(
            1,
            ClientMsg::Request {
                xid,
                op: create("/a", CreateMode::Persistent),
            },
        );
    }
    net.run();
    let r = net.replies(1);
    assert_eq!(r[1].2, Err(ZkError::NodeExists));
    assert_eq!(r[1].1, r[0].1 + 1, "the failure used a zxid");
    assert_eq!(net.servers[2].tree().last_zxid(), r[1].1);
}

#[test]
fn sync_then_read_sees_other_clients_writes() {
    for seed in 0..50 {
        let mut net = Net::new(3, seed);
        net.connect(1, 1);
        net.connect(2, 2);
        net.client(
            1,
            ClientMsg::Request {
                xid: 1,
                op: create("/x", CreateMode::Persistent),
            },
        );
        // Run until client 1 has its reply, not longer.
        while net.replies(1).is_empty() {
            assert!(net.step());
        }
        net.client(
            2,
            ClientMsg::Request {
                xid: 1,
                op: Op::Sync { path: "/".into() },
            },
        );
        net.client(
            2,
            ClientMsg::Request {
                xid: 2,
                op: Op::Exists {
                    path: "/x".into(),
                    watch: false,
                },
            },
        );
        net.run();
        let r = net.replies(2);
        assert_eq!(r[0].2, Ok(Reply::Sync));
        assert!(
            matches!(r[1].2, Ok(Reply::Exists(Some(_)))),
            "seed {seed}: stale after sync"
        );
    }
}

#[test]
fn watch_events_reach_the_watching_connection_before_later_replies() {
    let mut net = Net::new(3, 3);
    net.connect(1, 1);
    net.connect(2, 2);
    net.client(
        1,
        ClientMsg::Request {
            xid: 1,
            op: Op::Exists {
                path: "/w".into(),
                watch: true,
            },
        },
    );
    net.run();
    net.client(
        2,
        ClientMsg::Request {
            xid: 1,
            op: create("/w", CreateMode::Ephemeral),
        },
    );
    net.run();
    net.client(
        1,
        ClientMsg::Request {
            xid: 2,
            op: Op::Exists {
                path: "/w".into(),
                watch: false,
            },
        },
    );
    net.run();
    let inbox = &net.inbox[&1];
    let watch_at = inbox
        .iter()
        .position(|m| matches!(m, ServerMsg::Watch(e) if e.event_type == EventType::NodeCreated))
        .expect("NodeCreated delivered");
    let reply_at = inbox
        .iter()
        .position(|m| matches!(m, ServerMsg::Reply { xid: 2, .. }))
        .unwrap();
    assert!(watch_at < reply_at);
}

/// Server 2 restarts and becomes a candidate: server 1's vote and its
/// FollowerInfo (attempt 1000) reach it, so it decides epoch 2 (accepting
/// it itself); what it sends goes to `out`.
fn candidate_with_a_follower(net: &mut Net, out: &mut Vec<Output>) {
    net.servers[2].restart(out);
    net.servers[2].on_peer(0, 1, PeerMsg::Vote(LOOKING_AT_EPOCH_1), out);
    assert!(matches!(net.servers[2].role, Role::Leading(_)));
    net.servers[2].on_peer(0, 1, FOLLOWER_INFO_1000, out);
    assert_eq!(net.servers[2].accepted_epoch, 2);
}

const LOOKING_AT_EPOCH_1: Vote = Vote {
    current_epoch: 1,
    last_zxid: 0,
    state: PeerState::Looking,
};

const FOLLOWER_INFO_1000: PeerMsg = PeerMsg::Learner {
    attempt: 1000,
    msg: LearnerMsg::FollowerInfo { accepted_epoch: 1 },
};

/// Review repro: a server that accepted a newer epoch from a candidate that
/// never got a quorum must still rejoin the established (older-epoch)
/// leader eventually.
#[test]
fn a_server_that_accepted_a_failed_candidates_epoch_rejoins() {
    let mut net = Net::new(3, 7);
    // Nothing server 2 sends as a candidate arrives anywhere.
    let mut lost = Vec::new();
    candidate_with_a_follower(&mut net, &mut lost);
    // The ensemble runs on: ticks, each followed by a bounded number of
    // deliveries (a refused follower retries at message speed).
    for _ in 0..100 {
        net.now_ms += 500;
        for s in 0..3 {
            let mut out = Vec::new();
            net.servers[s].on_tick(net.now_ms, &mut out);
            net.send(Node::Server(s as ServerId), out);
        }
        for _ in 0..200 {
            if !net.step() {
                break;
            }
        }
    }
    let states: Vec<String> = net.servers.iter().map(|s| s.describe()).collect();
    for s in &net.servers {
        assert!(s.is_serving(), "{states:#?}");
    }
}

#[test]
fn messages_on_a_connection_of_an_ended_leadership_never_reach_the_next_one() {
    // Server 2 leads, server 1's attempt 1000 connects and the epoch (2)
    // is proposed; then server 2 gives up and leads again. What server 1
    // sent on attempt 1000 and a partition held back (its FollowerInfo
    // again, its AckEpoch for epoch 2) must not count for the new
    // leadership's epoch: that let two leaders run one epoch (revocable-lock
    // seed 1309409566, replicas diverged).
    let mut net = Net::new(3, 7);
    let mut lost = Vec::new();
    candidate_with_a_follower(&mut net, &mut lost);
    net.servers[2].look(&mut lost);
    net.servers[2].on_peer(0, 1, PeerMsg::Vote(LOOKING_AT_EPOCH_1), &mut lost);
    assert!(matches!(net.servers[2].role, Role::Leading(_)));
    let ack = LearnerMsg::AckEpoch {
        current_epoch: 1,
        last_zxid: 0,
        counts: true,
    };
    net.servers[2].on_peer(0, 1, FOLLOWER_INFO_1000, &mut lost);
    let ack = PeerMsg::Learner {
        attempt: 1000,
        msg: ack,
    };
    net.servers[2].on_peer(0, 1, ack, &mut lost);
    // Neither counted: no learner, so no epoch proposed (it would be 3),
    // and no quorum acked one.
    assert!(matches!(net.servers[2].role, Role::Leading(_)));
    assert_eq!(net.servers[2].accepted_epoch, 2, "no epoch proposed");
    assert_eq!(
        net.servers[2].current_epoch, 1,
        "no quorum acked a new epoch"
    );
    // A new attempt of the same follower is a new connection: welcome.
    let fresh = PeerMsg::Learner {
        attempt: 1001,
        msg: LearnerMsg::FollowerInfo { accepted_epoch: 2 },
    };
    net.servers[2].on_peer(0, 1, fresh, &mut lost);
    assert_eq!(net.servers[2].accepted_epoch, 3, "the epoch proposed to it");
}

#[test]
fn a_broken_tree_fails_its_server_at_the_next_check() {
    let set_b = |xid| ClientMsg::Request {
        xid,
        op: Op::SetData {
            path: "/b".into(),
            data: vec![],
            version: -1,
        },
    };
    let mut net = Net::new(3, 7);
    net.connect(0, 0);
    for (xid, path) in [(0, "/a"), (1, "/b")] {
        let op = create(path, CreateMode::Persistent);
        net.client(0, ClientMsg::Request { xid, op });
    }
    net.run();
    // Server 1's replica forgets that `/` lists `a`: its log and every
    // other replica are fine, and nothing the clients do touches `/a`.
    let broken = &mut net.servers[1];
    assert!(broken.tree.check_invariants().is_ok());
    let root = std::sync::Arc::make_mut(broken.tree.nodes_mut_for_test().get_mut("/").unwrap());
    assert!(root.children.remove("a"));
    let applied = broken.applied;
    assert_eq!(applied, 3, "createSession and two creates");
    let next_check = (applied / TREE_CHECK_INTERVAL + 1) * TREE_CHECK_INTERVAL;
    // Up to the txn before the check, unnoticed ...
    let mut xid = 2;
    while xid - 2 < (next_check - applied - 1) as i64 {
        net.client(0, set_b(xid));
        xid += 1;
    }
    net.run();
    assert_eq!(net.servers[1].applied, next_check - 1);
    assert_eq!(net.replies(0).len(), next_check - 2, "every write answered");
    // ... and the next txn fails the server, naming the invariant.
    net.client(0, set_b(xid));
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| net.run()))
        .expect_err("the broken replica is caught");
    let message = panic
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(
        message.starts_with(
            "server 1: tree invariant listed-by-parent broken: /a: not listed by its parent"
        ),
        "{message}"
    );
}
