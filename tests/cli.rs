//! The `zoosim` command as a user meets it: exit codes, and bad input
//! answered with the file, line and column, never a panic.

use std::process::Command;

fn zoosim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_zoosim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("zoosim runs");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A file in a directory of its own that is removed when the test ends
/// (pass or panic), so runs leave nothing behind in the temp dir.
struct Scratch {
    path: String,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for Scratch {
    type Target = str;
    fn deref(&self) -> &str {
        &self.path
    }
}

impl AsRef<std::path::Path> for Scratch {
    fn as_ref(&self) -> &std::path::Path {
        self.path.as_ref()
    }
}

impl std::fmt::Display for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.path)
    }
}

fn scratch(name: &str, text: &str) -> Scratch {
    let dir = tempfile::Builder::new()
        .prefix("zoosim-cli-")
        .tempdir()
        .unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    Scratch {
        path: path.display().to_string(),
        _dir: dir,
    }
}

#[test]
fn list_names_recipes_variants_faults_and_scenarios() {
    let (code, out, _) = zoosim(&["list"]);
    assert_eq!(code, 0);
    for needle in [
        "two-phase-commit",
        "variant lock/sort-by-full-name",
        "lost-write-reply",
        "property fenced-exclusion",
        "bug-lock-herd",
    ] {
        assert!(out.contains(needle), "{needle} missing from:\n{out}");
    }
}

#[test]
fn a_bad_scenario_is_refused_with_its_place() {
    let f = scratch(
        "bad.toml",
        "format = 1\nrecipe = \"lock\"\n[workload]\nclients = -3\n",
    );
    let (code, out, err) = zoosim(&["run", &f, "--seeds", "1"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("bad.toml:4:1: `workload.clients` must be an integer between 1 and 64"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn missing_paths_and_bad_arguments_are_refused() {
    let (code, _, err) = zoosim(&["run", "no/such/dir"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no/such/dir: no such file or directory"),
        "{err}"
    );
    let (code, _, err) = zoosim(&["run", "scenarios/lock.toml", "--shard", "3/3"]);
    assert_eq!(code, 2);
    assert!(err.contains("--shard takes i/n with 0 <= i < n"), "{err}");
    let (code, _, err) = zoosim(&["replay", "scenarios/lock.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("--seed"), "{err}");
}

#[test]
fn run_passes_a_correct_scenario_and_replay_repeats_a_seed() {
    // Seeds whose producers' guid search finds a node (a coverage goal).
    let (code, out, err) = zoosim(&[
        "run",
        "scenarios/queue.toml",
        "--seeds",
        "3",
        "--seed-start",
        QUEUE_SEEDS,
        "--jobs",
        "2",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("queue") && out.contains("all as expected"),
        "{out}"
    );
    let digest = |out: &str| {
        out.lines()
            .find_map(|l| l.split("digest ").nth(1).map(str::to_owned))
            .expect("a digest line")
    };
    let args = ["replay", "scenarios/queue.toml", "--seed", "7"];
    let (c1, o1, _) = zoosim(&args);
    let (c2, o2, _) = zoosim(&args);
    assert_eq!((c1, c2), (0, 0), "{o1}");
    assert_eq!(digest(&o1), digest(&o2));
}

#[test]
fn an_expected_failure_is_reported_with_its_replay_command_and_the_replay_fails() {
    let (code, out, _) = zoosim(&["run", "scenarios/bug-lock-herd.toml"]);
    assert_eq!(code, 0, "{out}");
    let replay = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: cargo run --release -- "))
        .expect("a replay command");
    let args: Vec<&str> = replay.split_whitespace().collect();
    let (code, out, _) = zoosim(&args);
    assert_eq!(code, 1, "the replayed seed fails again:\n{out}");
    assert!(out.contains("herd"), "{out}");
    assert!(out.contains("outcome log:"), "--trace prints the log");
}

#[test]
fn a_shard_runs_its_part_of_the_seeds() {
    let (code, out, _) = zoosim(&[
        "run",
        "scenarios/two-phase-commit.toml",
        "--seeds",
        "5",
        "--shard",
        "1/2",
    ]);
    assert_eq!(code, 0, "{out}");
    // Seeds 1 and 3 of 0..5; coverage is shown, judged over all shards.
    assert!(out.contains(", 2 seeds in"), "{out}");
    assert!(out.contains("coverage commits"), "{out}");
}

/// The first seed `zoosim run` catches of an expected failure.
/// Seeds of scenarios/queue.toml from which two or three reach its
/// coverage goals.
const QUEUE_SEEDS: &str = "2661154829";

fn caught_seed(scenario: &str) -> String {
    let (_, out, _) = zoosim(&["run", scenario]);
    out.lines()
        .find_map(|l| l.split(" seed ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .expect("the caught seed")
        .to_owned()
}

/// Shrinks `scenario`'s caught seed into `target`: (args, seed, size).
fn shrink_caught(scenario: &str, target: &str) -> ([String; 6], String, u64) {
    let seed = caught_seed(scenario);
    let args = ["shrink", scenario, "--seed", &seed, "--out", target].map(str::to_owned);
    let (code, out, err) = zoosim(&args.each_ref().map(String::as_str));
    assert_eq!(code, 0, "{out}{err}");
    let size: u64 = out
        .split("shrunk to size ")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a size in: {out}"));
    (args, seed, size)
}

#[test]
fn shrink_writes_a_small_scenario_that_fails_on_replay_and_keeps_existing_files() {
    let target = scratch("herd-shrunk.toml", "");
    std::fs::remove_file(&target).unwrap();
    let (args, seed, size) = shrink_caught("scenarios/bug-lock-herd.toml", &target);
    let args = args.each_ref().map(String::as_str);
    assert!(
        size <= 15,
        "shrunk to size {size} (faults tried + operations)"
    );
    let (code, replayed, _) = zoosim(&["replay", &target, "--seed", &seed]);
    assert_eq!(code, 1, "the shrunk scenario fails:\n{replayed}");
    assert!(replayed.contains("herd"), "{replayed}");
    // Never lose work: an existing file is kept unless --force.
    let (code, _, err) = zoosim(&args);
    assert_eq!(code, 2);
    assert!(err.contains("exists; --force replaces it"), "{err}");
    // A passing seed has nothing to shrink.
    let (code, _, err) = zoosim(&[
        "shrink",
        "scenarios/lock.toml",
        "--seed",
        "1",
        "--out",
        &target,
        "--force",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("passes: nothing to shrink"), "{err}");
}

fn zoosim_with_log(args: &[&str], rust_log: Option<&str>) -> (i32, String, String) {
    zoosim_with_env(args, &[("RUST_LOG", rust_log)])
}

/// [`zoosim`] with variables set (`Some`) or removed (`None`).
fn zoosim_with_env(args: &[&str], env: &[(&str, Option<&str>)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zoosim"));
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd.output().expect("zoosim runs");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn replay_trace_shows_requests_replies_watches_faults_and_elections() {
    let f = scratch(
        "traced.toml",
        "format = 1\nrecipe = \"lock\"\n[ensemble]\nservers = 3\n\
         [workload]\nclients = 3\noperations = 4\nhold_ms = 10\nthink_ms_max = 0\n\
         [faults]\nkinds = []\nphase_ms = 1000\n\
         [[faults.at]]\nat_ms = 100\nfault = \"leader-crash\"\nwindow_ms = 300\n",
    );
    let digest = |out: &str| {
        out.lines()
            .find_map(|l| l.split("digest ").nth(1).map(str::to_owned))
            .expect("a digest line")
    };
    let (code, plain, err) = zoosim_with_log(&["replay", &f, "--seed", "1"], None);
    assert_eq!(code, 0, "{plain}{err}");
    let (code, traced, err) = zoosim_with_log(&["replay", &f, "--seed", "1", "--trace"], None);
    assert_eq!(code, 0, "{traced}{err}");
    // Tracing watches the run; it must not change it.
    assert_eq!(digest(&plain), digest(&traced));
    for needle in [
        "zoosim::client: client 0 session 0x",
        "request 1: Create",
        "reply 1 at 0x",
        "watch event NodeDeleted /locks/l/",
        "Connected",
        "zoosim::fault: crash server",
        "zoosim::fault: restart server",
        "zoosim::server: server",
        "Leading, epoch 2, serving",
    ] {
        assert!(
            traced.contains(needle),
            "{needle:?} missing from the trace:\n{traced}"
        );
    }
    // Each line starts with the simulated time.
    let line = traced
        .lines()
        .find(|l| l.contains("crash server"))
        .expect("a crash line");
    let at: f64 = line
        .split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches('s')
        .parse()
        .unwrap();
    assert!((0.09..0.2).contains(&at), "{line}");

    // RUST_LOG narrows it; a bad filter is refused, not ignored.
    let (code, faults_only, _) = zoosim_with_log(
        &["replay", &f, "--seed", "1", "--trace"],
        Some("zoosim::fault"),
    );
    assert_eq!(code, 0);
    assert!(faults_only.contains("crash server") && !faults_only.contains("zoosim::client"));
    let (code, _, err) = zoosim_with_log(
        &["replay", &f, "--seed", "1", "--trace"],
        Some("zoosim=nonsense"),
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("RUST_LOG=\"zoosim=nonsense\" is not a tracing filter"),
        "{err}"
    );
}

#[test]
fn shrink_bounds_a_barrier_to_a_few_rounds() {
    // The barrier's rounds are its operations: its workload is bounded.
    let target = scratch("barrier-shrunk.toml", "");
    std::fs::remove_file(&target).unwrap();
    let (_, seed, size) = shrink_caught("scenarios/bug-barrier-no-sync.toml", &target);
    assert!(
        size <= 15,
        "shrunk to size {size} (faults tried + operations)"
    );
    let shrunk = std::fs::read_to_string(&target).unwrap();
    assert!(shrunk.contains("operations = "), "{shrunk}");
    let (code, replayed, _) = zoosim(&["replay", &target, "--seed", &seed, "--trace"]);
    assert_eq!(code, 1, "the shrunk scenario fails:\n{shrunk}\n{replayed}");
    assert!(
        replayed.contains("before its barrier was removed"),
        "{replayed}"
    );
}

// ---------------------------------------------------------------------------
// zoosim lin

const H: &str = "tests/data/histories";

#[test]
fn lin_gives_a_verdict_per_file_and_exits_by_the_worst() {
    let good = format!("{H}/etcd/etcd_002.log");
    let bad = format!("{H}/etcd/etcd_000.log");
    let (code, out, err) = zoosim(&["lin", &good, "--model", "cas-register"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("etcd_002.log: linearizable (77 ops, 1 partition,"),
        "{out}"
    );
    let (code, out, err) = zoosim(&["lin", &good, &bad, "--model", "cas-register"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("etcd_000.log: not linearizable"), "{out}");
    assert!(out.contains("longest linearizable prefix"), "{out}");
    assert!(out.contains("minimal failing sub-history"), "{out}");
}

#[test]
fn lin_json_has_one_object_per_file_with_its_fields() {
    let (code, out, err) = zoosim(&[
        "lin",
        &format!("{H}/kv/c10-bad.txt"),
        &format!("{H}/kv/c10-ok.txt"),
        "--model",
        "kv",
        "--json",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 2, "{out}");
    let (bad, ok) = (&lines[0], &lines[1]);
    assert!(bad["file"].as_str().unwrap().ends_with("c10-bad.txt"));
    assert_eq!(bad["verdict"], "not-linearizable");
    assert_eq!(bad["ops"], 405);
    assert_eq!(bad["partitions"], 10);
    assert!(bad["millis"].as_f64().unwrap() >= 0.0);
    assert!(!bad["failing_partitions"].as_array().unwrap().is_empty());
    let minimal = bad["minimal_ops"].as_u64().unwrap();
    assert!((1..=8).contains(&minimal), "{bad}");
    assert_eq!(bad["minimal_is_one_minimal"], true);
    assert_eq!(ok["verdict"], "linearizable");
    assert_eq!(ok["ops"], 337);
    assert_eq!(ok["failing_partitions"].as_array().unwrap().len(), 0);
}

#[test]
fn lin_refuses_bad_input_with_file_and_line() {
    let log = scratch(
        "bad.log",
        "INFO  jepsen.util - 0\t:invoke\t:read\tnil\nINFO  jepsen.util - 1\t:ok\t:read\t3\n",
    );
    let (code, out, err) = zoosim(&["lin", &log, "--model", "cas-register"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("bad.log:2: a completion for process 1, which has no operation open"),
        "{err}"
    );
    let edn = scratch(
        "trunc.edn",
        "{:process 0, :type :invoke, :f :get, :key \"a\", :va",
    );
    let (code, out, err) = zoosim(&["lin", &edn, "--model", "kv", "--json"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("trunc.edn:1: :va has no value"), "{err}");
    let line: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(line["verdict"], "error");
    let garbage = scratch("garbage.txt", "\u{0}\u{1}hello\n");
    let (code, _, err) = zoosim(&["lin", &garbage, "--model", "kv"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("garbage.txt:1: not a Jepsen log line"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn lin_refuses_unknown_models_missing_and_huge_files() {
    let (code, _, err) = zoosim(&["lin", &format!("{H}/kv/c01-ok.txt"), "--model", "zk2"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown model \"zk2\"; the models are:"),
        "{err}"
    );
    assert!(err.contains("cas-register") && err.contains("kv"), "{err}");
    let (code, _, err) = zoosim(&["lin", "no/such.log", "--model", "kv"]);
    assert_eq!(code, 2);
    assert!(err.contains("no/such.log: cannot open"), "{err}");
    // A 1 GiB file (sparse: no disk) is refused before it is read.
    let huge = scratch("huge.log", "");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&huge)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let (code, _, err) = zoosim(&["lin", &huge, "--model", "kv"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("huge.log: 1024 MiB, larger than the limit of 256 MiB"),
        "{err}"
    );
    std::fs::remove_file(&huge).unwrap();
}

#[test]
fn lin_past_its_budget_says_unknown() {
    let (code, out, err) = zoosim(&[
        "lin",
        &format!("{H}/kv/c10-ok.txt"),
        "--model",
        "kv",
        "--no-partition",
        "--budget-ms",
        "1",
    ]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("c10-ok.txt: unknown"), "{out}");
    assert!(out.contains("stopped (time budget)"), "{out}");
}

/// Without `--budget-ms` the check has a default step budget; reaching
/// one says what was explored and what raises it, and exits 3 (unknown),
/// which a violation in another file outranks, and bad input outranks
/// both.
#[test]
fn lin_past_its_step_budget_says_what_it_explored_and_exits_3() {
    let ok = format!("{H}/kv/c10-ok.txt");
    let args = [
        "lin",
        &ok,
        "--model",
        "kv",
        "--no-partition",
        "--max-steps",
        "5000",
    ];
    let (code, out, err) = zoosim(&args);
    assert_eq!(code, 3, "{out}{err}");
    assert!(
        out.contains("unknown: step budget exhausted after 5000 steps (--max-steps raises it): "),
        "{out}"
    );
    assert!(
        out.contains("distinct states, the longest linearizable prefix found has "),
        "{out}"
    );
    // A stale read: a violation, decided within the same budget.
    let stale = scratch(
        "stale.edn",
        "{:process 0, :type :invoke, :f :put, :key \"k\", :value \"x\"}\n\
         {:process 0, :type :ok, :f :put, :key \"k\", :value \"x\"}\n\
         {:process 1, :type :invoke, :f :get, :key \"k\", :value nil}\n\
         {:process 1, :type :ok, :f :get, :key \"k\", :value \"\"}\n",
    );
    let garbage = scratch("garbage.edn", "{:process\n");
    let budget = ["--model", "kv", "--no-partition", "--max-steps", "5000"];
    let run = |files: &[&str]| {
        let mut args = vec!["lin"];
        args.extend_from_slice(files);
        args.extend_from_slice(&budget);
        zoosim(&args)
    };
    let (code, out, err) = run(&[&stale]);
    assert_eq!(code, 1, "{out}{err}");
    let (code, out, err) = run(&[&ok, &stale]);
    assert_eq!(code, 1, "a violation outranks an unknown: {out}{err}");
    let (code, out, err) = run(&[&stale, &ok]);
    assert_eq!(code, 1, "{out}{err}");
    let (code, out, err) = run(&[&ok, &garbage, &stale]);
    assert_eq!(code, 2, "bad input outranks both: {out}{err}");
}

#[test]
fn lin_help_lists_the_exit_statuses() {
    let (code, out, _) = zoosim(&["lin", "--help"]);
    assert_eq!(code, 0);
    for needle in [
        "Exit status",
        "2  bad input",
        "1  a violation",
        "3  unknown",
        "0  every file is linearizable",
        "--max-steps",
    ] {
        assert!(out.contains(needle), "{needle}: {out}");
    }
}

/// A huge `--max-file-mib` is no limit, not a limit of 0 bytes (which
/// read nothing and called the history linearizable).
#[test]
fn lin_max_file_mib_too_large_to_count_in_bytes_is_no_limit() {
    let bad = format!("{H}/etcd/etcd_000.log");
    for mib in ["17592186044416", "17592186044415", &u64::MAX.to_string()] {
        let (code, out, err) = zoosim(&[
            "lin",
            &bad,
            "--model",
            "cas-register",
            "--max-file-mib",
            mib,
            "--no-minimal",
        ]);
        assert_eq!(code, 1, "--max-file-mib {mib}: {out}{err}");
        assert!(out.contains("etcd_000.log: not linearizable"), "{out}");
    }
    let (code, _, err) = zoosim(&[
        "lin",
        &bad,
        "--model",
        "cas-register",
        "--max-file-mib",
        "0",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("larger than the limit of 0 MiB"), "{err}");
}

/// A history that checks nothing is bad input with its reason, never
/// "linearizable".
#[test]
fn lin_refuses_a_history_that_checks_nothing() {
    let r = "INFO  jepsen.util - ";
    let cases = [
        (
            "empty.log",
            String::new(),
            "cas-register",
            "the file has no client events",
        ),
        (
            "blank.log",
            "\n  \n".to_owned(),
            "cas-register",
            "the file has no client events",
        ),
        (
            "nemesis.edn",
            "{:process :nemesis, :type :info, :f :start, :value nil}\n".to_owned(),
            "kv",
            "the file has no client events (it is empty, blank, or has only :nemesis events)",
        ),
        (
            "failed.log",
            format!("{r}0 :invoke :write 1\n{r}0 :fail :write 1\n"),
            "cas-register",
            "every operation of its 2 events failed",
        ),
        (
            "unknown.log",
            format!(
                "{r}0 :invoke :write 1\n{r}0 :info :write :timed-out\n{r}1 :invoke :cas [1 2]\n"
            ),
            "cas-register",
            "the outcome of every one of its 2 operations is unknown",
        ),
    ];
    for (name, text, model, why) in cases {
        let file = scratch(name, &text);
        let (code, out, err) = zoosim(&["lin", &file, "--model", model]);
        assert_eq!(code, 2, "{name}: {out}{err}");
        assert!(
            err.contains(&format!("{name}: nothing to check: {why}")),
            "{name}: {err}"
        );
        assert!(!out.contains("linearizable"), "{name}: {out}");
    }
}

/// Space-separated logs (as some of Jepsen's logs are copied) read as
/// tab-separated ones do.
#[test]
fn lin_reads_space_separated_logs() {
    let (code, out, err) = zoosim(&[
        "lin",
        &format!("{H}/etcd/etcd_100.log"),
        &format!("{H}/etcd/etcd_101.log"),
        &format!("{H}/etcd/etcd_102.log"),
        "--model",
        "cas-register",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.matches(": linearizable (").count(), 3, "{out}");
}

/// `zoosim lin --model zookeeper` checks a recorded history against
/// ZooKeeper's contract: a correct run keeps it (exit 0), a run of an
/// ensemble that delivers watch events late breaks it with the guarantee
/// named (exit 1), and a history that is not JSON lines is bad input with
/// its line (exit 2).
#[test]
fn lin_checks_a_recorded_history_against_the_zookeeper_contract() {
    let dir = std::env::temp_dir().join(format!("zoosim-cli-contract-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let (code, _, err) = zoosim(&[
        "replay",
        "scenarios/lock.toml",
        "--seed",
        "1",
        "--history",
        d,
    ]);
    assert_eq!(code, 0, "{err}");
    let good = format!("{d}/lock-seed-1.jsonl");
    let (code, out, err) = zoosim(&["lin", &good, "--model", "zookeeper"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = zoosim(&[
        "replay",
        "tests/data/broken/late-watch-event.toml",
        "--seed",
        "3020701696",
        "--history",
        d,
    ]);
    // The queue's own oracle does not see this breakage; the contract,
    // judged in every run, does: the replay fails, naming it.
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("ZooKeeper's contract is BROKEN: watch-before-data"),
        "{out}"
    );
    let bad = format!("{d}/late-watch-event-seed-3020701696.jsonl");
    let (code, out, err) = zoosim(&["lin", &bad, "--model", "zookeeper", "--json"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("watch-before-data"), "{out}");
    // Its meta line alone checks nothing: bad input, not "holds".
    let meta = format!("{d}/meta-only.jsonl");
    let first = std::fs::read_to_string(&good).unwrap();
    std::fs::write(&meta, format!("{}\n", first.lines().next().unwrap())).unwrap();
    let (code, out, err) = zoosim(&["lin", &meta, "--model", "zookeeper"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("meta-only.jsonl: nothing to check: the history has no operations"),
        "{err}"
    );
    let junk = format!("{d}/junk.jsonl");
    std::fs::write(&junk, "{\"kind\":\"meta\"\n").unwrap();
    let (code, _, err) = zoosim(&["lin", &junk, "--model", "zookeeper"]);
    assert_eq!(code, 2);
    assert!(err.contains("junk.jsonl:1:"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// --report DIR

/// A fresh, empty directory for reports.
fn report_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("zoosim-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read_json(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The `file://` link printed after `prefix` in `out`, as a path.
fn printed_page(out: &str, prefix: &str) -> std::path::PathBuf {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{out}"));
    let url = &line[line.find("file://").expect("a file:// link") + 7..];
    std::path::PathBuf::from(url.trim())
}

#[test]
fn run_report_writes_the_failing_seeds_page_and_an_index_linking_it() {
    let dir = report_dir("run");
    let d = dir.display().to_string();
    let s = "scenarios/bug-election-keep-leadership-after-expiry.toml";
    let (code, out, err) = zoosim(&["run", s, "--report", &d]);
    assert_eq!(code, 0, "{out}{err}");
    let seed = caught_seed(s);
    let page = printed_page(&out, "report of bug-election-keep-leadership-after-expiry");
    assert_eq!(
        page,
        dir.join(format!(
            "bug-election-keep-leadership-after-expiry/seed-{seed}.html"
        ))
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<span class=\"badge\">FAIL</span>"));
    assert!(html.contains("told-is-told</span>: client 3 acted with token 78"));
    assert!(html.contains(&format!("replay {s} --seed {seed}")));
    // The summary beside it names the failure; the contract was checked.
    let summary = read_json(&page.with_extension("json"));
    assert_eq!(summary["verdict"], "fail");
    assert_eq!(summary["failed"][0]["property"], "told-is-told");
    assert_eq!(summary["seed"], seed.parse::<u64>().unwrap());
    assert_eq!(summary["lin"][0]["model"], "zookeeper (contract)");
    // The index, linked from the output, links the page.
    let index = printed_page(&out, "report index:");
    assert_eq!(index, dir.join("index.html"));
    let html = std::fs::read_to_string(&index).unwrap();
    assert!(html.contains(&format!(
        "href=\"bug-election-keep-leadership-after-expiry/seed-{seed}.html\""
    )));
    let index = read_json(&dir.join("index.json"));
    assert_eq!(index["rows"][0]["failed_seeds"][0], summary["seed"]);
    assert_eq!(index["rows"][0]["as_expected"], true);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_report_all_writes_every_seeds_page_and_a_passing_run_has_none_without_it() {
    let dir = report_dir("all");
    let d = dir.display().to_string();
    let args = [
        "run",
        "scenarios/queue.toml",
        "--seeds",
        "2",
        "--seed-start",
        QUEUE_SEEDS,
        "--report",
        &d,
    ];
    let (code, out, err) = zoosim(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("report of"), "{out}");
    assert!(dir.join("index.html").is_file());
    assert!(!dir.join("queue").exists(), "no failing seed, no page");
    let (code, out, err) = zoosim(&[&args[..], &["--report-all"]].concat());
    assert_eq!(code, 0, "{out}{err}");
    let pages: Vec<_> = std::fs::read_dir(dir.join("queue"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".html"))
        .collect();
    assert_eq!(pages.len(), 2, "{pages:?}");
    let summary = read_json(&dir.join("queue").join(pages[0].replace(".html", ".json")));
    assert_eq!(summary["verdict"], "pass");
    assert_eq!(
        read_json(&dir.join("index.json"))["rows"][0]["verdicts"][0]["reports"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_directories_are_refused_before_anything_runs() {
    let missing = std::env::temp_dir().join("zoosim-no-such-report-dir/x");
    let m = missing.display().to_string();
    for args in [
        vec!["run", "scenarios/queue.toml", "--report", &m],
        vec![
            "replay",
            "scenarios/queue.toml",
            "--seed",
            "1",
            "--report",
            &m,
        ],
        vec![
            "lin",
            "tests/data/histories/etcd/etcd_002.log",
            "--model",
            "cas-register",
            "--report",
            &m,
        ],
        vec!["merge", "no-such-summary.json", "--report", &m],
    ] {
        let (code, out, err) = zoosim(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(
            err.contains(&format!(
                "--report {m}: no such directory (create it first)"
            )),
            "{args:?}: {err}"
        );
        assert!(!out.contains("seeds in"), "{args:?} ran: {out}");
    }
    let file = scratch("not-a-dir", "x");
    let (code, _, err) = zoosim(&["run", "scenarios/queue.toml", "--report", &file]);
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!("--report {file}: not a directory")),
        "{err}"
    );
    // --report-all needs --report.
    let (code, _, err) = zoosim(&["run", "scenarios/queue.toml", "--report-all"]);
    assert_eq!(code, 2);
    assert!(err.contains("--report <DIR>"), "{err}");
}

#[test]
fn replay_report_of_a_broken_ensemble_highlights_the_operation_that_cannot_be_placed() {
    let dir = report_dir("replay");
    let d = dir.display().to_string();
    let s = "tests/data/broken/follower-local-write.toml";
    let seed = 0xb40c0000u64.to_string();
    let (_, out, err) = zoosim(&["replay", s, "--seed", &seed, "--report", &d]);
    let page = printed_page(&out, "report:");
    assert_eq!(
        page,
        dir.join(format!("follower-local-write/seed-{seed}.html")),
        "{err}"
    );
    let summary = read_json(&page.with_extension("json"));
    assert_eq!(summary["verdict"], "fail");
    assert_eq!(summary["failed"][0]["property"], "writes-linearizable");
    let stuck = summary["lin"][0]["cannot_linearize_next"][0]
        .as_u64()
        .unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains(&format!(
        "<g class=\"op ok stuck involved\" data-id=\"{stuck}\">"
    )));
    assert!(html.contains("writes-linearizable</span>: no order of the history satisfies it"));
    // The same seed replayed gives the same page.
    let (_, out2, _) = zoosim(&["replay", s, "--seed", &seed, "--report", &d]);
    assert_eq!(printed_page(&out2, "report:"), page);
    assert_eq!(std::fs::read_to_string(&page).unwrap(), html);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lin_report_writes_a_page_per_file_and_an_index_with_bad_input_named() {
    let dir = report_dir("lin");
    let d = dir.display().to_string();
    let good = format!("{H}/etcd/etcd_002.log");
    let bad = format!("{H}/etcd/etcd_000.log");
    let junk = scratch(
        "junk.log",
        "INFO  jepsen.util - 3\t:invoke\t:read\tnil\nnot a line\n",
    );
    let (code, out, err) = zoosim(&[
        "lin",
        &good,
        &bad,
        &junk,
        "--model",
        "cas-register",
        "--json",
        "--report",
        &d,
    ]);
    assert_eq!(code, 2, "{out}{err}");
    // Standard output stays one JSON object per file.
    assert_eq!(out.lines().count(), 3, "{out}");
    let objects: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object"))
        .collect();
    // Each page's link in its file's object.
    assert_eq!(
        objects[0]["report"],
        format!("file://{}", dir.join("etcd_002.log.html").display())
    );
    assert_eq!(objects[2]["report"], serde_json::Value::Null);
    let page = std::fs::read_to_string(dir.join("etcd_000.log.html")).unwrap();
    // The minimal failing sub-history first, then the whole history.
    let minimal = page.find("id=\"minimal\"").expect("a minimal sub-history");
    assert!(minimal < page.find("id=\"tl-full\"").unwrap());
    let summary = read_json(&dir.join("etcd_000.log.json"));
    assert_eq!(summary["lin"][0]["verdict"], "not-linearizable");
    assert!(!summary["lin"][0]["minimal"].as_array().unwrap().is_empty());
    // States on hover, from the checker.
    assert!(page.contains("state before: "), "no model states");
    let index = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(index.contains("href=\"etcd_002.log.html\""));
    assert!(index.contains("href=\"etcd_000.log.html\""));
    assert!(index.contains("junk.log:2: "), "the bad file in the index");
    assert!(printed_page(&err, "report index:").ends_with("index.html"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn merge_report_writes_one_index_over_the_shards_pages() {
    let dir = report_dir("merge");
    let d = dir.display().to_string();
    let s = "scenarios/bug-election-keep-leadership-after-expiry.toml";
    let mut files = Vec::new();
    for i in 0..2 {
        let f = dir.join(format!("shard-{i}.json")).display().to_string();
        let shard = format!("{i}/2");
        let (code, out, err) = zoosim(&[
            "run",
            s,
            "--seeds",
            "4",
            // The scenario's first caught seed is its 3rd.
            "--seed-start",
            "281280512",
            "--shard",
            &shard,
            "--summary",
            &f,
            "--report",
            &d,
        ]);
        assert!(code == 0 || code == 1, "{out}{err}");
        files.push(f);
    }
    let (code, out, err) = zoosim(&["merge", &files[0], &files[1], "--report", &d]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(printed_page(&out, "report index:"), dir.join("index.html"));
    let index = read_json(&dir.join("index.json"));
    let row = &index["rows"][0];
    // Each shard of a scenario expected to fail stops at its own first
    // failure: the index shows the seeds the shards ran, each once (a
    // failing seed is in the row of every property it broke, but once
    // among the failed seeds).
    let failed = row["failed_seeds"].as_array().unwrap();
    assert!(!failed.is_empty());
    let passed: u64 = row["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["passed"].as_bool().unwrap())
        .map(|v| v["seeds"].as_u64().unwrap())
        .sum();
    assert_eq!(
        row["seeds_run"].as_u64(),
        Some(passed + failed.len() as u64),
        "{row}"
    );
    // Every failing seed's page, whichever shard wrote it, is linked.
    let linked: usize = row["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["reports"].as_array().unwrap().len())
        .sum();
    assert!(linked >= failed.len(), "{row}");
    let _ = std::fs::remove_dir_all(&dir);
}

// Issue: hostile but valid-looking arguments. Each of these once broke the
// command (memory, a wrap-around, a panic); each must be refused, or done,
// without one.

#[test]
fn seed_counts_and_starts_that_do_not_fit_are_refused_before_any_seed_runs() {
    // Zero seeds: refused by the argument parser, as files refuse it.
    let (code, _, err) = zoosim(&["run", "scenarios/lock.toml", "--seeds", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--seeds"), "{err}");
    // A range past the largest seed: named, not wrapped round to seed 0
    // (release) nor an overflow panic (debug).
    let max = u64::MAX.to_string();
    let (code, out, err) = zoosim(&[
        "run",
        "scenarios/lock.toml",
        "--seed-start",
        &max,
        "--seeds",
        "3",
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("3 seeds from 18446744073709551615 pass the largest seed")
            && err.contains("at most 1 from there"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // The largest seed alone is fine.
    let plain = scratch("plain-max.toml", "format = 1\nrecipe = \"lock\"\n");
    let (code, out, err) = zoosim(&["run", &plain, "--seed-start", &max, "--seeds", "1"]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn a_huge_seed_count_is_not_allocated_up_front() {
    // 2^64 - 1 seeds: the run starts at once (a list of every seed was
    // built first, and killed for memory).
    let child = Command::new(env!("CARGO_BIN_EXE_zoosim"))
        .args([
            "run",
            "scenarios/bug-lock-herd.toml",
            "--seed-start",
            "0",
            "--seeds",
            &u64::MAX.to_string(),
            "--jobs",
            "1",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("zoosim runs");
    // An expected failure stops at its first failing seed (within the
    // first few from 0): the run ends quickly if nothing was allocated
    // per seed.
    let out = child.wait_with_output().expect("zoosim ends");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("caught as expected"), "{text}");
}

#[test]
fn a_closed_pipe_ends_a_trace_quietly() {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_zoosim"))
        .args([
            "replay",
            "scenarios/lock.toml",
            "--seed",
            "281280512",
            "--trace",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("zoosim runs");
    // Read one line, as `| head -1` does, and close the pipe.
    let mut stdout = child.stdout.take().expect("piped");
    let mut first = [0u8; 64];
    let n = stdout.read(&mut first).expect("some output");
    assert!(n > 0);
    drop(stdout);
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut err)
        .expect("stderr");
    let status = child.wait().expect("zoosim ends");
    assert!(!err.contains("Broken pipe"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // Ended by SIGPIPE, as Unix tools are (or exited on its own, had it
    // finished writing before the pipe closed).
    use std::os::unix::process::ExitStatusExt;
    assert!(
        status.signal() == Some(libc::SIGPIPE) || status.success(),
        "{status:?}: {err}"
    );
}

#[test]
fn list_refuses_a_missing_path_and_lists_a_single_file() {
    let (code, out, err) = zoosim(&["list", "no/such/dir"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("no/such/dir: no such file or directory"),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
    let (code, out, err) = zoosim(&["list", "scenarios/lock.toml"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("scenarios in scenarios/lock.toml:"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("lock ") && l.contains("200 seeds")),
        "{out}"
    );
    assert!(!out.contains("bug-lock-herd"), "{out}");
}

#[test]
fn a_file_named_twice_runs_once() {
    let plain = scratch("plain-twice.toml", "format = 1\nrecipe = \"lock\"\n");
    let dir = std::path::Path::new(&*plain)
        .parent()
        .unwrap()
        .display()
        .to_string();
    let again = format!(
        "{dir}/../{}/plain-twice.toml",
        std::path::Path::new(&dir)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
    );
    let (code, out, err) = zoosim(&["run", &plain, &again, &plain, "--seeds", "1"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 scenarios, 1 seeds"), "{out}");
}

#[test]
fn a_symbolic_link_loop_is_named_as_one() {
    let dir = std::env::temp_dir().join(format!("zoosim-cli-loop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.toml"), dir.join("b.toml"));
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(&b);
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    let (code, _, err) = zoosim(&["run", a.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot read"), "{err}");
    assert!(!err.contains("no such file"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_seed_that_did_nothing_does_not_pass() {
    // Every link slower than the session timeout: no client ever connects.
    let f = scratch(
        "did-nothing.toml",
        "format = 1\nrecipe = \"queue\"\n[ensemble]\nsession_timeout_ms = 4000\n\
         link_latency_ms = [9000, 9000]\n",
    );
    let (code, out, err) = zoosim(&["run", &f, "--seeds", "1"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("workload-ran: the clients logged no operation"),
        "{out}"
    );
}

#[test]
fn shrink_outputs_that_cannot_be_written_are_refused_before_any_work() {
    // `shrink --out` into a directory that does not exist: refused at
    // once, not after minutes of shrinking.
    let started = std::time::Instant::now();
    let (code, _, err) = zoosim(&[
        "shrink",
        "scenarios/bug-lock-herd.toml",
        "--seed",
        "281280512",
        "--out",
        "/nonexistent-dir/x.toml",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("/nonexistent-dir/x.toml: cannot write"),
        "{err}"
    );
    assert!(!err.contains("shrink step"), "no work was done: {err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    // `run --shrink` where shrunk/ cannot be made (here a plain file has
    // its name): refused before any seed runs, with the flag named.
    let dir = std::env::temp_dir().join(format!("zoosim-cli-shrunk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("shrunk"), "not a directory").unwrap();
    let scenario =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/bug-lock-herd.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_zoosim"))
        .args(["run", scenario.to_str().unwrap(), "--shrink"])
        .current_dir(&dir)
        .output()
        .expect("zoosim runs");
    let (stdout, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(2), "{stdout}{err}");
    assert!(
        err.contains("--shrink") && err.contains("not a directory"),
        "{err}"
    );
    assert!(!stdout.contains("seeds in"), "no seed ran: {stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replay_trace_names_clients_as_the_fault_schedule_does_and_shows_no_skipped_fault() {
    // Issue 17: the trace numbered clients by their sessions' order (its
    // `client-2` was the schedule's `client 4`), traced faults the
    // schedule marks skipped, and printed a healed delay as "by 0ns".
    let (code, out, err) = zoosim(&["replay", "scenarios/lock.toml", "--seed", "1", "--trace"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("by 0ns"), "{out}");
    // The schedule: "   3.914 s  client-crash client 3 (skipped)".
    let schedule: Vec<(String, String, bool)> = out
        .lines()
        .filter_map(|l| {
            let (t, rest) = l.trim_start().split_once(" s  ")?;
            t.parse::<f64>().ok()?;
            Some((t.to_owned(), rest.to_owned(), rest.ends_with("(skipped)")))
        })
        .collect();
    // The trace: "     3.914s  INFO zoosim::fault: crash client 3 session 0x...".
    let traced: Vec<(String, String)> = out
        .lines()
        .filter_map(|l| {
            let (head, what) = l.split_once("zoosim::fault: ")?;
            let t = head.split_whitespace().next()?.trim_end_matches('s');
            Some((t.to_owned(), what.to_owned()))
        })
        .collect();
    assert!(!schedule.is_empty() && !traced.is_empty(), "{out}");
    let (mut named, mut skipped) = (0, 0);
    for (t, what, skip) in &schedule {
        let at_t: Vec<&str> = traced
            .iter()
            .filter(|(u, _)| u == t)
            .map(|(_, w)| w.as_str())
            .collect();
        if *skip {
            let alone = schedule.iter().filter(|(u, _, _)| u == t).count() == 1;
            if alone {
                assert!(at_t.is_empty(), "skipped `{what}` traced as {at_t:?}");
                skipped += 1;
            }
            continue;
        }
        let aimed = [
            "client-crash",
            "lost-write-reply",
            "short-client-pause",
            "long-client-pause",
            "client-cut-off",
            "client-isolated",
            "broken-connection",
        ];
        if !aimed.iter().any(|f| what.starts_with(f)) {
            continue;
        }
        let c = what
            .split(" client ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .expect("a client fault names its client");
        assert!(
            at_t.iter().any(|w| w.contains(&format!("client {c} "))),
            "`{what}` at {t} s traced as {at_t:?}"
        );
        named += 1;
    }
    assert!(
        named > 0 && skipped > 0,
        "named {named}, skipped {skipped}:\n{out}"
    );
}

#[cfg(unix)]
#[test]
fn ctrl_c_prints_the_summary_so_far_with_replay_commands() {
    // Issue 17: Ctrl-C lost what an hour's run had found. A buggy variant
    // run as if it were expected to pass fails on many seeds: after the
    // interrupt, the table shows them with their replay commands.
    let f = scratch(
        "interrupted.toml",
        "format = 1\nrecipe = \"lock\"\nvariant = \"lock/herd\"\nseeds = 1000000\n",
    );
    let dir = std::env::temp_dir().join(format!("zoosim-ctrl-c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let summary = dir.join("summary.json");
    let child = Command::new(env!("CARGO_BIN_EXE_zoosim"))
        .args(["run", &f, "--jobs", "1", "--summary"])
        .arg(&summary)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("zoosim runs");
    std::thread::sleep(std::time::Duration::from_secs(8));
    // SAFETY: a plain kill(2) of our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().expect("zoosim ends");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(130), "{stdout}{stderr}");
    assert!(
        stderr.contains("interrupted: stopping the seeds in flight"),
        "{stderr}"
    );
    assert!(stdout.contains("INTERRUPTED after"), "{stdout}");
    assert!(stdout.contains("FAILED"), "{stdout}");
    assert!(stdout.contains("replay: "), "{stdout}");
    assert!(
        stdout.contains("interrupted: the summary above is what ran"),
        "{stdout}"
    );
    let json = std::fs::read_to_string(&summary).expect("the summary was written");
    assert!(json.contains("\"interrupted\": true"), "{json}");
    assert!(json.contains("\"passed\": false"), "{json}");
    // An interrupted run's counts are not a shard's: merge refuses them.
    let (code, _, err) = zoosim(&["merge", summary.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("was interrupted after"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn zoosim_with_budget(args: &[&str], events: u64) -> (i32, String, String) {
    zoosim_with_env(
        args,
        &[("ZOOSIM_SEED_BUDGET_EVENTS", Some(&events.to_string()))],
    )
}

#[test]
fn a_seed_over_its_budget_is_stopped_and_told_which_keys_made_it() {
    // Issue 17: a file that parses but describes an hour of busy clients
    // ran for minutes per seed and grew past a gigabyte. The budget is
    // lowered here so that the test reaches it in seconds.
    let busy = scratch(
        "busy.toml",
        "format = 1\nrecipe = \"lock\"\nseeds = 1\n\
         [workload]\nclients = 8\nhold_ms = 0\nthink_ms_max = 0\n\
         [faults]\nkinds = []\nphase_ms = 3600000\n",
    );
    let (code, out, err) = zoosim_with_budget(&["run", &busy], 5_000);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("seed-budget: stopped at simulated"), "{out}");
    assert!(out.contains("over a seed's budget of 5000 events"), "{out}");
    assert!(out.contains("lower `workload.clients`"), "{out}");
    // The same seed replays to the same stop.
    let (code, replayed, err) = zoosim_with_budget(&["replay", &busy, "--seed", "0"], 5_000);
    assert_eq!(code, 1, "{replayed}{err}");
    let stop = |s: &str| {
        s.lines()
            .find(|l| l.contains("seed-budget: stopped at"))
            .map(|l| l.split("seed-budget: ").nth(1).unwrap_or("").to_owned())
            .expect("a seed-budget line")
    };
    assert_eq!(stop(&out), stop(&replayed));

    // Slow clients over long phases: the phases are named.
    let long = scratch(
        "long.toml",
        "format = 1\nrecipe = \"lock\"\nseeds = 1\n\
         [workload]\nclients = 1\nhold_ms = 5000\n\
         [faults]\nkinds = [\"broken-connection\"]\ninterval_ms = [600000, 600000]\n\
         phase_ms = 3600000\n",
    );
    // Its idle ensemble still sends ~14 messages a simulated second: a
    // budget of 20,000 events is reached past ten simulated minutes.
    let (code, out, err) = zoosim_with_budget(&["run", &long], 20_000);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("`faults.phase_ms` = 3600000"), "{out}");
}

// Seeds ZooKeeper's contract check leaves undecided: never a silent pass.

/// A scenario whose seed [`UNDECIDED_SEED`] the zxid-ordered pass of the
/// contract check cannot order: with no search budget (`--contract-steps
/// 0`) it is undecided, whatever the search can do; the seed before it is
/// decided by the pass alone.
const UNDECIDED_SCENARIO: &str = "tests/data/undecided/two-phase-commit.toml";
const UNDECIDED_SEED: u64 = 734003316;

#[test]
fn run_lists_undecided_seeds_with_their_reasons_and_replay_commands() {
    let dir = report_dir("undecided-run");
    let summary = dir.join("s.json").display().to_string();
    let start = (UNDECIDED_SEED - 1).to_string();
    let run: [&str; 10] = [
        "run",
        UNDECIDED_SCENARIO,
        "--seeds",
        "2",
        "--seed-start",
        &start,
        "--contract-steps",
        "0",
        "--summary",
        &summary,
    ];
    let (code, out, err) = zoosim(&run);
    assert_eq!(code, 0, "undecided is no failure:\n{out}{err}");
    let header = out.lines().next().unwrap();
    assert!(header.contains(" fails undecided "), "{header}");
    let row = out
        .lines()
        .find(|l| l.starts_with("two-phase-commit "))
        .unwrap_or_else(|| panic!("no row in:\n{out}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells[1..4],
        ["2", "0", "1"],
        "seeds, fails, undecided: {row}"
    );
    assert!(row.ends_with("  ok (1 undecided)"), "{row}");
    assert!(
        out.contains(&format!(
            "UNDECIDED two-phase-commit seed {UNDECIDED_SEED} (commit "
        )),
        "{out}"
    );
    assert!(
        out.contains("): contract undecided: step budget exhausted after 0 search steps"),
        "{out}"
    );
    // The replay command carries the budget, so that it replays the verdict.
    let replay =
        format!("replay {UNDECIDED_SCENARIO} --seed {UNDECIDED_SEED} --trace --contract-steps 0");
    assert!(out.contains(&replay), "{out}");
    assert!(
        out.contains(": all as expected; 1 seed undecided\n"),
        "{out}"
    );

    // The summary: its own field, beside `passed`.
    let s = read_json(std::path::Path::new(&summary));
    assert_eq!(s["version"], 2);
    assert_eq!((&s["passed"], &s["undecided"]), (&true.into(), &1.into()));
    let tpc = &s["scenarios"][0];
    assert_eq!(tpc["verdict"], "ok (1 undecided)");
    assert_eq!(tpc["undecided"].as_array().unwrap().len(), 1, "{tpc}");
    let u = &tpc["undecided"][0];
    assert_eq!(u["seed"], UNDECIDED_SEED);
    assert!(u["why"]
        .as_str()
        .unwrap()
        .starts_with("step budget exhausted after 0 search steps"));
    assert!(u["replay"].as_str().unwrap().ends_with(&replay), "{u}");

    // For CI: exit 3 on an undecided seed, and only then.
    let strict: Vec<&str> = run.iter().copied().chain(["--fail-on-undecided"]).collect();
    let (code, out, err) = zoosim(&strict);
    assert_eq!(code, 3, "{out}{err}");
    let (code, out, err) = zoosim(&[
        "run",
        UNDECIDED_SCENARIO,
        "--seeds",
        "1",
        "--seed-start",
        &start,
        "--contract-steps",
        "0",
        "--fail-on-undecided",
    ]);
    assert_eq!(code, 0, "a decided seed:\n{out}{err}");
    assert!(
        !out.contains("UNDECIDED") && out.contains("  ok\n"),
        "{out}"
    );

    // A merge keeps them, and fails on them when asked.
    let (code, out, err) = zoosim(&["merge", &summary]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("UNDECIDED two-phase-commit seed {UNDECIDED_SEED}")),
        "{out}"
    );
    assert!(out.contains("1 seed undecided"), "{out}");
    let (code, out, err) = zoosim(&["merge", &summary, "--fail-on-undecided"]);
    assert_eq!(code, 3, "{out}{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replay_says_passed_with_the_contract_undecided_and_the_budget_decides() {
    // Decided by the search within the default budget (a watch event
    // delivered late, proven by the search: no seed of a correct run in
    // the main job needs the search any more, the zxid-ordered pass
    // decides them all but one it cannot); undecided with none.
    let (s, seed) = (
        "tests/data/broken/late-watch-event-subtle.toml",
        "3020703744",
    );
    let (code, out, err) = zoosim(&["replay", s, "--seed", seed, "--fail-on-undecided"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.lines()
            .last()
            .is_some_and(|l| l.starts_with("FAILED: watch-before-data: ")),
        "{out}"
    );
    let (code, out, err) = zoosim(&["replay", s, "--seed", seed, "--contract-steps", "0"]);
    assert_eq!(code, 0, "{out}{err}");
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("passed (contract undecided: step budget exhausted after 0 search steps"),
        "{out}"
    );
    assert!(!out.lines().any(|l| l == "passed"), "{out}");
    assert!(
        !out.contains("ZooKeeper's contract: undecided"),
        "said once:\n{out}"
    );
    let (code, out, err) = zoosim(&[
        "replay",
        s,
        "--seed",
        seed,
        "--contract-steps",
        "0",
        "--fail-on-undecided",
    ]);
    assert_eq!(code, 3, "{out}{err}");
}
