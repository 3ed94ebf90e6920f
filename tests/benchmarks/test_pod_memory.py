"""The pod memory measurement on made-up processes: what it sums, what it keeps, and full-size MNIST files."""

import sys
from pathlib import Path

import pytest

from benchmarks.pod_memory import measure, write_mnist
from eks_ddp.trainer.idx import read_idx

# A parent that holds about 64 MiB and starts a child that holds about 128 MiB, both alive together for a while.
HOLDERS = (
    "import subprocess, sys, time; kept = bytearray(64 << 20); "
    "child = subprocess.Popen([sys.executable, '-c', 'import time; kept = bytearray(128 << 20); time.sleep(1.5)']); "
    "child.wait()"
)


def test_the_peak_of_the_pod_sums_its_processes_and_each_rank_is_its_own() -> None:
    peaks = measure([sys.executable, "-c", HOLDERS], {})
    assert 120 <= peaks["rank_peak_mib"] < 200  # the child's own peak
    assert 60 <= peaks["torchrun_peak_mib"] < peaks["rank_peak_mib"]  # the parent's
    assert peaks["pod_peak_mib"] >= 190  # both together


def test_a_failed_run_stops_with_its_errors() -> None:
    with pytest.raises(SystemExit, match="no such thing"):
        measure([sys.executable, "-c", "raise SystemExit('no such thing')"], {})


def test_mnist_files_have_mnists_sizes(tmp_path: Path) -> None:
    write_mnist(tmp_path)
    assert read_idx(tmp_path / "train-images-idx3-ubyte").shape == (60_000, 28, 28)
    assert read_idx(tmp_path / "t10k-labels-idx1-ubyte").shape == (10_000,)
