//! A recording TCP proxy between one real client connection and the real
//! server: it forwards every byte unchanged and notes, for each request
//! the client sends, its xid and opcode and the header of the server's
//! reply (the zxid and the error code) with the reply's body.
//!
//! Why: the pipelined cases must recover the order in which the server
//! applied the requests of several sessions in flight at once, and the
//! only place the server says so is the reply header's zxid
//! (`ReplyHeader.zxid`, set in `FinalRequestProcessor.processRequest`),
//! which the `zookeeper-client` crate keeps to itself. The proxy reads
//! it off the wire. It also keeps the body, so the reply to a request the
//! client abandoned when its session was closed (`RealZk::close` fails
//! those with SessionExpired) can still be compared.
//!
//! Framing (ZooKeeper's jute protocol): every message is a 4-byte
//! big-endian length and a body. Client → server: first the
//! ConnectRequest, then `RequestHeader { xid: i32, type: i32 }` + request.
//! Server → client: first the ConnectResponse, then
//! `ReplyHeader { xid: i32, zxid: i64, err: i32 }` + reply. Negative xids
//! are the client's own traffic (pings -2, auth -4, setWatches -8) and
//! notifications (-1): not recorded.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

/// One request as seen on the wire, with its reply once it came.
#[derive(Clone, Debug)]
pub struct Wire {
    /// Not read by the comparison; kept for a failure's Debug output.
    #[allow(dead_code)]
    pub xid: i32,
    pub opcode: i32,
    /// (header zxid, error code, body) of the reply.
    pub reply: Option<(i64, i32, Vec<u8>)>,
}

#[derive(Default, Debug)]
struct Log {
    /// Requests in the order the client sent them.
    sent: Vec<Wire>,
    /// xid → index in `sent`, for requests still waiting for a reply.
    waiting: BTreeMap<i32, usize>,
    /// A framing error, if the stream could not be followed.
    broken: Option<String>,
}

/// A proxy for one client connection; clones share its log.
#[derive(Clone)]
pub struct Proxy {
    addr: String,
    log: Arc<Mutex<Log>>,
}

impl Proxy {
    /// Listens on a free local port and forwards the first connection made
    /// to it to `upstream` ("host:port"). Only one connection: a client
    /// that reconnects (no faults here, so none should) fails to.
    pub fn start(upstream: &str) -> io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?.to_string();
        let log = Arc::new(Mutex::new(Log::default()));
        let upstream = upstream.to_owned();
        let l = log.clone();
        thread::spawn(move || {
            let Ok((client, _)) = listener.accept() else {
                return;
            };
            drop(listener);
            let server = match TcpStream::connect(&upstream) {
                Ok(s) => s,
                Err(_) => return,
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (c2, s2) = match (client.try_clone(), server.try_clone()) {
                (Ok(c), Ok(s)) => (c, s),
                _ => return,
            };
            let l2 = l.clone();
            thread::spawn(move || pump(client, server, &l, Direction::ToServer));
            thread::spawn(move || pump(s2, c2, &l2, Direction::ToClient));
        });
        Ok(Proxy { addr, log })
    }

    /// The address to give the client.
    pub fn connect_string(&self) -> &str {
        &self.addr
    }

    /// The requests so far, in the order sent; an error if the stream
    /// could not be followed.
    pub fn wire(&self) -> Result<Vec<Wire>, String> {
        let log = self.log.lock().unwrap();
        match &log.broken {
            Some(e) => Err(e.clone()),
            None => Ok(log.sent.clone()),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    ToServer,
    ToClient,
}

fn read_frame(from: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match from.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let n = i32::from_be_bytes(len);
    if !(0..=64 << 20).contains(&n) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame length {n}"),
        ));
    }
    let mut body = vec![0u8; n as usize];
    from.read_exact(&mut body)?;
    let mut frame = len.to_vec();
    frame.extend_from_slice(&body);
    Ok(Some(frame))
}

fn pump(mut from: TcpStream, mut to: TcpStream, log: &Mutex<Log>, dir: Direction) {
    let mut first = true;
    loop {
        let frame = match read_frame(&mut from) {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                // A reset at the end of a session is normal; anything the
                // proxy saw before it stays valid.
                if e.kind() == io::ErrorKind::InvalidData {
                    log.lock().unwrap().broken = Some(e.to_string());
                }
                break;
            }
        };
        if !first {
            note(&frame[4..], log, dir);
        }
        first = false;
        if to.write_all(&frame).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

fn note(body: &[u8], log: &Mutex<Log>, dir: Direction) {
    let i32_at = |at: usize| {
        body.get(at..at + 4)
            .map(|b| i32::from_be_bytes(b.try_into().unwrap()))
    };
    let mut log = log.lock().unwrap();
    match dir {
        Direction::ToServer => {
            let (Some(xid), Some(opcode)) = (i32_at(0), i32_at(4)) else {
                log.broken = Some("a request shorter than its header".into());
                return;
            };
            if xid < 0 {
                return;
            }
            let at = log.sent.len();
            log.sent.push(Wire {
                xid,
                opcode,
                reply: None,
            });
            log.waiting.insert(xid, at);
        }
        Direction::ToClient => {
            let (Some(xid), Some(err)) = (i32_at(0), i32_at(12)) else {
                log.broken = Some("a reply shorter than its header".into());
                return;
            };
            if xid < 0 {
                return;
            }
            let zxid = i64::from_be_bytes(body[4..12].try_into().unwrap());
            match log.waiting.remove(&xid) {
                Some(at) => log.sent[at].reply = Some((zxid, err, body[16..].to_vec())),
                None => log.broken = Some(format!("a reply to xid {xid}, never sent")),
            }
        }
    }
}

/// Decodes a create reply's body: the created path, and the Stat if the
/// opcode was create2/createContainer/createTTL (a plain create's reply
/// has none).
pub fn decode_create(body: &[u8]) -> Option<(String, Option<zoosim::proto::Stat>)> {
    let n = usize::try_from(i32::from_be_bytes(body.get(0..4)?.try_into().ok()?)).ok()?;
    let path = String::from_utf8(body.get(4..4 + n)?.to_vec()).ok()?;
    let rest = &body[4 + n..];
    if rest.len() < 68 {
        return Some((path, None));
    }
    let i64_at = |at: usize| i64::from_be_bytes(rest[at..at + 8].try_into().unwrap());
    let i32_at = |at: usize| i32::from_be_bytes(rest[at..at + 4].try_into().unwrap());
    // Stat: czxid, mzxid, ctime, mtime, version, cversion, aversion,
    // ephemeralOwner, dataLength, numChildren, pzxid.
    let stat = zoosim::proto::Stat {
        czxid: i64_at(0),
        mzxid: i64_at(8),
        ctime: i64_at(16),
        mtime: i64_at(24),
        version: i32_at(32),
        cversion: i32_at(36),
        aversion: i32_at(40),
        ephemeral_owner: i64_at(44),
        data_length: i32_at(52),
        num_children: i32_at(56),
        pzxid: i64_at(60),
    };
    Some((path, Some(stat)))
}
