//! Outline generation (WGrammar, Figure 1): one `<|vision_start|>` title `<|vision_pad|>`
//! summary `<|vision_end|>` record per section of the input document, in document order, each
//! title starting with the section's id.
//!
//! `cargo run --release --example outline`

mod common;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = common::engine()?;
    // The input document's section tree, as the request gives it.
    let request = r#"outline(sections: [
        section(id: "1", children: [section(id: "1.1"), section(id: "1.2")]),
        section(id: "2")])"#;
    let constraint = common::compile(&engine, request)?;
    let draft = concat!(
        "<|vision_start|>1 Background<|vision_pad|>Why the study was needed.<|vision_end|>\n",
        "<|vision_start|>1.1 Prior work<|vision_pad|>Two earlier surveys.<|vision_end|>\n",
        "<|vision_start|>1.2 Gaps<|vision_pad|>What they missed.<|vision_end|>\n",
        "<|vision_start|>2 Results<|vision_pad|>The main findings.<|vision_end|>\n",
    );
    common::decode(&engine, &constraint, draft)?;
    // A model that skips section 1.2 is stopped at the id.
    println!("\n-- a draft that skips section 1.2:");
    let skipping = draft.replace(
        "<|vision_start|>1.2 Gaps<|vision_pad|>What they missed.<|vision_end|>\n",
        "",
    );
    common::decode(&engine, &constraint, &skipping)?;
    Ok(())
}
