//! The structure factory: every structure of the registered templates, compiled for one
//! vocabulary, with the tables requests are bound against.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::recipe::Fragment;
use super::structure::{ParamDefault, ParamKind, StructId, Structure};
use super::tables::{NameMap, WriteTable};
use crate::base::token::TokenId;
use crate::ir::Grammar;
use crate::ops::{LeafOp, RegexCompiler, Unit};
use crate::vocab::Vocab;

/// Every structure of the registered templates, compiled for one vocabulary.
///
/// Built once at start-up by [`FactoryBuilder`](super::FactoryBuilder); requests are bound against it with
/// [`Request::instantiate`](crate::request::Request::instantiate) (operator program, the fast
/// path) or [`Request::instantiate_ir`](crate::request::Request::instantiate_ir) (grammar IR,
/// for the reference recognizer and the CFG backend).
pub struct StructureFactory {
    pub(super) structures: Vec<Structure>,
    pub(super) by_name: NameMap<StructId>,
    pub(super) specials: BTreeMap<String, TokenId>,
    /// The IR of every literal and fragment of every recipe.
    pub(crate) grammar: Grammar,
    /// Prebuilt operator fragments (index = `Piece::Frag`).
    pub(crate) fragments: Vec<Fragment>,
    /// `Write` leaves of request literals, interned.
    pub(super) writes: WriteTable,
    pub(crate) regex: Arc<RegexCompiler>,
    pub(super) vocab: Vocab,
}

impl std::fmt::Debug for StructureFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.structures.iter().map(|s| s.name()).collect();
        f.debug_struct("StructureFactory")
            .field("structures", &names)
            .field("specials", &self.specials)
            .field("fragments", &self.fragments.len())
            .field("interned_writes", &self.writes.len())
            .field("interned_write_bytes", &self.writes.bytes())
            .finish()
    }
}

impl StructureFactory {
    /// The structure called `name`.
    pub fn find(&self, name: &str) -> Option<StructId> {
        self.by_name.get(name).copied()
    }

    /// A structure.
    pub fn structure(&self, id: StructId) -> &Structure {
        &self.structures[id.index()]
    }

    /// Every structure, in definition order.
    pub fn structures(&self) -> &[Structure] {
        &self.structures
    }

    /// The special tokens the templates name, with their ids in the vocabulary.
    pub fn special_tokens(&self) -> &BTreeMap<String, TokenId> {
        &self.specials
    }

    /// The vocabulary the factory was compiled for.
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// The regex compiler (and its cache) request arguments go through.
    pub fn regex_compiler(&self) -> &Arc<RegexCompiler> {
        &self.regex
    }

    /// `name(param: kind, ...)` as a template would declare it.
    pub fn signature(&self, name: &str) -> Option<String> {
        let s = self.structure(self.find(name)?);
        if s.params.is_empty() {
            return Some(s.name.clone());
        }
        let params: Vec<String> = s
            .params
            .iter()
            .map(|p| {
                let mut out = format!("{}: {}", p.name, self.describe_kind(&p.kind));
                match &p.default {
                    Some(ParamDefault::EmptyList) => out.push_str(" = []"),
                    Some(ParamDefault::Str(d)) => out.push_str(&format!(" = {d:?}")),
                    None => {}
                }
                out
            })
            .collect();
        Some(format!("{}({})", s.name, params.join(", ")))
    }

    /// A parameter kind as a template writes it.
    pub fn describe_kind(&self, kind: &ParamKind) -> String {
        kind.describe(&|s| self.structure(s).name.clone())
    }

    /// The shared `Write` leaf of `units` (see `tables::WriteTable`).
    pub(crate) fn write_leaf(&self, units: &[Unit]) -> LeafOp {
        self.writes.get(units)
    }

    /// Bytes the table of request literals holds now (at most the budget given to
    /// [`FactoryBuilder::literal_table_bytes`](super::FactoryBuilder::literal_table_bytes)).
    pub fn literal_table_bytes(&self) -> usize {
        self.writes.bytes()
    }

    /// Number of prebuilt operator fragments.
    pub fn num_fragments(&self) -> usize {
        self.fragments.len()
    }
}
