//! Front ends: text formats compiled into the grammar IR that both backends consume.

pub mod gbnf;
pub mod regex;
