//! Distinct items from a list of strings (`uniqueItems` over a long `enum`): unlike free
//! strings, a list runs out. A string item is a prefix of a value not yet written, or no
//! completion of it is left; the matcher refuses the byte that makes such a dead prefix, and
//! the `,` that would open an item when every value is written.
//!
//! The grammar spells each value one way (JSON's own escapes are not in the list: values
//! holding `"`, `\` or a control character are not listed), so an item's raw content is its
//! decoded value, and a prefix is dead exactly when the values it starts are all written:
//! their number in the list is at most the number of items written in its array that it
//! starts (those are values of the list too, each once). Both are counted by bisection.

/// The values items may take, as their contents (UTF-8, no escapes), sorted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ListedStrings {
    values: Box<[Box<[u8]>]>,
}

impl ListedStrings {
    /// The list of `values` (each once), or `None` if one needs an escape in JSON.
    pub fn new(mut values: Vec<Box<[u8]>>) -> Option<ListedStrings> {
        let plain = |v: &[u8]| !v.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20);
        if !values.iter().all(|v| plain(v)) {
            return None;
        }
        values.sort_unstable();
        values.dedup();
        Some(ListedStrings {
            values: values.into(),
        })
    }

    /// How many values.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Is `value` one of the values?
    pub fn contains(&self, value: &[u8]) -> bool {
        self.values.binary_search_by(|v| (**v).cmp(value)).is_ok()
    }

    /// How many values `prefix` starts.
    pub fn starting(&self, prefix: &[u8]) -> usize {
        starting(&self.values, prefix)
    }

    /// Is `prefix` dead, `written` items of its array (values of the list, each once)
    /// starting with it? Only values it starts can complete it.
    pub fn dead(&self, prefix: &[u8], written: usize) -> bool {
        self.starting(prefix) <= written
    }
}

/// How many of `sorted` start with `prefix`: they follow each other from the first not
/// below it.
pub(crate) fn starting<T: AsRef<[u8]>>(sorted: &[T], prefix: &[u8]) -> usize {
    let from = sorted.partition_point(|v| v.as_ref() < prefix);
    sorted[from..].partition_point(|v| v.as_ref().starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::ListedStrings;

    fn list(values: &[&str]) -> ListedStrings {
        ListedStrings::new(values.iter().map(|v| v.as_bytes().into()).collect()).unwrap()
    }

    #[test]
    fn prefixes_die_when_their_values_are_written() {
        let l = list(&["ab", "abc", "b", "ab"]);
        assert_eq!(l.len(), 3);
        assert!(l.contains(b"ab") && !l.contains(b"a"));
        assert_eq!(l.starting(b"ab"), 2);
        assert_eq!(l.starting(b""), 3);
        assert_eq!(l.starting(b"c"), 0);
        // "abc" written: "ab" may still close, "abc" not.
        assert!(!l.dead(b"ab", 1));
        assert!(l.dead(b"abc", 1));
        // "abc" and "ab" written: nothing starting with "a" is left, "b" is.
        assert!(l.dead(b"a", 2));
        assert!(!l.dead(b"", 2));
        assert!(l.dead(b"", 3));
        // A prefix no value starts is dead (the grammar refuses it first).
        assert!(l.dead(b"x", 0));
    }

    #[test]
    fn values_needing_escapes_are_not_listed() {
        for v in ["a\"b", "a\\b", "a\nb"] {
            assert!(
                ListedStrings::new(vec![v.as_bytes().into()]).is_none(),
                "{v:?}"
            );
        }
    }
}
