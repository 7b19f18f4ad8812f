//! The request language: text and JSON forms parse to the same tree, errors carry line:col (or
//! a JSON pointer) and what was expected, and binding type-checks every argument against its
//! parameter's kind.

mod common;

use common::stack::on_small_stack;
use formwork::ir::reference::{Recognizer, Unit};
use formwork::request::Request;
use formwork::template::StructureFactory;
use formwork::vocab::Vocab;
use formwork::{CompileError, CompileErrorKind, LimitKind, Limits, Location};
use serde_json::json;

fn at(line: usize, col: usize) -> Location {
    Location::Text {
        source: "<request>".into(),
        line,
        col,
    }
}

fn ptr(p: &str) -> Location {
    Location::JsonPointer(p.into())
}

#[test]
fn text_requests_parse_to_the_json_tree() {
    let r = Request::parse(
        r#"outline(sections: [section(id: "1", children: [section(id: "1.1")]),
                             section(id: "2",)], n: -4, r: 1..20, re: /a\/b+/,
                   set: {"x", "y\"z",}, bare: string, empty: [], none: {},
                   spaced: -5 .. -1, escapes: "\u{e9}\tx", after: "plain")"#,
    )
    .unwrap();
    assert_eq!(r.structure(), "outline");
    assert_eq!(
        r.to_json(),
        json!({"outline": {
            "sections": [
                {"section": {"id": "1", "children": [{"section": {"id": "1.1"}}]}},
                {"section": {"id": "2"}}
            ],
            "n": -4,
            "r": {"$range": [1, 20]},
            "re": {"$regex": "a/b+"},
            "set": {"$choice": ["x", "y\"z"]},
            "bare": {"string": {}},
            "empty": [],
            "none": {"$choice": []},
            "spaced": {"$range": [-5, -1]},
            "escapes": "\u{e9}\tx",
            "after": "plain"
        }})
    );
    // The JSON form parses back to the same tree.
    let again = Request::parse_json(&r.to_json().to_string()).unwrap();
    assert_eq!(again.to_json(), r.to_json());
    assert_eq!(Request::parse("now").unwrap().to_json(), json!({"now": {}}));
    assert_eq!(
        Request::parse("now()").unwrap().to_json(),
        json!({"now": {}})
    );
}

fn text_error(text: &str) -> CompileError {
    Request::parse(text).unwrap_err()
}

#[test]
fn text_syntax_errors_have_line_col_and_expectations() {
    let e = text_error(r#"a(b: "x",, c: 1)"#);
    assert_eq!(e.kind(), CompileErrorKind::Syntax);
    assert_eq!(e.location(), &at(1, 10));
    assert_eq!(e.message(), "expected one of `)`, a name, found `,`");

    let e = text_error("outline(\n  sections: [\n    section(id \"1\")\n  ])");
    assert_eq!(e.location(), &at(3, 16));
    assert_eq!(e.message(), "expected `:`, found string \"1\"");

    let e = text_error(r#"a(b: "x""#);
    assert_eq!(e.location(), &at(1, 9));
    assert_eq!(
        e.message(),
        "expected one of `)`, `,`, found the end of the request"
    );

    let e = text_error("a(b: 1) c");
    assert_eq!(e.location(), &at(1, 9));
    assert_eq!(
        e.message(),
        "expected the end of the request, found name `c`"
    );

    let e = text_error("a(b: 1..x)");
    assert_eq!(e.location(), &at(1, 9));
    assert_eq!(e.message(), "expected an integer, found name `x`");

    let e = text_error("a(b:\n \"abc)");
    assert_eq!(e.location(), &at(2, 2));
    assert!(e.message().contains("unterminated string"), "{e}");

    let e = text_error("a(b: 1.5)");
    assert_eq!(e.location(), &at(1, 7));
    assert!(e.message().contains("unexpected character '.'"), "{e}");

    let e = text_error("");
    assert_eq!(e.location(), &at(1, 1));
    assert_eq!(e.message(), "expected a name, found the end of the request");

    // Nesting is bounded; so is JSON's.
    let deep = format!("a(b: {}{})", "[".repeat(300), "]".repeat(300));
    let e = text_error(&deep);
    let nesting = Limits::new().get(LimitKind::Nesting);
    assert_eq!(e.location(), &at(1, 5 + nesting as usize));
    assert_eq!(
        e.message(),
        format!(
            "request: brackets: nesting limit: {} > {nesting}",
            nesting + 1
        )
    );
    let deep_json = format!(
        "{{\"a\": {{\"b\": {}{}}}}}",
        "[".repeat(300),
        "]".repeat(300)
    );
    let e = Request::parse_json(&deep_json).unwrap_err();
    assert_eq!(e.limit().map(|l| l.kind), Some(LimitKind::Nesting));
    // Two objects, then the arrays up to the one past the limit.
    assert_eq!(
        e.location(),
        &at(1, "{\"a\": {\"b\": ".len() + nesting as usize - 1)
    );
}

#[test]
fn string_escapes_decode() {
    let r = Request::parse(r#"a(s: "tab\there \"q\" \u{1F600} \\ \/")"#).unwrap();
    assert_eq!(r.to_json(), json!({"a": {"s": "tab\there \"q\" 😀 \\ /"}}));
    let e = text_error(r#"a(s: "\u{110000}")"#);
    assert_eq!(e.location(), &at(1, 7));
    assert!(e.message().contains("Unicode scalar value"), "{e}");
}

#[test]
fn json_errors_have_line_col_or_a_pointer() {
    let e = Request::parse_json("{\"a\": {\n  \"b\": [1,]\n}}").unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::Syntax);
    assert_eq!(e.location(), &at(2, 11));
    for (json, pointer, says) in [
        (r#"{"a": {}, "b": {}}"#, "", "an object with one key"),
        (r#"["a"]"#, "", "an object with one key"),
        (
            r#"{"a": 1}"#,
            "/a",
            "the object of the structure's arguments",
        ),
        (
            r#"{"a": {"b": true}}"#,
            "/a/b",
            "expected a string, an integer",
        ),
        (
            r#"{"a": {"b": [{"c": {"d": null}}]}}"#,
            "/a/b/0/c/d",
            "expected a string",
        ),
        (r#"{"a": {"b": 1.5}}"#, "/a/b", "expected an integer"),
        (
            r#"{"a": {"b": {"$choice": ["x", 2]}}}"#,
            "/a/b/$choice/1",
            "expected a string",
        ),
        (
            r#"{"a": {"b": {"$range": [1]}}}"#,
            "/a/b/$range",
            "expected [lo, hi]",
        ),
        (
            r#"{"a": {"b": {"$set": []}}}"#,
            "/a/b",
            "unknown literal `$set`",
        ),
        (
            r#"{"a/b": {"c~d": {"$regex": 1}}}"#,
            "/a~1b/c~0d/$regex",
            "pattern as a string",
        ),
        (r#"{"$range": [1, 2]}"#, "", "found the literal `$range`"),
    ] {
        let e = Request::parse_json(json).unwrap_err();
        assert_eq!(e.location(), &ptr(pointer), "{json}: {e}");
        assert!(e.message().contains(says), "{json}: {e}");
    }
}

fn factory() -> StructureFactory {
    let vocab = Vocab::from_token_bytes(vec![b"a".to_vec(), b"</s>".to_vec()], &[1], &[1]).unwrap();
    StructureFactory::builder(&vocab)
        .source(
            "t.fw",
            r#"
            doc(title: str, tag: choice, code: regex, n: int, body: para | quote,
                items: list<item, ", "> = [], pick: oneof<item>) ::=
                title tag code n body items pick
            para ::= "P"
            quote(who: str) ::= "Q" who
            item(v: str) ::= "<" v ">"
            "#,
        )
        .build()
        .unwrap()
}

const GOOD: &str =
    r#"title: "T", tag: {"x", "y"}, code: /[0-9]+/, n: 1..5, body: para, pick: [item(v: "a")]"#;

/// Binds `doc(<args>)`; the error's kind, place and message.
fn bind_error(args: &str) -> CompileError {
    let text = format!("doc({args})");
    let request = Request::parse(&text).unwrap();
    let ops = request.instantiate(&factory()).map(|_| ()).unwrap_err();
    let ir = request.instantiate_ir(&factory()).map(|_| ()).unwrap_err();
    assert_eq!(ops, ir, "both targets report the same error");
    ops
}

fn col_of(args: &str, needle: &str) -> Location {
    at(1, "doc(".len() + args.find(needle).unwrap() + 1)
}

#[test]
fn binding_type_checks_arguments() {
    use CompileErrorKind::*;
    let f = factory();
    let good = format!("doc({GOOD})");
    let ok = Request::parse(&good).unwrap();
    assert!(ok.instantiate(&f).is_ok());
    assert!(ok.instantiate_ir(&f).is_ok());

    let cases: Vec<(String, &str, CompileErrorKind, &str)> = vec![
        (
            GOOD.replace(r#"title: "T""#, "title: 3"),
            "3",
            Invalid,
            "parameter `title` takes a string, found an integer",
        ),
        (
            GOOD.replace(r#"{"x", "y"}"#, r#"["x"]"#),
            r#"["x"]"#,
            Invalid,
            "`tag` takes a choice set",
        ),
        (
            GOOD.replace(r#"{"x", "y"}"#, "{}"),
            "{}",
            EmptyLanguage,
            "a choice among no strings",
        ),
        (
            GOOD.replace("/[0-9]+/", r#""[0-9]+""#),
            r#""[0-9]+""#,
            Invalid,
            "`code` takes a /regex/",
        ),
        (
            GOOD.replace("/[0-9]+/", "/[0-9/"),
            "/[0-9/",
            Syntax,
            "in this argument",
        ),
        (
            GOOD.replace("/[0-9]+/", r"/(a)\1/"),
            r"/(a)\1/",
            Unsupported,
            "backreference",
        ),
        (
            GOOD.replace("1..5", "5..1"),
            "5..1",
            Invalid,
            "empty range 5..1",
        ),
        (
            GOOD.replace("body: para", "body: item(v: \"x\")"),
            "item(",
            Invalid,
            "parameter `body` takes para | quote, not `item`",
        ),
        (
            GOOD.replace("body: para", "body: nope"),
            "nope",
            Undefined,
            "no structure `nope`",
        ),
        (
            GOOD.replace("body: para", "body: quote"),
            "quote",
            Invalid,
            "missing argument `who: str` of `quote`",
        ),
        (
            GOOD.replace("body: para", "body: para(x: 1)"),
            "x: 1",
            Undefined,
            "`para` has no parameter `x` (parameters: none)",
        ),
        (
            GOOD.replace("pick: [item(v: \"a\")]", "pick: []"),
            "[]",
            EmptyLanguage,
            "one of no instances",
        ),
        (
            GOOD.replace("pick: [item(v: \"a\")]", "pick: [para]"),
            "para]",
            Invalid,
            "parameter `pick` takes oneof<item>, not `para`",
        ),
        (
            GOOD.replace("pick: [item(v: \"a\")]", "pick: [\"a\"]"),
            "\"a\"]",
            Invalid,
            "the elements of `pick` are instances of oneof<item>, found a string",
        ),
        (
            format!("{GOOD}, items: item(v: \"1\")"),
            "item(v: \"1\")",
            Invalid,
            "`items` takes a list of instances (list<item, \", \">)",
        ),
        (
            format!("{GOOD}, title: \"again\""),
            "title: \"again\"",
            Invalid,
            "argument `title` is given twice",
        ),
        (
            format!("{GOOD}, colour: \"red\""),
            "colour",
            Undefined,
            "`doc` has no parameter `colour`",
        ),
    ];
    for (args, needle, kind, says) in cases {
        let e = bind_error(&args);
        assert_eq!(e.kind(), kind, "{args}: {e}");
        assert_eq!(e.location(), &col_of(&args, needle), "{args}: {e}");
        assert!(e.message().contains(says), "{args}: {e}");
    }
    let e = bind_error(r#"title: "T""#);
    assert_eq!(e.location(), &at(1, 1));
    assert_eq!(e.message(), "missing argument `tag: choice` of `doc`");
}

#[test]
fn json_binding_errors_carry_pointers() {
    let f = factory();
    let json = r#"{"doc": {"title": "T", "tag": {"$choice": ["x"]}, "code": {"$regex": "a"},
        "n": 3, "body": {"quote": {"who": 7}}, "pick": [{"item": {"v": "a"}}]}}"#;
    let e = Request::parse_json(json)
        .unwrap()
        .instantiate(&f)
        .unwrap_err();
    assert_eq!(e.location(), &ptr("/doc/body/quote/who"));
    assert_eq!(
        e.message(),
        "parameter `who` takes a string, found an integer"
    );
    let fixed = json.replace("\"who\": 7", "\"who\": \"me\"");
    let from_json = Request::parse_json(&fixed).unwrap();
    let text = r#"doc(title: "T", tag: {"x"}, code: /a/, n: 3, body: quote(who: "me"), pick: [item(v: "a")])"#;
    let from_text = Request::parse(text).unwrap();
    assert_eq!(from_json.to_json(), from_text.to_json());
    assert_eq!(
        from_json.instantiate(&f).unwrap().hash(),
        from_text.instantiate(&f).unwrap().hash()
    );
}

/// A template whose instances nest: `(1(1(1)))`, and `[a|b]` for a choice among instances.
fn nesting_factory() -> StructureFactory {
    let vocab = Vocab::from_token_bytes(vec![b"a".to_vec(), b"</s>".to_vec()], &[1], &[1]).unwrap();
    StructureFactory::builder(&vocab)
        .source(
            "t.fw",
            r#"
            doc(items: list<item>) ::= items
            item(id: str, kids: list<item> = []) ::= "(" id kids ")"
            pick(options: oneof<pick | leaf>) ::= "[" options "]"
            leaf ::= "a"
            "#,
        )
        .build()
        .unwrap()
}

/// `doc` with `levels` items each inside the last: `2 + 2 * levels` brackets deep.
fn nested_items(levels: usize) -> String {
    format!(
        "doc(items: [{}{}])",
        r#"item(id: "1", kids: ["#.repeat(levels),
        "])".repeat(levels)
    )
}

fn limit_of(e: &CompileError) -> Option<(LimitKind, u64, u64)> {
    e.limit().map(|l| (l.kind, l.value, l.max))
}

#[test]
fn request_nesting_is_limited_at_the_bracket() {
    let nesting = Limits::new().get(LimitKind::Nesting);
    let levels = (nesting as usize - 2) / 2;
    // At the limit: parsed and bound on a small stack, by both targets.
    let at_limit = nested_items(levels);
    let accepted = on_small_stack(move || {
        let f = nesting_factory();
        let request = Request::parse(&at_limit).unwrap();
        request.instantiate(&f).unwrap();
        let g = request.instantiate_ir(&f).unwrap();
        let rec = Recognizer::new(&g);
        let mut chart = rec.start();
        let text = format!("{}{}", "(1".repeat(levels), ")".repeat(levels));
        text.bytes().all(|b| chart.push(&rec, Unit::Byte(b))) && chart.is_accepting(&rec)
    });
    assert!(accepted);
    // One bracket more, in the text and in the JSON form.
    let text = nested_items(levels + 1);
    let e = Request::parse(&text).unwrap_err();
    let brackets = text.char_indices().filter(|&(_, c)| c == '(' || c == '[');
    let bracket = brackets.map(|(i, _)| i).nth(nesting as usize).unwrap();
    assert_eq!(
        limit_of(&e),
        Some((LimitKind::Nesting, nesting + 1, nesting))
    );
    assert_eq!(e.location(), &at(1, bracket + 1));
    let json = format!(
        "{}0{}",
        "[".repeat(nesting as usize + 1),
        "]".repeat(nesting as usize + 1)
    );
    let e = Request::parse_json(&format!("{{\"doc\": {{\"items\": {json}}}}}")).unwrap_err();
    assert_eq!(
        limit_of(&e),
        Some((LimitKind::Nesting, nesting + 1, nesting))
    );
    // Brackets inside strings are text.
    let quoted = format!(
        r#"{{"doc": {{"items": [], "s": "{}\"{{"}}}}"#,
        "[".repeat(500)
    );
    assert!(Request::parse_json(&quoted).is_ok());
}

#[test]
fn binding_does_not_recurse_over_the_request() {
    // With a generous limit, a request 2,000 instances deep binds on a small stack.
    let limits = Limits::new().nesting(10_000);
    let levels = 2_000;
    let deep_limits = limits.clone();
    let ok = on_small_stack(move || {
        let f = nesting_factory();
        let text = nested_items(levels);
        let request = Request::parse_with(&text, &deep_limits).unwrap();
        request.instantiate(&f).unwrap();
        let g = request.instantiate_ir(&f).unwrap();
        let rec = Recognizer::new(&g);
        let mut chart = rec.start();
        let text = format!("{}{}", "(1".repeat(levels), ")".repeat(levels));
        text.bytes().all(|b| chart.push(&rec, Unit::Byte(b))) && chart.is_accepting(&rec)
    });
    assert!(ok);
    // Choices among instances nest in the IR: past its depth guarantee, a typed error.
    let deep_choice = format!(
        "{}leaf{}",
        "pick(options: [leaf, ".repeat(600),
        "])".repeat(600)
    );
    let e = on_small_stack(move || {
        let f = nesting_factory();
        let request = Request::parse_with(&deep_choice, &limits).unwrap();
        request.instantiate_ir(&f).map(|_| ())
    })
    .unwrap_err();
    assert_eq!(limit_of(&e).map(|l| l.0), Some(LimitKind::Nesting));
}

#[test]
fn request_size_is_limited() {
    let limits = Limits::new().input_bytes(100);
    let text = format!(r#"doc(items: [item(id: "{}")])"#, "x".repeat(100));
    let e = Request::parse_with(&text, &limits).unwrap_err();
    assert_eq!(
        limit_of(&e),
        Some((LimitKind::InputBytes, text.len() as u64, 100))
    );
    let e = Request::parse_json_with(&format!("\"{}\"", "x".repeat(100)), &limits).unwrap_err();
    assert_eq!(limit_of(&e).map(|l| l.0), Some(LimitKind::InputBytes));
}
