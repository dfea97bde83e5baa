//! The follower's side of Zab: connect to the chosen leader (a new
//! attempt), accept its epoch if it is newer than any accepted before,
//! take the sync (truncate what the leader does not have, append what it
//! has), then log proposals, ack them and apply commits. It serves clients
//! only once the leader says a quorum is synced (UPTODATE), and gives up
//! (looks again) when the leader stays silent past syncLimit, or the sync
//! does not finish within initLimit.

use super::{Entry, LearnerMsg, Output, PeerMsg, Role, Server, ServerId};
use crate::msg::LeaderMsg;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Stage {
    /// FollowerInfo sent (every tick until LeaderInfo comes).
    Connecting,
    /// The leader's epoch accepted; waiting for the sync.
    EpochAccepted { epoch: u32 },
    /// Synced: logging and acking proposals, not yet serving.
    Synced,
    /// Serving clients.
    Serving,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(super) struct Following {
    leader: ServerId,
    attempt: u64,
    stage: Stage,
    since_tick: u64,
    last_heard_tick: u64,
}

impl Following {
    /// A follower of the ensemble's first leader, already synced.
    pub(super) fn bootstrap(leader: ServerId) -> Following {
        Following {
            leader,
            attempt: 0,
            stage: Stage::Serving,
            since_tick: 0,
            last_heard_tick: 0,
        }
    }

    pub(super) fn leader(&self) -> ServerId {
        self.leader
    }

    pub(super) fn is_serving(&self) -> bool {
        self.stage == Stage::Serving
    }
}

impl Server {
    /// Follow `leader`: a new attempt (a new connection to it).
    pub(super) fn follow(&mut self, leader: ServerId, out: &mut Vec<Output>) {
        self.thaw(out);
        self.close_learner_connections();
        self.drop_all_connections(out);
        self.attempts += 1;
        self.role = Role::Following(Following {
            leader,
            attempt: self.attempts,
            stage: Stage::Connecting,
            since_tick: self.ticks,
            last_heard_tick: self.ticks,
        });
        self.send_follower_info(out);
    }

    fn following(&self) -> &Following {
        match &self.role {
            Role::Following(f) => f,
            _ => panic!("not following"),
        }
    }

    fn following_mut(&mut self) -> &mut Following {
        match &mut self.role {
            Role::Following(f) => f,
            _ => panic!("not following"),
        }
    }

    fn send_follower_info(&self, out: &mut Vec<Output>) {
        let accepted_epoch = self.accepted_epoch;
        self.to_leader(LearnerMsg::FollowerInfo { accepted_epoch }, out);
    }

    /// Sends to the leader on the current attempt.
    pub(super) fn to_leader(&self, msg: LearnerMsg, out: &mut Vec<Output>) {
        let f = self.following();
        out.push(Output::Peer {
            to: f.leader,
            msg: PeerMsg::Learner {
                attempt: f.attempt,
                msg,
            },
        });
    }

    pub(super) fn tick_following(&mut self, out: &mut Vec<Output>) {
        let f = self.following();
        let limits = &self.config;
        let silent = self.ticks - f.last_heard_tick > limits.sync_limit_ticks;
        let slow = f.stage != Stage::Serving && self.ticks - f.since_tick > limits.init_limit_ticks;
        if silent || slow {
            self.look(out);
            return;
        }
        match f.stage {
            Stage::Connecting => self.send_follower_info(out),
            // The heartbeat, with the sessions heard from.
            _ => {
                let sessions = std::mem::take(&mut self.touched).into_iter().collect();
                self.to_leader(LearnerMsg::Touch { sessions }, out);
            }
        }
    }

    /// A message from a leader: only the current attempt's count.
    pub(super) fn on_leader(
        &mut self,
        from: ServerId,
        attempt: u64,
        msg: LeaderMsg,
        out: &mut Vec<Output>,
    ) {
        let ticks = self.ticks;
        match &mut self.role {
            Role::Following(f) if f.leader == from && f.attempt == attempt => {
                f.last_heard_tick = ticks;
            }
            _ => return, // a connection this server gave up
        }
        let stage = self.following().stage;
        match msg {
            LeaderMsg::Ping => {}
            LeaderMsg::LeaderInfo { epoch } => {
                if stage != Stage::Connecting {
                    return; // an answer to a resent FollowerInfo
                }
                if epoch < self.accepted_epoch {
                    // Promised a newer epoch already.
                    self.look(out);
                    return;
                }
                // An epoch accepted before (from this leader or a failed
                // candidate) is acked without counting for its quorum.
                let counts = epoch > self.accepted_epoch
                    || epoch == self.accepted_epoch && self.accepted_leader == from;
                if epoch > self.accepted_epoch {
                    self.accepted_epoch = epoch;
                    self.accepted_leader = from;
                }
                self.following_mut().stage = Stage::EpochAccepted { epoch };
                let ack = LearnerMsg::AckEpoch {
                    current_epoch: self.current_epoch,
                    last_zxid: self.last_logged(),
                    counts,
                };
                self.to_leader(ack, out);
            }
            LeaderMsg::NewLeader {
                truncate_to,
                entries,
                committed,
            } => {
                let Stage::EpochAccepted { epoch } = stage else {
                    panic!("a sync in stage {stage:?}");
                };
                self.take_sync(truncate_to, entries, committed);
                self.current_epoch = epoch;
                self.following_mut().stage = Stage::Synced;
                self.apply_committed(out);
                self.to_leader(LearnerMsg::AckNewLeader, out);
                // Ack everything uncommitted, including entries logged before
                // a crash or a lost connection whose acks died with it.
                for i in self.committed..self.log.len() {
                    let zxid = self.log[i].txn.zxid;
                    self.to_leader(LearnerMsg::Ack { zxid }, out);
                }
            }
            LeaderMsg::UpToDate { committed } => {
                assert_eq!(stage, Stage::Synced, "UPTODATE before the sync");
                self.commit_upto(committed);
                self.apply_committed(out);
                self.following_mut().stage = Stage::Serving;
                self.stats.syncs += 1;
            }
            LeaderMsg::Proposal { txn, origin } => {
                assert!(
                    matches!(stage, Stage::Synced | Stage::Serving),
                    "a proposal before the sync"
                );
                let zxid = txn.zxid;
                assert!(zxid > self.last_logged(), "proposals out of zxid order");
                self.log.push(Entry { txn, origin });
                self.to_leader(LearnerMsg::Ack { zxid }, out);
            }
            LeaderMsg::Commit { zxid } => {
                let next = self
                    .log
                    .get(self.committed)
                    .unwrap_or_else(|| panic!("commit {zxid:#x} of an unlogged proposal"));
                if stage == Stage::Serving {
                    assert_eq!(
                        next.txn.zxid,
                        zxid,
                        "commits out of order: server {} committed {} log {:x?}",
                        self.config.id,
                        self.committed,
                        self.log.iter().map(|e| e.txn.zxid).collect::<Vec<_>>()
                    );
                    self.committed += 1;
                } else {
                    // Synced while the leader was being established: the
                    // leader committed its log without Commit messages (the
                    // UPTODATE says so); a later commit implies them.
                    assert!(zxid >= next.txn.zxid, "a commit behind the commit point");
                    self.commit_upto(zxid);
                }
                // Breakage::FrozenFollowerServesReads: queued, not applied.
                if self.frozen.is_none() {
                    self.apply_committed(out);
                }
            }
            LeaderMsg::SyncDone { origin } => {
                assert_eq!(origin.server, self.config.id);
                if let Some(freeze) = &mut self.frozen {
                    // Answered behind the commits queued before it.
                    freeze.syncs.push(origin);
                    return;
                }
                self.complete(origin, Ok(zoosim_core::proto::Reply::Sync), out);
            }
            LeaderMsg::Revalidated {
                origin,
                session,
                live,
            } => self.revalidated(origin, session, live, out),
        }
    }

    /// The log becomes the leader's: keep the common prefix (up to
    /// `truncate_to`), drop the rest, append the leader's entries. Never
    /// drops an applied (so committed) txn: that would be a lost write.
    fn take_sync(
        &mut self,
        truncate_to: zoosim_core::proto::Zxid,
        entries: Vec<(zoosim_core::tree::Txn, Option<super::Origin>)>,
        committed: zoosim_core::proto::Zxid,
    ) {
        let keep = self.log.partition_point(|e| e.txn.zxid <= truncate_to);
        // The sync point is the last entry kept, or 0 when none is.
        if keep == 0 {
            assert_eq!(
                truncate_to, 0,
                "server {}: sync point {truncate_to:#x} is not in the log (nothing logged up to it)",
                self.config.id
            );
        } else {
            assert_eq!(
                self.log[keep - 1].txn.zxid,
                truncate_to,
                "server {}: sync point {truncate_to:#x} is not in the log",
                self.config.id
            );
        }
        assert!(
            keep >= self.applied,
            "server {}: the sync would drop applied txn {:#x}",
            self.config.id,
            self.log[keep].txn.zxid
        );
        if keep < self.log.len() {
            if !self.early_replied.is_empty() {
                // Breakage::ReplyBeforeQuorum: acknowledged writes lost.
                for e in &self.log[keep..] {
                    if self.early_replied.remove(&e.txn.zxid) {
                        self.stats.breakage_hits += 1;
                    }
                }
            }
            self.stats.truncations += 1;
            self.stats.truncated_entries += (self.log.len() - keep) as u64;
            self.log.truncate(keep);
        }
        self.committed = self.committed.min(keep);
        for (txn, origin) in entries {
            assert!(txn.zxid > self.last_logged(), "sync entries out of order");
            self.log.push(Entry { txn, origin });
        }
        self.commit_upto(committed);
    }

    /// Everything logged up to `zxid` is committed.
    fn commit_upto(&mut self, zxid: zoosim_core::proto::Zxid) {
        let upto = self.log.partition_point(|e| e.txn.zxid <= zxid);
        // The commit point is a logged entry, or 0 (nothing).
        if zxid != 0 {
            assert!(
                upto > 0,
                "server {}: commit point {zxid:#x} is not in the log (nothing logged up to it)",
                self.config.id
            );
            assert_eq!(
                self.log[upto - 1].txn.zxid,
                zxid,
                "server {}: commit point {zxid:#x} is not in the log",
                self.config.id
            );
        }
        self.committed = self.committed.max(upto);
    }
}
