//! Hash maps for internal keys.

/// Internal maps (the compilers', the walks'): keys are small integers and short integer
/// slices no adversary chooses, so a fast non-cryptographic hash (rustc's Fx) instead of SipHash.
pub(crate) type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;
/// The set of [`FastMap`].
pub(crate) type FastSet<K> = rustc_hash::FxHashSet<K>;
