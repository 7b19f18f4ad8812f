//! The shipped outline-generation template (WGrammar Figure 1) on Qwen3: masks equal the
//! brute-force oracle at every step, random walks produce outputs an independent regex built
//! from the request accepts, and invalid outputs are rejected exactly where the text leaves
//! the language.

use formwork::Matcher;
use formwork_testkit::oracle::assert_masks_match_oracle;
use formwork_testkit::rng::Rng;
use formwork_testkit::tokenizers;
use formwork_testkit::walk::{checked_walks, rejection_point, special_re};

/// A document's section tree: (id, children).
struct Sec(&'static str, Vec<Sec>);

fn request(sections: &[Sec]) -> String {
    fn list(secs: &[Sec]) -> String {
        let items: Vec<String> = secs
            .iter()
            .map(|Sec(id, children)| {
                if children.is_empty() {
                    format!("section(id: {id:?})")
                } else {
                    format!("section(id: {id:?}, children: {})", list(children))
                }
            })
            .collect();
        format!("[{}]", items.join(", "))
    }
    format!("outline(sections: {})", list(sections))
}

/// The ids in document order (a section, then its subsections).
fn document_order(secs: &[Sec], out: &mut Vec<&'static str>) {
    for Sec(id, children) in secs {
        out.push(id);
        document_order(children, out);
    }
}

/// An independent description of the expected output, as a `regex::bytes` pattern.
fn expected_regex(sections: &[Sec]) -> regex::bytes::Regex {
    let mut ids = Vec::new();
    document_order(sections, &mut ids);
    let records: String = ids
        .iter()
        .map(|id| {
            format!(
                "{}{} [^\\n]*{}(?s:.)*?{}\\n",
                special_re("<|vision_start|>"),
                regex::escape(id),
                special_re("<|vision_pad|>"),
                special_re("<|vision_end|>")
            )
        })
        .collect();
    regex::bytes::Regex::new(&format!("^{records}$")).unwrap()
}

fn tree() -> Vec<Sec> {
    vec![
        Sec(
            "1",
            vec![Sec("1.1", vec![]), Sec("1.2", vec![Sec("1.2.1", vec![])])],
        ),
        Sec("2", vec![]),
    ]
}

#[test]
fn masks_equal_the_oracle_at_every_step() {
    let vocab = tokenizers::qwen3();
    let cases: Vec<(Vec<Sec>, Vec<&str>)> = vec![
        (
            vec![Sec("1", vec![Sec("1.1", vec![])]), Sec("2", vec![])],
            vec![concat!(
                "<|vision_start|>1 Intro<|vision_pad|>Hi.<|vision_end|>\n",
                "<|vision_start|>1.1 A<|vision_pad|>B<|vision_end|>\n",
                "<|vision_start|>2 C<|vision_pad|><|vision_end|>\n",
            )],
        ),
        (
            vec![Sec("sec_7", vec![])],
            vec![
                "<|vision_start|>sec_7 概要<|vision_pad|>x\ny<|vision_end|>\n",
                "<|vision_start|>sec_7 <|vision_pad|><|vision_end|>\n",
            ],
        ),
        (vec![], vec![""]),
    ];
    for (sections, texts) in cases {
        let req = request(&sections);
        let constraint = formwork_testkit::template_engine().compile(&req).unwrap();
        let grammar = formwork_testkit::template_engine()
            .request_grammar(&req)
            .unwrap();
        for text in texts {
            let tokens = vocab.encode(text).unwrap();
            let mut m = constraint.matcher();
            assert_masks_match_oracle(
                &format!("{req} on {text:?}"),
                vocab,
                &grammar,
                &mut m,
                &tokens,
            );
            let eos = vocab.eos_tokens()[0];
            m.consume(eos).unwrap();
            assert!(expected_regex(&sections)
                .is_match(&formwork_testkit::walk::render_text(vocab, &tokens)));
        }
    }
}

#[test]
fn random_walks_follow_the_section_tree() {
    let vocab = tokenizers::qwen3();
    let mut rng = Rng::new(0xf1);
    for sections in [
        tree(),
        vec![Sec("A", vec![])],
        vec![Sec("x.1", vec![]), Sec("x.2", vec![])],
    ] {
        let req = request(&sections);
        let re = expected_regex(&sections);
        let constraint = formwork_testkit::template_engine().compile(&req).unwrap();
        let matcher = || Box::new(constraint.matcher()) as Box<dyn Matcher>;
        let ended = checked_walks(vocab, matcher, &mut rng, 12, 400, |out| {
            match re.is_match(out) {
                true => Ok(()),
                false => Err(format!("{req}: not the section tree")),
            }
        });
        assert!(ended >= 8, "{req}: only {ended} of 12 walks ended");
    }
}

#[test]
fn invalid_outputs_are_rejected_where_they_leave_the_language() {
    let vocab = tokenizers::qwen3();
    let req = request(&tree());
    let constraint = formwork_testkit::template_engine().compile(&req).unwrap();
    let grammar = formwork_testkit::template_engine()
        .request_grammar(&req)
        .unwrap();
    let vs = "<|vision_start|>";
    let rec = |id: &str| format!("{vs}{id} T<|vision_pad|>S<|vision_end|>\n");
    let reject = |text: &str| rejection_point(vocab, &grammar, &mut constraint.matcher(), text);
    let token = |s: &str| {
        let t = vocab.encode(s).unwrap();
        assert_eq!(t.len(), 1, "{s:?} is one token");
        t[0]
    };

    // The valid output is a viable prefix all the way and complete.
    let valid: String = ["1", "1.1", "1.2", "1.2.1", "2"]
        .iter()
        .map(|id| rec(id))
        .collect();
    assert_eq!(reject(&valid), None);
    let mut m = constraint.matcher();
    m.consume_all(&vocab.encode(&valid).unwrap()).unwrap();
    assert!(m.is_accepting());

    // A wrong id: "1.3" where "1.2" comes; rejected at the "3", after "1." was accepted.
    let wrong_id = format!("{}{}{vs}1.3 T", rec("1"), rec("1.1"));
    let (step, t) = reject(&wrong_id).expect("rejected");
    assert_eq!(t, token("3"));
    assert_eq!(
        vocab.encode(&wrong_id).unwrap()[step - 2..step],
        [token("1"), token(".")]
    );

    // Wrong order: section 2 before section 1.
    let (_, t) = reject(&format!("{vs}2 T")).expect("rejected");
    assert_eq!(t, token("2"));

    // A missing tag: the title runs on and `<|vision_end|>` comes without `<|vision_pad|>`.
    let (_, t) = reject(&format!("{vs}1 Title and summary<|vision_end|>")).expect("rejected");
    assert_eq!(Some(t), vocab.special_id("<|vision_end|>"));

    // A newline in a title.
    let (_, t) = reject(&format!("{vs}1 Two\nlines<|vision_pad|>")).expect("rejected");
    assert!(vocab.token_bytes(t).contains(&b'\n'));

    // A special token the template does not name here.
    let (_, t) = reject(&format!("{vs}1 T<|vision_pad|>S<|im_start|>")).expect("rejected");
    assert_eq!(Some(t), vocab.special_id("<|im_start|>"));

    // Text after the last record, and a record missing at the end.
    let (_, t) = reject(&format!("{valid}Done.")).expect("rejected");
    assert_eq!(vocab.token_bytes(t)[0], b'D');
    let mut m = constraint.matcher();
    let short: String = ["1", "1.1", "1.2", "1.2.1"]
        .iter()
        .map(|id| rec(id))
        .collect();
    assert_eq!(rejection_point(vocab, &grammar, &mut m, &short), None);
    assert!(!m.is_accepting(), "EOS must wait for section 2");
}

#[test]
fn ids_are_literal_writes_with_jump_forward() {
    // The id is forced after `<|vision_start|>`: jump-forward offers it.
    let vocab = tokenizers::qwen3();
    let req = request(&[Sec("3.14", vec![])]);
    let mut m = formwork_testkit::template_engine()
        .compile(&req)
        .unwrap()
        .matcher();
    assert_eq!(m.forced_bytes(), b"");
    let forced = m.forced_tokens();
    assert_eq!(
        forced.first().copied(),
        vocab.special_id("<|vision_start|>")
    );
    m.consume_all(&forced).unwrap();
    let bytes: Vec<u8> = forced[1..]
        .iter()
        .flat_map(|&t| vocab.token_bytes(t).to_vec())
        .collect();
    assert!(
        b"3.14 ".starts_with(&bytes),
        "{:?}",
        String::from_utf8_lossy(&bytes)
    );
}
