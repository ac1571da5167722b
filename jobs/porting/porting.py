# A complete Hugging Face Accelerate training script: gradient accumulation,
# clipping, a scheduler, evaluation with gather_for_metrics, trackers,
# checkpoints with automatic naming and resume, and the final model.
# porting.cpp is its C++ conversion, line for line (docs/porting.md shows the
# two side by side). Run it with `accelerate launch porting.py`.
import argparse
import os

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import ProjectConfiguration, set_seed
from torch.utils.data import DataLoader, TensorDataset


def make_dataset(samples, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, 16, generator=generator)
    return TensorDataset(x, torch.sin(x.sum(1, keepdim=True) / 4))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 64)
        self.fc2 = torch.nn.Linear(64, 1)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


class Progress:  # the epoch, saved with every checkpoint
    def __init__(self):
        self.epoch = 0

    def state_dict(self):
        return {"epoch": torch.tensor(self.epoch)}

    def load_state_dict(self, state):
        self.epoch = int(state["epoch"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--project-dir", default="porting-run")
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()

    set_seed(42)
    accelerator = Accelerator(
        gradient_accumulation_steps=2,
        log_with="all",
        project_config=ProjectConfiguration(project_dir=args.project_dir, automatic_checkpoint_naming=True,
                                            total_limit=2),
    )
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.5)
    train = DataLoader(make_dataset(1024, 1), batch_size=16, shuffle=True)
    evaluation = DataLoader(make_dataset(256, 2), batch_size=32)
    model, optimizer, scheduler, train, evaluation = accelerator.prepare(model, optimizer, scheduler, train,
                                                                         evaluation)
    accelerator.init_trackers("porting", config={"lr": 3e-3, "epochs": args.epochs})
    progress = Progress()
    accelerator.register_for_checkpointing(progress)
    if os.path.isdir(os.path.join(args.project_dir, "checkpoints")):
        accelerator.load_state()
        accelerator.print(f"porting: resumed at epoch {progress.epoch}")

    for epoch in range(progress.epoch, args.epochs):
        model.train()
        for x, y in train:
            with accelerator.accumulate(model):
                loss = F.mse_loss(model(x), y)
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
        model.eval()
        errors = []
        for x, y in evaluation:
            with torch.no_grad():
                prediction = model(x)
            errors.append(accelerator.gather_for_metrics((prediction - y) ** 2))
        eval_loss = torch.cat(errors).mean().item()
        accelerator.log({"train_loss": loss.item(), "eval_loss": eval_loss}, step=epoch)
        accelerator.print(f"porting: epoch {epoch} eval loss {eval_loss:.4f}")
        progress.epoch = epoch + 1
        accelerator.save_state()

    accelerator.wait_for_everyone()
    accelerator.save_model(model, os.path.join(args.project_dir, "model"))
    accelerator.end_training()


if __name__ == "__main__":
    main()
