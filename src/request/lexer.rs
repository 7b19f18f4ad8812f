//! The request lexer: feeds the LALR(1) parser generated from `grammar/request.lalrpop`.
//!
//! Hand-written and allocation-free (tokens are spans of the request; escapes are checked here
//! and decoded when the tree is built), because requests are parsed on the critical path of
//! every generation.

use crate::limits::{LimitExceeded, LimitKind};

/// A request token. Tokens carry no value: the parser slices names, strings, integers and
/// regexes out of the request by the token's span. With value-free tokens and `u32` positions a
/// parser stack entry is 16 bytes copied whole; a token with a payload was written in pieces and
/// read back whole, which defeats store-to-load forwarding and stalled every shift.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tok {
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Colon,
    DotDot,
    Ident,
    /// A string: its span includes the quotes.
    Str,
    /// An integer, checked to fit 64 bits signed.
    Int,
    /// A regex: its span includes the slashes.
    Regex,
}

impl Tok {
    /// The token for error messages, `raw` being the text of its span.
    pub fn describe(&self, raw: &str) -> String {
        let inner = || &raw[1..raw.len() - 1];
        match self {
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::LBracket => "`[`".into(),
            Tok::RBracket => "`]`".into(),
            Tok::LBrace => "`{`".into(),
            Tok::RBrace => "`}`".into(),
            Tok::Comma => "`,`".into(),
            Tok::Colon => "`:`".into(),
            Tok::DotDot => "`..`".into(),
            Tok::Ident => format!("name `{raw}`"),
            Tok::Str => format!("string \"{}\"", inner()),
            Tok::Int => {
                let n: i64 = raw.parse().expect("the lexer checks that integers fit");
                format!("integer {n}")
            }
            Tok::Regex => format!("regex /{}/", inner()),
        }
    }
}

/// A lexical error at a byte offset (with the limit, if one was reached).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexError {
    pub at: usize,
    pub message: String,
    pub limit: Option<LimitExceeded>,
}

impl LexError {
    fn new(at: usize, message: impl Into<String>) -> LexError {
        LexError {
            at,
            message: message.into(),
            limit: None,
        }
    }
}

pub struct Lexer<'a> {
    text: &'a str,
    pos: usize,
    depth: u64,
    /// Deepest nesting of brackets allowed (`Limits::nesting`).
    max_depth: u64,
}

impl<'a> Lexer<'a> {
    /// A lexer of `text` allowing brackets `max_depth` deep.
    pub fn new(text: &'a str, max_depth: u64) -> Lexer<'a> {
        Lexer {
            text,
            pos: 0,
            depth: 0,
            max_depth,
        }
    }

    /// Checks the escapes of a string whose opening quote was at `start` and moves past it.
    fn string(&mut self, start: usize) -> Result<(), LexError> {
        let bytes = self.text.as_bytes();
        let mut i = start + 1;
        loop {
            match bytes.get(i) {
                None | Some(b'\n') => {
                    return Err(LexError::new(
                        start,
                        "unterminated string: expected a closing quote",
                    ))
                }
                Some(b'"') => break,
                Some(b'\\') => {
                    match bytes.get(i + 1) {
                        Some(b'n' | b't' | b'r' | b'0' | b'\\' | b'"' | b'\'' | b'/') => i += 2,
                        Some(b'u') => {
                            let rest = &self.text[i + 2..];
                            let close = rest.find('}').filter(|_| rest.starts_with('{'));
                            let valid = close
                                .and_then(|k| u32::from_str_radix(&rest[1..k], 16).ok())
                                .and_then(char::from_u32)
                                .is_some();
                            if !valid {
                                return Err(LexError::new(
                                    i,
                                    "`\\u` takes `{hex}` naming a Unicode scalar value",
                                ));
                            }
                            // `valid` implies a `}` was found.
                            i += 2 + close.unwrap() + 1;
                        }
                        _ => {
                            return Err(LexError::new(
                                i,
                                "unknown escape: expected one of \\n \\t \\r \\0 \\\\ \\\" \\' \\/ \\u{...}",
                            ))
                        }
                    }
                }
                Some(_) => i += 1,
            }
        }
        self.pos = i + 1;
        Ok(())
    }

    /// Moves past a `/regex/` whose slash was at `start` (`\/` does not end it).
    fn regex(&mut self, start: usize) -> Result<(), LexError> {
        let bytes = self.text.as_bytes();
        let mut i = start + 1;
        while i < bytes.len() && bytes[i] != b'/' && bytes[i] != b'\n' {
            if bytes[i] == b'\\' && i + 1 < bytes.len() && bytes[i + 1] != b'\n' {
                i += 1;
            }
            i += 1;
        }
        if i >= bytes.len() || bytes[i] != b'/' {
            return Err(LexError::new(
                start,
                "unterminated regex: expected a closing `/`",
            ));
        }
        self.pos = i + 1;
        Ok(())
    }
}

impl Iterator for Lexer<'_> {
    type Item = Result<(u32, Tok, u32), LexError>;

    // Inlined into the parser's loop, so that tokens are passed in registers.
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.text.as_bytes();
        while self.pos < bytes.len() && bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        let start = self.pos;
        let &b = bytes.get(start)?;
        Some(
            self.token(start, b)
                .map(|tok| (start as u32, tok, self.pos as u32)),
        )
    }
}

impl Lexer<'_> {
    /// The token starting with byte `b` at `start`; moves past it.
    #[inline]
    fn token(&mut self, start: usize, b: u8) -> Result<Tok, LexError> {
        let bytes = self.text.as_bytes();
        let tok = match b {
            b'(' | b'[' | b'{' if self.depth == self.max_depth => {
                return Err(LexError {
                    limit: Some(LimitExceeded {
                        kind: LimitKind::Nesting,
                        value: self.depth + 1,
                        max: self.max_depth,
                    }),
                    ..LexError::new(start, "request: brackets")
                })
            }
            b'(' | b'[' | b'{' => {
                self.depth += 1;
                match b {
                    b'(' => Tok::LParen,
                    b'[' => Tok::LBracket,
                    _ => Tok::LBrace,
                }
            }
            b')' | b']' | b'}' => {
                self.depth = self.depth.saturating_sub(1);
                match b {
                    b')' => Tok::RParen,
                    b']' => Tok::RBracket,
                    _ => Tok::RBrace,
                }
            }
            b',' => Tok::Comma,
            b':' => Tok::Colon,
            b'.' if bytes.get(start + 1) == Some(&b'.') => {
                self.pos += 2;
                return Ok(Tok::DotDot);
            }
            b'"' => return self.string(start).map(|()| Tok::Str),
            b'/' => return self.regex(start).map(|()| Tok::Regex),
            b'-' | b'0'..=b'9' => {
                let mut i = start + usize::from(b == b'-');
                let digits = i;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                if i == digits {
                    return Err(LexError::new(start, "expected digits after `-`"));
                }
                if self.text[start..i].parse::<i64>().is_err() {
                    return Err(LexError::new(start, "integer out of range (64-bit signed)"));
                }
                self.pos = i;
                return Ok(Tok::Int);
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let mut i = start + 1;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                self.pos = i;
                return Ok(Tok::Ident);
            }
            _ => {
                // `start` is a character boundary: every token ends on one.
                let c = self.text[start..].chars().next().unwrap_or('\u{fffd}');
                return Err(LexError::new(
                    start,
                    format!("unexpected character {c:?}: expected a name, a string, an integer, a /regex/, `{{`, `[` or punctuation"),
                ));
            }
        };
        // Brackets and punctuation: one byte.
        self.pos += 1;
        Ok(tok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX_NESTING: u64 = 128;

    /// Each token with the text of its span.
    fn toks(text: &str) -> Vec<(Tok, &str)> {
        Lexer::new(text, MAX_NESTING)
            .map(|t| {
                let (start, tok, end) = t.unwrap();
                (tok, &text[start as usize..end as usize])
            })
            .collect()
    }

    #[test]
    fn token_spans_cover_their_raw_text() {
        let t = toks(r#"a(b: "x", c: "y\"z", d: /a\/b/, e: -3..20, f: {"1"})"#);
        assert_eq!(t.len(), 26);
        assert_eq!(t[0], (Tok::Ident, "a"));
        assert_eq!(t[4], (Tok::Str, r#""x""#));
        assert_eq!(t[8], (Tok::Str, r#""y\"z""#));
        assert_eq!(t[12], (Tok::Regex, r"/a\/b/"));
        assert_eq!(t[16], (Tok::Int, "-3"));
        assert_eq!(t[17], (Tok::DotDot, ".."));
        assert_eq!(t[18], (Tok::Int, "20"));
        assert_eq!(toks(r#""\u{e9}""#), [(Tok::Str, r#""\u{e9}""#)]);
        assert_eq!(Tok::Str.describe(r#""y\"z""#), r#"string "y\"z""#);
        assert_eq!(Tok::Regex.describe("/a/"), "regex /a/");
        assert_eq!(Tok::Int.describe("-007"), "integer -7");
    }

    #[test]
    fn errors_have_offsets() {
        let first_error = |text: &str| Lexer::new(text, MAX_NESTING).find_map(|t| t.err()).unwrap();
        assert_eq!(first_error("a(b: \"x").at, 5);
        assert_eq!(first_error("a(b: %)").at, 5);
        let e = first_error("a(b: 99999999999999999999)");
        assert!(e.message.contains("out of range"));
        let n = MAX_NESTING as usize;
        let deep = format!("a(b: {}{})", "[".repeat(n), "]".repeat(n));
        let e = first_error(&deep);
        assert_eq!(e.at, 5 + n - 1);
        assert_eq!(
            e.limit.map(|l| (l.kind, l.value, l.max)),
            Some((LimitKind::Nesting, MAX_NESTING + 1, MAX_NESTING))
        );
    }
}
