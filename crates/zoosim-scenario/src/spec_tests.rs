//! The scenario parser: defaults, and an error naming the file, line,
//! column and the accepted values for every kind of bad input.

use std::time::Duration;

use super::*;

fn err(text: &str) -> SpecError {
    parse("s.toml", text).expect_err("must be refused")
}

/// The error is at `line:column` and its message contains `needle`.
fn assert_err(text: &str, line: usize, column: usize, needle: &str) {
    let e = err(text);
    assert_eq!((e.line, e.column), (line, column), "{e}");
    assert!(e.message.contains(needle), "{e}\nwanted: {needle}");
    assert!(e
        .to_string()
        .starts_with(&format!("s.toml:{line}:{column}: ")));
}

#[test]
fn a_short_file_gets_useful_defaults() {
    let s = parse("scenarios/lock.toml", "format = 1\nrecipe = \"lock\"\n").expect("valid");
    assert_eq!(s.name, "lock");
    assert_eq!(s.recipe_name(), "lock");
    assert_eq!(s.variant, None);
    assert!(!s.expect_failure);
    assert_eq!((s.seeds, s.test_seeds, s.seed_start), (200, 10, 0));
    assert_eq!(s.ensemble.servers, vec![3, 5]);
    assert_eq!(s.ensemble.session_timeout_ms, vec![4000]);
    assert_eq!(s.ensemble.tick_ms, crate::spec::DEFAULT_TICKS_MS);
    assert_eq!(s.workload.clients(), Some(5));
    assert_eq!(
        s.workload.get("hold_ms"),
        Some(&crate::workload::WorkloadValue::Drawn(vec![10, 100, 1000]))
    );
    assert_eq!(s.faults.kinds, Fault::ALL.to_vec());
    assert!(s.faults.swarm);
    assert_eq!(s.faults.phase_ms, 20_000);
    assert_eq!((s.quiet_ms, s.liveness_bound_ms), (15_000, None));
    assert_eq!(s.ensemble.link_latency_ms, (0, 1));
    assert_eq!(s.ensemble.broken, None);
    assert!(s.faults.at.is_empty() && s.coverage.is_empty());
    assert_eq!(s.variant_name(), "lock");
}

#[test]
fn a_full_file_is_read_as_written() {
    let text = r#"
format = 1
description = "d"
recipe = "double-barrier"
seeds = 30
test_seeds = 3
seed_start = 0x10

[ensemble]
servers = 5
tick_ms = [1000, 2000]
session_timeout_ms = [6000, 4000]
sync_limit_ticks = [3, 4]
link_latency_ms = [2, 7]

[workload]
clients = 6
threshold = 6
compute_ms_max = 50

[faults]
kinds = ["client-crash", "server-crash"]
swarm = false
phase_ms = 10000
interval_ms = [100, 200]
window_ms = [10, 20]

[[faults.at]]
at_ms = 5000
fault = "server-crash"
server = 4
window_ms = 700

[[faults.at]]
at_ms = 1000
fault = "long-client-pause"
client = 5

[quiet]
phase_ms = 9000
liveness_bound_ms = 9000

[coverage]
goals = ["entries", "fault:client-crash", "elections-won"]
"#;
    let s = parse("x.toml", text).expect("valid");
    assert_eq!((s.seeds, s.test_seeds, s.seed_start), (30, 3, 16));
    assert_eq!(s.ensemble.servers, vec![5]);
    assert_eq!(s.ensemble.sync_limit_ticks, (3, 4));
    assert_eq!(s.ensemble.tick_ms, vec![1000, 2000]);
    assert_eq!(s.ensemble.session_timeout_ms, vec![6000, 4000]);
    assert_eq!(s.ensemble.link_latency_ms, (2, 7));
    assert_eq!(s.workload.clients(), Some(6));
    assert_eq!(s.workload.int("threshold"), Some(6));
    assert_eq!(s.workload.int("compute_ms_max"), Some(50));
    assert_eq!(s.faults.kinds, vec![Fault::ClientCrash, Fault::ServerCrash]);
    assert!(!s.faults.swarm);
    assert_eq!(
        (s.faults.interval_ms, s.faults.window_ms),
        ((100, 200), (10, 20))
    );
    // Sorted by time.
    assert_eq!(
        s.faults.at,
        vec![
            at(
                1000,
                Fault::LongClientPause,
                FaultParams {
                    client: Some(5),
                    ..FaultParams::default()
                }
            ),
            at(
                5000,
                Fault::ServerCrash,
                FaultParams {
                    server: Some(4),
                    window: Some(ms(700)),
                    ..FaultParams::default()
                }
            ),
        ]
    );
    assert_eq!(s.coverage.len(), 3);
}

#[test]
fn malformed_toml_points_at_the_spot() {
    let e = err("format = 1\nrecipe = \"lock\nseeds = 3\n");
    assert_eq!(e.line, 2, "{e}");
    assert!(e.to_string().starts_with("s.toml:2:"), "{e}");
}

#[test]
fn unknown_keys_are_errors_not_ignored() {
    assert_err(
        "format = 1\nrecipe = \"lock\"\nseed = 3\n",
        3,
        1,
        "unknown field `seed`",
    );
    assert_err(
        "format = 1\nrecipe = \"lock\"\n[ensemble]\nservrs = 3\n",
        4,
        1,
        "unknown field `servrs`",
    );
    assert_err(
        "format = 1\nrecipe = \"lock\"\n[workload]\nclients = 3\nthreshold = 2\n",
        5,
        1,
        "`threshold` is not a workload key of recipe lock; it takes: clients, hold_ms",
    );
}

#[test]
fn the_format_version_is_required_and_checked() {
    let e = err("recipe = \"lock\"\n");
    assert_eq!(e.line, 0);
    assert!(e.message.contains("format = 1"), "{e}");
    assert_err(
        "format = 2\nrecipe = \"lock\"\n",
        1,
        10,
        "format 2 is not read",
    );
}

#[test]
fn unknown_names_list_the_accepted_ones() {
    assert_err(
        "format = 1\nrecipe = \"mutex\"\n",
        2,
        10,
        "unknown recipe \"mutex\"; the recipes are: lock, shared-lock",
    );
    assert_err(
        "format = 1\nrecipe = \"lock\"\nvariant = \"lock/nope\"\n",
        3,
        11,
        "lock's variants are: lock/blind-retry, lock/herd",
    );
    assert_err(
        "format = 1\nrecipe = \"queue\"\nvariant = \"lock/herd\"\n",
        3,
        11,
        "recipe queue has no buggy variants",
    );
    assert_err(
        "format = 1\nrecipe = \"lock\"\n[faults]\nkinds = [\"leader-crash\", \"meteor\"]\n",
        4,
        26,
        "unknown fault \"meteor\"; the faults are: server-crash, leader-crash",
    );
    assert_err(
        "format = 1\nrecipe = \"lock\"\n[coverage]\ngoals = [\"joins\"]\n",
        4,
        10,
        "unknown coverage goal \"joins\"; lock counts: acquisitions",
    );
    assert_err(
        "format = 1\nrecipe = \"lock\"\nexpect = \"maybe\"\n",
        3,
        10,
        "`expect` is \"pass\" or \"fail\"",
    );
}

#[test]
fn a_renamed_variant_is_still_taken_by_its_old_name() {
    let text = "format = 1\nrecipe = \"shared-lock\"\nvariant = \"rwlock/reader-waits-on-any\"\n";
    let s = parse("scenarios/old.toml", text).expect("the old name is taken");
    assert_eq!(
        s.variant.as_deref(),
        Some("shared-lock/reader-waits-on-any")
    );
    // Only for the recipe it names: the lock has no such variant.
    assert_err(
        "format = 1\nrecipe = \"lock\"\nvariant = \"rwlock/reader-waits-on-any\"\n",
        3,
        11,
        "lock's variants are: lock/blind-retry",
    );
}

#[test]
fn impossible_parameters_are_refused() {
    let base = "format = 1\nrecipe = \"lock\"\n";
    assert_err(
        &format!("{base}[ensemble]\nlink_latency_ms = [3, 1]\n"),
        4,
        19,
        "`ensemble.link_latency_ms` must be [low, high] with 0 <= low <= high <= 10000, got [3, 1]",
    );
    assert_err(
        &format!("{base}[workload]\nclients = 0\n"),
        4,
        1,
        "`workload.clients` must be an integer between 1 and 64, got 0",
    );
    assert_err(
        &format!("{base}[quiet]\nphase_ms = -5\n"),
        4,
        12,
        "`quiet.phase_ms` must be between 1000 and 3600000, got -5",
    );
    assert_err(
        &format!("{base}[ensemble]\nservers = [3, 0]\n"),
        4,
        11,
        "`servers` must be 1 to 9 servers",
    );
    assert_err(
        &format!("{base}[faults]\ninterval_ms = [500, 100]\n"),
        4,
        15,
        "low <= high",
    );
    assert_err(
        &format!("{base}[workload]\nhold_ms = \"long\"\n"),
        4,
        1,
        "`workload.hold_ms` must be an integer (0 to 600000) or a non-empty list",
    );
    assert_err(
        &format!("{base}[quiet]\nphase_ms = 5000\nliveness_bound_ms = 9000\n"),
        5,
        21,
        "exceeds the quiet phase",
    );
    // The default bound (10 s) over a shorter quiet phase: an error at the
    // phase, not a panic.
    assert_err(
        &format!("{base}[quiet]\nphase_ms = 5000\n"),
        4,
        12,
        "`liveness_bound_ms` (10000, the default) exceeds the quiet phase (5000 ms)",
    );
    assert_err(
        "format = 1\nrecipe = \"double-barrier\"\n[workload]\nclients = 3\nthreshold = 4\n",
        5,
        1,
        "the barrier would never open",
    );
    assert_err(
        "format = 1\nrecipe = \"two-phase-commit\"\n[workload]\nclients = 1\n",
        4,
        1,
        "at least one site",
    );
}

#[test]
fn planned_faults_must_fit_the_run() {
    let base = "format = 1\nrecipe = \"lock\"\n[faults]\nphase_ms = 5000\n[[faults.at]]\n";
    assert_err(
        &format!("{base}at_ms = 6000\nfault = \"leader-crash\"\n"),
        6,
        9,
        "not within the fault phase",
    );
    // 5 clients: 0..=4.
    assert_err(
        &format!("{base}at_ms = 100\nfault = \"client-crash\"\nclient = 5\n"),
        8,
        10,
        "`client` must be between 0 and 4",
    );
    // Servers: the smallest drawn ensemble (3) bounds it.
    assert_err(
        &format!("{base}at_ms = 100\nfault = \"server-crash\"\nserver = 3\n"),
        8,
        10,
        "`server` must be between 0 and 2",
    );
    assert_err(
        &format!("{base}at_ms = 100\nfault = \"partition\"\nclient = 1\n"),
        7,
        9,
        "partition aims at servers",
    );
    assert_err(
        &format!("{base}at_ms = 100\nfault = \"leader-crash\"\nserver = 1\n"),
        7,
        9,
        "leader-crash does not take a `server`",
    );
    // A partition's clients: the scenario's, once each; on partitions only.
    assert_err(
        &format!("{base}at_ms = 100\nfault = \"partition\"\nsplit_clients = [0, 5]\n"),
        8,
        17,
        "`split_clients` lists clients 0 to 4 once each",
    );
    assert_err(
        &format!("{base}at_ms = 100\nfault = \"partition\"\nsplit_clients = [1, 1]\n"),
        8,
        17,
        "once each",
    );
    assert_err(
        &format!("{base}at_ms = 100\nfault = \"leader-isolated\"\nsplit_clients = [1]\n"),
        8,
        17,
        "leader-isolated does not take `split_clients`",
    );
}

#[test]
fn tick_and_session_timeout_are_numbers_or_lists_within_bounds() {
    let base = "format = 1\nrecipe = \"lock\"\n[ensemble]\n";
    let s = parse(
        "s.toml",
        &format!("{base}tick_ms = 2000\nsession_timeout_ms = [4000, 9000]\n"),
    )
    .expect("valid");
    assert_eq!(
        (s.ensemble.tick_ms, s.ensemble.session_timeout_ms),
        (vec![2000], vec![4000, 9000])
    );
    assert_err(
        &format!("{base}tick_ms = [500, 20000]\n"),
        4,
        11,
        "`ensemble.tick_ms` must be a number from 100 to 10000",
    );
    assert_err(
        &format!("{base}tick_ms = []\n"),
        4,
        11,
        "`ensemble.tick_ms` must be",
    );
    assert_err(
        &format!("{base}session_timeout_ms = 999\n"),
        4,
        22,
        "`ensemble.session_timeout_ms` must be a number from 1000 to 120000",
    );
}

/// A fault at `at_ms` with `params` given.
fn at(at_ms: u64, fault: Fault, params: FaultParams) -> ScheduledFault {
    ScheduledFault {
        at_ms,
        at_ns: 0,
        fault,
        params,
    }
}

/// `n` ms, as the parameters hold lengths.
fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_placed_fault_may_give_every_parameter_the_nemesis_draws() {
    let text = r#"
format = 1
recipe = "lock"

[ensemble]
servers = 5

[faults]
kinds = []
phase_ms = 9000

[[faults.at]]
at_ms = 100
at_ns = 999999
fault = "link-delay"
server = 4
to = 0
delay_ms = 1200
window_ms = 800

[[faults.at]]
at_ms = 200
fault = "partition"
split = [3, 1]
split_clients = [4, 0]
window_ms = 1500

[[faults.at]]
at_ms = 300
fault = "flipping-partitions"
splits = [[0, 1], [4]]
flip_ms = [250, 2999]

[[faults.at]]
at_ms = 400
fault = "one-way-clog"
server = 2
to = 3

[[faults.at]]
at_ms = 500
fault = "forced-expiry"
client = 1
window_ms = 0

[[faults.at]]
at_ms = 600
fault = "majority-crash"
servers = [4, 0, 2]
window_ms = 7000

[[faults.at]]
at_ms = 700
fault = "three-way-partition"
sides = [[0, 3], [1], [2, 4]]
side_clients = [[2], [0, 4], [3, 1]]
window_ms = 900

[[faults.at]]
at_ms = 800
fault = "long-partition"
split = [0]
split_clients = [1]
window_ms = 12000

[[faults.at]]
at_ms = 900
fault = "server-pause"
server = 1
window_ms = 3000

[[faults.at]]
at_ms = 1000
fault = "server-kill"
server = 3

[[faults.at]]
at_ms = 1100
fault = "new-leader-crash"
server = 0
"#;
    let s = parse("x.toml", text).expect("valid");
    assert_eq!(
        s.faults.at,
        vec![
            ScheduledFault {
                at_ns: 999_999,
                ..at(
                    100,
                    Fault::LinkDelay,
                    FaultParams {
                        server: Some(4),
                        to: Some(0),
                        delay: Some(ms(1200)),
                        window: Some(ms(800)),
                        ..FaultParams::default()
                    }
                )
            },
            at(
                200,
                Fault::Partition,
                FaultParams {
                    // A side is a set: in order.
                    split: Some(vec![1, 3]),
                    // So is the clients' side.
                    split_clients: Some(vec![0, 4]),
                    window: Some(ms(1500)),
                    ..FaultParams::default()
                }
            ),
            at(
                300,
                Fault::FlippingPartitions,
                FaultParams {
                    flips: Some(vec![(vec![0, 1], ms(250)), (vec![4], ms(2999))]),
                    ..FaultParams::default()
                }
            ),
            at(
                400,
                Fault::OneWayClog,
                FaultParams {
                    server: Some(2),
                    to: Some(3),
                    ..FaultParams::default()
                }
            ),
            at(
                500,
                Fault::ForcedExpiry,
                FaultParams {
                    client: Some(1),
                    window: Some(ms(0)),
                    ..FaultParams::default()
                }
            ),
            at(
                600,
                Fault::MajorityCrash,
                FaultParams {
                    servers: Some(vec![0, 2, 4]),
                    window: Some(ms(7000)),
                    ..FaultParams::default()
                }
            ),
            at(
                700,
                Fault::ThreeWayPartition,
                FaultParams {
                    sides: Some(vec![vec![0, 3], vec![1], vec![2, 4]]),
                    side_clients: Some(vec![vec![2], vec![0, 4], vec![1, 3]]),
                    window: Some(ms(900)),
                    ..FaultParams::default()
                }
            ),
            at(
                800,
                Fault::LongPartition,
                FaultParams {
                    split: Some(vec![0]),
                    split_clients: Some(vec![1]),
                    window: Some(ms(12000)),
                    ..FaultParams::default()
                }
            ),
            at(
                900,
                Fault::ServerPause,
                FaultParams {
                    server: Some(1),
                    window: Some(ms(3000)),
                    ..FaultParams::default()
                }
            ),
            at(
                1000,
                Fault::ServerKill,
                FaultParams {
                    server: Some(3),
                    ..FaultParams::default()
                }
            ),
            at(
                1100,
                Fault::NewLeaderCrash,
                FaultParams {
                    server: Some(0),
                    ..FaultParams::default()
                }
            ),
        ]
    );
    assert_eq!(s.faults.at[0].at_nanos(), 100_999_999);
    // Written out and read back, every parameter survives.
    assert_eq!(parse("x.toml", &s.to_toml()).expect("valid"), s);
}

#[test]
fn placed_fault_parameters_are_checked() {
    let base =
        "format = 1\nrecipe = \"lock\"\n[faults]\nphase_ms = 5000\n[[faults.at]]\nat_ms = 100\n";
    let bad = |rest: &str, line: usize, column: usize, needle: &str| {
        assert_err(&format!("{base}{rest}"), line, column, needle)
    };
    bad(
        "at_ns = 1000000\nfault = \"leader-crash\"\n",
        7,
        9,
        "`at_ns` must be between 0 and 999999",
    );
    bad(
        "fault = \"server-crash\"\nto = 1\n",
        8,
        6,
        "server-crash does not take `to`",
    );
    bad(
        "fault = \"one-way-clog\"\nto = 1\n",
        8,
        6,
        "`to` needs `server`",
    );
    bad(
        "fault = \"link-delay\"\nserver = 1\nto = 1\n",
        9,
        6,
        "`to` must differ from `server`",
    );
    // The smallest drawn ensemble (3) bounds every server named.
    bad(
        "fault = \"link-delay\"\nserver = 1\nto = 3\n",
        9,
        6,
        "`to` must be between 0 and 2",
    );
    bad(
        "fault = \"partition\"\nsplit = [0, 0]\n",
        8,
        9,
        "`split` lists servers 0 to 2 once each, got [0, 0]",
    );
    bad(
        "fault = \"partition\"\nsplit = [3]\n",
        8,
        9,
        "`split` lists servers 0 to 2 once each",
    );
    bad(
        "fault = \"partition\"\nsplit = []\n",
        8,
        9,
        "`split` needs at least one server",
    );
    bad(
        "fault = \"leader-isolated\"\nsplit = [1]\n",
        8,
        9,
        "leader-isolated does not take `split`",
    );
    bad(
        "fault = \"flipping-partitions\"\nsplits = [[0], [1]]\nflip_ms = [300]\n",
        8,
        10,
        "`splits` and `flip_ms` go together, one duration per split",
    );
    bad(
        "fault = \"flipping-partitions\"\nflip_ms = [300]\n",
        8,
        11,
        "`flip_ms` needs `splits`",
    );
    bad(
        "fault = \"flipping-partitions\"\nsplits = [[0]]\nflip_ms = [0]\n",
        9,
        11,
        "`flip_ms` are milliseconds from 1 to 600000, got 0",
    );
    bad(
        "fault = \"partition\"\nsplits = [[0]]\nflip_ms = [10]\n",
        8,
        10,
        "partition does not take `splits`",
    );
    bad(
        "fault = \"one-way-clog\"\ndelay_ms = 10\n",
        8,
        12,
        "one-way-clog does not take `delay_ms`",
    );
    bad(
        "fault = \"link-delay\"\ndelay_ms = 0\n",
        8,
        12,
        "`delay_ms` must be between 1 and 600000",
    );
    bad(
        "fault = \"client-crash\"\nwindow_ms = 10\n",
        8,
        13,
        "client-crash does not take `window_ms`",
    );
    bad(
        "fault = \"majority-crash\"\nservers = [0]\n",
        8,
        11,
        "`servers` must be a majority of the ensemble (2 of 3), got [0]",
    );
    bad(
        "fault = \"ensemble-crash\"\nservers = [0, 1]\n",
        8,
        11,
        "ensemble-crash does not take `servers`",
    );
    bad(
        "fault = \"three-way-partition\"\nsides = [[0], [1]]\n",
        8,
        9,
        "`sides` are three sides that together hold every server (0 to 2) once",
    );
    bad(
        "fault = \"three-way-partition\"\nsides = [[0, 1], [1], [2]]\n",
        8,
        9,
        "`sides` names a server on two sides",
    );
    bad(
        "fault = \"three-way-partition\"\nside_clients = [[0, 1], [2], [3]]\n",
        8,
        16,
        "`side_clients` are three lists that together hold every client (0 to 4) once",
    );
    bad(
        "fault = \"partition\"\nsides = [[0], [1], [2]]\n",
        8,
        9,
        "partition does not take `sides`",
    );
    bad(
        "fault = \"server-kill\"\nserver = 3\n",
        8,
        10,
        "`server` must be between 0 and 2",
    );
    // Only a forced expiry's race window may be nothing.
    bad(
        "fault = \"long-client-pause\"\nwindow_ms = 0\n",
        8,
        13,
        "`window_ms` must be between 1 and 600000",
    );
}

#[test]
fn an_expected_failure_must_come_within_200_seeds() {
    assert_err(
        "format = 1\nrecipe = \"lock\"\nvariant = \"lock/herd\"\nexpect = \"fail\"\nseeds = 500\n",
        5,
        9,
        "must fail within 200 seeds",
    );
}

#[test]
fn every_shipped_scenario_parses() {
    let n = shipped().len();
    assert!(n >= 20, "{n} scenarios");
}

#[test]
fn a_scenario_written_out_parses_back_to_itself() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");
    for entry in std::fs::read_dir(dir).expect("scenarios/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|x| x == "toml") {
            let name = path.display().to_string();
            let s = parse(&name, &std::fs::read_to_string(&path).unwrap()).unwrap();
            let again =
                parse(&name, &s.to_toml()).unwrap_or_else(|e| panic!("{e}\n{}", s.to_toml()));
            assert_eq!(again, s, "{}", s.to_toml());
        }
    }
}

/// Every scenario in scenarios/, parsed (a bad one fails the test).
fn shipped() -> Vec<Scenario> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .expect("scenarios/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            parse(&f.display().to_string(), &text).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

#[test]
fn a_breakage_is_read_by_name_and_written_back() {
    use zoosim_core::breakage::{Breakage, Broken};
    for b in Breakage::ALL {
        let text = format!(
            "format = 1\nrecipe = \"lock\"\n[ensemble]\nbroken = {:?}\n",
            b.name()
        );
        let s = parse("b.toml", &text).expect("valid");
        assert_eq!(s.ensemble.broken, Some(Broken::from(b)));
        assert!(s.to_toml().contains(&format!("broken = {:?}\n", b.name())));
        assert_eq!(parse("b.toml", &s.to_toml()).expect("valid"), s);
    }
    assert_err(
        "format = 1\nrecipe = \"lock\"\n[ensemble]\nbroken = \"stale-reads\"\n",
        4,
        10,
        "unknown breakage \"stale-reads\"; the breakages are: follower-local-write, \
         skip-reconnect-zxid-rule, reply-before-quorum, stale-read, late-watch-event, \
         sync-without-flush, event-reordered, skip-session-moved-check, zxid-lies, \
         expired-ephemerals-linger, frozen-follower-serves-reads",
    );
    assert_err(
        "format = 1\nrecipe = \"lock\"\n[ensemble]\nbroken = true\n",
        4,
        10,
        "`broken` must be a breakage's name, e.g. \"stale-read\", or a table",
    );
}

#[test]
fn a_breakage_rate_is_read_checked_and_written_back() {
    use zoosim_core::breakage::{Breakage, Broken};
    let file =
        |broken: &str| format!("format = 1\nrecipe = \"lock\"\n[ensemble]\nbroken = {broken}\n");
    let s = parse(
        "b.toml",
        &file("{ kind = \"stale-read\", one_in = 1000, lag_txns = 1 }"),
    )
    .expect("valid");
    let subtle = Broken {
        kind: Breakage::StaleRead,
        one_in: 1000,
        lag_txns: 1,
    };
    assert_eq!(s.ensemble.broken, Some(subtle));
    assert!(s
        .to_toml()
        .contains("broken = { kind = \"stale-read\", one_in = 1000, lag_txns = 1 }\n"));
    assert_eq!(parse("b.toml", &s.to_toml()).expect("valid"), s);
    // Keys left out keep their defaults; the default rate is the name.
    let s = parse(
        "b.toml",
        &file("{ kind = \"event-reordered\", one_in = 7 }"),
    )
    .expect("valid");
    let want = Broken {
        one_in: 7,
        ..Broken::from(Breakage::EventReordered)
    };
    assert_eq!(s.ensemble.broken, Some(want));
    assert_eq!(parse("b.toml", &s.to_toml()).expect("valid"), s);
    let s = parse("b.toml", &file("{ kind = \"stale-read\" }")).expect("valid");
    assert_eq!(s.ensemble.broken, Some(Broken::from(Breakage::StaleRead)));
    // A table of its own works too.
    let s = parse(
        "b.toml",
        "format = 1\nrecipe = \"lock\"\n[ensemble.broken]\nkind = \"sync-without-flush\"\none_in = 3\n",
    )
    .expect("valid");
    assert_eq!(
        s.ensemble.broken.map(|b| (b.kind, b.one_in)),
        Some((Breakage::SyncWithoutFlush, 3))
    );
    // Each bad value is pointed at, with what is accepted.
    let bad = [
        (
            "{ kind = \"stale-read\", one_in = 0 }",
            33,
            "`one_in` must be 1 to 1000000",
        ),
        (
            "{ kind = \"stale-read\", one_in = 1000001 }",
            33,
            "`one_in` must be 1 to 1000000",
        ),
        (
            "{ kind = \"stale-read\", one_in = -5 }",
            33,
            "`one_in` must be a positive integer, got -5",
        ),
        (
            "{ kind = \"stale-read\", one_in = \"1000\" }",
            33,
            "`one_in` must be a positive integer",
        ),
        (
            "{ kind = \"stale-read\", lag_txns = 0 }",
            33,
            "`lag_txns` must be 1 to 1000",
        ),
        (
            "{ kind = \"stale-read\", lag_txns = 1001 }",
            33,
            "`lag_txns` must be 1 to 1000",
        ),
        (
            "{ kind = \"late-watch-event\", lag_txns = 1 }",
            39,
            "`lag_txns` applies to stale-read only, not to late-watch-event",
        ),
        (
            "{ kind = \"stale-read\", one_in_reads = 10 }",
            33,
            "`one_in_reads` is not a key of `broken`; it takes: kind, one_in, lag_txns",
        ),
        (
            "{ kind = \"stale-reads\" }",
            12,
            "unknown breakage \"stale-reads\"",
        ),
        (
            "{ kind = 3 }",
            12,
            "`kind` must be a breakage's name (a string), got 3",
        ),
        ("{ one_in = 3 }", 10, "`broken` needs `kind`"),
        ("[\"stale-read\"]", 10, "`broken` must be a breakage's name"),
    ];
    for (value, column, needle) in bad {
        assert_err(&file(value), 4, column, needle);
    }
}

#[test]
fn the_default_liveness_bound_follows_the_session_timeout_the_tick_and_the_clients() {
    // 2T + a tick + 1 s per client, never under 10 s.
    assert_eq!(default_liveness_bound_ms(4_000, 500, 5), 13_500);
    assert_eq!(default_liveness_bound_ms(1_000, 500, 1), 10_000);
    assert_eq!(default_liveness_bound_ms(40_000, 2_000, 5), 87_000);
    assert_eq!(default_liveness_bound_ms(4_000, 500, usize::MAX), u64::MAX);
}

#[test]
fn a_value_that_is_neither_an_integer_nor_a_list_says_what_is_accepted() {
    // Once "data did not match any variant of untagged enum OneOrMany".
    for value in ["\"five\"", "3.5", "{ a = 1 }"] {
        let text = format!("format = 1\nrecipe = \"lock\"\n[ensemble]\nservers = {value}\n");
        assert_err(&text, 4, 11, "expected an integer or a list of integers");
        assert!(!err(&text).message.contains("OneOrMany"));
    }
}

#[test]
fn a_huge_key_is_not_echoed_whole() {
    // Issue 17: a 50 MB key came back in full in the message.
    let key = "k".repeat(100_000);
    let e = err(&format!("format = 1\nrecipe = \"lock\"\n{key} = 1\n"));
    let shown = e.to_string();
    assert!(shown.starts_with("s.toml:3:1: unknown field"), "{shown}");
    assert!(shown.contains("kkk… (100,003 bytes)"), "{shown}");
    assert!(shown.len() < 1_000, "{} bytes shown", shown.len());
}

#[test]
fn nesting_past_the_parser_limit_is_refused_with_its_position() {
    let deep = format!("x = {}{}\n", "[".repeat(200), "]".repeat(200));
    let e = err(&format!("format = 1\nrecipe = \"lock\"\n{deep}"));
    assert_eq!(e.line, 3, "{e}");
    assert!(e.column > 1, "{e}");
    assert!(e.message.contains("recursion"), "{e}");
}

#[test]
fn a_coverage_goal_nothing_can_reach_is_refused_at_parse() {
    // Issue 17: a run that can only fail its coverage is refused before
    // it runs, at the goal.
    assert_err(
        "format = 1\nrecipe = \"lock\"\n[faults]\nkinds = [\"server-crash\"]\n\
         [coverage]\ngoals = [\"fault:server-kill\"]\n",
        6,
        10,
        "fault server-kill is neither in `faults.kinds`",
    );
    assert_err(
        "format = 1\nrecipe = \"lock\"\n[faults]\nkinds = [\"server-kill\"]\nphase_ms = 0\n\
         [coverage]\ngoals = [\"client-resets\"]\n",
        7,
        10,
        "only server-kill can move it",
    );
    assert_err(
        "format = 1\nrecipe = \"lock\"\n[coverage]\ngoals = [\"breakage-hits\"]\n",
        4,
        10,
        "no `broken` breakage",
    );
    // Placed by hand, or drawn: reachable.
    parse(
        "s.toml",
        "format = 1\nrecipe = \"lock\"\n[faults]\nkinds = []\n\
         [[faults.at]]\nat_ms = 100\nfault = \"server-kill\"\n\
         [coverage]\ngoals = [\"fault:server-kill\", \"client-resets\"]\n",
    )
    .expect("a placed kill can reach both");
    parse(
        "s.toml",
        "format = 1\nrecipe = \"lock\"\n[coverage]\ngoals = [\"sessions-survived-outage\"]\n",
    )
    .expect("every fault is drawn by default");
}
