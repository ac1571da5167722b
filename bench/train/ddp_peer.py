"""PyTorch DistributedDataParallel (gloo) on bench_train's workloads, and
its own no-communication ceiling.

Started once per rank by run.sh with RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT set (env:// rendezvous on localhost). Same models, batch, loss,
optimiser and synthetic data scheme as bench_train; rank 0 prints one JSON
object whose "impl" is --name (with "_ceiling" appended under --ceiling).
--ceiling trains the bare model on every rank at once, with no process group:
the same compute and memory traffic without communication, the yardstick of
this PyTorch's DDP. Ends right after its final barrier: PyTorch 1.13's gloo
can hang at interpreter exit (run.sh also bounds the run with `timeout`).
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 1024)
        self.fc2 = nn.Linear(1024, 1024)
        self.fc3 = nn.Linear(1024, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        h = F.relu(self.conv2(F.relu(self.conv1(x))))
        h = torch.flatten(F.max_pool2d(h, 2), 1)
        return self.fc2(F.relu(self.fc1(h)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", default="W1", choices=["W1", "W2"])
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--name", default="python_ddp", help="the impl name in the JSON")
    parser.add_argument("--ceiling", action="store_true", help="no process group, no DDP")
    args = parser.parse_args()
    steps = args.steps or (200 if args.workload == "W1" else 30)
    torch.set_num_threads(1)
    if args.ceiling:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    else:
        dist.init_process_group("gloo", init_method="env://")
        rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    model = Mlp() if args.workload == "W1" else Cnn()
    ddp = model if args.ceiling else nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    torch.manual_seed(1000 + rank)
    shape = (args.batch, 784) if args.workload == "W1" else (args.batch, 1, 28, 28)
    inputs = [torch.randn(shape) for _ in range(4)]
    targets = [torch.randint(0, 10, (args.batch,)) for _ in range(4)]

    def step(i):
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp(inputs[i % 4]), targets[i % 4])
        loss.backward()
        optimizer.step()
        return loss

    for i in range(args.warmup):
        step(i)
    if not args.ceiling:
        dist.barrier()
    start = time.perf_counter()
    for i in range(steps):
        loss = step(i)
    elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    if not args.ceiling:
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    seconds = elapsed.item()
    if rank == 0:
        print(json.dumps({
            "impl": args.name + ("_ceiling" if args.ceiling else ""), "workload": args.workload, "ranks": world,
            "batch_per_rank": args.batch, "steps": steps, "seconds": seconds,
            "samples_per_s": steps * args.batch * world / seconds,
            "step_ms": 1e3 * seconds / steps, "final_loss": loss.item(),
            "threads": torch.get_num_threads(), "torch": torch.__version__,
        }), flush=True)
    if not args.ceiling:
        dist.barrier()
    os._exit(0)


if __name__ == "__main__":
    main()
