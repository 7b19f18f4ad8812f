//! Integer ranges as regexes: `lo..hi` → the decimal numerals in range, no leading zeros.

/// A regex (alternation of digit-class runs) whose language is the decimal numerals of the
/// integers in `lo..=hi`: no leading zeros, no `+`, no `-0`. `None` if `lo > hi`.
///
/// # Example
///
/// ```
/// use formwork::request::int_range_regex;
///
/// assert_eq!(int_range_regex(1, 20).unwrap(), "[1-9]|1[0-9]|20");
/// assert_eq!(int_range_regex(-5, 5).unwrap(), "-(?:[1-5])|[0-5]");
/// assert_eq!(int_range_regex(3, 2), None);
/// ```
pub fn int_range_regex(lo: i64, hi: i64) -> Option<String> {
    if lo > hi {
        return None;
    }
    let (lo, hi) = (lo as i128, hi as i128);
    let mut parts = Vec::new();
    if lo < 0 {
        // Negative numbers: magnitudes max(1, -hi)..=-lo.
        let mut negative = Vec::new();
        unsigned(hi.min(-1).unsigned_abs(), lo.unsigned_abs(), &mut negative);
        parts.push(format!("-(?:{})", negative.join("|")));
    }
    if hi >= 0 {
        unsigned(lo.max(0) as u128, hi as u128, &mut parts);
    }
    Some(parts.join("|"))
}

/// Alternatives for `lo..=hi`, split by numeral length.
fn unsigned(lo: u128, hi: u128, out: &mut Vec<String>) {
    let mut from = lo;
    while from <= hi {
        let len = from.to_string().len() as u32;
        let top = 10u128.pow(len) - 1;
        let to = hi.min(top);
        same_length(
            from.to_string().as_bytes(),
            to.to_string().as_bytes(),
            String::new(),
            out,
        );
        from = to + 1;
    }
}

/// Alternatives for the numerals between `a` and `b` (equal length, `a <= b`), after `prefix`.
/// Recurses once per digit: at most 40 deep for 128-bit magnitudes.
fn same_length(a: &[u8], b: &[u8], prefix: String, out: &mut Vec<String>) {
    let Some((&a0, a_rest)) = a.split_first() else {
        out.push(prefix);
        return;
    };
    let (&b0, b_rest) = b.split_first().expect("equal lengths");
    let n = a_rest.len();
    if a0 == b0 {
        return same_length(a_rest, b_rest, format!("{prefix}{}", a0 as char), out);
    }
    let any_digits = |n: usize| match n {
        0 => String::new(),
        1 => "[0-9]".to_string(),
        n => format!("[0-9]{{{n}}}"),
    };
    let class = |x: u8, y: u8| {
        if x == y {
            (x as char).to_string()
        } else {
            format!("[{}-{}]", x as char, y as char)
        }
    };
    // The low end keeps `a0` with the tail a_rest..=99..9, unless that is every tail.
    let mut mid_lo = a0;
    if a_rest.iter().any(|&d| d != b'0') {
        let nines = vec![b'9'; n];
        same_length(a_rest, &nines, format!("{prefix}{}", a0 as char), out);
        mid_lo = a0 + 1;
    }
    let high_full = b_rest.iter().all(|&d| d == b'9');
    let mid_hi = if high_full { b0 } else { b0 - 1 };
    if mid_lo <= mid_hi {
        out.push(format!(
            "{prefix}{}{}",
            class(mid_lo, mid_hi),
            any_digits(n)
        ));
    }
    if !high_full {
        let zeros = vec![b'0'; n];
        same_length(&zeros, b_rest, format!("{prefix}{}", b0 as char), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the regex against every integer near the range (with the regex crate as the
    /// independent judge of the pattern's language).
    fn check(lo: i64, hi: i64) {
        let pattern = int_range_regex(lo, hi).unwrap();
        let re = regex::Regex::new(&format!("^(?:{pattern})$")).unwrap();
        let span = (hi - lo).min(3000);
        for n in lo.saturating_sub(150)..=lo.saturating_add(span).saturating_add(150) {
            assert_eq!(
                re.is_match(&n.to_string()),
                (lo..=hi).contains(&n),
                "{lo}..{hi}: {n} with {pattern}"
            );
        }
        for n in hi.saturating_sub(150)..=hi.saturating_add(150) {
            assert_eq!(re.is_match(&n.to_string()), (lo..=hi).contains(&n));
        }
        for bad in ["", "-0", "+1", "01", "-", "1.0"] {
            assert!(!re.is_match(bad), "{lo}..{hi} accepts {bad:?}");
        }
    }

    #[test]
    fn ranges_match_exactly_their_integers() {
        for (lo, hi) in [
            (0, 0),
            (1, 20),
            (0, 9),
            (7, 7),
            (5, 123),
            (19, 1001),
            (100, 999),
            (-25, -3),
            (-9, 14),
            (-1000, 1000),
            (12345, 67890),
            (0, 100_000),
        ] {
            check(lo, hi);
        }
        check(i64::MAX - 200, i64::MAX);
        check(i64::MIN, i64::MIN + 200);
    }
}
