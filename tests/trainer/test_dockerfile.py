"""The image definition agrees with the package (it cannot be built here: no Docker engine)."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "trainer" / "Dockerfile").read_text()


def test_torch_pin_matches_pyproject() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = next(dependency for dependency in dependencies if dependency.startswith("torch=="))
    match = re.search(r"^ARG TORCH_VERSION=(\S+)$", DOCKERFILE, re.MULTILINE)
    assert match is not None and pinned == f"torch=={match.group(1)}"


def test_runs_as_a_non_root_user() -> None:
    users = re.findall(r"^USER (\S+)$", DOCKERFILE, re.MULTILINE)
    assert users and users[-1].split(":")[0] not in ("0", "root")


def test_copies_every_package_the_distribution_declares() -> None:
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    for package in packages:
        assert f"COPY {package} ./{package}" in DOCKERFILE
