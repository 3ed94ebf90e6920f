"""Where a workload runs: a node group's facts, and the pod shape that fits it."""

import math
from dataclasses import dataclass, field
from typing import Any

from eks_ddp.infra.node_group import KUBERNETES_EFFECT, NodeGroup, NodeGroupShape, TaintEffect
from eks_ddp.infra.facts.allocatable import NodeLauncher
from eks_ddp.infra.facts.catalogue import InstanceType
from eks_ddp.infra.facts.node_room import pod_room, room_mib

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


def target_of(shape: NodeGroupShape, instance: InstanceType) -> NodeTarget:
    """Where a group's pods land, from its shape and its type's facts, as the group itself derives them."""
    efa_interfaces, labels, taints = NodeGroup.of(shape).placement(instance)
    return NodeTarget(instance, efa_interfaces, labels, [dict(taint) for taint in taints], shape.get("launcher"))


def too_small(instance: InstanceType) -> str | None:
    """Why a training pod cannot fit `instance`, or None: it needs a whole CPU after the node's reserve and the daemon
    sets, and room for the memory of its smallest pod (one rank, no data: `pod_memory_mib`)."""
    cpus, _ = pod_room(instance)
    smallest = pod_memory_mib(instance, 1)
    if cpus < 1 or room_mib(instance) < smallest:
        return (
            f"{instance.name} ({instance.vcpus} vCPUs, {instance.memory_gib:g} GiB) leaves no whole CPU and GiB for a "
            f"training pod after what EKS reserves and the daemon sets (the smallest asks for {smallest} MiB); use a "
            "type with at least 2 vCPUs and 4 GiB"
        )
    return None


# What a training pod's processes hold at their peak, measured by benchmarks/pod_memory.py: real one-epoch runs of the
# bundled trainer under torchrun, every process's resident set sampled each 50 ms (an upper bound of what the pod's
# cgroup is charged: pages of shared libraries count once per process), on x86_64 with 2 CPUs, results in
# benchmarks/results/2026-11-25-pod-memory.jsonl, rounded up to 10 MiB. TORCHRUN_MIB: torchrun itself (539-649 MiB);
# PROCESS_MIB: one rank with next to no data (digits, 1,797 8x8 images: its torch, model, optimizer and step buffers,
# 777-832 MiB); a pod of 2 MNIST ranks held 3,046 MiB, less than torchrun and twice a rank. The metrics server and S3
# uploads were not in the measured runs: importing boto3 and prometheus_client and making an S3 client adds 26 MiB.
# ACCELERATOR_PROCESS_MIB is what each GPU or NeuronCore process is allowed on the host for its runtime, libraries and
# NCCL's buffers: an allowance, not a measurement (no GPU or Neuron device here). MEMORY_MARGIN covers what differs
# from the measured runs: Graviton's wheels, another glibc, a larger batch.
TORCHRUN_MIB, PROCESS_MIB, ACCELERATOR_PROCESS_MIB = 650, 840, 4096
MEMORY_MARGIN = 0.5


def pod_memory_mib(instance: InstanceType, processes: int, data_mib: int = 0) -> int:
    """The memory a pod of `processes` ranks asks for: torchrun, each rank with `data_mib` of its own data and, on GPU
    and Neuron nodes, its accelerator runtime, and MEMORY_MARGIN more."""
    accelerator = ACCELERATOR_PROCESS_MIB if instance.gpus or instance.neuron_devices else 0
    return math.ceil((TORCHRUN_MIB + processes * (PROCESS_MIB + data_mib + accelerator)) * (1 + MEMORY_MARGIN))


def resources(target: NodeTarget, memory_mib: int | None = None) -> dict[str, dict[str, str]]:
    """The pod keeps its node to itself by what the node cannot share: every whole CPU left after the daemon sets,
    every EFA interface, GPU and Neuron device, requested up to their limits. Memory is asked for as the pod needs it:
    `memory_mib` (what workloads.training_pod measures for the trainer; by default one process per device, or one, with
    no data of its own), never the last per cent of the node's estimated memory, which differs from real nodes by
    instance type and AMI: a pod a MiB larger than what the kubelet offers stays Pending for ever.

    The memory limit is the pod's room on the node (the estimate less the daemon sets' budget), or the request where
    that is larger: the scheduler never reads limits, so an estimate above a real node leaves no pod Pending, and a
    process that outgrows its request is not killed until it reaches what the node can spare beside the daemon sets
    (the limit checkov's CKV_K8S_13 asks for keeps it from starving them). The pods are Burstable, not Guaranteed:
    nodeadm sets no `cpuManagerPolicy` (awslabs/amazon-eks-ami v20260724 nodeadm/internal/kubelet), so the kubelet's
    default `none` would pin no CPU for a Guaranteed pod either, and a pod beyond its request is evicted first only
    when the whole node runs out of memory.

    No huge pages: Karpenter cannot launch a node for a pod that asks for them (aws/karpenter-provider-aws v1.14.1
    computeCapacity knows none), and libfabric uses regular pages without them (the NCCL check asks for them on
    managed groups only: workloads.nccl_check.HUGEPAGES_MIB).
    """
    cpus, room_gib = target.pod_room()
    devices = target.instance.gpus or target.instance.neuron_devices or 1
    request = pod_memory_mib(target.instance, devices) if memory_mib is None else memory_mib
    amounts = {"cpu": str(cpus)}
    if target.efa_interfaces:
        # Fewer than the node's interfaces and NCCL silently falls back to TCP sockets.
        amounts["vpc.amazonaws.com/efa"] = str(target.efa_interfaces)
    if target.instance.gpus:
        amounts["nvidia.com/gpu"] = str(target.instance.gpus)
    if target.instance.neuron_devices:
        # Every device of the node, as AWS's Neuron training examples ask (aws-neuron-eks-samples trn1_dist_ddp.py:
        # `aws.amazon.com/neuron: 16` on trn1.32xlarge): the device plugin's whole-device resource.
        amounts["aws.amazon.com/neuron"] = str(target.instance.neuron_devices)
    limit = f"{room_gib}Gi" if room_gib * 1024 >= request else f"{request}Mi"
    return {"requests": {**amounts, "memory": f"{request}Mi"}, "limits": {**amounts, "memory": limit}}
