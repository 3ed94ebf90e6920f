"""Elastic-exact training: a run interrupted mid-epoch and resumed on another number of ranks makes the
optimizer steps of an uninterrupted run and, for the MLP in fp32, ends with its parameters (within 1e-4).

The interruption is a checkpoint of the uninterrupted run taken mid-epoch and resumed alone in a new
directory: the state a lost node leaves behind, at a step the test chooses rather than a race decides.
"""

import json
import shutil
from pathlib import Path

import pytest
import torch

from eks_ddp.trainer.outputs import load_model_file
from tests.conftest import read_summary, run_trainer

pytestmark = pytest.mark.slow

GLOBAL_BATCH = 64
INTERRUPTED_AT = 30
RUN = [
    "train",
    "--dataset",
    "digits",
    "--model",
    "mlp",
    "--precision",
    "fp32",
    "--epochs",
    "3",
    "--seed",
    "7",
    "--checkpoint-every",
    "5",
    "--keep-checkpoints",
    "100",
    "--run-name",
    "resize",
]


def _train(output: Path, batch_size: int, ranks: int) -> dict[str, object]:
    result = run_trainer(
        [*RUN, "--batch-size", str(batch_size), "--output-dir", str(output)], nproc=ranks if ranks > 1 else None
    )
    assert result.returncode == 0, result.stderr
    return read_summary(output)


def _parameters(output: Path) -> dict[str, torch.Tensor]:
    return load_model_file(output / "model.pt")["state_dict"]


@pytest.mark.parametrize(("ranks_before", "ranks_after"), [(2, 1), (1, 2)])
def test_a_resize_mid_epoch_ends_where_the_uninterrupted_run_ends(
    tmp_path: Path, ranks_before: int, ranks_after: int
) -> None:
    batch_size = GLOBAL_BATCH // ranks_before  # the flag the run was started with, as a rerun of the same job passes it
    uninterrupted = _train(tmp_path / "uninterrupted", batch_size, ranks_before)
    steps_per_epoch = int(uninterrupted["steps"]) // 3  # type: ignore[call-overload]
    assert INTERRUPTED_AT % steps_per_epoch, "the interruption must fall mid-epoch"

    resumed_dir = tmp_path / "resumed"
    (resumed_dir / "checkpoints").mkdir(parents=True)
    for suffix in (".pt", ".json"):
        name = f"step-{INTERRUPTED_AT:09d}{suffix}"
        shutil.copy(tmp_path / "uninterrupted" / "checkpoints" / name, resumed_dir / "checkpoints" / name)
    manifest = json.loads((resumed_dir / "checkpoints" / f"step-{INTERRUPTED_AT:09d}.json").read_text())
    assert manifest["step"] == INTERRUPTED_AT
    resumed = _train(resumed_dir, batch_size, ranks_after)

    assert resumed["resumed_from_step"] == INTERRUPTED_AT and resumed["world_size"] == ranks_after
    assert resumed["global_batch_size"] == uninterrupted["global_batch_size"] == GLOBAL_BATCH
    assert resumed["steps"] == uninterrupted["steps"]
    expected_accumulation = 2 if ranks_after < ranks_before else 1
    assert resumed["gradient_accumulation_steps"] == expected_accumulation
    before, after = _parameters(tmp_path / "uninterrupted"), _parameters(resumed_dir)
    difference = max(float((before[name] - after[name]).abs().max()) for name in before)
    print(
        f"{ranks_before}->{ranks_after} ranks at step {INTERRUPTED_AT}: {resumed['steps']} steps, max |dparam| {difference:.2e}"
    )
    assert difference < 1e-4
