"""Where a workload runs: a node group's facts, and the pod shape that fits it."""

from dataclasses import dataclass, field
from typing import Any

from infra.catalogue import InstanceType
from infra.efa_node_group import KUBERNETES_EFFECT, NodeGroupShape, TaintEffect, placement_facts

ARCHITECTURE_LABEL = "kubernetes.io/arch"
KUBERNETES_ARCH = {"arm64": "arm64", "x86_64": "amd64"}


@dataclass(frozen=True)
class NodeTarget:
    """The node group a pod is placed on: its type's facts and what it places pods by (`target_of`)."""

    instance: InstanceType
    efa_interfaces: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, Any]] = field(default_factory=list)

    def node_selector(self) -> dict[str, str]:
        return {**self.labels, ARCHITECTURE_LABEL: KUBERNETES_ARCH[self.instance.architecture.value]}

    def tolerations(self) -> list[dict[str, str]]:
        return [
            {
                "key": taint["key"],
                "operator": "Equal",
                "value": str(taint.get("value", "")),
                "effect": KUBERNETES_EFFECT[TaintEffect(taint["effect"])],
            }
            for taint in self.taints
        ]


# What an EKS AL2023 node keeps from pods (awslabs/amazon-eks-ami, nodeadm/internal/kubelet/config.go,
# withDefaultReservedResources, getCPUMillicoresToReserve, getMemoryMebibytesToReserve; evictionHard):
# kube-reserved CPU of 6 % of the first core, 1 % of the second, 0.5 % of the next two and 0.25 % beyond;
# kube-reserved memory of 11 MiB per pod the node may hold plus 255 MiB; 100 MiB eviction threshold.
# maxPods is at most 110 below 30 vCPUs and 250 above (EKS's max-pods calculator caps), used here as the
# bound, so the reserve is never under-estimated.
CPU_RESERVE_STEPS = ((1000, 600), (2000, 100), (4000, 50), (None, 25))  # (up to millicores, 1/10000 reserved)
EVICTION_MIB = 100
# The kernel and firmware keep part of EC2's memory from the node's capacity: Karpenter assumes 7.5 %
# (aws/karpenter-provider-aws, VM_MEMORY_OVERHEAD_PERCENT default 0.075).
VM_MEMORY_OVERHEAD = 0.075
# Daemon sets on every training node: aws-node 25m, kube-proxy 100m, eks-pod-identity-agent, the CSI
# node plugins, the EFA and NVIDIA device plugins; requests rounded up to leave room for another.
DAEMON_SETS_MILLICORES, DAEMON_SETS_MIB = 400, 768


def target_of(shape: NodeGroupShape, instance: InstanceType) -> NodeTarget:
    """Where a group's pods land, from its shape and its type's facts, as the group itself derives them."""
    efa_interfaces, labels, taints = placement_facts(shape, instance)
    return NodeTarget(instance, efa_interfaces, labels, [dict(taint) for taint in taints])


def kube_reserved_millicores(vcpus: int) -> int:
    total, reserved, start = vcpus * 1000, 0, 0
    for end, per_ten_thousand in CPU_RESERVE_STEPS:
        top = total if end is None else min(total, end)
        reserved += max(0, top - start) * per_ten_thousand // 10000
        start = end or start
    return reserved


def max_pods(vcpus: int) -> int:
    return 110 if vcpus < 30 else 250


def pod_cpus(instance: InstanceType) -> int:
    """Whole CPUs a training pod gets: the node's allocatable CPU less the daemon sets', rounded down."""
    allocatable = instance.vcpus * 1000 - kube_reserved_millicores(instance.vcpus)
    return (allocatable - DAEMON_SETS_MILLICORES) // 1000


def pod_memory_gib(instance: InstanceType) -> int:
    """Whole GiB a training pod gets: the node's allocatable memory less the daemon sets', rounded down."""
    capacity = instance.memory_gib * 1024 * (1 - VM_MEMORY_OVERHEAD)
    allocatable = capacity - (11 * max_pods(instance.vcpus) + 255) - EVICTION_MIB
    return int((allocatable - DAEMON_SETS_MIB) // 1024)


def too_small(instance: InstanceType) -> str | None:
    """Why a training pod cannot fit `instance`, or None: it needs a whole CPU and a GiB after the node's reserve."""
    if pod_cpus(instance) < 1 or pod_memory_gib(instance) < 1:
        return (
            f"{instance.name} ({instance.vcpus} vCPUs, {instance.memory_gib:g} GiB) leaves no whole CPU and GiB "
            "for a training pod after what EKS reserves and the daemon sets; use a type with at least 2 vCPUs "
            "and 4 GiB"
        )
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
