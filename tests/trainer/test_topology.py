import os
import subprocess
import sys

import pytest

from eks_ddp.trainer.distributed import Topology
from eks_ddp.trainer.errors import UsageError


def test_no_torchrun_is_a_single_process() -> None:
    assert Topology.from_environ({}) == Topology(rank=0, local_rank=0, world_size=1, restart_count=0)


def test_reads_the_torchrun_contract() -> None:
    environ = {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "MASTER_ADDR": "job-master-0",
        "MASTER_PORT": "23456",
        "TORCHELASTIC_RESTART_COUNT": "2",
        "GROUP_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
    }
    topology = Topology.from_environ(environ)
    assert topology == Topology(rank=3, local_rank=1, world_size=4, restart_count=2, node_rank=1, local_world_size=2)
    assert not topology.is_main and not topology.is_node_main


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not an integer"),
        ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "a", "MASTER_PORT": "1"}, "RANK=2 must be < WORLD_SIZE=2"),
        ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1"}, "MASTER_ADDR is not set but WORLD_SIZE=2"),
        ({"WORLD_SIZE": "0"}, "WORLD_SIZE=0 must be >= 1"),
    ],
)
def test_bad_environment_is_named(environ: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Topology.from_environ(environ)


PIN_PROBE = """
import os, sys, torch
from eks_ddp.trainer.distributed import Topology, pin_to_own_cpu
os.sched_setaffinity(0, {allowed})
pinned = pin_to_own_cpu(Topology(local_rank=1, local_world_size={ranks}), torch.device({device!r}))
print(sorted(pinned) if pinned else None, sorted(os.sched_getaffinity(0)))
"""


@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda _: ())(0)) < 2, reason="needs 2 CPUs to pin ranks to")
@pytest.mark.parametrize(("ranks", "device", "pinned"), [(2, "cpu", True), (3, "cpu", False), (2, "cuda", False)])
def test_ranks_that_fill_the_cpus_each_keep_their_own(ranks: int, device: str, pinned: bool) -> None:
    """In a child process allowed two CPUs, local rank 1 of `ranks`: the second CPU alone when the ranks fill them."""
    cpus = sorted(os.sched_getaffinity(0))[:2]
    probe = PIN_PROBE.format(allowed=set(cpus), ranks=ranks, device=device)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    expected = f"[{cpus[1]}] [{cpus[1]}]" if pinned else f"None [{cpus[0]}, {cpus[1]}]"
    assert done.stdout.strip() == expected
