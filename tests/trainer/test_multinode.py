"""DDP across two real network hosts: network namespaces joined by a veth pair.

Each "node" gets the environment a static PyTorchJob gives its Master and Worker
pods (MASTER_ADDR = the Master host's address, PET_NNODES, PET_NODE_RANK, ...)
and runs the container's command, `torchrun -m trainer train ...`. Only the
namespaces' own private addresses are used. Needs root on Linux (CI here is).
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, TORCHRUN, TRAINER_MODULE, read_summary, run_trainer, trainer_env

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0 or shutil.which("ip") is None,
                       reason="needs root on Linux with iproute2 to create network namespaces"),
]

MASTER_IP, WORKER_IP, PORT = "10.231.0.1", "10.231.0.2", 23456  # the operator's MASTER_PORT; +1 per attempt
ARGS = ["train", "--dataset", "digits", "--epochs", "3", "--batch-size", "16", "--seed", "11", "--checkpoint-every", "40", "--log-every", "20", "--timeout-minutes", "1"]


@dataclass(frozen=True)
class Hosts:
    master: str
    worker: str


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    suffix = str(os.getpid())
    pair = Hosts(f"eksddp-master-{suffix}", f"eksddp-worker-{suffix}")
    try:
        _ip("netns", "add", pair.master)
        _ip("netns", "add", pair.worker)
        _ip("link", "add", "name", "eth0", "netns", pair.master, "type", "veth", "peer", "name", "eth0", "netns", pair.worker)
        for namespace, address in ((pair.master, MASTER_IP), (pair.worker, WORKER_IP)):
            _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", namespace, "link", "set", "lo", "up")
            _ip("-n", namespace, "link", "set", "eth0", "up")
        yield pair
    finally:
        for namespace in (pair.master, pair.worker):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def _node(namespace: str, rank: int, output: Path, port: int) -> subprocess.Popen[str]:
    """What the operator runs in the pod of `rank`: the container command with PET_* variables."""
    env = {
        **trainer_env(), "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "eth0",
        "MASTER_ADDR": MASTER_IP, "MASTER_PORT": str(port), "WORLD_SIZE": "2", "RANK": str(rank),
        "PET_MASTER_ADDR": MASTER_IP, "PET_MASTER_PORT": str(port), "PET_NNODES": "2", "PET_NODE_RANK": str(rank), "PET_NPROC_PER_NODE": "1",
    }
    command = ["ip", "netns", "exec", namespace, TORCHRUN, "-m", TRAINER_MODULE, *ARGS, "--output-dir", str(output)]
    return subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _kill_host(namespace: str) -> None:
    """Every process on the host dies at once (torchrun and its trainer), as when a node is lost."""
    pids = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _run_both(hosts: Hosts, output: Path, attempt: int) -> tuple[subprocess.Popen[str], subprocess.Popen[str]]:
    """A fresh port per attempt: the previous rendezvous port may linger in TIME_WAIT."""
    return _node(hosts.master, 0, output, PORT + attempt), _node(hosts.worker, 1, output, PORT + attempt)


def test_two_hosts_train_like_one_then_survive_losing_the_worker(hosts: Hosts, tmp_path: Path) -> None:
    reference = run_trainer([*ARGS, "--output-dir", str(tmp_path / "one-host")], nproc=2)
    assert reference.returncode == 0, reference.stderr

    started = time.monotonic()
    master, worker = _run_both(hosts, tmp_path / "two-hosts", 0)
    master_err, worker_err = master.communicate(timeout=300)[1], worker.communicate(timeout=300)[1]
    assert master.returncode == 0 and worker.returncode == 0, master_err[-2000:] + worker_err[-2000:]
    two_hosts = read_summary(tmp_path / "two-hosts")
    print(f"two hosts: accuracy {two_hosts['test_accuracy']:.4f} in {time.monotonic() - started:.1f} s; one host: {read_summary(tmp_path / 'one-host')['test_accuracy']:.4f}")
    assert two_hosts["world_size"] == 2
    assert abs(two_hosts["test_accuracy"] - read_summary(tmp_path / "one-host")["test_accuracy"]) <= 0.005

    output = tmp_path / "interrupted"
    master, worker = _run_both(hosts, output, 1)
    deadline = time.monotonic() + 120
    while not list((output / "checkpoints").glob("step-*.json")):
        assert master.poll() is None and time.monotonic() < deadline, f"no checkpoint before the kill: {master.communicate()[1][-3000:]}"
        time.sleep(0.01)
    _kill_host(hosts.worker)
    killed = time.monotonic()
    _, master_err = master.communicate(timeout=120)
    worker.communicate(timeout=30)
    assert master.returncode != 0
    failed_after = time.monotonic() - killed
    print(f"Master failed {failed_after:.1f} s after the Worker host died: {next(line for line in master_err.splitlines() if 'lost contact' in line)}")
    assert failed_after < 60, "the Master must fail well within the collective timeout, not hang"
    assert "lost contact with another rank" in master_err, master_err[-3000:]

    master, worker = _run_both(hosts, output, 2)
    master_err = master.communicate(timeout=300)[1]
    worker.communicate(timeout=300)
    assert master.returncode == 0, master_err[-3000:]
    assert read_summary(output)["resumed_from_step"] > 0
