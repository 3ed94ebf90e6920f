"""Start-up with the collector kept off the imports (eks_ddp.trainer.startup)."""

import gc
import subprocess
import sys

import pytest

from eks_ddp.trainer.startup import IMPORT_THRESHOLD, frozen_imports


def test_imports_run_with_rare_collections_then_are_frozen_and_the_thresholds_restored() -> None:
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with frozen_imports():
        assert gc.get_threshold() == (IMPORT_THRESHOLD, *before[1:])
        made = [[index] for index in range(1000)]  # container objects, as an import builds
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() >= frozen + len(made)


@pytest.mark.parametrize("module", ["eks_ddp.trainer", "eks_ddp.stack.preview", "eks_ddp.stack.rehearsal", "eks_ddp.stack.local"])
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
