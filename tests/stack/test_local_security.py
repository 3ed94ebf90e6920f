"""The local run applies the pods' securityContext to its processes as far as this machine allows, for real:
the kernel's own view of each process (/proc/self/status) shows what it may do."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from eks_ddp.tools.local import render_for
from eks_ddp.tools.local_pods import ContainerUser, InitStep, init_steps, security_note

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and util-linux's setpriv to switch users"
)
CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 0, 1, 2


def _status(command: list[str]) -> dict[str, str]:
    """The fields of /proc/self/status as `command`'s process (cat, wrapped) sees them."""
    printed = subprocess.run([*command, "/proc/self/status"], capture_output=True, text=True, check=True).stdout
    return dict(line.split(":\t", 1) for line in printed.splitlines() if ":\t" in line)


def _mask(*capabilities: int) -> int:
    return sum(1 << capability for capability in capabilities)


@pytest.mark.parametrize(("read_anywhere", "kept"), [(False, ()), (True, (CAP_DAC_READ_SEARCH,))])
def test_a_container_runs_as_the_pods_user_without_privilege_escalation_or_capabilities(
    read_anywhere: bool, kept: tuple[int, ...]
) -> None:
    status = _status(ContainerUser(1000, read_anywhere).wrap(["cat"]))
    assert status["Uid"].split()[0] == "1000" and status["NoNewPrivs"].strip() == "1"
    assert int(status["CapBnd"], 16) == int(status["CapEff"], 16) == _mask(*kept)
    assert ("CAP_DAC_READ_SEARCH" in security_note(ContainerUser(1000, read_anywhere))) == read_anywhere


def test_the_root_permissions_step_keeps_only_the_capabilities_its_securitycontext_adds() -> None:
    (step,) = [s for s in init_steps(render_for("dev")[0].pods[0], Path("/x"), skipped=set()) if s.as_root]
    assert step.name == "volume-permissions" and step.capabilities == ("CHOWN", "DAC_OVERRIDE")
    status = _status(InitStep(step.name, ["cat"], step.as_root, step.capabilities).wrap(ContainerUser(1000)))
    assert status["Uid"].split()[0] == "0" and status["NoNewPrivs"].strip() == "1"
    assert int(status["CapBnd"], 16) == int(status["CapEff"], 16) == _mask(CAP_CHOWN, CAP_DAC_OVERRIDE)


def test_what_cannot_be_applied_here_is_said() -> None:
    assert "not applied: the read-only root file system and the RuntimeDefault seccomp profile" in security_note(
        ContainerUser(1000)
    )
    assert security_note(ContainerUser(None)).startswith("not applied: the pod's user, no privilege escalation")
