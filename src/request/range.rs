//! Integer ranges as regexes: `lo..hi` → the decimal numerals in range, no leading zeros.

use crate::front::int_range::uint_sequences;

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

/// Alternatives for `lo..=hi`, one per digit sequence of [`uint_sequences`]: single digits
/// as themselves, other positions as classes, a trailing run of any digits counted.
fn unsigned(lo: u128, hi: u128, out: &mut Vec<String>) {
    let digits = |n: u128| -> Vec<u8> { n.to_string().bytes().map(|b| b - b'0').collect() };
    for seq in uint_sequences(&digits(lo), Some(&digits(hi))) {
        let any = seq.iter().rev().take_while(|&&r| r == (0, 9)).count();
        let mut regex = String::new();
        for &(x, y) in &seq[..seq.len() - any] {
            match x == y {
                true => regex.push((b'0' + x) as char),
                false => regex.push_str(&format!("[{x}-{y}]")),
            }
        }
        match any {
            0 => {}
            1 => regex.push_str("[0-9]"),
            n => regex.push_str(&format!("[0-9]{{{n}}}")),
        }
        out.push(regex);
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
