//! Token ids.

/// A token id, as inference engines pass them.
pub type TokenId = u32;
