"""PyTorch DistributedDataParallel (gloo) on bench_train's workloads, its
own no-communication ceiling, and Hugging Face Accelerate's loop over the
same (--accelerate: Accelerator.prepare, accelerator.backward, its autocast).

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
import math
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


# jobs/gpt's transformer at bench_train's size, op for op (gpt_model.hpp).
VOCAB, SEQUENCE, WIDTH, HEADS, BLOCKS = 8192, 128, 256, 4, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.fc, self.fc_proj = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

    def attention(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, HEADS, d // HEADS).transpose(1, 2) for z in self.qkv(x).split(d, 2))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d // HEADS)
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), -1e4)
        return self.proj(torch.matmul(scores.softmax(-1), v).transpose(1, 2).contiguous().view(b, t, d))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, WIDTH), nn.Embedding(SEQUENCE, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.ln_f = nn.LayerNorm(WIDTH)
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight
        with torch.no_grad():  # GPT-2's initialisation, as gpt_model.hpp
            for name, p in self.named_parameters():
                if "bias" in name:
                    p.zero_()
                elif p.dim() >= 2:
                    p.normal_(0.0, 0.02)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", default="W1", choices=["W1", "W2", "GPT"])
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=-1, help="untimed steps first (-1: 10, 2 for GPT)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--name", default="python_ddp", help="the impl name in the JSON")
    parser.add_argument("--ceiling", action="store_true", help="no process group, no DDP")
    parser.add_argument("--accelerate", action="store_true", help="Hugging Face Accelerate's loop (and its DDP)")
    parser.add_argument("--mixed-precision", default="no", choices=["no", "bf16"])
    args = parser.parse_args()
    steps = args.steps or {"W1": 200, "W2": 30, "GPT": 10}[args.workload]
    if args.warmup < 0:
        args.warmup = 2 if args.workload == "GPT" else 10
    torch.set_num_threads(1)
    bf16 = args.mixed_precision == "bf16"
    accelerator = None
    if args.accelerate:
        # Accelerate 0.34 counts and sets CPU "devices" in a multi-process CPU run through calls
        # PyTorch 1.13 lacks; one device per process, and setting it a no-op, is what newer ones do.
        if not hasattr(torch.cpu, "device_count"):
            torch.cpu.device_count = lambda: 1
        if not hasattr(torch.cpu, "set_device"):
            torch.cpu.set_device = lambda device: None
        from accelerate import Accelerator  # only this side needs it

        accelerator = Accelerator(cpu=True, mixed_precision=args.mixed_precision)
        rank, world = accelerator.process_index, accelerator.num_processes
    elif args.ceiling:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    else:
        dist.init_process_group("gloo", init_method="env://")
        rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    model = {"W1": Mlp, "W2": Cnn, "GPT": Gpt}[args.workload]()
    torch.manual_seed(1000 + rank)
    if args.workload == "GPT":
        inputs = [torch.randint(0, VOCAB, (args.batch, SEQUENCE)) for _ in range(4)]
        targets = [torch.randint(0, VOCAB, (args.batch, SEQUENCE)) for _ in range(4)]
    else:
        shape = (args.batch, 784) if args.workload == "W1" else (args.batch, 1, 28, 28)
        inputs = [torch.randn(shape) for _ in range(4)]
        targets = [torch.randint(0, 10, (args.batch,)) for _ in range(4)]

    def make_optimizer(parameters):
        if args.workload == "GPT":
            return torch.optim.AdamW(parameters, lr=1e-3)
        return torch.optim.SGD(parameters, lr=0.01)

    def loss_of(output, target):
        if args.workload == "GPT":
            return F.cross_entropy(output.reshape(-1, VOCAB).float(), target.reshape(-1))
        return F.cross_entropy(output, target)

    if accelerator is not None:
        ddp, optimizer = accelerator.prepare(model, make_optimizer(model.parameters()))

        def step(i):
            optimizer.zero_grad()
            loss = loss_of(ddp(inputs[i % 4]), targets[i % 4])  # the prepared model autocasts itself
            accelerator.backward(loss)
            optimizer.step()
            return loss
    else:
        ddp = model if args.ceiling else nn.parallel.DistributedDataParallel(model)
        optimizer = make_optimizer(ddp.parameters())

        def step(i):
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = loss_of(ddp(inputs[i % 4]), targets[i % 4])
            loss.backward()
            optimizer.step()
            return loss

    # A one-process Accelerator makes no process group.
    synced = not args.ceiling and dist.is_initialized()
    for i in range(args.warmup):
        step(i)
    if synced:
        dist.barrier()
    start = time.perf_counter()
    for i in range(steps):
        loss = step(i)
    elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    if synced:
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    seconds = elapsed.item()
    if rank == 0:
        print(json.dumps({
            "impl": args.name + ("_ceiling" if args.ceiling else ""),
            "workload": args.workload + ("-bf16" if bf16 else ""), "ranks": world,
            "batch_per_rank": args.batch, "steps": steps, "seconds": seconds,
            "samples_per_s": steps * args.batch * world / seconds,
            "step_ms": 1e3 * seconds / steps, "final_loss": loss.item(),
            "threads": torch.get_num_threads(), "torch": torch.__version__,
        }), flush=True)
    if synced:
        dist.barrier()
    os._exit(0)


if __name__ == "__main__":
    main()
