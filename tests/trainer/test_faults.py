"""Node loss without lost work: SIGKILL, SIGTERM and a truncated checkpoint, for real."""

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from eks_ddp.trainer.interrupt import RETRYABLE_EXIT_CODE
from tests.conftest import read_summary, run_trainer
from tests.trainer.launch import start, wait_for_checkpoint

pytestmark = pytest.mark.slow

# Small batches make 180 steps: after the step-40 checkpoint, 140 steps (a second or more) to interrupt in.
ARGS = ["train", "--dataset", "digits", "--epochs", "4", "--batch-size", "16", "--seed", "3", "--checkpoint-every", "40", "--log-every", "5"]


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(child) for child in found]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    output = tmp_path_factory.mktemp("uninterrupted")
    result = run_trainer([*ARGS, "--output-dir", str(output)], nproc=2)
    assert result.returncode == 0, result.stderr
    return read_summary(output)


def test_sigkill_of_one_rank_resumes_from_the_checkpoint(uninterrupted: dict[str, object], tmp_path: Path) -> None:
    args = [*ARGS, "--output-dir", str(tmp_path)]
    launcher = start(args, nproc=2)
    wait_for_checkpoint(tmp_path / "checkpoints", launcher)
    victim = _children(launcher.pid)[-1]
    os.kill(victim, signal.SIGKILL)
    launcher.communicate(timeout=120)
    assert launcher.returncode != 0, "the job should fail when a rank dies"
    assert not (tmp_path / "summary.json").exists()

    result = run_trainer(args, nproc=2)
    assert result.returncode == 0, result.stderr
    summary = read_summary(tmp_path)
    print(f"resumed from step {summary['resumed_from_step']}; accuracy {summary['test_accuracy']} vs uninterrupted {uninterrupted['test_accuracy']}")
    assert summary["resumed_from_step"] > 0
    assert summary["steps"] == uninterrupted["steps"]
    assert abs(float(summary["test_accuracy"]) - float(uninterrupted["test_accuracy"])) <= 0.005  # type: ignore[arg-type]


def test_sigterm_checkpoints_and_exits_retryable(tmp_path: Path) -> None:
    args = [*ARGS, "--output-dir", str(tmp_path)]
    trainer = start(args, nproc=None)
    checkpoints = tmp_path / "checkpoints"
    wait_for_checkpoint(checkpoints, trainer)
    trainer.send_signal(signal.SIGTERM)
    _, stderr = trainer.communicate(timeout=120)
    assert trainer.returncode == RETRYABLE_EXIT_CODE, stderr
    assert "checkpoint written; exiting with 143 so the job is retried" in stderr
    stopped = re.search(r"stopped by signal at step (\d+)", stderr)
    assert stopped is not None, stderr
    stopped_at = int(stopped.group(1))
    assert sorted(checkpoints.glob("step-*.json"))[-1].name == f"step-{stopped_at:09d}.json"

    result = run_trainer(args)
    assert result.returncode == 0, result.stderr
    assert read_summary(tmp_path)["resumed_from_step"] == stopped_at


def test_truncated_newest_checkpoint_falls_back_to_the_previous(tmp_path: Path) -> None:
    args = ["train", "--epochs", "1", "--batch-size", "16", "--checkpoint-every", "20", "--output-dir", str(tmp_path)]
    assert run_trainer(args).returncode == 0
    checkpoints = sorted((tmp_path / "checkpoints").glob("step-*.pt"))
    newest, previous = checkpoints[-1], checkpoints[-2]
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])

    result = run_trainer(args)  # the same run: it falls back to the previous checkpoint and trains the rest
    assert result.returncode == 0, result.stderr
    assert f"checkpoint {newest} is corrupt or truncated" in result.stderr
    assert read_summary(tmp_path)["resumed_from_step"] == int(previous.stem.split("-")[1])


ON_THE_SIGNALLED_RUN = pytest.mark.xdist_group("test_faults.signalled_under_torchrun")
"""On the worker that has the run: `make test`'s workers (--dist loadgroup) would each train their own copy."""


@pytest.fixture(scope="module")
def signalled_under_torchrun(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The stderr of 2 ranks under torchrun, SIGTERMed as the kubelet signals the pod's PID 1 once the step-10
    checkpoint exists: one 128-step epoch with no log line in it, so only each step's stop vote can stop the ranks
    together and soon. Signalled once for the tests of how the ranks heed the signal."""
    output = tmp_path_factory.mktemp("signalled")
    args = [
        "train", "--dataset", "synthetic", "--synthetic-size", "4096", "--batch-size", "16", "--epochs", "1",
        "--log-every", "1000", "--checkpoint-every", "10", "--output-dir", str(output),
    ]
    launcher = start(args, nproc=2)
    wait_for_checkpoint(output / "checkpoints", launcher)
    launcher.send_signal(signal.SIGTERM)
    return launcher.communicate(timeout=120)[1]


@ON_THE_SIGNALLED_RUN
def test_sigterm_under_torchrun_stops_every_rank_at_the_same_step(signalled_under_torchrun: str) -> None:
    stderr = signalled_under_torchrun
    assert "[rank 0] stopped by signal" in stderr and "[rank 1] stopped by signal" in stderr
    steps = {line.split("stopped by signal ")[1].split(";")[0] for line in stderr.splitlines() if "stopped by signal" in line}
    assert len(steps) == 1, stderr


@ON_THE_SIGNALLED_RUN
def test_sigterm_is_heeded_within_steps_not_at_the_next_log_line_or_epoch_end(signalled_under_torchrun: str) -> None:
    """The pod has a grace period, not an epoch: every rank checks the stop flag on every step."""
    stderr = signalled_under_torchrun
    steps = {int(step) for step in re.findall(r"\[rank \d\] stopped by signal at step (\d+)", stderr)}
    assert len(steps) == 1, stderr
    assert 10 < steps.pop() < 64, "stopped long after the signal"
