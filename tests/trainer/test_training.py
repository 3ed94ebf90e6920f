"""The trainer for real: torchrun with two gloo ranks on the CPU, real files."""

import fcntl
import json
import os
import pty
import struct
import subprocess
import termios
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.conftest import ROOT, Result, read_summary, run_trainer, trainer_command, trainer_env

pytestmark = pytest.mark.slow
ON_THE_TWO_RANK_RUN = pytest.mark.xdist_group("test_training.two_rank_run")
"""On the worker that has the run: `make test`'s workers (--dist loadgroup) would each train their own copy."""


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("two-ranks") / "OUT"
    result = run_trainer(["train", "--dataset", "digits", "--epochs", "10", "--output-dir", str(output)], nproc=2)
    assert result.returncode == 0, result.stderr
    return output


@ON_THE_TWO_RANK_RUN
def test_two_ranks_reach_97_percent_on_digits(two_rank_run: Path) -> None:
    summary = read_summary(two_rank_run)
    assert summary["world_size"] == 2
    assert summary["test_accuracy"] >= 0.97
    assert summary["epochs"] == 10 and summary["resumed_from_step"] == 0
    assert summary["images_per_second"] > 0 and summary["wall_seconds"] > 0
    assert [record["epoch"] for record in summary["history"]] == list(range(1, 11))


@ON_THE_TWO_RANK_RUN
def test_outputs_are_complete(two_rank_run: Path) -> None:
    assert (two_rank_run / "training-curves.png").read_bytes().startswith(b"\x89PNG")
    lines = [json.loads(line) for line in (two_rank_run / "metrics.jsonl").read_text().splitlines()]
    assert lines and all(set(line) == {"step", "epoch", "loss", "learning_rate", "images_per_second"} for line in lines)
    steps = [line["step"] for line in lines]
    assert steps == sorted(set(steps))  # each step once: rank 0 alone writes the run's log ...
    events = EventAccumulator(str(two_rank_run / "tensorboard"))
    events.Reload()
    assert [event.step for event in events.Scalars("train/loss")] == steps  # ... and its TensorBoard events
    import torch

    model = torch.load(two_rank_run / "model.pt", weights_only=True)
    assert model["metadata"]["dataset"] == "digits" and model["metadata"]["model"] == "small-cnn"
    assert model["metadata"]["classes"] == [str(digit) for digit in range(10)] and model["metadata"]["epochs"] == 10


@ON_THE_TWO_RANK_RUN
def test_evaluate_reports_per_class_accuracy_like_the_workshop(two_rank_run: Path) -> None:
    report = two_rank_run / "evaluation.json"
    result = run_trainer(["evaluate", "--model-file", str(two_rank_run / "model.pt"), "--json", str(report)])
    assert result.returncode == 0, result.stderr
    assert "Accuracy of the network on the 360 test images:" in result.stdout
    assert result.stdout.count("Accuracy for class: ") == 10
    document = json.loads(report.read_text())
    assert document["accuracy"] == pytest.approx(read_summary(two_rank_run)["test_accuracy"], abs=1e-9)
    assert sum(map(sum, document["confusion_matrix"])) == 360
    assert (two_rank_run / "confusion-matrix.png").read_bytes().startswith(b"\x89PNG")


ON_THE_ONE_PROCESS_RUN = pytest.mark.xdist_group("test_training.one_process_run")
"""On the worker that has the run: `make test`'s workers (--dist loadgroup) would each train their own copy."""


@pytest.fixture(scope="module")
def one_process_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    """A 2-epoch run in one process, its stderr a pipe: the single-process test and the progress bar's other half."""
    output = tmp_path_factory.mktemp("one-process")
    return output, run_trainer(["train", "--epochs", "2", "--output-dir", str(output)])


@ON_THE_ONE_PROCESS_RUN
def test_single_process_without_torchrun(one_process_run: tuple[Path, Result]) -> None:
    output, result = one_process_run
    assert result.returncode == 0, result.stderr
    summary = read_summary(output)
    assert summary["world_size"] == 1 and summary["test_accuracy"] > 0.8


def test_mnist_subset_trains_through_the_idx_path(mnist_subset: Path, tmp_path: Path) -> None:
    """In one process: the data path is the subject, how ranks share a dataset the two-rank runs' (16 CPU-seconds here
    instead of 21 under torchrun with 2 ranks, for the same test accuracy after 3 epochs, 0.969)."""
    result = run_trainer(["train", "--dataset", "mnist", "--data-dir", str(mnist_subset), "--epochs", "3", "--output-dir", str(tmp_path)])
    assert result.returncode == 0, result.stderr
    assert read_summary(tmp_path)["test_accuracy"] > 0.95


@ON_THE_TWO_RANK_RUN
def test_rerun_after_completion_resumes_and_trains_nothing(two_rank_run: Path, tmp_path: Path) -> None:
    output = tmp_path / "again"
    args = ["train", "--epochs", "10", "--output-dir", str(output), "--checkpoint-dir", str(two_rank_run / "checkpoints"), "--run-name", str(two_rank_run.resolve())]
    result = run_trainer(args, nproc=2)
    assert result.returncode == 0, result.stderr
    summary = read_summary(output)
    assert summary["resumed_from_step"] == read_summary(two_rank_run)["steps"]
    assert summary["images_trained"] == 0
    assert summary["test_accuracy"] == read_summary(two_rank_run)["test_accuracy"]


def test_compile_flag_trains(tmp_path: Path) -> None:
    result = run_trainer(["train", "--model", "mlp", "--epochs", "2", "--compile", "--output-dir", str(tmp_path)])
    assert result.returncode == 0, result.stderr
    assert read_summary(tmp_path)["test_accuracy"] > 0.8


@ON_THE_ONE_PROCESS_RUN
def test_progress_bar_on_a_terminal_and_log_lines_otherwise(
    tmp_path: Path, one_process_run: tuple[Path, Result]
) -> None:
    args = ["train", "--epochs", "1", "--output-dir", str(tmp_path)]
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a real terminal has a width
    process = subprocess.Popen(trainer_command(args, None), env=trainer_env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=terminal)
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the trainer closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    assert process.wait(timeout=120) == 0
    shown = b"".join(chunks).decode(errors="replace")
    assert "epoch 1/1:" in shown and "img/s" in shown and "\r" in shown  # a tqdm bar redrawn in place
    assert "step 10 loss" not in shown

    piped = one_process_run[1]
    assert "epoch 1/2 step 10 loss" in piped.stderr and "\r" not in piped.stderr


def test_evaluate_regenerates_the_synthetic_data_the_model_saw(tmp_path: Path) -> None:
    args = ["train", "--dataset", "synthetic", "--synthetic-shape", "1x16x16", "--synthetic-size", "600", "--synthetic-classes", "4",
            "--seed", "5", "--epochs", "3", "--output-dir", str(tmp_path)]
    assert run_trainer(args).returncode == 0
    report = tmp_path / "evaluation.json"
    result = run_trainer(["evaluate", "--model-file", str(tmp_path / "model.pt"), "--json", str(report)])
    assert result.returncode == 0, result.stderr
    assert json.loads(report.read_text())["accuracy"] == pytest.approx(read_summary(tmp_path)["test_accuracy"], abs=1e-9)
