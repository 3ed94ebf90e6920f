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
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from eks_ddp.trainer import datasets, models
from eks_ddp.trainer.schedule import warmup_cosine


def _arguments() -> argparse.Namespace:
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
    return parser.parse_args()


def _train_epoch(
    model: nn.Module, loader: DataLoader, optimizer: Optimizer, scheduler: LambdaLR, world: int
) -> tuple[float, int]:
    """One pass over the rank's shard, `loss.item()` after every step: its summed loss, and the images all ranks
    trained on."""
    running_loss, images = 0.0, 0
    for inputs, labels in loader:
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = F.cross_entropy(outputs, labels)
        loss.backward()
        optimizer.step()
        scheduler.step()
        running_loss += loss.item()
        images += len(labels) * world
    return running_loss, images


def _test_accuracy(model: nn.Module, splits: datasets.Splits) -> float:
    model.eval()
    with torch.no_grad():
        correct = sum(
            int((model(x).argmax(1) == y).sum())
            for x, y in DataLoader(TensorDataset(splits.test_x, splits.test_y), batch_size=1024)
        )
    return correct / len(splits.test_y)


def main() -> None:
    args = _arguments()
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
    # NCHW, as the workshop's loop has it: models.build lays the convolutional models out channels-last.
    model = models.build(name, splits.input_shape, len(splits.classes))
    model = models.in_memory_format(model, torch.contiguous_format)
    ddp_model = DistributedDataParallel(model) if world > 1 else model
    train_set = TensorDataset(splits.train_x, splits.train_y)
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = LambdaLR(optimizer, warmup_cosine(args.epochs * len(loader), 0.05))

    history, images, training_seconds = [], 0, 0.0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        ddp_model.train()
        epoch_start = time.perf_counter()
        running_loss, epoch_images = _train_epoch(ddp_model, loader, optimizer, scheduler, world)
        images += epoch_images
        training_seconds += time.perf_counter() - epoch_start
        if rank == 0:
            history.append(
                {
                    "epoch": epoch + 1,
                    "train_loss": running_loss / len(loader),
                    "test_accuracy": _test_accuracy(model, splits),
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
