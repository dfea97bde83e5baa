//! The JSON-lines round trip, the reader's errors (each a deliberately
//! broken history, caught with its line), the pairing helpers and the EDN
//! mapping.

use std::time::Duration;

use proptest::prelude::*;

use super::json::{parse, record_line, to_string, ParseErrorKind};
use super::*;
use crate::proto::{CreateMode, EventType, MultiOp, MultiResult, Stat};

fn meta() -> Meta {
    Meta {
        format: FORMAT_VERSION,
        scenario: "lock".into(),
        file: Some("scenarios/lock.toml".into()),
        seed: 7,
        zoosim: "0.1.0".into(),
        servers: 3,
        session_timeout_ms: 4000,
        tick_ms: None,
        sync_limit_ticks: None,
    }
}

fn actor(c: u32) -> Actor {
    Actor {
        client: Some(c),
        handle: c + 1,
    }
}

fn invoke(at_ns: u64, id: u64, c: u32, op: HistOp) -> Record {
    Record {
        at_ns,
        event: Event::Invoke(Invoke {
            id: OpId(id),
            actor: actor(c),
            session: Some(SessionId(0x1000_0001_0000_0001)),
            xid: Some(id as i64 + 1),
            op,
        }),
    }
}

fn complete(at_ns: u64, id: u64, c: u32, outcome: Outcome) -> Record {
    Record {
        at_ns,
        event: Event::Complete(Complete {
            id: OpId(id),
            actor: actor(c),
            server: Some(1),
            zxid: Some(0x1_0000_0003),
            outcome,
        }),
    }
}

fn get(path: &str) -> HistOp {
    HistOp::Zk(Op::GetData {
        path: path.into(),
        watch: true,
    })
}

fn set(path: &str, data: &[u8]) -> HistOp {
    HistOp::Zk(Op::SetData {
        path: path.into(),
        data: data.to_vec(),
        version: -1,
    })
}

fn stat(v: i32) -> Stat {
    Stat {
        czxid: 3,
        mzxid: 4,
        version: v,
        ephemeral_owner: 0x1000_0001_0000_0001,
        ..Stat::default()
    }
}

/// A small history with one of every record kind.
fn sample() -> History {
    let records = vec![
        Record {
            at_ns: 0,
            event: Event::Role(RoleChange {
                server: 0,
                process: 1,
                role: Role::Leading,
                epoch: 1,
                serving: true,
            }),
        },
        Record {
            at_ns: 5,
            event: Event::Session(SessionChange {
                actor: actor(0),
                session: Some(SessionId(0x1000_0001_0000_0001)),
                state: SessionEvent::Connected,
                server: Some(2),
            }),
        },
        invoke(10, 0, 0, set("/a", b"x")),
        invoke(11, 1, 1, get("/a")),
        complete(
            20,
            1,
            1,
            Outcome::Ok(Some(Reply::GetData {
                data: vec![0xff, 0, b'"'],
                stat: stat(1),
            })),
        ),
        Record {
            at_ns: 21,
            event: Event::Fault(FaultRecord {
                fault: "partition".into(),
                params: FaultParams {
                    split: Some(vec![0]),
                    flips: Some(vec![(vec![1, 2], Duration::from_millis(500))]),
                    window: Some(Duration::from_millis(1500)),
                    ..FaultParams::default()
                },
                skipped: false,
            }),
        },
        complete(30, 0, 0, Outcome::Err(ZkError::ConnectionLoss)),
        Record {
            at_ns: 31,
            event: Event::Watch(Watched {
                actor: actor(1),
                session: None,
                server: Some(0),
                event: WatchEvent {
                    event_type: EventType::NodeDataChanged,
                    path: "/a".into(),
                },
            }),
        },
        Record {
            at_ns: 40,
            event: Event::Invoke(Invoke {
                id: OpId(2),
                actor: actor(1),
                session: None,
                xid: None,
                op: HistOp::CloseSession,
            }),
        },
        Record {
            at_ns: 41,
            event: Event::Complete(Complete {
                id: OpId(2),
                actor: actor(1),
                server: Some(0),
                zxid: None,
                outcome: Outcome::Ok(None),
            }),
        },
    ];
    History {
        meta: meta(),
        records,
    }
}

#[test]
fn a_history_survives_the_round_trip_and_pairs_its_ops() {
    let h = sample();
    let text = to_string(&h);
    assert_eq!(parse(&text), Ok(h.clone()), "{text}");
    assert!(
        text.starts_with("{\"kind\":\"meta\",\"format\":1,"),
        "{text}"
    );
    // Non-UTF-8 bytes as hex, in full.
    assert!(text.contains("\"data\":{\"hex\":\"ff0022\"}"), "{text}");
    let ops = h.ops();
    assert_eq!(ops.len(), 3);
    assert_eq!(ops[0].invoke.id, OpId(0));
    assert_eq!(ops[0].complete.map(|(t, _)| t), Some(30));
    assert!(ops[0].complete.unwrap().1.outcome.is_indeterminate());
    let by = h.ops_by_client();
    assert_eq!(by[&Some(1)].len(), 2);
    assert_eq!(h.counts()["invoke"], 3);
}

/// The sample's text with line `n` (1-based) replaced.
fn with_line(n: usize, line: &str) -> String {
    let text = to_string(&sample());
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[n - 1] = line.to_owned();
    lines.join("\n")
}

fn kind_at(text: &str) -> (usize, ParseErrorKind) {
    let e = parse(text).expect_err("a broken history is refused");
    (e.line, e.kind)
}

#[test]
fn a_broken_history_is_refused_with_its_line() {
    let text = to_string(&sample());
    let lines: Vec<&str> = text.lines().collect();
    // Truncated mid-line.
    let cut = format!("{}\n{}", lines[0], &lines[1][..lines[1].len() / 2]);
    assert!(matches!(kind_at(&cut), (2, ParseErrorKind::NotJson(_))));
    // Unknown kind.
    assert_eq!(
        kind_at(&with_line(3, r#"{"kind":"gossip","t":10}"#)),
        (3, ParseErrorKind::UnknownKind("\"gossip\"".into()))
    );
    assert_eq!(
        kind_at(&with_line(3, r#"{"t":10}"#)),
        (3, ParseErrorKind::NoKind)
    );
    // A completion without invocation: op 1's invocation dropped.
    let mut dropped = lines.clone();
    dropped.remove(4);
    let no_invoke = dropped.join("\n");
    assert_eq!(
        kind_at(&no_invoke),
        (5, ParseErrorKind::CompleteWithoutInvoke(1))
    );
    // Duplicate id: op 0 invoked twice.
    let twice = with_line(5, &lines[4].replace("\"id\":1", "\"id\":0"));
    assert_eq!(kind_at(&twice), (5, ParseErrorKind::DuplicateInvoke(0)));
    // A second completion.
    let again = with_line(7, &lines[5].replace("\"t\":20", "\"t\":22"));
    assert_eq!(kind_at(&again), (7, ParseErrorKind::DuplicateComplete(1)));
    // Time going backwards.
    let back = with_line(6, &lines[5].replace("\"t\":20", "\"t\":3"));
    assert_eq!(
        kind_at(&back),
        (
            6,
            ParseErrorKind::TimeBackwards {
                previous_ns: 11,
                at_ns: 3
            }
        )
    );
    // A completion by another actor.
    let other = with_line(6, &lines[5].replace("\"handle\":2", "\"handle\":9"));
    assert_eq!(kind_at(&other), (6, ParseErrorKind::ActorMismatch(1)));
    // A bad field, named.
    let bad = with_line(4, &lines[3].replace("\"version\":-1", "\"version\":\"x\""));
    match kind_at(&bad) {
        (4, ParseErrorKind::BadRecord { kind, message }) => {
            assert_eq!(kind, "invoke");
            assert!(message.contains("invalid type"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let err_name = with_line(8, &lines[7].replace("ConnectionLoss", "Oops"));
    assert!(matches!(
        kind_at(&err_name),
        (8, ParseErrorKind::BadRecord { message, .. }) if message.contains("unknown error \"Oops\"")
    ));
    // No meta line; a second one; another version; nothing at all.
    assert_eq!(kind_at(&lines[1..].join("\n")), (1, ParseErrorKind::NoMeta));
    assert_eq!(
        kind_at(&with_line(2, lines[0])),
        (2, ParseErrorKind::MetaAgain)
    );
    assert_eq!(
        kind_at(&with_line(
            1,
            &lines[0].replace("\"format\":1", "\"format\":9")
        )),
        (1, ParseErrorKind::Version(9))
    );
    assert_eq!(kind_at(""), (0, ParseErrorKind::Empty));
    // The message names the line and what is wrong.
    let e = parse(&no_invoke).unwrap_err().to_string();
    assert_eq!(
        e,
        "line 5: completion of op 1 without an earlier invocation"
    );
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..12),
        "[a-z\"\\\\\n é]{0,8}".prop_map(String::into_bytes),
    ]
}

fn path() -> impl Strategy<Value = String> {
    "/[a-z0-9\"]{1,6}(/[a-z]{1,3})?"
}

fn mode() -> impl Strategy<Value = CreateMode> {
    prop_oneof![
        Just(CreateMode::Persistent),
        Just(CreateMode::Ephemeral),
        Just(CreateMode::PersistentSequential),
        Just(CreateMode::EphemeralSequential),
        Just(CreateMode::Container),
        (1i64..1 << 40).prop_map(|ttl_ms| CreateMode::PersistentWithTtl { ttl_ms }),
        (1i64..1 << 40).prop_map(|ttl_ms| CreateMode::PersistentSequentialWithTtl { ttl_ms }),
    ]
}

fn multi_op() -> impl Strategy<Value = MultiOp> {
    prop_oneof![
        (path(), bytes(), mode()).prop_map(|(path, data, mode)| MultiOp::Create {
            path,
            data,
            mode
        }),
        (path(), any::<i32>()).prop_map(|(path, version)| MultiOp::Delete { path, version }),
        (path(), bytes(), any::<i32>()).prop_map(|(path, data, version)| MultiOp::SetData {
            path,
            data,
            version
        }),
        (path(), any::<i32>()).prop_map(|(path, version)| MultiOp::Check { path, version }),
    ]
}

fn op() -> impl Strategy<Value = HistOp> {
    prop_oneof![
        (path(), bytes(), mode()).prop_map(|(path, data, mode)| HistOp::Zk(Op::Create {
            path,
            data,
            mode
        })),
        (path(), any::<i32>()).prop_map(|(path, version)| HistOp::Zk(Op::Delete { path, version })),
        (path(), any::<bool>()).prop_map(|(path, watch)| HistOp::Zk(Op::Exists { path, watch })),
        (path(), any::<bool>()).prop_map(|(path, watch)| HistOp::Zk(Op::GetData { path, watch })),
        (path(), bytes(), any::<i32>()).prop_map(|(path, data, version)| HistOp::Zk(Op::SetData {
            path,
            data,
            version
        })),
        (path(), any::<bool>())
            .prop_map(|(path, watch)| HistOp::Zk(Op::GetChildren { path, watch })),
        path().prop_map(|path| HistOp::Zk(Op::Sync { path })),
        proptest::collection::vec(multi_op(), 0..4).prop_map(|ops| HistOp::Zk(Op::Multi(ops))),
        Just(HistOp::CloseSession),
    ]
}

fn any_stat() -> impl Strategy<Value = Stat> {
    (any::<[i64; 6]>(), any::<[i32; 5]>()).prop_map(|(l, i)| Stat {
        czxid: l[0],
        mzxid: l[1],
        ctime: l[2],
        mtime: l[3],
        ephemeral_owner: l[4],
        pzxid: l[5],
        version: i[0],
        cversion: i[1],
        aversion: i[2],
        data_length: i[3],
        num_children: i[4],
    })
}

fn error() -> impl Strategy<Value = ZkError> {
    proptest::sample::select(ZkError::ALL.to_vec())
}

fn outcome() -> impl Strategy<Value = Outcome> {
    let multi = prop_oneof![
        (path(), proptest::option::of(any_stat()))
            .prop_map(|(path, stat)| MultiResult::Create { path, stat }),
        Just(MultiResult::Delete),
        any_stat().prop_map(|stat| MultiResult::SetData { stat }),
        Just(MultiResult::Check),
        Just(MultiResult::RolledBack),
        error().prop_map(MultiResult::Failed),
    ];
    let reply = prop_oneof![
        (path(), any_stat()).prop_map(|(path, stat)| Reply::Create { path, stat }),
        Just(Reply::Delete),
        proptest::option::of(any_stat()).prop_map(Reply::Exists),
        (bytes(), any_stat()).prop_map(|(data, stat)| Reply::GetData { data, stat }),
        any_stat().prop_map(Reply::SetData),
        (proptest::collection::vec("[a-z0-9]{1,5}", 0..4), any_stat())
            .prop_map(|(children, stat)| Reply::GetChildren { children, stat }),
        Just(Reply::Sync),
        proptest::collection::vec(multi, 0..4).prop_map(Reply::Multi),
    ];
    prop_oneof![
        Just(Outcome::Ok(None)),
        reply.prop_map(|r| Outcome::Ok(Some(r))),
        error().prop_map(Outcome::Err),
    ]
}

proptest! {
    #[test]
    fn any_op_and_outcome_survive_the_round_trip(
        op in op(),
        outcome in outcome(),
        session in any::<i64>(),
        xid in proptest::option::of(any::<i64>()),
        zxid in proptest::option::of(any::<i64>()),
    ) {
        let h = History {
            meta: meta(),
            records: vec![
                Record {
                    at_ns: 1,
                    event: Event::Invoke(Invoke {
                        id: OpId(0),
                        actor: actor(3),
                        session: Some(SessionId(session)),
                        xid,
                        op,
                    }),
                },
                Record {
                    at_ns: 2,
                    event: Event::Complete(Complete {
                        id: OpId(0),
                        actor: actor(3),
                        server: None,
                        zxid,
                        outcome,
                    }),
                },
            ],
        };
        let text = to_string(&h);
        prop_assert_eq!(text.lines().count(), 3);
        prop_assert_eq!(parse(&text), Ok(h));
    }
}

#[test]
fn each_record_is_one_line() {
    for r in &sample().records {
        assert!(!record_line(r).contains('\n'));
    }
}

#[test]
fn the_edn_types_follow_the_documented_mapping() {
    use super::edn::completion_type as ty;
    let write = set("/a", b"x");
    let read = get("/a");
    let lost = Outcome::Err(ZkError::ConnectionLoss);
    let gone = Outcome::Err(ZkError::SessionExpired);
    let exists = Outcome::Err(ZkError::NodeExists);
    assert_eq!(ty(&write, true, &lost), "info");
    assert_eq!(ty(&write, true, &gone), "info");
    assert_eq!(ty(&read, true, &lost), "fail");
    assert_eq!(ty(&write, true, &exists), "fail");
    // Never sent: did not happen, whatever the error.
    assert_eq!(ty(&write, false, &gone), "fail");
    assert_eq!(ty(&HistOp::CloseSession, true, &lost), "info");
    let failed_multi = Outcome::Ok(Some(Reply::Multi(vec![
        MultiResult::RolledBack,
        MultiResult::Failed(ZkError::BadVersion),
    ])));
    assert_eq!(ty(&write, true, &failed_multi), "fail");
    assert_eq!(
        ty(&read, true, &Outcome::Ok(Some(Reply::Exists(None)))),
        "ok"
    );
}

#[test]
fn the_edn_export_gives_an_info_op_a_new_process_and_closes_open_ops() {
    let mut h = sample();
    // Client 0 calls again after its ConnectionLoss; an op stays open.
    h.records.push(invoke(50, 3, 0, get("/b")));
    let edn = edn::to_edn(&h);
    let lines: Vec<&str> = edn.lines().collect();
    assert!(
        lines[0].starts_with("[{:type :invoke, :process 0, :f :set-data"),
        "{edn}"
    );
    assert!(
        edn.contains(":type :info, :process 0, :f :set-data"),
        "{edn}"
    );
    assert!(edn.contains(":error :connection-loss"), "{edn}");
    // The set's process is retired: the next op of its handle gets a
    // new one (2); the close reuses the get's (1), which ended :ok.
    assert!(edn.contains(":type :invoke, :process 1, :f :close-session"));
    assert!(
        edn.contains(":type :invoke, :process 2, :f :get-data"),
        "{edn}"
    );
    // Still open at the end: an :info at the last time.
    assert!(
        lines.last().unwrap().contains(":type :info, :process 2"),
        "{edn}"
    );
    assert!(edn.contains(r#":data {:hex "ff0022"}"#), "{edn}");
    assert!(edn.ends_with("]\n"));
}

#[test]
fn a_reading_stops_where_its_stop_says() {
    use super::json::parse_reader_until;
    let records: Vec<Record> = (0..3 * READ_POLL_EVERY as u64)
        .map(|i| invoke(i, i, 0, get("/a")))
        .collect();
    let text = to_string(&History {
        meta: meta(),
        records,
    });
    let polls = std::cell::Cell::new(0);
    let stop = || {
        polls.set(polls.get() + 1);
        polls.get() == 2
    };
    // Line 1 is the meta line: the second poll comes before line 2048.
    assert_eq!(
        parse_reader_until(text.as_bytes(), &stop).unwrap(),
        Read::Stopped {
            line: 2 * READ_POLL_EVERY,
            records: 2 * READ_POLL_EVERY - 2,
        }
    );
    let whole = parse_reader_until(text.as_bytes(), &|| false).unwrap();
    assert_eq!(whole, Read::Whole(parse(&text).unwrap()));
}
