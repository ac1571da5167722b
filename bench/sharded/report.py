"""Medians of bench/sharded/run.sh's runs, as a Markdown table and JSON.

   report.py RUNS.jsonl OUT.json OUT.md

Ratios: samples/s against our DDP, optimizer state against our DDP's (the
target is 1/N + 5 %), and each side against PyTorch's same-stage peer (DDP
and stage 1 against Debian's PyTorch 1.13 DDP and ZeroRedundancyOptimizer;
stages 2 and 3 against PyTorch 2.x's FSDP with SHARD_GRAD_OP and FULL_SHARD,
"pytorch2", where run.sh had one). Runs without parameter_mb show a dash.
"""
import json
import statistics
import sys


def main():
    runs_path, json_path, md_path = sys.argv[1:4]
    runs = [json.loads(line) for line in open(runs_path) if line.strip()]
    sides = {}
    for run in runs:
        sides.setdefault((run["impl"], run["mode"]), []).append(run)
    fields = ["samples_per_s", "peak_rss_mb", "optimizer_state_mb", "gradient_mb_after_step",
              "gradient_mb_in_backward"]
    medians = {key: {f: statistics.median(r[f] for r in group) for f in fields} | {"rounds": len(group)}
               for key, group in sides.items()}
    for key, group in sides.items():
        held = [r["parameter_mb"] for r in group if "parameter_mb" in r]
        medians[key]["parameter_mb"] = statistics.median(held) if held else None
    ranks = runs[0]["ranks"] if runs else 0
    base = medians.get(("ours", "ddp"))
    peer = {("ours", "stage1"): ("pytorch", "zero1"), ("ours", "ddp"): ("pytorch", "ddp"),
            ("ours", "stage2"): ("pytorch2", "fsdp_grad_op"), ("ours", "stage3"): ("pytorch2", "fsdp_full")}
    lines = [f"{ranks} ranks, {runs[0]['parameters'] / 1e6:.1f} M parameters, Adam, "
             f"batch {runs[0]['batch_per_rank']} per rank; medians of {min(m['rounds'] for m in medians.values())} "
             "rounds", "",
             "| side | samples/s | ÷ our DDP | ÷ PyTorch same stage | peak RSS per rank (MB) | "
             "parameters per rank between steps (MB) | optimizer state per rank (MB) | state ÷ DDP's | whole gradients in backward, most (MB) | "
             "gradients kept after step (MB) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    order = [("ours", "ddp"), ("ours", "stage1"), ("ours", "stage2"), ("ours", "stage3"), ("pytorch", "ddp"),
             ("pytorch", "zero1"), ("pytorch2", "ddp"), ("pytorch2", "fsdp_grad_op"), ("pytorch2", "fsdp_full")]
    for key in order:
        if key not in medians:
            continue
        m = medians[key]
        vs_ddp = f"{m['samples_per_s'] / base['samples_per_s']:.2f}" if base else "–"
        vs_peer = "–"
        if key in peer and peer[key] in medians:
            vs_peer = f"{m['samples_per_s'] / medians[peer[key]]['samples_per_s']:.2f}"
        state = f"{m['optimizer_state_mb'] / base['optimizer_state_mb']:.3f}" if base else "–"
        held = f"{m['parameter_mb']:.1f}" if m["parameter_mb"] is not None else "–"
        lines.append(f"| {key[0]} {key[1]} | {m['samples_per_s']:.1f} | {vs_ddp} | {vs_peer} | "
                     f"{m['peak_rss_mb']:.0f} | {held} | {m['optimizer_state_mb']:.1f} | {state} | "
                     f"{m['gradient_mb_in_backward']:.1f} | {m['gradient_mb_after_step']:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(md_path, "w") as out:
        out.write(text)
    with open(json_path, "w") as out:
        json.dump({f"{k[0]} {k[1]}": v for k, v in medians.items()}, out, indent=1)


if __name__ == "__main__":
    main()
