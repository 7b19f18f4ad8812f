//! `formwork._native`: the Python face of formwork (PyO3). The package `formwork` re-exports
//! these names next to its pure-Python parts (bitmask allocation and apply, exceptions,
//! `contrib.hf`); see `formwork/_native.pyi` for the typed signatures.
//!
//! Only the crate-root API of the `formwork` library is used, plus `formwork::gpu` for batch
//! filling and the CPU apply.

mod arrays;
mod bench;
mod compiler;
mod errors;
mod matcher;
mod tokenizer;

use pyo3::prelude::*;

/// The allocator of the extension's Rust code (see the `mimalloc` dependency in Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The templates shipped with formwork (``outline``, ``reference_lookup``, ``tool_call``), as
/// ``{file name: source text}`` for :meth:`GrammarCompiler.register_templates`.
#[pyfunction]
fn shipped_templates() -> std::collections::BTreeMap<&'static str, &'static str> {
    std::collections::BTreeMap::from([
        ("outline.fw", include_str!("../../templates/outline.fw")),
        (
            "reference_lookup.fw",
            include_str!("../../templates/reference_lookup.fw"),
        ),
        ("tool_call.fw", include_str!("../../templates/tool_call.fw")),
    ])
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    formwork::allocator::keep_freed_memory();
    m.add_class::<tokenizer::TokenizerInfo>()?;
    m.add_class::<compiler::GrammarCompiler>()?;
    m.add_class::<compiler::CompiledGrammar>()?;
    m.add_class::<matcher::GrammarMatcher>()?;
    m.add_class::<matcher::BatchGrammarMatcher>()?;
    m.add_function(wrap_pyfunction!(matcher::fill_next_token_bitmasks, m)?)?;
    m.add_function(wrap_pyfunction!(matcher::_apply_token_bitmask_cpu, m)?)?;
    m.add_function(wrap_pyfunction!(shipped_templates, m)?)?;
    m.add_function(wrap_pyfunction!(bench::_time_native_step, m)?)?;
    m.add_function(wrap_pyfunction!(bench::_time_native_batch, m)?)?;
    Ok(())
}
