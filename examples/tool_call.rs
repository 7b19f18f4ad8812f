//! A Qwen-style tool call: `<tool_call>` (ordinary text in Qwen3), one of the request's tools,
//! and an arguments object following that tool's parameters.
//!
//! `cargo run --release --example tool_call`

mod common;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = common::engine()?;
    let request = r#"tool_call(tools: [
        tool(name: "get_weather", params: [
            param(name: "city", value: string),
            param(name: "unit", value: enum(values: {"celsius", "fahrenheit"})),
            param(name: "days", value: integer(range: 1..7))]),
        tool(name: "search", params: [
            param(name: "query", value: string),
            param(name: "since", value: pattern(re: /[0-9]{4}-[0-9]{2}-[0-9]{2}/))])])"#;
    let constraint = common::compile(&engine, request)?;
    let draft = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\", \"unit\": \"celsius\", \"days\": 3}}\n</tool_call>";
    common::decode(&engine, &constraint, draft)?;
    println!("\n-- a draft asking for 10 days:");
    common::decode(
        &engine,
        &constraint,
        &draft.replace("\"days\": 3", "\"days\": 10"),
    )?;
    Ok(())
}
