//! The workloads of `cargo bench --bench peers` (`formwork bench`): fixed, seeded cases, each
//! with a reference output every engine must accept. Shared with `tests/bench_workloads.rs`
//! (which checks formwork accepts every reference).
//!
//! - *outline*: WGrammar Figure 1 (`templates/outline.fw`): generated section trees (depth
//!   ≤ 3, 5–60 sections) with titles and summaries from a word list.
//! - *reference lookup*: WGrammar Figure 2 (`templates/reference_lookup.fw`): topic ranges and
//!   section ids, a JSON array linking topics to sections.
//! - *json-mode-eval*: every `JME_*` file of MaskBench, schema and reference completion.
//! - *maskbench*: `tests/data/maskbench-sample` plus `benches/data/maskbench.jsonl`, each schema
//!   with its first valid instance; with `--maskbench PATH`, instead of every workload, every
//!   schema of a MaskBench set ([`maskbench_set`]).
//! - *tools*: BFCL v4 function lists with reference calls, in the Llama 3.1 and Qwen formats.
//!
//! The generated workloads come from a fixed seed; the copied data is under `benches/data/`
//! (see `SOURCE.txt` there and `scripts/make_bench_data.py`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use formwork::engine::Engine;
use formwork::front::bfcl;
use formwork::front::json_schema::JsonSchemaOptions;
use formwork::front::tags::{TagDispatch, ToolFormat};
use formwork::vocab::Vocab;
use formwork::{CompileError, Matcher, Tool};
use serde_json::Value;

use crate::rng::Rng;

/// formwork as the bench and the CI test drive it: one engine with the shipped templates;
/// its router picks the backend of every case.
pub struct Formwork {
    pub engine: Engine,
}

impl Formwork {
    /// Start-up (templates parsed and lowered once).
    pub fn new(vocab: Vocab) -> Formwork {
        let mut engine = Engine::new(vocab);
        engine
            .register_templates([root().join("templates")])
            .expect("shipped templates compile");
        Formwork { engine }
    }

    /// A ready matcher for `spec`: the one place where formwork compiles a case.
    pub fn compile(&self, spec: &Spec) -> Result<Box<dyn Matcher>, CompileError> {
        let constraint = match spec {
            Spec::Outline(_) | Spec::ReferenceLookup { .. } => self
                .engine
                .compile(&spec.request().expect("a template request"))?,
            Spec::Schema(schema) => self
                .engine
                .compile_json_schema(schema, &JsonSchemaOptions::new())?,
            Spec::Tools { format, tools } => self
                .engine
                .compile_tags(&TagDispatch::for_tools(*format, tools))?,
        };
        Ok(Box::new(constraint.matcher()))
    }

    /// Bytes held by formwork's mask caches.
    pub fn cache_bytes(&self) -> usize {
        let stats = self.engine.cache_stats();
        stats.operators.bytes + stats.earley.bytes
    }
}

/// How many cases of each workload: `quick` keeps the whole run under a few minutes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    Quick,
    Full,
}

/// A named set of cases.
pub struct Workload {
    pub name: &'static str,
    pub cases: Vec<Case>,
}

/// One constraint and an output it accepts.
pub struct Case {
    pub id: String,
    pub spec: Spec,
    pub reference: String,
}

/// What the constraint is, in terms every engine's input can be derived from.
pub enum Spec {
    /// `outline(sections: [...])` of `templates/outline.fw`.
    Outline(Vec<Section>),
    /// `reference_lookup(topics: 1..topics, ids: {...})` of `templates/reference_lookup.fw`.
    ReferenceLookup { topics: u32, ids: Vec<String> },
    /// A JSON Schema; outputs are compact JSON (no whitespace), properties in schema order.
    Schema(Value),
    /// Free text with tool calls (formwork's `TagDispatch::for_tools`).
    Tools {
        format: ToolFormat,
        tools: Vec<Tool>,
    },
}

/// A section of a generated document.
pub struct Section {
    pub id: String,
    pub children: Vec<Section>,
}

impl Spec {
    /// The formwork request text, for the template workloads.
    pub fn request(&self) -> Option<String> {
        match self {
            Spec::Outline(sections) => {
                let mut out = String::from("outline(sections: ");
                write_sections(&mut out, sections);
                out.push(')');
                Some(out)
            }
            Spec::ReferenceLookup { topics, ids } => {
                let ids: Vec<String> = ids.iter().map(|i| format!("{i:?}")).collect();
                Some(format!(
                    "reference_lookup(topics: 1..{topics}, ids: {{{}}})",
                    ids.join(", ")
                ))
            }
            Spec::Schema(_) | Spec::Tools { .. } => None,
        }
    }
}

fn write_sections(out: &mut String, sections: &[Section]) {
    out.push('[');
    for (i, s) in sections.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write!(out, "section(id: {:?}", s.id).unwrap();
        if !s.children.is_empty() {
            out.push_str(", children: ");
            write_sections(out, &s.children);
        }
        out.push(')');
    }
    out.push(']');
}

/// Sections in document order (a section, then its subsections).
pub fn flatten(sections: &[Section]) -> Vec<&Section> {
    let mut out = Vec::new();
    for s in sections {
        out.push(s);
        out.extend(flatten(&s.children));
    }
    out
}

fn root() -> PathBuf {
    crate::repo_path("")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn jsonl(path: &Path) -> Vec<Value> {
    read(path)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

/// Every workload, `size` cases each.
pub fn load(size: Size) -> Vec<Workload> {
    let quick = size == Size::Quick;
    let pick = |n_quick: usize, n_full: usize| if quick { n_quick } else { n_full };
    let words = read(&root().join("benches/data/words.txt"))
        .lines()
        .map(str::to_string)
        .collect::<Vec<_>>();
    vec![
        Workload {
            name: "outline",
            cases: outline_cases(&words, pick(4, 40)),
        },
        Workload {
            name: "reference lookup",
            cases: reference_lookup_cases(pick(10, 100)),
        },
        Workload {
            name: "json-mode-eval",
            cases: schema_cases(&root().join("benches/data/jme.jsonl"), pick(12, usize::MAX)),
        },
        Workload {
            name: "maskbench",
            cases: maskbench_cases(pick(24, usize::MAX)),
        },
        Workload {
            name: "tools (Llama 3.1)",
            cases: tool_cases(ToolFormat::Llama31, pick(8, usize::MAX)),
        },
        Workload {
            name: "tools (Qwen)",
            cases: tool_cases(ToolFormat::Qwen, pick(8, usize::MAX)),
        },
    ]
}

/// Evenly spaced `n` of `items` (all of them if fewer).
fn spread<T>(items: Vec<T>, n: usize) -> Vec<T> {
    if items.len() <= n {
        return items;
    }
    let step = items.len() as f64 / n as f64;
    let keep: Vec<usize> = (0..n).map(|i| (i as f64 * step) as usize).collect();
    items
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep.contains(i))
        .map(|(_, t)| t)
        .collect()
}

/// A section tree of `n` sections, depth ≤ 3, numbered like `1`, `1.1`, `1.1.1`.
fn section_tree(rng: &mut Rng, n: usize) -> Vec<Section> {
    // Depth of each section in document order: the first is 1; each next is at most one deeper.
    let mut depths = vec![1usize];
    for _ in 1..n {
        let prev = *depths.last().unwrap();
        depths.push(1 + rng.below((prev + 1).min(3)));
    }
    fn build(depths: &[usize], at: &mut usize, depth: usize, prefix: &str) -> Vec<Section> {
        let mut out = Vec::new();
        while *at < depths.len() && depths[*at] == depth {
            *at += 1;
            let id = format!("{prefix}{}", out.len() + 1);
            let children = build(depths, at, depth + 1, &format!("{id}."));
            out.push(Section { id, children });
        }
        out
    }
    build(&depths, &mut 0, 1, "")
}

fn words(rng: &mut Rng, list: &[String], lo: usize, hi: usize) -> String {
    let n = lo + rng.below(hi - lo + 1);
    let mut out: Vec<String> = (0..n)
        .map(|_| list[rng.below(list.len())].clone())
        .collect();
    let first = &mut out[0];
    *first = first[..1].to_uppercase() + &first[1..];
    out.join(" ")
}

fn outline_cases(list: &[String], n: usize) -> Vec<Case> {
    let mut rng = Rng::new(0x0071_11e5);
    (0..n)
        .map(|i| {
            let n = 5 + rng.below(56);
            let tree = section_tree(&mut rng, n);
            let mut reference = String::new();
            for s in flatten(&tree) {
                writeln!(
                    reference,
                    "<|vision_start|>{} {}<|vision_pad|>{}.<|vision_end|>",
                    s.id,
                    words(&mut rng, list, 2, 6),
                    words(&mut rng, list, 6, 24)
                )
                .unwrap();
            }
            Case {
                id: format!("outline-{i}"),
                spec: Spec::Outline(tree),
                reference,
            }
        })
        .collect()
}

fn reference_lookup_cases(n: usize) -> Vec<Case> {
    let mut rng = Rng::new(0x4ef_100c);
    (0..n)
        .map(|i| {
            let topics = 3 + rng.below(18) as u32;
            let n = 5 + rng.below(36);
            let tree = section_tree(&mut rng, n);
            let ids: Vec<String> = flatten(&tree).iter().map(|s| s.id.clone()).collect();
            let entries: Vec<String> = (0..1 + rng.below(4))
                .map(|_| {
                    let mut ts: Vec<u32> = (0..1 + rng.below(3))
                        .map(|_| 1 + rng.below(topics as usize) as u32)
                        .collect();
                    ts.sort();
                    ts.dedup();
                    let refs: Vec<String> = (0..1 + rng.below(4))
                        .map(|_| format!("{:?}", ids[rng.below(ids.len())]))
                        .collect();
                    let ts: Vec<String> = ts.iter().map(u32::to_string).collect();
                    format!(
                        "{{\"topic\": [{}], \"reference\": [{}]}}",
                        ts.join(", "),
                        refs.join(", ")
                    )
                })
                .collect();
            Case {
                id: format!("reference-lookup-{i}"),
                spec: Spec::ReferenceLookup { topics, ids },
                reference: format!("[{}]", entries.join(", ")),
            }
        })
        .collect()
}

fn schema_case(id: String, schema: Value, data: &Value) -> Case {
    Case {
        id,
        spec: Spec::Schema(schema),
        reference: serde_json::to_string(data).unwrap(),
    }
}

fn schema_cases(path: &Path, n: usize) -> Vec<Case> {
    let rows = jsonl(path)
        .into_iter()
        .map(|r| {
            schema_case(
                r["id"].as_str().unwrap().to_string(),
                r["schema"].clone(),
                &r["data"],
            )
        })
        .collect();
    spread(rows, n)
}

/// Every schema of a MaskBench directory or `maskbench-data.tar.gz` with a valid instance,
/// with its first one: the whole development set, for the tails (`--maskbench PATH`).
#[cfg(feature = "peers")]
pub fn maskbench_set(path: &Path) -> Workload {
    let files = match path.is_dir() {
        true => maskbench_files(path),
        false => maskbench_archive(path),
    };
    Workload {
        name: "maskbench (all)",
        cases: files
            .iter()
            .filter_map(|(name, file)| maskbench_case(name, file))
            .collect(),
    }
}

/// The committed MaskBench sample of the tests, then the bench's extra sample.
fn maskbench_cases(n: usize) -> Vec<Case> {
    let mut cases: Vec<Case> = maskbench_files(&root().join("tests/data/maskbench-sample"))
        .iter()
        .filter_map(|(name, file)| maskbench_case(name, file))
        .collect();
    cases.extend(schema_cases(
        &root().join("benches/data/maskbench.jsonl"),
        usize::MAX,
    ));
    spread(cases, n)
}

/// A MaskBench file (`{"schema": ..., "tests": [{"valid": bool, "data": ...}]}`) as the case
/// of its schema and first valid instance, named after the file; `None` without a valid one.
fn maskbench_case(name: &str, file: &Value) -> Option<Case> {
    let valid = file["tests"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["valid"] == Value::Bool(true))?;
    let id = name.trim_end_matches(".json").to_string();
    Some(schema_case(id, file["schema"].clone(), &valid["data"]))
}

/// Whether a file of a MaskBench set is a schema file (not `expected*.json`).
fn is_maskbench_file(name: &str) -> bool {
    name.ends_with(".json") && !name.starts_with("expected")
}

/// The MaskBench files of a directory, by name.
fn maskbench_files(dir: &Path) -> Vec<(String, Value)> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut files: Vec<(String, Value)> = entries
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| is_maskbench_file(name))
        .map(|name| {
            let text = read(&dir.join(&name));
            let file = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, file)
        })
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}

/// The MaskBench files of a `.tar.gz`, by name.
#[cfg(feature = "peers")]
fn maskbench_archive(path: &Path) -> Vec<(String, Value)> {
    use std::io::Read;
    let shown = path.display();
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{shown}: {e}"));
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut files = Vec::new();
    for entry in archive.entries().unwrap_or_else(|e| panic!("{shown}: {e}")) {
        let mut entry = entry.unwrap_or_else(|e| panic!("{shown}: {e}"));
        let entry_path = entry.path().unwrap_or_else(|e| panic!("{shown}: {e}"));
        let Some(name) = entry_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
        else {
            continue;
        };
        if !entry.header().entry_type().is_file() || !is_maskbench_file(&name) {
            continue;
        }
        let mut text = String::new();
        entry
            .read_to_string(&mut text)
            .unwrap_or_else(|e| panic!("{shown}: {name}: {e}"));
        let file = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        files.push((name, file));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}

/// JSON as Python's `json.dumps` writes it (`", "`, `": "`), as Qwen's chat template does.
fn spaced_json(v: &Value, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                spaced_json(x, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, x)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&serde_json::to_string(k).unwrap());
                out.push_str(": ");
                spaced_json(x, out);
            }
            out.push('}');
        }
        _ => out.push_str(&v.to_string()),
    }
}

/// The call as the format writes it.
pub fn format_call(format: ToolFormat, name: &str, arguments: &Value) -> String {
    match format {
        ToolFormat::Qwen => {
            let mut call = serde_json::Map::new();
            call.insert("name".into(), Value::String(name.to_string()));
            call.insert("arguments".into(), arguments.clone());
            let mut out = String::from("<tool_call>\n");
            spaced_json(&Value::Object(call), &mut out);
            out.push_str("\n</tool_call>");
            out
        }
        ToolFormat::Llama31 => format!("<function={name}>{arguments}</function>"),
        ToolFormat::Harmony { .. } => unimplemented!("the bench has no Harmony workload"),
    }
}

fn tool_cases(format: ToolFormat, n: usize) -> Vec<Case> {
    let rows = jsonl(&root().join("benches/data/bfcl.jsonl"));
    let cases = rows
        .into_iter()
        .map(|r| {
            let tools = bfcl::tools(&r["functions"]).expect("BFCL functions map to JSON Schema");
            // Arguments in the order the schema declares them, as formwork's default expects.
            let calls: Vec<String> = r["calls"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    let name = c["name"].as_str().unwrap();
                    let tool = tools.iter().find(|t| t.name == name).expect("called tool");
                    let args = in_schema_order(&c["arguments"], &tool.parameters);
                    format_call(format, name, &args)
                })
                .collect();
            Case {
                id: r["id"].as_str().unwrap().to_string(),
                spec: Spec::Tools { format, tools },
                reference: calls.join("\n"),
            }
        })
        .collect();
    spread(cases, n)
}

fn in_schema_order(args: &Value, schema: &Value) -> Value {
    let (Some(obj), Some(props)) = (args.as_object(), schema["properties"].as_object()) else {
        return args.clone();
    };
    let mut out = serde_json::Map::new();
    for (k, s) in props {
        if let Some(v) = obj.get(k) {
            out.insert(k.clone(), in_schema_order(v, s));
        }
    }
    for (k, v) in obj {
        if !out.contains_key(k) {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}
