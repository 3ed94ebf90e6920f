"""The reference loop, written the way the AWS workshop's DDP trainer is written.

fp32, NCHW, a DataLoader over a TensorDataset with a DistributedSampler, and
`loss.item()` after every step; same models, optimizer, learning-rate schedule,
data and per-rank batch as the trainer, so the benchmark measures the loop alone.
Run it under torchrun: `torchrun --nproc-per-node 2 -m benchmarks.workshop_baseline ...`.
"""

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from eks_ddp.trainer import datasets, models
from eks_ddp.trainer.schedule import warmup_cosine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", choices=datasets.DATASETS, default="synthetic")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--model", default="auto")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--synthetic-size", type=int, default=8192)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()

    started = time.perf_counter()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if world > 1 else 0
    splits = datasets.load(
        args.dataset, args.data_dir, datasets.SyntheticShape(train_size=args.synthetic_size), args.seed
    )
    name = models.resolve(args.model, args.dataset)
    torch.manual_seed(args.seed)
    model = models.build(name, splits.input_shape, len(splits.classes)).to(memory_format=torch.contiguous_format)  # type: ignore[call-overload]
    ddp_model = DistributedDataParallel(model) if world > 1 else model
    train_set = TensorDataset(splits.train_x, splits.train_y)
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(args.epochs * len(loader), 0.05))

    history, images, training_seconds = [], 0, 0.0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        ddp_model.train()
        epoch_start = time.perf_counter()
        running_loss = 0.0
        for inputs, labels in loader:
            optimizer.zero_grad()
            outputs = ddp_model(inputs)
            loss = F.cross_entropy(outputs, labels)
            loss.backward()
            optimizer.step()
            scheduler.step()
            running_loss += loss.item()
            images += len(labels) * world
        training_seconds += time.perf_counter() - epoch_start
        if rank == 0:
            model.eval()
            with torch.no_grad():
                correct = sum(
                    int((model(x).argmax(1) == y).sum())
                    for x, y in DataLoader(TensorDataset(splits.test_x, splits.test_y), batch_size=1024)
                )
            history.append(
                {
                    "epoch": epoch + 1,
                    "train_loss": running_loss / len(loader),
                    "test_accuracy": correct / len(splits.test_y),
                    "elapsed_seconds": round(time.perf_counter() - started, 3),
                }
            )
        if world > 1:
            dist.barrier()
    if rank == 0:
        summary = {
            "images_per_second": round(images / training_seconds, 1),
            "test_accuracy": history[-1]["test_accuracy"],
            "history": history,
            "world_size": world,
            "model": name,
        }
        args.output.write_text(json.dumps(summary, indent=2))
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
