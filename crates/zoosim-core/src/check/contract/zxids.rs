//! The zxids a client sees (docs/CONTRACT.md, `client-zxids`): facts that
//! hold in every order of a correct ensemble's writes, so that they are
//! checked on the history alone, in one pass, with no search.
//!
//! * Within a session, the zxids of the reply headers never go back: the
//!   server a session reconnects to has seen at least the session's last
//!   zxid (ZooKeeper refuses the reconnect otherwise), and a reply carries
//!   the zxid of the state the server answered from.
//! * A node's incarnation is its czxid; for one incarnation the version
//!   determines the mzxid (the zxid of the write that set that version):
//!   every Stat of that version carries the same one, the create's zxid at
//!   version 0, a larger one for a larger version. Likewise the child
//!   version (cversion) determines the pzxid, the create's zxid at
//!   cversion 0, never smaller for a larger cversion.
//! * A Stat never names a zxid beyond the reply's own (the state the
//!   server answered from contains every write it names), and a write's
//!   own Stat carries its zxid: a setData's mzxid, a create's czxid.
//!
//! None of it depends on which order the search finds; a history whose
//! zxids break it has no order at all in which those zxids are the
//! writes'.

use std::collections::BTreeMap;

use super::{guarantees, Broken, Done, Seen, SessionLog};
use crate::proto::{MultiOp, MultiResult, Op, Reply, Stat, Zxid};

/// One Stat a client saw: of which node, in which reply.
struct Seen1<'h> {
    path: &'h str,
    stat: &'h Stat,
    /// The history's op whose reply carried it.
    id: usize,
}

/// The first contradiction among the zxids the clients saw, if any.
pub(super) fn zxids(logs: &[SessionLog]) -> Option<Broken> {
    let mut stats: Vec<Seen1> = Vec::new();
    for log in logs {
        let mut last: Option<(Zxid, usize)> = None;
        for seen in &log.seen {
            let Seen::Request {
                id,
                op,
                done: Done::Answered {
                    result, zxid: hdr, ..
                },
                ..
            } = seen
            else {
                continue;
            };
            if let Some(z) = *hdr {
                if let Some((before, prev)) = last {
                    if z < before {
                        return Some(broken(
                            format!(
                                "session {}: op {id}'s reply carries zxid {z:#x}, after op \
                                 {prev}'s carried {before:#x}: a session's zxids went back",
                                log.id
                            ),
                            vec![prev, *id],
                        ));
                    }
                }
                last = Some((z, *id));
            }
            let (Some(op), Ok(reply)) = (op, result) else {
                continue;
            };
            let mut own = Vec::new();
            collect(op, reply, &mut own);
            for (path, stat, written) in own {
                // A Stat with no zxid at all carries none: no node but the
                // root has czxid 0 (the initial state's), so it is a
                // history written without them (hand-written ones).
                if path != "/" && (stat.czxid, stat.mzxid, stat.pzxid) == (0, 0, 0) {
                    continue;
                }
                if let Some(z) = *hdr {
                    if let Some(why) = against_reply(stat, z, written) {
                        return Some(broken(
                            format!("op {id} on {path}: {why} (the reply's zxid is {z:#x})"),
                            vec![*id],
                        ));
                    }
                }
                if let Some(why) = alone(path, stat) {
                    return Some(broken(format!("op {id} on {path}: {why}"), vec![*id]));
                }
                stats.push(Seen1 {
                    path,
                    stat,
                    id: *id,
                });
            }
        }
    }
    across(&stats)
}

/// What a write's own Stat must carry, if anything: `Written::Data` its
/// mzxid, `Written::Node` its czxid (and so its mzxid and pzxid).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Written {
    No,
    Data,
    Node,
}

/// The Stats a reply carries, with their nodes' paths.
fn collect<'h>(op: &'h Op, reply: &'h Reply, out: &mut Vec<(&'h str, &'h Stat, Written)>) {
    match (op, reply) {
        (Op::Exists { path, .. }, Reply::Exists(Some(stat)))
        | (Op::GetData { path, .. }, Reply::GetData { stat, .. })
        | (Op::GetChildren { path, .. }, Reply::GetChildren { stat, .. }) => {
            out.push((path, stat, Written::No));
        }
        (Op::SetData { path, .. }, Reply::SetData(stat)) => out.push((path, stat, Written::Data)),
        (Op::Create { .. }, Reply::Create { path, stat }) => out.push((path, stat, Written::Node)),
        (Op::Multi(ops), Reply::Multi(results)) if reply.multi_error().is_none() => {
            for (op, result) in ops.iter().zip(results) {
                match (op, result) {
                    (MultiOp::SetData { path, .. }, MultiResult::SetData { stat }) => {
                        out.push((path, stat, Written::Data));
                    }
                    (
                        MultiOp::Create { .. },
                        MultiResult::Create {
                            path,
                            stat: Some(stat),
                        },
                    ) => out.push((path, stat, Written::Node)),
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// A Stat against the zxid of the reply that carried it.
fn against_reply(stat: &Stat, reply: Zxid, written: Written) -> Option<String> {
    let beyond = [
        ("czxid", stat.czxid),
        ("mzxid", stat.mzxid),
        ("pzxid", stat.pzxid),
    ]
    .into_iter()
    .find(|&(_, z)| z > reply);
    if let Some((name, z)) = beyond {
        return Some(format!(
            "its Stat's {name} {z:#x} is beyond the state the reply came from"
        ));
    }
    match written {
        Written::Data if stat.mzxid != reply => Some(format!(
            "the write's own Stat has mzxid {:#x}, not the write's zxid",
            stat.mzxid
        )),
        Written::Node if stat.czxid != reply => Some(format!(
            "the create's own Stat has czxid {:#x}, not the create's zxid",
            stat.czxid
        )),
        _ => None,
    }
}

/// A Stat on its own: a version's zxid is never older than the create's,
/// and is the create's at version 0.
fn alone(path: &str, stat: &Stat) -> Option<String> {
    if stat.mzxid < stat.czxid || (path != "/" && stat.pzxid < stat.czxid) {
        return Some(format!(
            "its Stat's mzxid {:#x} or pzxid {:#x} is older than its czxid {:#x}",
            stat.mzxid, stat.pzxid, stat.czxid
        ));
    }
    if stat.version == 0 && stat.mzxid != stat.czxid {
        return Some(format!(
            "its Stat at version 0 has mzxid {:#x}, not the create's zxid {:#x}",
            stat.mzxid, stat.czxid
        ));
    }
    if path != "/" && stat.cversion == 0 && stat.pzxid != stat.czxid {
        return Some(format!(
            "its Stat at cversion 0 has pzxid {:#x}, not the create's zxid {:#x}",
            stat.pzxid, stat.czxid
        ));
    }
    None
}

/// Stats of one incarnation of a node against each other: one mzxid per
/// version, growing with it; one pzxid per cversion, never shrinking.
fn across(stats: &[Seen1]) -> Option<Broken> {
    // (path, czxid) -> version -> (mzxid, op); and cversion -> (pzxid, op).
    type ByVersion = BTreeMap<i32, (Zxid, usize)>;
    let mut data: BTreeMap<(&str, Zxid), ByVersion> = BTreeMap::new();
    let mut child: BTreeMap<(&str, Zxid), ByVersion> = BTreeMap::new();
    for s in stats {
        let key = (s.path, s.stat.czxid);
        for (map, version, z, what) in [
            (&mut data, s.stat.version, s.stat.mzxid, "version"),
            (&mut child, s.stat.cversion, s.stat.pzxid, "cversion"),
        ] {
            let entry = map.entry(key).or_default();
            match entry.get(&version) {
                Some(&(other, id)) if other != z => {
                    let zname = if what == "version" { "mzxid" } else { "pzxid" };
                    return Some(broken(
                        format!(
                            "{} (czxid {:#x}) at {what} {version}: op {} saw {zname} {z:#x}, \
                             op {id} saw {other:#x}; one {what} is set by one write",
                            s.path, s.stat.czxid, s.id
                        ),
                        vec![id, s.id],
                    ));
                }
                Some(_) => {}
                None => {
                    entry.insert(version, (z, s.id));
                }
            }
        }
    }
    // Never smaller, not strictly larger: two setData of one node in one
    // multi share the multi's zxid.
    for (map, what, zname) in [(&data, "version", "mzxid"), (&child, "cversion", "pzxid")] {
        for ((path, czxid), versions) in map {
            let mut prev: Option<(i32, Zxid, usize)> = None;
            for (&v, &(z, id)) in versions {
                if let Some((pv, pz, pid)) = prev {
                    if z < pz {
                        return Some(broken(
                            format!(
                                "{path} (czxid {czxid:#x}): {what} {v} (op {id}) has {zname} \
                                 {z:#x}, {what} {pv} (op {pid}) had {pz:#x}: a later {what} \
                                 was set by an earlier write"
                            ),
                            vec![pid, id],
                        ));
                    }
                }
                prev = Some((v, z, id));
            }
        }
    }
    None
}

fn broken(detail: String, ops: Vec<usize>) -> Broken {
    Broken {
        guarantee: guarantees::CLIENT_ZXIDS,
        detail,
        ops,
        prefix: Vec::new(),
        prefix_states: Vec::new(),
        stuck_state: None,
    }
}
