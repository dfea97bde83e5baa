//! `zoosim check` and `zoosim list` as a person uses them: every model of
//! the catalog listed, a buggy variant caught with its step list, bad
//! names and sizes refused with what exists, and `--serve` opening
//! stateright's Explorer, loaded in headless Chromium (skipped loudly when
//! Chromium is not installed, unless ZOOSIM_REQUIRE_CHROMIUM is set;
//! ZOOSIM_EXPLORER_SCREENSHOT=path keeps the screenshot).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn zoosim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_zoosim"))
        .args(args)
        .output()
        .expect("zoosim runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn list_shows_every_model_with_its_variants() {
    let (code, out, err) = zoosim(&["list"]);
    assert_eq!(code, 0, "{err}");
    for needle in [
        "    model (`zoosim check lock`): the exclusive lock",
        "    model (`zoosim check barrier`): the barrier",
        "variants: barrier, barrier/no-sync",
        "variants: two-phase-commit, two-phase-commit/commit-before-all-votes",
        "claim barrier-safety (the oracle's property above)",
        "    model (`zoosim check revocable-lock`): the revocable shared lock",
        "claim every-revoked-holder-lets-go: ",
        "    model (`zoosim check two-phase-commit`): two-phase commit",
        "claim every-live-site-decides: ",
        "reach goals (sometimes): ",
        "model faults (`zoosim check --faults`): ",
    ] {
        assert!(out.contains(needle), "{needle} missing from:\n{out}");
    }
}

#[test]
fn a_model_has_its_recipes_name_and_answers_to_its_old_one() {
    let (_, out, _) = zoosim(&["list"]);
    // One name per recipe: the name a scenario file gives is the model's,
    // listed under the recipe.
    for name in ["configuration", "group-membership"] {
        let recipe = out
            .split(&format!("\n  {name}  "))
            .nth(1)
            .unwrap_or_else(|| panic!("recipe {name}:\n{out}"));
        // The recipe's own lines: up to the next line indented by two.
        let own: String = recipe
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("    "))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            own.contains(&format!("    model (`zoosim check {name}`): ")),
            "model {name}:\n{out}"
        );
    }
    for old in ["config", "membership"] {
        assert!(
            !out.contains(&format!("zoosim check {old}`")),
            "{old} still listed:\n{out}"
        );
    }
    // A variant's old name (before it took its recipe's name as prefix)
    // still finds it.
    let (code, out, err) = zoosim(&[
        "check",
        "shared-lock",
        "--variant",
        "rwlock/reader-waits-on-any",
        "--clients",
        "2",
        "--faults",
        "none",
    ]);
    assert!(code == 0 || code == 1, "{out}{err}");
    assert!(
        out.contains("shared-lock/reader-waits-on-any"),
        "{out}{err}"
    );
    // The old name still runs the model, with a note saying the new one.
    let (code, out, err) = zoosim(&["check", "config", "--clients", "2"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("note: the model \"config\" is now \"configuration\""),
        "{err}"
    );
    assert!(out.contains("configuration"), "{out}");
}

/// `zoosim check two-phase-commit` explores an abort vote (the last
/// site's vote chosen) and a failed site, and its buggy variant is caught.
#[test]
fn the_two_phase_commit_variant_is_caught_from_the_command_line() {
    let (code, out, err) = zoosim(&["check", "two-phase-commit", "--clients", "2"]);
    assert_eq!(code, 0, "{out}{err}");
    for reached in [
        "sometimes  commit-decided                   reached",
        "sometimes  aborted-on-an-abort-vote         reached",
        "sometimes  aborted-for-failed-site          reached",
    ] {
        assert!(out.contains(reached), "{reached} missing from:\n{out}");
    }
    let (code, out, err) = zoosim(&[
        "check",
        "two-phase-commit",
        "--variant",
        "two-phase-commit/commit-before-all-votes",
        "--clients",
        "2",
        "--faults",
        "none",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("validity                         FAILS"),
        "{out}"
    );
    assert!(
        out.contains("counterexample to validity (5 steps, shortest):"),
        "{out}"
    );
    assert!(
        out.contains("client 1's application, choice 1 of 2: Vote { commit: false }"),
        "{out}"
    );
}

#[test]
fn the_no_sync_barrier_is_caught_from_the_command_line() {
    let (code, out, err) = zoosim(&[
        "check",
        "barrier",
        "--variant",
        "barrier/no-sync",
        "--faults",
        "lagging-read",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("barrier-safety                   FAILS"),
        "{out}"
    );
    assert!(
        out.contains("counterexample to barrier-safety (3 steps, shortest):"),
        "{out}"
    );
    assert!(out.contains("FAULT lagging-read on client 1"), "{out}");
    // The fault's name before it took one that is not the simulation's
    // deliberate server bug still runs, with a note.
    let (code, out, err) = zoosim(&[
        "check",
        "barrier",
        "--variant",
        "barrier/no-sync",
        "--faults",
        "stale-read",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("note: the model fault \"stale-read\" is now \"lagging-read\""),
        "{err}"
    );
}

#[test]
fn bad_models_variants_sizes_and_addresses_are_refused() {
    for (args, needle) in [
        (
            &["check", "lcok"][..],
            "unknown model \"lcok\"; the models are lock, shared-lock, revocable-lock, election,",
        ),
        (
            &["check", "barrier", "--variant", "lock/herd"][..],
            "the barrier model has no variant \"lock/herd\"; it has barrier, barrier/no-sync",
        ),
        (
            &["check", "lock", "--clients", "9"][..],
            "--clients: a model takes 1 to 8 clients, not 9",
        ),
        (
            &["check", "revocable-lock", "--clients", "1"][..],
            "--clients: the revocable lock's model takes at least 2 clients (a holder and the \
             revoker), not 1",
        ),
        (
            &["check", "lock", "--max-states", "0"][..],
            "--max-states: at least 1",
        ),
        (
            &[
                "check",
                "lock",
                "--variant",
                "lock/sort-by-full-name",
                "--symmetry",
            ][..],
            "--symmetry: the sort-by-full-name lock orders contenders by guid",
        ),
        (
            &["check", "barrier", "--symmetry"][..],
            "--symmetry: the model has no symmetry reduction",
        ),
        (
            &["check", "lock", "--serve", "0.0.0.0:0"][..],
            "0.0.0.0 is not a loopback address",
        ),
        (
            &["check", "lock", "--serve", "nonsense"][..],
            "not an address",
        ),
    ] {
        let (code, out, err) = zoosim(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// A check stopped at its state bound claims nothing: its "holds" are
/// "holds so far", it says how to go further, and it exits 3 (neither
/// the 0 of a proof nor the 1 of a failure).
#[test]
fn a_check_stopped_at_its_bound_says_so_and_exits_3() {
    let (code, out, err) = zoosim(&["check", "lock", "--clients", "3", "--max-states", "2000"]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(
        out.contains("NOT EXHAUSTIVE: the search stopped at --max-states 2000"),
        "{out}"
    );
    assert!(
        out.contains("mutual-exclusion                 holds so far"),
        "{out}"
    );
    assert!(!out.contains("holds\n"), "{out}");
    assert!(
        out.contains(
            "checked: some interleavings (NOT exhaustive) of 3 clients against one server, with \
             at most 1 fault a run (of: lost-reply=1,"
        ),
        "{out}"
    );
    // The same check with room to finish is a proof, and says of what.
    let (code, out, err) = zoosim(&["check", "lock", "--clients", "2"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("NOT EXHAUSTIVE"), "{out}");
    assert!(
        out.contains(
            "checked: every interleaving of 2 clients against one server, with at most 1 fault \
             a run (of: lost-reply=1,lost-request=1,broken-connection=1,forced-expiry=1,\
             client-crash=1,lagging-read=1,zombie-read=1,deposed-leader=1), no symmetry \
             reduction\n"
        ),
        "{out}"
    );
    assert!(out.contains("symmetry off"), "{out}");
    let (code, out, err) = zoosim(&[
        "check",
        "lock",
        "--clients",
        "2",
        "--faults",
        "none",
        "--symmetry",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(
            "checked: every interleaving of 2 clients against one server, without faults, \
             reduced by the clients' symmetry\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("mutual-exclusion                 holds\n"),
        "{out}"
    );
}

/// The served process, killed when dropped (the test passing or not).
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// GET `path` from `addr`: (status line, body).
fn get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("the explorer listens");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).expect("a response");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

fn chromium() -> Option<PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        if std::env::var_os("ZOOSIM_REQUIRE_CHROMIUM").is_some_and(|x| !x.is_empty()) {
            panic!("chromium is not installed (apt-get install chromium) and ZOOSIM_REQUIRE_CHROMIUM requires it");
        }
        eprintln!("SKIP: chromium not installed (apt-get install chromium); the explorer's browser part did not run");
    }
    found
}

/// Runs headless Chromium on `url` with `args` in a fresh profile under
/// `dir`; its stdout. Killed after 90 s.
fn run_chromium(bin: &Path, dir: &Path, profile: &str, args: &[String], url: &str) -> String {
    let child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            // Let the page's script fetch the model's status and states.
            "--virtual-time-budget=8000",
        ])
        .arg(format!("--user-data-dir={}", dir.join(profile).display()))
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting chromium");
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let deadline = Instant::now() + Duration::from_secs(90);
    while !waiter.is_finished() {
        if Instant::now() > deadline {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("chromium did not finish within 90 s on {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = waiter.join().unwrap().expect("chromium's output");
    assert!(
        out.status.success(),
        "chromium failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn serve_opens_the_explorer_on_the_lock_and_a_browser_shows_it() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zoosim"))
        .args([
            "check",
            "lock",
            "--clients",
            "2",
            "--faults",
            "none",
            "--serve",
            "127.0.0.1:0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("zoosim runs");
    let stdout = child.stdout.take().expect("its stdout");
    let served = Served(child);
    // The first line says where it listens.
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("the first line");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    assert!(addr.starts_with("127.0.0.1:"), "{line}");

    // The server answers as the Explorer (retrying while it binds).
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if TcpStream::connect(&addr).is_ok() {
            break get(&addr, "/.status");
        }
        assert!(Instant::now() < deadline, "nothing listens on {addr}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.0.contains("200"), "{status:?}");
    let json: serde_json::Value = serde_json::from_str(&status.1).expect("status JSON");
    assert!(
        json["model"]
            .as_str()
            .is_some_and(|m| m.contains("LockModel")),
        "{json}"
    );
    let names: Vec<&str> = json["properties"]
        .as_array()
        .expect("properties")
        .iter()
        .filter_map(|p| p[1].as_str())
        .collect();
    assert!(names.contains(&"mutual-exclusion"), "{names:?}");
    let (code, states) = get(&addr, "/.states");
    assert!(code.contains("200"), "{code}");
    assert!(states.contains("g9-lock-"), "the initial state: {states}");

    let Some(bin) = chromium() else { return };
    let dir = std::env::temp_dir().join(format!("zoosim-explorer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The initial state selected: its state and next actions shown.
    let url = format!("http://{addr}/#/steps/0");
    let dom = run_chromium(&bin, &dir, "e1", &["--dump-dom".into()], &url);
    for needle in [
        "LockModel",
        "mutual-exclusion",
        "every-live-client-acquires",
        "server serves client 0",
        "g9-lock-",
    ] {
        assert!(dom.contains(needle), "{needle} not on the page:\n{dom}");
    }
    let png = dir.join("explorer.png");
    run_chromium(
        &bin,
        &dir,
        "e2",
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1400,1000".into(),
        ],
        &url,
    );
    let size = std::fs::metadata(&png).expect("a screenshot").len();
    assert!(
        size > 20_000,
        "the screenshot is (nearly) blank: {size} bytes"
    );
    if let Ok(keep) = std::env::var("ZOOSIM_EXPLORER_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_recipe_has_one_model_and_one_vocabulary_of_properties() {
    // Every built-in recipe has a model of its name, and every model a
    // recipe. A property's name means one thing wherever it is used: a
    // model's claim named like any oracle's property (of any recipe) or
    // any other model's claim is that very value, name and meaning.
    let registry = zoosim::prelude::Registry::new();
    let models = zoosim::models::catalog();
    let recipes: Vec<&str> = registry.names();
    let model_names: Vec<&str> = models.iter().map(|m| m.name()).collect();
    assert_eq!(
        {
            let mut r = recipes.clone();
            r.sort_unstable();
            r
        },
        {
            let mut m = model_names.clone();
            m.sort_unstable();
            m
        },
        "recipes and models differ"
    );
    let mut seen: Vec<zoosim::check::Property> = Vec::new();
    for r in registry.recipes() {
        seen.extend(r.properties().iter().copied());
    }
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/models/README.md"))
        .expect("models/README.md");
    let mut shared = 0;
    for m in &models {
        let claims = m.claims();
        assert!(!claims.is_empty(), "the {} model claims nothing", m.name());
        for &c in &claims {
            match seen.iter().find(|p| p.name == c.name) {
                Some(p) => {
                    assert_eq!(*p, c, "two meanings of {:?} ({})", c.name, m.name());
                    shared += 1;
                }
                None => seen.push(c),
            }
        }
        // Every claim is named in the models' own documentation.
        for c in &claims {
            assert!(
                doc.contains(&format!("`{}`", c.name)),
                "models/README.md does not name the {} model's claim {:?}",
                m.name(),
                c.name
            );
        }
    }
    // The lock family's no-herd, no-recipe-failure, the queues' and
    // barriers' safety properties ... are the oracles' own.
    assert!(shared >= 25, "only {shared} claims shared");
}
