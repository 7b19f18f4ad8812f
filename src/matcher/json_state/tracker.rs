//! The state a context-free grammar cannot hold: for each open array whose items must be
//! distinct, the strings written in it; for a string open at a place whose length the matcher
//! counts, the count; for each open object whose properties may come in any order, the names
//! written in it and how many. The tracker reads the JSON text the matcher consumed (structure
//! only: the grammar already holds it to its schema), follows [`TrackedPaths`] from property
//! names and array items, and tells when a string item would repeat one of its array, a
//! string leave its bounds, or an object take a name, a member or a `}` its key set refuses.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::keys::{put, KeyGroup, NameCursor, NameWalk, Variants, Written};
use super::lengths::{Count, LengthBound, Read};
use super::listed::{starting, ListedStrings};
use super::paths::{PathState, TrackedPaths, ROOT, UNTRACKED};
use crate::ops::leaf::DEAD;
use crate::vocab::TokenTrie;

/// An open object or array.
#[derive(Clone, Copy, Debug)]
enum Frame {
    Object {
        at: PathState,
        /// The state of the value after the last name read (`UNTRACKED` before one).
        value: PathState,
        /// The next string is a name (after `{` or `,`).
        expect_name: bool,
        /// Its names are held to a key group.
        keys: Option<Keyed>,
    },
    Array {
        at: PathState,
        item: PathState,
        /// Where the array's strings begin in the written values, if its items must be
        /// distinct.
        distinct: Option<usize>,
        /// How many of them it has (a list's count, kept to spare counting them).
        written: u32,
    },
}

/// An open object whose names are held to key group `group` of the paths: the names written
/// are the bits of [`Position::written`] from word `words`, `count` members written, and it
/// may still be any of `variants`.
#[derive(Clone, Copy, Debug)]
struct Keyed {
    group: u32,
    words: u32,
    count: u32,
    variants: Variants,
    /// The member being written is a discriminator's (by number): its string keeps the
    /// variants that list it.
    discriminator: Option<u32>,
}

impl Keyed {
    /// What it has written, its names read from `written`.
    fn written<'w>(&self, group: &KeyGroup, written: &'w [u64]) -> Written<'w> {
        Written {
            names: &written[self.words as usize..][..group.words()],
            count: u64::from(self.count),
            variants: self.variants,
        }
    }
}

/// What a string is, for what its closing quote does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Name,
    DistinctItem,
    Other,
}

/// Where the reader is between structural bytes.
#[derive(Clone, Copy, Debug)]
enum Lex {
    Between,
    /// Inside a string whose first content byte is at `start` of the text.
    Str {
        start: usize,
        role: Role,
        escaped: bool,
        /// At a place whose strings' length is counted: the count (escapes included).
        count: Option<Count>,
        /// A name of an object whose names are held to a key group: the names it may become.
        name: Option<NameCursor>,
    },
    /// Inside a number, `true`, `false` or `null` that began at `start` of the text.
    Scalar {
        start: usize,
    },
}

/// The reader's position: what a consumed step changes besides the text and the values.
#[derive(Clone, Debug)]
struct Position {
    frames: Vec<Frame>,
    lex: Lex,
    /// The names written in each open object held to a key set (see [`Keyed`]).
    written: Vec<u64>,
    /// Where the automata of the discriminator whose string or scalar is being written are
    /// (see `KeyGroup::start_value`): read byte by byte, so that a token closing the value
    /// steps its own bytes only, however long the value.
    automata: Vec<u32>,
    /// What its counts read of the string (see `KeyGroup::start_lengths`), kept the same way.
    counts: Vec<(Count, Read)>,
    /// The discriminators whose value is an object or array their automata read, innermost
    /// last, each until its container closes.
    containers: Vec<Container>,
    /// Their automata's states, from each one's `first`.
    container_states: Vec<u32>,
}

/// A discriminator's value being read by its automata (see
/// `KeyGroup::discriminate_container`): an object or array, open as frame `frame`.
#[derive(Clone, Copy, Debug)]
struct Container {
    frame: u32,
    group: u32,
    discriminator: u32,
    /// Where its automata's states start in [`Position::container_states`].
    first: u32,
}

impl Position {
    fn start() -> Position {
        Position {
            frames: Vec::new(),
            lex: Lex::Between,
            written: Vec::new(),
            automata: Vec::new(),
            counts: Vec::new(),
            containers: Vec::new(),
            container_states: Vec::new(),
        }
    }
}

/// Which tokens a mask reads for the key sets of open objects (see `JsonState::fill_mask`):
/// any that may reach a name's closing quote, a `,` or a `}` of such an object, or open one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyReads {
    /// No object has its names kept.
    None,
    /// None is open: the tokens that open one and write in it.
    Opening,
    /// Inside a name of one: every token if each byte may be refused, else those with `"`.
    Name { every: bool },
    /// Inside a name of one whose bytes may be refused but only its key group reads (no
    /// container's automaton): those with `"`, the others by a walk of the token trie
    /// ([`JsonTracker::walk_name`]).
    NameWalked,
    /// Inside another string, below one: those that close it and reach `,` or `}`. `plain`
    /// if what the string holds changes nothing (no count, no discriminator, no escape
    /// begun): a token then does what its bytes from its first closing quote do.
    InString { plain: bool },
    /// Between values or in a number, below one: those with `,` or `}`, and with `"` if a
    /// name of it comes next.
    Between { name_next: bool },
}

/// The state before one consumed step, for rollback.
#[derive(Clone, Debug)]
struct Snapshot {
    position: Position,
    text: usize,
    values: usize,
}

/// Bytes refused: a string item repeating one written before it in its array (at its closing
/// quote), a string leaving its bounds (at the byte that does), or a name, `,` or `}` an
/// object's key set refuses, is `at_byte` of the bytes read.
#[derive(Debug)]
pub(crate) struct Refused {
    pub at_byte: usize,
}

/// A string item of a distinct array open at the end of the text, its raw content ending
/// outside any escape: a string closing later decodes as this content followed by the rest.
#[derive(Clone, Debug)]
struct OpenItem {
    /// Where its raw content starts in the text.
    start: usize,
    /// Where its array's values begin.
    first: usize,
    decoded: Vec<u8>,
}

/// The state one matcher keeps beside the grammar: distinct items and counts.
#[derive(Clone, Debug)]
pub(crate) struct JsonTracker {
    paths: Arc<TrackedPaths>,
    /// The JSON text consumed so far (strings are decoded from it when they close).
    text: Vec<u8>,
    position: Position,
    /// Every string item of a distinct array written so far: where its array's strings begin,
    /// and its decoded value.
    values: Vec<(usize, Box<[u8]>)>,
    /// How many of `values` hash to each key (array, value): a hit is confirmed against them.
    counts: HashMap<u64, u32>,
    history: VecDeque<Snapshot>,
    max_history: usize,
    /// The decoded content of the item open at the end of the text (see [`OpenItem`]), found
    /// on first need after each step.
    open: Option<Option<OpenItem>>,
    /// Reused between reads of candidate tokens.
    scratch: Position,
    pending: Vec<(usize, Box<[u8]>)>,
}

impl JsonTracker {
    /// A tracker at the start of the document, keeping `max_history` steps for rollback.
    pub fn new(paths: Arc<TrackedPaths>, max_history: usize) -> JsonTracker {
        JsonTracker {
            paths,
            text: Vec::new(),
            position: Position::start(),
            values: Vec::new(),
            counts: HashMap::new(),
            history: VecDeque::new(),
            max_history,
            open: None,
            scratch: Position::start(),
            pending: Vec::new(),
        }
    }

    /// How many steps it keeps for rollback.
    pub fn max_history(&self) -> usize {
        self.max_history
    }

    /// Does the document have arrays of distinct items anywhere?
    pub fn has_distinct_arrays(&self) -> bool {
        self.paths.has_distinct()
    }

    /// Could a token that does not hold `[` repeat an item? Only inside a distinct array:
    /// elsewhere a repeat needs one opened first.
    pub fn in_distinct_array(&self) -> bool {
        matches!(
            self.position.frames.last(),
            Some(Frame::Array {
                distinct: Some(_),
                ..
            })
        )
    }

    /// Inside a string item of a distinct array, past any escape: the rest of each value
    /// written in its array that the item so far starts (`None` elsewhere).
    pub fn rests_of_open_item(&mut self) -> Option<impl Iterator<Item = &[u8]>> {
        self.open_item();
        let open = self.open.as_ref()?.as_ref()?;
        Some(
            self.values[open.first..]
                .iter()
                .filter(|(first, _)| *first == open.first)
                .filter_map(|(_, value)| value.strip_prefix(open.decoded.as_slice())),
        )
    }

    /// In an array whose distinct items are values of a list (between its items or in one):
    /// how many values are left for items after the open one, and whether one is open.
    pub fn listed_left(&self) -> Option<(usize, bool)> {
        let &Frame::Array {
            at,
            distinct: Some(_),
            written,
            ..
        } = self.position.frames.last()?
        else {
            return None;
        };
        let list = self.paths.listed(at)?;
        let open = matches!(self.position.lex, Lex::Str { .. });
        let left = list
            .len()
            .saturating_sub(written as usize + usize::from(open));
        Some((left, open))
    }

    /// Inside a string item of an array whose values are listed, past any escape: the
    /// shortest continuations of at most `longest` bytes that leave a dead prefix (see
    /// `listed`), each the start of the rest of a value written. A token starting with one
    /// goes through it, so the mask refuses them all.
    pub fn dead_continuations(&mut self, longest: usize) -> Vec<Vec<u8>> {
        self.open_item();
        let Some(Some(open)) = &self.open else {
            return Vec::new();
        };
        let Some(&Frame::Array { at, .. }) = self.position.frames.last() else {
            return Vec::new();
        };
        let Some(list) = self.paths.listed(at) else {
            return Vec::new();
        };
        let mut written: Vec<&[u8]> = self.values[open.first..]
            .iter()
            .filter(|(s, _)| *s == open.first)
            .map(|(_, v)| &**v)
            .filter(|v| v.starts_with(&open.decoded))
            .collect();
        written.sort_unstable();
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut prefix = open.decoded.clone();
        for w in &written {
            let rest = &w[open.decoded.len()..];
            prefix.truncate(open.decoded.len());
            for &b in rest.iter().take(longest) {
                prefix.push(b);
                if list.dead(&prefix, starting(&written, &prefix)) {
                    out.push(prefix[open.decoded.len()..].to_vec());
                    break;
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The item open at the end of the text, found once per step.
    fn open_item(&mut self) {
        if self.open.is_none() {
            self.open = Some(self.find_open_item());
        }
    }

    /// Which tokens a mask reads for the key sets of open objects.
    pub fn key_reads(&self) -> KeyReads {
        if !self.paths.has_key_groups() {
            return KeyReads::None;
        }
        let keyed = |f: &Frame| matches!(f, Frame::Object { keys: Some(_), .. });
        if !self.position.frames.iter().any(keyed) {
            return KeyReads::Opening;
        }
        match self.position.lex {
            Lex::Str {
                name: Some(cursor), ..
            } => {
                let (group, w) = top_keys(&self.paths, &self.position);
                match group.admits_any_name(w) {
                    true => KeyReads::Name { every: false },
                    false
                        if self.position.containers.is_empty()
                            && group.reads_many_names(cursor, w) =>
                    {
                        KeyReads::NameWalked
                    }
                    false => KeyReads::Name { every: true },
                }
            }
            Lex::Str {
                role,
                escaped,
                count,
                ..
            } => {
                let discriminating = matches!(
                    self.position.frames.last(),
                    Some(Frame::Object {
                        keys: Some(Keyed {
                            discriminator: Some(_),
                            ..
                        }),
                        ..
                    })
                );
                KeyReads::InString {
                    plain: role == Role::Other
                        && !escaped
                        && count.is_none()
                        && !discriminating
                        && self.position.containers.is_empty(),
                }
            }
            Lex::Between | Lex::Scalar { .. } => KeyReads::Between {
                name_next: matches!(
                    self.position.frames.last(),
                    Some(&Frame::Object {
                        keys: Some(_),
                        expect_name: true,
                        ..
                    })
                ),
            },
        }
    }

    /// Inside a name (see [`KeyReads::NameWalked`]): clears in `out` the tokens writing a
    /// prefix its key group refuses before any closing quote.
    pub fn walk_name(&self, trie: &TokenTrie, out: &mut [u32]) {
        let Lex::Str {
            name: Some(cursor),
            escaped,
            ..
        } = self.position.lex
        else {
            return;
        };
        let (group, written) = top_keys(&self.paths, &self.position);
        let mut walk = NameWalk {
            group,
            written,
            out,
        };
        trie.walk((cursor, escaped), &mut walk);
    }

    /// Inside a string whose length is counted: the count and its bound.
    pub fn open_count(&self) -> Option<(Count, &LengthBound)> {
        match self.position.lex {
            Lex::Str {
                count: Some(count), ..
            } => Some((count, self.paths.bound(count.bound))),
            _ => None,
        }
    }

    fn find_open_item(&self) -> Option<OpenItem> {
        let Lex::Str {
            start,
            role: Role::DistinctItem,
            escaped: false,
            ..
        } = self.position.lex
        else {
            return None;
        };
        let Some(&Frame::Array {
            distinct: Some(first),
            ..
        }) = self.position.frames.last()
        else {
            return None;
        };
        let raw = &self.text[start..];
        let decoded = decode_string(raw);
        // A high surrogate at the end may pair with a low one still to come: decoded apart,
        // the two would not be the character they make together.
        let pending_pair = decoded.len() >= 3
            && decoded[decoded.len() - 3] == 0xED
            && (0xA0..0xB0).contains(&decoded[decoded.len() - 2]);
        (escapes_complete(raw) && !pending_pair).then_some(OpenItem {
            start,
            first,
            decoded,
        })
    }

    /// Reads `bytes` after the text without consuming them: `Err` if a string item would
    /// repeat one of its array, a string leave its bounds, or an object take a name, `,` or
    /// `}` its key group refuses. The reading stays in the scratch state for
    /// [`Self::commit`].
    pub fn check(&mut self, bytes: &[u8]) -> Result<(), Refused> {
        self.open_item();
        // Field by field, so that the frames' buffer is reused.
        self.scratch.frames.clone_from(&self.position.frames);
        self.scratch.written.clone_from(&self.position.written);
        self.scratch.automata.clone_from(&self.position.automata);
        self.scratch.counts.clone_from(&self.position.counts);
        self.scratch
            .containers
            .clone_from(&self.position.containers);
        self.scratch
            .container_states
            .clone_from(&self.position.container_states);
        self.scratch.lex = self.position.lex;
        self.pending.clear();
        let mut reader = Reader {
            paths: &self.paths,
            text: &self.text,
            open: self.open.as_ref().and_then(Option::as_ref),
            values: &self.values,
            counts: &self.counts,
            position: &mut self.scratch,
            pending: &mut self.pending,
        };
        bytes
            .iter()
            .enumerate()
            .try_for_each(|(i, &b)| reader.read(b, i, bytes))
    }

    /// Consumes the bytes [`Self::check`] last read (and accepted) as one step.
    pub fn commit(&mut self, bytes: &[u8]) {
        self.remember();
        self.open = None;
        self.text.extend_from_slice(bytes);
        std::mem::swap(&mut self.position, &mut self.scratch);
        for (start, value) in self.pending.drain(..) {
            *self.counts.entry(key(start, &value)).or_default() += 1;
            self.values.push((start, value));
        }
    }

    /// A step that reads no text (EOS, a special token).
    pub fn step_without_text(&mut self) {
        self.remember();
    }

    fn remember(&mut self) {
        if self.max_history == 0 {
            return;
        }
        if self.history.len() == self.max_history {
            self.history.pop_front();
        }
        self.history.push_back(Snapshot {
            position: self.position.clone(),
            text: self.text.len(),
            values: self.values.len(),
        });
    }

    /// Undoes the last `n` steps (the caller's matcher keeps as many).
    pub fn rollback(&mut self, n: usize) {
        self.open = None;
        let keep = self.history.len().saturating_sub(n);
        let Some(snapshot) = self.history.drain(keep..).next() else {
            return;
        };
        self.text.truncate(snapshot.text);
        for (start, value) in self.values.drain(snapshot.values..) {
            let k = key(start, &value);
            match self.counts.get_mut(&k) {
                Some(c) if *c > 1 => *c -= 1,
                _ => {
                    self.counts.remove(&k);
                }
            }
        }
        self.position = snapshot.position;
    }

    /// Back to the start of the document.
    pub fn reset(&mut self) {
        *self = JsonTracker::new(self.paths.clone(), self.max_history);
    }
}

/// Reads bytes after the consumed text.
struct Reader<'a> {
    paths: &'a TrackedPaths,
    text: &'a [u8],
    open: Option<&'a OpenItem>,
    values: &'a [(usize, Box<[u8]>)],
    counts: &'a HashMap<u64, u32>,
    position: &'a mut Position,
    pending: &'a mut Vec<(usize, Box<[u8]>)>,
}

impl<'a> Reader<'a> {
    /// Reads byte `i` of `bytes`.
    fn read(&mut self, b: u8, i: usize, bytes: &[u8]) -> Result<(), Refused> {
        for c in &self.position.containers {
            self.paths.key_group(c.group).step_value(
                c.discriminator,
                &mut self.position.container_states[c.first as usize..],
                b,
            );
        }
        let in_value = match self.position.lex {
            Lex::Str {
                role: Role::Other, ..
            } => true,
            Lex::Scalar { .. } => is_scalar_byte(b),
            _ => false,
        };
        if in_value {
            if let Some((group, d)) = self.discriminating() {
                group.step_value(d, &mut self.position.automata, b);
                group.step_lengths(d, &mut self.position.counts, b);
            }
        }
        if let Lex::Str {
            name: Some(cursor),
            escaped,
            ..
        } = self.position.lex
        {
            if b != b'"' || escaped {
                let (group, w) = top_keys(self.paths, self.position);
                let next = group.read(cursor, b);
                if !group.viable(next, w) {
                    return Err(Refused { at_byte: i });
                }
                if let Lex::Str {
                    name: Some(cursor), ..
                } = &mut self.position.lex
                {
                    *cursor = next;
                }
            }
        }
        match &mut self.position.lex {
            &mut Lex::Str {
                start,
                role,
                count: Some(ref mut count),
                ..
            } => {
                return match count.read(b, self.paths.bound(count.bound)) {
                    Read::Open => Ok(()),
                    Read::Refused => Err(Refused { at_byte: i }),
                    Read::Closed => {
                        self.position.lex = Lex::Between;
                        self.close_string(start, role, i, bytes)
                    }
                };
            }
            Lex::Str {
                escaped: e @ true, ..
            } => {
                *e = false;
                return Ok(());
            }
            Lex::Str { escaped, .. } if b == b'\\' => {
                *escaped = true;
                return Ok(());
            }
            &mut Lex::Str {
                start, role, name, ..
            } if b == b'"' => {
                self.position.lex = Lex::Between;
                if let Some(cursor) = name {
                    self.take_name(cursor, i)?;
                }
                return self.close_string(start, role, i, bytes);
            }
            &mut Lex::Str {
                start,
                role: Role::DistinctItem,
                ..
            } => return self.listed_prefix(start, i, bytes),
            Lex::Str { .. } => return Ok(()),
            Lex::Scalar { .. } if is_scalar_byte(b) => return Ok(()),
            &mut Lex::Scalar { start } => {
                self.position.lex = Lex::Between;
                self.discriminate(start, &bytes[..i], i, |mut raw| {
                    // The grammar writes zero as `0` or `-0`; the lists hold it as `0`.
                    if raw == b"-0" {
                        raw.remove(0);
                    }
                    raw
                })?;
            }
            Lex::Between => {}
        }
        let outer = match b {
            b'{' | b'[' => self.discriminate_container(b, i)?,
            _ => None,
        };
        match b {
            b'{' => {
                let at = self.value_state();
                let keys = match (self.paths.keys(at), outer) {
                    // The front end gives a nested discriminator's place a group holding its
                    // key sets.
                    (None, Some(_)) => return Err(Refused { at_byte: i }),
                    (None, None) => None,
                    (Some(g), outer) => {
                        let group = self.paths.key_group(g);
                        let variants = match outer {
                            Some((parent, d, brought_by)) => parent.brought(d, brought_by, group),
                            None => group.all(),
                        };
                        if variants == 0 {
                            return Err(Refused { at_byte: i });
                        }
                        let words = self.position.written.len();
                        self.position.written.resize(words + group.words(), 0);
                        Some(Keyed {
                            group: g,
                            words: words as u32,
                            count: 0,
                            variants,
                            discriminator: None,
                        })
                    }
                };
                self.position.frames.push(Frame::Object {
                    at,
                    value: UNTRACKED,
                    expect_name: true,
                    keys,
                });
            }
            b'[' => {
                let at = self.value_state();
                let written = self.values.len() + self.pending.len();
                self.position.frames.push(Frame::Array {
                    at,
                    item: self.paths.item(at),
                    distinct: self.paths.distinct(at).then_some(written),
                    written: 0,
                });
            }
            b'}' => {
                let closed = match self.position.frames.last() {
                    Some(&Frame::Object { keys: Some(k), .. }) => {
                        let (group, w) = top_keys(self.paths, self.position);
                        let closable = group.closable(w);
                        if closable == 0 {
                            return Err(Refused { at_byte: i });
                        }
                        self.position.written.truncate(k.words as usize);
                        Some((group, closable))
                    }
                    _ => None,
                };
                self.position.frames.pop();
                self.close_container(i, closed)?;
            }
            b']' => {
                self.position.frames.pop();
                self.close_container(i, None)?;
            }
            b',' => {
                if let Some(&Frame::Array {
                    at,
                    distinct: Some(_),
                    written,
                    ..
                }) = self.position.frames.last()
                {
                    // Another item needs a value not written yet.
                    let values = self.paths.listed(at).map(ListedStrings::len);
                    if values.is_some_and(|n| written as usize >= n) {
                        return Err(Refused { at_byte: i });
                    }
                }
                let variants = match self.position.frames.last() {
                    Some(Frame::Object { keys: Some(_), .. }) => {
                        let (group, w) = top_keys(self.paths, self.position);
                        match group.add(w) {
                            0 => return Err(Refused { at_byte: i }),
                            variants => Some(variants),
                        }
                    }
                    _ => None,
                };
                if let Some(Frame::Object {
                    expect_name, keys, ..
                }) = self.position.frames.last_mut()
                {
                    *expect_name = true;
                    if let (Some(k), Some(variants)) = (keys, variants) {
                        k.variants = variants;
                    }
                }
            }
            b'"' => {
                let role = match self.position.frames.last() {
                    Some(Frame::Object {
                        expect_name: true, ..
                    }) => Role::Name,
                    Some(Frame::Array {
                        distinct: Some(_), ..
                    }) => Role::DistinctItem,
                    _ => Role::Other,
                };
                let count = match role {
                    Role::Name => None,
                    _ => self.paths.string(self.value_state()).map(Count::new),
                };
                let name = match (role, self.position.frames.last()) {
                    (Role::Name, Some(Frame::Object { keys: Some(_), .. })) => {
                        let (group, w) = top_keys(self.paths, self.position);
                        let cursor = group.cursor();
                        if !group.viable(cursor, w) {
                            return Err(Refused { at_byte: i });
                        }
                        Some(cursor)
                    }
                    _ => None,
                };
                self.position.lex = Lex::Str {
                    start: self.text.len() + i + 1,
                    role,
                    escaped: false,
                    count,
                    name,
                };
                if role == Role::Other {
                    self.start_value(b);
                }
            }
            b if is_scalar_byte(b) => {
                self.position.lex = Lex::Scalar {
                    start: self.text.len() + i,
                };
                self.start_value(b);
            }
            // White space and `:`.
            _ => {}
        }
        Ok(())
    }

    /// The name the top object's key group has read as far as `cursor` closes at byte `i`:
    /// refused, or one more member (a declared name marked written, the variants that take
    /// it kept).
    fn take_name(&mut self, cursor: NameCursor, i: usize) -> Result<(), Refused> {
        let (group, w) = top_keys(self.paths, self.position);
        let (declared, variants) = group.close(cursor, w).ok_or(Refused { at_byte: i })?;
        let Some(Frame::Object { keys: Some(k), .. }) = self.position.frames.last_mut() else {
            unreachable!("a name cursor is only opened in an object with a key group")
        };
        if let Some(d) = declared {
            put(&mut self.position.written[k.words as usize..], d);
        }
        k.count += 1;
        k.variants = variants;
        k.discriminator = declared.and_then(|d| group.discriminator(d));
        Ok(())
    }

    /// The key group and discriminator of the top object's member being written, if it is
    /// a discriminator's.
    fn discriminating(&self) -> Option<(&'a KeyGroup, u32)> {
        match self.position.frames.last() {
            Some(&Frame::Object {
                keys:
                    Some(Keyed {
                        group,
                        discriminator: Some(d),
                        ..
                    }),
                ..
            }) => Some((self.paths.key_group(group), d)),
            _ => None,
        }
    }

    /// Byte `b` starts a string or scalar: if a discriminator's, its automata read it.
    fn start_value(&mut self, b: u8) {
        if let Some((group, d)) = self.discriminating() {
            self.position.automata.clear();
            group.start_value(d, &mut self.position.automata);
            group.step_value(d, &mut self.position.automata, b);
            self.position.counts.clear();
            group.start_lengths(d, b, &mut self.position.counts);
        }
    }

    /// A scalar or string value whose first byte is `start` of the text ends with `read`, the
    /// bytes read of this token (at byte `i`): if it is a discriminator's, only the variants
    /// of its object whose tests it passes remain (refused if none). `listed` gives it as
    /// lists hold it from its bytes as written, asked only if a list may hold a value that
    /// long (the automata read it as it came).
    fn discriminate(
        &mut self,
        start: usize,
        read: &[u8],
        i: usize,
        listed: impl FnOnce(Vec<u8>) -> Vec<u8>,
    ) -> Result<(), Refused> {
        let Some((group, d)) = self.discriminating() else {
            return Ok(());
        };
        let len = (self.text.len() + read.len()).saturating_sub(start);
        let listed = group
            .may_be_listed(d, len)
            .then(|| listed(self.raw(start, read)));
        let states = std::mem::take(&mut self.position.automata);
        let counts = std::mem::take(&mut self.position.counts);
        let kept = self.keep_variants(i, |group, d, variants| {
            group.discriminate(d, listed.as_deref(), &states, &counts, variants)
        });
        self.position.automata = states;
        self.position.counts = counts;
        kept
    }

    /// An object or array opens with byte `b` (at `i`): if as a discriminator's value, only
    /// the variants that may admit it remain (refused if none), and the discriminator waits
    /// for it to close if some of them still have to tell (their automata read it, see
    /// [`Self::close_container`]). If some of them admit objects of their own key sets, the
    /// discriminator's group, number and the variants left are returned, to bring the
    /// object's own variants.
    fn discriminate_container(
        &mut self,
        b: u8,
        i: usize,
    ) -> Result<Option<(&'a KeyGroup, u32, Variants)>, Refused> {
        let Some((group, d)) = self.discriminating() else {
            return Ok(None);
        };
        let object = b == b'{';
        let mut states = std::mem::take(&mut self.position.container_states);
        let first = states.len();
        group.start_value(d, &mut states);
        group.step_value(d, &mut states[first..], b);
        let kept = self.keep_variants(i, |group, d, variants| {
            group.discriminate_container(d, object, &states[first..], variants)
        });
        let reading = states[first..].iter().any(|&state| state != DEAD);
        if !reading {
            states.truncate(first);
        }
        self.position.container_states = states;
        kept?;
        let nested = object && group.has_nested(d);
        if !(reading || nested) {
            return Ok(None);
        }
        let frame = self.position.frames.len() as u32;
        let Some(Frame::Object { keys: Some(k), .. }) = self.position.frames.last_mut() else {
            unreachable!("a discriminator's member is written in an object with a key group")
        };
        k.discriminator = Some(d);
        if reading {
            self.position.containers.push(Container {
                frame,
                group: k.group,
                discriminator: d,
                first: first as u32,
            });
        }
        Ok(nested.then_some((group, d, k.variants)))
    }

    /// An object or array closed at byte `i` (an object held to a key group, as one of its
    /// variants `closed`): if a discriminator waits for it, only the variants whose tests it
    /// passes remain (refused if none).
    fn close_container(
        &mut self,
        i: usize,
        closed: Option<(&KeyGroup, Variants)>,
    ) -> Result<(), Refused> {
        let frame = self.position.frames.len() as u32;
        let read = match self.position.containers.last() {
            Some(c) if c.frame == frame => self.position.containers.pop(),
            _ => None,
        };
        let nested = self
            .discriminating()
            .is_some_and(|(group, d)| group.has_nested(d));
        if read.is_none() && !nested {
            return Ok(());
        }
        // Taken for the closure and given back without the closed container's states: no
        // copy on a path every candidate token closing a value takes.
        let mut states = std::mem::take(&mut self.position.container_states);
        let kept = self.keep_variants(i, |group, d, outer| {
            let read = read.map(|c| &states[c.first as usize..]);
            group.close_container(d, outer, read, closed)
        });
        if let Some(c) = read {
            states.truncate(c.first as usize);
        }
        self.position.container_states = states;
        kept
    }

    /// If the top object's member being written is discriminator `d`'s, keeps the variants
    /// `keep` gives (refused at byte `i` if none).
    fn keep_variants(
        &mut self,
        i: usize,
        keep: impl FnOnce(&KeyGroup, u32, Variants) -> Variants,
    ) -> Result<(), Refused> {
        let Some((group, d)) = self.discriminating() else {
            return Ok(());
        };
        let Some(Frame::Object { keys: Some(k), .. }) = self.position.frames.last_mut() else {
            unreachable!("a discriminator's member is written in an object with a key group")
        };
        k.variants = keep(group, d, k.variants);
        k.discriminator = None;
        match k.variants {
            0 => Err(Refused { at_byte: i }),
            _ => Ok(()),
        }
    }

    /// The state of a value starting here.
    fn value_state(&self) -> PathState {
        match self.position.frames.last() {
            None => ROOT,
            Some(Frame::Object { value, .. }) => *value,
            Some(Frame::Array { item, .. }) => *item,
        }
    }

    /// A string whose content began at `start` of the text closes at byte `i` of `bytes`.
    fn close_string(
        &mut self,
        start: usize,
        role: Role,
        i: usize,
        bytes: &[u8],
    ) -> Result<(), Refused> {
        if role == Role::Other {
            return self.discriminate(start - 1, &bytes[..=i], i, |raw| raw);
        }
        if let Some(&Frame::Object { at, .. }) = self.position.frames.last() {
            // Below an untracked object, every value is untracked: no need to read the name.
            let state = match at {
                UNTRACKED => UNTRACKED,
                at => self
                    .paths
                    .property(at, &decode_string(&self.raw(start, &bytes[..i]))),
            };
            if let Some(Frame::Object {
                value, expect_name, ..
            }) = self.position.frames.last_mut()
            {
                *value = state;
                *expect_name = false;
            }
            return Ok(());
        }
        let decoded = match self.open.filter(|o| o.start == start) {
            Some(open) => [open.decoded.as_slice(), &decode_string(&bytes[..i])].concat(),
            None => decode_string(&self.raw(start, &bytes[..i])),
        };
        match self.position.frames.last() {
            Some(&Frame::Array {
                distinct: Some(first),
                ..
            }) => match self.written(first, &decoded) {
                true => Err(Refused { at_byte: i }),
                false => {
                    self.pending.push((first, decoded.into()));
                    if let Some(Frame::Array { written, .. }) = self.position.frames.last_mut() {
                        *written = written.saturating_add(1);
                    }
                    Ok(())
                }
            },
            _ => Ok(()),
        }
    }

    /// A string item whose content began at `start` of the text goes on with byte `i` of
    /// `bytes`: refused if its array's values are listed and it is now a dead prefix of them.
    fn listed_prefix(&self, start: usize, i: usize, bytes: &[u8]) -> Result<(), Refused> {
        let Some(&Frame::Array {
            at,
            distinct: Some(first),
            written,
            ..
        }) = self.position.frames.last()
        else {
            return Ok(());
        };
        let Some(list) = self.paths.listed(at) else {
            return Ok(());
        };
        // Nothing written: every prefix the grammar spells starts a value left (the grammar
        // spells only the list's values there), and the item is not copied at every byte.
        if written == 0 {
            return Ok(());
        }
        let prefix = self.raw(start, &bytes[..=i]);
        // More values start it than items were written: alive without counting those.
        if list.starting(&prefix) > written as usize {
            return Ok(());
        }
        let written = self
            .written_in(first)
            .filter(|w| w.starts_with(&prefix))
            .count();
        match list.dead(&prefix, written) {
            true => Err(Refused { at_byte: i }),
            false => Ok(()),
        }
    }

    /// The strings written in the array whose strings begin at `first`, this reading's too.
    fn written_in(&self, first: usize) -> impl Iterator<Item = &[u8]> {
        let consumed = self.values.get(first..).unwrap_or_default().iter();
        consumed
            .chain(self.pending.iter())
            .filter(move |(s, _)| *s == first)
            .map(|(_, v)| &**v)
    }

    /// Was `value` written in the array whose strings begin at `first`?
    fn written(&self, first: usize, value: &[u8]) -> bool {
        let in_text = self.counts.contains_key(&key(first, value))
            && self.values[first..]
                .iter()
                .any(|(s, v)| *s == first && **v == *value);
        in_text
            || self
                .pending
                .iter()
                .any(|(s, v)| *s == first && **v == *value)
    }

    /// The raw content of a string from `start` (an offset in the text followed by the bytes
    /// being read) through `read`, the bytes read before its closing quote.
    fn raw(&self, start: usize, read: &[u8]) -> Vec<u8> {
        let mut raw = self.text.get(start..).unwrap_or_default().to_vec();
        raw.extend_from_slice(&read[start.saturating_sub(self.text.len())..]);
        raw
    }
}

/// The key group of the innermost open object (which has one), and what it has written.
fn top_keys<'p, 'w>(paths: &'p TrackedPaths, at: &'w Position) -> (&'p KeyGroup, Written<'w>) {
    let Some(&Frame::Object { keys: Some(k), .. }) = at.frames.last() else {
        unreachable!("only asked inside an object with a key group")
    };
    let group = paths.key_group(k.group);
    (group, k.written(group, &at.written))
}

/// Does the raw content of a string end outside any escape (a `\uXXXX` whole)?
fn escapes_complete(raw: &[u8]) -> bool {
    let mut i = 0;
    while i < raw.len() {
        i += match (raw[i], raw.get(i + 1)) {
            (b'\\', Some(b'u')) => 6,
            (b'\\', _) => 2,
            _ => 1,
        };
    }
    i == raw.len()
}

/// Can byte `b` be part of a number, `true`, `false` or `null` (where the reader finds one)?
pub(crate) fn is_scalar_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.')
}

fn key(first: usize, value: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    (first, value).hash(&mut h);
    h.finish()
}

/// The code units of a JSON string's content, written as UTF-8, unpaired surrogates as their
/// three-byte generalized UTF-8: two strings are equal JSON values iff these are equal.
fn decode_string(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != b'\\' || i + 1 >= raw.len() {
            out.push(raw[i]);
            i += 1;
            continue;
        }
        let simple = match raw[i + 1] {
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'u' => None,
            other => Some(other),
        };
        if let Some(b) = simple {
            out.push(b);
            i += 2;
            continue;
        }
        let unit = |at: usize| {
            raw.get(at..at + 4)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u32::from_str_radix(h, 16).ok())
        };
        let Some(high) = unit(i + 2) else {
            out.extend_from_slice(&raw[i..i + 2]);
            i += 2;
            continue;
        };
        i += 6;
        let mut code = high;
        if (0xD800..0xDC00).contains(&high) && raw.get(i..i + 2) == Some(b"\\u") {
            if let Some(low @ 0xDC00..=0xDFFF) = unit(i + 2) {
                code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                i += 6;
            }
        }
        push_code_point(&mut out, code);
    }
    out
}

/// UTF-8 of a code point, surrogates included (generalized UTF-8).
fn push_code_point(out: &mut Vec<u8>, c: u32) {
    match c {
        0..=0x7F => out.push(c as u8),
        0x80..=0x7FF => out.extend([0xC0 | (c >> 6) as u8, 0x80 | (c & 0x3F) as u8]),
        0x800..=0xFFFF => out.extend([
            0xE0 | (c >> 12) as u8,
            0x80 | ((c >> 6) & 0x3F) as u8,
            0x80 | (c & 0x3F) as u8,
        ]),
        _ => out.extend([
            0xF0 | (c >> 18) as u8,
            0x80 | ((c >> 12) & 0x3F) as u8,
            0x80 | ((c >> 6) & 0x3F) as u8,
            0x80 | (c & 0x3F) as u8,
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::json_schema::{
        compile_schema_keeping_state, JsonSchemaOptions, PropertyOrder,
    };
    use crate::limits::{Deadline, Limits};
    use crate::ops::leaf::DEAD;
    use serde_json::json;

    /// A discriminator's string is read by its automata as it comes, their states kept in
    /// the position from step to step: a token closing the value reads its own bytes only.
    /// (It read the whole value again, so every mask inside a long value cost its length.)
    #[test]
    fn a_discriminators_value_is_read_as_it_comes() {
        let object = |pattern: &str, other: &str| {
            json!({
                "type": "object",
                "properties": {"a": {"type": "string", "pattern": pattern}, other: {"type": "integer"}},
                "required": [other],
                "additionalProperties": false
            })
        };
        let schema = json!({"anyOf": [object("^[a-w ]*$", "b"), object("^x[a-z ]*$", "c")]});
        let options = JsonSchemaOptions::new().property_order(PropertyOrder::Any);
        let (_, paths) =
            compile_schema_keeping_state(&schema, &options, &Limits::new(), &Deadline::never())
                .unwrap();
        let mut t = JsonTracker::new(Arc::new(paths.expect("a key group")), 8);
        for b in br#"{"a":"xy"#.chunks(1) {
            t.check(b).unwrap();
            t.commit(b);
        }
        let states = &t.position.automata;
        assert_eq!(states.len(), 2, "an automaton per variant");
        assert_eq!(
            states.iter().filter(|&&s| s == DEAD).count(),
            1,
            "`x` left `^[a-w ]*$` at its byte"
        );
        assert!(
            t.check(br#"z","b":1}"#).is_err(),
            "only the `c` object is left"
        );
        assert!(t.check(br#"z","c":1}"#).is_ok());
    }
}
