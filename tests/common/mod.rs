//! Shared helpers for the integration tests: the shipped tokenizers, loaded once per process.
#![allow(dead_code)]

pub mod oracle;
pub mod rng;
pub mod stack;
pub mod walk;

use std::path::PathBuf;
use std::sync::OnceLock;

use formwork::engine::Engine;
use formwork::vocab::Vocab;

/// Path of a tokenizer shipped under `data/tokenizers/<name>/`.
pub fn tokenizer_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("data/tokenizers")
        .join(name)
        .join("tokenizer.json.gz")
}

/// The embedded Qwen3 vocabulary.
pub fn qwen3() -> &'static Vocab {
    static V: OnceLock<Vocab> = OnceLock::new();
    V.get_or_init(|| Vocab::embedded_qwen3().expect("embedded Qwen3 tokenizer"))
}

/// The Mistral 7B v0.1 vocabulary (SentencePiece with byte fallback).
pub fn mistral() -> &'static Vocab {
    static V: OnceLock<Vocab> = OnceLock::new();
    V.get_or_init(|| {
        Vocab::from_file(tokenizer_path("mistral-7b-v0.1")).expect("mistral tokenizer")
    })
}

/// An engine on Qwen3 with the shipped templates registered, built once per process.
pub fn template_engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| {
        let mut e = Engine::new(qwen3().clone());
        e.register_templates([concat!(env!("CARGO_MANIFEST_DIR"), "/templates")])
            .expect("the shipped templates compile");
        e
    })
}
