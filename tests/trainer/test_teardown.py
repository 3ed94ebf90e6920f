"""A finished rank exits: the trainer's teardown must not deadlock gloo (see trainer.distributed.stop).

Before the fix, one `train` in 5 to 35 here left a rank stuck in `~ProcessGroupGloo`, with gloo's
worker waiting for the GIL; 60 runs in one process pair ended on none of three tries.
"""

import subprocess

import pytest

from tests.conftest import FROZEN_TORCHRUN, ROOT, free_port, trainer_env

pytestmark = pytest.mark.slow

RUNS = 60


def test_sixty_two_rank_runs_in_a_row_each_tear_down_without_a_hang() -> None:
    command = [*FROZEN_TORCHRUN, "--standalone", "--nproc-per-node", "2", "--master-port", str(free_port())]
    completed = subprocess.run(
        [*command, str(ROOT / "tests" / "trainer" / "teardown_loop.py"), str(RUNS)],
        env=trainer_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.count(" done") == 2 * RUNS, completed.stdout[-2000:]
