"""Karpenter's own CRDs (v1.14.1, rendered from the module's chart) on the real API server: every shipped stack's
EC2NodeClasses and NodePools under autoscaler=karpenter are admitted, and what their CEL rules refuse is refused,
by the API server and, before anything is created, by eks-ddp's own check (infra.addons.karpenter_nodes)."""

import copy
from collections.abc import Callable
from typing import Any

import pytest

from eks_ddp.infra.addons.karpenter_nodes import interface_errors, label_errors
from tests.cluster import charts, karpenter, local_cluster
from tests.cluster.conftest import OnEngines, wait_for
from tests.cluster.engines import build
from tests.cluster.api import ApiError
from tests.cluster.kubectl import FIELD_MANAGER, Kubectl

KARPENTER = {"eks-ddp:autoscaler": "karpenter"}
KINDS = ("EC2NodeClass", "NodePool")


def _refusal(kubectl: Kubectl, manifest: dict[str, Any]) -> str:
    """Why the API server refuses the object (server-side dry run), or "" when it admits it."""
    try:
        kubectl.api.apply(manifest, FIELD_MANAGER, dry_run=True)
    except ApiError as error:
        return str(error)
    return ""


def _karpenter_crds(kubectl: Kubectl) -> None:
    deployment = local_cluster.deployment_of("dev", KARPENTER)
    (release,) = [r for r in deployment.of_type(charts.HELM_RELEASE) if karpenter.is_release(r)]
    rendered = charts.render(release, build.version(build.Engine.read(build.HERE / "kube")))
    assert rendered is not None, "Karpenter's chart is in its Go module"
    crds = [o for o in rendered if o["kind"] == "CustomResourceDefinition"]
    kubectl.apply(crds)
    for crd in crds:
        name = crd["metadata"]["name"]
        wait_for(f"CRD {name} established", lambda: kubectl.run("get", "crd", name, "-o",
                 "jsonpath={.status.conditions[?(@.type=='Established')].status}") == "True")


@pytest.fixture
def karpenter_api(cluster: Callable[..., OnEngines]) -> Kubectl:
    kubectl = cluster("dev", KARPENTER, deploy=False).kubectl  # after a Karpenter test its CRDs stay
    _karpenter_crds(kubectl)
    return kubectl


def test_every_stacks_node_classes_and_pools_are_admitted_and_what_the_cel_rules_refuse_is_refused(
    karpenter_api: Kubectl,
) -> None:
    refused, checked = {}, 0
    for stack in karpenter.stacks():
        deployment = local_cluster.deployment_of(stack, KARPENTER)
        for registration in deployment.kubernetes_objects():
            if registration.inputs["kind"] in KINDS:
                checked += 1
                if why := _refusal(karpenter_api, dict(registration.sent)):
                    refused[f"{stack}: {registration.inputs['kind']} {registration.inputs['metadata']['name']}"] = why
    assert checked >= 2 * len(karpenter.stacks()) and not refused, refused

    sent = {r.inputs["kind"]: dict(r.sent) for r in local_cluster.deployment_of("dev", KARPENTER).kubernetes_objects()
            if r.inputs["kind"] in KINDS}
    no_primary = copy.deepcopy(sent["EC2NodeClass"])
    no_primary["spec"]["networkInterfaces"] = no_primary["spec"]["networkInterfaces"][1:]
    assert interface_errors(no_primary["spec"]["networkInterfaces"]) == [
        "networkInterfaces must include a primary interface with interfaceType='interface'"]
    assert "must include a primary interface" in _refusal(karpenter_api, no_primary)

    restricted = copy.deepcopy(sent["NodePool"])
    restricted["spec"]["template"]["metadata"]["labels"]["karpenter.sh/owner"] = "me"
    assert label_errors(restricted["spec"]["template"]["metadata"]["labels"]) == [
        "label 'karpenter.sh/owner' is restricted: Karpenter sets it"]
    assert "restricted" in _refusal(karpenter_api, restricted)
