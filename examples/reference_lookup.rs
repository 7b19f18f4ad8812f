//! Reference lookup (WGrammar, Figure 2): a JSON array linking topic indices to the ids of
//! the sections that discuss them; indices and ids restricted to the request's sets.
//!
//! `cargo run --release --example reference_lookup`

mod common;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = common::engine()?;
    let request = r#"reference_lookup(topics: 1..3,
        ids: {"1", "1.1", "1.2", "2", "2.1", "2.1.1", "2.3", "4.2.3", "4.4.1"})"#;
    let constraint = common::compile(&engine, request)?;
    let draft = r#"[{"topic": [1], "reference": ["2.1.1", "2.3"]}, {"topic": [3], "reference": ["4.2.3", "4.4.1"]}]"#;
    common::decode(&engine, &constraint, draft)?;
    println!("\n-- a draft citing a section that does not exist:");
    common::decode(&engine, &constraint, &draft.replace("4.4.1", "4.4.2"))?;
    Ok(())
}
