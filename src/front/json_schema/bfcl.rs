//! BFCL's function-parameter dialect to standard JSON Schema.
