//! The engine's router: regular constraints give the same masks on the operator backend and on
//! the Earley backend (and both equal the reference recognizer's), and the router sends regular
//! grammars to operators and recursive ones to Earley.

use formwork::engine::{BackendChoice, BackendKind, Constraint, Engine, EngineConfig};
use formwork::front::json_schema::{JsonSchemaOptions, Whitespace};
use formwork::front::tags::{TagDispatch, ToolFormat};
use formwork::ir::recognizer::Recognizer;
use formwork::ir::Grammar;
use formwork::vocab::Vocab;
use formwork::{CompileErrorKind, Matcher, Tool};
use formwork_testkit::tokenizers;
use serde_json::json;

fn engine(choice: BackendChoice) -> Engine {
    Engine::with_config(
        tokenizers::qwen3().clone(),
        EngineConfig::new().backend(choice),
    )
}

/// Walks `text` on both constraints and the oracle: at every step, and at the end, the two
/// masks are bit-equal and equal to the reference recognizer's.
fn assert_same_masks(
    label: &str,
    vocab: &Vocab,
    grammar: &Grammar,
    ops: &Constraint,
    earley: &Constraint,
    text: &str,
) {
    assert_eq!(ops.backend(), BackendKind::Operators, "{label}");
    assert_eq!(earley.backend(), BackendKind::Earley, "{label}");
    let rec = Recognizer::new(grammar);
    let mut chart = rec.start();
    let (mut a, mut b) = (ops.matcher(), earley.matcher());
    let mut ma = vec![0u32; vocab.mask_words()];
    let mut mb = vec![0u32; vocab.mask_words()];
    let tokens = vocab.encode(text).unwrap();
    for step in 0..=tokens.len() {
        a.fill_mask(&mut ma).unwrap();
        b.fill_mask(&mut mb).unwrap();
        let oracle = chart.mask(&rec, vocab);
        assert!(
            ma == oracle.words(),
            "{label} {text:?} step {step}: operator mask differs from the oracle ({} vs {} tokens)",
            formwork::bitmask::iter_ones(&ma).count(),
            oracle.iter().count()
        );
        assert!(
            mb == ma,
            "{label} {text:?} step {step}: Earley mask differs from the operator mask"
        );
        let Some(&t) = tokens.get(step) else { break };
        assert!(
            chart.push_token(&rec, vocab, t),
            "{label}: {text:?} is not in the language"
        );
        a.consume(t).unwrap();
        b.consume(t).unwrap();
    }
    assert!(a.is_accepting() && b.is_accepting(), "{label}: {text:?}");
}

/// A grammar compiled three ways: forced to operators, forced to Earley, and routed (to
/// `routed_to`: operators for small regular grammars, Earley past the size where it compiles
/// faster).
fn check_grammar(label: &str, grammar: &Grammar, texts: &[&str], routed_to: BackendKind) {
    let vocab = tokenizers::qwen3();
    let ops = engine(BackendChoice::Operators)
        .compile_grammar(grammar)
        .unwrap();
    let earley = engine(BackendChoice::Earley)
        .compile_grammar(grammar)
        .unwrap();
    let routed = engine(BackendChoice::Auto)
        .compile_grammar(grammar)
        .unwrap();
    assert_eq!(routed.backend(), routed_to, "{label}");
    for text in texts {
        assert_same_masks(label, vocab, grammar, &ops, &earley, text);
    }
}

#[test]
fn regular_schemas_give_identical_masks_on_both_backends() {
    let schemas = [
        (
            BackendKind::Earley,
            json!({"type": "object", "properties": {
                "name": {"type": "string", "maxLength": 12},
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "tags": {"type": "array", "items": {"enum": ["a", "bc", "déf"]}, "maxItems": 3}
            }, "required": ["name"], "additionalProperties": false}),
            JsonSchemaOptions::new(),
            vec![
                r#"{"name":"Ann","age":36,"tags":["bc","déf"]}"#,
                r#"{"name":"\"x\\y"}"#,
                r#"{"name":"","tags":[]}"#,
            ],
        ),
        (
            BackendKind::Earley,
            json!({"anyOf": [{"type": "number"}, {"type": "boolean"}, {"const": [1, "two"]}]}),
            JsonSchemaOptions::new().whitespace(Whitespace::Flexible { max_run: Some(2) }),
            vec!["-12.5e+3", "true", "[1, \"two\"]", "[ 1,\n\"two\" ]"],
        ),
    ];
    for (i, (routed, schema, options, texts)) in schemas.iter().enumerate() {
        let grammar = formwork::front::json_schema::compile_schema(schema, options)
            .unwrap()
            .grammar;
        check_grammar(&format!("schema {i}"), &grammar, texts, *routed);
        // The Engine entry point routes the same way.
        let c = engine(BackendChoice::Auto)
            .compile_json_schema(schema, options)
            .unwrap();
        assert_eq!(c.backend(), *routed);
    }
}

#[test]
fn regular_gbnf_and_regexes_give_identical_masks_on_both_backends() {
    let gbnf = r#"
root ::= "(" item ("," ws item)* ")"
item ::= word | num
word ::= [a-z]+
num  ::= "-"? [0-9]+ ("." [0-9]+)?
ws   ::= " "?
"#;
    let grammar = formwork::front::gbnf::gbnf_to_ir(gbnf, "list.gbnf").unwrap();
    check_grammar(
        "gbnf",
        &grammar,
        &["(abc)", "(a, -1.25,zz)", "(hello, world, 42)"],
        BackendKind::Operators,
    );

    for (pattern, texts) in [
        (r"\d+(\.\d+)*", &["3.14.15", "2026"][..]),
        (r"[a-z]+@[a-z]+\.(com|org)", &["ann@example.org"][..]),
        (r"(ab|a)(bc|c)*\s?é", &["abcbc é", "aé"][..]),
    ] {
        let mut g = formwork::ir::GrammarBuilder::new();
        let root = formwork::front::regex::regex_to_ir(pattern, &mut g).unwrap();
        let start = g.rule("regex");
        g.define(start, root).unwrap();
        let grammar = g.finish(start).unwrap();
        check_grammar(pattern, &grammar, texts, BackendKind::Operators);
        // compile_regex follows the forced backend too.
        let ops = engine(BackendChoice::Auto).compile_regex(pattern).unwrap();
        let earley = engine(BackendChoice::Earley)
            .compile_regex(pattern)
            .unwrap();
        for text in texts {
            assert_same_masks(pattern, tokenizers::qwen3(), &grammar, &ops, &earley, text);
        }
    }
}

#[test]
fn router_sends_recursive_grammars_to_earley() {
    let auto = engine(BackendChoice::Auto);
    // A JSON schema recursing through $ref.
    let tree = json!({"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}
    }, "additionalProperties": false}}, "$ref": "#/$defs/node"});
    let c = auto
        .compile_json_schema(&tree, &JsonSchemaOptions::new())
        .unwrap();
    assert_eq!(c.backend(), BackendKind::Earley);
    let mut m = c.matcher();
    let text = r#"{"v":1,"kids":[{"kids":[{"v":2}]},{}]}"#;
    m.consume_all(&tokenizers::qwen3().encode(text).unwrap())
        .unwrap();
    assert!(m.is_accepting());
    // A GBNF expression grammar (left recursion).
    let expr = r#"
root ::= expr
expr ::= expr ("+" | "-") term | term
term ::= term ("*" | "/") factor | factor
factor ::= [0-9]+ | "(" expr ")"
"#;
    let c = auto.compile_gbnf(expr, "expr.gbnf").unwrap();
    assert_eq!(c.backend(), BackendKind::Earley);
    // Forcing a recursive grammar onto operators is the lowering's typed error.
    let e = engine(BackendChoice::Operators)
        .compile_gbnf(expr, "expr.gbnf")
        .unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::NotRegular);
    // Regular inputs take operators: a flat schema, a non-recursive grammar.
    let flat = json!({"type": "array", "items": {"type": "boolean"}, "minItems": 1});
    let c = auto
        .compile_json_schema(&flat, &JsonSchemaOptions::new())
        .unwrap();
    assert_eq!(c.backend(), BackendKind::Operators);
    let c = auto.compile_gbnf("root ::= [a-z]+ \"!\"", "g").unwrap();
    assert_eq!(c.backend(), BackendKind::Operators);
}

#[test]
fn builtin_requests_reach_the_router_and_templates_shadow_them() {
    let mut engine = engine(BackendChoice::Auto);
    let vocab = tokenizers::qwen3();
    let schema = engine
        .compile(r##"json_schema(schema: "{\"type\": \"array\", \"items\": {\"$ref\": \"#\"}}")"##)
        .unwrap();
    assert_eq!(schema.backend(), BackendKind::Earley);
    let mut m = schema.matcher();
    m.consume_all(&vocab.encode("[[],[[]]]").unwrap()).unwrap();
    assert!(m.is_accepting());
    let regex = engine.compile("regex(pattern: /[0-9]{2}/)").unwrap();
    assert_eq!(regex.backend(), BackendKind::Operators);
    let json_form = engine
        .compile_json_request(r#"{"gbnf": {"grammar": "root ::= \"yes\" | \"no\""}}"#)
        .unwrap();
    assert_eq!(json_form.backend(), BackendKind::Operators);
    // The IR of a built-in request is the language of its constraint.
    let g = engine.request_grammar("regex(pattern: /ab?/)").unwrap();
    assert!(!g.is_recursive());
    // Errors name the place.
    let e = engine
        .compile(r#"json_schema(schema: "{\"type\": ")"#)
        .unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::Syntax);
    let e = engine
        .compile(r#"gbnf(text: "root ::= \"x\"")"#)
        .unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::Invalid);
    assert!(e.to_string().contains("expected `grammar`"), "{e}");
    let e = engine.compile("frobnicate(x: 1)").unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::Unsupported);
    assert!(e.to_string().contains("json_schema"), "{e}");
    // A template named `gbnf` wins over the built-in.
    engine
        .register_template_source("r.fw", r#"gbnf(x: str) ::= "<" x ">""#)
        .unwrap();
    let t = engine.compile(r#"gbnf(x: "hi")"#).unwrap();
    let mut m = t.matcher();
    m.consume_all(&vocab.encode("<hi>").unwrap()).unwrap();
    assert!(m.is_accepting());
}

#[test]
fn tool_calls_compile_through_the_router() {
    let tools = [Tool::new(
        "get_weather",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    )];
    let c = engine(BackendChoice::Auto)
        .compile_tags(&TagDispatch::for_tools(ToolFormat::Llama31, &tools))
        .unwrap();
    // Free text is one right-linear rule per automaton state: recursive, so Earley.
    assert_eq!(c.backend(), BackendKind::Earley);
    let mut m = c.matcher();
    let text = r#"Sure. <function=get_weather>{"city":"Oslo"}</function> Done."#;
    m.consume_all(&tokenizers::qwen3().encode(text).unwrap())
        .unwrap();
    assert!(m.is_accepting());
}
