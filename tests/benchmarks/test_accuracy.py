"""The time-to-accuracy benchmark runs end to end (tiny sizes: this checks the harness, not the speed)."""

import json
from pathlib import Path

import pytest

from benchmarks import accuracy

pytestmark = pytest.mark.slow


def test_benchmark_writes_both_loops_side_by_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    output = tmp_path / "bench.json"
    # One thread a rank, as torchrun sets it for each of the benchmark's default 2 ranks: its one rank here would
    # otherwise run two on this machine's two cores and spin them against the other tests.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    tiny = ["--nproc", "1", "--mnist-images", "2000", "--mnist-epochs", "1"]  # one rank: the harness, not the speed
    results = accuracy.main(["--output", str(output), *tiny])
    assert json.loads(output.read_text()) == results
    mnist = results["mnist_subset"]
    assert 0.5 < mnist["trainer_final_accuracy"] <= 1 and 0.5 < mnist["baseline_final_accuracy"] <= 1
    assert len(mnist["trainer_accuracy_per_epoch"]) == len(mnist["baseline_accuracy_per_epoch"]) == 1
