//! The GBNF front end: each construct of llama.cpp's dialect means what llama.cpp says
//! (checked by running strings through the reference recognizer on the produced IR), and bad
//! grammars give typed errors at exact positions.

mod common;

use common::stack::on_small_stack;
use formwork::engine::{Engine, EngineConfig};
use formwork::front::gbnf::gbnf_to_ir;
use formwork::ir::reference::{Recognizer, Unit};
use formwork::vocab::Vocab;
use formwork::{CompileError, CompileErrorKind, LimitKind, Limits, Location};

fn accepts(gbnf: &str, input: &[u8]) -> bool {
    let g = gbnf_to_ir(gbnf, "t.gbnf").unwrap_or_else(|e| panic!("{e}"));
    let rec = Recognizer::new(&g);
    let mut chart = rec.start();
    input.iter().all(|&b| chart.push(&rec, Unit::Byte(b))) && chart.is_accepting(&rec)
}

fn language(gbnf: &str, yes: &[&str], no: &[&str]) {
    for s in yes {
        assert!(accepts(gbnf, s.as_bytes()), "{gbnf:?} should accept {s:?}");
    }
    for s in no {
        assert!(!accepts(gbnf, s.as_bytes()), "{gbnf:?} should reject {s:?}");
    }
}

#[test]
fn literals_and_escapes() {
    language(r#"root ::= "a\"b\\c""#, &["a\"b\\c"], &["a\"bc", "ab\\c"]);
    language(
        r#"root ::= "\t\n\r\x41\u00e9\U0001F600[]""#,
        &["\t\n\rAé😀[]"],
        &["\t\n\rA\u{e9}"],
    );
    language(r#"root ::= "日本""#, &["日本"], &["日"]);
    language("root ::= \"\"", &[""], &["a"]);
}

#[test]
fn classes() {
    language("root ::= [a-cx]", &["a", "b", "c", "x"], &["d", "", "ab"]);
    language("root ::= [^a-c\\n]", &["d", "é", "😀"], &["a", "\n", ""]);
    language("root ::= [a-]", &["a", "-"], &["b"]);
    language(
        r"root ::= [\]\\\x20-\x22]",
        &["]", "\\", " ", "!", "\""],
        &["#", "["],
    );
    language("root ::= [ぁ-ゟ]+", &["ひらがな"], &["カ", "a"]);
    language("root ::= .", &["a", "\n", "é", "😀"], &["", "ab"]);
    // A negated class is a set of characters: never a lone byte of one.
    assert!(!accepts("root ::= [^a]", &[0xC3]));
    assert!(!accepts("root ::= .", &[0xFF]));
}

#[test]
fn sequences_alternatives_groups_repetitions() {
    let g = r#"root ::= ("a" | "b" "c")* "d"? | "x"{2} "y"{1,} "z"{0,2} ("w" "v"){1,2}"#;
    language(
        g,
        &["", "a", "bca", "d", "abcd", "xxyzwv", "xxyyyzzwvwv"],
        &["bd", "c", "xxwv", "xxyzzzwv", "xxywvwvwv"],
    );
    language(
        "root ::= [0-9]{ 3 , 4 }",
        &["123", "1234"],
        &["12", "12345"],
    );
    language("root ::= \"a\" *", &["", "aaa"], &["b"]);
}

#[test]
fn rules_comments_and_newlines() {
    let g = "# leading comment\n\nroot ::= item (\",\" item)* # trailing\n\nitem ::=\n  ( \"x\" # inside a group newlines are spaces\n    | \"y\"\n  )\n  \nlast-rule_2 ::= \"unused\"\n";
    language(g, &["x", "x,y,x"], &["", "x,"]);
    // A newline after `|` continues the rule, even outside parentheses.
    language("root ::= \"a\" |\n  \"b\"", &["a", "b"], &["c"]);
    // Empty alternatives.
    language("root ::= | \"a\"", &["", "a"], &["aa"]);
}

#[test]
fn special_tokens_by_content() {
    let g = gbnf_to_ir("root ::= <|im_start|> \"x\" <think>", "t.gbnf").unwrap();
    let rec = Recognizer::new(&g);
    let mut chart = rec.start();
    assert!(
        !chart.push(&rec, Unit::Byte(b'<')),
        "a special token never matches as text"
    );
    assert!(chart.push(&rec, Unit::Special("<|im_start|>")));
    assert!(chart.push(&rec, Unit::Byte(b'x')));
    assert!(chart.push(&rec, Unit::Special("<think>")));
    assert!(chart.is_accepting(&rec));
}

fn error_at(gbnf: &str) -> (CompileErrorKind, usize, usize, String) {
    let err = gbnf_to_ir(gbnf, "bad.gbnf").unwrap_err();
    match err.location() {
        Location::Text { source, line, col } => {
            assert_eq!(source, "bad.gbnf");
            (err.kind(), *line, *col, err.message().to_string())
        }
        other => panic!("{err}: no text location ({other:?})"),
    }
}

#[test]
fn syntax_errors_have_exact_positions() {
    let (kind, line, col, msg) = error_at("root ::= \"abc");
    assert_eq!((kind, line, col), (CompileErrorKind::Syntax, 1, 14));
    assert!(msg.contains("closing `\"`"), "{msg}");
    let (kind, line, col, _) = error_at("root ::= \"a\"\n  | \"b\"");
    assert_eq!((kind, line, col), (CompileErrorKind::Syntax, 2, 3));
    let (kind, line, col, _) = error_at("root ::= [a-z\n");
    assert_eq!((kind, line, col), (CompileErrorKind::Syntax, 2, 1));
    let (kind, line, col, msg) = error_at("root ::= \"ok\"\nitem ::= \"\\q\"");
    assert_eq!(
        (kind, line, col),
        (CompileErrorKind::Syntax, 2, 11),
        "{msg}"
    );
    assert_eq!(msg, "unknown escape `\\q`");
    let (kind, line, col, _) = error_at("root ::= (\"a\" | \"b\"");
    assert_eq!((kind, line, col), (CompileErrorKind::Syntax, 1, 20));
    let (kind, line, col, msg) = error_at("root = \"a\"");
    assert_eq!((kind, line, col), (CompileErrorKind::Syntax, 1, 6));
    assert!(msg.contains("::="), "{msg}");
    let (kind, line, col, _) = error_at("root ::= \"a\"{2,x}");
    assert_eq!((kind, line, col), (CompileErrorKind::Syntax, 1, 16));
}

#[test]
fn semantic_errors_have_exact_positions() {
    let (kind, line, col, msg) = error_at("root ::= item \",\" other\nitem ::= \"i\"\n");
    assert_eq!((kind, line, col), (CompileErrorKind::Undefined, 1, 19));
    assert!(msg.contains("`other`"), "{msg}");
    let (kind, line, col, msg) = error_at("root ::= \"a\"\n\nroot ::= \"b\"");
    assert_eq!((kind, line, col), (CompileErrorKind::Invalid, 3, 1));
    assert!(msg.contains("bad.gbnf:1:1"), "{msg}");
    let (kind, line, col, _) = error_at("root ::= \"a\"{3,2}");
    assert_eq!((kind, line, col), (CompileErrorKind::Invalid, 1, 13));
    let (kind, line, col, _) = error_at("root ::= [z-a]");
    assert_eq!((kind, line, col), (CompileErrorKind::Invalid, 1, 11));
    let (kind, line, col, _) = error_at("root ::= \"\\U00110000\"");
    assert_eq!((kind, line, col), (CompileErrorKind::Invalid, 1, 11));
    let (kind, line, col, _) = error_at("item ::= \"x\"\n");
    assert_eq!((kind, line, col), (CompileErrorKind::Undefined, 2, 1));
    let (kind, line, col, _) = error_at("root ::= \"a\" <[151645]>");
    assert_eq!((kind, line, col), (CompileErrorKind::Unsupported, 1, 14));
    let (kind, line, col, _) = error_at("root ::= !<|im_end|>*");
    assert_eq!((kind, line, col), (CompileErrorKind::Unsupported, 1, 10));
    let (kind, line, col, _) = error_at("root ::= \"x\"{99999999999}");
    assert_eq!((kind, line, col), (CompileErrorKind::Invalid, 1, 14));
    let deep = format!("root ::= {}\"a\"{}", "(".repeat(300), ")".repeat(300));
    let (kind, line, col, _) = error_at(&deep);
    let nesting = Limits::new().get(LimitKind::Nesting) as usize;
    assert_eq!(
        (kind, line, col),
        (CompileErrorKind::Limit, 1, 10 + nesting)
    );
}

/// The kind, value and ceiling of a `Limit` error, and its column on line `line`.
fn limit_at(err: &CompileError, line: usize) -> (LimitKind, u64, u64, usize) {
    let limit = err.limit().unwrap_or_else(|| panic!("{err}: not a limit"));
    match err.location() {
        Location::Text { line: l, col, .. } if *l == line => {
            (limit.kind, limit.value, limit.max, *col)
        }
        other => panic!("{err}: not on line {line} ({other:?})"),
    }
}

#[test]
fn nesting_is_checked_through_tokens_classes_literals_and_comments() {
    let nesting = Limits::new().get(LimitKind::Nesting) as usize;
    // (before, groups `before` opens, after): each `before` holds characters that would open
    // a class, a literal, a comment or a group outside its own lexeme.
    let cases = [
        ("<[> ", 0, ""),
        ("<\"> ", 0, ""),
        ("<#> ", 0, ""),
        ("<(> ", 0, ""),
        (r#""[#<(\"" "#, 0, ""),
        (r##"["#<(\]] "##, 0, ""),
        ("( \"a\" # [\"<(\n  | ", 1, ")"),
        ("( # a comment ends at a carriage return\r ", 1, ")"),
    ];
    for (before, opens, after) in cases {
        let text = |depth: usize| {
            let groups = format!("{}\"a\"{}", "(".repeat(depth), ")".repeat(depth));
            format!("root ::= {before}{groups}{after}\n")
        };
        let too_deep = text(nesting + 1 - opens);
        let err = on_small_stack(move || gbnf_to_ir(&too_deep, "t.gbnf").map(|_| ()));
        let err = err.unwrap_err();
        // The first `(` past the limit, on the last line of `before`.
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = "root ::= ".len() * usize::from(line_start == 0) + before.len() - line_start
            + (nesting - opens)
            + 1;
        let line = 1 + before.matches('\n').count();
        assert_eq!(
            limit_at(&err, line),
            (LimitKind::Nesting, nesting as u64 + 1, nesting as u64, col),
            "{before:?}: {err}"
        );
        let at_limit = text(nesting - opens);
        let compiled = on_small_stack(move || gbnf_to_ir(&at_limit, "t.gbnf").map(|_| ()));
        compiled.unwrap_or_else(|e| panic!("{before:?}: {e}"));
    }
}

#[test]
fn repetition_operators_count_as_nesting() {
    let nesting = Limits::new().get(LimitKind::Nesting) as usize;
    let text = format!("root ::= \"a\"{}\n", "?".repeat(60_000));
    let err = on_small_stack(move || gbnf_to_ir(&text, "t.gbnf").map(|_| ())).unwrap_err();
    assert_eq!(
        limit_at(&err, 1),
        (
            LimitKind::Nesting,
            nesting as u64 + 1,
            nesting as u64,
            13 + nesting
        )
    );
    // Groups and operators add up: `((a)?)*` is three levels.
    let text = format!(
        "root ::= {}\"a\"{}*\n",
        "(".repeat(nesting - 1),
        ")?".repeat(nesting - 1)
    );
    let err = gbnf_to_ir(&text, "t.gbnf").unwrap_err();
    assert_eq!(limit_at(&err, 1).0, LimitKind::Nesting);
    let text = format!(
        "root ::= {}\"a\"{}\n",
        "(".repeat(nesting / 2),
        ")?".repeat(nesting / 2)
    );
    let g = gbnf_to_ir(&text, "t.gbnf").unwrap();
    let rec = Recognizer::new(&g);
    assert!(rec.start().is_accepting(&rec));
}

#[test]
fn long_rule_chains_compile_on_a_small_stack() {
    let n = 20_000;
    let mut text = String::from("root ::= r0\n");
    for i in 0..n {
        text += &format!("r{i} ::= \"x\" r{}\n", i + 1);
    }
    text += &format!("r{n} ::= \"y\"\n");
    let accepted = on_small_stack(move || {
        let g = gbnf_to_ir(&text, "chain.gbnf").unwrap();
        assert_eq!(g.rules().len(), n + 2);
        assert!(!g.is_recursive());
        let rec = Recognizer::new(&g);
        let mut chart = rec.start();
        let all = (0..n).all(|_| chart.push(&rec, Unit::Byte(b'x')));
        all && chart.push(&rec, Unit::Byte(b'y')) && chart.is_accepting(&rec)
    });
    assert!(accepted);
}

fn engine(limits: Limits) -> Engine {
    let tokens = ["a", "b", "x", "</s>"]
        .map(|t| t.as_bytes().to_vec())
        .to_vec();
    let vocab = Vocab::from_token_bytes(tokens, &[3], &[3]).unwrap();
    Engine::with_config(vocab, EngineConfig::new().limits(limits))
}

#[test]
fn the_engine_applies_its_limits() {
    let engine = engine(Limits::new().nesting(4).input_bytes(1000).grammar_size(40));
    let err = engine
        .compile_gbnf("root ::= (((((\"a\")))))", "t.gbnf")
        .unwrap_err();
    assert_eq!(limit_at(&err, 1), (LimitKind::Nesting, 5, 4, 14));
    assert!(engine
        .compile_gbnf("root ::= (((\"a\")))*", "t.gbnf")
        .is_ok());
    let err = engine
        .compile_gbnf(&format!("root ::= \"{}\"", "a".repeat(1000)), "t.gbnf")
        .unwrap_err();
    assert_eq!(
        err.limit().map(|l| (l.kind, l.value, l.max)),
        Some((LimitKind::InputBytes, 1011, 1000))
    );
    let rules: String = (0..50)
        .map(|i| format!("r{i} ::= \"{i}\" r{}\n", i + 1))
        .collect();
    let err = engine
        .compile_gbnf(&format!("root ::= r0\n{rules}r50 ::= \"z\""), "t.gbnf")
        .unwrap_err();
    // Each rule `rI ::= "I" rJ` adds three expressions: the 41st is in the body of r13.
    let (kind, _, max, _) = limit_at(&err, 15);
    assert_eq!((kind, max), (LimitKind::GrammarSize, 40));
    // Built-in requests use the same limits.
    let err = engine
        .compile(r#"gbnf(grammar: "root ::= ((((\"a\"))))?")"#)
        .unwrap_err();
    assert_eq!(err.limit().map(|l| l.kind), Some(LimitKind::Nesting));
}
