# The Hugging Face Accelerate script that jobs/gpt/gpt.cpp mirrors: the same
# GPT (a ModuleList of blocks, a head tied to the token embedding), the same
# synthetic next-token task, AdamW with a warm-up cosine schedule, gradient
# accumulation, clipping and checkpoints (docs/training.md, "A transformer",
# shows the two side by side). Run it with `accelerate launch gpt.py`.
import argparse
import math

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import FullyShardedDataParallelPlugin, ProjectConfiguration, set_seed
from torch.utils.data import DataLoader, Dataset
from transformers import get_scheduler


class MarkovTokens(Dataset):
    """Token streams of a fixed random Markov chain: four likely successors per token."""

    def __init__(self, samples, vocab, sequence, seed):
        successors = torch.randint(vocab, (vocab, 4), generator=torch.Generator().manual_seed(1234))
        generator = torch.Generator().manual_seed(seed)
        self.tokens = torch.empty(samples, sequence + 1, dtype=torch.long)
        self.tokens[:, 0] = torch.randint(vocab, (samples,), generator=generator)
        choices = torch.randint(4, (samples, sequence), generator=generator)
        for t in range(sequence):
            self.tokens[:, t + 1] = successors[self.tokens[:, t], choices[:, t]]

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, i):
        return {"input_ids": self.tokens[i, :-1], "labels": self.tokens[i, 1:]}


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc, self.fc_proj = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def attention(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in self.qkv(x).split(d, 2))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), -1e4)
        return self.proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x))))


class Gpt(torch.nn.Module):
    def __init__(self, vocab, sequence, d, heads, layers):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(vocab, d), torch.nn.Embedding(sequence, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(d)
        self.lm_head = torch.nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, input_ids):
        x = self.wte(input_ids) + self.wpe(torch.arange(input_ids.shape[1], device=input_ids.device))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--project-dir", default="gpt-run")
    parser.add_argument("--sharding", default="NO_SHARD")
    parser.add_argument("--mixed-precision", default="no")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()

    accelerator = Accelerator(
        mixed_precision=args.mixed_precision,
        gradient_accumulation_steps=2,
        project_config=ProjectConfiguration(args.project_dir, automatic_checkpoint_naming=True, total_limit=2),
        fsdp_plugin=None if args.sharding == "NO_SHARD" else FullyShardedDataParallelPlugin(sharding_strategy=args.sharding),
    )
    set_seed(42)
    vocab, sequence = 512, 64
    net = Gpt(vocab, sequence, d=128, heads=4, layers=4)
    adamw = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=0.1)
    schedule = get_scheduler("cosine", adamw, num_warmup_steps=6, num_training_steps=args.steps)
    loader = DataLoader(MarkovTokens(2048, vocab, sequence, seed=7), batch_size=args.batch_size, shuffle=True)
    model, optimizer, scheduler, train = accelerator.prepare(net, adamw, schedule, loader)

    step = 0
    while step < args.steps:
        for batch in train:
            with accelerator.accumulate(model):
                logits = model(batch["input_ids"])
                loss = F.cross_entropy(logits.reshape(-1, vocab).float(), batch["labels"].reshape(-1))
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            if not accelerator.sync_gradients:
                continue
            step += 1
            if step % 10 == 0:
                accelerator.print(f"gpt: step {step} loss {accelerator.reduce(loss.detach(), 'mean').item():.4f}")
            if step >= args.steps:
                break
    accelerator.end_training()


if __name__ == "__main__":
    main()
