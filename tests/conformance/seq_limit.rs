//! The sequence counter at its upper limit (`i32::MAX`), single creates and
//! multis, on a real server and on the tree.
//!
//! # How the real server gets there
//!
//! The counter is a parent's stored cversion, which only child creates
//! move: reaching `i32::MAX` by creates takes 2^31 of them. Instead the
//! test edits one int in the server's own snapshot:
//!
//! 1. A dedicated server creates `/p` and two children (stored cversion 2),
//!    and the session is closed.
//! 2. The server is restarted: a standalone server writes a snapshot of
//!    what it loaded before it serves (`ZooKeeperServer.loadData`), here
//!    `snapshot.<last zxid>`, holding every txn so far. It is killed before
//!    any client connects, so no txn follows the snapshot, and the txn
//!    logs, which restore replays only past the snapshot's zxid
//!    (`FileTxnSnapLog.fastForwardFromEdits`), cannot undo the edit.
//! 3. The snapshot is parsed as 3.8 writes it (`FileSnap.serialize`): the
//!    file header (`ZKSN`, version, dbid), the sessions, the ACL cache, each
//!    node as its path and `DataNode` (data, acl, `StatPersisted`), the end
//!    path `/`, a seal (the Adler32 of everything before it, as a long, and
//!    `/`), then the tree digest (`DataTree.ZxidDigest`: zxid, version,
//!    digest) and a second seal over everything before that. Both seals
//!    are checked before the edit (so the parse is known to match the
//!    file), `/p`'s cversion is set to [`PATCHED`], and both are
//!    recomputed. The stored digest is left as it was: the server only
//!    logs a digest mismatch at load (`DataTree.compareSnapshotDigests`)
//!    and takes the digest of the loaded nodes from then on.
//! 4. The server is restarted on the edited snapshot, and `/p`'s Stat must
//!    show the edited counter (cversion = 2·stored − children) before any
//!    case runs.
//!
//! # Why the comparison is sound
//!
//! The tree reaches the same state through its own API: the same session,
//! creates and close, but the second child's create is applied as the txn
//! a leader would have decided had the counter been at `PATCHED - 1`
//! (`parent_cversion: PATCHED`), which is exactly the state the edit
//! leaves (the same children, and pzxid at that create). Nothing of the
//! real server's replies flows into the model; the only thing read from
//! the real side before the cases is whether the edit took effect. Then
//! every reply (names, errors, multi result lists, Stats) and the final
//! children and Stat of `/p` must match under the zxid correspondence of
//! harness.rs, with equal zxid gaps (the server is the test's own).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use zoosim::client::real::RealZk;
use zoosim::client::Zk;
use zoosim::proto::{CreateMode, MultiOp, Op, Reply, SessionId, ZkError};
use zoosim::real_server::{require_zookeeper, RealServer};
use zoosim::tree::{DataTree, Owner, Txn, TxnBody, TxnOp};

use crate::harness::Correspondence;
use crate::{runtime, SESSION_TIMEOUT_MS};

/// `/p`'s stored counter after the edit: three creates below the limit.
const PATCHED: i32 = i32::MAX - 3;

const PARENT: &str = "/p";

fn create(path: &str, mode: CreateMode) -> Op {
    Op::Create {
        path: path.into(),
        data: vec![7],
        mode,
    }
}

fn seq() -> MultiOp {
    MultiOp::Create {
        path: "/p/s-".into(),
        data: vec![1],
        mode: CreateMode::PersistentSequential,
    }
}

/// A multi op that fails (NoNode), so that the ops before it roll back.
fn fail() -> MultiOp {
    MultiOp::SetData {
        path: "/p/missing".into(),
        data: vec![],
        version: -1,
    }
}

/// The cases, in order, each with what it is for. The counter starts at
/// `MAX - 3`; the names near the limit and whether the counter sticks are
/// what is compared.
fn cases() -> Vec<(&'static str, Op)> {
    let seq_one = || create("/p/s-", CreateMode::PersistentSequential);
    vec![
        ("a single sequential create below the limit", seq_one()),
        (
            "a failing multi takes no numbers (ZOOKEEPER-1624)",
            Op::Multi(vec![seq(), seq(), fail()]),
        ),
        (
            "a failing multi whose creates cross the limit",
            Op::Multi(vec![seq(), seq(), seq(), seq(), fail()]),
        ),
        (
            "a multi whose creates cross the limit",
            Op::Multi(vec![seq(), seq(), seq(), seq()]),
        ),
        ("a single sequential create at the limit", seq_one()),
        (
            "an ephemeral sequential create at the limit",
            create("/p/e-", CreateMode::EphemeralSequential),
        ),
        (
            "a plain create at the limit (counter and pzxid)",
            create("/p/plain", CreateMode::Persistent),
        ),
        (
            "delete the name at the limit",
            Op::Delete {
                path: "/p/s-2147483647".into(),
                version: -1,
            },
        ),
        ("the name at the limit again", seq_one()),
        (
            "a multi deleting and creating at the limit",
            Op::Multi(vec![
                MultiOp::Delete {
                    path: "/p/s-2147483647".into(),
                    version: -1,
                },
                seq(),
                seq(),
            ]),
        ),
        (
            "the children at the end",
            Op::GetChildren {
                path: PARENT.into(),
                watch: false,
            },
        ),
        (
            "the parent's Stat at the end",
            Op::GetData {
                path: PARENT.into(),
                watch: false,
            },
        ),
    ]
}

#[test]
fn sequence_counter_at_its_limit_matches_the_real_server() {
    if !require_zookeeper("sequence_counter_at_its_limit_matches_the_real_server") {
        return;
    }
    let started = Instant::now();
    let mut server = RealServer::start().expect("a dedicated real server");
    let connect = server.connect_string();
    let rt = runtime();

    // 1. The parent and its children, by the server itself.
    rt.block_on(async {
        let z = RealZk::connect(&connect, SESSION_TIMEOUT_MS)
            .await
            .expect("connecting the setup session");
        for path in [PARENT, "/p/c0", "/p/c1"] {
            z.call(create(path, CreateMode::Persistent))
                .await
                .unwrap_or_else(|e| panic!("setup: create {path}: {e:?}"));
        }
        z.close().await.expect("closing the setup session");
    });

    // 2. A snapshot holding all of it, and nothing after it.
    server.restart().expect("restarting to write a snapshot");
    server.kill();
    let version2 = version2_dir(server.dir());
    let snap = newest_snapshot(&version2);
    let snap_zxid = zxid_of(&snap, "snapshot.");
    let later_logs: Vec<_> = files_with_prefix(&version2, "log.")
        .into_iter()
        .filter(|l| zxid_of(l, "log.") > snap_zxid)
        .collect();
    assert!(
        later_logs.is_empty(),
        "txn logs start after the snapshot {}: {later_logs:?}",
        snap.display()
    );

    // 3. The edit.
    let mut bytes = fs::read(&snap).expect("reading the snapshot");
    let old = patch_cversion(&mut bytes, PARENT, PATCHED)
        .unwrap_or_else(|e| panic!("patching {}: {e}", snap.display()));
    assert_eq!(old, 2, "/p's stored cversion before the edit (two creates)");
    fs::write(&snap, &bytes).expect("writing the patched snapshot");

    // 4. Restart on it; the edit must show before anything else runs.
    server
        .restart()
        .expect("restarting on the patched snapshot");
    let real = rt.block_on(run_real(&connect));
    let model = run_model();

    let mut c = Correspondence::default();
    c.strict = true;
    c.owner_r2m.insert(real.session.0, model.session.0);
    c.reply("setup: exists /p", &real.start, &model.start)
        .unwrap();
    for ((what, op), (r, m)) in cases().iter().zip(real.replies.iter().zip(&model.replies)) {
        eprintln!("seq_limit: {what}: {op:?}\n  real  {r:?}");
        c.reply(&format!("{what} ({op:?})"), r, m)
            .unwrap_or_else(|e| panic!("the real server and the tree differ at the limit: {e}"));
    }
    c.check_orders().unwrap();
    // The cases must have reached the limit, not merely agreed below it.
    let Some(Ok(Reply::GetChildren { children, .. })) = real.replies.iter().rev().nth(1) else {
        panic!(
            "getChildren /p at the end: {:?}",
            real.replies.iter().rev().nth(1)
        );
    };
    for name in ["s-2147483647", "s--2147483648"] {
        assert!(
            children.iter().any(|c| c == name),
            "the cases did not reach the limit: no {name} in {children:?}"
        );
    }
    eprintln!(
        "seq_limit: {} cases at the limit in {:.1} s",
        cases().len(),
        started.elapsed().as_secs_f64()
    );
}

/// What one side answered: `/p`'s Stat at the start (as `exists`), then a
/// reply per case.
struct Run {
    session: SessionId,
    start: Result<Reply, ZkError>,
    replies: Vec<Result<Reply, ZkError>>,
}

fn exists_parent() -> Op {
    Op::Exists {
        path: PARENT.into(),
        watch: false,
    }
}

async fn run_real(connect: &str) -> Run {
    let z = RealZk::connect(connect, SESSION_TIMEOUT_MS)
        .await
        .expect("connecting after the patch");
    let start = z.call(exists_parent()).await;
    // Only this is read from the real side before the cases: did the edit
    // take effect? cversion = 2·stored − children, in int arithmetic.
    let shown = match &start {
        Ok(Reply::Exists(Some(stat))) => stat.cversion,
        other => panic!("exists /p after the patch: {other:?}"),
    };
    assert_eq!(
        shown,
        PATCHED.wrapping_mul(2).wrapping_sub(2),
        "the server did not load the edited counter (stored {PATCHED}, two children)"
    );
    let mut replies = Vec::new();
    for (_, op) in cases() {
        replies.push(z.call(op).await);
    }
    let run = Run {
        session: z.session_id(),
        start,
        replies,
    };
    z.close().await.expect("closing");
    run
}

/// The same history on the tree: the setup session, `/p` and `c0` as
/// usual, `c1` as the txn that leaves the counter at [`PATCHED`], the close,
/// then the cases on a new session.
fn run_model() -> Run {
    let mut t = DataTree::default();
    let mut clock = 0;
    let mut tick = || {
        clock += 1;
        clock
    };
    let setup = SessionId(1);
    t.create_session(tick(), setup, SESSION_TIMEOUT_MS);
    for path in [PARENT, "/p/c0"] {
        let applied = t.execute(tick(), setup, &create(path, CreateMode::Persistent));
        assert!(matches!(applied.reply, Some(Ok(_))), "model setup {path}");
    }
    t.apply(&Txn {
        zxid: t.next_zxid(),
        time_ms: tick(),
        session: setup,
        body: TxnBody::Op(TxnOp::Create {
            path: "/p/c1".into(),
            data: vec![7],
            owner: Owner::Persistent,
            parent_cversion: PATCHED,
        }),
    });
    t.close_session(tick(), setup);
    let session = SessionId(2);
    t.create_session(tick(), session, SESSION_TIMEOUT_MS);
    let start = t.read(&exists_parent()).0;
    let mut replies = Vec::new();
    for (_, op) in cases() {
        let reply = if matches!(op, Op::GetChildren { .. } | Op::GetData { .. }) {
            t.read(&op).0
        } else {
            t.execute(tick(), session, &op)
                .reply
                .expect("a client write has a reply")
        };
        replies.push(reply);
    }
    t.check_invariants().expect("model tree invariants");
    Run {
        session,
        start,
        replies,
    }
}

/// The server's `dataDir/version-2` (the fixture keeps member 1's files in
/// `dir()/1`).
fn version2_dir(fixture: &Path) -> PathBuf {
    let dir = fixture.join("1").join("data").join("version-2");
    assert!(dir.is_dir(), "no {}", dir.display());
    dir
}

fn files_with_prefix(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect()
}

/// The zxid in a `snapshot.<hex>` or `log.<hex>` file name.
fn zxid_of(path: &Path, prefix: &str) -> i64 {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.strip_prefix(prefix)
        .and_then(|hex| i64::from_str_radix(hex, 16).ok())
        .unwrap_or_else(|| panic!("not a {prefix}<hex zxid> file: {}", path.display()))
}

fn newest_snapshot(dir: &Path) -> PathBuf {
    files_with_prefix(dir, "snapshot.")
        .into_iter()
        .max_by_key(|p| zxid_of(p, "snapshot."))
        .unwrap_or_else(|| panic!("no snapshot in {}", dir.display()))
}

/// Adler32, as `java.util.zip.Adler32` (what `SnapStream` seals with).
fn adler32(bytes: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in bytes.chunks(5552) {
        for &x in chunk {
            a += u32::from(x);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// A jute binary stream: big-endian ints and longs; strings and buffers
/// as an int length (-1 for null) and the bytes.
struct Jute<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Jute<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("truncated at byte {} (wanted {n})", self.pos))?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn int(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }

    fn long(&mut self) -> Result<i64, String> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().unwrap()))
    }

    fn buffer(&mut self) -> Result<Option<&[u8]>, String> {
        match self.int()? {
            -1 => Ok(None),
            n if n >= 0 => self.take(n as usize).map(Some),
            n => Err(format!("length {n} at byte {}", self.pos - 4)),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        let b = self.buffer()?.ok_or("a null string")?;
        String::from_utf8(b.to_vec()).map_err(|e| e.to_string())
    }

    /// `SnapStream.checkSealIntegrity`: the Adler32 of everything before
    /// the seal, then the string "/". Returns the seal's offset.
    fn seal(&mut self) -> Result<usize, String> {
        let at = self.pos;
        let want = i64::from(adler32(&self.bytes[..at]));
        let val = self.long()?;
        if val != want || self.string()? != "/" {
            return Err(format!(
                "the seal at byte {at} is {val:#x}, the Adler32 before it {want:#x}"
            ));
        }
        Ok(at)
    }
}

/// Sets the stored cversion of the node at `path` in a 3.8 snapshot file
/// and reseals it; returns the old value. Refuses anything it does not
/// fully parse, seals included.
fn patch_cversion(bytes: &mut [u8], path: &str, cversion: i32) -> Result<i32, String> {
    let mut r = Jute {
        bytes: &*bytes,
        pos: 0,
    };
    // FileHeader: magic "ZKSN", version 2, dbid.
    let magic = r.int()?;
    if magic != i32::from_be_bytes(*b"ZKSN") {
        return Err(format!("magic {magic:#x}, not ZKSN"));
    }
    let version = r.int()?;
    if version != 2 {
        return Err(format!("snapshot format version {version}, not 2"));
    }
    r.long()?; // dbid
               // SerializeUtils.serializeSnapshot: sessions (id, timeout).
    for _ in 0..r.int()? {
        r.long()?;
        r.int()?;
    }
    // ReferenceCountedACLCache.serialize: id → [perms, scheme, id].
    for _ in 0..r.int()? {
        r.long()?;
        for _ in 0..r.int()? {
            r.int()?;
            r.string()?;
            r.string()?;
        }
    }
    // DataTree.serializeNodes: (path, DataNode) from the root (path ""),
    // ended by the path "/". DataNode: data, acl, then StatPersisted:
    // czxid, mzxid, ctime, mtime, version, cversion, aversion,
    // ephemeralOwner, pzxid.
    let mut found = None;
    loop {
        let p = r.string()?;
        if p == "/" {
            break;
        }
        r.buffer()?;
        r.long()?; // acl
        for _ in 0..4 {
            r.long()?;
        }
        r.int()?; // version
        let at = r.pos;
        let cv = r.int()?;
        r.int()?; // aversion
        r.long()?; // ephemeralOwner
        r.long()?; // pzxid
        if p == path {
            found = Some((at, cv));
        }
    }
    let seal1 = r.seal()?;
    // DataTree.serializeZxidDigest (digest enabled, the 3.8 default):
    // zxid, digest version, digest; sealed again.
    r.long()?;
    r.int()?;
    r.long()?;
    let seal2 = r.seal()?;
    if r.pos != r.bytes.len() {
        return Err(format!(
            "{} bytes after the second seal",
            r.bytes.len() - r.pos
        ));
    }
    let (at, old) = found.ok_or_else(|| format!("no node {path}"))?;
    bytes[at..at + 4].copy_from_slice(&cversion.to_be_bytes());
    for seal in [seal1, seal2] {
        let sum = i64::from(adler32(&bytes[..seal]));
        bytes[seal..seal + 8].copy_from_slice(&sum.to_be_bytes());
    }
    Ok(old)
}

#[test]
fn adler32_matches_known_values() {
    // The values java.util.zip.Adler32 gives (RFC 1950's example).
    assert_eq!(adler32(b""), 1);
    assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
    let long = vec![0xffu8; 100_000];
    // Checked against the definition, modulo at every byte.
    let (mut a, mut b) = (1u64, 0u64);
    for &x in &long {
        a = (a + u64::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    assert_eq!(adler32(&long), ((b << 16) | a) as u32);
}
