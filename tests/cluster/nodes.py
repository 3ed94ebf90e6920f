"""KWOK nodes shaped like a stack's node groups: their labels, taints, and what their kubelet reports.

A node's capacity is the instance's (infra.facts.catalogue: vCPUs, memory less the hypervisor's share, its EFA
devices, GPUs and Neuron devices, the EFA huge pages); its allocatable is what the node's launcher leaves for pods
(infra.facts.allocatable, the same arithmetic `workloads.target` sizes pods against). EKS labels every node with its
group, capacity type, zone and instance type, and where EC2 gives the type a network topology, its network nodes;
KWOK manages every node carrying the annotation below and nothing else.
"""

from typing import Any

from eks_ddp.infra.facts import catalogue
from eks_ddp.infra.facts.allocatable import NodeLauncher, memory_capacity_mib
from eks_ddp.infra.facts.network_topology import NETWORK_LAYERS, has_topology
from eks_ddp.infra.existing_cluster import DESCRIBED_GROUP
from eks_ddp.engine_models.base import Deployment, NodeSource, launcher_of, node_offer, node_sources
from tests.cluster import charts

KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
ZONE = "us-east-1a"
EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}


def group_name(source: NodeSource) -> str:
    """The node group's (or NodePool's) own name: `eks-ddp/node-group`, else the registration's."""
    return source.labels.get("eks-ddp/node-group") or source.registration.name


def initial_count(deployment: Deployment, source: NodeSource) -> int:
    """A managed group's nodes under the Cluster Autoscaler: its maxSize, all the autoscaler could add (the autoscaler
    itself cannot be built here: the Go module proxy refuses k8s.io/autoscaler/cluster-autoscaler at every version),
    so the real scheduler places every pod on what the group can reach; without it, its desiredSize, which nothing
    changes. A described group of an existing cluster: its maxSize, as if that cluster's own autoscaler had added
    them all. A NodePool's: none, Karpenter itself launches them."""
    if launcher_of(source) == NodeLauncher.KARPENTER:
        return 0
    fixed = source.registration.type != DESCRIBED_GROUP and not _cluster_autoscaled(deployment)
    return int(source.scaling.get("desiredSize" if fixed else "maxSize", 0))


def _cluster_autoscaled(deployment: Deployment) -> bool:
    """Whether the stack installs the Cluster Autoscaler's chart."""
    return any(charts.chart_name(r) == "cluster-autoscaler" for r in deployment.of_type(charts.HELM_RELEASE))


def _quantities(values: dict[str, float]) -> dict[str, str]:
    """node_offer's units (millicores, MiB, bytes of huge pages, counts) as the kubelet writes them."""
    units = {"cpu": "{:.0f}m", "memory": "{:.0f}Mi"}
    return {name: units.get(name, "{:.0f}").format(value) for name, value in values.items()}


def network_layers(group: str, index: int) -> dict[str, str]:
    """The EC2 network nodes EKS labels a node with (infra.facts.network_topology), as EC2 might place a group's
    instances at its most spread: each under a layer-3 node of its own, two under each layer-2 node, the group under
    one layer-1 node. EC2 decides this for real; here it is the cloud's side, stood in."""
    top, middle, bottom = NETWORK_LAYERS
    return {top: f"nn-{group}", middle: f"nn-{group}-{index // 2}", bottom: f"nn-{group}-{index // 2}-{index % 2}"}


def node(source: NodeSource, index: int) -> dict[str, Any]:
    """The Node object of the group's `index`-th node, status included (KWOK keeps it and heartbeats)."""
    instance = catalogue.lookup(source.instance_type)
    if instance is None:
        raise ValueError(f"{source.registration.name}: instance type {source.instance_type!r} is not in the catalogue")
    allocatable = node_offer(source)
    capacity = {
        **allocatable,
        "cpu": instance.vcpus * 1000,
        "memory": memory_capacity_mib(instance),
    }
    name = f"{group_name(source)}-{index}"
    labels = {
        **source.labels,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "topology.kubernetes.io/zone": ZONE,
        "type": "kwok",
    }
    if launcher_of(source) != NodeLauncher.KARPENTER:
        labels["eks.amazonaws.com/nodegroup"] = group_name(source)
    if has_topology(source.instance_type):
        labels.update(network_layers(group_name(source), index))
    taints = [
        {"key": t["key"], "value": t.get("value", ""), "effect": EFFECTS.get(t["effect"], t["effect"])}
        for t in source.taints
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": dict(KWOK_ANNOTATION)},
        "spec": {"taints": taints} if taints else {},
        "status": {
            "capacity": {**_quantities(capacity), "ephemeral-storage": "100Gi"},
            "allocatable": {**_quantities(allocatable), "ephemeral-storage": "95Gi"},
        },
    }


def nodes(deployment: Deployment) -> list[dict[str, Any]]:
    """Every group's nodes at its initial size."""
    return [node(source, index) for source in node_sources(deployment)
            for index in range(initial_count(deployment, source))]
