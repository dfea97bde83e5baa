//! The EDN reader, and the Jepsen EDN forms it lets `parse_edn` read.

use super::cas_register::CasRegister;
use super::edn::{read_one, Value, MAX_DEPTH};
use super::jepsen::{history, parse_edn, parse_log, Format, Kind};
use super::kv::Kv;
use super::{check, Options, Summary};

fn kw(k: &str) -> Value {
    Value::Keyword(k.into())
}

#[test]
fn every_kind_of_edn_value_is_read() {
    use Value::*;
    let cases: Vec<(&str, Value)> = vec![
        ("nil", Nil),
        ("true", Bool(true)),
        ("false", Bool(false)),
        ("-42", Int(-42)),
        ("+7", Int(7)),
        ("7N", Int(7)),
        ("9223372036854775807", Int(i64::MAX)),
        ("-9223372036854775808", Int(i64::MIN)),
        ("9223372036854775808", BigInt("9223372036854775808".into())),
        (
            "-123456789012345678901234567890N",
            BigInt("-123456789012345678901234567890".into()),
        ),
        ("1.5", Value::Float(super::edn::Float(1.5))),
        ("-2e3", Value::Float(super::edn::Float(-2000.0))),
        ("1.5E-1", Value::Float(super::edn::Float(0.15))),
        ("##Inf", Value::Float(super::edn::Float(f64::INFINITY))),
        ("##-Inf", Value::Float(super::edn::Float(f64::NEG_INFINITY))),
        ("1.10M", Decimal("1.10".into())),
        ("3M", Decimal("3".into())),
        ("-1/3", Ratio("-1/3".into())),
        ("\\a", Char('a')),
        ("\\newline", Char('\n')),
        ("\\space", Char(' ')),
        ("\\u0041", Char('A')),
        ("\\(", Char('(')),
        (
            "\"a\\\"b\\\\c\\n\\t\\u00e9\\ud83d\\ude00\"",
            Str("a\"b\\c\n\té😀".into()),
        ),
        ("\"two\nlines\"", Str("two\nlines".into())),
        (":jepsen.history/foo", kw("jepsen.history/foo")),
        (":a-b?", kw("a-b?")),
        ("foo/bar", Symbol("foo/bar".into())),
        ("-", Symbol("-".into())),
        ("(1 2)", List(vec![Int(1), Int(2)])),
        ("[1, 2 ,3]", Vector(vec![Int(1), Int(2), Int(3)])),
        ("[]", Vector(vec![])),
        (
            "{[1 2] #{:a} \"s\" {:n nil}}",
            Map(vec![
                (Vector(vec![Int(1), Int(2)]), Set(vec![kw("a")])),
                (Str("s".into()), Map(vec![(kw("n"), Nil)])),
            ]),
        ),
        ("#{1 \\a}", Set(vec![Int(1), Char('a')])),
        (
            "#inst \"1985-04-12T23:20:50.52Z\"",
            Tagged(
                "inst".into(),
                Box::new(Str("1985-04-12T23:20:50.52Z".into())),
            ),
        ),
        (
            "#jepsen.history.Op{:index 1}",
            Tagged(
                "jepsen.history.Op".into(),
                Box::new(Map(vec![(kw("index"), Int(1))])),
            ),
        ),
        ("[1 #_ 2 #_#_ 3 4 5]", Vector(vec![Int(1), Int(5)])),
        (
            "; a comment\n[1 ; another\n 2]",
            Vector(vec![Int(1), Int(2)]),
        ),
    ];
    for (text, want) in cases {
        assert_eq!(read_one(text), Ok(want), "{text}");
    }
    // NaN equals itself here (compared by bits), so it can be a set member.
    assert_eq!(read_one("##NaN"), read_one("##NaN"));
    assert!(matches!(read_one("##NaN"), Ok(Value::Float(super::edn::Float(x))) if x.is_nan()));
}

#[test]
fn values_print_back_as_edn_that_reads_the_same() {
    let text = "[nil true -1 99999999999999999999N 1.5 ##NaN ##-Inf 2.50M 1/2 \\a \\newline \
                \"q\\\"\" :k/w sym (1) {:a #{2}} #inst \"x\"]";
    let v = read_one(text).unwrap();
    assert_eq!(read_one(&v.to_string()), Ok(v));
}

#[test]
fn bad_edn_is_an_error_with_its_line_and_column() {
    let cases = [
        (
            "[1\n 2\n 0x1F]",
            3,
            "\"0x1F\" at column 2 is not a valid number",
        ),
        ("[007]", 1, "is not a valid number"),
        (
            "\n\n  {:a 1",
            3,
            "the map is not closed (it opens at column 3",
        ),
        ("{:a 1 :a 2}", 1, ":a twice in a map (column 7)"),
        ("#{1 1}", 1, "1 twice in the set"),
        ("\"abc", 1, "the string at column 1 is not closed"),
        ("\"a\\qb\"", 1, "unknown escape \"\\\\q\""),
        ("\"\\ud800x\"", 1, "\\ud800 is not a character"),
        ("\\nope", 1, "unknown character"),
        ("[1 2)", 1, "the vector is closed by ']'"),
        ("]", 1, "nothing to close"),
        ("::auto", 1, "is not a keyword EDN can have"),
        ("##Nope", 1, "unknown symbolic value"),
        ("#_", 1, "discards nothing"),
        ("#inst", 1, "tags nothing"),
        ("#1", 1, "a `#` starts a set"),
        ("{:a}", 1, ":a has no value"),
        ("1 2", 1, "unexpected \"2\" at column 3"),
    ];
    for (text, line, what) in cases {
        let e = read_one(text).expect_err(text);
        assert_eq!(e.line, line, "{text}: {e:?}");
        assert!(e.what.contains(what), "{text}: {e:?}");
    }
    let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 2), "]".repeat(MAX_DEPTH + 2));
    assert!(read_one(&deep)
        .unwrap_err()
        .what
        .contains("nested too deep"));
    let fine = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert!(read_one(&fine).is_ok());
    // A million discards, or tags, nested: an error, not a stack overflow.
    for unit in ["#_", "#t "] {
        let e = read_one(&unit.repeat(1_000_000)).unwrap_err();
        assert!(e.what.contains("too deep"), "{unit}: {e:?}");
    }
}

#[test]
fn a_huge_bad_token_is_quoted_cut_short() {
    let huge = format!("[1 {}x]", "9".repeat(100_000));
    let e = read_one(&huge).unwrap_err();
    assert!(e.what.len() < 200, "{}", &e.what[..200]);
    assert!(
        e.what.contains("at column 4 is not a valid number"),
        "{e:?}"
    );
    let e = parse_edn(
        format!(
            "{{:process 0 :type :invoke :f :get :key \"{}",
            "k".repeat(100_000)
        )
        .as_bytes(),
    )
    .unwrap_err();
    assert!(
        e.what.len() < 400 && e.what.contains("not closed"),
        "{}",
        &e.what[..400]
    );
}

/// Two operations, as Jepsen writes them: pretty-printed over several
/// lines, with an `:error` map, a nemesis event holding things the old
/// reader refused, and keys no model uses.
const JEPSEN: &str = r#"; comment first
[{:index 0, :time 1, :type :invoke, :process 0, :f :write, :value 3}
 {:index 1,
  :time 2,
  :type :info,
  :process :nemesis,
  :f :start,
  :value {"n1" #{"n2" "n3"}, :at #inst "2024-01-01T00:00:00Z", :x ##NaN, \c 1.5}}
 {:index 2, :time 3, :type :ok, :process 0, :f :write, :value 3,
  :error {:type :timeout, :data [1.5M 2/3 99999999999999999999999]}, #_ :dropped #_ 1}
 #jepsen.history.Op{:index 3, :time 4, :type :invoke, :process 1, :f :read, :value nil}
 #jepsen.history.Op{:index 4, :time 5, :type :ok, :process 1, :f :read, :value 3,
                    :jepsen.history/extra (a list)}]
"#;

#[test]
fn jepsen_edn_as_jepsen_writes_it_is_read() {
    assert_eq!(Format::detect(JEPSEN.as_bytes()), Format::Edn);
    let events = parse_edn(JEPSEN.as_bytes()).unwrap();
    let seen: Vec<_> = events
        .iter()
        .map(|e| (e.line, e.process, e.kind, e.f.as_str(), e.value.clone()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (2, 0, Kind::Invoke, "write", Value::Int(3)),
            (9, 0, Kind::Ok, "write", Value::Int(3)),
            (11, 1, Kind::Invoke, "read", Value::Nil),
            (12, 1, Kind::Ok, "read", Value::Int(3)),
        ]
    );
    let ops = history(&CasRegister, &events).unwrap();
    let checked = check(&CasRegister, &ops, &Options::default());
    assert_eq!(checked.summary(), Summary::Linearizable);
}

#[test]
fn every_whole_file_form_reads_the_same_events() {
    let maps = [
        "{:process 0, :type :invoke, :f :put, :key \"a\", :value \"x\"}",
        "{:process 0, :type :ok, :f :put, :key \"a\", :value \"x\"}",
        "{:process 1, :type :invoke, :f :get, :key \"a\", :value nil}",
        "{:process 1, :type :ok, :f :get, :key \"a\", :value \"x\"}",
    ];
    let per_line = maps.join("\n");
    let want: Vec<_> = parse_edn(per_line.as_bytes())
        .unwrap()
        .into_iter()
        .map(|e| (e.process, e.kind, e.f, e.key, e.value))
        .collect();
    assert_eq!(want.len(), 4);
    let forms = [
        format!("[{}]", maps.join("\n ")),
        format!("({})", maps.join(" ")),
        format!("[{}]", maps.join("")),
        maps.join(" "),
        maps.join("\n").replace(", ", ",\n  "),
        format!("[{}]\n[{}]", maps[..2].join(" "), maps[2..].join(" ")),
        maps.iter()
            .map(|m| format!("#jepsen.history.Op{m}"))
            .collect::<Vec<_>>()
            .join("\r\n"),
    ];
    for text in forms {
        assert_eq!(Format::detect(text.as_bytes()), Format::Edn, "{text}");
        let got: Vec<_> = parse_edn(text.as_bytes())
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .into_iter()
            .map(|e| (e.process, e.kind, e.f, e.key, e.value))
            .collect();
        assert_eq!(got, want, "{text}");
        let ops = history(&Kv::default(), &parse_edn(text.as_bytes()).unwrap()).unwrap();
        assert_eq!(ops.len(), 2);
    }
}

#[test]
fn an_operation_s_errors_name_the_line_its_map_opens_on() {
    let cases = [
        // The model refuses the value: the map's first line.
        ("[{:process 0, :type :invoke,\n  :f :write,\n  :value \"x\"}]", 1, "a write takes an integer"),
        ("[{:process 0 :type :invoke :f :read}\n {:process 0\n  :type :ok :f :read\n  :value 99999999999999999999}]", 2, "does not fit in 64 bits"),
        ("\n\n{:process 0, :type :invoke, :f :read, :value 1N}\n{:process 0, :type :ok, :f :read, :value 1.5}", 4, "a read returns an integer or nil, not 1.5"),
        // A syntax error: its own line.
        ("[{:process 0 :type :invoke :f :read}\n {:process 0\n  :type :ok :f :read\n  :value 0x1F}]", 4, "is not a valid number"),
        // Not an operation.
        ("[{:process 0 :type :invoke :f :read}\n [1 2]]", 2, "expected a map"),
        ("[{:process 0 :type :invoke :f :read}\n #inst \"x\"]", 2, "expected a map"),
        ("#{:a}", 1, "expected a map"),
        ("[{:process 0 :type :invoke :f :read}\n", 1, "the vector of operations that opens at column 1 is not closed"),
        ("{:process -1 :type :invoke :f :read}", 1, ":process must be a number"),
        ("{:process 0 :type \"ok\" :f :read}", 1, ":type must be a keyword"),
    ];
    for (text, line, what) in cases {
        let e = parse_edn(text.as_bytes())
            .and_then(|ev| history(&CasRegister, &ev).map(|_| ()))
            .expect_err(text);
        assert_eq!(e.line, line, "{text}: {e}");
        assert!(e.what.contains(what), "{text}: {e}");
    }
    // The nemesis's events are skipped whatever they hold, even no type.
    let text = "{:process :nemesis, :value #{[1 {:a ##Inf}]}}\n{:process :nemesis :type :weird}";
    assert_eq!(parse_edn(text.as_bytes()), Ok(vec![]));
    // Not UTF-8: the line it is on.
    let e = parse_edn(b"[{:process 0 :type :invoke :f :read}\n {:f \"\xff\"}]").unwrap_err();
    assert_eq!(
        (e.line, e.what.as_str()),
        (2, "not UTF-8 text (at byte 6 of the line)")
    );
}

#[test]
fn a_log_value_is_read_as_full_edn_too() {
    let line = "INFO  jepsen.util - 0\t:invoke\t:write\t99999999999999999999\n";
    let e = history(&CasRegister, &parse_log(line.as_bytes()).unwrap()).unwrap_err();
    assert!(
        e.what
            .contains("99999999999999999999 does not fit in 64 bits"),
        "{e}"
    );
    // A log line is still a log line when it starts with `[`.
    let line = "[main] INFO  jepsen.util - 0\t:invoke\t:read\t#{1 ##NaN}\n";
    assert_eq!(Format::detect(line.as_bytes()), Format::Log);
    assert_eq!(parse_log(line.as_bytes()).unwrap().len(), 1);
}
