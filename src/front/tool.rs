//! What a model may call: the tools tag dispatch builds call formats for and BFCL function
//! lists map to.

use serde_json::Value;

/// A tool the model may call: its name and the JSON Schema of its arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    /// Function name.
    pub name: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

impl Tool {
    /// A tool.
    pub fn new(name: impl Into<String>, parameters: Value) -> Tool {
        Tool {
            name: name.into(),
            parameters,
        }
    }
}
