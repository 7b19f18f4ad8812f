//! What the examples share: an engine with the shipped templates, and a stand-in for the
//! model's decoding loop.

use std::error::Error;
use std::time::Instant;

use formwork::bitmask::get_bit;
use formwork::vocab::Vocab;
use formwork::{Constraint, Engine, Matcher};

/// The Qwen3 vocabulary with the shipped templates registered (start-up, done once).
pub fn engine() -> Result<Engine, Box<dyn Error>> {
    let vocab = Vocab::embedded_qwen3()?;
    let started = Instant::now();
    let mut engine = Engine::new(vocab);
    engine.register_templates([concat!(env!("CARGO_MANIFEST_DIR"), "/templates")])?;
    println!(
        "start-up: {} structures in {:.1} ms",
        engine.factory().structures().len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(engine)
}

/// Compiles `request`, reporting the time from request text to a ready matcher: the first
/// time (regex arguments compiled) and again (as for every later request using them).
pub fn compile(engine: &Engine, request: &str) -> Result<Constraint, Box<dyn Error>> {
    let mut times = Vec::new();
    let mut constraint = None;
    for _ in 0..2 {
        let started = Instant::now();
        let c = engine.compile(request)?;
        let _matcher = c.matcher();
        times.push(started.elapsed().as_secs_f64() * 1e6);
        constraint = Some(c);
    }
    println!(
        "request -> matcher: {:.1} µs (first), {:.1} µs (again)",
        times[0], times[1]
    );
    Ok(constraint.expect("compiled"))
}

/// Decodes like an inference engine would, with a model that wants to write `draft`: at each
/// step the mask is filled; forced stretches are taken by jump-forward (no model call); the
/// model's token must be in the mask. Prints the output, or where the draft was rejected.
pub fn decode(engine: &Engine, constraint: &Constraint, draft: &str) -> Result<(), Box<dyn Error>> {
    let vocab = engine.vocab();
    let mut m = constraint.matcher();
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut wanted = vocab.encode(draft)?.into_iter().peekable();
    let (mut model_steps, mut jumped, mut mask_ns) = (0, 0, 0u128);
    let mut out = String::new();
    let show = |t| match vocab.is_special(t) {
        true => vocab.display_token(t),
        false => String::from_utf8_lossy(vocab.token_bytes(t)).into_owned(),
    };
    while let Some(&t) = wanted.peek() {
        // Jump-forward: consume the forced tokens if the draft agrees with them.
        let forced = m.forced_tokens();
        if !forced.is_empty() && wanted.clone().take(forced.len()).eq(forced.iter().copied()) {
            for &f in &forced {
                m.consume(f)?;
                out.push_str(&show(f));
                wanted.next();
            }
            jumped += forced.len();
            continue;
        }
        let started = Instant::now();
        m.fill_mask(&mut mask)?;
        mask_ns += started.elapsed().as_nanos();
        model_steps += 1;
        if !get_bit(&mask, t) {
            println!("{out}");
            println!("REJECTED: {} is not allowed here", vocab.display_token(t));
            return Ok(());
        }
        m.consume(t)?;
        out.push_str(&show(t));
        wanted.next();
    }
    m.fill_mask(&mut mask)?;
    let eos = vocab.eos_tokens().iter().any(|&e| get_bit(&mask, e));
    println!("{out}");
    println!(
        "{} model steps (mean mask {:.1} µs, most of it filling the cold cache), {} tokens by jump-forward; complete: {}",
        model_steps,
        mask_ns as f64 / model_steps.max(1) as f64 / 1e3,
        jumped,
        eos
    );
    Ok(())
}
