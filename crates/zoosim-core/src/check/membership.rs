//! The group membership oracle. Each property is a constant below, named
//! in every violation of it; [`PROPERTIES`] lists them.
//!
//! * **No invention** (`no-invented-member`): every name in any view is a
//!   member that asked to join at some point before.
//! * **Membership is the session's** (`final-group`): the final list holds
//!   exactly the clients whose live session last joined and did not leave.
//! * **No recipe failure** (`no-recipe-failure`).
//! * **Convergence** (`convergence`): after the quiet phase every live
//!   follower's last view is the group's final member list.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::{Entry, Property, Violation};

/// What one group-membership client saw or did, as the oracle reads it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum MembershipEvent {
    /// The client started a new session.
    SessionStarted,
    /// The client asked to join the group.
    JoinCalled,
    /// The client's join completed: its member node exists.
    Joined,
    /// The client asked to leave the group.
    LeaveCalled,
    /// The client's leave completed: its member node is gone.
    Left,
    /// The client read the group's member list.
    View {
        /// The members' names, as read.
        members: Vec<String>,
    },
    /// The client's session ended (its member node with it); it goes on with a new one.
    Lost,
    /// The client process crashed (the nemesis).
    Crashed,
    /// The recipe met an answer it has no way forward from, or refused a command.
    Failed {
        /// The recipe's error, as text.
        error: String,
    },
}

/// What [`check_membership`] found: counts of what happened, and the violations.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct MembershipReport {
    /// Joins completed (`Joined` events).
    pub joins: u64,
    /// Leaves completed (`Left` events).
    pub leaves: u64,
    /// Member lists read (`View` events).
    pub views: u64,
    /// Sessions lost (`Lost` events).
    pub losses: u64,
    /// Every property broken, in the order found.
    pub violations: Vec<Violation>,
}

impl MembershipReport {
    /// Whether no property was broken.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for MembershipReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "joins {}, leaves {}, views {}, sessions lost {}",
            self.joins, self.leaves, self.views, self.losses
        )?;
        for v in &self.violations {
            writeln!(f, "VIOLATION: {v}")?;
        }
        Ok(())
    }
}

/// Every name in any view is a member that had asked to join.
pub const NO_INVENTED_MEMBER: Property = Property::new(
    "no-invented-member",
    "every name in any view is a member that had asked to join",
);
/// The group ends as exactly the clients whose live session last joined and did not leave.
pub const FINAL_GROUP: Property = Property::new(
    "final-group",
    "the group ends as exactly the clients whose live session last joined and did not leave",
);
pub use super::CONVERGENCE;
pub use super::NO_RECIPE_FAILURE;

/// What this oracle checks, safety first.
pub const PROPERTIES: &[Property] = &[
    NO_INVENTED_MEMBER,
    FINAL_GROUP,
    NO_RECIPE_FAILURE,
    CONVERGENCE,
];

/// Per client, at the end of the log.
#[derive(Default)]
struct Last {
    /// Whether its current session is in the group (joined, not left).
    joined: BTreeMap<usize, bool>,
    /// The last view its current session saw.
    view: BTreeMap<usize, Vec<String>>,
}

/// `name(c)`: client c's member name; `final_members`: the group at the
/// end; `live`: clients whose session was alive at the end.
pub fn check_membership(
    log: &[Entry<MembershipEvent>],
    name: impl Fn(usize) -> String,
    final_members: &[String],
    live: &[usize],
) -> MembershipReport {
    let mut r = MembershipReport::default();
    let last = last(log, &mut r);
    let mut group = final_members.to_vec();
    group.sort();
    // Grouped by property, in the order the one-pass oracle first reported
    // each.
    check_no_invented_member(log, &name, &mut r);
    let failures = super::recipe_failures(log, |e| match e {
        MembershipEvent::Failed { error } => Some(error),
        _ => None,
    });
    r.violations.extend(failures);
    check_final_group(&last, &name, &group, live, &mut r);
    check_convergence(&last, &group, live, &mut r);
    r
}

/// The counters, and where each client's current session stands.
fn last(log: &[Entry<MembershipEvent>], r: &mut MembershipReport) -> Last {
    let mut last = Last::default();
    for e in log {
        let c = e.client;
        match &e.event {
            MembershipEvent::SessionStarted => {
                last.view.remove(&c);
                last.joined.insert(c, false);
            }
            MembershipEvent::Joined => {
                r.joins += 1;
                last.joined.insert(c, true);
            }
            MembershipEvent::Left => {
                r.leaves += 1;
                last.joined.insert(c, false);
            }
            MembershipEvent::View { members } => {
                r.views += 1;
                last.view.insert(c, members.clone());
            }
            MembershipEvent::Lost | MembershipEvent::Crashed => {
                r.losses += u64::from(e.event == MembershipEvent::Lost);
                last.joined.insert(c, false);
                last.view.remove(&c);
            }
            MembershipEvent::JoinCalled
            | MembershipEvent::LeaveCalled
            | MembershipEvent::Failed { .. } => {}
        }
    }
    last
}

fn check_no_invented_member(
    log: &[Entry<MembershipEvent>],
    name: impl Fn(usize) -> String,
    r: &mut MembershipReport,
) {
    // The names that had asked to join so far: a view is judged by what
    // came before it.
    let mut called: BTreeSet<String> = BTreeSet::new();
    for e in log {
        match &e.event {
            MembershipEvent::JoinCalled => {
                called.insert(name(e.client));
            }
            MembershipEvent::View { members } => {
                for m in members.iter().filter(|m| !called.contains(*m)) {
                    r.violations.push(
                        Violation::new(
                            NO_INVENTED_MEMBER,
                            format!(
                                "client {} saw member {m} that never joined (at {} ms)",
                                e.client, e.at_ms
                            ),
                        )
                        .at([e.moment()]),
                    );
                }
            }
            _ => {}
        }
    }
}

/// `group`: the final members, sorted.
fn check_final_group(
    last: &Last,
    name: impl Fn(usize) -> String,
    group: &[String],
    live: &[usize],
    r: &mut MembershipReport,
) {
    let mut expected: Vec<String> = live
        .iter()
        .filter(|c| last.joined.get(c).copied().unwrap_or(false))
        .map(|&c| name(c))
        .collect();
    expected.sort();
    if group != expected {
        r.violations.push(Violation::new(
            FINAL_GROUP,
            format!("the group ends as {group:?}, but the live joined clients are {expected:?}"),
        ));
    }
}

/// `group`: the final members, sorted.
fn check_convergence(last: &Last, group: &[String], live: &[usize], r: &mut MembershipReport) {
    for c in live {
        match last.view.get(c) {
            Some(v) if *v == group => {}
            seen => r.violations.push(Violation::new(
                CONVERGENCE,
                format!("client {c} did not converge: last view {seen:?}, group {group:?}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use MembershipEvent::*;

    fn log(entries: Vec<(usize, MembershipEvent)>) -> Vec<Entry<MembershipEvent>> {
        entries
            .into_iter()
            .enumerate()
            .map(|(i, (client, event))| Entry {
                at_ms: i as u64,
                client,
                event,
            })
            .collect()
    }

    fn name(c: usize) -> String {
        format!("m{c}")
    }

    fn view(names: &[&str]) -> MembershipEvent {
        View {
            members: names.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_clean_run_passes_and_each_rule_bites() {
        let base = vec![
            (0, SessionStarted),
            (1, SessionStarted),
            (0, JoinCalled),
            (0, Joined),
            (1, JoinCalled),
            (1, Joined),
            (1, LeaveCalled),
            (1, Left),
            (0, view(&["m0"])),
            (1, view(&["m0"])),
        ];
        let r = check_membership(&log(base.clone()), name, &["m0".into()], &[0, 1]);
        assert!(r.is_ok(), "{r}");
        let mut bad = base.clone();
        bad.push((1, view(&["m0", "m9"])));
        let r = check_membership(&log(bad), name, &["m0".into(), "m1".into()], &[0, 1]);
        assert_eq!(
            named(&r),
            [
                NO_INVENTED_MEMBER.name,
                FINAL_GROUP.name,
                CONVERGENCE.name,
                CONVERGENCE.name
            ],
            "{r}"
        );
        let v: Vec<&str> = r.violations.iter().map(|v| v.detail.as_str()).collect();
        assert!(v[0].contains("m9 that never joined"), "{r}");
        assert!(v[1].contains("the group ends as"), "{r}");
        assert!(v[2].starts_with("client 0 did not converge"), "{r}");
        assert!(v[3].starts_with("client 1 did not converge"), "{r}");
    }

    /// The properties the report names, in its order.
    fn named(r: &MembershipReport) -> Vec<&'static str> {
        r.violations.iter().map(|v| v.property).collect()
    }

    #[test]
    fn properties_are_named_once_each() {
        let names: BTreeSet<&str> = PROPERTIES.iter().map(|p| p.name).collect();
        assert_eq!(names.len(), PROPERTIES.len());
    }

    #[test]
    fn each_property_bites_alone() {
        let members = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Seen before it asked to join (the view is judged by what came
        // before it), then consistent.
        let early = vec![
            (0, view(&["m1"])),
            (1, JoinCalled),
            (1, Joined),
            (0, view(&["m1"])),
            (1, view(&["m1"])),
        ];
        let r = check_membership(&log(early), name, &members(&["m1"]), &[0, 1]);
        assert_eq!(named(&r), [NO_INVENTED_MEMBER.name], "{r}");
        // A lost session's member still listed: every view agrees with the
        // group, which is wrong.
        let lingering = vec![(1, JoinCalled), (1, Joined), (1, Lost), (0, view(&["m1"]))];
        let r = check_membership(&log(lingering), name, &members(&["m1"]), &[0]);
        assert_eq!(named(&r), [FINAL_GROUP.name], "{r}");
        // A live follower left on an old view.
        let behind = vec![
            (0, JoinCalled),
            (0, Joined),
            (1, view(&[])),
            (0, view(&["m0"])),
        ];
        let r = check_membership(&log(behind), name, &members(&["m0"]), &[0, 1]);
        assert_eq!(named(&r), [CONVERGENCE.name], "{r}");
        assert!(r.violations[0]
            .detail
            .starts_with("client 1 did not converge"));
        // A recipe failure.
        let failed = vec![
            (0, JoinCalled),
            (
                0,
                Failed {
                    error: "NodeExists".into(),
                },
            ),
        ];
        let r = check_membership(&log(failed), name, &[], &[]);
        assert_eq!(named(&r), [NO_RECIPE_FAILURE.name], "{r}");
        assert_eq!(
            r.violations[0].detail,
            "client 0 failed at 1 ms: NodeExists"
        );
    }
}
