//! The `zoosim` command against a hostile user, second round: output
//! paths that are not regular files, paths that are shell code, two
//! scenarios of one name, special files where scenarios should be. Each
//! test here failed before its fix.

use std::os::unix::fs::{symlink, FileTypeExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

#[path = "support/cli.rs"]
mod cli;
use cli::{finish, scratch, zoosim, zoosim_in};

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(ok.success());
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Seeds of scenarios/queue.toml from which three reach its coverage
/// goals (so a run of them passes).
const QUEUE_SEEDS: [&str; 4] = ["--seeds", "3", "--seed-start", "2661154829"];

/// `run` of those seeds, with `more` arguments.
fn run_queue<'a>(more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", "scenarios/queue.toml"];
    args.extend(QUEUE_SEEDS);
    args.extend(more);
    args
}

/// A file that must come out as it went in.
fn victim(dir: &Path, name: &str) -> PathBuf {
    let v = dir.join(name);
    std::fs::write(&v, "keep").unwrap();
    v
}

fn kept(v: &Path) {
    assert_eq!(
        std::fs::read_to_string(v).unwrap(),
        "keep",
        "{}",
        v.display()
    );
}

#[test]
fn a_summary_path_that_is_a_link_or_a_fifo_is_refused_and_left_as_it_was() {
    let d = scratch();
    let v = victim(d.path(), "victim.json");
    let link = d.path().join("link.json");
    symlink(&v, &link).unwrap();
    let fifo = d.path().join("fifo.json");
    mkfifo(&fifo);
    for (path, what) in [(&link, "a symbolic link"), (&fifo, "a FIFO")] {
        let (code, out, err) = zoosim(&[
            "run",
            "scenarios/queue.toml",
            "--seeds",
            "1",
            "--summary",
            &s(path),
        ]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(
            err.contains(&format!("is {what}, not a regular file")),
            "{err}"
        );
        // Refused before any seed ran.
        assert!(!out.contains("seeds in"), "{out}");
    }
    kept(&v);
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    // merge too: a real summary in, the link refused as its output.
    let real = d.path().join("real.json");
    let (code, out, err) = zoosim(&run_queue(&["--summary", &s(&real)]));
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = zoosim(&["merge", &s(&real), "--summary", &s(&link)]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("is a symbolic link"), "{err}");
    kept(&v);
    // A regular file is replaced, whole.
    let (code, out, err) = zoosim(&["merge", &s(&real), "--summary", &s(&v)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(std::fs::read_to_string(&v).unwrap().contains("\"format\""));
}

#[test]
fn links_planted_in_report_and_history_directories_are_not_followed() {
    let d = scratch();
    let outside = scratch();
    let v = victim(outside.path(), "victim");
    // The index page, a link to a file elsewhere.
    let report = d.path().join("report");
    std::fs::create_dir(&report).unwrap();
    symlink(&v, report.join("index.html")).unwrap();
    let (code, out, err) = zoosim(&[
        "run",
        "scenarios/queue.toml",
        "--seeds",
        "1",
        "--report",
        &s(&report),
        "--report-all",
    ]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("index.html: is a symbolic link"),
        "{out}{err}"
    );
    kept(&v);
    // A scenario's page directory, a link to a directory elsewhere.
    let report = d.path().join("report2");
    std::fs::create_dir(&report).unwrap();
    symlink(outside.path(), report.join("queue")).unwrap();
    let (_, out, err) = zoosim(&[
        "run",
        "scenarios/queue.toml",
        "--seeds",
        "1",
        "--report",
        &s(&report),
        "--report-all",
    ]);
    assert!(
        format!("{out}{err}").contains("queue: is a symbolic link"),
        "{out}{err}"
    );
    let planted: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(planted, ["victim"], "pages written through the link");
    // A history file's name, a link.
    let hist = d.path().join("hist");
    std::fs::create_dir(&hist).unwrap();
    let seed = "2661154829";
    symlink(&v, hist.join(format!("queue-seed-{seed}.jsonl"))).unwrap();
    let (_, out, err) = zoosim(&[
        "run",
        "scenarios/queue.toml",
        "--seeds",
        "1",
        "--seed-start",
        seed,
        "--history",
        &s(&hist),
        "--history-all",
    ]);
    assert!(
        format!("{out}{err}").contains("is a symbolic link"),
        "{out}{err}"
    );
    kept(&v);
}

#[test]
fn history_will_not_write_over_the_file_it_reads() {
    let d = scratch();
    let hist = d.path().join("h");
    std::fs::create_dir(&hist).unwrap();
    let (code, out, err) = zoosim(&run_queue(&["--history", &s(&hist), "--history-all"]));
    assert_eq!(code, 0, "{out}{err}");
    let file = std::fs::read_dir(&hist)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let before = std::fs::read(&file).unwrap();
    // The same file, by another name too.
    let other = d.path().join("h/./").join(file.file_name().unwrap());
    for o in [&file, &other] {
        let (code, out, err) = zoosim(&["history", &s(&file), "--edn", "-o", &s(o)]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(err.contains("is the history being read"), "{err}");
    }
    assert_eq!(std::fs::read(&file).unwrap(), before);
    // Another file is written.
    let edn = d.path().join("h.edn");
    let (code, out, err) = zoosim(&["history", &s(&file), "--edn", "-o", &s(&edn)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(std::fs::read_to_string(&edn).unwrap().starts_with('['));
}

/// The words of the printed replay command, as a POSIX shell reads them
/// (`sh` itself prints them back), run where nothing else may appear.
fn words_as_the_shell_reads(command: &str, dir: &Path) -> Vec<String> {
    let printed = Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s\\n' {command}"))
        .current_dir(dir)
        .output()
        .expect("sh");
    assert!(printed.status.success());
    String::from_utf8(printed.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn printed_replay_commands_paste_as_they_read() {
    let d = scratch();
    let sub = d.path().join("p q");
    std::fs::create_dir(&sub).unwrap();
    let file = sub.join("herd $(touch PWNED) ü;x 'it'.toml");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/bug-lock-herd.toml"),
        &file,
    )
    .unwrap();
    let (code, out, err) = zoosim(&["run", &s(&file), "--seeds", "20"]);
    assert_eq!(code, 0, "{out}{err}");
    let replay = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: "))
        .unwrap_or_else(|| panic!("a replay line in:\n{out}"));
    let words = words_as_the_shell_reads(replay, d.path());
    assert!(words.contains(&s(&file)), "{words:?} from {replay}");
    assert!(
        !d.path().join("PWNED").exists(),
        "the pasted command ran code"
    );
    // The words replay the seed.
    let at = words.iter().position(|w| w == "replay").expect("replay");
    let args: Vec<&str> = words[at..].iter().map(String::as_str).collect();
    let (code, out, _) = zoosim(&args);
    assert_eq!(code, 1, "the replayed seed fails again:\n{out}");
}

#[test]
fn two_scenarios_of_one_name_are_refused_before_any_seed_runs() {
    let d = scratch();
    for sub in ["a", "b"] {
        std::fs::create_dir(d.path().join(sub)).unwrap();
        std::fs::copy(
            concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/queue.toml"),
            d.path().join(sub).join("x.toml"),
        )
        .unwrap();
    }
    let (a, b) = (d.path().join("a/x.toml"), d.path().join("b/x.toml"));
    let (code, out, err) = zoosim(&["run", &s(&a), &s(&b), "--seeds", "1"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("two scenarios named \"x\""), "{err}");
    assert!(err.contains(&s(&a)) && err.contains(&s(&b)), "{err}");
    assert!(!out.contains("seeds in"), "{out}");
}

#[test]
fn a_history_named_index_does_not_lose_its_page_to_the_index() {
    let d = scratch();
    let index = d.path().join("index");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/histories/etcd/etcd_000.log"
        ),
        &index,
    )
    .unwrap();
    let report = d.path().join("report");
    std::fs::create_dir(&report).unwrap();
    let (code, out, err) = zoosim(&[
        "lin",
        &s(&index),
        "--model",
        "cas-register",
        "--report",
        &s(&report),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    let page = std::fs::read_to_string(report.join("index-2.html")).expect("its page");
    assert!(page.contains("not linearizable"), "the file's page");
    let idx = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(idx.contains("href=\"index-2.html\""), "the index links it");
}

#[test]
fn special_files_where_scenarios_go_are_refused_at_once() {
    let d = scratch();
    let dir = d.path().join("scenarios");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/queue.toml"),
        dir.join("a.toml"),
    )
    .unwrap();
    mkfifo(&dir.join("b.toml"));
    let quick = Duration::from_secs(30);
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    for args in [vec!["list", "scenarios"], vec!["run", "scenarios"]] {
        let (code, out, err) = zoosim_in(d.path(), &args, quick);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(
            err.contains("b.toml: is a FIFO, not a regular file"),
            "{err}"
        );
    }
    let fifo = s(&dir.join("b.toml"));
    let (code, _, err) = zoosim_in(here, &["replay", &fifo, "--seed", "1"], quick);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is a FIFO"), "{err}");
    // A link to an endless device: named for what it is, not read.
    let zero = d.path().join("zero.toml");
    symlink("/dev/zero", &zero).unwrap();
    for args in [
        vec!["replay", fifo.as_str(), "--seed", "1"],
        vec!["run", fifo.as_str()],
    ] {
        let args: Vec<String> = args.iter().map(|a| a.replace(&fifo, &s(&zero))).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = zoosim_in(here, &args, quick);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("is a character device"), "{err}");
    }
    // A huge file is refused by its size.
    let big = d.path().join("big.toml");
    std::fs::write(&big, vec![b'#'; 2 << 20]).unwrap();
    let (code, _, err) = zoosim_in(here, &["replay", &s(&big), "--seed", "1"], quick);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("larger than any scenario"), "{err}");
    // `list` of a directory with a file it cannot read exits 2.
    std::fs::remove_file(dir.join("b.toml")).unwrap();
    std::fs::write(dir.join("c.toml"), "format = 1\nrecipe = 7\n").unwrap();
    let (code, out, err) = zoosim_in(d.path(), &["list", "scenarios"], quick);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("c.toml"), "the listing names it: {out}");
    assert!(
        err.contains("1 scenario file(s) could not be read"),
        "{err}"
    );
}

/// Runs zoosim with stdout or stderr on /dev/full (a full disk).
fn zoosim_full(args: &[&str], full_stdout: bool) -> (i32, String, String) {
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full")
    };
    let mut c = Command::new(env!("CARGO_BIN_EXE_zoosim"));
    c.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    if full_stdout {
        c.stdout(full()).stderr(Stdio::piped());
    } else {
        c.stdout(Stdio::piped()).stderr(full());
    }
    let out = c.output().expect("zoosim runs");
    (
        out.status.code().expect("exited, not killed"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_full_disk_under_the_output_ends_in_exit_2_with_one_line() {
    for args in [
        vec!["list"],
        vec!["run", "scenarios/queue.toml", "--seeds", "1"],
        vec![
            "replay",
            "scenarios/queue.toml",
            "--seed",
            "2661154829",
            "--trace",
        ],
    ] {
        let (code, _, err) = zoosim_full(&args, true);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("No space left on device"), "{args:?}: {err}");
    }
    // Nowhere to say what went wrong: the exit status says it.
    let (code, _, _) = zoosim_full(&["run", "/nonexistent"], false);
    assert_eq!(code, 2);
}

#[test]
fn thread_counts_past_the_machines_cores_are_cut_to_them_with_a_note() {
    let (code, out, err) = zoosim(&run_queue(&["--jobs", "18446744073709551615"]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("note: --jobs 18446744073709551615 is more than"),
        "{err}"
    );
    let (code, out, err) = zoosim(&["check", "lock", "--clients", "2", "--threads", "1000"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("note: --threads 1000 is more than"), "{err}");
}

/// Shards 0/2 and 1/2 of the queue's seeds, as two summaries.
fn two_shards(dir: &Path) -> [PathBuf; 2] {
    [0, 1].map(|i| {
        let f = dir.join(format!("s{i}.json"));
        let shard = format!("{i}/2");
        let (code, out, err) = zoosim(&run_queue(&["--shard", &shard, "--summary", &s(&f)]));
        assert_eq!(code, 0, "{out}{err}");
        f
    })
}

fn tamper(f: &Path, edit: impl Fn(&mut serde_json::Value)) {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
    edit(&mut v["scenarios"][0]);
    std::fs::write(f, v.to_string()).unwrap();
}

#[test]
fn merge_refuses_tampered_counts_instead_of_wrapping_them() {
    let d = scratch();
    let [a, b] = two_shards(d.path());
    let (code, out, err) = zoosim(&["merge", &s(&a), &s(&b)]);
    assert_eq!(code, 0, "the shards as written merge: {out}{err}");
    // More seeds run than the shard holds.
    tamper(&b, |r| r["seeds_run"] = 1_000_000.into());
    let (code, out, err) = zoosim(&["merge", &s(&a), &s(&b)]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("1000000 seeds run"), "{err}");
    assert!(err.contains("hold 1 seeds"), "{err}");
    // Sums past u64: each file alone is fine.
    let [a, b] = two_shards(d.path());
    for f in [&a, &b] {
        tamper(f, |r| r["sim_ms"] = u64::MAX.into());
    }
    let (code, out, err) = zoosim(&["merge", &s(&a), &s(&b)]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("its sim_ms takes the shards' sum past"),
        "{err}"
    );
}

#[test]
fn text_from_a_scenario_file_cannot_drive_the_terminal() {
    let d = scratch();
    let dir = d.path().join("scenarios");
    std::fs::create_dir(&dir).unwrap();
    let queue =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/queue.toml"))
            .unwrap();
    let described = queue
        .lines()
        .map(|l| match l.starts_with("description") {
            true => "description = \"red \\u001B[31mX\\nnext \\u202Etxt.exe\"".to_owned(),
            false => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(described, queue, "queue.toml has a description line");
    std::fs::write(dir.join("q.toml"), described).unwrap();
    let (code, out, err) = zoosim_in(d.path(), &["list", "scenarios"], Duration::from_secs(30));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        !out.contains('\u{1b}') && !out.contains('\u{202e}'),
        "{out:?}"
    );
    assert!(
        out.contains("red \\u{1b}[31mX\\u{a}next \\u{202e}txt.exe"),
        "{out}"
    );
}

// Long work without an end (issue 34, item 8): a seed's budget counts
// every simulated event that makes a seed long, and the first Ctrl-C or
// SIGTERM stops the seed in flight.

/// The queue of scenarios/queue.toml with 64 producers and 64 consumers:
/// a valid seed that ran for minutes.
const QUEUE_64X64: &str = "format = 1\n\
    description = \"FIFO queue, 64 producers, 64 consumers\"\n\
    recipe = \"queue\"\nseeds = 1\nseed_start = 0x9e9e0000\n\
    [workload]\nproducers = 64\nconsumers = 64\n";

/// The lock under a fault every millisecond for a simulated hour.
const FAULT_EVERY_MS: &str = "format = 1\n\
    description = \"lock, a fault every millisecond for a simulated hour\"\n\
    recipe = \"lock\"\nseeds = 1\n\
    [faults]\ninterval_ms = [1, 1]\nphase_ms = 3600000\n";

/// `zoosim` started in `dir` with the seed budget set by
/// `ZOOSIM_SEED_BUDGET_EVENTS` = `budget`, or its default (None).
fn zoosim_budgeted(dir: &Path, args: &[&str], budget: Option<u64>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zoosim"));
    c.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("ZOOSIM_SEED_BUDGET_EVENTS");
    if let Some(b) = budget {
        c.env("ZOOSIM_SEED_BUDGET_EVENTS", b.to_string());
    }
    c
}

/// The `seed-budget` line of a run's output.
fn budget_line(out: &str) -> &str {
    out.lines()
        .find(|l| l.contains("seed-budget: stopped at simulated"))
        .unwrap_or_else(|| panic!("no seed-budget line in:\n{out}"))
}

#[test]
fn sixty_four_producers_and_consumers_stop_at_the_default_budget_naming_what_was_counted() {
    // It logged under the 250,000 outcomes the budget counted while it
    // ran for minutes, and its history then took most of a minute to
    // check; counted in events (its messages most), the default budget
    // stops it, and nothing checks what it left.
    let d = scratch();
    std::fs::write(d.path().join("queue-64x64.toml"), QUEUE_64X64).unwrap();
    let child = zoosim_budgeted(d.path(), &["run", "queue-64x64.toml"], None)
        .spawn()
        .expect("zoosim runs");
    let (code, out, err) = finish(child, Duration::from_secs(180), "the 64x64 queue");
    assert_eq!(code, 1, "{out}{err}");
    let line = budget_line(&out);
    assert!(
        line.contains("over a seed's budget of 1000000 events"),
        "{line}"
    );
    for kind in [
        " messages",
        " outcomes",
        " connections opened",
        " faults tried",
        " server restarts",
        " wake-ups of held messages",
    ] {
        assert!(line.contains(kind), "{kind:?} in {line}");
    }
    assert!(line.contains("128 clients sent"), "{line}");
    assert!(line.contains("run fewer clients in `[workload]`"), "{line}");
    // Not judged further: no contract verdict on a history cut short.
    assert!(!out.contains("UNDECIDED"), "{out}");
}

#[test]
fn a_fault_every_millisecond_stops_at_the_default_budget_within_seconds() {
    // A simulated hour of faults every millisecond ran for many minutes
    // (faults were not counted, nor the held messages each heal wakes).
    let d = scratch();
    std::fs::write(d.path().join("faults.toml"), FAULT_EVERY_MS).unwrap();
    let child = zoosim_budgeted(d.path(), &["run", "faults.toml"], None)
        .spawn()
        .expect("zoosim runs");
    let (code, out, err) = finish(child, Duration::from_secs(60), "a fault every ms");
    assert_eq!(code, 1, "{out}{err}");
    let line = budget_line(&out);
    assert!(line.contains(" faults tried"), "{line}");
    assert!(line.contains(" wake-ups of held messages"), "{line}");
    assert!(
        line.contains("its faults are frequent") && line.contains("`faults.interval_ms`"),
        "{line}"
    );
    // A count of simulated events: the replay stops at the same place.
    let child = zoosim_budgeted(d.path(), &["replay", "faults.toml", "--seed", "0"], None)
        .spawn()
        .expect("zoosim runs");
    let (code, replayed, err) = finish(child, Duration::from_secs(60), "its replay");
    assert_eq!(code, 1, "{replayed}{err}");
    let stop = |l: &str| l.split("seed-budget: ").nth(1).unwrap_or("").to_owned();
    assert_eq!(stop(line), stop(budget_line(&replayed)));
}

#[test]
fn sigterm_stops_the_seed_in_flight_within_seconds_and_prints_what_ran() {
    // The first Ctrl-C or SIGTERM used to wait for the seeds in flight:
    // minutes, for a long one. With its budget raised out of reach, the
    // 64x64 queue's seed runs until the signal stops it.
    let d = scratch();
    std::fs::write(d.path().join("queue-64x64.toml"), QUEUE_64X64).unwrap();
    let child = zoosim_budgeted(
        d.path(),
        &["run", "queue-64x64.toml", "--jobs", "1"],
        Some(1_000_000_000_000),
    )
    .spawn()
    .expect("zoosim runs");
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: a plain kill(2) of our own child, still running (not waited).
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let (code, out, err) = finish(child, Duration::from_secs(20), "after SIGTERM");
    assert_eq!(code, 130, "{out}{err}");
    assert!(
        err.contains("interrupted: stopping the seeds in flight"),
        "{err}"
    );
    // Neither a failure nor a pass: not counted, and the run says so.
    assert!(
        out.contains("INTERRUPTED after 0 seeds (no failure so far"),
        "{out}"
    );
    assert!(
        !out.contains("FAILED") && !out.contains("seed-budget"),
        "{out}"
    );
    assert!(
        out.contains("interrupted: the summary above is what ran"),
        "{out}"
    );
}
