//! llama.cpp's GBNF grammar dialect to grammar IR, parsed with pest (`grammar/gbnf.pest`).
//!
//! Supported: rules `name ::= ...` (names of letters, digits, `-`, `_`), `root` as the start,
//! `"literals"` and `[classes]` (negation `[^...]`, ranges, escapes `\xXX` `\uXXXX`
//! `\UXXXXXXXX` `\t` `\n` `\r` `\\` `\"` `\[` `\]`), `.` (any character), grouping, `|`,
//! `*` `+` `?` `{m}` `{m,}` `{m,n}`, `#` comments, and special tokens written by content,
//! `<|im_end|>`: they match only that special token, never its text (a non-special added token
//! such as Qwen3's `<think>` is text: write it as the literal `"<think>"`). Characters are Unicode
//! code points, compiled to their UTF-8 bytes.
//!
//! Not supported, with a typed error: token ids `<[42]>` (the IR names specials by content)
//! and negated tokens `!<...>`. Unlike llama.cpp, a rule defined twice is an error rather than
//! silently replaced.
//!
//! Untrusted text is bounded by [`Limits`]: its size (`input_bytes`), how deeply groups and
//! repetition operators nest (`nesting`: `((a)?)*` is three levels), the grammar's size
//! (`grammar_size`) and the compile time. pest's parser recurses once per group level, so the
//! nesting of parentheses is checked by a scan of the text before pest sees it.

use std::collections::HashMap;

use pest::iterators::Pair;
use pest::Parser;
use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};

use super::regex::utf8_class;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::ir::{ExprId, Grammar, GrammarBuilder, RuleId};
use crate::limits::{Deadline, LimitExceeded, LimitKind, Limits};

mod parser {
    #[derive(pest_derive::Parser)]
    #[grammar = "../grammar/gbnf.pest"]
    pub(super) struct GbnfParser;
}
use parser::{GbnfParser, Rule};

/// Parses GBNF `text` (named `source` in errors) into a grammar starting at `root`.
///
/// # Example
///
/// ```
/// use formwork::front::gbnf::gbnf_to_ir;
/// use formwork::CompileErrorKind;
///
/// let g = gbnf_to_ir("root ::= item (\",\" item)*\nitem ::= [0-9]+ # digits\n", "list.gbnf").unwrap();
/// assert_eq!(g.rules().len(), 2);
///
/// let err = gbnf_to_ir("root ::= item\n", "list.gbnf").unwrap_err();
/// assert_eq!(err.kind(), CompileErrorKind::Undefined);
/// assert_eq!(err.to_string(), "list.gbnf:1:10: rule `item` is used but never defined");
/// ```
pub fn gbnf_to_ir(text: &str, source: &str) -> Result<Grammar, CompileError> {
    let limits = Limits::default();
    gbnf_to_ir_limited(text, source, &limits, &limits.deadline())
}

/// [`gbnf_to_ir`] within `limits`, spending the compile time left before `deadline`.
pub(crate) fn gbnf_to_ir_limited(
    text: &str,
    source: &str,
    limits: &Limits,
    deadline: &Deadline,
) -> Result<Grammar, CompileError> {
    limits
        .check(LimitKind::InputBytes, text.len() as u64)
        .map_err(|e| {
            CompileError::over_limit(e, Location::in_text(source, text, 0), "GBNF grammar")
        })?;
    check_nesting(text, source, limits)?;
    let file = GbnfParser::parse(Rule::file, text)
        .map_err(|e| syntax_error(e, text, source))?
        .next();
    let mut lower = Lowering {
        text,
        source,
        g: GrammarBuilder::with_limits(limits),
        max_nesting: limits.get(LimitKind::Nesting),
        deadline,
        defined: HashMap::new(),
        first_use: HashMap::new(),
    };
    for rule in file
        .into_iter()
        .flat_map(|f| f.into_inner())
        .filter(|p| p.as_rule() == Rule::rule)
    {
        lower.rule(rule)?;
    }
    let mut undefined: Vec<(&usize, &String)> = lower
        .first_use
        .iter()
        .filter(|(name, _)| !lower.defined.contains_key(*name))
        .map(|(n, o)| (o, n))
        .collect();
    undefined.sort();
    if let Some((&at, name)) = undefined.first() {
        return Err(CompileError::new(
            CompileErrorKind::Undefined,
            lower.at(at),
            format!("rule `{name}` is used but never defined"),
        ));
    }
    let Some(&(root, _)) = lower.defined.get("root") else {
        return Err(CompileError::new(
            CompileErrorKind::Undefined,
            lower.at(text.len()),
            "the grammar has no `root` rule (the start symbol)",
        ));
    };
    lower.g.finish(root)
}

fn syntax_error(e: pest::error::Error<Rule>, text: &str, source: &str) -> CompileError {
    let (line, col) = match e.line_col {
        pest::error::LineColLocation::Pos(p) => p,
        pest::error::LineColLocation::Span(p, _) => p,
    };
    let e = e.renamed_rules(|r| {
        match r {
            Rule::rule | Rule::name => "a rule `name ::= ...`",
            Rule::defines => "`::=`",
            Rule::lit_char | Rule::raw_lit => "a character or the closing `\"`",
            Rule::class_item | Rule::class_char | Rule::raw_class => {
                "a character or the closing `]`"
            }
            Rule::EOI => "end of input",
            Rule::literal => "a \"literal\"",
            Rule::class => "a [character class]",
            Rule::group => "a (group)",
            Rule::rule_ref | Rule::item | Rule::item_nested => "a symbol",
            Rule::postfix | Rule::star | Rule::plus | Rule::question | Rule::braces => {
                "a repetition (*, +, ?, {m,n})"
            }
            Rule::escape => {
                "an escape (\\x.., \\u...., \\U........, \\t, \\n, \\r, \\\\, \\\", \\[, \\])"
            }
            Rule::int => "a number",
            Rule::comma => "`,`",
            Rule::token | Rule::not_token => "a token <...>",
            _ => "a grammar element",
        }
        .to_string()
    });
    let at = match e.location {
        pest::error::InputLocation::Pos(p) => p,
        pest::error::InputLocation::Span((p, _)) => p,
    };
    let message = match &e.variant {
        // pest's guard against running out of stack: only a thread whose stack was nearly
        // spent before the parse began gets here, since nesting was checked first.
        pest::error::ErrorVariant::CustomError { message } if message == "stack limit reached" => {
            return CompileError::new(
                CompileErrorKind::Limit,
                Location::Text {
                    source: source.to_string(),
                    line,
                    col,
                },
                "the thread's stack is too small to parse this GBNF grammar",
            )
        }
        // A backslash where a character was expected starts an escape llama.cpp does not have.
        _ if text[at..].starts_with('\\') => {
            let escape: String = text[at..].chars().take(2).collect();
            format!("unknown escape `{escape}`")
        }
        pest::error::ErrorVariant::ParsingError { .. } => e.variant.message().into_owned(),
        pest::error::ErrorVariant::CustomError { message } => message.clone(),
    };
    CompileError::new(
        CompileErrorKind::Syntax,
        Location::Text {
            source: source.to_string(),
            line,
            col,
        },
        message,
    )
}

/// Rejects parentheses nested deeper than `limits.nesting` before pest, which recurses per
/// level, sees them.
///
/// The scan follows the lexical syntax of `grammar/gbnf.pest` wherever the parser accepts the
/// text: a comment ends at a newline (`\n` or `\r`), a literal or class at its unescaped closing
/// character, a token `<...>` at its `>` (it cannot span lines). So every `(` it counts is one
/// the parser opens as a group, and it skips no `(` the parser opens. Past the first place the
/// text stops being a viable parse, the parser stops too, whatever the scan counts there. All
/// delimiters are ASCII, which UTF-8 never uses inside a multi-byte character.
fn check_nesting(text: &str, source: &str, limits: &Limits) -> Result<(), CompileError> {
    let max = limits.get(LimitKind::Nesting);
    let bytes = text.as_bytes();
    let mut depth = 0u64;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        i += 1;
        match b {
            b'#' => {
                while bytes.get(i).is_some_and(|&c| c != b'\n' && c != b'\r') {
                    i += 1;
                }
            }
            b'"' | b'[' => {
                let close = if b == b'"' { b'"' } else { b']' };
                while let Some(&c) = bytes.get(i) {
                    i += if c == b'\\' { 2 } else { 1 };
                    if c == close {
                        break;
                    }
                }
            }
            b'<' => {
                let end = bytes[i..]
                    .iter()
                    .position(|&c| matches!(c, b'>' | b'\n' | b'\r'));
                if let Some(end) = end.filter(|&e| bytes[i + e] == b'>') {
                    i += end + 1;
                }
            }
            b'(' => {
                depth += 1;
                if depth > max {
                    let exceeded = LimitExceeded {
                        kind: LimitKind::Nesting,
                        value: depth,
                        max,
                    };
                    return Err(CompileError::over_limit(
                        exceeded,
                        Location::in_text(source, text, i - 1),
                        "GBNF grammar: parentheses",
                    ));
                }
            }
            b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

struct Lowering<'a> {
    text: &'a str,
    source: &'a str,
    g: GrammarBuilder,
    /// `Limits::nesting`: groups and repetition operators along any path of an expression.
    max_nesting: u64,
    deadline: &'a Deadline,
    /// Defined rules and the offset of their definition.
    defined: HashMap<String, (RuleId, usize)>,
    /// First reference to each rule name.
    first_use: HashMap<String, usize>,
}

// The pairs come from pest's parse of `grammar/gbnf.pest`: which children a pair has, in which
// order, is the grammar's, and that is what the `expect`s and `unreachable!`s below rely on.
impl Lowering<'_> {
    fn at(&self, offset: usize) -> Location {
        Location::in_text(self.source, self.text, offset)
    }

    fn error(
        &self,
        kind: CompileErrorKind,
        offset: usize,
        message: impl Into<String>,
    ) -> CompileError {
        CompileError::new(kind, self.at(offset), message)
    }

    fn rule(&mut self, pair: Pair<Rule>) -> Result<(), CompileError> {
        let at = pair.as_span().start();
        let mut inner = pair.into_inner();
        let name = inner.next().expect("rule name").as_str().to_string();
        inner.next().expect("::=");
        if let Some(&(_, first)) = self.defined.get(&name) {
            let first = self.at(first);
            return Err(self.error(
                CompileErrorKind::Invalid,
                at,
                format!("rule `{name}` is defined twice (first at {first})"),
            ));
        }
        let id = self.g.rule(&name);
        self.defined.insert(name, (id, at));
        let (body, _) = self.alts(inner.next().expect("rule body"))?;
        self.g.define(id, body).map_err(|e| e.or_at(self.at(at)))
    }

    // `alts`, `seq`, `item` and `primary` recurse once per group level, which `check_nesting`
    // bounded by `Limits::nesting` before pest built the pairs. Each returns its expression
    // and its nesting (groups and repetition operators along its deepest path).

    fn alts(&mut self, pair: Pair<Rule>) -> Result<(ExprId, u64), CompileError> {
        let mut branches = Vec::new();
        let mut nesting = 0;
        for seq in pair.into_inner() {
            let (e, n) = self.seq(seq)?;
            branches.push(e);
            nesting = nesting.max(n);
        }
        Ok((self.g.alt(branches), nesting))
    }

    fn seq(&mut self, pair: Pair<Rule>) -> Result<(ExprId, u64), CompileError> {
        let mut items = Vec::new();
        let mut nesting = 0;
        for item in pair.into_inner() {
            let (e, n) = self.item(item)?;
            items.push(e);
            nesting = nesting.max(n);
        }
        Ok((self.g.seq(items), nesting))
    }

    fn item(&mut self, pair: Pair<Rule>) -> Result<(ExprId, u64), CompileError> {
        self.deadline.tick().map_err(|e| {
            CompileError::over_limit(e, self.at(pair.as_span().start()), "GBNF grammar")
        })?;
        let mut inner = pair.into_inner();
        // The grammar: an item is a primary and its postfix operators.
        let (mut e, mut nesting) = self.primary(inner.next().expect("primary"))?;
        for postfix in inner {
            nesting += 1;
            if nesting > self.max_nesting {
                let exceeded = LimitExceeded {
                    kind: LimitKind::Nesting,
                    value: nesting,
                    max: self.max_nesting,
                };
                return Err(CompileError::over_limit(
                    exceeded,
                    self.at(postfix.as_span().start()),
                    "GBNF grammar: groups and repetitions",
                ));
            }
            let op = postfix.into_inner().next().expect("postfix operator");
            let (min, max) = match op.as_rule() {
                Rule::star => (0, None),
                Rule::plus => (1, None),
                Rule::question => (0, Some(1)),
                Rule::braces => self.braces(op)?,
                other => unreachable!("the grammar's postfix operators: {other:?}"),
            };
            e = self.g.repeat(e, min, max);
        }
        Ok((e, nesting))
    }

    fn braces(&self, pair: Pair<Rule>) -> Result<(u32, Option<u32>), CompileError> {
        let at = pair.as_span().start();
        let mut min = None;
        let mut comma = false;
        let mut max = None;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::comma => comma = true,
                Rule::int => {
                    let n: u32 = p.as_str().parse().map_err(|_| {
                        self.error(
                            CompileErrorKind::Invalid,
                            p.as_span().start(),
                            format!("repetition count {} is too large", p.as_str()),
                        )
                    })?;
                    if comma {
                        max = Some(n);
                    } else {
                        min = Some(n);
                    }
                }
                _ => {}
            }
        }
        // The grammar: braces start with a number.
        let min = min.expect("braces start with a number");
        let max = if comma { max } else { Some(min) };
        if max.is_some_and(|m| m < min) {
            return Err(self.error(
                CompileErrorKind::Invalid,
                at,
                format!(
                    "repetition {{{min},{}}} has its maximum below its minimum",
                    max.unwrap()
                ),
            ));
        }
        Ok((min, max))
    }

    fn primary(&mut self, pair: Pair<Rule>) -> Result<(ExprId, u64), CompileError> {
        match pair.as_rule() {
            Rule::group => {
                let (e, nesting) = self.alts(pair.into_inner().next().expect("group body"))?;
                Ok((e, nesting + 1))
            }
            _ => Ok((self.atom(pair)?, 0)),
        }
    }

    /// A primary other than a group.
    fn atom(&mut self, pair: Pair<Rule>) -> Result<ExprId, CompileError> {
        let at = pair.as_span().start();
        Ok(match pair.as_rule() {
            Rule::literal => {
                let mut s = String::new();
                for c in pair.into_inner() {
                    s.push(self.char(c.into_inner().next().expect("literal char"))?);
                }
                self.g.text(&s)
            }
            Rule::class => {
                let mut negated = false;
                let mut ranges = Vec::new();
                for p in pair.into_inner() {
                    match p.as_rule() {
                        Rule::negated => negated = true,
                        Rule::class_item => {
                            let item_at = p.as_span().start();
                            let mut ends = p.into_inner();
                            let lo = self.char(
                                ends.next()
                                    .expect("class char")
                                    .into_inner()
                                    .next()
                                    .expect("char"),
                            )?;
                            let hi = match ends.next() {
                                Some(h) => self.char(h.into_inner().next().expect("char"))?,
                                None => lo,
                            };
                            if hi < lo {
                                return Err(self.error(
                                    CompileErrorKind::Invalid,
                                    item_at,
                                    format!("character range {lo:?}-{hi:?} is out of order"),
                                ));
                            }
                            ranges.push(ClassUnicodeRange::new(lo, hi));
                        }
                        _ => {}
                    }
                }
                let mut class = ClassUnicode::new(ranges);
                if negated {
                    class.negate();
                }
                class_to_ir(&class, &mut self.g)
            }
            Rule::any => {
                let class = ClassUnicode::new([ClassUnicodeRange::new('\0', char::MAX)]);
                class_to_ir(&class, &mut self.g)
            }
            Rule::rule_ref => {
                let name = pair.as_str().to_string();
                self.first_use.entry(name.clone()).or_insert(at);
                let id = self.g.rule(&name);
                self.g.rule_ref(id)
            }
            Rule::token => {
                let body = pair.into_inner().next().expect("token body");
                match body.as_rule() {
                    Rule::token_text => self.g.special(&format!("<{}>", body.as_str())),
                    _ => {
                        return Err(self.error(
                            CompileErrorKind::Unsupported,
                            at,
                            "token ids (<[id]>) are not supported: name the special token by its \
                             content, e.g. <|im_end|>",
                        ))
                    }
                }
            }
            Rule::not_token => {
                return Err(self.error(
                    CompileErrorKind::Unsupported,
                    at,
                    "negated tokens (!<...>) are not supported",
                ))
            }
            other => unreachable!("the grammar's primaries: {other:?}"),
        })
    }

    /// The character of a `lit_char` / `class_char` alternative (raw or escaped).
    fn char(&self, pair: Pair<Rule>) -> Result<char, CompileError> {
        let s = pair.as_str();
        if pair.as_rule() != Rule::escape {
            return Ok(s.chars().next().expect("one character"));
        }
        let code = match &s[1..2] {
            "x" | "u" | "U" => u32::from_str_radix(&s[2..], 16).expect("hex digits"),
            "t" => '\t' as u32,
            "n" => '\n' as u32,
            "r" => '\r' as u32,
            other => other.chars().next().expect("escaped character") as u32,
        };
        char::from_u32(code).ok_or_else(|| {
            self.error(
                CompileErrorKind::Invalid,
                pair.as_span().start(),
                format!("escape {s} is not a Unicode scalar value"),
            )
        })
    }
}

/// Any one character of a Unicode class, as UTF-8 bytes.
fn class_to_ir(class: &ClassUnicode, g: &mut GrammarBuilder) -> ExprId {
    let ranges: Vec<(char, char)> = class.iter().map(|r| (r.start(), r.end())).collect();
    utf8_class(g, &ranges)
}
