//! JSON string contents as the model writes them: how each character may be spelled
//! (raw, short escape, `\uXXXX`, surrogate pairs), any text, and "any key but these".
//!
//! # Escaping
//!
//! `pattern`, `format`, `minLength` and `maxLength` constrain the *decoded* string, while the
//! model writes its JSON encoding. So every character a constraint admits is admitted in each of
//! its JSON spellings: raw (except `"`, `\` and the controls U+0000–U+001F, which JSON forbids
//! raw), its short escape (`\"` `\\` `\/` `\b` `\f` `\n` `\r` `\t`), and `\uXXXX` with hex
//! digits in either case (a surrogate pair for characters beyond the BMP). Lone surrogates are
//! rejected: the decoded text must be Unicode. `minLength`/`maxLength` count characters (code
//! points), whatever their spelling. Strings the schema fixes in advance (property names,
//! `enum`, `const`) are written in their canonical form only (serde_json's: the short escapes
//! but `\/`, `\u00xx` for other controls, everything else raw), so they stay forced text.
//!
//! Object keys are canonical too, declared or not ([`JsonText::keys`]): a key's schema is
//! chosen by its decoded name, so an undeclared key must decode to none of the declared names,
//! and with every spelling allowed each letter of each name would need its `\u00XX` spellings
//! excluded from the other keys (a hex trie per name position, seven automaton states per
//! letter where one does). With one spelling per name, "not a declared name" is a plain string
//! complement. Every key can still be written; JSON texts serializers produce are all
//! accepted.

use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};

use crate::base::byteset::ByteSet;
use crate::error::CompileError;
use crate::front::guard::tick;
use crate::front::regex::{utf8_class, TextEncoding};
use crate::ir::{ExprId, GrammarBuilder};
use crate::limits::Deadline;

/// Every Unicode scalar value.
pub(crate) const ANY_CHAR: (char, char) = ('\0', char::MAX);

/// How the characters inside a JSON string are spelled, one class at a time (memoized: a
/// schema asks for the same classes again and again).
pub(crate) struct JsonText {
    memo: rustc_hash::FxHashMap<Vec<(char, char)>, ExprId>,
    /// The nodes of the tries of names [`text_not_in`] built so far (see [`TrieNode`]).
    nodes: rustc_hash::FxHashMap<TrieNode, ExprId>,
    spell: fn(&mut GrammarBuilder, &[(char, char)]) -> ExprId,
}

/// A node of a trie of names: whether a name ends there, and its children's characters
/// (sorted) and expressions. A node's expression is a function of these alone, so each is
/// built once per spelling: sets of names that differ by a few (the copies of an object
/// that intersections make, each declaring some names of the branches it met; MaskBench
/// o72217: ~300 sets) share all their other subtries, and each set built every node again,
/// a dozen expressions per character (41% of that schema's front end).
type TrieNode = (bool, Vec<(char, ExprId)>);

impl JsonText {
    /// String values: every JSON spelling of each character (see the module notes).
    pub fn values() -> JsonText {
        JsonText {
            memo: Default::default(),
            nodes: Default::default(),
            spell: json_char_class,
        }
    }

    /// Object keys: as a JSON serializer writes them (serde_json, `JSON.stringify`): raw,
    /// except `"` and `\` and the controls, which take their short escape or `\u00xx`
    /// (lower-case hex). See the module notes.
    pub fn keys() -> JsonText {
        JsonText {
            memo: Default::default(),
            nodes: Default::default(),
            spell: canonical_char_class,
        }
    }
}

impl TextEncoding for JsonText {
    fn char(&mut self, g: &mut GrammarBuilder, c: char) -> ExprId {
        self.class(g, &[(c, c)])
    }

    fn class(&mut self, g: &mut GrammarBuilder, ranges: &[(char, char)]) -> ExprId {
        if let Some(&e) = self.memo.get(ranges) {
            return e;
        }
        let e = (self.spell)(g, ranges);
        self.memo.insert(ranges.to_vec(), e);
        e
    }
}

/// A character of `ranges` in its canonical spelling ([`JsonText::keys`]). Its escapes are
/// one trie ([`byte_trie`]): as one branch per escaped character (34 when a key automaton's
/// class holds every control), each state of a key automaton began 34 branches with `\`, and
/// the subset construction of a unit holding a few dozen such states tracked every one of
/// them at once (a schema of two negated `patternProperties`: 2.3M NFA states visited for
/// 736 automaton states, per unit).
fn canonical_char_class(g: &mut GrammarBuilder, ranges: &[(char, char)]) -> ExprId {
    // Within ASCII (the classes of a trie of names, mostly) the raw spellings are one byte
    // class, as `utf8_class` would give, without the Unicode set difference.
    let raw = match ranges.iter().all(|&(_, hi)| hi.is_ascii()) {
        true => {
            let mut set = ByteSet::EMPTY;
            for &(lo, hi) in ranges {
                set.insert_range(lo as u8, hi as u8);
            }
            let raw = ByteSet::range(0x20, 0x7f).intersection(
                &ByteSet::byte(b'"')
                    .union(&ByteSet::byte(b'\\'))
                    .complement(),
            );
            g.class(set.intersection(&raw))
        }
        false => utf8_class(g, &raw_ranges(ranges)),
    };
    let mut escapes: Vec<Vec<u8>> = Vec::new();
    for c in ('\0'..='\u{1f}').chain(['"', '\\']) {
        if contains(ranges, c) {
            let escaped = match SHORT_ESCAPES.iter().find(|e| e.0 == c) {
                Some(&(_, letter)) => format!("\\{}", letter as char),
                None => format!("\\u{:04x}", c as u32),
            };
            escapes.push(escaped.into_bytes());
        }
    }
    escapes.sort_unstable();
    let escaped = byte_trie(g, &escapes);
    g.alt([raw, escaped])
}

/// Any of the byte strings `spellings` (sorted, distinct, none a prefix of another, none
/// empty; none at all: the empty language) as a trie: the strings sharing a first byte are
/// that byte, then the trie of their rests, and the strings of one byte are one class.
/// Recursion: as deep as the longest string (an escape: six bytes).
fn byte_trie<S: AsRef<[u8]>>(g: &mut GrammarBuilder, spellings: &[S]) -> ExprId {
    let mut last = ByteSet::EMPTY;
    let mut branches = Vec::new();
    for group in spellings.chunk_by(|a, b| a.as_ref()[0] == b.as_ref()[0]) {
        let first = group[0].as_ref();
        match group {
            [_] if first.len() == 1 => last.insert(first[0]),
            [_] => branches.push(g.bytes(first)),
            _ => {
                let rests: Vec<&[u8]> = group.iter().map(|s| &s.as_ref()[1..]).collect();
                let head = g.bytes(&first[..1]);
                let rest = byte_trie(g, &rests);
                branches.push(g.seq([head, rest]));
            }
        }
    }
    // An empty class is the empty language, which the alternation drops.
    branches.push(match last.single() {
        Some(b) => g.bytes(&[b]),
        None => g.class(last),
    });
    g.alt(branches)
}

/// Short escapes: the character and the letter after the backslash.
const SHORT_ESCAPES: [(char, u8); 8] = [
    ('"', b'"'),
    ('\\', b'\\'),
    ('/', b'/'),
    ('\u{8}', b'b'),
    ('\u{c}', b'f'),
    ('\n', b'n'),
    ('\r', b'r'),
    ('\t', b't'),
];

fn contains(ranges: &[(char, char)], c: char) -> bool {
    ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi)
}

/// `ranges` minus the controls, `"` and `\`.
fn raw_ranges(ranges: &[(char, char)]) -> Vec<(char, char)> {
    let mut class = ClassUnicode::new(ranges.iter().map(|&(a, b)| ClassUnicodeRange::new(a, b)));
    let forbidden = ClassUnicode::new([
        ClassUnicodeRange::new('\0', '\u{1f}'),
        ClassUnicodeRange::new('"', '"'),
        ClassUnicodeRange::new('\\', '\\'),
    ]);
    class.difference(&forbidden);
    class.iter().map(|r| (r.start(), r.end())).collect()
}

/// A character of `ranges` in each of its JSON spellings ([`JsonText::values`]). Its `\u`
/// escapes are one trie over the hex digits ([`hex_trie`]), so no two of its branches begin
/// alike: one alternation of digit ranges per range of code points made the subset
/// construction track every overlapping `\u00..` prefix, ten times the states of the minimal
/// automaton.
fn json_char_class(g: &mut GrammarBuilder, ranges: &[(char, char)]) -> ExprId {
    // Sorted and disjoint whatever the caller passed: the code units below must not overlap.
    let class = ClassUnicode::new(ranges.iter().map(|&(a, b)| ClassUnicodeRange::new(a, b)));
    let ranges: Vec<(char, char)> = class.iter().map(|r| (r.start(), r.end())).collect();
    let raw = utf8_class(g, &raw_ranges(&ranges));
    let mut letters = ByteSet::EMPTY;
    for (c, letter) in SHORT_ESCAPES {
        if contains(&ranges, c) {
            letters.insert(letter);
        }
    }
    // Code units after `\u`, each with what follows it (a high surrogate: the low one).
    let empty = g.empty();
    let mut units: Vec<(u32, u32, ExprId)> = Vec::new();
    for &(lo, hi) in &ranges {
        let (lo, hi) = (lo as u32, hi as u32);
        for (a, b) in [(0, 0xD7FF), (0xE000, 0xFFFF)] {
            let (a, b) = (lo.max(a), hi.min(b));
            if a <= b {
                units.push((a, b, empty));
            }
        }
    }
    units.extend(surrogate_pairs(g, &ranges));
    units.sort_unstable_by_key(|u| u.0);
    let short = g.class(letters);
    let u = g.text("u");
    let hexes = hex_trie(g, &units, 4);
    let unicode = g.seq([u, hexes]);
    let after = g.alt([short, unicode]);
    let backslash = g.text("\\");
    let escaped = g.seq([backslash, after]);
    g.alt([raw, escaped])
}

/// The `\u` spellings of the characters of `ranges` (sorted, disjoint) beyond the BMP: for
/// each run of high surrogates followed by the same low ones, the run and then `\u` and the
/// trie of those low surrogates. Two characters may share a high surrogate (😀 and 😂 are
/// D83D DE00 and D83D DE02), so the lows are gathered per high surrogate first: one unit per
/// character range would give the trie overlapping units. Only the high surrogates where a
/// range starts or ends get lows of their own; those between take them all. A table of all
/// 1,024 high surrogates per class was most of the front end's time on schemas whose
/// patterns' automata have a few wide classes (`.`, `[^/]`: ~2 ms each).
fn surrogate_pairs(g: &mut GrammarBuilder, ranges: &[(char, char)]) -> Vec<(u32, u32, ExprId)> {
    const ALL_LOWS: (u32, u32) = (0, 0x3FF);
    // Ascending runs of high surrogates (offsets from D800) and their low ones (from DC00).
    let mut runs: Vec<(u32, u32, Vec<(u32, u32)>)> = Vec::new();
    let mut add = |first: u32, last: u32, low: (u32, u32)| match runs.last_mut() {
        // A high surrogate where the previous range ended and this one starts.
        Some((a, b, lows)) if *a == first && *b == first && first == last => lows.push(low),
        _ => runs.push((first, last, vec![low])),
    };
    for &(lo, hi) in ranges {
        let (a, b) = ((lo as u32).max(0x10000), hi as u32);
        if a > b {
            continue;
        }
        let (va, vb) = (a - 0x10000, b - 0x10000);
        let (ha, hb) = (va >> 10, vb >> 10);
        let (la, lb) = (va & 0x3FF, vb & 0x3FF);
        if ha == hb {
            add(ha, ha, (la, lb));
            continue;
        }
        add(ha, ha, (la, ALL_LOWS.1));
        if ha + 1 < hb {
            add(ha + 1, hb - 1, ALL_LOWS);
        }
        add(hb, hb, (ALL_LOWS.0, lb));
    }
    // Neighbouring runs with the same lows are one.
    let mut merged: Vec<(u32, u32, Vec<(u32, u32)>)> = Vec::with_capacity(runs.len());
    for run in runs {
        match merged.last_mut() {
            Some(last) if last.1 + 1 == run.0 && last.2 == run.2 => last.1 = run.1,
            _ => merged.push(run),
        }
    }
    let empty = g.empty();
    merged
        .into_iter()
        .map(|(first, last, lows)| {
            let low_units: Vec<(u32, u32, ExprId)> = lows
                .iter()
                .map(|&(a, b)| (0xDC00 + a, 0xDC00 + b, empty))
                .collect();
            let u = g.text("\\u");
            let low = hex_trie(g, &low_units, 4);
            let pair = g.seq([u, low]);
            (0xD800 + first, 0xD800 + last, pair)
        })
        .collect()
}

/// `digits` hex digits (either case, `digits` from 1 to 4) spelling a value of one of `units`
/// (disjoint, sorted `(lo, hi, then)`, values below `16^digits`), then that unit's `then`.
/// Each digit starts one branch at most: digits whose whole block lies in one unit share a
/// branch, the others branch into the trie of their block. Recursion: `digits` levels at most.
fn hex_trie(g: &mut GrammarBuilder, units: &[(u32, u32, ExprId)], digits: u32) -> ExprId {
    debug_assert!((1..=4).contains(&digits));
    debug_assert!(
        units.windows(2).all(|w| w[0].1 < w[1].0),
        "overlapping units"
    );
    let block = 16u32.pow(digits - 1);
    let mut whole: Vec<(ExprId, ByteSet)> = Vec::new();
    let mut branches = Vec::new();
    for d in 0..16 {
        let (lo, hi) = (d * block, d * block + block - 1);
        let inside: Vec<(u32, u32, ExprId)> = units
            .iter()
            .filter(|u| u.0 <= hi && u.1 >= lo)
            .map(|&(a, b, then)| (a.max(lo) - lo, b.min(hi) - lo, then))
            .collect();
        let then = match inside.as_slice() {
            [] => continue,
            &[(0, b, then)] if b == block - 1 => then,
            // The last digit with several units on it: they overlapped, which the callers
            // rule out; each unit's continuation keeps the language exact all the same.
            _ if digits == 1 => g.alt(inside.iter().map(|u| u.2)),
            _ => {
                let digit = g.class(hex_digits(d, d));
                let rest = hex_trie(g, &inside, digits - 1);
                branches.push(g.seq([digit, rest]));
                continue;
            }
        };
        match whole.iter_mut().find(|w| w.0 == then) {
            Some(w) => w.1 = w.1.union(&hex_digits(d, d)),
            None => whole.push((then, hex_digits(d, d))),
        }
    }
    let any = g.class(hex_digits(0, 15));
    let tail = g.repeat(any, digits - 1, Some(digits - 1));
    for (then, set) in whole {
        let first = g.class(set);
        branches.push(g.seq([first, tail, then]));
    }
    g.alt(branches)
}

fn hex_digits(lo: u32, hi: u32) -> ByteSet {
    let mut set = ByteSet::EMPTY;
    for v in lo..=hi {
        let c = char::from_digit(v, 16).unwrap() as u8;
        set.insert(c);
        set.insert(c.to_ascii_uppercase());
    }
    set
}

/// String contents of `min..=max` characters, spelled by `enc`.
pub(crate) fn any_text(
    g: &mut GrammarBuilder,
    enc: &mut dyn TextEncoding,
    min: u32,
    max: Option<u32>,
) -> ExprId {
    let unit = enc.class(g, &[ANY_CHAR]);
    g.repeat(unit, min, max)
}

/// String contents spelled by `enc` whose decoded value is none of `names`: a trie of the
/// names, built from its leaves up (a name as long as the input must not make a recursion as
/// deep), each node the names' next characters into their subtries and every other character
/// out to free text.
pub(crate) fn text_not_in(
    g: &mut GrammarBuilder,
    enc: &mut JsonText,
    names: &[&str],
    deadline: &Deadline,
) -> Result<ExprId, CompileError> {
    let rest = any_text(g, enc, 0, None);
    if names.is_empty() {
        return Ok(rest);
    }
    // Nodes are numbered as they are made, so every child comes after its parent.
    let mut ends = vec![false];
    let mut children: Vec<Vec<(char, u32)>> = vec![Vec::new()];
    let mut edges: rustc_hash::FxHashMap<(u32, char), u32> = Default::default();
    for name in names {
        let mut at = 0;
        for c in name.chars() {
            tick(deadline)?;
            let fresh = ends.len() as u32;
            let child = *edges.entry((at, c)).or_insert(fresh);
            if child == fresh {
                ends.push(false);
                children.push(Vec::new());
                children[at as usize].push((c, child));
            }
            at = child;
        }
        ends[at as usize] = true;
    }
    let mut trie = NotIn {
        g,
        enc,
        rest,
        plain_exits: [None; 2],
    };
    let mut exprs = vec![rest; ends.len()];
    for node in (0..ends.len()).rev() {
        tick(deadline)?;
        children[node].sort_unstable();
        let key: TrieNode = (
            ends[node],
            children[node]
                .iter()
                .map(|&(c, child)| (c, exprs[child as usize]))
                .collect(),
        );
        exprs[node] = match trie.enc.nodes.get(&key) {
            Some(&e) => e,
            None => {
                let e = trie.node(key.0, &key.1)?;
                trie.enc.nodes.insert(key, e);
                e
            }
        };
    }
    Ok(exprs[0])
}

/// Where a key leaves the trie of names on a character other than the ASCII ones JSON writes
/// raw: the characters it escapes in a key, and those beyond ASCII.
const EXITS: [(&str, &[(char, char)]); 2] = [
    (
        "an escaped character",
        &[('\0', '\u{1f}'), ('"', '"'), ('\\', '\\')],
    ),
    ("a wide character", &[('\u{80}', char::MAX)]),
];

/// The trie of [`text_not_in`]: at each node, the names' next characters continue the trie
/// and any other character leaves it for free text.
struct NotIn<'a> {
    g: &'a mut GrammarBuilder,
    enc: &'a mut JsonText,
    /// Any text.
    rest: ExprId,
    /// The [`EXITS`] branches of a node where no name goes on with one of their characters:
    /// names are mostly ASCII and never escaped, so almost every node shares them.
    plain_exits: [Option<ExprId>; 2],
}

impl NotIn<'_> {
    /// A node of the trie: `end` if a name ends here, `children` its next characters (sorted)
    /// and the expressions of their subtries.
    fn node(&mut self, end: bool, children: &[(char, ExprId)]) -> Result<ExprId, CompileError> {
        let mut branches = Vec::new();
        if !end {
            branches.push(self.g.empty());
        }
        let firsts: Vec<char> = children.iter().map(|&(c, _)| c).collect();
        let plain = !firsts
            .iter()
            .any(|&c| EXITS.iter().any(|(_, ranges)| contains(ranges, c)));
        for (i, (what, ranges)) in EXITS.into_iter().enumerate() {
            let exit = match plain {
                true => self.plain_exit(i)?,
                false => self.leave_by_rule(what, &without(ranges, &firsts))?,
            };
            branches.push(exit);
        }
        let ascii = without(&[(' ', '!'), ('#', '['), (']', '\x7f')], &firsts);
        branches.push(self.leave(&ascii));
        for &(c, child) in children {
            let first = self.enc.char(self.g, c);
            branches.push(self.g.seq([first, child]));
        }
        Ok(self.g.alt(branches))
    }

    /// A character of `ranges`, then any text.
    fn leave(&mut self, ranges: &[(char, char)]) -> ExprId {
        if ranges.is_empty() {
            return self.g.nothing();
        }
        let first = self.enc.class(self.g, ranges);
        self.g.seq([first, self.rest])
    }

    /// [`leave`](Self::leave) as one rule per exit: the CFG backend calls it instead of
    /// inlining a copy per node. Inlined, each node counted the escapes' dozens of states in
    /// its size even though the automaton builds them once, so a trie of a dozen names split
    /// into a dozen units that each determinized the escapes again.
    fn leave_by_rule(
        &mut self,
        what: &str,
        ranges: &[(char, char)],
    ) -> Result<ExprId, CompileError> {
        let body = self.leave(ranges);
        let name = format!("json text after {what} {}", body.index());
        let rule = match self.g.find_rule(&name) {
            Some(r) => r,
            None => {
                let r = self.g.rule(&name);
                // Fails only once the grammar is over a limit.
                self.g.define(r, body)?;
                r
            }
        };
        Ok(self.g.rule_ref(rule))
    }

    /// Exit `i` of [`EXITS`] whole, built once per trie.
    fn plain_exit(&mut self, i: usize) -> Result<ExprId, CompileError> {
        if let Some(e) = self.plain_exits[i] {
            return Ok(e);
        }
        let (what, ranges) = EXITS[i];
        let e = self.leave_by_rule(what, ranges)?;
        Ok(*self.plain_exits[i].insert(e))
    }
}

/// `ranges` (sorted, disjoint) minus the sorted characters `minus`.
fn without(ranges: &[(char, char)], minus: &[char]) -> Vec<(char, char)> {
    // Neighbours in scalar values: the surrogates are not characters.
    let before = |c: char| match c {
        '\u{e000}' => Some('\u{d7ff}'),
        c => char::from_u32((c as u32).checked_sub(1)?),
    };
    let after = |c: char| match c {
        '\u{d7ff}' => Some('\u{e000}'),
        c => char::from_u32(c as u32 + 1),
    };
    let mut out = Vec::with_capacity(ranges.len() + minus.len());
    for &(lo, hi) in ranges {
        let mut from = Some(lo);
        for &c in minus.iter().filter(|&&c| lo <= c && c <= hi) {
            if let (Some(f), Some(b)) = (from, before(c)) {
                if f <= b {
                    out.push((f, b));
                }
            }
            from = after(c);
        }
        if let Some(f) = from.filter(|&f| f <= hi) {
            out.push((f, hi));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::recognizer::{Recognizer, Terminal};
    use crate::ir::Expr;

    /// The bytes the strings of `e` begin with (`e` matches no empty string).
    fn first_bytes(g: &GrammarBuilder, e: ExprId) -> ByteSet {
        match g.expr(e) {
            Expr::Bytes(b) => ByteSet::byte(b[0]),
            Expr::Class(c) => *c,
            Expr::Seq(parts) => first_bytes(g, parts[0]),
            Expr::Alt(branches) => branches
                .iter()
                .fold(ByteSet::EMPTY, |a, &b| a.union(&first_bytes(g, b))),
            other => panic!("unexpected {other:?} in a character class"),
        }
    }

    /// A key's character of any class is one branch per first byte, its escapes a trie
    /// behind one `\`: with a branch per escape, every state of a key automaton began 34
    /// branches alike, all of which the subset construction carried at once.
    #[test]
    fn canonical_spellings_begin_with_distinct_bytes() {
        let mut g = GrammarBuilder::new();
        let class = JsonText::keys().class(&mut g, &[ANY_CHAR]);
        let Expr::Alt(branches) = g.expr(class).clone() else {
            panic!("not an alternation: {:?}", g.expr(class));
        };
        let mut seen = ByteSet::EMPTY;
        for &b in branches.iter() {
            let first = first_bytes(&g, b);
            assert!(
                seen.intersection(&first).is_empty(),
                "two branches begin alike"
            );
            seen = seen.union(&first);
        }
        assert!(seen.contains(b'\\'));

        let start = g.rule("start");
        g.define(start, class).unwrap();
        let rec = Recognizer::new(&g.finish(start).unwrap());
        let accepts = |text: &[u8]| {
            let mut chart = rec.start();
            text.iter().all(|&b| chart.push(&rec, Terminal::Byte(b))) && chart.is_accepting(&rec)
        };
        for c in ('\0'..='\u{1f}').chain(['"', '\\']) {
            let spelled = serde_json::to_string(&c.to_string()).unwrap();
            let inner = &spelled.as_bytes()[1..spelled.len() - 1];
            assert!(accepts(inner), "{spelled} rejected");
        }
        for text in ["a", "é", "😀", "/", "\x7f"] {
            assert!(accepts(text.as_bytes()), "{text:?} rejected");
        }
        for other in [r"\/", r"\u0041", r"\u000A", r"\u0020", r"\u00", "\\", "\""] {
            assert!(!accepts(other.as_bytes()), "{other} accepted");
        }
    }
}
