import pytest
import torch

from eks_ddp.trainer.errors import UsageError
from eks_ddp.trainer.sampling import GlobalBatchSampler, plan_batches


def _steps(
    size: int, global_batch: int, world: int, max_micro_batch: int, epoch: int, position: int = 0
) -> list[list[int]]:
    """Each remaining optimizer step's samples over all ranks and micro-batches, sorted."""
    plan = plan_batches(global_batch, world, max_micro_batch)
    per_rank = [GlobalBatchSampler(size, plan, rank, seed=3).batches(epoch, position) for rank in range(world)]
    return [
        sorted(torch.cat([batches[step].flatten() for batches in per_rank]).tolist())
        for step in range(len(per_rank[0]))
    ]


@pytest.mark.parametrize(("world", "max_micro_batch"), [(1, 8), (2, 4), (4, 2), (1, 2), (8, 1)])
def test_every_world_size_trains_each_step_on_the_same_global_batch(world: int, max_micro_batch: int) -> None:
    assert _steps(101, 8, world, max_micro_batch, epoch=2) == _steps(101, 8, 1, 8, epoch=2)


@pytest.mark.parametrize(("world_before", "world_after"), [(2, 1), (1, 2), (2, 4), (4, 2)])
def test_a_resize_mid_epoch_continues_with_the_uninterrupted_steps(world_before: int, world_after: int) -> None:
    uninterrupted = _steps(1437, 64, world_before, 32, epoch=1)
    resumed = _steps(1437, 64, world_after, 32, epoch=1, position=9 * 64)
    assert resumed == uninterrupted[9:]


def test_an_epoch_covers_every_sample_and_pads_to_whole_global_batches() -> None:
    steps = _steps(101, 8, 2, 4, epoch=0)
    trained = [index for step in steps for index in step]
    assert len(steps) == 13 and len(trained) == 104
    assert set(trained) == set(range(101))


@pytest.mark.parametrize(
    ("global_batch", "world", "max_micro_batch", "micro_batch", "accumulation"),
    [(128, 2, 64, 64, 1), (128, 1, 64, 64, 2), (128, 4, 64, 32, 1), (96, 1, 40, 32, 3), (7, 1, 3, 1, 7)],
)
def test_the_plan_uses_the_largest_micro_batch_that_fits(
    global_batch: int, world: int, max_micro_batch: int, micro_batch: int, accumulation: int
) -> None:
    plan = plan_batches(global_batch, world, max_micro_batch)
    assert (plan.micro_batch, plan.accumulation) == (micro_batch, accumulation)
    assert plan.micro_batch * plan.accumulation * world == global_batch


@pytest.mark.parametrize(("global_batch", "world"), [(128, 3), (2, 4)])
def test_a_world_size_that_cannot_share_the_global_batch_is_refused(global_batch: int, world: int) -> None:
    with pytest.raises(
        UsageError, match=rf"global batch of {global_batch} samples cannot be shared evenly by {world} ranks"
    ):
        plan_batches(global_batch, world, 64)


def test_a_position_off_a_step_boundary_is_refused() -> None:
    sampler = GlobalBatchSampler(10, plan_batches(4, 2, 2), 0, seed=0)
    with pytest.raises(
        ValueError, match=r"position 6 is not a step boundary of the epoch \(a multiple of 4 up to 12\)"
    ):
        sampler.batches(0, 6)
    with pytest.raises(ValueError, match="position 16"):
        sampler.batches(0, 16)
    assert sampler.batches(0, 12).shape == (0, 1, 2)
