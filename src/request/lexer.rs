//! The request lexer: feeds the LALR(1) parser generated from `grammar/request.lalrpop`.
//!
//! Hand-written and allocation-free (tokens borrow their raw text from the request; escapes
//! are checked here and decoded when the tree is built), because requests are parsed on the
//! critical path of every generation.

/// A request token.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok<'a> {
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Colon,
    DotDot,
    Ident(&'a str),
    /// A string's raw content, between the quotes.
    Str(&'a str),
    Int(i64),
    /// A regex's raw pattern, between the slashes.
    Regex(&'a str),
}

impl std::fmt::Display for Tok<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tok::LParen => f.write_str("`(`"),
            Tok::RParen => f.write_str("`)`"),
            Tok::LBracket => f.write_str("`[`"),
            Tok::RBracket => f.write_str("`]`"),
            Tok::LBrace => f.write_str("`{`"),
            Tok::RBrace => f.write_str("`}`"),
            Tok::Comma => f.write_str("`,`"),
            Tok::Colon => f.write_str("`:`"),
            Tok::DotDot => f.write_str("`..`"),
            Tok::Ident(name) => write!(f, "name `{name}`"),
            Tok::Str(s) => write!(f, "string \"{s}\""),
            Tok::Int(n) => write!(f, "integer {n}"),
            Tok::Regex(r) => write!(f, "regex /{r}/"),
        }
    }
}

/// A lexical error at a byte offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexError {
    pub at: usize,
    pub message: String,
}

/// Deepest nesting of brackets a request may have: the binder walks the tree recursively, and
/// a request must not be able to exhaust a server thread's stack.
pub const MAX_NESTING: usize = 256;

pub struct Lexer<'a> {
    text: &'a str,
    pos: usize,
    depth: usize,
}

impl<'a> Lexer<'a> {
    pub fn new(text: &'a str) -> Lexer<'a> {
        Lexer {
            text,
            pos: 0,
            depth: 0,
        }
    }

    fn error<T>(&self, at: usize, message: impl Into<String>) -> Option<Result<T, LexError>> {
        Some(Err(LexError {
            at,
            message: message.into(),
        }))
    }

    /// The raw content of a string whose opening quote was at `start`, escapes checked.
    fn string(&mut self, start: usize) -> Result<&'a str, LexError> {
        let bytes = self.text.as_bytes();
        let fail = |at: usize, message: &str| LexError {
            at,
            message: message.to_string(),
        };
        let mut i = start + 1;
        loop {
            match bytes.get(i) {
                None | Some(b'\n') => {
                    return Err(fail(start, "unterminated string: expected a closing quote"))
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
                                return Err(fail(
                                    i,
                                    "`\\u` takes `{hex}` naming a Unicode scalar value",
                                ));
                            }
                            i += 2 + close.unwrap() + 1;
                        }
                        _ => {
                            return Err(fail(
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
        Ok(&self.text[start + 1..i])
    }

    /// The raw pattern of a `/regex/` whose slash was at `start` (`\/` does not end it).
    fn regex(&mut self, start: usize) -> Result<&'a str, LexError> {
        let bytes = self.text.as_bytes();
        let mut i = start + 1;
        while i < bytes.len() && bytes[i] != b'/' && bytes[i] != b'\n' {
            if bytes[i] == b'\\' && i + 1 < bytes.len() && bytes[i + 1] != b'\n' {
                i += 1;
            }
            i += 1;
        }
        if i >= bytes.len() || bytes[i] != b'/' {
            return Err(LexError {
                at: start,
                message: "unterminated regex: expected a closing `/`".into(),
            });
        }
        self.pos = i + 1;
        Ok(&self.text[start + 1..i])
    }
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Result<(usize, Tok<'a>, usize), LexError>;

    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.text.as_bytes();
        while self.pos < bytes.len() && bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        let start = self.pos;
        let &b = bytes.get(start)?;
        let punct = |lx: &mut Self, tok: Tok<'a>, len: usize| {
            lx.pos += len;
            Some(Ok((start, tok, start + len)))
        };
        match b {
            b'(' | b'[' | b'{' if self.depth == MAX_NESTING => {
                self.error(start, format!("nesting deeper than {MAX_NESTING} levels"))
            }
            b'(' | b'[' | b'{' => {
                self.depth += 1;
                let tok = match b {
                    b'(' => Tok::LParen,
                    b'[' => Tok::LBracket,
                    _ => Tok::LBrace,
                };
                punct(self, tok, 1)
            }
            b')' | b']' | b'}' => {
                self.depth = self.depth.saturating_sub(1);
                let tok = match b {
                    b')' => Tok::RParen,
                    b']' => Tok::RBracket,
                    _ => Tok::RBrace,
                };
                punct(self, tok, 1)
            }
            b',' => punct(self, Tok::Comma, 1),
            b':' => punct(self, Tok::Colon, 1),
            b'.' if bytes.get(start + 1) == Some(&b'.') => punct(self, Tok::DotDot, 2),
            b'"' => Some(self.string(start).map(|s| (start, Tok::Str(s), self.pos))),
            b'/' => Some(self.regex(start).map(|r| (start, Tok::Regex(r), self.pos))),
            b'-' | b'0'..=b'9' => {
                let mut i = start + usize::from(b == b'-');
                let digits = i;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                if i == digits {
                    return self.error(start, "expected digits after `-`");
                }
                match self.text[start..i].parse::<i64>() {
                    Ok(n) => {
                        self.pos = i;
                        Some(Ok((start, Tok::Int(n), i)))
                    }
                    Err(_) => self.error(start, "integer out of range (64-bit signed)"),
                }
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let mut i = start + 1;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                self.pos = i;
                Some(Ok((start, Tok::Ident(&self.text[start..i]), i)))
            }
            _ => {
                let c = self.text[start..].chars().next().unwrap();
                self.error(
                    start,
                    format!("unexpected character {c:?}: expected a name, a string, an integer, a /regex/, `{{`, `[` or punctuation"),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok<'_>> {
        Lexer::new(text).map(|t| t.unwrap().1).collect()
    }

    #[test]
    fn tokens_keep_their_raw_text() {
        let t = toks(r#"a(b: "x", c: "y\"z", d: /a\/b/, e: -3..20, f: {"1"})"#);
        assert_eq!(t.len(), 26);
        assert_eq!(t[4], Tok::Str("x"));
        assert_eq!(t[8], Tok::Str(r#"y\"z"#));
        assert_eq!(t[12], Tok::Regex(r"a\/b"));
        assert_eq!(t[16], Tok::Int(-3));
        assert_eq!(t[17], Tok::DotDot);
        assert_eq!(t[18], Tok::Int(20));
        assert_eq!(toks(r#""\u{e9}""#), [Tok::Str(r"\u{e9}")]);
    }

    #[test]
    fn errors_have_offsets() {
        let e = Lexer::new("a(b: \"x").find_map(|t| t.err()).unwrap();
        assert_eq!(e.at, 5);
        let e = Lexer::new("a(b: %)").find_map(|t| t.err()).unwrap();
        assert_eq!(e.at, 5);
        let e = Lexer::new("a(b: 99999999999999999999)")
            .find_map(|t| t.err())
            .unwrap();
        assert!(e.message.contains("out of range"));
        let deep = format!(
            "a(b: {}{})",
            "[".repeat(MAX_NESTING),
            "]".repeat(MAX_NESTING)
        );
        let e = Lexer::new(&deep).find_map(|t| t.err()).unwrap();
        assert_eq!(e.at, 5 + MAX_NESTING - 1);
        assert!(e.message.contains("nesting deeper than 256"));
    }
}
