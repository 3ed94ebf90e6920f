"""A real `pulumi up`: Pulumi's own CLI and Kubernetes provider deploy a stack onto the engines, as onto a cluster
made elsewhere (tests/cluster/deploy_local.py), then `pulumi up` again, then `pulumi destroy`."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from pulumi.automation import OpType

from tests.cluster import deploy_local, local_cluster, nodes
from tests.cluster.conftest import settled, training, wait_for
from tests.cluster.engines import build
from tests.cluster.kubectl import Kubectl
from tests.cluster.shared_plane import SharedPlane, held

@pytest.fixture
def on_dev(engines: dict[str, Path], shared_plane: SharedPlane, tmp_path: Path) -> Iterator[tuple]:
    """The shared plane reset, with no CRD kept (Pulumi installs them), and dev's nodes; a workspace for its stack."""
    running = shared_plane.take("dev", [])
    running.kubectl.apply(nodes.nodes(local_cluster.deployment_of("dev", {})))
    binaries = {**engines, **build.build_all(deploy_local.PULUMI_ENGINES)}
    yield running, deploy_local.Workspace("dev", runs=tmp_path), binaries
    shared_plane.release()


def test_a_real_pulumi_up_of_dev_then_no_changes_then_a_destroy_that_leaves_the_cluster_as_it_was(on_dev) -> None:
    running, workspace, binaries = on_dev
    plane, kubectl, said = running.control_plane, running.kubectl, []
    before = settled(kubectl)

    first = deploy_local.pulumi_up(workspace, plane, kubectl, binaries, said.append)
    assert first.summary.result == "succeeded", "\n".join(said)
    assert first.summary.resource_changes and first.summary.resource_changes.get(OpType.CREATE, 0) > 30

    check = kubectl.api.request("GET", "/apis/batch/v1/namespaces/training/jobs/eks-ddp-efa-check")
    complete = {c["type"] for c in check["status"].get("conditions") or [] if c["status"] == "True"}
    assert "Complete" in complete  # the EFA check gated training: pulumi up awaited it before the PyTorchJob

    def training_on_workers() -> list[dict] | None:
        pods = training(kubectl.api.items("/api/v1/namespaces/training/pods"))
        running = [p for p in pods if p["status"].get("phase") == "Running"
                   and p["spec"].get("nodeName", "").startswith("workers-")]
        return running if len(running) == 2 else None

    wait_for("the PyTorchJob's two pods Running on the workers group", training_on_workers, timeout_s=180)

    second = deploy_local.pulumi_up(workspace, plane, kubectl, binaries, said.append)
    assert second.summary.resource_changes == {OpType.SAME: first.summary.resource_changes[OpType.CREATE]}, "\n".join(said)

    gone = deploy_local.pulumi_destroy(workspace, binaries, said.append)
    assert gone.summary.resource_changes == {OpType.DELETE: first.summary.resource_changes[OpType.CREATE]}, "\n".join(said)
    assert not (held(kubectl.api) - before), sorted(held(kubectl.api) - before)  # destroy waits for each deletion
