//! 128-bit structural hashes: the cache keys that let two constraints share masks.
//!
//! Keys are compared by hash only, so the hash is 128 bits wide: with a few million cached
//! states the chance of any accidental collision stays below 1e-25. The mixer is two
//! independent 64-bit multiply-fold lanes (the wyhash construction); inputs are not adversarial.

const K0: u64 = 0xa076_1d64_78bd_642f;
const K1: u64 = 0xe703_7ed1_a0b4_28db;
const K2: u64 = 0x8ebc_6af0_9c88_c6e3;
const K3: u64 = 0x5899_65cc_7537_4cc3;

#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let r = (a as u128).wrapping_mul(b as u128);
    (r as u64) ^ ((r >> 64) as u64)
}

/// Builds a structural hash from a sequence of words.
///
/// # Example
///
/// ```
/// use formwork::ir::StructHasher;
///
/// let mut a = StructHasher::new(1);
/// a.word(42).bytes(b"abc");
/// let mut b = StructHasher::new(1);
/// b.word(42).bytes(b"abc");
/// assert_eq!(a.finish(), b.finish());
/// let mut c = StructHasher::new(2);
/// c.word(42).bytes(b"abc");
/// assert_ne!(a.finish(), c.finish());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct StructHasher {
    lo: u64,
    hi: u64,
}

impl StructHasher {
    /// A hasher for one kind of structure; `domain` separates kinds (a Write from a DFA, ...).
    pub fn new(domain: u64) -> StructHasher {
        StructHasher { lo: fold(domain ^ K0, K1), hi: fold(domain ^ K2, K3) }
    }

    /// Mixes in one word.
    #[inline]
    pub fn word(&mut self, w: u64) -> &mut Self {
        self.lo = fold(self.lo ^ w, K1 ^ self.hi.rotate_left(17));
        self.hi = fold(self.hi ^ w, K3) ^ self.lo.rotate_left(29);
        self
    }

    /// Mixes in a 128-bit hash.
    pub fn hash(&mut self, h: u128) -> &mut Self {
        self.word(h as u64).word((h >> 64) as u64)
    }

    /// Mixes in bytes, length-prefixed.
    pub fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        self.word(bytes.len() as u64);
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.word(u64::from_le_bytes(w));
        }
        self
    }

    /// The hash.
    pub fn finish(&self) -> u128 {
        let lo = fold(self.lo ^ K2, self.hi ^ K0);
        let hi = fold(self.hi ^ K1, self.lo ^ K3);
        ((hi as u128) << 64) | lo as u128
    }
}
