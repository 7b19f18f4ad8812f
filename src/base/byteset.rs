//! Sets of bytes: the byte classes of the grammar IR, the automata and the token slices.

use std::fmt;

/// A set of bytes (a byte class).
///
/// # Example
///
/// ```
/// use formwork::ByteSet;
///
/// let digits = ByteSet::range(b'0', b'9');
/// assert!(digits.contains(b'7'));
/// assert_eq!(digits.len(), 10);
/// assert_eq!(digits.single(), None);
/// assert_eq!(ByteSet::byte(b'x').single(), Some(b'x'));
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ByteSet([u64; 4]);

impl ByteSet {
    /// No byte.
    pub const EMPTY: ByteSet = ByteSet([0; 4]);
    /// Every byte.
    pub const FULL: ByteSet = ByteSet([u64::MAX; 4]);

    /// One byte.
    pub fn byte(b: u8) -> ByteSet {
        let mut s = ByteSet::EMPTY;
        s.insert(b);
        s
    }

    /// The bytes `lo..=hi`.
    pub fn range(lo: u8, hi: u8) -> ByteSet {
        let mut s = ByteSet::EMPTY;
        s.insert_range(lo, hi);
        s
    }

    /// Adds a byte.
    pub fn insert(&mut self, b: u8) {
        self.0[b as usize / 64] |= 1 << (b % 64);
    }

    /// Adds `lo..=hi`.
    pub fn insert_range(&mut self, lo: u8, hi: u8) {
        for b in lo..=hi {
            self.insert(b);
        }
    }

    /// Does the set hold `b`?
    #[inline]
    pub fn contains(&self, b: u8) -> bool {
        self.0[b as usize / 64] & (1 << (b % 64)) != 0
    }

    /// Number of bytes in the set.
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// True if no byte is in the set.
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    /// The only byte, if the set has exactly one.
    pub fn single(&self) -> Option<u8> {
        (self.len() == 1).then(|| self.iter().next().unwrap())
    }

    /// Union.
    pub fn union(&self, other: &ByteSet) -> ByteSet {
        ByteSet(std::array::from_fn(|i| self.0[i] | other.0[i]))
    }

    /// Intersection.
    pub fn intersection(&self, other: &ByteSet) -> ByteSet {
        ByteSet(std::array::from_fn(|i| self.0[i] & other.0[i]))
    }

    /// Complement.
    pub fn complement(&self) -> ByteSet {
        ByteSet(std::array::from_fn(|i| !self.0[i]))
    }

    /// The bytes in ascending order (a word at a time: grammars hold many sparse sets).
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &word)| {
            let mut w = word;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = (i * 64) as u32 + w.trailing_zeros();
                    w &= w - 1;
                    b as u8
                })
            })
        })
    }

    /// The set as maximal ranges `(lo, hi)`.
    pub fn ranges(&self) -> Vec<(u8, u8)> {
        let mut out: Vec<(u8, u8)> = Vec::new();
        for b in self.iter() {
            match out.last_mut() {
                Some((_, hi)) if *hi as u16 + 1 == b as u16 => *hi = b,
                _ => out.push((b, b)),
            }
        }
        out
    }

    /// The four 64-bit words (bit `b % 64` of word `b / 64`).
    pub fn words(&self) -> [u64; 4] {
        self.0
    }
}

impl fmt::Debug for ByteSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (lo, hi) in self.ranges() {
            if lo == hi {
                write!(f, "{}", std::ascii::escape_default(lo))?;
            } else {
                write!(
                    f,
                    "{}-{}",
                    std::ascii::escape_default(lo),
                    std::ascii::escape_default(hi)
                )?;
            }
        }
        f.write_str("]")
    }
}
