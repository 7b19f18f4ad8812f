//! BFCL (Berkeley Function Calling Leaderboard) function lists to tools with standard JSON
//! Schema parameters.
//!
//! BFCL writes parameters in its own dialect: `dict` for objects, `float` and `double` for
//! numbers, `tuple` for arrays, `any` for any value, and in the Java and JavaScript sets the
//! languages' type names (`String`, `long`, `ArrayList`, `HashMap`, `Boolean`, ...). This maps
//! each to its JSON type, recursively through `properties`, `items` and
//! `additionalProperties`, and keeps every other keyword. Values are native JSON (a Java `long`
//! is a JSON integer), as MaskBench's BFCL cases have them; BFCL's own harness instead asks Java
//! and JavaScript models for each argument's source text as a string. A Java `char` is a
//! one-character string.
//!
//! # Example
//!
//! ```
//! use formwork::front::bfcl;
//!
//! let line = serde_json::json!({"function": [{"name": "f", "description": "d",
//!     "parameters": {"type": "dict", "properties": {"x": {"type": "float"}, "ids": {"type": "ArrayList", "items": {"type": "long"}}}}}]});
//! let tools = bfcl::tools(&line["function"]).unwrap();
//! assert_eq!(tools[0].name, "f");
//! assert_eq!(tools[0].parameters["type"], "object");
//! assert_eq!(tools[0].parameters["properties"]["x"]["type"], "number");
//! assert_eq!(tools[0].parameters["properties"]["ids"]["items"]["type"], "integer");
//! ```

use serde_json::{Map, Value};

use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::guard::guarded;
use crate::front::tags::Tool;

/// The JSON Schema type of a BFCL type name; `None` for "any value".
fn json_type(name: &str) -> Result<Option<&'static str>, ()> {
    Ok(Some(match name {
        "dict" | "object" | "HashMap" | "Hashtable" | "Map" => "object",
        "float" | "number" | "double" | "Double" | "Float" => "number",
        "integer" | "int" | "long" | "short" | "byte" | "Integer" | "Long" | "Bigint" => "integer",
        "string" | "String" | "char" => "string",
        "boolean" | "Boolean" | "bool" => "boolean",
        "array" | "list" | "tuple" | "Array" | "ArrayList" | "List" | "Queue" | "Stack" | "Set" => {
            "array"
        }
        "null" => "null",
        "any" | "Any" | "" => return Ok(None),
        _ => return Err(()),
    }))
}

/// Maps one BFCL parameter schema (at JSON pointer `pointer`) to standard JSON Schema.
///
/// Recursion: as deep as `schema` nests (a value its caller built, whose depth the JSON
/// Schema compiler then holds to the nesting limit), each level guarded.
pub fn to_json_schema(schema: &Value, pointer: &str) -> Result<Value, CompileError> {
    guarded(|| map_schema(schema, pointer))
}

fn map_schema(schema: &Value, pointer: &str) -> Result<Value, CompileError> {
    let Value::Object(map) = schema else {
        return Ok(schema.clone());
    };
    let mut out = Map::new();
    for (k, v) in map {
        let at = format!("{pointer}/{k}");
        match (k.as_str(), v) {
            ("type", Value::String(t)) => match json_type(t) {
                Ok(Some(jt)) => {
                    out.insert(k.clone(), Value::from(jt));
                    if t == "char" {
                        out.insert("minLength".into(), Value::from(1));
                        out.insert("maxLength".into(), Value::from(1));
                    }
                }
                Ok(None) => {}
                Err(()) => {
                    return Err(CompileError::new(
                        CompileErrorKind::Invalid,
                        Location::JsonPointer(at),
                        format!("unknown BFCL type {t:?}"),
                    ))
                }
            },
            ("properties", Value::Object(props)) => {
                let mut mapped = Map::new();
                for (name, p) in props {
                    mapped.insert(name.clone(), to_json_schema(p, &format!("{at}/{name}"))?);
                }
                out.insert(k.clone(), Value::Object(mapped));
            }
            ("items" | "additionalProperties", Value::Object(_)) => {
                out.insert(k.clone(), to_json_schema(v, &at)?);
            }
            // BFCL marks optional parameters by leaving them out of `required`; this is a note.
            ("optional", _) => {}
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(Value::Object(out))
}

/// The tools of a BFCL `function` list (`[{"name", "description", "parameters"}, ...]`).
pub fn tools(functions: &Value) -> Result<Vec<Tool>, CompileError> {
    let invalid = |at: &str, what: &str| {
        CompileError::new(
            CompileErrorKind::Invalid,
            Location::JsonPointer(at.to_string()),
            what,
        )
    };
    let Value::Array(fs) = functions else {
        return Err(invalid("", "a BFCL function list is an array"));
    };
    let mut out = Vec::with_capacity(fs.len());
    for (i, f) in fs.iter().enumerate() {
        let name = f["name"]
            .as_str()
            .ok_or_else(|| invalid(&format!("/{i}/name"), "a function needs a name"))?;
        let params = match f.get("parameters") {
            Some(p) => to_json_schema(p, &format!("/{i}/parameters"))?,
            None => serde_json::json!({"type": "object", "properties": {}}),
        };
        out.push(Tool::new(name, params));
    }
    Ok(out)
}
