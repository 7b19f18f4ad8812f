//! Integer ranges as digit sequences: the decimal numerals (no leading zeros) of the integers
//! between two bounds, as sequences of per-position digit ranges, the way one writes a regex
//! for `[13, 472]`. One algorithm for JSON Schema's integer bounds (rendered as grammar IR by
//! `json_schema::numbers`) and request ranges `lo..hi` (rendered as a regex by
//! `request::range`, whose operators are compiled from regex text).

use crate::front::guard::guarded;

/// Decimal numerals (digits most significant first, no leading zeros; `lo` may be `[0]`) of the
/// integers in `lo..=hi`, by length, as sequences of per-position digit ranges. With no `hi`,
/// only the numerals as long as `lo`: the caller adds the longer ones, all of which are in.
pub(crate) fn uint_sequences(lo: &[u8], hi: Option<&[u8]>) -> Vec<Vec<(u8, u8)>> {
    let mut out = Vec::new();
    let max_len = hi.map_or(lo.len(), <[u8]>::len);
    for len in lo.len()..=max_len {
        let a: Vec<u8> = match len == lo.len() {
            true => lo.to_vec(),
            false => std::iter::once(1)
                .chain(std::iter::repeat_n(0, len - 1))
                .collect(),
        };
        let b: Vec<u8> = match hi {
            Some(h) if h.len() == len => h.to_vec(),
            _ => vec![9; len],
        };
        if len == lo.len() && hi.is_some_and(|h| h.len() == len) && a > b {
            continue;
        }
        split(&a, &b, &mut Vec::new(), &mut out);
    }
    out
}

/// Fixed-width digit strings between `lo` and `hi` inclusive, appended to `out` after `prefix`,
/// like `regex_syntax::utf8`'s sequences:
///
/// ```text
/// 1 2 3 ..= 4 5 6  →  1 [2] [3-9] | 1 [3-9] [0-9] | [2-3] [0-9] [0-9] | 4 [0-4] [0-9] | 4 5 [0-6]
/// ```
///
/// Recursion: one level per digit (a bound's digits, a few hundred at most for an `f64`),
/// each guarded.
fn split(lo: &[u8], hi: &[u8], prefix: &mut Vec<(u8, u8)>, out: &mut Vec<Vec<(u8, u8)>>) {
    guarded(|| split_step(lo, hi, prefix, out))
}

fn split_step(lo: &[u8], hi: &[u8], prefix: &mut Vec<(u8, u8)>, out: &mut Vec<Vec<(u8, u8)>>) {
    let Some((&l, lo_rest)) = lo.split_first() else {
        out.push(prefix.clone());
        return;
    };
    // Cannot fail: every caller passes bounds of one width, and each step shortens both.
    let (&h, hi_rest) = hi.split_first().expect("equal widths");
    let full = |prefix: &[(u8, u8)], first: (u8, u8)| -> Vec<(u8, u8)> {
        let mut v = prefix.to_vec();
        v.push(first);
        v.extend(std::iter::repeat_n((0, 9), lo_rest.len()));
        v
    };
    if l == h {
        prefix.push((l, l));
        split(lo_rest, hi_rest, prefix, out);
        prefix.pop();
        return;
    }
    let lo_min = lo_rest.iter().all(|&d| d == 0);
    let hi_max = hi_rest.iter().all(|&d| d == 9);
    let mut first = l;
    if !lo_min {
        let top = vec![9; lo_rest.len()];
        prefix.push((l, l));
        split(lo_rest, &top, prefix, out);
        prefix.pop();
        first = l + 1;
    }
    let last = if hi_max { h } else { h - 1 };
    if first <= last {
        out.push(full(prefix, (first, last)));
    }
    if !hi_max {
        let bottom = vec![0; hi_rest.len()];
        prefix.push((h, h));
        split(&bottom, hi_rest, prefix, out);
        prefix.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digits(n: u64) -> Vec<u8> {
        n.to_string().bytes().map(|b| b - b'0').collect()
    }

    /// Every numeral of the sequences, as integers.
    fn numbers(seqs: &[Vec<(u8, u8)>]) -> Vec<u64> {
        let mut out = Vec::new();
        for seq in seqs {
            let mut values = vec![0u64];
            for &(lo, hi) in seq {
                values = values
                    .iter()
                    .flat_map(|v| (lo..=hi).map(move |d| v * 10 + d as u64))
                    .collect();
            }
            out.extend(values);
        }
        out.sort_unstable();
        out
    }

    #[test]
    fn sequences_cover_exactly_the_range() {
        for (lo, hi) in [
            (0, 0),
            (0, 9),
            (1, 20),
            (5, 123),
            (19, 1001),
            (123, 456),
            (100, 999),
        ] {
            let seqs = uint_sequences(&digits(lo), Some(&digits(hi)));
            assert_eq!(numbers(&seqs), (lo..=hi).collect::<Vec<_>>(), "{lo}..={hi}");
            // No leading zeros: a numeral of two digits or more starts with 1-9.
            assert!(seqs.iter().all(|s| s.len() == 1 || s[0].0 >= 1));
        }
        assert_eq!(
            uint_sequences(&digits(7), Some(&digits(3))),
            Vec::<Vec<_>>::new()
        );
    }

    #[test]
    fn without_a_top_only_numerals_as_long_as_the_bottom() {
        let seqs = uint_sequences(&digits(42), None);
        assert_eq!(numbers(&seqs), (42..=99).collect::<Vec<_>>());
    }
}
