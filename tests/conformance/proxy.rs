//! A recording TCP proxy between one real client connection and the real
//! server: it forwards every byte unchanged and notes, for each request
//! the client sends, its xid and opcode and the server's reply: the
//! header (the zxid and the error code), the body, and for creates and
//! multis the body decoded (the created path and Stat; every op's result
//! of a multi, as the server listed them).
//!
//! Why: the pipelined cases must recover the order in which the server
//! applied the requests of several sessions in flight at once, and the
//! only place the server says so is the reply header's zxid
//! (`ReplyHeader.zxid`, set in `FinalRequestProcessor.processRequest`),
//! which the `zookeeper-client` crate keeps to itself. And the crate
//! rebuilds two answers instead of passing on the server's: a sequential
//! create's name (it parses the sequence number off the server's path and
//! formats it again behind the requested prefix), and a failed multi's
//! result list (it stops at the failing op; `RealZk` fills in the rest).
//! Reading those off the wire lets the suites compare what the server
//! actually sent, and the client's answer against it.
//!
//! Framing (ZooKeeper's jute protocol): every message is a 4-byte
//! big-endian length and a body; TCP may cut a message anywhere or put
//! several in one read, so [`Framer`] reassembles them. Client → server:
//! first the ConnectRequest, then `RequestHeader { xid: i32, type: i32 }` +
//! request. Server → client: first the ConnectResponse, then
//! `ReplyHeader { xid: i32, zxid: i64, err: i32 }` + reply (no body when
//! `err` is not 0). Negative xids are the client's own traffic (pings -2,
//! auth -4, setWatches -8) and notifications (-1): not recorded, except
//! SetWatches' reply header: its zxid is the last txn the server had
//! applied when it answered the replay (replay.rs).
//!
//! A proxy forwards one connection ([`Proxy::start`]), or every
//! connection a reconnecting client makes ([`Proxy::start_reconnecting`]),
//! each recorded on its own.
//!
//! Reply bodies decoded (jute records of ZooKeeper 3.8):
//! * create (opcode 1): `CreateResponse { path: ustring }`;
//! * create2 (15), createContainer (19), createTTL (21):
//!   `Create2Response { path: ustring, stat: Stat }`;
//! * multi (14): `MultiResponse`, a list of `MultiHeader { type: i32,
//!   done: bool, err: i32 }` each followed by the op's result (create: the
//!   path; create2: path and Stat; setData: Stat; delete and check:
//!   nothing; error, type -1: `ErrorResponse { err: i32 }`), ended by a
//!   header with `done` set. A failed multi lists an error result for
//!   every op: code 0 for those before the failing one, the failing op's
//!   code, RuntimeInconsistency (-2) for those after it.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use zoosim::proto::{MultiResult, Reply, Stat, ZkError};

/// ZooKeeper's opcodes (`ZooDefs.OpCode`) that the decoding looks at.
pub mod opcode {
    pub const ERROR: i32 = -1;
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const SET_DATA: i32 = 5;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const CREATE_TTL: i32 = 21;
}

/// A frame longer than this is no ZooKeeper message (the server's
/// `jute.maxbuffer` is 1 MiB): the stream cannot be followed.
const MAX_FRAME: usize = 64 << 20;

/// A reply body, decoded where the comparison needs it.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// The reply to a create of any kind: the path the server created,
    /// and its Stat (not for a plain create, opcode 1).
    Create { path: String, stat: Option<Stat> },
    /// The reply to a multi: every op's result in the server's order.
    Multi(Vec<OpResult>),
    /// An error reply (no body), or an opcode not decoded here.
    NotDecoded,
}

/// One op's result inside a multi's reply, as the server wrote it.
#[derive(Clone, Debug, PartialEq)]
pub enum OpResult {
    /// Type create (1): the path only; create2 (15): path and Stat.
    Create {
        path: String,
        stat: Option<Stat>,
    },
    Delete,
    SetData {
        stat: Stat,
    },
    Check,
    /// Type error (-1) with the ErrorResponse's code; 0 for an op rolled
    /// back before the failing one.
    Error(i32),
}

/// One request as seen on the wire, with its reply once it came.
#[derive(Clone, Debug)]
pub struct Wire {
    pub xid: i32,
    pub opcode: i32,
    /// (header zxid, error code, body) of the reply.
    pub reply: Option<(i64, i32, Vec<u8>)>,
    /// The reply's body decoded (set with `reply`).
    pub decoded: Option<Body>,
}

impl Wire {
    /// The server's answer in the client's terms, for a create or a multi
    /// whose reply came: `None` for anything else, and for a plain create
    /// (opcode 1, no Stat, which a `Reply::Create` needs; the crate sends
    /// create2 to a 3.5+ server). A failed multi is `Ok(Reply::Multi)`
    /// with every op's result, as `RealZk` and the tree answer it.
    pub fn as_reply(&self) -> Result<Option<Result<Reply, ZkError>>, String> {
        let (Some((_, err, _)), Some(body)) = (&self.reply, &self.decoded) else {
            return Ok(None);
        };
        let code = |c: i32| {
            ZkError::from_code(c).ok_or_else(|| {
                format!(
                    "xid {} ({}): unknown error code {c}",
                    self.xid,
                    name(self.opcode)
                )
            })
        };
        if *err != 0 {
            let creates = [
                opcode::CREATE,
                opcode::CREATE2,
                opcode::CREATE_CONTAINER,
                opcode::CREATE_TTL,
                opcode::MULTI,
            ];
            return Ok(creates.contains(&self.opcode).then_some(Err(code(*err)?)));
        }
        Ok(match body {
            Body::Create {
                path,
                stat: Some(stat),
            } => Some(Ok(Reply::Create {
                path: path.clone(),
                stat: *stat,
            })),
            Body::Create { stat: None, .. } | Body::NotDecoded => None,
            Body::Multi(results) => Some(Ok(Reply::Multi(
                results
                    .iter()
                    .map(|r| {
                        Ok(match r {
                            OpResult::Create { path, stat } => MultiResult::Create {
                                path: path.clone(),
                                stat: *stat,
                            },
                            OpResult::Delete => MultiResult::Delete,
                            OpResult::SetData { stat } => MultiResult::SetData { stat: *stat },
                            OpResult::Check => MultiResult::Check,
                            OpResult::Error(0) => MultiResult::RolledBack,
                            OpResult::Error(c) => MultiResult::Failed(code(*c)?),
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()?,
            ))),
        })
    }
}

/// An opcode's name, for messages.
pub fn name(op: i32) -> String {
    match op {
        opcode::CREATE => "create".into(),
        opcode::CREATE2 => "create2".into(),
        opcode::CREATE_CONTAINER => "createContainer".into(),
        opcode::CREATE_TTL => "createTTL".into(),
        opcode::MULTI => "multi".into(),
        opcode::DELETE => "delete".into(),
        opcode::SET_DATA => "setData".into(),
        opcode::CHECK => "check".into(),
        opcode::ERROR => "error".into(),
        n => format!("opcode {n}"),
    }
}

// ----------------------------------------------------------------------
// Framing

/// Reassembles length-prefixed frames from the chunks TCP delivers.
#[derive(Default)]
pub struct Framer {
    buf: Vec<u8>,
}

impl Framer {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete frame's body (without its length), if one has
    /// arrived; an error if the length is not a message's.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, String> {
        let Some(len) = self.buf.get(0..4) else {
            return Ok(None);
        };
        let n = i32::from_be_bytes(len.try_into().unwrap());
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= MAX_FRAME)
            .ok_or_else(|| format!("frame length {n} (at most {MAX_FRAME})"))?;
        if self.buf.len() < 4 + n {
            return Ok(None);
        }
        let body = self.buf[4..4 + n].to_vec();
        self.buf.drain(..4 + n);
        Ok(Some(body))
    }
}

// ----------------------------------------------------------------------
// Decoding

/// Reads jute primitives off a body; every error names what was being
/// read and where.
struct Reader<'a> {
    body: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(body: &'a [u8]) -> Self {
        Reader { body, at: 0 }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let got = self
            .body
            .get(self.at..)
            .and_then(|rest| rest.get(..n))
            .ok_or_else(|| {
                format!(
                    "{what}: needs {n} bytes at offset {}, {} left",
                    self.at,
                    self.body.len().saturating_sub(self.at)
                )
            })?;
        self.at += n;
        Ok(got)
    }

    fn i32(&mut self, what: &str) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.take(4, what)?.try_into().unwrap()))
    }

    fn i64(&mut self, what: &str) -> Result<i64, String> {
        Ok(i64::from_be_bytes(self.take(8, what)?.try_into().unwrap()))
    }

    fn bool(&mut self, what: &str) -> Result<bool, String> {
        match self.take(1, what)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(format!(
                "{what}: boolean byte {b} at offset {}",
                self.at - 1
            )),
        }
    }

    /// A jute ustring: i32 length, UTF-8 bytes (-1 would be null: not a
    /// path).
    fn string(&mut self, what: &str) -> Result<String, String> {
        let n = self.i32(what)?;
        let n = usize::try_from(n).map_err(|_| format!("{what}: string length {n}"))?;
        let bytes = self.take(n, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| format!("{what}: not UTF-8"))
    }

    /// A jute buffer: i32 length (-1 = null), bytes.
    fn buffer(&mut self, what: &str) -> Result<(), String> {
        let n = self.i32(what)?;
        if n >= 0 {
            self.take(n as usize, what)?;
        }
        Ok(())
    }

    fn stat(&mut self, what: &str) -> Result<Stat, String> {
        let what = &format!("{what} Stat");
        Ok(Stat {
            czxid: self.i64(what)?,
            mzxid: self.i64(what)?,
            ctime: self.i64(what)?,
            mtime: self.i64(what)?,
            version: self.i32(what)?,
            cversion: self.i32(what)?,
            aversion: self.i32(what)?,
            ephemeral_owner: self.i64(what)?,
            data_length: self.i32(what)?,
            num_children: self.i32(what)?,
            pzxid: self.i64(what)?,
        })
    }

    /// Nothing may be left: a body longer than its record means the
    /// record was misread.
    fn end(&self, what: &str) -> Result<(), String> {
        match self.body.len() - self.at.min(self.body.len()) {
            0 => Ok(()),
            n => Err(format!("{what}: {n} bytes left over after the record")),
        }
    }
}

/// Decodes the body of a successful reply to `op`.
pub fn decode_body(op: i32, body: &[u8]) -> Result<Body, String> {
    let mut r = Reader::new(body);
    let decoded = match op {
        opcode::CREATE => Body::Create {
            path: r.string("create reply path")?,
            stat: None,
        },
        opcode::CREATE2 | opcode::CREATE_CONTAINER | opcode::CREATE_TTL => Body::Create {
            path: r.string("create2 reply path")?,
            stat: Some(r.stat("create2 reply")?),
        },
        opcode::MULTI => {
            let mut results = Vec::new();
            loop {
                let i = results.len();
                let what = format!("multi reply, result {i}");
                let ty = r.i32(&format!("{what} header type"))?;
                let done = r.bool(&format!("{what} header done"))?;
                let err = r.i32(&format!("{what} header err"))?;
                if done {
                    break;
                }
                results.push(match ty {
                    opcode::CREATE => OpResult::Create {
                        path: r.string(&format!("{what} (create) path"))?,
                        stat: None,
                    },
                    opcode::CREATE2 => OpResult::Create {
                        path: r.string(&format!("{what} (create2) path"))?,
                        stat: Some(r.stat(&format!("{what} (create2)"))?),
                    },
                    opcode::DELETE => OpResult::Delete,
                    opcode::CHECK => OpResult::Check,
                    opcode::SET_DATA => OpResult::SetData {
                        stat: r.stat(&format!("{what} (setData)"))?,
                    },
                    opcode::ERROR => {
                        let code = r.i32(&format!("{what} (error) code"))?;
                        // `MultiResponse.serialize` writes an error
                        // result's code into its header and its body.
                        if code != err {
                            return Err(format!(
                                "{what}: error code {code} in the body, {err} in the header"
                            ));
                        }
                        OpResult::Error(code)
                    }
                    t => return Err(format!("{what}: result type {t} is no write's")),
                });
            }
            Body::Multi(results)
        }
        _ => return Ok(Body::NotDecoded),
    };
    r.end(&format!("{} reply", name(op)))?;
    Ok(decoded)
}

// ----------------------------------------------------------------------
// Recording

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Direction {
    ToServer,
    ToClient,
}

/// What one connection carried, decoded frame by frame.
#[derive(Default, Debug)]
pub struct Recorder {
    /// Requests in the order the client sent them.
    sent: Vec<Wire>,
    /// xid → index in `sent`, for requests still waiting for a reply.
    waiting: BTreeMap<i32, usize>,
    /// Whether each direction's handshake frame has gone by.
    connect_sent: bool,
    connect_answered: bool,
    /// The session id of the ConnectResponse (for a failure's output).
    #[allow(dead_code)]
    session_id: Option<i64>,
    /// The header (zxid, error code) of each SetWatches reply, in order.
    set_watches: Vec<(i64, i32)>,
    /// The first error: after it the stream is not followed.
    broken: Option<String>,
}

/// The xid a client gives its SetWatches (`ClientCnxn.SET_WATCHES_XID`;
/// the crate's `PredefinedXid::SetWatches`).
const SET_WATCHES_XID: i32 = -8;

impl Recorder {
    /// Notes one frame's body going `dir`. An error names what could not
    /// be read; the recorder then ignores the rest.
    pub fn frame(&mut self, dir: Direction, body: &[u8]) -> Result<(), String> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        let noted = self.note(dir, body);
        if let Err(e) = &noted {
            self.broken = Some(e.clone());
        }
        noted
    }

    fn note(&mut self, dir: Direction, body: &[u8]) -> Result<(), String> {
        let mut r = Reader::new(body);
        match dir {
            Direction::ToServer if !self.connect_sent => {
                // ConnectRequest { protocolVersion, lastZxidSeen, timeOut,
                // sessionId, passwd } (+ readOnly, which old clients omit).
                r.i32("ConnectRequest protocolVersion")?;
                r.i64("ConnectRequest lastZxidSeen")?;
                r.i32("ConnectRequest timeOut")?;
                r.i64("ConnectRequest sessionId")?;
                r.buffer("ConnectRequest passwd")?;
                self.connect_sent = true;
            }
            Direction::ToClient if !self.connect_answered => {
                // ConnectResponse { protocolVersion, timeOut, sessionId,
                // passwd } (+ readOnly).
                r.i32("ConnectResponse protocolVersion")?;
                r.i32("ConnectResponse timeOut")?;
                self.session_id = Some(r.i64("ConnectResponse sessionId")?);
                r.buffer("ConnectResponse passwd")?;
                self.connect_answered = true;
            }
            Direction::ToServer => {
                let xid = r.i32("RequestHeader xid")?;
                let opcode = r.i32("RequestHeader type")?;
                if xid < 0 {
                    return Ok(());
                }
                if self.waiting.insert(xid, self.sent.len()).is_some() {
                    return Err(format!("xid {xid} sent again before its reply"));
                }
                self.sent.push(Wire {
                    xid,
                    opcode,
                    reply: None,
                    decoded: None,
                });
            }
            Direction::ToClient => {
                let xid = r.i32("ReplyHeader xid")?;
                let zxid = r.i64("ReplyHeader zxid")?;
                let err = r.i32("ReplyHeader err")?;
                if xid == SET_WATCHES_XID {
                    self.set_watches.push((zxid, err));
                }
                if xid < 0 {
                    return Ok(());
                }
                let at = self
                    .waiting
                    .remove(&xid)
                    .ok_or_else(|| format!("a reply to xid {xid}, never sent"))?;
                let w = &mut self.sent[at];
                let rest = &body[16..];
                // An error reply has no body.
                let decoded = if err == 0 {
                    decode_body(w.opcode, rest).map_err(|e| format!("xid {xid}: {e}"))?
                } else {
                    Body::NotDecoded
                };
                w.reply = Some((zxid, err, rest.to_vec()));
                w.decoded = Some(decoded);
            }
        }
        Ok(())
    }
}

// ----------------------------------------------------------------------
// The proxy

/// A proxy for one client connection; clones share its log.
#[derive(Clone)]
pub struct Proxy {
    addr: String,
    log: Arc<Mutex<Recorder>>,
}

impl Proxy {
    /// Listens on a free local port and forwards the first connection made
    /// to it to `upstream` ("host:port"). Only one connection: a client
    /// that reconnects (no faults here, so none should) fails to.
    pub fn start(upstream: &str) -> io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?.to_string();
        let log = Arc::new(Mutex::new(Recorder::default()));
        let upstream = upstream.to_owned();
        let l = log.clone();
        thread::spawn(move || {
            let Ok((client, _)) = listener.accept() else {
                return;
            };
            drop(listener);
            forward(client, &upstream, l);
        });
        Ok(Proxy { addr, log })
    }

    /// Listens on a free local port and forwards every connection made to
    /// it to `upstream`, for as long as the test runs: a client whose
    /// server went away reconnects through it. A connection made while
    /// the upstream is down is closed at once (the client tries again).
    pub fn start_reconnecting(upstream: &str) -> io::Result<Reconnecting> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?.to_string();
        let logs: Arc<Mutex<Vec<Arc<Mutex<Recorder>>>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let upstream = upstream.to_owned();
        let (l, st) = (logs.clone(), stop.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let log = Arc::new(Mutex::new(Recorder::default()));
                l.lock().unwrap().push(log.clone());
                forward(client, &upstream, log);
            }
        });
        Ok(Reconnecting { addr, logs, stop })
    }

    /// The address to give the client.
    pub fn connect_string(&self) -> &str {
        &self.addr
    }

    /// The requests so far, in the order sent; an error if the stream
    /// could not be followed.
    pub fn wire(&self) -> Result<Vec<Wire>, String> {
        self.since(0)
    }

    /// How many requests have been sent so far.
    pub fn len(&self) -> usize {
        self.log.lock().unwrap().sent.len()
    }

    /// The requests from the `from`-th on.
    pub fn since(&self, from: usize) -> Result<Vec<Wire>, String> {
        let log = self.log.lock().unwrap();
        match &log.broken {
            Some(e) => Err(e.clone()),
            None => Ok(log.sent.get(from..).unwrap_or_default().to_vec()),
        }
    }
}

/// Connects `client` to `upstream` and pumps both ways on threads of
/// their own, recording into `log`; drops `client` if `upstream` refuses.
fn forward(client: TcpStream, upstream: &str, log: Arc<Mutex<Recorder>>) {
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (c2, s2) = match (client.try_clone(), server.try_clone()) {
        (Ok(c), Ok(s)) => (c, s),
        _ => return,
    };
    let l2 = log.clone();
    thread::spawn(move || pump(client, server, &log, Direction::ToServer));
    thread::spawn(move || pump(s2, c2, &l2, Direction::ToClient));
}

/// A proxy that forwards every connection a client makes
/// ([`Proxy::start_reconnecting`]).
pub struct Reconnecting {
    addr: String,
    logs: Arc<Mutex<Vec<Arc<Mutex<Recorder>>>>>,
    stop: Arc<AtomicBool>,
}

impl Drop for Reconnecting {
    /// Ends the accepting thread: the flag, then a connection to wake it.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr);
    }
}

impl Reconnecting {
    /// The address to give the client.
    pub fn connect_string(&self) -> &str {
        &self.addr
    }

    /// The header (zxid, error code) of every SetWatches reply, over all
    /// connections in the order they were made; an error if a stream
    /// could not be followed.
    pub fn set_watches_replies(&self) -> Result<Vec<(i64, i32)>, String> {
        let logs = self.logs.lock().unwrap();
        let mut replies = Vec::new();
        for (i, log) in logs.iter().enumerate() {
            let log = log.lock().unwrap();
            if let Some(e) = &log.broken {
                return Err(format!("connection {i}: {e}"));
            }
            replies.extend(log.set_watches.iter().copied());
        }
        Ok(replies)
    }
}

/// Forwards `from` to `to`, noting each complete frame before the chunk
/// that completes it goes on: when a client holds a reply, the proxy has
/// recorded it.
fn pump(mut from: TcpStream, mut to: TcpStream, log: &Mutex<Recorder>, dir: Direction) {
    let mut framer = Framer::default();
    let mut chunk = vec![0u8; 64 << 10];
    let mut following = true;
    loop {
        let n = match from.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // A reset at the end of a session is normal; anything the
            // proxy saw before it stays valid.
            Err(_) => break,
        };
        if following {
            framer.push(&chunk[..n]);
            let mut log = log.lock().unwrap();
            loop {
                match framer.next_frame() {
                    Ok(Some(body)) => {
                        if log.frame(dir, &body).is_err() {
                            following = false;
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        log.broken.get_or_insert(format!("{dir:?}: {e}"));
                        following = false;
                        break;
                    }
                }
            }
        }
        // Bytes go on unchanged even when the stream can no longer be
        // followed: the error is the test's to report, not the client's.
        if to.write_all(&chunk[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

#[cfg(test)]
pub mod tests {
    //! Hand-built frames, as ZooKeeper 3.8 writes them.
    use super::*;

    /// Builds jute records.
    #[derive(Default)]
    pub struct Out(pub Vec<u8>);

    impl Out {
        pub fn i32(mut self, v: i32) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        pub fn i64(mut self, v: i64) -> Self {
            self.0.extend_from_slice(&v.to_be_bytes());
            self
        }
        pub fn bool(mut self, v: bool) -> Self {
            self.0.push(u8::from(v));
            self
        }
        pub fn string(self, s: &str) -> Self {
            let mut o = self.i32(s.len() as i32);
            o.0.extend_from_slice(s.as_bytes());
            o
        }
        pub fn stat(self, s: &Stat) -> Self {
            self.i64(s.czxid)
                .i64(s.mzxid)
                .i64(s.ctime)
                .i64(s.mtime)
                .i32(s.version)
                .i32(s.cversion)
                .i32(s.aversion)
                .i64(s.ephemeral_owner)
                .i32(s.data_length)
                .i32(s.num_children)
                .i64(s.pzxid)
        }
        /// A `MultiHeader`.
        pub fn header(self, ty: i32, done: bool, err: i32) -> Self {
            self.i32(ty).bool(done).i32(err)
        }
        /// With its 4-byte length in front.
        pub fn framed(self) -> Vec<u8> {
            let mut f = (self.0.len() as i32).to_be_bytes().to_vec();
            f.extend(self.0);
            f
        }
    }

    /// A multi reply's body listing `results`, ended as the server ends it.
    pub fn multi_body(results: &[OpResult]) -> Out {
        let mut o = Out::default();
        for r in results {
            o = match r {
                OpResult::Create { path, stat: None } => {
                    o.header(opcode::CREATE, false, 0).string(path)
                }
                OpResult::Create {
                    path,
                    stat: Some(s),
                } => o.header(opcode::CREATE2, false, 0).string(path).stat(s),
                OpResult::Delete => o.header(opcode::DELETE, false, 0),
                OpResult::Check => o.header(opcode::CHECK, false, 0),
                OpResult::SetData { stat } => o.header(opcode::SET_DATA, false, 0).stat(stat),
                OpResult::Error(c) => o.header(opcode::ERROR, false, *c).i32(*c),
            };
        }
        o.header(-1, true, -1)
    }

    fn connect_request() -> Vec<u8> {
        Out::default()
            .i32(0)
            .i64(0)
            .i32(10_000)
            .i64(0)
            .i32(16)
            .i64(0)
            .i64(0)
            .bool(false)
            .framed()
    }

    fn connect_response() -> Vec<u8> {
        Out::default()
            .i32(0)
            .i32(10_000)
            .i64(0x77)
            .i32(16)
            .i64(1)
            .i64(2)
            .bool(false)
            .framed()
    }

    pub fn request(xid: i32, op: i32) -> Vec<u8> {
        // The request record after the header is not read.
        Out::default().i32(xid).i32(op).string("/x").framed()
    }

    pub fn reply(xid: i32, zxid: i64, err: i32, body: Out) -> Vec<u8> {
        let mut o = Out::default().i32(xid).i64(zxid).i32(err);
        o.0.extend(body.0);
        o.framed()
    }

    pub fn stat(czxid: i64) -> Stat {
        Stat {
            czxid,
            mzxid: czxid,
            ctime: 1000,
            mtime: 1000,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 1,
            num_children: 0,
            pzxid: czxid,
        }
    }

    /// Feeds both directions' byte streams to a recorder in chunks of
    /// `step` bytes (requests first, as a client waits for nothing here).
    pub fn record(to_server: &[u8], to_client: &[u8], step: usize) -> Result<Vec<Wire>, String> {
        let mut rec = Recorder::default();
        for (dir, bytes) in [
            (Direction::ToServer, to_server),
            (Direction::ToClient, to_client),
        ] {
            let mut f = Framer::default();
            for chunk in bytes.chunks(step) {
                f.push(chunk);
                while let Some(body) = f.next_frame()? {
                    rec.frame(dir, &body)?;
                }
            }
            if !f.buf.is_empty() {
                return Err(format!("{dir:?}: {} bytes of a partial frame", f.buf.len()));
            }
        }
        Ok(rec.sent)
    }

    /// A session's bytes: handshake, a create2 of a sequential node, a ping,
    /// a failed multi (create ok, delete NoNode, setData not reached), a
    /// successful multi, a notification, a create that failed.
    fn session() -> (Vec<u8>, Vec<u8>) {
        let mut up = connect_request();
        let mut down = connect_response();
        up.extend(request(1, opcode::CREATE2));
        up.extend(request(-2, 11));
        up.extend(request(2, opcode::MULTI));
        up.extend(request(3, opcode::MULTI));
        up.extend(request(4, opcode::CREATE2));
        down.extend(reply(
            1,
            0x10,
            0,
            Out::default().string("/q-0000000007").stat(&stat(0x10)),
        ));
        down.extend(reply(-2, 0x10, 0, Out::default()));
        down.extend(reply(
            2,
            0x11,
            0,
            multi_body(&[
                OpResult::Error(0),
                OpResult::Error(-101),
                OpResult::Error(-2),
            ]),
        ));
        down.extend(reply(-1, -1, 0, Out::default().i32(3).i32(3).string("/q")));
        down.extend(reply(
            3,
            0x12,
            0,
            multi_body(&[
                OpResult::Create {
                    path: "/a/s-0000000001".into(),
                    stat: None,
                },
                OpResult::SetData { stat: stat(0x12) },
                OpResult::Delete,
                OpResult::Check,
            ]),
        ));
        down.extend(reply(4, 0x13, -110, Out::default()));
        (up, down)
    }

    #[test]
    fn frames_decode_whole_cut_anywhere_and_several_per_read() {
        let (up, down) = session();
        let whole = record(&up, &down, usize::MAX).unwrap();
        for step in [1, 2, 3, 5, 7, 16, 100] {
            let cut = record(&up, &down, step).unwrap();
            assert_eq!(format!("{cut:?}"), format!("{whole:?}"), "chunks of {step}");
        }
        let ops: Vec<_> = whole.iter().map(|w| (w.xid, w.opcode)).collect();
        assert_eq!(ops, [(1, 15), (2, 14), (3, 14), (4, 15)], "pings skipped");
        assert_eq!(
            whole[0].decoded,
            Some(Body::Create {
                path: "/q-0000000007".into(),
                stat: Some(stat(0x10))
            })
        );
        // The failed multi, every op's result as sent.
        assert_eq!(
            whole[1].decoded,
            Some(Body::Multi(vec![
                OpResult::Error(0),
                OpResult::Error(-101),
                OpResult::Error(-2)
            ]))
        );
        assert_eq!(
            whole[1].as_reply().unwrap(),
            Some(Ok(Reply::Multi(vec![
                MultiResult::RolledBack,
                MultiResult::Failed(ZkError::NoNode),
                MultiResult::Failed(ZkError::RuntimeInconsistency)
            ])))
        );
        assert_eq!(
            whole[2].as_reply().unwrap(),
            Some(Ok(Reply::Multi(vec![
                MultiResult::Create {
                    path: "/a/s-0000000001".into(),
                    stat: None
                },
                MultiResult::SetData { stat: stat(0x12) },
                MultiResult::Delete,
                MultiResult::Check,
            ])))
        );
        assert_eq!(
            whole[3].reply.as_ref().map(|r| (r.0, r.1)),
            Some((0x13, -110))
        );
        assert_eq!(whole[3].as_reply().unwrap(), Some(Err(ZkError::NodeExists)));
    }

    #[test]
    fn malformed_frames_are_errors_naming_what_was_wrong() {
        let (up, _) = session();
        let handshake = connect_response();
        let with = |extra: Vec<u8>| {
            let mut down = handshake.clone();
            down.extend(extra);
            record(&up, &down, 3).unwrap_err()
        };
        // A create2 reply, and a multi result, cut short inside a Stat.
        let e = with(reply(1, 1, 0, Out::default().string("/q").i64(1)));
        assert!(
            e.contains("xid 1: create2 reply Stat: needs 8 bytes at offset 14, 0 left"),
            "{e}"
        );
        let e = with(reply(
            2,
            1,
            0,
            Out::default().header(opcode::SET_DATA, false, 0).i64(1),
        ));
        assert!(e.contains("multi reply, result 0 (setData) Stat"), "{e}");
        // A list without its end.
        let e = with(reply(
            2,
            1,
            0,
            Out::default().header(opcode::DELETE, false, 0),
        ));
        assert!(e.contains("multi reply, result 1 header type"), "{e}");
        // An error result whose header and body disagree.
        let e = with(reply(
            2,
            1,
            0,
            Out::default()
                .header(opcode::ERROR, false, -101)
                .i32(-110)
                .header(-1, true, -1),
        ));
        assert!(
            e.contains("error code -110 in the body, -101 in the header"),
            "{e}"
        );
        // A read's result in a write multi; a bad boolean; bytes left over.
        let e = with(reply(2, 1, 0, Out::default().header(4, false, 0)));
        assert!(e.contains("result type 4 is no write's"), "{e}");
        let e = with(reply(2, 1, 0, Out(vec![0, 0, 0, 2, 7, 0, 0, 0, 0])));
        assert!(
            e.contains("result 0 header done: boolean byte 7 at offset 4"),
            "{e}"
        );
        let e = with(reply(2, 1, 0, multi_body(&[OpResult::Delete]).i32(0)));
        assert!(e.contains("multi reply: 4 bytes left over"), "{e}");
        // A reply to nothing sent; a frame length no message has; a reply
        // shorter than its header; a handshake cut short.
        let e = with(reply(9, 1, 0, Out::default()));
        assert!(e.contains("a reply to xid 9, never sent"), "{e}");
        let e = with((-5i32).to_be_bytes().to_vec());
        assert!(e.contains("frame length -5"), "{e}");
        let e = with(Out::default().i32(1).i32(0).framed());
        assert!(
            e.contains("ReplyHeader zxid: needs 8 bytes at offset 4, 4 left"),
            "{e}"
        );
        let e = record(&up, &Out::default().i32(0).framed(), 1).unwrap_err();
        assert!(e.contains("ConnectResponse timeOut"), "{e}");
        // An unknown code decodes, but has no name in the client's terms.
        let down = [
            handshake.clone(),
            reply(2, 1, 0, multi_body(&[OpResult::Error(-999)])),
        ]
        .concat();
        let wire = record(&up, &down, 64).unwrap();
        let e = wire[1].as_reply().unwrap_err();
        assert!(e.contains("unknown error code -999"), "{e}");
    }
}
