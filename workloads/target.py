"""Where a workload runs: a node group's facts, and the pod shape that fits it."""

from dataclasses import dataclass, field
from typing import Any

from eks_ddp.infra.addons.karpenter_nodes import efa_only_on_card_zero
from eks_ddp.infra.aws.efa_node_group import KUBERNETES_EFFECT, NodeGroupShape, TaintEffect, placement_facts
from eks_ddp.infra.facts.allocatable import Allocatable, NodeLauncher, allocatable, without_efa_hugepages
from eks_ddp.infra.facts.catalogue import InstanceType

ARCHITECTURE_LABEL = "kubernetes.io/arch"
KUBERNETES_ARCH = {"arm64": "arm64", "x86_64": "amd64"}


@dataclass(frozen=True)
class NodeTarget:
    """The node group a pod is placed on: its type's facts and what it places pods by (`target_of`)."""

    instance: InstanceType
    efa_interfaces: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, Any]] = field(default_factory=list)
    launcher: NodeLauncher | None = None
    """What launches the nodes (their allocatable); None: pods fit either engine's nodes."""

    def pod_room(self) -> tuple[int, int]:
        """Whole CPUs and GiB of memory a training pod gets on one of these nodes."""
        return pod_room(self.instance, self.launcher, self.efa_interfaces)

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


# Daemon sets on every training node: aws-node, kube-proxy, eks-pod-identity-agent, the node monitoring agent, the
# CSI node plugins, the EFA and NVIDIA device plugins, the exporters; their requests rounded up. GPU nodes run more
# (the DCGM exporter, and with CloudWatch its agent, GPU exporter and fluent-bit: 720m on p4de, measured by the
# cluster rehearsal, stack.cluster), which reports a group where the daemon sets need more than this.
DAEMON_SETS_MILLICORES, GPU_DAEMON_SETS_MILLICORES, DAEMON_SETS_MIB = 400, 1000, 768


def daemon_sets_millicores(instance: InstanceType) -> int:
    return GPU_DAEMON_SETS_MILLICORES if instance.gpus or instance.neuron_devices else DAEMON_SETS_MILLICORES


def target_of(shape: NodeGroupShape, instance: InstanceType) -> NodeTarget:
    """Where a group's pods land, from its shape and its type's facts, as the group itself derives them."""
    efa_interfaces, labels, taints = placement_facts(shape, instance)
    return NodeTarget(instance, efa_interfaces, labels, [dict(taint) for taint in taints], shape.get("launcher"))


def node_allocatable(instance: InstanceType, launcher: NodeLauncher | None, efa_interfaces: int) -> Allocatable:
    """What one node offers under `launcher`; when it is not known, what both engines offer (a pod sized so fits
    whichever launches the node); with EFA, less its pre-allocated huge pages."""
    offers = [
        allocatable(instance, engine, efa_only_on_card_zero(efa_interfaces) if engine == NodeLauncher.KARPENTER else 0)
        for engine in ([launcher] if launcher else list(NodeLauncher))
    ]
    node = Allocatable(*(min(values) for values in zip(*((o.millicores, o.memory_mib, o.pods) for o in offers))))
    return without_efa_hugepages(node, instance, efa_interfaces > 0)


def pod_room(instance: InstanceType, launcher: NodeLauncher | None = None, efa_interfaces: int = 0) -> tuple[int, int]:
    """Whole CPUs and GiB a training pod gets: the node's allocatable less the daemon sets', rounded down."""
    node = node_allocatable(instance, launcher, efa_interfaces)
    return (node.millicores - daemon_sets_millicores(instance)) // 1000, (node.memory_mib - DAEMON_SETS_MIB) // 1024


def too_small(instance: InstanceType) -> str | None:
    """Why a training pod cannot fit `instance`, or None: it needs a whole CPU and a GiB after the node's reserve."""
    cpus, gib = pod_room(instance)
    if cpus < 1 or gib < 1:
        return (
            f"{instance.name} ({instance.vcpus} vCPUs, {instance.memory_gib:g} GiB) leaves no whole CPU and GiB "
            "for a training pod after what EKS reserves and the daemon sets; use a type with at least 2 vCPUs "
            "and 4 GiB"
        )
    return None


def resources(target: NodeTarget) -> dict[str, dict[str, str]]:
    """Requests equal to limits (Guaranteed QoS): whole CPUs, memory, EFA interfaces, GPUs or Neuron devices.

    No huge pages: Karpenter cannot launch a node for a pod that asks for them (aws/karpenter-provider-aws v1.14.1
    computeCapacity knows none), and libfabric uses regular pages without them (the NCCL check asks for them on
    managed groups only: workloads.nccl_check.HUGEPAGES).
    """
    cpus, gib = target.pod_room()
    amounts = {"cpu": str(cpus), "memory": f"{gib}Gi"}
    if target.efa_interfaces:
        # Fewer than the node's interfaces and NCCL silently falls back to TCP sockets.
        amounts["vpc.amazonaws.com/efa"] = str(target.efa_interfaces)
    if target.instance.gpus:
        amounts["nvidia.com/gpu"] = str(target.instance.gpus)
    if target.instance.neuron_devices:
        # Every device of the node, as AWS's Neuron training examples ask (aws-neuron-eks-samples trn1_dist_ddp.py:
        # `aws.amazon.com/neuron: 16` on trn1.32xlarge): the device plugin's whole-device resource.
        amounts["aws.amazon.com/neuron"] = str(target.instance.neuron_devices)
    return {"requests": dict(amounts), "limits": dict(amounts)}
