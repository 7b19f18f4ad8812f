#!/usr/bin/env python3
"""Compare two `formwork maskbench --json` outputs (usage: maskbench_compare.py BEFORE AFTER):
per-file statuses and mask counts must be identical for a change that moves code only; the
compile, time-to-first-mask and mask times are summarised side by side."""
import json, sys

def load(path):
    files, summary = {}, None
    for line in open(path):
        line = line.strip()
        if not line.startswith('{'):
            continue
        o = json.loads(line)
        if 'file' in o:
            files[o['file']] = o
        else:
            summary = o
    return files, summary

def q(xs, p):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return float('nan')
    return xs[min(len(xs) - 1, int(p * len(xs)))]

a, sa = load(sys.argv[1])
b, sb = load(sys.argv[2])
assert a.keys() == b.keys(), 'different file sets'
status_diff = [f for f in a if a[f]['status'] != b[f]['status']]
mask_diff = [f for f in a if a[f]['masks'] != b[f]['masks']]
print(f'files {len(a)}; status differs: {len(status_diff)} {status_diff[:5]}; mask count differs: {len(mask_diff)} {mask_diff[:5]}')
both = [f for f in a if a[f]['status'] == 'passing' and b[f]['status'] == 'passing']
for key in ['compile_ms', 'ttfm_ms']:
    xa = [a[f][key] for f in both]; xb = [b[f][key] for f in both]
    print(f"{key:11} sum {sum(xa):9.1f} vs {sum(xb):9.1f} ({sum(xb)/sum(xa):.3f}x); " +
          ", ".join(f"p{int(p*1000)/10:g} {q(xa,p):.3f} vs {q(xb,p):.3f}" for p in (0.5, 0.9, 0.99, 0.999)) +
          f"; max {max(xa):.1f} vs {max(xb):.1f}")
for key in ['p50', 'p99', 'max']:
    xa = [a[f]['mask_us'][key] for f in both]; xb = [b[f]['mask_us'][key] for f in both]
    print(f"mask {key:4} per file: median {q(xa,.5):.2f} vs {q(xb,.5):.2f} µs, p99 {q(xa,.99):.1f} vs {q(xb,.99):.1f}, max {max(xa):.0f} vs {max(xb):.0f}")
for name, s in (('A', sa), ('B', sb)):
    print(f"summary {name}: {s['counts']}; masks {s['masks']}; mask_us {s['mask_us']}; over 1/5 ms {s['masks_over_1ms']}/{s['masks_over_5ms']}; compile_ms {s['compile_ms']}; {s.get('seconds', 0):.0f} s")
sys.exit(1 if status_diff or mask_diff else 0)
