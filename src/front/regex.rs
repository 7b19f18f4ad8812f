//! Regular expressions to grammar IR, through `regex-syntax`'s HIR.
//!
//! A regex constrains the *whole* text it is applied to, with ordinary regex meaning: `a|ab`
//! accepts both strings, `\d+` is greedy or lazy alike (there is no "match": the language is
//! what counts). `^` and `$` are therefore redundant at the edges of the pattern and accepted
//! there; anywhere else they, word boundaries, look-around and backreferences are rejected with a
//! typed error naming the construct.

use regex_syntax::hir::{Class, Hir, HirKind, Look};
use regex_syntax::utf8::Utf8Sequences;

use crate::base::byteset::ByteSet;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::guard::guarded;
use crate::ir::{ExprId, GrammarBuilder};
use crate::limits::{LimitExceeded, LimitKind, Limits};

/// Parses `pattern` and adds its language to `g`, returning the expression.
///
/// # Example
///
/// ```
/// use formwork::front::regex::regex_to_ir;
/// use formwork::ir::{Expr, GrammarBuilder};
///
/// let mut g = GrammarBuilder::new();
/// let e = regex_to_ir(r"^\d+(\.\d+)*$", &mut g).unwrap();
/// assert!(matches!(g.expr(e), Expr::Seq(_)));
/// let err = regex_to_ir(r"(a)\1", &mut g).unwrap_err();
/// assert!(err.to_string().contains("backreference"));
/// ```
// The engine's own front ends always pass their limits; this form is for tests and benches.
#[cfg(any(test, feature = "internals"))]
pub fn regex_to_ir(pattern: &str, g: &mut GrammarBuilder) -> Result<ExprId, CompileError> {
    regex_to_ir_with(pattern, g, &Limits::new())
}

/// [`regex_to_ir`] under `limits`: groups, repetitions and classes nest at most
/// [`Limits::nesting`] deep (a `Limit` error naming the column beyond).
///
/// ```
/// use formwork::front::regex::regex_to_ir_with;
/// use formwork::ir::GrammarBuilder;
/// use formwork::{LimitKind, Limits};
///
/// let mut g = GrammarBuilder::new();
/// let deep = format!("{}a{}", "(".repeat(10), ")".repeat(10));
/// assert!(regex_to_ir_with(&deep, &mut g, &Limits::new().nesting(10)).is_ok());
/// let err = regex_to_ir_with(&deep, &mut g, &Limits::new().nesting(9)).unwrap_err();
/// assert_eq!(err.limit().unwrap().kind, LimitKind::Nesting);
/// ```
pub fn regex_to_ir_with(
    pattern: &str,
    g: &mut GrammarBuilder,
    limits: &Limits,
) -> Result<ExprId, CompileError> {
    let hir = parse(pattern, limits.get(LimitKind::Nesting))?;
    hir_to_ir(pattern, &hir, g, &mut Utf8)
}

/// How the characters a regex matches are written out. The default ([`regex_to_ir`]) writes
/// their UTF-8 bytes; the JSON Schema front end writes each character as it may appear inside a
/// JSON string (raw or escaped).
pub trait TextEncoding {
    /// The expression for one character.
    fn char(&mut self, g: &mut GrammarBuilder, c: char) -> ExprId;
    /// The expression for any one character of `ranges` (inclusive, ascending, disjoint).
    fn class(&mut self, g: &mut GrammarBuilder, ranges: &[(char, char)]) -> ExprId;
}

/// UTF-8 bytes, character by character: regexes over raw text, and decoded strings.
pub(crate) struct Utf8;

impl TextEncoding for Utf8 {
    fn char(&mut self, g: &mut GrammarBuilder, c: char) -> ExprId {
        g.bytes(c.encode_utf8(&mut [0; 4]).as_bytes())
    }

    fn class(&mut self, g: &mut GrammarBuilder, ranges: &[(char, char)]) -> ExprId {
        utf8_class(g, ranges)
    }
}

/// Any one character of `ranges`, as its UTF-8 bytes.
pub fn utf8_class(g: &mut GrammarBuilder, ranges: &[(char, char)]) -> ExprId {
    // The one-byte sequences are one class: a branch each would be an NFA edge each.
    let mut ascii = ByteSet::EMPTY;
    let mut branches = Vec::new();
    for &(lo, hi) in ranges {
        if hi.is_ascii() {
            ascii.insert_range(lo as u8, hi as u8);
            continue;
        }
        for seq in Utf8Sequences::new(lo, hi) {
            if let [r] = seq.as_slice() {
                ascii.insert_range(r.start, r.end);
                continue;
            }
            let parts: Vec<ExprId> = seq
                .as_slice()
                .iter()
                .map(|r| g.class(ByteSet::range(r.start, r.end)))
                .collect();
            branches.push(g.seq(parts));
        }
    }
    if !ascii.is_empty() {
        branches.insert(0, g.class(ascii));
    }
    g.alt(branches)
}

/// Adds the language of an already parsed `hir` to `g` with whole-text semantics (as
/// [`regex_to_ir`]), writing characters with `encoding`; `pattern` names the regex in errors.
/// For front ends that rewrite the pattern first (JSON Schema's ECMA-262 classes and search
/// semantics).
pub fn hir_to_ir(
    pattern: &str,
    hir: &Hir,
    g: &mut GrammarBuilder,
    encoding: &mut dyn TextEncoding,
) -> Result<ExprId, CompileError> {
    RegexLowering {
        pattern,
        g,
        encoding,
    }
    .expr(
        hir,
        Edges {
            start: true,
            end: true,
        },
    )
}

fn parse(pattern: &str, nesting: u64) -> Result<Hir, CompileError> {
    let place = |line: usize, column: usize| Location::Text {
        source: format!("regex {pattern:?}"),
        line,
        col: column,
    };
    let limit = u32::try_from(nesting).unwrap_or(u32::MAX);
    regex_syntax::ParserBuilder::new()
        .nest_limit(limit)
        .build()
        .parse(pattern)
        .map_err(|e| match e {
            regex_syntax::Error::Parse(e) => {
                use regex_syntax::ast::ErrorKind as K;
                let (kind, what) = match e.kind() {
                    K::UnsupportedLookAround => (
                        CompileErrorKind::Unsupported,
                        "look-around is not supported".to_string(),
                    ),
                    K::UnsupportedBackreference => (
                        CompileErrorKind::Unsupported,
                        "backreferences are not supported".to_string(),
                    ),
                    K::NestLimitExceeded(_) => {
                        let s = e.span().start;
                        let exceeded = LimitExceeded {
                            kind: LimitKind::Nesting,
                            value: u64::from(limit) + 1,
                            max: u64::from(limit),
                        };
                        return CompileError::over_limit(
                            exceeded,
                            place(s.line, s.column),
                            "regex",
                        );
                    }
                    other => (CompileErrorKind::Syntax, other.to_string()),
                };
                let s = e.span().start;
                CompileError::new(kind, place(s.line, s.column), what)
            }
            regex_syntax::Error::Translate(e) => {
                let s = e.span().start;
                CompileError::new(
                    CompileErrorKind::Syntax,
                    place(s.line, s.column),
                    e.kind().to_string(),
                )
            }
            other => CompileError::new(CompileErrorKind::Syntax, place(1, 1), other.to_string()),
        })
}

/// Whether nothing can come before / after the current sub-expression inside the pattern, so an
/// anchor there is redundant.
#[derive(Clone, Copy)]
struct Edges {
    start: bool,
    end: bool,
}

struct RegexLowering<'a> {
    pattern: &'a str,
    g: &'a mut GrammarBuilder,
    encoding: &'a mut dyn TextEncoding,
}

impl RegexLowering<'_> {
    fn unsupported(&self, what: &str) -> CompileError {
        CompileError::new(
            CompileErrorKind::Unsupported,
            Location::None,
            format!("regex {:?}: {what}", self.pattern),
        )
    }

    /// Recursion: as deep as `hir` nests (bounded by the parser's nesting limit), each level
    /// guarded.
    fn expr(&mut self, hir: &Hir, edges: Edges) -> Result<ExprId, CompileError> {
        guarded(|| self.expr_step(hir, edges))
    }

    fn expr_step(&mut self, hir: &Hir, edges: Edges) -> Result<ExprId, CompileError> {
        Ok(match hir.kind() {
            HirKind::Empty => self.g.empty(),
            HirKind::Literal(lit) => match std::str::from_utf8(&lit.0) {
                Ok(text) => {
                    let chars: Vec<ExprId> =
                        text.chars().map(|c| self.encoding.char(self.g, c)).collect();
                    self.g.seq(chars)
                }
                Err(_) => return Err(self.unsupported("a literal that is not UTF-8 text")),
            },
            // Byte classes only parse in UTF-8 mode when they are ASCII, so they are characters.
            HirKind::Class(Class::Bytes(c)) if c.is_ascii() => {
                let ranges: Vec<(char, char)> =
                    c.iter().map(|r| (char::from(r.start()), char::from(r.end()))).collect();
                self.encoding.class(self.g, &ranges)
            }
            HirKind::Class(Class::Bytes(_)) => {
                return Err(self.unsupported("a byte class beyond ASCII"))
            }
            HirKind::Class(Class::Unicode(c)) => {
                let ranges: Vec<(char, char)> = c.iter().map(|r| (r.start(), r.end())).collect();
                self.encoding.class(self.g, &ranges)
            }
            HirKind::Look(look) => match look {
                Look::Start | Look::StartLF | Look::StartCRLF if edges.start => self.g.empty(),
                Look::End | Look::EndLF | Look::EndCRLF if edges.end => self.g.empty(),
                Look::Start | Look::StartLF | Look::StartCRLF | Look::End | Look::EndLF
                | Look::EndCRLF => {
                    return Err(self.unsupported(
                        "an anchor (^, $, \\A, \\z) inside the pattern; a regex always spans the whole text",
                    ))
                }
                _ => return Err(self.unsupported("word boundaries (\\b, \\B) are not supported")),
            },
            HirKind::Repetition(rep) => {
                // A second iteration is not at the pattern's edge, so only `x?` passes edges on.
                let inner = if rep.max == Some(1) { edges } else { Edges { start: false, end: false } };
                let body = self.expr(&rep.sub, inner)?;
                self.g.repeat(body, rep.min, rep.max)
            }
            HirKind::Capture(cap) => self.expr(&cap.sub, edges)?,
            HirKind::Concat(parts) => {
                // A part is at the start (end) if every part before (after) it is zero-width:
                // the first part that is not, from each side, ends the edge.
                let not_zero = |p: &&Hir| !is_zero_width(p);
                let first_wide = parts.iter().position(|p| not_zero(&p)).unwrap_or(parts.len());
                let last_wide = parts.iter().rposition(|p| not_zero(&p)).unwrap_or(0);
                let mut ids = Vec::with_capacity(parts.len());
                for (i, p) in parts.iter().enumerate() {
                    let at = Edges {
                        start: edges.start && i <= first_wide,
                        end: edges.end && i >= last_wide,
                    };
                    ids.push(self.expr(p, at)?);
                }
                self.g.seq(ids)
            }
            HirKind::Alternation(branches) => {
                let ids = branches.iter().map(|b| self.expr(b, edges)).collect::<Result<Vec<_>, _>>()?;
                self.g.alt(ids)
            }
        })
    }
}

fn is_zero_width(h: &Hir) -> bool {
    h.properties().maximum_len() == Some(0)
}
