//! The decode example's loop (`testkit/src/decode.rs`) on a mixed batch over both backends: every
//! output it produces passes a validator independent of formwork, whatever the sampling and the
//! logits type; overlapping the fill with the forward pass changes nothing; and the validators
//! themselves accept the samples and reject broken outputs.

use std::sync::OnceLock;

use formwork::gpu::{BatchFiller, FillConfig};
use formwork::Matcher;
use formwork_testkit::decode::{decode, Applier, CpuApplier, DecodeConfig, Float, Row, StandIn};
use formwork_testkit::mixed::{self, Mixed};
use half::bf16;

fn mixed() -> &'static Mixed {
    static M: OnceLock<Mixed> = OnceLock::new();
    M.get_or_init(|| Mixed::new().expect("the mixed batch compiles"))
}

/// Decodes `rows` rows (cycling through the constraints) and returns what each produced.
fn run<T: Float>(rows: usize, config: &DecodeConfig, threads: usize) -> Vec<Row> {
    let mixed = mixed();
    let vocab = mixed.vocab();
    let model = StandIn::new(vocab, config.seed, 24);
    let mut filler = BatchFiller::new(FillConfig::new().threads(threads));
    let mut applier = CpuApplier::new(vocab);
    let applier: &mut dyn Applier<T> = &mut applier;
    let mut matchers = mixed.matchers(rows);
    let (out, times) = decode(&mut matchers, vocab, &model, &mut filler, applier, config)
        .expect("decoding never samples a token its matcher rejects");
    assert_eq!(times.fill.len(), times.apply.len());
    assert!(times.upload.is_empty(), "the CPU path uploads nothing");
    out
}

fn config(seed: u64, temperature: f32) -> DecodeConfig {
    DecodeConfig {
        seed,
        temperature,
        max_steps: 300,
        overlap: true,
    }
}

fn assert_all_valid(rows: &[Row], what: &str) {
    let mixed = mixed();
    for (i, row) in rows.iter().enumerate() {
        let spec = mixed.spec(i);
        let text = mixed::display(mixed.vocab(), &row.tokens);
        assert!(
            row.finished,
            "{what}: row {i} ({}) unfinished: {text:?}",
            spec.name
        );
        assert!(row.sampled > 0, "{what}: row {i} sampled nothing");
        assert_eq!(row.sampled + row.jumped, row.tokens.len());
        assert!(mixed.vocab().is_eos(*row.tokens.last().unwrap()));
        if let Err(e) = spec.validate(mixed.vocab(), &row.tokens) {
            panic!("{what}: row {i} ({}) {e}: {text:?}", spec.name);
        }
    }
}

#[test]
fn decoded_outputs_validate_on_every_backend() {
    let n = mixed().specs.len();
    let backends: std::collections::BTreeSet<_> =
        mixed().specs.iter().map(|spec| spec.backend()).collect();
    assert_eq!(
        backends,
        ["Earley", "operators"].into(),
        "the router's picks"
    );
    for (seed, temperature) in [(1, 1.0), (2, 0.7), (3, 0.0)] {
        let rows = run::<f32>(2 * n, &config(seed, temperature), 1);
        assert_all_valid(
            &rows,
            &format!("f32, seed {seed}, temperature {temperature}"),
        );
        // The templates open with fixed text: jump-forward takes it without a model call.
        for (i, row) in rows.iter().enumerate() {
            if mixed().spec(i).front == "template" {
                assert!(row.jumped > 0, "row {i} never jumped forward");
            }
        }
    }
    let rows = run::<bf16>(n, &config(4, 1.0), 1);
    assert_all_valid(&rows, "bf16");
}

#[test]
fn overlapped_and_synchronous_decoding_give_the_same_outputs() {
    let n = mixed().specs.len();
    let overlapped = run::<f32>(n, &config(5, 1.0), 2);
    let synchronous = run::<f32>(
        n,
        &DecodeConfig {
            overlap: false,
            ..config(5, 1.0)
        },
        0,
    );
    assert_eq!(overlapped, synchronous);
    assert_all_valid(&overlapped, "seed 5");
    // Another seed decodes differently: the comparison above is not between constants.
    assert_ne!(overlapped, run::<f32>(n, &config(6, 1.0), 2));
}

#[test]
fn validators_accept_the_samples_and_reject_broken_outputs() {
    let mixed = mixed();
    let vocab = mixed.vocab();
    let eos = vocab.eos_tokens()[0];
    for spec in &mixed.specs {
        let mut tokens = vocab.encode(spec.sample).unwrap();
        // The sample is in the constraint's language...
        let mut m = spec.matcher();
        m.consume_all(&tokens).unwrap();
        assert!(m.is_accepting(), "{}: sample not accepted", spec.name);
        // ...and its validator agrees, with or without the final EOS.
        assert_eq!(spec.validate(vocab, &tokens), Ok(()), "{}", spec.name);
        tokens.push(eos);
        assert_eq!(spec.validate(vocab, &tokens), Ok(()), "{}", spec.name);
        // Cut short, it is rejected.
        tokens.truncate(tokens.len() - 2);
        assert!(
            spec.validate(vocab, &tokens).is_err(),
            "{}: a truncated sample passes",
            spec.name
        );
        // A special token in the middle, where no constraint has one, is rejected.
        let mut tokens = vocab.encode(spec.sample).unwrap();
        tokens.insert(1, eos);
        assert!(spec.validate(vocab, &tokens).is_err(), "{}", spec.name);
    }
    // Special tokens spelled as text are not special tokens.
    let outline = mixed.specs.iter().find(|s| s.name == "outline").unwrap();
    let as_text = vocab.encode_greedy(outline.sample.as_bytes()).unwrap();
    assert!(as_text.iter().all(|&t| !vocab.is_special(t)));
    assert!(outline.validate(vocab, &as_text).is_err());
}
