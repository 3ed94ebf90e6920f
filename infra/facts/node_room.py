"""What one node of a group offers the workloads placed on it: its allocatable, less the daemon sets' share.

Job pods are sized from it (workloads.target) and queue quotas add it up (infra.addons.kueue).
"""

from eks_ddp.infra.addons.karpenter_nodes import efa_only_on_card_zero
from eks_ddp.infra.facts.allocatable import Allocatable, NodeLauncher, allocatable, without_efa_hugepages
from eks_ddp.infra.facts.catalogue import InstanceType

# Daemon sets on every training node: aws-node, kube-proxy, eks-pod-identity-agent, the node monitoring agent, the
# CSI node plugins, the EFA and NVIDIA device plugins, the exporters; their requests rounded up. GPU nodes run more
# (the DCGM exporter, and with CloudWatch its agent, GPU exporter and fluent-bit: 720m on p4de): the local cluster's
# scheduler leaves a training pod Pending where the daemon sets need more than this (tests/cluster).
DAEMON_SETS_MILLICORES, GPU_DAEMON_SETS_MILLICORES, DAEMON_SETS_MIB = 400, 1000, 768


def daemon_sets_millicores(instance: InstanceType) -> int:
    return GPU_DAEMON_SETS_MILLICORES if instance.gpus or instance.neuron_devices else DAEMON_SETS_MILLICORES


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
    cpus = (node_allocatable(instance, launcher, efa_interfaces).millicores - daemon_sets_millicores(instance)) // 1000
    return cpus, room_mib(instance, launcher, efa_interfaces) // 1024


def room_mib(instance: InstanceType, launcher: NodeLauncher | None = None, efa_interfaces: int = 0) -> int:
    """The memory a training pod may have on the node: its allocatable less the daemon sets' budget."""
    return node_allocatable(instance, launcher, efa_interfaces).memory_mib - DAEMON_SETS_MIB
