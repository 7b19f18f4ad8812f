//! The fuzz targets. Each reads the fuzzer's bytes one of two ways: a leading NUL byte means
//! *raw* (the text up to the next NUL is the input as a user would send it: a regex, a schema,
//! a grammar, a tool spec, a template and its request, a tokenizer file; the seed corpora are
//! real inputs written this way), anything else means *generated* (the bytes steer a
//! generator in [`crate::gen`], so most inputs are well formed). The bytes left over drive the
//! compiled constraint's matcher through [`crate::drive`], which checks the mask contract.

use std::time::Duration;

use arbitrary::Unstructured;
use formwork::engine::BackendChoice;
use formwork::{
    CompileError, CompileErrorKind, Constraint, Engine, EngineConfig, JsonSchemaOptions, LimitKind,
    Limits, PropertyOrder, TagDispatch, Vocab, VocabConfig, Whitespace,
};

use crate::drive::{Checked, Drive};
use crate::{gen, vocab};

/// A fuzz target: its name (the directory of its corpus) and what it runs on one input.
#[derive(Clone, Copy)]
pub struct Target {
    /// Name of the libFuzzer binary and of `fuzz/corpus/<name>/`.
    pub name: &'static str,
    /// Runs one input; panics only on a broken rule.
    pub run: fn(&[u8]),
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "regex",
        run: regex,
    },
    Target {
        name: "json_schema",
        run: json_schema,
    },
    Target {
        name: "gbnf",
        run: gbnf,
    },
    Target {
        name: "tags",
        run: tags,
    },
    Target {
        name: "templates",
        run: templates,
    },
    Target {
        name: "tokenizer",
        run: tokenizer,
    },
    Target {
        name: "matcher",
        run: matcher,
    },
    Target {
        name: "limits",
        run: under_a_small_limit,
    },
];

/// Ceilings for fuzzing: the defaults with a shorter compile budget and mask work, so an
/// input that needs more is a quick typed refusal rather than a libFuzzer timeout.
pub fn limits() -> Limits {
    Limits::new()
        .compile_time(Some(Duration::from_secs(2)))
        .mask_work(5_000_000)
}

fn engine(backend: BackendChoice) -> Engine {
    engine_under(backend, limits())
}

fn engine_under(backend: BackendChoice, limits: Limits) -> Engine {
    let config = EngineConfig::new()
        .backend(backend)
        .limits(limits)
        .cache_bytes(8 << 20);
    Engine::with_config(vocab::small().clone(), config)
}

/// `base` with the limit `kind` at `value` (a `CompileTime` in milliseconds).
pub fn with_limit(base: Limits, kind: LimitKind, value: u64) -> Limits {
    let n = usize::try_from(value).unwrap_or(usize::MAX);
    match kind {
        LimitKind::Nesting => base.nesting(n),
        LimitKind::InputBytes => base.input_bytes(n),
        LimitKind::GrammarSize => base.grammar_size(n),
        LimitKind::AutomatonStates => base.automaton_states(n),
        LimitKind::Alternatives => base.alternatives(n),
        LimitKind::CompileTime => base.compile_time(Some(Duration::from_millis(value))),
        LimitKind::MaskWork => base.mask_work(value),
        LimitKind::History => base.history(n),
        LimitKind::Readings => base.readings(n),
        other => panic!("no setter for {other:?}"),
    }
}

fn backend(u: &mut Unstructured<'_>) -> BackendChoice {
    match u.int_in_range(0..=3u8).unwrap_or(0) {
        1 => BackendChoice::Operators,
        2 => BackendChoice::Earley,
        _ => BackendChoice::Auto,
    }
}

/// The raw text of a raw input (after the leading NUL, up to the next one), and the bytes
/// after it; `None` for a generated input.
fn raw(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = data.strip_prefix(&[0])?;
    Some(match rest.iter().position(|&b| b == 0) {
        Some(end) => (&rest[..end], &rest[end + 1..]),
        None => (rest, &[]),
    })
}

/// With `FORMWORK_FUZZ_SHOW` set, prints what an input compiles, so a reproducer (often a
/// generated input) can be reported as the regex, schema or grammar it stands for.
fn show(what: &str, source: &dyn std::fmt::Display) {
    if std::env::var_os("FORMWORK_FUZZ_SHOW").is_some() {
        eprintln!("{what}: {source}");
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn drive(constraint: &formwork::Constraint, u: &mut Unstructured<'_>, symbols: bool) -> Drive {
    Checked::new(vocab::small(), constraint.matcher(), symbols).run(u, 64)
}

/// Regexes: raw patterns, or generated ones whose accepted outputs the `regex` crate judges.
pub fn regex(data: &[u8]) {
    let (pattern, rest, judged) = match raw(data) {
        Some((pattern, rest)) => (text(pattern), rest, false),
        None => {
            let mut u = Unstructured::new(data);
            let Ok(pattern) = gen::regex(&mut u, 4) else {
                return;
            };
            let used = data.len() - u.len();
            (pattern, &data[used..], true)
        }
    };
    let mut u = Unstructured::new(rest);
    show("regex", &pattern);
    let Ok(constraint) = engine(backend(&mut u)).compile_regex(&pattern) else {
        return;
    };
    let drive = drive(&constraint, &mut u, false);
    if judged && drive.accepting && !drive.limited {
        judge_regex(&pattern, &drive.output);
    }
}

/// The `regex` crate's verdict on a whole output formwork accepted.
fn judge_regex(pattern: &str, output: &[u8]) {
    let Ok(oracle) = regex::bytes::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(1 << 24)
        .build()
    else {
        return;
    };
    assert!(
        oracle.is_match(output),
        "formwork accepted {:?} for /{pattern}/, the regex crate does not",
        String::from_utf8_lossy(output)
    );
}

fn schema_options(u: &mut Unstructured<'_>) -> JsonSchemaOptions {
    let mut flags = u.arbitrary::<u8>().unwrap_or(0);
    let mut flag = || {
        let f = flags & 1 == 1;
        flags >>= 1;
        f
    };
    let ws = match flag() {
        true => Whitespace::Flexible {
            max_run: Some(2).filter(|_| flag()),
        },
        false => Whitespace::Compact,
    };
    let order = match flag() {
        true => PropertyOrder::Any,
        false => PropertyOrder::Schema,
    };
    JsonSchemaOptions::new()
        .whitespace(ws)
        .property_order(order)
        .lenient(flag())
        .additional_properties(!flag())
}

/// JSON Schemas: raw documents (MaskBench), or generated ones; an accepted output must be
/// JSON.
pub fn json_schema(data: &[u8]) {
    let (schema, rest) = match raw(data) {
        Some((doc, rest)) => match serde_json::from_slice(doc) {
            Ok(schema) => (schema, rest),
            Err(_) => return,
        },
        None => {
            let mut u = Unstructured::new(data);
            let Ok(schema) = gen::schema(&mut u, 4) else {
                return;
            };
            let used = data.len() - u.len();
            (schema, &data[used..])
        }
    };
    let mut u = Unstructured::new(rest);
    let options = schema_options(&mut u);
    show("schema", &schema);
    let engine = engine(backend(&mut u));
    let Ok(constraint) = engine.compile_json_schema(&schema, &options) else {
        return;
    };
    let drive = drive(&constraint, &mut u, false);
    if drive.accepting && !drive.limited {
        // Syntax only: RFC 8259 puts no bound on exponents (serde_json's f64 would).
        assert!(
            serde_json::from_slice::<serde::de::IgnoredAny>(&drive.output).is_ok(),
            "accepted output is not JSON: {:?}",
            String::from_utf8_lossy(&drive.output)
        );
    }
}

/// GBNF grammars, raw or generated.
pub fn gbnf(data: &[u8]) {
    let (grammar, rest) = match raw(data) {
        Some((g, rest)) => (text(g), rest),
        None => {
            let mut u = Unstructured::new(data);
            let Ok(g) = gen::gbnf(&mut u) else { return };
            let used = data.len() - u.len();
            (g, &data[used..])
        }
    };
    let mut u = Unstructured::new(rest);
    show("gbnf", &grammar);
    let Ok(constraint) = engine(backend(&mut u)).compile_gbnf(&grammar, "fuzz.gbnf") else {
        return;
    };
    drive(&constraint, &mut u, true);
}

/// Tool-call dispatch from a `--tags` spec, raw or generated.
pub fn tags(data: &[u8]) {
    let (spec, rest) = match raw(data) {
        Some((doc, rest)) => match serde_json::from_slice(doc) {
            Ok(spec) => (spec, rest),
            Err(_) => return,
        },
        None => {
            let mut u = Unstructured::new(data);
            let Ok(spec) = gen::tags_spec(&mut u) else {
                return;
            };
            let used = data.len() - u.len();
            (spec, &data[used..])
        }
    };
    show("tags", &spec);
    let Ok(dispatch) = TagDispatch::from_spec(&spec) else {
        return;
    };
    let mut u = Unstructured::new(rest);
    let Ok(constraint) = engine(backend(&mut u)).compile_tags(&dispatch) else {
        return;
    };
    drive(&constraint, &mut u, true);
}

/// The shipped templates, with the requests their comments show.
const SHIPPED: &[(&str, &str, &[&str])] = &[
    (
        "outline.fw",
        include_str!("../../templates/outline.fw"),
        &[
            r#"outline(sections: [section(id: "1", children: [section(id: "1.1")]), section(id: "2")])"#,
            r#"outline(sections: [])"#,
        ],
    ),
    (
        "reference_lookup.fw",
        include_str!("../../templates/reference_lookup.fw"),
        &[r#"reference_lookup(topics: 1..20, ids: {"1", "1.1", "2.3"})"#],
    ),
    (
        "tool_call.fw",
        include_str!("../../templates/tool_call.fw"),
        &[
            r#"tool_call(tools: [tool(name: "get_weather", params: [param(name: "city", value: string), param(name: "unit", value: enum(values: {"celsius", "fahrenheit"}))]), tool(name: "search", params: [param(name: "query", value: string), param(name: "limit", value: integer(range: 1..50))])])"#,
            r#"tool_call(tools: [tool(name: "x", params: [param(name: "p", value: pattern(re: /[a-z]{2,5}/))])])"#,
        ],
    ),
];

/// Templates and requests: raw (template text, NUL, request text), or a shipped template
/// with one of its requests and the built-in structures.
pub fn templates(data: &[u8]) {
    let mut u;
    let mut engine;
    let request: String;
    match raw(data) {
        Some((template, rest)) => {
            let (request_bytes, rest) = match rest.iter().position(|&b| b == 0) {
                Some(end) => (&rest[..end], &rest[end + 1..]),
                None => (rest, &[][..]),
            };
            u = Unstructured::new(rest);
            engine = self::engine(backend(&mut u));
            if !template.is_empty()
                && engine
                    .register_template_source("fuzz.fw", &text(template))
                    .is_err()
            {
                return;
            }
            request = text(request_bytes);
        }
        None => {
            u = Unstructured::new(data);
            engine = self::engine(backend(&mut u));
            let Ok(&(name, source, requests)) = u.choose(SHIPPED) else {
                return;
            };
            if engine.register_template_source(name, source).is_err() {
                panic!("shipped template {name} does not compile");
            }
            request = match u.int_in_range(0..=3u8).unwrap_or(0) {
                0 => format!(
                    "regex(pattern: /{}/)",
                    gen::regex(&mut u, 2).unwrap_or_default()
                ),
                // Rust's string escapes are the request language's.
                1 => format!(
                    "json_schema(schema: {:?})",
                    gen::schema(&mut u, 2).unwrap_or_default().to_string()
                ),
                _ => u
                    .choose(requests)
                    .map(|r| r.to_string())
                    .unwrap_or_default(),
            };
        }
    }
    show("request", &request);
    let compiled = match request.trim_start().starts_with('{') {
        true => engine.compile_json_request(&request),
        false => engine.compile(&request),
    };
    let Ok(constraint) = compiled else { return };
    drive(&constraint, &mut u, true);
}

/// Tokenizer files: raw bytes (a `tokenizer.json`, NUL, a `tokenizer_config.json`), or a
/// generated file. A loaded vocabulary must be consistent and tokenize without panicking.
pub fn tokenizer(data: &[u8]) {
    let (json, config, rest) = match raw(data) {
        Some((json, rest)) => {
            let (config, rest) = match rest.iter().position(|&b| b == 0) {
                Some(end) => (Some(rest[..end].to_vec()), &rest[end + 1..]),
                None => (None, rest),
            };
            (json.to_vec(), config, rest)
        }
        None => {
            let mut u = Unstructured::new(data);
            let Ok(file) = gen::tokenizer_json(&mut u) else {
                return;
            };
            let config = match u.int_in_range(0..=2u8).unwrap_or(0) {
                0 => Some(br#"{"eos_token": "<|a|>"}"#.to_vec()),
                1 => Some(br#"{"eos_token": {"content": 7}}"#.to_vec()),
                _ => None,
            };
            let used = data.len() - u.len();
            (file.to_string().into_bytes(), config, &data[used..])
        }
    };
    let Ok(vocab) = Vocab::from_json_bytes(&json, "fuzz", VocabConfig::new().config_json(config))
    else {
        return;
    };
    assert!(vocab.len() <= vocab.mask_width());
    assert!(vocab.mask_width() <= formwork::vocab::MAX_MASK_WIDTH);
    assert_eq!(vocab.mask_words(), vocab.mask_width().div_ceil(32));
    for &e in vocab.eos_tokens() {
        assert!((e as usize) < vocab.len(), "EOS {e} outside the vocabulary");
    }
    let sample = text(rest);
    if let Ok(ids) = vocab.encode(&sample) {
        for t in ids {
            assert!(
                (t as usize) < vocab.mask_width(),
                "encode gave id {t} past the mask"
            );
        }
    }
}

/// The matcher driver: a generated regex, schema or grammar on a chosen backend, then a long
/// run of fills, consumes, rollbacks, resets, forks and forced tokens.
pub fn matcher(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let engine = engine(backend(&mut u));
    let (compiled, symbols) = match u.int_in_range(0..=2u8).unwrap_or(0) {
        0 => {
            let Ok(pattern) = gen::regex(&mut u, 3) else {
                return;
            };
            show("regex", &pattern);
            (engine.compile_regex(&pattern), false)
        }
        1 => {
            let Ok(schema) = gen::schema(&mut u, 3) else {
                return;
            };
            let options = schema_options(&mut u);
            show("schema", &schema);
            (engine.compile_json_schema(&schema, &options), false)
        }
        _ => {
            let Ok(grammar) = gen::gbnf(&mut u) else {
                return;
            };
            show("gbnf", &grammar);
            (engine.compile_gbnf(&grammar, "fuzz.gbnf"), true)
        }
    };
    let Ok(constraint) = compiled else { return };
    Checked::new(vocab::small(), constraint.matcher(), symbols).run(&mut u, 512);
}

/// The limits [`under_a_small_limit`] sets small: all but the compile time, which would make
/// a run depend on the machine's speed.
fn small_limits() -> Vec<LimitKind> {
    LimitKind::ALL
        .into_iter()
        .filter(|&k| k != LimitKind::CompileTime)
        .collect()
}

/// Limits: a generated regex, schema, grammar or tool spec that compiles under the fuzzing
/// limits is compiled again with one limit (chosen by the bytes) small, mostly under a few
/// hundred. The result must be a constraint whose matcher keeps the contract, or a `Limit`
/// error naming that limit (or the compile time): a step that "cannot fail" under the
/// defaults and does under a small limit panics or answers another error.
pub fn under_a_small_limit(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let (Ok(&kind), Ok(value), Ok(shift)) = (
        u.choose(&small_limits()),
        u.arbitrary::<u16>(),
        u.int_in_range(0..=15u32),
    ) else {
        return;
    };
    let value = u64::from(value >> shift);
    let backend = backend(&mut u);
    type Compile = Box<dyn Fn(&Engine) -> Result<Constraint, CompileError>>;
    let (compile, symbols): (Compile, bool) = match u.int_in_range(0..=3u8).unwrap_or(0) {
        0 => {
            let Ok(pattern) = gen::regex(&mut u, 3) else {
                return;
            };
            show("regex", &pattern);
            (Box::new(move |e| e.compile_regex(&pattern)), false)
        }
        1 => {
            let Ok(schema) = gen::schema(&mut u, 3) else {
                return;
            };
            let options = schema_options(&mut u);
            show("schema", &schema);
            (
                Box::new(move |e| e.compile_json_schema(&schema, &options)),
                false,
            )
        }
        2 => {
            let Ok(grammar) = gen::gbnf(&mut u) else {
                return;
            };
            show("gbnf", &grammar);
            (
                Box::new(move |e| e.compile_gbnf(&grammar, "fuzz.gbnf")),
                true,
            )
        }
        _ => {
            let Ok(spec) = gen::tags_spec(&mut u) else {
                return;
            };
            show("tags", &spec);
            let Ok(dispatch) = TagDispatch::from_spec(&spec) else {
                return;
            };
            (Box::new(move |e| e.compile_tags(&dispatch)), true)
        }
    };
    if compile(&engine(backend)).is_err() {
        return;
    }
    show("limit", &format!("{kind:?} {value}"));
    match compile(&engine_under(backend, with_limit(limits(), kind, value))) {
        Ok(constraint) => {
            let history = match kind {
                LimitKind::History => usize::try_from(value).unwrap_or(usize::MAX),
                _ => usize::MAX,
            };
            Checked::new(vocab::small(), constraint.matcher(), symbols)
                .with_history(history)
                .run(&mut u, 64);
        }
        Err(e) => {
            let limit = e.limit().map(|l| l.kind);
            assert!(
                e.kind() == CompileErrorKind::Limit
                    && (limit == Some(kind) || limit == Some(LimitKind::CompileTime)),
                "under a {kind:?} limit of {value}: {e}"
            );
        }
    }
}
