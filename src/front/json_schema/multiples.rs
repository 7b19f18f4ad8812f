//! `multipleOf`: steps, exact divisibility of decimals, and the automaton of the number
//! literals a [`NumberShape`] with divisibility constraints admits.
//!
//! A step is a finite decimal `m · 10^e` (every JSON number is one, read exactly as a
//! [`Decimal`]). Whether a literal's value is a multiple is decided digit by digit, left to
//! right, by the remainder modulo `m` of the digits read so far, with the position of the
//! decimal point against `e`; so the literals of the multiples form a regular language of
//! about `m` states per digit position that matters. Bounds are read alongside (each magnitude
//! compared digit by digit with the bound's), excluded steps too (the same remainders, the
//! verdict inverted), and the product is one automaton ([`CharDfa::explore`]), minimized and
//! lowered like a string automaton: within the automaton budget, or a `Limit` error (a huge
//! modulus, a step of hundreds of decimals together with a large modulus).
//!
//! Only plain decimal notation is read (`-12.50`, no exponent): whether `d.ddd e E` is a
//! multiple depends on how the exponent compares with the number of digits, which no finite
//! automaton can tell, so exponent forms are left out (every value has a plain spelling).
//! Integer shapes are written as digits only, as everywhere in this front end.

use std::cmp::Ordering;

use super::numbers::{Bound, Decimal};
use super::schema::over;
use super::shape::NumberShape;
use crate::error::CompileError;
use crate::front::chars::{Budget, CharDfa};
use crate::limits::{LimitExceeded, LimitKind};

/// A `multipleOf` value `m · 10^e`, `m` not divisible by ten (so every step has one form).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Step {
    m: u64,
    e: i32,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// `10^k mod m`, by squaring.
fn pow10_mod(mut k: u32, m: u64) -> u64 {
    let m = u128::from(m);
    let (mut base, mut r) = (10 % m, 1 % m);
    while k > 0 {
        if k & 1 == 1 {
            r = r * base % m;
        }
        base = base * base % m;
        k >>= 1;
    }
    r as u64
}

impl Step {
    /// The step of the integers.
    pub const ONE: Step = Step { m: 1, e: 0 };

    /// The step of a positive decimal; `None` when `m` has more digits than a `u64` holds
    /// (far more states than any automaton budget).
    pub fn of(d: &Decimal) -> Option<Step> {
        let digits: Vec<u8> = d.int.iter().chain(&d.frac).copied().collect();
        let first = digits.iter().position(|&x| x != 0)?;
        let last = digits.iter().rposition(|&x| x != 0)?;
        let e = i64::try_from(digits.len() - 1 - last).ok()? - d.frac.len() as i64;
        let mut m: u64 = 0;
        for &x in &digits[first..=last] {
            m = m.checked_mul(10)?.checked_add(u64::from(x))?;
        }
        Some(Step {
            m,
            e: i32::try_from(e).ok()?,
        })
    }

    /// `n · 10^e` in normal form; `None` past a `u64`.
    fn normal(mut n: u128, mut e: i32) -> Option<Step> {
        while n % 10 == 0 && n != 0 {
            n /= 10;
            e = e.checked_add(1)?;
        }
        Some(Step {
            m: u64::try_from(n).ok()?,
            e,
        })
    }

    /// The least common multiple: the multiples of both steps are the multiples of it.
    /// `None` when it outgrows a `u64` (far past any automaton budget).
    pub fn lcm(self, other: Step) -> Option<Step> {
        let e = self.e.min(other.e);
        let scaled = |s: Step| -> Option<u128> {
            let shift = u32::try_from(i64::from(s.e) - i64::from(e)).ok()?;
            u128::from(s.m).checked_mul(10u128.checked_pow(shift)?)
        };
        let (a, b) = (scaled(self)?, scaled(other)?);
        Step::normal((a / gcd(a, b)).checked_mul(b)?, e)
    }

    /// Is every multiple of `self` a multiple of `other`?
    pub fn is_multiple_of(self, other: Step) -> bool {
        self.lcm(other) == Some(self)
    }

    /// Is `v` a multiple of the step? Exact: `v = D · 10^-f` is one iff `D · 10^(-f-e)` is an
    /// integer divisible by `m`.
    pub fn divides(self, v: &Decimal) -> bool {
        let digits: Vec<u8> = v.int.iter().chain(&v.frac).copied().collect();
        if digits.iter().all(|&x| x == 0) {
            return true;
        }
        let shift = -(v.frac.len() as i64) - i64::from(self.e);
        let trailing = digits.iter().rev().take_while(|&&x| x == 0).count() as i64;
        if shift < 0 && trailing < -shift {
            return false;
        }
        let kept = digits.len() - (-shift).max(0) as usize;
        let m = u128::from(self.m);
        let mut r = 0u128;
        for &x in &digits[..kept] {
            r = (r * 10 + u128::from(x)) % m;
        }
        let up = u32::try_from(shift.max(0)).unwrap_or(u32::MAX);
        r * u128::from(pow10_mod(up, self.m)) % m == 0
    }
}

/// Where a literal `-?(0|[1-9][0-9]*)(\.[0-9]+)?` is being read.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Part {
    Start,
    Minus,
    /// The integer part `0`.
    Zero,
    /// An integer part starting with a non-zero digit.
    Int,
    Dot,
    Frac,
}

impl Part {
    fn next(self, c: char, integer: bool) -> Option<Part> {
        use Part::*;
        Some(match (self, c) {
            (Start, '-') => Minus,
            (Start | Minus, '0') => Zero,
            (Start | Minus, '1'..='9') | (Int, '0'..='9') => Int,
            (Zero | Int, '.') if !integer => Dot,
            (Dot | Frac, '0'..='9') => Frac,
            _ => return None,
        })
    }

    fn ends(self) -> bool {
        matches!(self, Part::Zero | Part::Int | Part::Frac)
    }
}

/// A literal's magnitude read so far against a bound's (canonical digits on both sides, so
/// a longer integer part is a larger magnitude).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Against {
    /// `len` integer digits read, `ord` comparing them with the bound's first `len`.
    Int { len: u32, ord: Ordering },
    /// Equal through the point and `pos` fraction digits (the bound's fraction padded with
    /// zeros; `pos` capped at its length).
    Frac { pos: u32 },
    /// Whatever follows.
    Decided(Ordering),
}

impl Against {
    const START: Against = Against::Int {
        len: 0,
        ord: Ordering::Equal,
    };

    fn int_digit(self, b: &Decimal, d: u8) -> Against {
        match self {
            Against::Int { len, ord } => match b.int.get(len as usize) {
                Some(&bd) => Against::Int {
                    len: len + 1,
                    ord: ord.then(d.cmp(&bd)),
                },
                None => Against::Decided(Ordering::Greater),
            },
            other => other,
        }
    }

    fn point(self, b: &Decimal) -> Against {
        match self {
            Against::Int { len, .. } if (len as usize) < b.int.len() => {
                Against::Decided(Ordering::Less)
            }
            Against::Int {
                ord: Ordering::Equal,
                ..
            } => Against::Frac { pos: 0 },
            Against::Int { ord, .. } => Against::Decided(ord),
            other => other,
        }
    }

    fn frac_digit(self, b: &Decimal, d: u8) -> Against {
        match self {
            Against::Frac { pos } => {
                let bd = b.frac.get(pos as usize).copied().unwrap_or(0);
                match d.cmp(&bd) {
                    Ordering::Equal => Against::Frac {
                        pos: (pos + 1).min(b.frac.len() as u32),
                    },
                    ord => Against::Decided(ord),
                }
            }
            other => other,
        }
    }

    /// The magnitude's comparison with the bound's once the literal ends.
    fn end(self, b: &Decimal) -> Ordering {
        match self.point(b) {
            // The bound's fraction left has a non-zero digit (it has no trailing zeros).
            Against::Frac { pos } if (pos as usize) < b.frac.len() => Ordering::Less,
            Against::Frac { .. } => Ordering::Equal,
            Against::Decided(ord) => ord,
            // `point` leaves no integer part undecided.
            Against::Int { ord, .. } => ord,
        }
    }
}

/// What the digits read so far say about being a multiple of one step `m · 10^e`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Remainder {
    /// `e <= 0`: the digits read (integer part, then at most `-e` fraction digits) mod `m`,
    /// and how many fraction digits were read (`None` before the point).
    Scaled { r: u64, frac: Option<u32> },
    /// `e > 0`: the integer digits before their run of trailing zeros mod `m`, and that run's
    /// length (at most `e`: zeros before the last `e` belong to the quotient).
    Zeros { r: u64, zeros: u32 },
    /// A non-zero digit where no multiple has one.
    Off,
}

impl Remainder {
    fn start(s: Step) -> Remainder {
        match s.e <= 0 {
            true => Remainder::Scaled { r: 0, frac: None },
            false => Remainder::Zeros { r: 0, zeros: 0 },
        }
    }

    fn digit(self, s: Step, d: u8, in_frac: bool) -> Remainder {
        let m = u128::from(s.m);
        let push =
            |r: u64, shift: u64| ((u128::from(r) * u128::from(shift) + u128::from(d)) % m) as u64;
        let counted = -i64::from(s.e);
        match (self, in_frac) {
            (Remainder::Off, _) => Remainder::Off,
            (Remainder::Scaled { r, frac: Some(j) }, true) if i64::from(j) < counted => {
                Remainder::Scaled {
                    r: push(r, 10),
                    frac: Some(j + 1),
                }
            }
            (Remainder::Scaled { r, frac }, false) => Remainder::Scaled {
                r: push(r, 10),
                frac,
            },
            // Past the step's decimals, or in the fraction of a step of ten or more: zeros.
            (_, true) => match d {
                0 => self,
                _ => Remainder::Off,
            },
            (Remainder::Zeros { r, zeros }, false)
                if d == 0 && i64::from(zeros) < i64::from(s.e) =>
            {
                Remainder::Zeros {
                    r,
                    zeros: zeros + 1,
                }
            }
            (Remainder::Zeros { r, zeros }, false) if d == 0 => Remainder::Zeros {
                r: push(r, 10),
                zeros,
            },
            (Remainder::Zeros { r, zeros }, false) => Remainder::Zeros {
                r: push(r, pow10_mod(zeros + 1, s.m)),
                zeros: 0,
            },
        }
    }

    fn point(self) -> Remainder {
        match self {
            Remainder::Scaled { r, frac: None } => Remainder::Scaled { r, frac: Some(0) },
            other => other,
        }
    }

    /// Is a non-zero value whose digits ended here a multiple?
    fn is_multiple(self, s: Step) -> bool {
        let m = u128::from(s.m);
        match self {
            Remainder::Scaled { r, frac } => {
                // The step's decimals not written are zeros.
                let missing = (-i64::from(s.e) - i64::from(frac.unwrap_or(0))) as u32;
                u128::from(r) * u128::from(pow10_mod(missing, s.m)) % m == 0
            }
            Remainder::Zeros { r, zeros } => i64::from(zeros) == i64::from(s.e) && r == 0,
            Remainder::Off => false,
        }
    }
}

/// A literal being read: its syntax, sign, whether a non-zero digit came, its magnitude
/// against each bound, and its remainder for each step.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Literal {
    part: Part,
    negative: bool,
    nonzero: bool,
    lo: Option<Against>,
    hi: Option<Against>,
    steps: Vec<Remainder>,
}

/// The literals of `n` (which has a step or an excluded step) in plain notation, as an
/// automaton: digits only if `n` is integer, `-0` being zero. Bounds compare values exactly.
pub(crate) fn automaton(n: &NumberShape, budget: &Budget) -> Result<CharDfa, CompileError> {
    // The step first, then the excluded ones: each remainder knows its step by position.
    let steps: Vec<Step> = n.multiple.iter().chain(&n.not_multiples).copied().collect();
    let start = Literal {
        part: Part::Start,
        negative: false,
        nonzero: false,
        lo: n.lo.as_ref().map(|_| Against::START),
        hi: n.hi.as_ref().map(|_| Against::START),
        steps: steps.iter().map(|&s| Remainder::start(s)).collect(),
    };
    let alphabet: Vec<char> = "-.0123456789".chars().collect();
    let step = |l: &Literal, c: char| -> Option<Literal> {
        let part = l.part.next(c, n.integer)?;
        let mut next = l.clone();
        next.part = part;
        let bounds = [(&mut next.lo, &n.lo), (&mut next.hi, &n.hi)];
        match c {
            '-' => next.negative = true,
            '.' => {
                for (against, bound) in bounds {
                    if let (Some(a), Some(b)) = (against.as_mut(), bound) {
                        *a = a.point(&b.value);
                    }
                }
                next.steps.iter_mut().for_each(|r| *r = r.point());
            }
            _ => {
                let d = c as u8 - b'0';
                let in_frac = part == Part::Frac;
                next.nonzero |= d != 0;
                for (against, bound) in bounds {
                    if let (Some(a), Some(b)) = (against.as_mut(), bound) {
                        *a = match in_frac {
                            true => a.frac_digit(&b.value, d),
                            false => a.int_digit(&b.value, d),
                        };
                    }
                }
                for (r, &s) in next.steps.iter_mut().zip(&steps) {
                    *r = r.digit(s, d, in_frac);
                }
            }
        }
        Some(next)
    };
    let accept = |l: &Literal| {
        // Its value against a bound's: magnitudes, then signs (`-0` is zero).
        let against = |a: &Option<Against>, b: &Option<Bound>| -> Option<Ordering> {
            let (a, b) = (a.as_ref()?, b.as_ref()?);
            let magnitude = a.end(&b.value);
            Some(match (l.negative && l.nonzero, b.value.neg) {
                (false, false) => magnitude,
                (true, true) => magnitude.reverse(),
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
            })
        };
        let above = match (against(&l.lo, &n.lo), &n.lo) {
            (Some(ord), Some(b)) => {
                ord == Ordering::Greater || (ord == Ordering::Equal && !b.strict)
            }
            _ => true,
        };
        let below = match (against(&l.hi, &n.hi), &n.hi) {
            (Some(ord), Some(b)) => ord == Ordering::Less || (ord == Ordering::Equal && !b.strict),
            _ => true,
        };
        let multiple = |i: usize| !l.nonzero || l.steps[i].is_multiple(steps[i]);
        let wanted = (0..steps.len()).all(|i| multiple(i) == (i == 0 && n.multiple.is_some()));
        l.part.ends() && above && below && wanted
    };
    CharDfa::explore(start, &alphabet, step, accept, budget)
}

/// The `Limit` error of a step whose digits alone are past any automaton (`m` beyond a
/// `u64`: a least common multiple that outgrew it, or a step of twenty significant digits),
/// at `pointer`.
pub(crate) fn step_too_large(pointer: &str, max_states: u64) -> CompileError {
    let exceeded = LimitExceeded {
        kind: LimitKind::AutomatonStates,
        value: u64::MAX,
        max: max_states,
    };
    over(exceeded, pointer, "the remainders of `multipleOf`")
}

impl NumberShape {
    /// The same numbers with integer steps folded in and steps every value meets dropped;
    /// `None` if no number is left (an empty interval, or a step whose multiples are
    /// excluded).
    pub fn normalized(mut self) -> Option<NumberShape> {
        if let (Some(lo), Some(hi)) = (&self.lo, &self.hi) {
            if lo.value > hi.value || (lo.value == hi.value && (lo.strict || hi.strict)) {
                return None;
            }
        }
        if self.integer {
            // Integral multiples of `s` are the multiples of lcm(s, 1); a step too fine for
            // that to fit is kept as it is (the automaton reads it all the same).
            if let Some(s) = self.multiple {
                self.multiple = Some(s.lcm(Step::ONE).unwrap_or(s));
            }
            if self.multiple == Some(Step::ONE) {
                self.multiple = None;
            }
        }
        let base = match (self.multiple, self.integer) {
            (Some(s), _) => Some(s),
            (None, true) => Some(Step::ONE),
            (None, false) => None,
        };
        if let Some(b) = base {
            if self.not_multiples.iter().any(|&t| b.is_multiple_of(t)) {
                return None;
            }
        }
        let mut seen = Vec::new();
        self.not_multiples.retain(|t| {
            let new = !seen.contains(t);
            seen.push(*t);
            new
        });
        Some(self)
    }

    /// Does the shape constrain divisibility (so that it is written through [`automaton`])?
    pub fn has_steps(&self) -> bool {
        self.multiple.is_some() || !self.not_multiples.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Deadline;

    fn step(text: &str) -> Step {
        Step::of(&Decimal::parse(text).unwrap()).unwrap()
    }

    #[test]
    fn steps_have_one_form_and_exact_multiples() {
        assert_eq!(step("0.010"), Step { m: 1, e: -2 });
        assert_eq!(step("2500"), Step { m: 25, e: 2 });
        assert_eq!(step("12.5"), Step { m: 125, e: -1 });
        assert_eq!(step("0.25").lcm(step("0.1")), Some(step("0.5")));
        assert_eq!(step("4").lcm(step("6")), Some(step("12")));
        assert_eq!(step("0.5").lcm(Step::ONE), Some(Step::ONE));
        assert!(step("10").is_multiple_of(step("2.5")));
        assert!(!step("2.5").is_multiple_of(Step::ONE));
        let divides = |s: &str, v: &str| step(s).divides(&Decimal::parse(v).unwrap());
        assert!(divides("0.1", "0.3"));
        assert!(divides("2.5", "-7.5"));
        assert!(divides("300", "0"));
        assert!(divides("300", "1200"));
        assert!(!divides("300", "1250"));
        assert!(!divides("0.01", "1.005"));
        assert!(divides("7", "700000000000000000000000000007"));
    }

    /// The automaton of each step accepts a plain literal exactly when its value is a
    /// multiple (by [`Step::divides`]), and its excluded form exactly when it is not.
    #[test]
    fn automata_agree_with_exact_division() {
        let deadline = Deadline::never();
        let budget = Budget {
            max_states: 4096,
            deadline: &deadline,
        };
        let mut literals = vec!["0".to_string(), "-0".into(), "-0.00".into()];
        for i in -130i64..=130 {
            literals.push(i.to_string());
            for f in ["0", "5", "25", "125", "04", "500", "75"] {
                let sign = if i < 0 { "-" } else { "" };
                literals.push(format!("{sign}{}.{f}", i.abs()));
            }
        }
        for s in ["3", "0.25", "2.5", "40", "0.001", "7.5", "1", "1000"] {
            let st = step(s);
            for excluded in [false, true] {
                let shape = NumberShape {
                    multiple: (!excluded).then_some(st),
                    not_multiples: if excluded { vec![st] } else { vec![] },
                    ..NumberShape::default()
                };
                let dfa = automaton(&shape, &budget).unwrap();
                for l in &literals {
                    let v = Decimal::parse(l).unwrap();
                    assert_eq!(dfa.matches(l), st.divides(&v) != excluded, "{s} {l}");
                }
            }
        }
    }
}
