//! Numbers with bounds as exact digit languages.
//!
//! A bound is kept as an exact decimal (never rounded through `f64` arithmetic), and the set of
//! JSON number literals whose value lies between the bounds is built digit by digit, the way one
//! writes a regex for `[13, 472]`. Integers are exact. For other numbers, literals in plain
//! decimal notation are exact, and so are the exponent forms whose mantissa is normalised
//! (`1.5e-3`, what serde_json, Python and JavaScript print); a bound of zero (`minimum: 0`, the
//! common case) accepts every exponent form. The set of *all* exponent forms inside a general
//! interval (`0.001e3`, `150e-2`) is not regular, so it cannot be expressed by any grammar.

use std::cmp::Ordering;

use crate::base::byteset::ByteSet;
use crate::front::guard::guarded;
use crate::front::int_range::uint_sequences;
use crate::ir::{ExprId, GrammarBuilder};

/// An exact decimal: sign, integer digits (no leading zeros; `[0]` below one) and fraction digits
/// (no trailing zeros). Zero is never negative.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Decimal {
    pub(super) neg: bool,
    pub(super) int: Vec<u8>,
    pub(super) frac: Vec<u8>,
}

/// One side of an interval: the value and whether it is excluded.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Bound {
    pub value: Decimal,
    pub strict: bool,
}

impl Decimal {
    /// The value of a JSON number (integers exactly; floats through their shortest decimal form).
    pub fn from_json(n: &serde_json::Number) -> Decimal {
        let text = match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            // Rust prints floats in plain notation, never with an exponent.
            (_, _, Some(f)) => format!("{f}"),
            _ => "0".to_string(),
        };
        Decimal::parse(&text).unwrap_or_else(Decimal::zero)
    }

    /// Parses `-?digits(.digits)?`.
    pub fn parse(text: &str) -> Option<Decimal> {
        let (neg, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text),
        };
        let (int, frac) = rest.split_once('.').unwrap_or((rest, ""));
        let digit = |c: char| c.to_digit(10).map(|d| d as u8);
        let int: Option<Vec<u8>> = int.chars().map(digit).collect();
        let frac: Option<Vec<u8>> = frac.chars().map(digit).collect();
        let (int, frac) = (int?, frac?);
        if int.is_empty() {
            return None;
        }
        Some(Decimal::new(neg, int, frac))
    }

    fn new(neg: bool, mut int: Vec<u8>, mut frac: Vec<u8>) -> Decimal {
        let lead = int
            .iter()
            .take_while(|&&d| d == 0)
            .count()
            .min(int.len().saturating_sub(1));
        int.drain(..lead);
        if int.is_empty() {
            int.push(0);
        }
        while frac.last() == Some(&0) {
            frac.pop();
        }
        let zero = int == [0] && frac.is_empty();
        Decimal {
            neg: neg && !zero,
            int,
            frac,
        }
    }

    pub fn zero() -> Decimal {
        Decimal {
            neg: false,
            int: vec![0],
            frac: vec![],
        }
    }

    fn one() -> Decimal {
        Decimal {
            neg: false,
            int: vec![1],
            frac: vec![],
        }
    }

    pub fn is_zero(&self) -> bool {
        self.int == [0] && self.frac.is_empty()
    }

    pub fn is_integer(&self) -> bool {
        self.frac.is_empty()
    }

    pub fn negated(&self) -> Decimal {
        Decimal::new(!self.neg, self.int.clone(), self.frac.clone())
    }

    fn abs(&self) -> Decimal {
        Decimal {
            neg: false,
            ..self.clone()
        }
    }

    fn cmp_magnitude(&self, other: &Decimal) -> Ordering {
        let by_int = self
            .int
            .len()
            .cmp(&other.int.len())
            .then_with(|| self.int.cmp(&other.int));
        // Fractions compare lexicographically once trailing zeros are gone.
        by_int.then_with(|| self.frac.cmp(&other.frac))
    }

    /// The value of an integer, if an `i64` holds it.
    fn to_i64(&self) -> Option<i64> {
        let mut n: i64 = 0;
        for &d in &self.int {
            n = n.checked_mul(10)?.checked_add(i64::from(d))?;
        }
        Some(if self.neg { -n } else { n })
    }

    /// The largest integer `<= self`.
    fn floor(&self) -> Decimal {
        match (self.frac.is_empty(), self.neg) {
            (true, _) => self.clone(),
            (false, false) => Decimal::new(false, self.int.clone(), vec![]),
            (false, true) => Decimal::new(true, digits_inc(&self.int), vec![]),
        }
    }

    /// The smallest integer `>= self`.
    fn ceil(&self) -> Decimal {
        self.negated().floor().negated()
    }

    /// `self + 1` for an integer.
    fn succ(&self) -> Decimal {
        match self.neg {
            false => Decimal::new(false, digits_inc(&self.int), vec![]),
            true => Decimal::new(true, digits_dec(&self.int), vec![]),
        }
    }

    /// `self - 1` for an integer.
    fn pred(&self) -> Decimal {
        self.negated().succ().negated()
    }

    /// `(mantissa, exponent)` with `self = mantissa * 10^exponent` and `1 <= mantissa < 10`
    /// (for a non-zero magnitude).
    fn normalized(&self) -> (Decimal, i64) {
        let all: Vec<u8> = self.int.iter().chain(&self.frac).copied().collect();
        let first = all.iter().position(|&d| d != 0).unwrap_or(0);
        let exponent = self.int.len() as i64 - 1 - first as i64;
        (
            Decimal::new(false, vec![all[first]], all[first + 1..].to_vec()),
            exponent,
        )
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Decimal) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Decimal) -> Ordering {
        match (self.neg, other.neg) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.cmp_magnitude(other),
            (true, true) => other.cmp_magnitude(self),
        }
    }
}

fn digits_inc(d: &[u8]) -> Vec<u8> {
    let mut out = d.to_vec();
    for x in out.iter_mut().rev() {
        if *x == 9 {
            *x = 0;
        } else {
            *x += 1;
            return out;
        }
    }
    out.insert(0, 1);
    out
}

fn digits_dec(d: &[u8]) -> Vec<u8> {
    let mut out = d.to_vec();
    for x in out.iter_mut().rev() {
        if *x == 0 {
            *x = 9;
        } else {
            *x -= 1;
            break;
        }
    }
    out
}

/// Is `v` inside the interval?
pub(crate) fn in_range(v: &Decimal, lo: Option<&Bound>, hi: Option<&Bound>) -> bool {
    let above = lo.is_none_or(|b| {
        if b.strict {
            *v > b.value
        } else {
            *v >= b.value
        }
    });
    let below = hi.is_none_or(|b| {
        if b.strict {
            *v < b.value
        } else {
            *v <= b.value
        }
    });
    above && below
}

fn digit_class(g: &mut GrammarBuilder, lo: u8, hi: u8) -> ExprId {
    g.class(ByteSet::range(b'0' + lo, b'0' + hi))
}

/// A sequence of byte classes, equal neighbours folded into counted repeats (so a 300-digit
/// bound stays small).
pub(crate) fn class_run(g: &mut GrammarBuilder, classes: &[ExprId]) -> ExprId {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < classes.len() {
        let n = classes[i..]
            .iter()
            .take_while(|&&c| c == classes[i])
            .count();
        parts.push(g.repeat(classes[i], n as u32, Some(n as u32)));
        i += n;
    }
    g.seq(parts)
}

/// Canonical unsigned integers (no leading zeros) in `[lo, hi]`, `lo >= 1`.
fn uint_range(g: &mut GrammarBuilder, lo: &[u8], hi: Option<&[u8]>) -> ExprId {
    let mut branches = Vec::new();
    for seq in uint_sequences(lo, hi) {
        let classes: Vec<ExprId> = seq.iter().map(|&(l, h)| digit_class(g, l, h)).collect();
        branches.push(class_run(g, &classes));
    }
    if hi.is_none() {
        // Every longer number: [1-9][0-9]{len,}.
        let first = digit_class(g, 1, 9);
        let digit = digit_class(g, 0, 9);
        let rest = g.repeat(digit, lo.len() as u32, None);
        branches.push(g.seq([first, rest]));
    }
    g.alt(branches)
}

/// How integers are written: prefixes for each sign, the literals of zero, and a suffix.
pub(crate) struct IntStyle {
    pos: ExprId,
    neg: ExprId,
    zero: ExprId,
    suffix: ExprId,
}

impl IntStyle {
    /// A JSON integer value: `-?(0|[1-9][0-9]*)`, and `-0`. Draft 6 and later also count `1.0`
    /// as an integer, draft 4 does not; formwork writes integers without a fraction.
    pub fn json(g: &mut GrammarBuilder) -> IntStyle {
        let zero = g.text("0");
        let neg_zero = g.text("-0");
        IntStyle {
            pos: g.empty(),
            neg: g.text("-"),
            zero: g.alt([zero, neg_zero]),
            suffix: g.empty(),
        }
    }

    /// An exponent's digits: optional `+`, leading zeros allowed.
    fn exponent(g: &mut GrammarBuilder) -> IntStyle {
        let zero = g.text("0");
        let zeros = g.repeat(zero, 0, None);
        let plus = g.text("+");
        let opt_plus = g.optional(plus);
        let minus = g.text("-");
        let signs = g.class(ByteSet::byte(b'+').union(&ByteSet::byte(b'-')));
        let opt_sign = g.optional(signs);
        let some_zeros = g.repeat(zero, 1, None);
        IntStyle {
            pos: g.seq([opt_plus, zeros]),
            neg: g.seq([minus, zeros]),
            zero: g.seq([opt_sign, some_zeros]),
            suffix: g.empty(),
        }
    }
}

/// Integers in `[lo, hi]` (both integers when present) in `style`.
pub(crate) fn int_range(
    g: &mut GrammarBuilder,
    lo: Option<&Decimal>,
    hi: Option<&Decimal>,
    style: &IntStyle,
) -> ExprId {
    if let (Some(l), Some(h)) = (lo, hi) {
        if l > h {
            return g.nothing();
        }
    }
    let mut branches = Vec::new();
    // Negative values: magnitudes in [max(1, -hi), -lo].
    if lo.is_none_or(|l| l.neg) {
        let mag_lo = match hi {
            Some(h) if h.neg => h.int.clone(),
            _ => vec![1],
        };
        let mag_hi = lo.map(|l| l.int.as_slice());
        let mags = uint_range(g, &mag_lo, mag_hi);
        branches.push(g.seq([style.neg, mags]));
    }
    if lo.is_none_or(|l| l.neg || l.is_zero()) && hi.is_none_or(|h| !h.neg) {
        branches.push(style.zero);
    }
    // Positive values: [max(1, lo), hi].
    if hi.is_none_or(|h| !h.neg && !h.is_zero()) {
        let from = match lo {
            Some(l) if !l.neg && !l.is_zero() => l.int.clone(),
            _ => vec![1],
        };
        let mags = uint_range(g, &from, hi.map(|h| h.int.as_slice()));
        branches.push(g.seq([style.pos, mags]));
    }
    let body = g.alt(branches);
    g.seq([body, style.suffix])
}

/// JSON integers with a value inside the interval.
pub(crate) fn integer(g: &mut GrammarBuilder, lo: Option<&Bound>, hi: Option<&Bound>) -> ExprId {
    let (lo, hi) = integer_ends(lo, hi);
    let style = IntStyle::json(g);
    int_range(g, lo.as_ref(), hi.as_ref(), &style)
}

/// The least and the greatest integer inside the interval (where it has ends).
fn integer_ends(lo: Option<&Bound>, hi: Option<&Bound>) -> (Option<Decimal>, Option<Decimal>) {
    let lo = lo.map(|b| {
        if b.strict {
            b.value.floor().succ()
        } else {
            b.value.ceil()
        }
    });
    let hi = hi.map(|b| {
        if b.strict {
            b.value.ceil().pred()
        } else {
            b.value.floor()
        }
    });
    (lo, hi)
}

/// The integers inside the interval, if it has both ends and holds at most `cap` of them.
pub(crate) fn integers_between(
    lo: Option<&Bound>,
    hi: Option<&Bound>,
    cap: u64,
) -> Option<Vec<i64>> {
    let (lo, hi) = integer_ends(lo, hi);
    let (lo, hi) = (lo?.to_i64()?, hi?.to_i64()?);
    let span = i128::from(hi) - i128::from(lo) + 1;
    (span <= i128::from(cap)).then(|| (lo..=hi).collect())
}

/// JSON numbers with a value inside the interval (see the module notes for exponent forms).
pub(crate) fn number(g: &mut GrammarBuilder, lo: Option<&Bound>, hi: Option<&Bound>) -> ExprId {
    // Non-negative literals: magnitudes in [max(0, lo), hi].
    let zero = Bound {
        value: Decimal::zero(),
        strict: false,
    };
    let pos_lo = match lo {
        Some(b) if !b.value.neg => b.clone(),
        _ => zero.clone(),
    };
    let pos = match hi {
        Some(h) if h.value.neg => g.nothing(),
        _ => magnitude(g, &pos_lo, hi),
    };
    // Negative literals `-m`: v >= lo is m <= -lo and v <= hi is m >= -hi.
    let neg_lo = match hi {
        Some(h) if h.value.neg || h.value.is_zero() => Bound {
            value: h.value.abs(),
            strict: h.strict,
        },
        _ => zero,
    };
    let neg_hi = lo.map(|b| Bound {
        value: b.value.negated(),
        strict: b.strict,
    });
    let neg = match &neg_hi {
        Some(h) if h.value.neg => g.nothing(),
        _ => {
            let m = magnitude(g, &neg_lo, neg_hi.as_ref());
            let minus = g.text("-");
            g.seq([minus, m])
        }
    };
    g.alt([pos, neg])
}

/// Unsigned number literals with a value in `[lo, hi]`, `lo >= 0`.
fn magnitude(g: &mut GrammarBuilder, lo: &Bound, hi: Option<&Bound>) -> ExprId {
    if !in_range_nonempty(lo, hi) {
        return g.nothing();
    }
    let digit = digit_class(g, 0, 9);
    let digits = g.repeat(digit, 1, None);
    let any_exp = exponent_any(g);
    let zero_ok = lo.value.is_zero() && !lo.strict;
    if hi.is_none() && lo.value.is_zero() {
        // Every literal, or every literal with a non-zero digit: exponent forms are all fine.
        let nonzero_int = {
            let first = digit_class(g, 1, 9);
            let rest = g.repeat(digit, 0, None);
            g.seq([first, rest])
        };
        let dot = g.text(".");
        let frac = g.seq([dot, digits]);
        let opt_frac = g.optional(frac);
        let zero = g.text("0");
        let mantissa = if zero_ok {
            let int = g.alt([zero, nonzero_int]);
            g.seq([int, opt_frac])
        } else {
            let big = g.seq([nonzero_int, opt_frac]);
            let zeros = g.repeat(zero, 0, None);
            let first = digit_class(g, 1, 9);
            let rest = g.repeat(digit, 0, None);
            let small = g.seq([zero, dot, zeros, first, rest]);
            g.alt([big, small])
        };
        let opt_exp = g.optional(any_exp);
        return g.seq([mantissa, opt_exp]);
    }
    let mut branches = vec![plain(g, lo, hi)];
    if zero_ok {
        // 0, 0.00 with any exponent.
        let zero = g.text("0");
        let dot = g.text(".");
        let zeros = g.repeat(zero, 1, None);
        let frac = g.seq([dot, zeros]);
        let opt_frac = g.optional(frac);
        branches.push(g.seq([zero, opt_frac, any_exp]));
    }
    branches.push(scientific(g, lo, hi));
    g.alt(branches)
}

fn in_range_nonempty(lo: &Bound, hi: Option<&Bound>) -> bool {
    match hi {
        None => true,
        Some(h) => match lo.value.cmp(&h.value) {
            Ordering::Less => true,
            Ordering::Equal => !lo.strict && !h.strict,
            Ordering::Greater => false,
        },
    }
}

/// `[eE][+-]?[0-9]+`.
fn exponent_any(g: &mut GrammarBuilder) -> ExprId {
    let e = g.class(ByteSet::byte(b'e').union(&ByteSet::byte(b'E')));
    let sign = g.class(ByteSet::byte(b'+').union(&ByteSet::byte(b'-')));
    let opt_sign = g.optional(sign);
    let digit = digit_class(g, 0, 9);
    let digits = g.repeat(digit, 1, None);
    g.seq([e, opt_sign, digits])
}

/// Plain decimals `int(.frac)?` in `[lo, hi]`, `lo >= 0`.
fn plain(g: &mut GrammarBuilder, lo: &Bound, hi: Option<&Bound>) -> ExprId {
    let lo_int = Decimal::new(false, lo.value.int.clone(), vec![]);
    let lo_frac = Some((lo.value.frac.as_slice(), lo.strict));
    let mut branches = Vec::new();
    match hi {
        Some(h) if h.value.int == lo.value.int => {
            let int = canonical_uint(g, &lo_int.int);
            let frac = fraction(g, lo_frac, Some((h.value.frac.as_slice(), h.strict)));
            branches.push(g.seq([int, frac]));
        }
        _ => {
            let int = canonical_uint(g, &lo_int.int);
            let frac = fraction(g, lo_frac, None);
            branches.push(g.seq([int, frac]));
            let next = lo_int.succ();
            let free = fraction(g, None, None);
            match hi {
                None => {
                    let ints = uint_range_from(g, &next.int, None);
                    branches.push(g.seq([ints, free]));
                }
                Some(h) => {
                    let h_int = Decimal::new(false, h.value.int.clone(), vec![]);
                    if next < h_int {
                        let ints = uint_range_from(g, &next.int, Some(&h_int.pred().int));
                        branches.push(g.seq([ints, free]));
                    }
                    let int = canonical_uint(g, &h_int.int);
                    let frac = fraction(g, None, Some((h.value.frac.as_slice(), h.strict)));
                    branches.push(g.seq([int, frac]));
                }
            }
        }
    }
    g.alt(branches)
}

fn canonical_uint(g: &mut GrammarBuilder, digits: &[u8]) -> ExprId {
    let text: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
    g.text(&text)
}

/// Canonical unsigned integers in `[lo, hi]` where `lo` may be zero.
fn uint_range_from(g: &mut GrammarBuilder, lo: &[u8], hi: Option<&[u8]>) -> ExprId {
    match lo {
        [0] => {
            let zero = g.text("0");
            let rest = match hi {
                Some([0]) => g.nothing(),
                _ => uint_range(g, &[1], hi),
            };
            g.alt([zero, rest])
        }
        _ => uint_range(g, lo, hi),
    }
}

/// The optional fraction `(\.[0-9]+)?` whose value `0.f` lies in the interval given by the
/// fraction digits of the bounds (`None`: unbounded on that side).
fn fraction(
    g: &mut GrammarBuilder,
    lo: Option<(&[u8], bool)>,
    hi: Option<(&[u8], bool)>,
) -> ExprId {
    let width = lo.map_or(0, |l| l.0.len()).max(hi.map_or(0, |h| h.0.len()));
    let pad = |d: Option<(&[u8], bool)>| -> Option<(Vec<u8>, bool)> {
        d.map(|(digits, strict)| {
            let mut v = digits.to_vec();
            v.resize(width, 0);
            (v, strict)
        })
    };
    let f = Fraction {
        lo: pad(lo),
        hi: pad(hi),
        width,
    };
    let mut memo = foldhash::HashMap::default();
    let dot = g.text(".");
    let first_digit = f.digits(g, 0, f.lo.is_some(), f.hi.is_some(), &mut memo);
    let with_dot = g.seq([dot, first_digit]);
    match f.end_ok(0, f.lo.is_some(), f.hi.is_some()) {
        true => g.optional(with_dot),
        false => with_dot,
    }
}

/// The fraction digits of the bounds, padded to one width. Wherever a walk is `tight_lo`
/// (`tight_hi`) the lower (upper) bound exists: tightness starts as the bound's presence and
/// is only ever dropped.
struct Fraction {
    lo: Option<(Vec<u8>, bool)>,
    hi: Option<(Vec<u8>, bool)>,
    width: usize,
}

impl Fraction {
    /// May the digits end at position `i` (the rest read as zeros) while still tight against
    /// the bounds marked?
    fn end_ok(&self, i: usize, tight_lo: bool, tight_hi: bool) -> bool {
        let lo_ok = !tight_lo || {
            let (d, strict) = self.lo.as_ref().unwrap();
            d[i..].iter().all(|&x| x == 0) && !strict
        };
        let hi_ok = !tight_hi || {
            let (d, strict) = self.hi.as_ref().unwrap();
            !(d[i..].iter().all(|&x| x == 0) && *strict)
        };
        lo_ok && hi_ok
    }

    /// One or more digits from position `i` on. Recursion: one level per digit of the bounds
    /// (a few hundred at most for an `f64`), each guarded.
    fn digits(
        &self,
        g: &mut GrammarBuilder,
        i: usize,
        tight_lo: bool,
        tight_hi: bool,
        memo: &mut foldhash::HashMap<(usize, bool, bool), ExprId>,
    ) -> ExprId {
        guarded(|| self.digits_step(g, i, tight_lo, tight_hi, memo))
    }

    fn digits_step(
        &self,
        g: &mut GrammarBuilder,
        i: usize,
        tight_lo: bool,
        tight_hi: bool,
        memo: &mut foldhash::HashMap<(usize, bool, bool), ExprId>,
    ) -> ExprId {
        if let Some(&e) = memo.get(&(i, tight_lo, tight_hi)) {
            return e;
        }
        let digit = digit_class(g, 0, 9);
        let e = if !tight_lo && !tight_hi {
            g.repeat(digit, 1, None)
        } else if i >= self.width {
            // Past both bounds' digits: only zeros keep an equality, anything exceeds it.
            let zero = g.text("0");
            let zeros = g.repeat(zero, 0, None);
            let nonzero = digit_class(g, 1, 9);
            let rest = g.repeat(digit, 0, None);
            let above = g.seq([zeros, nonzero, rest]);
            let some_zeros = g.repeat(zero, 1, None);
            let lo_strict = tight_lo && self.lo.as_ref().unwrap().1;
            let hi_strict = tight_hi && self.hi.as_ref().unwrap().1;
            match (tight_hi, lo_strict || hi_strict) {
                (true, true) => g.nothing(),
                (true, false) => some_zeros,
                (false, true) => above,
                (false, false) => g.repeat(digit, 1, None),
            }
        } else {
            let l = if tight_lo {
                self.lo.as_ref().unwrap().0[i]
            } else {
                0
            };
            let h = if tight_hi {
                self.hi.as_ref().unwrap().0[i]
            } else {
                9
            };
            let mut branches = Vec::new();
            type Memo = foldhash::HashMap<(usize, bool, bool), ExprId>;
            let mut push = |g: &mut GrammarBuilder,
                            this: &Fraction,
                            memo: &mut Memo,
                            lo_d: u8,
                            hi_d: u8,
                            tl: bool,
                            th: bool| {
                if lo_d > hi_d {
                    return;
                }
                let class = digit_class(g, lo_d, hi_d);
                let more = this.digits(g, i + 1, tl, th, memo);
                let rest = match this.end_ok(i + 1, tl, th) {
                    true => g.optional(more),
                    false => more,
                };
                branches.push(g.seq([class, rest]));
            };
            if l == h {
                push(g, self, memo, l, l, tight_lo, tight_hi);
            } else {
                push(g, self, memo, l, l, tight_lo, false);
                push(g, self, memo, l + 1, h.saturating_sub(1), false, false);
                push(g, self, memo, h, h, false, tight_hi);
            }
            g.alt(branches)
        };
        memo.insert((i, tight_lo, tight_hi), e);
        e
    }
}

/// Normalised exponent forms `[1-9](\.[0-9]+)?[eE]...` with a value in `[lo, hi]`, `lo >= 0`.
fn scientific(g: &mut GrammarBuilder, lo: &Bound, hi: Option<&Bound>) -> ExprId {
    let one = Bound {
        value: Decimal::one(),
        strict: false,
    };
    let ten = Bound {
        value: Decimal::new(false, vec![1, 0], vec![]),
        strict: true,
    };
    let any_mantissa = plain(g, &one, Some(&ten));
    // (mantissa, exponent) of each bound; a zero lower bound constrains nothing.
    let lo_n = (!lo.value.is_zero()).then(|| {
        let (m, e) = lo.value.normalized();
        (
            Bound {
                value: m,
                strict: lo.strict,
            },
            e,
        )
    });
    let hi_n = hi.map(|h| {
        let (m, e) = h.value.normalized();
        (
            Bound {
                value: m,
                strict: h.strict,
            },
            e,
        )
    });
    if hi.is_some_and(|h| h.value.is_zero()) {
        return g.nothing();
    }
    let exp_style = IntStyle::exponent(g);
    let e = g.class(ByteSet::byte(b'e').union(&ByteSet::byte(b'E')));
    let mut branches = Vec::new();
    let mut at =
        |g: &mut GrammarBuilder, mantissa: ExprId, lo_e: Option<i64>, hi_e: Option<i64>| {
            // Cannot fail: an integer's decimal text is `-?digits`.
            let lo_d = lo_e.map(|x| Decimal::parse(&x.to_string()).unwrap());
            let hi_d = hi_e.map(|x| Decimal::parse(&x.to_string()).unwrap());
            let exp = int_range(g, lo_d.as_ref(), hi_d.as_ref(), &exp_style);
            branches.push(g.seq([mantissa, e, exp]));
        };
    match (&lo_n, &hi_n) {
        (Some((lm, le)), Some((hm, he))) if le == he => {
            let m = plain(g, lm, Some(hm));
            at(g, m, Some(*le), Some(*le));
        }
        _ => {
            if let Some((lm, le)) = &lo_n {
                let m = plain(g, lm, Some(&ten));
                at(g, m, Some(*le), Some(*le));
            }
            if let Some((hm, he)) = &hi_n {
                let m = plain(g, &one, Some(hm));
                at(g, m, Some(*he), Some(*he));
            }
            let from = lo_n.as_ref().map(|(_, e)| e + 1);
            let to = hi_n.as_ref().map(|(_, e)| e - 1);
            if from.zip(to).is_none_or(|(a, b)| a <= b) {
                at(g, any_mantissa, from, to);
            }
        }
    }
    g.alt(branches)
}
