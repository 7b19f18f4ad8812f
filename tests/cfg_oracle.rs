//! The Earley engine's masks equal the reference recognizer's, bit for bit, at every step of
//! several valid texts per grammar, with the adaptive cache (with and without context
//! expansion) and with the plain trie walk; on Qwen3, and JSON also on Mistral (SentencePiece
//! byte fallback).

use formwork::cfg::{CfgCompiler, CfgConfig};
use formwork::Matcher;
use formwork_testkit::grammars::*;
use formwork_testkit::oracle::*;
use formwork_testkit::tokenizers;

#[test]
fn json_qwen3() {
    check_oracle(
        tokenizers::qwen3(),
        JSON,
        &[
            r#"{"a": [1, -2.5e3, true, null], "b": {"c": "x\u00e9\n"}}"#,
            "[\n  {\"k\":0},\n  []\n]",
            r#""日本 🎉""#,
            "-0.5E+10",
        ],
    );
}

#[test]
fn json_mistral() {
    check_oracle(
        tokenizers::mistral(),
        JSON,
        &[
            r#"{"a": [1, 2.5, "ü"], "b": null}"#,
            r#"[true,{"x":"y z"}]"#,
        ],
    );
}

#[test]
fn arithmetic() {
    check_oracle(
        tokenizers::qwen3(),
        ARITH,
        &[
            "1 + 2*3",
            "-(4.5 - x(1, y(2))) / 7 % 2",
            "max(10,20,30)",
            "((((1))))",
        ],
    );
}

#[test]
fn c_like() {
    check_oracle(
        tokenizers::qwen3(),
        CLIKE,
        &[
            "int main() {\n  int x = 1;\n  while (x < 10) {\n    x = x * 2;\n  }\n  return x;\n}\n",
            "void f(char* s, int n) {\n  // log it\n  if (n == 0) { return; } else { print(s, n - 1); }\n}",
        ],
    );
}

#[test]
fn left_recursive() {
    check_oracle(
        tokenizers::qwen3(),
        LEFTREC,
        &["1+2*3-4/5", "(a[1]+b[(2)])*c[3-4]", "12345*678"],
    );
}

#[test]
fn ambiguous() {
    check_oracle(
        tokenizers::qwen3(),
        AMBIGUOUS,
        &["1+2*3+4*5", "(a+b)*(c+d)+e", "<<x>x<>>x<x>", "xxxx"],
    );
}

#[test]
fn right_linear() {
    check_oracle(
        tokenizers::qwen3(),
        RIGHT_LINEAR,
        &[
            "Hello, world! <call>[ab,[c],d]</call>\nthen more <call>x</call>",
            "plain text only, with > and é",
            "",
        ],
    );
}

#[test]
fn special_tokens() {
    check_oracle(
        tokenizers::qwen3(),
        SPECIALS,
        &[
            "<think>\nshort thought</think>\n\nThe answer is 42.<|im_end|>",
            "<think>\n</think>\n\nsee <|vision_start|>img12<|vision_end|> here",
        ],
    );
}

#[test]
fn large_repeats() {
    let many_a = format!("({})", "a".repeat(150));
    let items = format!("<{}>", vec!["ab"; 52].join(","));
    check_oracle(
        tokenizers::qwen3(),
        REPEATS,
        &["(aaa)", &many_a, "[0123456789]", "[]", &items],
    );
}

#[test]
fn bounded_string() {
    check_oracle(
        tokenizers::qwen3(),
        BOUNDED_STRING,
        &[
            r#"{"name": "Zoë Ångström\tnée Byron"}"#,
            r#"{"name": "xy"}"#,
            r#"{"name": "exactly forty characters, with \"quotes\"!"}"#,
        ],
    );
}

/// Bounded loops (counted, past the unrolling limit) whose iterations a token does not fix:
/// after `a`, `ab` may go on or a new iteration may start; `[a-z]+` may end after any letter.
/// Near the bound the mask cache cannot count iterations along the trie and walks those tokens
/// with the real counter.
#[test]
fn bounded_loops_over_ambiguous_bodies() {
    let ab = format!("<{}>", "ab".repeat(20));
    let a = format!("<{}>", "a".repeat(40));
    let words = format!("({})", ["ab", "c"].repeat(6).join(" "));
    check_oracle(
        tokenizers::qwen3(),
        r#"root ::= "<" ("ab" | "a" | "b" "c"?){1,40} ">" | "(" ([a-z]+ " "?){1,40} ")""#,
        &[&ab, &a, "<abcabca>", &words],
    );
}

/// A string of at most 30 words (`^(?:\S+\s+){0,29}\S+$`, MaskBench's job-posting
/// schemas): the loop over words calls the loops over a word's characters and its spaces, so
/// it is a caller in context of every character's item, relaxed there while few tokens are
/// long enough to reach its bound.
fn words_schema() -> serde_json::Value {
    serde_json::json!({"type": "object", "properties": {
        "t": {"type": "string", "pattern": "^(?:\\S+\\s+){0,29}\\S+$"}
    }, "required": ["t"], "additionalProperties": false})
}

/// `n` words of `words_schema`'s string, some long, some split by several spaces.
fn words(n: usize) -> String {
    let list: Vec<&str> = (0..n)
        .map(|i| ["lorem", "ipsum", "dolorsitametconsectetur", "a  b"][i % 4])
        .collect();
    format!(r#"{{"t":"{}"}}"#, list.join(" "))
}

/// [`words_schema`] from one word to its bound, walked with each configuration against the
/// oracle.
#[test]
fn strings_of_counted_words() {
    check_schema(&words_schema(), &[&words(1), &words(23)]);
}

/// The classification of a character inside [`words_schema`]'s string is found once for
/// all the words far from the bound: keyed by the count of words, every word was a new
/// context entry classifying ~100k tokens again (~1.2 ms a step on MaskBench o21075).
#[test]
fn counted_words_are_classified_once_far_from_their_bound() {
    let vocab = tokenizers::qwen3();
    let compiler = CfgCompiler::new(vocab, CfgConfig::new());
    let mut m = compiler
        .compile(&schema_ir(&words_schema()))
        .unwrap()
        .matcher();
    // 10 words: 19 or more left, where fewer than 1,024 tokens are longer.
    let text = format!(r#"{{"t":"{}"#, ["lorem ipsum "; 5].concat());
    let mut misses = Vec::new();
    for t in vocab.encode(&text).unwrap() {
        let before = compiler.cache_stats().misses;
        mask_of(&mut m, vocab);
        misses.push(compiler.cache_stats().misses - before);
        m.consume(t).unwrap();
    }
    // The first words find their entries; each later one reads them.
    let later = &misses[misses.len() / 2..];
    assert!(later.iter().all(|&n| n == 0), "{misses:?}");
    assert!(misses.iter().sum::<u64>() > 0, "{misses:?}");
}

/// An object of two properties of the same word-count pattern: the pattern's unit is called
/// from each, and only its outermost callers (the member after each) tell them apart.
fn two_word_properties() -> serde_json::Value {
    let words = serde_json::json!({"type": "string", "pattern": "^(?:\\S+\\s+){0,99}\\S+$"});
    serde_json::json!({"type": "object", "properties": {"a": words, "b": words},
        "additionalProperties": false})
}

/// [`two_word_properties`] against the oracle, the second property's words classified in
/// the first one's entries below the outermost callers and that caller's own ones above.
#[test]
fn strings_of_words_in_two_properties() {
    check_schema(
        &two_word_properties(),
        &[
            r#"{"a":"We are looking for a supplier","b":"We are looking for x"}"#,
            r#"{"a":"one","b":"two  words, then \"three\" x"}"#,
        ],
    );
}

/// The tokens leaving the pattern's unit are classified once for both properties: below the
/// outermost callers, which are where the two differ. Keyed by the whole context, the second
/// property's first words classified ~50k tokens again (MaskBench's job-posting schemas,
/// ~1.2 ms a mask at the first words of every property); now only the few that reach the
/// member after it are, so its words add a small part of the cache's bytes the first
/// property's added.
#[test]
fn a_pattern_called_from_two_properties_is_classified_once_below_them() {
    let vocab = tokenizers::qwen3();
    let compiler = CfgCompiler::new(vocab, CfgConfig::new());
    let mut m = compiler
        .compile(&schema_ir(&two_word_properties()))
        .unwrap()
        .matcher();
    let mut walk = |text: &str| {
        let before = compiler.cache_stats().bytes;
        for t in vocab.encode(text).unwrap() {
            mask_of(&mut m, vocab);
            m.consume(t).unwrap();
        }
        compiler.cache_stats().bytes - before
    };
    walk(r#"{"a":""#);
    let first = walk("We are looking for a supplier");
    walk(r#"","b":""#);
    let second = walk("We are looking for a supplier");
    assert!(second * 10 < first, "{second} bytes against {first}");
}

/// A bounded loop inside an unbounded one (base64 groups): a token that ends one group and
/// starts the next goes past the inner loop's bound but on through a new instance of it,
/// which only the context knows.
#[test]
fn bounded_loops_repeated_by_an_enclosing_loop() {
    check_oracle(
        tokenizers::qwen3(),
        r#"root ::= "\"" ([A-Za-z0-9+/]{8})* ([A-Za-z0-9+/]{8} | [A-Za-z0-9+/]{3} "=") "\"""#,
        &[r#""SGVsbG8gd29ybGQaSGV=""#, r#""aGVsbG8g+/29ybGQabc=""#],
    );
}

/// Loops over one body with different bounds (a UUID-like pattern) share the item level's
/// relaxed walk; each bound is then applied with its own counter.
#[test]
fn loops_of_one_body_with_different_bounds() {
    check_oracle(
        tokenizers::qwen3(),
        r#"root ::= "\"" [0-9A-Za-z]{8} "-" [0-9A-Za-z]{4} "-" [0-9A-Za-z]{2,12} "\"""#,
        &[r#""1234abcd-EF01-xyz789abc012""#, r#""Certific-ateX-Id""#],
    );
}

/// Bounded strings (`maxLength`) count their iterations by characters, read off the string
/// slice's tokens: multibyte characters (some split across tokens), escapes near the bound,
/// lengths reached exactly. A bounded loop whose iterations are not single characters
/// (`ab`) cannot be counted so, and is walked.
#[test]
fn bounded_strings_counted_by_characters() {
    let schema = serde_json::json!({"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 5},
        "b": {"type": "string", "minLength": 2, "maxLength": 9}
    }});
    check_schema(
        &schema,
        &[
            r#"{"a":"日本語ab","b":"é\n\"x🎉yz"}"#,
            r#"{"a":"","b":"ñandú día"}"#,
            r#"{"a":"🎉🎉🎉🎉🎉","b":"\u00e9\t"}"#,
        ],
    );
    check_oracle(
        tokenizers::qwen3(),
        r#"root ::= "<" ("ab" | "é" | "c"){0,7} ">""#,
        &["<abéccabé>", "<ééééééé>", "<>"],
    );
}

/// URIs and names restricted to alphanumerics: their walks take the ASCII slices (a URI's
/// unreserved characters, alphanumerics) for the first bytes they allow and walk the rest.
#[test]
fn ascii_slices() {
    let schema = serde_json::json!({"type": "object", "properties": {
        "home": {"type": "string", "format": "uri"}
    }, "patternProperties": {"^[A-Z][A-Za-z0-9]*$": {"type": "integer"}},
    "additionalProperties": false});
    check_schema(
        &schema,
        &[
            r#"{"home":"https://user@example.org:8080/a-b_c.d~e/%7E?q=1&r=(x)#top","Abc123":4}"#,
            r#"{"home":"urn:isbn:0451450523","Zed":0,"Q9":-7}"#,
        ],
    );
}

/// A state whose first bytes differ: after `a` any string content (taken as a slice), after `b`
/// only digits (walked), others rejected.
#[test]
fn slices_by_first_byte() {
    check_oracle(
        tokenizers::qwen3(),
        r#"root ::= "\"" ( "a" [^"\\]* | "b" [0-9]* ) "\"" "#,
        &[r#""ab c é""#, r#""b12""#, r#""a""#],
    );
}

/// Property names with additional properties allowed: one name trie whose other branch is any
/// string (non-ASCII characters through a shared rule), so a mask walk takes most string
/// tokens as a slice and walks the first bytes that lead into names.
#[test]
fn property_names_beside_additional_properties() {
    let schema = serde_json::json!({"type": "object", "properties": {
        "name": {"type": "string"},
        "nickname": {"type": "string"},
        "nation": {"type": "integer"}
    }, "additionalProperties": {"type": "string"}});
    check_schema(
        &schema,
        &[
            r#"{"nickname":"Al","nation":7,"nam":"x","é名":"中文 <b>"}"#,
            r#"{"name":"Zoë","namex":"y","":""}"#,
        ],
    );
}

/// The grammar of `schema` with the default options.
fn schema_ir(schema: &serde_json::Value) -> formwork::ir::Grammar {
    formwork::front::json_schema::compile_schema(
        schema,
        &formwork::front::json_schema::JsonSchemaOptions::new(),
    )
    .unwrap()
    .grammar
}

/// [`check_engines`] on the grammar of a JSON Schema, on Qwen3.
fn check_schema(schema: &serde_json::Value, texts: &[&str]) {
    let ir = schema_ir(schema);
    let vocab = tokenizers::qwen3();
    let engines: Vec<_> = configs()
        .into_iter()
        .map(|(name, c)| (name, compile(vocab, c, &ir)))
        .collect();
    check_engines(vocab, &ir, &engines, texts);
}

/// A searched URL pattern (MaskBench Github_trivial---o67212): before the match, each state
/// of its automaton survives every string through the rows around it, though its unit alone
/// does not (the text after a match is another rule), so the slice is taken whole there
/// (`sliced_walk`'s `a_short_horizon_leaves_the_pair_proof_its_chance`). The masks agree with
/// the oracle before, across and after the match, and over a long stretch not matching yet.
#[test]
fn strings_searched_for_a_url() {
    let schema = serde_json::json!({"type": "array", "items": {
        "type": "string", "pattern": "(https?://([-\\w\\.]+)+(:\\d+)?(/([\\w/_\\.]*(\\?\\S+)?)?)?)"
    }});
    check_schema(
        &schema,
        &[
            r#"["https://www.example.com/path/to/resource?query=parameter"]"#,
            r#"["see http://a.b:80/x?y=z, or https://c","ftp https://x"]"#,
            r#"["https:/ nothing here for a while, then http://z"]"#,
        ],
    );
}

/// Names in a bounded pattern or outside it (`patternProperties` of `{0,250}` characters, any
/// other name allowed: MaskBench Github_easy---o64731): the name's unit counts characters and,
/// at the first one outside the pattern, calls the shared text of any name, so the state
/// survives every string only through that call. Its horizon follows the call, and every mask
/// takes the JSON string slice: within 50k units of work, where the trie has 333k nodes (and
/// each name's position took ~300k, 1.1 ms). The masks agree with the oracle, the first built
/// as parses enter the units too (the callee was missing when the horizon asked).
#[test]
fn names_outside_a_bounded_pattern_take_the_string_slice() {
    let schema = serde_json::json!({"type": "object", "patternProperties": {
        "^[a-zA-Z0-9_-]{0,250}$": {"type": "integer"}
    }});
    let texts = [
        r#"{"key1":1,"key_two":2,"a b":{"x":[1]},"é":null}"#,
        r#"{"":3,"-":4}"#,
    ];
    check_schema(&schema, &texts);
    let vocab = tokenizers::qwen3();
    let bounded = CfgCompiler::new(vocab, CfgConfig::new().eager_states(0))
        .with_limits(formwork::Limits::new().mask_work(50_000))
        .compile(&schema_ir(&schema))
        .unwrap();
    for text in texts {
        let mut m = bounded.matcher();
        for t in vocab.encode(text).unwrap() {
            mask_of(&mut m, vocab);
            m.consume(t).unwrap();
        }
    }
}

/// Character automata (see `front::chars`): a pattern within lengths (one rule per state of
/// their product) and keys split by the patterns they match.
#[test]
fn string_and_key_automata() {
    let schema = serde_json::json!({"type": "object", "properties": {
        "version": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+.*$", "maxLength": 12}
    }, "patternProperties": {"^x-": {"type": "integer"}},
    "additionalProperties": {"type": "string", "pattern": "[a-f]", "minLength": 2, "maxLength": 6}});
    check_schema(
        &schema,
        &[
            r#"{"version":"10.2-rc é","x-id":7,"note":"cafe"}"#,
            r#"{"x-":0,"x":"\u0061b","é":"zzzza"}"#,
        ],
    );
}

/// Grammars that share sub-structures (JSON strings and numbers, bounded strings) run through
/// one compiler, so later grammars take cached classifications computed for earlier ones
/// (cross-grammar keys by structural hash); and again with a cache so small that entries are
/// evicted and recomputed. Masks stay exact.
#[test]
fn shared_cache_across_grammars_and_evictions() {
    let vocab = tokenizers::qwen3();
    let array_of_strings = JSON.replace(
        "root    ::= ws value ws",
        "root    ::= \"[\" ws string ( ws \",\" ws number )* ws \"]\"",
    );
    let bounded = BOUNDED_STRING.replace("{2,40}", "{1,41}");
    let grammars: [(&str, &[&str]); 4] = [
        (JSON, &[r#"{"k": ["x y", 12.5]}"#]),
        (&array_of_strings, &[r#"["hello wörld", 3, -4e2]"#]),
        (BOUNDED_STRING, &[r#"{"name": "Ada"}"#]),
        (&bounded, &[r#"{"name": "Ada Lovelace"}"#]),
    ];
    let run = |budget: usize| {
        let compiler = CfgCompiler::new(vocab, CfgConfig::new().cache_bytes(budget));
        for (gbnf, texts) in grammars {
            let ir = ir(gbnf);
            let grammar = compiler.compile(&ir).unwrap();
            check_engines(vocab, &ir, &[("shared", grammar)], texts);
        }
        compiler.cache_stats()
    };
    let roomy = run(256 << 20);
    assert!(roomy.hits > 0 && roomy.evictions == 0, "{roomy:?}");
    // A fraction of what the roomy run kept (the bytes cached depend on which tokens the walk had
    // to classify, so a fixed budget may fit everything on another setup): entries are evicted
    // or, larger than a shard's share, never kept, and the walk recomputes them.
    let tight = run(roomy.bytes / 8);
    assert!(tight.misses > roomy.misses, "{roomy:?} {tight:?}");
}

/// What may follow a unit is part of its cached classification: the same free-text unit
/// closed by `>` in one grammar and by `)` in another shares its structural hash, but a token
/// such as `world)` is rejected by the first unit's callers and accepted by the second's.
/// Both grammars go through one compiler, so the second would find the first's entries if
/// the key left the follow set out.
#[test]
fn follow_sets_key_shared_classifications() {
    let vocab = tokenizers::qwen3();
    let compiler = CfgCompiler::new(vocab, CfgConfig::new());
    for (open, close) in [("<", ">"), ("(", ")")] {
        let gbnf =
            format!("root ::= \"{open}\" text \"{close}\" [.!]?\ntext ::= [^<>()\\x00-\\x1f]+\n");
        let ir = ir(&gbnf);
        let grammar = compiler.compile(&ir).unwrap();
        let text = format!("{open}hello world{close}!");
        check_engines(vocab, &ir, &[("shared", grammar)], &[&text]);
    }
}
