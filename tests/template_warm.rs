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

/// Steps through `TEXT` on `engine`: per step, the mask, the operator-cache misses its fill
/// caused and whether the state is one the templates fix — after a record's id (the `Write`
/// has only " " left), in its title or its summary, up to its `<|vision_end|>`.
fn walk(engine: &Engine) -> Vec<(Vec<u32>, u64, bool)> {
    let vocab = tokenizers::qwen3();
    let request = "outline(sections: [section(id: \"7.3\"), section(id: \"12\")])";
    let mut m = engine.compile(request).unwrap().matcher();
    let mut fixed_spans = Vec::new();
    let mut at = 0;
    for id in IDS {
        let start = TEXT[at..].find("<|vision_start|>").unwrap() + at;
        let end = TEXT[start..].find("<|vision_end|>").unwrap() + start;
        fixed_spans.push(start + "<|vision_start|>".len() + id.len()..=end);
        at = end;
    }
    let mut consumed = 0;
    let mut steps = Vec::new();
    for t in vocab.encode(TEXT).unwrap() {
        let mut mask = vec![0u32; vocab.mask_words()];
        let before = engine.cache_stats().operators.misses;
        m.fill_mask(&mut mask).unwrap();
        let misses = engine.cache_stats().operators.misses - before;
        let fixed = fixed_spans.iter().any(|s| s.contains(&consumed));
        steps.push((mask, misses, fixed));
        m.consume(t).unwrap();
        // A special token's bytes are its content, as in `TEXT`.
        consumed += vocab.token_bytes(t).len();
    }
    assert!(m.is_accepting());
    steps
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
