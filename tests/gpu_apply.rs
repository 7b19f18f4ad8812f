//! The CPU reference apply (the kernel's semantics): every logit is checked against the rule
//! written out per token with `mask::get_bit`, for f32, f16 and bf16, rows wider and narrower
//! than the mask, explicit vocabulary sizes and index lists; bad shapes are typed errors that
//! leave the logits alone.

use formwork::bitmask::get_bit;
use formwork::gpu::{apply_bitmask, ApplyConfig, ApplyError, Logit};
use formwork_testkit::rng::Rng;
use half::{bf16, f16};

/// Test access to a logit type: build one from f32, compare bit patterns.
trait TestLogit: Logit + std::fmt::Debug {
    fn from_f32(x: f32) -> Self;
    fn bits(self) -> u32;
}

impl TestLogit for f32 {
    fn from_f32(x: f32) -> f32 {
        x
    }
    fn bits(self) -> u32 {
        self.to_bits()
    }
}

impl TestLogit for f16 {
    fn from_f32(x: f32) -> f16 {
        f16::from_f32(x)
    }
    fn bits(self) -> u32 {
        self.to_bits().into()
    }
}

impl TestLogit for bf16 {
    fn from_f32(x: f32) -> bf16 {
        bf16::from_f32(x)
    }
    fn bits(self) -> u32 {
        self.to_bits().into()
    }
}

/// One apply call's shapes.
struct Case {
    row_len: usize,
    row_words: usize,
    vocab_size: Option<usize>,
    logits_rows: usize,
    mask_rows: usize,
    indices: Option<Vec<u32>>,
}

impl Case {
    fn new(row_len: usize, row_words: usize, rows: usize) -> Case {
        Case {
            row_len,
            row_words,
            vocab_size: None,
            logits_rows: rows,
            mask_rows: rows,
            indices: None,
        }
    }
    fn vocab(mut self, v: usize) -> Case {
        self.vocab_size = Some(v);
        self
    }
    fn indices(mut self, mask_rows: usize, idx: &[u32]) -> Case {
        self.mask_rows = mask_rows;
        self.indices = Some(idx.to_vec());
        self
    }
}

/// Mask words of mixed density: all allowed, none, sparse, dense and random words.
fn random_mask(rng: &mut Rng, len: usize) -> Vec<u32> {
    (0..len)
        .map(|_| match rng.below(5) {
            0 => u32::MAX,
            1 => 0,
            2 => rng.next_u32() & rng.next_u32() & rng.next_u32(),
            3 => rng.next_u32() | rng.next_u32(),
            _ => rng.next_u32(),
        })
        .collect()
}

/// Applies the case to random logits and checks every logit against the rule, token by token.
fn check<T: TestLogit>(case: &Case, seed: u64) {
    let mut rng = Rng::new(seed);
    let original: Vec<T> = (0..case.logits_rows * case.row_len)
        .map(|_| T::from_f32((rng.below(2001) as f32 - 1000.0) / 37.0))
        .collect();
    let mut mask = random_mask(&mut rng, case.mask_rows * case.row_words);
    // Every row forbids at least one token of its first word, so no case passes vacuously.
    for (r, row) in mask.chunks_mut(case.row_words).enumerate() {
        row[0] &= !(1 << (r % 32));
    }
    let mut config = ApplyConfig::new(case.row_len, case.row_words);
    if let Some(v) = case.vocab_size {
        config = config.vocab_size(v);
    }
    if let Some(idx) = &case.indices {
        config = config.indices(idx);
    }
    let mut logits = original.clone();
    apply_bitmask(&mut logits, &mask, &config).unwrap();

    let vocab = case
        .vocab_size
        .unwrap_or(case.row_len.min(32 * case.row_words));
    let touched: Vec<usize> = match &case.indices {
        Some(idx) => idx.iter().map(|&r| r as usize).collect(),
        None => (0..case.logits_rows).collect(),
    };
    let mut masked = 0;
    for r in 0..case.logits_rows {
        let mask_row = touched
            .contains(&r)
            .then(|| &mask[r * case.row_words..][..case.row_words]);
        for t in 0..case.row_len {
            let i = r * case.row_len + t;
            let allowed = mask_row.is_none_or(|m| t < vocab && get_bit(m, t as u32));
            let want = if allowed {
                original[i]
            } else {
                T::NEG_INFINITY
            };
            assert_eq!(logits[i].bits(), want.bits(), "row {r} token {t}");
            masked += usize::from(!allowed);
        }
    }
    assert!(masked > 0 || touched.is_empty(), "the case masks something");
}

fn cases() -> Vec<Case> {
    vec![
        // Rows exactly as wide as the mask.
        Case::new(96, 3, 4),
        // Logits wider than the mask: the 4 columns past its 96 bits are masked.
        Case::new(100, 3, 3),
        // Logits narrower than the mask's words: the vocabulary is the row, trailing bits unused.
        Case::new(70, 3, 2),
        // An explicit vocabulary: mask bits 70..128 are ignored and columns past 70 masked.
        Case::new(128, 4, 2).vocab(70),
        // A vocabulary smaller than the row and not a multiple of 32, inside the last word.
        Case::new(40, 2, 3).vocab(33),
        // Qwen3's logits: 151,936 columns, 4,748 words.
        Case::new(151_936, 4748, 2),
        // An index list: rows 2 and 0 of 5 touched, reading bitmask rows 2 and 0 of 3.
        Case::new(64, 2, 5).indices(3, &[2, 0]),
        // A row named twice is masked once.
        Case::new(64, 2, 3).indices(3, &[1, 1]),
        // An empty index list touches nothing.
        Case::new(64, 2, 3).indices(3, &[]),
    ]
}

#[test]
fn f32_logits_follow_the_rule() {
    for (i, case) in cases().iter().enumerate() {
        check::<f32>(case, i as u64);
    }
}

#[test]
fn f16_logits_follow_the_rule() {
    for (i, case) in cases().iter().enumerate() {
        check::<f16>(case, 100 + i as u64);
    }
}

#[test]
fn bf16_logits_follow_the_rule() {
    for (i, case) in cases().iter().enumerate() {
        check::<bf16>(case, 200 + i as u64);
    }
}

#[test]
fn row_wider_than_the_mask_masks_the_extra_columns_even_under_a_full_mask() {
    let mut logits = vec![1.0f32; 2 * 75];
    apply_bitmask(&mut logits, &[u32::MAX; 4], &ApplyConfig::new(75, 2)).unwrap();
    for row in logits.chunks(75) {
        assert!(row[..64].iter().all(|&x| x == 1.0));
        assert!(row[64..].iter().all(|&x| x == f32::NEG_INFINITY));
    }
}

#[test]
fn the_plan_answers_like_the_rule_for_every_token() {
    let mut rng = Rng::new(7);
    for case in cases() {
        let mut config = ApplyConfig::new(case.row_len, case.row_words);
        if let Some(v) = case.vocab_size {
            config = config.vocab_size(v);
        }
        let plan = config.plan(case.row_len * 2, case.row_words * 2).unwrap();
        let vocab = case
            .vocab_size
            .unwrap_or(case.row_len.min(32 * case.row_words));
        assert_eq!(plan.vocab_size(), vocab);
        let row = random_mask(&mut rng, case.row_words);
        for t in 0..case.row_len {
            let allowed = t < vocab && get_bit(&row, t as u32);
            assert_eq!(plan.is_masked(&row, t), !allowed, "token {t}");
        }
        assert_eq!((plan.touched(), plan.row(1)), (2, 1));
    }
}

#[test]
fn bad_shapes_are_typed_errors_and_write_nothing() {
    let original = vec![0.5f32; 6 * 64];
    let mask = [0u32; 6 * 2];
    let errors: Vec<(ApplyConfig<'_>, usize, usize, ApplyError)> = vec![
        (
            ApplyConfig::new(50, 2),
            384,
            12,
            ApplyError::LogitsShape {
                len: 384,
                row_len: 50,
            },
        ),
        (
            ApplyConfig::new(0, 2),
            384,
            12,
            ApplyError::LogitsShape {
                len: 384,
                row_len: 0,
            },
        ),
        (
            ApplyConfig::new(64, 5),
            384,
            12,
            ApplyError::MaskShape {
                len: 12,
                row_words: 5,
            },
        ),
        (
            ApplyConfig::new(64, 2),
            384,
            10,
            ApplyError::BatchMismatch {
                logits_rows: 6,
                mask_rows: 5,
            },
        ),
        (
            ApplyConfig::new(64, 2).vocab_size(65),
            384,
            12,
            ApplyError::MaskTooNarrow {
                vocab_size: 65,
                mask_bits: 64,
            },
        ),
        (
            ApplyConfig::new(64, 3).vocab_size(70),
            384,
            12,
            ApplyError::LogitsTooNarrow {
                vocab_size: 70,
                row_len: 64,
            },
        ),
        (
            ApplyConfig::new(64, 2).indices(&[0, 5, 6]),
            384,
            12,
            ApplyError::IndexOutOfRange {
                position: 2,
                row: 6,
                logits_rows: 6,
                mask_rows: 6,
            },
        ),
        (
            ApplyConfig::new(64, 2).indices(&[3]),
            384,
            6,
            ApplyError::IndexOutOfRange {
                position: 0,
                row: 3,
                logits_rows: 6,
                mask_rows: 3,
            },
        ),
    ];
    for (config, logits_len, mask_len, want) in errors {
        let mut logits = original[..logits_len].to_vec();
        let got = apply_bitmask(&mut logits, &mask[..mask_len], &config).unwrap_err();
        assert_eq!(got, want);
        assert!(!got.to_string().is_empty());
        assert_eq!(
            logits,
            original[..logits_len],
            "nothing written on {want:?}"
        );
    }
}
