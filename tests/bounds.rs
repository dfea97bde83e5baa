//! The bounds of long and large jobs hold (issue 34, items 3 and 12): a
//! time or memory bound given to `zoosim lin` or `zoosim check` ends the
//! job near it, with a message naming the bound and what was found so
//! far, and Ctrl-C prints what was found instead of losing it. Memory is
//! judged by the child's peak resident set (getrusage), the figure a
//! machine runs out of. Each test here failed before its fix.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zoosim::memory::{live_bytes, Counting, FLUSH_BYTES};

// This test binary counts its own memory as `zoosim` does, so that the
// counter itself is tested here, not only through the commands.
#[global_allocator]
static ALLOC: Counting<std::alloc::System> = Counting::new(std::alloc::System);

/// How a child ended: exit code, stdout, stderr, peak resident set in
/// MiB, wall time.
struct Ended {
    code: i32,
    stdout: String,
    stderr: String,
    peak_mib: u64,
    wall: Duration,
}

/// Runs zoosim with `args`, sending `signal` after `signal_after` if
/// given; killed (and the test failed) past `limit`.
// The child is reaped by wait4 (for its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn zoosim(args: &[&str], signal: Option<(i32, Duration)>, limit: Duration) -> Ended {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let child = Command::new(env!("CARGO_BIN_EXE_zoosim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("zoosim runs");
    let pid = child.id() as libc::pid_t;
    let started = Instant::now();
    let mut signalled = false;
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 on our own child, with valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break (status, usage);
        }
        assert_eq!(r, 0, "wait4 failed");
        if let Some((sig, after)) = signal {
            if !signalled && started.elapsed() >= after {
                // SAFETY: kill(2) on our child, not yet reaped.
                unsafe { libc::kill(pid, sig) };
                signalled = true;
            }
        }
        if started.elapsed() > limit {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("zoosim {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        libc::WIFEXITED(status),
        "zoosim {args:?} did not exit (killed by signal {})",
        libc::WTERMSIG(status)
    );
    Ended {
        code: libc::WEXITSTATUS(status),
        stdout: std::fs::read_to_string(out).unwrap(),
        stderr: std::fs::read_to_string(err).unwrap(),
        // ru_maxrss is in KiB on Linux.
        peak_mib: usage.ru_maxrss as u64 / 1024,
        wall: started.elapsed(),
    }
}

/// A zoosim history in which one session created `/a`, another sent
/// `n` creates of `/a/n0`.. that were never answered, and the first then
/// read `/a`'s children as every other one of them: the check must find
/// which unanswered creates took effect, among thousands.
fn unanswered_creates(path: &Path, n: usize) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let stat = |z: u64, kids: usize| {
        format!(
            r#"{{"czxid":{z},"mzxid":{z},"ctime":3,"mtime":3,"version":0,"cversion":{kids},"aversion":0,"ephemeral_owner":0,"data_length":0,"num_children":{kids},"pzxid":{z}}}"#
        )
    };
    let z0: u64 = 4294967297;
    writeln!(f, r#"{{"kind":"meta","format":1,"scenario":"x","file":"x.toml","seed":1,"zoosim":"0.1.0","servers":1,"session_timeout_ms":4000,"tick_ms":500,"sync_limit_ticks":4}}"#).unwrap();
    writeln!(f, r#"{{"kind":"role","t":0,"server":0,"process":1,"role":"leading","epoch":1,"serving":true}}"#).unwrap();
    let session = |f: &mut std::io::BufWriter<std::fs::File>, c: u32, t: u64| {
        writeln!(f, r#"{{"kind":"session","t":{t},"client":{c},"handle":{c},"session":"0x{c}","state":"Connected","server":0}}"#).unwrap();
    };
    session(&mut f, 1, 1);
    writeln!(f, r#"{{"kind":"invoke","t":2,"id":0,"client":1,"handle":1,"session":"0x1","xid":1,"op":{{"f":"create","path":"/a","data":"","mode":"persistent"}}}}"#).unwrap();
    writeln!(f, r#"{{"kind":"complete","t":3,"id":0,"client":1,"handle":1,"server":0,"zxid":{z0},"ok":{{"f":"create","path":"/a","stat":{}}}}}"#, stat(z0, 0)).unwrap();
    session(&mut f, 2, 4);
    for i in 0..n {
        writeln!(f, r#"{{"kind":"invoke","t":{},"id":{},"client":2,"handle":2,"session":"0x2","xid":{},"op":{{"f":"create","path":"/a/n{i}","data":"","mode":"persistent"}}}}"#, 10 + i, i + 1, i + 1).unwrap();
    }
    let kids: Vec<String> = (0..n).step_by(2).map(|i| format!("\"n{i}\"")).collect();
    let z = z0 + kids.len() as u64;
    writeln!(f, r#"{{"kind":"invoke","t":10000000,"id":{},"client":1,"handle":1,"session":"0x1","xid":2,"op":{{"f":"get_children","path":"/a","watch":false}}}}"#, n + 1).unwrap();
    writeln!(f, r#"{{"kind":"complete","t":10000001,"id":{},"client":1,"handle":1,"server":0,"zxid":{z},"ok":{{"f":"get_children","children":[{}],"stat":{}}}}}"#, n + 1, kids.join(","), stat(z, kids.len())).unwrap();
}

/// The most a reading stopped at a small bound may take: the file's text
/// (read whole first, under --max-file-mib: 24 and 64 MB here), the bound,
/// the binary. Measured: 121 and 156 MiB stopped inside the parser; 287
/// and 260 MiB when the bound was polled only once the file was read.
const PEAK_MIB_READING: u64 = 200;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn the_contract_check_ends_at_its_time_bound() {
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("creates.jsonl");
    unanswered_creates(&h, 10_000);
    // Before: 63 s past a 2 s bound (the fast path's searches took no
    // stop, and each rescue scanned every unanswered create twice).
    let e = zoosim(
        &["lin", s(&h), "--model", "zookeeper", "--budget-ms", "2000"],
        None,
        Duration::from_secs(60),
    );
    eprintln!("{:.1?}, {} MiB\n{}", e.wall, e.peak_mib, e.stdout);
    assert_eq!(e.code, 3, "unknown: {}{}", e.stdout, e.stderr);
    assert!(
        e.stdout.contains("stopped (time budget)") && e.stdout.contains("--budget-ms raises it"),
        "{}",
        e.stdout
    );
    assert!(e.wall < Duration::from_secs(15), "took {:?}", e.wall);
}

#[test]
fn the_contract_check_ends_at_its_memory_bound_measured() {
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("creates.jsonl");
    unanswered_creates(&h, 10_000);
    // Before: 3 GB under --memory-mib 300, the bound an estimate of the
    // memo's size that left the states' own memory out.
    let e = zoosim(
        &["lin", s(&h), "--model", "zookeeper", "--memory-mib", "300"],
        None,
        Duration::from_secs(120),
    );
    eprintln!("{:.1?}, {} MiB\n{}", e.wall, e.peak_mib, e.stdout);
    assert_eq!(e.code, 3, "unknown: {}{}", e.stdout, e.stderr);
    assert!(
        e.stdout.contains("memory budget exhausted") && e.stdout.contains("--memory-mib raises it"),
        "{}",
        e.stdout
    );
    // The bound, the process's own (about 60 MiB with the history), and
    // the allocator's slack.
    assert!(e.peak_mib < 300 + 250, "peak {} MiB", e.peak_mib);
}

#[test]
fn a_model_check_ends_at_its_memory_bound_and_says_so() {
    // Before: no such bound; the default state cap took about 9 GB and
    // the check aborted on a failed allocation, printing nothing.
    let e = zoosim(
        &[
            "check",
            "lock",
            "--clients",
            "4",
            "--max-faults",
            "2",
            "--memory-mib",
            "300",
        ],
        None,
        Duration::from_secs(300),
    );
    eprintln!("{:.1?}, {} MiB\n{}", e.wall, e.peak_mib, e.stdout);
    assert_eq!(e.code, 3, "not conclusive: {}{}", e.stdout, e.stderr);
    assert!(
        e.stdout
            .contains("NOT EXHAUSTIVE: the search stopped at --memory-mib 300"),
        "{}",
        e.stdout
    );
    assert!(e.stdout.contains("mutual-exclusion"), "{}", e.stdout);
    assert!(e.peak_mib < 300 + 250, "peak {} MiB", e.peak_mib);
}

#[test]
fn ctrl_c_on_lin_prints_what_was_explored() {
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("creates.jsonl");
    unanswered_creates(&h, 10_000);
    // Before: killed by the signal, nothing printed.
    let e = zoosim(
        &["lin", s(&h), "--model", "zookeeper"],
        Some((libc::SIGINT, Duration::from_secs(2))),
        Duration::from_secs(60),
    );
    assert_eq!(e.code, 130, "{}{}", e.stdout, e.stderr);
    assert!(
        e.stdout.contains("unknown") && e.stdout.contains("interrupted after"),
        "{}",
        e.stdout
    );
    assert!(e.stderr.contains("interrupted:"), "{}", e.stderr);
    assert!(e.wall < Duration::from_secs(20), "took {:?}", e.wall);
}

#[test]
fn sigterm_on_check_prints_what_was_found_so_far() {
    let e = zoosim(
        &["check", "lock", "--clients", "4", "--max-faults", "2"],
        Some((libc::SIGTERM, Duration::from_secs(3))),
        Duration::from_secs(120),
    );
    assert_eq!(e.code, 130, "{}{}", e.stdout, e.stderr);
    assert!(
        e.stdout
            .contains("NOT EXHAUSTIVE: the search stopped when interrupted")
            && e.stdout.contains("mutual-exclusion"),
        "{}",
        e.stdout
    );
    assert!(e.wall < Duration::from_secs(30), "took {:?}", e.wall);
}

#[test]
fn reading_a_large_history_counts_in_its_memory_bound() {
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("writes.log");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&h).unwrap());
    for i in 0..500_000 {
        writeln!(f, "INFO  jepsen.util - {i}\t:invoke\t:write\t{i}").unwrap();
    }
    writeln!(f, "INFO  jepsen.util - 500000\t:invoke\t:read\tnil").unwrap();
    writeln!(f, "INFO  jepsen.util - 500000\t:ok\t:read\tnil").unwrap();
    drop(f);
    // Before: the bound was taken after the history was read (its events
    // and operations, 8 times the file, went uncounted), and a history
    // near the file cap aborted on a failed allocation. Then: polled once
    // read whole (287 MB peak here). Now: polled inside the parser, which
    // stops mid-file (121 MB peak: the 24 MB text, the bound, the binary).
    let e = zoosim(
        &[
            "lin",
            s(&h),
            "--model",
            "cas-register",
            "--memory-mib",
            "40",
        ],
        None,
        Duration::from_secs(60),
    );
    assert_eq!(e.code, 3, "unknown: {}{}", e.stdout, e.stderr);
    assert!(
        e.stdout
            .contains("memory budget exhausted while reading the history (stopped at line ")
            && e.stdout.contains("events read), before any search")
            && e.stdout.contains("--memory-mib raises it"),
        "{}",
        e.stdout
    );
    assert!(e.stdout.contains("(0 ops,"), "nothing formed: {}", e.stdout);
    assert!(e.peak_mib < PEAK_MIB_READING, "peak {} MiB", e.peak_mib);
}

#[test]
fn reading_a_large_zoosim_history_stops_inside_the_parser() {
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("creates.jsonl");
    unanswered_creates(&h, 400_000);
    // Before: the contract check's reader read every record, then the
    // bound was polled.
    let e = zoosim(
        &["lin", s(&h), "--model", "zookeeper", "--memory-mib", "30"],
        None,
        Duration::from_secs(60),
    );
    eprintln!("{:.1?}, {} MiB\n{}", e.wall, e.peak_mib, e.stdout);
    assert_eq!(e.code, 3, "unknown: {}{}", e.stdout, e.stderr);
    assert!(
        e.stdout
            .contains("memory budget exhausted while reading the history (stopped at line "),
        "{}",
        e.stdout
    );
    assert!(e.peak_mib < PEAK_MIB_READING, "peak {} MiB", e.peak_mib);
}

#[test]
fn merge_refuses_a_summary_larger_than_any_run_writes() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    // A sparse gigabyte: no disk used. Before: read whole (1 GB held),
    // and on a smaller machine an allocation abort.
    std::fs::File::create(&big)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let e = zoosim(&["merge", s(&big)], None, Duration::from_secs(60));
    assert_eq!(e.code, 2, "{}{}", e.stdout, e.stderr);
    assert!(
        e.stderr
            .contains("larger than 256 MiB, the most a summary may be"),
        "{}",
        e.stderr
    );
    assert!(e.peak_mib < 200, "peak {} MiB", e.peak_mib);
}

#[test]
fn the_counter_sees_what_a_thread_holds_and_frees() {
    const MIB: usize = 1 << 20;
    // Other tests run at once here, allocating a little (their children's
    // output): a few threads' unflushed counts, and then some.
    let slack = 8 * FLUSH_BYTES as usize + MIB;
    let near = |got: usize, want: isize, what: &str| {
        assert!(
            (got as isize - want).unsigned_abs() <= slack,
            "{what}: counted {got} bytes more, expected about {want}"
        );
    };
    let before = live_bytes().expect("the counter is installed");
    let mine = vec![1u8; 20 * MIB];
    near(
        live_bytes().unwrap() - before,
        20 * MIB as isize,
        "this thread's 20 MiB",
    );
    // Held by another thread, then handed back and freed here.
    let theirs = std::thread::spawn(|| vec![2u8; 30 * MIB]).join().unwrap();
    near(
        live_bytes().unwrap() - before,
        50 * MIB as isize,
        "and a thread's 30 MiB",
    );
    drop(theirs);
    drop(mine);
    let after = live_bytes().unwrap();
    near(after.max(before) - before.min(after), 0, "all freed");
}
