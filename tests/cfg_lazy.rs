//! Units built when a parse first enters them (`CfgConfig::eager_states`): the masks, forced
//! bytes and acceptance are those of the grammar built up front, at every step, across
//! rollbacks and threads; a large schema builds only the units its output enters; a limit a
//! later build reaches is a typed error of the call that needed it.

use std::sync::Arc;

use formwork::cfg::{CfgCompiler, CfgConfig, CfgGrammar};
use formwork::json_schema::{compile_schema, JsonSchemaOptions};
use formwork::vocab::Vocab;
use formwork::{LimitKind, Limits, MatchErrorKind, Matcher, TokenId};
use formwork_testkit::grammars::ir;
use formwork_testkit::oracle::{assert_same_mask, mask_of};
use formwork_testkit::tokenizers;
use serde_json::Value;

/// Steps walked per schema: enough to enter nested objects and arrays.
const STEPS: usize = 64;

/// The committed MaskBench sample's schemas that compile, each with the tokens of its first
/// valid instance (compact).
fn sample(vocab: &Vocab) -> Vec<(String, formwork::ir::Grammar, Vec<TokenId>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/maskbench-sample");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| {
            !p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("expected")
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let Some(valid) = file["tests"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["valid"] == Value::Bool(true))
        else {
            continue;
        };
        let Ok(compiled) = compile_schema(&file["schema"], &JsonSchemaOptions::new()) else {
            continue;
        };
        let text = serde_json::to_string(&valid["data"]).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        out.push((name, compiled.grammar, vocab.encode(&text).unwrap()));
    }
    out
}

/// Walks `tokens` (at most [`STEPS`]) on both grammars, comparing masks, forced bytes and
/// acceptance at every step; rolls back three tokens halfway and walks them again.
fn walk_alike(
    vocab: &Vocab,
    name: &str,
    eager: &Arc<CfgGrammar>,
    lazy: &Arc<CfgGrammar>,
    tokens: &[TokenId],
) {
    let (mut e, mut l) = (eager.matcher(), lazy.matcher());
    let tokens = &tokens[..tokens.len().min(STEPS)];
    let halfway = tokens.len() / 2;
    let mut rolled_back = false;
    let mut step = 0;
    loop {
        let what = format!("{name}: step {step}");
        assert_same_mask(
            &mask_of(&mut l, vocab),
            &mask_of(&mut e, vocab),
            vocab,
            &what,
        );
        assert_eq!(l.forced_bytes(), e.forced_bytes(), "{what}: forced bytes");
        assert_eq!(l.is_accepting(), e.is_accepting(), "{what}: accepting");
        if step == tokens.len() {
            return;
        }
        // A valid instance the schema-order default refuses (properties in another order)
        // ends the walk, on both alike.
        let (taken, also) = (
            e.consume(tokens[step]).is_ok(),
            l.consume(tokens[step]).is_ok(),
        );
        assert_eq!(taken, also, "{what}: token {} taken", tokens[step]);
        if !taken {
            return;
        }
        step += 1;
        if step == halfway && step >= 3 && !rolled_back {
            e.rollback(3).unwrap();
            l.rollback(3).unwrap();
            step -= 3;
            rolled_back = true;
        }
    }
}

#[test]
fn masks_of_units_built_on_entry_are_those_of_the_grammar_built_up_front() {
    let vocab = tokenizers::qwen3();
    let eager = CfgCompiler::new(vocab, CfgConfig::new().eager_states(usize::MAX));
    let lazy = CfgCompiler::new(vocab, CfgConfig::new().eager_states(0).batch_states(0));
    let (mut all_units, mut built_lazily) = (0, 0);
    for (name, grammar, tokens) in sample(vocab) {
        let e = eager
            .compile(&grammar)
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        let l = lazy
            .compile(&grammar)
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        walk_alike(vocab, &name, &e, &l, &tokens);
        assert_eq!(e.num_built_units(), e.num_units(), "{name}: built up front");
        all_units += e.num_units();
        built_lazily += l.num_built_units();
    }
    // Some units no walk entered stayed unbuilt (the large-schema test below counts them
    // where it matters).
    assert!(
        built_lazily < all_units,
        "{built_lazily} of {all_units} units built"
    );
}

/// A schema of many definitions, each an object naming the next: its first mask needs the
/// start rule and what the first token can enter, not the 40 definitions.
#[test]
fn a_large_schema_builds_the_units_its_output_enters() {
    let vocab = tokenizers::qwen3();
    let mut defs = serde_json::Map::new();
    for i in 0..40 {
        let mut props = serde_json::Map::new();
        for p in 0..8 {
            props.insert(
                format!("field_{i}_{p}"),
                serde_json::json!({"type": "string"}),
            );
        }
        props.insert(
            "next".into(),
            serde_json::json!({"$ref": format!("#/definitions/d{}", (i + 1) % 40)}),
        );
        defs.insert(
            format!("d{i}"),
            serde_json::json!({"type": "object", "properties": props}),
        );
    }
    let schema = serde_json::json!({"definitions": defs, "$ref": "#/definitions/d0"});
    let grammar = compile_schema(&schema, &JsonSchemaOptions::new())
        .unwrap()
        .grammar;
    let g = CfgCompiler::new(vocab, CfgConfig::new().eager_states(0).batch_states(0))
        .compile(&grammar)
        .unwrap();
    let compiled = g.num_built_units();
    let mut m = g.matcher();
    mask_of(&mut m, vocab);
    let first_mask = g.num_built_units();
    m.consume_all(
        &vocab
            .encode(r#"{"field_0_1":"x","next":{"field_1_0":"#)
            .unwrap(),
    )
    .unwrap();
    mask_of(&mut m, vocab);
    let entered = g.num_built_units();
    let full = CfgCompiler::new(vocab, CfgConfig::new().eager_states(usize::MAX))
        .compile(&grammar)
        .unwrap();
    assert!(full.num_units() >= 40, "{} units", full.num_units());
    assert!(compiled <= 2, "{compiled} units built at compile time");
    assert!(
        first_mask < 6,
        "{first_mask} units built for the first mask"
    );
    assert!(
        first_mask < entered && entered < 12,
        "{entered} units built after entering one definition"
    );
}

/// An object of 160 optional string properties named by 20 words each with 8 suffixes
/// (`consumerAlpha`, …, `tradeHotel`), in order: cut into rules of a few members, and after
/// `{"` each first letter leads to the rules of its own names, which a mask's walk meets
/// through its slice proofs, one first byte after another.
fn many_properties() -> formwork::ir::Grammar {
    let words = "additional brand colour consumer country customer descriptive equivalent gross \
        health image manufacturer net organic outOfPackage packaging product recipe serving trade";
    let suffixes = [
        "Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel",
    ];
    let props: serde_json::Map<String, Value> = words
        .split_whitespace()
        .flat_map(|w| suffixes.iter().map(move |s| format!("{w}{s}")))
        .map(|name| (name, serde_json::json!({"type": "string"})))
        .collect();
    let schema = serde_json::json!({"type": "object", "properties": props});
    compile_schema(&schema, &JsonSchemaOptions::new())
        .unwrap()
        .grammar
}

/// The builds a grammar built lazily (nothing in advance) costs for `text` and the mask after
/// it, with the masks along the way checked against the grammar built up front.
fn builds_through(grammar: &formwork::ir::Grammar, text: &str) -> usize {
    let vocab = tokenizers::qwen3();
    let lazy = CfgCompiler::new(vocab, CfgConfig::new().eager_states(0).batch_states(0));
    let eager = CfgCompiler::new(vocab, CfgConfig::new().eager_states(usize::MAX));
    let tokens = vocab.encode(text).unwrap();
    let (e, l) = (
        eager.compile(grammar).unwrap(),
        lazy.compile(grammar).unwrap(),
    );
    walk_alike(vocab, text, &e, &l, &tokens);
    let l = lazy.compile(grammar).unwrap();
    let mut m = l.matcher();
    m.consume_all(&tokens).unwrap();
    mask_of(&mut m, vocab);
    l.num_later_builds()
}

/// A mask whose walks meet several units not built yet builds them together: a walk goes on
/// past a missing unit (its slice proofs and horizons too, one first byte after another),
/// and the mask's other items are walked before it halts. It used to halt at the first one,
/// each halt a build and the mask taken again (MaskBench o39532: 23 builds for one mask).
/// Here 22 builds, or 9 with every item walked but each walk halting at once.
#[test]
fn a_mask_builds_every_unit_its_walks_meet_at_once() {
    let builds = builds_through(&many_properties(), "{\"");
    assert!(builds <= 6, "{builds} builds through the mask after `{{\"`");
}

/// Optional members cut into rules, each calling the next at its start, are predicted in one
/// row, so building the first builds the chain: 3 builds through the mask after `{`, where
/// each rule cost one (14).
#[test]
fn a_chain_of_rules_predicted_together_is_built_together() {
    let props: serde_json::Map<String, Value> = (0..96)
        .map(|i| (format!("p{i}"), serde_json::json!({"type": "string"})))
        .collect();
    let schema = serde_json::json!({"type": "object", "properties": props});
    let grammar = compile_schema(&schema, &JsonSchemaOptions::new())
        .unwrap()
        .grammar;
    let builds = builds_through(&grammar, "{");
    assert!(builds <= 3, "{builds} builds through the mask after `{{`");
}

/// Matchers of one grammar on several threads build its units as they need them; each sees
/// the masks of the grammar built up front.
#[test]
fn threads_build_units_of_one_grammar_alike() {
    let vocab = tokenizers::qwen3();
    let mut cases = sample(vocab);
    cases.retain(|(_, _, tokens)| tokens.len() >= 16);
    cases.truncate(12);
    let eager = CfgCompiler::new(vocab, CfgConfig::new().eager_states(usize::MAX));
    let lazy = CfgCompiler::new(vocab, CfgConfig::new().eager_states(0).batch_states(0));
    for (name, grammar, tokens) in &cases {
        let e = eager.compile(grammar).unwrap();
        let l = lazy.compile(grammar).unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let (e, l) = (&e, &l);
                let name = format!("{name}, thread {t}");
                s.spawn(move || walk_alike(vocab, &name, e, l, tokens));
            }
        });
    }
}

/// A unit whose automaton is large (a pattern searched within a length: each length a copy
/// of the pattern's states) is built when the grammar compiles, however deep it is, so the
/// mask of the step that enters it builds nothing; the small units around it wait for the
/// parse.
#[test]
fn a_large_unit_deep_in_a_schema_is_built_when_it_compiles() {
    let vocab = tokenizers::qwen3();
    let name = serde_json::json!({
        "type": "string", "pattern": "[a-zA-Z0-9_.-]+", "minLength": 3, "maxLength": 255
    });
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "indexes": {"type": "array", "items": {
                "type": "object",
                "properties": {"IndexName": name, "Size": {"type": "number"}},
                "required": ["IndexName"],
            }},
        },
    });
    let grammar = compile_schema(&schema, &JsonSchemaOptions::new())
        .unwrap()
        .grammar;
    let walk = |config: CfgConfig| {
        let g = CfgCompiler::new(vocab, config).compile(&grammar).unwrap();
        let compiled = g.num_built_units();
        let mut m = g.matcher();
        m.consume_all(&vocab.encode(r#"{"indexes":[{"IndexName":"#).unwrap())
            .unwrap();
        let before = g.num_built_units();
        let first = vocab.encode("\"").unwrap();
        m.consume_all(&first).unwrap();
        mask_of(&mut m, vocab);
        (compiled, before, g.num_built_units(), g.num_units())
    };
    let lazy = CfgConfig::new().eager_states(0).batch_states(0);
    let (compiled, before, entered, units) = walk(lazy.clone());
    let (compiled_all_lazily, before_all, entered_all, _) =
        walk(lazy.large_unit_states(usize::MAX));
    assert_eq!(
        compiled,
        compiled_all_lazily + 1,
        "the name's unit built in advance"
    );
    assert_eq!(
        entered - before + 1,
        entered_all - before_all,
        "the step entering the name builds what follows it, not the name's unit"
    );
    assert!(
        compiled < units,
        "small units wait for the parse: {compiled} of {units} built"
    );
}

/// A build a parse needs that would pass the grammar size limit is that call's typed error
/// (the first mask walks tokens into the big rule); the matcher is unchanged and goes on where
/// the grammar fits.
#[test]
fn a_later_build_past_a_limit_is_a_typed_error_of_the_call() {
    let vocab = tokenizers::qwen3();
    let words: Vec<String> = (0..300).map(|i| format!("\"w{i:03}x\"")).collect();
    // `big` in the middle of its rule: a call (at the end, it would be built in place).
    let text = format!(
        "root ::= \"a\" big \"!\" | \"b\"\nbig ::= \"(\" ({}) \")\"",
        words.join(" | ")
    );
    let grammar = ir(&text);
    // `big`'s NFA is over the size built when the grammar compiles: left to the parse here.
    let lazy = CfgConfig::new()
        .eager_states(0)
        .batch_states(0)
        .large_unit_states(usize::MAX);
    let compiler = CfgCompiler::new(vocab, lazy).with_limits(Limits::new().grammar_size(200));
    let g = compiler.compile(&grammar).unwrap();
    let mut m = g.matcher();
    let over = |kind: &MatchErrorKind| matches!(kind, MatchErrorKind::Limit(l) if l.kind == LimitKind::GrammarSize);
    let mut mask = vec![0u32; vocab.mask_words()];
    let err = m.fill_mask(&mut mask).unwrap_err();
    assert!(over(err.kind()), "{err}");
    let err = m.consume(vocab.encode("a").unwrap()[0]).unwrap_err();
    assert!(over(err.kind()), "{err}");
    assert_eq!(m.num_consumed(), 0);
    m.consume(vocab.encode("b").unwrap()[0]).unwrap();
    assert!(m.is_accepting());
    assert_eq!(g.num_built_units(), 1);
}
