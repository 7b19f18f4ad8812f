//! Shared by the `cfg_*` tests: the test grammars (GBNF), the oracle comparison and a tiny
//! seeded RNG.
#![allow(dead_code)]

use std::sync::Arc;

use formwork::cfg::{CfgCompiler, CfgConfig, CfgGrammar};
use formwork::front::gbnf::gbnf_to_ir;
use formwork::ir::recognizer::{Chart, Recognizer};
use formwork::ir::Grammar;
use formwork::mask::TokenMask;
use formwork::vocab::Vocab;
use formwork::{Matcher, TokenId};

/// JSON (RFC 8259, any whitespace).
pub const JSON: &str = r#"
root    ::= ws value ws
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member  ::= string ws ":" ws value
array   ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string  ::= "\"" char* "\""
char    ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" hex hex hex hex )
hex     ::= [0-9a-fA-F]
number  ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [+-]? [0-9]+ )?
ws      ::= [ \t\n\r]*
"#;

/// [`JSON`] in llguidance's Lark, for the differential test and the llguidance bench.
pub const JSON_LARK: &str = r#"
start: value
value: object | array | STRING | NUMBER | "true" | "false" | "null"
object: "{" [member ("," member)*] "}"
member: STRING ":" value
array: "[" [value ("," value)*] "]"
STRING: /"([^"\\\x00-\x1F]|\\(["\\\/bfnrt]|u[0-9a-fA-F]{4}))*"/
NUMBER: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/
%ignore /[ \t\n\r]+/
"#;

/// [`JSON`] as llguidance reads `JSON_LARK`: `%ignore` allows no whitespace before the first
/// lexeme nor after the last.
pub fn json_gbnf_as_lark_reads_it() -> String {
    JSON.replace("root    ::= ws value ws", "root    ::= value")
}

/// Arithmetic with precedence, written with repetition (no left recursion).
pub const ARITH: &str = r#"
root   ::= sp expr sp
expr   ::= term ( sp [+-] sp term )*
term   ::= factor ( sp [*/%] sp factor )*
factor ::= number | "(" sp expr sp ")" | "-" factor | name "(" sp ( expr ( sp "," sp expr )* )? sp ")"
number ::= [0-9]+ ( "." [0-9]+ )?
name   ::= [a-z]+
sp     ::= " "?
"#;

/// A small C-like language: functions, declarations, statements, expressions, comments.
pub const CLIKE: &str = r#"
root      ::= ( ws function )* ws
function  ::= type " " ident "(" params? ")" ws block
params    ::= param ( "," ws param )*
param     ::= type " " ident
type      ::= ( "int" | "float" | "char" | "void" ) "*"*
block     ::= "{" ( ws stmt )* ws "}"
stmt      ::= decl | assign ";" | "return" ( " " expr )? ";" | ifstmt | whilestmt | block | call ";" | comment
decl      ::= type " " ident ( ws "=" ws expr )? ";"
assign    ::= ident ws "=" ws expr
ifstmt    ::= "if" ws "(" expr ")" ws block ( ws "else" ws ( ifstmt | block ) )?
whilestmt ::= "while" ws "(" expr ")" ws block
expr      ::= unary ( ws binop ws unary )*
unary     ::= ( "-" | "!" )* primary
primary   ::= ident | number | string | call | "(" expr ")"
call      ::= ident "(" ( expr ( "," ws expr )* )? ")"
binop     ::= "+" | "-" | "*" | "/" | "==" | "!=" | "<" | ">" | "<=" | ">=" | "&&" | "||"
ident     ::= [a-zA-Z_] [a-zA-Z0-9_]*
number    ::= [0-9]+ ( "." [0-9]+ )?
string    ::= "\"" ( [^"\\\n] | "\\" [nt"\\] )* "\""
comment   ::= "//" [^\n]* "\n"
ws        ::= [ \t\n]*
"#;

/// Left-recursive expressions.
pub const LEFTREC: &str = r#"
root ::= expr
expr ::= expr "+" term | expr "-" term | term
term ::= term "*" atom | term "/" atom | atom
atom ::= num | "(" expr ")" | id "[" expr "]"
num  ::= [0-9]+
id   ::= [a-z]+
"#;

/// Ambiguous: every split of a sum or product, and nested lists of any bracketing.
pub const AMBIGUOUS: &str = r#"
root ::= e | list
e    ::= e "+" e | e "*" e | "(" e ")" | [0-9]+ | [a-z]
list ::= list list | "<" list? ">" | "x"
"#;

/// Right-linear free text (recursion only in tail position: a loop, no stack) around calls
/// whose arguments nest (`item` recursion is not in tail position: a stack).
pub const RIGHT_LINEAR: &str = r#"
root  ::= text
text  ::= [^<] text | "<call>" item "</call>" after | ""
after ::= "\n" text | ""
item  ::= [a-z]+ | "[" item ("," item)* "]"
"#;

/// Chat-shaped output with special tokens (symbols, never text) and a non-special added token
/// (`<think>` is text in Qwen3).
pub const SPECIALS: &str = r#"
root    ::= "<think>\n" thought "</think>\n\n" answer ( <|im_end|> | <|endoftext|> )?
thought ::= [^<]*
answer  ::= ( [^<] | <|vision_start|> "img" [0-9]+ <|vision_end|> )+
"#;

/// Large counted repeats, near and far from their bounds.
pub const REPEATS: &str = r#"
root  ::= "(" "a"{3,150} ")" | "[" digit{0,100000} "]" | "<" item ( "," item ){50,} ">"
digit ::= [0-9]
item  ::= [a-z]{1,3}
"#;

/// A bounded JSON-style string (a schema's `minLength`/`maxLength`): counted, near both bounds.
pub const BOUNDED_STRING: &str = r#"
root ::= "{\"name\": " str "}"
str  ::= "\"" ( [^"\\\x00-\x1F] | "\\" ["\\/nt] ){2,40} "\""
"#;

pub fn ir(gbnf: &str) -> Grammar {
    gbnf_to_ir(gbnf, "test.gbnf").unwrap_or_else(|e| panic!("{e}"))
}

/// The engine configurations every oracle test runs: the adaptive cache, the cache without
/// context expansion, and the plain trie walk over minimized automata.
pub fn configs() -> Vec<(&'static str, CfgConfig)> {
    vec![
        ("cached", CfgConfig::new()),
        ("cached, no context", CfgConfig::new().context_depth(0)),
        (
            "uncached, minimized",
            CfgConfig::new().mask_cache(false).minimize(true),
        ),
    ]
}

pub fn compile(vocab: &Vocab, config: CfgConfig, ir: &Grammar) -> Arc<CfgGrammar> {
    CfgCompiler::new(vocab, config)
        .compile(ir)
        .unwrap_or_else(|e| panic!("{e}"))
}

pub fn mask_of(m: &mut impl Matcher, vocab: &Vocab) -> TokenMask {
    let mut words = vec![0u32; vocab.mask_words()];
    m.fill_mask(&mut words).unwrap();
    TokenMask::from_words(words, vocab.mask_width())
}

/// Panics with the first differing tokens if the masks differ.
pub fn assert_same_mask(got: &TokenMask, expected: &TokenMask, vocab: &Vocab, what: &str) {
    if got == expected {
        return;
    }
    let diff: Vec<String> = (0..vocab.mask_width() as TokenId)
        .filter(|&t| got.contains(t) != expected.contains(t))
        .take(12)
        .map(|t| {
            format!(
                "{}{}",
                if got.contains(t) { "+" } else { "-" },
                vocab.display_token(t)
            )
        })
        .collect();
    panic!(
        "{what}: mask differs from the oracle ({} vs {} allowed; +extra -missing): {}",
        got.count(),
        expected.count(),
        diff.join(" ")
    );
}

/// For every text: tokenize with `vocab.encode`, and at every step (and after the last token)
/// compare each configuration's mask with the reference recognizer's, bit for bit; then check
/// the texts end accepting with EOS allowed.
pub fn check_oracle(vocab: &Vocab, gbnf: &str, texts: &[&str]) {
    let ir = ir(gbnf);
    let engines: Vec<(&str, Arc<CfgGrammar>)> = configs()
        .into_iter()
        .map(|(name, c)| (name, compile(vocab, c, &ir)))
        .collect();
    check_engines(vocab, &ir, &engines, texts);
}

/// [`check_oracle`] for grammars compiled by the caller (e.g. sharing one compiler's cache).
pub fn check_engines(
    vocab: &Vocab,
    ir: &Grammar,
    engines: &[(&str, Arc<CfgGrammar>)],
    texts: &[&str],
) {
    let rec = Recognizer::new(ir);
    for text in texts {
        let tokens = vocab.encode(text).unwrap();
        let mut matchers: Vec<_> = engines.iter().map(|(n, g)| (*n, g.matcher())).collect();
        let mut chart: Chart = rec.start();
        for step in 0..=tokens.len() {
            let expected = chart.mask(&rec, vocab);
            for (name, m) in matchers.iter_mut() {
                let got = mask_of(m, vocab);
                let at = tokens
                    .get(step)
                    .map_or("<end>".to_string(), |&t| vocab.display_token(t));
                assert_same_mask(
                    &got,
                    &expected,
                    vocab,
                    &format!("{name}, {text:?} step {step} ({at})"),
                );
            }
            let Some(&t) = tokens.get(step) else { break };
            assert!(
                expected.contains(t),
                "{text:?}: token {step} is not allowed by the oracle"
            );
            for (name, m) in matchers.iter_mut() {
                m.consume(t)
                    .unwrap_or_else(|e| panic!("{name}, {text:?} step {step}: {e}"));
            }
            assert!(chart.push_token(&rec, vocab, t));
        }
        for (name, m) in matchers.iter_mut() {
            assert!(
                m.is_accepting(),
                "{name}: {text:?} complete but not accepting"
            );
            let eos = vocab.eos_tokens()[0];
            m.consume(eos)
                .unwrap_or_else(|e| panic!("{name}: EOS after {text:?}: {e}"));
            assert!(m.is_terminated());
        }
    }
}

/// xorshift64*: a seeded RNG for random walks (no dependency needed).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
