//! The `zoosim` command against hostile input, third round (issue 34,
//! items 11 and 12): input quoted back cut short with its length (a
//! 200 MB number, a 100 KB token, a 50 MB value on the terminal and on a
//! page), completions that contradict their invocations, errors that say
//! where, the bytes `--history-all` wrote, and the Explorer answering only
//! requests addressed to it. Inputs are made here, in scratch directories.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

#[path = "support/cli.rs"]
mod cli;
use cli::{scratch, zoosim};

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The most bytes of standard error a refused file may take.
const SHORT: usize = 2_000;

#[test]
fn a_200_mb_number_is_quoted_short_with_its_length() {
    let d = scratch();
    let digits = "1".repeat(200 << 20);
    // A Jepsen log line writing it, and a zoosim history whose seed is it
    // (as a string: a number that large is out of JSON's range).
    let log = d.path().join("big.log");
    std::fs::write(
        &log,
        format!("INFO  jepsen.util - 0\t:invoke\t:write\t{digits}\n"),
    )
    .unwrap();
    let (code, out, err) = zoosim(&["lin", &s(&log), "--model", "cas-register"]);
    assert_eq!(code, 2, "{out}{}", &err[..err.len().min(SHORT)]);
    assert!(err.len() < SHORT, "{} bytes of stderr", err.len());
    assert!(err.contains("big.log:1: the integer 1111"), "{err}");
    assert!(err.contains("(209,715,200 bytes)"), "{err}");

    let jsonl = d.path().join("big.jsonl");
    std::fs::write(
        &jsonl,
        format!("{{\"kind\":\"meta\",\"format\":1,\"scenario\":\"x\",\"seed\":\"{digits}\"}}\n"),
    )
    .unwrap();
    drop(digits);
    for args in [
        vec!["lin", &s(&jsonl), "--model", "zookeeper"],
        vec!["history", &s(&jsonl)],
    ] {
        let (code, _, err) = zoosim(&args);
        assert_eq!(code, 2, "{}", &err[..err.len().min(SHORT)]);
        assert!(err.len() < SHORT, "{args:?}: {} bytes of stderr", err.len());
        // The field is named, the value cut with its length.
        assert!(
            err.contains("big.jsonl:1: bad meta record: field \"seed\": invalid type: string"),
            "{err}"
        );
        // (The length of the word of serde's message that quotes it.)
        assert!(err.contains("… (209,715,20"), "{err}");
    }
}

#[test]
fn a_100_kb_edn_token_is_quoted_short_with_its_length() {
    let d = scratch();
    let token = "a".repeat(100 << 10);
    for (text, model, says) in [
        (
            format!("{{:process 0 :type :{token} :f :write :value 1}}\n"),
            "cas-register",
            "unknown type \":aaaa",
        ),
        (
            format!("{{:process 0 :type :invoke :f :put :key \"k\" :value :{token}}}\n"),
            "kv",
            ":put takes a string value, not :aaaa",
        ),
        (
            format!("{{:process 0 :type :invoke :f :{token} :value 1}}\n"),
            "cas-register",
            "unknown operation :aaaa",
        ),
    ] {
        let f = d.path().join("token.edn");
        std::fs::write(&f, &text).unwrap();
        let (code, _, err) = zoosim(&["lin", &s(&f), "--model", model]);
        assert_eq!(code, 2, "{}", &err[..err.len().min(SHORT)]);
        assert!(err.len() < SHORT, "{} bytes of stderr", err.len());
        assert!(err.contains(says), "{err}");
        assert!(err.contains("bytes)"), "the length is named: {err}");
    }
}

#[test]
fn a_long_argument_is_not_echoed_whole() {
    let long = "9x".repeat(50_000);
    for args in [
        vec!["run", "scenarios/queue.toml", "--seeds", &long],
        vec!["lin", "Cargo.toml", "--model", &long],
    ] {
        let (code, _, err) = zoosim(&args);
        assert_eq!(code, 2, "{}", &err[..err.len().min(SHORT)]);
        assert!(err.len() < SHORT, "{} bytes of stderr", err.len());
        assert!(err.contains("(100,00"), "the length is named: {err}");
    }
}

/// A key-value history putting a 50 MB value, then a get that cannot
/// have read it: not linearizable, every diagnosis line about the value.
fn fifty_mb_kv(dir: &Path) -> std::path::PathBuf {
    let v = "v".repeat(50 << 20);
    let f = dir.join("big.edn");
    std::fs::write(
        &f,
        format!(
            "{{:process 0 :type :invoke :f :put :key \"k\" :value \"{v}\"}}\n\
             {{:process 0 :type :ok :f :put :key \"k\" :value \"{v}\"}}\n\
             {{:process 1 :type :invoke :f :get :key \"k\" :value nil}}\n\
             {{:process 1 :type :ok :f :get :key \"k\" :value \"x\"}}\n"
        ),
    )
    .unwrap();
    f
}

#[test]
fn a_50_mb_value_stays_small_on_the_terminal_and_on_the_page() {
    let d = scratch();
    let f = fifty_mb_kv(d.path());
    let reports = d.path().join("reports");
    std::fs::create_dir(&reports).unwrap();
    let (code, out, err) = zoosim(&["lin", &s(&f), "--model", "kv", "--report", &s(&reports)]);
    assert_eq!(code, 1, "{}{err}", &out[..out.len().min(SHORT)]);
    // Was 52 MB of standard output and a 367 MB page.
    assert!(out.len() < 5_000, "{} bytes of stdout", out.len());
    assert!(out.contains("\"vvvv"), "{out}");
    assert!(out.contains("(52,428,800 bytes)"), "{out}");
    let page = std::fs::read_to_string(reports.join("big.edn.html")).unwrap();
    assert!(page.len() < 1 << 20, "a page of {} bytes", page.len());
    assert!(page.contains("52,428,800 bytes"), "the page says how long");
    assert!(
        page.contains("is whole on those lines of"),
        "and where it is whole"
    );
    let (code, out, _) = zoosim(&["lin", &s(&f), "--model", "kv", "--json"]);
    assert_eq!(code, 1);
    assert!(out.len() < 5_000, "{} bytes of --json", out.len());
}

#[test]
fn a_50_mb_node_value_stays_small_on_the_history_page() {
    let d = scratch();
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let h =
        std::fs::read_to_string(here.join("tests/data/histories/zoosim/small-lock-seed-1.jsonl"))
            .unwrap();
    // The first create's data (op 0), 50 MB.
    let v = "v".repeat(50 << 20);
    let h = h.replacen("\"data\":\"\"", &format!("\"data\":\"{v}\""), 1);
    let f = d.path().join("big.jsonl");
    std::fs::write(&f, h).unwrap();
    let reports = d.path().join("reports");
    std::fs::create_dir(&reports).unwrap();
    let (code, out, err) = zoosim(&[
        "lin",
        &s(&f),
        "--model",
        "zookeeper",
        "--report",
        &s(&reports),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    // Was a 105 MB page.
    let page = std::fs::read_to_string(reports.join("big.jsonl.html")).unwrap();
    assert!(page.len() < 1 << 20, "a page of {} bytes", page.len());
    assert!(page.contains("52,428,800 bytes"), "the page says how long");
    assert!(
        page.contains(&format!("whole: zoosim history {} --op 0", s(&f))),
        "and how to see it whole"
    );
    // Which shows it whole.
    let (code, out, err) = zoosim(&["history", &s(&f), "--op", "0"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 2, "its invocation and completion");
    assert!(out.contains(&v));
    let (code, _, err) = zoosim(&["history", &s(&f), "--op", "99999"]);
    assert_eq!(code, 2);
    assert!(err.contains("no operation 99999"), "{err}");
}

#[test]
fn a_completion_that_contradicts_its_invocation_is_refused_naming_both() {
    let d = scratch();
    let op = |p: u32, t: &str, f: &str, rest: &str| {
        format!("{{:process {p} :type :{t} :f :{f} {rest}}}\n")
    };
    for (model, invoke, ok, says) in [
        (
            "cas-register",
            op(0, "invoke", "write", ":value 1"),
            op(0, "ok", "write", ":value \"x\""),
            "the :ok of a write of 1 carries another value, \"x\"",
        ),
        (
            "cas-register",
            op(0, "invoke", "cas", ":value [1 2]"),
            op(0, "ok", "cas", ":value [3 4]"),
            "the :ok of a cas [1 2] carries another value, [3 4]",
        ),
        (
            "kv",
            op(0, "invoke", "put", ":key \"k\" :value \"a\""),
            op(0, "ok", "put", ":key \"k\" :value \"b\""),
            "the :ok of a put of \"a\" carries another value, \"b\"",
        ),
        (
            "kv",
            op(0, "invoke", "put", ":key \"k\" :value \"a\""),
            op(0, "ok", "put", ":key \"j\" :value \"a\""),
            "completes :put for key \"j\" but process 0 invoked it for key \"k\"",
        ),
    ] {
        let f = d.path().join("h.edn");
        // A read after, so that the history has something to check.
        let text = format!(
            "{invoke}{ok}{}{}",
            op(
                1,
                "invoke",
                if model == "kv" { "get" } else { "read" },
                ":key \"k\" :value nil"
            ),
            op(
                1,
                "ok",
                if model == "kv" { "get" } else { "read" },
                ":key \"k\" :value nil"
            ),
        );
        std::fs::write(&f, text).unwrap();
        let (code, _, err) = zoosim(&["lin", &s(&f), "--model", model]);
        assert_eq!(code, 2, "{model} {says}: {err}");
        assert!(err.contains(&format!("{}:2: ", s(&f))), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(err.contains("line 1"), "the invocation's line: {err}");
    }
    // An :ok that echoes its invocation, or says nothing, is fine.
    let f = d.path().join("fine.edn");
    std::fs::write(
        &f,
        format!(
            "{}{}{}{}",
            op(0, "invoke", "write", ":value 1"),
            op(0, "ok", "write", ":value nil"),
            op(0, "invoke", "cas", ":value [1 2]"),
            op(0, "ok", "cas", ":value [1 2]"),
        ),
    )
    .unwrap();
    let (code, out, err) = zoosim(&["lin", &s(&f), "--model", "cas-register"]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn a_history_with_nothing_to_check_is_refused() {
    let d = scratch();
    let meta = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/histories/zoosim/small-lock-seed-1.jsonl"),
    )
    .unwrap();
    let meta = meta.lines().next().unwrap().to_owned() + "\n";
    for (name, text, models) in [
        (
            "empty",
            String::new(),
            &["cas-register", "kv", "zookeeper"][..],
        ),
        (
            "blank",
            " \n\t\n".to_owned(),
            &["cas-register", "kv", "zookeeper"],
        ),
        (
            "comments.edn",
            "; a comment\n#_{:process 0}\n".into(),
            &["cas-register", "kv"],
        ),
        ("vector.edn", "[]\n".into(), &["cas-register", "kv"]),
        (
            "nemesis.edn",
            "{:process :nemesis :type :info :f :start}\n".into(),
            &["cas-register", "kv"],
        ),
        ("meta.jsonl", meta, &["zookeeper"]),
    ] {
        let f = d.path().join(name);
        std::fs::write(&f, text).unwrap();
        for model in models {
            let (code, out, err) = zoosim(&["lin", &s(&f), "--model", model]);
            assert_eq!(code, 2, "{name} {model}: {out}{err}");
            assert!(!out.contains("linearizable"), "{name} {model}: {out}");
            assert!(
                err.contains("nothing to check") || err.contains("empty history"),
                "{name} {model}: {err}"
            );
            assert!(!err.contains(":0:"), "{name} {model}: {err}");
        }
    }
}

#[test]
fn errors_name_the_field_and_no_line_or_column_0() {
    let d = scratch();
    let meta = "{\"kind\":\"meta\",\"format\":1,\"scenario\":\"x\",\"file\":null,\"seed\":1,\
                \"zoosim\":\"0.1.0\",\"servers\":3,\"session_timeout_ms\":4000,\"tick_ms\":500,\
                \"sync_limit_ticks\":2}";
    let f = d.path().join("h.jsonl");
    std::fs::write(
        &f,
        format!(
            "{meta}\n{{\"kind\":\"invoke\",\"t\":1,\"id\":\"seven\",\"client\":0,\"handle\":1,\
             \"session\":\"0x1\",\"xid\":1,\"op\":{{\"f\":\"sync\",\"path\":\"/\"}}}}\n"
        ),
    )
    .unwrap();
    let (code, _, err) = zoosim(&["history", &s(&f)]);
    assert_eq!(code, 2);
    assert!(
        err.contains("h.jsonl:2: bad invoke record: field \"id\": invalid type: string \"seven\""),
        "{err}"
    );
    // An empty summary: no character was read, so no column is named.
    let empty = d.path().join("empty.json");
    std::fs::write(&empty, "").unwrap();
    let (code, _, err) = zoosim(&["merge", &s(&empty)]);
    assert_eq!(code, 2);
    assert!(
        err.contains("empty.json:1: not a valid zoosim summary"),
        "{err}"
    );
    assert!(!err.contains(":1:0:"), "{err}");
}

#[test]
fn history_all_says_how_much_it_wrote() {
    let d = scratch();
    let (code, out, err) = zoosim(&[
        "run",
        "scenarios/queue.toml",
        "--seeds",
        "2",
        "--history",
        &s(d.path()),
        "--history-all",
    ]);
    assert!(code == 0 || code == 1, "{out}{err}");
    let bytes: u64 = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let note = err
        .lines()
        .find(|l| l.starts_with("note: 2 histories written to"))
        .unwrap_or_else(|| panic!("no note: {err}"));
    let grouped = {
        let digits = bytes.to_string();
        let mut g = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                g.push(',');
            }
            g.push(c);
        }
        g
    };
    assert!(
        note.contains(&format!("{grouped} bytes")),
        "{note} ({bytes} bytes)"
    );
}

/// One HTTP request to `addr` with `host` as its Host header: the status.
fn status_for(addr: &str, host: &str) -> u16 {
    let mut c = std::net::TcpStream::connect(addr).expect("connects");
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        c,
        "GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = BufReader::new(c).read_line(&mut answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"))
}

#[test]
fn the_explorer_answers_only_requests_addressed_to_it() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zoosim"))
        .args(["check", "lock", "--clients", "2", "--serve", "127.0.0.1:0"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("zoosim runs");
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .map(str::to_owned);
    let result = std::panic::catch_unwind(|| {
        let addr = addr.unwrap_or_else(|| panic!("no address in {line:?}"));
        let port = addr.rsplit(':').next().unwrap();
        // A page that rebound its name to 127.0.0.1 sends its own.
        assert_eq!(status_for(&addr, "evil.example"), 421);
        assert_eq!(status_for(&addr, &format!("evil.example:{port}")), 421);
        assert_eq!(status_for(&addr, &addr), 200);
        // A name other than the one given is refused too.
        assert_eq!(status_for(&addr, &format!("localhost:{port}")), 421);
    });
    let _ = child.kill();
    let _ = child.wait();
    let mut rest = String::new();
    let _ = out.read_to_string(&mut rest);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    // Not a loopback address: refused before anything is served.
    let (code, _, err) = zoosim(&["check", "lock", "--serve", "0.0.0.0:0"]);
    assert_eq!(code, 2);
    assert!(err.contains("is not a loopback address"), "{err}");
}
