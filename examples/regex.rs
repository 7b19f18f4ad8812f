//! Constrain generation to a regex on the embedded Qwen3 vocabulary: compile, ask for masks,
//! consume tokens, jump forward over forced text.
//!
//! `cargo run --release --example regex`

use formwork::ops::{OpsMatcher, RegexCompiler, Runtime};
use formwork::vocab::Vocab;
use formwork::Matcher;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let vocab = Vocab::embedded_qwen3()?;
    let runtime = Runtime::new(vocab.clone(), 64 << 20);
    let program =
        RegexCompiler::new().compile(r#"\{"version": "\d+(\.\d+)*", "stable": (true|false)\}"#)?;
    println!("operators: {}", program.describe());

    let mut matcher = OpsMatcher::new(runtime.clone(), program);
    let mut mask = vec![0u32; vocab.mask_words()];

    // The opening literal is forced: an engine can append these tokens without a forward pass.
    let forced = matcher.forced_tokens();
    println!(
        "jump forward over {} tokens: {:?}",
        forced.len(),
        String::from_utf8_lossy(&matcher.forced_bytes())
    );
    matcher.consume_all(&forced)?;

    // Pretend the model wrote the rest; check each token against the mask first.
    let output = r#"{"version": "2.14.0", "stable": true}"#;
    let done: usize = forced.iter().map(|&t| vocab.token_bytes(t).len()).sum();
    for token in vocab.encode(&output[done..])? {
        matcher.fill_mask(&mut mask)?;
        let allowed = formwork::bitmask::get_bit(&mask, token);
        let count: u32 = mask.iter().map(|w| w.count_ones()).sum();
        println!(
            "{:>24} allowed={allowed} ({count} tokens allowed)",
            vocab.display_token(token)
        );
        matcher.consume(token)?;
    }
    println!("accepting: {}", matcher.is_accepting());
    println!("cache: {:?}", runtime.cache_stats());
    Ok(())
}
