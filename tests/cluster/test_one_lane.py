"""The tests that start a cluster run on one pytest-xdist worker, as `make test` runs them (`-n 3 --dist loadgroup`):
checked with pytest and pytest-xdist themselves, since a version of either that drops the grouping (pytest 9.2 with
xdist 3.8.0 did) leaves those tests waiting for each other's cluster on three workers until they time out."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFTEST = """import pytest
from tests.cluster.conftest import pytest_collection_modifyitems  # noqa: F401 (the hook under test)

@pytest.fixture
def shared_plane():
    return None

@pytest.fixture
def cluster(shared_plane):
    return None
"""
TESTS = """def test_a(cluster): pass
def test_b(cluster): pass
def test_c(cluster): pass
def test_d(cluster): pass
def test_elsewhere(): pass
"""


def test_every_test_with_a_cluster_runs_on_one_worker_in_the_local_cluster_group(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_lane.py").write_text(TESTS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "3", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider",
         "-p", "no:randomly", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    passed = [line.split() for line in done.stdout.splitlines() if " PASSED " in line]
    lane = {words[0] for words in passed if "@local-cluster" in words[-1]}
    assert len([w for w in passed if "@local-cluster" in w[-1]]) == 4, done.stdout
    assert len(lane) == 1, f"the cluster tests ran on workers {sorted(lane)}"
