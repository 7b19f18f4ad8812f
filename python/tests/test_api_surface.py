"""The public surface: docstrings on every public name, stubs for every native name with the
runtime's signatures (mypy's stubtest), and the xgrammar names an integration ports by renaming."""

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import formwork
import formwork._native as native

STUB = Path(formwork.__file__).with_name("_native.pyi")


def public_members(cls: type):
    return [n for n in vars(cls) if not n.startswith("_")]


def test_every_public_name_has_a_docstring() -> None:
    missing = []
    for name in formwork.__all__:
        obj = getattr(formwork, name)
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            missing += [f"{name}.{m}" for m in public_members(obj) if not (getattr(obj, m).__doc__ or "").strip()]
    for module in (formwork.bitmask, formwork.errors, formwork.structural_tag):
        assert (module.__doc__ or "").strip(), module.__name__
    assert not missing, missing


def test_the_stub_declares_every_native_name_and_member() -> None:
    tree = ast.parse(STUB.read_text())
    declared = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            declared[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            declared[node.name] = set()
    names = [n for n in dir(native) if not n.startswith("__")]
    for name in names:
        assert name in declared, f"{name} is not in _native.pyi"
        obj = getattr(native, name)
        if inspect.isclass(obj):
            for member in public_members(obj):
                assert member in declared[name], f"{name}.{member} is not in _native.pyi"
    assert set(declared) == set(names), set(declared) ^ set(names)


def test_the_stub_signatures_match_the_runtime() -> None:
    pytest.importorskip("mypy.stubtest", reason="mypy is not installed: stub signatures are not checked")
    out = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "formwork._native"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_xgrammar_names_are_all_here() -> None:
    # What vLLM's and SGLang's xgrammar backends and xgrammar's HF processor call.
    for name in [
        "TokenizerInfo",
        "GrammarCompiler",
        "CompiledGrammar",
        "GrammarMatcher",
        "BatchGrammarMatcher",
        "StructuralTagItem",
        "allocate_token_bitmask",
        "apply_token_bitmask_inplace",
        "get_bitmask_shape",
        "reset_token_bitmask",
    ]:
        assert hasattr(formwork, name), name
    for cls, members in {
        formwork.TokenizerInfo: ["from_huggingface", "vocab_size", "stop_token_ids", "special_token_ids", "decoded_vocab"],
        formwork.GrammarCompiler: [
            "compile_json_schema",
            "compile_regex",
            "compile_grammar",
            "compile_structural_tag",
            "compile_builtin_json_grammar",
            "get_cache_size_bytes",
        ],
        formwork.GrammarMatcher: [
            "accept_token",
            "accept_string",
            "fill_next_token_bitmask",
            "find_jump_forward_string",
            "rollback",
            "reset",
            "is_terminated",
            "fork",
        ],
    }.items():
        for m in members:
            assert hasattr(cls, m), f"{cls.__name__}.{m}"
    assert formwork.__version__
