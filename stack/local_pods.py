"""What a pod does besides its main container, done locally: init containers and the pod's user.

Run as root (as here and in CI), the local run behaves like the cluster: init containers
that ask for root run as root, and every other container runs as the pod's
`securityContext.runAsUser` (the trainer's uid 1000) against a claim directory that
belongs to root, so a missing permissions step fails here as it would on FSx.
"""

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workloads.pytorchjob import SHARED_MOUNT


@dataclass(frozen=True)
class InitStep:
    name: str
    command: list[str]
    as_root: bool


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
        )
        for c in pod.get("initContainers", [])
        if c["name"] not in skipped
    ]


def pod_user(pod: dict[str, Any], workdir: Path) -> int | None:
    """The uid the pod's containers run as, when this process may switch to it (it is root) and that user
    can start the trainer and reach `workdir`."""
    uid = (pod.get("securityContext") or {}).get("runAsUser")
    if uid is None or os.geteuid() != 0:
        return None
    probe = f"import os, trainer.cli; os.listdir({str(workdir.resolve())!r})"
    try:
        result = subprocess.run([sys.executable, "-c", probe], user=uid, group=uid, extra_groups=[], capture_output=True)
        usable = result.returncode == 0
    except PermissionError:  # the interpreter itself lies under a private directory
        usable = False
    if not usable:
        print(f"note: uid {uid} cannot start {sys.executable} or reach {workdir} (a parent directory is private): "
              "containers run as root", flush=True)
        return None
    return uid


def as_user(uid: int | None) -> dict[str, Any]:
    """subprocess arguments that run a container as `uid` (nothing when it stays this process's user)."""
    return {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}


def user_home(workdir: Path, uid: int | None) -> dict[str, str]:
    """A home the container's user can write to (matplotlib and torch keep caches there)."""
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    if uid is not None:
        os.chown(home, uid, uid)
    return {"HOME": str(home), "MPLCONFIGDIR": str(home / ".matplotlib")}


def run_init_steps(pods: list[list[InitStep]], env: dict[str, str], uid: int | None) -> int:
    """Every pod's init containers, the pods side by side (as the kubelets run them); the first failure's exit code."""
    running = [
        subprocess.Popen(steps[0].command, env=env, **as_user(None if steps[0].as_root else uid))
        for steps in pods
        if steps
    ]
    codes = [process.wait() for process in running]
    remaining = [steps[1:] for steps in pods if len(steps) > 1]
    return next((code for code in codes if code), 0) or (run_init_steps(remaining, env, uid) if remaining else 0)


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
