//! Running a model's checker and reading its answer: every property's
//! verdict, and for each one that fails a shortest counterexample as a
//! step list in words.

use std::fmt::Write as _;

use stateright::{Checker, Expectation, HasDiscoveries, Model};

use super::{Action, Log, RecipeModel, StopFlag, World, STOPPED};

/// How the state space is searched.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Search {
    /// Breadth-first (the default): a counterexample is a shortest one.
    #[default]
    Bfs,
    /// Depth-first: less memory; counterexamples are still re-found
    /// breadth-first so that they are shortest.
    Dfs,
}

/// How to check a model.
#[derive(Clone, Debug)]
pub struct Options {
    /// Breadth- or depth-first.
    pub search: Search,
    /// Worker threads for the exhaustive run (counterexamples are always
    /// re-found on one thread, where breadth-first order is exact).
    pub threads: usize,
    /// Stop once about this many states are generated (checked every
    /// block of states, so a search may overshoot it by a block): what
    /// keeps a model too large for the machine from taking all its
    /// memory. A search stopped so is not conclusive
    /// ([`Checked::conclusive`]). None: no bound.
    pub max_states: Option<usize>,
    /// Ends the search once set, from outside (a measured memory bound,
    /// an interrupt): a search stopped so is not conclusive either, and
    /// the counterexample searches after it stop too.
    pub stop: StopFlag,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            search: Search::Bfs,
            threads: 1,
            max_states: None,
            stop: StopFlag::default(),
        }
    }
}

/// One property's verdict.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// The property's name.
    pub name: &'static str,
    /// `always`, `eventually` or `sometimes`.
    pub kind: &'static str,
    /// It holds: an always/eventually property with no counterexample, a
    /// sometimes property with an example.
    pub holds: bool,
    /// For an always/eventually property that fails: a shortest
    /// counterexample (breadth-first, this property alone, one thread).
    pub counterexample: Option<Vec<Action>>,
}

impl Verdict {
    /// A "sometimes" property: holding means an example was found.
    pub fn is_sometimes(&self) -> bool {
        self.kind == "sometimes"
    }

    /// The search found what decides it: an example of a sometimes
    /// property, a counterexample of the others. Final even for a search
    /// stopped at its bound.
    pub fn found(&self) -> bool {
        self.holds == self.is_sometimes()
    }
}

/// What a check found.
#[derive(Clone, Debug)]
pub struct Checked {
    /// States generated (with repeats).
    pub states: usize,
    /// Distinct states.
    pub unique: usize,
    /// The deepest path explored.
    pub depth: usize,
    /// The verdicts are final: the search visited every reachable state,
    /// or stopped once every property had its answer. False when it
    /// stopped at [`Options::max_states`] or at [`Options::stop`] first:
    /// then a property that
    /// "holds" holds only in the states visited, and a "sometimes" not
    /// reached may be reached further on (a failure found is a failure
    /// all the same).
    pub conclusive: bool,
    /// Every property's verdict, in the model's order.
    pub verdicts: Vec<Verdict>,
    /// [`Options::stop`] ended the search.
    pub stopped: bool,
}

impl Checked {
    /// Every property holds (and every sometimes property was reached),
    /// over every reachable state: false for a search that stopped at its
    /// bound, whatever it saw.
    pub fn all_hold(&self) -> bool {
        self.conclusive && self.verdicts.iter().all(|v| v.holds)
    }

    /// Some always or eventually property fails (found within the states
    /// visited, so true even of a search that stopped at its bound).
    pub fn any_fails(&self) -> bool {
        self.verdicts.iter().any(|v| v.found() && !v.is_sometimes())
    }

    /// The verdict of `v` in words: `holds`, `FAILS`, `reached`, `NEVER
    /// REACHED`, or for a search stopped at its bound `holds so far` and
    /// `not reached yet`.
    pub fn verdict_text(&self, v: &Verdict) -> &'static str {
        match (v.holds, v.is_sometimes(), self.conclusive) {
            (true, true, _) => "reached",
            (false, true, true) => "NEVER REACHED",
            (false, true, false) => "not reached yet",
            (true, false, true) => "holds",
            (true, false, false) => "holds so far",
            (false, false, _) => "FAILS",
        }
    }

    /// The verdict of the property `name`.
    pub fn verdict(&self, name: &str) -> Option<&Verdict> {
        self.verdicts.iter().find(|v| v.name == name)
    }
}

fn kind(e: &Expectation) -> &'static str {
    match e {
        Expectation::Always => "always",
        Expectation::Eventually => "eventually",
        Expectation::Sometimes => "sometimes",
    }
}

/// Checks `world` exhaustively (or up to [`Options::max_states`]), then re-finds each failing property's
/// counterexample alone, breadth-first on one thread: with several
/// properties in one run the checker's discoveries are not shortest.
pub fn check<R: RecipeModel>(world: &World<R>, options: Options) -> Checked {
    let world = &world.clone().with_stop(options.stop.clone());
    let mut builder = world.clone().checker().threads(options.threads.max(1));
    if let Some(n) = options.max_states {
        builder = builder.target_state_count(n);
    }
    if options.stop.0.is_some() {
        // Ends at the stop's discovery (see StopFlag). The early end
        // once every property has its discovery is lost: rare, and
        // `every_decided` below still makes such a search conclusive.
        builder = builder.finish_when(HasDiscoveries::AnyOf([STOPPED].into()));
    }
    // The two searches' checkers are different types: read each alike.
    let (discoveries, states, unique, depth) = match options.search {
        Search::Bfs => {
            let run = builder.spawn_bfs().join();
            let d: Vec<&'static str> = run.discoveries().into_keys().collect();
            (
                d,
                run.state_count(),
                run.unique_state_count(),
                run.max_depth(),
            )
        }
        Search::Dfs => {
            let run = builder.spawn_dfs().join();
            let d: Vec<&'static str> = run.discoveries().into_keys().collect();
            (
                d,
                run.state_count(),
                run.unique_state_count(),
                run.max_depth(),
            )
        }
    };
    let stopped = discoveries.contains(&STOPPED) || options.stop.is_set();
    let mut verdicts = Vec::new();
    for p in world.properties() {
        if p.name == STOPPED {
            continue;
        }
        let found = discoveries.contains(&p.name);
        let holds = match p.expectation {
            Expectation::Sometimes => found,
            Expectation::Always | Expectation::Eventually => !found,
        };
        let counterexample = (!holds && p.expectation != Expectation::Sometimes)
            .then(|| shortest_within(world, p.name, options.max_states))
            .flatten();
        verdicts.push(Verdict {
            name: p.name,
            kind: kind(&p.expectation),
            holds,
            counterexample,
        });
    }
    // The checker stops at the bound without saying so: a search that
    // ended below it ended on its own. One that stopped because every
    // property had its discovery has its final verdicts either way.
    let every_decided = verdicts.iter().all(|v| v.holds == (v.kind == "sometimes"));
    let conclusive = every_decided || (!stopped && options.max_states.is_none_or(|n| states < n));
    Checked {
        states,
        unique,
        depth,
        conclusive,
        verdicts,
        stopped,
    }
}

/// A shortest path to a counterexample of the property `name` alone. Found
/// without the symmetry reduction, so that its clients keep their numbers
/// from step to step: the reduced model has a counterexample of the same
/// length exactly when the full one has (its states are the full model's,
/// each standing for the states a renaming of clients makes of it).
pub fn shortest<R: RecipeModel>(world: &World<R>, name: &'static str) -> Option<Vec<Action>> {
    shortest_within(world, name, None)
}

/// [`shortest`], giving up (None) after about `max_states` states.
pub fn shortest_within<R: RecipeModel>(
    world: &World<R>,
    name: &'static str,
    max_states: Option<usize>,
) -> Option<Vec<Action>> {
    let mut one = world.clone();
    one.only = Some(name);
    one.symmetric = false;
    // Without the stop's property: with a second property the checker
    // goes on past a state that fails `name`, and a later, longer path
    // replaces its discovery (the counterexample is no longer shortest).
    // A search already stopped finds none; one not stopped yet is bounded
    // by `max_states`.
    if one.stop.is_set() {
        return None;
    }
    one.stop = StopFlag::default();
    let mut builder = one.checker().threads(1);
    if let Some(n) = max_states {
        builder = builder.target_state_count(n);
    }
    let run = builder.spawn_bfs().join();
    run.discovery(name).map(|path| path.into_actions())
}

/// `actions`, taken from the model's initial state, as a numbered step
/// list in words: who did what, the server's reply, what it led to.
pub fn render_path<R: RecipeModel>(world: &World<R>, actions: &[Action]) -> String {
    // Counterexamples are found without the symmetry reduction (see
    // `shortest`): replay them so.
    let mut world = world.clone();
    world.symmetric = false;
    let world = &world;
    let mut out = String::new();
    let Some(mut s) = world.init_states().into_iter().next() else {
        return out;
    };
    for (n, action) in actions.iter().enumerate() {
        let mut log = Log::on();
        if world.step(&mut s, *action, &mut log).is_none() {
            let _ = writeln!(out, "{:>3}. ({action:?} is not enabled here)", n + 1);
            break;
        }
        let lines = log.lines();
        let mut lines = lines.iter();
        let first = lines
            .next()
            .cloned()
            .unwrap_or_else(|| format!("{action:?}"));
        let _ = writeln!(out, "{:>3}. {first}", n + 1);
        for l in lines {
            let _ = writeln!(out, "       {}", l.trim_start());
        }
    }
    out
}
