//! The linearizability checker on a directory of Jepsen histories named at
//! run time (`ZOOSIM_LIN_HISTORIES`), e.g. the whole of Porcupine's etcd
//! set: here rather than beside the checker, since it reads files and the
//! checker is a pure core.

use zoosim::check::lin::cas_register::CasRegister;
use zoosim::check::lin::jepsen::{history, Format};
use zoosim::check::lin::kv::Kv;
use zoosim::check::lin::{check, Budget, Options, Summary};

/// Checks every history in the directory `ZOOSIM_LIN_HISTORIES` names
/// whose verdict its `VERDICTS.txt` gives (`path true|false`): a log is
/// read as a register, EDN maps as a key-value map. Files without a
/// verdict are read too (they must not make the reader panic). Without
/// the variable, nothing is checked.
#[test]
fn every_history_in_the_named_directory_gets_its_verdict() {
    let Some(dir) = std::env::var_os("ZOOSIM_LIN_HISTORIES") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let verdicts = std::fs::read_to_string(dir.join("VERDICTS.txt"))
        .unwrap_or_else(|e| panic!("{}/VERDICTS.txt: {e}", dir.display()));
    let mut expected = std::collections::BTreeMap::new();
    for line in verdicts
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (file, v) = line.split_once(char::is_whitespace).unwrap();
        expected.insert(file.to_owned(), v.trim() == "true");
    }
    let mut files = Vec::new();
    let mut dirs = vec![dir.clone()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|n| n != "VERDICTS.txt") {
                files.push(path);
            }
        }
    }
    files.sort();
    let options = Options {
        budget: Budget {
            max_steps: 1 << 32,
            max_memo_bytes: 1 << 30,
            ..Budget::UNLIMITED
        },
        first_failure: true,
    };
    let (mut agree, mut disagree, mut without) = (0, Vec::new(), 0);
    for path in &files {
        let rel = path
            .strip_prefix(&dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read(path).unwrap();
        let format = Format::detect(&text);
        let summary = format
            .parse(&text)
            .map_err(|e| e.to_string())
            .and_then(|events| {
                if format == Format::Log {
                    let ops = history(&CasRegister, &events).map_err(|e| e.to_string())?;
                    Ok(check(&CasRegister, &ops, &options).summary())
                } else {
                    let ops = history(&Kv::default(), &events).map_err(|e| e.to_string())?;
                    Ok(check(&Kv::default(), &ops, &options).summary())
                }
            });
        let Some(&linearizable) = expected.get(&rel) else {
            without += 1;
            eprintln!("{rel}: no verdict given; read as {summary:?}");
            continue;
        };
        let want = if linearizable {
            Summary::Linearizable
        } else {
            Summary::NotLinearizable
        };
        if summary.as_ref() == Ok(&want) {
            agree += 1;
        } else {
            disagree.push(format!("{rel}: expected {want:?}, got {summary:?}"));
        }
    }
    eprintln!(
        "{}: {agree} of {} histories with a verdict agree ({without} without a verdict)",
        dir.display(),
        agree + disagree.len()
    );
    assert!(disagree.is_empty(), "{}", disagree.join("\n"));
    assert_eq!(
        agree,
        expected.len(),
        "every history VERDICTS.txt names is found"
    );
}

// ---------------------------------------------------------------------------
// Shipped histories read by the `zoosim lin` command itself.

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/histories");

/// `zoosim lin FILE --model MODEL --json`: exit code, the JSON line (or
/// standard error).
fn lin(file: &str, model: &str) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zoosim"))
        .args(["lin", &format!("{DATA}/{file}"), "--model", model, "--json"])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// Knossos's own test data (tests/data/histories/jepsen/README.md), in the
/// forms it comes in: a vector after a comment, a vector of maps spread
/// over lines with `;` comments and nemesis events, a list, an `:error`
/// on a completion. Each gets the verdict Knossos's tests give it.
#[test]
fn knossos_histories_get_their_known_verdicts_from_zoosim_lin() {
    for (file, linearizable, ops) in [
        ("jepsen/cas-register-bug.edn", true, 6),
        ("jepsen/immediate-failure.edn", false, 1),
        ("jepsen/cas-failure.edn", false, 0),
        ("jepsen/rethink-fail-smaller.edn", false, 0),
    ] {
        let (code, out) = lin(file, "cas-register");
        let json: serde_json::Value = serde_json::from_str(out.lines().next().unwrap_or(""))
            .unwrap_or_else(|e| panic!("{file}: {e}: {out}"));
        let want = if linearizable {
            "linearizable"
        } else {
            "not-linearizable"
        };
        assert_eq!(json["verdict"], want, "{file}: {out}");
        assert_eq!(code, if linearizable { 0 } else { 1 }, "{file}: {out}");
        if ops > 0 {
            assert_eq!(json["ops"], ops, "{file}: {out}");
        }
    }
}

/// The path a zoosim op names, if it names one.
fn op_path(op: &zoosim::history::HistOp) -> Option<&str> {
    use zoosim::proto::Op;
    match op {
        zoosim::history::HistOp::Zk(
            Op::Create { path, .. }
            | Op::Delete { path, .. }
            | Op::Exists { path, .. }
            | Op::GetData { path, .. }
            | Op::GetChildren { path, .. }
            | Op::SetData { path, .. }
            | Op::Sync { path },
        ) => Some(path),
        _ => None,
    }
}

/// `zoosim history FILE --edn` reads back through `zoosim lin`'s EDN
/// reader: every op map an event, on its own line, with the op's name,
/// arguments and completion type. No model `zoosim lin` has reads
/// ZooKeeper's operations from EDN (`--model zookeeper` reads the JSON
/// lines), so the command refuses the export by what the model does not
/// know, at its first line, and not for its syntax.
#[test]
fn zoosim_s_own_edn_export_reads_back_into_events() {
    use zoosim::check::lin::jepsen::{parse_edn, Kind, Value};
    use zoosim::history::{edn, json};
    let read = |f: &str| std::fs::read_to_string(format!("{DATA}/{f}")).unwrap();
    let h = json::parse(&read("zoosim/small-lock-seed-1.jsonl")).unwrap();
    let export = edn::to_edn(&h);
    // The shipped export is what this zoosim writes.
    assert_eq!(export, read("zoosim/small-lock-seed-1.edn"));
    let events = parse_edn(export.as_bytes()).unwrap();
    let ops = h.ops();
    assert_eq!(events.len(), 2 * ops.len());
    assert!(events.iter().enumerate().all(|(k, e)| e.line == k + 1));
    let invokes: Vec<_> = events.iter().filter(|e| e.kind == Kind::Invoke).collect();
    assert_eq!(invokes.len(), ops.len());
    let mut paths = 0;
    for (e, p) in invokes.iter().zip(&ops) {
        assert_eq!(e.f, p.invoke.op.name().replace('_', "-"), "line {}", e.line);
        if let Some(path) = op_path(&p.invoke.op) {
            assert_eq!(e.value.get("path"), Some(&Value::Str(path.into())));
            paths += 1;
        }
    }
    assert!(paths > 0);
    // Each completion's type, as the export's mapping gives it.
    let count = |k: Kind| events.iter().filter(|e| e.kind == k).count();
    let typed = |t: &str| {
        ops.iter()
            .filter(|p| {
                let sent =
                    p.invoke.xid.is_some() || p.invoke.op == zoosim::history::HistOp::CloseSession;
                p.complete
                    .is_some_and(|(_, c)| edn::completion_type(&p.invoke.op, sent, &c.outcome) == t)
                    || (p.complete.is_none() && t == "info")
            })
            .count()
    };
    assert_eq!(
        (count(Kind::Ok), count(Kind::Fail), count(Kind::Info)),
        (typed("ok"), typed("fail"), typed("info"))
    );
    assert!(count(Kind::Ok) > 0 && count(Kind::Fail) > 0);
    // The command: read through, refused by the model at line 1.
    let (code, out) = lin("zoosim/small-lock-seed-1.edn", "cas-register");
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("small-lock-seed-1.edn:1: unknown operation :create for the cas register"),
        "{out}"
    );
    let (code, out) = lin("zoosim/small-lock-seed-1.edn", "kv");
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("small-lock-seed-1.edn:1: :create has no :key"),
        "{out}"
    );
    // The JSON lines it came from: checked against the contract.
    let (code, out) = lin("zoosim/small-lock-seed-1.jsonl", "zookeeper");
    assert_eq!((code, out.contains("\"linearizable\"")), (0, true), "{out}");
}
