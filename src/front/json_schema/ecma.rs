//! The ECMA-262 regex wrapper behind `pattern`, `patternProperties` and `format`: parsing
//! into a `regex-syntax` HIR with ECMA's classes, length bounds and narrowing, and lowering
//! over decoded characters (the JSON spelling of each character is [`super::strings`]'s).
//!
//! # Regex dialect
//!
//! Patterns follow ECMA-262 as the JSON Schema specification says, parsed by `regex-syntax`:
//! `\d` is `[0-9]`, `\w` is `[0-9A-Za-z_]`, `\s` is ECMA's white space and line terminators, `.`
//! is any character except `\n`, `\r`, U+2028 and U+2029, and `$` matches only at the end. A
//! pattern matches anywhere in the string (search semantics) unless its branch is anchored with
//! `^`/`$`. Look-around and backreferences are unsupported (typed error).

use std::sync::Arc;

use regex_syntax::ast::{self, Ast, ClassSet, ClassSetItem};
use regex_syntax::hir::{
    Capture, Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Look, Repetition,
};

use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::chars::{Budget, CharDfa};
use crate::front::guard::guarded;
use crate::front::regex::{hir_to_ir, TextEncoding};
use crate::ir::{ExprId, GrammarBuilder};
use crate::limits::{LimitExceeded, LimitKind};

/// A parsed regex over decoded characters, with ECMA-262 classes. Shared, not copied, by the
/// shapes that hold it: a derived deep copy of a `Hir` recurses as deeply as it nests.
#[derive(Clone)]
pub(crate) struct Regex {
    hir: Arc<Hir>,
    universal: bool,
    /// See [`Regex::is_ambiguous`].
    ambiguous: bool,
}

impl Regex {
    /// A JSON Schema `pattern`: search semantics unless anchored. Groups, repetitions and
    /// classes nest at most `nesting` deep (a `Limit` error beyond).
    pub fn pattern(pattern: &str, nesting: usize) -> Result<Regex, CompileError> {
        let hir = parse_ecma(pattern, nesting)?;
        let branches = alternatives(&hir);
        let any = Hir::repetition(Repetition {
            min: 0,
            max: None,
            greedy: true,
            sub: Box::new(Hir::class(Class::Unicode(ClassUnicode::new([
                ClassUnicodeRange::new('\0', char::MAX),
            ])))),
        });
        let mut universal = false;
        let mut ambiguous = nests_unbounded_repetitions(&hir);
        // Branches free on the same sides share one `.*` there. Wrapped one by one, the
        // automaton of a searched `a|b|c` tracked which of them had matched already: subsets
        // of the branches, before minimization merged them (17 searched words passed 4,096
        // states after 40 ms).
        let mut sides: Vec<((bool, bool), Vec<Hir>)> = Vec::new();
        for b in branches {
            let start = b.properties().look_set_prefix().contains(Look::Start);
            let end = b.properties().look_set_suffix().contains(Look::End);
            // A branch that matches the empty string with a free side matches every string.
            universal |= b.properties().minimum_len() == Some(0) && !(start && end);
            ambiguous |= !(start && end);
            let side = (start, end);
            match sides.iter_mut().find(|s| s.0 == side) {
                Some((_, group)) => group.push(b),
                None => sides.push((side, vec![b])),
            }
        }
        let wrapped = sides
            .into_iter()
            .map(|((start, end), group)| {
                let mut parts = Vec::new();
                if !start {
                    parts.push(any.clone());
                }
                parts.push(Hir::alternation(group));
                if !end {
                    parts.push(any.clone());
                }
                Hir::concat(parts)
            })
            .collect();
        Ok(Regex {
            hir: Arc::new(Hir::alternation(wrapped)),
            universal,
            ambiguous,
        })
    }

    /// True if the regex is known to match every string (`.*`, `""`, `^a*`).
    pub fn is_universal(&self) -> bool {
        self.universal
    }

    /// True if the regex, written as grammar as it reads, matches a text in many ways at
    /// once: a branch searched for (the `.*` around it restarts a match at every character)
    /// or a repetition of an unbounded repetition (`([^/]+/?)+`). A parser following every
    /// reading carries them all at each step and cannot reuse a mask from one position to the
    /// next; the minimal automaton has one state there (MaskBench: `.+`, a URL pattern with
    /// `([/\w .-]*)*`, 20–110 ms per mask). Unanchored, a `pattern` is rarely anything else.
    pub fn is_ambiguous(&self) -> bool {
        self.ambiguous
    }

    /// A regex that must match the whole string (the `format` definitions, formwork's own).
    pub fn whole(pattern: &str) -> Result<Regex, CompileError> {
        Ok(Regex {
            hir: Arc::new(parse_ecma(pattern, FORMAT_NESTING)?),
            universal: false,
            ambiguous: false,
        })
    }

    /// The language as an automaton over characters, for intersections and complements.
    pub fn automaton(&self, budget: &Budget) -> Result<CharDfa, CompileError> {
        CharDfa::from_hir(&self.hir, budget)
    }

    /// The least and most characters a match has (`None`: unbounded).
    pub fn char_len(&self) -> (u64, Option<u64>) {
        char_len(&self.hir)
    }

    /// The language written with `encoding`.
    pub fn lower(
        &self,
        name: &str,
        g: &mut GrammarBuilder,
        encoding: &mut dyn TextEncoding,
    ) -> Result<ExprId, CompileError> {
        hir_to_ir(name, &self.hir, g, encoding)
    }

    /// The same language restricted to matches of `min..=max` characters, when each branch is
    /// a sequence of fixed-length parts around one repetition of a fixed-length expression
    /// (`^[a-z][a-z0-9-]*$`, `^([0-9]{2}:)+$`): the length bounds become bounds on the repetition
    /// count. `None` for other shapes.
    pub fn with_length(&self, min: u64, max: Option<u64>) -> Option<Regex> {
        // Re-split: building the alternation factored common prefixes such as `^` out again.
        let branches = alternatives(&self.hir);
        let narrowed = branches
            .iter()
            .map(|b| narrow(b, min, max))
            .collect::<Option<Vec<Hir>>>()?;
        Some(Regex {
            hir: Arc::new(Hir::alternation(narrowed)),
            universal: false,
            ambiguous: self.ambiguous,
        })
    }
}

/// Is there an unbounded repetition inside another one? An explicit stack: the `Hir` nests
/// as deeply as the pattern.
fn nests_unbounded_repetitions(h: &Hir) -> bool {
    let mut stack = vec![(h, false)];
    while let Some((h, inside)) = stack.pop() {
        match h.kind() {
            HirKind::Repetition(rep) => {
                let unbounded = rep.max.is_none();
                if unbounded && inside {
                    return true;
                }
                stack.push((&rep.sub, inside || unbounded));
            }
            HirKind::Capture(c) => stack.push((&c.sub, inside)),
            HirKind::Concat(subs) | HirKind::Alternation(subs) => {
                stack.extend(subs.iter().map(|s| (s, inside)))
            }
            HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => {}
        }
    }
    false
}

/// One branch of [`Regex::with_length`].
fn narrow(branch: &Hir, min: u64, max: Option<u64>) -> Option<Hir> {
    let mut parts: Vec<Hir> = match branch.kind() {
        HirKind::Concat(parts) => parts.iter().map(clone_hir).collect(),
        _ => vec![clone_hir(branch)],
    };
    let fixed = |h: &Hir| {
        let (a, b) = char_len(h);
        (Some(a) == b).then_some(a)
    };
    let mut var = None;
    let mut fixed_len = 0u64;
    for (i, p) in parts.iter().enumerate() {
        match fixed(p) {
            Some(n) => fixed_len += n,
            None if var.is_none() => var = Some(i),
            None => return None,
        }
    }
    let Some(i) = var else {
        // No variable part: the branch has one length, inside the bounds or not.
        let inside = fixed_len >= min && max.is_none_or(|m| fixed_len <= m);
        return Some(if inside {
            clone_hir(branch)
        } else {
            Hir::fail()
        });
    };
    let mut var_part = &parts[i];
    while let HirKind::Capture(c) = var_part.kind() {
        var_part = &c.sub;
    }
    let HirKind::Repetition(rep) = var_part.kind() else {
        return None;
    };
    let k = fixed(&rep.sub).filter(|&k| k > 0)?;
    // fixed_len + k * n within [min, max].
    let lo = (rep.min as u64).max(min.saturating_sub(fixed_len).div_ceil(k));
    let hi = match max {
        Some(m) if m < fixed_len => return Some(Hir::fail()),
        Some(m) => Some(
            rep.max
                .map_or((m - fixed_len) / k, |r| (r as u64).min((m - fixed_len) / k)),
        ),
        None => rep.max.map(u64::from),
    };
    if hi.is_some_and(|h| h < lo) {
        return Some(Hir::fail());
    }
    let narrowed = Hir::repetition(Repetition {
        min: u32::try_from(lo).ok()?,
        max: match hi {
            Some(h) => Some(u32::try_from(h).ok()?),
            None => None,
        },
        greedy: true,
        sub: Box::new(clone_hir(&rep.sub)),
    });
    parts[i] = narrowed;
    Some(Hir::concat(parts))
}

/// Most alternatives [`alternatives`] spells out before leaving a regex as it is.
const MAX_ALTERNATIVES: usize = 256;

/// `h` as a union of alternatives, with alternations that contain anchors distributed over
/// their surroundings (`^(a$|b)` is `^a$ | ^b`), so each alternative's anchors sit at its edges.
/// Recursion: as deep as `h` nests (bounded by the parser's nesting limit), each level guarded.
fn alternatives(h: &Hir) -> Vec<Hir> {
    let anchored = |h: &Hir| {
        let looks = h.properties().look_set();
        looks.contains(Look::Start) || looks.contains(Look::End)
    };
    guarded(|| match h.kind() {
        HirKind::Alternation(subs) => subs.iter().flat_map(alternatives).collect(),
        HirKind::Capture(c) => alternatives(&c.sub),
        HirKind::Concat(parts) if parts.iter().any(anchored) => {
            let mut combos: Vec<Vec<Hir>> = vec![vec![]];
            for p in parts {
                let options = if anchored(p) {
                    alternatives(p)
                } else {
                    vec![clone_hir(p)]
                };
                if combos.len() * options.len() > MAX_ALTERNATIVES {
                    return vec![clone_hir(h)];
                }
                combos = combos
                    .iter()
                    .flat_map(|c| {
                        options.iter().map(move |o| {
                            let mut next: Vec<Hir> = c.iter().map(clone_hir).collect();
                            next.push(clone_hir(o));
                            next
                        })
                    })
                    .collect();
            }
            combos.into_iter().map(Hir::concat).collect()
        }
        _ => vec![clone_hir(h)],
    })
}

/// A deep copy of `h`, one guarded step per level: `Hir`'s derived `Clone` recurses as deeply
/// as the regex nests, on whatever stack is left. Rebuilt through `Hir`'s constructors, which
/// may simplify but keep the language.
fn clone_hir(h: &Hir) -> Hir {
    guarded(|| match h.kind() {
        HirKind::Repetition(rep) => Hir::repetition(Repetition {
            min: rep.min,
            max: rep.max,
            greedy: rep.greedy,
            sub: Box::new(clone_hir(&rep.sub)),
        }),
        HirKind::Capture(c) => Hir::capture(Capture {
            index: c.index,
            name: c.name.clone(),
            sub: Box::new(clone_hir(&c.sub)),
        }),
        HirKind::Concat(parts) => Hir::concat(parts.iter().map(clone_hir).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(clone_hir).collect()),
        // Leaves: their copy does not recurse.
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => h.clone(),
    })
}

/// Recursion: as deep as `h` nests, each level guarded.
fn char_len(h: &Hir) -> (u64, Option<u64>) {
    guarded(|| char_len_step(h))
}

fn char_len_step(h: &Hir) -> (u64, Option<u64>) {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => (0, Some(0)),
        HirKind::Literal(lit) => {
            let n = String::from_utf8_lossy(&lit.0).chars().count() as u64;
            (n, Some(n))
        }
        HirKind::Class(_) => (1, Some(1)),
        HirKind::Repetition(rep) => {
            let (a, b) = char_len(&rep.sub);
            let max = match (b, rep.max) {
                (Some(0), _) => Some(0),
                (Some(b), Some(m)) => b.checked_mul(m as u64),
                _ => None,
            };
            (a.saturating_mul(rep.min as u64), max)
        }
        HirKind::Capture(c) => char_len(&c.sub),
        HirKind::Concat(parts) => {
            parts
                .iter()
                .map(char_len)
                .fold((0, Some(0)), |(a, b), (c, d)| {
                    (
                        a.saturating_add(c),
                        b.zip(d).and_then(|(x, y)| x.checked_add(y)),
                    )
                })
        }
        HirKind::Alternation(subs) => {
            let lens: Vec<_> = subs.iter().map(char_len).collect();
            let min = lens.iter().map(|l| l.0).min().unwrap_or(0);
            let max = lens.iter().try_fold(0, |m, l| l.1.map(|x| x.max(m)));
            (min, max)
        }
    }
}

/// The `Limit` error of a regex nested more than `limit` deep.
/// A pattern that opens with a look-ahead, `^(?!X)R` or `^(?=X)R`, read as two patterns a
/// string is checked against: with search semantics from its start, `^R` must match and
/// `^(?:X)` must not (`(?!`) or must (`(?=`). A look-ahead at the start is tested once, at the
/// first character, so this is exactly the pattern's language. Only when `R` has no `|` of its
/// own at the top (which would put a branch outside the look-ahead's reach).
pub(crate) struct LeadingLookahead {
    /// `^(?:X)`.
    pub look: String,
    /// `^R`.
    pub rest: String,
    /// `(?!` rather than `(?=`.
    pub negative: bool,
}

/// See [`LeadingLookahead`]: `None` for any other pattern.
pub(crate) fn leading_lookahead(pattern: &str) -> Option<LeadingLookahead> {
    let negative = match pattern.get(..4)? {
        "^(?!" => true,
        "^(?=" => false,
        _ => return None,
    };
    let end = 4 + close_of_group(&pattern[4..])?;
    let rest = &pattern[end + 1..];
    if has_top_level_bar(rest) {
        return None;
    }
    Some(LeadingLookahead {
        look: format!("^(?:{})", &pattern[4..end]),
        rest: format!("^{rest}"),
        negative,
    })
}

/// Walks an ECMA pattern's characters with the depth of the groups they are in (escapes and
/// classes skipped), stopping when `stop` says so; the byte offset where it stopped.
fn scan_depth(pattern: &str, mut stop: impl FnMut(char, i64) -> bool) -> Option<usize> {
    let mut depth = 0i64;
    let mut chars = pattern.char_indices();
    let mut in_class = false;
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
                continue;
            }
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '(' if !in_class => depth += 1,
            ')' if !in_class => depth -= 1,
            _ => {}
        }
        if !in_class && stop(c, depth) {
            return Some(i);
        }
    }
    None
}

/// Where the group the pattern is inside closes (the pattern starts just after its `(`).
fn close_of_group(pattern: &str) -> Option<usize> {
    scan_depth(pattern, |c, depth| c == ')' && depth < 0)
}

/// Does the pattern have a `|` outside every group?
fn has_top_level_bar(pattern: &str) -> bool {
    scan_depth(pattern, |c, depth| c == '|' && depth == 0).is_some()
}

pub(crate) fn nesting_error(pattern: &str, limit: u32, col: usize) -> CompileError {
    let exceeded = LimitExceeded {
        kind: LimitKind::Nesting,
        value: u64::from(limit) + 1,
        max: u64::from(limit),
    };
    let what = format!("pattern {pattern:?} (column {col})");
    CompileError::over_limit(exceeded, Location::None, &what)
}

fn regex_error(
    pattern: &str,
    kind: CompileErrorKind,
    what: impl std::fmt::Display,
    col: usize,
) -> CompileError {
    CompileError::unplaced(kind, format!("pattern {pattern:?} (column {col}): {what}"))
}

/// How deeply formwork's own `format` regexes may nest (regex-syntax's default).
const FORMAT_NESTING: usize = 250;

/// Parses with ECMA-262 meanings for `\d`, `\w`, `\s` and `.`, nesting at most `nesting` deep.
fn parse_ecma(pattern: &str, nesting: usize) -> Result<Hir, CompileError> {
    let limit = u32::try_from(nesting).unwrap_or(u32::MAX);
    let (written, origin) = ecma_escapes(pattern);
    // Columns of the pattern as given, from those of the pattern parsed (1-based).
    let column = |col: usize| origin.get(col.saturating_sub(1)).map_or(col, |&c| c + 1);
    let mut parsed = ast::parse::ParserBuilder::new()
        .nest_limit(limit)
        .build()
        .parse(&written)
        .map_err(|e| {
            use ast::ErrorKind as K;
            let kind = match e.kind() {
                K::UnsupportedLookAround | K::UnsupportedBackreference => {
                    CompileErrorKind::Unsupported
                }
                K::NestLimitExceeded(_) => {
                    return nesting_error(pattern, limit, column(e.span().start.column))
                }
                _ => CompileErrorKind::Syntax,
            };
            regex_error(pattern, kind, e.kind(), column(e.span().start.column))
        })?;
    ecma_ast(&mut parsed);
    regex_syntax::hir::translate::Translator::new()
        .translate(&written, &parsed)
        .map_err(|e| {
            regex_error(
                pattern,
                CompileErrorKind::Syntax,
                e.kind(),
                column(e.span().start.column),
            )
        })
}

/// The pattern with the ECMA-262 escapes `regex-syntax` reads otherwise spelled its way: `\0`
/// not before a digit is NUL (`regex-syntax`: a backreference), and a surrogate pair
/// `\uD83D\uDE00` one character (`regex-syntax`: two invalid code points). With, for each
/// character of the result, the index of the character of `pattern` it comes from.
fn ecma_escapes(pattern: &str) -> (String, Vec<usize>) {
    let chars: Vec<char> = pattern.chars().collect();
    let (mut out, mut origin) = (String::with_capacity(pattern.len()), Vec::new());
    let mut i = 0;
    while i < chars.len() {
        let rewritten = match (chars[i], chars.get(i + 1)) {
            ('\\', Some('u')) => surrogate_pair(&chars[i..]).map(|c| (format!("\\x{{{c:X}}}"), 12)),
            ('\\', Some('0')) if !chars.get(i + 2).is_some_and(char::is_ascii_digit) => {
                Some(("\\x00".to_string(), 2))
            }
            _ => None,
        };
        match rewritten {
            // ASCII: a character per byte, all from the escape's backslash.
            Some((text, read)) => {
                out.push_str(&text);
                origin.extend(std::iter::repeat_n(i, text.len()));
                i += read;
            }
            // Any other escape whole, so that its second character is never read as one's
            // start.
            None => {
                let read = match chars[i] == '\\' && i + 1 < chars.len() {
                    true => 2,
                    false => 1,
                };
                out.extend(&chars[i..i + read]);
                origin.extend(i..i + read);
                i += read;
            }
        }
    }
    (out, origin)
}

/// The character of the surrogate pair `\uXXXX\uXXXX` that `chars` start with, if they do.
fn surrogate_pair(chars: &[char]) -> Option<u32> {
    let unit = |at: usize| -> Option<u32> {
        match chars.get(at..at + 6)? {
            ['\\', 'u', hex @ ..] if hex.iter().all(char::is_ascii_hexdigit) => {
                u32::from_str_radix(&hex.iter().collect::<String>(), 16).ok()
            }
            _ => None,
        }
    };
    let (high, low) = (unit(0)?, unit(6)?);
    ((0xD800..0xDC00).contains(&high) && (0xDC00..0xE000).contains(&low))
        .then(|| 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
}

/// ECMA-262 white space and line terminators (`\s`).
const ECMA_SPACE: &[(char, char)] = &[
    ('\t', '\r'),
    (' ', ' '),
    ('\u{a0}', '\u{a0}'),
    ('\u{1680}', '\u{1680}'),
    ('\u{2000}', '\u{200a}'),
    ('\u{2028}', '\u{2029}'),
    ('\u{202f}', '\u{202f}'),
    ('\u{205f}', '\u{205f}'),
    ('\u{3000}', '\u{3000}'),
    ('\u{feff}', '\u{feff}'),
];

/// What `.` excludes in ECMA-262.
const ECMA_LINE_TERMINATORS: &[(char, char)] =
    &[('\n', '\n'), ('\r', '\r'), ('\u{2028}', '\u{2029}')];

fn set_item(span: ast::Span, ranges: &[(char, char)], negated: bool) -> ClassSetItem {
    let lit = |c: char| ast::Literal {
        span,
        kind: ast::LiteralKind::Verbatim,
        c,
    };
    let items = ranges
        .iter()
        .map(|&(a, b)| match a == b {
            true => ClassSetItem::Literal(lit(a)),
            false => ClassSetItem::Range(ast::ClassSetRange {
                span,
                start: lit(a),
                end: lit(b),
            }),
        })
        .collect();
    let union = ClassSetItem::Union(ast::ClassSetUnion { span, items });
    ClassSetItem::Bracketed(Box::new(ast::ClassBracketed {
        span,
        negated,
        kind: ClassSet::Item(union),
    }))
}

fn perl_item(perl: &ast::ClassPerl) -> ClassSetItem {
    let ranges: &[(char, char)] = match perl.kind {
        ast::ClassPerlKind::Digit => &[('0', '9')],
        ast::ClassPerlKind::Word => &[('0', '9'), ('A', 'Z'), ('_', '_'), ('a', 'z')],
        ast::ClassPerlKind::Space => ECMA_SPACE,
    };
    set_item(perl.span, ranges, perl.negated)
}

fn bracketed(item: ClassSetItem, span: ast::Span) -> Ast {
    Ast::class_bracketed(ast::ClassBracketed {
        span,
        negated: false,
        kind: ClassSet::Item(item),
    })
}

/// Rewrites `\d`, `\w`, `\s` and `.` to their ECMA-262 classes, everywhere in `root`. An
/// explicit stack: the tree nests as deeply as the pattern does.
fn ecma_ast(root: &mut Ast) {
    enum Node<'a> {
        Ast(&'a mut Ast),
        Set(&'a mut ClassSet),
        Item(&'a mut ClassSetItem),
    }
    let mut stack = vec![Node::Ast(root)];
    while let Some(node) = stack.pop() {
        match node {
            Node::Ast(ast) => match ast {
                Ast::Dot(span) => {
                    let span = **span;
                    *ast = bracketed(set_item(span, ECMA_LINE_TERMINATORS, true), span);
                }
                Ast::ClassPerl(perl) => {
                    let span = perl.span;
                    *ast = bracketed(perl_item(perl), span);
                }
                // `\<` and `\>` are word boundaries to regex-syntax, identity escapes (the
                // characters themselves) to ECMA-262.
                Ast::Assertion(a)
                    if matches!(
                        a.kind,
                        ast::AssertionKind::WordBoundaryStartAngle
                            | ast::AssertionKind::WordBoundaryEndAngle
                    ) =>
                {
                    let c = match a.kind {
                        ast::AssertionKind::WordBoundaryStartAngle => '<',
                        _ => '>',
                    };
                    *ast = Ast::literal(ast::Literal {
                        span: a.span,
                        kind: ast::LiteralKind::Superfluous,
                        c,
                    });
                }
                Ast::ClassBracketed(class) => stack.push(Node::Set(&mut class.kind)),
                Ast::Repetition(rep) => stack.push(Node::Ast(&mut rep.ast)),
                Ast::Group(group) => stack.push(Node::Ast(&mut group.ast)),
                Ast::Alternation(alt) => stack.extend(alt.asts.iter_mut().map(Node::Ast)),
                Ast::Concat(cat) => stack.extend(cat.asts.iter_mut().map(Node::Ast)),
                _ => {}
            },
            Node::Set(ClassSet::Item(item)) => stack.push(Node::Item(item)),
            Node::Set(ClassSet::BinaryOp(op)) => {
                stack.push(Node::Set(&mut op.lhs));
                stack.push(Node::Set(&mut op.rhs));
            }
            Node::Item(item) => match item {
                ClassSetItem::Perl(perl) => *item = perl_item(perl),
                ClassSetItem::Bracketed(class) => stack.push(Node::Set(&mut class.kind)),
                ClassSetItem::Union(union) => stack.extend(union.items.iter_mut().map(Node::Item)),
                _ => {}
            },
        }
    }
}
