"""tests.cluster.addon_pods: the pods each add-on would run are the pinned charts' own, with the stack's values in them.

Every shipped stack file and the variants (Karpenter, Trainer v2, CloudWatch) are rendered under mocks once; the
tables' merging of values (Helm's, an add-on's configurationValues) and their version checks are tested on single
registrations.
"""

import json
from datetime import date
from functools import cache
from typing import Any

import pytest

from eks_ddp.infra.aws.cluster import SYSTEM_LABEL
from eks_ddp.tools import stack_file
from tests.cluster.addon_pods import AddonTableError, Workload, addon_workloads
from eks_ddp.stack.config import parse
from eks_ddp.engine_models.base import Deployment, admits, node_sources, tolerated
from eks_ddp.tools.mocking import run_under_mocks
from eks_ddp.tools.mocking import Registration

TODAY = date(2026, 11, 22)
# What the local cluster stands in: not metrics-server, the operators or Karpenter, which it runs from their modules.
SYSTEM = {"cluster-autoscaler-aws-cluster-autoscaler"}
CLUSTER = {"aws-node", "kube-proxy", "eks-pod-identity-agent", "coredns", "eks-node-monitoring-agent", "dcgm-server"}
PROMETHEUS = {
    "kube-prometheus-stack-operator",
    "prometheus-kube-prometheus-stack-prometheus",
    "alertmanager-kube-prometheus-stack-alertmanager",
    "kube-prometheus-stack-grafana",
    "kube-prometheus-stack-kube-state-metrics",
    "kube-prometheus-stack-prometheus-node-exporter",
}
FSX = {"fsx-csi-controller", "fsx-csi-node"}
EFS = {"efs-csi-controller", "efs-csi-node"}
EFA = {"aws-efa-k8s-device-plugin"}
GPU = {"nvidia-device-plugin", "nvidia-device-plugin-mps-control-daemon", "dcgm-exporter"}
CLOUDWATCH = {
    "amazon-cloudwatch-observability-controller-manager",
    "cloudwatch-agent",
    "dcgm-exporter",
    "neuron-monitor",
    "fluent-bit",
}
BASE = CLUSTER | SYSTEM | PROMETHEUS
EXPECTED = {
    "cpu": BASE,
    "dev": BASE | EFA | FSX,
    # A cluster made elsewhere: its own network add-ons and CoreDNS, its groups' sizes kept (no autoscaler); the EKS
    # node monitoring agent (and the DCGM server it reads GPUs with) made beside it, as it is given by name.
    "eksctl": PROMETHEUS | EFA | FSX | GPU | {"eks-node-monitoring-agent", "dcgm-server"},
    "gpu": BASE | EFA | FSX | GPU,
    "gpu-existing": BASE | EFA | FSX | GPU,
    "own-code": BASE | EFS,
    "trainium": BASE | EFA | FSX | {"neuron-device-plugin"},  # the chart's node problem detector stays off
    "workshop": BASE | EFS,
}


@cache
def _deployment(stack: str, **settings: str) -> Deployment:
    values, region = stack_file.load(stack)
    registrations = run_under_mocks(parse({**values, **settings}, region), stack=stack)
    return Deployment(registrations, region or "us-east-1", "", TODAY)


def _workloads(stack: str, **settings: str) -> list[Workload]:
    return addon_workloads(_deployment(stack, **settings))


def _named(workloads: list[Workload], name: str) -> Workload:
    (found,) = [w for w in workloads if w.name == name]
    return found


def _registration(type_: str, name: str, **inputs: Any) -> Registration:
    return Registration(type_, name, f"urn:pulumi:test::eks-ddp::{type_}::{name}", "", inputs)


def _render(*registrations: Registration) -> list[Workload]:
    return addon_workloads(Deployment(list(registrations), "us-east-1", "", TODAY))


def _release(chart: str, version: str, values: dict[str, Any]) -> Registration:
    return _registration("kubernetes:helm.sh/v3:Release", f"{chart}-chart", chart=chart, version=version, values=values)


def _addon(name: str, **inputs: Any) -> Registration:
    return _registration("aws:eks/addon:Addon", name, addonName=name, **inputs)


def test_every_stack_file_has_expectations() -> None:
    assert set(stack_file.stacks()) == set(EXPECTED)


@pytest.mark.parametrize("stack", sorted(EXPECTED))
def test_each_stack_file_runs_the_pods_of_what_it_installs(stack: str) -> None:
    workloads = _workloads(stack)
    assert {w.name for w in workloads} == EXPECTED[stack]
    assert all(w.kind in ("DaemonSet", "Deployment", "StatefulSet") for w in workloads)
    assert all((w.replicas == 0) == (w.kind == "DaemonSet") for w in workloads)
    assert all(w.pod["containers"] and w.source for w in workloads)


def test_gpu_daemon_sets_land_on_the_tainted_gpu_nodes() -> None:
    deployment = _deployment("gpu")
    gpu_sources = [source for source in node_sources(deployment) if source.nvidia]  # p4de, p4d, g4dn.metal
    assert len(gpu_sources) == 3 and all(s.taints for s in gpu_sources), "the GPU groups of Pulumi.gpu.yaml are tainted"
    workloads = addon_workloads(deployment)
    for name in ("nvidia-device-plugin", "dcgm-exporter"):
        pod = _named(workloads, name).pod
        assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
        assert all(tolerated(gpu_nodes.taints, pod["tolerations"]) for gpu_nodes in gpu_sources), name
    exporter = _named(workloads, "dcgm-exporter")
    assert exporter.owner == "Release eks-ddp-monitoring-dcgm" and "4.8.2" in exporter.source
    # Helm replaces a list: the chart's control-plane toleration gives way to ours.
    assert {t.get("key") for t in exporter.pod["tolerations"]} == {"nvidia.com/gpu"}
    assert exporter.pod["containers"][0]["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
    efa_plugin = _named(workloads, "aws-efa-k8s-device-plugin").pod
    (term,) = efa_plugin["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {"p4de.24xlarge", "p4d.24xlarge", "g4dn.metal"} <= set(term["matchExpressions"][0]["values"])
    assert all(tolerated(gpu_nodes.taints, efa_plugin["tolerations"]) for gpu_nodes in gpu_sources)


def test_our_node_selector_reaches_the_controllers_beside_the_charts_own() -> None:
    workloads = _workloads("dev")
    on_system = PROMETHEUS - {"kube-prometheus-stack-prometheus-node-exporter"}
    for name in on_system | {"cluster-autoscaler-aws-cluster-autoscaler", "fsx-csi-controller"}:
        assert _named(workloads, name).pod["nodeSelector"].items() >= SYSTEM_LABEL.items(), name
    assert _named(workloads, "fsx-csi-controller").pod["nodeSelector"] == {"kubernetes.io/os": "linux", **SYSTEM_LABEL}
    assert _named(workloads, "fsx-csi-node").pod["tolerations"] == [{"operator": "Exists"}]  # tolerateAllTaints
    alertmanager = _named(workloads, "alertmanager-kube-prometheus-stack-alertmanager")
    assert alertmanager.kind == "StatefulSet" and alertmanager.replicas == 1
    assert alertmanager.pod["containers"][0]["resources"]["requests"] == {"memory": "200Mi"}  # the operator's
    assert [c["name"] for c in alertmanager.pod["initContainers"]] == ["init-config-reloader"]


def test_karpenter_trainer_v2_and_cloudwatch_bring_their_pods_instead() -> None:
    """Karpenter and the Trainer run from their modules' charts; without the Cluster Autoscaler, Prometheus and the
    v1 operators, what is stood in is the EKS add-ons, the device plugins, FSx and CloudWatch."""
    workloads = _workloads("gpu", autoscaler="karpenter", trainingOperator="v2", monitoring="cloudwatch")
    assert {w.name for w in workloads} == CLUSTER | EFA | FSX | GPU | CLOUDWATCH
    cloudwatch_dcgm = next(w for w in workloads if w.name == "dcgm-exporter" and w.owner.startswith("Addon"))
    assert cloudwatch_dcgm.pod["tolerations"] == [{"operator": "Exists"}]
    assert cloudwatch_dcgm.pod["containers"][0]["resources"]["requests"] == {"cpu": "250m", "memory": "128Mi"}


def test_helm_merges_maps_replaces_lists_and_drops_nulls() -> None:
    controller, node = _render(_release("aws-fsx-csi-driver", "1.11.0", {"node": {"tolerateAllTaints": False}}))
    assert controller.replicas == 2 and node.kind == "DaemonSet"
    assert [t.get("key") for t in node.pod["tolerations"]] == [None, "fsx.csi.aws.com/agent-not-ready"]


def test_what_the_cluster_runs_from_a_module_is_not_stood_in() -> None:
    """Helm renders these charts from their Go modules (tests.cluster.charts), so the cluster runs their own pods."""
    assert _render(_release("metrics-server", "3.12.2", {}), _release("oci://public.ecr.aws/karpenter/karpenter",
                                                                      "1.14.1", {})) == []


def test_an_addons_configuration_values_reach_its_pods() -> None:
    configuration = {
        "replicaCount": 3,
        "nodeSelector": SYSTEM_LABEL,
        "tolerations": [],
        "resources": {"requests": {"memory": "100Mi"}},
    }
    (coredns,) = _render(_addon("coredns", configurationValues=json.dumps(configuration)))
    assert coredns.replicas == 3 and coredns.pod["nodeSelector"] == SYSTEM_LABEL and coredns.pod["tolerations"] == []
    assert coredns.pod["containers"][0]["resources"]["requests"] == {"cpu": "100m", "memory": "100Mi"}
    assert coredns.pod["topologySpreadConstraints"] == []  # ScheduleAnyway only scores nodes
    (default,) = _render(_addon("coredns", addonVersion="v1.14.3-eksbuild.2"))
    assert default.replicas == 2 and len(default.pod["tolerations"]) == 2


@pytest.mark.parametrize(
    ("registration", "pinned"),
    [
        (_release("aws-fsx-csi-driver", "1.12.0", {}), "aws-fsx-csi-driver 1.12.0"),
        (_addon("vpc-cni", addonVersion="v1.20.4-eksbuild.1"), "vpc-cni v1.20.4-eksbuild.1"),
    ],
)
def test_a_version_the_table_was_not_read_at_raises(registration: Registration, pinned: str) -> None:
    with pytest.raises(AddonTableError, match=f"{pinned} is installed but .* was read at"):
        _render(registration)


@pytest.mark.parametrize(
    "registration",
    [
        _release("aws-load-balancer-controller", "1.13.0", {}),
        _addon("aws-ebs-csi-driver"),
        _release("aws-efa-k8s-device-plugin", "v0.5.30", {}),  # the chart's own 303-type list is not kept
    ],
)
def test_an_addon_without_a_table_raises(registration: Registration) -> None:
    with pytest.raises(AddonTableError):
        _render(registration)


@pytest.mark.parametrize("stack", ["gpu", "gpu-existing"])
def test_the_node_monitoring_agents_dcgm_server_reaches_the_tainted_gpu_nodes(stack: str) -> None:
    """Its chart tolerates nothing for the DCGM server (dcgmAgent.tolerations: []): the add-on's configuration
    tolerates the GPU groups' taints, or GPU health would go unreported on exactly the nodes that need it."""
    deployment = _deployment(stack)
    gpu_sources = [source for source in node_sources(deployment) if source.nvidia]
    assert gpu_sources and all(source.taints for source in gpu_sources)
    dcgm = _named(_workloads(stack), "dcgm-server")
    assert all(admits(source, dcgm.pod) for source in gpu_sources)
