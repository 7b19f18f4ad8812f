//! Templates: domain structures written once, compiled at start-up into a
//! [`StructureFactory`] that requests only bind arguments to (WGrammar's collaborative parsing).
//!
//! A template file (`templates/*.fw`, syntax in `templates/README.md`) holds EBNF rules with
//! parameters:
//!
//! ```text
//! outline(sections: list<section>) ::= sections
//! section(id: str, children: list<section> = []) ::=
//!     <|vision_start|> id " " [^\n]* <|vision_pad|> /(?s:.)*/ <|vision_end|> "\n" children
//! ```
//!
//! The files are parsed with an Earley parser (`earlgrey`), checked (names, kinds, unused or
//! unbound parameters, rule recursion), and every parameter-free stretch of every rule is
//! lowered to an operator program once, with DFA fusion. Template text is bounded by the
//! builder's [`Limits`](crate::Limits): each file's size (`input_bytes`), how deeply groups, repetitions and,
//! once inlined, rules nest (`nesting`), the size of the recipes (`grammar_size`, which also
//! caps a rule at 1,024 tokens) and the build time (`compile_time`). What remains per structure is a
//! *recipe*: those prebuilt fragments and literals around holes for the parameters. A request
//! (see [`crate::request`]) fills the holes; nothing is parsed or lowered again.
//!
//! # Example
//!
//! ```
//! use formwork::template::StructureFactory;
//! use formwork::vocab::Vocab;
//!
//! let vocab = Vocab::from_token_bytes(
//!     vec![b"a".to_vec(), b"<|end|>".to_vec(), b"</s>".to_vec()], &[1, 2], &[2],
//! ).unwrap();
//! let factory = StructureFactory::builder(&vocab)
//!     .source("greeting.fw", r#"greeting(name: str) ::= "Hello, " name "!" <|end|>"#)
//!     .build()
//!     .unwrap();
//! assert_eq!(factory.signature("greeting").unwrap(), "greeting(name: str)");
//! assert_eq!(factory.special_tokens().get("<|end|>"), Some(&1));
//! ```

mod build;
mod builder;
mod check;
mod factory;
mod lexer;
mod recipe;
mod structure;
mod syntax;
mod tables;
mod warm;

pub(crate) use builder::read_templates;
pub use builder::{FactoryBuilder, DEFAULT_LITERAL_TABLE_BYTES};
pub use factory::StructureFactory;
pub(crate) use recipe::{Fragment, Piece};
pub use structure::{Param, ParamDefault, ParamKind, StructId, Structure};
pub(crate) use warm::fixed_stretches;
