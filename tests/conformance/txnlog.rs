//! Reads a real server's txn log (`dataDir/version-2/log.<zxid>`), to name
//! the txns a case did not send: the reaper's deletes (containers.rs) and
//! the outside txns that disturb a case's zxid gaps (main.rs).
//!
//! The format (ZooKeeper's `FileTxnLog`, Jute binary, big-endian): a
//! 16-byte header (magic `ZKLG`, version 2, dbid), then per txn a checksum
//! (8 bytes), the entry's length (4) and bytes, and an end-of-record byte
//! `B`. An entry begins with the `TxnHeader`: client (session) id (8),
//! cxid (4), zxid (8), time (8), type (4); the record follows (for a
//! delete, the path as a length-prefixed string; for an error, the code).
//! Files are preallocated with zeros, so a length of 0 is the end of what
//! has been written. The server writes a txn there (flushed to the OS,
//! `forceSync=no` only skips the fsync) before it applies and answers it.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// How much of a log file one read takes.
const WINDOW: u64 = 1 << 20;

/// `ZooDefs.OpCode` values the tests name.
pub mod opcode {
    pub const ERROR: i32 = -1;
    pub const CREATE_SESSION: i32 = -10;
    pub const CLOSE_SESSION: i32 = -11;
    pub const DELETE_CONTAINER: i32 = 20;

    /// A type's name as ZooKeeper's `TraceFormatter.op2String` gives it.
    pub fn name(t: i32) -> &'static str {
        match t {
            0 => "notification",
            1 => "create",
            2 => "delete",
            5 => "setData",
            7 => "setACL",
            13 => "check",
            14 => "multi",
            15 => "create2",
            16 => "reconfig",
            19 => "createContainer",
            20 => "deleteContainer",
            21 => "createTtl",
            ERROR => "error",
            CREATE_SESSION => "createSession",
            CLOSE_SESSION => "closeSession",
            _ => "other",
        }
    }
}

/// One logged txn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedTxn {
    /// The session that sent it; 0 for the reaper's requests.
    pub session: i64,
    pub zxid: i64,
    /// The leader's wall clock at prep, in ms.
    pub time_ms: i64,
    /// `ZooDefs.OpCode` (`opcode::ERROR` for a failed write).
    pub txn_type: i32,
    /// The path, for the txn types that start with one (create, delete,
    /// setData, the container and TTL variants).
    pub path: Option<String>,
    /// The error code, for an error txn.
    pub error: Option<i32>,
}

impl std::fmt::Display for LoggedTxn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "zxid {:#x} {} by session {:#x}",
            self.zxid,
            opcode::name(self.txn_type),
            self.session
        )?;
        if let Some(p) = &self.path {
            write!(f, " of {p}")?;
        }
        if let Some(e) = self.error {
            write!(f, " (error {e})")?;
        }
        Ok(())
    }
}

/// Reads the log files of one server as they grow: each
/// [`TxnLog::read_new`] returns the txns written since the last call.
pub struct TxnLog {
    dir: PathBuf,
    /// The file being read (its first zxid, from its name) and how far.
    file: Option<(i64, u64)>,
}

fn be_i64(b: &[u8]) -> i64 {
    i64::from_be_bytes(b[..8].try_into().expect("8 bytes"))
}

fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes(b[..4].try_into().expect("4 bytes"))
}

/// One entry's bytes as a txn; None if it is too short to be one.
fn parse_entry(e: &[u8]) -> Option<LoggedTxn> {
    if e.len() < 32 {
        return None;
    }
    let txn_type = be_i32(&e[28..]);
    let body = &e[32..];
    let string_at_start = || {
        let n = usize::try_from(be_i32(body.get(..4)?)).ok()?;
        let bytes = body.get(4..4 + n)?;
        Some(String::from_utf8_lossy(bytes).into_owned())
    };
    let (path, error) = match txn_type {
        1 | 2 | 5 | 15 | 19 | 20 | 21 => (string_at_start(), None),
        opcode::ERROR => (None, body.get(..4).map(be_i32)),
        _ => (None, None),
    };
    Some(LoggedTxn {
        session: be_i64(e),
        zxid: be_i64(&e[12..]),
        time_ms: be_i64(&e[20..]),
        txn_type,
        path,
        error,
    })
}

impl TxnLog {
    /// A reader of the logs in `dir`, from the beginning.
    pub fn new(dir: &Path) -> TxnLog {
        TxnLog {
            dir: dir.to_owned(),
            file: None,
        }
    }

    /// The log files, by their first zxid.
    fn files(&self) -> io::Result<Vec<i64>> {
        let mut v: Vec<i64> = fs::read_dir(&self.dir)?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                i64::from_str_radix(name.strip_prefix("log.")?, 16).ok()
            })
            .collect();
        v.sort_unstable();
        Ok(v)
    }

    /// The txns written since the last call, in log (zxid) order. A txn
    /// still being written is left for the next call.
    pub fn read_new(&mut self) -> io::Result<Vec<LoggedTxn>> {
        let mut out = Vec::new();
        loop {
            let files = self.files()?;
            let (first, offset) = match self.file {
                Some(f) => f,
                None => match files.first() {
                    Some(&z) => (z, 16),
                    None => return Ok(out),
                },
            };
            // From where the last call stopped, a window at a time (the
            // file is megabytes of preallocated zeros; entries are small).
            let mut file = fs::File::open(self.dir.join(format!("log.{first:x}")))?;
            file.seek(SeekFrom::Start(offset))?;
            let mut bytes = Vec::new();
            file.take(WINDOW).read_to_end(&mut bytes)?;
            let mut at = 0usize;
            while let Some(head) = bytes.get(at..at + 12) {
                let len = be_i32(&head[8..]);
                let Ok(n) = usize::try_from(len) else { break };
                // The end-of-record byte shows the entry is whole.
                if n == 0 || bytes.get(at + 12 + n) != Some(&b'B') {
                    break;
                }
                if let Some(t) = parse_entry(&bytes[at + 12..at + 12 + n]) {
                    out.push(t);
                }
                at += 12 + n + 1;
            }
            self.file = Some((first, offset + at as u64));
            if bytes.len() as u64 == WINDOW && at > 0 {
                continue; // more may follow this window
            }
            // A newer file means this one is finished (the server rolls
            // the log only after its last txn there is written).
            match files.iter().find(|&&z| z > first) {
                Some(&next) => self.file = Some((next, 16)),
                None => return Ok(out),
            }
        }
    }
}
