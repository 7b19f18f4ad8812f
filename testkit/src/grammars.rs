//! The grammars of the oracle tests and benches (GBNF, with llguidance's Lark for JSON), and
//! the Earley backend configurations every oracle test runs.

use std::sync::Arc;

use formwork::cfg::{CfgCompiler, CfgConfig, CfgGrammar};
use formwork::front::gbnf::gbnf_to_ir;
use formwork::ir::{Grammar, GrammarBuilder};
use formwork::vocab::Vocab;

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

/// The IR of a test grammar (GBNF), panicking with the error if it does not compile.
pub fn ir(gbnf: &str) -> Grammar {
    gbnf_to_ir(gbnf, "test.gbnf").unwrap_or_else(|e| panic!("{e}"))
}

/// The engine configurations every oracle test runs: the adaptive cache, the cache without
/// context expansion over rules built as parses enter them, and the plain trie walk over
/// minimized automata.
pub fn configs() -> Vec<(&'static str, CfgConfig)> {
    vec![
        ("cached", CfgConfig::new()),
        (
            "cached, no context, built on entry",
            CfgConfig::new()
                .context_depth(0)
                .eager_states(0)
                .batch_states(0),
        ),
        (
            "uncached, minimized",
            CfgConfig::new().mask_cache(false).minimize(true),
        ),
    ]
}

/// `ir` compiled by the Earley backend, panicking with the error if it does not compile.
pub fn compile(vocab: &Vocab, config: CfgConfig, ir: &Grammar) -> Arc<CfgGrammar> {
    CfgCompiler::new(vocab, config)
        .compile(ir)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `r0 ::= "a" r1`, ..., `rn ::= "b"`: a chain of `n` rules, as deep as `n`
/// (the limits tests' input for recursion the input controls).
pub fn rule_chain(n: usize) -> Grammar {
    let mut g = GrammarBuilder::new();
    let rules: Vec<_> = (0..=n).map(|i| g.rule(&format!("r{i}"))).collect();
    for i in 0..n {
        let a = g.text("a");
        let next = g.rule_ref(rules[i + 1]);
        let body = g.seq([a, next]);
        g.define(rules[i], body).unwrap();
    }
    let b = g.text("b");
    g.define(rules[n], b).unwrap();
    g.finish(rules[0]).unwrap()
}

/// An object schema with one of each part the JSON Schema lowering builds (declared strings,
/// arrays of an enum, any value, a nested object, a pattern, additional properties), for the
/// tests that sweep limits over every rule it defines.
pub fn object_of_every_part() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
            "extra": {},
            "nested": {"type": "object", "properties": {"x": {"type": "integer"}}}
        },
        "patternProperties": {"^x-": {"type": "number"}},
        "additionalProperties": {"type": "boolean"}
    })
}
