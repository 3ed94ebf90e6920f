"""Helpers to run the trainer for real: as a subprocess, alone or under torchrun."""

import gc
import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from eks_ddp.trainer.startup import IMPORT_THRESHOLD, freeze_imports
from eks_ddp.workloads.training_pod import TRAINER_MODULE

ROOT = Path(__file__).resolve().parent.parent
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
"""The script itself: what a pod's command runs (tests/trainer/test_multinode.py)."""
FROZEN_TORCHRUN = [sys.executable, "-m", "tests.trainer.torchrun"]
"""Its main with its imports frozen (tests/trainer/torchrun.py): what the other trainer tests launch."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def trainer_command(args: list[str], nproc: int | None) -> list[str]:
    """`python -m eks_ddp.trainer ...` alone, or under `torchrun --standalone` with `nproc` ranks."""
    if nproc is None:
        return [sys.executable, "-m", TRAINER_MODULE, *args]
    return [*FROZEN_TORCHRUN, "--standalone", "--nproc-per-node", str(nproc), "--master-port", str(free_port()), "-m", TRAINER_MODULE, *args]


def trainer_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run_trainer(args: list[str], nproc: int | None = None, timeout: float = 300) -> Result:
    completed = subprocess.run(trainer_command(args, nproc), env=trainer_env(), cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return Result(completed.returncode, completed.stdout, completed.stderr)


def read_summary(output_dir: Path) -> dict[str, Any]:
    return json.loads((output_dir / "summary.json").read_text())


@pytest.fixture(scope="session")
def mnist_subset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from benchmarks.mnist_subset import write_mnist_subset

    return write_mnist_subset(tmp_path_factory.mktemp("mnist-subset"))


def pytest_collection_finish(session: pytest.Session) -> None:
    """The collector skips the SDKs the tests imported, and runs rarely: the suite runs Pulumi programs by the hundred,
    each making millions of short-lived objects (a third less CPU for them here; see eks_ddp.trainer.startup)."""
    freeze_imports()
    gc.set_threshold(IMPORT_THRESHOLD, *gc.get_threshold()[1:])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The `slow` tests (real torchrun runs, tens of seconds each) first, so that with several workers
    (`make test`) no long test starts last and runs alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


from tests.pulumi_harness import pulumi_mocks  # noqa: E402,F401  (the fixture, for tests/infra, tests/workloads and tests/stack)
