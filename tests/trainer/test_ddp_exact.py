"""DDP is exact: 2 ranks with batch B/2 each take the same steps as 1 rank with batch B."""

from pathlib import Path

import pytest
import torch

from tests.conftest import run_trainer
from trainer import models
from trainer.checkpoint import decode

pytestmark = pytest.mark.slow

STEP = 20


def _parameters_at_step(output: Path, batch_size: int, nproc: int | None) -> dict[str, torch.Tensor]:
    args = [
        "train", "--dataset", "digits", "--model", "mlp", "--precision", "fp32", "--epochs", "1",
        "--batch-size", str(batch_size), "--checkpoint-every", str(STEP), "--seed", "7", "--output-dir", str(output),
    ]
    result = run_trainer(args, nproc=nproc)
    assert result.returncode == 0, result.stderr
    payload = (output / "checkpoints" / f"step-{STEP:09d}.pt").read_bytes()
    return decode(payload)["model"]


def test_two_ranks_with_half_batches_match_one_rank(tmp_path: Path) -> None:
    single = _parameters_at_step(tmp_path / "one-rank", batch_size=32, nproc=None)
    double = _parameters_at_step(tmp_path / "two-ranks", batch_size=16, nproc=2)
    assert single.keys() == double.keys()
    difference = max(float((single[name] - double[name]).abs().max()) for name in single)
    assert difference < 1e-4
    print(f"max abs parameter difference after {STEP} steps: {difference:.2e}")
    torch.manual_seed(7)
    initial = models.build("mlp", (1, 8, 8), 10).state_dict()
    travelled = max(float((single[name] - initial[name]).abs().max()) for name in single)
    assert travelled > 100 * 1e-4, "the runs must have trained for the comparison to mean anything"
