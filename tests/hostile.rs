//! Hostile inputs (issue 18), at sizes well past those that crashed, hung or exhausted
//! memory: each is compiled and run on a thread with a 256 KiB stack, the smallest a server
//! may give a worker, and must end in a typed error (its kind, and the `LimitKind` where a
//! limit refused it) or a correct result. Each case prints how long it took (`cargo test
//! --test suite hostile:: -- --nocapture`); times are measured, never asserted. The slow
//! classes run under a short compile budget so their expected outcome, a `CompileTime` limit,
//! comes fast.

use std::process::Command;
use std::time::{Duration, Instant};

use formwork::bitmask::{get_bit, iter_ones};
use formwork::engine::BackendChoice;
use formwork::{
    CompileError, CompileErrorKind, Constraint, Engine, EngineConfig, JsonSchemaOptions, LimitKind,
    Limits, MatchErrorKind, Matcher, TagDispatch, TokenId, Vocab,
};
use formwork_testkit::drive::Checked;
use formwork_testkit::rss_bytes;
use formwork_testkit::stack;
use formwork_testkit::tokenizers;
use serde_json::{json, Value};

/// Runs `f` on a thread with the smallest stack a server may give its workers and prints how
/// long it took. A stack overflow aborts the whole test binary: that is the failure this suite
/// exists to catch.
fn on_small_stack<T: Send>(case: &str, f: impl FnOnce() -> T + Send) -> T {
    let started = Instant::now();
    let result = stack::on_small_stack(f);
    println!("{case}: {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
    result
}

fn qwen3() -> Vocab {
    tokenizers::qwen3().clone()
}

fn engine(limits: Limits) -> Engine {
    Engine::with_config(qwen3(), EngineConfig::new().limits(limits))
}

fn engine_on(backend: BackendChoice, limits: Limits) -> Engine {
    Engine::with_config(qwen3(), EngineConfig::new().backend(backend).limits(limits))
}

/// `Some` constraint, or `None` for a `Limit` error naming one of `limits`; any other error
/// fails the test.
fn compiled_or_limited(
    case: &str,
    result: Result<Constraint, CompileError>,
    limits: &[LimitKind],
) -> Option<Constraint> {
    match result {
        Ok(c) => Some(c),
        Err(e) => {
            assert_limit(case, &e, limits);
            None
        }
    }
}

fn assert_limit(case: &str, e: &CompileError, limits: &[LimitKind]) {
    assert_eq!(e.kind(), CompileErrorKind::Limit, "{case}: {e}");
    let kind = e
        .limit()
        .unwrap_or_else(|| panic!("{case}: a Limit error without its limit: {e}"))
        .kind;
    assert!(
        limits.contains(&kind),
        "{case}: {kind:?} is not one of {limits:?}: {e}"
    );
    println!("{case}: refused: {e}");
}

/// Walks `text` through a fresh matcher of `constraint` with every step's contract checked;
/// true if every token was allowed and the matcher accepts at the end.
fn accepts(constraint: &Constraint, text: &str) -> bool {
    let vocab = tokenizers::qwen3();
    let tokens = vocab.encode(text).expect("tokenize");
    let (taken, drive) = Checked::new(vocab, constraint.matcher(), true).walk(&tokens);
    assert!(!drive.limited, "a limit stopped the walk of {text:?}");
    taken == tokens.len() && drive.accepting
}

fn assert_verdicts(case: &str, constraint: &Constraint, valid: &[&str], invalid: &[&str]) {
    for text in valid {
        assert!(
            accepts(constraint, text),
            "{case}: {text:?} must be accepted"
        );
    }
    for text in invalid {
        assert!(
            !accepts(constraint, text),
            "{case}: {text:?} must be rejected"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Stack overflows on ordinary input.

/// Patterns whose astral characters share a UTF-16 high surrogate, and Unicode properties:
/// (pattern, strings the pattern matches, strings it does not).
const ASTRAL_AND_PROPERTY_PATTERNS: &[(&str, &[&str], &[&str])] = &[
    ("^[😀😂]$", &["😂", "😀"], &["😃", "a"]),
    ("^\\p{Letter}+$", &["ab", "αβ"], &["1", ""]),
    ("^\\p{N}$", &["٣", "7"], &["a"]),
    ("^\\p{Greek}+$", &["αβ"], &["ab"]),
    ("^[^\\p{L}]$", &["1", "😀"], &["a", "ä"]),
];

/// Each pattern as a string schema on one route: `compile` gives the constraint, `wrap` the
/// text a matched string becomes on that route.
fn patterns_on_route(
    route: &str,
    compile: impl Fn(&Engine, &Value) -> Result<Constraint, CompileError> + Sync,
    wrap: impl Fn(&str) -> String + Sync,
) {
    for &(pattern, valid, invalid) in ASTRAL_AND_PROPERTY_PATTERNS {
        let case = format!("pattern {pattern} through {route}");
        let schema = json!({"type": "string", "pattern": pattern});
        on_small_stack(&case, || {
            let c =
                compile(&engine(Limits::new()), &schema).unwrap_or_else(|e| panic!("{case}: {e}"));
            let wrapped = |texts: &[&str]| texts.iter().map(|t| wrap(t)).collect::<Vec<_>>();
            let (v, i) = (wrapped(valid), wrapped(invalid));
            let v: Vec<&str> = v.iter().map(String::as_str).collect();
            let i: Vec<&str> = i.iter().map(String::as_str).collect();
            assert_verdicts(&case, &c, &v, &i);
        });
    }
}

#[test]
fn astral_and_property_patterns_in_a_schema() {
    patterns_on_route(
        "compile_json_schema",
        |e, schema| e.compile_json_schema(schema, &JsonSchemaOptions::new()),
        |s| format!("\"{s}\""),
    );
}

#[test]
fn astral_and_property_patterns_in_the_json_schema_request() {
    patterns_on_route(
        "json_schema(...)",
        |e, schema| e.compile(&format!("json_schema(schema: {:?})", schema.to_string())),
        |s| format!("\"{s}\""),
    );
}

#[test]
fn astral_and_property_patterns_in_tool_parameters() {
    patterns_on_route(
        "tool parameters",
        |e, schema| {
            let spec = json!({"format": "qwen", "require_call": true, "tools": [{"type": "function",
                "function": {"name": "f", "parameters": {"type": "object",
                "properties": {"s": schema}, "required": ["s"]}}}]});
            e.compile_tags(&TagDispatch::from_spec(&spec)?)
        },
        |s| {
            format!(
                "<tool_call>\n{{\"name\": \"f\", \"arguments\": {{\"s\": \"{s}\"}}}}\n</tool_call>"
            )
        },
    );
}

const REF_CHAIN: usize = 30_000;

/// A `$ref` chain of [`REF_CHAIN`] links through `via` (crashed at ~4,000 through
/// `properties`, ~7,000 through `items`, ~15,000 direct): a correct result, or a nesting or
/// size limit.
fn ref_chain(via: &str, valid: &[&str], invalid: &[&str]) {
    let mut defs = serde_json::Map::new();
    for i in 0..REF_CHAIN {
        let next = json!({"$ref": format!("#/$defs/d{}", i + 1)});
        let link = match via {
            "properties" => json!({"type": "object", "properties": {"a": next}}),
            "items" => json!({"type": "array", "items": next}),
            _ => next,
        };
        defs.insert(format!("d{i}"), link);
    }
    defs.insert(format!("d{REF_CHAIN}"), json!({"type": "integer"}));
    let schema = json!({"$defs": defs, "$ref": "#/$defs/d0"});
    let case = format!("$ref chain of {REF_CHAIN} through {via}");
    schema_without_deadline(&case, &schema, valid, invalid);
}

/// `schema` compiled on a small stack with no compile deadline (on a loaded machine a chain
/// through properties, seconds to compile, would end in `CompileTime` instead, and the
/// verdict must not depend on load): a result giving `valid` and `invalid` their verdicts, or
/// a `Nesting` or `GrammarSize` limit.
fn schema_without_deadline(case: &str, schema: &Value, valid: &[&str], invalid: &[&str]) {
    on_small_stack(case, || {
        let limits = Limits::new().compile_time(None);
        let result = engine(limits).compile_json_schema(schema, &JsonSchemaOptions::new());
        let limits = [LimitKind::Nesting, LimitKind::GrammarSize];
        if let Some(c) = compiled_or_limited(case, result, &limits) {
            assert_verdicts(case, &c, valid, invalid);
        }
    });
}

#[test]
fn ref_chain_through_properties() {
    ref_chain(
        "properties",
        &["{}", r#"{"a":{"a":{}}}"#],
        &["[]", r#"{"a":1}"#],
    );
}

#[test]
fn ref_chain_through_items() {
    ref_chain("items", &["[]", "[[],[[]]]"], &["{}", "[1]"]);
}

#[test]
fn ref_chain_direct() {
    ref_chain("direct", &["7"], &["\"7\"", "{}"]);
}

fn nested_arrays(depth: usize) -> Value {
    let mut schema = json!({"type": "integer"});
    for _ in 0..depth {
        schema = json!({"type": "array", "items": schema});
    }
    schema
}

/// A schema nested just under the nesting limit compiles on the small stack (255 deep aborted
/// on 256–512 KiB stacks with the old limit of 256).
#[test]
fn schema_nested_just_under_the_limit() {
    let limit = Limits::new().get(LimitKind::Nesting) as usize;
    let within = nested_arrays(limit - 2);
    let case = format!("schema nested {} deep", limit - 2);
    on_small_stack(&case, || {
        let c = engine(Limits::new())
            .compile_json_schema(&within, &JsonSchemaOptions::new())
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_verdicts(&case, &c, &["[]", "[[[]]]"], &["[{}]", "{}"]);
    });
}

/// A schema nested 2,000 deep is a nesting limit.
#[test]
fn schema_nested_2000_deep() {
    let past = nested_arrays(2_000);
    let case = "schema nested 2000 deep";
    on_small_stack(case, || {
        let e = engine(Limits::new())
            .compile_json_schema(&past, &JsonSchemaOptions::new())
            .expect_err("past the nesting limit");
        assert_limit(case, &e, &[LimitKind::Nesting]);
    });
}

/// GBNF nesting: 50,000 parentheses, plain and behind a `<[>` token that fooled the nesting
/// pre-check (5,000 crashed).
fn gbnf_parentheses(case: &str, prefix: &str) {
    let depth = 50_000;
    let grammar = format!(
        "root ::= {prefix}{}\"a\"{}\n",
        "(".repeat(depth),
        ")".repeat(depth)
    );
    on_small_stack(case, || {
        let e = engine(Limits::new())
            .compile_gbnf(&grammar, "deep.gbnf")
            .expect_err("nested past the limit");
        match e.kind() {
            CompileErrorKind::Limit => assert_limit(case, &e, &[LimitKind::Nesting]),
            // `<[>` names no special token of Qwen3: refusing that first is as good.
            CompileErrorKind::Syntax | CompileErrorKind::UnknownSpecialToken
                if !prefix.is_empty() =>
            {
                println!("{case}: refused: {e}")
            }
            _ => panic!("{case}: {e}"),
        }
    });
}

#[test]
fn gbnf_50k_parentheses() {
    gbnf_parentheses("gbnf 50k parentheses", "");
}

#[test]
fn gbnf_50k_parentheses_after_a_bracket_token() {
    gbnf_parentheses("gbnf 50k parentheses after <[>", "<[> ");
}

/// A chain of 100,000 GBNF rules (20,000 crashed the router's size computation).
#[test]
fn gbnf_chain_of_100k_rules() {
    let rules = 100_000;
    let mut chain = String::from("root ::= r0\n");
    for i in 0..rules {
        chain += &format!("r{i} ::= r{}\n", i + 1);
    }
    chain += &format!("r{rules} ::= \"a\"\n");
    let case = "gbnf chain of 100k rules";
    on_small_stack(case, || {
        let result = engine(Limits::new()).compile_gbnf(&chain, "chain.gbnf");
        if let Some(c) =
            compiled_or_limited(case, result, &[LimitKind::Nesting, LimitKind::GrammarSize])
        {
            assert_verdicts(case, &c, &["a"], &["", "aa"]);
        }
    });
}

/// A GBNF body with 200,000 postfix `?` (60,000 crashed).
#[test]
fn gbnf_200k_postfix_operators() {
    let postfix = format!("root ::= \"a\"{}\n", "?".repeat(200_000));
    let case = "gbnf 200k postfix ?";
    on_small_stack(case, || {
        let result = engine(Limits::new()).compile_gbnf(&postfix, "postfix.gbnf");
        if let Some(c) =
            compiled_or_limited(case, result, &[LimitKind::Nesting, LimitKind::GrammarSize])
        {
            assert_verdicts(case, &c, &["a", ""], &["aa"]);
        }
    });
}

/// A template `t` registered from `source`: a correct result, or a nesting, size or time
/// limit.
fn template(case: &str, source: &str, valid: &[&str], invalid: &[&str]) {
    on_small_stack(case, || {
        let mut engine = engine(Limits::new().compile_time(Some(Duration::from_secs(5))));
        let limits = [
            LimitKind::Nesting,
            LimitKind::GrammarSize,
            LimitKind::CompileTime,
        ];
        match engine.register_template_source("hostile.fw", source) {
            Ok(()) => {
                let c = engine
                    .compile("t")
                    .unwrap_or_else(|e| panic!("{case}: {e}"));
                assert_verdicts(case, &c, valid, invalid);
            }
            Err(e) => assert_limit(case, &e, &limits),
        }
    });
}

/// A template rule body with 50,000 postfix operators (10,000 crashed).
#[test]
fn template_50k_postfix_operators() {
    let source = format!("t ::= \"a\"{}\n", "?".repeat(50_000));
    template("template 50k postfix ?", &source, &["a", ""], &["aa"]);
}

/// A chain of 100,000 template rules (30,000 crashed the checker, the factory build and the
/// parse tree's drop).
#[test]
fn template_chain_of_100k_rules() {
    let mut source = String::from("t ::= r0\n");
    for i in 0..100_000 {
        source += &format!("r{i} ::= r{}\n", i + 1);
    }
    source += "r100000 ::= \"a\"\n";
    template("template chain of 100k rules", &source, &["a"], &["", "aa"]);
}

/// A regex nested 200 deep in a template, and as a request's argument bound into grammar IR:
/// refused under a nesting limit of 100, built under 300. Both used to be parsed under the
/// default limit (128) whatever the engine's, so raising the limit did not let them through.
#[test]
fn template_regexes_are_nested_within_the_engine_limit() {
    let deep = format!("{}a{}", "(".repeat(200), ")".repeat(200));
    let case = "template regex nested 200 deep";
    on_small_stack(case, || {
        for (nesting, fits) in [(100, false), (300, true)] {
            let limits = Limits::new().nesting(nesting);
            let mut e = engine(limits.clone());
            match e.register_template_source("deep.fw", &format!("t ::= /{deep}/\n")) {
                Ok(()) => assert!(fits, "{case}: registered under nesting {nesting}"),
                Err(err) => {
                    assert!(!fits, "{case}: {err}");
                    assert_limit(case, &err, &[LimitKind::Nesting]);
                    assert_eq!(err.limit().map(|l| l.max), Some(nesting as u64));
                }
            }
            let mut e = engine(limits);
            e.register_template_source("arg.fw", "t(re: regex) ::= re\n")
                .expect("a template with a regex parameter");
            match e.request_grammar(&format!("t(re: /{deep}/)")) {
                Ok(_) => assert!(fits, "{case}: bound under nesting {nesting}"),
                Err(err) => {
                    assert!(!fits, "{case}: {err}");
                    assert_limit(case, &err, &[LimitKind::Nesting]);
                }
            }
        }
    });
}

// ---------------------------------------------------------------------------------------
// Memory in a long-running server.

/// 3,000 template requests, each with a distinct 20 KB string argument: each retained
/// ~470 KB (1.4 GB here). The tables a request fills must be bounded in bytes; RSS may grow
/// by the cache budget and a constant, far below what the requests would retain.
///
/// RSS is the process's, and the suite's other tests allocate beside this one on other
/// threads (an engine over Qwen3 is a few hundred MB): the measurement runs alone, in a
/// child process of this test binary that runs only this test.
#[test]
fn distinct_long_template_arguments_do_not_accumulate() {
    const ALONE: &str = "FORMWORK_TEST_ALONE";
    let name = "hostile::distinct_long_template_arguments_do_not_accumulate";
    if std::env::var_os(ALONE).is_none() {
        let exe = std::env::current_exe().expect("the test binary");
        let child = std::process::Command::new(exe)
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(ALONE, "1")
            .output()
            .expect("the test binary runs again");
        let stdout = String::from_utf8_lossy(&child.stdout);
        assert!(
            child.status.success() && stdout.contains("1 passed"),
            "{name} alone: {stdout}{}",
            String::from_utf8_lossy(&child.stderr)
        );
        return;
    }
    let case = "3000 requests with distinct 20 KB strings";
    on_small_stack(case, || {
        let config = EngineConfig::new().cache_bytes(16 << 20);
        let mut engine = Engine::with_config(qwen3(), config);
        engine
            .register_template_source("echo.fw", "echo(s: str) ::= \"<\" s \">\"")
            .expect("a one-line template");
        let before = rss_bytes();
        let mut mask = vec![0u32; engine.vocab().mask_words()];
        for i in 0..3_000 {
            let arg: String = format!("{i:06}").repeat(20_000 / 6);
            let c = engine
                .compile(&format!("echo(s: \"{arg}\")"))
                .expect("compile");
            let mut m = c.matcher();
            m.fill_mask(&mut mask).expect("first mask");
        }
        let grown = rss_bytes().saturating_sub(before);
        println!("{case}: RSS grew {} MiB", grown >> 20);
        assert!(grown < 256 << 20, "{case}: RSS grew {} MiB", grown >> 20);
    });
}

// ---------------------------------------------------------------------------------------
// Unbounded time: under a short compile budget, a result or a typed limit.

fn short_budget() -> Limits {
    Limits::new().compile_time(Some(Duration::from_millis(1_000)))
}

fn enum_of(n: usize) -> Value {
    json!({"enum": (0..n).map(|i| format!("value-{i}")).collect::<Vec<_>>()})
}

/// An `enum` of 400,000 strings is past the alternatives limit (200,000 took quadratic time).
#[test]
fn enum_of_400k_strings() {
    let past = enum_of(400_000);
    let case = "enum of 400k strings";
    on_small_stack(case, || {
        let e = engine(short_budget())
            .compile_json_schema(&past, &JsonSchemaOptions::new())
            .expect_err("past the alternatives limit");
        assert_limit(case, &e, &[LimitKind::Alternatives, LimitKind::CompileTime]);
    });
}

/// An `enum` of 90,000 strings is under the alternatives limit: it compiles, stops at the
/// compile budget, or is refused for the size of its automaton (too many states for one DFA,
/// whose nondeterministic form, 2 million states and edges, would make each mask cost seconds).
#[test]
fn enum_of_90k_strings() {
    let under = enum_of(90_000);
    let case = "enum of 90k strings";
    on_small_stack(case, || {
        let result = engine(short_budget()).compile_json_schema(&under, &JsonSchemaOptions::new());
        let limits = [LimitKind::CompileTime, LimitKind::GrammarSize];
        if let Some(c) = compiled_or_limited(case, result, &limits) {
            assert_verdicts(case, &c, &["\"value-89999\""], &["\"value-90000\""]);
        }
    });
}

/// A `const` checked against a `pattern` of 300 alternatives under a star: the check runs
/// the reference recognizer, whose every byte costs the whole alternation (45 ms a byte
/// here), and read no deadline (over 15 minutes under a 5 s budget). Now the deadline stops
/// it, at the pattern.
#[test]
fn const_against_a_large_pattern_stops_at_the_deadline() {
    let alternatives: Vec<String> = (1..=300).map(|k| "a".repeat(k)).collect();
    let schema = json!({
        "type": "string",
        "pattern": format!("^({})*$", alternatives.join("|")),
        "const": "a".repeat(20_000)
    });
    let case = "const against a pattern of 300 alternatives";
    on_small_stack(case, || {
        let e = engine(short_budget())
            .compile_json_schema(&schema, &JsonSchemaOptions::new())
            .expect_err("past the compile budget");
        assert_limit(case, &e, &[LimitKind::CompileTime]);
        assert_eq!(
            e.location(),
            &formwork::Location::JsonPointer("/pattern".into()),
            "{case}: {e}"
        );
    });
}

/// `allOf` of `k` unions of ten objects, each naming its own property: the intersection is
/// a union of 10^k objects.
fn product_of_unions(k: usize) -> Value {
    let union = |i: usize| {
        let objects: Vec<Value> = (0..10)
            .map(|j| json!({"type": "object", "properties": {format!("p{i}_{j}"): {"type": "string"}}}))
            .collect();
        json!({ "anyOf": objects })
    };
    json!({ "allOf": (0..k).map(union).collect::<Vec<_>>() })
}

/// Intersections count the shapes they make against the grammar-size limit: a million-branch
/// product (3 GB and a panic past the grammar limit before, with no time limit) is refused
/// before it is built, at the `allOf` entry that passed the limit; a hundred-branch one
/// compiles, or is refused the same way under a smaller limit.
#[test]
fn intersection_products_count_the_shapes_they_make() {
    let case = "allOf of six unions of ten objects";
    let unlimited_time = Limits::new().compile_time(None);
    on_small_stack(case, || {
        let e = engine(unlimited_time.clone())
            .compile_json_schema(&product_of_unions(6), &JsonSchemaOptions::new())
            .expect_err("a million branches");
        assert_limit(case, &e, &[LimitKind::GrammarSize]);
        assert!(
            e.to_string().contains("shapes made by intersections"),
            "{e}"
        );
        assert!(
            matches!(e.location(), formwork::Location::JsonPointer(p) if p.starts_with("/allOf/")),
            "{case}: {e}"
        );
    });
    let case = "allOf of two unions of ten objects";
    on_small_stack(case, || {
        let two = product_of_unions(2);
        let c = engine(unlimited_time.clone())
            .compile_json_schema(&two, &JsonSchemaOptions::new())
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        let valid = [r#"{"p0_3":"a","p1_7":"b"}"#, r#"{}"#];
        assert_verdicts(case, &c, &valid, &["[]", "1"]);
        let e = engine(unlimited_time.clone().grammar_size(150))
            .compile_json_schema(&two, &JsonSchemaOptions::new())
            .expect_err("over 150 shapes");
        assert_limit(case, &e, &[LimitKind::GrammarSize]);
    });
}

/// A schema that meets its own reference while it is being read, through five keywords: each
/// meeting made a table entry named after the one before, so through `dependentSchemas`,
/// `allOf`, `anyOf` and `contains` names doubled at each level of the recursion (465 MB at the
/// 40th, then an abort for want of memory, or 24 GB and the OOM killer) and through `not`
/// grew by a name at each (4 GB in 10 s). With no compile deadline, so that the outcome is not
/// the clock's: a nesting or grammar-size limit, or a correct result.
#[test]
fn schemas_that_meet_their_own_reference() {
    let own = json!({"$ref": "#/$defs/a"});
    let cases: [(&str, Value, &[&str], &[&str]); 5] = [
        (
            "dependentSchemas",
            json!({"type": "object", "dependentSchemas": {"x": own}}),
            &["{}", r#"{"x":{}}"#],
            &["[]", "1"],
        ),
        (
            "allOf",
            json!({"type": "object", "properties": {"p": {"type": "integer"}}, "allOf": [own]}),
            &["{}", r#"{"p":1}"#],
            &[r#"{"p":"1"}"#, "[]"],
        ),
        (
            "anyOf",
            json!({"type": "object", "anyOf": [own, {"required": ["q"]}]}),
            &[r#"{"q":1}"#, r#"{"q":[]}"#],
            &["{}", "[]"],
        ),
        (
            "contains",
            json!({"type": "array", "contains": {"type": "array"}, "allOf": [own]}),
            &["[[]]", "[1,[]]"],
            &["[]", "[1]"],
        ),
        // A paradox (`a` is an object that is not `a`): no string is sure to be valid.
        (
            "not",
            json!({"type": "object", "not": own}),
            &[],
            &["[]", "1"],
        ),
    ];
    for (via, a, valid, invalid) in cases {
        let schema = json!({"$defs": {"a": a}, "$ref": "#/$defs/a"});
        let case = format!("a schema meeting its own reference through {via}");
        schema_without_deadline(&case, &schema, valid, invalid);
    }
}

/// Past the grammar-size limit, lowering a schema stops with a `Limit` error wherever it is:
/// the rules of key tries and of "any value" used to assume their definition could not fail
/// and panicked.
#[test]
fn every_grammar_size_limit_is_an_error_in_schema_lowering() {
    let schema = formwork_testkit::grammars::object_of_every_part();
    let case = "every grammar size limit up to 400";
    on_small_stack(case, || {
        let mut refused = 0;
        for max in 1..=400 {
            let limits = Limits::new().compile_time(None).grammar_size(max);
            let result = engine(limits).compile_json_schema(&schema, &JsonSchemaOptions::new());
            if let Err(e) = result {
                let kind = e.limit().map(|l| l.kind);
                assert_eq!(kind, Some(LimitKind::GrammarSize), "{case}: {max}: {e}");
                refused += 1;
            }
        }
        assert!(refused > 0, "{case}: no limit was reached");
    });
}

/// A tag `forbid` list of 20,000 strings of 200 bytes (10,000 took over 60 s and 4 GB).
#[test]
fn long_forbid_lists() {
    let forbid: Vec<String> = (0..20_000).map(|i| format!("{i:08}").repeat(25)).collect();
    let spec = json!({"format": "qwen", "tools": [], "forbid": forbid});
    let case = "forbid 20k x 200 bytes";
    on_small_stack(case, || {
        let result =
            TagDispatch::from_spec(&spec).and_then(|d| engine(short_budget()).compile_tags(&d));
        let limits = [
            LimitKind::CompileTime,
            LimitKind::Alternatives,
            LimitKind::AutomatonStates,
            LimitKind::GrammarSize,
        ];
        if let Some(c) = compiled_or_limited(case, result, &limits) {
            assert_verdicts(case, &c, &["plain text"], &[forbid[7].as_str()]);
        }
    });
}

/// A ~1 KB regex of alternated `\w{0,k}` pieces (587 bytes took 55 s in operator
/// compilation).
#[test]
fn alternated_bounded_word_repeats() {
    let pattern = (0..60)
        .map(|i| format!("\\w{{0,{}}}{}", 20 + i, char::from(b'a' + (i % 26) as u8)))
        .collect::<Vec<_>>()
        .join("|");
    let case = format!(
        "regex of {} bytes of \\w{{0,k}} alternatives",
        pattern.len()
    );
    on_small_stack(&case, || {
        let result = engine(short_budget()).compile_regex(&pattern);
        if let Some(c) = compiled_or_limited(
            &case,
            result,
            &[LimitKind::CompileTime, LimitKind::AutomatonStates],
        ) {
            assert_verdicts(&case, &c, &["xyza", "b"], &["", "-"]);
        }
    });
}

fn big_gbnf(bytes: usize) -> String {
    let mut g = String::from("root ::= r0\n");
    let mut i = 0;
    while g.len() < bytes {
        g += &format!(
            "r{i} ::= \"w{i}\" r{} | \"x{i}\" r{} | \"end\"\n",
            i + 1,
            i + 1
        );
        i += 1;
    }
    g + &format!("r{i} ::= \"end\"\n")
}

/// GBNF past the input size limit (20 MiB).
#[test]
fn gbnf_of_20_mib() {
    let past = big_gbnf(20 << 20);
    let case = "gbnf of 20 MiB";
    on_small_stack(case, || {
        let e = engine(short_budget())
            .compile_gbnf(&past, "big.gbnf")
            .expect_err("past the input limit");
        assert_limit(case, &e, &[LimitKind::InputBytes]);
    });
}

/// A 6 MiB GBNF, under the input limit (bisimulation on 10 MB took 50 s and 2 GB past the
/// 10 s budget): a result or the compile budget.
#[test]
fn gbnf_of_6_mib() {
    let under = big_gbnf(6 << 20);
    let case = "gbnf of 6 MiB";
    on_small_stack(case, || {
        let result = engine(short_budget()).compile_gbnf(&under, "big.gbnf");
        let limits = [
            LimitKind::CompileTime,
            LimitKind::GrammarSize,
            LimitKind::AutomatonStates,
        ];
        if let Some(c) = compiled_or_limited(case, result, &limits) {
            assert_verdicts(case, &c, &["w0x1end"], &["w0w0end"]);
        }
    });
}

/// `pattern` compiled on `backend`, or `None` for a compile-time or automaton-size limit.
fn regex_on(
    case: &str,
    backend: BackendChoice,
    limits: Limits,
    pattern: &str,
) -> Option<Constraint> {
    let result = engine_on(backend, limits).compile_regex(pattern);
    compiled_or_limited(
        case,
        result,
        &[LimitKind::CompileTime, LimitKind::AutomatonStates],
    )
}

/// A grammar ambiguous in every way (`x ::= "a" x | x "a" | "a" | x x`): every scannable item
/// of a row gathers thousands of callers for its context key, and the sorting and lookups
/// that describe them are charged to the mask's work. Uncharged, the default budget let a
/// mask run 2–4 s and the walk reached step 52 before a `MaskWork` limit; charged, the limit
/// comes by step 40 (work units, not time: the same on any machine).
#[test]
fn callers_of_an_ambiguous_grammar_are_charged() {
    let case = "ambiguous grammar's callers";
    on_small_stack(case, || {
        let c = engine(Limits::new())
            .compile_gbnf(
                "root ::= x \"b\"\nx ::= \"a\" x | x \"a\" | \"a\" | x x\n",
                "amb",
            )
            .expect("compiles");
        let vocab = tokenizers::qwen3();
        let a8 = vocab.encode("aaaaaaaa").expect("tokenize")[0];
        let mut m = c.matcher();
        let mut mask = vec![0u32; vocab.mask_words()];
        let mut slowest = Duration::ZERO;
        let refused_at = (0..60).find_map(|step| {
            let started = Instant::now();
            let filled = m.fill_mask(&mut mask);
            slowest = slowest.max(started.elapsed());
            match filled {
                Ok(()) => {
                    m.consume(a8).expect("an allowed token");
                    None
                }
                Err(e) => {
                    assert!(
                        matches!(e.kind(), MatchErrorKind::Limit(l) if l.kind == LimitKind::MaskWork),
                        "step {step}: {e}"
                    );
                    Some(step)
                }
            }
        });
        println!(
            "{case}: refused at step {refused_at:?}, slowest mask {:.1} ms",
            slowest.as_secs_f64() * 1e3
        );
        assert!(refused_at.is_some_and(|s| s <= 40), "{refused_at:?}");
    });
}

/// Ambiguous counted repeats (every mask took 0.5–1.8 s and grew with the step): under a
/// mask-work budget each mask is a result or a `MaskWork` limit, on both backends, and a
/// token the mask allowed is consumed.
#[test]
fn ambiguous_counted_repeats_bound_each_mask() {
    let patterns = [
        "([a-z]{0,10000}b?){0,3}",
        "(a|aa){0,20000}",
        "[a-z]{0,12000}[a-z]{0,12000}",
    ];
    let vocab = tokenizers::qwen3();
    let a = vocab.encode("a").expect("tokenize")[0];
    for pattern in patterns {
        for backend in [BackendChoice::Operators, BackendChoice::Earley] {
            let case = format!("{pattern} on {backend:?}");
            on_small_stack(&case, || {
                let limits = short_budget().mask_work(2_000_000);
                let Some(c) = regex_on(&case, backend, limits, pattern) else {
                    return;
                };
                let mut m = c.matcher();
                let mut mask = vec![0u32; vocab.mask_words()];
                let mut slowest = Duration::ZERO;
                for step in 0..40 {
                    let started = Instant::now();
                    let filled = m.fill_mask(&mut mask);
                    slowest = slowest.max(started.elapsed());
                    match filled {
                        Ok(()) => {}
                        Err(e) => {
                            assert!(
                                matches!(e.kind(), MatchErrorKind::Limit(l) if l.kind == LimitKind::MaskWork),
                                "{case} step {step}: {e}"
                            );
                            println!("{case}: step {step} refused: {e}");
                            break;
                        }
                    }
                    assert!(
                        get_bit(&mask, a),
                        "{case}: `a` must be allowed at step {step}"
                    );
                    m.consume(a).unwrap_or_else(|e| {
                        panic!("{case}: allowed `a` refused at step {step}: {e}")
                    });
                }
                println!("{case}: slowest mask {:.1} ms", slowest.as_secs_f64() * 1e3);
            });
        }
    }
}

// ---------------------------------------------------------------------------------------
// The broken contract.

/// Every token the mask allows is consumed, at every step of a walk into a counted repeat of
/// a counted repeat (`(a{0,50}){0,200}` allowed a token `consume` refused past 4,096
/// readings), on both backends.
fn nested_counted_repeats(backend: BackendChoice) {
    let vocab = tokenizers::qwen3();
    for pattern in ["(a{0,50}){0,200}", "(a{0,100}){0,1000}"] {
        let case = format!("{pattern} on {backend:?}");
        on_small_stack(&case, || {
            let Some(c) = regex_on(&case, backend, short_budget(), pattern) else {
                return;
            };
            let mut m = c.matcher();
            let mut mask = vec![0u32; vocab.mask_words()];
            for step in 0..120 {
                if let Err(e) = m.fill_mask(&mut mask) {
                    assert!(matches!(e.kind(), MatchErrorKind::Limit(_)), "{case}: {e}");
                    println!("{case}: step {step} refused: {e}");
                    return;
                }
                let allowed: Vec<TokenId> = iter_ones(&mask).collect();
                for &t in &allowed {
                    let mut fork = m.clone();
                    fork.consume(t).unwrap_or_else(|e| {
                        panic!(
                            "{case}: step {step}: allowed {} refused: {e}",
                            vocab.display_token(t)
                        )
                    });
                }
                // The longest run of `a` the mask allows, so the walk goes deep.
                let Some(&next) = allowed
                    .iter()
                    .filter(|&&t| !vocab.is_eos(t))
                    .max_by_key(|&&t| vocab.token_bytes(t).len())
                else {
                    break;
                };
                m.consume(next).expect("checked on a fork");
            }
        });
    }
}

#[test]
fn nested_counted_repeats_on_operators() {
    nested_counted_repeats(BackendChoice::Operators);
}

#[test]
fn nested_counted_repeats_on_earley() {
    nested_counted_repeats(BackendChoice::Earley);
}

/// After EOS, both backends allow only EOS and treat consuming it alike, as the mask says.
#[test]
fn eos_after_eos_is_the_same_on_both_backends() {
    let vocab = tokenizers::qwen3();
    let eos = vocab.eos_tokens()[0];
    let tokens = vocab.encode("ab").expect("tokenize");
    let mut outcomes = Vec::new();
    for backend in [BackendChoice::Operators, BackendChoice::Earley] {
        let case = format!("EOS after EOS on {backend:?}");
        let outcome = on_small_stack(&case, || {
            let c = engine_on(backend, Limits::new())
                .compile_regex("ab")
                .expect("compile");
            let mut m = c.matcher();
            m.consume_all(&tokens).expect("ab");
            m.consume(eos).expect("EOS after a complete text");
            let mut mask = vec![0u32; vocab.mask_words()];
            m.fill_mask(&mut mask).expect("mask after EOS");
            assert!(
                iter_ones(&mask).all(|t| vocab.is_eos(t)),
                "{case}: only EOS after EOS"
            );
            let second = m.consume(eos).map_err(|e| e.kind().clone());
            assert_eq!(
                get_bit(&mask, eos),
                second.is_ok(),
                "{case}: the mask and consume disagree: {second:?}"
            );
            second
        });
        outcomes.push(outcome);
    }
    assert_eq!(
        outcomes[0], outcomes[1],
        "the backends disagree on EOS after EOS"
    );
}

// ---------------------------------------------------------------------------------------
// Smaller ones.

/// With a history of 1,000 tokens, 5,000 steps later the matcher can roll back 1,000 and
/// no more (history grew 100–360 bytes per token with no cap).
#[test]
fn history_is_capped_by_the_limit() {
    let vocab = tokenizers::qwen3();
    let a = vocab.encode("a").expect("tokenize")[0];
    for backend in [BackendChoice::Operators, BackendChoice::Earley] {
        let case = format!("history cap on {backend:?}");
        on_small_stack(&case, || {
            let c = engine_on(backend, Limits::new().history(1_000))
                .compile_regex("a*")
                .expect("compile");
            let mut m = c.matcher();
            for _ in 0..5_000 {
                m.consume(a).expect("a");
            }
            let e = m.rollback(1_001).expect_err("past the kept history");
            assert!(
                matches!(
                    e.kind(),
                    MatchErrorKind::RollbackTooFar {
                        available: 1_000,
                        ..
                    }
                ),
                "{case}: {e}"
            );
            m.rollback(1_000).expect("the kept history");
        });
    }
}

/// Two tools of one name: refused, or compiled with a warning.
#[test]
fn duplicate_tool_names_are_refused_or_warned() {
    let spec = json!({"format": "qwen", "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}},
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}]});
    let case = "duplicate tool names";
    on_small_stack(case, || {
        match TagDispatch::from_spec(&spec).and_then(|d| engine(Limits::new()).compile_tags(&d)) {
            Ok(c) => assert!(
                !c.warnings().is_empty(),
                "{case}: compiled without a warning"
            ),
            Err(e) => assert_eq!(e.kind(), CompileErrorKind::Invalid, "{case}: {e}"),
        }
    });
}

/// The CLI's limit flags reach the engine: `--max-nesting 4` refuses a schema nested 6 deep.
#[test]
fn cli_limit_flags_reach_the_engine() {
    let path = std::env::temp_dir().join(format!("formwork-hostile-{}.json", std::process::id()));
    std::fs::write(&path, nested_arrays(6).to_string()).expect("write the schema");
    let o = Command::new(env!("CARGO_BIN_EXE_formwork"))
        .args(["check", "--max-nesting", "4", "--schema"])
        .arg(&path)
        .args(["--text", "[]"])
        .output()
        .expect("run formwork");
    std::fs::remove_file(&path).ok();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nesting limit"), "{stderr}");
}
