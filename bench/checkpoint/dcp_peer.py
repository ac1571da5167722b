"""PyTorch's distributed checkpoint on bench_async_save's model, for comparison.

Started once per rank by run_async.sh with RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT set (env:// rendezvous on localhost, gloo). The same MLP, Adam,
batch and DDP as bench_async_save; per save, dcp.async_save (mode async) or
dcp.save (mode sync) of {"model", "optimizer"} state dicts, then the same
timed steps. Rank 0 prints one JSON object with the same fields (the slowest
rank's value per save or step, medians).
"""
import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn


def slowest(value):
    t = torch.tensor([float(value)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def every_rank(flag):
    t = torch.tensor([1 if flag else 0], dtype=torch.int32)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return t.item() == 1


def median(values):
    return statistics.median(values) if values else 0.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="async", choices=["sync", "async"])
    parser.add_argument("--dir", default="/tmp/accelerate_bench_dcp")
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--saves", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    layers = []
    for index in range(args.layers):
        layers.append(nn.Linear(args.width, args.width))
        if index + 1 < args.layers:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    ddp = nn.parallel.DistributedDataParallel(model)
    # A group of the checkpoint's own, as PyTorch advises for async_save: on
    # the default group its background collectives would interleave with the
    # training's and hang.
    checkpoint_group = dist.new_group(backend="gloo")
    optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-4)
    torch.manual_seed(100 + rank)
    x = torch.randn(args.batch, args.width)
    y = torch.randn(args.batch, args.width)

    def step():
        start = time.perf_counter()
        nn.functional.mse_loss(ddp(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
        return slowest(time.perf_counter() - start)

    for _ in range(2):
        step()
    state = [p.detach() for p in model.parameters()]
    for s in optimizer.state.values():
        state += [s["exp_avg"], s["exp_avg_sq"]]
    buffers = [torch.empty_like(t) for t in state]
    state_bytes = sum(t.numel() * t.element_size() for t in state)

    normal, copies, blocked, writing, waits = [], [], [], [], []
    for _ in range(args.steps):
        normal.append(step())
    for r in range(args.saves):
        dist.barrier()
        start = time.perf_counter()
        for b, t in zip(buffers, state):
            b.copy_(t)
        copies.append(slowest(time.perf_counter() - start))
        dist.barrier()
        start = time.perf_counter()
        state_dict = {"model": ddp.state_dict(), "optimizer": optimizer.state_dict()}
        path = f"{args.dir}/save_{r}"
        future = None
        if args.mode == "async":
            future = dcp.async_save(state_dict, checkpoint_id=path, process_group=checkpoint_group)
        else:
            dcp.save(state_dict, checkpoint_id=path, process_group=checkpoint_group)
        blocked.append(slowest(time.perf_counter() - start))
        for _ in range(args.steps):
            in_flight = every_rank(future is not None and not future.done())
            t = step()
            if in_flight:
                writing.append(t)
        start = time.perf_counter()
        if future is not None:
            future.result()
        waits.append(slowest(time.perf_counter() - start))
    if rank == 0:
        print(json.dumps({
            "impl": "dcp", "mode": args.mode, "ranks": world, "state_mb_per_rank": state_bytes / 1e6,
            "blocked_s": median(blocked), "copy_s": median(copies), "step_s": median(normal),
            "step_writing_s": median(writing), "steps_writing": len(writing), "wait_s": median(waits),
            "torch": torch.__version__,
        }), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
