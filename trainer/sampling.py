"""Which samples each rank trains on at each optimizer step: the same steps whatever the world size.

A run fixes its global batch G when it starts. Epoch e's global order is `randperm(size)` seeded
with seed + e, padded by repeating from its start to a whole number of steps of G samples (as
DistributedSampler pads to a multiple of the world size, but here the padding depends on G
alone). Step k of the epoch trains on entries [k*G, (k+1)*G) of that order, shared among the
ranks and, on each rank, among micro-batches whose gradients are accumulated. A run resumed on
another number of ranks therefore trains every remaining step on the very samples, in the very
global batches, that an uninterrupted run would; its position in the epoch is a number of
samples, always a multiple of G.
"""

from dataclasses import dataclass

import torch

from eks_ddp.trainer.errors import UsageError


@dataclass(frozen=True)
class BatchPlan:
    """How the ranks cover one global batch: micro_batch * accumulation * world_size == global_batch."""

    global_batch: int
    world_size: int
    micro_batch: int
    accumulation: int


def plan_batches(global_batch: int, world_size: int, max_micro_batch: int) -> BatchPlan:
    """The largest micro-batch up to `max_micro_batch` (so the fewest accumulation steps) that
    splits the global batch evenly; refused, naming both numbers, when the ranks cannot share it."""
    if global_batch % world_size:
        raise UsageError(
            f"the run's global batch of {global_batch} samples cannot be shared evenly by {world_size} ranks; "
            f"run it on a number of ranks that divides {global_batch}"
        )
    share = global_batch // world_size
    accumulation = next(a for a in range(1, share + 1) if share % a == 0 and share // a <= max_micro_batch)
    return BatchPlan(global_batch, world_size, share // accumulation, accumulation)


def _repeat_to(order: torch.Tensor, length: int) -> torch.Tensor:
    """`order` repeated from its start up to `length` entries."""
    return order.repeat(-(-length // len(order)))[:length]


class GlobalBatchSampler:
    """This rank's micro-batches, step by step, from any position of any epoch."""

    def __init__(self, size: int, plan: BatchPlan, rank: int, seed: int) -> None:
        if size < 1:
            raise ValueError("the training set is empty")
        self.size, self.plan, self.rank, self.seed = size, plan, rank, seed
        self.steps_per_epoch = -(-size // plan.global_batch)

    @property
    def samples_per_epoch(self) -> int:
        """Global samples in one epoch, padding included: a whole number of global batches."""
        return self.steps_per_epoch * self.plan.global_batch

    def batches(self, epoch: int, position: int) -> torch.Tensor:
        """Indices of shape [remaining steps, accumulation, micro_batch] from `position` samples into `epoch`."""
        plan = self.plan
        if position % plan.global_batch or not 0 <= position <= self.samples_per_epoch:
            raise ValueError(
                f"position {position} is not a step boundary of the epoch "
                f"(a multiple of {plan.global_batch} up to {self.samples_per_epoch})"
            )
        generator = torch.Generator()
        generator.manual_seed(self.seed + epoch)
        order = _repeat_to(torch.randperm(self.size, generator=generator), self.samples_per_epoch)
        steps = order.view(self.steps_per_epoch, plan.global_batch)[position // plan.global_batch :]
        return steps[:, self.rank :: plan.world_size].reshape(-1, plan.accumulation, plan.micro_batch)
