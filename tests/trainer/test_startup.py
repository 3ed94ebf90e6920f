"""Start-up with the collector kept off the imports (eks_ddp.trainer.startup)."""

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eks_ddp.trainer.startup import IMPORT_THRESHOLD, frozen_imports, on_glibc


def test_imports_run_with_rare_collections_then_are_frozen_and_the_thresholds_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fresh_module.py").write_text("made = [[index] for index in range(1000)]\n")  # container objects
    monkeypatch.syspath_prepend(tmp_path)
    monkeypatch.delitem(sys.modules, "fresh_module", raising=False)
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with frozen_imports():
        assert gc.get_threshold() == (IMPORT_THRESHOLD, *before[1:])
        import fresh_module  # pyright: ignore[reportMissingImports]
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() >= frozen + len(fresh_module.made)


def test_a_block_that_imports_nothing_new_freezes_nothing() -> None:
    """A command run again in the same process (tests/trainer/teardown_loop.py) leaves its garbage collectable."""
    frozen = gc.get_freeze_count()
    with frozen_imports():
        import gc as again  # noqa: F401  (imported already)

        made = [[index] for index in range(1000)]  # what a freeze would take
    assert gc.get_freeze_count() < frozen + len(made)  # fewer when frozen objects die meanwhile


@pytest.mark.parametrize(
    "module", ["eks_ddp.trainer", "eks_ddp.tools.preview", "eks_ddp.tools.rehearsal", "eks_ddp.tools.local"]
)
def test_each_command_freezes_its_imports_before_it_reads_its_arguments(module: str) -> None:
    probe = f"import gc, runpy, sys; sys.argv = ['{module}', '--help']\n"
    probe += f"try:\n    runpy.run_module('{module}', run_name='__main__')\nexcept SystemExit:\n    pass\n"
    probe += "print(gc.get_freeze_count())"
    printed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert int(printed.split()[-1]) > 100_000  # torch's or the Pulumi SDKs' objects, among others


def test_training_imports_boto3_tensorboard_prometheus_and_matplotlib_only_where_a_run_uses_them() -> None:
    """A rank without --artifact-uri or --metrics-port, and every rank but 0 (which writes the run's log and plots),
    never uses them: each would add a fraction of a second to every rank's start-up."""
    probe = "import sys, eks_ddp.trainer.cli, eks_ddp.trainer.training\n"
    probe += "print(sorted(name for name in sys.modules if name.split('.')[0] in {'boto3', 'botocore', "
    probe += "'prometheus_client', 'tensorboard', 'matplotlib'} or name == 'torch.utils.tensorboard'))"
    printed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert printed.strip() == "[]"


FAULTS_OF_REUSED_BUFFERS = """
import resource, sys, torch
{setup}
def faults():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(8):
        torch.ones(16 * 2**20)  # 64 MiB, above glibc's largest mmap threshold, freed at once as a step's activations
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults()
print(faults())
"""
PAGES_OF_ONE_BUFFER = 64 * 2**20 // 4096


def _faults(setup: str, **environment: str) -> int:
    command = [sys.executable, "-c", FAULTS_OF_REUSED_BUFFERS.format(setup=setup)]
    done = subprocess.run(command, capture_output=True, text=True, check=True, env={**os.environ, **environment})
    return int(done.stdout.split()[-1])  # the last line: a training run prints its own before it


@pytest.mark.skipif(not on_glibc(), reason="tells glibc's allocator what to do: this C library is not glibc")
def test_a_training_run_reuses_its_freed_buffers_instead_of_faulting_them_in_again(tmp_path: Path) -> None:
    """Eight 64 MiB buffers allocated and freed in turn: glibc maps and unmaps each one (8 x 16,384 page faults)
    unless `train` has told it to keep them; the first run of the loop warms the heap up."""
    train = "from eks_ddp.trainer.cli import main\n"
    train += "main(['train', '--dataset', 'synthetic', '--synthetic-shape', '1x8x8', '--synthetic-size', '64', "
    train += f"'--model', 'mlp', '--epochs', '1', '--output-dir', {str(tmp_path)!r}])"
    assert _faults("") > 4 * PAGES_OF_ONE_BUFFER
    assert _faults(train) < PAGES_OF_ONE_BUFFER


@pytest.mark.skipif(not on_glibc(), reason="tells glibc's allocator what to do: this C library is not glibc")
def test_a_users_own_glibc_malloc_tunables_stand() -> None:
    keep_mine = "from eks_ddp.trainer.startup import reuse_freed_memory\nassert not reuse_freed_memory()"
    assert _faults(keep_mine, GLIBC_TUNABLES="glibc.malloc.mmap_threshold=33554432") > 4 * PAGES_OF_ONE_BUFFER
