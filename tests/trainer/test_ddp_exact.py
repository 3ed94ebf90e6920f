"""DDP is exact: 2 ranks with batch B/2 each take the same steps as 1 rank with batch B."""

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from eks_ddp.trainer import models
from eks_ddp.trainer.checkpoint import decode
from tests.conftest import run_trainer

pytestmark = pytest.mark.slow

STEP = 20


def _train(output: Path, batch_size: int, nproc: int | None) -> None:
    """Trains one epoch, logging every 5 steps and checkpointing every STEP and at the end."""
    args = [
        "train",
        "--dataset",
        "digits",
        "--model",
        "mlp",
        "--precision",
        "fp32",
        "--epochs",
        "1",
        "--batch-size",
        str(batch_size),
        "--checkpoint-every",
        str(STEP),
        "--seed",
        "7",
        "--output-dir",
        str(output),
        "--log-every",
        "5",
    ]
    result = run_trainer(args, nproc=nproc)
    assert result.returncode == 0, result.stderr


Pair = Callable[[int], tuple[Path, Path]]
"""The one-rank and the two-rank run of a global batch."""
ON_THE_PAIR_OF_32 = pytest.mark.xdist_group("test_ddp_exact.pair-32")
"""On the worker that trained the pair: `make test`'s workers (--dist loadgroup) would each train their own."""


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    """One rank with the global batch and two ranks with half of it each, trained once for all the tests that
    compare them."""
    trained: dict[int, tuple[Path, Path]] = {}

    def runs(global_batch: int) -> tuple[Path, Path]:
        if global_batch not in trained:
            directory = tmp_path_factory.mktemp(f"global-batch-{global_batch}")
            _train(directory / "one-rank", batch_size=global_batch, nproc=None)
            _train(directory / "two-ranks", batch_size=global_batch // 2, nproc=2)
            trained[global_batch] = directory / "one-rank", directory / "two-ranks"
        return trained[global_batch]

    return runs


def _parameters(output: Path, step: int) -> dict[str, torch.Tensor]:
    return decode((output / "checkpoints" / f"step-{step:09d}.pt").read_bytes())["model"]


def _difference(single: dict[str, torch.Tensor], double: dict[str, torch.Tensor]) -> float:
    assert single.keys() == double.keys()
    return max(float((single[name] - double[name]).abs().max()) for name in single)


@pytest.mark.parametrize(
    ("global_batch", "steps"),
    # digits' 1,437 images: a last step of 29, shared 15 and 14; of 1, rank 1 gets none
    [pytest.param(32, 45, marks=ON_THE_PAIR_OF_32), (4, 360)],
)
def test_two_ranks_with_half_batches_match_one_rank(pair: Pair, global_batch: int, steps: int) -> None:
    one_rank, two_ranks = pair(global_batch)
    mid_epoch = steps // STEP * STEP  # the last periodic checkpoint: the newest three are kept
    for step in (mid_epoch, steps):  # and after the epoch's short last step
        difference = _difference(_parameters(one_rank, step), _parameters(two_ranks, step))
        assert difference < 1e-4, f"step {step}"
        print(f"max abs parameter difference after {step} steps: {difference:.2e}")
    torch.manual_seed(7)
    initial = models.build("mlp", (1, 8, 8), 10).state_dict()
    travelled = _difference(_parameters(one_rank, mid_epoch), initial)
    assert travelled > 100 * 1e-4, "the runs must have trained for the comparison to mean anything"


def _logged_losses(output: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (output / "metrics.jsonl").read_text().splitlines()]


@ON_THE_PAIR_OF_32
def test_the_logged_loss_is_the_mean_over_ranks(pair: Pair) -> None:
    """Each rank's loss is the mean over its half of the batch, so the mean over the 2 ranks is the loss of
    the 1-rank run over the whole batch; rank 0's alone (as once logged) is not."""
    single, double = (_logged_losses(output) for output in pair(32))
    assert len(single) == len(double) >= 4
    assert max(abs(a - b) for a, b in zip(single, double, strict=True)) < 1e-4
