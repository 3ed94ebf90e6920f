"""The installed wheel, outside this repository, rehearses a stack as the checkout does.

A package the wheel leaves out still imports here through the checkout's editable install, so the rehearsal runs
from a separate directory with the wheel's files first on the path and checks where each module came from.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_installed_wheel_rehearses_a_stack_from_its_own_files(tmp_path: Path) -> None:
    source, wheels, site = tmp_path / "source", tmp_path / "wheels", tmp_path / "site"
    # A copy without the checkout's build/ directory, whose leftovers setuptools would pack into the wheel.
    ignored = shutil.ignore_patterns(".venv", "build", "*.egg-info", "runs", ".git", "__pycache__", ".pytest_cache")
    shutil.copytree(ROOT, source, ignore=ignored)
    pip = [sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", str(source), "-w", str(wheels)], check=True)
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), *map(str, wheels.glob("*.whl"))], check=True)
    probe = (
        "import sys, stack.cluster.placement as p, stack.engine_rules as r, infra.allocatable as a;"
        "print(p.__file__, r.__file__, a.ENI_LIMITS.exists());"
        "from stack import rehearsal;"
        f"sys.exit(rehearsal.main(['--stack', 'dev', '--project-dir', {str(ROOT)!r}]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    placement, rules, limits = run.stdout.split()[:3]
    assert placement.startswith(str(site)) and rules.startswith(str(site)) and limits == "True"
    assert "placement under 6 variants and a bad GPU node, every rule holds" in run.stderr
