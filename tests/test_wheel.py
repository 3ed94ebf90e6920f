"""The installed wheel, in a project of a user's own, runs that project's program as the checkout does.

From the checkout every file is at hand (and a bare `import infra` finds this repository's), so the wheel is built
from a clean copy, installed with its dependencies into a fresh virtual environment, and used from a copy of
examples/own_program that has its own `infra/`, `stack/` and `policy/` packages, as many Pulumi projects do.
"""

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "own_program"
# What the program registered, and the files the wheel must carry for it.
PROBE = (
    "import json, eks_ddp; from pathlib import Path; from eks_ddp.tools.pulumi_program import Program;"
    "from eks_ddp.infra.addons import prometheus_monitoring as m, training_operator as t;"
    "from eks_ddp.infra.facts import allocatable as a; import infra, stack, policy;"
    "registered = sorted([r.type, r.name] for r in Program.at(Path('.')).run('prod'));"
    "print(json.dumps({'registered': registered, 'package': eks_ddp.__file__, 'own': [infra.__file__,"
    " stack.__file__, policy.__file__], 'dashboards': len(m.dashboards()), 'files': [Path(t.WITHOUT_MPIJOB,"
    " 'kustomization.yaml').is_file(), a.ENI_LIMITS.is_file()]}))"
)


def _run(
    command: list[str], cwd: Path, timeout: int = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done


def build_wheel(tmp_path: Path) -> Path:
    """The wheel of a clean copy (the checkout's build/ leftovers would be packed too)."""
    source, wheels = tmp_path / "source", tmp_path / "wheels"
    ignored = shutil.ignore_patterns(
        ".venv", ".venv-checkov", "build", "*.egg-info", "runs", ".git", "__pycache__", ".pytest_cache"
    )  # .gitignore's environments and outputs: copying .venv-checkov's 19,000 files alone took 2 to 7 CPU-s
    shutil.copytree(ROOT, source, ignore=ignored)
    pip = [sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", str(source), "-w", str(wheels)], tmp_path)
    (wheel,) = wheels.glob("eks_ddp-*.whl")
    return wheel


def users_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project)
    for own in ("stack", "tools", "policy"):
        (project / own).mkdir()
        (project / own / "__init__.py").write_text(f'"""This project\'s own {own} package."""\n')
    return project


# The set-up's installer (Makefile), from the package index and the machine's uv cache: what the wheel's metadata asks
# for is resolved afresh; the cache only spares downloading torch's 2.9 GB again.
UV = [str(ROOT / ".venv" / "bin" / "uv"), "pip"]
FRESH = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
FRESH["UV_COMPILE_BYTECODE"] = "0"
"""The environment of what installs into the fresh environment and runs from it: each module compiled once, on its
first import, and kept there, as Python does by default and as the Makefile's set-up has it (compiling every module of
torch and the Pulumi SDKs at install took 55 of this test's 65 CPU-s). This machine sets PYTHONDONTWRITEBYTECODE,
which would have every command compile its imports again (6 CPU-s for `train`)."""


def fresh_environment(tmp_path: Path) -> Path:
    environment = tmp_path / "venv"
    venv.EnvBuilder().create(environment)
    return environment / "bin" / "python"


@pytest.mark.slow
def test_the_installed_wheel_runs_a_users_own_program_previews_and_rehearses_it(tmp_path: Path) -> None:
    wheel, project, python = build_wheel(tmp_path), users_project(tmp_path), fresh_environment(tmp_path)
    install = [*UV, "install", "--quiet", "--python", str(python)]
    _run([*install, str(wheel)], tmp_path, env=FRESH)
    no_torch = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is not None)"
    _run([str(python), "-c", no_torch], tmp_path, env=FRESH)

    installed = json.loads(_run([str(python), "-c", PROBE], project, env=FRESH).stdout)
    checkout = json.loads(_run([str(ROOT / ".venv" / "bin" / "python"), "-c", PROBE], project).stdout)
    assert installed["package"].startswith(str(python.parent.parent)) and checkout["package"].startswith(str(ROOT))
    assert all(path.startswith(str(project)) for path in installed["own"])  # the project's own packages, not ours
    assert installed["registered"] == checkout["registered"] and len(installed["registered"]) > 100
    assert installed["dashboards"] == 3 and installed["files"] == [True, True]
    assert ["kubernetes:core/v1:ConfigMap", "research-monitoring-dashboard-training"] in installed["registered"]

    manifests = tmp_path / "manifests"
    preview_command = [str(python), "-m", "eks_ddp.tools.preview", "--stack", "prod", "--manifests", str(manifests)]
    preview = _run(preview_command, project, env=FRESH)
    assert "Program research-training, stack prod:" in preview.stdout and "55.949  total" in preview.stdout
    assert (manifests / "trainjob-training-llm.yaml").is_file()
    rehearsal = _run([str(python), "-m", "eks_ddp.tools.rehearsal"], project, env=FRESH)
    assert "research-training prod: 17 rules, idempotence, every rule holds" in rehearsal.stderr

    _run([*install, f"{wheel}[trainer]"], tmp_path, timeout=900, env=FRESH)
    # The pinned torch, read from its metadata: `train` below imports it (a second import here cost 1.9 CPU-s).
    pinned = "import importlib.metadata as m; assert m.version('torch').startswith('2.13.0'), m.version('torch')"
    _run([str(python), "-c", pinned], tmp_path, env=FRESH)
    # The installed trainer trains on its own data files (digits' split is package data), outside the repository.
    trained = tmp_path / "trained"
    train_command = [str(python), "-m", "eks_ddp.trainer", "train", "--epochs", "1", "--output-dir", str(trained)]
    train = _run(train_command, tmp_path, env=FRESH)
    assert "test accuracy" in train.stdout and json.loads((trained / "summary.json").read_text())["dataset"] == "digits"
