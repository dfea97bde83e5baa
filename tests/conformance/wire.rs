//! The server's own bytes in the comparisons: every created name and every
//! multi's result list as the real server sent them (decoded off the wire
//! by [`crate::proxy`]), compared with the model, and with what the client
//! answered.
//!
//! Why both: the `zookeeper-client` crate rebuilds two answers instead of
//! passing on the server's. A sequential create's name is the requested
//! prefix with the sequence number the crate parsed off the server's path,
//! formatted again; a failed multi's list stops, in the crate, at the
//! failing op, and `RealZk` fills in `ErrorResult(0)` before it and
//! RuntimeInconsistency after it. Comparing only the client's answer with
//! the model would let a rebuilding that happens to agree with the model
//! hide what the server sent. A difference between the wire and the
//! client's answer is a client bug, reported as such.
//!
//! The sequential suite (main.rs) runs each real session through a
//! [`Wired`] handle: it notes, for each create and multi the step sequence
//! makes, what went over that session's connection during the call. The
//! pipelined suite (pipelined.rs) lines its requests up with the wire log
//! itself and calls [`server_reply`] and [`WireCounts::note`].

use std::sync::{Arc, Mutex};

use zoosim::client::real::RealZk;
use zoosim::client::{Delivery, Ticket, Zk};
use zoosim::proto::{ClientEvent, CreateMode, MultiOp, MultiResult, Op, Reply, SessionId, ZkError};

use crate::gen::{rooted, Step};
use crate::harness::{self, Trace};
use crate::proxy::{Proxy, Wire};
use crate::SESSION_TIMEOUT_MS;

/// What was compared from the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WireCounts {
    /// Created names (creates, and creates inside successful multis).
    pub names: u64,
    /// Of those, sequential ones: the names the crate rebuilds.
    pub sequential_names: u64,
    /// Multis' result lists.
    pub multis: u64,
    /// Of those, failed multis': the lists `RealZk` rebuilds.
    pub failed_multis: u64,
    /// Creates and multis the client answered without sending them (a
    /// path it refuses, a closed handle, an empty multi): nothing on the
    /// wire to compare.
    pub not_sent: u64,
}

impl WireCounts {
    pub fn add(&mut self, o: &WireCounts) {
        self.names += o.names;
        self.sequential_names += o.sequential_names;
        self.multis += o.multis;
        self.failed_multis += o.failed_multis;
        self.not_sent += o.not_sent;
    }

    /// Counts one reply of `op` taken from the wire.
    pub fn note(&mut self, op: &Op, sent: &Result<Reply, ZkError>) {
        let seq = |m: &CreateMode| u64::from(m.is_sequential());
        match (op, sent) {
            (Op::Create { mode, .. }, Ok(Reply::Create { .. })) => {
                self.names += 1;
                self.sequential_names += seq(mode);
            }
            (Op::Multi(ops), Ok(r @ Reply::Multi(results))) => {
                self.multis += 1;
                self.failed_multis += u64::from(r.multi_error().is_some());
                for (op, res) in ops.iter().zip(results) {
                    if let (MultiOp::Create { mode, .. }, MultiResult::Create { .. }) = (op, res) {
                        self.names += 1;
                        self.sequential_names += seq(mode);
                    }
                }
            }
            _ => {}
        }
    }

    /// Fails when a run that should have compared sequential names and
    /// failed multis from the wire compared none.
    pub fn require(&self, title: &str) -> Result<(), String> {
        if !self.missing().is_empty() {
            return Err(format!(
                "{title}: nothing compared from the wire where it must be: {self:?}"
            ));
        }
        Ok(())
    }

    /// What [`WireCounts::require`] would find missing.
    pub fn missing(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.sequential_names == 0 {
            missing.push("a sequential name from the wire");
        }
        if self.failed_multis == 0 {
            missing.push("a failed multi from the wire");
        }
        missing
    }

    pub fn report(&self, title: &str) {
        eprintln!(
            "{title}: from the wire: {} created names ({} sequential), {} multi result lists \
             ({} failed); {} creates/multis answered by the client without a request",
            self.names, self.sequential_names, self.multis, self.failed_multis, self.not_sent
        );
    }
}

/// The server's reply to a create or multi, decoded off the wire, in the
/// client's terms (`None` for any other request); an error if the
/// client's answer `client` differs from it, or if it does not decode.
pub fn server_reply(
    what: &str,
    client: &Result<Reply, ZkError>,
    wire: &Wire,
) -> Result<Option<Result<Reply, ZkError>>, String> {
    let sent = wire.as_reply().map_err(|e| format!("{what}: {e}"))?;
    if let Some(sent) = &sent {
        if sent != client {
            return Err(format!(
                "{what}: the client's answer differs from the server's bytes (a client bug)\n  \
                 client {client:?}\n  wire   {sent:?}"
            ));
        }
    }
    Ok(sent)
}

/// One create or multi made through a [`Wired`] handle.
#[derive(Clone, Debug)]
pub struct Call {
    pub session: usize,
    pub op: Op,
    pub client: Result<Reply, ZkError>,
    /// The requests the connection carried during the call (none if the
    /// client answered by itself), or why the stream could not be read.
    pub wire: Result<Vec<Wire>, String>,
}

pub type Calls = Arc<Mutex<Vec<Call>>>;

/// A handle whose connection goes through a recording proxy; notes every
/// create and multi it makes, in the order made, in a log shared by the
/// sessions of a run.
pub struct Wired<Z> {
    zk: Z,
    proxy: Proxy,
    session: usize,
    calls: Calls,
}

/// Connects `n` real sessions through proxies, one after another (so
/// their createSession txns are ordered like the model's), as sessions
/// `0..n` of `calls`.
pub async fn wired_sessions(
    connect: &str,
    n: usize,
    calls: &Calls,
) -> Result<Vec<Wired<RealZk>>, String> {
    let mut v = Vec::with_capacity(n);
    for session in 0..n {
        let proxy = Proxy::start(connect).map_err(|e| format!("proxy {session}: {e}"))?;
        let zk = RealZk::connect(proxy.connect_string(), SESSION_TIMEOUT_MS)
            .await
            .map_err(|e| format!("connecting real session {session}: {e}"))?;
        v.push(Wired {
            zk,
            proxy,
            session,
            calls: calls.clone(),
        });
    }
    Ok(v)
}

impl<Z: Zk + Sync> Zk for Wired<Z> {
    fn session_id(&self) -> SessionId {
        self.zk.session_id()
    }
    fn session_timeout_ms(&self) -> u64 {
        self.zk.session_timeout_ms()
    }
    async fn call(&self, op: Op) -> Result<Reply, ZkError> {
        if !matches!(op, Op::Create { .. } | Op::Multi(_)) {
            return self.zk.call(op).await;
        }
        // The proxy notes a request before passing it on and a reply
        // before the client can read it: once the reply is here, the
        // requests from `from` on are this call's (the harness makes one
        // call at a time; pings are not noted).
        let from = self.proxy.len();
        let client = self.zk.call(op.clone()).await;
        self.calls.lock().unwrap().push(Call {
            session: self.session,
            op,
            client: client.clone(),
            wire: self.proxy.since(from),
        });
        client
    }
    fn submit(&self, op: Op) -> Ticket {
        self.zk.submit(op)
    }
    fn next_delivery(&self) -> impl std::future::Future<Output = Delivery> + Send {
        self.zk.next_delivery()
    }
    fn try_next_delivery(&self) -> Option<Delivery> {
        self.zk.try_next_delivery()
    }
    fn next_event(&self) -> impl std::future::Future<Output = ClientEvent> + Send {
        self.zk.next_event()
    }
    fn try_next_event(&self) -> Option<ClientEvent> {
        self.zk.try_next_event()
    }
    fn close(&self) -> impl std::future::Future<Output = Result<(), ZkError>> + Send {
        self.zk.close()
    }
}

/// The sequential suite's wire check: lines the creates and multis of
/// `steps` (and the setup create of `root`) up with `calls`, checks each
/// client answer against the server's bytes, and compares a copy of
/// `real` carrying the server's bytes instead with `model` under the same
/// rules as the client's answers.
pub fn check_sequential(
    calls: &[Call],
    real: &Trace,
    model: &Trace,
    root: &str,
    steps: &[Step],
    strict: bool,
) -> Result<WireCounts, String> {
    let mut counts = WireCounts::default();
    let mut wire_trace = real.clone();
    let mut calls = calls.iter();
    let offset = real.steps.len() - steps.len();
    for (n, step) in real.steps.iter().enumerate() {
        let (session, op, what) = match n.checked_sub(offset) {
            None => {
                let op = Op::Create {
                    path: root.to_owned(),
                    data: Vec::new(),
                    mode: CreateMode::Persistent,
                };
                (0, op, format!("setup: create {root}"))
            }
            Some(i) => match &steps[i] {
                Step::Op { session, op } => {
                    let op = rooted(root, op);
                    let what = format!("step {i} (session {session}): {op:?}");
                    (*session, op, what)
                }
                Step::Close { .. } => continue,
            },
        };
        if !matches!(op, Op::Create { .. } | Op::Multi(_)) {
            continue;
        }
        let call = calls
            .next()
            .ok_or_else(|| format!("{what}: no call of it was recorded"))?;
        if (call.session, &call.op, &call.client) != (session, &op, &step.reply) {
            return Err(format!(
                "{what}: the recorded calls do not line up with the steps: {call:?}"
            ));
        }
        match call
            .wire
            .as_ref()
            .map_err(|e| format!("{what}: {e}"))?
            .as_slice()
        {
            // Only what a client answers by itself may skip the wire: a
            // path or mode it refuses, a handle closed before, an empty
            // multi.
            [] => match &call.client {
                Err(ZkError::BadArguments | ZkError::SessionExpired) => counts.not_sent += 1,
                Ok(Reply::Multi(results)) if results.is_empty() => counts.not_sent += 1,
                other => {
                    return Err(format!(
                        "{what}: answered {other:?} without a request on the wire"
                    ))
                }
            },
            [w] => {
                if let Some(sent) = server_reply(&what, &call.client, w)? {
                    counts.note(&op, &sent);
                    wire_trace.steps[n].reply = sent;
                }
            }
            more => {
                return Err(format!(
                    "{what}: {} requests went out during the call: {more:?}",
                    more.len()
                ))
            }
        }
    }
    if let Some(call) = calls.next() {
        return Err(format!("a call no step made: {call:?}"));
    }
    harness::compare(&wire_trace, model, root, steps, strict)
        .map_err(|e| format!("as the server sent it (decoded off the wire): {e}"))?;
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::tests::{multi_body, record, reply, request, Out};
    use crate::proxy::{opcode, OpResult};

    fn create(path: &str, mode: CreateMode) -> Op {
        Op::Create {
            path: path.into(),
            data: vec![],
            mode,
        }
    }

    /// The wire log of one request with opcode `op` answered by `body`.
    fn wire(op: i32, zxid: i64, body: Out) -> Wire {
        let up = [
            Out::default().i32(0).i64(0).i32(0).i64(0).i32(-1).framed(),
            request(1, op),
        ]
        .concat();
        let down = [
            Out::default().i32(0).i32(0).i64(1).i32(-1).framed(),
            reply(1, zxid, 0, body),
        ]
        .concat();
        record(&up, &down, 5).unwrap().remove(0)
    }

    /// The body a server sends for `reply` to a create2 or multi.
    fn encode(reply: &Reply) -> Out {
        match reply {
            Reply::Create { path, stat } => Out::default().string(path).stat(stat),
            Reply::Multi(results) => multi_body(
                &results
                    .iter()
                    .map(|r| match r {
                        MultiResult::Create { path, stat } => OpResult::Create {
                            path: path.clone(),
                            stat: *stat,
                        },
                        MultiResult::Delete => OpResult::Delete,
                        MultiResult::SetData { stat } => OpResult::SetData { stat: *stat },
                        MultiResult::Check => OpResult::Check,
                        MultiResult::RolledBack => OpResult::Error(0),
                        MultiResult::Failed(e) => OpResult::Error(e.code()),
                    })
                    .collect::<Vec<_>>(),
            ),
            r => panic!("not a create's or multi's: {r:?}"),
        }
    }

    #[test]
    fn a_wrong_wire_answer_is_caught_naming_what_differed() {
        // The model's run stands in for the server's: its answers, encoded
        // as the server would send them, pass; one code changed on the wire
        // fails, against the model and against the client's answer.
        let steps = vec![
            Step::Op {
                session: 0,
                op: create("/q-", CreateMode::PersistentSequential),
            },
            Step::Op {
                session: 1,
                op: Op::Multi(vec![
                    MultiOp::Create {
                        path: "/a".into(),
                        data: vec![],
                        mode: CreateMode::Persistent,
                    },
                    MultiOp::Delete {
                        path: "/missing".into(),
                        version: -1,
                    },
                    MultiOp::Check {
                        path: "/a".into(),
                        version: 0,
                    },
                ]),
            },
            // Refused by the client without a request.
            Step::Op {
                session: 1,
                op: create("/a//b", CreateMode::Persistent),
            },
        ];
        let (real, _) = crate::runtime().block_on(crate::model_run("/r", 2, &steps));
        let (model, _) = crate::runtime().block_on(crate::model_run("/r", 2, &steps));
        let Ok(multi @ Reply::Multi(_)) = &real.steps[2].reply else {
            panic!("{:?}", real.steps[2].reply)
        };
        assert_eq!(
            multi,
            &Reply::Multi(vec![
                MultiResult::RolledBack,
                MultiResult::Failed(ZkError::NoNode),
                MultiResult::Failed(ZkError::RuntimeInconsistency)
            ])
        );
        assert_eq!(real.steps[3].reply, Err(ZkError::BadArguments));
        // Calls as `Wired` notes them.
        let calls = |bodies: [Option<Out>; 4]| {
            let ops = [
                (0, create("/r", CreateMode::Persistent), opcode::CREATE2),
                (
                    0,
                    rooted("/r", &create("/q-", CreateMode::PersistentSequential)),
                    opcode::CREATE2,
                ),
                (
                    1,
                    rooted(
                        "/r",
                        match &steps[1] {
                            Step::Op { op, .. } => op,
                            _ => unreachable!(),
                        },
                    ),
                    opcode::MULTI,
                ),
                (
                    1,
                    rooted("/r", &create("/a//b", CreateMode::Persistent)),
                    opcode::CREATE2,
                ),
            ];
            ops.into_iter()
                .zip(bodies)
                .enumerate()
                .map(|(n, ((session, op, code), body))| Call {
                    session,
                    op,
                    client: real.steps[n].reply.clone(),
                    wire: Ok(body
                        .map(|b| {
                            let zxid = 0x100 + n as i64;
                            vec![wire(code, zxid, b)]
                        })
                        .unwrap_or_default()),
                })
                .collect::<Vec<_>>()
        };
        let bodies = |multi: Out| {
            [
                Some(encode(real.steps[0].reply.as_ref().unwrap())),
                Some(encode(real.steps[1].reply.as_ref().unwrap())),
                Some(multi),
                None,
            ]
        };
        let right = check_sequential(
            &calls(bodies(encode(multi))),
            &real,
            &model,
            "/r",
            &steps,
            true,
        )
        .unwrap();
        assert_eq!(
            right,
            WireCounts {
                names: 2,
                sequential_names: 1,
                multis: 1,
                failed_multis: 1,
                not_sent: 1
            }
        );

        // The failing op's code changed on the wire: NoNode → NodeExists.
        let wrong = multi_body(&[
            OpResult::Error(0),
            OpResult::Error(-110),
            OpResult::Error(-2),
        ]);
        let e =
            check_sequential(&calls(bodies(wrong)), &real, &model, "/r", &steps, true).unwrap_err();
        assert!(
            e.contains("the client's answer differs from the server's bytes")
                && e.contains("Failed(NodeExists)"),
            "{e}"
        );
        // The same wrong list, with a client that agreed with it: the
        // comparison with the model names the op.
        let mut agreeing = real.clone();
        let Ok(Reply::Multi(results)) = &mut agreeing.steps[2].reply else {
            unreachable!()
        };
        results[1] = MultiResult::Failed(ZkError::NodeExists);
        let mut cs = calls(bodies(multi_body(&[
            OpResult::Error(0),
            OpResult::Error(-110),
            OpResult::Error(-2),
        ])));
        cs[2].client = agreeing.steps[2].reply.clone();
        let e = check_sequential(&cs, &agreeing, &model, "/r", &steps, true).unwrap_err();
        assert!(
            e.starts_with("as the server sent it (decoded off the wire): step 1 (session 1)")
                && e.contains("[1]")
                && e.contains("Failed(NodeExists)")
                && e.contains("Failed(NoNode)"),
            "{e}"
        );
        // A sequential name the server sent differently from the client's.
        let Ok(Reply::Create { path, stat }) = &real.steps[1].reply else {
            unreachable!()
        };
        let renamed = Out::default().string(&format!("{path}0")).stat(stat);
        let mut b = bodies(encode(multi));
        b[1] = Some(renamed);
        let e = check_sequential(&calls(b), &real, &model, "/r", &steps, true).unwrap_err();
        assert!(
            e.contains("step 0 (session 0)") && e.contains("differs from the server's bytes"),
            "{e}"
        );
    }
}
