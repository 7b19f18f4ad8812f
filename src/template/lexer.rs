//! The template lexer: text → tokens with byte positions, for the Earley parser.
//!
//! Hand-written because three literal forms need their own scanning rules that a grammar over
//! characters would only make slower and vaguer to report: `/regex/` (up to the next unescaped
//! slash), `[class]` (regex class syntax, nested brackets allowed) and `<|special|>`.

use crate::error::{CompileError, CompileErrorKind, Location};
use crate::limits::{LimitExceeded, LimitKind, Limits};

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Ident,
    Str,
    Class,
    Regex,
    Special,
    Int,
    EmptyList,
    Define,
    LParen,
    RParen,
    Pipe,
    Star,
    Plus,
    Question,
    Colon,
    Comma,
    Eq,
    Lt,
    Gt,
    LBrace,
    RBrace,
}

impl Kind {
    /// Every kind, in a fixed order (the parser registers one terminal per kind).
    pub const ALL: [Kind; 21] = [
        Kind::Ident,
        Kind::Str,
        Kind::Class,
        Kind::Regex,
        Kind::Special,
        Kind::Int,
        Kind::EmptyList,
        Kind::Define,
        Kind::LParen,
        Kind::RParen,
        Kind::Pipe,
        Kind::Star,
        Kind::Plus,
        Kind::Question,
        Kind::Colon,
        Kind::Comma,
        Kind::Eq,
        Kind::Lt,
        Kind::Gt,
        Kind::LBrace,
        Kind::RBrace,
    ];

    /// The terminal's name in the Earley grammar (also how errors name it).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Ident => "name",
            Kind::Str => "string",
            Kind::Class => "class",
            Kind::Regex => "regex",
            Kind::Special => "special-token",
            Kind::Int => "integer",
            Kind::EmptyList => "[]",
            Kind::Define => "::=",
            Kind::LParen => "(",
            Kind::RParen => ")",
            Kind::Pipe => "|",
            Kind::Star => "*",
            Kind::Plus => "+",
            Kind::Question => "?",
            Kind::Colon => ":",
            Kind::Comma => ",",
            Kind::Eq => "=",
            Kind::Lt => "<",
            Kind::Gt => ">",
            Kind::LBrace => "{",
            Kind::RBrace => "}",
        }
    }
}

/// A token's payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    None,
    /// An identifier, class text, regex pattern or special-token content.
    Text(String),
    /// A string literal's bytes (escapes decoded).
    Bytes(Vec<u8>),
    Int(u32),
}

#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub kind: Kind,
    pub value: Value,
    /// Byte offset of the token's first character.
    pub start: usize,
}

impl Token {
    pub fn text(&self) -> &str {
        match &self.value {
            Value::Text(t) => t,
            _ => "",
        }
    }
}

struct Lexer<'a> {
    source: &'a str,
    text: &'a str,
    pos: usize,
}

/// Splits `text` (from file `source`) into tokens, checking its size and nesting against
/// `limits`.
pub(crate) fn lex(source: &str, text: &str, limits: &Limits) -> Result<Vec<Token>, CompileError> {
    limits
        .check(LimitKind::InputBytes, text.len() as u64)
        .map_err(|e| {
            CompileError::over_limit(e, Location::in_text(source, text, 0), "template file")
        })?;
    let mut lx = Lexer {
        source,
        text,
        pos: 0,
    };
    let mut nesting = Nesting::new(limits.get(LimitKind::Nesting));
    let mut out = Vec::new();
    while let Some(t) = lx.next()? {
        nesting.token(t.kind).map_err(|e| {
            CompileError::over_limit(e, lx.loc(t.start), "template: groups and repetitions")
        })?;
        out.push(t);
    }
    Ok(out)
}

/// How deeply groups and repetition operators nest, token by token: in `((a)?)*` the `a` is
/// three levels down, as in the syntax tree built from it (give or take its sequences and
/// alternations). Checked before the Earley parser sees the tokens: its parse forest grows
/// deeper with every level, and so does the tree every later pass walks.
struct Nesting {
    max: u64,
    /// Per open group, the deepest item in it so far.
    groups: Vec<u64>,
    /// The nesting of the last item, which a repetition operator wraps.
    last: u64,
    /// Inside `{m,n}`.
    in_braces: bool,
}

impl Nesting {
    fn new(max: u64) -> Nesting {
        Nesting {
            max,
            groups: Vec::new(),
            last: 0,
            in_braces: false,
        }
    }

    fn token(&mut self, kind: Kind) -> Result<(), LimitExceeded> {
        match kind {
            _ if self.in_braces => self.in_braces = kind != Kind::RBrace,
            Kind::LParen => {
                self.groups.push(0);
                self.check(self.groups.len() as u64)?;
            }
            Kind::RParen => {
                let inner = self.groups.pop().unwrap_or(0);
                self.item(inner + 1)?;
            }
            Kind::Star | Kind::Plus | Kind::Question | Kind::LBrace => {
                self.in_braces = kind == Kind::LBrace;
                self.item(self.last + 1)?;
            }
            Kind::Ident | Kind::Str | Kind::Class | Kind::Regex | Kind::Special => self.item(0)?,
            _ => {}
        }
        Ok(())
    }

    /// An item of nesting `n` ends (an atom, a group, or a repetition of the last item).
    fn item(&mut self, n: u64) -> Result<(), LimitExceeded> {
        self.check(n)?;
        self.last = n;
        if let Some(deepest) = self.groups.last_mut() {
            *deepest = (*deepest).max(n);
        }
        Ok(())
    }

    fn check(&self, n: u64) -> Result<(), LimitExceeded> {
        match n > self.max {
            true => Err(LimitExceeded {
                kind: LimitKind::Nesting,
                value: n,
                max: self.max,
            }),
            false => Ok(()),
        }
    }
}

impl Lexer<'_> {
    fn loc(&self, at: usize) -> Location {
        Location::in_text(self.source, self.text, at)
    }

    fn error(&self, at: usize, message: impl Into<String>) -> CompileError {
        CompileError::new(CompileErrorKind::Syntax, self.loc(at), message)
    }

    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn skip_blanks(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.bump();
            } else if c == '#' {
                while self.peek().is_some_and(|c| c != '\n') {
                    self.bump();
                }
            } else {
                break;
            }
        }
    }

    fn next(&mut self) -> Result<Option<Token>, CompileError> {
        self.skip_blanks();
        let start = self.pos;
        let Some(c) = self.bump() else {
            return Ok(None);
        };
        let token = |kind, value| Token { kind, value, start };
        let simple = |kind| Ok(Some(token(kind, Value::None)));
        match c {
            '(' => simple(Kind::LParen),
            ')' => simple(Kind::RParen),
            '|' => simple(Kind::Pipe),
            '*' => simple(Kind::Star),
            '+' => simple(Kind::Plus),
            '?' => simple(Kind::Question),
            ',' => simple(Kind::Comma),
            '=' => simple(Kind::Eq),
            '>' => simple(Kind::Gt),
            '{' => simple(Kind::LBrace),
            '}' => simple(Kind::RBrace),
            ':' if self.text[self.pos..].starts_with(":=") => {
                self.pos += 2;
                simple(Kind::Define)
            }
            ':' => simple(Kind::Colon),
            '"' | '\'' => {
                let bytes = self.string_body(start, c)?;
                Ok(Some(token(Kind::Str, Value::Bytes(bytes))))
            }
            '[' if self.peek() == Some(']') => {
                self.bump();
                simple(Kind::EmptyList)
            }
            '[' => {
                let class = self.class_body(start)?;
                Ok(Some(token(Kind::Class, Value::Text(class))))
            }
            '/' => {
                let pattern = self.regex_body(start)?;
                Ok(Some(token(Kind::Regex, Value::Text(pattern))))
            }
            '<' if self.peek() == Some('|') => {
                let end = self.text[self.pos..].find("|>").ok_or_else(|| {
                    self.error(start, "unterminated special token: expected `|>`")
                })?;
                let content = self.text[start..self.pos + end + 2].to_string();
                if content.contains(char::is_whitespace) {
                    return Err(self.error(start, "a special token `<|...|>` has no whitespace"));
                }
                self.pos += end + 2;
                Ok(Some(token(Kind::Special, Value::Text(content))))
            }
            '<' if self.peek() == Some('"') => {
                // The general form `<"content">` for special tokens not shaped like `<|...|>`.
                let quote_at = self.pos;
                self.bump();
                let bytes = self.string_body(quote_at, '"')?;
                if self.bump() != Some('>') {
                    return Err(self.error(self.pos, "expected `>` after a special token's content"));
                }
                let content = String::from_utf8(bytes)
                    .map_err(|_| self.error(start, "a special token's content is UTF-8 text"))?;
                Ok(Some(token(Kind::Special, Value::Text(content))))
            }
            '<' => simple(Kind::Lt),
            c if c.is_ascii_digit() => {
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.bump();
                }
                let n = self.text[start..self.pos]
                    .parse::<u32>()
                    .map_err(|_| self.error(start, "integer too large (at most 4294967295)"))?;
                Ok(Some(token(Kind::Int, Value::Int(n))))
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.bump();
                }
                let name = self.text[start..self.pos].to_string();
                Ok(Some(token(Kind::Ident, Value::Text(name))))
            }
            other => Err(self.error(
                start,
                format!(
                    "unexpected character {other:?}: expected a rule, a string, a class, a /regex/ or a special token"
                ),
            )),
        }
    }

    /// The bytes of a string literal whose opening quote was at `start`.
    fn string_body(&mut self, start: usize, quote: char) -> Result<Vec<u8>, CompileError> {
        let mut out = Vec::new();
        loop {
            let at = self.pos;
            match self.bump() {
                None | Some('\n') => {
                    return Err(self.error(start, "unterminated string: expected a closing quote"))
                }
                Some(c) if c == quote => return Ok(out),
                Some('\\') => {
                    let c = self
                        .bump()
                        .ok_or_else(|| self.error(start, "unterminated string"))?;
                    let decoded = match c {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        '0' => '\0',
                        '\\' | '"' | '\'' => c,
                        'x' => {
                            let hex: String = (0..2).filter_map(|_| self.bump()).collect();
                            match u8::from_str_radix(&hex, 16) {
                                Ok(b) if b < 0x80 => b as char,
                                _ => {
                                    return Err(self.error(
                                        at,
                                        "`\\x` takes two hex digits of an ASCII character (00-7F); write other characters as `\\u{...}` or themselves",
                                    ))
                                }
                            }
                        }
                        'u' => self.unicode_escape(at)?,
                        other => {
                            return Err(self.error(
                                at,
                                format!(
                                    "unknown escape `\\{other}`: expected one of \\n \\t \\r \\0 \\\\ \\\" \\' \\xHH \\u{{...}}"
                                ),
                            ))
                        }
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(decoded.encode_utf8(&mut buf).as_bytes());
                }
                Some(c) => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
    }

    fn unicode_escape(&mut self, at: usize) -> Result<char, CompileError> {
        let bad = |lx: &Self| lx.error(at, "`\\u` takes `{hex}` naming a Unicode scalar value");
        if self.bump() != Some('{') {
            return Err(bad(self));
        }
        let close = self.text[self.pos..].find('}').ok_or_else(|| bad(self))?;
        let hex = &self.text[self.pos..self.pos + close];
        let c = u32::from_str_radix(hex, 16)
            .ok()
            .and_then(char::from_u32)
            .ok_or_else(|| bad(self))?;
        self.pos += close + 1;
        Ok(c)
    }

    /// A character class `[...]` in regex syntax whose `[` was at `start` (nested classes and
    /// escaped brackets allowed); returned whole, brackets included. A literal `]` is written
    /// `\]` (`[]` is the empty list).
    fn class_body(&mut self, start: usize) -> Result<String, CompileError> {
        let mut depth = 1;
        loop {
            match self.bump() {
                None | Some('\n') => {
                    return Err(self.error(start, "unterminated character class: expected `]`"))
                }
                Some('\\') => {
                    self.bump();
                }
                Some('[') => depth += 1,
                Some(']') => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(self.text[start..self.pos].to_string());
                    }
                }
                Some(_) => {}
            }
        }
    }

    /// A `/regex/` whose opening slash was at `start`; `\/` stands for a slash.
    fn regex_body(&mut self, start: usize) -> Result<String, CompileError> {
        let mut out = String::new();
        loop {
            match self.bump() {
                None | Some('\n') => {
                    return Err(self.error(start, "unterminated regex: expected a closing `/`"))
                }
                Some('/') => return Ok(out),
                Some('\\') if self.peek() == Some('/') => {
                    self.bump();
                    out.push('/');
                }
                Some('\\') => {
                    out.push('\\');
                    if let Some(c) = self.bump() {
                        out.push(c);
                    }
                }
                Some(c) => out.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lex(source: &str, text: &str) -> Result<Vec<Token>, CompileError> {
        super::lex(source, text, &Limits::new())
    }

    fn kinds(text: &str) -> Vec<Kind> {
        lex("t.fw", text).unwrap().iter().map(|t| t.kind).collect()
    }

    #[test]
    fn literal_forms() {
        let toks = lex(
            "t.fw",
            r#"a(x: list<b, ", ">) ::= "q\"\n" [^\]"] /a\/b/ <|x|> <"</s>"> {2,3} [] # c"#,
        )
        .unwrap();
        let k: Vec<Kind> = toks.iter().map(|t| t.kind).collect();
        use Kind::*;
        assert_eq!(
            k,
            [
                Ident, LParen, Ident, Colon, Ident, Lt, Ident, Comma, Str, Gt, RParen, Define, Str,
                Class, Regex, Special, Special, LBrace, Int, Comma, Int, RBrace, EmptyList
            ]
        );
        assert_eq!(toks[12].value, Value::Bytes(b"q\"\n".to_vec()));
        assert_eq!(toks[13].text(), r#"[^\]"]"#);
        assert_eq!(toks[14].text(), "a/b");
        assert_eq!(toks[15].text(), "<|x|>");
        assert_eq!(toks[16].text(), "</s>");
        assert_eq!(kinds("[]"), [EmptyList]);
        assert_eq!(kinds("[[:alpha:]x]"), [Class]);
    }

    #[test]
    fn errors_name_the_place() {
        let err = lex("t.fw", "a ::=\n  \"abc").unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.fw:2:3: unterminated string: expected a closing quote"
        );
        let err = lex("t.fw", "a ::= \"\\q\"").unwrap_err();
        assert!(
            err.to_string().starts_with("t.fw:1:8: unknown escape"),
            "{err}"
        );
        let err = lex("t.fw", "a ::= %").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("t.fw:1:7: unexpected character"),
            "{err}"
        );
    }

    #[test]
    fn groups_and_repetitions_nest_within_the_limit() {
        let limits = Limits::new().nesting(4);
        let limit = |text: &str| {
            let err = super::lex("t.fw", text, &limits).unwrap_err();
            (
                err.location().to_string(),
                err.limit().map(|l| (l.kind, l.value, l.max)),
            )
        };
        let at = |col: usize| format!("t.fw:1:{col}");
        let nesting = |value| Some((LimitKind::Nesting, value, 4));
        assert_eq!(limit("a ::= (((((\"x\")))))"), (at(11), nesting(5)));
        assert_eq!(limit("a ::= \"x\"*+?{2}{3,}"), (at(16), nesting(5)));
        assert_eq!(limit("a ::= ((\"x\")*)?+"), (at(16), nesting(5)));
        // Siblings do not add up, and braces hold no nesting.
        let ok = "a ::= (\"x\"?) (\"y\"*)+? b ::= ((\"z\"))** c ::= ((((\"w\"))))";
        assert!(super::lex("t.fw", ok, &limits).is_ok());
        let err = super::lex("t.fw", &"x".repeat(100), &Limits::new().input_bytes(99)).unwrap_err();
        assert_eq!(
            err.limit().map(|l| (l.kind, l.value)),
            Some((LimitKind::InputBytes, 100))
        );
    }
}
