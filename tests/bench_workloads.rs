//! Every case of `cargo bench --bench peers`'s quick workloads is accepted by formwork: its
//! reference output, token by token, is allowed by every mask, and the matcher accepts at the
//! end. A schema formwork cannot compile is not a case formwork can run; those are counted
//! and must stay few (the bench reports them too). A schema's reference that lists properties
//! in another order than the schema is outside the language of the default (schema-order)
//! grammar: the reference recognizer says so, and then formwork must reject it too.

use formwork::bitmask::get_bit;
use formwork::front::json_schema::{compile_schema, JsonSchemaOptions};
use formwork_testkit::oracle::Lang;
use formwork_testkit::workloads::{self, Formwork, Size, Spec};

/// Whether the reference recognizer finds `reference` in the language of `spec` as formwork's
/// default options compile it (only schemas can fall outside: their property order).
fn in_language(spec: &Spec, reference: &str) -> bool {
    let Spec::Schema(schema) = spec else {
        return true;
    };
    let grammar = compile_schema(schema, &JsonSchemaOptions::new())
        .expect("compiles, as it did through the engine")
        .grammar;
    Lang::new(&grammar).accepts(reference)
}

#[test]
fn every_quick_reference_is_accepted_by_formwork() {
    let fw = Formwork::new(formwork::vocab::Vocab::embedded_qwen3().unwrap());
    let vocab = fw.engine.vocab().clone();
    let mut mask = vec![0u32; vocab.mask_words()];
    let (mut cases, mut unsupported, mut out_of_order) = (0, Vec::new(), Vec::new());
    for w in workloads::load(Size::Quick) {
        assert!(!w.cases.is_empty(), "{}: no cases", w.name);
        for case in &w.cases {
            let mut m = match fw.compile(&case.spec) {
                Ok(m) => m,
                Err(e) if matches!(case.spec, workloads::Spec::Schema(_)) => {
                    unsupported.push(format!("{}: {e}", case.id));
                    continue;
                }
                Err(e) => panic!("{} {}: {e}", w.name, case.id),
            };
            cases += 1;
            if !in_language(&case.spec, &case.reference) {
                let tokens = vocab.encode(&case.reference).unwrap();
                assert!(
                    m.consume_all(&tokens).is_err() || !m.is_accepting(),
                    "{} {}: formwork accepts a reference outside its language",
                    w.name,
                    case.id
                );
                out_of_order.push(case.id.clone());
                continue;
            }
            let tokens = vocab.encode(&case.reference).unwrap();
            for (step, &t) in tokens.iter().enumerate() {
                m.fill_mask(&mut mask).unwrap();
                assert!(
                    get_bit(&mask, t),
                    "{} {}: step {step} rejects {} after {:?}",
                    w.name,
                    case.id,
                    vocab.display_token(t),
                    tokens[..step]
                        .iter()
                        .map(|&t| vocab.display_token(t))
                        .collect::<String>()
                );
                m.consume(t).unwrap();
            }
            assert!(
                m.is_accepting(),
                "{} {}: not accepting at the end",
                w.name,
                case.id
            );
        }
    }
    eprintln!(
        "{cases} cases; not compiled: {unsupported:#?}; out of schema order: {out_of_order:?}"
    );
    assert!(cases >= 60, "{cases}");
    assert!(unsupported.len() <= 4, "{unsupported:#?}");
    assert!(out_of_order.len() <= 4, "{out_of_order:?}");
}
