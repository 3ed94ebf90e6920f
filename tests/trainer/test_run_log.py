"""TensorBoard events and metrics.jsonl: the expected scalars, read back with TensorBoard's own reader,
and each step once after a resume (the cut-off run's later lines and events are dropped).

In one process: rank 0 alone writes the run's log (test_training's two-rank run checks that its log holds each
step once), so a second rank and torchrun would only add their start-up (about 10 CPU-seconds for the two runs)."""

import json
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.conftest import read_summary, run_trainer

pytestmark = pytest.mark.slow

ARGS = ["train", "--dataset", "digits", "--epochs", "3", "--batch-size", "32", "--log-every", "5",
        "--checkpoint-every", "20"]
INTERVAL_TAGS = {"train/loss", "train/learning_rate", "train/images_per_second"}
EPOCH_TAGS = {"epoch/train_loss", "epoch/test_accuracy"}


def _scalars(output: Path) -> dict[str, list[int]]:
    events = EventAccumulator(str(output / "tensorboard"))
    events.Reload()
    return {tag: [event.step for event in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def _metric_steps(output: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (output / "metrics.jsonl").read_text().splitlines()]


def test_events_hold_the_expected_scalars_and_a_resume_repeats_no_step(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = run_trainer([*ARGS, "--output-dir", str(out)])
    assert first.returncode == 0, first.stderr
    scalars, steps = _scalars(out), _metric_steps(out)
    assert set(scalars) == INTERVAL_TAGS | EPOCH_TAGS
    assert scalars["train/loss"] == steps and len(scalars["epoch/test_accuracy"]) == 3
    final = read_summary(out)["steps"]

    # Cut the run off: keep only the first checkpoint, as if the pod died long after it.
    checkpoints = sorted((out / "checkpoints").glob("step-*.json"))
    for manifest in checkpoints[1:]:
        manifest.unlink()
        manifest.with_suffix(".pt").unlink()
    resumed = run_trainer([*ARGS, "--output-dir", str(out)])
    assert resumed.returncode == 0, resumed.stderr
    assert 0 < read_summary(out)["resumed_from_step"] < final
    steps, scalars = _metric_steps(out), _scalars(out)
    assert steps == sorted(set(steps)) and steps[-1] == final - final % 5  # each step once, to the end
    for tag in INTERVAL_TAGS:
        assert scalars[tag] == steps, tag
    assert len(scalars["epoch/test_accuracy"]) == 3
