//! `formwork bench`: formwork side by side with llguidance 1.9 and outlines-core 0.2 on the
//! same workloads and tokenizer, printing one markdown table. See BENCHMARKS.md.
//!
//! ```text
//! cargo bench --bench peers --features peers -- [--quick] [--tokenizer PATH] [--workload NAME]
//!     [--maskbench PATH] [--engines LIST] [--budget SECONDS] [--clock wall|thread-cpu]
//! ```
//!
//! `--maskbench PATH` runs one workload instead of the others: every schema of a MaskBench
//! directory or `maskbench-data.tar.gz` with its first valid instance (the tails of the
//! issue-20 comparison; pin it to one core with `taskset -c 1`). `--engines` picks engines
//! (comma-separated), `--budget` the wall clock each engine gets per workload. `--clock
//! thread-cpu` times compiles and masks by the CPU time of the thread that runs them rather
//! than the wall clock: on a shared machine a wall-clock tail is mostly the time the engine
//! waited for a core, which says nothing about the engine (see [`Clock`]).
//!
//! A bench target, not a `[[bin]]`: the peers are dev-dependencies (the library never depends
//! on them), and only tests, examples and benches may use those.
//!
//! Each (engine, workload) pair runs in its own child process (this binary again, with
//! `--engine`), so peak RSS is that engine's on that workload alone and caches start cold at
//! each workload.

#[path = "peers/forms.rs"]
mod forms;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use formwork::bitmask::get_bit;
use formwork::vocab::{TokenKind, Vocab};
use formwork::{Matcher, TokenId};
use formwork_testkit::llg;
use formwork_testkit::outlines_core;
use formwork_testkit::workloads::{self, Case, Formwork, Size, Spec, Workload};
use serde::{Deserialize, Serialize};

/// The process allocator of every engine measured here (see the `mimalloc` dependency in
/// Cargo.toml): the peers run in this process and allocate through it too.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ENGINES: [&str; 3] = ["formwork", "llguidance", "outlines-core"];

struct Args {
    quick: bool,
    tokenizer: PathBuf,
    workload: Option<String>,
    engine: Option<String>,
    maskbench: Option<PathBuf>,
    engines: Vec<String>,
    budget: Duration,
    clock: Clock,
}

/// What compile, mask and consume times are read from (`--clock`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Clock {
    /// Elapsed real time: what a server's request waits, preemption included.
    Wall,
    /// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`): what the engine spent,
    /// whatever else ran on the core meanwhile. Every engine measured runs on one thread.
    /// Reading it is a system call (about 1 µs on a VM), added to every figure alike: it
    /// suits the millisecond tails, not sub-microsecond warm masks.
    ThreadCpu,
}

impl Clock {
    fn parse(name: &str) -> Option<Clock> {
        match name {
            "wall" => Some(Clock::Wall),
            "thread-cpu" => Some(Clock::ThreadCpu),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Clock::Wall => "wall",
            Clock::ThreadCpu => "thread-cpu",
        }
    }

    /// The time since an arbitrary origin fixed for the process.
    fn now(self) -> Duration {
        match self {
            Clock::Wall => {
                static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
                ORIGIN.get_or_init(Instant::now).elapsed()
            }
            Clock::ThreadCpu => {
                let mut t = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: `t` is a valid, writable timespec; the clock id is a constant Linux
                // and the BSDs define.
                let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
                assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
                Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
            }
        }
    }

    /// Microseconds since `since`, a reading of [`Clock::now`].
    fn micros_since(self, since: Duration) -> f64 {
        (self.now() - since).as_secs_f64() * 1e6
    }
}

fn args() -> Args {
    let mut a = Args {
        quick: false,
        tokenizer: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("data/tokenizers/qwen3/tokenizer.json.gz"),
        workload: None,
        engine: None,
        maskbench: None,
        engines: ENGINES.iter().map(|e| e.to_string()).collect(),
        budget: BUDGET,
        clock: Clock::Wall,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => a.quick = true,
            "--tokenizer" => a.tokenizer = it.next().expect("--tokenizer PATH").into(),
            "--workload" => a.workload = Some(it.next().expect("--workload NAME")),
            "--engine" => a.engine = Some(it.next().expect("--engine NAME")),
            "--maskbench" => a.maskbench = Some(it.next().expect("--maskbench PATH").into()),
            "--engines" => {
                let list = it.next().expect("--engines LIST");
                a.engines = list.split(',').map(str::to_string).collect();
                if let Some(e) = a.engines.iter().find(|e| !ENGINES.contains(&e.as_str())) {
                    eprintln!("unknown engine {e} (engines: {})", ENGINES.join(", "));
                    std::process::exit(2);
                }
            }
            "--budget" => {
                let secs = it.next().expect("--budget SECONDS");
                a.budget = Duration::from_secs(secs.parse().expect("--budget SECONDS"));
            }
            "--clock" => {
                let name = it.next().expect("--clock wall|thread-cpu");
                a.clock = Clock::parse(&name).unwrap_or_else(|| {
                    eprintln!("unknown clock {name} (clocks: wall, thread-cpu)");
                    std::process::exit(2);
                });
            }
            // cargo bench passes --bench to harness = false targets.
            "--bench" => {}
            other => {
                eprintln!("unknown argument {other}\nusage: cargo bench --bench peers --features peers -- [--quick] [--tokenizer PATH] [--workload NAME] [--maskbench PATH] [--engines LIST] [--budget SECONDS] [--clock wall|thread-cpu]");
                std::process::exit(2);
            }
        }
    }
    a
}

/// What one engine measured on one workload (times in µs).
#[derive(Serialize, Deserialize, Default)]
struct Stats {
    engine: String,
    workload: String,
    cases: usize,
    /// Cases the engine could not compile (or express), with the first reason.
    unsupported: usize,
    /// Cases whose reference output the engine rejected (not timed).
    rejected: usize,
    notes: Vec<String>,
    compile: Vec<f64>,
    first_mask: Vec<f64>,
    /// The case of each `first_mask`, to compare engines on the cases all of them passed.
    passed: Vec<String>,
    mask: Vec<f64>,
    /// Masks of a second walk of the same reference after `reset` (same compiled constraint).
    warm_mask: Vec<f64>,
    consume: Vec<f64>,
    steps: usize,
    forced: usize,
    /// The slowest warm mask: (µs, where).
    slowest_warm: (f64, String),
    /// The slowest first-walk mask and the slowest time to first mask: (µs, where).
    slowest_mask: (f64, String),
    slowest_first: (f64, String),
    peak_rss_bytes: u64,
    cache_bytes: Option<usize>,
}

/// One sequence of an engine: mask, check, consume.
trait Session {
    /// Computes the mask (timed); an engine may fail (a limit inside llguidance's lexer).
    fn fill(&mut self) -> Result<(), String>;
    /// Does the last mask allow `t`? (untimed)
    fn allows(&self, t: TokenId) -> bool;
    /// Would the engine force `t` here without a model call? (untimed)
    fn forces(&mut self, t: TokenId) -> bool;
    /// Consumes `t` (timed).
    fn consume(&mut self, t: TokenId) -> Result<(), String>;
    /// Does the output so far complete the constraint? (untimed)
    fn accepting(&mut self) -> bool;
    /// Back to the start, keeping what the engine compiled and cached.
    fn reset(&mut self);
}

trait Engine {
    /// Compiles `spec` into a fresh session (timed), or says why it cannot.
    fn compile(&mut self, spec: &Spec) -> Result<Box<dyn Session + '_>, String>;
    fn cache_bytes(&self) -> Option<usize> {
        None
    }
}

// ---------------------------------------------------------------- formwork

struct FormworkSession {
    m: Box<dyn Matcher>,
    mask: Vec<u32>,
}

impl Session for FormworkSession {
    fn fill(&mut self) -> Result<(), String> {
        self.m.fill_mask(&mut self.mask).map_err(|e| e.to_string())
    }
    fn allows(&self, t: TokenId) -> bool {
        get_bit(&self.mask, t)
    }
    fn forces(&mut self, t: TokenId) -> bool {
        self.m.forced_tokens().first() == Some(&t)
    }
    fn consume(&mut self, t: TokenId) -> Result<(), String> {
        self.m.consume(t).map_err(|e| e.to_string())
    }
    fn accepting(&mut self) -> bool {
        self.m.is_accepting()
    }
    fn reset(&mut self) {
        self.m.reset();
    }
}

impl Engine for Formwork {
    fn compile(&mut self, spec: &Spec) -> Result<Box<dyn Session + '_>, String> {
        let m = Formwork::compile(self, spec).map_err(|e| e.to_string())?;
        Ok(Box::new(FormworkSession {
            m,
            mask: vec![0u32; self.engine.vocab().mask_words()],
        }))
    }
    fn cache_bytes(&self) -> Option<usize> {
        Some(Formwork::cache_bytes(self))
    }
}

// ---------------------------------------------------------------- llguidance

struct Llg {
    factory: llguidance::ParserFactory,
}

struct LlgSession {
    m: llguidance::Matcher,
    mask: Option<llguidance::toktrie::SimpleVob>,
}

impl Session for LlgSession {
    fn fill(&mut self) -> Result<(), String> {
        let mask = self
            .m
            .compute_mask()
            .map_err(|e| first_line(&e.to_string()))?;
        self.mask = Some(mask);
        Ok(())
    }
    fn allows(&self, t: TokenId) -> bool {
        self.mask.as_ref().is_some_and(|m| m.is_allowed(t))
    }
    fn forces(&mut self, t: TokenId) -> bool {
        self.m.compute_ff_tokens().first() == Some(&t)
    }
    fn consume(&mut self, t: TokenId) -> Result<(), String> {
        self.m.consume_token(t).map_err(|e| e.to_string())
    }
    fn accepting(&mut self) -> bool {
        self.m.is_accepting().unwrap_or(false)
    }
    fn reset(&mut self) {
        self.m.reset().unwrap();
    }
}

impl Engine for Llg {
    fn compile(&mut self, spec: &Spec) -> Result<Box<dyn Session + '_>, String> {
        let grammar = forms::llguidance(spec)?;
        let m = llguidance::Matcher::new(self.factory.create_parser(grammar));
        if let Some(e) = m.get_error() {
            return Err(e);
        }
        Ok(Box::new(LlgSession { m, mask: None }))
    }
}

// ---------------------------------------------------------------- outlines-core

struct Outlines {
    vocabulary: outlines_core::prelude::Vocabulary,
    mask_words: usize,
    /// Longest regex compiled (an index over a larger DFA takes minutes).
    max_regex: usize,
}

struct OutlinesSession {
    index: Arc<outlines_core::prelude::Index>,
    state: u32,
    mask: Vec<u32>,
    allowed: usize,
}

impl Session for OutlinesSession {
    fn fill(&mut self) -> Result<(), String> {
        // What a server does with outlines-core: the state's allowed tokens into a bitmask.
        self.mask.fill(0);
        self.allowed = 0;
        if let Some(tokens) = self.index.allowed_tokens_iter(&self.state) {
            for &t in tokens {
                self.mask[t as usize / 32] |= 1 << (t % 32);
                self.allowed += 1;
            }
        }
        Ok(())
    }
    fn allows(&self, t: TokenId) -> bool {
        get_bit(&self.mask, t)
    }
    fn forces(&mut self, t: TokenId) -> bool {
        self.fill().is_ok() && self.allowed == 1 && get_bit(&self.mask, t)
    }
    fn consume(&mut self, t: TokenId) -> Result<(), String> {
        match self.index.next_state(&self.state, &t) {
            Some(s) => {
                self.state = s;
                Ok(())
            }
            None => Err(format!("token {t} not allowed")),
        }
    }
    fn accepting(&mut self) -> bool {
        self.index.is_final_state(&self.state)
    }
    fn reset(&mut self) {
        self.state = self.index.initial_state();
    }
}

impl Outlines {
    fn new(vocab: &Vocab) -> Outlines {
        let eos = vocab.eos_tokens()[0];
        let mut vocabulary = outlines_core::prelude::Vocabulary::new(eos);
        for t in 0..vocab.len() as TokenId {
            if vocab.is_eos(t) {
                continue;
            }
            match vocab.kind(t) {
                Some(TokenKind::Text) => vocabulary.try_insert(vocab.token_bytes(t), t).unwrap(),
                Some(TokenKind::Special) => {
                    let content = String::from_utf8_lossy(vocab.token_bytes(t));
                    if let Some(i) = forms::SPECIALS.iter().position(|s| *s == content) {
                        let pua = forms::pua(i).to_string();
                        vocabulary.try_insert(pua.as_bytes(), t).unwrap();
                    }
                }
                _ => {}
            }
        }
        Outlines {
            vocabulary,
            mask_words: vocab.mask_words(),
            max_regex: 20_000,
        }
    }
}

impl Engine for Outlines {
    fn compile(&mut self, spec: &Spec) -> Result<Box<dyn Session + '_>, String> {
        let regex = forms::regex(spec)?;
        if regex.len() > self.max_regex {
            return Err(format!(
                "regex of {} bytes (> {}): its index takes too long",
                regex.len(),
                self.max_regex
            ));
        }
        let index = outlines_core::prelude::Index::new(&regex, &self.vocabulary)
            .map_err(|e| format!("outlines-core: {e}"))?;
        let state = index.initial_state();
        Ok(Box::new(OutlinesSession {
            index: Arc::new(index),
            state,
            mask: vec![0; self.mask_words],
            allowed: 0,
        }))
    }
}

// ---------------------------------------------------------------- driver

/// Wall-clock budget of one engine on one workload (`--budget`): past it, the remaining cases
/// are skipped and counted (outlines-core's index over 150k tokens takes seconds to minutes
/// per schema).
const BUDGET: Duration = Duration::from_secs(300);

/// Runs every case of `w` on `engine` within `budget`; a case whose reference is rejected
/// counts as rejected and its times are dropped.
fn run(
    engine: &mut dyn Engine,
    vocab: &Vocab,
    w: &Workload,
    name: &str,
    budget: Duration,
    clock: Clock,
) -> Stats {
    let mut s = Stats {
        engine: name.into(),
        workload: w.name.into(),
        ..Stats::default()
    };
    let started = Instant::now();
    for (i, case) in w.cases.iter().enumerate() {
        if started.elapsed() > budget {
            let left = w.cases.len() - i;
            s.unsupported += left;
            s.notes.push(format!(
                "{left} cases not run: over the {} s budget",
                budget.as_secs()
            ));
            break;
        }
        run_case(engine, vocab, case, clock, &mut s);
    }
    s.cache_bytes = engine.cache_bytes();
    s
}

fn run_case(engine: &mut dyn Engine, vocab: &Vocab, case: &Case, clock: Clock, s: &mut Stats) {
    let tokens = vocab.encode(&case.reference).unwrap();
    let started = clock.now();
    let mut session = match engine.compile(&case.spec) {
        Ok(x) => x,
        Err(e) => {
            s.unsupported += 1;
            if s.notes.len() < 3 {
                let reason: String = e.lines().next().unwrap_or("").chars().take(160).collect();
                s.notes.push(format!("{}: {reason}", case.id));
            }
            return;
        }
    };
    let compile = clock.micros_since(started);
    let (mut mask, mut consume, mut forced) = (Vec::new(), Vec::new(), 0);
    let mut first_mask = 0.0;
    let mut slowest_mask = (0.0, String::new());
    for (step, &t) in tokens.iter().enumerate() {
        let at = clock.now();
        let filled = session.fill();
        let us = clock.micros_since(at);
        if let Err(e) = filled {
            s.rejected += 1;
            s.notes
                .push(format!("{}: mask error at step {step}: {e}", case.id));
            return;
        }
        mask.push(us);
        if step == 0 {
            first_mask = compile + us;
        }
        if us > slowest_mask.0 {
            slowest_mask = (us, place(vocab, case, &tokens, step));
        }
        if !session.allows(t) {
            s.rejected += 1;
            s.notes.push(format!(
                "{}: rejects {} at step {step}",
                case.id,
                vocab.display_token(t)
            ));
            return;
        }
        forced += session.forces(t) as usize;
        let at = clock.now();
        let ok = session.consume(t);
        consume.push(clock.micros_since(at));
        if let Err(e) = ok {
            s.rejected += 1;
            s.notes
                .push(format!("{}: consume at step {step}: {e}", case.id));
            return;
        }
    }
    if !session.accepting() {
        s.rejected += 1;
        s.notes
            .push(format!("{}: not accepting at the end", case.id));
        return;
    }
    // The same constraint again: what a server sees for the next request of a cached schema.
    session.reset();
    for (step, &t) in tokens.iter().enumerate() {
        let at = clock.now();
        let filled = session.fill();
        let us = clock.micros_since(at);
        if let Err(e) = filled {
            s.rejected += 1;
            s.notes
                .push(format!("{}: warm mask error at step {step}: {e}", case.id));
            return;
        }
        s.warm_mask.push(us);
        if us > s.slowest_warm.0 {
            s.slowest_warm = (us, place(vocab, case, &tokens, step));
        }
        assert!(session.allows(t), "{}: the warm walk differs", case.id);
        session.consume(t).unwrap();
    }
    s.cases += 1;
    if slowest_mask.0 > s.slowest_mask.0 {
        s.slowest_mask = slowest_mask;
    }
    if first_mask > s.slowest_first.0 {
        s.slowest_first = (first_mask, case.id.clone());
    }
    s.compile.push(compile);
    s.first_mask.push(first_mask);
    s.passed.push(case.id.clone());
    s.steps += tokens.len();
    s.forced += forced;
    s.mask.extend(mask);
    s.consume.extend(consume);
}

/// The first line of an error (llguidance's carry the parser's whole state after it).
fn first_line(e: &str) -> String {
    e.lines().next().unwrap_or_default().to_string()
}

/// Where step `step` of `case` is: the case, the step and the tokens before it.
fn place(vocab: &Vocab, case: &Case, tokens: &[TokenId], step: usize) -> String {
    let before: String = tokens[step.saturating_sub(3)..step]
        .iter()
        .map(|&t| vocab.display_token(t))
        .collect();
    format!("{} step {step}, after …{before:?}", case.id)
}

fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The workloads of this run: every workload, or the MaskBench set of `--maskbench`.
fn workloads_of(args: &Args) -> Vec<Workload> {
    match &args.maskbench {
        Some(path) => vec![workloads::maskbench_set(path)],
        None if args.quick => workloads::load(Size::Quick),
        None => workloads::load(Size::Full),
    }
}

/// Child mode: one engine, one workload; prints its stats as one JSON line.
fn child(args: &Args) {
    let engine_name = args.engine.as_deref().unwrap();
    let wanted = args.workload.as_deref().unwrap();
    let w = workloads_of(args)
        .into_iter()
        .find(|w| w.name == wanted)
        .expect("workload");
    let vocab = Vocab::from_file(&args.tokenizer).expect("tokenizer");
    let mut engine: Box<dyn Engine> = match engine_name {
        "formwork" => Box::new(Formwork::new(vocab.clone())),
        "llguidance" => {
            let env = llg::tok_env(&args.tokenizer, vocab.mask_width());
            Box::new(Llg {
                factory: llguidance::ParserFactory::new_simple(&env).unwrap(),
            })
        }
        "outlines-core" => Box::new(Outlines::new(&vocab)),
        other => panic!("unknown engine {other}"),
    };
    let mut stats = run(
        engine.as_mut(),
        &vocab,
        &w,
        engine_name,
        args.budget,
        args.clock,
    );
    stats.peak_rss_bytes = peak_rss();
    println!("{}", serde_json::to_string(&stats).unwrap());
}

fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    Some(v[((v.len() - 1) as f64 * q).round() as usize])
}

fn fmt_us(x: Option<f64>) -> String {
    match x {
        None => "—".into(),
        Some(x) if x >= 1e6 => format!("{:.2} s", x / 1e6),
        Some(x) if x >= 1e3 => format!("{:.2} ms", x / 1e3),
        Some(x) => format!("{x:.1} µs"),
    }
}

fn ratio(ours: Option<f64>, best: Option<f64>) -> String {
    match (ours, best) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "—".into(),
    }
}

fn print_table(all: &[Stats], machine: &str, command: &str) {
    println!("\n`{command}` on {machine}\n");
    println!("| workload | engine | ok / unsupported / rejected | compile p50 | compile p99 | first mask p50 | mask p50 | mask p99 | mask max | warm mask p50 | warm mask p99 | consume p50 | forced | peak RSS | cache | formwork / best peer: compile p50; mask p50, p99; warm p50, p99 |");
    println!("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for w in workload_names(all) {
        let rows: Vec<&Stats> = all.iter().filter(|s| s.workload == w).collect();
        for s in &rows {
            let ratios = if s.engine == "formwork" && s.cases > 0 {
                let r = |f: &dyn Fn(&Stats) -> Option<f64>| ratio(f(s), best_peer(&rows, f));
                format!(
                    "{}; {}, {}; {}, {}",
                    r(&|p| quantile(&p.compile, 0.5)),
                    r(&|p| quantile(&p.mask, 0.5)),
                    r(&|p| quantile(&p.mask, 0.99)),
                    r(&|p| quantile(&p.warm_mask, 0.5)),
                    r(&|p| quantile(&p.warm_mask, 0.99)),
                )
            } else {
                String::new()
            };
            println!(
                "| {} | {} | {} / {} / {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} MB | {} | {} |",
                s.workload,
                s.engine,
                s.cases,
                s.unsupported,
                s.rejected,
                fmt_us(quantile(&s.compile, 0.5)),
                fmt_us(quantile(&s.compile, 0.99)),
                fmt_us(quantile(&s.first_mask, 0.5)),
                fmt_us(quantile(&s.mask, 0.5)),
                fmt_us(quantile(&s.mask, 0.99)),
                fmt_us(quantile(&s.mask, 1.0)),
                fmt_us(quantile(&s.warm_mask, 0.5)),
                fmt_us(quantile(&s.warm_mask, 0.99)),
                fmt_us(quantile(&s.consume, 0.5)),
                if s.steps > 0 {
                    format!("{:.0}%", 100.0 * s.forced as f64 / s.steps as f64)
                } else {
                    "—".into()
                },
                s.peak_rss_bytes as f64 / 1e6,
                s.cache_bytes
                    .map_or("—".into(), |b| format!("{:.1} MB", b as f64 / 1e6)),
                ratios
            );
        }
    }
    print_tails(all);
    println!();
    for s in all.iter().filter(|s| s.engine == "formwork" && s.cases > 0) {
        println!(
            "- {} / formwork: slowest warm mask {} at {}",
            s.workload,
            fmt_us(Some(s.slowest_warm.0)),
            s.slowest_warm.1
        );
    }
    for s in all {
        for n in &s.notes {
            println!("- {} / {}: {n}", s.workload, s.engine);
        }
    }
}

/// Masks of `s` over `us` microseconds.
fn masks_over(s: &Stats, us: f64) -> usize {
    s.mask.iter().filter(|&&m| m > us).count()
}

/// The tails a server feels, per engine: time to first mask (compile + first mask) over the
/// cases, first-walk masks over all steps, and where the slowest of each was.
fn print_tails(all: &[Stats]) {
    println!("\nTails (time to first mask over cases; first-walk masks over steps):\n");
    println!("| workload | engine | TTFM p50 | TTFM p90 | TTFM p99 | TTFM p99.9 | TTFM max | mask p99.9 | mask max | masks > 1 ms | masks > 5 ms | formwork / best peer: TTFM p90, p99, max; mask p99.9, max |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for w in workload_names(all) {
        let rows: Vec<&Stats> = all.iter().filter(|s| s.workload == w).collect();
        for s in &rows {
            let ttfm = |q| quantile(&s.first_mask, q);
            let ratios = if s.engine == "formwork" && s.cases > 0 {
                let r = |f: &dyn Fn(&Stats) -> Option<f64>| ratio(f(s), best_peer(&rows, f));
                format!(
                    "{}, {}, {}; {}, {}",
                    r(&|p| quantile(&p.first_mask, 0.9)),
                    r(&|p| quantile(&p.first_mask, 0.99)),
                    r(&|p| quantile(&p.first_mask, 1.0)),
                    r(&|p| quantile(&p.mask, 0.999)),
                    r(&|p| quantile(&p.mask, 1.0)),
                )
            } else {
                String::new()
            };
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                s.workload,
                s.engine,
                fmt_us(ttfm(0.5)),
                fmt_us(ttfm(0.9)),
                fmt_us(ttfm(0.99)),
                fmt_us(ttfm(0.999)),
                fmt_us(ttfm(1.0)),
                fmt_us(quantile(&s.mask, 0.999)),
                fmt_us(quantile(&s.mask, 1.0)),
                masks_over(s, 1e3),
                masks_over(s, 5e3),
                ratios
            );
        }
    }
    print_shared_tails(all);
    println!();
    for s in all.iter().filter(|s| s.cases > 0) {
        println!(
            "- {} / {}: slowest time to first mask {} ({}), slowest first-walk mask {} at {}",
            s.workload,
            s.engine,
            fmt_us(Some(s.slowest_first.0)),
            s.slowest_first.1,
            fmt_us(Some(s.slowest_mask.0)),
            s.slowest_mask.1
        );
    }
}

/// Times to first mask on the cases every engine of the workload passed, so that a tail is
/// not made by the hard cases only one engine compiles; and, file by file, how often and by
/// how much formwork's exceeds the best peer's.
fn print_shared_tails(all: &[Stats]) {
    println!("\nTime to first mask on the cases every engine passed:\n");
    println!("| workload | engine | cases | TTFM p50 | p90 | p99 | p99.9 | max | formwork slower than the best peer: cases, by more than 2×, ratio p50, p90, p99 |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for w in workload_names(all) {
        let rows: Vec<&Stats> = all.iter().filter(|s| s.workload == w).collect();
        let by_case: Vec<HashMap<&str, f64>> = rows
            .iter()
            .map(|s| {
                s.passed
                    .iter()
                    .map(String::as_str)
                    .zip(s.first_mask.iter().copied())
                    .collect()
            })
            .collect();
        let mut shared: Vec<&str> = by_case[0].keys().copied().collect();
        shared.retain(|c| by_case.iter().all(|m| m.contains_key(c)));
        shared.sort_unstable();
        if shared.is_empty() || rows.len() < 2 {
            continue;
        }
        for (s, times) in rows.iter().zip(&by_case) {
            let ttfm: Vec<f64> = shared.iter().map(|c| times[c]).collect();
            let versus = match s.engine.as_str() {
                "formwork" => {
                    let best = |c: &&str| {
                        rows.iter()
                            .zip(&by_case)
                            .filter(|(p, _)| p.engine != "formwork")
                            .map(|(_, m)| m[c])
                            .min_by(f64::total_cmp)
                            .unwrap()
                    };
                    let ratios: Vec<f64> = shared.iter().map(|c| times[c] / best(c)).collect();
                    format!(
                        "{} of {}, {}; {:.2}×, {:.2}×, {:.2}×",
                        ratios.iter().filter(|&&r| r > 1.0).count(),
                        ratios.len(),
                        ratios.iter().filter(|&&r| r > 2.0).count(),
                        quantile(&ratios, 0.5).unwrap(),
                        quantile(&ratios, 0.9).unwrap(),
                        quantile(&ratios, 0.99).unwrap(),
                    )
                }
                _ => String::new(),
            };
            let q = |x| fmt_us(quantile(&ttfm, x));
            println!(
                "| {w} | {} | {} | {} | {} | {} | {} | {} | {versus} |",
                s.engine,
                ttfm.len(),
                q(0.5),
                q(0.9),
                q(0.99),
                q(0.999),
                q(1.0)
            );
        }
    }
}

/// Workload names in the order of their first row.
fn workload_names(all: &[Stats]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for s in all {
        if !names.contains(&s.workload.as_str()) {
            names.push(&s.workload);
        }
    }
    names
}

/// The best figure among the peers that ran the workload rejecting at most 1% of its
/// references (none on the fixed workloads; on the whole MaskBench set every engine rejects
/// a few, and a peer that skipped many hard cases would look fast).
fn best_peer(rows: &[&Stats], f: &dyn Fn(&Stats) -> Option<f64>) -> Option<f64> {
    rows.iter()
        .filter(|s| s.engine != "formwork" && s.cases > 0 && s.rejected * 100 <= s.cases)
        .filter_map(|s| f(s))
        .min_by(f64::total_cmp)
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {cores} cores available, {}", std::env::consts::OS)
}

fn main() {
    #[cfg(feature = "mimalloc")]
    formwork::allocator::keep_freed_memory();
    let args = args();
    if args.engine.is_some() {
        child(&args);
        return;
    }
    let started = Instant::now();
    let names: Vec<&'static str> = workloads_of(&args)
        .iter()
        .map(|w| w.name)
        .filter(|n| args.workload.as_deref().is_none_or(|f| n.contains(f)))
        .collect();
    let exe = std::env::current_exe().unwrap();
    let mut all = Vec::new();
    for &w in &names {
        for engine in &args.engines {
            let engine = engine.as_str();
            let t = Instant::now();
            let mut cmd = Command::new(&exe);
            cmd.args(["--engine", engine, "--workload", w, "--tokenizer"])
                .arg(&args.tokenizer)
                .args(["--budget", &args.budget.as_secs().to_string()])
                .args(["--clock", args.clock.name()])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit());
            if args.quick {
                cmd.arg("--quick");
            }
            if let Some(path) = &args.maskbench {
                cmd.arg("--maskbench").arg(path);
            }
            let mut child = cmd.spawn().expect("run the bench's child");
            let line = BufReader::new(child.stdout.take().unwrap())
                .lines()
                .map_while(Result::ok)
                .last();
            let status = child.wait().unwrap();
            let stats = match line.and_then(|l| serde_json::from_str::<Stats>(&l).ok()) {
                Some(s) => s,
                None => Stats {
                    engine: engine.into(),
                    workload: w.to_string(),
                    notes: vec![format!("the run failed ({status})")],
                    ..Stats::default()
                },
            };
            eprintln!(
                "{w} / {engine}: {} ok, {} unsupported, {} rejected in {:.1} s",
                stats.cases,
                stats.unsupported,
                stats.rejected,
                t.elapsed().as_secs_f64()
            );
            std::io::stderr().flush().ok();
            all.push(stats);
        }
    }
    let mut command = String::from("cargo bench --bench peers --features peers --");
    if args.quick {
        command.push_str(" --quick");
    }
    if let Some(w) = &args.workload {
        command.push_str(&format!(" --workload {w:?}"));
    }
    if let Some(path) = &args.maskbench {
        command.push_str(&format!(" --maskbench {}", path.display()));
    }
    if args.engines.len() < ENGINES.len() {
        command.push_str(&format!(" --engines {}", args.engines.join(",")));
    }
    if args.budget != BUDGET {
        command.push_str(&format!(" --budget {}", args.budget.as_secs()));
    }
    if args.clock != Clock::Wall {
        command.push_str(&format!(" --clock {}", args.clock.name()));
    }
    print_table(&all, &machine(), &command);
    println!(
        "total {:.0} s (each engine and workload in its own process, single thread)",
        started.elapsed().as_secs_f64()
    );
}
