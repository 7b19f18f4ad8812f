//! The `formwork` command line: inspect a vocabulary, check a text against a constraint, run
//! MaskBench.

mod maskbench;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use formwork::template::StructureFactory;
use formwork::vocab::{TokenKind, Vocab, VocabConfig};
use formwork::{
    BackendChoice, BackendKind, CfgConfig, Constraint, Engine, EngineConfig, JsonSchemaOptions,
    Limits, Matcher, PropertyOrder, TagDispatch, TokenId, Whitespace,
};
use maskbench::{HarnessConfig, Status};
use serde_json::json;

/// See the `mimalloc` dependency in Cargo.toml.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "formwork",
    version,
    about = "Structured decoding: exact token masks for LLM inference"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Size, special tokens, EOS and trie statistics of a vocabulary.
    Vocab(TokenizerArgs),
    /// Tokenize a text and walk it through a constraint's matcher (a regex, a JSON schema, a
    /// GBNF grammar, a tool-call tag dispatch, or a request against templates): exit 0 if
    /// every token is allowed and the matcher accepts at the end, 1 if rejected, 2 on error.
    /// Warns when the tokenizer's normaliser changed the text.
    Check(CheckArgs),
    /// Run MaskBench: for each schema, compile it through the engine's router, walk its valid
    /// instances (compact JSON) with a mask before every token and EOS at the end, and check
    /// that every invalid instance is rejected. Prints the counts (passing, compile errors,
    /// validation errors, invalidation errors, timeouts), mask and compile p50/p99 and the
    /// routes taken. Exit 1 if `--expect` finds a regression.
    Maskbench(MaskbenchArgs),
    /// Template files.
    #[command(subcommand)]
    Templates(TemplatesCommand),
}

#[derive(Subcommand)]
enum TemplatesCommand {
    /// Parse, check and lower the `*.fw` templates of a directory (or one file); list the
    /// structures and their parameters, or the first error with its position (exit 2).
    Check(TemplatesCheckArgs),
}

#[derive(Args)]
struct TemplatesCheckArgs {
    #[command(flatten)]
    tokenizer: TokenizerArgs,
    /// A directory of `*.fw` files, or one file.
    path: PathBuf,
}

#[derive(Args)]
struct TokenizerArgs {
    /// A HuggingFace tokenizer.json (or .json.gz); default: the embedded Qwen3 tokenizer.
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// Mask width (the model's vocabulary size) if larger than the tokenizer's (default: the
    /// tokenizer's size; 151,936 for the embedded Qwen3).
    #[arg(long)]
    mask_width: Option<usize>,
}

/// Ceilings on one compilation and one matcher (`formwork::Limits`); each defaults to the
/// library's default.
#[derive(Args)]
struct LimitArgs {
    /// Deepest nesting of a schema, grammar expression, regex group, template or request
    /// [default: 128].
    #[arg(long, value_name = "DEPTH")]
    max_nesting: Option<usize>,
    /// Largest input text or schema, in bytes [default: 8 MiB].
    #[arg(long, value_name = "BYTES")]
    max_input_bytes: Option<usize>,
    /// Most expressions or rules of one grammar [default: 2,000,000].
    #[arg(long, value_name = "N")]
    max_grammar_size: Option<usize>,
    /// Most states of one automaton built while compiling [default: 100,000].
    #[arg(long, value_name = "N")]
    max_states: Option<usize>,
    /// Most branches of one alternation (enum values, tools, forbidden strings)
    /// [default: 100,000].
    #[arg(long, value_name = "N")]
    max_alternatives: Option<usize>,
    /// Time budget of one compilation in milliseconds [default: 10,000].
    #[arg(long, value_name = "MS", conflicts_with = "no_compile_deadline")]
    compile_time_ms: Option<u64>,
    /// No time budget for compilations.
    #[arg(long)]
    no_compile_deadline: bool,
    /// Work units one mask or one consumed token may spend [default: 50,000,000].
    #[arg(long, value_name = "UNITS")]
    max_mask_work: Option<u64>,
    /// Consumed tokens a matcher keeps for rollback [default: 1,000,000].
    #[arg(long, value_name = "TOKENS")]
    max_history: Option<usize>,
    /// Most simultaneous readings of the input at one position while matching
    /// [default: 100,000].
    #[arg(long, value_name = "N")]
    max_readings: Option<usize>,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        let mut limits = Limits::new();
        if let Some(n) = self.max_nesting {
            limits = limits.nesting(n);
        }
        if let Some(n) = self.max_input_bytes {
            limits = limits.input_bytes(n);
        }
        if let Some(n) = self.max_grammar_size {
            limits = limits.grammar_size(n);
        }
        if let Some(n) = self.max_states {
            limits = limits.automaton_states(n);
        }
        if let Some(n) = self.max_alternatives {
            limits = limits.alternatives(n);
        }
        if let Some(ms) = self.compile_time_ms {
            limits = limits.compile_time(Some(Duration::from_millis(ms)));
        }
        if self.no_compile_deadline {
            limits = limits.compile_time(None);
        }
        if let Some(n) = self.max_mask_work {
            limits = limits.mask_work(n);
        }
        if let Some(n) = self.max_history {
            limits = limits.history(n);
        }
        if let Some(n) = self.max_readings {
            limits = limits.readings(n);
        }
        limits
    }
}

/// How JSON Schemas are compiled (`--schema`, `maskbench`) and which backend runs.
#[derive(Args)]
struct SchemaArgs {
    /// Drop unsupported keywords (reported as warnings on stderr) instead of failing.
    #[arg(long)]
    lenient: bool,
    /// Accept an object's properties in any order (default: schema order). An object whose
    /// properties formwork cannot hold in any order keeps the schema's order, a warning
    /// saying which.
    #[arg(long)]
    any_order: bool,
    /// With --any-order: fail the schema rather than keep such an object in the schema's
    /// order.
    #[arg(long, requires = "any_order")]
    no_order_fallback: bool,
    /// Whitespace between JSON tokens.
    #[arg(long, value_enum, default_value_t = WhitespaceArg::Compact)]
    whitespace: WhitespaceArg,
    /// With `--whitespace flexible`: longest run of whitespace (default: unbounded).
    #[arg(long)]
    max_ws_run: Option<u32>,
    /// Objects without `additionalProperties` allow no undeclared property (JSON Schema's
    /// default allows any).
    #[arg(long)]
    no_additional_properties: bool,
    /// Backend for schemas, grammars and regexes: the router's choice (regular → operators,
    /// recursive → Earley), or forced.
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    backend: BackendArg,
    /// Earley backend: automaton states a grammar builds when it compiles, breadth first from
    /// its start rule; the rest is built when a parse first enters it [default: 0].
    #[arg(long, value_name = "N")]
    eager_states: Option<usize>,
    /// Earley backend: rules whose automaton before determinization has at least N states
    /// are built when the grammar compiles, wherever they are [default: 2,048].
    #[arg(long, value_name = "N")]
    large_unit_states: Option<usize>,
    /// Earley backend: states a later build adds at most beyond the rules a parse entered
    /// (the rules they call, breadth first) [default: 64].
    #[arg(long, value_name = "N")]
    batch_states: Option<usize>,
    #[command(flatten)]
    limits: LimitArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum WhitespaceArg {
    Compact,
    Flexible,
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendArg {
    Auto,
    Ops,
    Earley,
}

impl SchemaArgs {
    fn options(&self) -> JsonSchemaOptions {
        let ws = match self.whitespace {
            WhitespaceArg::Compact => Whitespace::Compact,
            WhitespaceArg::Flexible => Whitespace::Flexible {
                max_run: self.max_ws_run,
            },
        };
        let order = match (self.any_order, self.no_order_fallback) {
            (true, false) => PropertyOrder::AnyOrSchema,
            (true, true) => PropertyOrder::Any,
            (false, _) => PropertyOrder::Schema,
        };
        JsonSchemaOptions::new()
            .whitespace(ws)
            .property_order(order)
            .additional_properties(!self.no_additional_properties)
            .lenient(self.lenient)
    }

    fn engine(&self, vocab: Vocab) -> Engine {
        let backend = match self.backend {
            BackendArg::Auto => BackendChoice::Auto,
            BackendArg::Ops => BackendChoice::Operators,
            BackendArg::Earley => BackendChoice::Earley,
        };
        let mut cfg = CfgConfig::new();
        if let Some(n) = self.eager_states {
            cfg = cfg.eager_states(n);
        }
        if let Some(n) = self.large_unit_states {
            cfg = cfg.large_unit_states(n);
        }
        if let Some(n) = self.batch_states {
            cfg = cfg.batch_states(n);
        }
        let config = EngineConfig::new()
            .backend(backend)
            .cfg(cfg)
            .limits(self.limits.limits());
        Engine::with_config(vocab, config)
    }
}

#[derive(Args)]
#[command(group(ArgGroup::new("constraint").required(true).args(["regex", "schema", "gbnf", "tags", "templates"])))]
struct CheckArgs {
    #[command(flatten)]
    tokenizer: TokenizerArgs,
    #[command(flatten)]
    schema_args: SchemaArgs,
    /// The constraint: a regex over the whole text (may start with `-`).
    #[arg(long, allow_hyphen_values = true)]
    regex: Option<String>,
    /// The constraint: a JSON Schema file (options: --lenient, --any-order, --whitespace,
    /// --max-ws-run, --no-additional-properties).
    #[arg(long)]
    schema: Option<PathBuf>,
    /// The constraint: a llama.cpp GBNF grammar file (start rule `root`).
    #[arg(long)]
    gbnf: Option<PathBuf>,
    /// The constraint: free text with tool calls, from a JSON file
    /// `{"format": "llama31"|"qwen"|"harmony"|"harmony-text", "tools": [...],
    /// "require_call": bool, "forbid": ["<think>", ...]}` where `tools` is an OpenAI-style list
    /// (`{"type": "function", "function": {"name", "parameters"}}`) or a BFCL function list
    /// (`{"name", "parameters"}` with BFCL type names); `require_call` and `forbid` are
    /// optional. Tool arguments use the format's own JSON options (compact; Qwen: a space
    /// allowed between tokens; no undeclared properties), not the schema flags.
    #[arg(long)]
    tags: Option<PathBuf>,
    /// The constraint: a request (`--request`) against the templates in this directory/file.
    #[arg(long, requires = "request_source")]
    templates: Option<PathBuf>,
    /// The request, in the text form (`outline(sections: [...])`) or, if it starts with `{`,
    /// the JSON form.
    #[arg(long, group = "request_source", allow_hyphen_values = true)]
    request: Option<String>,
    /// A file holding the request (text or JSON form).
    #[arg(long, group = "request_source", conflicts_with = "request")]
    request_file: Option<PathBuf>,
    /// The text to check (may start with `-`).
    #[arg(
        long,
        conflicts_with = "file",
        required_unless_present = "file",
        allow_hyphen_values = true
    )]
    text: Option<String>,
    /// A file holding the text to check.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Print one line per step: token, bytes, allowed, mask size, mask time.
    #[arg(long)]
    trace: bool,
    /// Print one JSON object per step and a summary object.
    #[arg(long)]
    json: bool,
    /// With --json: add the sorted allowed token ids of each step.
    #[arg(long)]
    dump_masks: bool,
}

#[derive(Args)]
struct MaskbenchArgs {
    #[command(flatten)]
    tokenizer: TokenizerArgs,
    #[command(flatten)]
    schema_args: SchemaArgs,
    /// A directory of MaskBench JSON files, or the `maskbench-data.tar.gz` archive.
    path: PathBuf,
    /// Run only the first N schemas (by file name).
    #[arg(long)]
    limit: Option<usize>,
    /// Time budget per schema (compile and all instances); over it counts as a timeout.
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// An expected-results file: exit 1 if passing falls, invalidation errors rise, or a file
    /// expected to pass fails.
    #[arg(long)]
    expect: Option<PathBuf>,
    /// Write this run's expected-results file (counts and each file's status).
    #[arg(long)]
    write_expected: Option<PathBuf>,
    /// Print each file's figures as a JSON line (with the reason when it did not pass), then
    /// the summary as JSON.
    #[arg(long)]
    json: bool,
    /// List every schema that did not pass, with the reason.
    #[arg(long)]
    failures: bool,
}

/// Why a command stopped before its verdict.
enum Failure {
    /// An error to report on stderr (exit 2).
    Message(String),
    /// Whoever reads stdout went away (`formwork vocab | head`): nothing left to say to.
    StdoutClosed,
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Message(message)
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        match e.kind() {
            io::ErrorKind::BrokenPipe => Failure::StdoutClosed,
            _ => Failure::Message(format!("writing the output: {e}")),
        }
    }
}

type Outcome = Result<ExitCode, Failure>;

fn main() -> ExitCode {
    #[cfg(feature = "mimalloc")]
    formwork::allocator::keep_freed_memory();
    let cli = Cli::parse();
    // `println!` panics when stdout is a closed pipe; every command writes here instead and
    // stops quietly on `BrokenPipe`.
    let out = &mut io::stdout().lock();
    let result = match cli.command {
        Command::Vocab(args) => vocab_command(out, &args),
        Command::Check(args) => check_command(out, &args),
        Command::Maskbench(args) => maskbench_command(out, &args),
        Command::Templates(TemplatesCommand::Check(args)) => templates_check_command(out, &args),
    };
    let result = result.and_then(|code| out.flush().map(|()| code).map_err(Failure::from));
    match result {
        Ok(code) => code,
        Err(Failure::StdoutClosed) => ExitCode::SUCCESS,
        Err(Failure::Message(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn load_vocab(args: &TokenizerArgs) -> Result<Vocab, String> {
    let config = VocabConfig::new().mask_width(args.mask_width);
    let vocab = match &args.tokenizer {
        None => Vocab::embedded_qwen3_with(config),
        Some(path) => Vocab::from_file_with(path, config),
    };
    vocab.map_err(|e| e.to_string())
}

fn vocab_command(out: &mut impl Write, args: &TokenizerArgs) -> Outcome {
    let vocab = load_vocab(args)?;
    let count = |k: TokenKind| {
        (0..vocab.mask_width() as TokenId)
            .filter(|&t| vocab.kind(t) == Some(k))
            .count()
    };
    let mut specials: Vec<(&str, TokenId)> = vocab.specials().collect();
    specials.sort_by_key(|s| s.1);
    writeln!(out, "source:        {}", vocab.source())?;
    writeln!(out, "tokens:        {}", vocab.len())?;
    writeln!(
        out,
        "mask width:    {} ({} u32 words)",
        vocab.mask_width(),
        vocab.mask_words()
    )?;
    writeln!(out, "text tokens:   {}", count(TokenKind::Text))?;
    writeln!(out, "special:       {}", count(TokenKind::Special))?;
    writeln!(out, "unused ids:    {}", count(TokenKind::Unused))?;
    let eos: Vec<String> = vocab
        .eos_tokens()
        .iter()
        .map(|&t| format!("{t} {}", vocab.display_token(t)))
        .collect();
    writeln!(out, "eos:           {}", eos.join(", "))?;
    writeln!(out, "trie nodes:    {}", vocab.trie().num_nodes())?;
    writeln!(out, "longest token: {} bytes", vocab.max_token_len())?;
    for (content, id) in specials {
        writeln!(out, "  special {id:>7} {content}")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn check_command(out: &mut impl Write, args: &CheckArgs) -> Outcome {
    let vocab = load_vocab(&args.tokenizer)?;
    let text = match (&args.text, &args.file) {
        (Some(t), _) => t.clone(),
        (None, Some(path)) => read(path, &args.schema_args.limits.limits())?,
        (None, None) => return Err("give --text or --file".to_string().into()),
    };
    let constraint = compile_constraint(&vocab, args)?;
    let mut matcher = constraint.matcher();
    let tokens = vocab.encode(&text).map_err(|e| e.to_string())?;
    warn_if_normalised(&vocab, &text, &tokens);
    walk(
        out,
        &vocab,
        &mut matcher,
        &tokens,
        constraint.backend(),
        args,
    )
}

/// The tokenizer's normaliser may rewrite the text (Qwen3's NFC turns `a` + U+0308 into `ä`):
/// then the verdict is about the rewritten text, and the user must know.
fn warn_if_normalised(vocab: &Vocab, text: &str, tokens: &[TokenId]) {
    let checked: Vec<u8> = tokens
        .iter()
        .flat_map(|&t| vocab.token_bytes(t))
        .copied()
        .collect();
    let given = text.as_bytes();
    if checked == given {
        return;
    }
    let at = checked
        .iter()
        .zip(given)
        .take_while(|(a, b)| a == b)
        .count();
    let around = |bytes: &[u8]| {
        let tail = bytes.get(at..).unwrap_or_default();
        String::from_utf8_lossy(&tail[..tail.len().min(16)]).into_owned()
    };
    eprintln!(
        "warning: the tokenizer ({}) normalised the text: checking {} bytes instead of the {} \
         given, first difference at byte {at}: {:?} became {:?}",
        vocab.source(),
        checked.len(),
        given.len(),
        around(given),
        around(&checked),
    );
}

/// A file given on the command line, read no further than the input limit.
fn read(path: &Path, limits: &Limits) -> Result<String, String> {
    limits.read_file(path).map_err(|e| e.to_string())
}

fn read_json(path: &Path, limits: &Limits) -> Result<serde_json::Value, String> {
    serde_json::from_str(&read(path, limits)?).map_err(|e| format!("{}: {e}", path.display()))
}

/// The constraint `check` was given, through the engine (and its router).
fn compile_constraint(vocab: &Vocab, args: &CheckArgs) -> Result<Constraint, String> {
    let mut engine = args.schema_args.engine(vocab.clone());
    let options = args.schema_args.options();
    let limits = args.schema_args.limits.limits();
    let constraint = if let Some(pattern) = &args.regex {
        engine.compile_regex(pattern)
    } else if let Some(path) = &args.schema {
        engine.compile_json_schema(&read_json(path, &limits)?, &options)
    } else if let Some(path) = &args.gbnf {
        engine.compile_gbnf(&read(path, &limits)?, &path.display().to_string())
    } else if let Some(path) = &args.tags {
        let dispatch = TagDispatch::from_spec(&read_json(path, &limits)?)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        engine.compile_tags(&dispatch)
    } else if let Some(templates) = &args.templates {
        engine
            .register_templates([templates])
            .map_err(|e| e.to_string())?;
        let request = match (&args.request, &args.request_file) {
            (Some(r), _) => r.clone(),
            (None, Some(path)) => read(path, &limits)?,
            (None, None) => return Err("give --request or --request-file".into()),
        };
        if request.trim_start().starts_with('{') {
            engine.compile_json_request(&request)
        } else {
            engine.compile(&request)
        }
    } else {
        return Err("give --regex, --schema, --gbnf, --tags or --templates".into());
    }
    .map_err(|e| e.to_string())?;
    for w in constraint.warnings() {
        eprintln!("warning: {w}");
    }
    Ok(constraint)
}

fn maskbench_command(out: &mut impl Write, args: &MaskbenchArgs) -> Outcome {
    let vocab = load_vocab(&args.tokenizer)?;
    let mut cases = maskbench::load(&args.path)?;
    if let Some(n) = args.limit {
        cases.truncate(n);
    }
    let engine = args.schema_args.engine(vocab);
    let config = HarnessConfig::new()
        .schema_options(args.schema_args.options())
        .timeout(args.timeout_ms.map(std::time::Duration::from_millis));
    let bar = indicatif::ProgressBar::new(cases.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let started = Instant::now();
    let mut passing = 0;
    let report = maskbench::run(&engine, &cases, &config, |r| {
        passing += usize::from(r.status == Status::Passing);
        bar.set_message(format!("{passing} passing"));
        bar.inc(1);
    });
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    let failing = report
        .results
        .iter()
        .filter(|r| r.status != Status::Passing);
    if args.json {
        for r in &report.results {
            let mut line = r.figures();
            if r.status != Status::Passing {
                line["detail"] = json!(r.detail);
            }
            writeln!(out, "{line}")?;
        }
        let mut summary = report.summary();
        summary["seconds"] = json!(elapsed.as_secs_f64());
        writeln!(out, "{summary}")?;
    } else {
        if args.failures {
            for r in failing {
                writeln!(out, "{:<20} {}: {}", r.status.name(), r.name, r.detail)?;
            }
        }
        writeln!(
            out,
            "schemas:             {} in {:.1} s",
            report.results.len(),
            elapsed.as_secs_f64()
        )?;
        write!(out, "{}", report.text())?;
    }
    if let Some(path) = &args.write_expected {
        // A `serde_json::Value` with string keys always serializes.
        let text = serde_json::to_string_pretty(&report.expected()).expect("JSON");
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &args.expect {
        let regressions = report.compare(&read_json(path, &Limits::new())?)?;
        if !regressions.is_empty() {
            for r in &regressions {
                eprintln!("regression: {r}");
            }
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn templates_check_command(out: &mut impl Write, args: &TemplatesCheckArgs) -> Outcome {
    let vocab = load_vocab(&args.tokenizer)?;
    let started = Instant::now();
    let factory = StructureFactory::builder(&vocab)
        .path(&args.path)
        .build()
        .map_err(|e| e.to_string())?;
    let elapsed = started.elapsed();
    writeln!(
        out,
        "{} structures, {} fragments, compiled in {:.1} ms for {}",
        factory.structures().len(),
        factory.num_fragments(),
        elapsed.as_secs_f64() * 1e3,
        vocab.source()
    )?;
    for s in factory.structures() {
        // The name comes from the factory's own list.
        let signature = factory
            .signature(s.name())
            .expect("a structure of the factory");
        writeln!(out, "  {signature:<60} {}", s.location())?;
    }
    for (content, id) in factory.special_tokens() {
        writeln!(out, "  special {id:>7} {content}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Steps `tokens` through `matcher`, reporting per the output flags. Exit 0 if every token
/// was allowed and the matcher accepts at the end, 1 otherwise.
// Long: the step loop of `check` and what it prints for each output flag (--trace, --json,
// --dump-masks) at each step and at the end.
fn walk(
    out: &mut impl Write,
    vocab: &Vocab,
    matcher: &mut dyn Matcher,
    tokens: &[TokenId],
    backend: BackendKind,
    args: &CheckArgs,
) -> Outcome {
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut rejected_at = None;
    for (step, &token) in tokens.iter().enumerate() {
        let started = Instant::now();
        matcher
            .fill_mask(&mut mask)
            .map_err(|e| format!("mask at step {step}: {e}"))?;
        let mask_ns = started.elapsed().as_nanos() as u64;
        let allowed = formwork::bitmask::get_bit(&mask, token);
        report_step(out, vocab, args, step, Some(token), allowed, &mask, mask_ns)?;
        if !allowed {
            rejected_at = Some(step);
            break;
        }
        matcher.consume(token).map_err(|e| {
            format!("the mask allowed token {token} at step {step} but consume failed: {e}")
        })?;
    }
    // The verdict is the matcher's. An EOS bit in the final mask does not say the text is
    // complete: a constraint may name an EOS token as a symbol still to come (a template
    // ending in `<|im_end|>`).
    let accepting = rejected_at.is_none() && matcher.is_accepting();
    let eos_allowed = match rejected_at {
        Some(_) => false,
        None => {
            let started = Instant::now();
            matcher
                .fill_mask(&mut mask)
                .map_err(|e| format!("mask at the end: {e}"))?;
            let mask_ns = started.elapsed().as_nanos() as u64;
            report_step(
                out,
                vocab,
                args,
                tokens.len(),
                None,
                accepting,
                &mask,
                mask_ns,
            )?;
            let eos = vocab
                .eos_tokens()
                .iter()
                .any(|&t| formwork::bitmask::get_bit(&mask, t));
            if accepting && !eos {
                eprintln!("warning: the matcher accepts but its mask does not allow EOS");
            }
            eos
        }
    };
    if args.json {
        writeln!(
            out,
            "{}",
            json!({"summary": true, "accepted": accepting, "tokens": tokens.len(), "rejected_at": rejected_at, "eos_allowed": eos_allowed, "backend": backend_name(backend)})
        )?;
    } else {
        match rejected_at {
            Some(step) => {
                let t = tokens[step];
                writeln!(
                    out,
                    "rejected at step {step}: token {t} {} (bytes {:?})",
                    vocab.display_token(t),
                    vocab.token_bytes(t)
                )?;
            }
            None if !accepting => writeln!(
                out,
                "rejected at the end: the text is incomplete (the constraint does not accept it)"
            )?,
            None => writeln!(out, "accepted: {} tokens", tokens.len())?,
        }
    }
    Ok(match accepting {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(1),
    })
}

fn backend_name(backend: BackendKind) -> &'static str {
    match backend {
        BackendKind::Operators => "operators",
        BackendKind::Earley => "earley",
        _ => "other",
    }
}

#[allow(clippy::too_many_arguments)]
fn report_step(
    out: &mut impl Write,
    vocab: &Vocab,
    args: &CheckArgs,
    step: usize,
    token: Option<TokenId>,
    allowed: bool,
    mask: &[u32],
    mask_ns: u64,
) -> io::Result<()> {
    let count: usize = mask.iter().map(|w| w.count_ones() as usize).sum();
    if args.json {
        let mut obj = json!({
            "step": step,
            "token": token,
            "allowed": allowed,
            "mask_count": count,
            "mask_ns": mask_ns,
        });
        if let Some(t) = token {
            obj["bytes"] = json!(String::from_utf8_lossy(vocab.token_bytes(t)));
        } else {
            obj["eos"] = json!(true);
        }
        if args.dump_masks {
            obj["mask"] = json!(formwork::bitmask::iter_ones(mask).collect::<Vec<_>>());
        }
        writeln!(out, "{obj}")?;
    } else if args.trace {
        let what = token.map_or_else(
            || "EOS".to_string(),
            |t| format!("{t:>7} {}", vocab.display_token(t)),
        );
        writeln!(
            out,
            "step {step:>4}  {what:<40} {}  allowed={count:<7} {:>9.1} µs",
            if allowed { "ok " } else { "NO " },
            mask_ns as f64 / 1e3
        )?;
    }
    Ok(())
}
