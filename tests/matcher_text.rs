//! Text that does not come from sampling (`consume_bytes`) and speculative drafts
//! (`validate_tokens`), on both backends, against the reference recognizer: consuming a string
//! in arbitrary byte chunks (cut inside tokens and inside UTF-8 characters) gives, after every
//! chunk, the oracle's mask bit for bit and the same state as consuming a tokenization of it;
//! rejected text and validated drafts leave the state as it was.

use formwork::engine::{BackendKind, Constraint};
use formwork::front::gbnf::gbnf_to_ir;
use formwork::front::json_schema::compile_schema;
use formwork::ir::recognizer::{Chart, Recognizer, Terminal};
use formwork::ir::Grammar;
use formwork::vocab::Vocab;
use formwork::{JsonSchemaOptions, MatchErrorKind, Matcher, TokenId};
use formwork_testkit::rng::Rng;
use formwork_testkit::tokenizers;
use serde_json::json;

/// A piece of an output: text, or a special token by its content.
enum Part<'a> {
    Text(&'a str),
    Special(&'a str),
}

struct Case<'a> {
    label: &'a str,
    constraint: Constraint,
    grammar: Grammar,
    backend: BackendKind,
    output: Vec<Part<'a>>,
}

fn mask_of(m: &mut dyn Matcher, vocab: &Vocab) -> Vec<u32> {
    let mut out = vec![0u32; vocab.mask_words()];
    m.fill_mask(&mut out).unwrap();
    out
}

fn assert_oracle(label: &str, at: &str, m: &mut dyn Matcher, rec: &Recognizer, chart: &Chart) {
    let vocab = tokenizers::qwen3();
    let got = mask_of(m, vocab);
    let want = chart.mask(rec, vocab);
    assert!(
        got == want.words(),
        "{label}: after {at}: mask differs from the oracle ({} vs {} tokens)",
        formwork::bitmask::iter_ones(&got).count(),
        want.iter().count()
    );
    assert_eq!(m.is_accepting(), chart.is_accepting(rec), "{label}: {at}");
}

fn cases() -> Vec<Case<'static>> {
    let engine = formwork_testkit::template_engine();
    let request = |label, text: &'static str, backend, output| Case {
        label,
        constraint: engine.compile(text).unwrap(),
        grammar: engine.request_grammar(text).unwrap(),
        backend,
        output,
    };
    let schema = json!({"type": "object", "properties": {
        "name": {"type": "string"},
        "kids": {"type": "array", "items": {"$ref": "#"}}}, "required": ["name"]});
    let schema_grammar = compile_schema(&schema, &JsonSchemaOptions::new())
        .unwrap()
        .grammar;
    let gbnf = r#"root ::= expr
expr ::= term (("+" | "-") term)*
term ::= [0-9]+ | "(" expr ")""#;
    vec![
        request(
            "regex",
            r#"regex(pattern: /\{"version": "\d+(\.\d+)*", "note": "[^"]*"\}/)"#,
            BackendKind::Operators,
            vec![Part::Text(
                r#"{"version": "2.14.0", "note": "Zoë ☃ 😀 ok"}"#,
            )],
        ),
        request(
            "reference lookup template",
            r#"reference_lookup(topics: 1..20, ids: {"1", "1.1", "2", "2.1.1", "2.3"})"#,
            BackendKind::Operators,
            vec![Part::Text(
                r#"[{"topic": [1, 12], "reference": ["2.1.1", "2.3"]}, {"topic": [3], "reference": ["1.1"]}]"#,
            )],
        ),
        request(
            "outline template with special tokens",
            r#"outline(sections: [section(id: "1", children: [section(id: "1.1")])])"#,
            BackendKind::Operators,
            vec![
                Part::Special("<|vision_start|>"),
                Part::Text("1 Intro"),
                Part::Special("<|vision_pad|>"),
                Part::Text("Why ☃."),
                Part::Special("<|vision_end|>"),
                Part::Text("\n"),
                Part::Special("<|vision_start|>"),
                Part::Text("1.1 Más"),
                Part::Special("<|vision_pad|>"),
                Part::Text("x"),
                Part::Special("<|vision_end|>"),
                Part::Text("\n"),
            ],
        ),
        Case {
            label: "recursive JSON schema",
            constraint: engine
                .compile_json_schema(&schema, &JsonSchemaOptions::new())
                .unwrap(),
            grammar: schema_grammar,
            backend: BackendKind::Earley,
            output: vec![Part::Text(
                r#"{"name":"Zoë ☃","kids":[{"name":"a\"b","kids":[]}]}"#,
            )],
        },
        Case {
            label: "GBNF",
            constraint: engine.compile_gbnf(gbnf, "arith").unwrap(),
            grammar: gbnf_to_ir(gbnf, "arith").unwrap(),
            backend: BackendKind::Earley,
            output: vec![Part::Text("12+(3-45)+6")],
        },
    ]
}

/// Random chunks of `text`, cut anywhere (inside tokens and UTF-8 characters); some empty.
fn chunks<'t>(text: &'t [u8], rng: &mut Rng) -> Vec<&'t [u8]> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let n = rng.below(8).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        out.push(chunk);
        rest = tail;
    }
    out
}

#[test]
fn consumed_text_gives_the_oracle_mask_after_every_chunk_and_rolls_back_per_call() {
    let vocab = tokenizers::qwen3();
    for case in cases() {
        assert_eq!(case.constraint.backend(), case.backend, "{}", case.label);
        let rec = Recognizer::new(&case.grammar);
        for seed in 0..3 {
            let label = format!("{} (seed {seed})", case.label);
            let mut rng = Rng::new(seed);
            let mut m = case.constraint.matcher();
            let initial = mask_of(&mut m, vocab);
            let mut chart = rec.start();
            let mut steps = 0;
            for part in &case.output {
                match part {
                    Part::Special(content) => {
                        assert!(chart.push(&rec, Terminal::Special(content)));
                        m.consume(vocab.special_id(content).unwrap()).unwrap();
                        steps += 1;
                    }
                    Part::Text(text) => {
                        for chunk in chunks(text.as_bytes(), &mut rng) {
                            for &b in chunk {
                                assert!(chart.push(&rec, Terminal::Byte(b)), "{label}: not in L");
                            }
                            m.consume_bytes(chunk)
                                .unwrap_or_else(|e| panic!("{label}: {chunk:?}: {e}"));
                            steps += 1;
                            // Sweeping the vocabulary is the slow part: one chunk in three.
                            if rng.below(3) == 0 {
                                assert_oracle(&label, &format!("{chunk:?}"), &mut m, &rec, &chart);
                            }
                        }
                    }
                }
            }
            assert_eq!(m.num_consumed(), steps, "{label}: one step per call");
            assert_oracle(&label, "the whole output", &mut m, &rec, &chart);
            assert!(m.is_accepting(), "{label}");
            m.rollback(steps).unwrap();
            assert_eq!(
                mask_of(&mut m, vocab),
                initial,
                "{label}: rolled back to the start"
            );
        }
    }
}

/// Tokens of the output: text through the tokenizer, specials by id.
fn tokenize(vocab: &Vocab, output: &[Part]) -> Vec<TokenId> {
    output
        .iter()
        .flat_map(|p| match p {
            Part::Text(t) => vocab.encode(t).unwrap(),
            Part::Special(s) => vec![vocab.special_id(s).unwrap()],
        })
        .collect()
}

#[test]
fn consuming_text_is_consuming_any_tokenization_of_it() {
    let vocab = tokenizers::qwen3();
    for case in cases() {
        let label = case.label;
        let tokens = tokenize(vocab, &case.output);
        // Canonical tokens, and the same bytes one token per byte where the vocabulary allows.
        let mut by_tokens = case.constraint.matcher();
        by_tokens.consume_all(&tokens).unwrap();
        let mut by_text = case.constraint.matcher();
        for part in &case.output {
            match part {
                Part::Text(t) => by_text.consume_bytes(t.as_bytes()).unwrap(),
                Part::Special(s) => by_text.consume(vocab.special_id(s).unwrap()).unwrap(),
            }
        }
        assert_eq!(
            mask_of(&mut by_tokens, vocab),
            mask_of(&mut by_text, vocab),
            "{label}"
        );
        assert_eq!(by_tokens.is_accepting(), by_text.is_accepting(), "{label}");
        assert_eq!(by_tokens.forced_bytes(), by_text.forced_bytes(), "{label}");
        let eos = vocab.eos_tokens()[0];
        by_text.consume(eos).unwrap();
        assert!(by_text.is_terminated(), "{label}");
        let err = by_text.consume_bytes(b"x").unwrap_err();
        assert_eq!(err.kind(), &MatchErrorKind::Terminated, "{label}");
    }
}

#[test]
fn rejected_text_names_the_failing_byte_and_changes_nothing() {
    let vocab = tokenizers::qwen3();
    for case in cases() {
        let label = case.label;
        let rec = Recognizer::new(&case.grammar);
        let Some(Part::Text(text)) = case.output.iter().find(|p| matches!(p, Part::Text(_))) else {
            unreachable!()
        };
        let leading = case
            .output
            .iter()
            .take_while(|p| matches!(p, Part::Special(_)))
            .count();
        let mut m = case.constraint.matcher();
        let mut chart = rec.start();
        for p in &case.output[..leading] {
            let Part::Special(s) = p else { unreachable!() };
            m.consume(vocab.special_id(s).unwrap()).unwrap();
            assert!(chart.push(&rec, Terminal::Special(s)));
        }
        // A prefix of the text, then a byte the oracle rejects at that point, then more text.
        let cut = text.len() / 2;
        let prefix = &text.as_bytes()[..cut];
        let mut probe = chart.clone();
        assert!(prefix.iter().all(|&b| probe.push(&rec, Terminal::Byte(b))));
        let wrong = (0..=255u8)
            .find(|&b| !probe.clone().push(&rec, Terminal::Byte(b)))
            .unwrap();
        let bad = [prefix, &[wrong], text.as_bytes()].concat();
        let before = mask_of(&mut m, vocab);
        let consumed = m.num_consumed();
        let err = m.consume_bytes(&bad).unwrap_err();
        assert_eq!(
            err.kind(),
            &MatchErrorKind::TextRejected {
                step: consumed,
                at_byte: cut
            },
            "{label}"
        );
        assert_eq!(m.num_consumed(), consumed, "{label}");
        assert_eq!(mask_of(&mut m, vocab), before, "{label}: state unchanged");
        m.consume_bytes(&text.as_bytes()[..cut]).unwrap();
    }
}

/// A draft holding an id outside the vocabulary is that error, not a draft cut there: the
/// tokens before it are undone all the same.
#[test]
fn validate_tokens_of_an_unknown_id_is_an_error_and_consumes_nothing() {
    let vocab = tokenizers::qwen3();
    for case in cases() {
        let tokens = tokenize(vocab, &case.output);
        let mut m = case.constraint.matcher();
        let before = mask_of(&mut m, vocab);
        let draft = [&tokens[..1], &[u32::MAX]].concat();
        let err = m.validate_tokens(&draft).unwrap_err();
        assert!(
            matches!(err.kind(), MatchErrorKind::UnknownToken { .. }),
            "{}: {err}",
            case.label
        );
        assert_eq!(m.num_consumed(), 0, "{}", case.label);
        assert_eq!(mask_of(&mut m, vocab), before, "{}", case.label);
    }
}

#[test]
fn validate_tokens_counts_the_accepted_prefix_of_a_draft_without_consuming() {
    let vocab = tokenizers::qwen3();
    for case in cases() {
        let label = case.label;
        let rec = Recognizer::new(&case.grammar);
        let tokens = tokenize(vocab, &case.output);
        let mut rng = Rng::new(7);
        let mut m = case.constraint.matcher();
        let mut chart = rec.start();
        let mut pos = 0;
        while pos < tokens.len() {
            let before = mask_of(&mut m, vocab);
            let consumed = m.num_consumed();
            // The true continuation up to a random point, then a token the oracle rejects there.
            let good = 1 + rng.below(4);
            let good = good.min(tokens.len() - pos);
            let mut probe = chart.clone();
            for &t in &tokens[pos..pos + good] {
                assert!(probe.push_token(&rec, vocab, t));
            }
            let wrong = (0..vocab.len() as TokenId)
                .map(|_| rng.below(vocab.len()) as TokenId)
                .find(|&t| !probe.clone().push_token(&rec, vocab, t) && !vocab.is_eos(t))
                .unwrap();
            let draft = [&tokens[pos..pos + good], &[wrong], &tokens[pos..]].concat();
            assert_eq!(m.validate_tokens(&draft).unwrap(), good, "{label} at {pos}");
            assert_eq!(m.num_consumed(), consumed, "{label}");
            assert_eq!(mask_of(&mut m, vocab), before, "{label}: nothing consumed");
            // A draft that is all good is accepted whole, EOS included at the end.
            if pos + good == tokens.len() {
                let whole = [&tokens[pos..], &[vocab.eos_tokens()[0]]].concat();
                assert_eq!(m.validate_tokens(&whole).unwrap(), whole.len(), "{label}");
                assert!(!m.is_terminated(), "{label}");
            }
            // Accept the good part, then roll one back and redo it, as a speculative decoder
            // whose verifier disagreed with the last drafted token would.
            m.consume_all(&tokens[pos..pos + good]).unwrap();
            m.rollback(1).unwrap();
            m.consume(tokens[pos + good - 1]).unwrap();
            for &t in &tokens[pos..pos + good] {
                assert!(chart.push_token(&rec, vocab, t));
            }
            pos += good;
        }
        assert_oracle(label, "every draft", &mut m, &rec, &chart);
    }
}
