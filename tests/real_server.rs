//! The real-ZooKeeper fixture: servers come up, fail over, stall, and leave
//! nothing behind (processes, ports, temp dirs), including after a panic and
//! after the test process itself exits or is SIGKILLed.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use zoosim::real_server::{fresh_root, require_zookeeper, shared_server, RealEnsemble, RealServer};

/// A four-letter word over a plain socket, independent of the fixture's own.
fn flw(port: u16, word: &str, timeout: Duration) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.write_all(word.as_bytes())?;
    let mut reply = String::new();
    s.read_to_string(&mut reply)?;
    Ok(reply)
}

fn mode(port: u16) -> Option<String> {
    let reply = flw(port, "srvr", Duration::from_secs(1)).ok()?;
    let line = reply.lines().find_map(|l| l.strip_prefix("Mode: "))?;
    Some(line.trim().to_string())
}

/// Straight to stderr so it shows for passing tests too.
fn report(test: &str, start: Instant) {
    let _ = writeln!(
        std::io::stderr(),
        "[timing] {test}: {:.2?}",
        start.elapsed()
    );
}

/// A live (not zombie) ZooKeeper JVM with this pid?
fn zk_alive(pid: u32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat
        .rsplit(')')
        .next()
        .is_some_and(|s| s.trim_start().starts_with('Z'));
    !zombie && String::from_utf8_lossy(&cmdline).contains("QuorumPeerMain")
}

/// Processes (JVM or watchdog) whose command line names this dir.
fn processes_naming(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(&needle)
        })
        .collect()
}

fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    done()
}

fn assert_cleaned_up(pid: u32, port: u16, dir: &Path) {
    assert!(!zk_alive(pid), "JVM {pid} still running");
    assert!(
        processes_naming(dir).is_empty(),
        "processes still name {}",
        dir.display()
    );
    assert!(!dir.exists(), "{} still exists", dir.display());
    // The port is free, or held by some other socket than the dead server's.
    // Tests run in parallel and grab free ports, and a port in the ephemeral
    // range can be taken by another test's outgoing connection; a closing
    // connection of the dead server may also linger in the kernel for a
    // moment (CI, stop 43: bind failed while no process listened). What must
    // never be true is that the dead server still owns a socket on the port.
    let free = wait_until(Duration::from_secs(5), || {
        TcpListener::bind(("127.0.0.1", port)).is_ok()
    });
    if !free {
        let sockets = sockets_on(port);
        let owners: Vec<u32> = sockets.iter().filter_map(|s| s.owner).collect();
        assert!(
            !owners.contains(&pid),
            "port {port} still held by the dead server {pid}: {sockets:?}"
        );
        eprintln!(
            "[note] port {port} still busy after the server {pid} died, but not by it: {sockets:?}"
        );
    }
}

/// A TCP socket whose local port is the one asked about, from /proc/net.
#[derive(Debug)]
struct PortSocket {
    /// The kernel's state code (0A = LISTEN, 06 = TIME_WAIT, 01 = ESTABLISHED, ...).
    state: String,
    /// The process holding it open; none for sockets only the kernel holds.
    owner: Option<u32>,
}

/// Every TCP socket bound to local `port`, in any state, with its owner.
fn sockets_on(port: u16) -> Vec<PortSocket> {
    let hex = format!(":{port:04X}");
    let mut found: Vec<(String, String)> = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in std::fs::read_to_string(table)
            .unwrap_or_default()
            .lines()
            .skip(1)
        {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address, st, ..., inode
            if f.len() > 9 && f[1].ends_with(&hex) {
                found.push((f[3].to_string(), format!("socket:[{}]", f[9])));
            }
        }
    }
    let owners = socket_owners();
    found
        .into_iter()
        .map(|(state, inode)| PortSocket {
            state,
            owner: owners
                .iter()
                .find(|(_, i)| *i == inode)
                .map(|(pid, _)| *pid),
        })
        .collect()
}

/// (pid, "socket:[inode]") for every socket fd of every process we can see.
fn socket_owners() -> Vec<(u32, String)> {
    let mut owners = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        for fd in std::fs::read_dir(entry.path().join("fd"))
            .into_iter()
            .flatten()
            .flatten()
        {
            if let Ok(target) = std::fs::read_link(fd.path()) {
                let target = target.to_string_lossy().into_owned();
                if target.starts_with("socket:[") {
                    owners.push((pid, target));
                }
            }
        }
    }
    owners
}

/// The processes holding a listening TCP socket on `port`.
fn listeners_of(port: u16) -> Vec<u32> {
    let mut pids: Vec<u32> = sockets_on(port)
        .into_iter()
        .filter(|s| s.state == "0A")
        .filter_map(|s| s.owner)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

#[test]
fn shared_server_answers_srvr_and_ruok() {
    let start = Instant::now();
    let Some(server) = shared_server("shared_server_answers_srvr_and_ruok") else {
        return;
    };
    assert_eq!(
        server.connect_string(),
        format!("127.0.0.1:{}", server.port())
    );
    assert_eq!(mode(server.port()).as_deref(), Some("standalone"));
    assert_eq!(
        flw(server.port(), "ruok", Duration::from_secs(5)).unwrap(),
        "imok"
    );
    // The same server for every caller.
    let again = shared_server("shared_server_answers_srvr_and_ruok").unwrap();
    assert!(std::ptr::eq(server, again));
    report("shared_server_answers_srvr_and_ruok", start);
}

#[test]
fn fresh_root_is_unique_and_a_valid_path() {
    let start = Instant::now();
    let roots: Vec<String> = (0..1000)
        .map(|i| fresh_root(&format!("a test::name/{}", i % 3)))
        .collect();
    assert_eq!(roots.iter().collect::<HashSet<_>>().len(), roots.len());
    let prefix = format!("/zoosim-{}-", std::process::id());
    for r in &roots {
        assert!(r.starts_with(&prefix), "{r}");
        assert_eq!(r.matches('/').count(), 1, "{r} must be one path component");
        assert!(
            r.chars()
                .all(|c| c.is_ascii_alphanumeric() || "/-_".contains(c)),
            "{r}"
        );
    }
    report("fresh_root_is_unique_and_a_valid_path", start);
}

#[test]
fn ensemble_elects_fails_over_and_restarts() {
    let start = Instant::now();
    if !require_zookeeper("ensemble_elects_fails_over_and_restarts") {
        return;
    }
    let mut ens = RealEnsemble::start(3).expect("ensemble starts");
    let _ = writeln!(
        std::io::stderr(),
        "[timing] 3-node ensemble serving after {:.2?}",
        start.elapsed()
    );
    assert_eq!(ens.size(), 3);
    let ports: Vec<u16> = (0..3).map(|i| ens.member_port(i).unwrap()).collect();
    assert_eq!(
        ens.connect_string(),
        ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    assert_eq!(
        ens.member_connect_string(1),
        format!("127.0.0.1:{}", ports[1])
    );
    assert_eq!(ens.member_connect_string(7), "");

    let modes: Vec<Option<String>> = ports.iter().map(|&p| mode(p)).collect();
    let leaders: Vec<usize> = (0..3)
        .filter(|&i| modes[i].as_deref() == Some("leader"))
        .collect();
    assert_eq!(leaders.len(), 1, "exactly one leader: {modes:?}");
    let old = leaders[0];
    assert_eq!(ens.leader(), Some(old));
    assert_eq!(
        modes
            .iter()
            .filter(|m| m.as_deref() == Some("follower"))
            .count(),
        2
    );

    let old_pid = ens.member_pid(old).unwrap();
    let killed = Instant::now();
    ens.kill(old);
    assert!(!zk_alive(old_pid));
    assert_eq!(ens.member_pid(old), None);
    assert!(flw(ports[old], "ruok", Duration::from_millis(500)).is_err());
    let mut new = None;
    assert!(
        wait_until(Duration::from_secs(20), || {
            new = ens.leader();
            new.is_some()
        }),
        "no new leader within 20 s"
    );
    let new = new.unwrap();
    assert_ne!(new, old);
    for i in (0..3).filter(|&i| i != old) {
        ens.wait_serving(i, Duration::from_secs(20))
            .expect("survivor serves");
    }
    let _ = writeln!(
        std::io::stderr(),
        "[timing] new leader after {:.2?}",
        killed.elapsed()
    );
    assert!(
        ens.wait_serving(old, Duration::from_secs(1)).is_err(),
        "killed member must not serve"
    );

    let restarted = Instant::now();
    ens.restart(old).expect("restart the old leader");
    let _ = writeln!(
        std::io::stderr(),
        "[timing] member back after {:.2?}",
        restarted.elapsed()
    );
    assert_eq!(ens.member_port(old), Some(ports[old]), "same port");
    assert_eq!(mode(ports[old]).as_deref(), Some("follower"));
    let modes: Vec<Option<String>> = ports.iter().map(|&p| mode(p)).collect();
    assert_eq!(
        modes
            .iter()
            .filter(|m| m.as_deref() == Some("leader"))
            .count(),
        1,
        "{modes:?}"
    );
    assert_eq!(ens.leader(), Some(new));

    let pids: Vec<u32> = (0..3).map(|i| ens.member_pid(i).unwrap()).collect();
    let dir = ens.dir().to_path_buf();
    drop(ens);
    for (&pid, &port) in pids.iter().zip(&ports) {
        assert_cleaned_up(pid, port, &dir);
    }
    report("ensemble_elects_fails_over_and_restarts", start);
}

#[test]
fn standalone_pause_resume_restart_and_drop() {
    let start = Instant::now();
    if !require_zookeeper("standalone_pause_resume_restart_and_drop") {
        return;
    }
    let mut server = RealServer::start().expect("server starts");
    let port = server.port();
    assert_eq!(mode(port).as_deref(), Some("standalone"));

    server.pause();
    let stalled = flw(port, "ruok", Duration::from_millis(700));
    assert!(
        stalled.as_ref().map_or(true, |r| r.is_empty()),
        "a paused server answered: {stalled:?}"
    );
    server.resume();
    assert_eq!(flw(port, "ruok", Duration::from_secs(5)).unwrap(), "imok");

    // Data survives kill + restart, on the same port.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let path = fresh_root("standalone_pause_resume_restart_and_drop");
    rt.block_on(async {
        let client = zookeeper_client::Client::connect(&server.connect_string())
            .await
            .unwrap();
        let opts = zookeeper_client::CreateMode::Persistent
            .with_acls(zookeeper_client::Acls::anyone_all());
        client.create(&path, b"survives", &opts).await.unwrap();
    });
    let pid = server.pid().unwrap();
    server.kill();
    assert!(!zk_alive(pid));
    assert!(flw(port, "ruok", Duration::from_millis(500)).is_err());
    // Someone else holds the port until the restarted server has met it
    // (its log says so): restart waits for the port. Released on the
    // clash, not after a fixed time, so that a JVM slow to start on a
    // loaded machine still meets the squatter (it once started after a
    // fixed 1.5 s release and never clashed).
    let squatter = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let log_path = server.log_path();
    let release = std::thread::spawn(move || {
        let give_up = Instant::now() + Duration::from_secs(60);
        let clashed = loop {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            if log.contains("Address already in use") {
                break true;
            }
            if Instant::now() >= give_up {
                break false;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let held_until = Instant::now();
        drop(squatter);
        (clashed, held_until)
    });
    let restarting = Instant::now();
    server.restart().expect("restart");
    let served = Instant::now();
    let (clashed, held_until) = release.join().unwrap();
    assert!(clashed, "the restarted server never logged the port clash");
    assert!(
        served >= held_until,
        "served before the port was free: {:?} early",
        held_until - served
    );
    let waited = served - restarting;
    let _ = writeln!(
        std::io::stderr(),
        "[timing] restart past a busy port: {waited:.2?}"
    );
    assert_eq!(server.port(), port);
    assert_eq!(mode(port).as_deref(), Some("standalone"));
    let data = rt.block_on(async {
        let client = zookeeper_client::Client::connect(&server.connect_string())
            .await
            .unwrap();
        client.get_data(&path).await.unwrap().0
    });
    assert_eq!(data, b"survives");

    // A paused server is still stopped and removed on drop.
    server.pause();
    let (pid, dir) = (server.pid().unwrap(), server.dir().to_path_buf());
    assert!(dir.starts_with(std::env::temp_dir()));
    assert!(dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("zoosim-zk-"));
    let dropped = Instant::now();
    drop(server);
    let _ = writeln!(
        std::io::stderr(),
        "[timing] drop of a paused server: {:.2?}",
        dropped.elapsed()
    );
    assert_cleaned_up(pid, port, &dir);
    report("standalone_pause_resume_restart_and_drop", start);
}

#[test]
fn a_panicking_test_still_cleans_up() {
    let start = Instant::now();
    if !require_zookeeper("a_panicking_test_still_cleans_up") {
        return;
    }
    let seen = std::sync::Mutex::new(None);
    let outcome = std::panic::catch_unwind(|| {
        let server = RealServer::start().expect("server starts");
        *seen.lock().unwrap() = Some((
            server.pid().unwrap(),
            server.port(),
            server.dir().to_path_buf(),
        ));
        panic!("deliberate panic while holding a RealServer");
    });
    assert!(outcome.is_err());
    let (pid, port, dir) = seen.lock().unwrap().take().unwrap();
    assert_cleaned_up(pid, port, &dir);
    report("a_panicking_test_still_cleans_up", start);
}

const CHILD_ENV: &str = "ZOOSIM_FIXTURE_CHILD";

/// Run by the tests below in a child process: takes the shared server, says
/// which, then ends normally or SIGKILLs itself. Does nothing otherwise.
#[test]
#[ignore = "helper: run by shared_server_dies_with_the_test_process_*"]
fn child_process_holds_shared_server() {
    let Ok(how) = std::env::var(CHILD_ENV) else {
        return;
    };
    let server = shared_server("child_process_holds_shared_server").unwrap();
    println!(
        "ZOOSIM-CHILD {} {} {}",
        server.pid().unwrap(),
        server.port(),
        server.dir().display()
    );
    std::io::stdout().flush().unwrap();
    if how == "sigkill" {
        // SAFETY: kill(2) on ourselves.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

/// Runs the helper above and returns how long cleanup took after it ended.
fn run_child(how: &str) -> Duration {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "child_process_holds_shared_server",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, how)
        .output()
        .unwrap();
    let ended = Instant::now();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("ZOOSIM-CHILD "))
        .unwrap_or_else(|| {
            panic!(
                "child said: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let mut fields = line.split(' ');
    let pid: u32 = fields.next().unwrap().parse().unwrap();
    let port: u16 = fields.next().unwrap().parse().unwrap();
    let dir = Path::new(fields.next().unwrap()).to_path_buf();
    if how == "sigkill" {
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&out.status),
            Some(libc::SIGKILL)
        );
    } else {
        assert!(out.status.success(), "{:?}", out.status);
    }
    assert!(
        wait_until(Duration::from_secs(10), || !zk_alive(pid)
            && !dir.exists()
            && processes_naming(&dir).is_empty()),
        "shared server {pid} or {} outlived its test process",
        dir.display()
    );
    let took = ended.elapsed();
    assert_cleaned_up(pid, port, &dir);
    took
}

#[test]
fn shared_server_dies_with_the_test_process_on_exit() {
    let start = Instant::now();
    if !require_zookeeper("shared_server_dies_with_the_test_process_on_exit") {
        return;
    }
    let took = run_child("exit");
    // atexit kills it synchronously; only the watchdog's rm may lag a bit.
    assert!(took < Duration::from_secs(2), "cleanup took {took:?}");
    let _ = writeln!(
        std::io::stderr(),
        "[timing] gone {took:.2?} after a normal exit"
    );
    report("shared_server_dies_with_the_test_process_on_exit", start);
}

#[test]
fn shared_server_dies_with_the_test_process_on_sigkill() {
    let start = Instant::now();
    if !require_zookeeper("shared_server_dies_with_the_test_process_on_sigkill") {
        return;
    }
    let took = run_child("sigkill");
    let _ = writeln!(std::io::stderr(), "[timing] gone {took:.2?} after SIGKILL");
    report("shared_server_dies_with_the_test_process_on_sigkill", start);
}

#[test]
fn listeners_of_finds_the_process_holding_a_port() {
    let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    assert_eq!(listeners_of(port), vec![std::process::id()]);
    // An accepted connection is on the port too, in another state.
    let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (accepted, _) = listener.accept().unwrap();
    let sockets = sockets_on(port);
    assert!(
        sockets
            .iter()
            .any(|s| s.state == "01" && s.owner == Some(std::process::id())),
        "{sockets:?}"
    );
    drop(listener);
    assert!(listeners_of(port).is_empty());
    drop((client, accepted));
}
