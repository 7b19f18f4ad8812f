//! formwork: structured decoding for LLM inference.
//!
//! At each decoding step an inference engine asks which tokens may come next so the output
//! keeps a required structure; formwork answers with a token bitmask (u32 words, the layout
//! vLLM, SGLang and xgrammar use: bit `t % 32` of word `t / 32` set means token `t` is allowed).
//! Masks are exact: a token is allowed iff the output so far followed by its bytes can still be
//! completed to a string of the constraint's language, whatever tokenization the model picks.
//!
//! # Key types
//!
//! - [`Vocab`]: the exact bytes of every token of a tokenizer, its special tokens and EOS
//!   (`Vocab::from_file` for a Hugging Face `tokenizer.json`, `Vocab::embedded_qwen3`).
//! - [`Engine`] with its [`EngineConfig`]: one per vocabulary, shared by every request. It holds
//!   the global mask cache, the registered templates and the router that picks a backend.
//! - [`Constraint`]: a compiled request, JSON Schema ([`JsonSchemaOptions`]), regex, GBNF
//!   grammar, tool-call format ([`TagDispatch`], [`Tool`]) or IR grammar ([`ir::Grammar`]).
//!   Immutable and shareable; [`BackendKind`] says which backend runs it.
//! - [`Matcher`] (implemented by [`ConstraintMatcher`]): the state of one sequence:
//!   `fill_mask`, `consume`, `rollback`, `forced_tokens` (jump-forward), `is_accepting`.
//! - [`CompileError`] / [`MatchError`]: typed errors that say where and what.
//! - [`Limits`]: what one untrusted input may cost.
//! - [`gpu`]: filling a batch of masks on worker threads during the forward pass
//!   ([`gpu::BatchFiller`]) and applying them to logits ([`gpu::apply_bitmask`], and a CUDA
//!   kernel with feature `cuda`).
//!
//! # Usage pattern
//!
//! ```text
//! start-up     Vocab ──► Engine::new / with_config ──► register_templates (optional)
//! per request  Engine::compile(_json_schema | _regex | _gbnf | _tags | _grammar) ──► Constraint
//! per sequence Constraint::matcher ──► Matcher
//! per step     fill_mask ──► (apply to the logits, sample) ──► consume
//!              forced_tokens ──► consume_all   (jump forward: no model call)
//! ```
//!
//! A request naming a registered template structure (`templates/*.fw`, [`template`]) is
//! instantiated from it in microseconds ([`request`] is the request language). The built-ins
//! `json_schema(schema: "...")`, `gbnf(grammar: "...")` and `regex(pattern: /.../)` go to
//! their front ends. Every grammar then goes through one router ([`Engine::route`]): regular
//! grammars of moderate size are lowered to the operator backend, recursive or large ones run
//! on the Earley backend. Both give the same masks.
//!
//! # Example: a template, a built-in and a recursive grammar
//!
//! ```
//! use formwork::Engine;
//! use formwork::vocab::Vocab;
//! use formwork::Matcher;
//!
//! let tokens = ["[", "1", ".", "2", "]", "</s>"];
//! let vocab = Vocab::from_token_bytes(
//!     tokens.iter().map(|t| t.as_bytes().to_vec()).collect(), &[5], &[5],
//! ).unwrap();
//! let mut engine = Engine::new(vocab);
//! engine
//!     .register_template_source("ids.fw", r#"pick(ids: choice) ::= "[" ids "]""#)
//!     .unwrap();
//! let constraint = engine.compile(r#"pick(ids: {"1.2", "2"})"#).unwrap();
//! let mut m = constraint.matcher();
//! let mut mask = vec![0u32; 1];
//! m.fill_mask(&mut mask).unwrap();
//! assert_eq!(mask[0], 0b000001); // "["
//! m.consume(0).unwrap();
//! m.fill_mask(&mut mask).unwrap();
//! assert_eq!(mask[0], 0b001010); // "1" or "2"
//! m.consume_all(&[1, 2, 3, 4, 5]).unwrap(); // 1.2] EOS
//! assert!(m.is_terminated());
//! // No template and no built-in of that name:
//! let err = engine.compile("outline(sections: [])").unwrap_err();
//! assert_eq!(err.kind(), formwork::CompileErrorKind::Unsupported);
//! // Built-ins need no template; a recursive grammar runs on Earley.
//! let nested = engine.compile(r#"gbnf(grammar: "root ::= \"[\" root? \"]\"")"#).unwrap();
//! assert_eq!(nested.backend(), formwork::BackendKind::Earley);
//! let mut m = nested.matcher();
//! m.consume_all(&[0, 0, 4, 4, 5]).unwrap(); // [[]] EOS
//! assert!(m.is_terminated());
//! ```
//!
//! # Errors
//!
//! Bad input of any kind (template, request, schema, grammar, regex, tool list) is a
//! [`CompileError`]: a [`CompileErrorKind`] and a [`Location`] (`file:line:col` or a JSON
//! pointer) before the message; never a panic, never a silently looser mask. A token a matcher
//! cannot take is a [`MatchError`] and leaves its state unchanged. Tokenizer files give a
//! [`VocabError`]. Causes are chained through [`std::error::Error::source`]: an error reported
//! at the place a piece is written (a regex inside a template) has the piece's own error as
//! source, a `Limit` error its [`LimitExceeded`], a vocabulary error the I/O, gzip, JSON or
//! `tokenizers` error behind it, a batch fill the failing matcher's error.
//!
//! # Caching
//!
//! Masks are computed once and looked up after that. Each backend keeps a global cache keyed
//! by structural hashes of the grammar pieces and their states, so equal pieces share masks
//! across positions, requests and grammars; it is bounded in bytes
//! ([`EngineConfig::cache_bytes`]) and [`Engine::cache_stats`] reports it. Constraints are
//! cheap to keep and to share; matchers are cheap to create.
//!
//! # Threads
//!
//! [`Engine`] and [`Constraint`] are `Send + Sync`: a server shares one engine behind an `Arc`
//! and compiles from any thread. Matchers are `Send`, one per sequence; they share the
//! engine's caches through sharded locks. [`gpu::BatchFiller`] fills a batch of matchers'
//! masks on its worker threads while the caller's thread runs the forward pass. Compiles and
//! masks hold on a 256 KiB worker stack: recursion over nested input is bounded by the limits
//! and runs on stack segments it grows.
//!
//! # Limits
//!
//! [`Limits`] (in [`EngineConfig::limits`]) bounds nesting, input size, grammar size,
//! automaton states, alternatives, compile time, the work of one mask, matcher history and
//! simultaneous readings; each has a documented default. An input past one is a
//! [`CompileErrorKind::Limit`] error (or a [`MatchErrorKind::Limit`] while matching) naming
//! the limit ([`LimitKind`]), the value reached and the place. One deadline spans a whole
//! `Engine::compile_*` call.
//!
//! # Modules
//!
//! | module | what it holds |
//! | --- | --- |
//! | root | the types above |
//! | [`vocab`] | vocabularies: loading, specials, EOS, the token trie |
//! | [`bitmask`] | reading and writing mask rows ([`bitmask::get_bit`], [`bitmask::iter_ones`], ...) |
//! | [`json_schema`] | JSON Schema options, and the schema's grammar (`compile_schema`) |
//! | [`tags`] | tool-call formats and tag dispatch (free text around typed calls) |
//! | [`template`] | the template language and the structure factory |
//! | [`request`] | the request language |
//! | [`ir`] | the grammar IR every front end produces, and a plain recognizer of its languages |
//! | [`gpu`] | batch filling and applying masks to logits |
//!
//! The backends, the front ends' internals and the mask cache are private; the README's
//! architecture section maps the source tree.

#![warn(missing_docs)]

mod automata;
mod base;
pub mod gpu;
pub mod ir;
pub mod request;
pub mod template;
pub mod vocab;

#[cfg(feature = "mimalloc")]
pub mod allocator;

/// Declares each module public with the `internals` feature, crate-private without it.
macro_rules! internal_modules {
    ($($name:ident),* $(,)?) => {
        $(
            #[cfg(feature = "internals")]
            pub mod $name;
            #[cfg(not(feature = "internals"))]
            pub(crate) mod $name;
        )*
    };
}
// The backends, the front ends' internals, the mask cache and the engine's parts: public only
// with the `internals` feature, for formwork's own tests, benches and fuzz targets
// (`formwork-testkit` turns it on), with no stability promise. Users reach what they need
// through the re-exports below.
internal_modules!(cfg, engine, error, front, limits, mask, matcher, ops);

pub use base::bitmask;
pub use base::byteset::ByteSet;
pub use base::token::TokenId;
pub use cfg::CfgConfig;
pub use engine::{
    BackendChoice, BackendKind, Constraint, ConstraintMatcher, Engine, EngineCacheStats,
    EngineConfig,
};
pub use error::{CompileError, CompileErrorKind, Location};
pub use front::json_schema::{self, JsonSchemaOptions, PropertyOrder, Whitespace};
pub use front::tags::{self, Piece, Tag, TagBody, TagDispatch, ToolFormat};
pub use front::tool::Tool;
pub use limits::{LimitExceeded, LimitKind, Limits};
pub use mask::{CacheStats, TokenMask};
pub use matcher::{MatchError, MatchErrorKind, Matcher};
pub use ops::{LowerConfig, Warmth};
pub use vocab::{TokenKind, Vocab, VocabConfig, VocabError, VocabErrorKind};

#[cfg(test)]
mod tests {
    /// What the crate docs promise a server about threads.
    #[test]
    fn engines_and_constraints_are_shared_matchers_are_sent() {
        fn shared<T: Send + Sync>() {}
        fn sent<T: Send>() {}
        shared::<crate::Engine>();
        shared::<crate::Constraint>();
        sent::<crate::ConstraintMatcher>();
    }
}
