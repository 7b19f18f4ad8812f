//! A small synthetic vocabulary: fast enough for tens of thousands of fuzz runs a minute, and
//! shaped like a real one where it matters to the mask walks (every single byte, invalid and
//! partial UTF-8, tokens crossing JSON punctuation, runs of one letter, special tokens the
//! shipped templates and tool formats name).

use std::sync::OnceLock;

use formwork::{TokenId, Vocab};

/// Special tokens (symbols): the end of sequence and those the templates and tool formats use.
pub const SPECIALS: &[&str] = &[
    "</s>",
    "<|im_end|>",
    "<|im_start|>",
    "<|endoftext|>",
    "<|vision_start|>",
    "<|vision_pad|>",
    "<|vision_end|>",
    "<|python_tag|>",
    "<|eot_id|>",
    "<|start|>",
    "<|end|>",
    "<|channel|>",
    "<|constrain|>",
    "<|message|>",
    "<|call|>",
    "<|return|>",
];

/// Multi-byte text tokens.
const WORDS: &[&[u8]] = &[
    b"\"",
    b"\":",
    b"\": ",
    b"{\"",
    b"\"}",
    b"\",\"",
    b"\", \"",
    b"},{",
    b"[{",
    b"}]",
    b"]}",
    b"{}",
    b"[]",
    b"\":\"",
    b"\":[",
    b"\":{",
    b" {\"",
    b"true",
    b"false",
    b"null",
    b"  ",
    b"    ",
    b"\n",
    b"\n\n",
    b"\r\n",
    b"\t",
    b" the",
    b"name",
    b"type",
    b"value",
    b" a",
    b"ab",
    b"ba",
    b"abc",
    b"aa",
    b"aaaa",
    b"aaaaaaaa",
    b"bb",
    b"12",
    b"123",
    b"00",
    b"0.5",
    b"-1",
    b"e+",
    b"E-",
    b"\\u",
    b"\\\"",
    b"\\\\",
    b"\\n",
    b"\\u00",
    b"http",
    b"://",
    b"www.",
    b".com",
    b"<tool_call>",
    b"</tool_call>",
    b"<function=",
    b"</function>",
    b">{\"",
    b"<think>",
    b"</think>",
    b"<",
    b"</",
    b"/>",
    b"::",
    b" ::= ",
    b"2024-",
    b"-01-",
    b"T12:",
    b":00Z",
    b"@",
    b"@example",
    b"Hello",
    b" world",
    b"\xc3\xa4",
    b"a\xcc\x88",
    b"\xf0\x9f\x98\x80",
    b"\xf0\x9f",
    b"\xf0\x9f\x98",
    b"\xce\xb1\xce\xb2",
    b"\xe4\xbd\xa0\xe5\xa5\xbd",
    b"\xe2\x82\xac",
    b"\xed\xa0\x80",
    b"\xc0\xaf",
];

/// The EOS token's id: `</s>`, the first special.
pub const EOS: TokenId = 0;

/// The synthetic vocabulary (built once per process): the specials, then every byte, then
/// [`WORDS`].
pub fn small() -> &'static Vocab {
    static V: OnceLock<Vocab> = OnceLock::new();
    V.get_or_init(|| {
        let mut tokens: Vec<Vec<u8>> = SPECIALS.iter().map(|s| s.as_bytes().to_vec()).collect();
        tokens.extend((0..=255u8).map(|b| vec![b]));
        tokens.extend(WORDS.iter().map(|w| w.to_vec()));
        let specials: Vec<TokenId> = (0..SPECIALS.len() as TokenId).collect();
        Vocab::from_token_bytes(tokens, &specials, &[EOS]).expect("the synthetic vocabulary")
    })
}

/// Every byte (token `b` is byte `b`), then `tokens`, then `<eos>` (the last id, a special):
/// a vocabulary for differential walks, whose multi-byte tokens cross the places under test.
pub fn bytes_and(tokens: impl IntoIterator<Item = Vec<u8>>) -> Vocab {
    let mut all: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    all.extend(tokens);
    all.push(b"<eos>".to_vec());
    let eos = all.len() as TokenId - 1;
    Vocab::from_token_bytes(all, &[eos], &[eos]).expect("a vocabulary of bytes and tokens")
}
