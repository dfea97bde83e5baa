//! The group membership oracle.
//!
//! * **No invention**: every name in any view is a member that asked to
//!   join at some point.
//! * **Convergence**: after the quiet phase every live follower's last view
//!   is the group's final member list.
//! * **Membership is the session's**: the final list holds exactly the
//!   clients whose live session last joined and did not leave.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::Entry;

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum MembershipEvent {
    SessionStarted,
    JoinCalled,
    Joined,
    LeaveCalled,
    Left,
    View { members: Vec<String> },
    Lost,
    Crashed,
    Failed { error: String },
}

#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct MembershipReport {
    pub joins: u64,
    pub leaves: u64,
    pub views: u64,
    pub losses: u64,
    pub violations: Vec<String>,
}

impl MembershipReport {
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

/// `name(c)`: client c's member name; `final_members`: the group at the
/// end; `live`: clients whose session was alive at the end.
pub fn check_membership(
    log: &[Entry<MembershipEvent>],
    name: impl Fn(usize) -> String,
    final_members: &[String],
    live: &[usize],
) -> MembershipReport {
    let mut r = MembershipReport::default();
    let mut called: BTreeSet<String> = BTreeSet::new();
    let mut last_view: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut joined: BTreeMap<usize, bool> = BTreeMap::new();
    for e in log {
        let c = e.client;
        match &e.event {
            MembershipEvent::SessionStarted => {
                last_view.remove(&c);
                joined.insert(c, false);
            }
            MembershipEvent::JoinCalled => {
                called.insert(name(c));
            }
            MembershipEvent::Joined => {
                r.joins += 1;
                joined.insert(c, true);
            }
            MembershipEvent::LeaveCalled => {}
            MembershipEvent::Left => {
                r.leaves += 1;
                joined.insert(c, false);
            }
            MembershipEvent::View { members } => {
                r.views += 1;
                for m in members {
                    if !called.contains(m) {
                        r.violations.push(format!(
                            "client {c} saw member {m} that never joined (at {} ms)",
                            e.at_ms
                        ));
                    }
                }
                last_view.insert(c, members.clone());
            }
            MembershipEvent::Lost | MembershipEvent::Crashed => {
                r.losses += u64::from(e.event == MembershipEvent::Lost);
                joined.insert(c, false);
                last_view.remove(&c);
            }
            MembershipEvent::Failed { error } => r
                .violations
                .push(format!("client {c} failed at {} ms: {error}", e.at_ms)),
        }
    }
    let mut expected: Vec<String> = live
        .iter()
        .filter(|c| joined.get(c).copied().unwrap_or(false))
        .map(|&c| name(c))
        .collect();
    expected.sort();
    let mut actual = final_members.to_vec();
    actual.sort();
    if actual != expected {
        r.violations.push(format!(
            "the group ends as {actual:?}, but the live joined clients are {expected:?}"
        ));
    }
    for c in live {
        match last_view.get(c) {
            Some(v) if *v == actual => {}
            seen => r.violations.push(format!(
                "client {c} did not converge: last view {seen:?}, group {actual:?}"
            )),
        }
    }
    r
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
        let v = check_membership(&log(bad), name, &["m0".into(), "m1".into()], &[0, 1])
            .violations
            .join("\n");
        assert!(v.contains("m9 that never joined"), "{v}");
        assert!(v.contains("the group ends as"), "{v}");
        assert!(v.contains("did not converge"), "{v}");
    }
}
