//! Walking sorted lists of byte strings by their shared prefixes.

/// Steps the byte string of each of `items` from `root`, reusing the states of the prefix it
/// shares with the previous one, so items sharing a prefix must be contiguous. Those behind a
/// rejected prefix are found by a galloping search and reported at once, which is what keeps
/// the thousands of tokens behind a space cheap. Reports runs of items with whether all their
/// bytes were taken, and the last state reached (after the whole string, or before the
/// rejected byte). Nothing but the items' own bytes is read: a trie walk to a sparse list
/// would touch every sibling on the way, each a cache miss.
///
/// `advance(state, byte, slot)` writes the state after `byte` into `slot` and says whether the
/// byte was taken. The slot holds a state of an earlier item at that depth, so a state that
/// owns memory (a cursor's thread list) reuses it instead of allocating at every byte.
pub(crate) fn walk_sorted<'b, T: Copy, S: Clone, E>(
    items: &[T],
    bytes_of: impl Fn(T) -> &'b [u8],
    root: S,
    mut advance: impl FnMut(&S, u8, &mut S) -> Result<bool, E>,
    mut report: impl FnMut(&[T], bool, &S),
) -> Result<(), E> {
    // path[d]: the state after the current item's first d bytes, for d <= depth; the slots
    // past it are kept for reuse.
    let mut path = vec![root];
    let mut depth = 0;
    let mut prev: &[u8] = &[];
    let mut i = 0;
    while i < items.len() {
        let bytes = bytes_of(items[i]);
        let common = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
        prev = bytes;
        depth = depth.min(common);
        let mut taken = true;
        while depth < bytes.len() {
            if path.len() == depth + 1 {
                path.push(path[depth].clone());
            }
            let (done, rest) = path.split_at_mut(depth + 1);
            if !advance(&done[depth], bytes[depth], &mut rest[0])? {
                taken = false;
                break;
            }
            depth += 1;
        }
        let run = if taken {
            1
        } else {
            let prefix = &bytes[..depth + 1];
            1 + gallop(&items[i + 1..], |&t| bytes_of(t).starts_with(prefix))
        };
        report(&items[i..i + run], taken, &path[depth]);
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
