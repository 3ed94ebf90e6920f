"""What a pod does besides its main container, done locally: init containers and the pod's user.

Run as root (as here and in CI), the local run behaves like the cluster: init containers
that ask for root run as root, and every other container runs as the pod's
`securityContext.runAsUser` (the trainer's uid 1000) against a claim directory that
belongs to root, so a missing permissions step fails here as it would on FSx.
"""

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eks_ddp.workloads.training_pod import SHARED_MOUNT


@dataclass(frozen=True)
class InitStep:
    name: str
    command: list[str]
    as_root: bool
    capabilities: tuple[str, ...] = ()
    """What a root step's securityContext adds back after dropping every capability (`CHOWN`, ...)."""

    def wrap(self, user: "ContainerUser") -> list[str]:
        """The step as the kubelet runs it: a root step as root with only its own capabilities and no privilege
        escalation (when this process is root), any other as the containers' `user`."""
        if not self.as_root:
            return user.wrap(self.command)
        if os.geteuid() != 0 or shutil.which("setpriv") is None:
            return self.command
        kept = "".join(f",+{capability.lower()}" for capability in self.capabilities)
        return ["setpriv", "--no-new-privs", f"--bounding-set=-all{kept}", "--", *self.command]


def localize(argument: str, shared: Path) -> str:
    """The claim's mount path, wherever it appears in an argument (a shell script too), as the local directory."""
    return argument.replace(SHARED_MOUNT, str(shared))


def init_steps(pod: dict[str, Any], shared: Path, skipped: set[str]) -> list[InitStep]:
    """The pod's init containers as local commands, in order, without the ones named in `skipped`."""
    return [
        InitStep(
            c["name"],
            [localize(a, shared) for a in c["command"]],
            (c.get("securityContext") or {}).get("runAsUser") == 0,
            tuple(((c.get("securityContext") or {}).get("capabilities") or {}).get("add", ())),
        )
        for c in pod.get("initContainers", [])
        if c["name"] not in skipped
    ]


@dataclass(frozen=True)
class ContainerUser:
    """Who a container runs as here: the pod's uid (through util-linux's setpriv), or this process's user.

    `read_anywhere` adds CAP_DAC_READ_SEARCH when the pod's user could not otherwise start this
    interpreter or reach the work directory (both often lie under root's private home): it may then
    read and traverse any directory, but it still cannot write where the cluster would refuse it,
    which is what a root-owned claim tests.
    """

    uid: int | None
    read_anywhere: bool = False

    def wrap(self, command: list[str]) -> list[str]:
        """As the pods' restricted securityContext runs it: the pod's user, no privilege escalation, no capability
        (but CAP_DAC_READ_SEARCH where `read_anywhere` needs it)."""
        if self.uid is None:
            return command
        switch = ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", "--no-new-privs"]
        if self.read_anywhere:
            kept = "+dac_read_search"
            switch += [f"--bounding-set=-all,{kept}", f"--inh-caps={kept}", f"--ambient-caps={kept}"]
        else:
            switch += ["--bounding-set=-all"]
        return [*switch, "--", *command]

    def describe(self) -> str:
        if self.uid is None:
            return "this user"
        return f"uid {self.uid}" + (
            " (with CAP_DAC_READ_SEARCH: it reads a private interpreter; writes are checked)"
            if self.read_anywhere
            else ""
        )


NOT_HERE = "the read-only root file system and the RuntimeDefault seccomp profile (no container runtime here)"


def security_note(user: ContainerUser) -> str:
    """What of the pods' securityContext the local run applies to its processes, and what it cannot."""
    if user.uid is None:
        return f"not applied: the pod's user, no privilege escalation, dropped capabilities, {NOT_HERE}"
    kept = " but CAP_DAC_READ_SEARCH" if user.read_anywhere else ""
    return f"no privilege escalation, every capability dropped{kept} (setpriv); not applied: {NOT_HERE}"


def pod_user(pod: dict[str, Any], workdir: Path) -> ContainerUser:
    """The pod's `securityContext.runAsUser`, when this process may switch to it (it is root) and that user
    can start the trainer and list `workdir`; otherwise this process's user, with a note saying why."""
    uid = (pod.get("securityContext") or {}).get("runAsUser")
    if uid is None or os.geteuid() != 0:
        return ContainerUser(None)
    if shutil.which("setpriv") is None:
        print(f"note: no setpriv (util-linux) to switch to uid {uid}: containers run as root", flush=True)
        return ContainerUser(None)
    # The very interpreter (a loader may quietly pick another libpython it can read), able to start itself
    # (torchrun starts the workers), finding the trainer and torch, and listing the work directory. Found, not
    # imported: importing them would cost each local run 2 CPU-seconds a probe, and what keeps a user from them is a
    # directory it cannot traverse, which finding them meets.
    probe = [
        sys.executable,
        "-c",
        (
            f"import os, subprocess, sys, importlib.util as u; assert sys.version == {sys.version!r}; "
            f"subprocess.run([sys.executable, '-c', ''], check=True); os.listdir({str(workdir.resolve())!r}); "
            "assert u.find_spec('eks_ddp.trainer.cli') and u.find_spec('torch')"
        ),
    ]
    for user in (ContainerUser(uid), ContainerUser(uid, read_anywhere=True)):
        if subprocess.run(user.wrap(probe), capture_output=True).returncode == 0:
            return user
    print(f"note: uid {uid} cannot start {sys.executable} or list {workdir}: containers run as root", flush=True)
    return ContainerUser(None)


def user_home(workdir: Path, user: ContainerUser) -> dict[str, str]:
    """A home the container's user can write to (matplotlib and torch keep caches there)."""
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    if user.uid is not None:
        os.chown(home, user.uid, user.uid)
    return {"HOME": str(home), "MPLCONFIGDIR": str(home / ".matplotlib")}


def run_init_steps(pods: list[list[InitStep]], env: dict[str, str], user: ContainerUser) -> int:
    """Every pod's init containers, the pods side by side (as the kubelets run them); the first failure's exit code."""
    running = [subprocess.Popen(steps[0].wrap(user), env=env) for steps in pods if steps]
    codes = [process.wait() for process in running]
    remaining = [steps[1:] for steps in pods if len(steps) > 1]
    return next((code for code in codes if code), 0) or (run_init_steps(remaining, env, user) if remaining else 0)


def wait_for_pods(running: list[subprocess.Popen[str]], grace_seconds: float) -> list[int]:
    """Every pod's exit code. When one fails, the others get SIGTERM, then SIGKILL after the grace period,
    as the kubelet does: here nothing restarts the failed pod, so the rest would wait for it forever."""
    while any(process.poll() is None for process in running):
        if any(process.poll() not in (None, 0) for process in running):
            for process in running:
                if process.poll() is None:
                    process.terminate()
            deadline = time.monotonic() + grace_seconds
            for process in running:
                try:
                    process.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    process.kill()
            break
        time.sleep(0.2)
    return [process.wait() for process in running]
