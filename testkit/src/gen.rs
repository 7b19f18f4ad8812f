//! Structure-aware inputs: regexes, JSON Schemas, GBNF grammars, tool lists and tokenizer
//! files built from the fuzzer's bytes, so most runs reach the compilers and matchers instead
//! of stopping at a syntax error. Nesting is bounded by `depth` arguments; the deep shapes
//! the issue lists (long `$ref` chains, thousands of parentheses) are built by loops.

use arbitrary::{Result, Unstructured};
use serde_json::{json, Map, Value};

/// Characters regexes, strings and names are made of: ASCII, escapes' targets, a two-byte
/// and a combining character, astral characters sharing a UTF-16 high surrogate.
const CHARS: &[&str] = &[
    "a", "b", "c", "z", "A", "0", "1", "9", " ", "-", "_", ".", "\"", "\\", "/", "\n", "ä",
    "\u{308}", "α", "€", "😀", "😂", "😃", "<", ">", "{", "}", "[", "]", ":",
];

/// Regex classes, including the Unicode properties and astral ranges of issue 18.
const CLASSES: &[&str] = &[
    "[a-z]",
    "[^a]",
    "[0-9]",
    "\\d",
    "\\w",
    "\\s",
    ".",
    "[😀😂]",
    "[😀-😃]",
    "\\p{L}",
    "\\p{N}",
    "\\p{Greek}",
    "[^\\p{L}]",
    "[a-zä]",
    "[\\x00-\\x1f]",
    "[^\"\\\\]",
    "\\D",
    "[ab]",
    "(?s:.)",
];

fn pick<'a>(u: &mut Unstructured<'_>, from: &[&'a str]) -> Result<&'a str> {
    Ok(from[u.choose_index(from.len())?])
}

fn small_text(u: &mut Unstructured<'_>, max: usize) -> Result<String> {
    let n = u.int_in_range(0..=max)?;
    (0..n).map(|_| pick(u, CHARS)).collect()
}

fn regex_literal(u: &mut Unstructured<'_>) -> Result<String> {
    let c = pick(u, CHARS)?;
    Ok(regex_escape(c))
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$'
            | '-' => format!("\\{c}"),
            '\n' => "\\n".to_string(),
            _ => c.to_string(),
        })
        .collect()
}

/// A regex of nesting at most `depth`, in the syntax both `regex-syntax` and the `regex`
/// crate read (so the `regex` crate can judge formwork's verdicts).
pub fn regex(u: &mut Unstructured<'_>, depth: u32) -> Result<String> {
    let leaf = depth == 0 || u.ratio(1, 3)?;
    let base = if leaf {
        match u.int_in_range(0..=2)? {
            0 => pick(u, CLASSES)?.to_string(),
            _ => (0..u.int_in_range(1..=3)?)
                .map(|_| regex_literal(u))
                .collect::<Result<String>>()?,
        }
    } else {
        match u.int_in_range(0..=2)? {
            0 => {
                let n = u.int_in_range(2..=4)?;
                let parts = (0..n)
                    .map(|_| regex(u, depth - 1))
                    .collect::<Result<Vec<_>>>()?;
                format!("(?:{})", parts.join("|"))
            }
            1 => {
                let n = u.int_in_range(2..=3)?;
                (0..n)
                    .map(|_| regex(u, depth - 1))
                    .collect::<Result<String>>()?
            }
            _ => format!("({})", regex(u, depth - 1)?),
        }
    };
    Ok(match u.int_in_range(0..=9)? {
        0 => format!("(?:{base})*"),
        1 => format!("(?:{base})+"),
        2 => format!("(?:{base})?"),
        3 => {
            let lo = u.int_in_range(0..=4u32)?;
            let hi = lo + u.int_in_range(0..=4u32)?;
            format!("(?:{base}){{{lo},{hi}}}")
        }
        4 if u.ratio(1, 4)? => {
            // Counted repeats large enough to be work, small enough to compile.
            let hi = u.int_in_range(10..=300u32)?;
            format!("(?:{base}){{0,{hi}}}")
        }
        _ => base,
    })
}

/// A JSON Schema of nesting at most `depth`, over the keywords formwork supports and a few
/// it does not (so errors and lenient warnings are exercised too).
pub fn schema(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    let mut defs = Map::new();
    let mut root = schema_node(u, depth, &mut defs)?;
    if !defs.is_empty() {
        if let Value::Object(o) = &mut root {
            o.insert("$defs".into(), Value::Object(defs));
        } else {
            root = json!({"$defs": defs, "allOf": [root]});
        }
    }
    Ok(root)
}

fn schema_node(
    u: &mut Unstructured<'_>,
    depth: u32,
    defs: &mut Map<String, Value>,
) -> Result<Value> {
    if depth == 0 {
        return scalar_schema(u);
    }
    Ok(match u.int_in_range(0..=11)? {
        0..=2 => scalar_schema(u)?,
        3 | 4 => {
            let n = u.int_in_range(0..=4)?;
            let mut props = Map::new();
            let mut required = Vec::new();
            for i in 0..n {
                let name = match u.ratio(1, 4)? {
                    true => small_text(u, 3)?,
                    false => format!("p{i}"),
                };
                if u.ratio(1, 2)? {
                    required.push(Value::String(name.clone()));
                }
                props.insert(name, schema_node(u, depth - 1, defs)?);
            }
            let mut o = json!({"type": "object", "properties": props, "required": required});
            match u.int_in_range(0..=3)? {
                0 => o["additionalProperties"] = json!(false),
                1 => o["additionalProperties"] = schema_node(u, depth - 1, defs)?,
                2 => {
                    o["patternProperties"] =
                        json!({ regex(u, 1)?: schema_node(u, depth - 1, defs)? })
                }
                _ => {}
            }
            if u.ratio(1, 6)? {
                o["minProperties"] = json!(u.int_in_range(0..=3)?);
            }
            o
        }
        5 => {
            let mut o = json!({"type": "array", "items": schema_node(u, depth - 1, defs)?});
            if u.ratio(1, 2)? {
                let lo = u.int_in_range(0..=3)?;
                o["minItems"] = json!(lo);
                o["maxItems"] = json!(lo + u.int_in_range(0..=5)?);
            }
            if u.ratio(1, 4)? {
                o["prefixItems"] = json!([schema_node(u, depth - 1, defs)?]);
            }
            o
        }
        6 => {
            let key = match u.int_in_range(0..=3)? {
                0 => "oneOf",
                1 => "allOf",
                _ => "anyOf",
            };
            let n = u.int_in_range(1..=3)?;
            let branches = (0..n)
                .map(|_| schema_node(u, depth - 1, defs))
                .collect::<Result<Vec<_>>>()?;
            json!({ key: branches })
        }
        7 => {
            let name = format!("d{}", defs.len());
            defs.insert(name.clone(), Value::Bool(true));
            let body = schema_node(u, depth - 1, defs)?;
            defs.insert(name.clone(), body);
            json!({"$ref": format!("#/$defs/{name}")})
        }
        8 => {
            // Recursion through `$ref`: a tree.
            let name = format!("d{}", defs.len());
            defs.insert(
                name.clone(),
                json!({"type": "object", "properties": {"v": scalar_schema(u)?,
                       "kids": {"type": "array", "items": {"$ref": format!("#/$defs/{name}")}}}}),
            );
            json!({"$ref": format!("#/$defs/{name}")})
        }
        9 => json!({"$ref": "#"}),
        10 => json!({"not": scalar_schema(u)?}),
        _ => {
            let n = u.int_in_range(1..=4)?;
            let values = (0..n).map(|_| json_value(u)).collect::<Result<Vec<_>>>()?;
            json!({ "enum": values })
        }
    })
}

fn scalar_schema(u: &mut Unstructured<'_>) -> Result<Value> {
    Ok(match u.int_in_range(0..=9)? {
        0 => {
            let mut s = json!({"type": "string"});
            if u.ratio(1, 2)? {
                s["pattern"] = json!(format!("^{}$", regex(u, 2)?));
            }
            if u.ratio(1, 3)? {
                let lo = u.int_in_range(0..=5)?;
                s["minLength"] = json!(lo);
                s["maxLength"] = json!(lo + u.int_in_range(0..=20)?);
            }
            if u.ratio(1, 4)? {
                s["format"] = json!(pick(
                    u,
                    &[
                        "date-time",
                        "date",
                        "time",
                        "email",
                        "uuid",
                        "uri",
                        "ipv4",
                        "hostname",
                        "nope"
                    ]
                )?);
            }
            s
        }
        1 => {
            let mut s = json!({"type": pick(u, &["integer", "number"])?});
            if u.ratio(1, 2)? {
                let lo: i16 = u.arbitrary()?;
                s["minimum"] = json!(lo);
                s["maximum"] = json!(lo as i32 + u.int_in_range(0..=1000)?);
            }
            if u.ratio(1, 6)? {
                s["exclusiveMinimum"] = json!(u.arbitrary::<i8>()?);
            }
            s
        }
        2 => json!({"type": "boolean"}),
        3 => json!({"type": "null"}),
        4 => json!({"const": json_value(u)?}),
        5 => json!({"type": ["string", "null"]}),
        6 => json!({}),
        7 => Value::Bool(u.arbitrary()?),
        8 => json!({"type": "string", "enum": [small_text(u, 4)?, small_text(u, 4)?]}),
        _ => json!({"type": pick(u, &["string", "integer", "object", "array", "bogus"])?}),
    })
}

fn json_value(u: &mut Unstructured<'_>) -> Result<Value> {
    Ok(match u.int_in_range(0..=5)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => json!(u.arbitrary::<i32>()?),
        3 => json!(u.arbitrary::<f32>()?.clamp(-1e6, 1e6)),
        4 => json!([small_text(u, 3)?]),
        _ => Value::String(small_text(u, 6)?),
    })
}

/// A GBNF grammar: a few rules over literals, classes, references (recursion allowed),
/// repetition and grouping, start rule `root`.
pub fn gbnf(u: &mut Unstructured<'_>) -> Result<String> {
    let rules = u.int_in_range(1..=5usize)?;
    let mut out = String::new();
    for r in 0..rules {
        let name = if r == 0 {
            "root".to_string()
        } else {
            format!("r{r}")
        };
        out += &format!("{name} ::= {}\n", gbnf_expr(u, rules, 3)?);
    }
    Ok(out)
}

fn gbnf_expr(u: &mut Unstructured<'_>, rules: usize, depth: u32) -> Result<String> {
    let leaf = depth == 0 || u.ratio(1, 3)?;
    let base = if leaf {
        match u.int_in_range(0..=4)? {
            0 => format!("{:?}", small_text(u, 3)?),
            1 => pick(
                u,
                &["[a-z]", "[^\\n]", "[0-9]", "[😀-😃]", "[ \\t]", "[^\"\\\\]"],
            )?
            .to_string(),
            2 if rules > 1 => format!("r{}", u.int_in_range(1..=rules - 1)?),
            3 => "root".to_string(),
            _ => pick(u, &["<|im_end|>", "\"x\"", "\"\"", "."])?.to_string(),
        }
    } else {
        let n = u.int_in_range(2..=3)?;
        let parts = (0..n)
            .map(|_| gbnf_expr(u, rules, depth - 1))
            .collect::<Result<Vec<_>>>()?;
        let sep = if u.ratio(1, 2)? { " | " } else { " " };
        format!("({})", parts.join(sep))
    };
    Ok(match u.int_in_range(0..=7)? {
        0 => format!("{base}*"),
        1 => format!("{base}+"),
        2 => format!("{base}?"),
        3 => format!(
            "{base}{{{},{}}}",
            u.int_in_range(0..=2)?,
            u.int_in_range(2..=5)?
        ),
        _ => base,
    })
}

/// A tool-call spec as `formwork check --tags` reads it: a format, tools with schema
/// parameters (names may repeat or be odd), maybe `require_call` and `forbid`.
pub fn tags_spec(u: &mut Unstructured<'_>) -> Result<Value> {
    let format = pick(u, &["llama31", "qwen", "harmony", "harmony-text", "xml"])?;
    let n = u.int_in_range(0..=4)?;
    let tools = (0..n)
        .map(|i| -> Result<Value> {
            let name = match u.int_in_range(0..=3)? {
                0 => small_text(u, 4)?,
                1 => "get".to_string(),
                _ => format!("tool_{i}"),
            };
            let params = match u.ratio(1, 3)? {
                true => schema(u, 2)?,
                false => json!({"type": "object", "properties": {"x": scalar_schema(u)?}, "required": ["x"]}),
            };
            Ok(match u.ratio(1, 3)? {
                true => json!({"name": name, "parameters": {"type": "dict", "properties": {"x": {"type": "string"}}}}),
                false => json!({"type": "function", "function": {"name": name, "parameters": params}}),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut spec = json!({"format": format, "tools": tools});
    if u.ratio(1, 3)? {
        spec["require_call"] = json!(u.arbitrary::<bool>()?);
    }
    if u.ratio(1, 3)? {
        let m = u.int_in_range(1..=3)?;
        spec["forbid"] = json!((0..m)
            .map(|_| small_text(u, 4))
            .collect::<Result<Vec<_>>>()?);
    }
    Ok(spec)
}

/// A HuggingFace `tokenizer.json`, more or less well formed: a BPE, WordLevel or Unigram
/// model with odd ids (huge, repeated, negative), merges, added tokens (special or not,
/// repeated ids, empty contents) and one of the decoders formwork reads.
pub fn tokenizer_json(u: &mut Unstructured<'_>) -> Result<Value> {
    let n = u.int_in_range(0..=12usize)?;
    let mut vocab = Map::new();
    let mut pieces = Vec::new();
    for i in 0..n {
        let piece = match u.int_in_range(0..=4)? {
            0 => small_text(u, 3)?,
            1 => format!("Ġ{}", small_text(u, 2)?),
            2 => format!("<0x{:02X}>", u.arbitrary::<u8>()?),
            3 => format!("▁{}", small_text(u, 2)?),
            _ => CHARS[i % CHARS.len()].to_string(),
        };
        let id: Value = match u.int_in_range(0..=9)? {
            0 => json!(u.arbitrary::<u32>()?),
            1 => json!(-1),
            2 => json!(i / 2),
            3 => json!("seven"),
            _ => json!(i),
        };
        pieces.push(piece.clone());
        vocab.insert(piece, id);
    }
    let model = match u.int_in_range(0..=3)? {
        0 => {
            json!({"type": "WordLevel", "vocab": vocab, "unk_token": pieces.first().cloned().unwrap_or_default()})
        }
        1 => {
            json!({"type": "Unigram", "unk_id": u.int_in_range(0..=3)?, "vocab": pieces.iter().map(|p| json!([p, -1.5])).collect::<Vec<_>>(), "byte_fallback": u.arbitrary::<bool>()?})
        }
        _ => {
            let merges: Vec<Value> = (0..u.int_in_range(0..=3)?)
                .map(|_| -> Result<Value> {
                    let a = pieces
                        .get(u.choose_index(pieces.len().max(1))?)
                        .cloned()
                        .unwrap_or_default();
                    let b = pieces
                        .get(u.choose_index(pieces.len().max(1))?)
                        .cloned()
                        .unwrap_or_default();
                    Ok(match u.arbitrary::<bool>()? {
                        true => json!(format!("{a} {b}")),
                        false => json!([a, b]),
                    })
                })
                .collect::<Result<_>>()?;
            json!({"type": "BPE", "vocab": vocab, "merges": merges, "byte_fallback": u.arbitrary::<bool>()?})
        }
    };
    let added: Vec<Value> = (0..u.int_in_range(0..=3)?)
        .map(|_| -> Result<Value> {
            let id: u64 = match u.int_in_range(0..=4)? {
                0 => u.arbitrary::<u32>()? as u64,
                1 => 1 << 33,
                _ => u.int_in_range(0..=20)?,
            };
            Ok(json!({"id": id, "content": match u.ratio(1, 5)? { true => String::new(), false => format!("<|{}|>", small_text(u, 3)?) },
                      "single_word": false, "lstrip": false, "rstrip": false, "normalized": false,
                      "special": u.arbitrary::<bool>()?}))
        })
        .collect::<Result<_>>()?;
    let decoder = match u.int_in_range(0..=4)? {
        0 => {
            json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false})
        }
        1 => {
            json!({"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]})
        }
        2 => {
            json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true})
        }
        3 => json!({"type": "WordPiece", "prefix": "##", "cleanup": true}),
        _ => Value::Null,
    };
    let pre = match u.int_in_range(0..=2)? {
        0 => {
            json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})
        }
        1 => {
            json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": false})
        }
        _ => Value::Null,
    };
    let normalizer = match u.int_in_range(0..=2)? {
        0 => json!({"type": "NFC"}),
        1 => json!({"type": "Lowercase"}),
        _ => Value::Null,
    };
    let mut file = json!({"version": "1.0", "truncation": null, "padding": null,
        "added_tokens": added, "normalizer": normalizer, "pre_tokenizer": pre,
        "post_processor": null, "decoder": decoder, "model": model});
    if u.ratio(1, 8)? {
        let missing = pick(u, &["model", "added_tokens", "decoder", "version"])?;
        file.as_object_mut().map(|o| o.remove(missing));
    }
    Ok(file)
}
