//! Objects whose properties may come in any order, kept by the matcher: the grammar of such an
//! object is any run of its members (a declared name may come again), and the matcher keeps,
//! per open object, the declared names written and how many members, refusing a name written
//! twice, a name that leaves no room for the required ones under `maxProperties`, a `,` no
//! member can follow, and a `}` before every required name (or `minProperties`).
//!
//! A name is read byte by byte against the declared names (sorted, as the grammar spells
//! them): a prefix is refused as soon as it can only become a name the object may no longer
//! take. Undeclared names, where admitted, are any others, so a prefix can always become one
//! of them unless `maxProperties` only leaves room for required names; or, beside
//! `additionalProperties: false`, those matching its `patternProperties` ([`Others::Matching`]):
//! an automaton over the name's characters, read as they are decoded, says whether the prefix
//! can still become one, and whether the name closing is one.
//!
//! Where several objects may be at one place (branches of a union), each is a variant of the
//! place's [`KeyGroup`], and an open object is any variant whose rules every name written so
//! far kept: a byte is refused when no variant is left. That is exact when the variants agree
//! on the value of every name two of them admit (the front end checks it): the grammar then
//! holds values alike whatever the variant, and which variants remain depends on names only.
//! A name whose values differ may still tell variants apart if the matcher can test each
//! variant's values there (a discriminator): scalars from a list (`"type": "circle"`,
//! `"version": 3`), every value (an open object's undeclared name), values of a small
//! automaton (`"argument": {"maxLength": 0}` beside `{"minLength": 1}`, arrays of other
//! lengths), strings whose characters are counted (`{"maxLength": 512}` beside any string,
//! an automaton of 512 times a JSON character's states), or objects of key sets of their
//! own, told apart by their own group: the inner group's variants are those the outer
//! variants left bring ([`KeyGroup::brought`]; any value there brings the variant "every
//! object", [`KeySet::every_object`]), and the inner object's close keeps the outer variants
//! that bring what it closed as. The value written, once whole, keeps the variants whose test
//! it passes, so which variants remain is which the grammar still holds: each variant is its
//! own run of members in the grammar, and the names and values written are all that tells
//! the runs apart. While a value is written the grammar's mask is then exact, the union of
//! the values of the variants left. An inner object's close is the exception: the required
//! names that decide it are the matcher's alone, so the grammar still holds the runs it
//! drops, and the front end holds such a group beside another discriminator only where what
//! is left admits every value the dropped run did.
//!
//! A name the group declares is refused twice in every variant (the `2^n` grammar refuses
//! declared names only, and an object any value may be none; a JSON object's names should be
//! unique).

use std::collections::HashMap;
use std::sync::Arc;

use super::chars::{CharTable, Decoded, Spelling};
use super::lengths::{Count, LengthBound, Read};
use crate::base::bitmask::clear_bit;
use crate::base::token::TokenId;
use crate::front::chars::CharDfa;
use crate::ops::leaf::DEAD;
use crate::ops::Leaf;
use crate::vocab::{Subtree, TrieStep, TrieVisitor};

/// The names of one object in any order and their rules, as the front end describes them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct KeySet {
    /// The declared names, as the grammar writes them between the quotes, sorted.
    names: Vec<(Box<[u8]>, Declared)>,
    min: u64,
    max: Option<u64>,
    /// Which names other than the declared ones are admitted.
    others: Others,
    /// It stands for every object: any value at a place, brought by a variant of the
    /// enclosing object whose value there is any (see [`KeyGroup::brought`]).
    every_object: bool,
}

/// The names an object admits besides its declared ones.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Others {
    None,
    Every,
    /// The names (decoded) this automaton accepts, none of them declared by the object, nor
    /// by any object of its group (the front end checks it): each prefix it can still take
    /// can then become a name not written yet.
    Matching(Arc<CharDfa>),
}

/// What a declared name is to its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Declared {
    Optional,
    Required,
    /// Declared `false`: never written, not even as an undeclared name.
    Absent,
}

impl KeySet {
    /// From the declared names, the bounds on how many members the object has, and which
    /// undeclared names are admitted.
    pub fn new(
        declared: impl IntoIterator<Item = (String, Declared)>,
        min: u64,
        max: Option<u64>,
        others: Others,
    ) -> KeySet {
        let mut names: Vec<(Box<[u8]>, Declared)> = declared
            .into_iter()
            .map(|(name, d)| (spelled(&name), d))
            .collect();
        names.sort_unstable();
        names.dedup_by(|a, b| a.0 == b.0);
        KeySet {
            names,
            min,
            max,
            others,
            every_object: false,
        }
    }

    /// The key set of every object: no name declared, any other admitted, any count.
    pub fn every_object() -> KeySet {
        KeySet {
            every_object: true,
            ..KeySet::new([], 0, None, Others::Every)
        }
    }

    /// Does `maxProperties` bound it?
    pub fn is_bounded(&self) -> bool {
        self.max.is_some()
    }

    /// Is some object held to it? Its required names within `maxProperties`, `minProperties`
    /// within both, and enough names for `minProperties`.
    pub fn admits_some_object(&self) -> bool {
        let count = |d: Declared| self.names.iter().filter(|(_, x)| *x == d).count() as u64;
        let required = count(Declared::Required);
        self.max.is_none_or(|m| required <= m && self.min <= m)
            && (self.others != Others::None || required + count(Declared::Optional) >= self.min)
    }

    /// Does it admit the name spelled `name` (`None`: some name it does not declare)?
    pub fn admits(&self, name: Option<&[u8]>) -> bool {
        match name.and_then(|n| self.names.iter().find(|(x, _)| **x == *n)) {
            Some((_, d)) => *d != Declared::Absent,
            None => match (&self.others, name) {
                (Others::None, _) => false,
                (Others::Every, _) | (Others::Matching(_), None) => true,
                (Others::Matching(dfa), Some(n)) => unspelled(n).is_some_and(|n| dfa.matches(&n)),
            },
        }
    }

    /// The automaton of the undeclared names it admits, where only some are.
    pub fn others_matching(&self) -> Option<&Arc<CharDfa>> {
        match &self.others {
            Others::Matching(dfa) => Some(dfa),
            _ => None,
        }
    }

    /// How many names it declares.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// The declared names, as spelled.
    pub fn names(&self) -> impl Iterator<Item = &[u8]> {
        self.names.iter().map(|(n, _)| &**n)
    }
}

/// The key sets of the objects one place may hold, each a variant, over the names any of
/// them declares, and the discriminators that tell them apart.
#[derive(Clone, Debug)]
pub(crate) struct KeyGroup {
    /// Every variant's declared names, sorted.
    names: Box<[Box<[u8]>]>,
    variants: Box<[Variant]>,
    /// The discriminators, by the number of their name.
    discriminators: Box<[(u32, Tests)]>,
    /// The front end's number of each variant's key set, ascending (see [`Self::numbered`]).
    ids: Box<[u32]>,
    /// The automaton of the undeclared names of the variants admitting only some
    /// ([`Others::Matching`]: one for them all, the front end checks it).
    matching: Option<CharTable>,
    /// The variant standing for every object ([`KeySet::every_object`]), if one does.
    every_object: Variants,
}

/// The tests of a discriminator's values: a value keeps the variants it passes one of.
#[derive(Clone, Debug, Default)]
struct Tests {
    /// Per value listed, as the grammar writes it, the variants that list it.
    listing: HashMap<Box<[u8]>, Variants>,
    /// The variants that admit every value.
    every: Variants,
    /// Per variant, automata of values as written.
    automata: Vec<(u32, Arc<Leaf>)>,
    /// Per variant, the bound of the strings of any characters it admits.
    lengths: Vec<(u32, Arc<LengthBound>)>,
    /// Per variant whose value there is an object of its own key sets, those key sets (by
    /// the front end's numbers): which the object written is, its own group tells.
    nested: Vec<(u32, Box<[u32]>)>,
    /// Bytes of the longest value listed: a longer value is listed by none.
    longest_listed: usize,
}

/// A variant's test of a discriminator's value, as the front end gives it.
pub(crate) enum VariantTest<'a> {
    /// These scalars (see [`Tests::listing`]).
    Listed(&'a [Box<[u8]>]),
    /// Every value.
    Every,
    /// The strings and scalars this automaton accepts, read as written.
    Automaton(Arc<Leaf>),
    /// The strings of any characters within this bound (its pattern takes every character).
    Lengths(Arc<LengthBound>),
    /// Objects of these key sets (the front end's numbers), held by the group of the place
    /// the value is at.
    Nested(&'a [u32]),
}

/// A discriminator as the front end gives it: its name (as spelled) and, per variant
/// admitting it (by number), its tests (one passed is enough: a variant is every object of
/// its key set).
pub(crate) type Lists<'a> = (&'a [u8], Vec<(usize, VariantTest<'a>)>);

/// One key set over its group's names (bit `i`: `names[i]`).
#[derive(Clone, Debug)]
struct Variant {
    /// Declared with a value.
    declared: Box<[u64]>,
    required: Box<[u64]>,
    /// Declared `false`.
    absent: Box<[u64]>,
    min: u64,
    max: Option<u64>,
    others: OthersKind,
}

/// Which undeclared names a variant admits: [`Others`] without its automaton, which is the
/// group's ([`KeyGroup::matching`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OthersKind {
    None,
    Every,
    Matching,
}

/// Most variants of a group (the bits of [`Variants`]).
pub(crate) const MAX_VARIANTS: usize = 64;

/// Most names of a group: each open object keeps a bit per name, and each step's snapshot
/// copies the bits of every object open (16 words each at most).
pub(crate) const MAX_GROUP_NAMES: usize = 1024;

/// Most declared names a name being written may still become for a mask to read the tokens
/// the grammar allows there one by one (they are about these names' prefixes; past it, see
/// [`KeyGroup::reads_many_names`]).
const MAX_NAMES_READ_WHOLE: u32 = 64;

/// The variants an open object may still be, bit `v` for variant `v`.
pub(crate) type Variants = u64;

/// The declared names a name being written may still become: those of `lo..hi`, which all
/// start with its `len` bytes read so far; and where its group admits undeclared names by an
/// automaton, that automaton's state (`DEAD` once no such name is left) and the character
/// being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NameCursor {
    lo: u32,
    hi: u32,
    len: u32,
    matching: u32,
    spelling: Spelling,
}

/// What one open object has written: the names of its group (bits), how many members, and
/// the variants it may still be.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Written<'w> {
    pub names: &'w [u64],
    pub count: u64,
    pub variants: Variants,
}

impl KeyGroup {
    /// The group of `sets` (at most [`MAX_VARIANTS`]), told apart by `discriminators`.
    pub fn new(sets: &[&KeySet], discriminators: Vec<Lists>) -> KeyGroup {
        debug_assert!(!sets.is_empty() && sets.len() <= MAX_VARIANTS);
        let mut names: Vec<Box<[u8]>> = sets
            .iter()
            .flat_map(|s| s.names.iter().map(|(n, _)| n.clone()))
            .collect();
        names.sort_unstable();
        names.dedup();
        let words = names.len().div_ceil(64);
        let variants = sets
            .iter()
            .map(|s| {
                let mut bits = [vec![0u64; words], vec![0u64; words], vec![0u64; words]];
                for (n, d) in &s.names {
                    let i = names.binary_search(n).expect("a name of the group") as u32;
                    match d {
                        Declared::Optional => put(&mut bits[0], i),
                        Declared::Required => {
                            put(&mut bits[0], i);
                            put(&mut bits[1], i);
                        }
                        Declared::Absent => put(&mut bits[2], i),
                    }
                }
                let [declared, required, absent] = bits.map(Box::from);
                Variant {
                    declared,
                    required,
                    absent,
                    min: s.min,
                    max: s.max,
                    others: match s.others {
                        Others::None => OthersKind::None,
                        Others::Every => OthersKind::Every,
                        Others::Matching(_) => OthersKind::Matching,
                    },
                }
            })
            .collect();
        let mut matching = sets.iter().filter_map(|s| s.others_matching());
        let first = matching.next();
        debug_assert!(
            matching.all(|m| Some(m) == first),
            "one automaton per group"
        );
        let discriminators = discriminators
            .into_iter()
            .map(|(name, lists)| {
                let i = names
                    .binary_search_by(|n| (**n).cmp(name))
                    .expect("a name of the group");
                let mut tests = Tests::default();
                for (variant, test) in lists {
                    match test {
                        VariantTest::Listed(strings) => {
                            for s in strings {
                                tests.longest_listed = tests.longest_listed.max(s.len());
                                *tests.listing.entry(s.clone()).or_default() |= 1 << variant;
                            }
                        }
                        VariantTest::Every => tests.every |= 1 << variant,
                        VariantTest::Automaton(leaf) => tests.automata.push((variant as u32, leaf)),
                        VariantTest::Lengths(bound) => {
                            tests.lengths.push((variant as u32, bound));
                        }
                        VariantTest::Nested(sets) => {
                            tests.nested.push((variant as u32, sets.into()));
                        }
                    }
                }
                (i as u32, tests)
            })
            .collect();
        let every_object = sets
            .iter()
            .position(|s| s.every_object)
            .map_or(0, |v| 1 << v);
        KeyGroup {
            names: names.into(),
            variants,
            discriminators,
            ids: Box::default(),
            matching: first.map(|dfa| dfa.table()),
            every_object,
        }
    }

    /// The group, its variants' key sets numbered `ids` by the front end (ascending, one per
    /// variant): nested discriminators name them.
    pub fn numbered(mut self, ids: &[u32]) -> KeyGroup {
        debug_assert_eq!(ids.len(), self.variants.len());
        self.ids = ids.into();
        self
    }

    /// The discriminator of declared name `name`, by number.
    pub fn discriminator(&self, name: u32) -> Option<u32> {
        self.discriminators
            .iter()
            .position(|(n, _)| *n == name)
            .map(|d| d as u32)
    }

    /// Where discriminator `d`'s automata start reading a value: their states, pushed on
    /// `states` (none if it has none).
    pub fn start_value(&self, d: u32, states: &mut Vec<u32>) {
        let tests = &self.discriminators[d as usize].1;
        states.extend(tests.automata.iter().map(|(_, leaf)| leaf.start()));
    }

    /// Steps discriminator `d`'s automata over byte `b` of a value (as written).
    pub fn step_value(&self, d: u32, states: &mut [u32], b: u8) {
        let tests = &self.discriminators[d as usize].1;
        for (state, (_, leaf)) in states.iter_mut().zip(&tests.automata) {
            if *state != DEAD {
                *state = leaf.step(*state, u32::from(b));
            }
        }
    }

    /// Where discriminator `d`'s counts start reading a value whose first byte is `b`: one per
    /// bound, pushed on `counts`, refused at once unless `b` opens a string.
    pub fn start_lengths(&self, d: u32, b: u8, counts: &mut Vec<(Count, Read)>) {
        let tests = &self.discriminators[d as usize].1;
        let read = match b {
            b'"' => Read::Open,
            _ => Read::Refused,
        };
        counts.extend((0..tests.lengths.len() as u32).map(|i| (Count::new(i), read)));
    }

    /// Steps discriminator `d`'s counts over byte `b` of a string's content or its closing
    /// quote.
    pub fn step_lengths(&self, d: u32, counts: &mut [(Count, Read)], b: u8) {
        let tests = &self.discriminators[d as usize].1;
        for ((count, read), (_, bound)) in counts.iter_mut().zip(&tests.lengths) {
            if *read == Read::Open {
                *read = count.read(b, bound);
            }
        }
    }

    /// Could a scalar or string of `len` bytes be one of discriminator `d`'s listed values
    /// (zero may be written `-0`, a byte longer)?
    pub fn may_be_listed(&self, d: u32, len: usize) -> bool {
        len <= self.discriminators[d as usize].1.longest_listed + 1
    }

    /// The variants of `variants` whose tests for discriminator `d` a whole scalar or string
    /// passes: `listed` is how lists hold it (`None`: too long for any, see
    /// [`Self::may_be_listed`]), `states` where the automata are after reading it, `counts`
    /// what the counts read (a string closed within its bound: [`Read::Closed`]).
    pub fn discriminate(
        &self,
        d: u32,
        listed: Option<&[u8]>,
        states: &[u32],
        counts: &[(Count, Read)],
        variants: Variants,
    ) -> Variants {
        let tests = &self.discriminators[d as usize].1;
        let read = accepting(&tests.automata, states);
        let listing = listed.and_then(|l| tests.listing.get(l)).copied();
        let counted = tests
            .lengths
            .iter()
            .zip(counts)
            .filter(|(_, (_, read))| *read == Read::Closed)
            .fold(0, |acc, ((v, _), _)| acc | 1 << v);
        (listing.unwrap_or(0) | tests.every | read | counted) & variants
    }

    /// The variants of `variants` that admit an object (`object`) or an array opening as
    /// discriminator `d`'s value: every value, objects of their own key sets, or values
    /// whose automata have not refused its first byte (their `states`, see
    /// [`Self::start_value`]).
    pub fn discriminate_container(
        &self,
        d: u32,
        object: bool,
        states: &[u32],
        variants: Variants,
    ) -> Variants {
        let tests = &self.discriminators[d as usize].1;
        let nested = match object {
            true => tests.nested.iter().fold(0, |acc, (v, _)| acc | 1 << v),
            false => 0,
        };
        let reading = automata_where(&tests.automata, states, |_, _| true);
        (tests.every | nested | reading) & variants
    }

    /// Are some of discriminator `d`'s values objects of their own key sets?
    pub fn has_nested(&self, d: u32) -> bool {
        !self.discriminators[d as usize].1.nested.is_empty()
    }

    /// The variants of `inner`, the group of an object written as discriminator `d`'s value,
    /// that the variants `outer` of this group bring: their key sets, and every object
    /// where one of them admits every value.
    pub fn brought(&self, d: u32, outer: Variants, inner: &KeyGroup) -> Variants {
        let tests = &self.discriminators[d as usize].1;
        let every = match tests.every & outer {
            0 => 0,
            _ => inner.every_object,
        };
        tests
            .nested
            .iter()
            .filter(|(v, _)| outer >> v & 1 == 1)
            .flat_map(|(_, sets)| sets.iter())
            .filter_map(|set| inner.ids.binary_search(set).ok())
            .fold(every, |acc, i| acc | 1 << i)
    }

    /// The variants of `outer` left once an object or array written as discriminator `d`'s
    /// value closes: those admitting every value, those whose automata accept it (`states`,
    /// if they read it), and, for an object of group `inner` closing as one of its variants
    /// `closed`, those bringing one of these.
    pub fn close_container(
        &self,
        d: u32,
        outer: Variants,
        states: Option<&[u32]>,
        closed: Option<(&KeyGroup, Variants)>,
    ) -> Variants {
        let tests = &self.discriminators[d as usize].1;
        let accepted = states.map_or(0, |states| accepting(&tests.automata, states));
        let lifted = closed.map_or(0, |(inner, closed)| {
            let closed_sets = |sets: &[u32]| {
                sets.iter().any(|set| {
                    inner
                        .ids
                        .binary_search(set)
                        .is_ok_and(|i| closed >> i & 1 == 1)
                })
            };
            tests
                .nested
                .iter()
                .filter(|(_, sets)| closed_sets(sets))
                .fold(0, |acc, (v, _)| acc | 1 << v)
        });
        (tests.every | accepted | lifted) & outer
    }

    /// Words of the set of names written in one open object.
    pub fn words(&self) -> usize {
        self.names.len().div_ceil(64)
    }

    /// Every variant, for an object just opened.
    pub fn all(&self) -> Variants {
        match self.variants.len() {
            MAX_VARIANTS => !0,
            n => (1 << n) - 1,
        }
    }

    /// Before a name's first byte.
    pub fn cursor(&self) -> NameCursor {
        NameCursor {
            lo: 0,
            hi: self.names.len() as u32,
            len: 0,
            matching: if self.matching.is_some() { 0 } else { DEAD },
            spelling: Spelling::Whole,
        }
    }

    /// The cursor after content byte `b` of a name (its spelling, escapes as written).
    pub fn read(&self, c: NameCursor, b: u8) -> NameCursor {
        let at = c.len as usize;
        let range = &self.names[c.lo as usize..c.hi as usize];
        let below = |n: &[u8], or_equal: bool| match n.get(at) {
            None => true,
            Some(&x) => x < b || (or_equal && x == b),
        };
        let (mut matching, mut spelling) = (c.matching, c.spelling);
        if let Some(table) = self.matching.as_ref().filter(|_| matching != DEAD) {
            match spelling.read(b) {
                Decoded::Char(ch) => matching = table.step(matching, ch),
                Decoded::Partial => {}
                Decoded::Invalid => matching = DEAD,
            }
        }
        NameCursor {
            lo: c.lo + range.partition_point(|n| below(n, false)) as u32,
            hi: c.lo + range.partition_point(|n| below(n, true)) as u32,
            len: c.len + 1,
            matching,
            spelling,
        }
    }

    /// Can a name read as far as `c` still become one some variant takes?
    pub fn viable(&self, c: NameCursor, w: Written) -> bool {
        let matching = self.matching_viable(c);
        self.alive(w).any(|v| {
            let only_required = v.tight(w);
            let takes = match only_required {
                true => &v.required,
                false => &v.declared,
            };
            (v.takes_others(matching) && !only_required) || any_in(c.lo..c.hi, takes, w.names)
        })
    }

    /// Can a name read as far as `c` still become one of [`Self::matching`]'s? Every state of
    /// the automaton reaches acceptance, so only a character split so far may not.
    fn matching_viable(&self, c: NameCursor) -> bool {
        let Some(table) = self.matching.as_ref().filter(|_| c.matching != DEAD) else {
            return false;
        };
        match c.spelling.candidates(true) {
            None => true,
            Some((ranges, len)) => table.any_through(c.matching, &ranges[..len], |_| true),
        }
    }

    /// Is a name read as far as `c`, then closed, one of [`Self::matching`]'s?
    fn matching_closes(&self, c: NameCursor) -> bool {
        self.matching.as_ref().is_some_and(|table| {
            c.matching != DEAD && c.spelling == Spelling::Whole && table.accepts(c.matching)
        })
    }

    /// Is the rest of a name read as far as `c` the grammar's alone, up to its closing quote?
    /// So once no declared name goes on from it and no variant admitting undeclared ones is
    /// down to its required names: a variant then takes the prefix iff it admits undeclared
    /// names and, by an automaton, that automaton can still take it, which the grammar's
    /// runs of the variants left say exactly too.
    fn settled(&self, c: NameCursor, w: Written) -> bool {
        c.lo == c.hi
            && self
                .alive(w)
                .all(|v| v.others == OthersKind::None || !v.tight(w))
    }

    /// May the grammar allow many tokens inside a name read as far as `c`, so that reading
    /// their shared prefixes once ([`NameWalk`]) costs less than reading each whole? So where
    /// a variant left admits undeclared names (a pattern's: a third of Qwen3's tokens for
    /// `^.+$`; any: nearly all of them), even one down to its required names, which the
    /// grammar does not count; or more than [`MAX_NAMES_READ_WHOLE`] declared ones.
    pub fn reads_many_names(&self, c: NameCursor, w: Written) -> bool {
        c.hi - c.lo > MAX_NAMES_READ_WHOLE || self.alive(w).any(|v| v.others != OthersKind::None)
    }

    /// Does some variant admit every name (undeclared ones, with room for them), so that only
    /// a name's closing quote may be refused?
    pub fn admits_any_name(&self, w: Written) -> bool {
        self.alive(w)
            .any(|v| v.others == OthersKind::Every && !v.tight(w))
    }

    /// A name read as far as `c` closes: the declared name it is (if one) and the variants
    /// that take it, or refused (none does, or a name written twice).
    pub fn close(&self, c: NameCursor, w: Written) -> Option<(Option<u32>, Variants)> {
        let whole =
            (c.lo < c.hi && self.names[c.lo as usize].len() == c.len as usize).then_some(c.lo);
        if whole.is_some_and(|i| has(w.names, i)) {
            return None;
        }
        let matching = self.matching_closes(c);
        let takes = |v: &Variant| {
            let only_required = v.tight(w);
            match whole {
                Some(i) if has(&v.declared, i) => !only_required || has(&v.required, i),
                Some(i) if has(&v.absent, i) => false,
                _ => v.takes_others(matching) && !only_required,
            }
        };
        let variants = self.keep(w.variants, takes);
        (variants != 0).then_some((whole, variants))
    }

    /// The variants another member may follow in (after a `,`): none refuses the `,`.
    pub fn add(&self, w: Written) -> Variants {
        self.keep(w.variants, |v| {
            v.max.is_none_or(|m| w.count < m)
                && (v.others != OthersKind::None
                    || v.declared
                        .iter()
                        .zip(w.names)
                        .any(|(d, written)| d & !written != 0))
        })
    }

    /// The variants a `}` may close the object as (none: refused).
    pub fn closable(&self, w: Written) -> Variants {
        self.keep(w.variants, |v| v.missing(w.names) == 0 && w.count >= v.min)
    }

    fn alive<'a>(&'a self, w: Written<'a>) -> impl Iterator<Item = &'a Variant> + 'a {
        self.variants
            .iter()
            .enumerate()
            .filter(move |(i, _)| w.variants >> i & 1 == 1)
            .map(|(_, v)| v)
    }

    fn keep(&self, variants: Variants, keep: impl Fn(&Variant) -> bool) -> Variants {
        self.variants
            .iter()
            .enumerate()
            .filter(|&(i, v)| variants >> i & 1 == 1 && keep(v))
            .fold(0, |acc, (i, _)| acc | 1 << i)
    }
}

/// The trie walk clearing the tokens that, inside a name of an object of `group` (written
/// `written`), write a prefix no variant may take, before any closing quote: the tokens that
/// hold one are read whole. A subtree is left once the name is settled (see
/// [`KeyGroup::settled`]).
pub(crate) struct NameWalk<'a> {
    pub group: &'a KeyGroup,
    pub written: Written<'a>,
    pub out: &'a mut [u32],
}

impl TrieVisitor for NameWalk<'_> {
    /// The name read so far, and whether its last byte began an escape.
    type State = (NameCursor, bool);

    fn step(
        &mut self,
        &(cursor, escaped): &(NameCursor, bool),
        byte: u8,
        _: usize,
        subtree: Subtree,
    ) -> TrieStep<(NameCursor, bool)> {
        if byte == b'"' && !escaped {
            return TrieStep::Skip;
        }
        let next = self.group.read(cursor, byte);
        if !self.group.viable(next, self.written) {
            for &t in subtree.tokens() {
                clear_bit(self.out, t);
            }
            return TrieStep::Skip;
        }
        match self.group.settled(next, self.written) {
            true => TrieStep::Skip,
            false => TrieStep::Enter((next, !escaped && byte == b'\\')),
        }
    }

    fn tokens(&mut self, _: &(NameCursor, bool), _: &[TokenId]) {}
}

impl Variant {
    /// Does it take an undeclared name, given whether the group's automaton
    /// ([`KeyGroup::matching`]) takes it?
    fn takes_others(&self, matching: bool) -> bool {
        match self.others {
            OthersKind::None => false,
            OthersKind::Every => true,
            OthersKind::Matching => matching,
        }
    }

    /// Does `maxProperties` leave room only for the required names not yet written?
    fn tight(&self, w: Written) -> bool {
        self.max
            .is_some_and(|m| w.count + self.missing(w.names) >= m)
    }

    fn missing(&self, written: &[u64]) -> u64 {
        self.required
            .iter()
            .zip(written)
            .map(|(r, w)| u64::from((r & !w).count_ones()))
            .sum()
    }
}

/// The variants whose automata, at `states` after reading a whole value, accept it.
fn accepting(automata: &[(u32, Arc<Leaf>)], states: &[u32]) -> Variants {
    automata_where(automata, states, |leaf, state| leaf.exit(state).is_some())
}

/// The variants whose automata are alive at `states` and there pass `test`.
fn automata_where(
    automata: &[(u32, Arc<Leaf>)],
    states: &[u32],
    test: impl Fn(&Leaf, u32) -> bool,
) -> Variants {
    automata
        .iter()
        .zip(states)
        .filter(|&((_, leaf), &state)| state != DEAD && test(leaf, state))
        .fold(0, |acc, ((v, _), _)| acc | 1 << v)
}

/// Is some bit of `range` on in `on` and off in `off`? A word at a time: the range of a name's
/// first byte is every name of the group.
fn any_in(range: std::ops::Range<u32>, on: &[u64], off: &[u64]) -> bool {
    if range.is_empty() {
        return false;
    }
    let (first, last) = (range.start as usize / 64, (range.end as usize - 1) / 64);
    (first..=last).any(|w| {
        let mut bits = on[w] & !off[w];
        if w == first {
            bits &= !0u64 << (range.start % 64);
        }
        if w == last {
            bits &= !0u64 >> (63 - (range.end - 1) % 64);
        }
        bits != 0
    })
}

/// Is bit `i` of `words` on?
fn has(words: &[u64], i: u32) -> bool {
    words[i as usize / 64] >> (i % 64) & 1 == 1
}

/// Turns bit `i` of `words` on.
pub(crate) fn put(words: &mut [u64], i: u32) {
    words[i as usize / 64] |= 1 << (i % 64);
}

/// A name as the grammar writes it between the quotes (JSON's escapes).
pub(crate) fn spelled(name: &str) -> Box<[u8]> {
    let quoted = serde_json::Value::from(name).to_string().into_bytes();
    quoted[1..quoted.len() - 1].into()
}

/// The name `spelled` writes (`None`: no JSON string's content).
pub(crate) fn unspelled(spelled: &[u8]) -> Option<String> {
    serde_json::from_slice(&[b"\"".as_slice(), spelled, b"\""].concat()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[(&str, bool)], min: u64, max: Option<u64>, others: bool) -> KeySet {
        let declared = |r: bool| match r {
            true => Declared::Required,
            false => Declared::Optional,
        };
        let others = match others {
            true => Others::Every,
            false => Others::None,
        };
        KeySet::new(
            names.iter().map(|&(n, r)| (n.to_string(), declared(r))),
            min,
            max,
            others,
        )
    }

    /// The automaton of these names.
    fn names(strings: &[&str]) -> Arc<CharDfa> {
        let deadline = crate::limits::Deadline::never();
        let budget = crate::front::chars::Budget {
            max_states: 64,
            deadline: &deadline,
        };
        Arc::new(CharDfa::strings(strings, &budget).unwrap())
    }

    fn cursor(k: &KeyGroup, text: &str) -> NameCursor {
        text.bytes().fold(k.cursor(), |c, b| k.read(c, b))
    }

    fn written(names: &[u64], count: u64, variants: Variants) -> Written<'_> {
        Written {
            names,
            count,
            variants,
        }
    }

    #[test]
    fn a_prefix_lives_while_an_unwritten_name_starts_with_it() {
        let k = KeyGroup::new(
            &[&set(
                &[("a", false), ("ab", false), ("b", true)],
                0,
                None,
                false,
            )],
            vec![],
        );
        let mut names = vec![0u64];
        let a = cursor(&k, "a");
        assert_eq!(k.close(a, written(&names, 0, 1)), Some((Some(0), 1)));
        put(&mut names, 0);
        let w = written(&names, 1, 1);
        assert!(k.close(a, w).is_none());
        assert!(k.viable(a, w), "\"ab\" is still free");
        assert!(k.viable(cursor(&k, "ab"), w));
        assert!(!k.viable(cursor(&k, "c"), w));
        assert!(k.closable(w) == 0, "\"b\" is required");
        assert_eq!(k.add(w), 1);
    }

    #[test]
    fn ranges_are_read_a_word_at_a_time() {
        let on = [u64::MAX, 1, 1 << 63];
        let off = [0, 0, 0];
        assert!(any_in(0..1, &on, &off));
        assert!(any_in(64..65, &on, &off));
        assert!(!any_in(65..128, &on, &off));
        assert!(any_in(65..192, &on, &off));
        assert!(!any_in(65..191, &on, &off));
        assert!(!any_in(5..5, &on, &off));
        assert!(!any_in(0..64, &on, &[u64::MAX, 0, 0]));
    }

    #[test]
    fn max_properties_leaves_room_only_for_required_names() {
        let k = KeyGroup::new(
            &[&set(&[("a", false), ("b", true)], 0, Some(1), true)],
            vec![],
        );
        let w = written(&[0], 0, 1);
        assert!(!k.viable(cursor(&k, "a"), w));
        assert!(!k.viable(cursor(&k, "x"), w));
        assert!(k.viable(cursor(&k, "b"), w));
        assert!(k.close(cursor(&k, "zz"), w).is_none());
        let unbounded = KeyGroup::new(&[&set(&[("a", false), ("b", true)], 0, None, true)], vec![]);
        assert_eq!(unbounded.close(cursor(&k, "zz"), w), Some((None, 1)));
    }

    #[test]
    fn names_are_read_as_spelled() {
        let k = KeyGroup::new(
            &[&set(&[("q\"t", false), ("é\n", false)], 0, None, false)],
            vec![],
        );
        let w = written(&[0], 0, 1);
        assert_eq!(k.close(cursor(&k, "q\\\"t"), w), Some((Some(0), 1)));
        assert_eq!(k.close(cursor(&k, "é\\n"), w), Some((Some(1), 1)));
        assert!(k.close(cursor(&k, "\\u00e9\\n"), w).is_none());
    }

    /// A name both variants admit with other values: the first's values an automaton reads
    /// (here `1` or `12`), the second's every value.
    #[test]
    fn a_value_keeps_the_variants_whose_tests_it_passes() {
        let first = set(&[("a", false), ("b", true)], 0, None, false);
        let second = set(&[("a", false), ("c", true)], 0, None, false);
        let digits = Arc::new(Leaf::choice([b"1".as_slice(), b"12"]).unwrap());
        let tests = vec![(0, VariantTest::Automaton(digits)), (1, VariantTest::Every)];
        let k = KeyGroup::new(&[&first, &second], vec![(b"a".as_slice(), tests)]);
        let d = k.discriminator(0).expect("`a` is a discriminator");
        let read = |raw: &[u8], variants| {
            let mut states = Vec::new();
            k.start_value(d, &mut states);
            raw.iter().for_each(|&b| k.step_value(d, &mut states, b));
            k.discriminate(d, None, &states, &[], variants)
        };
        assert_eq!(read(b"12", 0b11), 0b11);
        assert_eq!(read(b"1", 0b01), 0b01);
        assert_eq!(read(b"2", 0b11), 0b10, "a value the automaton refuses");
        assert_eq!(read(b"123", 0b11), 0b10, "nor a longer value");
        assert_eq!(read(b"\"1\"", 0b11), 0b10);
        let opened = |b: u8| {
            let mut states = Vec::new();
            k.start_value(d, &mut states);
            k.step_value(d, &mut states, b);
            states
        };
        assert_eq!(k.discriminate_container(d, true, &opened(b'{'), 0b11), 0b10);
        assert_eq!(k.discriminate_container(d, false, &opened(b'['), 0b01), 0);
    }

    /// Strings of one to three characters, counted (an escape and a two-byte character are
    /// one each), beside every value: a string keeps the first variant if it closes within
    /// the bound, and no scalar does.
    #[test]
    fn a_string_keeps_the_variants_whose_counts_it_closes_within() {
        use crate::front::chars::Budget;
        use crate::limits::Deadline;
        let first = set(&[("a", false), ("b", true)], 0, None, false);
        let second = set(&[("a", false), ("c", true)], 0, None, false);
        let budget = Budget {
            max_states: 16,
            deadline: &Deadline::never(),
        };
        let any = CharDfa::length(0, None, &budget).unwrap();
        let bound = Arc::new(any.length_bound(1, 3, &Deadline::never()).unwrap());
        let tests = vec![(0, VariantTest::Lengths(bound)), (1, VariantTest::Every)];
        let k = KeyGroup::new(&[&first, &second], vec![(b"a".as_slice(), tests)]);
        let d = k.discriminator(0).expect("`a` is a discriminator");
        let read = |raw: &[u8]| {
            let mut counts = Vec::new();
            k.start_lengths(d, raw[0], &mut counts);
            raw[1..]
                .iter()
                .for_each(|&b| k.step_lengths(d, &mut counts, b));
            k.discriminate(d, None, &[], &counts, 0b11)
        };
        assert_eq!(read(br#""x""#), 0b11);
        assert_eq!(read(r#""\"éx""#.as_bytes()), 0b11, "three characters");
        assert_eq!(read(br#""""#), 0b10, "below minLength");
        assert_eq!(read(br#""abcd""#), 0b10, "past maxLength");
        assert_eq!(read(br#""\u00e9bcd""#), 0b10, "an escape is one character");
        assert_eq!(read(b"12"), 0b10, "a number is no string");
    }

    /// An array whose automaton reads it whole, beside every value: while it is open the
    /// variant reading it is kept, and once closed only if it accepts it.
    #[test]
    fn an_array_keeps_the_variants_whose_automata_accept_it() {
        let first = set(&[("a", false), ("b", true)], 0, None, false);
        let second = set(&[("a", false), ("c", true)], 0, None, false);
        let one = Arc::new(Leaf::choice([b"[1]".as_slice()]).unwrap());
        let tests = vec![(0, VariantTest::Automaton(one)), (1, VariantTest::Every)];
        let k = KeyGroup::new(&[&first, &second], vec![(b"a".as_slice(), tests)]);
        let d = k.discriminator(0).expect("`a` is a discriminator");
        let read = |raw: &[u8]| {
            let mut states = Vec::new();
            k.start_value(d, &mut states);
            k.step_value(d, &mut states, raw[0]);
            let open = k.discriminate_container(d, false, &states, 0b11);
            raw[1..]
                .iter()
                .for_each(|&b| k.step_value(d, &mut states, b));
            (open, k.close_container(d, open, Some(&states), None))
        };
        assert_eq!(read(b"[1]"), (0b11, 0b11));
        assert_eq!(read(b"[2]"), (0b11, 0b10), "an array the automaton refuses");
        assert_eq!(read(b"[1,1]"), (0b11, 0b10));
        assert_eq!(read(b"{}").0, 0b10, "no object is an array");
    }

    /// `dependencies` make a union of the object without the name and the object that
    /// requires more: a variant each, told apart by the names written.
    #[test]
    fn variants_fall_away_as_names_are_written() {
        let without = KeySet::new(
            [
                ("a".to_string(), Declared::Absent),
                ("b".to_string(), Declared::Optional),
            ],
            0,
            None,
            Others::Every,
        );
        let with = set(&[("a", false), ("b", true)], 0, None, true);
        let k = KeyGroup::new(&[&without, &with], vec![]);
        let mut names = vec![0u64];
        let w = written(&names, 0, k.all());
        assert!(k.closable(w) != 0, "the first variant may be empty");
        let (a, variants) = k.close(cursor(&k, "a"), w).unwrap();
        assert_eq!(variants, 0b10, "only the second declares \"a\"");
        put(&mut names, a.unwrap());
        let w = written(&names, 1, variants);
        assert!(k.closable(w) == 0, "\"b\" is required with \"a\"");
        assert_eq!(k.add(w), 0b10);
    }

    /// Beside `additionalProperties: false`, undeclared names matching a pattern: a prefix
    /// lives while it can become an unwritten declared name or one the automaton takes, read
    /// character by character as decoded, a character split across bytes by what it may
    /// still become (as keys are spelled: `\` opens only a control's, `"`'s or `\`'s escape).
    #[test]
    fn undeclared_names_matching_an_automaton_are_read_as_decoded() {
        let group = |undeclared: &[&str]| {
            let keys = KeySet::new(
                [
                    ("a".to_string(), Declared::Optional),
                    ("x\"".to_string(), Declared::Required),
                ],
                0,
                None,
                Others::Matching(names(undeclared)),
            );
            KeyGroup::new(&[&keys], vec![])
        };
        let k = group(&["xé", "x\n", "zz"]);
        let at = |k: &KeyGroup, text: &[u8]| text.iter().fold(k.cursor(), |c, &b| k.read(c, b));
        let mut names = vec![0u64];
        let w = written(&names, 0, 1);
        assert!(k.viable(at(&k, b"x"), w) && k.viable(at(&k, b"z"), w));
        assert!(!k.viable(at(&k, b"y"), w), "no name starts with y");
        assert_eq!(k.close(at(&k, "xé".as_bytes()), w), Some((None, 1)));
        assert_eq!(k.close(at(&k, b"x\\n"), w), Some((None, 1)));
        assert_eq!(k.close(at(&k, b"x"), w), None, "x is no name");
        assert!(!k.admits_any_name(w));
        let x_quote = k.close(at(&k, b"x\\\""), w).unwrap().0.unwrap();
        put(&mut names, x_quote);
        let w = written(&names, 1, 1);
        assert_eq!(k.close(at(&k, b"x\\\""), w), None, "written twice");
        // `x"` written: `x\` may still become `x\n`, `x` and half a character `xé` only.
        assert!(k.viable(at(&k, b"x\\"), w));
        assert!(k.viable(at(&k, &[b'x', 0xC3]), w));
        assert!(!k.viable(at(&k, &[b'x', 0xC4]), w), "U+0100..U+013F: none");
        // Without `x\n`, `x\` could only become `x"` again: `\u0061` is no key's spelling.
        let k = group(&["xa", "zz"]);
        assert!(k.viable(at(&k, b"x"), w));
        assert!(!k.viable(at(&k, b"x\\"), w));
        let k = group(&["zz"]);
        assert!(
            !k.viable(at(&k, b"x"), w),
            "x\" is written and zz starts otherwise"
        );
    }

    /// A name's rest is the grammar's once no declared name goes on from it, unless a
    /// variant admitting every name is down to its required ones: the grammar's run of that
    /// variant takes any name, the matcher none.
    #[test]
    fn a_name_is_settled_only_where_no_variant_is_down_to_its_required_names() {
        let tight = set(&[("a", false), ("b", true)], 0, Some(1), true);
        let matching = KeySet::new(
            [("a".to_string(), Declared::Optional)],
            0,
            None,
            Others::Matching(names(&["yy"])),
        );
        let k = KeyGroup::new(&[&tight, &matching], vec![]);
        let y = k.read(k.cursor(), b'y');
        assert!(k.viable(y, written(&[0], 0, 0b11)));
        assert!(!k.settled(y, written(&[0], 0, 0b11)), "the first is tight");
        assert!(k.settled(y, written(&[0], 0, 0b10)));
        assert!(!k.settled(k.cursor(), written(&[0], 0, 0b10)), "a may come");
    }
}
