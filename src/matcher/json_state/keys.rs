//! Objects whose properties may come in any order, kept by the matcher: the grammar of such an
//! object is any run of its members (a declared name may come again), and the matcher keeps,
//! per open object, the declared names written and how many members, refusing a name written
//! twice, a name that leaves no room for the required ones under `maxProperties`, a `,` no
//! member can follow, and a `}` before every required name (or `minProperties`).
//!
//! A name is read byte by byte against the declared names (sorted, as the grammar spells
//! them): a prefix is refused as soon as it can only become a name the object may no longer
//! take. Undeclared names, where admitted, are any others, so a prefix can always become one
//! of them unless `maxProperties` only leaves room for required names.

/// What the matcher checks on the names of an object in any order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct KeySet {
    /// The declared names with a value, as the grammar writes them between the quotes,
    /// sorted.
    names: Box<[Box<[u8]>]>,
    /// Bit `i`: `names[i]` is required.
    required: Box<[u64]>,
    min: u64,
    max: Option<u64>,
    /// Names other than the declared ones are admitted (any of them).
    others: bool,
}

/// The declared names a name being written may still become: those of `lo..hi`, which all
/// start with its `len` bytes read so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NameCursor {
    lo: u32,
    hi: u32,
    len: u32,
}

/// A name the object may not take here.
#[derive(Debug)]
pub(crate) struct NameRefused;

impl KeySet {
    /// From the declared names (with a value) and whether each is required, the bounds on
    /// how many members the object has, and whether undeclared names are admitted.
    pub fn new(
        declared: impl IntoIterator<Item = (String, bool)>,
        min: u64,
        max: Option<u64>,
        others: bool,
    ) -> KeySet {
        let mut names: Vec<(Box<[u8]>, bool)> = declared
            .into_iter()
            .map(|(name, required)| (spelled(&name), required))
            .collect();
        names.sort_unstable();
        names.dedup_by(|a, b| a.0 == b.0);
        let mut required = vec![0u64; names.len().div_ceil(64)];
        for (i, _) in names.iter().enumerate().filter(|(_, (_, r))| *r) {
            required[i / 64] |= 1 << (i % 64);
        }
        KeySet {
            names: names.into_iter().map(|(n, _)| n).collect(),
            required: required.into(),
            min,
            max,
            others,
        }
    }

    /// Is some object held to it? Its required names within `maxProperties`, `minProperties`
    /// within both, and enough names for `minProperties`.
    pub fn admits_some_object(&self) -> bool {
        let required: u64 = self.required.iter().map(|w| u64::from(w.count_ones())).sum();
        self.max.is_none_or(|m| required <= m && self.min <= m)
            && (self.others || self.names.len() as u64 >= self.min)
    }

    /// Words of the set of names written in one open object.
    pub fn words(&self) -> usize {
        self.required.len()
    }

    /// Before a name's first byte.
    pub fn cursor(&self) -> NameCursor {
        NameCursor {
            lo: 0,
            hi: self.names.len() as u32,
            len: 0,
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
        NameCursor {
            lo: c.lo + range.partition_point(|n| below(n, false)) as u32,
            hi: c.lo + range.partition_point(|n| below(n, true)) as u32,
            len: c.len + 1,
        }
    }

    /// Can a name read as far as `c` still become one the object takes, `written` and
    /// `count` members written?
    pub fn viable(&self, c: NameCursor, written: &[u64], count: u64) -> bool {
        let only_required = self.tight(written, count);
        (self.others && !only_required)
            || (c.lo..c.hi).any(|i| !has(written, i) && (!only_required || has(&self.required, i)))
    }

    /// Is every name admitted (undeclared ones, with room for them), so that only the closing
    /// quote of a declared one may be refused?
    pub fn admits_any_name(&self, written: &[u64], count: u64) -> bool {
        self.others && !self.tight(written, count)
    }

    /// A name read as far as `c` closes: the declared name it is, if one, or refused.
    pub fn close(
        &self,
        c: NameCursor,
        written: &[u64],
        count: u64,
    ) -> Result<Option<u32>, NameRefused> {
        let whole = (c.lo < c.hi && self.names[c.lo as usize].len() == c.len as usize)
            .then_some(c.lo);
        let only_required = self.tight(written, count);
        let taken = match whole {
            Some(i) => !has(written, i) && (!only_required || has(&self.required, i)),
            None => self.others && !only_required,
        };
        match taken {
            true => Ok(whole),
            false => Err(NameRefused),
        }
    }

    /// May a `,` (another member) follow?
    pub fn may_add(&self, written: &[u64], count: u64) -> bool {
        self.max.is_none_or(|m| count < m)
            && (self.others || (0..self.names.len() as u32).any(|i| !has(written, i)))
    }

    /// May a `}` follow?
    pub fn may_close(&self, written: &[u64], count: u64) -> bool {
        self.missing(written) == 0 && count >= self.min
    }

    /// Does `maxProperties` leave room only for the required names not yet written?
    fn tight(&self, written: &[u64], count: u64) -> bool {
        self.max
            .is_some_and(|m| count + self.missing(written) >= m)
    }

    fn missing(&self, written: &[u64]) -> u64 {
        self.required
            .iter()
            .zip(written)
            .map(|(r, w)| u64::from((r & !w).count_ones()))
            .sum()
    }
}

/// Is bit `i` of `words` on?
pub(crate) fn has(words: &[u64], i: u32) -> bool {
    words[i as usize / 64] >> (i % 64) & 1 == 1
}

/// Turns bit `i` of `words` on.
pub(crate) fn put(words: &mut [u64], i: u32) {
    words[i as usize / 64] |= 1 << (i % 64);
}

/// A name as the grammar writes it between the quotes (JSON's escapes).
fn spelled(name: &str) -> Box<[u8]> {
    let quoted = serde_json::Value::from(name).to_string().into_bytes();
    quoted[1..quoted.len() - 1].into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[(&str, bool)], min: u64, max: Option<u64>, others: bool) -> KeySet {
        KeySet::new(
            names.iter().map(|&(n, r)| (n.to_string(), r)),
            min,
            max,
            others,
        )
    }

    fn cursor(k: &KeySet, text: &str) -> NameCursor {
        text.bytes().fold(k.cursor(), |c, b| k.read(c, b))
    }

    #[test]
    fn a_prefix_lives_while_an_unwritten_name_starts_with_it() {
        let k = set(&[("a", false), ("ab", false), ("b", true)], 0, None, false);
        let mut written = vec![0u64];
        let a = cursor(&k, "a");
        assert_eq!(k.close(a, &written, 0).unwrap(), Some(0));
        put(&mut written, 0);
        assert!(k.close(a, &written, 1).is_err());
        assert!(k.viable(a, &written, 1), "\"ab\" is still free");
        assert!(k.viable(cursor(&k, "ab"), &written, 1));
        assert!(!k.viable(cursor(&k, "c"), &written, 1));
        assert!(!k.may_close(&written, 1), "\"b\" is required");
        assert!(k.may_add(&written, 1));
    }

    #[test]
    fn max_properties_leaves_room_only_for_required_names() {
        let k = set(&[("a", false), ("b", true)], 0, Some(1), true);
        let written = vec![0u64];
        assert!(!k.viable(cursor(&k, "a"), &written, 0));
        assert!(!k.viable(cursor(&k, "x"), &written, 0));
        assert!(k.viable(cursor(&k, "b"), &written, 0));
        assert!(k.close(cursor(&k, "zz"), &written, 0).is_err());
        let unbounded = set(&[("a", false), ("b", true)], 0, None, true);
        assert_eq!(unbounded.close(cursor(&k, "zz"), &written, 0).unwrap(), None);
    }

    #[test]
    fn names_are_read_as_spelled() {
        let k = set(&[("q\"t", false), ("é\n", false)], 0, None, false);
        assert_eq!(k.close(cursor(&k, "q\\\"t"), &[0], 0).unwrap(), Some(0));
        assert_eq!(k.close(cursor(&k, "é\\n"), &[0], 0).unwrap(), Some(1));
        assert!(k.close(cursor(&k, "\\u00e9\\n"), &[0], 0).is_err());
    }
}
