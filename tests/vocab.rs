//! Token bytes are exact: for every shipped tokenizer, the bytes of `encode(s)` concatenate back
//! to `s`; specials, EOS and the trie agree with the tokenizer files.

use formwork::vocab::{TokenKind, Vocab, VocabConfig, VocabErrorKind};
use formwork_testkit::tokenizers;

/// A few hundred varied strings: ASCII, JSON, code, CJK, emoji, leading and double spaces,
/// newlines, and their combinations.
fn sample_strings() -> Vec<String> {
    let base = [
        "hello",
        "Hello, world!",
        "The quick brown fox jumps over the lazy dog.",
        r#"{"name": "Alice", "age": 30, "tags": ["x", "y"], "nested": {"ok": true, "v": -1.5e3}}"#,
        r#"[{"topic": [1], "reference": ["2.1.1", "2.3"]}]"#,
        "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n",
        "def f(x):\n\treturn x ** 2  # square\n",
        "SELECT * FROM users WHERE id = 42;",
        "<div class=\"a\">x &amp; y</div>",
        "你好，世界",
        "日本語のテキストと English mixed",
        "한국어 문장입니다.",
        "Ünïcödé àccents ñ ß ø",
        "emoji 🎉🚀👍🏽 and 👨‍👩‍👧‍👦 family",
        "math: ∀x∈ℝ, x² ≥ 0",
        "tabs\tand\ttabs",
        "   three leading spaces",
        "trailing spaces   ",
        "double  spaces  inside",
        "\n\nleading newlines",
        "windows\r\nline\r\nends",
        "digits 0123456789 and 3.14159",
        "1.2.3.4",
        "a",
        " ",
        "  ",
        "\n",
        "@#$%^&*()_+-=[]{}|;':\",./<>?`~",
        "<tool_call>{\"name\": \"f\"}</tool_call>",
        "<think>reasoning</think>",
        "ẞ ſ ﬁ ligatures",
        "Ελληνικά και Русский текст",
        "עברית ועربية",
        "zero\u{200b}width",
        "a\u{0}nul",
    ];
    let mut out: Vec<String> = Vec::new();
    for s in base {
        out.push(s.to_string());
        out.push(format!(" {s}"));
        out.push(format!("  {s}"));
        out.push(format!("{s}\n"));
        out.push(format!("\n{s}"));
        out.push(format!("{s} {s}"));
        out.push(format!("x{s}"));
        out.push(format!("{s}  "));
    }
    out
}

fn check_round_trip(vocab: &Vocab) {
    let mut failures = Vec::new();
    for s in sample_strings() {
        let ids = vocab.encode(&s).unwrap();
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&t| vocab.token_bytes(t).to_vec())
            .collect();
        if bytes != s.as_bytes() {
            failures.push((s.clone(), String::from_utf8_lossy(&bytes).into_owned()));
        }
        assert!(
            ids.iter().all(|&t| vocab.kind(t) == Some(TokenKind::Text)),
            "{s:?}"
        );
    }
    assert!(
        failures.is_empty(),
        "{}: {} mismatches, first: {:?}",
        vocab.source(),
        failures.len(),
        &failures[..failures.len().min(3)]
    );
}

#[test]
fn sample_has_a_few_hundred_strings() {
    assert!(sample_strings().len() >= 250);
}

#[test]
fn qwen3_round_trip_specials_and_eos() {
    let vocab = tokenizers::qwen3();
    check_round_trip(vocab);
    assert_eq!(vocab.len(), 151_669);
    assert_eq!(vocab.mask_width(), 151_936);
    assert_eq!(vocab.kind(151_700), Some(TokenKind::Unused));
    assert_eq!(vocab.kind(151_936), None);
    assert_eq!(vocab.eos_tokens(), &[151_645, 151_643]);
    assert_eq!(vocab.special_id("<|vision_start|>"), Some(151_652));
    assert!(vocab.is_special(151_654));
    // Non-special added tokens are text.
    assert_eq!(vocab.kind(151_657), Some(TokenKind::Text));
    assert_eq!(vocab.token_bytes(151_657), b"<tool_call>");
    assert_eq!(vocab.special_id("<tool_call>"), None);
    // Byte-level pieces: `Ġ` is a space.
    let hello = vocab.encode(" hello").unwrap();
    assert_eq!(hello.len(), 1);
    assert_eq!(vocab.token_bytes(hello[0]), b" hello");
    // The trie holds every text token.
    let text = (0..vocab.len() as u32)
        .filter(|&t| vocab.kind(t) == Some(TokenKind::Text))
        .count();
    assert_eq!(vocab.trie().num_tokens(), text);
}

#[test]
fn llama3_round_trip() {
    let vocab = Vocab::from_file(tokenizers::tokenizer_path("llama3")).unwrap();
    check_round_trip(&vocab);
    assert_eq!(vocab.len(), 128_256);
    assert_eq!(vocab.special_id("<|eot_id|>"), Some(128_009));
    assert!(!vocab.eos_tokens().is_empty());
}

#[test]
fn mistral_round_trip_and_byte_fallback() {
    let vocab = Vocab::from_file(tokenizers::tokenizer_path("mistral-7b-v0.1")).unwrap();
    check_round_trip(&vocab);
    assert_eq!(vocab.len(), 32_000);
    assert_eq!(vocab.eos_tokens(), &[2]);
    assert!(vocab.is_special(1));
    // `<0x0A>` is the newline byte, `▁` a space.
    let nl = vocab.encode("\n").unwrap();
    assert_eq!(
        nl.iter()
            .flat_map(|&t| vocab.token_bytes(t).to_vec())
            .collect::<Vec<_>>(),
        b"\n"
    );
    let piece = (0..32_000u32)
        .find(|&t| vocab.token_bytes(t) == b" the")
        .unwrap();
    assert!(piece > 2);
}

#[test]
fn gpt2_round_trip() {
    let vocab = Vocab::from_file(tokenizers::tokenizer_path("gpt2")).unwrap();
    check_round_trip(&vocab);
    assert_eq!(vocab.len(), 50_257);
    assert_eq!(vocab.eos_tokens(), &[50_256]);
}

#[test]
fn mask_width_and_eos_are_configurable() {
    let path = tokenizers::tokenizer_path("gpt2");
    let vocab = Vocab::from_file_with(
        &path,
        VocabConfig::new()
            .mask_width(Some(50_304))
            .eos(Some(vec!["<|endoftext|>".into()])),
    )
    .unwrap();
    assert_eq!(vocab.mask_width(), 50_304);
    assert_eq!(vocab.mask_words(), 1_572);
    let too_small = Vocab::from_file_with(&path, VocabConfig::new().mask_width(Some(10)));
    assert_eq!(too_small.unwrap_err().kind(), &VocabErrorKind::Config);
    let bad_eos = Vocab::from_file_with(&path, VocabConfig::new().eos(Some(vec!["nope".into()])));
    assert_eq!(bad_eos.unwrap_err().kind(), &VocabErrorKind::Config);
}

#[test]
fn missing_and_corrupt_tokenizer_files_are_typed_errors() {
    let missing = Vocab::from_file("/nonexistent/tokenizer.json").unwrap_err();
    assert_eq!(missing.kind(), &VocabErrorKind::Io);
    assert!(missing.to_string().contains("/nonexistent/tokenizer.json"));

    let dir = std::env::temp_dir().join(format!("formwork-vocab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let corrupt = dir.join("tokenizer.json");
    std::fs::write(&corrupt, b"{\"model\": {\"type\": \"BPE\", \"vocab\": ").unwrap();
    assert_eq!(
        Vocab::from_file(&corrupt).unwrap_err().kind(),
        &VocabErrorKind::Parse
    );
    std::fs::write(&corrupt, [0x1f, 0x8b, 0, 1, 2]).unwrap();
    assert_eq!(
        Vocab::from_file(&corrupt).unwrap_err().kind(),
        &VocabErrorKind::Parse
    );
    std::fs::write(&corrupt, b"not json at all").unwrap();
    assert_eq!(
        Vocab::from_file(&corrupt).unwrap_err().kind(),
        &VocabErrorKind::Parse
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trie_walk_skips_rejected_subtrees() {
    use formwork::vocab::{Subtree, TrieStep, TrieVisitor};
    let vocab = tokenizers::qwen3();
    // Count tokens that are all ASCII digits, visiting as few nodes as possible.
    struct Digits {
        visited: usize,
        found: Vec<u32>,
    }
    impl TrieVisitor for Digits {
        type State = ();
        fn step(&mut self, _: &(), byte: u8, _: usize, _: Subtree) -> TrieStep<()> {
            self.visited += 1;
            if byte.is_ascii_digit() {
                TrieStep::Enter(())
            } else {
                TrieStep::Skip
            }
        }
        fn tokens(&mut self, _: &(), tokens: &[u32]) {
            self.found.extend_from_slice(tokens);
        }
    }
    let mut v = Digits {
        visited: 0,
        found: vec![],
    };
    vocab.trie().walk((), &mut v);
    let brute: Vec<u32> = (0..vocab.len() as u32)
        .filter(|&t| {
            vocab.kind(t) == Some(TokenKind::Text)
                && vocab.token_bytes(t).iter().all(|b| b.is_ascii_digit())
        })
        .collect();
    let mut found = v.found.clone();
    found.sort();
    assert_eq!(found, brute);
    // Only the root's children plus the digit subtrees are visited, far below the node count.
    assert!(v.visited < 1_000, "visited {}", v.visited);
}

/// A byte-level BPE `tokenizer.json` of every byte and a few merges, edited by `edit`.
fn tiny_tokenizer(edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut shifted = 0;
    let mut vocab = serde_json::Map::new();
    for b in 0..=255u8 {
        let c = if printable(b) {
            char::from(b)
        } else {
            shifted += 1;
            char::from_u32(0xFF + shifted).unwrap()
        };
        vocab.insert(c.to_string(), serde_json::json!(b));
    }
    vocab.insert("he".into(), serde_json::json!(256));
    let mut file = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [{"id": 257, "content": "<|end|>", "single_word": false, "lstrip": false,
                          "rstrip": false, "normalized": false, "special": true}],
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                  "vocab": vocab, "merges": ["h e"]}
    });
    edit(&mut file);
    file.to_string().into_bytes()
}

fn load(json: &[u8]) -> Result<Vocab, formwork::VocabError> {
    Vocab::from_json_bytes(json, "tiny.json", VocabConfig::new())
}

#[test]
fn a_tokenizer_in_memory_loads_like_a_file() {
    let vocab = load(&tiny_tokenizer(|_| {})).unwrap();
    assert_eq!(vocab.len(), 258);
    assert_eq!(vocab.eos_tokens(), &[257]);
    assert_eq!(vocab.encode("hello").unwrap()[0], 256);
    assert_eq!(vocab.source(), "tiny.json");
}

#[test]
fn hostile_tokenizer_files_are_typed_errors_that_say_what_and_where() {
    let expect = |json: Vec<u8>, kind: VocabErrorKind, says: &str| {
        let e = load(&json).unwrap_err();
        assert_eq!(e.kind(), &kind, "{e}");
        let message = e.to_string();
        assert!(message.starts_with("tiny.json: "), "{message}");
        assert!(message.contains(says), "{message}");
    };
    // An id of 4 billion would size every table to it. The `tokenizers` crate numbers added
    // tokens itself past the model's ids; a model id is taken as written.
    let renumbered = load(&tiny_tokenizer(|f| {
        f["added_tokens"][0]["id"] = 4_294_967_295u32.into()
    }));
    assert_eq!(renumbered.unwrap().len(), 258);
    expect(
        tiny_tokenizer(|f| f["model"]["vocab"]["he"] = 4_000_000_000u32.into()),
        VocabErrorKind::Config,
        "widest supported mask",
    );
    // Two pieces, one id: which bytes would the id stand for?
    expect(
        tiny_tokenizer(|f| f["model"]["vocab"]["he"] = 7.into()),
        VocabErrorKind::Config,
        "id 7 has two pieces",
    );
    // The `tokenizers` crate drops an added token without content.
    let empty = load(&tiny_tokenizer(|f| {
        f["added_tokens"][0]["content"] = "".into()
    }));
    assert_eq!(empty.unwrap().len(), 257);
    expect(
        tiny_tokenizer(|f| {
            f.as_object_mut().unwrap().remove("model");
        }),
        VocabErrorKind::Parse,
        "not a tokenizer.json",
    );
    expect(
        tiny_tokenizer(|f| f["model"]["vocab"]["he"] = (-1).into()),
        VocabErrorKind::Parse,
        "not a tokenizer.json",
    );
    expect(
        b"{\"model\": ".to_vec(),
        VocabErrorKind::Parse,
        "not a tokenizer.json",
    );
    expect(
        tiny_tokenizer(|f| {
            f["decoder"] = serde_json::json!({"type": "WordPiece", "prefix": "##", "cleanup": true})
        }),
        VocabErrorKind::UnsupportedEncoding,
        "neither ByteLevel",
    );
}

#[test]
fn a_gzip_that_inflates_past_the_ceiling_is_refused() {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let zeros = vec![b' '; 1 << 20];
    for _ in 0..(formwork::vocab::MAX_TOKENIZER_BYTES >> 20) + 1 {
        gz.write_all(&zeros).unwrap();
    }
    let bomb = gz.finish().unwrap();
    assert!(bomb.len() < 2 << 20, "{} bytes", bomb.len());
    let e = load(&bomb).unwrap_err();
    assert_eq!(e.kind(), &VocabErrorKind::Config, "{e}");
    assert!(e.to_string().contains("inflates to more than"), "{e}");
}

/// A path that never ends (a device, a pipe) is read up to the ceiling, not into all the
/// memory there is.
#[cfg(unix)]
#[test]
fn a_tokenizer_file_past_the_ceiling_is_refused() {
    let e = Vocab::from_file("/dev/zero").unwrap_err();
    assert_eq!(e.kind(), &VocabErrorKind::Config, "{e}");
    assert!(e.to_string().contains("longer than"), "{e}");
}

#[test]
fn mask_width_has_a_ceiling_on_every_constructor() {
    let absurd = Vocab::from_json_bytes(
        &tiny_tokenizer(|_| {}),
        "tiny.json",
        VocabConfig::new().mask_width(Some(1 << 40)),
    );
    assert_eq!(absurd.unwrap_err().kind(), &VocabErrorKind::Config);
    let embedded = Vocab::embedded_qwen3_with(VocabConfig::new().mask_width(Some(usize::MAX)));
    assert!(embedded
        .unwrap_err()
        .to_string()
        .contains("widest supported mask"));
    let wide = Vocab::embedded_qwen3_with(VocabConfig::new().mask_width(Some(152_064))).unwrap();
    assert_eq!((wide.len(), wide.mask_width()), (151_669, 152_064));
    assert_eq!(wide.eos_tokens(), &[151_645, 151_643]);
}

/// The `tokenizers` crate panics on some malformed files (fuzzing found an `expect` in its
/// decoder deserializer and slice indexing in its BPE merges); both are `Parse` errors here.
#[test]
fn malformed_files_the_tokenizers_crate_panics_on_are_parse_errors() {
    let text = String::from_utf8(tiny_tokenizer(|_| {})).unwrap();
    let broken_decoder = text.replacen(
        "\"decoder\":{\"type\":\"ByteLevel\"",
        "\"decoder\":{\"type\":\"ByteLevel\"]",
        1,
    );
    assert_ne!(broken_decoder, text);
    let e = load(broken_decoder.as_bytes()).unwrap_err();
    assert_eq!(e.kind(), &VocabErrorKind::Parse, "{e}");
    let merges = tiny_tokenizer(|f| {
        f["model"]["continuing_subword_prefix"] = "####".into();
        f["model"]["vocab"]["h"] = 300.into();
        f["model"]["merges"] = serde_json::json!(["h e"]);
    });
    let e = load(&merges).unwrap_err();
    assert_eq!(e.kind(), &VocabErrorKind::Parse, "{e}");
}

/// A tokenizer file that cannot be read names the file, and the system's error is its source.
#[test]
fn a_missing_file_has_the_io_error_as_source() {
    let e = Vocab::from_file("/nonexistent/tokenizer.json").unwrap_err();
    assert_eq!(e.kind(), &VocabErrorKind::Io);
    assert!(e.to_string().starts_with("/nonexistent/tokenizer.json: "));
    let source = std::error::Error::source(&e).expect("an io error");
    assert!(source.downcast_ref::<std::io::Error>().is_some());
}
