"""torchrun's shutdown timer, for real: the pod's grace period only helps if torchrun waits that long.

torchrun forwards SIGTERM to its workers and SIGKILLs them TORCH_ELASTIC_SHUTDOWN_TIMEOUT seconds
later (30 by default). A worker whose SIGTERM work (the checkpoint) takes 32 s is cut off by the
default and finishes with the value the PyTorchJob's pods get.
"""

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import TORCHRUN, free_port, trainer_env
from workloads.pytorchjob import WORKER_SHUTDOWN_SECONDS

pytestmark = pytest.mark.slow
SLOW_CHECKPOINT_SECONDS = 32
WORKER = f"""
import signal, sys, time
from pathlib import Path

def on_term(signum, frame):
    time.sleep({SLOW_CHECKPOINT_SECONDS})  # a checkpoint write on a slow shared file system
    Path(sys.argv[1]).write_text("complete")
    sys.exit(143)

signal.signal(signal.SIGTERM, on_term)
Path(sys.argv[1] + ".ready").write_text("")
while True:
    time.sleep(0.1)
"""


def _terminate_torchrun(tmp_path: Path, shutdown_timeout: str | None) -> bool:
    script, marker = tmp_path / "worker.py", tmp_path / "checkpoint"
    script.write_text(WORKER)
    env = {key: value for key, value in trainer_env().items() if key != "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"}
    if shutdown_timeout is not None:
        env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] = shutdown_timeout
    command = [TORCHRUN, "--standalone", "--nproc-per-node", "1", "--master-port", str(free_port()), str(script), str(marker)]
    torchrun = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not Path(f"{marker}.ready").exists():
        assert time.monotonic() < deadline and torchrun.poll() is None, "the worker never started"
        time.sleep(0.1)
    torchrun.send_signal(signal.SIGTERM)  # what the kubelet sends the pod's PID 1
    torchrun.wait(timeout=SLOW_CHECKPOINT_SECONDS + 60)
    return marker.exists()


def test_the_default_timer_cuts_a_slow_checkpoint_off(tmp_path: Path) -> None:
    assert not _terminate_torchrun(tmp_path, None)


def test_the_pods_timer_lets_it_finish(tmp_path: Path) -> None:
    assert WORKER_SHUTDOWN_SECONDS > SLOW_CHECKPOINT_SECONDS
    assert _terminate_torchrun(tmp_path, str(WORKER_SHUTDOWN_SECONDS))
