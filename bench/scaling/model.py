#!/usr/bin/env python3
"""An alpha-beta model of the collectives data-parallel training uses, fitted
to bench/collectives on this machine, checked against what can be measured
here, and used to predict step times to 1,024 nodes x 4 GPUs from published
NVLink and InfiniBand figures.

    model.py --collectives DIR [--train TRAIN.json] --markdown OUT.md --svg OUT.svg

DIR holds bench/collectives' collectives_np2.json (and collectives_np4.json
for the 4-rank check); TRAIN.json is bench/train's summary (for the step
time check). Only the Python standard library is used.

Cost of moving n bytes among p ranks, alpha = latency per step, beta =
seconds per byte on one link (1 / its bandwidth):

    ring all-reduce       2(p-1) alpha + 2(p-1)/p n beta
    tree all-reduce       2 ceil(log2 p) alpha + 2 n beta   (pipelined double binary tree, as NCCL's)
    recursive doubling    ceil(log2 p) (alpha + n beta)
    ring reduce-scatter   (p-1) alpha + (p-1)/p n beta      (and all-gather alike)
    recursive halving     ceil(log2 p) alpha + (p-1)/p n beta   (reduce-scatter; all-gather alike)
    hierarchical          reduce-scatter in the node, all-reduce of n/g across nodes (ring or
                          tree, whichever is faster), all-gather in the node

A training step runs forward, then backward while the gradient buckets are
all-reduced in the order their gradients are ready; what the backward pass
does not hide is exposed, and the last bucket is always exposed.
"""
import argparse
import json
import math
import os
import sys

MiB = 1 << 20

# ---------------------------------------------------------------- cluster
# Published figures, per GPU, with the sources' numbers rounded down to
# what collectives reach in practice.
CLUSTER = {
    "gpus_per_node": 4,
    # NVLink 4 (H100 SXM): 900 GB/s bidirectional per GPU, 450 GB/s each
    # way; nccl-tests all-reduce reaches about 360 GB/s bus bandwidth.
    "nvlink_beta": 1 / 360e9,
    "nvlink_alpha": 1.0e-6,
    # InfiniBand NDR, one 400 Gb/s port per GPU (50 GB/s each way); about
    # 46 GB/s reached; a few microseconds per hop through NIC and switch.
    "ib_beta": 1 / 46e9,
    "ib_alpha": 3.0e-6,
    # H100 SXM: 989 TFLOP/s dense bf16, 67 TFLOP/s fp32; 3.35 TB/s HBM3.
    "bf16_flops": 989e12,
    "fp32_flops": 67e12,
    "hbm_bytes_per_s": 3.35e12,
    # Launching one CUDA kernel costs a few microseconds of host time: the
    # floor of a step of small layers.
    "kernel_seconds": 4e-6,
}

# Workloads. W1 and W2 are bench/train's (batch 64 per rank, fp32); the
# 1-billion-parameter model is a transformer trained in bf16 with fp32
# gradients, 8 sequences of 2,048 tokens per GPU.
WORKLOADS = {
    "W1": {"params": 1_863_690, "flops": 6 * 1_863_690 * 64, "precision": "fp32", "kernels": 30},
    "W2": {"params": 1_199_882, "flops": 3 * 24.0e6 * 64, "precision": "fp32", "kernels": 50},
    "1B": {"params": 1_000_000_000, "flops": 6 * 1e9 * 8 * 2048, "precision": "bf16", "kernels": 2000,
           "mfu": 0.45},
}
BUCKET_BYTES = 25 * MiB  # DistributedModel's and PyTorch DDP's bucket_cap_mb


# ---------------------------------------------------------------- algorithms
def ring_allreduce(p, n, alpha, beta):
    return 0.0 if p == 1 else 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta


def tree_allreduce(p, n, alpha, beta):
    return 0.0 if p == 1 else 2 * math.ceil(math.log2(p)) * alpha + 2 * n * beta


def recursive_doubling(p, n, alpha, beta):
    return 0.0 if p == 1 else math.ceil(math.log2(p)) * (alpha + n * beta)


def ring_reduce_scatter(p, n, alpha, beta):
    return 0.0 if p == 1 else (p - 1) * alpha + (p - 1) / p * n * beta


def halving_reduce_scatter(p, n, alpha, beta):
    # Recursive halving (MPI's choice for many ranks; NCCL's PAT is alike).
    return 0.0 if p == 1 else math.ceil(math.log2(p)) * alpha + (p - 1) / p * n * beta


def hierarchical_allreduce(nodes, n, c=CLUSTER):
    g = c["gpus_per_node"]
    inside = 2 * ring_reduce_scatter(g, n, c["nvlink_alpha"], c["nvlink_beta"])
    part = n / g
    across = min(ring_allreduce(nodes, part, c["ib_alpha"], c["ib_beta"]),
                 tree_allreduce(nodes, part, c["ib_alpha"], c["ib_beta"]))
    return inside + across


def hierarchical_reduce_scatter(nodes, n, c=CLUSTER):
    # In the node first (NVLink), then the node's share across nodes.
    g = c["gpus_per_node"]
    return (ring_reduce_scatter(g, n, c["nvlink_alpha"], c["nvlink_beta"]) +
            min(ring_reduce_scatter(nodes, n / g, c["ib_alpha"], c["ib_beta"]),
                halving_reduce_scatter(nodes, n / g, c["ib_alpha"], c["ib_beta"])))


# ---------------------------------------------------------------- steps
def buckets(total_bytes):
    full, rest = divmod(total_bytes, BUCKET_BYTES)
    sizes = [BUCKET_BYTES] * int(full) + ([rest] if rest else [])
    return sizes or [0]


def overlapped(compute_backward, bucket_times):
    """Communication left after the backward pass hides what it can; the
    last bucket's gradients come last, so its reduction is always exposed."""
    return max(sum(bucket_times) - compute_backward, bucket_times[-1])


def gpu_compute(w, c=CLUSTER):
    rate = c["bf16_flops"] * w.get("mfu", 0.45) if w["precision"] == "bf16" else c["fp32_flops"] * 0.5
    return max(w["flops"] / rate, w["kernels"] * c["kernel_seconds"])


def adam_seconds(params, c=CLUSTER):
    # Adam reads and writes parameter, gradient and two moments (fp32).
    return params * 4 * 4 * 2 / c["hbm_bytes_per_s"]


def gpu_step(w, nodes, zero2=False, c=CLUSTER):
    compute = gpu_compute(w, c)
    backward = compute * 2 / 3
    grad_bytes = w["params"] * 4  # fp32 gradients (bf16 training keeps fp32 masters)
    p = nodes * c["gpus_per_node"]
    if not zero2:
        comm = [hierarchical_allreduce(nodes, b, c) for b in buckets(grad_bytes)]
        return compute + overlapped(backward, comm) + adam_seconds(w["params"], c)
    comm = [hierarchical_reduce_scatter(nodes, b, c) for b in buckets(grad_bytes)]
    # Stage 2 gathers the updated parameters after the step, before the next
    # forward pass: exposed (the same volume as a reduce-scatter).
    gather = sum(hierarchical_reduce_scatter(nodes, b, c) for b in buckets(grad_bytes))
    return compute + overlapped(backward, comm) + adam_seconds(w["params"] / p, c) + gather


# ---------------------------------------------------------------- fit
def load_rows(path, candidate):
    with open(path) as f:
        data = json.load(f)
    rows = {r["bytes"]: r["median_us"] * 1e-6 for r in data["results"]
            if r["op"] == "all_reduce" and r["candidate"] == candidate}
    return data, rows


def fit(rows, p):
    """alpha from the smallest message, beta (per byte, bus convention) from
    the two largest: the slope where bandwidth dominates."""
    sizes = sorted(rows)
    alpha = rows[sizes[0]]
    big, bigger = sizes[-2], sizes[-1]
    slope = (rows[bigger] - rows[big]) / (bigger - big)
    beta = slope / (2 * (p - 1) / p)
    return alpha, beta


def predict_local(p, n, alpha, beta, cores):
    # More ranks than cores share them: the time stretches by p / cores.
    return (alpha + 2 * (p - 1) / p * n * beta) * max(1.0, p / cores)


# ---------------------------------------------------------------- output
def svg_plot(series, path):
    width, height, left, right, top, bottom = 720, 420, 70, 170, 30, 50
    xs = [0, 10]  # log2 nodes
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x):
        return left + (x - xs[0]) / (xs[1] - xs[0]) * plot_w

    def py(y):
        return top + (1 - y) * plot_h

    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14">Predicted scaling efficiency, nodes x 4 GPUs '
           f'(NVLink 4 + InfiniBand NDR)</text>']
    for k in range(0, 11):
        x = px(k)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{2 ** k}</text>')
    for k in range(0, 11):
        y = py(k / 10)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{k * 10}%</text>')
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 10}" text-anchor="middle">nodes</text>')
    out.append(f'<text x="16" y="{top + plot_h / 2}" transform="rotate(-90 16 {top + plot_h / 2})" '
               f'text-anchor="middle">one GPU without communication / the predicted step</text>')
    for i, (name, points) in enumerate(series):
        colour = colours[i % len(colours)]
        path_d = " ".join(f'{"M" if j == 0 else "L"}{px(math.log2(n)):.1f},{py(e):.1f}'
                          for j, (n, e) in enumerate(points))
        out.append(f'<path d="{path_d}" fill="none" stroke="{colour}" stroke-width="2"/>')
        y = top + 20 + 18 * i
        out.append(f'<line x1="{left + plot_w + 12}" y1="{y}" x2="{left + plot_w + 32}" y2="{y}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{left + plot_w + 38}" y="{y + 4}">{name}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collectives", required=True, help="directory of bench/collectives JSON files")
    parser.add_argument("--train", help="bench/train's train.json")
    parser.add_argument("--markdown", required=True)
    parser.add_argument("--svg", required=True)
    args = parser.parse_args()

    md = []
    np2 = os.path.join(args.collectives, "collectives_np2.json")
    data, ours = load_rows(np2, "accelerate")
    _, mpi = load_rows(np2, "mpi")
    cores = int(next((v for k, v in data["system"].items() if k == "cores online"), 2)) \
        if isinstance(data["system"], dict) else 2
    a_ours, b_ours = fit(ours, 2)
    a_mpi, b_mpi = fit(mpi, 2)
    md.append("#### Fitted on this machine (2 ranks, bench/collectives)\n")
    md.append("| all-reduce | alpha (us) | bus bandwidth 1/beta (GB/s) |")
    md.append("|---|---:|---:|")
    md.append(f"| ours (shared memory) | {a_ours * 1e6:.2f} | {1 / b_ours / 1e9:.2f} |")
    md.append(f"| raw MPI_Allreduce | {a_mpi * 1e6:.2f} | {1 / b_mpi / 1e9:.2f} |")
    md.append("")

    md.append("#### Checks against measurements\n")
    md.append("| point | predicted | measured | predicted / measured |")
    md.append("|---|---:|---:|---:|")
    for n in sorted(ours):
        if n >= MiB:
            pred = predict_local(2, n, a_ours, b_ours, cores)
            md.append(f"| all-reduce {n // MiB} MiB, 2 ranks (fitted points and between) | {pred * 1e6:.0f} us | "
                      f"{ours[n] * 1e6:.0f} us | {pred / ours[n]:.2f} |")
    np4 = os.path.join(args.collectives, "collectives_np4.json")
    if os.path.exists(np4):
        _, ours4 = load_rows(np4, "accelerate")
        for n in sorted(ours4):
            if n >= MiB:
                pred = predict_local(4, n, a_ours, b_ours, cores)
                md.append(f"| all-reduce {n // MiB} MiB, 4 ranks on {cores} cores | {pred * 1e6:.0f} us | "
                          f"{ours4[n] * 1e6:.0f} us | {pred / ours4[n]:.2f} |")
    if args.train:
        with open(args.train) as f:
            train = json.load(f)
        rows = {(r["workload"], r["impl"]): r for r in train["rows"]}
        for name in ("W1", "W2"):
            ceiling, measured = rows.get((name, "ceiling")), rows.get((name, "ours"))
            if not ceiling or not measured:
                continue
            # The 1-rank point is the ceiling itself: the same compute with no
            # communication. At 2 ranks the shared-memory all-reduce runs
            # inside the gradient hooks, not overlapped.
            grad = WORKLOADS[name]["params"] * 4
            comm = sum(predict_local(2, b, a_ours, b_ours, cores) for b in buckets(grad))
            pred = ceiling["step_ms"] * 1e-3 + comm
            md.append(f"| {name} step, 2 ranks (ceiling {ceiling['step_ms']:.2f} ms + all-reduce of "
                      f"{grad / 1e6:.2f} MB) | {pred * 1e3:.2f} ms | {measured['step_ms']:.2f} ms | "
                      f"{pred / (measured['step_ms'] * 1e-3):.2f} |")
    md.append("")

    nodes = [2 ** k for k in range(11)]
    md.append("#### Predicted step time, nodes x 4 GPUs (NVLink 4 in the node, InfiniBand NDR between)\n")
    header = "| workload | " + " | ".join(str(n) for n in nodes) + " |"
    md.append(header)
    md.append("|---|" + "---:|" * len(nodes))
    series = []
    for label, name, zero2 in (("W1, DDP", "W1", False), ("W2, DDP", "W2", False),
                               ("1B, DDP", "1B", False), ("1B, ZeRO stage 2", "1B", True)):
        w = WORKLOADS[name]
        times = [gpu_step(w, n, zero2) for n in nodes]
        alone = gpu_compute(w) + adam_seconds(w["params"] / (CLUSTER["gpus_per_node"] if zero2 else 1))
        md.append(f"| {label} | " + " | ".join(f"{t * 1e3:.2f} ms" for t in times) + " |")
        series.append((label, [(n, min(1.0, alone / t)) for n, t in zip(nodes, times)]))
    md.append("")
    md.append("Scaling efficiency (the step of one GPU with no communication / the predicted step):\n")
    md.append(header)
    md.append("|---|" + "---:|" * len(nodes))
    for label, points in series:
        md.append(f"| {label} | " + " | ".join(f"{e:.2f}" for _, e in points) + " |")
    md.append("")
    with open(args.markdown, "w") as f:
        f.write("\n".join(md) + "\n")
    svg_plot(series, args.svg)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
