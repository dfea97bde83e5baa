//! The generator of multi-session operation sequences, biased so that
//! interesting outcomes happen: a small pool of paths (so creates collide,
//! deletes find nodes, parents go missing), sequential names that the
//! sequence is likely to have produced, versions that are often right.

use proptest::prelude::*;
use zoosim::proto::{CreateMode, MultiOp, Op};

/// One step of a sequence. Paths are relative to the run's root: "" is the
/// root itself.
#[derive(Clone, Debug)]
pub enum Step {
    Op { session: usize, op: Op },
    Close { session: usize },
}

/// Paths under the root with their weights, chosen so that most ops hit
/// something: shallow nodes are created early and often.
const PATHS: &[(u32, &str)] = &[
    (2, ""),
    (6, "/a"),
    (4, "/b"),
    (3, "/a/x"),
    (1, "/a/y"),
    (1, "/b/x"),
    (3, "/e"),
    (1, "/e/c"),
    (2, "/a/s-0000000000"),
    (1, "/a/s-0000000001"),
    (1, "/a/s-0000000002"),
    (1, "/q-0000000000"),
    (1, "/q-0000000001"),
    (1, "/missing/x"),
];

/// Prefixes for sequential creates (a trailing `/` is legal there).
const SEQ_PREFIXES: &[&str] = &["/a/s-", "/a/s-", "/q-", "/a/", "/e/s-"];

/// Paths every driver must refuse at the boundary.
const BAD_PATHS: &[&str] = &["/a/", "/a//b", "/a/./b", "/a/\u{1}", "/a/.."];

fn path() -> impl Strategy<Value = String> {
    let good = PATHS
        .iter()
        .map(|&(w, p)| (w, Just(p.to_owned()).boxed()))
        .collect::<Vec<_>>();
    prop_oneof![
        40 => prop::strategy::Union::new_weighted(good),
        1 => prop::sample::select(BAD_PATHS).prop_map(str::to_owned),
    ]
}

/// Reads arm a watch two times in three: watches must fire to be compared.
fn watch() -> impl Strategy<Value = bool> {
    prop::bool::weighted(0.67)
}

fn data() -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(vec![b"".to_vec(), b"x".to_vec(), b"hello".to_vec()])
}

fn version() -> impl Strategy<Value = i32> {
    prop::sample::select(vec![-1, -1, 0, 0, 1, 2, 7])
}

fn mode() -> impl Strategy<Value = CreateMode> {
    prop_oneof![
        10 => Just(CreateMode::Persistent),
        6 => Just(CreateMode::Ephemeral),
        1 => Just(CreateMode::Container),
        1 => Just(CreateMode::PersistentWithTtl { ttl_ms: 5000 }),
    ]
}

fn seq_mode() -> impl Strategy<Value = CreateMode> {
    prop_oneof![
        3 => Just(CreateMode::PersistentSequential),
        3 => Just(CreateMode::EphemeralSequential),
        1 => Just(CreateMode::PersistentSequentialWithTtl { ttl_ms: 5000 }),
    ]
}

fn create() -> impl Strategy<Value = (String, CreateMode)> {
    prop_oneof![
        3 => (path(), mode()),
        2 => (prop::sample::select(SEQ_PREFIXES).prop_map(str::to_owned), seq_mode()),
    ]
}

fn multi_op() -> impl Strategy<Value = MultiOp> {
    prop_oneof![
        4 => (create(), data()).prop_map(|((path, mode), data)| MultiOp::Create { path, data, mode }),
        2 => (path(), version()).prop_map(|(path, version)| MultiOp::Delete { path, version }),
        2 => (path(), data(), version())
            .prop_map(|(path, data, version)| MultiOp::SetData { path, data, version }),
        2 => (path(), version()).prop_map(|(path, version)| MultiOp::Check { path, version }),
    ]
}

/// An op with paths relative to the root (made absolute by [`rooted`]).
fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        25 => (create(), data()).prop_map(|((path, mode), data)| Op::Create { path, data, mode }),
        12 => (path(), version()).prop_map(|(path, version)| Op::Delete { path, version }),
        12 => (path(), data(), version())
            .prop_map(|(path, data, version)| Op::SetData { path, data, version }),
        12 => (path(), watch()).prop_map(|(path, watch)| Op::Exists { path, watch }),
        10 => (path(), watch()).prop_map(|(path, watch)| Op::GetData { path, watch }),
        10 => (path(), watch()).prop_map(|(path, watch)| Op::GetChildren { path, watch }),
        3 => path().prop_map(|path| Op::Sync { path }),
        10 => prop::collection::vec(multi_op(), 0..=4).prop_map(Op::Multi),
    ]
}

fn step(sessions: usize) -> impl Strategy<Value = Step> {
    prop_oneof![
        // Rare: after a close, that session's ops only say SessionExpired.
        120 => (0..sessions, op()).prop_map(|(session, op)| Step::Op { session, op }),
        1 => (0..sessions).prop_map(|session| Step::Close { session }),
    ]
}

/// A case: how many sessions, and the steps (20–100).
pub fn sequence() -> impl Strategy<Value = (usize, Vec<Step>)> {
    (2usize..=4).prop_flat_map(|n| (Just(n), prop::collection::vec(step(n), 20..=100)))
}

/// Makes every path of an op absolute under `root`.
pub fn rooted(root: &str, op: &Op) -> Op {
    op.map_paths(|p| format!("{root}{p}"))
}

/// SplitMix64, for the suites whose cases are a function of their seed
/// alone (pipelined.rs, replay.rs).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    pub fn pick<T: Clone>(&mut self, v: &[T]) -> T {
        v[self.below(v.len())].clone()
    }
    pub fn weighted<T: Clone>(&mut self, v: &[(u32, T)]) -> T {
        let total: u32 = v.iter().map(|(w, _)| w).sum();
        let mut x = (self.next() % u64::from(total)) as u32;
        for (w, t) in v {
            if x < *w {
                return t.clone();
            }
            x -= w;
        }
        unreachable!()
    }
}
