"""Where a workload runs: a node group's facts, and the pod shape that fits it."""

from dataclasses import dataclass, field
from typing import Any

from infra.catalogue import InstanceType
from infra.efa_node_group import KUBERNETES_EFFECT, TaintEffect

ARCHITECTURE_LABEL = "kubernetes.io/arch"
_KUBERNETES_ARCH = {"arm64": "arm64", "x86_64": "amd64"}


@dataclass(frozen=True)
class NodeTarget:
    """The node group a pod is placed on (from EfaNodeGroup, or from config for rendering)."""

    instance: InstanceType
    efa_interfaces: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, Any]] = field(default_factory=list)

    def node_selector(self) -> dict[str, str]:
        return {**self.labels, ARCHITECTURE_LABEL: _KUBERNETES_ARCH[self.instance.architecture.value]}

    def tolerations(self) -> list[dict[str, str]]:
        return [
            {"key": taint["key"], "operator": "Equal", "value": str(taint.get("value", "")), "effect": KUBERNETES_EFFECT[TaintEffect(taint["effect"])]}
            for taint in self.taints
        ]


def pod_cpus(instance: InstanceType) -> int:
    """Whole CPUs a training pod gets: the node's vCPUs less a reserve for kubelet and daemon sets."""
    return instance.vcpus - max(2, instance.vcpus // 16)


def pod_memory_gib(instance: InstanceType) -> int:
    """Memory a training pod gets: 85 % of the node, less 2 GiB for kubelet, eviction and daemon sets."""
    return int(instance.memory_gib * 0.85) - 2


def too_small(instance: InstanceType) -> str | None:
    """Why a training pod cannot fit `instance`, or None: it needs a whole CPU and a GiB after the node's reserve."""
    if pod_cpus(instance) < 1 or pod_memory_gib(instance) < 1:
        return (f"{instance.name} ({instance.vcpus} vCPUs, {instance.memory_gib} GiB) leaves no whole CPU and GiB for a "
                "training pod after the node's reserve for kubelet and daemon sets; use a type with at least 4 vCPUs")
    return None


def resources(target: NodeTarget) -> dict[str, dict[str, str]]:
    """Requests equal to limits (Guaranteed QoS): whole CPUs, memory, EFA interfaces, GPUs.

    No hugepages: no node group allocates them or announces them to the autoscaler,
    so a pod requesting them would stay Pending.
    """
    amounts = {"cpu": str(pod_cpus(target.instance)), "memory": f"{pod_memory_gib(target.instance)}Gi"}
    if target.efa_interfaces:
        # Fewer than the node's interfaces and NCCL silently falls back to TCP sockets.
        amounts["vpc.amazonaws.com/efa"] = str(target.efa_interfaces)
    if target.instance.gpus:
        amounts["nvidia.com/gpu"] = str(target.instance.gpus)
    return {"requests": dict(amounts), "limits": dict(amounts)}
