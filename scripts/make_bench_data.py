#!/usr/bin/env python3
"""Builds the committed data of `cargo bench --bench peers --features peers` (benches/data/)
from shared/data.

Deterministic: the same inputs give the same files. Run from the repository root:

    python3 scripts/make_bench_data.py /path/to/shared/data

Writes
  benches/data/jme.jsonl        every JME_* file of MaskBench: {"id", "schema", "data"}
  benches/data/maskbench.jsonl  a sample of MaskBench schemas beyond tests/data/maskbench-sample,
                                each with its first valid instance: {"id", "schema", "data"}
  benches/data/bfcl.jsonl       BFCL v4 function lists with reference calls built from
                                possible_answer (first acceptable value of each argument other
                                than "", which means "may be left out"; left out if it has none): {"id",
                                "functions", "calls": [{"name", "arguments"}]}
  benches/data/words.txt        the word list for generated titles and summaries: lower-case
                                words of the BFCL function descriptions
"""

import json
import os
import re
import sys
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "benches", "data")
EXTRA_MASKBENCH = 150
MAX_SCHEMA_BYTES = 12_000
BFCL_CATEGORIES = {"simple_python": 40, "multiple": 30, "parallel": 20, "parallel_multiple": 10}
# Cases whose reference call is not valid for its own schema (none so far).
BFCL_EXCLUDE = set()


def dump(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")


def maskbench(shared):
    sample = set(os.listdir(os.path.join(ROOT, "tests", "data", "maskbench-sample")))
    files = {}
    with tarfile.open(os.path.join(shared, "jsonschemabench", "maskbench-data.tar.gz")) as tar:
        for m in tar.getmembers():
            if m.isfile() and m.name.endswith(".json"):
                files[os.path.basename(m.name)] = tar.extractfile(m).read()
    jme, rest = [], []
    for name in sorted(files):
        doc = json.loads(files[name])
        valid = [t["data"] for t in doc.get("tests", []) if t.get("valid")]
        if not valid:
            continue
        row = {"id": name[:-5], "schema": doc["schema"], "data": valid[0]}
        if name.startswith("JME_"):
            jme.append(row)
        elif name not in sample and len(files[name]) <= MAX_SCHEMA_BYTES and not name.startswith("BFCL_"):
            rest.append(row)
    step = len(rest) / EXTRA_MASKBENCH
    picked = [rest[int(i * step)] for i in range(EXTRA_MASKBENCH)]
    dump(os.path.join(OUT, "jme.jsonl"), jme)
    dump(os.path.join(OUT, "maskbench.jsonl"), picked)
    return len(jme), len(picked)


def unwrap(value):
    """A possible-answer value: dicts nest their own lists of acceptable values."""
    if isinstance(value, dict):
        return {k: first_value(v) for k, v in value.items() if first_value(v) != ""}
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    return value


def first_value(options):
    """The first acceptable value that is not "" (BFCL's "may be left out"), else ""."""
    for o in options:
        if o != "":
            return unwrap(o)
    return ""


def bfcl(shared):
    rows, words = [], set()
    for cat, n in BFCL_CATEGORIES.items():
        with open(os.path.join(shared, "bfcl-v4", f"BFCL_v4_{cat}.json")) as f:
            questions = [json.loads(l) for l in f]
        with open(os.path.join(shared, "bfcl-v4", "possible_answer", f"BFCL_v4_{cat}.json")) as f:
            answers = {a["id"]: a for a in map(json.loads, f)}
        step = len(questions) / n
        for i in range(n):
            q = questions[int(i * step)]
            if q["id"] in BFCL_EXCLUDE:
                continue
            calls = []
            for call in answers[q["id"]]["ground_truth"]:
                (name, args), = call.items()
                arguments = {k: first_value(v) for k, v in args.items() if first_value(v) != ""}
                calls.append({"name": name, "arguments": arguments})
            rows.append({"id": q["id"], "functions": q["function"], "calls": calls})
            for fn in q["function"]:
                words.update(re.findall(r"\b[a-z]{3,12}\b", fn.get("description", "")))
    dump(os.path.join(OUT, "bfcl.jsonl"), rows)
    with open(os.path.join(OUT, "words.txt"), "w") as f:
        f.write("\n".join(sorted(words)) + "\n")
    return len(rows), len(words)


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data"
    os.makedirs(OUT, exist_ok=True)
    print("jme %d, maskbench extra %d" % maskbench(shared))
    print("bfcl %d cases, %d words" % bfcl(shared))


if __name__ == "__main__":
    main()
