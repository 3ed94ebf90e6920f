"""The image definition agrees with the trainer's dependency set (it cannot be built here: no Docker engine)."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "trainer" / "Dockerfile").read_text()
REQUIREMENTS = [line.split("#")[0].strip() for line in (ROOT / "trainer" / "requirements.txt").read_text().splitlines()]
REQUIREMENTS = [line for line in REQUIREMENTS if line]


def test_torch_pin_matches_the_requirements() -> None:
    match = re.search(r"^ARG TORCH_VERSION=(\S+)$", DOCKERFILE, re.MULTILINE)
    assert match is not None and f"torch=={match.group(1)}" in REQUIREMENTS


def test_runs_as_the_non_root_user_the_pods_and_the_volume_expect() -> None:
    from infra.shared_claim import SHARED_UID

    users = re.findall(r"^USER (\S+)$", DOCKERFILE, re.MULTILINE)
    assert users and users[-1] == f"{SHARED_UID}:{SHARED_UID}" and f"useradd --uid {SHARED_UID} " in DOCKERFILE


def test_installs_the_trainer_set_only() -> None:
    """No Pulumi SDK in the image: the trainer never imports one, and every scale-up pulls the image."""
    assert not any(line.lower().startswith(("pulumi", "pyyaml", "docker")) for line in REQUIREMENTS)
    assert "pip install -r /opt/eks-ddp/requirements.txt" in DOCKERFILE and "pip install ." not in DOCKERFILE
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["dynamic"]["dependencies"] == {"file": ["trainer/requirements.txt"]}
    assert any(line.startswith("pulumi==") for line in project["project"]["optional-dependencies"]["infra"])


def test_the_trainer_imports_nothing_outside_its_set() -> None:
    """What `python -m trainer` loads: no Pulumi, no YAML, none of the program's packages."""
    probe = ("import sys, trainer.cli, trainer.training, trainer.prepare, trainer.evaluation; "
             "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    loaded = set(subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split())
    assert loaded & {"pulumi", "pulumi_aws", "yaml", "docker", "infra", "workloads", "stack", "policy"} == set()
