//! Registering recipes, and scenario files naming them: every declared
//! name accepted, anything else refused with its place and the accepted
//! names.

use super::recipe::Recipe;
use super::registry::Registry;
#[cfg(madsim)]
use super::sim::{JudgeCtx, RunCtx, Running};
use super::spec::{parse_in, Scenario, SpecError};
use super::verdict::{run_properties, Property, Verdict};
use super::workload::{WorkloadKey, WorkloadValue};

struct Counter;

const NO_LOST_INCREMENT: Property = Property::new("no-lost-increment", "what");

impl Recipe for Counter {
    fn name(&self) -> &str {
        "counter"
    }
    fn variants(&self) -> &[&str] {
        &["counter/blind"]
    }
    fn workload_keys(&self) -> &[WorkloadKey] {
        const KEYS: &[WorkloadKey] = &[
            WorkloadKey::int("clients", "", 1, 64, 4),
            WorkloadKey::int("think_ms_max", "pause", 0, 1000, 50),
            WorkloadKey::drawn("batch", "increments per read", 1, 10, &[1, 2]),
        ];
        KEYS
    }
    fn properties(&self) -> &[Property] {
        &[NO_LOST_INCREMENT]
    }
    fn counters(&self) -> &[&str] {
        &["acked", "maybe"]
    }
    #[cfg(madsim)]
    fn start(&self, _: &mut RunCtx) -> Box<dyn Running> {
        struct Nothing;
        impl Running for Nothing {
            fn judge(self: Box<Self>, _: &JudgeCtx) -> Verdict {
                Verdict::default()
            }
        }
        Box::new(Nothing)
    }
}

/// A recipe whose declarations are all set from outside, for the
/// registry's checks.
struct Declared {
    name: &'static str,
    keys: &'static [WorkloadKey],
    counters: &'static [&'static str],
    properties: &'static [Property],
}

impl Default for Declared {
    fn default() -> Self {
        Declared {
            name: "declared",
            keys: &[],
            counters: &[],
            properties: {
                const P: &[Property] = &[Property::new("p", "")];
                P
            },
        }
    }
}

impl Recipe for Declared {
    fn name(&self) -> &str {
        self.name
    }
    fn workload_keys(&self) -> &[WorkloadKey] {
        self.keys
    }
    fn properties(&self) -> &[Property] {
        self.properties
    }
    fn counters(&self) -> &[&str] {
        self.counters
    }
    #[cfg(madsim)]
    fn start(&self, ctx: &mut RunCtx) -> Box<dyn Running> {
        Counter.start(ctx)
    }
}

fn registry() -> Registry {
    let r = Registry::new().with(Counter);
    assert!(r.errors().is_empty(), "{:?}", r.errors());
    r
}

fn parse(text: &str) -> Result<Scenario, SpecError> {
    parse_in("s.toml", text, &registry())
}

fn assert_err(text: &str, line: usize, column: usize, needle: &str) {
    let e = parse(text).expect_err("must be refused");
    assert_eq!((e.line, e.column), (line, column), "{e}");
    assert!(e.message.contains(needle), "{e}\nwanted: {needle}");
}

#[test]
fn a_registered_recipe_is_read_with_its_defaults() {
    let s = parse("format = 1\nrecipe = \"counter\"\n").expect("valid");
    assert_eq!(s.recipe_name(), "counter");
    assert_eq!(s.variant_name(), "counter");
    assert_eq!(s.workload.clients(), Some(4));
    assert_eq!(
        s.workload.get("think_ms_max"),
        Some(&WorkloadValue::Int(50))
    );
    assert_eq!(
        s.workload.get("batch"),
        Some(&WorkloadValue::Drawn(vec![1, 2]))
    );
}

#[test]
fn a_registered_recipe_takes_its_keys_variants_and_counters() {
    let text = "format = 1\nrecipe = \"counter\"\nvariant = \"counter/blind\"\n\
                [workload]\nclients = 7\nthink_ms_max = 0\nbatch = 3\n\
                [[faults.at]]\nat_ms = 10\nfault = \"client-crash\"\nclient = 6\n\
                [coverage]\ngoals = [\"acked\", \"fault:client-crash\", \"lost-replies\"]\n";
    let s = parse(text).expect("valid");
    assert_eq!(s.variant_name(), "counter/blind");
    assert_eq!(s.workload.clients(), Some(7));
    assert_eq!(s.workload.int("think_ms_max"), Some(0));
    assert_eq!(
        s.workload.get("batch"),
        Some(&WorkloadValue::Drawn(vec![3]))
    );
    assert_eq!(s.coverage.len(), 3);
}

#[test]
fn a_registered_recipe_round_trips_through_to_toml() {
    let text = "format = 1\nrecipe = \"counter\"\n[workload]\nclients = 2\nbatch = [4, 5]\n";
    let s = parse(text).expect("valid");
    let again = parse_in("s.toml", &s.to_toml(), &registry()).expect("its own output parses");
    assert_eq!(again, s, "{}", s.to_toml());
}

#[test]
fn bad_names_and_values_are_refused_with_their_place() {
    // The unknown recipe's error lists the built-in and registered names.
    assert_err(
        "format = 1\nrecipe = \"countr\"\n",
        2,
        10,
        "unknown recipe \"countr\"; the recipes are: lock, ",
    );
    let e = parse("format = 1\nrecipe = \"countr\"\n").unwrap_err();
    assert!(e.message.ends_with("two-phase-commit, counter"), "{e}");
    assert_err(
        "format = 1\nrecipe = \"counter\"\nvariant = \"lock/herd\"\n",
        3,
        11,
        "counter's variants are: counter/blind",
    );
    assert_err(
        "format = 1\nrecipe = \"counter\"\n[workload]\nclients = 2\nhold_ms = 5\n",
        5,
        1,
        "`hold_ms` is not a workload key of recipe counter; it takes: clients, think_ms_max, batch",
    );
    assert_err(
        "format = 1\nrecipe = \"counter\"\n[workload]\n  think_ms_max = 1001\n",
        4,
        3,
        "`workload.think_ms_max` must be an integer between 0 and 1000, got 1001",
    );
    assert_err(
        "format = 1\nrecipe = \"counter\"\n[workload]\nbatch = [1, \"x\"]\n",
        4,
        1,
        "`workload.batch` must be an integer (1 to 10) or a non-empty list of them, got [1, \"x\"]",
    );
    assert_err(
        "format = 1\nrecipe = \"counter\"\n[workload]\nbatch = []\n",
        4,
        1,
        "non-empty list",
    );
    assert_err(
        "format = 1\nrecipe = \"counter\"\n[workload]\nclients = 0\n",
        4,
        1,
        "`workload.clients` must be an integer between 1 and 64, got 0",
    );
    assert_err(
        "format = 1\nrecipe = \"counter\"\n[coverage]\ngoals = [\"acquisitions\"]\n",
        4,
        10,
        "counter counts: acked, maybe",
    );
    assert_err(
        "format = 1\nrecipe = \"counter\"\n[workload]\nclients = 2\n\
         [[faults.at]]\nat_ms = 10\nfault = \"client-crash\"\nclient = 2\n",
        8,
        10,
        "`client` must be between 0 and 1",
    );
    // Without the registry the name is unknown, as any other.
    let e = crate::spec::parse("s.toml", "format = 1\nrecipe = \"counter\"\n").unwrap_err();
    assert!(e.message.contains("unknown recipe \"counter\""), "{e}");
    assert!(!e.message.contains(", counter"), "{e}");
}

#[test]
fn the_registry_refuses_declarations_that_cannot_work() {
    let refused = |d: Declared, needle: &str| {
        let r = Registry::new().with(Counter).with(d);
        assert_eq!(r.errors().len(), 1, "{needle}: {:?}", r.errors());
        assert!(
            r.errors()[0].to_string().contains(needle),
            "{:?}",
            r.errors()
        );
        assert_eq!(r.recipes().count(), 12);
    };
    let d = Declared::default;
    refused(
        Declared {
            name: "lock",
            ..d()
        },
        "registered already",
    );
    refused(
        Declared {
            name: "counter",
            ..d()
        },
        "registered already",
    );
    refused(Declared { name: "", ..d() }, "letters, digits");
    refused(Declared { name: "a b", ..d() }, "letters, digits");
    refused(
        Declared {
            properties: &[],
            ..d()
        },
        "no property",
    );
    refused(
        Declared {
            properties: {
                const P: &[Property] = &[Property::new("p", ""), Property::new("p", "")];
                P
            },
            ..d()
        },
        "property \"p\" is declared twice",
    );
    refused(
        Declared {
            properties: &[run_properties::INVARIANTS],
            ..d()
        },
        "every run's own",
    );
    refused(
        Declared {
            counters: &["x", "x"],
            ..d()
        },
        "counter \"x\" is declared twice",
    );
    refused(
        Declared {
            counters: &["lost-replies"],
            ..d()
        },
        "the ensemble's",
    );
    refused(
        Declared {
            counters: &["fault:x"],
            ..d()
        },
        "the ensemble's or a fault's",
    );
    refused(
        Declared {
            keys: {
                const K: &[WorkloadKey] = &[WorkloadKey::drawn("clients", "", 1, 2, &[1])];
                K
            },
            ..d()
        },
        "\"clients\" must be an integer key",
    );
    refused(
        Declared {
            keys: {
                const K: &[WorkloadKey] = &[WorkloadKey::int("Bad-Key", "", 1, 2, 1)];
                K
            },
            ..d()
        },
        "lowercase",
    );
    refused(
        Declared {
            keys: {
                const K: &[WorkloadKey] = &[WorkloadKey::int("k", "", 1, 2, 3)];
                K
            },
            ..d()
        },
        "the default of `workload.k` must be an integer between 1 and 2, got 3",
    );
    refused(
        Declared {
            keys: {
                const K: &[WorkloadKey] = &[WorkloadKey::drawn("k", "", 1, 2, &[])];
                K
            },
            ..d()
        },
        "non-empty list",
    );
    refused(
        Declared {
            keys: {
                const K: &[WorkloadKey] = &[
                    WorkloadKey::int("k", "", 1, 2, 1),
                    WorkloadKey::int("k", "", 1, 2, 1),
                ];
                K
            },
            ..d()
        },
        "workload key \"k\" is declared twice",
    );
    let ok = Registry::new().with(Counter).with(Declared::default());
    assert!(ok.errors().is_empty());
    assert_eq!(
        ok.names()[ok.names().len() - 2..],
        ["counter", "declared"],
        "built-in names first, then registered ones in order"
    );
}

#[test]
fn keys_describe_themselves_and_set_checks_bounds() {
    assert_eq!(
        Counter.workload_keys()[2].describe(),
        "batch (1 to 10, or a list drawn from per seed; default [1, 2]): increments per read"
    );
    let mut s = parse("format = 1\nrecipe = \"counter\"\n").unwrap();
    assert!(s
        .set_workload("think_ms_max", WorkloadValue::Int(7))
        .is_ok());
    assert_eq!(s.workload.int("think_ms_max"), Some(7));
    assert!(s
        .set_workload("think_ms_max", WorkloadValue::Int(-1))
        .is_err());
    assert!(s.set_workload("nope", WorkloadValue::Int(1)).is_err());
    assert_eq!(
        s.workload.int("think_ms_max"),
        Some(7),
        "a refused value is not set"
    );
    let mut v = Verdict::default();
    v.count("acked", 2);
    v.count("acked", 3);
    assert_eq!(v.counters, vec![("acked".to_owned(), 5)]);
    assert!(v.passed());
}

use zoosim_models::{ModelError, Spec};

/// A model as the registry sees it: only its declarations (it is never
/// checked here).
struct FakeModel {
    name: &'static str,
    variants: Vec<&'static str>,
    claims: Vec<zoosim_core::check::Property>,
}

impl zoosim_models::Listed for FakeModel {
    fn name(&self) -> &'static str {
        self.name
    }
    fn about(&self) -> &'static str {
        "a fake"
    }
    fn variants(&self) -> Vec<&'static str> {
        self.variants.clone()
    }
    fn properties(&self) -> Vec<&'static str> {
        self.claims.iter().map(|c| c.name).collect()
    }
    fn claims(&self) -> Vec<zoosim_core::check::Property> {
        self.claims.clone()
    }
    fn check(&self, _: &Spec) -> Result<zoosim_models::Report, ModelError> {
        Err(ModelError::Size("a fake".into()))
    }
    fn walk(
        &self,
        _: &Spec,
        _: zoosim_models::cycle::Bound,
    ) -> Result<Result<usize, String>, ModelError> {
        Err(ModelError::Size("a fake".into()))
    }
    fn serve(&self, _: &Spec, _: &str, _: &mut dyn FnMut()) -> Result<(), ModelError> {
        Err(ModelError::Size("a fake".into()))
    }
}

fn fake(name: &'static str, variants: &[&'static str], claims: &[Property]) -> Box<FakeModel> {
    Box::new(FakeModel {
        name,
        variants: variants.to_vec(),
        claims: claims.to_vec(),
    })
}

/// A model stands beside the recipe of its name, with the recipe's
/// variants, and a property name means one thing in the oracle and the
/// model: each rule refuses what breaks it, naming what is wrong.
#[test]
fn the_registry_refuses_a_model_that_is_not_its_recipes() {
    let refused = |model: Box<FakeModel>| {
        let mut r = registry();
        r.register_model(model).expect_err("refused").to_string()
    };
    let e = refused(fake("countr", &["countr"], &[]));
    assert!(
        e.contains("no recipe is named \"countr\"; the recipes are: lock,"),
        "{e}"
    );
    let e = refused(fake("counter", &["counter", "counter/herd"], &[]));
    assert!(
        e.contains(
            "the model's variant \"counter/herd\" is not one of the recipe's: counter/blind"
        ),
        "{e}"
    );
    let other_meaning = Property::new("no-lost-increment", "something else");
    let e = refused(fake("counter", &["counter"], &[other_meaning]));
    assert!(
        e.contains("the model's claim \"no-lost-increment\" means \"something else\""),
        "{e}"
    );
    // The same claim, and a claim of its own, are taken; a second model is
    // not.
    let own = Property::new("every-increment-ends", "a claim of its own");
    let mut r = registry();
    r.register_model(fake(
        "counter",
        &["counter", "counter/blind"],
        &[NO_LOST_INCREMENT, own],
    ))
    .expect("its recipe's");
    assert_eq!(r.model("counter").map(|m| m.about()), Ok("a fake"));
    let e = r
        .register_model(fake("counter", &["counter"], &[]))
        .expect_err("twice")
        .to_string();
    assert!(e.contains("a model of it is registered already"), "{e}");
    // Built-in models stand beside the built-in recipes.
    let names: Vec<&str> = Registry::new().models().map(|m| m.name()).collect();
    assert_eq!(names.len(), zoosim_models::catalog().len());
    for n in names {
        assert!(Registry::new().get(n).is_some(), "model {n} has no recipe");
    }
}
