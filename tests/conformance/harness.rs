//! Runs a step sequence on any `Zk` implementation and records what a
//! client observes; compares a real server's record with the model's.
//!
//! Comparison rules: zxids must correspond one to one (same order, same
//! equalities) and, on a server of the test's own, with the same gaps (every
//! txn, failed ones included, uses exactly one); never equal values, since
//! nothing observed on the real server is fed to the model. Times only as
//! ctime = mtime at create and non-decreasing in zxid order; child lists as
//! sets; the watch events of one step as a multiset per session (the real
//! client cannot show their order); ephemeral owners through the session
//! correspondence; and, after the last step, the whole subtree.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use zoosim::client::{Zk, ZkExt};
use zoosim::proto::{
    ClientEvent, CreateMode, MultiResult, Op, Reply, SessionEvent, SessionId, Stat, WatchEvent,
    ZkError, Zxid,
};

use crate::gen::{rooted, Step};

/// What one step looked like to the clients.
#[derive(Clone, Debug, PartialEq)]
pub struct StepTrace {
    /// The op's reply; for a close, the close's result as `Reply::Sync`.
    pub reply: Result<Reply, ZkError>,
    /// Watch events each live session received, sorted (a multiset).
    pub events: Vec<Vec<WatchEvent>>,
}

#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub session_ids: Vec<SessionId>,
    /// The setup create of the root, then one entry per step.
    pub steps: Vec<StepTrace>,
    /// Session events other than the initial Connected (step, session,
    /// event): none are expected without faults.
    pub stray_events: Vec<(usize, usize, ClientEvent)>,
    /// The subtree under the root after the last step, in path order.
    pub final_state: Vec<NodeState>,
}

/// One node as a fresh session reads it at the end.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeState {
    pub path: String,
    pub data: Vec<u8>,
    pub stat: Stat,
    pub children: Vec<String>,
}

/// Reads the whole subtree under `root` ("" = everything) with `z`.
pub async fn snapshot<Z: Zk + Sync>(z: &Z, root: &str) -> Result<Vec<NodeState>, ZkError> {
    let mut out = Vec::new();
    let mut todo = vec![if root.is_empty() {
        "/".to_owned()
    } else {
        root.to_owned()
    }];
    while let Some(path) = todo.pop() {
        let (data, stat) = match z.get_data(&path, false).await {
            Ok(v) => v,
            Err(ZkError::NoNode) => continue,
            Err(e) => return Err(e),
        };
        let mut children = match z.get_children(&path, false).await {
            Ok((c, _)) => c,
            Err(ZkError::NoNode) => continue,
            Err(e) => return Err(e),
        };
        children.sort();
        todo.extend(children.iter().map(|c| zoosim::path::join(&path, c)));
        out.push(NodeState {
            path,
            data,
            stat,
            children,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Runs `steps` with `sessions[i]` as session i, under `root` (created
/// first by session 0; "" runs at the true root and creates nothing).
/// `sync`: sync the acting session before each op and each session before
/// its flush; on an ensemble, sessions on different servers may read stale
/// state, which a standalone server never shows.
pub async fn run<Z: Zk + Sync>(sessions: &[Z], root: &str, steps: &[Step], sync: bool) -> Trace {
    let mut trace = Trace {
        session_ids: sessions.iter().map(Zk::session_id).collect(),
        ..Trace::default()
    };
    let mut closed = vec![false; sessions.len()];
    // The initial Connected.
    for (i, z) in sessions.iter().enumerate() {
        while let Some(e) = z.try_next_event() {
            if e != ClientEvent::Session(SessionEvent::Connected) {
                trace.stray_events.push((0, i, e));
            }
        }
    }
    let setup = (!root.is_empty()).then(|| Step::Op {
        session: 0,
        op: Op::Create {
            path: String::new(),
            data: Vec::new(),
            mode: CreateMode::Persistent,
        },
    });
    let flush_path = if root.is_empty() { "/" } else { root };
    for (n, step) in setup.iter().chain(steps).enumerate() {
        let reply = match step {
            Step::Op { session, op } => {
                let z = &sessions[*session];
                if sync && !closed[*session] {
                    let _ = z.sync(flush_path).await;
                }
                z.call(rooted(root, op)).await
            }
            Step::Close { session } => {
                let r = sessions[*session].close().await.map(|()| Reply::Sync);
                closed[*session] = true;
                r
            }
        };
        let mut events = vec![Vec::new(); sessions.len()];
        for (i, z) in sessions.iter().enumerate() {
            if closed[i] {
                // Not compared: what a closing handle still delivers differs
                // between clients and is no server behaviour.
                while z.try_next_event().is_some() {}
                continue;
            }
            // One read round trip: every event that precedes its reply on
            // this connection has then arrived.
            if sync {
                let _ = z.sync(flush_path).await;
            }
            let _ = z
                .call(Op::Exists {
                    path: flush_path.to_owned(),
                    watch: false,
                })
                .await;
            while let Some(e) = z.try_next_event() {
                match e {
                    ClientEvent::Watch(w) => events[i].push(w),
                    e @ ClientEvent::Session(_) => trace.stray_events.push((n, i, e)),
                }
            }
            events[i].sort();
        }
        trace.steps.push(StepTrace { reply, events });
    }
    trace
}

/// The real ↔ model correspondences built up while comparing.
#[derive(Default)]
pub struct Correspondence {
    /// Also require equal gaps: real − real₀ = model − model₀, from the first
    /// pair seen (only on a server no other test writes to).
    pub strict: bool,
    origin: Option<(Zxid, Zxid)>,
    zxid_r2m: BTreeMap<Zxid, Zxid>,
    zxid_m2r: BTreeMap<Zxid, Zxid>,
    /// (real zxid, real time) pairs: times must not go back as zxids grow.
    times: BTreeSet<(Zxid, i64)>,
    pub owner_r2m: BTreeMap<i64, i64>,
}

impl Correspondence {
    pub fn zxid(&mut self, what: &str, real: Zxid, model: Zxid) -> Result<(), String> {
        let m = *self.zxid_r2m.entry(real).or_insert(model);
        let r = *self.zxid_m2r.entry(model).or_insert(real);
        if m != model || r != real {
            return Err(format!(
                "{what}: real zxid {real:#x} ↔ model {model:#x} breaks the correspondence \
                 (real {real:#x} was model {m:#x}; model {model:#x} was real {r:#x})"
            ));
        }
        let (r0, m0) = *self.origin.get_or_insert((real, model));
        if self.strict && real - r0 != model - m0 {
            return Err(format!(
                "{what}: zxid accounting differs: real {real:#x} is {} txns after \
                 {r0:#x}, model {model:#x} is {} after {m0:#x}",
                real - r0,
                model - m0
            ));
        }
        Ok(())
    }

    pub fn stat(&mut self, what: &str, real: &Stat, model: &Stat) -> Result<(), String> {
        self.zxid(&format!("{what}.czxid"), real.czxid, model.czxid)?;
        self.zxid(&format!("{what}.mzxid"), real.mzxid, model.mzxid)?;
        self.zxid(&format!("{what}.pzxid"), real.pzxid, model.pzxid)?;
        self.times.insert((real.czxid, real.ctime));
        self.times.insert((real.mzxid, real.mtime));
        if model.ctime == model.mtime && real.ctime != real.mtime {
            return Err(format!("{what}: never modified, yet real ctime != mtime"));
        }
        if real.mtime < real.ctime {
            return Err(format!("{what}: real mtime before ctime"));
        }
        let owner = self
            .owner_r2m
            .get(&real.ephemeral_owner)
            .copied()
            .unwrap_or(if real.ephemeral_owner == 0 { 0 } else { -1 });
        let same = |a: &Stat, b: &Stat| {
            (
                a.version,
                a.cversion,
                a.aversion,
                a.data_length,
                a.num_children,
            ) == (
                b.version,
                b.cversion,
                b.aversion,
                b.data_length,
                b.num_children,
            )
        };
        if !same(real, model) || owner != model.ephemeral_owner {
            return Err(format!(
                "{what}: Stat differs\n  real  {real:?}\n  model {model:?}"
            ));
        }
        Ok(())
    }

    pub fn reply(
        &mut self,
        what: &str,
        real: &Result<Reply, ZkError>,
        model: &Result<Reply, ZkError>,
    ) -> Result<(), String> {
        let differ = || {
            Err(format!(
                "{what}: replies differ\n  real  {real:?}\n  model {model:?}"
            ))
        };
        match (real, model) {
            (Err(r), Err(m)) if r == m => Ok(()),
            (Ok(r), Ok(m)) => {
                match (r, m) {
                    (
                        Reply::Create { path: rp, stat: rs },
                        Reply::Create { path: mp, stat: ms },
                    ) if rp == mp => self.stat(what, rs, ms),
                    (Reply::Delete, Reply::Delete) | (Reply::Sync, Reply::Sync) => Ok(()),
                    (Reply::Exists(None), Reply::Exists(None)) => Ok(()),
                    (Reply::Exists(Some(rs)), Reply::Exists(Some(ms)))
                    | (Reply::SetData(rs), Reply::SetData(ms)) => self.stat(what, rs, ms),
                    (
                        Reply::GetData { data: rd, stat: rs },
                        Reply::GetData { data: md, stat: ms },
                    ) if rd == md => self.stat(what, rs, ms),
                    (
                        Reply::GetChildren {
                            children: rc,
                            stat: rs,
                        },
                        Reply::GetChildren {
                            children: mc,
                            stat: ms,
                        },
                    ) => {
                        let rset: BTreeSet<_> = rc.iter().collect();
                        let mset: BTreeSet<_> = mc.iter().collect();
                        if rset != mset || rc.len() != mc.len() {
                            return differ();
                        }
                        self.stat(what, rs, ms)
                    }
                    (Reply::Multi(rr), Reply::Multi(mr)) if rr.len() == mr.len() => {
                        for (i, (r, m)) in rr.iter().zip(mr).enumerate() {
                            let w = format!("{what}[{i}]");
                            match (r, m) {
                                (
                                    MultiResult::Create {
                                        path: rp,
                                        stat: Some(rs),
                                    },
                                    MultiResult::Create {
                                        path: mp,
                                        stat: Some(ms),
                                    },
                                ) if rp == mp => self.stat(&w, rs, ms)?,
                                (
                                    MultiResult::SetData { stat: rs },
                                    MultiResult::SetData { stat: ms },
                                ) => self.stat(&w, rs, ms)?,
                                (a, b) if a == b => {}
                                // Name the op: a long list is hard to
                                // read for the one result that differs.
                                (a, b) => {
                                    let lists = format!("real {rr:?}, model {mr:?}");
                                    return Err(format!(
                                        "{w}: multi results differ\n  real  {a:?}\n  \
                                         model {b:?}\n  (whole lists: {lists})"
                                    ));
                                }
                            }
                        }
                        Ok(())
                    }
                    _ => differ(),
                }
            }
            _ => differ(),
        }
    }

    /// zxid order must be the same on both sides; times must not decrease
    /// as real zxids grow.
    pub fn check_orders(&self) -> Result<(), String> {
        let mut last: Option<(Zxid, Zxid)> = None;
        for (&r, &m) in &self.zxid_r2m {
            if let Some((lr, lm)) = last {
                if m <= lm {
                    return Err(format!(
                        "zxid order differs: real {lr:#x} < {r:#x} but model {lm:#x} >= {m:#x}"
                    ));
                }
            }
            last = Some((r, m));
        }
        let mut last_time: Option<(Zxid, i64)> = None;
        for &(z, t) in &self.times {
            if let Some((lz, lt)) = last_time {
                if z > lz && t < lt {
                    return Err(format!(
                        "real time goes back: zxid {lz:#x} at {lt} ms, later {z:#x} at {t} ms"
                    ));
                }
            }
            last_time = Some((z, t));
        }
        Ok(())
    }
}

/// Compares a real server's trace with the model's; the error names the
/// first difference, with the step and op. `strict`: the real server is the
/// test's own, so zxid gaps must match too.
pub fn compare(
    real: &Trace,
    model: &Trace,
    root: &str,
    steps: &[Step],
    strict: bool,
) -> Result<(), String> {
    if let Some(e) = real.stray_events.first() {
        return Err(format!(
            "real: unexpected event (step, session, event) {e:?}"
        ));
    }
    if let Some(e) = model.stray_events.first() {
        return Err(format!("model: unexpected event {e:?}"));
    }
    let mut c = Correspondence {
        strict,
        ..Correspondence::default()
    };
    for (r, m) in real.session_ids.iter().zip(&model.session_ids) {
        c.owner_r2m.insert(r.0, m.0);
    }
    assert_eq!(real.steps.len(), model.steps.len(), "both ran every step");
    let offset = real.steps.len() - steps.len();
    for (n, (r, m)) in real.steps.iter().zip(&model.steps).enumerate() {
        let what = match n.checked_sub(offset) {
            None => format!("setup: create {root}"),
            Some(i) => match &steps[i] {
                Step::Op { session, op } => {
                    format!("step {i} (session {session}): {:?}", rooted(root, op))
                }
                Step::Close { session } => format!("step {i}: close session {session}"),
            },
        };
        c.reply(&what, &r.reply, &m.reply)?;
        events_agree(&what, &r.events, &m.events)?;
    }
    compare_final(&mut c, &real.final_state, &model.final_state)?;
    c.check_orders()
}

/// Compares the subtrees read after the last step: the same paths, data
/// and children, and Stats under the correspondence.
pub fn compare_final(
    c: &mut Correspondence,
    real: &[NodeState],
    model: &[NodeState],
) -> Result<(), String> {
    let paths = |t: &[NodeState]| t.iter().map(|n| n.path.clone()).collect::<Vec<_>>();
    if paths(real) != paths(model) {
        return Err(format!(
            "after the last step, the trees differ:\n  real  {:?}\n  model {:?}",
            paths(real),
            paths(model)
        ));
    }
    for (r, m) in real.iter().zip(model) {
        if (&r.data, &r.children) != (&m.data, &m.children) {
            return Err(format!(
                "after the last step, {} differs:\n  real  {r:?}\n  model {m:?}",
                r.path
            ));
        }
        c.stat(
            &format!("after the last step, {}", r.path),
            &r.stat,
            &m.stat,
        )?;
    }
    Ok(())
}

/// Each session's watch events of one step (or round) on both sides; the
/// error names `what` and every session whose events differ.
pub fn events_agree(
    what: &str,
    real: &[Vec<WatchEvent>],
    model: &[Vec<WatchEvent>],
) -> Result<(), String> {
    if real == model {
        return Ok(());
    }
    let mut msg = format!("{what}: watch events differ");
    for (i, (re, me)) in real.iter().zip(model).enumerate() {
        if re != me {
            let _ = write!(
                msg,
                "\n  session {i}: real {re:?}\n  session {i}: model {me:?}"
            );
        }
    }
    Err(msg)
}
