"""PyTorch's own data parallelism on bench_sharded's MLP, for comparison.

Started once per rank by run.sh with RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT set (env:// rendezvous on localhost, gloo). Modes:
  ddp           DistributedDataParallel with the whole Adam optimizer
  zero1         DistributedDataParallel with ZeroRedundancyOptimizer(Adam): the
                optimizer state partitioned by whole parameters (ZeRO stage 1)
  fsdp_grad_op  FullyShardedDataParallel, SHARD_GRAD_OP (ZeRO stage 2), one
                unit per Linear, on the CPU (PyTorch 2.x; 1.13 has no CPU FSDP)
  fsdp_full     the same with FULL_SHARD (ZeRO stage 3)
Same model, batch, loss, optimizer and bucket size as bench_sharded; rank 0
prints one JSON object.
"""
import argparse
import json
import resource
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer


def state_bytes(optimizer):
    local = optimizer.optim if isinstance(optimizer, ZeroRedundancyOptimizer) else optimizer
    total = 0
    for state in local.state.values():
        for value in state.values():
            if torch.is_tensor(value) and value.dim() > 0:
                total += value.numel() * value.element_size()
    return total


def max_over_ranks(value):
    t = torch.tensor([float(value)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="ddp", choices=["ddp", "zero1", "fsdp_grad_op", "fsdp_full"])
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--bucket-cap-mb", type=float, default=25)
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
    parameter_count = sum(p.numel() for p in model.parameters())
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    if args.mode.startswith("fsdp"):
        from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        strategy = ShardingStrategy.SHARD_GRAD_OP if args.mode == "fsdp_grad_op" else ShardingStrategy.FULL_SHARD
        ddp = FullyShardedDataParallel(model, sharding_strategy=strategy, auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),
                                       device_id=torch.device("cpu"))
    else:
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb,
                                                  gradient_as_bucket_view=True)
    if args.mode == "zero1":
        optimizer = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam, lr=1e-4)
    else:
        optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-4)
    # The tensors that hold the gradients: FSDP's flat parameters, or the model's own.
    trained = list(ddp.parameters()) if args.mode.startswith("fsdp") else list(model.parameters())
    torch.manual_seed(100 + rank)
    x = torch.randn(args.batch, args.width)
    y = torch.randn(args.batch, args.width)
    gradient_bytes = 0
    gradient_peak = 0

    def sample_gradients(_=None):
        # The whole gradients held as backward reaches each layer's input.
        nonlocal gradient_peak
        held = sum(p.grad.numel() * p.grad.element_size() for p in trained if p.grad is not None)
        gradient_peak = max(gradient_peak, held)

    def watch_output(_module, _inputs, output):
        output.register_hook(sample_gradients)  # returns None: the output stays as it is

    for module in model:
        if isinstance(module, nn.ReLU):
            module.register_forward_hook(watch_output)

    def step():
        nonlocal gradient_bytes
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        sample_gradients()
        optimizer.step()
        gradient_bytes = sum(p.grad.numel() * p.grad.element_size() for p in trained if p.grad is not None)
        optimizer.zero_grad()
        return loss

    for _ in range(args.warmup):
        step()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    elapsed = max_over_ranks(time.perf_counter() - start)
    peak_rss = max_over_ranks(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    state = max_over_ranks(state_bytes(optimizer))
    grads = max_over_ranks(gradient_bytes)
    grads_in_backward = max_over_ranks(gradient_peak)
    # Weights held between steps: FSDP's flat parameters (this rank's shard
    # under FULL_SHARD, the whole under SHARD_GRAD_OP), or the whole model.
    held = sum(p.numel() * p.element_size() for p in ddp.parameters()) if args.mode == "fsdp_full" else parameter_bytes
    held = max_over_ranks(held)
    if rank == 0:
        print(json.dumps({
            "impl": "pytorch", "mode": args.mode, "ranks": world,
            "parameters": parameter_count,
            "batch_per_rank": args.batch, "steps": args.steps, "seconds": elapsed,
            "samples_per_s": args.steps * args.batch * world / elapsed,
            "peak_rss_mb": peak_rss / 1e6, "optimizer_state_mb": state / 1e6,
            "gradient_mb_after_step": grads / 1e6, "gradient_mb_in_backward": grads_in_backward / 1e6,
            "parameter_mb": held / 1e6, "final_loss": loss.item(),
            "torch": torch.__version__,
        }), flush=True)
    dist.barrier()


if __name__ == "__main__":
    main()
