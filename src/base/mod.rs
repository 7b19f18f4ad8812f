//! The ground floor: what every layer above uses and that depends on nothing in the crate.
//! Token ids, bitmask rows, byte sets, internal hash maps and the walk over sorted byte
//! strings.

pub mod bitmask;
pub mod byteset;
pub(crate) mod collections;
pub(crate) mod sorted;
pub mod token;
