//! The world's reductions lose nothing: what they merge differs only in
//! what no run can observe.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use stateright::Model;

use super::{barrier::BarrierModel, config::ConfigModel, election::ElectionModel, lock::LockModel};
use super::{double_barrier::DoubleBarrierModel, membership::MembershipModel};
use super::{two_phase_commit::TwoPhaseCommitModel, Faults, RecipeModel, Sabotage, State, World};
use zoosim_recipes::barrier::BarrierVariant;
use zoosim_recipes::election::ElectionVariant;
use zoosim_recipes::lock::LockVariant;

/// Every state reachable in `w`.
fn reachable<R: RecipeModel>(w: &World<R>) -> HashSet<State<R>> {
    let mut seen = HashSet::new();
    let mut queue = VecDeque::new();
    for s in w.init_states() {
        if seen.insert(s.clone()) {
            queue.push_back(s);
        }
    }
    let mut actions = Vec::new();
    while let Some(s) = queue.pop_front() {
        actions.clear();
        w.actions(&s, &mut actions);
        for a in &actions {
            if let Some(t) = w.next_state(&s, *a) {
                if seen.insert(t.clone()) {
                    queue.push_back(t);
                }
            }
        }
    }
    seen
}

/// `s` with every zxid forgotten.
fn without_zxids<R: RecipeModel>(s: &State<R>) -> State<R> {
    let mut s = s.clone();
    Arc::make_mut(&mut s.tree).relabel_zxids(|_| 0);
    for t in &mut s.past {
        Arc::make_mut(t).relabel_zxids(|_| 0);
    }
    for i in 0..s.clients.len() {
        s.clients[i].last_zxid = 0;
        if let Some(f) = &mut s.clients[i].frozen {
            Arc::make_mut(&mut f.tree).relabel_zxids(|_| 0);
        }
    }
    s
}

/// The states reachable with and without canonical zxids, each with its
/// zxids forgotten: (reduced, full), and how many states each world has.
fn zxid_classes<R: RecipeModel>(
    w: &World<R>,
) -> (HashSet<State<R>>, HashSet<State<R>>, usize, usize) {
    let mut full = w.clone();
    full.canonical = false;
    full.sabotage = Sabotage::None;
    let reduced = reachable(w);
    let everything = reachable(&full);
    (
        reduced.iter().map(without_zxids).collect(),
        everything.iter().map(without_zxids).collect(),
        reduced.len(),
        everything.len(),
    )
}

/// With and without canonical zxids, the same states are reachable but for
/// their zxids, and the canonical world has fewer: the reduction merges
/// states and drops no behaviour (a canonical form that forgot an order a
/// later SetWatches or stale read compares would reach states the full
/// world cannot, or miss some).
fn canonical_zxids_lose_nothing<R: RecipeModel>(w: World<R>) {
    let (reduced, full, n_reduced, n_full) = zxid_classes(&w);
    assert_eq!(
        full.len(),
        reduced.len(),
        "{}: the canonical world reaches other states",
        w.recipe.name()
    );
    assert!(
        full == reduced,
        "{}: the canonical world reaches other states",
        w.recipe.name()
    );
    assert!(
        n_reduced < n_full,
        "{}: canonical zxids merged nothing ({n_reduced} states)",
        w.recipe.name(),
    );
}

#[test]
fn canonical_zxids_lose_no_lock_behaviour() {
    let w = World::new(LockModel::new(LockVariant::Correct), 2, Faults::ONE_EACH)
        .unwrap()
        .with_max_faults(2);
    canonical_zxids_lose_nothing(w);
}

#[test]
fn canonical_zxids_lose_no_election_behaviour() {
    // The election confirms with sync + exists: stale reads matter most.
    let w = World::new(
        ElectionModel::new(ElectionVariant::Correct),
        2,
        Faults::ONE_EACH,
    )
    .unwrap()
    .with_max_faults(2);
    canonical_zxids_lose_nothing(w);
}

#[test]
fn canonical_zxids_lose_no_barrier_behaviour() {
    let w = World::new(
        BarrierModel::new(BarrierVariant::Correct),
        3,
        Faults::ONE_EACH,
    )
    .unwrap();
    canonical_zxids_lose_nothing(w);
}

#[test]
fn canonical_zxids_lose_no_configuration_behaviour() {
    // Data watches on a node whose data changes: a SetWatches after a
    // reconnect compares its mzxid with what the session saw.
    let w = World::new(ConfigModel::new(), 2, Faults::ONE_EACH)
        .unwrap()
        .with_max_faults(2);
    canonical_zxids_lose_nothing(w);
}

#[test]
fn canonical_zxids_lose_no_double_barrier_behaviour() {
    // Exist watches on `ready` and on other processes' nodes, restored by
    // SetWatches after a break.
    let w = World::new(DoubleBarrierModel::new(2), 2, Faults::ONE_EACH).unwrap();
    canonical_zxids_lose_nothing(w);
}

#[test]
fn canonical_zxids_lose_no_two_phase_commit_behaviour() {
    // Data watches on every vote node, a child watch on the transaction.
    let w = TwoPhaseCommitModel::new(2, None)
        .world(Faults::ONE_EACH)
        .unwrap();
    canonical_zxids_lose_nothing(w);
}

#[test]
fn canonical_zxids_lose_no_membership_behaviour() {
    // A child watch on the group, whose children come and go.
    let w = World::new(MembershipModel::new(false), 2, Faults::ONE_EACH).unwrap();
    canonical_zxids_lose_nothing(w);
}

/// The check above catches an unsound zxid reduction: one that takes a
/// disconnected client's zxid for the server's last, so that SetWatches
/// would not bring it the changes it missed, reaches states the full
/// world cannot (a waiter that sleeps on) and misses some.
#[test]
fn a_zxid_reduction_that_forgets_what_a_client_missed_is_caught() {
    let mut w = World::new(ConfigModel::new(), 2, Faults::ONE_EACH).unwrap();
    w.sabotage = Sabotage::EveryZxidIsTop;
    let (reduced, full, _, _) = zxid_classes(&w);
    assert!(
        reduced.difference(&full).next().is_some() && full.difference(&reduced).next().is_some(),
        "the sabotaged reduction went unnoticed"
    );
}

/// Every order of `n` things.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut all = Vec::new();
    for p in permutations(n - 1) {
        for k in 0..n {
            let mut q = p.clone();
            q.insert(k, n - 1);
            all.push(q);
        }
    }
    all
}

/// One fingerprint per orbit: the least over every renaming of clients.
fn orbit<R: RecipeModel>(w: &World<R>, s: &State<R>, perms: &[Vec<usize>]) -> u64 {
    use std::hash::{Hash, Hasher};
    perms
        .iter()
        .map(|p| {
            let mut t = s.clone();
            w.permute(&mut t, p);
            let mut h = std::hash::DefaultHasher::new();
            t.hash(&mut h);
            h.finish()
        })
        .min()
        .unwrap()
}

/// With the symmetry reduction the same states are reached up to a
/// renaming of clients (the same orbits), and fewer of them: the
/// reduction merges states a renaming makes one of another, and drops no
/// behaviour.
fn symmetry_loses_nothing<R: RecipeModel>(w: World<R>) {
    let reduced_world = w.clone().with_symmetry().unwrap();
    let reduced = reachable(&reduced_world);
    let everything = reachable(&w);
    let perms = permutations(w.clients);
    let a: HashSet<u64> = everything.iter().map(|s| orbit(&w, s, &perms)).collect();
    let b: HashSet<u64> = reduced.iter().map(|s| orbit(&w, s, &perms)).collect();
    let extra = b.difference(&a).count();
    let missing = a.difference(&b).count();
    assert!(
        extra == 0 && missing == 0,
        "{}: the reduced world reaches {extra} orbits the full one does not, and misses {missing}",
        w.recipe.name()
    );
    assert!(
        reduced.len() * 2 < everything.len(),
        "{}: symmetry merged little ({} of {} states)",
        w.recipe.name(),
        reduced.len(),
        everything.len()
    );
}

#[test]
fn symmetry_loses_no_lock_behaviour() {
    let w = World::new(LockModel::new(LockVariant::Correct), 3, Faults::ONE_EACH).unwrap();
    symmetry_loses_nothing(w);
}

#[test]
fn symmetry_loses_no_election_behaviour() {
    let w = World::new(
        ElectionModel::new(ElectionVariant::Correct),
        3,
        Faults::ONE_EACH,
    )
    .unwrap();
    symmetry_loses_nothing(w);
}

#[test]
fn a_model_fault_has_the_simulations_name_or_one_of_its_own() {
    use super::{Fault, RENAMED_FAULTS};
    use zoosim_core::breakage::Breakage;
    use zoosim_core::fault::Fault as Sim;
    for f in Fault::ALL {
        assert_eq!(f.property(), format!("fault-{}-taken", f.name()), "{f:?}");
        assert_eq!(Fault::from_name(f.name()), Some(f));
        match f.simulated() {
            // The same fault: the same name.
            Some(sim) => assert_eq!(f.name(), sim.name()),
            // A fault of its own: a name no simulated fault or deliberate
            // server bug has, so that no reader takes one for the other.
            None => {
                assert_eq!(Sim::from_name(f.name()), None, "{f:?}");
                assert_eq!(Breakage::from_name(f.name()), None, "{f:?}");
            }
        }
    }
    // The old names still parse, to the new faults.
    for (old, new) in RENAMED_FAULTS {
        assert_eq!(Fault::from_name(old).map(Fault::name), Some(new));
        let parsed = Faults::parse(&format!("{old}=2")).expect("an old name");
        assert_eq!(parsed.to_string(), format!("{new}=2"));
    }
}

/// A vote the run chooses ([`RecipeModel::choices`], taken before the
/// first step) explores exactly the runs of both fixed votes: once chosen,
/// the states reachable are those of the model where that site votes
/// commit and of the one where it votes abort, none more, none fewer.
/// (Against the all-commit model alone the sets differ: the comparison
/// can fail.)
#[test]
fn a_chosen_vote_explores_exactly_both_fixed_votes() {
    let faults = Faults::ONE_EACH;
    let chosen = TwoPhaseCommitModel::new(2, None)
        .with_chosen_votes(0b10)
        .world(faults)
        .unwrap();
    let chosen: HashSet<_> = reachable(&chosen)
        .into_iter()
        .filter(|s| s.clients.iter().all(|c| c.app.vote.is_some()))
        .collect();
    let commit = reachable(&TwoPhaseCommitModel::new(2, None).world(faults).unwrap());
    let abort = reachable(&TwoPhaseCommitModel::new(2, Some(1)).world(faults).unwrap());
    let both: HashSet<_> = commit.union(&abort).cloned().collect();
    assert_eq!(chosen.len(), both.len());
    assert!(
        chosen == both,
        "the chosen vote's states are not both votes'"
    );
    assert!(
        chosen != commit,
        "the comparison cannot tell the votes apart"
    );
}
