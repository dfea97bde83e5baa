//! Sample report data for the report tests and benchmark: a failing lock
//! run told by hand (every kind of thing a page draws), a large
//! generated one, and an index. Included with `#[path]` by
//! tests/report.rs and benches/report.rs.

#![allow(dead_code)]

use zoosim::report::*;

const MS: u64 = 1000;
const S: u64 = 1_000_000;

fn op(
    id: OpId,
    start_ms: u64,
    end_ms: Option<u64>,
    label: &str,
    status: OpStatus,
    server: &str,
    zxid: Option<i64>,
) -> OpBar {
    OpBar {
        id,
        start_us: start_ms * MS,
        end_us: end_ms.map(|e| e * MS),
        label: label.into(),
        status,
        server: Some(server.into()),
        zxid,
        detail: String::new(),
        state_before: None,
        state_after: None,
    }
}

fn with_states(mut o: OpBar, before: &str, after: &str) -> OpBar {
    o.state_before = Some(before.into());
    o.state_after = Some(after.into());
    o
}

fn point(at_ms: u64, label: &str, kind: PointKind) -> Point {
    Point {
        at_us: at_ms * MS,
        label: label.into(),
        kind,
    }
}

fn span(a_ms: u64, b_ms: Option<u64>, label: &str, kind: SpanKind) -> Span {
    Span {
        start_us: a_ms * MS,
        end_us: b_ms.map(|b| b * MS),
        label: label.into(),
        kind,
    }
}

fn lane(label: &str, kind: LaneKind, ops: Vec<OpBar>, points: Vec<Point>) -> Lane {
    Lane {
        label: label.into(),
        kind,
        ops,
        points,
    }
}

/// The stale read that makes the sample fail, its label as the page shows it.
pub const STUCK_LABEL: &str = "getData /lock/guid-a1-lock-0000000001 → found (stale)";
/// The failing property's detail, as the page shows it.
pub const FENCED_DETAIL: &str = "two holders: client 2 (token 0x200000005, accepted at 5.110 s) and client 1 (token 0x100000002, accepted at 6.110 s, after client 2's)";

/// A lock run in which client 1, paused and partitioned, loses its
/// session, reads its deleted lock node from a stale server and writes to
/// the resource after client 2 took the lock.
pub fn lock_failure() -> SeedReport {
    use OpStatus::*;
    let n1 = "/lock/guid-a1-lock-0000000001";
    let n2 = "/lock/guid-b2-lock-0000000002";
    let n3 = "/lock/guid-c3-lock-0000000003";
    let c1 = vec![
        with_states(
            op(
                1,
                100,
                Some(130),
                &format!("create /lock/guid-a1-lock- → {n1}"),
                Ok,
                "3",
                Some(0x1_0000_0002),
            ),
            "/lock: []",
            "/lock: [a1-0001]",
        ),
        with_states(
            op(
                4,
                140,
                Some(160),
                "getChildren /lock → [a1-0001, b2-0002]",
                Ok,
                "3",
                Some(0x1_0000_0003),
            ),
            "/lock: [a1-0001, b2-0002]",
            "/lock: [a1-0001, b2-0002]",
        ),
        op(
            5,
            170,
            Some(200),
            "write resource (token 0x100000002) → accepted",
            Ok,
            "-",
            None,
        ),
        with_states(
            op(
                9,
                6050,
                Some(6060),
                STUCK_LABEL,
                Ok,
                "3",
                Some(0x1_0000_0003),
            ),
            "/lock: [b2-0002, c3-0003] (a1-0001 deleted at zxid 0x200000004)",
            "(no state: the node does not exist)",
        ),
        op(
            11,
            6100,
            Some(6120),
            "write resource (token 0x100000002) → accepted",
            Ok,
            "-",
            None,
        ),
        op(
            16,
            6200,
            Some(6400),
            "delete /lock/guid-a1-lock-0000000001 → SessionExpired",
            Failed,
            "3",
            None,
        ),
    ];
    let c2 = vec![
        with_states(
            op(
                2,
                110,
                Some(150),
                &format!("create /lock/guid-b2-lock- → {n2}"),
                Ok,
                "2",
                Some(0x1_0000_0003),
            ),
            "/lock: [a1-0001]",
            "/lock: [a1-0001, b2-0002]",
        ),
        with_states(
            op(
                6,
                160,
                Some(180),
                &format!("exists {n1} (watch) → stat"),
                Ok,
                "2",
                Some(0x1_0000_0003),
            ),
            "/lock: [a1-0001, b2-0002]",
            "/lock: [a1-0001, b2-0002]",
        ),
        with_states(
            op(
                7,
                5050,
                Some(5070),
                "getChildren /lock → [b2-0002, c3-0003]",
                Ok,
                "2",
                Some(0x2_0000_0004),
            ),
            "/lock: [b2-0002, c3-0003]",
            "/lock: [b2-0002, c3-0003]",
        ),
        op(
            8,
            5100,
            Some(5120),
            "write resource (token 0x200000005) → accepted",
            Ok,
            "-",
            None,
        ),
    ];
    let c3 = vec![
        with_states(
            op(
                3,
                2500,
                Some(2540),
                &format!("create /lock/guid-c3-lock- → {n3}"),
                Ok,
                "1",
                Some(0x1_0000_0004),
            ),
            "/lock: [a1-0001, b2-0002]",
            "/lock: [a1-0001, b2-0002, c3-0003]",
        ),
        op(
            14,
            2560,
            Some(2580),
            &format!("exists {n2} (watch) → stat"),
            Ok,
            "1",
            Some(0x1_0000_0004),
        ),
    ];
    let mut c4_loss = op(
        12,
        3000,
        Some(3200),
        "create /lock/guid-d4-lock- → ConnectionLoss",
        Indeterminate,
        "1",
        None,
    );
    c4_loss.detail =
        "the leader crashed before replying: the create may or may not have happened".into();
    let c4 = vec![
        c4_loss,
        op(
            15,
            3800,
            Some(3830),
            "getChildren /lock → [b2-0002, c3-0003]",
            Ok,
            "2",
            Some(0x2_0000_0001),
        ),
        op(
            13,
            9500,
            None,
            "create /lock/guid-d4-lock- (never returned)",
            Indeterminate,
            "2",
            None,
        ),
    ];
    let c5 = vec![
        op(
            17,
            1000,
            Some(1010),
            "getData /config → v1",
            Ok,
            "1",
            Some(0x1_0000_0001),
        ),
        op(
            18,
            7000,
            Some(7015),
            "setData /config v2 (version 0) → BadVersion",
            Failed,
            "2",
            None,
        ),
    ];
    let mut expire = op(
        10,
        5000,
        Some(5001),
        &format!("expire session 0x1000000001 → deletes {n1}"),
        Ok,
        "2",
        Some(0x2_0000_0004),
    );
    expire.state_before = Some("/lock: [a1-0001, b2-0002, c3-0003]".into());
    expire.state_after = Some("/lock: [b2-0002, c3-0003]".into());
    let lanes = vec![
        lane(
            "client 1 (session 0x1000000001)",
            LaneKind::Client,
            c1,
            vec![
                point(
                    2000,
                    "Disconnected (server 3 partitioned)",
                    PointKind::Session,
                ),
                point(6500, "Expired", PointKind::Session),
            ],
        ),
        lane(
            "client 2 (session 0x1000000002)",
            LaneKind::Client,
            c2,
            vec![point(5010, &format!("NodeDeleted {n1}"), PointKind::Watch)],
        ),
        lane(
            "client 3 (session 0x1000000003)",
            LaneKind::Client,
            c3,
            vec![],
        ),
        lane(
            "client 4 (session 0x1000000004)",
            LaneKind::Client,
            c4,
            vec![
                point(3000, "Disconnected", PointKind::Session),
                point(3700, "SyncConnected (server 2)", PointKind::Session),
            ],
        ),
        lane(
            "client 5 (session 0x1000000005)",
            LaneKind::Client,
            c5,
            vec![],
        ),
        lane(
            "server 1",
            LaneKind::Server,
            vec![],
            vec![
                point(50, "leader (epoch 1)", PointKind::Other),
                point(4600, "follower (epoch 2)", PointKind::Other),
            ],
        ),
        lane(
            "server 2",
            LaneKind::Server,
            vec![expire],
            vec![point(3600, "leader (epoch 2)", PointKind::Other)],
        ),
        lane(
            "server 3",
            LaneKind::Server,
            vec![],
            vec![point(50, "follower (epoch 1)", PointKind::Other)],
        ),
    ];
    SeedReport {
        title: "lock-no-fence.toml seed 17".into(),
        scenario: "scenarios/lock-no-fence.toml".into(),
        seed: 17,
        commit: Some("e80eb16".into()),
        replay_command: "cargo run --release -- replay scenarios/lock-no-fence.toml --seed 17 --trace".into(),
        digest: "9c1f04d2a7b3e851".into(),
        sim_ms: 10_000,
        params: vec![("clients".into(), "5".into()), ("servers".into(), "3".into()), ("flavour".into(), "java".into())],
        verdicts: vec![
            CheckVerdict {
                name: "fenced-exclusion".into(),
                passed: false,
                detail: FENCED_DETAIL.into(),
                ops: vec![8, 11],
            },
            CheckVerdict {
                name: "invariants".into(),
                passed: true,
                detail: "no invariant failed".into(),
                ops: vec![],
            },
            CheckVerdict {
                name: "ensemble-liveness".into(),
                passed: true,
                detail: "server 2 leads at the end".into(),
                ops: vec![],
            },
            CheckVerdict {
                name: "session-fifo".into(),
                passed: true,
                detail: "every session's replies came in call order".into(),
                ops: vec![],
            },
        ],
        counters: vec![
            Counter { name: "acquisitions".into(), value: 3, goal: None },
            Counter { name: "fault:partition".into(), value: 1, goal: Some(1) },
            Counter { name: "fault:crash".into(), value: 1, goal: None },
            Counter { name: "elections-won".into(), value: 2, goal: None },
            Counter { name: "session-expiries".into(), value: 1, goal: None },
        ],
        lanes,
        spans: vec![
            span(2000, Some(8000), "partition {3} | {1,2}", SpanKind::Partition),
            span(3000, Some(4500), "crash server 1", SpanKind::Crash),
            span(3000, Some(3600), "election: server 2 leads (epoch 2)", SpanKind::Election),
            span(3100, Some(3200), "lost reply → client 4", SpanKind::Network),
            span(4000, Some(6000), "pause client 1 (2 s)", SpanKind::Pause),
        ],
        lin: vec![LinSection {
            partition: None,
            model: "zookeeper".into(),
            verdict: LinVerdict::NotLinearizable,
            detail: format!("client 1's getData {n1} at 6.050 s found the node, which the expiry of session 0x1000000001 deleted at 5.000 s (zxid 0x200000004)"),
            longest_prefix: [(1, "/lock: [a1-0001]"), (2, "/lock: [a1-0001, b2-0002]"), (4, "/lock: [a1-0001, b2-0002]"), (6, "/lock: [a1-0001, b2-0002]"), (3, "/lock: [a1-0001, b2-0002, c3-0003]"), (10, "/lock: [b2-0002, c3-0003]"), (7, "/lock: [b2-0002, c3-0003]")]
                .into_iter()
                .map(|(op, s)| PrefixStep { op, state_after: s.into() })
                .collect(),
            cannot_linearize_next: vec![9],
            minimal: vec![1, 10, 9],
            minimal_note: None,
        }],
        file: None,
        undecided: None,
    }
}

/// A generated run of `n` operations over 20 clients and 60 s, with
/// faults, and a linearizability failure in its middle.
pub fn large(n: usize) -> SeedReport {
    let clients = 20;
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |m: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % m
    };
    let per = n.div_ceil(clients);
    let mut lanes = Vec::new();
    let mut id = 0;
    for c in 0..clients {
        let mut t = next(5 * MS);
        let mut ops = Vec::new();
        for _ in 0..per {
            if id == n as u64 {
                break;
            }
            let took = 200 + next(20 * MS);
            let status = match next(100) {
                0..=89 => OpStatus::Ok,
                90..=97 => OpStatus::Failed,
                _ => OpStatus::Indeterminate,
            };
            ops.push(OpBar {
                id,
                start_us: t,
                end_us: Some(t + took),
                label: format!("setData /k{} v{id}", next(8)),
                status,
                server: Some(format!("{}", 1 + next(5))),
                zxid: Some(0x1_0000_0000 + id as i64),
                detail: String::new(),
                state_before: Some(format!("/k{}: v{}", id % 8, id.saturating_sub(1))),
                state_after: Some(format!("/k{}: v{id}", id % 8)),
            });
            id += 1;
            t += took + next(5 * MS);
        }
        lanes.push(lane(
            &format!("client {c} (session 0x{:x})", 0x1000 + c),
            LaneKind::Client,
            ops,
            vec![],
        ));
    }
    let end = lanes
        .iter()
        .flat_map(|l| &l.ops)
        .filter_map(|o| o.end_us)
        .max()
        .unwrap_or(0);
    let spans = (0..end / (5 * S))
        .map(|i| {
            span(
                i * 5000 + 1000,
                Some(i * 5000 + 2500),
                &format!("partition {i}"),
                SpanKind::Partition,
            )
        })
        .collect();
    // The failure: three operations around the middle.
    let mid: Vec<OpId> = (0..3)
        .map(|k| (n as u64 / 2) + k * 3)
        .filter(|&i| i < n as u64)
        .collect();
    SeedReport {
        title: format!("large run, {n} operations"),
        scenario: "scenarios/large.toml".into(),
        seed: 1,
        replay_command: "zoosim replay scenarios/large.toml --seed 1".into(),
        digest: "0".into(),
        sim_ms: end / MS,
        verdicts: vec![CheckVerdict {
            name: "writes-linearizable".into(),
            passed: false,
            detail: "three writes to /k3 that no order explains".into(),
            ops: mid.clone(),
        }],
        lanes,
        spans,
        lin: vec![LinSection {
            model: "zookeeper".into(),
            verdict: LinVerdict::NotLinearizable,
            detail: "no order of the three explains the reads".into(),
            longest_prefix: (0..n as u64 / 2)
                .map(|op| PrefixStep {
                    op,
                    state_after: format!("v{op}"),
                })
                .collect(),
            cannot_linearize_next: vec![mid[0]],
            minimal: mid,
            ..LinSection::default()
        }],
        ..SeedReport::default()
    }
}

/// A run's index: one scenario as expected, one not, with links.
pub fn index() -> IndexReport {
    let link = |seed: u64, href: Option<&str>| SeedLink {
        seed,
        href: href.map(str::to_string),
    };
    IndexReport {
        title: "zoosim run scenarios/".into(),
        command: Some("zoosim run scenarios/ --seeds 100 --report reports/".into()),
        commit: Some("e80eb16".into()),
        files: false,
        scenarios: vec![
            ScenarioRow {
                scenario: "scenarios/lock.toml".into(),
                expectation: "passes every seed".into(),
                as_expected: true,
                seeds_run: 100,
                verdicts: vec![VerdictRow {
                    verdict: "pass".into(),
                    passed: true,
                    seeds: (0..100).map(|s| link(s, None)).collect(),
                }],
                undecided: Vec::new(),
                coverage: vec![
                    Counter {
                        name: "fault:partition".into(),
                        value: 240,
                        goal: Some(50),
                    },
                    Counter {
                        name: "acquisitions".into(),
                        value: 1877,
                        goal: None,
                    },
                ],
            },
            ScenarioRow {
                scenario: "scenarios/lock-no-fence.toml".into(),
                expectation: "passes every seed".into(),
                as_expected: false,
                seeds_run: 100,
                verdicts: vec![
                    VerdictRow {
                        verdict: "pass".into(),
                        passed: true,
                        seeds: (0..100)
                            .filter(|s| ![17, 42].contains(s))
                            .map(|s| link(s, None))
                            .collect(),
                    },
                    VerdictRow {
                        verdict: "fenced-exclusion".into(),
                        passed: false,
                        seeds: vec![
                            link(17, Some("lock-no-fence/seed-17.html")),
                            link(42, Some("lock-no-fence/seed-42.html")),
                        ],
                    },
                ],
                undecided: Vec::new(),
                coverage: vec![Counter {
                    name: "fault:crash".into(),
                    value: 3,
                    goal: Some(10),
                }],
            },
        ],
    }
}
