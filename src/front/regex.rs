//! Regular expressions to grammar IR, through `regex-syntax`'s HIR.
//!
//! A regex constrains the *whole* text it is applied to, with ordinary regex meaning: `a|ab`
//! accepts both strings, `\d+` is greedy or lazy alike (there is no "match": the language is
//! what counts). `^` and `$` are therefore redundant at the edges of the pattern and accepted
//! there; anywhere else they, word boundaries, look-around and backreferences are rejected with a
//! typed error naming the construct.

use regex_syntax::hir::{Class, ClassUnicode, Hir, HirKind, Look};
use regex_syntax::utf8::Utf8Sequences;

use crate::error::{CompileError, CompileErrorKind, Location};
use crate::ir::{ByteSet, ExprId, GrammarBuilder};

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
pub fn regex_to_ir(pattern: &str, g: &mut GrammarBuilder) -> Result<ExprId, CompileError> {
    let hir = parse(pattern)?;
    Lowering { pattern, g }.expr(&hir, Edges { start: true, end: true })
}

fn parse(pattern: &str) -> Result<Hir, CompileError> {
    let place = |line: usize, column: usize| Location::Text {
        source: format!("regex {pattern:?}"),
        line,
        col: column,
    };
    regex_syntax::ParserBuilder::new().build().parse(pattern).map_err(|e| match e {
        regex_syntax::Error::Parse(e) => {
            use regex_syntax::ast::ErrorKind as K;
            let (kind, what) = match e.kind() {
                K::UnsupportedLookAround => {
                    (CompileErrorKind::Unsupported, "look-around is not supported".to_string())
                }
                K::UnsupportedBackreference => {
                    (CompileErrorKind::Unsupported, "backreferences are not supported".to_string())
                }
                other => (CompileErrorKind::Syntax, other.to_string()),
            };
            let s = e.span().start;
            CompileError::new(kind, place(s.line, s.column), what)
        }
        regex_syntax::Error::Translate(e) => {
            let s = e.span().start;
            CompileError::new(CompileErrorKind::Syntax, place(s.line, s.column), e.kind().to_string())
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

struct Lowering<'a> {
    pattern: &'a str,
    g: &'a mut GrammarBuilder,
}

impl Lowering<'_> {
    fn unsupported(&self, what: &str) -> CompileError {
        CompileError::new(
            CompileErrorKind::Unsupported,
            Location::None,
            format!("regex {:?}: {what}", self.pattern),
        )
    }

    fn expr(&mut self, hir: &Hir, edges: Edges) -> Result<ExprId, CompileError> {
        Ok(match hir.kind() {
            HirKind::Empty => self.g.empty(),
            HirKind::Literal(lit) => self.g.bytes(&lit.0),
            HirKind::Class(Class::Bytes(c)) => {
                let mut set = ByteSet::EMPTY;
                c.iter().for_each(|r| set.insert_range(r.start(), r.end()));
                self.g.class(set)
            }
            HirKind::Class(Class::Unicode(c)) => unicode_class_to_ir(c, self.g),
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
                let last = parts.len() - 1;
                let mut ids = Vec::with_capacity(parts.len());
                for (i, p) in parts.iter().enumerate() {
                    let at = Edges {
                        start: edges.start && parts[..i].iter().all(is_zero_width),
                        end: edges.end && (i == last || parts[i + 1..].iter().all(is_zero_width)),
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

/// A Unicode character class as the alternation of its UTF-8 byte sequences.
pub(crate) fn unicode_class_to_ir(class: &ClassUnicode, g: &mut GrammarBuilder) -> ExprId {
    let mut branches = Vec::new();
    for range in class.iter() {
        for seq in Utf8Sequences::new(range.start(), range.end()) {
            let parts: Vec<ExprId> =
                seq.as_slice().iter().map(|r| g.class(ByteSet::range(r.start, r.end))).collect();
            branches.push(g.seq(parts));
        }
    }
    g.alt(branches)
}

fn is_zero_width(h: &Hir) -> bool {
    h.properties().maximum_len() == Some(0)
}
