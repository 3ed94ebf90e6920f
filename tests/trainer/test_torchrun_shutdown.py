"""torchrun's shutdown timer, for real: the pod's grace period only helps if torchrun waits that long.

torchrun forwards SIGTERM to its workers and SIGKILLs them TORCH_ELASTIC_SHUTDOWN_TIMEOUT seconds
later (30 by default; torch/distributed/elastic/multiprocessing/api.py in torch 2.13). The trainer
runs under torchrun with checkpoint writes that take 32 s once the signal is near (a slow shared file
system, simulated by a `sitecustomize` that wraps the trainer's atomic write): the default timer cuts
the SIGTERM checkpoint off, the value the PyTorchJob's pods get lets it finish, and the next run
resumes from it.
"""

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from eks_ddp.workloads.training_pod import WORKER_SHUTDOWN_SECONDS
from tests.conftest import (
    FROZEN_TORCHRUN,
    ROOT,
    TRAINER_MODULE,
    free_port,
    read_summary,
    run_trainer,
    trainer_env,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("torchrun_shutdown_timers")]
"""One after the other on one worker (make test's --dist loadgroup): each waits out a ~30 s timer, and the two waiting
at once, beside the cluster tests' own waits, left the 2 cores 40-75 % idle for half a minute in every run."""
SLOW_CHECKPOINT_SECONDS = 32
SLOW_WRITES = f"""
import os, time
from pathlib import Path

from eks_ddp.trainer.startup import frozen_imports

with frozen_imports():  # torch's import, frozen as the trainer's own (this runs first, in every process)
    import eks_ddp.trainer.checkpoint as checkpoint

_write = checkpoint.write_atomically


def _slow_once_signalled(path, data):
    if Path(os.environ["SLOW_CHECKPOINTS_AFTER"]).exists() and path.suffix == ".pt":
        time.sleep({SLOW_CHECKPOINT_SECONDS})  # a checkpoint write on a slow shared file system
    _write(path, data)


checkpoint.write_atomically = _slow_once_signalled
"""
ARGS = [
    "train",
    "--dataset",
    "digits",
    "--epochs",
    "4",
    "--batch-size",
    "16",
    "--seed",
    "3",
    "--checkpoint-every",
    "40",
]


def _terminate_during_a_slow_checkpoint(tmp_path: Path, shutdown_timeout: str | None) -> tuple[int | None, int]:
    """Train under torchrun and SIGTERM it after its first checkpoint; returns the step the SIGTERM checkpoint
    was written at (None if it was cut off) and the step the next run resumes from. That run is one process: rank 0
    alone chooses the checkpoint, and torchrun and a second rank would add 5 CPU-seconds."""
    hooks, marker, output = tmp_path / "hooks", tmp_path / "signalled", tmp_path / "run"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SLOW_WRITES)
    env = {key: value for key, value in trainer_env().items() if key != "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"}
    env.update(PYTHONPATH=f"{hooks}:{ROOT}", SLOW_CHECKPOINTS_AFTER=str(marker))
    if shutdown_timeout is not None:
        env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] = shutdown_timeout
    command = [*FROZEN_TORCHRUN, "--standalone", "--nproc-per-node", "2", "--master-port", str(free_port()), "-m", TRAINER_MODULE]
    torchrun = subprocess.Popen(
        [*command, *ARGS, "--output-dir", str(output)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list((output / "checkpoints").glob("step-*.json")):
        assert time.monotonic() < deadline and torchrun.poll() is None, "no checkpoint before the signal"
        time.sleep(0.05)
    marker.write_text("")
    torchrun.send_signal(signal.SIGTERM)  # what the kubelet sends the pod's PID 1
    _, stderr = torchrun.communicate(timeout=3 * SLOW_CHECKPOINT_SECONDS + 120)
    stopped = re.search(r"\[rank 0\] stopped by signal at step (\d+); checkpoint written", stderr)
    assert not (output / "summary.json").exists(), "the run ended before the signal"

    resumed = run_trainer([*ARGS, "--output-dir", str(output)])
    assert resumed.returncode == 0, resumed.stderr
    return (int(stopped.group(1)) if stopped else None), int(read_summary(output)["resumed_from_step"])


def test_the_default_timer_cuts_the_sigterm_checkpoint_off(tmp_path: Path) -> None:
    """Killed mid-write: the next run falls back to the checkpoint before the signal."""
    written, resumed = _terminate_during_a_slow_checkpoint(tmp_path, None)
    assert written is None and resumed >= 40


def test_the_pods_timer_lets_it_finish_and_the_next_run_resumes_from_it(tmp_path: Path) -> None:
    assert WORKER_SHUTDOWN_SECONDS > SLOW_CHECKPOINT_SECONDS
    written, resumed = _terminate_during_a_slow_checkpoint(tmp_path, str(WORKER_SHUTDOWN_SECONDS))
    assert written is not None and resumed == written
