//! Token masks for the Earley engine: the adaptive token-mask cache (XGrammar §3, XGrammar 2's
//! Earley-based cache) and the trie walks that fill it.
//!
//! Every token's first byte is read by some item of the last row that has byte transitions
//! of its own (a *scannable* item; the others only predict or complete, and what they produce
//! is in the row too). So the mask is the union over scannable items of the tokens each can
//! start, classified in two cached levels:
//!
//! 1. **Item level** (keyed by the state's structural hash and what may follow its unit in
//!    this grammar): walk the whole token trie with a chart holding only the item, its unit
//!    entered from an unknown context. A token is *accepted* if the item's own derivations
//!    take all its bytes, *uncertain* if the unit completes inside the token and the byte after
//!    is one that may follow the unit in some caller (XGrammar's context expansion, as a
//!    one-byte follow set: `Program::follow`), *rejected* otherwise. Without the follow set,
//!    a string's content unit left every token with a newline or a tab after some text to the
//!    context level: a JME key-trie step sent it 2,529 tokens (it accepted 159), now 871.
//!    The body of a counted loop is classified together with its loop, whose counter is
//!    relaxed (XGrammar 2's repetition compression, done exactly): near the bound, the
//!    accepted tokens that start too many iterations are dropped, by a table of the
//!    iterations each token starts that one walk per loop body fills ([`iteration_starts`]).
//!    The walk memoizes Earley rows as a lazily built DFA, so dense regions (inside strings)
//!    cost a table lookup per trie node, and takes whole token slices (`vocab/slice.rs`) when
//!    the item survives every string of one: inside a JSON string only ~5k of Qwen3's 151k
//!    tokens are walked.
//! 2. **Context level** (keyed by the item-level key and the item's callers in the chart, up to
//!    `context_depth` levels, as a canonical description): re-walk only the uncertain tokens
//!    with those callers present (context expansion with the real parents instead of a static
//!    follow set). What they accept is added; what completes past the outermost caller stays
//!    uncertain and is checked against the full chart at run time (each such walk remembered
//!    by the matcher for as long as the rows under its last row stay).
//!
//! Both levels hold exact facts (accepted tokens really are allowed, rejected ones never are),
//! so a cache hit for a structurally equal item of another grammar is as good as a local one.
//! Special tokens and EOS are decided directly from the last row.
//!
//! Token lists (uncertain tokens, a context's accepted ones, the run-time checks) are kept as
//! sorted trie *positions* ([`TokenTrie::token_at`]): the trie keeps its tokens' bytes in that
//! order, so re-walking a list reads them in order and steps each token from the prefix it
//! shares with the previous one.

mod context_level;
mod entry;
mod fill;
mod index;
mod item_level;
mod starts;
mod view;

pub(crate) use context_level::SharedWalks;
pub(crate) use entry::CacheEntry;
pub(crate) use fill::{fill, Scratch};
pub(crate) use index::VocabIndex;
pub(crate) use view::GrammarView;
