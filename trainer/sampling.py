"""Which samples each rank trains on, resumable in the middle of an epoch."""

import torch
from torch.utils.data import DistributedSampler


class _Indices(torch.utils.data.Dataset[int]):
    """Stands in for the in-memory dataset: the sampler only needs its length."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:
        return index


def _pad(order: torch.Tensor, multiple: int) -> torch.Tensor:
    """Repeat from the start up to a multiple of `multiple`, as DistributedSampler pads."""
    if len(order) == 0 or len(order) % multiple == 0:
        return order
    target = -(-len(order) // multiple) * multiple
    return torch.cat([order, order.repeat(-(-target // len(order)))[: target - len(order)]])


class ResumableDistributedSampler(DistributedSampler[int]):
    """DistributedSampler that can start an epoch at a position in its global order.

    The epoch's global order is `randperm(seed + epoch)` padded to a multiple of the
    world size, exactly as in DistributedSampler, and rank r takes every
    world_size-th entry from r. After k batches of B on every rank the job has
    consumed the first k*B*world_size entries, so resuming at that position repeats
    nothing and skips nothing; with the same world size the remaining batches are
    the very ones an uninterrupted run trains on. With position 0 it yields what
    DistributedSampler does.
    """

    def __init__(self, size: int, num_replicas: int, rank: int, seed: int) -> None:
        super().__init__(_Indices(size), num_replicas=num_replicas, rank=rank, shuffle=True, seed=seed, drop_last=False)
        self.size = size
        self.position = 0

    def set_position(self, position: int) -> None:
        """Skip the first `position` entries of the epoch's global order."""
        if not 0 <= position <= self.total_size:
            raise ValueError(f"position {position} is outside the epoch (0..{self.total_size})")
        self.position = position

    def indices(self) -> torch.Tensor:
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        order = _pad(torch.randperm(self.size, generator=generator), self.num_replicas)
        # A checkpoint from another world size can leave a remainder: pad again.
        return _pad(order[self.position :], self.num_replicas)[self.rank :: self.num_replicas]

    def __iter__(self):
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return -(-(self.total_size - self.position) // self.num_replicas)
