//! The `formwork` command line: inspect a vocabulary, check a text against a constraint.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{ArgGroup, Args, Parser, Subcommand};
use formwork::engine::Engine;
use formwork::template::StructureFactory;
use formwork::vocab::{TokenId, TokenKind, Vocab, VocabConfig};
use formwork::Matcher;
use serde_json::json;

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
    /// Tokenize a text and walk it through a constraint's matcher (a regex, or a request
    /// against templates): exit 0 if every token is allowed and EOS is allowed at the end, 1 if
    /// rejected, 2 on error.
    Check(CheckArgs),
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
    /// Mask width (the model's vocabulary size) if larger than the tokenizer's.
    #[arg(long)]
    mask_width: Option<usize>,
}

#[derive(Args)]
#[command(group(ArgGroup::new("constraint").required(true).args(["regex", "templates"])))]
struct CheckArgs {
    #[command(flatten)]
    tokenizer: TokenizerArgs,
    /// The constraint: a regex over the whole text.
    #[arg(long)]
    regex: Option<String>,
    /// The constraint: a request (`--request`) against the templates in this directory/file.
    #[arg(long, requires = "request_source")]
    templates: Option<PathBuf>,
    /// The request, in the text form (`outline(sections: [...])`) or, if it starts with `{`,
    /// the JSON form.
    #[arg(long, group = "request_source")]
    request: Option<String>,
    /// A file holding the request (text or JSON form).
    #[arg(long, group = "request_source", conflicts_with = "request")]
    request_file: Option<PathBuf>,
    /// The text to check.
    #[arg(long, conflicts_with = "file", required_unless_present = "file")]
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Vocab(args) => vocab_command(&args),
        Command::Check(args) => check_command(&args),
        Command::Templates(TemplatesCommand::Check(args)) => templates_check_command(&args),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn load_vocab(args: &TokenizerArgs) -> Result<Vocab, String> {
    let vocab = match &args.tokenizer {
        None => Vocab::embedded_qwen3(),
        Some(path) => Vocab::from_file_with(path, VocabConfig::new().mask_width(args.mask_width)),
    };
    vocab.map_err(|e| e.to_string())
}

fn vocab_command(args: &TokenizerArgs) -> Result<ExitCode, String> {
    let vocab = load_vocab(args)?;
    let count = |k: TokenKind| {
        (0..vocab.mask_width() as TokenId)
            .filter(|&t| vocab.kind(t) == Some(k))
            .count()
    };
    let mut specials: Vec<(&str, TokenId)> = vocab.specials().collect();
    specials.sort_by_key(|s| s.1);
    println!("source:        {}", vocab.source());
    println!("tokens:        {}", vocab.len());
    println!(
        "mask width:    {} ({} u32 words)",
        vocab.mask_width(),
        vocab.mask_words()
    );
    println!("text tokens:   {}", count(TokenKind::Text));
    println!("special:       {}", count(TokenKind::Special));
    println!("unused ids:    {}", count(TokenKind::Unused));
    let eos: Vec<String> = vocab
        .eos_tokens()
        .iter()
        .map(|&t| format!("{t} {}", vocab.display_token(t)))
        .collect();
    println!("eos:           {}", eos.join(", "));
    println!("trie nodes:    {}", vocab.trie().num_nodes());
    println!("longest token: {} bytes", vocab.max_token_len());
    for (content, id) in specials {
        println!("  special {id:>7} {content}");
    }
    Ok(ExitCode::SUCCESS)
}

fn check_command(args: &CheckArgs) -> Result<ExitCode, String> {
    let vocab = load_vocab(&args.tokenizer)?;
    let text = match (&args.text, &args.file) {
        (Some(t), _) => t.clone(),
        (None, Some(path)) => {
            std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?
        }
        (None, None) => return Err("give --text or --file".into()),
    };
    let mut engine = Engine::new(vocab.clone());
    let constraint = match (&args.regex, &args.templates) {
        (Some(pattern), _) => engine.compile_regex(pattern),
        (None, Some(templates)) => {
            engine
                .register_templates([templates])
                .map_err(|e| e.to_string())?;
            let request = match (&args.request, &args.request_file) {
                (Some(r), _) => r.clone(),
                (None, Some(path)) => {
                    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?
                }
                (None, None) => return Err("give --request or --request-file".into()),
            };
            if request.trim_start().starts_with('{') {
                engine.compile_json_request(&request)
            } else {
                engine.compile(&request)
            }
        }
        (None, None) => return Err("give --regex or --templates".into()),
    }
    .map_err(|e| e.to_string())?;
    let mut matcher = constraint.matcher();
    let tokens = vocab.encode(&text).map_err(|e| e.to_string())?;
    Ok(walk(&vocab, &mut matcher, &tokens, args))
}

fn templates_check_command(args: &TemplatesCheckArgs) -> Result<ExitCode, String> {
    let vocab = load_vocab(&args.tokenizer)?;
    let started = Instant::now();
    let factory = StructureFactory::builder(&vocab)
        .path(&args.path)
        .build()
        .map_err(|e| e.to_string())?;
    let elapsed = started.elapsed();
    println!(
        "{} structures, {} fragments, compiled in {:.1} ms for {}",
        factory.structures().len(),
        factory.num_fragments(),
        elapsed.as_secs_f64() * 1e3,
        vocab.source()
    );
    for s in factory.structures() {
        let signature = factory
            .signature(s.name())
            .expect("a structure of the factory");
        println!("  {signature:<60} {}", s.location());
    }
    for (content, id) in factory.special_tokens() {
        println!("  special {id:>7} {content}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Steps `tokens` through `matcher`, reporting per the output flags. Exit 0 if everything was
/// allowed and EOS is allowed at the end, 1 otherwise.
fn walk(
    vocab: &Vocab,
    matcher: &mut dyn Matcher,
    tokens: &[TokenId],
    args: &CheckArgs,
) -> ExitCode {
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut rejected_at = None;
    for (step, &token) in tokens.iter().enumerate() {
        let started = Instant::now();
        if let Err(e) = matcher.fill_mask(&mut mask) {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
        let mask_ns = started.elapsed().as_nanos() as u64;
        let allowed = formwork::mask::get_bit(&mask, token);
        report_step(vocab, args, step, Some(token), allowed, &mask, mask_ns);
        if !allowed {
            rejected_at = Some(step);
            break;
        }
        if let Err(e) = matcher.consume(token) {
            eprintln!("error: mask allowed token {token} but consume failed: {e}");
            return ExitCode::from(2);
        }
    }
    let eos_allowed = rejected_at.is_none() && {
        let started = Instant::now();
        let ok = matcher.fill_mask(&mut mask).is_ok();
        let mask_ns = started.elapsed().as_nanos() as u64;
        let eos = ok
            && vocab
                .eos_tokens()
                .iter()
                .any(|&t| formwork::mask::get_bit(&mask, t));
        report_step(vocab, args, tokens.len(), None, eos, &mask, mask_ns);
        eos
    };
    let accepted = rejected_at.is_none() && eos_allowed;
    if args.json {
        println!(
            "{}",
            json!({"summary": true, "accepted": accepted, "tokens": tokens.len(), "rejected_at": rejected_at, "eos_allowed": eos_allowed})
        );
    } else {
        match rejected_at {
            Some(step) => {
                let t = tokens[step];
                println!(
                    "rejected at step {step}: token {t} {} (bytes {:?})",
                    vocab.display_token(t),
                    vocab.token_bytes(t)
                );
            }
            None if !eos_allowed => {
                println!("rejected at the end: the text is incomplete (EOS not allowed)")
            }
            None => println!("accepted: {} tokens", tokens.len()),
        }
    }
    if accepted {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn report_step(
    vocab: &Vocab,
    args: &CheckArgs,
    step: usize,
    token: Option<TokenId>,
    allowed: bool,
    mask: &[u32],
    mask_ns: u64,
) {
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
            obj["mask"] = json!(formwork::mask::iter_ones(mask).collect::<Vec<_>>());
        }
        println!("{obj}");
    } else if args.trace {
        let what = token.map_or_else(
            || "EOS".to_string(),
            |t| format!("{t:>7} {}", vocab.display_token(t)),
        );
        println!(
            "step {step:>4}  {what:<40} {}  allowed={count:<7} {:>9.1} µs",
            if allowed { "ok " } else { "NO " },
            mask_ns as f64 / 1e3
        );
    }
}
