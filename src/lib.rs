//! formwork: structured decoding for LLM inference.
//!
//! At each decoding step an inference engine asks which tokens may come next so the output
//! keeps a required structure; formwork answers with a token bitmask (u32 words, the layout
//! vLLM, SGLang and xgrammar use).
//!
//! Start with [`Engine`]: register domain templates ([`template`]) at start-up, then compile each
//! request ([`request`]) into a [`Constraint`] and step one [`Matcher`] per sequence.

#![warn(missing_docs)]

mod base;
pub mod gpu;
pub mod ir;
pub mod request;
pub mod template;
pub mod vocab;

// The backends, the front ends' internals, the mask cache and the engine's parts: public only
// with the `internals` feature, for formwork's own tests, benches and fuzz targets
// (`formwork-testkit` turns it on), with no stability promise. Users reach what they need
// through the re-exports below.
#[cfg(feature = "internals")]
pub mod cfg;
#[cfg(not(feature = "internals"))]
pub(crate) mod cfg;
#[cfg(feature = "internals")]
pub mod engine;
#[cfg(not(feature = "internals"))]
pub(crate) mod engine;
#[cfg(feature = "internals")]
pub mod error;
#[cfg(not(feature = "internals"))]
pub(crate) mod error;
#[cfg(feature = "internals")]
pub mod front;
#[cfg(not(feature = "internals"))]
pub(crate) mod front;
#[cfg(feature = "internals")]
pub mod limits;
#[cfg(not(feature = "internals"))]
pub(crate) mod limits;
#[cfg(feature = "internals")]
pub mod mask;
#[cfg(not(feature = "internals"))]
pub(crate) mod mask;
#[cfg(feature = "internals")]
pub mod matcher;
#[cfg(not(feature = "internals"))]
pub(crate) mod matcher;
#[cfg(feature = "internals")]
pub mod ops;
#[cfg(not(feature = "internals"))]
pub(crate) mod ops;

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
pub use front::tags::{self, TagDispatch, ToolFormat};
pub use front::tool::Tool;
pub use limits::{LimitExceeded, LimitKind, Limits};
pub use mask::{CacheStats, TokenMask};
pub use matcher::{MatchError, MatchErrorKind, Matcher};
pub use ops::LowerConfig;
pub use vocab::{TokenKind, Vocab, VocabConfig, VocabError, VocabErrorKind};
