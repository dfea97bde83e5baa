//! Leader election, reduced from ZooKeeper's FastLeaderElection: a looking
//! server broadcasts its credentials every tick; once it has fresh votes
//! from a quorum of looking servers (itself included) it picks the best
//! by (current epoch, last logged zxid, server id) and leads or follows
//! it. A server that hears a leader (established or not) follows it.
//!
//! Votes from different quorums may disagree; then the sync does not come
//! together within initLimit and everyone looks again. Safety does not rest
//! on the election: a leader is only established by a quorum that accepted
//! its new epoch and whose logs are no newer than its own (see `leader`).

use std::collections::BTreeMap;

use super::{Output, PeerMsg, PeerState, Server, ServerId, Vote};

/// Votes older than this many ticks are forgotten.
const VOTE_FRESH_TICKS: u64 = 2;

#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub(super) struct Looking {
    /// The latest vote of each looking server, with the tick it came.
    votes: BTreeMap<ServerId, (Vote, u64)>,
}

impl Server {
    pub(super) fn tick_looking(&mut self, now_ms: i64, out: &mut Vec<Output>) {
        self.broadcast_vote(out);
        self.decide(now_ms, out);
    }

    pub(super) fn on_vote(
        &mut self,
        now_ms: i64,
        from: ServerId,
        vote: Vote,
        out: &mut Vec<Output>,
    ) {
        let ticks = self.ticks;
        let super::Role::Looking(looking) = &mut self.role else {
            if matches!(&self.role, super::Role::Following(f) if f.leader() == from)
                && vote.state != PeerState::Leading
            {
                // Our leader no longer leads: its connections are gone.
                self.look(out);
                return;
            }
            if vote.state == PeerState::Looking {
                let msg = PeerMsg::Vote(self.vote());
                out.push(Output::Peer { to: from, msg });
            }
            return;
        };
        match vote.state {
            PeerState::Leading => self.follow(from, out),
            PeerState::Looking => {
                looking.votes.insert(from, (vote, ticks));
                self.decide(now_ms, out);
            }
            // Its leader speaks for itself.
            PeerState::Following(_) => {}
        }
    }

    /// With fresh votes from a quorum, lead or follow the best of them.
    fn decide(&mut self, now_ms: i64, out: &mut Vec<Output>) {
        let super::Role::Looking(looking) = &self.role else {
            return;
        };
        let me = self.vote();
        let key = |id: ServerId, v: &Vote| (v.current_epoch, v.last_zxid, id);
        let fresh = looking
            .votes
            .iter()
            .filter(|(_, (v, at))| {
                v.state == PeerState::Looking && self.ticks - at <= VOTE_FRESH_TICKS
            })
            .map(|(id, (v, _))| key(*id, v));
        let mut candidates: Vec<_> = fresh.collect();
        candidates.push(key(self.config.id, &me));
        if candidates.len() < self.config.quorum() {
            return;
        }
        let best = candidates.into_iter().max().expect("not empty").2;
        if best == self.config.id {
            self.start_leading(now_ms, out);
        } else {
            self.follow(best, out);
        }
    }
}
