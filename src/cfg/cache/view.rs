//! What the mask cache reads of a compiled grammar ([`GrammarView`]).

use std::sync::{Arc, Mutex};

use super::{CacheEntry, SharedWalks, VocabIndex};
use crate::cfg::program::Program;
use crate::mask::MaskCache;
use crate::vocab::Vocab;

/// A compiled grammar as the mask cache reads it: its program (with the cache keys), the vocabulary,
/// the context options, and the cache state every grammar of one compiler shares. Borrowed
/// from the `CfgGrammar` for one fill: the grammar owns the cache's state, so the cache
/// naming the grammar's own type would make the two modules import each other.
pub(crate) struct GrammarView<'g> {
    pub prog: &'g Program,
    pub vocab: &'g Vocab,
    /// `CfgConfig::context_depth`.
    pub context_depth: usize,
    /// `CfgConfig::mask_cache`.
    pub mask_cache: bool,
    pub cache: &'g Arc<MaskCache<u128, CacheEntry>>,
    pub index: &'g Arc<VocabIndex>,
    pub walks: &'g Mutex<Option<SharedWalks>>,
}
