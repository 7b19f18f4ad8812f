//! The shipped tokenizers (`data/tokenizers/`), each loaded once per process.

use std::path::PathBuf;
use std::sync::OnceLock;

use formwork::vocab::Vocab;

/// Path of a tokenizer shipped under `data/tokenizers/<name>/`.
pub fn tokenizer_path(name: &str) -> PathBuf {
    crate::repo_path("data/tokenizers")
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
