"""Masks from Python equal the Rust masks bit for bit: the same constraint and text walked by
the formwork CLI (`formwork check ... --json --dump-masks`, the Rust library with no Python in
between) and by the bindings, on regexes, JSON Schemas (both backends, every option the
bindings map), GBNF, tool-call tags and template requests (text and JSON forms)."""

import json
import subprocess
from pathlib import Path
from typing import Callable, List, Tuple

import numpy as np
import pytest

import formwork
from conftest import REPO

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "kids": {"type": "array", "items": {"$ref": "#"}},
        "age": {"type": "integer", "minimum": 0},
    },
    "required": ["name"],
}
GBNF = """root ::= expr
expr ::= term (("+" | "-") term)*
term ::= [0-9]+ | "(" expr ")"
"""
TOOLS = {
    "format": "qwen",
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
        }
    ],
}
LOOKUP = 'reference_lookup(topics: 1..20, ids: {"1", "1.1", "2", "2.1.1"})'
LOOKUP_JSON = {"reference_lookup": {"topics": {"$range": [1, 20]}, "ids": {"$choice": ["1", "1.1", "2", "2.1.1"]}}}
OUTLINE = 'outline(sections: [section(id: "1", children: [section(id: "1.1")])])'

Compile = Callable[[formwork.GrammarCompiler], formwork.CompiledGrammar]


# The CLI reads schemas, grammars and tag specs from files: written per test.
FILES = {
    "{schema}": ("schema.json", json.dumps(SCHEMA)),
    "{gbnf}": ("arith.gbnf", GBNF),
    "{tags}": ("tags.json", json.dumps(TOOLS)),
    "{llama}": ("llama.json", json.dumps({**TOOLS, "format": "llama31", "require_call": True})),
}
TEMPLATES = str(REPO / "templates")

# (label, how Python compiles it, the CLI's constraint flags, a text in the language)
CASES: List[Tuple[str, Compile, List[str], str]] = [
    (
        "regex",
        lambda c: c.compile_regex(r'\{"version": "\d+(\.\d+)*", "note": "[^"]*"\}'),
        ["--regex", r'\{"version": "\d+(\.\d+)*", "note": "[^"]*"\}'],
        '{"version": "2.14.0", "note": "Zoë ☃"}',
    ),
    (
        "JSON schema, compact, schema order",
        lambda c: c.compile_json_schema(SCHEMA, any_whitespace=False, strict_mode=False),
        ["--schema", "{schema}"],
        '{"name":"Ada","kids":[{"name":"Bo","age":3}],"age":36}',
    ),
    (
        "JSON schema, flexible whitespace, strict, any order, lenient",
        lambda c: c.compile_json_schema(SCHEMA, max_whitespace_cnt=2, any_order=True, lenient=True),
        ["--schema", "{schema}", "--whitespace", "flexible", "--max-ws-run", "2",
         "--no-additional-properties", "--any-order", "--lenient"],
        '{"age": 36,\n "name": "Ada"}',
    ),
    ("GBNF", lambda c: c.compile_grammar(GBNF), ["--gbnf", "{gbnf}"], "12+(3-45)"),
    (
        "Qwen tool calls",
        lambda c: c.compile_tool_calls(TOOLS["tools"], format="qwen"),
        ["--tags", "{tags}"],
        'Ok.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
    ),
    (
        "Llama 3.1 tool calls",
        lambda c: c.compile_tool_calls(TOOLS["tools"], format="llama31", require_call=True),
        ["--tags", "{llama}"],
        'Checking. <function=get_weather>{"city":"Oslo"}</function>',
    ),
    (
        "template request (text form)",
        lambda c: c.compile_request(LOOKUP),
        ["--templates", TEMPLATES, "--request", LOOKUP],
        '[{"topic": [1, 12], "reference": ["2.1.1", "1"]}]',
    ),
    (
        "template request (JSON form)",
        lambda c: c.compile_request(LOOKUP_JSON),
        ["--templates", TEMPLATES, "--request", json.dumps(LOOKUP_JSON)],
        '[{"topic": [20], "reference": ["1.1"]}, {"topic": [2], "reference": ["2"]}]',
    ),
    (
        "template request with special tokens",
        lambda c: c.compile_request(OUTLINE),
        ["--templates", TEMPLATES, "--request", OUTLINE],
        "<|vision_start|>1 Intro<|vision_pad|>Why.<|vision_end|>\n"
        "<|vision_start|>1.1 Más<|vision_pad|>x<|vision_end|>\n",
    ),
]


def rust_masks(cli: Path, flags: List[str], text: str) -> List[List[int]]:
    out = subprocess.run(
        [str(cli), "check", *flags, "--text", text, "--json", "--dump-masks"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr + out.stdout[-2000:]
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert lines[-1]["summary"] and lines[-1]["accepted"], lines[-1]
    return [line["mask"] for line in lines[:-1]]


def python_masks(info: formwork.TokenizerInfo, compiled: formwork.CompiledGrammar, text: str) -> List[np.ndarray]:
    matcher = formwork.GrammarMatcher(compiled)
    bitmask = formwork.allocate_token_bitmask(1, info.vocab_size, backend="numpy")
    masks = []
    for token in info.encode(text) + [None]:
        matcher.fill_next_token_bitmask(bitmask)
        masks.append(np.flatnonzero(np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")))
        if token is not None:
            assert matcher.accept_token(token)
    return masks


@pytest.mark.parametrize("label, compile_it, flags, text", CASES, ids=[c[0] for c in CASES])
def test_python_masks_equal_rust_masks(
    label: str, compile_it: Compile, flags: List[str], text: str,
    cli: Path, qwen3: formwork.TokenizerInfo, compiler: formwork.GrammarCompiler, tmp_path: Path,
) -> None:
    for placeholder, (name, content) in FILES.items():
        (tmp_path / name).write_text(content)
    flags = [str(tmp_path / FILES[f][0]) if f in FILES else f for f in flags]
    expected = rust_masks(cli, flags, text)
    got = python_masks(qwen3, compile_it(compiler), text)
    assert len(got) == len(expected) == len(qwen3.encode(text)) + 1, label
    for step, (g, e) in enumerate(zip(got, expected)):
        assert np.array_equal(g, np.asarray(e, dtype=g.dtype)), f"{label}: step {step}: {len(g)} vs {len(e)} allowed"
