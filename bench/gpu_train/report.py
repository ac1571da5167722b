"""Median samples/s per (workload, precision, batch) and side, and the ratio
of our C++ loop to Accelerate's Python loop, as a Markdown table."""
import collections
import json
import statistics
import sys

runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        runs[(r["workload"], r["precision"], r["batch"], r["side"])].append(r["samples_per_s"])
keys = sorted({k[:3] for k in runs}, key=lambda k: ({"W1": 0, "W2": 1, "T": 2}.get(k[0], 9), k[1], k[2]))
has_f0 = any(k[3] == "accelerate_foreach0" for k in runs)
head = "| workload | precision | batch | ours samples/s | Accelerate samples/s | ours ÷ Accelerate |"
rule = "|---|---|---|---|---|---|"
if has_f0:
    head += " Accelerate, per-parameter AdamW | ours ÷ that |"
    rule += "---|---|"
print(head)
print(rule)
for k in keys:
    med = {s: statistics.median(runs[k + (s,)]) for s in ("ours", "accelerate", "accelerate_foreach0") if runs.get(k + (s,))}
    ours, peer = med.get("ours"), med.get("accelerate")
    row = f"| {k[0]} | {k[1]} | {k[2]} | {ours or float('nan'):.0f} | {peer or float('nan'):.0f} | "
    row += f"{ours / peer:.2f} |" if ours and peer else "– |"
    if has_f0:
        f0 = med.get("accelerate_foreach0")
        row += f" {f0:.0f} | {ours / f0:.2f} |" if ours and f0 else " – | – |"
    print(row)
counts = {len(v) for v in runs.values()}
print(f"\nmedian of {'/'.join(map(str, sorted(counts)))} run(s) per cell")
