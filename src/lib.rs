//! formwork: structured decoding for LLM inference.
//!
//! At each decoding step an inference engine asks which tokens may come next so the output
//! keeps a required structure; formwork answers with a token bitmask (u32 words, the layout
//! vLLM, SGLang and xgrammar use).
//!
//! Start with [`Engine`]: register domain templates ([`template`]) at start-up, then compile each
//! request ([`request`]) into a [`Constraint`] and step one [`Matcher`] per sequence.

#![warn(missing_docs)]

pub mod cfg;
pub mod engine;
pub mod error;
pub mod front;
pub mod gpu;
pub mod ir;
pub mod limits;
pub mod mask;
pub mod maskbench;
pub mod matcher;
pub mod ops;
pub mod request;
pub mod template;
pub mod vocab;

pub use engine::{
    BackendChoice, BackendKind, Constraint, ConstraintMatcher, Engine, EngineCacheStats,
    EngineConfig,
};
pub use error::{CompileError, CompileErrorKind, Location};
pub use front::json_schema::{JsonSchemaOptions, PropertyOrder, Whitespace};
pub use front::tags::{Piece, Tag, TagBody, TagDispatch, Tool, ToolFormat};
pub use limits::{LimitExceeded, LimitKind, Limits};
pub use matcher::{MatchError, MatchErrorKind, Matcher};
pub use vocab::{TokenId, Vocab, VocabConfig, VocabError, VocabErrorKind};
