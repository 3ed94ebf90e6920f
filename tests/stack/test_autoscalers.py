"""eks-ddp:autoscaler: Karpenter with each operator on the dev and GPU stacks passes the deploy rehearsal and the
CRDs' schemas, installs its controller with what it needs, and the rehearsal reports what Karpenter would refuse
or never schedule. (The Cluster Autoscaler with each operator: tests/stack/test_operators.py.)"""

import json
from dataclasses import replace
from datetime import date
from typing import Any

import pytest

from eks_ddp.policy.rules import StackResource, efa_groups_consistent
from eks_ddp.tools import stack_file
from eks_ddp.stack.config import ConfigError, parse
from eks_ddp.engine_models import Deployment, check
from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN, Registration
from eks_ddp.tools.rehearsal import rehearse_values
from tests.upstream import validate_against_crd
from tests.stack.registered import registered

TODAY = date(2026, 11, 22)
CRDS = {
    "EC2NodeClass": "karpenter.k8s.aws_ec2nodeclasses-v1.14.1.yaml",
    "NodePool": "karpenter.sh_nodepools-v1.14.1.yaml",
}


def _registrations(stack: str, operator: str = "v1") -> list[Registration]:
    values, region = stack_file.load(stack)
    return registered({**values, "autoscaler": "karpenter", "trainingOperator": operator}, region, stack)


def _findings(registrations: list[Registration]) -> list[str]:
    return [str(f) for f in check(Deployment(registrations, "us-east-1", DEPLOYER_ROLE_ARN, TODAY))]


def _kind(registrations: list[Registration], kind: str) -> list[Registration]:
    return [r for r in registrations if r.inputs.get("kind") == kind]


@pytest.mark.parametrize("stack", ["dev", "gpu"])
@pytest.mark.parametrize("operator", ["v1", "v2", "none"])
def test_karpenter_with_each_operator_passes_the_rehearsal(stack: str, operator: str) -> None:
    values, region = stack_file.load(stack)
    values = {**values, "autoscaler": "karpenter", "trainingOperator": operator}
    registrations = registered(values, region, stack)
    assert rehearse_values(values, region, stack, TODAY, first=registrations) == []
    charts = {str(r.inputs.get("chart")) for r in registrations if r.type == "kubernetes:helm.sh/v3:Release"}
    assert "oci://public.ecr.aws/karpenter/karpenter" in charts and "cluster-autoscaler" not in charts
    node_groups = [r for r in registrations if r.type == "aws:eks/nodeGroup:NodeGroup"]
    assert [g.inputs["labels"] for g in node_groups] == [{"eks-ddp/node-group": "system"}]  # system nodes stay managed
    groups = len(values["nodeGroups"]) - 1  # one class and pool per training group
    assert len(_kind(registrations, "EC2NodeClass")) == len(_kind(registrations, "NodePool")) == groups


@pytest.mark.parametrize("stack", ["dev", "gpu"])
def test_the_node_classes_and_pools_the_stacks_render_validate_against_the_crds(stack: str) -> None:
    registrations = _registrations(stack)
    for kind, crd in CRDS.items():
        for registration in _kind(registrations, kind):
            manifest = json.loads(json.dumps(registration.inputs), parse_float=lambda text: int(float(text)))
            validate_against_crd({key: manifest[key] for key in ("apiVersion", "kind", "metadata", "spec")}, crd)


def test_the_gpu_node_class_gets_efa_on_every_card_from_the_reservation() -> None:
    registrations = _registrations("gpu")
    node_class, pool = (
        next(r for r in _kind(registrations, kind) if r.name.startswith("eks-ddp-gpu-")).inputs
        for kind in ("EC2NodeClass", "NodePool")
    )
    node_class = node_class["spec"]
    efa = [i for i in node_class["networkInterfaces"] if i["interfaceType"] == "efa-only"]
    assert sorted(int(i["networkCardIndex"]) for i in efa) == [0, 1, 2, 3]  # p4de.24xlarge: 4 cards
    assert node_class["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]
    assert "placementGroupSelector" not in node_class and len(node_class["subnetSelectorTerms"]) == 1
    requirements = {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]}
    assert requirements["karpenter.sh/capacity-type"] == ["reserved"]
    assert requirements["node.kubernetes.io/instance-type"] == ["p4de.24xlarge"]
    assert pool["spec"]["limits"] == {"cpu": "192"}  # maxSize 2 x 96 vCPUs
    dev = _kind(_registrations("dev"), "EC2NodeClass")[0]
    assert dev.inputs["spec"]["placementGroupSelector"]["name"]  # no reservation: a cluster placement group


def test_the_controller_gets_its_chart_role_queue_and_node_access() -> None:
    registrations = _registrations("dev")
    by_type: dict[str, list[Registration]] = {}
    for r in registrations:
        by_type.setdefault(r.type, []).append(r)
    chart = next(r for r in by_type["kubernetes:helm.sh/v3:Release"] if r.inputs["chart"].endswith("/karpenter"))
    assert chart.inputs["version"] == "1.14.1" and chart.inputs["namespace"] == "kube-system"
    values = chart.inputs["values"]
    assert values["settings"]["clusterName"] == stack_file.load("dev")[0]["clusterName"] and values["nodeSelector"] == {
        "eks-ddp/node-group": "system"
    }
    assert values["replicas"] == 2 and values["serviceAccount"]["annotations"] == {}  # EKS Pod Identity, by default
    assert values["podAnnotations"] == {"eks-ddp/role-access": "pod-identity"}  # a new way rolls the controller
    association = next(r for r in registrations if r.name == "eks-ddp-karpenter-role-association")
    assert (association.inputs["namespace"], association.inputs["serviceAccount"]) == ("kube-system", "karpenter")
    assert association.urn in chart.dependencies  # the controller's pods are created after their association
    queue = by_type["aws:sqs/queue:Queue"][0]
    assert queue.inputs["messageRetentionSeconds"] == 300 and queue.inputs["sqsManagedSseEnabled"] is True
    assert values["settings"]["interruptionQueue"] == queue.inputs["name"]
    queue_policy = json.loads(by_type["aws:sqs/queuePolicy:QueuePolicy"][0].inputs["policy"])
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in queue_policy["Statement"]
    )
    patterns = sorted(
        json.loads(r.inputs["eventPattern"])["detail-type"][0] for r in by_type["aws:cloudwatch/eventRule:EventRule"]
    )
    assert patterns == [
        "AWS Health Event",
        "EC2 Capacity Reservation Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "EC2 Spot Instance Interruption Warning",
    ]
    assert all(t.inputs["arn"] == queue.inputs["arn"] for t in by_type["aws:cloudwatch/eventTarget:EventTarget"])
    entry = by_type["aws:eks/accessEntry:AccessEntry"]
    node_role = next(r for r in by_type["aws:iam/role:Role"] if r.name == "eks-ddp-karpenter-node-role")
    assert [e.inputs["type"] for e in entry if e.inputs["principalArn"] == node_role.inputs["arn"]] == ["EC2_LINUX"]
    assert _kind(registrations, "EC2NodeClass")[0].inputs["spec"]["role"] == node_role.inputs["name"]
    trust = json.loads(
        next(r for r in by_type["aws:iam/role:Role"] if r.name == "eks-ddp-karpenter-role").inputs["assumeRolePolicy"]
    )
    scoped = trust["Statement"][0]["Condition"]["StringEquals"]
    assert (scoped["aws:RequestTag/kubernetes-namespace"], scoped["aws:RequestTag/kubernetes-service-account"]) == (
        "kube-system",
        "karpenter",
    )
    assert (
        len(
            [
                r
                for r in by_type["aws:iam/rolePolicyAttachment:RolePolicyAttachment"]
                if "karpenter-" in r.name and "node-role" not in r.name
            ]
        )
        == 5
    )


def _changed(registrations: list[Registration], kind: str, change: Any) -> list[Registration]:
    return [
        replace(r, inputs=change(json.loads(json.dumps(r.inputs)))) if r.inputs.get("kind") == kind else r
        for r in registrations
    ]


def test_efa_on_cards_1_to_31_only_leaves_a_pod_that_requests_every_card_pending() -> None:
    """The layout of 32 entries (the primary interface and `efa-only` on cards 1-31) gives a node one EFA device
    fewer than it has cards: Karpenter then offers one fewer than the pod requests, and never launches a node."""

    def drop_card_0(inputs: dict[str, Any]) -> dict[str, Any]:
        inputs["spec"]["networkInterfaces"] = [
            i for i in inputs["spec"]["networkInterfaces"] if (i["networkCardIndex"], i["deviceIndex"]) != (0, 1)
        ]
        return inputs

    findings = _findings(_changed(_registrations("gpu"), "EC2NodeClass", drop_card_0))
    assert (
        "efa-interfaces: EC2NodeClass eks-ddp-gpu-ec2nodeclass spec.networkInterfaces: EFA on cards [1, 2, 3] of "
        "p4de.24xlarge, which has 4 network cards" in findings
    )
    assert any(
        f.startswith("schedulable: PyTorchJob eks-ddp-train-job resources.requests.vpc.amazonaws.com/efa: 4 requested")
        and "NodePool eks-ddp-gpu-nodepool: 3" in f
        for f in findings
    ), findings


def test_the_rehearsal_reports_karpenter_replicas_without_a_system_node_each() -> None:
    """What Karpenter's CRDs refuse the API server itself decides (tests/cluster/test_karpenter_admission_on_engines.py);
    its chart's replicas on too few system nodes, this rule."""
    registrations = _registrations("dev")
    three = [
        replace(r, inputs={**r.inputs, "values": {**r.inputs["values"], "replicas": 3}})
        if str(r.inputs.get("chart", "")).endswith("/karpenter")
        else r
        for r in registrations
    ]
    assert (
        "karpenter-controller: Release eks-ddp-karpenter-chart values.replicas: 3 replicas on 2 system node(s): "
        "each needs a node of its own" in _findings(three)
    )


def test_the_policy_pack_checks_node_classes_as_it_checks_node_groups() -> None:
    registrations = _registrations("dev")
    resources = [StackResource(r.type, r.name, r.urn, r.inputs, r.property_dependencies) for r in registrations]
    assert efa_groups_consistent(resources) == []

    def unplaced(inputs: dict[str, Any]) -> dict[str, Any]:
        del inputs["spec"]["placementGroupSelector"]
        return inputs

    broken = [
        StackResource(r.type, r.name, r.urn, r.inputs, r.property_dependencies)
        for r in _changed(registrations, "EC2NodeClass", unplaced)
    ]
    assert efa_groups_consistent(broken) == [
        "node class eks-ddp-workers-ec2nodeclass: EFA nodes need a `cluster` placement group "
        "(or a capacity reservation)",
    ]


def test_an_unknown_autoscaler_is_one_line_naming_the_key() -> None:
    values, region = stack_file.load("dev")
    with pytest.raises(ConfigError) as error:
        parse({**values, "autoscaler": "keda"}, region)
    assert (
        str(error.value) == "eks-ddp:autoscaler: 'keda' is not allowed; use one of cluster-autoscaler, karpenter, none"
    )


def test_the_preview_says_karpenter_launches_the_training_nodes_and_keeps_none_idle() -> None:
    from eks_ddp.tools import node_facts

    values, region = stack_file.load("gpu")
    records = {r["name"]: r for r in node_facts.node_groups(parse({**values, "autoscaler": "karpenter"}, region))}
    assert (records["gpu"]["launcher"], records["gpu"]["nodes"]) == ("Karpenter NodePool", "0-2")
    assert (records["system"]["launcher"], records["system"]["nodes"]) == ("managed node group", "2-2")
    default = {r["name"]: r for r in node_facts.node_groups(parse(values, region))}
    assert (default["gpu"]["launcher"], default["gpu"]["nodes"]) == ("managed node group", "2-2")
