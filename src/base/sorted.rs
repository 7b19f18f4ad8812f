//! Walking sorted lists of byte strings by their shared prefixes.

/// Steps the byte string of each of `items` from `root`, reusing the states of the prefix it
/// shares with the previous one, so items sharing a prefix must be contiguous. Those behind a
/// rejected prefix are found by a galloping search and reported at once, which is what keeps
/// the thousands of tokens behind a space cheap. Reports runs of items with whether all their
/// bytes were taken, and the last state reached (after the whole string, or before the
/// rejected byte). Nothing but the items' own bytes is read: a trie walk to a sparse list
/// would touch every sibling on the way, each a cache miss.
pub(crate) fn walk_sorted<'b, T: Copy, S: Clone, E>(
    items: &[T],
    bytes_of: impl Fn(T) -> &'b [u8],
    root: S,
    mut advance: impl FnMut(&S, u8) -> Result<Option<S>, E>,
    mut report: impl FnMut(&[T], bool, &S),
) -> Result<(), E> {
    // path[d]: the state after the current item's first d bytes.
    let mut path = vec![root];
    let mut prev: &[u8] = &[];
    let mut i = 0;
    while i < items.len() {
        let bytes = bytes_of(items[i]);
        let common = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
        prev = bytes;
        path.truncate(common.min(path.len() - 1) + 1);
        let mut taken = true;
        while path.len() <= bytes.len() {
            let d = path.len() - 1;
            match advance(&path[d], bytes[d])? {
                Some(next) => path.push(next),
                None => {
                    taken = false;
                    break;
                }
            }
        }
        let run = if taken {
            1
        } else {
            let prefix = &bytes[..path.len()];
            1 + gallop(&items[i + 1..], |&t| bytes_of(t).starts_with(prefix))
        };
        report(&items[i..i + run], taken, &path[path.len() - 1]);
        i += run;
    }
    Ok(())
}

/// How many items at the start of `items` satisfy `pred` (which holds for a prefix of them),
/// by galloping: a run of one or two costs a probe or two, a long run a binary search.
pub(crate) fn gallop<T>(items: &[T], pred: impl Fn(&T) -> bool) -> usize {
    let mut end = 1;
    while end <= items.len() && pred(&items[end - 1]) {
        end *= 2;
    }
    let lo = end / 2;
    lo + items[lo..end.min(items.len())].partition_point(pred)
}
