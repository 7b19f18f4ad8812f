//! The template language: what each construct means (checked through the request's grammar IR
//! and the reference recognizer), the shipped templates' structures, and errors with exact
//! positions and kinds for bad templates.

mod common;

use common::stack::on_small_stack;
use formwork::ir::reference::{Recognizer, Unit};
use formwork::ir::Grammar;
use formwork::request::Request;
use formwork::template::{ParamKind, StructureFactory};
use formwork::vocab::Vocab;
use formwork::{CompileError, CompileErrorKind, LimitKind, Limits, Location};

/// A small vocabulary with a few special tokens (masks are not what these tests look at).
fn vocab() -> Vocab {
    let tokens: Vec<Vec<u8>> = ["a", "b", "<|start|>", "<|end|>", "</s>", "<tool_call>"]
        .iter()
        .map(|t| t.as_bytes().to_vec())
        .collect();
    Vocab::from_token_bytes(tokens, &[2, 3, 4], &[4]).unwrap()
}

fn factory(text: &str) -> Result<StructureFactory, CompileError> {
    StructureFactory::builder(&vocab())
        .source("t.fw", text)
        .build()
}

fn grammar(text: &str, request: &str) -> Grammar {
    let f = factory(text).unwrap_or_else(|e| panic!("{e}"));
    Request::parse(request)
        .unwrap()
        .instantiate_ir(&f)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The input as recognizer units: `<|name|>` is a special token, the rest bytes.
fn units(s: &str) -> Vec<Unit<'_>> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("<|") {
        out.extend(rest[..start].bytes().map(Unit::Byte));
        let end = start + rest[start..].find("|>").unwrap() + 2;
        out.push(Unit::Special(&rest[start..end]));
        rest = &rest[end..];
    }
    out.extend(rest.bytes().map(Unit::Byte));
    out
}

fn accepts(g: &Grammar, s: &str) -> bool {
    let rec = Recognizer::new(g);
    let mut chart = rec.start();
    units(s).into_iter().all(|u| chart.push(&rec, u)) && chart.is_accepting(&rec)
}

fn assert_language(text: &str, request: &str, yes: &[&str], no: &[&str]) {
    let g = grammar(text, request);
    for s in yes {
        assert!(accepts(&g, s), "{request} should accept {s:?}");
    }
    for s in no {
        assert!(!accepts(&g, s), "{request} should reject {s:?}");
    }
}

#[test]
fn literals_classes_regexes_and_specials() {
    let t = r#"
        # strings with escapes, single or double quotes
        lit ::= "a\"b\n" 'c\'' "\u{e9}\x41\t"
        cls ::= [a-c] [^\n"] [\d]
        rx  ::= /x\/y[0-9]+/ /(?i:ok)/
        sp  ::= <|start|> "text" <|end|>
        eos ::= "x" <"</s>">
    "#;
    assert_language(
        t,
        "lit",
        &["a\"b\nc'éA\t"],
        &["a\"b\nc'eA\t", "a\"b\\nc'éA\t"],
    );
    assert_language(
        t,
        "cls",
        &["ax1", "c\u{3a9}\u{663}"],
        &["dx1", "a\n1", "a\"1", "axx"],
    );
    assert_language(t, "rx", &["x/y12OK", "x/y0ok"], &["x/yok", "xy1ok"]);
    assert_language(
        t,
        "sp",
        &["<|start|>text<|end|>"],
        &["text", "<|start|>text", "<|end|>text<|start|>"],
    );
    // `<"</s>">` is the special token, not its text.
    let g = grammar(t, "eos");
    let rec = Recognizer::new(&g);
    let mut chart = rec.start();
    assert!(chart.push(&rec, Unit::Byte(b'x')));
    assert!(!chart.clone().push(&rec, Unit::Byte(b'<')));
    assert!(chart.push(&rec, Unit::Special("</s>")) && chart.is_accepting(&rec));
    let f = factory(t).unwrap();
    assert_eq!(f.special_tokens().get("</s>"), Some(&4));
    assert_eq!(f.special_tokens().len(), 3);
}

#[test]
fn operators_and_grouping() {
    let t = r#"
        star ::= "a" "b"*
        plus ::= ("a" "b")+
        opt  ::= "a"? "b"
        rep  ::= "a"{2} "b"{1,3} "c"{2,}
        alt  ::= "x" | "y" "z" | ("p" | "q")+
        nest ::= (("a" | "b")? "c")*
    "#;
    assert_language(t, "star", &["a", "abbb"], &["", "ba"]);
    assert_language(t, "plus", &["ab", "ababab"], &["", "aba"]);
    assert_language(t, "opt", &["ab", "b"], &["a", "aab"]);
    assert_language(
        t,
        "rep",
        &["aabcc", "aabbbccccc"],
        &["abcc", "aabbbbcc", "aabc"],
    );
    assert_language(t, "alt", &["x", "yz", "pqqp"], &["y", "xyz", ""]);
    assert_language(t, "nest", &["", "c", "acbcc"], &["a", "abc"]);
}

#[test]
fn parameters_of_every_kind() {
    let t = r#"
        doc(title: str, tag: choice, code: regex, n: int, body: para | quote,
            items: list<item, ", "> = [], pick: oneof<item>, by: str = "anon") ::=
            title ":" tag ":" code ":" n ":" body ":" items ":" pick ":" by
        para ::= "P"
        quote(who: str) ::= "Q-" who
        item(v: str) ::= "<" v ">"
    "#;
    let request = r#"doc(title: "T", tag: {"x", "yy"}, code: /[0-9]{2}/, n: 7..12,
        body: quote(who: "me"), items: [item(v: "1"), item(v: "2")],
        pick: [item(v: "a"), item(v: "b")])"#;
    assert_language(
        t,
        request,
        &[
            "T:x:42:7:Q-me:<1>, <2>:<a>:anon",
            "T:yy:00:12:Q-me:<1>, <2>:<b>:anon",
        ],
        &[
            "T:z:42:7:Q-me:<1>, <2>:<a>:anon",
            "T:x:4:7:Q-me:<1>, <2>:<a>:anon",
            "T:x:42:13:Q-me:<1>, <2>:<a>:anon",
            "T:x:42:07:Q-me:<1>, <2>:<a>:anon",
            "T:x:42:7:P:<1>, <2>:<a>:anon",
            "T:x:42:7:Q-me:<1><2>:<a>:anon",
            "T:x:42:7:Q-me:<1>, <2>:<a><b>:anon",
            "T:x:42:7:Q-me:<1>, <2>:<a>:",
        ],
    );
    // Defaults: no items, `by` given; a bare structure name; one-string choice; exact int.
    let request = r#"doc(title: "T", tag: {"x"}, code: /a/, n: -3, body: para,
        pick: [item(v: "a")], by: "me")"#;
    assert_language(
        t,
        request,
        &["T:x:a:-3:P::<a>:me"],
        &["T:x:a:-3:P::<a>:anon"],
    );
}

#[test]
fn calls_inside_templates_forward_parameters_and_strings() {
    let t = r#"
        pair(ids: choice) ::= "[" quoted(ids: ids) "," quoted(ids: ids) "]" label(text: "!")
        quoted(ids: choice) ::= "'" ids "'"
        label(text: str, suffix: str = "?") ::= text suffix
    "#;
    assert_language(
        t,
        r#"pair(ids: {"a", "b"})"#,
        &["['a','b']!?", "['b','b']!?"],
        &["['a','c']!?", "['a','b']!", "[a,b]!?"],
    );
}

#[test]
fn shipped_templates_build_on_qwen3() {
    let vocab = common::qwen3();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/templates");
    let f = StructureFactory::builder(vocab).path(dir).build().unwrap();
    let sig = |n: &str| f.signature(n).unwrap();
    assert_eq!(sig("outline"), "outline(sections: list<section>)");
    assert_eq!(
        sig("section"),
        "section(id: str, children: list<section> = [])"
    );
    assert_eq!(
        sig("reference_lookup"),
        "reference_lookup(topics: int, ids: choice)"
    );
    assert_eq!(sig("tool_call"), "tool_call(tools: oneof<tool>)");
    assert_eq!(
        sig("tool"),
        r#"tool(name: str, params: list<param, ", "> = [])"#
    );
    assert_eq!(
        sig("param"),
        "param(name: str, value: string | number | integer | boolean | enum | pattern)"
    );
    assert_eq!(sig("string"), "string");
    let specials: Vec<&str> = f.special_tokens().keys().map(|s| s.as_str()).collect();
    assert_eq!(
        specials,
        ["<|vision_end|>", "<|vision_pad|>", "<|vision_start|>"]
    );
    for (name, id) in f.special_tokens() {
        assert_eq!(vocab.special_id(name), Some(*id));
    }
    let section = f.structure(f.find("section").unwrap());
    assert_eq!(
        section.params()[1].kind(),
        &ParamKind::List {
            elems: vec![f.find("section").unwrap()],
            sep: Vec::new()
        }
    );
    assert!(
        section.location().to_string().ends_with("outline.fw:14:1"),
        "{}",
        section.location()
    );
}

/// Asserts the error's kind, `line:col` in `t.fw`, and a part of its message.
fn assert_error(text: &str, kind: CompileErrorKind, line: usize, col: usize, says: &str) {
    let err = factory(text).map(|_| ()).unwrap_err();
    assert_eq!(err.kind(), kind, "{err}");
    assert_eq!(
        err.location(),
        &Location::Text {
            source: "t.fw".into(),
            line,
            col
        },
        "{err}"
    );
    assert!(err.message().contains(says), "{err} should say {says:?}");
}

#[test]
fn syntax_errors_name_the_place_and_what_was_expected() {
    use CompileErrorKind::Syntax;
    assert_error(
        "a \"x\"",
        Syntax,
        1,
        3,
        "expected one of `::=`, `(`, found a string",
    );
    assert_error("a ::= \"x\"\nb ::= (\"y\" | )", Syntax, 2, 14, "found `)`");
    assert_error("a ::=", Syntax, 1, 6, "found the end of the file");
    // `b(` may open a call, a group after `b`, or the next rule's parameters.
    assert_error(
        "a ::= \"x\" b(",
        Syntax,
        1,
        13,
        "expected one of a name, a string, a character class, a /regex/, a special token, `(`, found the end of the file",
    );
    assert_error(
        "a(p: str ::= p",
        Syntax,
        1,
        10,
        "expected one of `)`, `|`, `,`, `=`, `<`, found `::=`",
    );
    assert_error(
        "a ::= \"x\"{2,",
        Syntax,
        1,
        13,
        "expected one of an integer, `}`",
    );
    assert_error("a ::=\n\n  \"abc", Syntax, 3, 3, "unterminated string");
    assert_error("a ::= /ab", Syntax, 1, 7, "unterminated regex");
    assert_error("a ::= [ab", Syntax, 1, 7, "unterminated character class");
    assert_error("a ::= \"\\q\"", Syntax, 1, 8, "unknown escape");
    assert_error(
        "a ::= \"x\" ; b ::= \"y\"",
        Syntax,
        1,
        11,
        "unexpected character ';'",
    );
}

#[test]
fn semantic_errors_name_the_place() {
    use CompileErrorKind::*;
    assert_error(
        "a ::= \"x\" b",
        Undefined,
        1,
        11,
        "no rule or parameter named `b`",
    );
    assert_error(
        "a(p: str, q: str) ::= p",
        Invalid,
        1,
        11,
        "parameter `q` of `a` is never used",
    );
    assert_error("a(p: strr) ::= p", Undefined, 1, 6, "unknown kind `strr`");
    assert_error(
        "a(p: list<str>) ::= p",
        Invalid,
        1,
        11,
        "`str` cannot be combined",
    );
    assert_error(
        "a(p: oneof<a, \",\">) ::= p",
        Invalid,
        1,
        15,
        "takes no separator",
    );
    assert_error(
        "a(p: set<a>) ::= p",
        Undefined,
        1,
        6,
        "unknown kind `set<...>`",
    );
    assert_error(
        "a(p: str = []) ::= p",
        Invalid,
        1,
        12,
        "only a list parameter",
    );
    assert_error("a(p: str, p: str) ::= p", Invalid, 1, 11, "declared twice");
    assert_error(
        "a ::= \"x\"\na ::= \"y\"",
        Invalid,
        2,
        1,
        "defined twice (first at t.fw:1:1)",
    );
    assert_error("str ::= \"x\"", Invalid, 1, 1, "is a parameter kind");
    assert_error(
        "a ::= \"x\"{3,2}",
        Invalid,
        1,
        7,
        "the maximum is below the minimum",
    );
    // Calls.
    let callee = "\nb(p: str, q: choice) ::= p q";
    assert_error(
        &format!("a(x: choice) ::= b(p: \"s\"){callee}"),
        Invalid,
        1,
        18,
        "unbound parameter `q` (choice) in the call of `b`",
    );
    assert_error(
        &format!("a(x: str) ::= b(p: x, q: x){callee}"),
        Invalid,
        1,
        26,
        "parameter `q` of `b` is choice, but `x` is str",
    );
    assert_error(
        &format!("a(x: choice) ::= b(p: \"s\", q: y){callee}"),
        Undefined,
        1,
        31,
        "`y` is not a parameter of `a`",
    );
    assert_error(
        &format!("a(x: choice) ::= b(p: \"s\", q: x, r: x){callee}"),
        Undefined,
        1,
        34,
        "`b` has no parameter `r`",
    );
    assert_error(
        &format!("a(x: choice) ::= b(q: \"s\", p: \"t\"){callee}"),
        Invalid,
        1,
        23,
        "only a str parameter takes a string",
    );
    assert_error(
        &format!("a ::= b{callee}"),
        Invalid,
        1,
        7,
        "`b` takes parameters",
    );
    assert_error(
        "a ::= c(p: \"x\")\nc ::= \"y\"",
        Invalid,
        1,
        7,
        "`c` takes no parameters",
    );
    // Recursion through rule bodies; recursion through parameter kinds is fine.
    assert_error(
        "a ::= \"(\" b \")\"\nb ::= \"x\" | a",
        NotRegular,
        2,
        13,
        "rule `a` is recursive (a -> b -> a)",
    );
    assert!(factory("t(children: list<t>) ::= \"x\" children").is_ok());
    // Vocabulary and regex problems.
    assert_error(
        "a ::= \"x\" <|nope|>",
        UnknownSpecialToken,
        1,
        11,
        "`<|nope|>` is not a special token",
    );
    assert_error(
        "a ::= <\"<tool_call>\">",
        UnknownSpecialToken,
        1,
        7,
        "use the string \"<tool_call>\"",
    );
    assert_error("a ::=\n  \"x\" /a(b/", Syntax, 2, 7, "in regex `a(b`");
    assert_error("a ::= /(?=a)b/", Unsupported, 1, 7, "look-around");
    assert_error("a ::= [z-a]", Syntax, 1, 7, "in character class `[z-a]`");
}

#[test]
fn files_share_one_namespace_and_errors_name_their_file() {
    let err = StructureFactory::builder(&vocab())
        .source("one.fw", "a ::= b")
        .source("two.fw", "b ::= \"x\"\nc ::= d")
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "two.fw:2:7: no rule or parameter named `d`"
    );
    let f = StructureFactory::builder(&vocab())
        .source("one.fw", "a ::= b")
        .source("two.fw", "b ::= \"x\"")
        .build()
        .unwrap();
    assert!(f.find("a").is_some() && f.find("b").is_some());
    let err = StructureFactory::builder(&vocab())
        .path("/nonexistent/dir/x.fw")
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("/nonexistent/dir/x.fw"), "{err}");
}

/// The factory of `text` under `limits`, built on a small stack.
fn factory_on_small_stack(text: String, limits: Limits) -> Result<StructureFactory, CompileError> {
    on_small_stack(move || {
        StructureFactory::builder(&vocab())
            .limits(limits)
            .source("t.fw", &text)
            .build()
    })
}

/// The limit a build reached: its kind, value and ceiling, and the error's line and column.
fn limit_reached(text: String, limits: Limits) -> (LimitKind, u64, u64, usize, usize) {
    let err = factory_on_small_stack(text, limits)
        .map(|_| ())
        .unwrap_err();
    let limit = err.limit().unwrap_or_else(|| panic!("{err}: not a limit"));
    match err.location() {
        Location::Text { line, col, .. } => (limit.kind, limit.value, limit.max, *line, *col),
        other => panic!("{err}: no place ({other:?})"),
    }
}

#[test]
fn deep_operators_and_groups_stop_at_the_nesting_limit() {
    let nesting = Limits::new().get(LimitKind::Nesting);
    let n = nesting as usize;
    // 10,000 postfix operators: the one past the limit is the error.
    let text = format!("a ::= \"x\"{}\n", "?".repeat(10_000));
    assert_eq!(
        limit_reached(text, Limits::new()),
        (LimitKind::Nesting, nesting + 1, nesting, 1, 10 + n)
    );
    let text = format!("a ::= {}\"x\"{}\n", "(".repeat(n + 1), ")".repeat(n + 1));
    assert_eq!(
        limit_reached(text, Limits::new()),
        (LimitKind::Nesting, nesting + 1, nesting, 1, 7 + n)
    );
    // At the limit, groups of alternatives (two tree levels each) build and mean what they say.
    let mut body = String::from("\"x\"");
    for _ in 0..n / 2 {
        body = format!("({body} \"z\" | \"w\")");
    }
    let text = format!("a ::= {body}\n");
    let f = factory_on_small_stack(text.clone(), Limits::new()).unwrap_or_else(|e| panic!("{e}"));
    let g = Request::parse("a").unwrap().instantiate_ir(&f).unwrap();
    assert!(accepts(&g, &format!("x{}", "z".repeat(n / 2))));
    assert!(accepts(&g, "wzz"));
    assert!(!accepts(&g, "xz"));
}

/// `a ::= r0`, then `n` rules `rI ::= "x" rJ` and `rN ::= "y"`.
fn chain(n: usize) -> String {
    let mut text = String::from("a ::= r0\n");
    for i in 0..n {
        text += &format!("r{i} ::= \"x\" r{}\n", i + 1);
    }
    text + &format!("r{n} ::= \"y\"\n")
}

#[test]
fn rule_chains_nest_like_the_structures_they_inline() {
    let nesting = Limits::new().get(LimitKind::Nesting);
    // Each rule is a sequence (one level) with a reference to the next (another): the first
    // reference past the limit, counting from the end of the chain, is the one to
    // r{n-64}, 129 levels above "y".
    let n = 100;
    let first_over = n - 1 - (nesting as usize / 2);
    let col = format!("r{first_over} ::= \"x\" ").len() + 1;
    assert_eq!(
        limit_reached(chain(n), Limits::new()),
        (
            LimitKind::Nesting,
            nesting + 1,
            nesting,
            first_over + 2,
            col
        )
    );
    // Within the limit a chain builds, and its language is the chain's; under a higher limit
    // the checks and the build walk a long chain without recursing along it.
    for (n, limits) in [(60, Limits::new()), (1_500, Limits::new().nesting(10_000))] {
        let f = factory_on_small_stack(chain(n), limits).unwrap_or_else(|e| panic!("{e}"));
        let g = Request::parse("a").unwrap().instantiate_ir(&f).unwrap();
        assert!(accepts(&g, &format!("{}y", "x".repeat(n))));
        assert!(!accepts(&g, &format!("{}y", "x".repeat(n - 1))));
    }
}

#[test]
fn long_rules_are_refused_before_the_earley_parser() {
    let text = format!("a ::= {}\n", "\"x\" ".repeat(10_000));
    let (kind, value, _, line, col) = limit_reached(text, Limits::new());
    assert_eq!(
        (kind, value, line, col),
        (LimitKind::GrammarSize, 10_002, 1, 1)
    );
    // Many rules of a file are parsed one by one, however many.
    let text: String = (0..3_000)
        .map(|i| format!("r{i} ::= \"x\" | \"y\"\n"))
        .collect();
    let f = factory_on_small_stack(text, Limits::new()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.structures().len(), 3_000);
    // The longest rule parses, on a small stack, whichever list makes it long.
    let longest = [
        format!("a ::= {}\"x\"\n", "\"x\" ".repeat(1_021)),
        format!("a ::= {}\"x\"\n", "\"x\" | ".repeat(510)),
    ];
    for text in longest {
        let f = factory_on_small_stack(text, Limits::new()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.structures().len(), 1);
    }
}

#[test]
fn expanding_calls_is_bounded() {
    // Each rule calls the next twice with its parameter: the recipe doubles per link.
    let mut text = String::from("r0(p: str) ::= r1(p: p) r1(p: p)\n");
    for i in 1..40 {
        text += &format!("r{i}(p: str) ::= r{}(p: p) r{}(p: p)\n", i + 1, i + 1);
    }
    text += "r40(p: str) ::= p\n";
    let limits = Limits::new().grammar_size(100_000);
    let (kind, value, max, _, _) = limit_reached(text, limits);
    assert_eq!((kind, max), (LimitKind::GrammarSize, 100_000));
    assert!(value > max);
    // Without parameters each rule's IR is built once, but a sequence of a rule twice still
    // doubles the text it stands for.
    let mut text = String::from("a ::= r0\n");
    for i in 0..40 {
        text += &format!("r{i} ::= r{} r{}\n", i + 1, i + 1);
    }
    text += "r40 ::= \"x\"\n";
    let (kind, _, max, _, _) = limit_reached(text, Limits::new().input_bytes(1 << 20));
    assert_eq!((kind, max), (LimitKind::InputBytes, 1 << 20));
}

#[test]
fn the_literal_table_stays_within_its_byte_budget() {
    let budget = 1 << 20;
    let f = StructureFactory::builder(&vocab())
        .literal_table_bytes(budget)
        .source(
            "t.fw",
            r#"greet(name: str) ::= <|start|> "Hello, " name "!" <|end|>"#,
        )
        .build()
        .unwrap();
    let request = |i: usize, len: usize| format!(r#"greet(name: "{i:0len$}")"#);
    // 20,000 requests, each with a distinct 20 KB argument.
    for i in 0..20_000 {
        Request::parse(&request(i, 20_000))
            .unwrap()
            .instantiate(&f)
            .unwrap();
        assert!(f.literal_table_bytes() <= budget);
    }
    // Short literals are kept, and still within the budget when they keep coming.
    for i in 0..20_000 {
        Request::parse(&request(i, 100))
            .unwrap()
            .instantiate(&f)
            .unwrap();
        assert!(f.literal_table_bytes() <= budget);
    }
    assert!(f.literal_table_bytes() > budget / 2);
    // What a request builds does not depend on what the table holds.
    let text = request(7, 20_000);
    let r = Request::parse(&text).unwrap();
    assert_eq!(
        r.instantiate(&f).unwrap().hash(),
        r.instantiate(&f).unwrap().hash()
    );
    let g = r.instantiate_ir(&f).unwrap();
    assert!(accepts(
        &g,
        &format!("<|start|>Hello, {:020000}!<|end|>", 7)
    ));
}
