import pytest
import torch
from torch.utils.data import DistributedSampler

from trainer.sampling import ResumableDistributedSampler


@pytest.mark.parametrize(("size", "world"), [(10, 1), (11, 2), (1437, 2), (7, 3)])
def test_position_zero_is_exactly_distributed_sampler(size: int, world: int) -> None:
    for rank in range(world):
        ours = ResumableDistributedSampler(size, world, rank, seed=5)
        stock = DistributedSampler(range(size), num_replicas=world, rank=rank, shuffle=True, seed=5)  # type: ignore[arg-type]
        for epoch in (0, 3):
            ours.set_epoch(epoch)
            stock.set_epoch(epoch)
            assert list(ours) == list(stock)
            assert len(ours) == len(stock)


def _global_order(size: int, seed: int, epoch: int) -> list[int]:
    generator = torch.Generator()
    generator.manual_seed(seed + epoch)
    return torch.randperm(size, generator=generator).tolist()


@pytest.mark.parametrize(("world_before", "world_after"), [(2, 2), (2, 4), (4, 1)])
def test_resuming_mid_epoch_repeats_and_skips_nothing(world_before: int, world_after: int) -> None:
    size, batch, seed, epoch = 96, 4, 1, 2
    batches_done = 3
    seen: list[int] = []
    for rank in range(world_before):
        sampler = ResumableDistributedSampler(size, world_before, rank, seed)
        sampler.set_epoch(epoch)
        seen += sampler.indices()[: batches_done * batch].tolist()
    position = batches_done * batch * world_before
    for rank in range(world_after):
        sampler = ResumableDistributedSampler(size, world_after, rank, seed)
        sampler.set_epoch(epoch)
        sampler.set_position(position)
        seen += sampler.indices().tolist()
    assert sorted(seen) == list(range(size))
    assert set(seen[:position]) == set(_global_order(size, seed, epoch)[:position])


@pytest.mark.parametrize(("size", "world", "batch"), [(1437, 2, 16), (101, 3, 4), (10, 4, 1)])
def test_same_world_size_resumes_with_the_uninterrupted_batches(size: int, world: int, batch: int) -> None:
    """Padding included: the tail after a resume is exactly what an uninterrupted run trains on."""
    batches_done = (size // world // batch) - 1
    for rank in range(world):
        uninterrupted = ResumableDistributedSampler(size, world, rank, seed=2)
        uninterrupted.set_epoch(1)
        resumed = ResumableDistributedSampler(size, world, rank, seed=2)
        resumed.set_epoch(1)
        resumed.set_position(batches_done * batch * world)
        assert torch.equal(resumed.indices(), uninterrupted.indices()[batches_done * batch :])


def test_position_outside_the_epoch_is_refused() -> None:
    sampler = ResumableDistributedSampler(10, 4, 0, seed=0)
    with pytest.raises(ValueError, match=r"position 13 is outside the epoch \(0..12\)"):
        sampler.set_position(13)
