#!/usr/bin/env python3
"""What a decoding step costs from Python, measured (README, section "Python").

1. Per-step overhead: `fill_next_token_bitmask` + `apply_token_bitmask_inplace` called from
   Python (numpy and torch CPU arrays) against the same Rust calls timed in a Rust loop on the
   same matcher and buffers (`formwork._native._time_native_step`), at every step of the JSON
   Schema workload, warm (repeated at the state).
2. Batch fill at 1 / 16 / 64 rows: `fill_next_token_bitmasks` (worker threads, GIL released)
   against the same `BatchFiller` call timed in Rust, and a Python loop of single fills.
3. Side by side with xgrammar's and llguidance's Python packages where they are installed, on
   the same JSON schemas (json-mode-eval, as `cargo bench --bench peers`), tokenizer (the
   shipped Qwen3, through transformers) and torch CPU tensors: compile, and per step the first
   fill (as a real decode meets it), the apply and the accept.

    python python/benches/overhead.py [--quick]

Needs numpy; torch, transformers, xgrammar and llguidance are optional (what is missing is
printed and skipped).
"""

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import formwork
from formwork import _native

ROOT = Path(__file__).resolve().parents[2]
V = 151_936


def load_jme(quick):
    rows = [json.loads(line) for line in open(ROOT / "benches" / "data" / "jme.jsonl")]
    if quick:
        step = len(rows) / 12
        rows = [rows[int(i * step)] for i in range(12)]
    return rows


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round((len(xs) - 1) * p))] if xs else float("nan")


def us(ns):
    return f"{ns / 1e3:.1f} µs" if ns < 1e6 else f"{ns / 1e6:.2f} ms"


def timed(fn, n, repeats=1):
    """Mean ns per call over `n` calls; with `repeats`, the median of that many such means
    (the host is shared: single runs catch other tenants' bursts)."""
    means = []
    for _ in range(repeats):
        t = time.perf_counter_ns()
        for _ in range(n):
            fn()
        means.append((time.perf_counter_ns() - t) / n)
    return statistics.median(means)


def text_of(case):
    return json.dumps(case["data"], ensure_ascii=False, separators=(",", ":"))


def per_step_overhead(info, compiler, cases, torch):
    rows = {k: [] for k in ("py_fill_np", "py_fill_t", "rs_fill", "py_apply_np", "py_apply_t", "rs_apply")}
    bm_np = formwork.allocate_token_bitmask(1, V, backend="numpy")
    logits_np = np.zeros((1, V), dtype=np.float32)
    bm_t = formwork.allocate_token_bitmask(1, V, backend="torch") if torch else None
    logits_t = torch.zeros((1, V), dtype=torch.float32) if torch else None
    # Per state: the least of 5 means of 4 calls, Python and Rust alike: the host is shared,
    # and a mean that met a preemption says nothing about either side.
    n, reps = 4, 5
    for case in cases:
        try:
            compiled = compiler.compile_json_schema(case["schema"], any_whitespace=False)
        except formwork.CompileError:
            continue
        m = formwork.GrammarMatcher(compiled)
        for token in info.encode(text_of(case)):
            for _ in range(3):  # the first walks fill the caches: what follows is warm
                m.fill_next_token_bitmask(bm_np)
            native = [_native._time_native_step(m, logits_np, bm_np, n) for _ in range(reps)]
            rows["rs_fill"].append(min(f for f, _ in native))
            rows["rs_apply"].append(min(a for _, a in native))
            least = lambda fn: min(timed(fn, n) for _ in range(reps))
            rows["py_fill_np"].append(least(lambda: m.fill_next_token_bitmask(bm_np)))
            rows["py_apply_np"].append(least(lambda: formwork.apply_token_bitmask_inplace(logits_np, bm_np)))
            if torch:
                rows["py_fill_t"].append(least(lambda: m.fill_next_token_bitmask(bm_t)))
                rows["py_apply_t"].append(least(lambda: formwork.apply_token_bitmask_inplace(logits_t, bm_t)))
            if not m.accept_token(token):
                break
    print(f"\n### Per step, warm, batch of 1, vocabulary {V} ({len(rows['rs_fill'])} steps of JSON-mode-eval)\n")
    print("| call | Python, numpy | Python, torch CPU | Rust alone | Python's share, numpy | Python's share, torch |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, np_key, t_key, rs_key in (("fill_next_token_bitmask", "py_fill_np", "py_fill_t", "rs_fill"),
                                         ("apply_token_bitmask_inplace (f32)", "py_apply_np", "py_apply_t", "rs_apply")):
        over_np = [a - b for a, b in zip(rows[np_key], rows[rs_key])]
        over_t = [a - b for a, b in zip(rows[t_key], rows[rs_key])] if torch else []
        cell = lambda xs: f"{us(q(xs, .5))} / {us(q(xs, .99))}" if xs else "—"
        print(f"| {name} | {cell(rows[np_key])} | {cell(rows[t_key])} | {cell(rows[rs_key])} | "
              f"{cell(over_np)} | {cell(over_t)} |")
    print("\n(cells: p50 / p99 over steps; each step the least of 5 means of 4 calls)")


def batch_fill(info, compiler, cases, peers):
    compiled = []
    for case in cases:
        try:
            compiled.append((compiler.compile_json_schema(case["schema"], any_whitespace=False), case))
        except formwork.CompileError:
            pass
    print("\n### Batch fill, warm (repeated at the same states), JSON-mode-eval matchers mid-output (median of 7 runs)\n")
    header = "| rows | formwork `fill_next_token_bitmasks` | Rust `BatchFiller` alone | Python loop of single fills |"
    sep = "| ---: | ---: | ---: | ---: |"
    if "xgrammar" in peers:
        header += " xgrammar `batch_fill_next_token_bitmask` |"
        sep += " ---: |"
    if "llguidance" in peers:
        header += " llguidance `fill_next_token_bitmask_par` |"
        sep += " ---: |"
    print(header)
    print(sep)
    for rows in (1, 16, 64):
        matchers, states = [], []
        for i in range(rows):
            c, case = compiled[i % len(compiled)]
            tokens = info.encode(text_of(case))
            k = (i * 7) % max(1, len(tokens))
            m = formwork.GrammarMatcher(c)
            for t in tokens[:k]:
                m.accept_token(t)
            matchers.append(m)
            states.append((case, tokens[:k]))
        bm = formwork.allocate_token_bitmask(rows, V, backend="numpy")
        formwork.fill_next_token_bitmasks(matchers, bm)
        n = max(5, 200 // rows)
        ours = timed(lambda: formwork.fill_next_token_bitmasks(matchers, bm), n, 7)
        rust = statistics.median(_native._time_native_batch(matchers, bm, os.cpu_count() or 1, n) for _ in range(7))

        def loop():
            for i, m in enumerate(matchers):
                m.fill_next_token_bitmask(bm, i)

        cells = [us(ours), us(rust), us(timed(loop, n, 7))]
        if "xgrammar" in peers:
            cells.append(us(peers["xgrammar"].batch(states, n)))
        if "llguidance" in peers:
            cells.append(us(peers["llguidance"].batch(states, n)))
        print(f"| {rows} | " + " | ".join(cells) + " |")


class Formwork:
    name = "formwork"

    def __init__(self, info, torch):
        self.info, self.torch = info, torch
        self.compiler = formwork.GrammarCompiler(info)

    def compile(self, schema):
        return formwork.GrammarMatcher(self.compiler.compile_json_schema(schema, any_whitespace=False))

    def bitmask(self):
        return formwork.allocate_token_bitmask(1, V, backend="torch")

    def fill(self, m, bm):
        m.fill_next_token_bitmask(bm)

    def apply(self, logits, bm):
        formwork.apply_token_bitmask_inplace(logits, bm)

    def accept(self, m, t):
        return m.accept_token(t)


class Xgrammar:
    name = "xgrammar"

    def __init__(self, hf_tokenizer):
        import xgrammar as xgr

        self.xgr = xgr
        self.info = xgr.TokenizerInfo.from_huggingface(hf_tokenizer, vocab_size=V)
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1)
        self.hf = hf_tokenizer

    def compile(self, schema):
        g = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))
        return self.xgr.GrammarMatcher(g)

    def bitmask(self):
        return self.xgr.allocate_token_bitmask(1, V)

    def fill(self, m, bm):
        m.fill_next_token_bitmask(bm)

    def apply(self, logits, bm):
        self.xgr.apply_token_bitmask_inplace(logits, bm)

    def accept(self, m, t):
        return m.accept_token(t)

    def batch(self, states, n):
        ms = []
        for case, tokens in states:
            m = self.compile(case["schema"])
            for t in tokens:
                m.accept_token(t)
            ms.append(m)
        bm = self.xgr.allocate_token_bitmask(len(ms), V)
        batcher = self.xgr.BatchGrammarMatcher()
        return timed(lambda: batcher.batch_fill_next_token_bitmask(ms, bm), n, 7)


class Llguidance:
    name = "llguidance"

    def __init__(self, hf_tokenizer):
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self.llg = llguidance
        self.tok = llguidance.hf.from_tokenizer(hf_tokenizer, n_vocab=V)
        self.executor = llguidance.LLExecutor()

    def compile(self, schema):
        grammar = self.llg.LLMatcher.grammar_from_json_schema(
            schema, overrides={"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
        )
        m = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return m

    def bitmask(self):
        return self.llg.torch.allocate_token_bitmask(1, V)

    def fill(self, m, bm):
        self.llg.torch.fill_next_token_bitmask(m, bm, 0)

    def apply(self, logits, bm):
        self.llg.torch.apply_token_bitmask_inplace(logits, bm)

    def accept(self, m, t):
        return m.consume_token(t) and not m.is_error()

    def batch(self, states, n):
        ms = []
        for case, tokens in states:
            m = self.compile(case["schema"])
            m.consume_tokens(tokens)
            ms.append(m)
        bm = self.llg.torch.allocate_token_bitmask(len(ms), V)
        pairs = [(m, i) for i, m in enumerate(ms)]
        return timed(lambda: self.llg.torch.fill_next_token_bitmask_par(self.executor, pairs, bm), n, 7)


def side_by_side(engines, cases, torch, encode, info_bytes):
    print("\n### Side by side from Python: JSON-mode-eval, Qwen3 (151,936), torch CPU tensors, one thread\n")
    print("| engine | ok / failed | compile p50 | compile p99 | fill p50 (first walk) | fill p99 | apply p50 | accept p50 | step p50 (fill + apply + accept) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    logits = torch.zeros((1, V), dtype=torch.float32)
    why = []
    for e in engines:
        comp, fill, apply, accept, step, ok, failed = [], [], [], [], [], 0, 0
        bm = e.bitmask()
        for case in cases:
            t0 = time.perf_counter_ns()
            try:
                m = e.compile(case["schema"])
            except Exception as err:
                failed += 1
                why.append(f"{e.name}: {case['id']}: does not compile: {str(err).splitlines()[0][:120]}")
                continue
            comp.append(time.perf_counter_ns() - t0)
            good = True
            for t in encode(text_of(case)):
                t0 = time.perf_counter_ns()
                e.fill(m, bm)
                t1 = time.perf_counter_ns()
                e.apply(logits, bm)
                t2 = time.perf_counter_ns()
                good = e.accept(m, t)
                t3 = time.perf_counter_ns()
                fill.append(t1 - t0)
                apply.append(t2 - t1)
                accept.append(t3 - t2)
                step.append(t3 - t0)
                if not good:
                    why.append(f"{e.name}: {case['id']}: rejects token {t} {repr(info_bytes(t))} of the instance")
                    break
            ok += good
            failed += not good
        print(f"| {e.name} | {ok} / {failed} | {us(q(comp, .5))} | {us(q(comp, .99))} | {us(q(fill, .5))} | "
              f"{us(q(fill, .99))} | {us(q(apply, .5))} | {us(q(accept, .5))} | {us(q(step, .5))} |")
    print()
    for line in why:
        print(f"- {line}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="12 schemas instead of 76")
    args = ap.parse_args()
    cases = load_jme(args.quick)
    info = formwork.TokenizerInfo.qwen3()
    compiler = formwork.GrammarCompiler(info)
    try:
        import torch
    except ImportError:
        torch = None
        print("torch: not installed (torch columns and the side-by-side skipped)")
    versions = [f"formwork {formwork.__version__}", f"python {sys.version.split()[0]}", f"numpy {np.__version__}"]
    for module in ("torch", "transformers", "xgrammar", "llguidance"):
        try:
            from importlib.metadata import version

            versions.append(f"{module} {version(module)}")
        except Exception:
            versions.append(f"{module}: not installed")
    print(", ".join(versions) + f"; {os.cpu_count()} cores")
    per_step_overhead(info, compiler, cases, torch)

    peers, notes = {}, []
    hf = None
    try:
        import transformers

        tmp = Path(tempfile.mkdtemp())
        qwen = ROOT / "data" / "tokenizers" / "qwen3"
        (tmp / "tokenizer.json").write_bytes(gzip.decompress((qwen / "tokenizer.json.gz").read_bytes()))
        shutil.copy(qwen / "tokenizer_config.json", tmp)
        hf = transformers.AutoTokenizer.from_pretrained(str(tmp))
    except Exception as e:  # the peers need a transformers tokenizer
        notes.append(f"transformers: {e}")
    for cls in (Xgrammar, Llguidance):
        if hf is None:
            break
        try:
            peers[cls.name] = cls(hf)
        except Exception as e:
            notes.append(f"{cls.name}: not available ({type(e).__name__}: {e})")
    batch_fill(info, compiler, cases, peers)
    if torch is not None:
        engines = [Formwork(info, torch)] + list(peers.values())
        side_by_side(engines, cases, torch, info.encode, info.token_bytes)
    for note in notes:
        print(f"- {note}")


if __name__ == "__main__":
    main()
