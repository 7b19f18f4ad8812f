#!/usr/bin/env python3
"""xgrammar on the JSON-schema workloads of `cargo bench --bench peers --features peers`
(optional).

Only runs when `import xgrammar` works (its install pulls torch, so it is never required) and
`tokenizers` (the Python package) is installed. Prints rows in the same layout as the Rust
bench's table for json-mode-eval and maskbench: compile p50/p99, mask p50/p99/max, rejected.

    python3 scripts/bench_xgrammar.py [--quick] [--tokenizer data/tokenizers/qwen3/tokenizer.json.gz]
"""

import argparse
import gzip
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_cases(quick):
    def spread(rows, n):
        if len(rows) <= n:
            return rows
        step = len(rows) / n
        return [rows[int(i * step)] for i in range(n)]

    def jsonl(name):
        with open(os.path.join(ROOT, "benches", "data", name)) as f:
            return [json.loads(l) for l in f]

    jme = jsonl("jme.jsonl")
    sample_dir = os.path.join(ROOT, "tests", "data", "maskbench-sample")
    mb = []
    for name in sorted(os.listdir(sample_dir)):
        if not name.endswith(".json") or name == "expected.json":
            continue
        with open(os.path.join(sample_dir, name)) as f:
            doc = json.load(f)
        valid = [t["data"] for t in doc.get("tests", []) if t.get("valid")]
        if valid:
            mb.append({"id": name[:-5], "schema": doc["schema"], "data": valid[0]})
    mb += jsonl("maskbench.jsonl")
    return [
        ("json-mode-eval", spread(jme, 12) if quick else jme),
        ("maskbench", spread(mb, 24) if quick else mb),
    ]


def q(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[round((len(xs) - 1) * p)]


def fmt(us):
    if us is None:
        return "—"
    if us >= 1e6:
        return "%.2f s" % (us / 1e6)
    if us >= 1e3:
        return "%.2f ms" % (us / 1e3)
    return "%.1f µs" % us


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "data/tokenizers/qwen3/tokenizer.json.gz"))
    args = ap.parse_args()
    try:
        import xgrammar as xgr
        from tokenizers import Tokenizer
    except ImportError as e:
        print("xgrammar not available (%s): skipped" % e)
        return 0
    raw = open(args.tokenizer, "rb").read()
    if args.tokenizer.endswith(".gz"):
        raw = gzip.decompress(raw)
    tok = Tokenizer.from_str(raw.decode())
    info = xgr.TokenizerInfo.from_huggingface(tok)  # needs a transformers-compatible tokenizer
    compiler = xgr.GrammarCompiler(info, max_threads=1)
    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
    for name, cases in load_cases(args.quick):
        compile_us, mask_us, rejected, unsupported = [], [], 0, 0
        for case in cases:
            text = json.dumps(case["data"], ensure_ascii=False, separators=(",", ":"))
            t0 = time.perf_counter()
            try:
                compiled = compiler.compile_json_schema(json.dumps(case["schema"]), any_whitespace=False)
            except Exception:
                unsupported += 1
                continue
            m = xgr.GrammarMatcher(compiled)
            compile_us.append((time.perf_counter() - t0) * 1e6)
            ok = True
            for t in tok.encode(text, add_special_tokens=False).ids:
                t0 = time.perf_counter()
                m.fill_next_token_bitmask(bitmask)
                mask_us.append((time.perf_counter() - t0) * 1e6)
                if not m.accept_token(t):
                    ok = False
                    break
            rejected += not ok
        print("| %s | xgrammar | %d / %d / %d | %s | %s | — | %s | %s | %s |" % (
            name, len(compile_us) - rejected, unsupported, rejected,
            fmt(q(compile_us, .5)), fmt(q(compile_us, .99)),
            fmt(q(mask_us, .5)), fmt(q(mask_us, .99)), fmt(q(mask_us, 1.0))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
