"""The control plane the cluster tests share (tests.cluster.shared_plane) is, for each test, what a fresh one would be:
after a stack ran on it, a reset leaves only what the API server made at its start and the CRDs the next stack
installs unchanged; and an object applied before the CRD its stack installs is refused though the plane holds it."""

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import crds, local_cluster
from tests.cluster.conftest import training
from tests.cluster.shared_plane import SharedPlane

OPERATOR_ROLE = "training-operator"
SYSTEM_NAMESPACES = {"default", "kube-node-lease", "kube-public", "kube-system"}


def _names(items: list[dict[str, Any]]) -> set[str]:
    return {o["metadata"]["name"] for o in items}


def test_a_reset_leaves_no_object_of_the_last_stack_and_an_object_before_its_crd_is_still_refused(
    shared_plane: SharedPlane, engines: dict[str, Path]
) -> None:
    deployment = local_cluster.deployment_of("dev", {})
    steps = local_cluster.steps_of(deployment, engines)
    installed = local_cluster.installed_crds(steps)
    cluster = shared_plane.take("dev", installed)
    local_cluster.deploy(cluster, deployment, engines, steps)
    assert training(local_cluster.settle(cluster.kubectl)), "dev's training pods, before the reset"
    roles = _names(cluster.kubectl.items("clusterroles"))
    assert OPERATOR_ROLE in roles and cluster.kubectl.items("nodes") and crds.held(cluster.kubectl)

    kubectl = shared_plane.take("dev", installed).kubectl
    assert set(crds.held(kubectl)) == {crd["metadata"]["name"] for crd in installed}, "the CRDs to keep, kept"
    assert not kubectl.items("pytorchjobs", "--all-namespaces") and not kubectl.items("nodes")
    assert _names(kubectl.items("namespaces")) == SYSTEM_NAMESPACES
    assert OPERATOR_ROLE not in _names(kubectl.items("clusterroles"))

    (job,) = [s for s in steps if any(m["kind"] == "PyTorchJob" for m in s.manifests)]
    early = [replace(job, after=()), *(s for s in steps if s is not job)]
    with pytest.raises(local_cluster.DeployError, match="no matches for kind PyTorchJob"):
        local_cluster.deploy(shared_plane.take("dev", installed), deployment, engines, early)

    first = installed[0]
    changed = {**first, "metadata": {**first["metadata"], "labels": {"eks-ddp.local/test": "changed"}}}
    kubectl = shared_plane.take("dev", [changed]).kubectl
    assert not crds.held(kubectl), "a CRD the next stack installs differently is not kept, nor one it does not install"
    shared_plane.release()
