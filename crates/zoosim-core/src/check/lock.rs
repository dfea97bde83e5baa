//! The oracle of the exclusive roles: the lock, the shared (read/write)
//! lock, and leadership (judged as a lock). Each property is a constant
//! below, named in every violation of it; [`PROPERTIES`] lists them.
//!
//! * **Fenced effects** (`fenced-exclusion`, `unique-tokens`). The writes
//!   the protected resource accepted come in token order, each from a
//!   client holding the lock with that token at the time; a reader's
//!   accepted reads carry a token no smaller than the last accepted
//!   write's. This is the safety a lock user can have. Every acquisition
//!   has a token of its own.
//! * **Beliefs** (`stale-beliefs-only-after-loss`). A client believes it
//!   holds from `Acquired` (or `Resumed`) to the first of release,
//!   `Suspended`, `Lost`, crash. Two overlapping beliefs (not both a
//!   reader's) are a *stale belief* when one holder's session was lost —
//!   `Lost` ends its belief, or follows the suspension or release call that
//!   did with no `Released` between, or the client crashed — which is
//!   ZooKeeper's known window (a paused or partitioned holder cannot know
//!   its session expired; a waiter whose session the leader had already
//!   expired can read a lagging follower's old child list): counted and
//!   reported, never hidden. Any other overlap means a client took the lock
//!   while the holder's node existed: a violation.
//! * **Told is told** (`told-is-told`). No access after the client learned
//!   its session ended (CURATOR-696's leader that keeps leading after
//!   expiry).
//! * **Suspend while disconnected** (`suspend-while-disconnected`). No
//!   access between a `Disconnected` the client's machine was given and
//!   the next `Connected`, whatever the resource then did with it: a
//!   holder that knows it is cut off must stop until it knows its session
//!   survived. The log records every session event the machine received,
//!   which tells such a holder from a frozen one (a paused holder acts
//!   before it has taken the Disconnected its client queued meanwhile:
//!   fencing's case, not a recipe bug).
//! * **Herd** (`no-herd`). A deletion wakes at most one waiter, or only
//!   readers. A reader is never woken by a reader's node: readers wait on
//!   writers.
//! * **No recipe failure** (`no-recipe-failure`): no client met an answer
//!   its recipe has no way forward from.
//! * **Revocation** (`revocation-honoured`). A revoker's request for a
//!   live holding (from `Acquired` to the holder's release call or the
//!   session's end; a suspension does not end it, so a request made while
//!   the holder was disconnected counts) reaches the holder (`RevokeAsked`)
//!   and the holding ends within the bound, judged like liveness (the
//!   bound runs from the request, or from the quiet phase for an earlier
//!   one).
//! * **Liveness** (`liveness`). In the quiet phase every acquire and
//!   release finishes within the bound.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::{Entry, Liveness, Moment, Property, Violation};
use crate::proto::SessionEvent;

/// What one lock, shared-lock or election client saw or did, as the oracle reads it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum LockEvent {
    /// `shared`: as a shared lock's reader (readers may hold together).
    AcquireCalled {
        /// True for a shared lock's reader, false for a writer or an exclusive holder.
        shared: bool,
    },
    /// The client holds the lock (or leads) from here, with fencing token `token`.
    Acquired {
        /// The acquisition's fencing token (the lock's token, or the leader's epoch).
        token: u64,
    },
    /// The client asked to release (or resign).
    ReleaseCalled,
    /// The release (or resignation) completed: the client holds nothing.
    Released,
    /// The holder's connection broke: it must not act as holder until `Resumed`.
    Suspended,
    /// Reconnected with the session intact: the client holds again.
    Resumed,
    /// The session ended or the node vanished: nothing held or awaited.
    Lost,
    /// A deletion's watch event reached the client.
    Woken {
        /// The deleted node whose watch fired.
        path: String,
    },
    /// The guid search after a ConnectionLoss on create.
    Recovered {
        /// Whether the search found the client's node.
        found: bool,
    },
    /// An access to the fenced resource, and whether it was accepted.
    Access {
        /// The token the access was made with.
        token: u64,
        /// Whether the resource accepted it.
        accepted: bool,
    },
    /// The client process crashed (the nemesis).
    Crashed,
    /// The recipe met an answer it has no way forward from.
    Failed {
        /// The recipe's error, as text.
        error: String,
    },
    /// A revoker asked for the lock held with `token` (its setData of
    /// "unlock" was acknowledged).
    RevokeCalled {
        /// The token of the hold the revoker asked to end.
        token: u64,
    },
    /// The holder saw the revocation request.
    RevokeAsked,
    /// The client learned its session had ended (Expired, Closed, or a
    /// SessionExpired reply). Acting as holder after this is a violation.
    SessionEnded,
    /// The client's recipe machine was given this session event (logged
    /// when handed over, before what it leads to). An access after
    /// `Disconnected` and before the next `Connected` is a violation.
    Session {
        /// The event (Connected, Disconnected, Expired, Closed).
        event: SessionEvent,
    },
}

/// What [`check_lock`] found: counts of what happened, and the violations.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct LockReport {
    /// Acquisitions (`Acquired` events).
    pub acquisitions: u64,
    /// Accesses the fenced resource accepted.
    pub accesses_accepted: u64,
    /// Accesses the fenced resource refused.
    pub accesses_rejected: u64,
    /// Overlapping beliefs explained by the older holder's lost session.
    pub stale_beliefs: u64,
    /// Suspensions (`Suspended` events).
    pub suspensions: u64,
    /// Resumptions (`Resumed` events).
    pub resumptions: u64,
    /// Sessions lost (`Lost` events).
    pub losses: u64,
    /// Guid searches after a ConnectionLoss that found the client's node.
    pub recovered_found: u64,
    /// Guid searches after a ConnectionLoss that found nothing.
    pub recovered_not_found: u64,
    /// Deletions whose watch woke at least one client.
    pub deletions_waking_someone: u64,
    /// The most clients one deletion woke.
    pub max_woken_per_deletion: u64,
    /// Revocation requests acknowledged (`RevokeCalled` events).
    pub revokes_called: u64,
    /// Revocation requests a holder saw (`RevokeAsked` events).
    pub revokes_asked: u64,
    /// Holdings revoked while live whose holder saw the request and let go.
    pub revokes_honoured: u64,
    /// Revocation requests of a live holding whose holder's machine knew
    /// it was disconnected when they were made.
    pub revokes_while_disconnected: u64,
    /// Every property broken, in the order found.
    pub violations: Vec<Violation>,
}

impl LockReport {
    /// Whether no property was broken.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for LockReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "acquisitions {}, accesses accepted {} / rejected {}, stale beliefs {}, \
             suspended {} / resumed {}, lost {}, guid search found {} / not {}, \
             max woken per deletion {}, revocations asked {} / seen {} / honoured {} / \
             made while the holder was disconnected {}",
            self.acquisitions,
            self.accesses_accepted,
            self.accesses_rejected,
            self.stale_beliefs,
            self.suspensions,
            self.resumptions,
            self.losses,
            self.recovered_found,
            self.recovered_not_found,
            self.max_woken_per_deletion,
            self.revokes_called,
            self.revokes_asked,
            self.revokes_honoured,
            self.revokes_while_disconnected
        )?;
        for v in &self.violations {
            writeln!(f, "VIOLATION: {v}")?;
        }
        Ok(())
    }
}

impl Belief {
    fn new(client: usize, token: u64, shared: bool, from: u64) -> Belief {
        Belief {
            client,
            token,
            shared,
            from,
            to: u64::MAX,
            end: End::Open,
            session_lost: false,
        }
    }
}

/// How a belief ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum End {
    Released,
    Suspended,
    Lost,
    Crashed,
    /// Still believing when the log ends.
    Open,
}

#[derive(Clone, Copy, Debug)]
struct Belief {
    client: usize,
    token: u64,
    /// A reader's: readers may hold together.
    shared: bool,
    from: u64,
    to: u64,
    end: End,
    /// The holder's session was lost before it could have resumed or
    /// released: it ended with `Lost`, or `Lost` followed a suspension or a
    /// release call with nothing in between.
    session_lost: bool,
}

/// Tokens grant the lock: one per acquisition.
pub const UNIQUE_TOKENS: Property = Property::new(
    "unique-tokens",
    "every acquisition gets a token of its own (two holders with one token defeat the fence)",
);
/// Accepted effects come in token order, each from the client holding the lock with
/// that token at the time; readers may share, and read no older than the last write.
pub const FENCED_EXCLUSION: Property = Property::new(
    "fenced-exclusion",
    "accepted effects come in token order, each from the client holding the lock with that \
     token at the time; a shared lock's readers may share, and read no older than the last write",
);
/// Two clients believe they hold (not both readers) only when one's session was lost.
pub const STALE_BELIEFS: Property = Property::new(
    "stale-beliefs-only-after-loss",
    "two clients believe they hold (not both readers) only when one's session was lost",
);
/// Nobody acts after being told its session ended.
pub const TOLD_IS_TOLD: Property = Property::new(
    "told-is-told",
    "nobody acts after being told its session ended",
);
/// Nobody acts between a Disconnected its machine was given and the next Connected.
pub const SUSPEND_WHILE_DISCONNECTED: Property = Property::new(
    "suspend-while-disconnected",
    "no holder acts between a Disconnected its recipe was given and the next Connected \
     (it must suspend), whatever the fenced resource then does",
);
pub use super::NO_HERD;
/// A revocation of a live holding reaches its holder and the holding ends within the bound.
pub const REVOCATION_HONOURED: Property = Property::new(
    "revocation-honoured",
    "a revocation of a live holding (its holder disconnected included) reaches the holder and \
     the holding ends within the bound (judged like liveness, from the quiet phase on)",
);
/// In the quiet phase, every acquire and release ends within the bound.
pub const LIVENESS: Property = Property::new(
    "liveness",
    "in the quiet phase, every acquire and release ends within the bound",
);
pub use super::NO_RECIPE_FAILURE;

/// What this oracle checks, safety first.
pub const PROPERTIES: &[Property] = &[
    FENCED_EXCLUSION,
    UNIQUE_TOKENS,
    STALE_BELIEFS,
    TOLD_IS_TOLD,
    SUSPEND_WHILE_DISCONNECTED,
    NO_HERD,
    NO_RECIPE_FAILURE,
    REVOCATION_HONOURED,
    LIVENESS,
];

/// Judges a lock, shared-lock or election run's outcome log against [`PROPERTIES`];
/// `liveness`, if given, also judges the quiet phase.
pub fn check_lock(log: &[Entry<LockEvent>], liveness: Option<Liveness>) -> LockReport {
    let mut report = LockReport::default();
    let beliefs = beliefs(log, &mut report);
    // In the order the one-pass oracle reported them: a run's first
    // violation stays the same one.
    check_unique_tokens(log, &mut report);
    check_fenced_exclusion(log, &beliefs, &mut report);
    check_stale_beliefs(&beliefs, &mut report);
    let failures = super::recipe_failures(log, |e| match e {
        LockEvent::Failed { error } => Some(error),
        _ => None,
    });
    report.violations.extend(failures);
    check_told_is_told(log, &mut report);
    check_suspend_while_disconnected(log, &mut report);
    check_no_herd(log, &mut report);
    check_revocation_honoured(log, liveness, &mut report);
    if let Some(l) = liveness {
        check_liveness(log, l, &mut report);
    }
    report
}

fn check_unique_tokens(log: &[Entry<LockEvent>], report: &mut LockReport) {
    let mut tokens = BTreeMap::new();
    for e in log {
        if let LockEvent::Acquired { token } = e.event {
            report.acquisitions += 1;
            if let Some(other) = tokens.insert(token, e.moment()) {
                report.violations.push(
                    Violation::new(
                        UNIQUE_TOKENS,
                        format!(
                            "token {token} handed out twice (clients {} and {}, at {} ms)",
                            other.client, e.client, e.at_ms
                        ),
                    )
                    .at([other, e.moment()]),
                );
            }
        }
    }
}

fn check_fenced_exclusion(log: &[Entry<LockEvent>], beliefs: &[Belief], report: &mut LockReport) {
    // The highest token a writer's accepted access carried: readers do not
    // raise it (they may share), but are fenced by it.
    let mut highest: Option<u64> = None;
    let mut reader: BTreeMap<usize, bool> = BTreeMap::new();
    for e in log {
        let token = match e.event {
            LockEvent::AcquireCalled { shared } => {
                reader.insert(e.client, shared);
                continue;
            }
            LockEvent::Access {
                accepted: false, ..
            } => {
                report.accesses_rejected += 1;
                continue;
            }
            LockEvent::Access { token, .. } => token,
            _ => continue,
        };
        report.accesses_accepted += 1;
        if let Some(h) = highest.filter(|&h| token < h) {
            report.violations.push(
                Violation::new(
                    FENCED_EXCLUSION,
                    format!(
                        "the resource accepted token {token} after {h} (client {}, at {} ms)",
                        e.client, e.at_ms
                    ),
                )
                .at([e.moment()]),
            );
        }
        if !reader.get(&e.client).copied().unwrap_or(false) {
            highest = highest.max(Some(token));
        }
        let held = beliefs.iter().any(|b| {
            b.client == e.client && b.token == token && b.from <= e.at_ms && e.at_ms <= b.to
        });
        if !held {
            report.violations.push(
                Violation::new(
                    FENCED_EXCLUSION,
                    format!(
                        "client {} acted with token {token} at {} ms without holding the lock",
                        e.client, e.at_ms
                    ),
                )
                .at([e.moment()]),
            );
        }
    }
}

/// Overlapping beliefs: counted when a session loss explains them (the
/// window ZooKeeper cannot close), a violation otherwise.
fn check_stale_beliefs(beliefs: &[Belief], report: &mut LockReport) {
    for (i, a) in beliefs.iter().enumerate() {
        for b in &beliefs[i + 1..] {
            if a.client == b.client
                || !(a.from < b.to && b.from < a.to)
                || a.from == a.to
                || b.from == b.to
            {
                continue;
            }
            if a.shared && b.shared {
                continue; // readers together
            }
            let (older, newer) = if a.from <= b.from { (a, b) } else { (b, a) };
            // Either side may be the stale one: a waiter whose session had
            // already expired at the leader can still read a lagging
            // follower's old child list and believe it holds.
            let stale = older.session_lost || newer.session_lost;
            if stale {
                report.stale_beliefs += 1;
            } else {
                report.violations.push(
                    Violation::new(
                        STALE_BELIEFS,
                        format!(
                            "two holders: client {} (token {}, from {} ms, {:?}) and client {} \
                             (token {}, from {} ms) while both sessions were intact",
                            older.client,
                            older.token,
                            older.from,
                            older.end,
                            newer.client,
                            newer.token,
                            newer.from
                        ),
                    )
                    // Where each came to believe it held.
                    .at([older, newer].map(|b| Moment {
                        client: b.client,
                        at_ms: b.from,
                    })),
                );
            }
        }
    }
}

/// Nobody acts on a role after being told its session is gone (until it
/// asks for the role again, in a new session).
fn check_told_is_told(log: &[Entry<LockEvent>], report: &mut LockReport) {
    let mut ended: BTreeSet<usize> = BTreeSet::new();
    for e in log {
        match e.event {
            LockEvent::SessionEnded => {
                ended.insert(e.client);
            }
            LockEvent::AcquireCalled { .. } => {
                ended.remove(&e.client);
            }
            LockEvent::Access { token, .. } if ended.contains(&e.client) => {
                report.violations.push(
                    Violation::new(
                        TOLD_IS_TOLD,
                        format!(
                            "client {} acted with token {token} at {} ms after it was told its \
                             session had ended",
                            e.client, e.at_ms
                        ),
                    )
                    .at([e.moment()]),
                );
            }
            _ => {}
        }
    }
}

/// No access while the client's machine knows it is disconnected: from a
/// `Disconnected` it was given to the next `Connected`. Whatever ends the
/// session (Expired, Closed, a loss, a crash, a failure) ends the window
/// too: a later session starts connected, and acting after being told the
/// session ended is `told-is-told`'s.
fn check_suspend_while_disconnected(log: &[Entry<LockEvent>], report: &mut LockReport) {
    // Per client: when its machine was told it was disconnected.
    let mut cut: BTreeMap<usize, u64> = BTreeMap::new();
    for e in log {
        match &e.event {
            LockEvent::Session {
                event: SessionEvent::Disconnected,
            } => {
                cut.entry(e.client).or_insert(e.at_ms);
            }
            LockEvent::Session { .. }
            | LockEvent::SessionEnded
            | LockEvent::Lost
            | LockEvent::Crashed
            | LockEvent::Failed { .. } => {
                cut.remove(&e.client);
            }
            LockEvent::Access { token, accepted } => {
                if let Some(&since) = cut.get(&e.client) {
                    report.violations.push(
                        Violation::new(
                            SUSPEND_WHILE_DISCONNECTED,
                            format!(
                                "client {} acted with token {token} at {} ms ({}), told it was \
                                 disconnected at {since} ms and not reconnected since",
                                e.client,
                                e.at_ms,
                                if *accepted { "accepted" } else { "rejected" }
                            ),
                        )
                        .at([
                            Moment {
                                client: e.client,
                                at_ms: since,
                            },
                            e.moment(),
                        ]),
                    );
                }
            }
            _ => {}
        }
    }
}

/// Clients woken per deleted path: several readers may be, one writer.
fn check_no_herd(log: &[Entry<LockEvent>], report: &mut LockReport) {
    // Per deleted path, each woken client (and whether a reader) with the
    // moment of its first wake-up by it.
    let mut woken: BTreeMap<&str, BTreeMap<(usize, bool), Moment>> = BTreeMap::new();
    let mut reader: BTreeMap<usize, bool> = BTreeMap::new();
    for e in log {
        match &e.event {
            LockEvent::AcquireCalled { shared } => {
                reader.insert(e.client, *shared);
            }
            LockEvent::Woken { path } => {
                let is_reader = reader.get(&e.client).copied().unwrap_or(false);
                if is_reader && path.contains("-read-") {
                    report.violations.push(
                        Violation::new(
                            NO_HERD,
                            format!(
                                "reader {} waited on a reader's node {path} (readers wait on \
                                 writers)",
                                e.client
                            ),
                        )
                        .at([e.moment()]),
                    );
                }
                woken
                    .entry(path)
                    .or_default()
                    .entry((e.client, is_reader))
                    .or_insert(e.moment());
            }
            _ => {}
        }
    }
    report.deletions_waking_someone = woken.len() as u64;
    for (path, clients) in &woken {
        let n = clients.len() as u64;
        report.max_woken_per_deletion = report.max_woken_per_deletion.max(n);
        if n > 1 && clients.keys().any(|&(_, is_reader)| !is_reader) {
            let moments = clients.values().copied();
            let clients: Vec<usize> = clients.keys().map(|c| c.0).collect();
            report.violations.push(
                Violation::new(
                    NO_HERD,
                    format!("the deletion of {path} woke {n} clients {clients:?}"),
                )
                .at(moments),
            );
        }
    }
}

/// A holding: from `Acquired` to the holder's letting go (its release
/// call), its session's loss, a crash or a failure; a suspension does not
/// end it (the node is still there, and a revoker may ask for it).
struct Holding {
    client: usize,
    token: u64,
    from: u64,
    /// When it ended; None if it had not when the log ends.
    to: Option<u64>,
    /// Whether it ended by the holder's own release call.
    released: bool,
    /// When the holder saw a revocation request during the holding.
    asked: Option<u64>,
}

fn holdings(log: &[Entry<LockEvent>]) -> Vec<Holding> {
    let mut out: Vec<Holding> = Vec::new();
    let mut open: BTreeMap<usize, usize> = BTreeMap::new();
    for e in log {
        let c = e.client;
        let end = match e.event {
            LockEvent::Acquired { token } => {
                if let Some(i) = open.remove(&c) {
                    out[i].to = Some(e.at_ms);
                }
                open.insert(c, out.len());
                out.push(Holding {
                    client: c,
                    token,
                    from: e.at_ms,
                    to: None,
                    released: false,
                    asked: None,
                });
                continue;
            }
            LockEvent::RevokeAsked => {
                if let Some(&i) = open.get(&c) {
                    out[i].asked.get_or_insert(e.at_ms);
                }
                continue;
            }
            LockEvent::ReleaseCalled => true,
            LockEvent::Lost
            | LockEvent::Crashed
            | LockEvent::Failed { .. }
            | LockEvent::SessionEnded => false,
            _ => continue,
        };
        if let Some(i) = open.remove(&c) {
            out[i].to = Some(e.at_ms);
            out[i].released = end;
        }
    }
    out
}

/// A revocation of a live holding reaches its holder (`RevokeAsked`) and
/// the holding ends within the bound — a revoke made while the holder was
/// disconnected included: its data watch fires once it is back, or its
/// session is lost. Judged like liveness: the bound runs from the revoke,
/// or from the start of the quiet phase for one made before it. The
/// counters are kept without a quiet phase too.
fn check_revocation_honoured(
    log: &[Entry<LockEvent>],
    liveness: Option<Liveness>,
    report: &mut LockReport,
) {
    let holdings = holdings(log);
    // Per client: since when its machine knew it was disconnected.
    let mut cut: BTreeMap<usize, u64> = BTreeMap::new();
    // Holdings revoked while live, by index.
    let mut revoked: BTreeSet<usize> = BTreeSet::new();
    for e in log {
        match e.event {
            LockEvent::RevokeAsked => report.revokes_asked += 1,
            LockEvent::Session {
                event: SessionEvent::Disconnected,
            } => {
                cut.entry(e.client).or_insert(e.at_ms);
            }
            LockEvent::Session { .. } | LockEvent::Lost | LockEvent::Crashed => {
                cut.remove(&e.client);
            }
            LockEvent::RevokeCalled { token } => {
                report.revokes_called += 1;
                let live = holdings.iter().position(|h| {
                    h.token == token && h.from <= e.at_ms && h.to.is_none_or(|to| e.at_ms < to)
                });
                let Some(i) = live else {
                    continue; // not held (any more) when asked
                };
                let h = &holdings[i];
                revoked.insert(i);
                if cut.contains_key(&h.client) {
                    report.revokes_while_disconnected += 1;
                }
                let Some(l) = liveness else { continue };
                let deadline = e.at_ms.max(l.from_ms) + l.bound_ms;
                if l.missed(deadline, h.to) {
                    let why = match h.asked {
                        Some(at) => format!("it saw the request at {at} ms"),
                        None => "the request never reached it".to_owned(),
                    };
                    report.violations.push(
                        Violation::new(
                            REVOCATION_HONOURED,
                            format!(
                                "client {} held token {token} past {deadline} ms, asked to let \
                                 go at {} ms ({why}); {}",
                                h.client,
                                e.at_ms,
                                h.to.map_or("it never let go".to_owned(), |t| format!(
                                    "it let go at {t} ms"
                                ))
                            ),
                        )
                        // The holder's acquisition and the request.
                        .at([
                            Moment {
                                client: h.client,
                                at_ms: h.from,
                            },
                            e.moment(),
                        ]),
                    );
                }
            }
            _ => {}
        }
    }
    report.revokes_honoured = revoked
        .iter()
        .filter(|&&i| holdings[i].asked.is_some() && holdings[i].released)
        .count() as u64;
}

fn beliefs(log: &[Entry<LockEvent>], report: &mut LockReport) -> Vec<Belief> {
    let mut out: Vec<Belief> = Vec::new();
    // Per client: the open belief; and the last one that ended by a
    // suspension or a release call whose fate is not known yet (did the
    // session survive?), with its token.
    let mut open: BTreeMap<usize, Belief> = BTreeMap::new();
    // Per client: the beliefs of its current acquisition closed so far
    // (a suspension, a release call) whose session's fate is not known
    // yet. A `Resumed` does not settle it: a Connected that was on its way
    // before the session expired can reach a paused client after it.
    let mut chain: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let close = |open: &mut BTreeMap<usize, Belief>,
                 out: &mut Vec<Belief>,
                 chain: &mut BTreeMap<usize, Vec<usize>>,
                 c,
                 at,
                 end| {
        let mut b: Belief = open.remove(&c)?;
        b.to = at;
        b.end = end;
        out.push(b);
        chain.entry(c).or_default().push(out.len() - 1);
        Some(b.token)
    };
    let mut last_token: BTreeMap<usize, u64> = BTreeMap::new();
    let mut shared: BTreeMap<usize, bool> = BTreeMap::new();
    for e in log {
        let c = e.client;
        let reader = shared.get(&c).copied().unwrap_or(false);
        match &e.event {
            LockEvent::AcquireCalled { shared: s } => {
                shared.insert(c, *s);
            }
            LockEvent::Acquired { token } => {
                close(&mut open, &mut out, &mut chain, c, e.at_ms, End::Released);
                chain.remove(&c);
                last_token.insert(c, *token);
                open.insert(c, Belief::new(c, *token, reader, e.at_ms));
            }
            LockEvent::ReleaseCalled => {
                close(&mut open, &mut out, &mut chain, c, e.at_ms, End::Released);
            }
            LockEvent::Suspended => {
                report.suspensions += 1;
                close(&mut open, &mut out, &mut chain, c, e.at_ms, End::Suspended);
            }
            LockEvent::Released => {
                // The delete went through: the session was intact.
                chain.remove(&c);
                last_token.remove(&c);
            }
            LockEvent::Resumed => {
                report.resumptions += 1;
                if let Some(&token) = last_token.get(&c) {
                    open.entry(c)
                        .or_insert_with(|| Belief::new(c, token, reader, e.at_ms));
                }
            }
            LockEvent::Lost | LockEvent::Crashed => {
                let lost = e.event == LockEvent::Lost;
                if lost {
                    report.losses += 1;
                }
                let end = if lost { End::Lost } else { End::Crashed };
                close(&mut open, &mut out, &mut chain, c, e.at_ms, end);
                // A crashed client's session is lost too, at a moment the
                // log cannot tell (a paused holder whose session expired
                // may be crashed before it learns): counted as lost.
                for at in chain.remove(&c).unwrap_or_default() {
                    out[at].session_lost = true;
                }
                last_token.remove(&c);
            }
            LockEvent::Recovered { found } => {
                if *found {
                    report.recovered_found += 1;
                } else {
                    report.recovered_not_found += 1;
                }
            }
            _ => {}
        }
    }
    out.extend(open.into_values());
    out
}

fn check_liveness(log: &[Entry<LockEvent>], l: Liveness, report: &mut LockReport) {
    // Per client: what it is waiting for and since when.
    let mut waiting: BTreeMap<usize, (&'static str, u64)> = BTreeMap::new();
    let mut judge = |client: usize, what: &str, since: u64, done_at: Option<u64>| {
        let deadline = since.max(l.from_ms) + l.bound_ms;
        if l.missed(deadline, done_at) {
            report.violations.push(
                Violation::new(
                    LIVENESS,
                    format!(
                        "client {client}'s {what} from {since} ms was not done within {} ms of \
                         the quiet phase ({})",
                        l.bound_ms,
                        done_at.map_or("never done".to_owned(), |t| format!("done at {t} ms")),
                    ),
                )
                .at([Moment {
                    client,
                    at_ms: since,
                }]),
            );
        }
    };
    for e in log {
        match e.event {
            LockEvent::AcquireCalled { .. } => {
                waiting.insert(e.client, ("acquire", e.at_ms));
            }
            LockEvent::ReleaseCalled => {
                waiting.insert(e.client, ("release", e.at_ms));
            }
            LockEvent::Acquired { .. }
            | LockEvent::Released
            | LockEvent::Lost
            | LockEvent::Failed { .. } => {
                if let Some((what, since)) = waiting.remove(&e.client) {
                    judge(e.client, what, since, Some(e.at_ms));
                }
            }
            LockEvent::Crashed => {
                waiting.remove(&e.client);
            }
            _ => {}
        }
    }
    for (client, (what, since)) in waiting {
        judge(client, what, since, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LockEvent::*;

    fn log(entries: &[(u64, usize, LockEvent)]) -> Vec<Entry<LockEvent>> {
        entries
            .iter()
            .map(|(at, c, e)| Entry {
                at_ms: *at,
                client: *c,
                event: e.clone(),
            })
            .collect()
    }

    /// The properties the report names, in its order.
    fn named(r: &LockReport) -> Vec<&'static str> {
        r.violations.iter().map(|v| v.property).collect()
    }

    fn access(token: u64) -> LockEvent {
        Access {
            token,
            accepted: true,
        }
    }

    #[test]
    fn properties_are_named_once_each() {
        let names: BTreeSet<&str> = PROPERTIES.iter().map(|p| p.name).collect();
        assert_eq!(names.len(), PROPERTIES.len());
        assert!(names.contains(NO_RECIPE_FAILURE.name));
    }

    #[test]
    fn serial_holders_pass() {
        let l = log(&[
            (0, 0, AcquireCalled { shared: false }),
            (0, 1, AcquireCalled { shared: false }),
            (5, 0, Acquired { token: 1 }),
            (
                6,
                0,
                Access {
                    token: 1,
                    accepted: true,
                },
            ),
            (9, 0, ReleaseCalled),
            (10, 0, Released),
            (
                11,
                1,
                Woken {
                    path: "/l/a".into(),
                },
            ),
            (12, 1, Acquired { token: 2 }),
            (
                13,
                1,
                Access {
                    token: 2,
                    accepted: true,
                },
            ),
            (14, 1, ReleaseCalled),
            (15, 1, Released),
        ]);
        let r = check_lock(&l, None);
        assert!(r.is_ok(), "{r}");
        assert_eq!(
            (
                r.acquisitions,
                r.accesses_accepted,
                r.max_woken_per_deletion
            ),
            (2, 2, 1)
        );
    }

    #[test]
    fn two_healthy_holders_are_a_violation() {
        let l = log(&[
            (5, 0, Acquired { token: 1 }),
            (6, 1, Acquired { token: 2 }),
            (7, 1, ReleaseCalled),
            (8, 0, ReleaseCalled),
        ]);
        let r = check_lock(&l, None);
        assert_eq!(named(&r), [STALE_BELIEFS.name], "{r}");
        assert!(r.violations[0].detail.starts_with("two holders"), "{r}");
        // The two acquisitions, for a report to point at.
        let m = |client, at_ms| Moment { client, at_ms };
        assert_eq!(r.violations[0].at, [m(0, 5), m(1, 6)]);
    }

    #[test]
    fn a_holder_whose_session_was_lost_is_a_stale_belief() {
        let l = log(&[
            (5, 0, Acquired { token: 1 }),
            (
                6,
                0,
                Access {
                    token: 1,
                    accepted: true,
                },
            ),
            (100, 1, Acquired { token: 2 }),
            (
                101,
                1,
                Access {
                    token: 2,
                    accepted: true,
                },
            ),
            (
                150,
                0,
                Access {
                    token: 1,
                    accepted: false,
                },
            ),
            (160, 0, Suspended),
            (170, 0, Lost),
        ]);
        let r = check_lock(&l, None);
        assert!(r.is_ok(), "{r}");
        assert_eq!((r.stale_beliefs, r.accesses_rejected), (1, 1));
    }

    #[test]
    fn a_paused_holder_that_releases_then_learns_its_session_is_gone_is_stale() {
        let l = log(&[
            (5, 0, Acquired { token: 1 }),
            (
                6,
                0,
                Access {
                    token: 1,
                    accepted: true,
                },
            ),
            (100, 1, Acquired { token: 2 }),
            (
                101,
                1,
                Access {
                    token: 2,
                    accepted: true,
                },
            ),
            (
                150,
                0,
                Access {
                    token: 1,
                    accepted: false,
                },
            ),
            (150, 0, ReleaseCalled),
            (170, 0, Lost),
        ]);
        let r = check_lock(&l, None);
        assert!(r.is_ok(), "{r}");
        assert_eq!(r.stale_beliefs, 1);
        // The same release, completed: the session was intact all along.
        let mut intact = l.clone();
        intact[6].event = Released;
        let r = check_lock(&intact, None);
        assert_eq!(named(&r), [STALE_BELIEFS.name], "{r}");
    }

    #[test]
    fn a_waiter_whose_session_had_expired_reading_a_stale_list_is_stale() {
        let l = log(&[
            (5, 3, Acquired { token: 41 }),
            (10, 4, Acquired { token: 38 }),
            (
                20,
                3,
                Access {
                    token: 41,
                    accepted: true,
                },
            ),
            (
                25,
                4,
                Access {
                    token: 38,
                    accepted: false,
                },
            ),
            (30, 3, ReleaseCalled),
            (31, 3, Released),
            (40, 4, Lost),
        ]);
        let r = check_lock(&l, None);
        assert!(r.is_ok(), "{r}");
        assert_eq!(r.stale_beliefs, 1);
    }

    #[test]
    fn a_late_connected_before_the_loss_does_not_excuse_nor_condemn() {
        // Paused: the Connected of a reconnect made before the expiry is
        // taken after the pause, then the expiry itself.
        let l = log(&[
            (5, 2, Acquired { token: 10 }),
            (100, 3, Acquired { token: 11 }),
            (
                200,
                2,
                Access {
                    token: 10,
                    accepted: false,
                },
            ),
            (200, 2, Suspended),
            (200, 2, Resumed),
            (200, 2, ReleaseCalled),
            (226, 2, Lost),
            (300, 3, ReleaseCalled),
        ]);
        let r = check_lock(&l, None);
        assert!(r.is_ok(), "{r}");
        assert_eq!(r.stale_beliefs, 1);
    }

    #[test]
    fn a_suspended_holder_that_resumes_while_another_holds_is_a_violation() {
        let l = log(&[
            (5, 0, Acquired { token: 1 }),
            (10, 0, Suspended),
            (20, 1, Acquired { token: 2 }),
            (30, 0, Resumed),
            (40, 1, ReleaseCalled),
        ]);
        let r = check_lock(&l, None);
        assert_eq!(named(&r), [STALE_BELIEFS.name], "{r}");
    }

    #[test]
    fn fencing_failures_are_violations() {
        let l = log(&[
            (5, 0, Acquired { token: 2 }),
            (
                6,
                0,
                Access {
                    token: 2,
                    accepted: true,
                },
            ),
            (7, 0, ReleaseCalled),
            (8, 1, Acquired { token: 1 }),
            (
                9,
                1,
                Access {
                    token: 1,
                    accepted: true,
                },
            ),
            (
                10,
                2,
                Access {
                    token: 3,
                    accepted: true,
                },
            ),
            (11, 1, ReleaseCalled),
            (12, 2, Acquired { token: 1 }),
        ]);
        let r = check_lock(&l, None);
        assert_eq!(
            named(&r),
            [
                UNIQUE_TOKENS.name,
                FENCED_EXCLUSION.name,
                FENCED_EXCLUSION.name
            ],
            "{r}"
        );
        assert!(r.violations[0].detail.contains("token 1 handed out twice"));
        assert!(r.violations[1].detail.contains("accepted token 1 after 2"));
        assert!(r.violations[2]
            .detail
            .contains("client 2 acted with token 3"));
    }

    #[test]
    fn readers_share_but_read_no_older_than_the_last_write() {
        let clean = log(&[
            (0, 0, AcquireCalled { shared: false }),
            (1, 0, Acquired { token: 1 }),
            (2, 0, access(1)),
            (3, 0, ReleaseCalled),
            (4, 0, Released),
            (5, 1, AcquireCalled { shared: true }),
            (5, 2, AcquireCalled { shared: true }),
            (6, 2, Acquired { token: 3 }),
            (7, 1, Acquired { token: 2 }),
            // Readers together, the older token after the newer: both
            // newer than the last write.
            (8, 2, access(3)),
            (9, 1, access(2)),
            (10, 1, ReleaseCalled),
            (10, 2, ReleaseCalled),
        ]);
        let r = check_lock(&clean, None);
        assert!(r.is_ok(), "{r}");
        assert_eq!((r.accesses_accepted, r.stale_beliefs), (3, 0));
        // A reader whose token is older than an accepted write's.
        let stale_read = log(&[
            (0, 0, AcquireCalled { shared: false }),
            (1, 0, Acquired { token: 5 }),
            (2, 0, access(5)),
            (3, 0, ReleaseCalled),
            (4, 1, AcquireCalled { shared: true }),
            (5, 1, Acquired { token: 3 }),
            (6, 1, access(3)),
        ]);
        let r = check_lock(&stale_read, None);
        assert_eq!(named(&r), [FENCED_EXCLUSION.name], "{r}");
        assert!(r.violations[0].detail.contains("accepted token 3 after 5"));
    }

    #[test]
    fn acting_after_being_told_the_session_ended_is_a_violation() {
        let l = log(&[
            (5, 0, Acquired { token: 1 }),
            (
                6,
                0,
                Access {
                    token: 1,
                    accepted: true,
                },
            ),
            (10, 0, SessionEnded),
            (
                11,
                0,
                Access {
                    token: 1,
                    accepted: true,
                },
            ),
            (20, 0, AcquireCalled { shared: false }),
        ]);
        let r = check_lock(&l, None);
        assert_eq!(named(&r), [TOLD_IS_TOLD.name], "{r}");
        assert!(r.violations[0]
            .detail
            .contains("told its session had ended"));
    }

    #[test]
    fn acting_while_told_disconnected_is_a_violation() {
        let disconnected = Session {
            event: SessionEvent::Disconnected,
        };
        let connected = Session {
            event: SessionEvent::Connected,
        };
        // Suspended on Disconnected, resumed on Connected, acts again: fine.
        let suspends = log(&[
            (0, 0, AcquireCalled { shared: false }),
            (5, 0, Acquired { token: 1 }),
            (6, 0, access(1)),
            (10, 0, disconnected.clone()),
            (10, 0, Suspended),
            (30, 0, connected.clone()),
            (30, 0, Resumed),
            (31, 0, access(1)),
            (40, 0, ReleaseCalled),
            (41, 0, Released),
        ]);
        let r = check_lock(&suspends, None);
        assert!(r.is_ok(), "{r}");
        // A frozen holder that acts before its machine took the
        // Disconnected its client queued: fencing's case, no violation.
        let frozen = log(&[
            (5, 0, Acquired { token: 1 }),
            (
                900,
                0,
                Access {
                    token: 1,
                    accepted: false,
                },
            ),
            (900, 0, disconnected.clone()),
            (900, 0, Suspended),
            (901, 0, Lost),
        ]);
        assert!(check_lock(&frozen, None).is_ok());
        // Told it was disconnected, acts anyway (rejected or not), and
        // never suspended: a violation, whatever fencing did.
        let acts = log(&[
            (5, 0, Acquired { token: 1 }),
            (10, 0, disconnected.clone()),
            (
                20,
                0,
                Access {
                    token: 1,
                    accepted: false,
                },
            ),
            (25, 0, access(1)),
            (30, 0, connected),
            (31, 0, access(1)),
            (40, 0, ReleaseCalled),
        ]);
        let r = check_lock(&acts, None);
        assert_eq!(
            named(&r),
            [
                SUSPEND_WHILE_DISCONNECTED.name,
                SUSPEND_WHILE_DISCONNECTED.name
            ],
            "{r}"
        );
        assert!(
            r.violations[0]
                .detail
                .contains("at 20 ms (rejected), told it was disconnected at 10 ms"),
            "{r}"
        );
        let m = |client, at_ms| Moment { client, at_ms };
        assert_eq!(r.violations[1].at, [m(0, 10), m(0, 25)]);
        // A lost session closes the window: the next session starts connected.
        let next_session = log(&[
            (5, 0, Acquired { token: 1 }),
            (10, 0, disconnected),
            (20, 0, Lost),
            (30, 0, AcquireCalled { shared: false }),
            (35, 0, Acquired { token: 2 }),
            (36, 0, access(2)),
        ]);
        assert!(check_lock(&next_session, None).is_ok());
    }

    #[test]
    fn a_herd_is_a_violation() {
        let l = log(&[
            (
                1,
                1,
                Woken {
                    path: "/l/x".into(),
                },
            ),
            (
                1,
                2,
                Woken {
                    path: "/l/x".into(),
                },
            ),
            (
                2,
                3,
                Woken {
                    path: "/l/y".into(),
                },
            ),
        ]);
        let r = check_lock(&l, None);
        assert_eq!(r.max_woken_per_deletion, 2);
        assert_eq!(named(&r), [NO_HERD.name], "{r}");
        assert!(r.violations[0]
            .detail
            .contains("/l/x woke 2 clients [1, 2]"));
        // Each woken waiter's wake-up.
        let m = |client, at_ms| Moment { client, at_ms };
        assert_eq!(r.violations[0].at, [m(1, 1), m(2, 1)]);
    }

    #[test]
    fn readers_woken_together_pass_but_not_by_a_reader() {
        let readers = |woken_by: &str| {
            log(&[
                (0, 1, AcquireCalled { shared: true }),
                (0, 2, AcquireCalled { shared: true }),
                (
                    1,
                    1,
                    Woken {
                        path: woken_by.into(),
                    },
                ),
                (
                    1,
                    2,
                    Woken {
                        path: woken_by.into(),
                    },
                ),
            ])
        };
        let r = check_lock(&readers("/l/x-write-0001"), None);
        assert!(r.is_ok(), "{r}");
        assert_eq!(r.max_woken_per_deletion, 2);
        let r = check_lock(&readers("/l/x-read-0001"), None);
        assert_eq!(named(&r), [NO_HERD.name, NO_HERD.name], "{r}");
        assert!(r.violations[0]
            .detail
            .contains("reader 1 waited on a reader's node"));
    }

    #[test]
    fn a_recipe_failure_is_a_violation() {
        let l = log(&[
            (0, 0, AcquireCalled { shared: false }),
            (
                3,
                0,
                Failed {
                    error: "NoNode".into(),
                },
            ),
        ]);
        let r = check_lock(&l, None);
        assert_eq!(named(&r), [NO_RECIPE_FAILURE.name], "{r}");
        assert_eq!(r.violations[0].detail, "client 0 failed at 3 ms: NoNode");
        assert_eq!(
            r.violations[0].to_string(),
            "no-recipe-failure: client 0 failed at 3 ms: NoNode"
        );
    }

    #[test]
    fn a_revoked_holder_must_let_go_in_time() {
        let quiet = Some(Liveness {
            from_ms: 100,
            bound_ms: 50,
            end_ms: 400,
        });
        let revoked = |let_go_at: u64| {
            log(&[
                (0, 0, AcquireCalled { shared: false }),
                (1, 0, Acquired { token: 1 }),
                (120, 1, RevokeCalled { token: 1 }),
                (121, 0, RevokeAsked),
                (let_go_at, 0, ReleaseCalled),
                (let_go_at + 1, 0, Released),
            ])
        };
        let r = check_lock(&revoked(160), quiet);
        assert!(r.is_ok(), "{r}");
        assert_eq!(
            (r.revokes_called, r.revokes_asked, r.revokes_honoured),
            (1, 1, 1)
        );
        // Let go at 200 ms, asked at 120: the bound ended at 170.
        let r = check_lock(&revoked(200), quiet);
        assert_eq!(named(&r), [REVOCATION_HONOURED.name], "{r}");
        assert!(r.violations[0].detail.contains("past 170 ms"), "{r}");
        // Without a quiet phase, only counted.
        assert!(check_lock(&revoked(200), None).is_ok());
        // Revoked while suspended (disconnected): still a live holding.
        // Back at 150, it sees the request and lets go: honoured.
        let disconnected = |back: Option<u64>| {
            let mut l = vec![
                (1, 0, Acquired { token: 1 }),
                (
                    110,
                    0,
                    Session {
                        event: SessionEvent::Disconnected,
                    },
                ),
                (110, 0, Suspended),
                (120, 1, RevokeCalled { token: 1 }),
            ];
            if let Some(at) = back {
                l.extend([
                    (
                        at,
                        0,
                        Session {
                            event: SessionEvent::Connected,
                        },
                    ),
                    (at, 0, Resumed),
                    (at + 1, 0, RevokeAsked),
                    (at + 2, 0, ReleaseCalled),
                    (at + 3, 0, Released),
                ]);
            }
            log(&l)
        };
        let r = check_lock(&disconnected(Some(150)), quiet);
        assert!(r.is_ok(), "{r}");
        assert_eq!(
            (
                r.revokes_called,
                r.revokes_honoured,
                r.revokes_while_disconnected
            ),
            (1, 1, 1)
        );
        // Never back, never told: the request never reached it.
        let r = check_lock(&disconnected(None), quiet);
        assert_eq!(named(&r), [REVOCATION_HONOURED.name], "{r}");
        assert!(
            r.violations[0]
                .detail
                .contains("(the request never reached it); it never let go"),
            "{r}"
        );
        // Told, and kept holding: an ignored revocation.
        let ignored = log(&[
            (1, 0, Acquired { token: 1 }),
            (120, 1, RevokeCalled { token: 1 }),
            (121, 0, RevokeAsked),
            (130, 0, access(1)),
        ]);
        let r = check_lock(&ignored, quiet);
        assert_eq!(named(&r), [REVOCATION_HONOURED.name], "{r}");
        assert!(
            r.violations[0]
                .detail
                .contains("(it saw the request at 121 ms); it never let go"),
            "{r}"
        );
        // A holding its holder let go of before the request: not judged.
        let late = log(&[
            (1, 0, Acquired { token: 1 }),
            (100, 0, ReleaseCalled),
            (102, 0, Released),
            (120, 1, RevokeCalled { token: 1 }),
        ]);
        let r = check_lock(&late, quiet);
        assert!(r.is_ok(), "{r}");
        assert_eq!((r.revokes_called, r.revokes_honoured), (1, 0));
    }

    #[test]
    fn liveness_judges_waits_in_the_quiet_phase_only() {
        let quiet = Liveness {
            from_ms: 100,
            bound_ms: 50,
            end_ms: 300,
        };
        // Waiting since before the quiet phase, done in time.
        let ok = log(&[
            (10, 0, AcquireCalled { shared: false }),
            (140, 0, Acquired { token: 1 }),
        ]);
        assert!(check_lock(&ok, Some(quiet)).is_ok());
        // Never done.
        let stuck = log(&[(10, 0, AcquireCalled { shared: false })]);
        let r = check_lock(&stuck, Some(quiet));
        assert_eq!(named(&r), [LIVENESS.name], "{r}");
        assert!(r.violations[0].detail.ends_with("(never done)"), "{r}");
        // Done, late.
        let late = log(&[(200, 0, ReleaseCalled), (260, 0, Released)]);
        let r = check_lock(&late, Some(quiet));
        assert_eq!(named(&r), [LIVENESS.name], "{r}");
        assert!(r.violations[0].detail.ends_with("(done at 260 ms)"), "{r}");
        // Started too close to the end to be judged; a crash ends the wait.
        let unjudged = log(&[
            (280, 0, AcquireCalled { shared: false }),
            (10, 1, AcquireCalled { shared: false }),
            (20, 1, Crashed),
        ]);
        assert!(check_lock(&unjudged, Some(quiet)).is_ok());
    }
}
