//! Front ends: text formats compiled into the grammar IR that both backends consume.

pub mod bfcl;
pub(crate) mod chars;
pub mod gbnf;
pub mod json_schema;
pub mod regex;
mod guard;
pub mod tags;
