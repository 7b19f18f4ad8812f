#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/seed-*).

A seed is a *raw* input as the targets read it (formwork-testkit's `targets` module): a NUL
byte, the input as a user would send it, and for some targets a second NUL-separated part
(the request of a template, the tokenizer_config.json of a tokenizer). Sources: the shipped
templates, a fixed sample of MaskBench schemas (shared/data/jsonschemabench, the ones under
8 KB), the CLI test grammars and tool lists, and small synthetic tokenizer files (the real
ones are megabytes). Run from the repository root: `python3 scripts/fuzz_seeds.py
[PATH/TO/maskbench-data.tar.gz]`.
"""
import json
import pathlib
import random
import sys
import tarfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"


def write(target, name, *parts):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    data = b"\0" + b"\0".join(p if isinstance(p, bytes) else p.encode() for p in parts)
    (d / f"seed-{name}").write_bytes(data)


REGEXES = [
    r"\d+(\.\d+)*", r"[a-z]+@[a-z]+\.(com|org)", r"(?s:.)*", r"[😀😂]", r"\p{Letter}+",
    r"\p{Greek}{2,4}", r"[^\p{L}]", r"(a|aa){0,50}", r"(a{0,5}){0,20}", r"[a-z]{0,30}[a-z]{0,30}",
    r"\w{0,8}x|\w{0,9}y|\w{0,10}z", r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?",
    r"\{\"version\": \"\d+(\.\d+)*\", \"stable\": (true|false)\}", r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
    r"(?i)hello world", r"a{3}b{2,}c?", r"[^\n]*\n", r"(?:ab|cd)+", r"\\[nrt\"]", r"[\x00-\x1f]",
    r"(?=x)", r"a(", r"[z-a]", r"\bword\b", r"(a)\1", r"x{100000}", r"(((((a)))))",
]

GBNF = {
    "json": r'''root ::= value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4} )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws ::= [ \t\n]*
''',
    "list": 'root ::= item ("," item)*\nitem ::= [a-z]+ | "[" root? "]"\n',
    "special": 'root ::= [^<]* <|im_end|>\n',
    "counted": 'root ::= ("ab" | "a" | "b"){2,40} "." [0-9]{1,3}\n',
    "comment": '# a comment\nroot ::= "x" # trailing\n  | "y"\n',
    "token-bracket": 'root ::= <[> ((("a")))\n',
    "postfix": 'root ::= "a"???*+\n',
}

TEMPLATE_REQUESTS = {
    "outline.fw": [
        'outline(sections: [section(id: "1", children: [section(id: "1.1")]), section(id: "2")])',
        "outline(sections: [])",
        '{"structure": "outline", "args": {"sections": []}}',
    ],
    "reference_lookup.fw": ['reference_lookup(topics: 1..20, ids: {"1", "1.1", "2.3"})'],
    "tool_call.fw": [
        'tool_call(tools: [tool(name: "get_weather", params: [param(name: "city", value: string),'
        ' param(name: "unit", value: enum(values: {"celsius", "fahrenheit"}))])])',
        'tool_call(tools: [tool(name: "x", params: [param(name: "p", value: pattern(re: /[a-z]{2,5}/))])])',
    ],
}

BUILTIN_REQUESTS = [
    'regex(pattern: /[0-9]{2,4}/)',
    'gbnf(grammar: "root ::= \\"[\\" root? \\"]\\"")',
    'json_schema(schema: "{\\"type\\":\\"string\\",\\"pattern\\":\\"^[😀😂]$\\"}")',
]


def byte_level_chars():
    """GPT-2's bytes_to_unicode."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, n = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + n)
            n += 1
    return table


def tokenizers():
    chars = byte_level_chars()
    vocab = {chars[b]: b for b in range(256)}
    for i, w in enumerate(["Ġt", "he", "Ġthe", "in", "ing", "Ġ{\"", "\":"]):
        vocab[w] = 256 + i
    merges = ["Ġ t", "h e", "Ġt he", "i n", "in g"]
    added = [{"id": 263, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True},
             {"id": 264, "content": "<tool_call>", "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": False}]
    bpe = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": {"type": "NFC"},
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                     "vocab": vocab, "merges": merges}}
    yield "byte-level-bpe", json.dumps(bpe), '{"eos_token": "<|endoftext|>"}'
    sp_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        sp_vocab[f"<0x{b:02X}>"] = 3 + b
    for i, w in enumerate(["▁", "▁the", "▁a", "he", "llo", "▁hello"]):
        sp_vocab[w] = 259 + i
    sp = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                            "normalized": False, "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])],
          "normalizer": None,
          "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
          "post_processor": None,
          "decoder": {"type": "Sequence", "decoders": [
              {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
              {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
          "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                    "vocab": sp_vocab, "merges": ["▁ t", "h e", "▁t he", "l l", "ll o", "he llo", "▁ hello"]}}
    yield "sentencepiece-byte-fallback", json.dumps(sp), '{"eos_token": {"content": "</s>"}}'
    huge = json.loads(json.dumps(bpe))
    huge["added_tokens"][0]["id"] = 4294967295
    yield "huge-added-id", json.dumps(huge), ""
    dup = json.loads(json.dumps(bpe))
    dup["model"]["vocab"]["Ġthe"] = 5
    yield "duplicate-model-id", json.dumps(dup), ""
    missing = json.loads(json.dumps(bpe))
    del missing["model"]["vocab"]
    yield "missing-vocab", json.dumps(missing), ""
    yield "wordpiece-decoder", json.dumps({**bpe, "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True}}), ""
    yield "truncated", json.dumps(bpe)[:300], ""


def main():
    for i, r in enumerate(REGEXES):
        write("regex", f"{i:02}", r)
    tarball = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                           ROOT.parent.parent / "shared/data/jsonschemabench/maskbench-data.tar.gz")
    if not tarball.exists():
        tarball = pathlib.Path("/work/shared/data/jsonschemabench/maskbench-data.tar.gz")
    picked = []
    with tarfile.open(tarball) as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith(".json")),
                         key=lambda m: m.name)
        for m in random.Random(18).sample(members, 400):
            doc = json.load(tar.extractfile(m))
            text = json.dumps(doc["schema"], ensure_ascii=False)
            if len(text) < 8000:
                picked.append((pathlib.Path(m.name).stem, text))
            if len(picked) == 60:
                break
    for name, text in picked:
        write("json_schema", name, text)
    write("json_schema", "astral-pattern", json.dumps({"type": "string", "pattern": "^[😀😂]$"}, ensure_ascii=False))
    write("json_schema", "property-pattern", json.dumps({"type": "string", "pattern": "^\\p{Greek}+$"}))
    for name, text in GBNF.items():
        write("gbnf", name, text)
    for p in sorted((ROOT / "tests/data/cli").glob("*.gbnf")):
        write("gbnf", p.stem, p.read_text())
    for p in sorted((ROOT / "tests/data/cli").glob("tools-*.json")):
        write("tags", p.stem, p.read_text())
    for p in sorted((ROOT / "tests/data/bfcl-sample").glob("BFCL_v4_*.json")):
        first = json.loads(p.read_text().splitlines()[0]) if p.suffix == ".json" else None
        if isinstance(first, dict) and "function" in first:
            fmt = "llama31" if "python" in p.stem else "qwen"
            write("tags", p.stem, json.dumps({"format": fmt, "tools": first["function"], "forbid": ["<think>"]}))
    write("tags", "harmony", json.dumps({"format": "harmony", "require_call": True, "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
            "s": {"type": "string", "pattern": "^[😀😂]$"}}, "required": ["s"]}}}]}, ensure_ascii=False))
    for p in sorted((ROOT / "templates").glob("*.fw")):
        for i, request in enumerate(TEMPLATE_REQUESTS.get(p.name, [])):
            write("templates", f"{p.stem}-{i}", p.read_text(), request)
    for i, request in enumerate(BUILTIN_REQUESTS):
        write("templates", f"builtin-{i}", "", request)
    write("templates", "reply", (ROOT / "tests/data/cli/reply.fw").read_text(), "reply")
    for name, text, config in tokenizers():
        write("tokenizer", name, text, config, "Hello the world ä {\"a\": 1}")
    rng = random.Random(18)
    d = CORPUS / "matcher"
    d.mkdir(parents=True, exist_ok=True)
    for i in range(16):
        (d / f"seed-random-{i:02}").write_bytes(bytes(rng.randrange(1, 256) for _ in range(rng.randrange(16, 512))))
    # The limits target reads its limit, backend and generated input from the bytes alone.
    rng = random.Random(19)
    d = CORPUS / "limits"
    d.mkdir(parents=True, exist_ok=True)
    for i in range(16):
        (d / f"seed-random-{i:02}").write_bytes(bytes(rng.randrange(1, 256) for _ in range(rng.randrange(16, 512))))


main()
