//! Every limit swept over small values, for every kind of input and both backends: a
//! compilation under any ceiling ends in a constraint or in a `Limit` error naming the limit
//! that was swept, never in a panic or another error. Code written for the generous defaults
//! assumed some steps "cannot fail" that do fail once a limit is small (commit 1202926: two
//! rule definitions in the JSON Schema lowering panicked past the grammar-size limit); a
//! sweep finds that whole class wherever it is, without knowing where to look.
//!
//! Where a constraint compiles, its valid texts are walked token by token with the matcher
//! contract checked at every step (`formwork_testkit::drive`) and must be accepted, its
//! invalid texts must not be: a limit may refuse, never loosen or narrow a constraint. The
//! match-time limits (mask work, readings, history) are swept the same way over the walks.
//!
//! Values: every one from 0 to 32, then steps of a thirty-second, until the input compiles
//! (or walks) within the limit at four values in a row, then the largest value (a server's
//! "unlimited"). Everything runs on a 256 KiB stack, on the small synthetic vocabulary
//! (thousands of compilations; its masks are exact as Qwen3's).

use std::time::{Duration, Instant};

use formwork::engine::BackendChoice;
use formwork::{
    CompileError, CompileErrorKind, Constraint, Engine, EngineConfig, JsonSchemaOptions, LimitKind,
    Limits, MatchErrorKind, Matcher, Piece, PropertyOrder, TagDispatch, TokenId, Tool, ToolFormat,
    Vocab, Whitespace,
};
use formwork_testkit::drive::Checked;
use formwork_testkit::stack::on_small_stack;
use formwork_testkit::targets::with_limit;
use formwork_testkit::{repo_path, vocab};
use serde_json::{json, Value};

/// The limits a compilation is checked against, each swept in turn: all but those of
/// matching.
fn compile_limits() -> impl Iterator<Item = LimitKind> {
    LimitKind::ALL
        .into_iter()
        .filter(|k| !matches!(k, LimitKind::MaskWork | LimitKind::History))
}

/// The limits a matcher is checked against while it walks (readings also at compile time).
const MATCH_LIMITS: &[LimitKind] = &[LimitKind::MaskWork, LimitKind::Readings];

/// Past this, a sweep that never reached the input's needs has found a limit the input can
/// never satisfy: a failure.
const LARGEST: u64 = 1 << 24;

/// Compile time when another limit is swept: far more than any case needs, so a
/// `CompileTime` error there would be a hang another limit caused.
const GENEROUS_TIME: Duration = Duration::from_secs(30);

/// One input and the texts it must and must not accept.
struct Case {
    name: String,
    input: Input,
    valid: Vec<String>,
    invalid: Vec<String>,
}

enum Input {
    Schema(Value, JsonSchemaOptions),
    Gbnf(&'static str),
    Regex(&'static str),
    Tags(TagDispatch),
    /// A request (text or JSON form) to an engine with one shipped template file registered
    /// (under the same limits), or none (the built-in structures).
    Request {
        text: String,
        template: Option<&'static str>,
    },
}

impl Case {
    fn new(name: impl Into<String>, input: Input, valid: &[&str], invalid: &[&str]) -> Case {
        Case {
            name: name.into(),
            input,
            valid: valid.iter().map(|s| s.to_string()).collect(),
            invalid: invalid.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// Templates, GBNF and tag dispatch name special tokens, EOS among them.
    fn eos_may_be_symbol(&self) -> bool {
        !matches!(self.input, Input::Schema(..) | Input::Regex(_))
    }

    /// Compiles the case on a fresh engine under `limits` (registering the templates first,
    /// which is under the same limits).
    fn compile(&self, backend: BackendChoice, limits: Limits) -> Result<Constraint, CompileError> {
        let config = EngineConfig::new()
            .backend(backend)
            .limits(limits)
            .cache_bytes(4 << 20)
            .template_mask_bytes(1 << 20);
        let mut engine = Engine::with_config(vocab::small().clone(), config);
        match &self.input {
            Input::Schema(schema, options) => engine.compile_json_schema(schema, options),
            Input::Gbnf(text) => engine.compile_gbnf(text, "sweep.gbnf"),
            Input::Regex(pattern) => engine.compile_regex(pattern),
            Input::Tags(dispatch) => engine.compile_tags(dispatch),
            Input::Request { text, template } => {
                if let Some(file) = template {
                    engine.register_templates([repo_path(&format!("templates/{file}"))])?;
                }
                match text.starts_with('{') {
                    true => engine.compile_json_request(text),
                    false => engine.compile(text),
                }
            }
        }
    }
}

/// Runs `at` on 0, 1, ..., 32, then in steps of a thirty-second, until it answers `true` (the
/// input got through within the limit) four times in a row, then on the largest value (what
/// a server sets for "unlimited"), which must let it through too; returns how many values it
/// ran.
fn sweep(case: &str, kind: LimitKind, mut at: impl FnMut(u64) -> bool) -> usize {
    let (mut value, mut through, mut runs) = (0u64, 0, 0);
    while through < 4 {
        assert!(
            value <= LARGEST,
            "{case}: {kind:?} up to {LARGEST} never let it through"
        );
        runs += 1;
        through = match at(value) {
            true => through + 1,
            false => 0,
        };
        value += (value / 32).max(1);
    }
    assert!(at(u64::MAX), "{case}: {kind:?} at its largest value");
    runs + 1
}

/// The tokens of `text` on `vocab`: special tokens by their content, the text between them
/// longest match first.
fn tokens(vocab: &Vocab, text: &str) -> Vec<TokenId> {
    let specials: Vec<(&str, TokenId)> = vocab.specials().collect();
    let mut out = Vec::new();
    let (mut rest, mut plain) = (text, String::new());
    while !rest.is_empty() {
        if let Some(&(content, id)) = specials.iter().find(|(c, _)| rest.starts_with(c)) {
            out.extend(vocab.encode_greedy(plain.as_bytes()).expect("tokenize"));
            plain.clear();
            out.push(id);
            rest = &rest[content.len()..];
        } else {
            let c = rest.chars().next().expect("not empty");
            plain.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out.extend(vocab.encode_greedy(plain.as_bytes()).expect("tokenize"));
    out
}

/// How a walk of one text ended.
#[derive(Debug, PartialEq, Eq)]
enum Walk {
    Accepted,
    Refused,
    Limited,
}

/// Walks `text` through a fresh matcher of `constraint`, every step's contract checked.
fn walk(case: &Case, constraint: &Constraint, text: &str) -> Walk {
    let vocab = vocab::small();
    let tokens = tokens(vocab, text);
    let checked = Checked::new(vocab, constraint.matcher(), case.eos_may_be_symbol());
    let (taken, drive) = checked.walk(&tokens);
    match (drive.limited, taken == tokens.len() && drive.accepting) {
        (true, _) => Walk::Limited,
        (false, true) => Walk::Accepted,
        (false, false) => Walk::Refused,
    }
}

/// Checks every text of `case` on `constraint`: valid ones accepted, invalid ones refused, or
/// a typed match limit; true if no limit stopped a walk.
fn verdicts(case: &Case, constraint: &Constraint, at: &str) -> bool {
    let mut unlimited = true;
    for text in &case.valid {
        match walk(case, constraint, text) {
            Walk::Accepted => {}
            Walk::Limited => unlimited = false,
            Walk::Refused => panic!("{}: {at}: valid {text:?} refused", case.name),
        }
    }
    for text in &case.invalid {
        match walk(case, constraint, text) {
            Walk::Refused => {}
            Walk::Limited => unlimited = false,
            Walk::Accepted => panic!("{}: {at}: invalid {text:?} accepted", case.name),
        }
    }
    unlimited
}

/// `Some` constraint, or `None` for a `Limit` error naming `kind`; anything else fails.
fn compiled_or_refused(
    case: &Case,
    at: &str,
    kind: LimitKind,
    result: Result<Constraint, CompileError>,
) -> Option<Constraint> {
    let e = match result {
        Ok(c) => return Some(c),
        Err(e) => e,
    };
    assert_eq!(
        e.kind(),
        CompileErrorKind::Limit,
        "{}: {at}: not a limit error: {e}",
        case.name
    );
    let limit = e.limit().expect("a Limit error names its limit");
    assert_eq!(limit.kind, kind, "{}: {at}: another limit: {e}", case.name);
    None
}

/// Prints what a sweep ran (`cargo test --test suite limit_sweeps:: -- --nocapture`).
fn report(
    case: &Case,
    backend: BackendChoice,
    kind: LimitKind,
    what: &str,
    runs: usize,
    started: Instant,
) {
    let ms = started.elapsed().as_secs_f64() * 1e3;
    println!(
        "{} on {backend:?}: {kind:?}: {runs} values ({what}), {ms:.0} ms",
        case.name
    );
}

/// Sweeps every compile-time limit over `case` on `backend`.
fn sweep_compile_limits(case: &Case, backend: BackendChoice) {
    let base = Limits::new().compile_time(Some(GENEROUS_TIME));
    match case.compile(backend, base.clone()) {
        Ok(c) => assert!(verdicts(case, &c, "defaults"), "{}: limited", case.name),
        Err(e) => panic!("{} on {backend:?}: does not compile: {e}", case.name),
    }
    for kind in compile_limits() {
        let started = Instant::now();
        let runs = sweep(&case.name, kind, |value| {
            let at = format!("{backend:?}, {kind:?} {value}");
            let result = case.compile(backend, with_limit(base.clone(), kind, value));
            match compiled_or_refused(case, &at, kind, result) {
                Some(c) => {
                    verdicts(case, &c, &at);
                    true
                }
                None => false,
            }
        });
        report(case, backend, kind, "compiles", runs, started);
    }
}

/// Sweeps the match-time limits over the walks of `case` on `backend`, and the history over
/// rollbacks of its first valid text.
fn sweep_match_limits(case: &Case, backend: BackendChoice) {
    let base = Limits::new().compile_time(Some(GENEROUS_TIME));
    for &kind in MATCH_LIMITS {
        let started = Instant::now();
        let runs = sweep(&case.name, kind, |value| {
            let at = format!("{backend:?}, {kind:?} {value}");
            let result = case.compile(backend, with_limit(base.clone(), kind, value));
            match compiled_or_refused(case, &at, kind, result) {
                Some(c) => verdicts(case, &c, &at),
                None => false,
            }
        });
        report(case, backend, kind, "walks", runs, started);
    }
    let vocab = vocab::small();
    let text = tokens(vocab, &case.valid[0]);
    for history in 0..=text.len().min(8) {
        let c = case
            .compile(backend, base.clone().history(history))
            .unwrap_or_else(|e| panic!("{}: history {history}: {e}", case.name));
        let mut m = c.matcher();
        m.consume_all(&text)
            .unwrap_or_else(|e| panic!("{}: history {history}: {e}", case.name));
        let e = m.rollback(history + 1).expect_err("past the kept history");
        assert!(
            matches!(e.kind(), MatchErrorKind::RollbackTooFar { .. }),
            "{}: history {history}: rollback({}) gave {e}",
            case.name,
            history + 1
        );
        m.rollback(history)
            .unwrap_or_else(|e| panic!("{}: history {history}: {e}", case.name));
        assert_eq!(m.num_consumed(), text.len() - history, "{}", case.name);
    }
}

/// Runs both sweeps over `cases` on each backend, on a small stack.
fn sweep_all(cases: &[Case], backends: &[BackendChoice]) {
    for case in cases {
        for &backend in backends {
            on_small_stack(|| {
                sweep_compile_limits(case, backend);
                sweep_match_limits(case, backend);
            });
        }
    }
}

const BOTH: &[BackendChoice] = &[BackendChoice::Operators, BackendChoice::Earley];
const ROUTED: &[BackendChoice] = &[BackendChoice::Auto, BackendChoice::Earley];

fn schema_cases() -> Vec<Case> {
    let strict = JsonSchemaOptions::new;
    vec![
        Case::new(
            "object with patterns and additional properties",
            Input::Schema(formwork_testkit::grammars::object_of_every_part(), strict()),
            &[
                r#"{"name":"bob","tags":["a","c"],"extra":[1,{"k":null}],"nested":{"x":-3},"x-rate":1.5,"flag":true}"#,
                r#"{}"#,
            ],
            &[r#"{"name":1}"#, r#"{"zzz":"s"}"#, r#"{"x-a":"s"}"#],
        ),
        Case::new(
            "enums and consts",
            Input::Schema(
                json!({
                    "type": "object",
                    "properties": {
                        "color": {"enum": ["red", "green", "blue"]},
                        "v": {"enum": [1, "two", null, [3], {"four": 4}]},
                        "c": {"const": "fixed"}
                    },
                    "required": ["color"],
                    "additionalProperties": false
                }),
                strict(),
            ),
            &[
                r#"{"color":"red","v":{"four":4},"c":"fixed"}"#,
                r#"{"color":"blue","v":[3]}"#,
            ],
            &[
                r#"{"color":"pink"}"#,
                r#"{"v":1}"#,
                r#"{"color":"red","v":2}"#,
            ],
        ),
        Case::new(
            "arrays with prefix items and bounds",
            Input::Schema(
                json!({
                    "type": "array",
                    "prefixItems": [{"type": "string"}, {"type": "integer", "minimum": -5, "maximum": 300}],
                    "items": {"type": "boolean"},
                    "minItems": 1,
                    "maxItems": 5
                }),
                strict(),
            ),
            &[r#"["a",250,true,false]"#, r#"["x"]"#],
            &[r#"[]"#, r#"["a",301]"#, r#"["a",1,true,true,true,true]"#],
        ),
        Case::new(
            "recursive references",
            Input::Schema(
                json!({
                    "$defs": {"node": {
                        "type": "object",
                        "properties": {
                            "v": {"type": "integer"},
                            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}
                        },
                        "required": ["v"],
                        "additionalProperties": false
                    }},
                    "$ref": "#/$defs/node"
                }),
                strict(),
            ),
            &[r#"{"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]}"#],
            &[r#"{"kids":[]}"#, r#"{"v":1,"kids":[{"w":2}]}"#],
        ),
        Case::new(
            "complements: not, oneOf, if",
            Input::Schema(
                json!({
                    "type": "object",
                    "properties": {
                        "a": {"not": {"type": "string"}},
                        "b": {"oneOf": [{"type": "integer"}, {"type": "number", "multipleOf": 0.5}]},
                        "c": {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}
                    },
                    "additionalProperties": false
                }),
                strict(),
            ),
            &[
                r#"{"a":1,"b":1.5,"c":"ab"}"#,
                r#"{"a":[true],"b":-2.5,"c":7}"#,
            ],
            &[
                r#"{"a":"s"}"#,
                r#"{"b":2.0}"#,
                r#"{"c":"x"}"#,
                r#"{"c":true}"#,
            ],
        ),
        Case::new(
            "intersections of unions",
            Input::Schema(
                json!({"allOf": [
                    {"anyOf": [
                        {"type": "object", "properties": {"p0": {"type": "string"}}},
                        {"type": "object", "properties": {"p1": {"type": "integer"}}},
                        {"type": "object", "properties": {"p2": {"type": "boolean"}}}
                    ]},
                    {"anyOf": [
                        {"type": "object", "properties": {"q0": {"type": "string"}}},
                        {"type": "object", "properties": {"q1": {"type": "null"}}}
                    ]}
                ]}),
                strict(),
            ),
            &[r#"{"p0":"a","q1":null}"#, r#"{}"#],
            &[r#"[]"#],
        ),
        Case::new(
            "formats",
            Input::Schema(
                json!({
                    "type": "object",
                    "properties": {
                        "when": {"type": "string", "format": "date-time"},
                        "mail": {"type": "string", "format": "email"},
                        "id": {"type": "string", "format": "uuid"},
                        "ip": {"type": "string", "format": "ipv4"}
                    },
                    "additionalProperties": false
                }),
                strict(),
            ),
            &[
                r#"{"when":"2024-01-02T03:04:05Z","mail":"a@b.co","id":"123e4567-e89b-12d3-a456-426614174000","ip":"10.0.0.1"}"#,
            ],
            &[r#"{"ip":"300.1.1.1"}"#, r#"{"when":"yesterday"}"#],
        ),
        Case::new(
            "patterns, lengths and property names",
            Input::Schema(
                json!({
                    "type": "object",
                    "properties": {
                        "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{2,4}$"},
                        "word": {"type": "string", "pattern": "colou?r", "minLength": 5, "maxLength": 12}
                    },
                    "propertyNames": {"pattern": "^[a-z]+$"}
                }),
                strict(),
            ),
            &[r#"{"code":"AB-123","word":"my color"}"#, r#"{"zed":[1]}"#],
            &[r#"{"code":"A-1"}"#, r#"{"word":"colr"}"#, r#"{"Zed":1}"#],
        ),
        Case::new(
            "numbers and dependencies",
            Input::Schema(
                json!({
                    "type": "object",
                    "properties": {
                        "i": {"type": "integer", "minimum": -1000, "exclusiveMaximum": 1000, "multipleOf": 7},
                        "x": {"type": "number", "minimum": 0.25, "maximum": 1e3},
                        "b": {"type": "string"}
                    },
                    "dependentRequired": {"i": ["b"]}
                }),
                strict(),
            ),
            &[r#"{"i":-994,"x":0.5,"b":""}"#, r#"{"x":1000}"#],
            &[r#"{"i":8,"b":""}"#, r#"{"x":0.2}"#, r#"{"i":7}"#],
        ),
        Case::new(
            "any order, flexible whitespace, counted properties",
            Input::Schema(
                json!({
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "null"}},
                    "required": ["a"],
                    "minProperties": 2,
                    "maxProperties": 3
                }),
                strict()
                    .property_order(PropertyOrder::Any)
                    .whitespace(Whitespace::Flexible { max_run: Some(2) }),
            ),
            &[r#"{ "b": "x",  "a": 1 }"#, r#"{"c":null,"a":2,"b":""}"#],
            &[
                r#"{"a":1}"#,
                r#"{"b":"x","c":null}"#,
                r#"{"a":1,   "b":"x"}"#,
            ],
        ),
        Case::new(
            "contains and dependent schemas",
            Input::Schema(
                json!({
                    "type": "object",
                    "properties": {
                        "xs": {"type": "array", "items": {"type": "integer"}, "contains": {"const": 7}},
                        "kind": {"enum": ["a", "b"]},
                        "extra": {"type": "string"}
                    },
                    "dependentSchemas": {"kind": {"required": ["extra"]}},
                    "additionalProperties": false
                }),
                strict(),
            ),
            &[r#"{"xs":[1,7,2],"kind":"a","extra":"e"}"#, r#"{"xs":[7]}"#],
            &[r#"{"xs":[1,2]}"#, r#"{"xs":[]}"#, r#"{"kind":"b"}"#],
        ),
        Case::new(
            "more formats and a lenient compilation",
            Input::Schema(
                json!({
                    "type": "array",
                    "prefixItems": [
                        {"type": "string", "format": "date"},
                        {"type": "string", "format": "time"},
                        {"type": "string", "format": "ipv6"},
                        {"type": "string", "format": "hostname"},
                        {"type": "string", "format": "uri"},
                        {"type": "string", "format": "no-such-format"}
                    ],
                    "items": false
                }),
                strict().lenient(true),
            ),
            &[r#"["2024-02-29","12:30:00Z","::1","example.com","https://a.b/c?d#e","x"]"#],
            &[r#"["2024-13-01"]"#, r#"["2024-01-01","25:00:00Z"]"#],
        ),
    ]
}

const JSON_GBNF: &str = r#"root ::= value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4} )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws ::= [ \t\n]*
"#;

fn gbnf_cases() -> Vec<Case> {
    vec![
        Case::new(
            "JSON grammar",
            Input::Gbnf(JSON_GBNF),
            &[r#"{"a": [1, -2.5e3, "x\u00e9", true, null], "b": {}}"#],
            &[r#"{"a" 1}"#, "[1,]"],
        ),
        Case::new(
            "arithmetic",
            Input::Gbnf(
                "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\n\
                 term ::= factor ((\"*\" | \"/\") factor)*\nfactor ::= [0-9]+ | \"(\" expr \")\"\n",
            ),
            &["(1+2)*34-5"],
            &["1+", "(1"],
        ),
        Case::new(
            "counted repeats and a special token",
            Input::Gbnf(
                "root ::= ( [a-c]{2,4} (\",\" | \";\") ){1,5} tail?\ntail ::= <|im_end|>\n",
            ),
            &["ab,abc;", "ab,<|im_end|>"],
            &["a,", "abcab,"],
        ),
    ]
}

fn regex_cases() -> Vec<Case> {
    let re = |p: &'static str, valid: &[&str], invalid: &[&str]| {
        Case::new(format!("regex {p}"), Input::Regex(p), valid, invalid)
    };
    vec![
        re(
            "[a-z]{2,6}(-[0-9]{1,3})*",
            &["abc-12-3"],
            &["a", "abc-1234"],
        ),
        re(r"(\d{3}-){2}\d{4}", &["555-123-4567"], &["555-1234"]),
        re("(a|ab|abc)+c", &["ababcc"], &["c"]),
        re(r"\p{Greek}+( \p{Greek}+)*", &["αβ γ"], &["ab"]),
        re(r#"[^"\\]{0,40}x"#, &["hello world x"], &["x\"x"]),
        re(
            "(alpha|beta|gamma|delta|epsilon|zeta|eta|theta)(,(alpha|beta|gamma))*",
            &["delta,beta,alpha"],
            &["delta,theta"],
        ),
    ]
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "get_weather",
            json!({
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                "required": ["city"],
                "additionalProperties": false
            }),
        ),
        Tool::new(
            "search",
            json!({
                "type": "object",
                "properties": {"q": {"type": "string", "maxLength": 30}, "n": {"type": "integer", "minimum": 1}},
                "additionalProperties": false
            }),
        ),
    ]
}

fn tag_cases() -> Vec<Case> {
    let qwen = TagDispatch::for_tools(ToolFormat::Qwen, &tools())
        .forbid(vec![Piece::text("<think>")])
        .forbid(vec![Piece::text("BAD")]);
    let harmony = ToolFormat::Harmony {
        special_markers: true,
    };
    vec![
        Case::new(
            "Qwen tool calls with forbidden text",
            Input::Tags(qwen),
            &[
                "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
                "no call",
            ],
            &[
                "<think>x",
                "so BAD",
                "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>",
            ],
        ),
        Case::new(
            "Llama 3.1 tool calls",
            Input::Tags(TagDispatch::for_tools(ToolFormat::Llama31, &tools())),
            &[r#"Let me look. <function=search>{"q":"rust","n":3}</function> done"#],
            &[r#"<function=search>{"q":1}</function>"#],
        ),
        Case::new(
            "Harmony tool calls with special markers",
            Input::Tags(TagDispatch::for_tools(harmony, &tools())),
            &[
                r#"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo","unit":"c"}<|call|>"#,
            ],
            &[r#"<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}<|call|>"#],
        ),
    ]
}

fn request_cases() -> Vec<Case> {
    let req = |template: Option<&'static str>, r: &str, valid: &[&str], invalid: &[&str]| {
        let text = r.to_string();
        Case::new(
            format!("request {r}"),
            Input::Request { text, template },
            valid,
            invalid,
        )
    };
    vec![
        req(
            Some("outline.fw"),
            r#"outline(sections: [section(id: "1", children: [section(id: "1.1")]), section(id: "2")])"#,
            &["<|vision_start|>1 A<|vision_pad|>x<|vision_end|>\n<|vision_start|>1.1 B<|vision_pad|>y<|vision_end|>\n<|vision_start|>2 C<|vision_pad|>z<|vision_end|>\n"],
            &["<|vision_start|>2 A<|vision_pad|>x<|vision_end|>\n"],
        ),
        req(
            Some("reference_lookup.fw"),
            r#"reference_lookup(topics: 1..20, ids: {"1", "1.1", "2"})"#,
            &[r#"[{"topic": [3, 17], "reference": ["1.1"]}]"#],
            &[r#"[{"topic": [21], "reference": ["1"]}]"#],
        ),
        req(
            Some("reference_lookup.fw"),
            r#"{"reference_lookup": {"topics": {"$range": [1, 20]}, "ids": {"$choice": ["1", "2"]}}}"#,
            &[r#"[{"topic": [20], "reference": ["2", "1"]}]"#],
            &[r#"[{"topic": [0], "reference": ["1"]}]"#],
        ),
        req(
            Some("tool_call.fw"),
            r#"tool_call(tools: [tool(name: "search", params: [param(name: "q", value: string), param(name: "n", value: integer(range: 1..5))]), tool(name: "now")])"#,
            &["<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"hi\", \"n\": 3}}\n</tool_call>"],
            &["<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"hi\", \"n\": 9}}\n</tool_call>"],
        ),
        req(
            Some("tool_call.fw"),
            r#"regex(pattern: /[0-9]{2,3}(\.[0-9]+)?/)"#,
            &["12.5"],
            &["1"],
        ),
        req(
            None,
            r##"json_schema(schema: "{\"type\": \"object\", \"properties\": {\"k\": {\"type\": \"array\", \"items\": {\"$ref\": \"#\"}}}}")"##,
            &[r#"{"k":[{},{"k":[]}]}"#],
            &[r#"{"k":[1]}"#],
        ),
        req(
            None,
            r#"{"json_schema": {"schema": "{\"enum\": [\"a\", \"b\", {\"c\": [1, 2]}]}"}}"#,
            &[r#"{"c":[1,2]}"#],
            &[r#"{"c":[2,1]}"#],
        ),
        req(
            None,
            r#"gbnf(grammar: "root ::= \"(\" root* \")\"")"#,
            &["(()(()))"],
            &["(()"],
        ),
        req(
            None,
            r#"regex(pattern: /[0-9]{2,3}(\.[0-9]+)?/)"#,
            &["12.5"],
            &["1"],
        ),
    ]
}

#[test]
fn json_schemas_under_every_limit() {
    sweep_all(&schema_cases(), ROUTED);
}

#[test]
fn gbnf_grammars_under_every_limit() {
    sweep_all(&gbnf_cases(), ROUTED);
}

#[test]
fn regexes_under_every_limit_on_both_backends() {
    sweep_all(&regex_cases(), BOTH);
}

#[test]
fn tag_dispatch_under_every_limit() {
    sweep_all(&tag_cases(), ROUTED);
}

#[test]
fn templates_and_requests_under_every_limit() {
    sweep_all(&request_cases(), &[BackendChoice::Auto]);
}
