//! Where in a JSON document the matcher keeps state (arrays of distinct strings, strings whose
//! length it counts): a deterministic automaton over the steps of a JSON path (a property
//! name, an array item), built by the JSON Schema front end from the schema's shapes.

use std::collections::HashMap;
use std::sync::Arc;

use crate::front::chars::CharDfa;

use super::keys::KeyGroup;
use super::lengths::LengthBound;
use super::listed::ListedStrings;

/// A state of [`TrackedPaths`]: the schemas a value at some path may be held to, reduced to
/// what the tracker needs.
pub(crate) type PathState = u32;

/// The state of paths below which nothing is tracked.
pub(crate) const UNTRACKED: PathState = 0;

/// The automaton's start: the document's root value.
pub(crate) const ROOT: PathState = 1;

/// One state's steps.
#[derive(Debug, Default)]
pub(crate) struct PathNode {
    /// A property's value, by the property's (decoded) name.
    pub named: HashMap<Box<[u8]>, PathState>,
    /// A property of any other name (matching none of `classes`' patterns).
    pub other: PathState,
    /// Other names by the patterns they match.
    pub classes: Option<Arc<NameClasses>>,
    /// An array's item.
    pub item: PathState,
    /// An array here must have pairwise distinct items, which are strings.
    pub distinct: bool,
    /// Those strings are values of this list (free strings if none).
    pub listed: Option<Arc<ListedStrings>>,
    /// A string here is held to this bound of [`TrackedPaths::bound`].
    pub string: Option<u32>,
    /// An object here may have its properties in any order, its names held to this group of
    /// [`TrackedPaths::key_group`].
    pub keys: Option<u32>,
}

/// Undeclared names told apart by the `patternProperties` they match.
#[derive(Debug)]
pub(crate) struct NameClasses {
    patterns: Vec<CharDfa>,
    /// By the set of patterns a name matches (bit `i`: pattern `i`).
    states: HashMap<u64, PathState>,
}

impl NameClasses {
    pub fn new(patterns: Vec<CharDfa>, states: HashMap<u64, PathState>) -> NameClasses {
        NameClasses { patterns, states }
    }

    /// The state of a property named `name` (decoded), if its class has one.
    fn state(&self, name: &[u8]) -> Option<PathState> {
        let name = std::str::from_utf8(name).ok()?;
        let bits = self
            .patterns
            .iter()
            .enumerate()
            .filter(|(_, p)| p.matches(name))
            .fold(0u64, |acc, (i, _)| acc | 1 << i);
        self.states.get(&bits).copied()
    }
}

/// The automaton: every state's steps, [`UNTRACKED`] and [`ROOT`] first.
#[derive(Debug)]
pub(crate) struct TrackedPaths {
    nodes: Vec<PathNode>,
    bounds: Vec<LengthBound>,
    key_groups: Vec<KeyGroup>,
    /// Some node's arrays must have distinct items.
    distinct: bool,
}

impl TrackedPaths {
    /// From the nodes of every state but [`UNTRACKED`], the root's first: their steps name
    /// states counted from 1 (state 0 is [`UNTRACKED`]); their strings' bounds and their
    /// objects' key groups by number.
    pub fn new(
        tracked: Vec<PathNode>,
        bounds: Vec<LengthBound>,
        key_groups: Vec<KeyGroup>,
    ) -> TrackedPaths {
        let mut nodes = vec![PathNode::default()];
        nodes.extend(tracked);
        TrackedPaths {
            distinct: nodes.iter().any(|n| n.distinct),
            nodes,
            bounds,
            key_groups,
        }
    }

    /// The state of a property's value named `name` (decoded) in an object at `at`.
    pub fn property(&self, at: PathState, name: &[u8]) -> PathState {
        let node = &self.nodes[at as usize];
        let classified = || node.classes.as_ref()?.state(name);
        node.named
            .get(name)
            .copied()
            .or_else(classified)
            .unwrap_or(node.other)
    }

    /// The state of an item of an array at `at`.
    pub fn item(&self, at: PathState) -> PathState {
        self.nodes[at as usize].item
    }

    /// Must an array at `at` have distinct items?
    pub fn distinct(&self, at: PathState) -> bool {
        self.nodes[at as usize].distinct
    }

    /// The values of the items of a distinct array at `at`, if they are listed.
    pub fn listed(&self, at: PathState) -> Option<&ListedStrings> {
        self.nodes[at as usize].listed.as_deref()
    }

    /// The bound of a string at `at`, by number.
    pub fn string(&self, at: PathState) -> Option<u32> {
        self.nodes[at as usize].string
    }

    /// The key group of an object at `at`, by number.
    pub fn keys(&self, at: PathState) -> Option<u32> {
        self.nodes[at as usize].keys
    }

    /// Key group number `g`.
    pub fn key_group(&self, g: u32) -> &KeyGroup {
        &self.key_groups[g as usize]
    }

    /// Must some arrays have distinct items?
    pub fn has_distinct(&self) -> bool {
        self.distinct
    }

    /// Are some objects' names kept?
    pub fn has_key_groups(&self) -> bool {
        !self.key_groups.is_empty()
    }

    /// Bound number `b`.
    pub fn bound(&self, b: u32) -> &LengthBound {
        &self.bounds[b as usize]
    }

    /// Bytes a token holding `"` may have without opening a bounded string and leaving its
    /// bounds within itself (`usize::MAX` without bounds).
    pub fn safe_token_len(&self) -> usize {
        self.bounds
            .iter()
            .map(LengthBound::safe_token_len)
            .min()
            .unwrap_or(usize::MAX)
    }
}
