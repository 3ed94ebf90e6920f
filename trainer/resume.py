"""Where a run starts: the newest good checkpoint, chosen once by rank 0 and sent to every rank, or step 0.

Every rank resumes from the same bytes and the same counters before DDP wraps the model: a rank reading its own
newest checkpoint could pick another one (a node's volume, a write under way), and a rank 0 that fails to read says
so on every rank instead of leaving the others in a collective. A resumed run keeps the global batch it started with,
whatever its number of ranks now, so its schedule and its optimizer steps are those of an uninterrupted run.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from eks_ddp.trainer import distributed
from eks_ddp.trainer.checkpoint import CheckpointManager, decode
from eks_ddp.trainer.config import TrainConfig
from eks_ddp.trainer.distributed import Topology
from eks_ddp.trainer.errors import CheckpointError
from eks_ddp.trainer.sampling import BatchPlan, GlobalBatchSampler, plan_batches
from eks_ddp.trainer.schedule import warmup_cosine

if TYPE_CHECKING:
    from eks_ddp.trainer.artifacts import ArtifactStore


@dataclass
class Progress:
    """Counters that must be identical on every rank; saved in each checkpoint."""

    global_batch: int = 0
    """Samples per optimizer step over all ranks: fixed when the run starts."""
    step: int = 0
    epoch: int = 0
    position: int = 0
    """Samples of `epoch`'s global order already trained on: a multiple of the global batch, or the epoch's size."""
    epoch_loss_sum: float = 0.0
    epoch_steps: int = 0
    history: list[dict[str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Start:
    """What a rank trains from: its share of each step, the schedule and the counters, restored or new."""

    plan: BatchPlan
    sampler: GlobalBatchSampler
    scheduler: LambdaLR
    progress: Progress


def newest_state(
    topology: Topology, checkpoints: CheckpointManager, artifacts: "ArtifactStore | None", output_dir: Path
) -> dict[str, Any] | None:
    """Rank 0's newest verified checkpoint (a newer one in S3 first brought back), decoded on every rank; rank 0's
    error raised on every rank."""
    payload: bytes | None = None
    error: str | None = None
    if topology.is_main:
        try:
            if artifacts:
                artifacts.restore_newer_checkpoint(checkpoints)
            verified = checkpoints.newest()
            payload = verified.payload if verified else None
            if verified and artifacts:  # before the run log trims what follows the checkpoint
                artifacts.restore_history(output_dir)
        except CheckpointError as problem:
            error = str(problem)
    payload, error = distributed.broadcast_object((payload, error))
    if error is not None:
        raise CheckpointError(error)
    return decode(payload) if payload is not None else None


def start(
    config: TrainConfig, topology: Topology, state: dict[str, Any] | None, train_size: int, model: nn.Module,
    optimizer: Optimizer,
) -> Start:
    """The run's plan and schedule; with a checkpoint's `state`, the model, optimizer, schedule and counters it
    holds loaded in place."""
    world = topology.world_size
    global_batch = (
        state["progress"]["global_batch"] if state else config.global_batch_size or config.batch_size * world
    )
    plan = plan_batches(global_batch, world, config.batch_size)
    sampler = GlobalBatchSampler(train_size, plan, topology.rank, config.seed)
    scheduler = LambdaLR(optimizer, warmup_cosine(config.epochs * sampler.steps_per_epoch, config.warmup_fraction))
    if state is None:
        return Start(plan, sampler, scheduler, Progress(global_batch=global_batch))
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return Start(plan, sampler, scheduler, Progress(**state["progress"]))
