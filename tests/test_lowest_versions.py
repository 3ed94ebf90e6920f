"""The components' lower bounds are real: the wheel installs with every Pulumi SDK at the lowest version
pyproject.toml allows, and the shipped stacks rehearse there.

Run under mocks, a resource constructor refuses any argument its SDK version lacks, so a stack that registers
and passes the rehearsal uses nothing newer. pyright checks the pinned versions (requirements.txt) only.
"""

import re
import tomllib
from pathlib import Path

import pytest

from tests.test_wheel import FRESH, ROOT, UV, _run, build_wheel, fresh_environment


def lowest() -> list[str]:
    """`name==X` for each `name>=X,...` of the components' dependencies."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [re.sub(r">=([^,]+),.*", r"==\1", dependency) for dependency in dependencies]
    assert all("==" in pin for pin in pins), pins
    return pins


def test_every_dependency_has_a_lower_and_an_upper_bound() -> None:
    assert [pin.split("==")[0] for pin in lowest()][:5] == [
        "pulumi",
        "pulumi-aws",
        "pulumi-eks",
        "pulumi-kubernetes",
        "pulumi-docker-build",
    ]


@pytest.mark.slow
def test_the_stacks_rehearse_with_every_sdk_at_its_lowest_version(tmp_path: Path) -> None:
    wheel, python = build_wheel(tmp_path), fresh_environment(tmp_path)
    constraints = tmp_path / "lowest.txt"
    constraints.write_text("\n".join(lowest()) + "\n")
    _run([*UV, "install", "--quiet", "--python", str(python), str(wheel), "-c", str(constraints)], tmp_path, env=FRESH)
    frozen = _run([*UV, "freeze", "--python", str(python)], tmp_path, env=FRESH).stdout
    installed = frozen.lower().replace("_", "-").split()
    assert set(pin.lower() for pin in lowest()) <= set(installed), installed
    # Both stacks in one process (a second would import the SDKs again); its exit status covers both.
    rehearse = [str(python), "-m", "eks_ddp.tools.rehearsal", "--program", str(ROOT), "--stack", "dev", "--stack", "gpu"]
    summaries = _run(rehearse, tmp_path, env=FRESH).stderr.splitlines()[-2:]
    for stack, summary in zip(("dev", "gpu"), summaries, strict=True):
        assert summary.startswith(f"eks-ddp {stack}: 17 rules, idempotence, updates, dependencies under 6 variants")
        assert "every rule holds" in summary
