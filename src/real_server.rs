//! Real ZooKeeper servers for tests: a standalone [`RealServer`], a
//! [`RealEnsemble`] on loopback, and one [`shared_server`] per test binary.
//!
//! Runs the Debian-packaged ZooKeeper (`/usr/share/java/zookeeper.jar`) as
//! plain `java` processes, one temp dir per fixture
//! (`$TMPDIR/zoosim-zk-<pid>-<n>/<myid>/`: zoo.cfg, data/, zookeeper.log).
//!
//! Nothing may outlive the test process. Drop stops the JVMs (SIGTERM, then
//! SIGKILL) and removes the dir, also while a test panics. Statics are never
//! dropped and a test process can be killed outright, so each fixture also
//! has a small `sh` watchdog that blocks reading a pipe only this process
//! holds open: at EOF (the fixture dropped, or this process gone by any means)
//! it SIGKILLs the JVMs named in the `jvm.pid` files and removes the dir. The
//! shared server is also killed at `exit()`, so it is gone when `cargo test`
//! returns. (PR_SET_PDEATHSIG is not used: it fires when the spawning *thread*
//! exits, and test threads end early.)

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

const JAVA_DIR: &str = "/usr/share/java";
const ZK_JAR: &str = "/usr/share/java/zookeeper.jar";

/// The servers' tickTime, in ms (every server this module starts).
pub const TICK_MS: u64 = 500;
/// The servers' syncLimit, in ticks.
pub const SYNC_LIMIT_TICKS: u64 = 10;
/// Seen here: 0.6-3.4 s to serve; loaded CI machines are slower.
const SERVE_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_GRACE: Duration = Duration::from_secs(3);
/// Fresh ports are tried again when another process took one first.
const START_ATTEMPTS: usize = 4;
/// restart() must keep its ports, so it waits for them instead.
const RESTART_PORT_PATIENCE: Duration = Duration::from_secs(10);

/// $1 is the fixture dir. `read` returns at EOF: the fixture was dropped or
/// the test process died. Process group of its own, so a terminal's Ctrl-C
/// does not kill it before it has cleaned up. The `case` keeps `rm -rf` to
/// our own dirs whatever it is given.
const WATCHDOG: &str = r#"
case "$1" in */zoosim-zk-*) ;; *) exit 1 ;; esac
read _unused
for f in "$1"/*/jvm.pid; do
  [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null
done
for _ in 1 2 3 4 5 6 7 8 9 10; do
  rm -rf "$1" 2>/dev/null
  [ -e "$1" ] || exit 0
  sleep 0.3
done
"#;

/// Server settings a fixture starts its JVMs with (Java system
/// properties).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ServerOptions {
    /// `znode.container.checkIntervalMs`: how often the container and TTL
    /// reaper runs. The default is a day: the reaper (every 60 s in
    /// ZooKeeper) would delete a case's empty containers behind the
    /// model's back at a time no case controls, so by default it never
    /// runs within a test.
    pub container_check_interval_ms: u32,
    /// `znode.container.maxPerMinute`: the reaper waits 60000 / this ms
    /// between two deletes (ZooKeeper's default is 10000).
    pub container_max_per_minute: u32,
    /// `zookeeper.extendedTypesEnabled`: TTL nodes allowed (off by
    /// default; TTL creates then fail with Unimplemented).
    pub extended_types: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            container_check_interval_ms: 86_400_000,
            container_max_per_minute: 10_000,
            extended_types: false,
        }
    }
}

impl ServerOptions {
    /// The fixture for container and TTL tests: TTL nodes on, the reaper
    /// every `interval_ms`, and no pause between its deletes (a run's
    /// deletes follow each other as fast as the pipeline takes them).
    pub fn reaping_every(interval_ms: u32) -> ServerOptions {
        ServerOptions {
            container_check_interval_ms: interval_ms,
            container_max_per_minute: 60_000_000,
            extended_types: true,
        }
    }

    fn jvm_properties(&self) -> Vec<String> {
        vec![
            format!(
                "-Dznode.container.checkIntervalMs={}",
                self.container_check_interval_ms
            ),
            format!(
                "-Dznode.container.maxPerMinute={}",
                self.container_max_per_minute.max(1)
            ),
            format!("-Dzookeeper.extendedTypesEnabled={}", self.extended_types),
        ]
    }
}

/// Why a fixture could not do what was asked.
#[derive(Debug)]
pub enum FixtureError {
    /// java or the ZooKeeper jar is missing (what is missing).
    NotInstalled(String),
    /// A file, socket or process operation failed.
    Io {
        /// The operation, in words (e.g. which file it touched).
        what: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The server process exited before it served.
    Exited {
        /// The server's myid, client address and directory.
        server: String,
        /// Its exit status.
        status: String,
        /// Its log says "Address already in use".
        port_clash: bool,
        /// The last lines of its log and stdout.
        log_tail: String,
    },
    /// The server did not serve in time.
    Timeout {
        /// The server's myid, client address and directory.
        server: String,
        /// How long it was given.
        waited: Duration,
        /// Its last answer to `srvr` (or why there was none).
        last_reply: String,
        /// The last lines of its log and stdout.
        log_tail: String,
    },
    /// The member was killed and not restarted.
    NotRunning {
        /// The server's myid, client address and directory.
        server: String,
    },
    /// No member with that index.
    NoSuchMember {
        /// The index asked for.
        index: usize,
        /// The ensemble's member count.
        size: usize,
    },
    /// An ensemble needs at least one member.
    EmptyEnsemble,
}

impl FixtureError {
    fn is_port_clash(&self) -> bool {
        matches!(
            self,
            FixtureError::Exited {
                port_clash: true,
                ..
            }
        )
    }
}

impl fmt::Display for FixtureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FixtureError::NotInstalled(what) => write!(
                f,
                "ZooKeeper is not installed ({what}); install it with `apt-get install zookeeper`"
            ),
            FixtureError::Io { what, source } => write!(f, "{what}: {source}"),
            FixtureError::Exited {
                server,
                status,
                port_clash,
                log_tail,
            } => {
                let clash = if *port_clash {
                    " (port already in use)"
                } else {
                    ""
                };
                write!(f, "{server} exited ({status}) before serving{clash}\n--- last lines of its log ---\n{log_tail}")
            }
            FixtureError::Timeout {
                server,
                waited,
                last_reply,
                log_tail,
            } => write!(
                f,
                "{server} did not report Mode: leader|follower|standalone within {waited:?}; \
                 last `srvr` reply: {last_reply:?}\n--- last lines of its log ---\n{log_tail}"
            ),
            FixtureError::NotRunning { server } => {
                write!(f, "{server} is not running (killed, not restarted)")
            }
            FixtureError::NoSuchMember { index, size } => {
                write!(f, "no ensemble member {index}: the ensemble has {size}")
            }
            FixtureError::EmptyEnsemble => write!(f, "an ensemble needs at least one member"),
        }
    }
}

impl std::error::Error for FixtureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FixtureError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> FixtureError {
    let what = what.into();
    move |source| FixtureError::Io { what, source }
}

/// `JAVA_HOME/bin/java`, else `java` on PATH.
fn java_path() -> Option<PathBuf> {
    let home = std::env::var_os("JAVA_HOME").map(|h| PathBuf::from(h).join("bin/java"));
    let path = std::env::var_os("PATH").unwrap_or_default();
    home.into_iter()
        .chain(std::env::split_paths(&path).map(|d| d.join("java")))
        .find(|p| p.is_file())
}

fn missing_parts() -> String {
    let mut missing = Vec::new();
    if java_path().is_none() {
        missing.push("no `java` on PATH or in JAVA_HOME");
    }
    if !Path::new(ZK_JAR).is_file() {
        missing.push("no /usr/share/java/zookeeper.jar");
    }
    missing.join(", ")
}

/// True when java and the Debian ZooKeeper jar are present.
pub fn zookeeper_installed() -> bool {
    java_path().is_some() && Path::new(ZK_JAR).is_file()
}

/// The skip rule for tests that need a real server. Returns true when
/// ZooKeeper is installed. Otherwise prints a SKIP banner naming the test
/// and returns false, or panics if `ZOOSIM_REQUIRE_ZK` is set.
pub fn require_zookeeper(test_name: &str) -> bool {
    if zookeeper_installed() {
        return true;
    }
    let missing = missing_parts();
    if std::env::var_os("ZOOSIM_REQUIRE_ZK").is_some_and(|v| !v.is_empty()) {
        panic!(
            "ZOOSIM_REQUIRE_ZK is set but ZooKeeper is not installed ({missing}); test {test_name} \
             needs it. Install it with `apt-get install zookeeper` (Debian/Ubuntu; it provides \
             {ZK_JAR} and pulls in a Java runtime)."
        );
    }
    // Straight to stderr: libtest captures eprintln! of passing tests.
    let line = "=".repeat(78);
    let _ = writeln!(
        io::stderr(),
        "\n{line}\nSKIP {test_name}: ZooKeeper is not installed ({missing}).\n\
         SKIP   Install it with `apt-get install zookeeper`, or set ZOOSIM_REQUIRE_ZK=1 to fail instead.\n{line}"
    );
    false
}

/// Sends one four-letter word (`srvr`, `ruok`, `stat`, ...) to
/// 127.0.0.1:`port` and returns the whole reply. `timeout` bounds the
/// connect and each read/write.
pub fn four_letter_word(port: u16, word: &str, timeout: Duration) -> io::Result<String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(word.as_bytes())?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    Ok(reply)
}

/// The `Mode:` of a server that serves, from its `srvr` reply.
fn serving_mode(srvr_reply: &str) -> Option<&str> {
    srvr_reply
        .lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(str::trim)
        .filter(|m| matches!(*m, "leader" | "follower" | "standalone"))
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) has no memory effects; the pid is our unreaped child,
    // so it cannot name a recycled process.
    unsafe {
        libc::kill(child.id() as libc::pid_t, sig);
    }
    if sig == libc::SIGSTOP {
        wait_stopped(child.id());
    }
}

/// kill(2) returns before a busy process has stopped: a JVM thread on
/// another core can still answer a request. Wait (up to 2 s) until every
/// thread shows state T in /proc.
fn wait_stopped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return; // gone, or no /proc: nothing to wait for
        };
        let all_stopped = tasks.flatten().all(|task| {
            std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
                // "pid (comm) S ...": the state follows the last ')'.
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.trim_start().chars().next())
                    .is_some_and(|state| matches!(state, 'T' | 't'))
            })
        });
        if all_stopped {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

struct Proc {
    child: Option<Child>,
    /// zookeeper.log length at spawn: only the current run decides a clash.
    log_start: u64,
}

/// One ZooKeeper JVM and its directory; survives kill/restart.
struct Member {
    myid: usize,
    dir: PathBuf,
    client_port: u16,
    options: ServerOptions,
    proc: Mutex<Proc>,
}

impl Member {
    fn lock(&self) -> MutexGuard<'_, Proc> {
        self.proc.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn describe(&self) -> String {
        format!(
            "ZooKeeper server {} at 127.0.0.1:{} (dir {})",
            self.myid,
            self.client_port,
            self.dir.display()
        )
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("zookeeper.log")
    }

    fn pid_file(&self) -> PathBuf {
        self.dir.join("jvm.pid")
    }

    /// `servers` are the server.N lines; none means standalone.
    fn write_files(&self, servers: &str) -> Result<(), FixtureError> {
        let data = self.dir.join("data");
        for d in [&data, &self.dir.join("tmp")] {
            fs::create_dir_all(d).map_err(io_err(format!("creating {}", d.display())))?;
        }
        let write = |name: &str, text: String| {
            let p = self.dir.join(name);
            fs::write(&p, text).map_err(io_err(format!("writing {}", p.display())))
        };
        if !servers.is_empty() {
            write("data/myid", format!("{}\n", self.myid))?;
        }
        write(
            "zoo.cfg",
            format!(
                "tickTime={TICK_MS}\ninitLimit=20\nsyncLimit={SYNC_LIMIT_TICKS}\ndataDir={}\n\
                 clientPortAddress=127.0.0.1\nclientPort={}\nmaxClientCnxns=0\n\
                 maxSessionTimeout=60000\nadmin.enableServer=false\n\
                 4lw.commands.whitelist=*\nforceSync=no\npreAllocSize=4096\n{servers}",
                data.display(),
                self.client_port
            ),
        )?;
        write(
            "log4j.properties",
            format!(
                "log4j.rootLogger=INFO, FILE\n\
                 log4j.appender.FILE=org.apache.log4j.FileAppender\n\
                 log4j.appender.FILE.File={}\n\
                 log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n\
                 log4j.appender.FILE.layout.ConversionPattern=%d{{ISO8601}} [myid:%X{{myid}}] %-5p [%t:%C{{1}}@%L] - %m%n\n",
                self.log_path().display()
            ),
        )
    }

    fn spawn(&self) -> Result<(), FixtureError> {
        let java = java_path().ok_or_else(|| FixtureError::NotInstalled(missing_parts()))?;
        let out_path = self.dir.join("stdout.log");
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out_path)
            .map_err(io_err(format!("opening {}", out_path.display())))?;
        let err = out
            .try_clone()
            .map_err(io_err(format!("opening {}", out_path.display())))?;
        // The jar's manifest Class-Path brings in its other dependencies;
        // the log4j binding is only there so that logs exist.
        let mut classpath = ZK_JAR.to_string();
        for jar in ["slf4j-log4j12.jar", "log4j-1.2.jar"] {
            if Path::new(JAVA_DIR).join(jar).is_file() {
                classpath = format!("{classpath}:{JAVA_DIR}/{jar}");
            }
        }
        let log_start = fs::metadata(self.log_path()).map_or(0, |m| m.len());
        let child = Command::new(&java)
            // Small heap (default is 1/4 of RAM); C1 only: starts ~1/3 faster.
            // No perf data, or every SIGKILL leaves /tmp/hsperfdata_*/<pid>.
            .args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .arg("-XX:-UsePerfData")
            .args(self.options.jvm_properties())
            .arg(format!(
                "-Djava.io.tmpdir={}",
                self.dir.join("tmp").display()
            ))
            .arg(format!(
                "-Dlog4j.configuration=file:{}",
                self.dir.join("log4j.properties").display()
            ))
            .arg("-cp")
            .arg(classpath)
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(self.dir.join("zoo.cfg"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Out of the terminal's process group: the watchdog decides.
            .process_group(0)
            .spawn()
            .map_err(io_err(format!(
                "starting {} for {}",
                java.display(),
                self.describe()
            )))?;
        let pid_file = self.pid_file();
        let written = fs::write(&pid_file, child.id().to_string());
        *self.lock() = Proc {
            child: Some(child),
            log_start,
        };
        written.map_err(io_err(format!("writing {}", pid_file.display())))
    }

    /// The pid file goes before the JVM is reaped, so the watchdog can never
    /// kill a recycled pid.
    fn take_child(&self) -> Option<Child> {
        let child = self.lock().child.take();
        if child.is_some() {
            let _ = fs::remove_file(self.pid_file());
        }
        child
    }

    fn kill(&self) {
        if let Some(mut child) = self.take_child() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn signal(&self, sig: libc::c_int) {
        if let Some(child) = &self.lock().child {
            signal(child, sig);
        }
    }

    fn pid(&self) -> Option<u32> {
        self.lock().child.as_ref().map(Child::id)
    }

    /// Some(exit description) if the JVM has exited (it is then reaped).
    fn exited(&self) -> Option<String> {
        let mut proc = self.lock();
        let status = proc.child.as_mut()?.try_wait().ok()??;
        proc.child = None;
        let _ = fs::remove_file(self.pid_file());
        Some(status.to_string())
    }

    fn port_clash(&self) -> bool {
        let from = self.lock().log_start as usize;
        let log = fs::read(self.log_path()).unwrap_or_default();
        let log = String::from_utf8_lossy(log.get(from..).unwrap_or_default());
        log.contains("Address already in use")
    }

    fn log_tail(&self) -> String {
        let mut tail = String::new();
        for path in [self.log_path(), self.dir.join("stdout.log")] {
            let text = fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            if !lines.is_empty() {
                let last = &lines[lines.len().saturating_sub(25)..];
                tail += &format!("[{}]\n{}\n", path.display(), last.join("\n"));
            }
        }
        if tail.is_empty() {
            tail = format!("(no log output in {})", self.dir.display());
        }
        tail
    }

    fn mode(&self, timeout: Duration) -> Option<String> {
        let reply = four_letter_word(self.client_port, "srvr", timeout).ok()?;
        serving_mode(&reply).map(str::to_string)
    }

    /// Polls `srvr` until the server reports a serving mode.
    fn wait_serving(&self, deadline: Instant) -> Result<(), FixtureError> {
        let started = Instant::now();
        let mut last_reply = String::new();
        loop {
            if self.lock().child.is_none() {
                return Err(FixtureError::NotRunning {
                    server: self.describe(),
                });
            }
            if let Some(status) = self.exited() {
                return Err(FixtureError::Exited {
                    server: self.describe(),
                    status,
                    port_clash: self.port_clash(),
                    log_tail: self.log_tail(),
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(FixtureError::Timeout {
                    server: self.describe(),
                    waited: started.elapsed(),
                    last_reply,
                    log_tail: self.log_tail(),
                });
            }
            match four_letter_word(self.client_port, "srvr", left.min(Duration::from_secs(1))) {
                Ok(reply) if serving_mode(&reply).is_some() => return Ok(()),
                Ok(reply) => last_reply = reply,
                Err(e) => last_reply = format!("({e})"),
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills and starts again on the same ports and dir; waits for the
    /// ports if something else holds them for a moment.
    fn restart(&self, timeout: Duration) -> Result<(), FixtureError> {
        self.kill();
        let patience = Instant::now() + RESTART_PORT_PATIENCE;
        loop {
            self.spawn()?;
            match self.wait_serving(Instant::now() + timeout) {
                Err(e) if e.is_port_clash() && Instant::now() < patience => {
                    thread::sleep(Duration::from_millis(500))
                }
                result => return result,
            }
        }
    }
}

/// SIGTERM to all at once, then SIGKILL whatever is left after the grace.
fn stop_all(members: &[Member]) {
    let mut children: Vec<Child> = members.iter().filter_map(Member::take_child).collect();
    for child in &children {
        signal(child, libc::SIGTERM);
        // A paused JVM handles SIGTERM only once continued.
        signal(child, libc::SIGCONT);
    }
    let deadline = Instant::now() + STOP_GRACE;
    for child in &mut children {
        while matches!(child.try_wait(), Ok(None)) {
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Ports picked by the kernel, all held at once so they differ; the race
/// with other processes between release and use is handled by retrying.
fn free_ports(n: usize) -> Result<Vec<u16>, FixtureError> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<io::Result<Vec<_>>>()
        .map_err(io_err("finding free ports on 127.0.0.1"))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<io::Result<_>>()
        .map_err(io_err("finding free ports on 127.0.0.1"))
}

fn make_fixture_dir() -> Result<PathBuf, FixtureError> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("zoosim-zk-{}-{n}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            // Left by an earlier process with our pid: take the next name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_err(format!("creating {}", dir.display()))(e)),
        }
    }
}

/// The machinery shared by RealServer and RealEnsemble.
struct Cluster {
    dir: PathBuf,
    members: Vec<Member>,
    watchdog: Option<Child>,
}

impl Cluster {
    fn start(n: usize, options: ServerOptions) -> Result<Cluster, FixtureError> {
        if n == 0 {
            return Err(FixtureError::EmptyEnsemble);
        }
        if !zookeeper_installed() {
            return Err(FixtureError::NotInstalled(missing_parts()));
        }
        let mut attempt = 1;
        loop {
            match Cluster::try_start(n, options) {
                Err(e) if e.is_port_clash() && attempt < START_ATTEMPTS => attempt += 1,
                result => return result,
            }
        }
    }

    fn try_start(n: usize, options: ServerOptions) -> Result<Cluster, FixtureError> {
        let dir = make_fixture_dir()?;
        // Built first so that Drop cleans up after any failure below.
        let mut cluster = Cluster {
            dir,
            members: Vec::new(),
            watchdog: None,
        };
        cluster.watchdog = Some(
            Command::new("/bin/sh")
                .args(["-c", WATCHDOG, "zoosim-zk-watchdog"])
                .arg(&cluster.dir)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .map_err(io_err("starting the cleanup watchdog (/bin/sh)"))?,
        );
        let ports = free_ports(3 * n)?;
        let mut servers = String::new();
        for (i, p) in ports.chunks(3).enumerate() {
            cluster.members.push(Member {
                myid: i + 1,
                dir: cluster.dir.join((i + 1).to_string()),
                client_port: p[0],
                options,
                proc: Mutex::new(Proc {
                    child: None,
                    log_start: 0,
                }),
            });
            if n > 1 {
                servers += &format!("server.{}=127.0.0.1:{}:{}\n", i + 1, p[1], p[2]);
            }
        }
        for m in &cluster.members {
            m.write_files(&servers)?;
        }
        for m in &cluster.members {
            m.spawn()?;
        }
        let deadline = Instant::now() + SERVE_TIMEOUT;
        for m in &cluster.members {
            m.wait_serving(deadline)?;
        }
        Ok(cluster)
    }

    fn member(&self, i: usize) -> Result<&Member, FixtureError> {
        self.members.get(i).ok_or(FixtureError::NoSuchMember {
            index: i,
            size: self.members.len(),
        })
    }

    /// For exit(): no grace, no waiting on locks another thread may hold.
    fn kill_now(&self) {
        for m in &self.members {
            if let Ok(mut proc) = m.proc.try_lock() {
                if let Some(mut child) = proc.child.take() {
                    let _ = fs::remove_file(m.pid_file());
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        stop_all(&self.members);
        if let Some(mut watchdog) = self.watchdog.take() {
            drop(watchdog.stdin.take()); // EOF: it finds no pid files, removes the dir
            let _ = watchdog.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// One standalone ZooKeeper server on a free loopback port.
pub struct RealServer {
    cluster: Cluster,
}

impl RealServer {
    /// Starts a server with the default [`ServerOptions`] and waits until
    /// `srvr` says `Mode: standalone`.
    pub fn start() -> Result<RealServer, FixtureError> {
        RealServer::start_with(ServerOptions::default())
    }

    /// [`RealServer::start`] with other server settings.
    pub fn start_with(options: ServerOptions) -> Result<RealServer, FixtureError> {
        Cluster::start(1, options).map(|cluster| RealServer { cluster })
    }

    fn member(&self) -> &Member {
        &self.cluster.members[0] // always exactly one
    }

    /// `"127.0.0.1:PORT"`.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port())
    }

    /// The client port on 127.0.0.1; kept across restarts.
    pub fn port(&self) -> u16 {
        self.member().client_port
    }

    /// The JVM's pid, None after kill().
    pub fn pid(&self) -> Option<u32> {
        self.member().pid()
    }

    /// The fixture's temp dir (removed on drop).
    pub fn dir(&self) -> &Path {
        &self.cluster.dir
    }

    /// The server's `zookeeper.log` (in `dir()/1`).
    pub fn log_path(&self) -> PathBuf {
        self.member().log_path()
    }

    /// The directory of the server's txn log files (`log.<first zxid>`,
    /// ZooKeeper's binary format; `dir()/1/data/version-2`). Every txn is
    /// appended there before it is applied and answered.
    pub fn txn_log_dir(&self) -> PathBuf {
        self.member().dir.join("data").join("version-2")
    }

    /// The settings it was started with.
    pub fn options(&self) -> ServerOptions {
        self.member().options
    }

    /// SIGKILL: no goodbye to clients, data stays on disk.
    pub fn kill(&mut self) {
        self.member().kill();
    }

    /// Starts again on the same port and dataDir (data survives) and waits
    /// until serving. Kills the running server first, if any.
    pub fn restart(&mut self) -> Result<(), FixtureError> {
        self.member().restart(SERVE_TIMEOUT)
    }

    /// SIGSTOP: a stall like a long GC pause; connections stay open.
    pub fn pause(&mut self) {
        self.member().signal(libc::SIGSTOP);
    }

    /// SIGCONT.
    pub fn resume(&mut self) {
        self.member().signal(libc::SIGCONT);
    }
}

/// `n` ZooKeeper servers forming one ensemble on loopback. Members are
/// indexed from 0; member `i` has myid `i + 1`.
pub struct RealEnsemble {
    cluster: Cluster,
}

impl RealEnsemble {
    /// Starts `n` members and waits until all report leader or follower
    /// (a single member runs standalone).
    pub fn start(n: usize) -> Result<RealEnsemble, FixtureError> {
        Cluster::start(n, ServerOptions::default()).map(|cluster| RealEnsemble { cluster })
    }

    /// All members, comma-separated.
    pub fn connect_string(&self) -> String {
        let members = &self.cluster.members;
        let all: Vec<String> = (0..members.len())
            .map(|i| self.member_connect_string(i))
            .collect();
        all.join(",")
    }

    /// `"127.0.0.1:PORT"` of member `i`; empty if there is no member `i`.
    pub fn member_connect_string(&self, i: usize) -> String {
        self.member_port(i)
            .map_or_else(String::new, |p| format!("127.0.0.1:{p}"))
    }

    /// The client port of member `i` on 127.0.0.1; None if out of range.
    pub fn member_port(&self, i: usize) -> Option<u16> {
        self.cluster.members.get(i).map(|m| m.client_port)
    }

    /// The JVM pid of member `i`, None if killed or out of range.
    pub fn member_pid(&self, i: usize) -> Option<u32> {
        self.cluster.members.get(i).and_then(Member::pid)
    }

    /// The number of members.
    pub fn size(&self) -> usize {
        self.cluster.members.len()
    }

    /// The fixture's temp dir (removed on drop).
    pub fn dir(&self) -> &Path {
        &self.cluster.dir
    }

    /// The `Mode:` member `i` reports over `srvr`, if it serves.
    pub fn mode(&self, i: usize) -> Option<String> {
        self.cluster
            .members
            .get(i)?
            .mode(Duration::from_millis(500))
    }

    /// The first member whose `srvr` says `Mode: leader`.
    pub fn leader(&self) -> Option<usize> {
        (0..self.size()).find(|&i| self.mode(i).as_deref() == Some("leader"))
    }

    /// SIGKILL member `i` (no-op if out of range).
    pub fn kill(&mut self, i: usize) {
        if let Ok(m) = self.cluster.member(i) {
            m.kill();
        }
    }

    /// Starts member `i` again on its ports and dataDir and waits until it
    /// serves. Kills it first if it is running.
    pub fn restart(&mut self, i: usize) -> Result<(), FixtureError> {
        self.cluster.member(i)?.restart(SERVE_TIMEOUT)
    }

    /// SIGSTOP member `i` (no-op if out of range).
    pub fn pause(&mut self, i: usize) {
        if let Ok(m) = self.cluster.member(i) {
            m.signal(libc::SIGSTOP);
        }
    }

    /// SIGCONT member `i` (no-op if out of range).
    pub fn resume(&mut self, i: usize) {
        if let Ok(m) = self.cluster.member(i) {
            m.signal(libc::SIGCONT);
        }
    }

    /// Waits until member `i` reports leader or follower.
    pub fn wait_serving(&self, i: usize, timeout: Duration) -> Result<(), FixtureError> {
        self.cluster
            .member(i)?
            .wait_serving(Instant::now() + timeout)
    }
}

static SHARED: OnceLock<Result<RealServer, String>> = OnceLock::new();

extern "C" fn kill_shared_at_exit() {
    if let Some(Ok(server)) = SHARED.get() {
        server.cluster.kill_now();
    }
}

/// One shared standalone server per test binary, started on first use.
/// Returns None, after printing a SKIP banner naming the test, only when
/// ZooKeeper is not installed and `ZOOSIM_REQUIRE_ZK` is unset or empty.
///
/// # Panics
/// If `ZOOSIM_REQUIRE_ZK` is set and ZooKeeper is missing, or if ZooKeeper
/// is installed but the server fails to start.
pub fn shared_server(test_name: &str) -> Option<&'static RealServer> {
    if !require_zookeeper(test_name) {
        return None;
    }
    let shared = SHARED.get_or_init(|| {
        let server = RealServer::start().map_err(|e| e.to_string());
        if server.is_ok() {
            // SAFETY: registers a plain function that does not unwind.
            unsafe {
                libc::atexit(kill_shared_at_exit);
            }
        }
        server
    });
    match shared {
        Ok(server) => Some(server),
        Err(e) => panic!(
            "test {test_name}: the shared ZooKeeper server failed to start: {e}\n\
             (java and {ZK_JAR} are present; reinstall with `apt-get install --reinstall zookeeper`)"
        ),
    }
}

/// A fresh root path for one test on the shared server, e.g.
/// `/zoosim-4242-7-my_test`. Does not create the node.
pub fn fresh_root(test_name: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name: String = test_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!("/zoosim-{}-{n}-{name}", std::process::id())
}
