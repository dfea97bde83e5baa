//! A [`History`]'s operations as a Jepsen history in EDN: a vector of op
//! maps `{:type :invoke|:ok|:fail|:info, :process P, :f F, :value V,
//! :time NS, :index I}`, for Knossos, Elle or Porcupine (docs/HISTORY.md,
//! "Jepsen EDN").
//!
//! The mapping:
//! * a reply is `:ok` (a multi whose reply carries a failure is `:fail`);
//! * a definite error (NoNode, NodeExists, BadVersion, ...) is `:fail`: a
//!   failed ZooKeeper write is sequenced but changes nothing, which is what
//!   Jepsen's `:fail` ("did not happen") means;
//! * ConnectionLoss, SessionExpired, OperationTimeout and RequestTimeout
//!   leave a write's effect unknown: `:info`; a read changes nothing, so
//!   for a read they are `:fail`; an op that never left the client (no
//!   xid: refused locally) is `:fail` whatever its error;
//! * an op still open when the history ends gets an `:info` completion at
//!   the history's last time.
//!
//! Processes: Jepsen's process runs one op at a time and is never reused
//! after an `:info`. Each handle's ops get the handle's lowest free lane,
//! and each (handle, lane) its own process number, in order of first use;
//! a lane whose op ended `:info` is retired.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{Event, HistOp, History, Outcome};
use crate::proto::{CreateMode, MultiOp, MultiResult, Op, Reply, Stat, ZkError};

/// An EDN value, as much of EDN as a history needs.
#[derive(Clone, Debug)]
enum Edn {
    Nil,
    Bool(bool),
    Int(i64),
    Str(String),
    Kw(String),
    Vec(Vec<Edn>),
    Map(Vec<(&'static str, Edn)>),
}

impl Edn {
    fn write(&self, out: &mut String) {
        match self {
            Edn::Nil => out.push_str("nil"),
            Edn::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Edn::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Edn::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        '\t' => out.push_str("\\t"),
                        c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                            let _ = write!(out, "\\u{:04x}", c as u32);
                        }
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            Edn::Kw(k) => {
                out.push(':');
                out.push_str(k);
            }
            Edn::Vec(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    v.write(out);
                }
                out.push(']');
            }
            Edn::Map(kvs) => {
                out.push('{');
                for (i, (k, v)) in kvs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push(':');
                    out.push_str(k);
                    out.push(' ');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

fn kw(s: &str) -> Edn {
    Edn::Kw(s.replace('_', "-"))
}

fn data(bytes: &[u8]) -> Edn {
    match std::str::from_utf8(bytes) {
        Ok(s) => Edn::Str(s.to_owned()),
        Err(_) => Edn::Map(vec![(
            "hex",
            Edn::Str(bytes.iter().map(|b| format!("{b:02x}")).collect()),
        )]),
    }
}

fn mode(m: CreateMode) -> Edn {
    kw(match m {
        CreateMode::Persistent => "persistent",
        CreateMode::Ephemeral => "ephemeral",
        CreateMode::PersistentSequential => "persistent-sequential",
        CreateMode::EphemeralSequential => "ephemeral-sequential",
        CreateMode::Container => "container",
        CreateMode::PersistentWithTtl { .. } => "persistent-with-ttl",
        CreateMode::PersistentSequentialWithTtl { .. } => "persistent-sequential-with-ttl",
    })
}

fn error(e: ZkError) -> Edn {
    // NodeExists -> :node-exists
    let mut s = String::new();
    for (i, c) in format!("{e:?}").chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                s.push('-');
            }
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    Edn::Kw(s)
}

fn stat(s: &Stat) -> Edn {
    Edn::Map(vec![
        ("czxid", Edn::Int(s.czxid)),
        ("mzxid", Edn::Int(s.mzxid)),
        ("ctime", Edn::Int(s.ctime)),
        ("mtime", Edn::Int(s.mtime)),
        ("version", Edn::Int(s.version.into())),
        ("cversion", Edn::Int(s.cversion.into())),
        ("aversion", Edn::Int(s.aversion.into())),
        ("ephemeral-owner", Edn::Int(s.ephemeral_owner)),
        ("data-length", Edn::Int(s.data_length.into())),
        ("num-children", Edn::Int(s.num_children.into())),
        ("pzxid", Edn::Int(s.pzxid)),
    ])
}

fn multi_op(op: &MultiOp) -> Edn {
    let mut m = vec![
        ("f", kw(multi_op_name(op))),
        ("path", Edn::Str(op.path().into())),
    ];
    match op {
        MultiOp::Create {
            data: d, mode: md, ..
        } => {
            m.push(("data", data(d)));
            m.push(("mode", mode(*md)));
            if let Some(ttl) = md.ttl_ms() {
                m.push(("ttl-ms", Edn::Int(ttl)));
            }
        }
        MultiOp::Delete { version, .. } | MultiOp::Check { version, .. } => {
            m.push(("version", Edn::Int((*version).into())))
        }
        MultiOp::SetData {
            data: d, version, ..
        } => {
            m.push(("data", data(d)));
            m.push(("version", Edn::Int((*version).into())));
        }
    }
    Edn::Map(m)
}

fn multi_op_name(op: &MultiOp) -> &'static str {
    match op {
        MultiOp::Create { .. } => "create",
        MultiOp::Delete { .. } => "delete",
        MultiOp::SetData { .. } => "set-data",
        MultiOp::Check { .. } => "check",
    }
}

/// An invocation's `:value`: its arguments.
fn args(op: &HistOp) -> Edn {
    let HistOp::Zk(op) = op else {
        return Edn::Nil;
    };
    match op {
        Op::Create {
            path,
            data: d,
            mode: md,
        } => {
            let mut m = vec![
                ("path", Edn::Str(path.clone())),
                ("data", data(d)),
                ("mode", mode(*md)),
            ];
            if let Some(ttl) = md.ttl_ms() {
                m.push(("ttl-ms", Edn::Int(ttl)));
            }
            Edn::Map(m)
        }
        Op::Delete { path, version } => Edn::Map(vec![
            ("path", Edn::Str(path.clone())),
            ("version", Edn::Int((*version).into())),
        ]),
        Op::Exists { path, watch }
        | Op::GetData { path, watch }
        | Op::GetChildren { path, watch } => Edn::Map(vec![
            ("path", Edn::Str(path.clone())),
            ("watch", Edn::Bool(*watch)),
        ]),
        Op::SetData {
            path,
            data: d,
            version,
        } => Edn::Map(vec![
            ("path", Edn::Str(path.clone())),
            ("data", data(d)),
            ("version", Edn::Int((*version).into())),
        ]),
        Op::Sync { path } => Edn::Map(vec![("path", Edn::Str(path.clone()))]),
        Op::Multi(ops) => Edn::Vec(ops.iter().map(multi_op).collect()),
    }
}

/// A reply's `:value`.
fn reply(r: &Reply) -> Edn {
    match r {
        Reply::Create { path, stat: s } => {
            Edn::Map(vec![("path", Edn::Str(path.clone())), ("stat", stat(s))])
        }
        Reply::Delete | Reply::Sync => Edn::Nil,
        Reply::Exists(s) => s
            .as_ref()
            .map_or(Edn::Nil, |s| Edn::Map(vec![("stat", stat(s))])),
        Reply::GetData { data: d, stat: s } => Edn::Map(vec![("data", data(d)), ("stat", stat(s))]),
        Reply::SetData(s) => Edn::Map(vec![("stat", stat(s))]),
        Reply::GetChildren { children, stat: s } => Edn::Map(vec![
            (
                "children",
                Edn::Vec(children.iter().map(|c| Edn::Str(c.clone())).collect()),
            ),
            ("stat", stat(s)),
        ]),
        Reply::Multi(results) => Edn::Vec(
            results
                .iter()
                .map(|r| match r {
                    MultiResult::Create { path, stat: s } => {
                        let mut m = vec![("path", Edn::Str(path.clone()))];
                        if let Some(s) = s {
                            m.push(("stat", stat(s)));
                        }
                        Edn::Map(m)
                    }
                    MultiResult::Delete | MultiResult::Check => kw("ok"),
                    MultiResult::SetData { stat: s } => Edn::Map(vec![("stat", stat(s))]),
                    MultiResult::RolledBack => kw("rolled-back"),
                    MultiResult::Failed(e) => Edn::Map(vec![("error", error(*e))]),
                })
                .collect(),
        ),
    }
}

/// The completion's `:type` (see the module docs).
pub fn completion_type(op: &HistOp, sent: bool, outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Ok(Some(r)) if r.multi_error().is_some() => "fail",
        Outcome::Ok(_) => "ok",
        Outcome::Err(_) if !sent => "fail",
        Outcome::Err(_) if outcome.is_indeterminate() && op.is_write() => "info",
        Outcome::Err(_) => "fail",
    }
}

/// The history's operations as a Jepsen EDN history: a vector of op maps,
/// one per line.
pub fn to_edn(h: &History) -> String {
    struct Open {
        process: u64,
        lane: (u32, usize),
        f: Edn,
        args: Edn,
        op: HistOp,
        sent: bool,
    }
    // (handle, lane) -> process; busy lanes per handle; retired lanes.
    let mut processes: BTreeMap<(u32, usize), u64> = BTreeMap::new();
    let mut next_process = 0;
    let mut busy: BTreeMap<u32, Vec<bool>> = BTreeMap::new();
    let mut open: BTreeMap<u64, Open> = BTreeMap::new();
    let mut ops: Vec<Edn> = Vec::new();
    let push = |ops: &mut Vec<Edn>, ty: &str, o: &Open, value: Edn, t: u64, e: Option<Edn>| {
        let mut m = vec![
            ("type", kw(ty)),
            ("process", Edn::Int(o.process as i64)),
            ("f", o.f.clone()),
            ("value", value),
            ("time", Edn::Int(t as i64)),
        ];
        if let Some(e) = e {
            m.push(("error", e));
        }
        m.push(("index", Edn::Int(ops.len() as i64)));
        ops.push(Edn::Map(m));
    };
    let mut last_ns = 0;
    for r in &h.records {
        last_ns = r.at_ns;
        match &r.event {
            Event::Invoke(i) => {
                let lanes = busy.entry(i.actor.handle).or_default();
                let lane = match lanes.iter().position(|b| !b) {
                    Some(l) => l,
                    None => {
                        lanes.push(false);
                        lanes.len() - 1
                    }
                };
                lanes[lane] = true;
                let process = *processes.entry((i.actor.handle, lane)).or_insert_with(|| {
                    next_process += 1;
                    next_process - 1
                });
                let o = Open {
                    process,
                    lane: (i.actor.handle, lane),
                    f: kw(i.op.name()),
                    args: args(&i.op),
                    op: i.op.clone(),
                    sent: i.xid.is_some() || i.op == HistOp::CloseSession,
                };
                push(&mut ops, "invoke", &o, o.args.clone(), r.at_ns, None);
                open.insert(i.id.0, o);
            }
            Event::Complete(c) => {
                let Some(o) = open.remove(&c.id.0) else {
                    continue; // a parsed history has none such
                };
                let ty = completion_type(&o.op, o.sent, &c.outcome);
                let (value, e) = match &c.outcome {
                    Outcome::Ok(Some(r)) => (reply(r), r.multi_error().map(error)),
                    Outcome::Ok(None) => (Edn::Nil, None),
                    Outcome::Err(err) => (o.args.clone(), Some(error(*err))),
                };
                push(&mut ops, ty, &o, value, r.at_ns, e);
                let (handle, lane) = o.lane;
                if ty == "info" {
                    // Retired: the lane's next op gets a fresh process.
                    processes.remove(&(handle, lane));
                }
                if let Some(l) = busy.get_mut(&handle).and_then(|l| l.get_mut(lane)) {
                    *l = false;
                }
            }
            _ => {}
        }
    }
    for (_, o) in std::mem::take(&mut open) {
        push(&mut ops, "info", &o, o.args.clone(), last_ns, None);
    }
    let mut out = String::from("[");
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            out.push_str("\n ");
        }
        op.write(&mut out);
    }
    out.push_str("]\n");
    out
}
