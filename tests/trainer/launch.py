"""A trainer launched in the background, as a pod's container is, to be signalled while it trains."""

import subprocess
import time
from pathlib import Path

from tests.conftest import ROOT, trainer_command, trainer_env


def start(args: list[str], nproc: int | None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        trainer_command(args, nproc),
        env=trainer_env(),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_checkpoint(checkpoints: Path, process: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not list(checkpoints.glob("step-*.json")):
        assert process.poll() is None, "the trainer ended before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint within the timeout"
        time.sleep(0.01)
