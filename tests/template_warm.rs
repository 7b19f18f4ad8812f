//! Template masks computed at registration (WGrammar's offline masks): the states of the
//! shipped templates that no request argument decides are in the cache before the first
//! request, pinned there, within the configured budget, and equal to the masks computed on
//! demand.

use formwork::engine::{Engine, EngineConfig};
use formwork::Matcher;
use formwork_testkit::tokenizers;

const OUTLINE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/templates/outline.fw");
const ALL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/templates");

fn engine(template_mask_bytes: usize, templates: &str) -> Engine {
    let config = EngineConfig::new().template_mask_bytes(template_mask_bytes);
    let mut engine = Engine::with_config(tokenizers::qwen3().clone(), config);
    engine.register_templates([templates]).unwrap();
    engine
}

/// Two records whose ids no warm-up could know.
const IDS: [&str; 2] = ["7.3", "12"];
const TEXT: &str = concat!(
    "<|vision_start|>7.3 Cold starts, measured<|vision_pad|>No request pays for a walk ",
    "of the free text: ünïcode, digits 42.<|vision_end|>\n",
    "<|vision_start|>12 Second<|vision_pad|>x<|vision_end|>\n",
);

/// Steps through `text` under `request` on `engine`: per step, the mask, the operator-cache
/// misses its fill caused and the bytes consumed before it.
fn steps(engine: &Engine, request: &str, text: &str) -> Vec<(Vec<u32>, u64, usize)> {
    let vocab = tokenizers::qwen3();
    let mut m = engine.compile(request).unwrap().matcher();
    let mut consumed = 0;
    let mut steps = Vec::new();
    for t in vocab.encode(text).unwrap() {
        let mut mask = vec![0u32; vocab.mask_words()];
        let before = engine.cache_stats().operators.misses;
        m.fill_mask(&mut mask).unwrap();
        let misses = engine.cache_stats().operators.misses - before;
        steps.push((mask, misses, consumed));
        m.consume(t).unwrap();
        // A special token's bytes are its content, as in the text.
        consumed += vocab.token_bytes(t).len();
    }
    assert!(m.is_accepting());
    steps
}

/// Steps through `TEXT` on `engine`: per step, the mask, the operator-cache misses its fill
/// caused and whether the state is one the templates fix — after a record's id (the `Write`
/// has only " " left), in its title or its summary, up to its `<|vision_end|>`.
fn walk(engine: &Engine) -> Vec<(Vec<u32>, u64, bool)> {
    let request = "outline(sections: [section(id: \"7.3\"), section(id: \"12\")])";
    let mut fixed_spans = Vec::new();
    let mut at = 0;
    for id in IDS {
        let start = TEXT[at..].find("<|vision_start|>").unwrap() + at;
        let end = TEXT[start..].find("<|vision_end|>").unwrap() + start;
        fixed_spans.push(start + "<|vision_start|>".len() + id.len()..=end);
        at = end;
    }
    steps(engine, request, TEXT)
        .into_iter()
        .map(|(mask, misses, at)| (mask, misses, fixed_spans.iter().any(|s| s.contains(&at))))
        .collect()
}

#[test]
fn the_first_request_finds_every_argument_free_mask_computed() {
    let warm = engine(formwork::engine::DEFAULT_TEMPLATE_MASK_BYTES, OUTLINE);
    let warmth = warm.template_warmth().clone();
    assert!(warmth.complete, "{warmth:?}");
    let stats = warm.cache_stats().operators;
    assert_eq!(
        (stats.pinned, stats.pinned_bytes),
        (warmth.masks, warmth.bytes)
    );
    assert_eq!(
        (stats.misses, stats.entries),
        (0, 0),
        "nothing computed on demand yet"
    );

    let cold = engine(0, OUTLINE);
    assert_eq!(cold.cache_stats().operators.pinned, 0);
    let (warm_steps, cold_steps) = (walk(&warm), walk(&cold));
    let fixed = warm_steps.iter().filter(|s| s.2).count();
    assert!(fixed > 20, "{fixed} steps in titles and summaries");
    for (i, (w, c)) in warm_steps.iter().zip(&cold_steps).enumerate() {
        assert_eq!(
            w.0, c.0,
            "step {i}: a pinned mask differs from the one computed on demand"
        );
        if w.2 {
            assert_eq!(w.1, 0, "step {i}: an argument-free state missed the cache");
        }
    }
    // Without warming, the same steps walk the trie: what the warm-up saved.
    let cold_misses: u64 = cold_steps.iter().filter(|s| s.2).map(|s| s.1).sum();
    assert!(cold_misses >= 4, "{cold_misses}");
    // The argument's own states (the ids) are still computed on demand, and only those.
    let warm_misses: u64 = warm_steps.iter().map(|s| s.1).sum();
    assert!(warm_misses > 0);
    assert!(warm.cache_stats().operators.pinned_hits >= fixed as u64);
}

#[test]
fn warming_stays_within_its_budget_and_a_registration_replaces_it() {
    let full = engine(formwork::engine::DEFAULT_TEMPLATE_MASK_BYTES, ALL);
    let need = full.template_warmth().bytes;
    assert!(full.template_warmth().complete && full.template_warmth().programs > 3);

    let budget = need / 3;
    let mut small = engine(budget, ALL);
    let warmth = small.template_warmth().clone();
    assert!(
        !warmth.complete && warmth.bytes <= budget && warmth.masks > 0,
        "{warmth:?}"
    );
    assert_eq!(small.cache_stats().operators.pinned_bytes, warmth.bytes);
    // Masks past the budget are computed on demand, and equal.
    let (a, b) = (walk(&full), walk(&small));
    assert!(a.iter().zip(&b).all(|(x, y)| x.0 == y.0));

    // A registration warms the whole new factory in place of the old pins.
    small
        .register_template_source("extra.fw", r#"note(id: str) ::= "- " id "\n" [a-z ]*"#)
        .unwrap();
    let again = small.template_warmth();
    assert!(again.programs > warmth.programs, "{again:?}");
    assert!(small.cache_stats().operators.pinned_bytes <= budget);
}

/// Per step of `text` under `request`: the bytes consumed before it and the operator-cache
/// misses its mask caused.
fn misses(engine: &Engine, request: &str, text: &str) -> Vec<(usize, u64)> {
    let steps = steps(engine, request, text);
    steps.into_iter().map(|(_, n, at)| (at, n)).collect()
}

#[test]
fn what_follows_a_special_token_in_a_literal_does_not_key_its_masks() {
    // After `<|vision_end|>` the literal is "\n<|vision_start|>" and the next record's id:
    // no token reaches past the special token, so every record shares those two masks.
    let warm = engine(formwork::engine::DEFAULT_TEMPLATE_MASK_BYTES, OUTLINE);
    let ids = ["1", "2.4", "31"];
    let sections: Vec<String> = ids.iter().map(|i| format!("section(id: {i:?})")).collect();
    let request = format!("outline(sections: [{}])", sections.join(", "));
    let text: String = ids
        .iter()
        .map(|i| format!("<|vision_start|>{i} T<|vision_pad|>S.<|vision_end|>\n"))
        .collect();
    let steps = misses(&warm, &request, &text);
    let ends: Vec<usize> = text
        .match_indices("<|vision_end|>")
        .map(|(at, m)| at + m.len())
        .collect();
    // The states before "\n" and before `<|vision_start|>`, of the second and third record.
    for &end in &ends[1..ids.len() - 1] {
        for at in [end, end + 1] {
            let (_, n) = steps.iter().find(|s| s.0 == at).unwrap();
            assert_eq!(*n, 0, "the state {at} bytes in missed the cache");
        }
    }
}

#[test]
fn a_separator_before_an_argument_is_keyed_by_what_its_tokens_reach() {
    // The continuation of `", "` before a topic: tokens of a space and anything but a digit
    // die at the topic, so its key is the topic's leaf, not the whole request (a signature
    // walk through the `(", " ...)*` loops under a run of spaces gave up and keyed it by the
    // thread). A request with other ids finds it computed.
    let warm = engine(formwork::engine::DEFAULT_TEMPLATE_MASK_BYTES, ALL);
    let text = "[{\"topic\": [1, 2], \"reference\": [\"IDS\"]}]";
    let request = |ids: &str| format!("reference_lookup(topics: 1..5, ids: {{\"{ids}\"}})");
    misses(&warm, &request("1"), &text.replace("IDS", "1"));
    let steps = misses(&warm, &request("3.1"), &text.replace("IDS", "3.1"));
    let at = text.find("1,").unwrap() + 2;
    let (_, n) = steps.iter().find(|s| s.0 == at).unwrap();
    assert_eq!(*n, 0, "the separator's mask missed the cache");
}

#[test]
fn an_ids_closing_quote_is_keyed_by_what_its_tokens_reach() {
    // After an id that may end, the closing quote's tokens that live on (`",`, `", "`,
    // `"]}`, ...) end inside the `", "` or `"]}` that follows: none reaches the next id, so
    // the continuation's key does not take in the request's ids (keyed by each group's
    // longest run, it reached into the next id's leaf). A request with other ids finds it
    // computed: the id's own states miss, the quote's does not.
    let warm = engine(formwork::engine::DEFAULT_TEMPLATE_MASK_BYTES, ALL);
    // Two ids each: a lone id would be fused with the quotes into one literal.
    let text = "[{\"topic\": [1], \"reference\": [\"IDS\"]}]";
    let request = |ids: [&str; 2]| {
        format!(
            "reference_lookup(topics: 1..5, ids: {{\"{}\", \"{}\"}})",
            ids[0], ids[1]
        )
    };
    misses(&warm, &request(["1", "2"]), &text.replace("IDS", "1"));
    let steps = misses(&warm, &request(["3.1", "4"]), &text.replace("IDS", "3.1"));
    let at = text.find("IDS").unwrap() + "3.1".len();
    let (_, n) = steps.iter().find(|s| s.0 == at).unwrap();
    assert_eq!(*n, 0, "the closing quote's mask missed the cache");
}
