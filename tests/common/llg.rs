//! Differential driving against llguidance 1.9 on Qwen3: masks compared at every step.
//!
//! Masks must be equal except where a documented semantic choice differs (DESIGN.md,
//! Semantics), and each difference is checked to be one of them:
//!
//! - **added tokens**: llguidance treats every added token written `<...>` as a special
//!   symbol; formwork treats only `special: true` tokens so, and a non-special added token
//!   (Qwen3's `<think>`, `<tool_call>`, ...) is its text. Differences there: formwork allows
//!   the token, llguidance does not.
//! - **forced stretches**: where the constraint forces the next bytes, llguidance allows only
//!   the canonical tokenization of them; formwork allows every token consistent with the bytes
//!   and offers the canonical ones through `forced_tokens()`. Differences there: formwork
//!   allows a token whose bytes agree with the forced bytes, llguidance does not.
//! - **EOS**: compared as "EOS allowed" (llguidance has one EOS id, formwork the vocabulary's
//!   EOS set).

use formwork::vocab::{TokenId, TokenKind};
use formwork::Matcher;
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::TokEnv;
use llguidance::ParserFactory;

use crate::common;

#[path = "llg_env.rs"]
mod llg_env;

fn llg_env() -> TokEnv {
    llg_env::tok_env(
        &common::tokenizer_path("qwen3"),
        common::qwen3().mask_width(),
    )
}

/// Walks each text through a fresh formwork matcher and a fresh llguidance matcher of the same
/// language; every mask difference must be a documented one.
pub fn differential(
    theirs: impl Fn() -> TopLevelGrammar,
    ours: impl Fn() -> Box<dyn Matcher>,
    texts: &[&str],
) {
    let vocab = common::qwen3();
    let env = llg_env();
    let factory = ParserFactory::new_simple(&env).unwrap();
    let llg_eos = env.tok_trie().eos_token();
    let (mut added, mut narrowed) = (0, 0);
    for text in texts {
        let tokens = vocab.encode(text).unwrap();
        let mut llg_matcher = llguidance::Matcher::new(factory.create_parser(theirs()));
        let mut m = ours();
        for step in 0..=tokens.len() {
            let mut words = vec![0u32; vocab.mask_words()];
            m.fill_mask(&mut words).unwrap();
            let mask = formwork::mask::TokenMask::from_words(words, vocab.mask_width());
            let llg = llg_matcher.compute_mask_or_eos().unwrap();
            let forced = m.forced_bytes();
            let ours_eos = vocab.eos_tokens().iter().any(|&t| mask.contains(t));
            assert_eq!(
                ours_eos,
                llg.is_allowed(llg_eos),
                "{text:?} step {step}: EOS"
            );
            for t in 0..vocab.len() as TokenId {
                if vocab.is_eos(t) || t == llg_eos {
                    continue;
                }
                let (a, b) = (mask.contains(t), llg.is_allowed(t));
                if a == b {
                    continue;
                }
                let bytes = vocab.token_bytes(t);
                // Qwen3's added tokens are ids 151643.. (shared/data README).
                let non_special_added = vocab.kind(t) == Some(TokenKind::Text)
                    && t as usize >= 151_643
                    && bytes.starts_with(b"<")
                    && bytes.ends_with(b">");
                let n = bytes.len().min(forced.len());
                let in_forced_stretch = !forced.is_empty() && bytes[..n] == forced[..n];
                assert!(
                    a && !b && (non_special_added || in_forced_stretch),
                    "{text:?} step {step}: token {} is {} by formwork and {} by llguidance",
                    vocab.display_token(t),
                    if a { "allowed" } else { "rejected" },
                    if b { "allowed" } else { "rejected" },
                );
                if non_special_added {
                    added += 1;
                } else {
                    narrowed += 1;
                }
            }
            let Some(&t) = tokens.get(step) else { break };
            m.consume(t).unwrap();
            if llg_matcher.compute_mask_or_eos().unwrap().is_allowed(t) {
                llg_matcher.consume_token(t).unwrap();
            } else {
                // A token llguidance takes for a symbol: give it the same bytes one at a time.
                for &b in vocab.token_bytes(t) {
                    llg_matcher
                        .consume_token(vocab.encode_greedy(&[b]).unwrap()[0])
                        .unwrap();
                }
            }
        }
    }
    eprintln!("differences: {added} on non-special added tokens, {narrowed} in forced stretches");
}
