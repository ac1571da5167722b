"""Hugging Face Accelerate's Python loop on bench_gpu_train's workloads.

The same models (op for op), optimiser (AdamW, lr 1e-3), loss, synthetic data
already on the GPU, warm-up and timing as bench_gpu_train; one JSON object per
(workload, precision, batch) on stdout. --foreach 0 makes AdamW update the
parameters one by one, as LibTorch's C++ AdamW does (PyTorch's default on
CUDA is its multi-tensor "foreach" path).
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator

TOKENS, VOCAB, WIDTH, HEADS, BLOCKS = 128, 1024, 256, 4, 4


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 1024), nn.Linear(1024, 1024), nn.Linear(1024, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 32, 3), nn.Conv2d(32, 64, 3)
        self.fc1, self.fc2 = nn.Linear(9216, 128), nn.Linear(128, 10)

    def forward(self, x):
        h = F.relu(self.conv2(F.relu(self.conv1(x))))
        return self.fc2(F.relu(self.fc1(torch.flatten(F.max_pool2d(h, 2), 1))))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.qkv, self.proj = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.ln2, self.up, self.down = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, HEADS, WIDTH // HEADS).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = x + self.proj(attended.transpose(1, 2).reshape(b, s, WIDTH))
        return h + self.down(F.gelu(self.up(self.ln2(h))))


class TinyTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.position = nn.Parameter(torch.randn(TOKENS, WIDTH) * 0.02)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.norm, self.head = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        h = self.embed(tokens) + self.position
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h)).view(-1, VOCAB)


def workload(name, batch, device):
    torch.manual_seed(1)
    model = {"W1": Mlp, "W2": Cnn, "T": TinyTransformer}[name]()
    torch.manual_seed(1000)
    inputs, targets = [], []
    for _ in range(4):
        if name == "T":
            inputs.append(torch.randint(0, VOCAB, (batch, TOKENS)).to(device))
            targets.append(torch.randint(0, VOCAB, (batch * TOKENS,)).to(device))
        else:
            shape = (batch, 784) if name == "W1" else (batch, 1, 28, 28)
            inputs.append(torch.randn(shape).to(device))
            targets.append(torch.randint(0, 10, (batch,)).to(device))
    return model, inputs, targets


def run_one(accelerator, name, batch, warmup, steps, foreach):
    model, inputs, targets = workload(name, batch, accelerator.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=foreach)
    model, optimizer = accelerator.prepare(model, optimizer)

    def step(i):
        x, y = inputs[i % len(inputs)], targets[i % len(targets)]
        loss = F.cross_entropy(model(x).float(), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        return loss

    for i in range(warmup):
        step(i)
    step(0).item()
    start = time.perf_counter()
    for i in range(steps):
        loss = step(i)
    loss.item()
    seconds = time.perf_counter() - start
    accelerator.free_memory()
    return seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", default="W1,W2,T")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--batches", default="32,64,128,256,512")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--foreach", type=int, default=-1, help="1/0 force AdamW's foreach path; -1 PyTorch's default")
    args = parser.parse_args()
    foreach = None if args.foreach < 0 else bool(args.foreach)
    side = "accelerate" if foreach is None else f"accelerate_foreach{int(foreach)}"
    for precision in args.precisions.split(","):
        accelerator = Accelerator(mixed_precision="no" if precision == "fp32" else precision)
        for name in args.workloads.split(","):
            for batch in map(int, args.batches.split(",")):
                seconds = run_one(accelerator, name, batch, args.warmup, args.steps, foreach)
                print(json.dumps({"side": side, "workload": name, "precision": precision, "batch": batch,
                                  "steps": args.steps, "seconds": round(seconds, 6),
                                  "samples_per_s": round(batch * args.steps / seconds, 1),
                                  "ms_per_step": round(1e3 * seconds / args.steps, 4)}), flush=True)


if __name__ == "__main__":
    main()
