"""The engines, built once per session (a missing Go or a failed build errors every cluster test, never skips it),
and the session's one control plane, reset for each test (tests.cluster.shared_plane) and stopped, by process id,
whatever the tests did."""

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from eks_ddp.engine_models.base import Deployment
from eks_ddp.workloads.training_pod import TRAINER_LABEL
from tests.cluster import local_cluster
from tests.cluster.control_plane import POLL_S
from tests.cluster.engines import build
from tests.cluster.kubectl import Kubectl
from tests.cluster.shared_plane import SharedPlane, held

# Another cluster may hold the machine's one slot (control_plane.HOLDER) this long before ours starts: less than
# pytest's timeout, so that a cluster left running by `make cluster-up` fails the test with the line saying so.
WAIT_FOR_SLOT_S = 300.0
LANE_NICENESS = -10
"""The cluster lane's worker and the engines it starts run ahead of the other workers' trainer processes: the lane
waits on controllers and is the suite's longest path, the others only need CPU-seconds (make test: all cores busy)."""
WAIT_S = 90.0
"""How long a test waits for a controller to act: minutes on a machine whose two cores also run other tests."""


def wait_for(what: str, check: Callable[[], Any], timeout_s: float = WAIT_S) -> Any:
    """`check()`'s first truthy result, polled; the test fails naming `what` when it has none after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not (result := check()):
        assert time.monotonic() < deadline, f"{what}: not after {timeout_s:.0f} s"
        time.sleep(POLL_S)
    return result


SETTLED_S = 5.0


def settled(kubectl: Kubectl) -> set[str]:
    """What the cluster holds (shared_plane.held) once its controllers, started with the test, have made their own
    objects (service accounts, root CA ConfigMaps): the same for SETTLED_S."""
    def unchanged() -> set[str] | None:
        first = held(kubectl.api)
        time.sleep(SETTLED_S)
        return first if held(kubectl.api) == first else None

    return wait_for("the cluster's own objects, made by its controllers", unchanged)


@dataclass
class OnEngines:
    cluster: local_cluster.LocalCluster
    deployment: Deployment

    @property
    def kubectl(self) -> Kubectl:
        return self.cluster.kubectl

    def pods(self) -> list[dict[str, Any]]:
        return local_cluster.settle(self.kubectl)

    def group_of(self, node: str) -> str:
        return local_cluster.node_groups(self.kubectl).get(node, "-")

    def sent(self, kind: str) -> dict[str, Any]:
        """The one object of that kind the stack sends, as `pulumi up` would apply it."""
        (sent,) = [r.sent for r in self.deployment.registrations
                   if r.type.startswith("kubernetes:") and r.sent.get("kind") == kind]
        return dict(sent)


def training(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The training pods among `pods` (TRAINER_LABEL)."""
    return [p for p in pods if TRAINER_LABEL.items() <= (p["metadata"].get("labels") or {}).items()]


def true_conditions(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """An object's conditions that hold, by type."""
    return {c["type"]: c for c in (found.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the xdist_group marks into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that start a cluster, one after another on one pytest-xdist worker (make test's `--dist loadgroup`):
    one local cluster runs per machine at a time, so a second worker would only wait for the first; `slow`, so that
    their lane starts first (tests/conftest.py)."""
    for item in items:
        if "shared_plane" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("local-cluster"))
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def engines() -> dict[str, Path]:
    return build.build_all(local_cluster.ENGINES)


@pytest.fixture(scope="session")
def shared_plane(engines: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedPlane]:
    """The control plane the session's cluster tests share, stopped, by process id, at its end."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, LANE_NICENESS)  # inherited by every engine started after
    except PermissionError:  # not root: the lane keeps the other workers' priority, and only takes longer
        pass
    plane = SharedPlane(engines, tmp_path_factory.mktemp("local-cluster"), WAIT_FOR_SLOT_S)
    yield plane
    plane.close()


@pytest.fixture
def cluster(engines: dict[str, Path], shared_plane: SharedPlane) -> Iterator[Callable[..., OnEngines]]:
    """`cluster(stack, override)`: that stack on the session's control plane, reset for it, its objects applied."""

    def start(stack: str, override: dict[str, str] | None = None, deploy: bool = True) -> OnEngines:
        deployment = local_cluster.deployment_of(stack, dict(override or {}))
        steps = local_cluster.steps_of(deployment, engines)
        running = shared_plane.take(stack, local_cluster.installed_crds(steps))
        if deploy:
            local_cluster.deploy(running, deployment, engines, steps)
        return OnEngines(running, deployment)

    yield start
    shared_plane.release()
