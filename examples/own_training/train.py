"""A user's own DDP training script, as eks-ddp runs it instead of the bundled trainer (`eks-ddp:job.script`).

Plain PyTorch: torchrun starts it on every pod with RANK, WORLD_SIZE and LOCAL_RANK set; the stack adds where the
run's files go (EKS_DDP_OUTPUT_DIR, EKS_DDP_CHECKPOINT_DIR, EKS_DDP_DATA_DIR) and the GPUs, EFA devices and NCCL
settings of its node group. It trains a small network on scikit-learn's digits (no download) and writes its model.

    torchrun --standalone --nproc-per-node 2 examples/own_training/train.py --epochs 30
"""

import argparse
import gc
import os
from pathlib import Path

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    torch.manual_seed(0)

    images, labels = load_digits(return_X_y=True)
    train_x, test_x, train_y, test_y = train_test_split(
        images / 16.0, labels, test_size=0.2, random_state=0, stratify=labels
    )
    train_x = torch.tensor(train_x, dtype=torch.float32)[rank::world].to(device)  # each rank its shard
    train_y = torch.tensor(train_y)[rank::world].to(device)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    for _ in range(args.epochs):
        for batch in torch.randperm(len(train_x), device=device).split(32):
            optimizer.zero_grad()
            nn.functional.cross_entropy(ddp(train_x[batch]), train_y[batch]).backward()
            optimizer.step()

    if rank == 0:
        with torch.no_grad():
            predicted = model(torch.tensor(test_x, dtype=torch.float32, device=device)).argmax(1).cpu()
        accuracy = (predicted == torch.tensor(test_y)).float().mean().item()
        output = Path(os.environ.get("EKS_DDP_OUTPUT_DIR", "runs/own-training"))
        output.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), output / "model.pt")
        print(f"own script: test accuracy {accuracy:.4f} on {world} rank(s); model in {output / 'model.pt'}")
    dist.barrier()  # no rank tears the group down while rank 0 still evaluates
    del ddp  # before the group goes (DDP holds it)
    gc.collect()  # a wrapper caught in a reference cycle goes too (the bundled trainer's teardown, distributed.stop)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
