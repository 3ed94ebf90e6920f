"""Which samples each rank trains on at each optimizer step: the same steps whatever the world size.

A run fixes its global batch G when it starts. Epoch e's global order is `randperm(size)` seeded
with seed + e. Step k of the epoch trains on entries [k*G, (k+1)*G) of that order, shared among the
ranks and, on each rank, among micro-batches whose gradients are accumulated; the epoch's last step
trains on the size mod G entries left, when there are any, shared among the ranks as evenly as they
go (a rank may get none). Every sample is trained on once an epoch, none twice. A run resumed on
another number of ranks therefore trains every remaining step on the very samples, in the very
global batches, that an uninterrupted run would; its position in the epoch is a number of
samples, a multiple of G or the epoch's end.
"""

from collections.abc import Sequence
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


@dataclass(frozen=True)
class Step:
    """One optimizer step on this rank: its micro-batches' sample indices, and the step's samples over all ranks
    (the global batch, or fewer on an epoch's last step)."""

    micro_batches: Sequence[torch.Tensor]
    samples: int


class GlobalBatchSampler:
    """This rank's micro-batches, step by step, from any position of any epoch."""

    def __init__(self, size: int, plan: BatchPlan, rank: int, seed: int) -> None:
        if size < 1:
            raise ValueError("the training set is empty")
        self.size, self.plan, self.rank, self.seed = size, plan, rank, seed
        self.steps_per_epoch = -(-size // plan.global_batch)
        self.whole_steps_end = size // plan.global_batch * plan.global_batch
        """Where the epoch's whole global batches end: the short last step, if any, takes the rest."""

    def steps(self, epoch: int, position: int, device: torch.device | None = None) -> list[Step]:
        """This rank's remaining steps of `epoch` from `position` samples into it, their indices on `device`."""
        plan = self.plan
        if not (0 <= position <= self.whole_steps_end and position % plan.global_batch == 0 or position == self.size):
            raise ValueError(
                f"position {position} is not a step boundary of the epoch "
                f"(a multiple of {plan.global_batch} up to {self.whole_steps_end}, or {self.size})"
            )
        generator = torch.Generator()
        generator.manual_seed(self.seed + epoch)
        order = torch.randperm(self.size, generator=generator)
        steps: list[Step] = []
        if position < self.whole_steps_end:
            whole = order[position : self.whole_steps_end].view(-1, plan.global_batch)[:, self.rank :: plan.world_size]
            micro = whole.reshape(-1, plan.accumulation, plan.micro_batch).to(device)
            steps = [Step(list(step), plan.global_batch) for step in micro]
        rest = order[max(position, self.whole_steps_end) :]
        if len(rest):
            share = rest[self.rank :: plan.world_size].to(device)  # empty on some ranks: they join the all-reduce
            micro_batches = share.tensor_split(max(1, -(-len(share) // plan.micro_batch)))
            steps.append(Step(micro_batches, len(rest)))
        return steps
