//! The workspace's architecture, checked on its manifests and source text.
//!
//! 0. **The crates** ([`CRATES`]): each crate depends only on crates
//!    of a lower layer, and the pure crates (zoosim-core, zoosim-recipes,
//!    zoosim-report, zoosim-models) on no runtime crate at all (tokio,
//!    madsim, zookeeper-client, libc, futures). Read from each
//!    `Cargo.toml`; Cargo itself then refuses a path to a crate not
//!    depended on.
//! 1. **The pure core** (the [`CRATES`] marked pure: zoosim-core, zoosim-recipes,
//!    zoosim-report, zoosim-models) names no runtime, clock, file, socket,
//!    thread or process: not `tokio`, `madsim`, `std::fs`, `std::net`,
//!    `std::thread`, `std::time::Instant`, `std::time::SystemTime` or
//!    `std::process`, in a `use` or in a path in code (comments, doc
//!    comments and string literals do not count). Cargo cannot forbid
//!    `std`'s modules; this does. So the same recipe and tree code runs in
//!    the simulator, against a real server and inside the model checker.
//! 2. **The layers** ([`LAYERS`]): a top-level module may use only modules
//!    of a lower layer, so no two top-level modules use each other. A
//!    crate stands for the module the `zoosim` crate re-exports it as
//!    ([`CRATES`]: zoosim-recipes is `recipes`, zoosim-core's modules are
//!    `proto`, `tree`, ...), so the rule also orders the modules inside
//!    one crate (zoosim-core's, the `zoosim` crate's). Edges are every
//!    `crate::…`, `zoosim_*::…`, `super::…` and `self::…` path, in `use`
//!    items or in code, resolved to the module it names (aliases from
//!    `use` followed).
//!
//! `cargo test --test layers -- --nocapture` prints the dependency graph
//! found, including the one between zoosim-scenario's modules.
//!
//! The source is read with a small Rust lexer of our own (comments, strings,
//! raw strings, char literals and lifetimes told apart); the last tests
//! show that the checker reports what it should on a made-up file, and
//! nothing it should not.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------
// The rules.

/// Top-level modules by layer, bottom first. A module may use only modules
/// of a strictly lower layer (same layer: no). Why this order:
///
/// * `quote` (input quoted back to a person, cut short) is used by every
///   parser, checker and page, and uses nothing;
/// * `memory` (the counting global allocator the binary installs, and
///   the bound the commands read from it) uses nothing either: only the
///   shells (`cli`, the binary) read it, never the pure core;
/// * `proto` (the wire types) and `path` (path rules, over `proto`) are the
///   vocabulary everything else speaks;
/// * `history` (client-level histories of runs, their JSON-lines and EDN
///   forms) beside `path`: records speak `proto` only, so every checker and
///   shell above (the contract check, `zoosim lin`, the recorder) can use
///   them;
/// * `tree` is ZooKeeper's data tree and watch table, pure, over both;
/// * `check` holds the oracles: pure, generic over event logs, so
///   anything above may feed them (and may one day use `tree` as a
///   sequential specification);
/// * `client` is the `Zk` trait recipes are written against, with the
///   local (over `tree`) and real implementations; `report` (the HTML
///   and JSON reports, pure: data in, a page out) sits beside it, above
///   `check`: adapters from runs and histories to its data model live
///   above, so it knows nothing of scenarios or the ensemble;
/// * `ensemble` (the simulated servers and `SimZk`), `recipes` (state
///   machines plus async wrappers over `Zk`) and `real_server` (starts real
///   ZooKeeper processes for tests) are independent peers over `client`:
///   recipes must not know what they run on;
/// * `models` (stateright models: the recipes' machines against `tree`,
///   every interleaving) is pure like the core (the checker is run, and
///   timed, by `cli` and the tests) and needs nothing of the scenarios;
///   `trace` (the log subscriber's install) sits beside it, because
///   installing a process-wide subscriber is for the program's edge only;
/// * `scenario` puts recipes, workloads, oracles and the ensemble
///   together, and its registry holds each recipe with its model (a
///   user's too), so it sits above `models`;
/// * `prelude` (what a recipe author imports) and `testing` (a user's
///   scenario files under `cargo test`) gather what is below for users;
/// * `cli` is the command, and `main` (src/main.rs, the binary, which
///   reaches the library as `zoosim::…`) runs it.
const LAYERS: &[(&str, u32)] = &[
    ("proto", 0),
    ("fault", 0),
    ("breakage", 0),
    ("quote", 0),
    ("memory", 0),
    ("path", 1),
    ("history", 1),
    ("tree", 2),
    ("check", 3),
    ("client", 4),
    ("report", 4),
    ("ensemble", 5),
    ("recipes", 5),
    ("real_server", 5),
    ("models", 6),
    ("trace", 6),
    ("scenario", 7),
    ("cli", 8),
    ("prelude", 9),
    ("testing", 9),
    ("main", 9),
];

/// Edges (from, to) that break [`LAYERS`] today and are tolerated until
/// fixed. Each entry carries a comment "to go: <reason>"; an entry whose
/// edge no longer occurs fails the test, so the list only shrinks. Empty:
/// the code keeps its layers as of this test's writing.
const KNOWN_VIOLATIONS: &[(&str, &str)] = &[];

/// One crate of the workspace.
struct Crate {
    /// The package name, as Cargo.toml and other manifests spell it; its
    /// library is the same with `_` for `-`.
    package: &'static str,
    /// Its directory, from the repository root.
    dir: &'static str,
    /// The module path its root stands for in [`LAYERS`]: the facade
    /// `zoosim` re-exports each other crate under that module name, so a
    /// path is judged by the module it names, whichever crate spells it.
    module: &'static [&'static str],
    /// Its layer among the crates, bottom first: a crate may depend only
    /// on crates of a strictly lower layer (Cargo itself refuses only a
    /// cycle). The order [`LAYERS`] gives the modules each crate holds.
    layer: u32,
    /// The pure core: the crate names no runtime, clock, file, socket,
    /// thread or process in its code ([`FORBIDDEN`]) and depends on no
    /// runtime crate ([`RUNTIME_CRATES`]).
    pure: bool,
}

/// The workspace's crates; the facade (the repository root) first.
const CRATES: &[Crate] = &[
    krate("zoosim", ".", &[], 5, false),
    krate("zoosim-core", "crates/zoosim-core", &[], 0, true),
    krate(
        "zoosim-report",
        "crates/zoosim-report",
        &["report"],
        0,
        true,
    ),
    krate(
        "zoosim-client",
        "crates/zoosim-client",
        &["client"],
        1,
        false,
    ),
    // The recipes run over any `Zk`.
    krate(
        "zoosim-recipes",
        "crates/zoosim-recipes",
        &["recipes"],
        2,
        true,
    ),
    krate("zoosim-sim", "crates/zoosim-sim", &["ensemble"], 2, false),
    krate(
        "zoosim-models",
        "crates/zoosim-models",
        &["models"],
        3,
        true,
    ),
    krate(
        "zoosim-scenario",
        "crates/zoosim-scenario",
        &["scenario"],
        4,
        false,
    ),
];

const fn krate(
    package: &'static str,
    dir: &'static str,
    module: &'static [&'static str],
    layer: u32,
    pure: bool,
) -> Crate {
    Crate {
        package,
        dir,
        module,
        layer,
        pure,
    }
}

/// The crate whose library is named `lib` (`zoosim_core`).
fn crate_by_lib(lib: &str) -> Option<&'static Crate> {
    CRATES.iter().find(|c| c.package.replace('-', "_") == lib)
}

/// What the pure core must never name: a path is forbidden when it starts
/// with one of these (segment by segment).
const FORBIDDEN: &[&[&str]] = &[
    &["tokio"],
    &["madsim"],
    &["std", "fs"],
    &["std", "net"],
    &["std", "thread"],
    &["std", "time", "Instant"],
    &["std", "time", "SystemTime"],
    &["std", "process"],
];

/// What a pure crate must not depend on.
const RUNTIME_CRATES: &[&str] = &["tokio", "madsim", "zookeeper-client", "libc", "futures"];

// ---------------------------------------------------------------------------
// The tests.

#[test]
fn crates_depend_only_on_lower_crates_and_pure_ones_on_no_runtime() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.clone()];
    let mut members: Vec<PathBuf> = fs::read_dir(root.join("crates"))
        .expect("crates/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    members.sort();
    assert!(members.len() >= 7, "the workspace's crates: {members:?}");
    dirs.extend(members);
    let mut problems = Vec::new();
    for dir in dirs {
        let text = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        problems.extend(manifest_problems(&text));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_pure_core_names_no_runtime_clock_file_socket_thread_or_process() {
    let files = crate_sources();
    // Not vacuous: the core's files are all read.
    let core: Vec<&str> = files
        .iter()
        .map(|f| f.rel.as_str())
        .filter(|rel| in_pure_core(rel))
        .collect();
    for must in [
        "crates/zoosim-core/src/proto.rs",
        "crates/zoosim-core/src/path.rs",
        "crates/zoosim-core/src/tree/mod.rs",
        "crates/zoosim-recipes/src/lock.rs",
        "crates/zoosim-core/src/check/lock.rs",
    ] {
        assert!(
            core.contains(&must),
            "{must} not among the core's files: {core:?}"
        );
    }
    let facts = analyze_all(&files);
    let hits: Vec<String> = facts
        .iter()
        .flat_map(|f| f.forbidden.iter().cloned())
        .collect();
    assert!(
        hits.is_empty(),
        "the pure core ({}) must not name {}:\n{}",
        CRATES
            .iter()
            .filter(|c| c.pure)
            .map(|c| c.package)
            .collect::<Vec<_>>()
            .join(", "),
        FORBIDDEN
            .iter()
            .map(|p| p.join("::"))
            .collect::<Vec<_>>()
            .join(", "),
        hits.join("\n")
    );
}

#[test]
fn top_level_modules_keep_their_layers() {
    let files = crate_sources();
    let facts = analyze_all(&files);
    let graph = Graph::of(&facts);
    eprintln!("{}", graph.render());

    let problems = layer_problems(&graph, KNOWN_VIOLATIONS);
    assert!(
        problems.is_empty(),
        "the module layers are broken (layers, bottom first: {}):\n{}",
        layers_line(),
        problems.join("\n")
    );

    // Inside src/scenario: no two submodules use each other (one order,
    // bottom first: workload, verdict <- sim <- recipe <- builtin <-
    // registry <- spec <- files, run <- runner <- shrink).
    let mutual: Vec<String> = graph
        .scenario
        .keys()
        .filter(|(a, b)| a < b && graph.scenario.contains_key(&(b.clone(), a.clone())))
        .map(|(a, b)| {
            format!(
                "scenario::{a} <-> scenario::{b}\n    {}\n    {}",
                graph.scenario[&(a.clone(), b.clone())][0],
                graph.scenario[&(b.clone(), a.clone())][0]
            )
        })
        .collect();
    assert!(
        mutual.is_empty(),
        "zoosim-scenario's modules use each other:\n{}",
        mutual.join("\n")
    );

    // The allow-list only shrinks: an entry whose edge is gone must go.
    let stale: Vec<String> = KNOWN_VIOLATIONS
        .iter()
        .filter(|(from, to)| {
            !graph
                .edges
                .contains_key(&(from.to_string(), to.to_string()))
        })
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    assert!(
        stale.is_empty(),
        "KNOWN_VIOLATIONS lists edges that no longer occur; remove them: {}",
        stale.join(", ")
    );
}

#[test]
fn every_module_is_found_and_has_a_layer() {
    let files = crate_sources();
    let tops: BTreeSet<&str> = files
        .iter()
        .filter_map(|f| f.module.first().map(String::as_str))
        .collect();
    let missing: Vec<&str> = tops
        .iter()
        .copied()
        .filter(|m| layer_of(m).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "top-level modules without a layer in tests/layers.rs's LAYERS: {missing:?}"
    );
    // The module tree from src/lib.rs and src/main.rs reaches every file,
    // through `mod x;` (as `x.rs`, `x/mod.rs`, or under `parent/` for a
    // `parent.rs`) and `#[path]` alike: `super::` is resolved against the
    // true module paths. A file it misses is not part of the crate.
    let unreached: Vec<&str> = files
        .iter()
        .filter(|f| !f.reached)
        .map(|f| f.rel.as_str())
        .collect();
    assert!(
        unreached.is_empty(),
        "files under src/ no `mod` declaration reaches: {unreached:?}"
    );
    for (file, module) in [
        (
            "crates/zoosim-sim/src/server/leader.rs",
            "ensemble::server::leader",
        ),
        ("crates/zoosim-core/src/tree/txn.rs", "tree::txn"),
    ] {
        let found = files
            .iter()
            .find(|f| f.rel == file)
            .unwrap_or_else(|| panic!("{file} not read"));
        assert_eq!(found.module.join("::"), module, "module path of {file}");
    }
}

#[test]
fn the_checker_reports_a_runtime_in_the_pure_core() {
    // A made-up file of the tree: the checker must bite on what is named in
    // code, and on nothing in comments or strings.
    let text = "\
//! tokio, madsim and std::fs in a doc comment do not count.
use tokio::sync::Notify;
// use std::thread; in a comment does not count
const S: &str = \"madsim::time::sleep\";
use std::time::{
    Duration,
    Instant,
};
use std::time;
fn f(d: Duration) -> char {
    std::thread::sleep(d);
    let _ = time::SystemTime::now();
    let _n = Notify::new();
    '\"'
}
use crate::scenario::spec::Scenario;
use super::DataTree;
";
    let file = SourceFile::made_up("crates/zoosim-core/src/tree/x.rs", text);
    let facts = analyze(&file);
    let lines: Vec<usize> = facts.forbidden_lines.clone();
    // Line 2 (tokio), 7 (Instant, inside a multi-line group), 11
    // (std::thread), 12 (SystemTime through the `time` alias). Not line 1,
    // 3 or 4 (doc comment, comment, string), and not line 13: `Notify` was
    // reported at its `use`.
    assert_eq!(lines, vec![2, 7, 11, 12], "{:#?}", facts.forbidden);
    assert!(
        facts.forbidden[0].starts_with("crates/zoosim-core/src/tree/x.rs:2: "),
        "{}",
        facts.forbidden[0]
    );
    assert!(
        facts.forbidden[0].contains("tokio::sync::Notify"),
        "{}",
        facts.forbidden[0]
    );

    // The same text in a file outside the pure core is not its business.
    let shell = analyze(&SourceFile::made_up("crates/zoosim-sim/src/sim/x.rs", text));
    assert!(shell.forbidden.is_empty(), "{:#?}", shell.forbidden);
}

#[test]
fn the_checker_reports_an_import_from_a_higher_layer() {
    let tree = SourceFile::made_up(
        "crates/zoosim-core/src/tree/x.rs",
        "use super::DataTree;\nuse crate::scenario::spec::Scenario;\nfn f() { crate::proto::Zxid::default(); }\n",
    );
    let scenario = SourceFile::made_up(
        "crates/zoosim-scenario/src/y.rs",
        "use zoosim_core::tree::DataTree;\n",
    );
    let facts = analyze_all(&[tree, scenario]);
    let graph = Graph::of(&facts);
    let problems = layer_problems(&graph, &[]);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].contains("crates/zoosim-core/src/tree/x.rs:2")
            && problems[0].contains("tree (layer 2) uses scenario (layer 7)")
            && problems[0].contains("use crate::scenario::spec::Scenario;"),
        "{}",
        problems[0]
    );
    assert!(
        problems[1].contains("scenario <-> tree"),
        "a mutual use is reported as such: {}",
        problems[1]
    );
    // tree -> proto (line 3, a path in code) is allowed; `super::DataTree`
    // stays inside tree.
    assert!(graph.edges.contains_key(&("tree".into(), "proto".into())));
    assert!(!graph.edges.contains_key(&("tree".into(), "tree".into())));

    // And an allow-listed edge is tolerated.
    let problems = layer_problems(&graph, &[("tree", "scenario")]);
    assert!(problems.is_empty(), "{problems:#?}");
}

/// What is wrong with one crate's manifest: a crate not in [`CRATES`]
/// (its sources would go unread), a dependency on a crate not below it,
/// a runtime under a pure crate.
fn manifest_problems(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let doc: toml::Table = toml::from_str(text).unwrap();
    let name = doc["package"]["name"].as_str().unwrap().to_string();
    let Some(krate) = CRATES.iter().find(|c| c.package == name) else {
        problems.push(format!("{name}: not in CRATES"));
        return problems;
    };
    let layer = krate.layer;
    // Normal dependencies, also those under [target.'cfg(..)'].
    let mut deps: Vec<String> = Vec::new();
    let mut take = |t: Option<&toml::Value>| {
        if let Some(t) = t.and_then(|t| t.as_table()) {
            deps.extend(t.keys().cloned());
        }
    };
    take(doc.get("dependencies"));
    if let Some(targets) = doc.get("target").and_then(|t| t.as_table()) {
        for t in targets.values() {
            take(t.get("dependencies"));
        }
    }
    for dep in &deps {
        if let Some(l) = CRATES.iter().find(|c| c.package == dep).map(|c| c.layer) {
            if l >= layer {
                problems.push(format!(
                    "{name} (layer {layer}) depends on {dep} (layer {l}), not below it"
                ));
            }
        }
        if krate.pure && RUNTIME_CRATES.contains(&dep.as_str()) {
            problems.push(format!("{name} is pure but depends on {dep}"));
        }
    }
    problems
}

#[test]
fn the_manifest_check_reports_an_upward_and_a_runtime_dependency() {
    let text = "[package]\nname = \"zoosim-recipes\"\n\n[dependencies]\n\
                zoosim-core.workspace = true\nzoosim-scenario.workspace = true\n\n\
                [target.'cfg(madsim)'.dependencies]\nmadsim.workspace = true\n";
    let problems = manifest_problems(text);
    assert_eq!(
        problems,
        [
            "zoosim-recipes (layer 2) depends on zoosim-scenario (layer 4), not below it",
            "zoosim-recipes is pure but depends on madsim",
        ],
    );
    let unknown = manifest_problems("[package]\nname = \"zoosim-extra\"\n");
    assert_eq!(unknown, ["zoosim-extra: not in CRATES"]);
}

// ---------------------------------------------------------------------------
// Reading the crate.

struct SourceFile {
    /// Path from the crate root, with `/`: `src/tree/txn.rs`.
    rel: String,
    /// Module path: `["tree", "txn"]`; `["main"]` for src/main.rs.
    module: Vec<String>,
    /// The module path the file's crate root stands for (see [`CRATES`]):
    /// what `crate::` means in it.
    root: Vec<String>,
    text: String,
    /// Reached from src/lib.rs or src/main.rs through `mod` declarations
    /// (else its module path is guessed from its location).
    reached: bool,
}

impl SourceFile {
    fn made_up(rel: &str, text: &str) -> SourceFile {
        SourceFile {
            rel: rel.to_string(),
            module: module_from_file_path(rel),
            root: crate_of(rel).module.iter().map(|s| s.to_string()).collect(),
            text: text.to_string(),
            reached: false,
        }
    }
}

/// Every .rs file under each crate's src/: those reachable from its
/// lib.rs through `mod` declarations with their true module paths,
/// src/main.rs as `main`, and any other file with the module path its
/// location suggests.
fn crate_sources() -> Vec<SourceFile> {
    let mut out = Vec::new();
    for c in CRATES {
        read_crate(c.dir, c.module, &mut out);
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}

/// `dir` joined to a path inside it, as the repository-relative path
/// the tests name files by (`src/...` for the facade).
fn under(dir: &str, rel: &str) -> String {
    if dir == "." {
        rel.to_string()
    } else {
        format!("{dir}/{rel}")
    }
}

fn read_crate(dir: &str, prefix: &[&str], out: &mut Vec<SourceFile>) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let read = |rel: &str| {
        fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
    };
    let crate_root: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
    let mut seen = BTreeSet::new();
    let mut queue = vec![(under(dir, "src/lib.rs"), crate_root.clone())];
    while let Some((rel, module)) = queue.pop() {
        if !seen.insert(rel.clone()) {
            continue;
        }
        let text = read(&rel);
        let toks = lex(&text);
        for decl in mod_decls(&toks, &module) {
            let dir = Path::new(&rel).parent().unwrap().to_path_buf();
            let child_rel = if let Some(p) = &decl.path_attr {
                dir.join(p)
            } else {
                let stem = Path::new(&rel)
                    .file_stem()
                    .unwrap()
                    .to_string_lossy()
                    .to_string();
                let mut base = if matches!(stem.as_str(), "lib" | "main" | "mod") {
                    dir
                } else {
                    dir.join(&stem)
                };
                for inline in &decl.module[module.len()..decl.module.len() - 1] {
                    base = base.join(inline);
                }
                let name = decl.module.last().unwrap();
                let flat = base.join(format!("{name}.rs"));
                if root.join(&flat).exists() {
                    flat
                } else {
                    base.join(name).join("mod.rs")
                }
            };
            let child_rel = child_rel.to_string_lossy().replace('\\', "/");
            if root.join(&child_rel).exists() {
                queue.push((child_rel, decl.module));
            }
        }
        out.push(SourceFile {
            rel,
            module,
            root: crate_root.clone(),
            text,
            reached: true,
        });
    }
    let main = under(dir, "src/main.rs");
    if root.join(&main).exists() && seen.insert(main.clone()) {
        out.push(SourceFile {
            text: read(&main),
            rel: main,
            module: vec!["main".to_string()],
            root: crate_root.clone(),
            reached: true,
        });
    }
    let mut all = Vec::new();
    collect_rs(&root, &root.join(dir).join("src"), &mut all);
    for rel in all {
        if seen.insert(rel.clone()) {
            let text = read(&rel);
            out.push(SourceFile {
                module: module_from_file_path(&rel),
                root: crate_root.clone(),
                rel,
                text,
                reached: false,
            });
        }
    }
}

fn collect_rs(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_rs(root, &p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let rel = rel.strip_prefix("./").unwrap_or(&rel).to_string();
            out.push(rel);
        }
    }
}

/// The crate a repository-relative file belongs to (see [`CRATES`]).
fn crate_of(rel: &str) -> &'static Crate {
    CRATES
        .iter()
        .filter(|c| c.dir != ".")
        .find(|c| rel.starts_with(&format!("{}/", c.dir)))
        .unwrap_or(&CRATES[0])
}

/// `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`; `src/lib.rs` the root;
/// `src/main.rs` is `main`. A file of another crate is under the module
/// its crate root stands for: `crates/zoosim-core/src/tree/txn.rs` is
/// `tree::txn`.
fn module_from_file_path(rel: &str) -> Vec<String> {
    let krate = crate_of(rel);
    let inner = rel.strip_prefix(&under(krate.dir, "src/")).unwrap_or(rel);
    let inner = inner.strip_suffix(".rs").unwrap_or(inner);
    let mut parts: Vec<String> = inner.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] {
        parts.clear();
    }
    let mut module: Vec<String> = krate.module.iter().map(|s| s.to_string()).collect();
    module.extend(parts);
    module
}

fn layer_of(module: &str) -> Option<u32> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|&(_, l)| l)
}

fn layers_line() -> String {
    let mut by: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for (m, l) in LAYERS {
        by.entry(*l).or_default().push(m);
    }
    by.values()
        .map(|ms| ms.join(" / "))
        .collect::<Vec<_>>()
        .join(" <- ")
}

// ---------------------------------------------------------------------------
// A small Rust lexer: identifiers, `::`, punctuation and string literals,
// with line numbers; comments, char literals and lifetimes dropped.

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Punct(&'static str),
    Other,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
}

fn lex(text: &str) -> Vec<Token> {
    let c: Vec<char> = text.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut toks = Vec::new();
    let mut line = 1;
    let mut i = 0;
    // Scans a (raw or not) string body from `i` (just past the opening
    // quote) to its end; returns the content and the index past the end.
    let string = |mut i: usize, hashes: Option<usize>, line: &mut usize| {
        let mut s = String::new();
        while i < c.len() {
            let ch = c[i];
            if ch == '\n' {
                *line += 1;
            }
            match hashes {
                None if ch == '\\' => {
                    if at(i + 1) == '\n' {
                        *line += 1;
                    }
                    s.push(at(i + 1));
                    i += 2;
                    continue;
                }
                None if ch == '"' => return (s, i + 1),
                Some(n) if ch == '"' && (1..=n).all(|k| at(i + k) == '#') => return (s, i + 1 + n),
                _ => {}
            }
            s.push(ch);
            i += 1;
        }
        (s, i)
    };
    while i < c.len() {
        let ch = c[i];
        let start_line = line;
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 1;
            i += 2;
            while i < c.len() && depth > 0 {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == '"' {
            let (s, next) = string(i + 1, None, &mut line);
            toks.push(Token {
                tok: Tok::Str(s),
                line: start_line,
            });
            i = next;
        } else if (ch == 'r' || (ch == 'b' && at(i + 1) == 'r')) && {
            let j = if ch == 'b' { i + 2 } else { i + 1 };
            let mut k = j;
            while at(k) == '#' {
                k += 1;
            }
            at(k) == '"'
        } {
            let j = if ch == 'b' { i + 2 } else { i + 1 };
            let mut k = j;
            while at(k) == '#' {
                k += 1;
            }
            let (s, next) = string(k + 1, Some(k - j), &mut line);
            toks.push(Token {
                tok: Tok::Str(s),
                line: start_line,
            });
            i = next;
        } else if ch == 'b' && at(i + 1) == '"' {
            let (s, next) = string(i + 2, None, &mut line);
            toks.push(Token {
                tok: Tok::Str(s),
                line: start_line,
            });
            i = next;
        } else if ch == 'b' && at(i + 1) == '\'' {
            i += 1; // a byte char: the quote below takes it
        } else if ch == '\'' {
            if at(i + 1) == '\\' {
                // An escaped char literal: '\n', '\'', '\u{…}'.
                let mut j = i + 3;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
            } else if at(i + 2) == '\'' {
                i += 3; // 'x'
            } else {
                i += 1; // a lifetime or label: its name lexes next
            }
        } else if ch == 'r' && at(i + 1) == '#' && (at(i + 2).is_alphabetic() || at(i + 2) == '_') {
            i += 2; // a raw identifier: r#type lexes as `type`
        } else if ch.is_alphanumeric() || ch == '_' {
            let mut j = i;
            while j < c.len() && (c[j].is_alphanumeric() || c[j] == '_') {
                j += 1;
            }
            let word: String = c[i..j].iter().collect();
            toks.push(Token {
                tok: Tok::Ident(word),
                line: start_line,
            });
            i = j;
        } else if ch == ':' && at(i + 1) == ':' {
            toks.push(Token {
                tok: Tok::Punct("::"),
                line: start_line,
            });
            i += 2;
        } else {
            let p = match ch {
                '{' => Tok::Punct("{"),
                '}' => Tok::Punct("}"),
                ';' => Tok::Punct(";"),
                ',' => Tok::Punct(","),
                '*' => Tok::Punct("*"),
                '=' => Tok::Punct("="),
                '#' => Tok::Punct("#"),
                '<' => Tok::Punct("<"),
                '>' => Tok::Punct(">"),
                _ => Tok::Other,
            };
            toks.push(Token {
                tok: p,
                line: start_line,
            });
            i += 1;
        }
    }
    toks
}

fn ident(t: Option<&Token>) -> Option<&str> {
    match t {
        Some(Token {
            tok: Tok::Ident(s), ..
        }) => Some(s),
        _ => None,
    }
}

fn is(t: Option<&Token>, p: &str) -> bool {
    matches!(t, Some(Token { tok: Tok::Punct(q), .. }) if *q == p)
}

// ---------------------------------------------------------------------------
// From tokens to paths.

/// A `mod name;` declaration (not an inline `mod name { … }`).
struct ModDecl {
    /// The declared module's full path.
    module: Vec<String>,
    path_attr: Option<String>,
}

/// The module path in force at each token: the file's, plus the inline
/// `mod x { … }` blocks open there.
fn module_contexts(toks: &[Token], file_module: &[String]) -> Vec<Vec<String>> {
    let mut ctx = Vec::with_capacity(toks.len());
    let mut depth = 0usize;
    let mut inline: Vec<(String, usize)> = Vec::new();
    let current = |inline: &[(String, usize)]| {
        let mut m = file_module.to_vec();
        m.extend(inline.iter().map(|(n, _)| n.clone()));
        m
    };
    let mut cur = current(&inline);
    for (i, t) in toks.iter().enumerate() {
        ctx.push(cur.clone());
        if is(Some(t), "{") {
            if i >= 2 && ident(toks.get(i - 2)) == Some("mod") {
                if let Some(name) = ident(toks.get(i - 1)) {
                    inline.push((name.to_string(), depth));
                    cur = current(&inline);
                }
            }
            depth += 1;
        } else if is(Some(t), "}") {
            depth = depth.saturating_sub(1);
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
                cur = current(&inline);
            }
        }
    }
    ctx
}

fn mod_decls(toks: &[Token], file_module: &[String]) -> Vec<ModDecl> {
    let ctx = module_contexts(toks, file_module);
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if ident(Some(t)) != Some("mod") || !is(toks.get(i + 2), ";") {
            continue;
        }
        let Some(name) = ident(toks.get(i + 1)) else {
            continue;
        };
        // A `#[path = "…"]` among the attributes just before.
        let mut path_attr = None;
        let mut j = i;
        while j > 0 {
            j -= 1;
            if is(toks.get(j), ";") || is(toks.get(j), "{") || is(toks.get(j), "}") {
                break;
            }
            if ident(toks.get(j)) == Some("path") && is(toks.get(j + 1), "=") {
                if let Some(Token {
                    tok: Tok::Str(s), ..
                }) = toks.get(j + 2)
                {
                    path_attr = Some(s.clone());
                }
            }
        }
        let mut module = ctx[i].clone();
        module.push(name.to_string());
        out.push(ModDecl { module, path_attr });
    }
    out
}

/// A path as written, where it was written.
#[derive(Clone, Debug)]
struct Written {
    segs: Vec<String>,
    glob: bool,
    /// The name a `use` binds (`None` for code paths, globs and `as _`).
    alias: Option<String>,
    is_use: bool,
    line: usize,
    ctx: Vec<String>,
}

/// A path resolved: inside the crate (module path from the root), or
/// outside it (an extern crate, std, or a local item).
#[derive(Clone, Debug, PartialEq)]
enum Resolved {
    Crate(Vec<String>),
    Outside(Vec<String>),
}

fn written_paths(toks: &[Token], ctx: &[Vec<String>]) -> Vec<Written> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let word = ident(toks.get(i));
        if word == Some("use") {
            let mut leaves = Vec::new();
            let end = use_tree(toks, i + 1, true, Vec::new(), &mut leaves);
            for (segs, glob, alias, line) in leaves {
                out.push(Written {
                    segs,
                    glob,
                    alias,
                    is_use: true,
                    line,
                    ctx: ctx[i].clone(),
                });
            }
            i = end;
            continue;
        }
        if word == Some("extern") && ident(toks.get(i + 1)) == Some("crate") {
            if let Some(name) = ident(toks.get(i + 2)) {
                out.push(Written {
                    segs: vec![name.to_string()],
                    glob: false,
                    alias: Some(name.to_string()),
                    is_use: true,
                    line: toks[i].line,
                    ctx: ctx[i].clone(),
                });
            }
            i += 3;
            continue;
        }
        let path_start = !(i > 0 && is(toks.get(i - 1), "::"));
        if let (Some(word), true) = (word, path_start) {
            let mut segs = vec![word.to_string()];
            let mut j = i;
            while is(toks.get(j + 1), "::") {
                match ident(toks.get(j + 2)) {
                    Some(s) => {
                        segs.push(s.to_string());
                        j += 2;
                    }
                    None => break,
                }
            }
            if segs.len() >= 2 {
                out.push(Written {
                    segs,
                    glob: false,
                    alias: None,
                    is_use: false,
                    line: toks[i].line,
                    ctx: ctx[i].clone(),
                });
            }
            i = j + 1;
            continue;
        }
        i += 1;
    }
    out
}

/// A `use` leaf: path, glob, the name it binds, line.
type UseLeaf = (Vec<String>, bool, Option<String>, usize);

/// Parses one use tree from `i`; pushes its leaves (path, glob, bound
/// name, line) and returns the index past it (past the `;` at the top).
fn use_tree(
    toks: &[Token],
    mut i: usize,
    top: bool,
    mut prefix: Vec<String>,
    out: &mut Vec<UseLeaf>,
) -> usize {
    if is(toks.get(i), "::") {
        i += 1;
    }
    loop {
        let t = toks.get(i);
        if is(t, "{") {
            i += 1;
            while i < toks.len() && !is(toks.get(i), "}") {
                let before = i;
                i = use_tree(toks, i, false, prefix.clone(), out);
                if is(toks.get(i), ",") {
                    i += 1;
                }
                if i == before {
                    i += 1; // not a use tree: step over it
                }
            }
            i += 1;
            break;
        } else if is(t, "*") {
            out.push((prefix.clone(), true, None, t.unwrap().line));
            i += 1;
            break;
        } else if let Some(name) = ident(t) {
            let line = t.unwrap().line;
            prefix.push(name.to_string());
            i += 1;
            if is(toks.get(i), "::") {
                i += 1;
                continue;
            }
            let mut alias = None;
            if prefix.last().is_some_and(|s| s == "self") {
                prefix.pop();
                alias = prefix.last().cloned();
            }
            if ident(toks.get(i)) == Some("as") {
                alias = ident(toks.get(i + 1)).map(str::to_string);
                i += 2;
            } else if alias.is_none() {
                alias = prefix.last().cloned();
            }
            let alias = alias.filter(|a| a != "_");
            out.push((prefix.clone(), false, alias, line));
            break;
        } else {
            break;
        }
    }
    if top {
        // Skip to the end of the item.
        while i < toks.len() && !is(toks.get(i), ";") {
            i += 1;
        }
        i += 1;
    }
    i
}

/// Resolves a written path: `crate::` (the module its crate's root stands
/// for, `root`), a crate's name (`zoosim::`, as src/main.rs writes it, or
/// `zoosim_core::`), `super::`, `self::`, a child module of the current
/// one, or a name a `use` of this file bound.
fn resolve(
    segs: &[String],
    root: &[String],
    ctx: &[String],
    aliases: &BTreeMap<String, Resolved>,
    children: &BTreeSet<Vec<String>>,
) -> Resolved {
    let first = segs.first().map(String::as_str).unwrap_or("");
    if let Some(krate) = crate_by_lib(first) {
        let mut p: Vec<String> = krate.module.iter().map(|s| s.to_string()).collect();
        p.extend_from_slice(&segs[1..]);
        return Resolved::Crate(p);
    }
    match first {
        "crate" => Resolved::Crate([root, &segs[1..]].concat()),
        "super" | "self" => {
            let mut base = ctx.to_vec();
            let mut k = 0;
            while segs.get(k).is_some_and(|s| s == "super" || s == "self") {
                if segs[k] == "super" {
                    base.pop();
                }
                k += 1;
            }
            base.extend_from_slice(&segs[k..]);
            Resolved::Crate(base)
        }
        _ => {
            let mut child = ctx.to_vec();
            child.push(first.to_string());
            if children.contains(&child) {
                child.extend_from_slice(&segs[1..]);
                return Resolved::Crate(child);
            }
            match aliases.get(first) {
                Some(Resolved::Crate(p)) => {
                    let mut p = p.clone();
                    p.extend_from_slice(&segs[1..]);
                    Resolved::Crate(p)
                }
                Some(Resolved::Outside(p)) if p.len() > 1 || p[0] != first => {
                    let mut p = p.clone();
                    p.extend_from_slice(&segs[1..]);
                    Resolved::Outside(p)
                }
                _ => Resolved::Outside(segs.to_vec()),
            }
        }
    }
}

fn forbidden_prefix(path: &[String], glob: bool) -> Option<String> {
    FORBIDDEN.iter().find_map(|f| {
        let starts = path.len() >= f.len() && f.iter().zip(path).all(|(a, b)| a == b);
        // `use std::time::*` brings `Instant` in unnamed: as bad.
        let glob_over =
            glob && path.len() < f.len() && path.iter().zip(f.iter()).all(|(a, b)| a == b);
        (starts || glob_over).then(|| f.join("::"))
    })
}

fn in_pure_core(rel: &str) -> bool {
    crate_of(rel).pure
}

/// What one file names.
struct Facts {
    rel: String,
    module: Vec<String>,
    /// Crate-internal references: (resolved module path, line, source
    /// line, whether in a `tests` module).
    refs: Vec<(Vec<String>, usize, String, bool)>,
    /// Pure-core violations, as messages, and their lines.
    forbidden: Vec<String>,
    forbidden_lines: Vec<usize>,
}

fn analyze_all(files: &[SourceFile]) -> Vec<Facts> {
    files.iter().map(analyze).collect()
}

fn analyze(file: &SourceFile) -> Facts {
    let toks = lex(&file.text);
    let ctx = module_contexts(&toks, &file.module);
    let lines: Vec<&str> = file.text.lines().collect();
    let src_line = |n: usize| lines.get(n - 1).map(|l| l.trim()).unwrap_or("").to_string();

    // Child modules declared here (`mod x;` and inline), for bare paths.
    let mut children: BTreeSet<Vec<String>> = mod_decls(&toks, &file.module)
        .into_iter()
        .map(|d| d.module)
        .collect();
    for (i, c) in ctx.iter().enumerate() {
        if i > 0 && ctx[i - 1].len() < c.len() {
            children.insert(c.clone());
        }
    }

    let written = written_paths(&toks, &ctx);
    // The names this file's `use`s bind; a few rounds, as one `use` may
    // start from a name another binds (`use check::lock::…` after
    // `use crate::check::{self, …}`).
    let mut aliases: BTreeMap<String, Resolved> = BTreeMap::new();
    for _ in 0..4 {
        for w in written.iter().filter(|w| w.is_use && !w.glob) {
            if let Some(a) = &w.alias {
                let r = resolve(&w.segs, &file.root, &w.ctx, &aliases, &children);
                aliases.insert(a.clone(), r);
            }
        }
    }

    let pure = in_pure_core(&file.rel);
    let mut facts = Facts {
        rel: file.rel.clone(),
        module: file.module.clone(),
        refs: Vec::new(),
        forbidden: Vec::new(),
        forbidden_lines: Vec::new(),
    };
    for w in &written {
        let r = resolve(&w.segs, &file.root, &w.ctx, &aliases, &children);
        match &r {
            Resolved::Crate(p) => {
                let in_tests = w.ctx.iter().any(|m| m == "tests");
                facts
                    .refs
                    .push((p.clone(), w.line, src_line(w.line), in_tests));
            }
            Resolved::Outside(p) if pure => {
                let Some(what) = forbidden_prefix(p, w.glob) else {
                    continue;
                };
                // A code path through a name whose `use` was already
                // reported is not reported again.
                if !w.is_use {
                    if let Some(Resolved::Outside(target)) = aliases.get(&w.segs[0]) {
                        if forbidden_prefix(target, false).is_some() {
                            continue;
                        }
                    }
                }
                if facts.forbidden_lines.last() == Some(&w.line) {
                    continue;
                }
                facts.forbidden_lines.push(w.line);
                facts.forbidden.push(format!(
                    "{}:{}: `{}` names {what} (as `{}{}`)",
                    file.rel,
                    w.line,
                    src_line(w.line),
                    p.join("::"),
                    if w.glob { "::*" } else { "" },
                ));
            }
            Resolved::Outside(_) => {}
        }
    }
    facts
}

// ---------------------------------------------------------------------------
// The graph.

/// Where an edge was seen: `file:line: source line`.
type Sites = Vec<String>;

struct Graph {
    /// (from, to) top-level modules, from != to.
    edges: BTreeMap<(String, String), Sites>,
    /// The same between src/scenario's submodules.
    scenario: BTreeMap<(String, String), Sites>,
    tops: BTreeSet<String>,
}

impl Graph {
    fn of(facts: &[Facts]) -> Graph {
        let mut tops: BTreeSet<String> = facts
            .iter()
            .filter_map(|f| f.module.first().cloned())
            .collect();
        tops.extend(LAYERS.iter().map(|(m, _)| m.to_string()));
        let scenario_subs: BTreeSet<String> = facts
            .iter()
            .filter(|f| f.module.first().is_some_and(|m| m == "scenario"))
            .filter_map(|f| f.module.get(1).cloned())
            .collect();
        let mut g = Graph {
            edges: BTreeMap::new(),
            scenario: BTreeMap::new(),
            tops,
        };
        for f in facts {
            let Some(from) = f.module.first() else {
                continue;
            };
            for (path, line, text, in_tests) in &f.refs {
                let Some(to) = path.first() else { continue };
                let test = if *in_tests { " (test code)" } else { "" };
                let site = format!("{}:{line}: {text}{test}", f.rel);
                if to != from && g.tops.contains(to) {
                    g.edges
                        .entry((from.clone(), to.clone()))
                        .or_default()
                        .push(site);
                } else if to == from && from == "scenario" {
                    if let (Some(a), Some(b)) = (f.module.get(1), path.get(1)) {
                        if a != b && scenario_subs.contains(b) {
                            g.scenario
                                .entry((a.clone(), b.clone()))
                                .or_default()
                                .push(site);
                        }
                    }
                }
            }
        }
        g
    }

    fn render(&self) -> String {
        let mut s = format!(
            "Layers, bottom first: {}\n\nTop-level modules use:\n",
            layers_line()
        );
        let mut order: Vec<&String> = self.tops.iter().collect();
        order.sort_by_key(|m| (layer_of(m).unwrap_or(u32::MAX), m.to_string()));
        for m in order {
            let uses: Vec<String> = self
                .edges
                .iter()
                .filter(|((a, _), _)| a == m)
                .map(|((_, b), sites)| format!("{b} ({})", sites.len()))
                .collect();
            let layer = layer_of(m).map_or("?".to_string(), |l| l.to_string());
            s += &format!(
                "  [{layer}] {m} -> {}\n",
                if uses.is_empty() {
                    "-".into()
                } else {
                    uses.join(", ")
                }
            );
        }
        s += "\nsrc/scenario's submodules use:\n";
        let mut subs: BTreeMap<&String, Vec<String>> = BTreeMap::new();
        for ((a, b), sites) in &self.scenario {
            subs.entry(a)
                .or_default()
                .push(format!("{b} ({})", sites.len()));
        }
        for (a, uses) in subs {
            s += &format!("  scenario::{a} -> {}\n", uses.join(", "));
        }
        let mutual: Vec<String> = self
            .scenario
            .keys()
            .filter(|(a, b)| a < b && self.scenario.contains_key(&(b.clone(), a.clone())))
            .map(|(a, b)| {
                format!(
                    "  scenario::{a} <-> scenario::{b}\n    {}\n    {}",
                    self.scenario[&(a.clone(), b.clone())][0],
                    self.scenario[&(b.clone(), a.clone())][0]
                )
            })
            .collect();
        s += &format!(
            "\nsrc/scenario's submodules that use each other: {}\n",
            if mutual.is_empty() {
                "none".to_string()
            } else {
                format!("\n{}", mutual.join("\n"))
            }
        );
        s
    }
}

/// Every edge that goes to the same or a higher layer, and every pair of
/// modules that use each other, unless allow-listed; each with all its
/// sites.
fn layer_problems(graph: &Graph, allowed: &[(&str, &str)]) -> Vec<String> {
    let ok = |a: &str, b: &str| allowed.iter().any(|&(x, y)| x == a && y == b);
    let mut out = Vec::new();
    for ((from, to), sites) in &graph.edges {
        if ok(from, to) {
            continue;
        }
        let (Some(lf), Some(lt)) = (layer_of(from), layer_of(to)) else {
            out.push(format!(
                "{from} -> {to}: a module without a layer in LAYERS:\n  {}",
                sites.join("\n  ")
            ));
            continue;
        };
        if lt >= lf {
            out.push(format!(
                "{from} (layer {lf}) uses {to} (layer {lt}), not below it:\n  {}",
                sites.join("\n  ")
            ));
        }
    }
    for (from, to) in graph.edges.keys() {
        let allowed_either = ok(from, to) || ok(to, from);
        if from < to && graph.edges.contains_key(&(to.clone(), from.clone())) && !allowed_either {
            let there = &graph.edges[&(from.clone(), to.clone())][0];
            let back = &graph.edges[&(to.clone(), from.clone())][0];
            out.push(format!(
                "{from} <-> {to}: the two modules use each other:\n  {there}\n  {back}"
            ));
        }
    }
    // Layer breaks first, then cycles; each names its first site up front.
    out.sort_by_key(|p| !p.contains(" uses "));
    out.into_iter()
        .map(|p| match p.split_once("\n  ") {
            Some((head, sites)) => format!(
                "{}: {head}\n  {sites}",
                sites.split(": ").next().unwrap_or("")
            ),
            None => p,
        })
        .collect()
}
