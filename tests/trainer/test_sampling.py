import pytest
import torch

from eks_ddp.trainer.errors import UsageError
from eks_ddp.trainer.sampling import GlobalBatchSampler, plan_batches


def _steps(
    size: int, global_batch: int, world: int, max_micro_batch: int, epoch: int, position: int = 0
) -> list[list[int]]:
    """Each remaining optimizer step's samples over all ranks and micro-batches, sorted."""
    plan = plan_batches(global_batch, world, max_micro_batch)
    per_rank = [GlobalBatchSampler(size, plan, rank, seed=3).steps(epoch, position) for rank in range(world)]
    assert len({len(steps) for steps in per_rank}) == 1, "every rank takes the same number of steps"
    return [
        sorted(index for step in steps for batch in step.micro_batches for index in batch.tolist())
        for steps in zip(*per_rank, strict=True)
    ]


@pytest.mark.parametrize(("world", "max_micro_batch"), [(1, 8), (2, 4), (4, 2), (1, 2), (8, 1)])
def test_every_world_size_trains_each_step_on_the_same_global_batch(world: int, max_micro_batch: int) -> None:
    assert _steps(101, 8, world, max_micro_batch, epoch=2) == _steps(101, 8, 1, 8, epoch=2)


@pytest.mark.parametrize(("world_before", "world_after"), [(2, 1), (1, 2), (2, 4), (4, 2)])
def test_a_resize_mid_epoch_continues_with_the_uninterrupted_steps(world_before: int, world_after: int) -> None:
    uninterrupted = _steps(1437, 64, world_before, 32, epoch=1)
    resumed = _steps(1437, 64, world_after, 32, epoch=1, position=9 * 64)
    assert resumed == uninterrupted[9:]


def test_an_epoch_trains_every_sample_once_ending_with_a_short_step() -> None:
    steps = _steps(101, 8, 2, 4, epoch=0)
    trained = [index for step in steps for index in step]
    assert [len(step) for step in steps] == [8] * 12 + [5]
    assert sorted(trained) == list(range(101))


@pytest.mark.parametrize(
    ("size", "world", "micro_batches"), [(101, 2, [[3], [2]]), (97, 4, [[1], [0], [0], [0]]), (96, 2, [])]
)
def test_the_short_step_is_shared_as_evenly_as_the_ranks_go(
    size: int, world: int, micro_batches: list[list[int]]
) -> None:
    """A share within the micro-batch (4) is one micro-batch, one forward and backward pass; a rank with no sample of
    the step still takes it (one empty micro-batch), so it joins the all-reduce."""
    plan = plan_batches(8, world, 4)
    last = [GlobalBatchSampler(size, plan, rank, seed=0).steps(0, 0)[-1] for rank in range(world)]
    if not micro_batches:
        assert all(step.samples == 8 for step in last)
        return
    assert [[len(batch) for batch in step.micro_batches] for step in last] == micro_batches
    assert all(step.samples == size % 8 for step in last)


def test_a_short_step_splits_a_share_larger_than_the_micro_batch() -> None:
    (step,) = GlobalBatchSampler(7, plan_batches(8, 1, 2), 0, seed=0).steps(0, 0)
    assert [len(batch) for batch in step.micro_batches] == [2, 2, 2, 1] and step.samples == 7


@pytest.mark.parametrize(
    ("global_batch", "world", "max_micro_batch", "micro_batch", "accumulation"),
    [
        (128, 2, 64, 64, 1),
        (128, 1, 64, 64, 2),
        (128, 4, 64, 32, 1),
        (96, 1, 40, 32, 3),
        (7, 1, 3, 1, 7),
        pytest.param(2**53 + 1, 1, 2**53, (2**53 + 1) // 3, 3, id="past a float's precision: integer arithmetic"),
    ],
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
        ValueError, match=r"position 6 is not a step boundary of the epoch \(a multiple of 4 up to 8, or 10\)"
    ):
        sampler.steps(0, 6)
    with pytest.raises(ValueError, match="position 12"):
        sampler.steps(0, 12)
    assert sampler.steps(0, 10) == [] and [step.samples for step in sampler.steps(0, 8)] == [2]


def test_a_training_set_of_one_sample_trains_it_every_epoch() -> None:
    sampler = GlobalBatchSampler(1, plan_batches(4, 1, 4), 0, seed=0)
    (step,) = sampler.steps(0, 0)
    assert [batch.tolist() for batch in step.micro_batches] == [[0]] and step.samples == 1


def test_an_empty_training_set_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^the training set is empty$"):
        GlobalBatchSampler(0, plan_batches(4, 1, 4), 0, seed=0)


@pytest.mark.parametrize("epoch", [1, 2])
def test_each_epoch_trains_in_the_order_seeded_with_the_seed_plus_the_epoch(epoch: int) -> None:
    """The order the module documents: a run resumed by another build of the trainer takes up the same one."""
    steps = GlobalBatchSampler(10, plan_batches(4, 1, 2), 0, seed=3).steps(epoch, 0)
    trained = [index for step in steps for batch in step.micro_batches for index in batch.tolist()]
    assert trained == torch.randperm(10, generator=torch.Generator().manual_seed(3 + epoch)).tolist()


def test_the_batches_are_on_the_device_asked_for() -> None:
    """The meta device stands for an accelerator: the indices go where the model is, whole and short steps alike."""
    steps = GlobalBatchSampler(10, plan_batches(4, 1, 2), 0, seed=0).steps(0, 0, device=torch.device("meta"))
    assert [step.samples for step in steps] == [4, 4, 2]
    assert {batch.device.type for step in steps for batch in step.micro_batches} == {"meta"}
