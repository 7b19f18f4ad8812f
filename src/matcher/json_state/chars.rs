//! Characters of a JSON string as the matcher reads them, byte by byte: a character may be
//! split across tokens (a UTF-8 sequence, an escape), and a pattern's automaton over
//! characters must still say whether the prefix read can go on. [`Spelling`] decodes the
//! bytes and tells what a character split so far may still become; [`CharTable`] is the
//! automaton, stepped by whole characters and asked about the candidates of a split one.

/// No transition, in a [`CharTable`].
pub(crate) const DEAD: u32 = u32::MAX;

/// The largest Unicode scalar value.
const MAX_CHAR: u32 = 0x10_FFFF;

/// A DFA over characters (code points), laid out flat: `next[q * atoms.len() + a]`.
#[derive(Clone, Debug)]
pub(crate) struct CharTable {
    /// A sorted partition of the characters into ranges no transition tells apart.
    atoms: Vec<(u32, u32)>,
    /// The state after each atom, or [`DEAD`].
    next: Vec<u32>,
    accept: Vec<bool>,
}

impl CharTable {
    /// From the automaton's atoms, transitions and accepting states (start state `0`).
    pub fn new(atoms: Vec<(u32, u32)>, next: Vec<u32>, accept: Vec<bool>) -> CharTable {
        debug_assert_eq!(next.len(), atoms.len() * accept.len());
        CharTable {
            atoms,
            next,
            accept,
        }
    }

    /// How many states it has.
    pub fn states(&self) -> usize {
        self.accept.len()
    }

    /// Does a string ending in state `q` belong to the language?
    pub fn accepts(&self, q: u32) -> bool {
        self.accept[q as usize]
    }

    /// The states `q` steps to, each once per atom (repeats possible).
    pub fn targets(&self, q: u32) -> impl Iterator<Item = u32> + '_ {
        let width = self.atoms.len();
        self.next[q as usize * width..(q as usize + 1) * width]
            .iter()
            .copied()
            .filter(|&t| t != DEAD)
    }

    /// The state after character `c` from `q`.
    pub fn step(&self, q: u32, c: u32) -> u32 {
        let a = self.atoms.partition_point(|&(_, hi)| hi < c);
        match self.atoms.get(a) {
            Some(&(lo, _)) if lo <= c => self.next[q as usize * self.atoms.len() + a],
            _ => DEAD,
        }
    }

    /// Does some character of `ranges` lead from `q` to a state that passes `ok`?
    pub fn any_through(&self, q: u32, ranges: &[(u32, u32)], ok: impl Fn(u32) -> bool) -> bool {
        let width = self.atoms.len();
        ranges.iter().any(|&(lo, hi)| {
            let first = self.atoms.partition_point(|&(_, end)| end < lo);
            self.atoms[first..]
                .iter()
                .take_while(|&&(start, _)| start <= hi)
                .enumerate()
                .any(|(k, _)| {
                    let t = self.next[q as usize * width + first + k];
                    t != DEAD && ok(t)
                })
        })
    }
}

/// A character split across bytes: what is read of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Spelling {
    /// Between characters.
    #[default]
    Whole,
    /// A UTF-8 sequence: the code point's bits so far, the continuation bytes left, and the
    /// least code point of its length (shorter ones are overlong: no character).
    Utf8 { bits: u32, left: u8, least: u32 },
    /// `\`.
    Escape,
    /// `\u` and `digits` hex digits of `unit`; after a high surrogate `high` (0: none).
    Hex { unit: u32, digits: u8, high: u32 },
    /// A high surrogate, waiting for its low one's `\` (`backslash` false) or `u`.
    Low { high: u32, backslash: bool },
}

/// What one byte of a string's content did to its characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decoded {
    /// It completed this character.
    Char(u32),
    /// The character goes on in the next bytes.
    Partial,
    /// No JSON string holds these bytes.
    Invalid,
}

/// Up to three code point ranges (see [`Spelling::candidates`]) and how many there are.
pub(crate) type Candidates = ([(u32, u32); 3], usize);

impl Spelling {
    /// Reads content byte `b` (not a closing quote: between characters, `"` closes the
    /// string, which is the caller's to see).
    pub fn read(&mut self, b: u8) -> Decoded {
        let (next, done) = match (*self, b) {
            (Spelling::Whole, b'\\') => (Spelling::Escape, None),
            (Spelling::Whole, 0..=0x7F) => (Spelling::Whole, Some(b as u32)),
            (Spelling::Whole, 0xC0..=0xDF) => (utf8(b & 0x1F, 1, 0x80), None),
            (Spelling::Whole, 0xE0..=0xEF) => (utf8(b & 0x0F, 2, 0x800), None),
            (Spelling::Whole, 0xF0..=0xF7) => (utf8(b & 0x07, 3, 0x1_0000), None),
            (Spelling::Utf8 { bits, left, least }, 0x80..=0xBF) => {
                let bits = bits << 6 | (b & 0x3F) as u32;
                match left {
                    1 => (Spelling::Whole, Some(bits)),
                    _ => (
                        Spelling::Utf8 {
                            bits,
                            left: left - 1,
                            least,
                        },
                        None,
                    ),
                }
            }
            (Spelling::Escape, b'u') => (hex(0), None),
            (Spelling::Escape, _) => (Spelling::Whole, Some(short_escape(b))),
            (Spelling::Hex { unit, digits, high }, _) => match (b as char).to_digit(16) {
                Some(d) => hex_digit(unit << 4 | d, digits + 1, high),
                None => return Decoded::Invalid,
            },
            (Spelling::Low { high, backslash }, _) => match (backslash, b) {
                (false, b'\\') => (
                    Spelling::Low {
                        high,
                        backslash: true,
                    },
                    None,
                ),
                (true, b'u') => (hex(high), None),
                _ => return Decoded::Invalid,
            },
            _ => return Decoded::Invalid,
        };
        *self = next;
        match done {
            None => Decoded::Partial,
            Some(DEAD) => Decoded::Invalid,
            Some(c) => Decoded::Char(c),
        }
    }

    /// The characters a split one may still become (`None`: none is split). `canonical`: as
    /// object keys are written ([`crate::front::json_schema`]'s key spelling: raw but for
    /// `"`, `\` and the controls, those as their short escape or `\u00xx`), so an escape can
    /// only become one of these.
    pub fn candidates(&self, canonical: bool) -> Option<Candidates> {
        let mut out = [(0, 0); 3];
        let mut len = 0;
        let mut push = |lo: u32, hi: u32| {
            if lo <= hi {
                out[len] = (lo, hi);
                len += 1;
            }
        };
        match *self {
            Spelling::Whole => return None,
            Spelling::Utf8 { bits, left, least } => {
                // A lead byte `E0` or `F0` (and `F0 80`..`F0 8F`) spans overlong code points
                // too: they are no characters, and may be viable where the true ones are not.
                let first = bits << (6 * left as u32);
                let lo = first.max(least);
                let hi = (first | ((1 << (6 * left as u32)) - 1)).min(MAX_CHAR);
                push(lo, hi.min(0xD7FF));
                push(lo.max(0xE000), hi);
            }
            Spelling::Escape if canonical => {
                push(0, 0x1F);
                push(0x22, 0x22);
                push(0x5C, 0x5C);
            }
            Spelling::Escape => {
                push(0, 0xD7FF);
                push(0xE000, MAX_CHAR);
            }
            Spelling::Hex { unit, digits, .. } if canonical => {
                // `\u00xx` spells only the controls without a short escape: `\b` (8), `\t`
                // (9), `\n` (10), `\f` (12) and `\r` (13) are written short.
                let span = 1u32 << (4 * (4 - digits as u32));
                let (lo, hi) = (unit * span, unit * span + span - 1);
                for (a, b) in [(0x00, 0x07), (0x0B, 0x0B), (0x0E, 0x1F)] {
                    push(lo.max(a), hi.min(b));
                }
            }
            Spelling::Hex { unit, digits, high } => {
                let span = 1u32 << (4 * (4 - digits as u32));
                let (lo, hi) = (unit * span, unit * span + span - 1);
                if high != 0 {
                    let (a, b) = (lo.max(0xDC00), hi.min(0xDFFF));
                    if a <= b {
                        push(pair(high, a), pair(high, b));
                    }
                } else {
                    push(lo, hi.min(0xD7FF));
                    push(lo.max(0xE000), hi);
                    let (a, b) = (lo.max(0xD800), hi.min(0xDBFF));
                    if a <= b {
                        push(pair(a, 0xDC00), pair(b, 0xDFFF));
                    }
                }
            }
            Spelling::Low { high, .. } => push(pair(high, 0xDC00), pair(high, 0xDFFF)),
        }
        Some((out, len))
    }
}

fn utf8(bits: u8, left: u8, least: u32) -> Spelling {
    Spelling::Utf8 {
        bits: bits as u32,
        left,
        least,
    }
}

fn hex(high: u32) -> Spelling {
    Spelling::Hex {
        unit: 0,
        digits: 0,
        high,
    }
}

/// After the `digits`-th hex digit of a `\u` escape (`unit` so far): the spelling, and the
/// character if complete ([`DEAD`]: a lone or misplaced surrogate).
fn hex_digit(unit: u32, digits: u8, high: u32) -> (Spelling, Option<u32>) {
    if digits < 4 {
        return (Spelling::Hex { unit, digits, high }, None);
    }
    let c = match (high, unit) {
        (0, 0xD800..=0xDBFF) => {
            return (
                Spelling::Low {
                    high: unit,
                    backslash: false,
                },
                None,
            )
        }
        (0, 0xDC00..=0xDFFF) => DEAD,
        (0, _) => unit,
        (_, 0xDC00..=0xDFFF) => pair(high, unit),
        _ => DEAD,
    };
    (Spelling::Whole, Some(c))
}

/// The character of a surrogate pair.
fn pair(high: u32, low: u32) -> u32 {
    0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
}

/// The character of a short escape's letter ([`DEAD`] for no escape).
fn short_escape(letter: u8) -> u32 {
    match letter {
        b'"' | b'\\' | b'/' => letter as u32,
        b'b' => 0x08,
        b'f' => 0x0C,
        b'n' => 0x0A,
        b'r' => 0x0D,
        b't' => 0x09,
        _ => DEAD,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: &[u8]) -> (Spelling, Vec<Decoded>) {
        let mut s = Spelling::default();
        let out = bytes.iter().map(|&b| s.read(b)).collect();
        (s, out)
    }

    #[test]
    fn spellings_decode_to_their_characters() {
        let chars = |bytes: &[u8]| -> Vec<u32> {
            read_all(bytes)
                .1
                .into_iter()
                .filter_map(|d| match d {
                    Decoded::Char(c) => Some(c),
                    Decoded::Partial => None,
                    Decoded::Invalid => Some(DEAD),
                })
                .collect()
        };
        assert_eq!(chars("aé".as_bytes()), vec![0x61, 0xE9]);
        assert_eq!(chars(br"\n\u00e9\/"), vec![0x0A, 0xE9, 0x2F]);
        assert_eq!(chars(br"\ud83d\ude00"), vec![0x1F600]);
        assert_eq!(chars(br"\ude00"), vec![DEAD], "a lone low surrogate");
        assert_eq!(chars(br"\x"), vec![DEAD]);
    }

    #[test]
    fn a_split_character_may_become_only_its_candidates() {
        let ranges = |bytes: &[u8], canonical: bool| {
            let (s, _) = read_all(bytes);
            s.candidates(canonical).map(|(r, n)| r[..n].to_vec())
        };
        assert_eq!(ranges(b"a", false), None);
        assert_eq!(ranges(&[0xC3], false), Some(vec![(0xC0, 0xFF)]));
        // `E0 80` could only be overlong.
        assert_eq!(ranges(&[0xE0, 0x80], false), Some(vec![]));
        assert_eq!(
            ranges(br"\", true),
            Some(vec![(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])
        );
        assert_eq!(
            ranges(br"\u000", true),
            Some(vec![(0, 7), (0x0B, 0x0B), (0x0E, 0x0F)])
        );
        assert_eq!(ranges(br"\u00e", true), Some(vec![]));
        assert_eq!(ranges(br"\u00e", false), Some(vec![(0xE0, 0xEF)]));
    }
}
