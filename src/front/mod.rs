//! Front ends: text formats compiled into the grammar IR that both backends consume.

pub mod bfcl;
pub(crate) mod chars;
pub mod gbnf;
pub(crate) mod guard;
pub mod json_schema;
pub mod regex;
pub mod tags;
