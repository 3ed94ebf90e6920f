"""What a node offers pods, in the arithmetic of the engine that launches it.

A pod is placed only where its requests fit the node's allocatable: capacity less kube-reserved and the eviction
threshold. The engines reserve differently, so a pod sized for one may never be placed on the other's node:

- EKS managed node groups run nodeadm (awslabs/amazon-eks-ami, nodeadm/internal/kubelet/config.go,
  withDefaultReservedResources, getCPUMillicoresToReserve, getMemoryMebibytesToReserve; evictionHard
  `memory.available: 100Mi`): kube-reserved CPU is 6 % of the first core, 1 % of the second, 0.5 % of the next
  two and 0.25 % beyond; memory is 11 MiB per pod the node may hold plus 255 MiB. The pods are nodeadm's
  ENI count (eni_max_pods.go, calculateStandardMaxPods), but a managed node group without a custom AMI caps them
  at 110 below 30 vCPUs and 250 otherwise (EKS user guide, choosing-instance-type "How maxPods is determined").
- Karpenter v1.14.1 (aws/karpenter-provider-aws, pkg/providers/instancetype/types.go: memory, kubeReservedResources,
  evictionThreshold, ENILimitedPods, pods) takes the same CPU steps and 100 MiB eviction, but on AL2023
  (UsesENILimitedMemoryOverhead) reserves 11 MiB for each ENI-limited pod, where an `efa-only` interface on card 0
  takes an ENI away, and it is the node's pod count too.

Memory capacity is the kernel's, which EC2 does not publish: both use Karpenter's estimate (types.go memory: EC2's
MiB, less 64 MiB of CMA on Graviton, less VM_MEMORY_OVERHEAD_PERCENT 7.5 % rounded up), which is below what nodes
report. The ENI limits come from infra/facts/data/eni-limits.tsv (Karpenter v1.14.1's EC2 data).
"""

import csv
import math
from dataclasses import dataclass
from enum import Enum
from functools import cache
from pathlib import Path

from eks_ddp.infra.facts.catalogue import Architecture, InstanceType

ENI_LIMITS = Path(__file__).resolve().parent / "data" / "eni-limits.tsv"
CPU_RESERVE_STEPS = ((1000, 600), (2000, 100), (4000, 50), (None, 25))  # (up to millicores, 1/10000 reserved)
EVICTION_MIB = 100
VM_MEMORY_OVERHEAD = 0.075
GRAVITON_CMA_MIB = 64
# Assumed for a type the ENI table lacks: the most IP addresses a default card gives (15 interfaces of 50), so the
# memory kept for pods is never under-estimated.
UNKNOWN_ENIS = (15, 50)


class NodeLauncher(str, Enum):
    """What launches a group's nodes, and so whose arithmetic sizes them."""

    MANAGED_NODE_GROUP = "managed-node-group"
    """An EKS managed node group (Cluster Autoscaler or a fixed size): nodeadm's reserve, EKS's max pods."""
    KARPENTER = "karpenter"
    """A Karpenter NodePool: its own reserve, from ENI-limited pods."""


@dataclass(frozen=True)
class Allocatable:
    """What the scheduler may give pods on one node."""

    millicores: int
    memory_mib: int
    pods: int


HUGEPAGE_MIB = 2
EFA_HUGEPAGES_PER_VCPU = 110


def efa_hugepages_mib(instance: InstanceType) -> int:
    """The 2 MiB huge pages a node with EFA holds from boot, in MiB: 110 per vCPU, plus one.

    The EFA installer's efa-config reserves what libfabric's EFA provider takes for two endpoints a core (each
    endpoint's two packet pools use 110 MB), in 2 MiB pages, plus one page. Its scripts ship only in the installer's
    tarball; the rule is read from the two open copies of it: awslabs/libfabric-ci-scripts a2e424b efa-check.sh
    ("EFA-Config" mirrored: 110 MB x cores / page size + 1) and bottlerocket-os/bottlerocket-core-kit a10182f9
    sources/api/corndog/src/main.rs compute_hugepages_for_efa ((110 MB x 2) x cores / 2 MB = 110 a core). Every node
    output found with EFA agrees, 110 x vCPUs + 1 (tests/infra/test_allocatable.py PUBLISHED_EFA_NODES): p4de.24xlarge
    21,122 Mi and p5.48xlarge 42,242 Mi (AWS's awsome-distributed-training), hpc6a.48xlarge 21,122, hpc7g.16xlarge
    and im4gn.16xlarge 14,082. The EKS user guide's node-efa page says 5,128 pages, which no published node shows.
    kubelet takes them out of allocatable memory (kubernetes pkg/kubelet/nodestatus/setters.go MachineInfo), and
    neither Karpenter's arithmetic nor nodeadm's counts them.

    | AMI | pages |
    |---|---|
    | EKS AL2023, all five types (1) | 110 x vCPUs + 1 |
    | AL2 with the EFA installer (eksctl `efaEnabled`: the hpc and p nodes above) | 110 x vCPUs + 1 |
    | Bottlerocket (corndog; only with an EFA device attached) | 110 x vCPUs |
    | any, without an EFA interface | none assumed (2) |

    (1) awslabs/amazon-eks-ami v20260724 CHANGELOG.md: the `efa` package (3.1.0 in release v20260714) in all five
    AL2023 columns, the STANDARD ones from infra.facts.versions.EFA_STANDARD_AMI_FLOOR on (install-efa.sh runs the
    installer with `--minimal`). (2) No published AL2023 node says whether efa-config reserves pages where no EFA
    interface is attached; unverified here, and training pods no longer ask for memory near the node's estimate
    (workloads.target.resources), so a few hundred MiB either way cannot leave one Pending.
    eks-ddp's groups run AL2023 (infra.facts.instance_facts.ami_type), so the first row applies.
    """
    return (EFA_HUGEPAGES_PER_VCPU * instance.vcpus + 1) * HUGEPAGE_MIB


def without_efa_hugepages(node: Allocatable, instance: InstanceType, efa: bool) -> Allocatable:
    """What a node with EFA really offers pods: its memory less the huge pages the EFA software holds."""
    return Allocatable(node.millicores, node.memory_mib - efa_hugepages_mib(instance), node.pods) if efa else node


@cache
def _eni_limits() -> dict[str, tuple[int, int]]:
    with ENI_LIMITS.open() as table:
        rows = csv.DictReader((line for line in table if not line.startswith("#")), delimiter="\t")
        return {r["instance_type"]: (int(r["default_card_interfaces"]), int(r["ipv4_per_interface"])) for r in rows}


def eni_pods(instance_type: str, efa_only_on_card_zero: int = 0) -> int:
    """ENIs on the default card, less `efa-only` ones there, times IPv4 addresses less one, plus 2 (host network)."""
    interfaces, addresses = _eni_limits().get(instance_type, UNKNOWN_ENIS)
    usable = max(interfaces - efa_only_on_card_zero, 0)
    return usable * (addresses - 1) + 2 if usable else 0


def kube_reserved_millicores(vcpus: int) -> int:
    total, reserved, start = vcpus * 1000, 0, 0
    for end, per_ten_thousand in CPU_RESERVE_STEPS:
        top = total if end is None else min(total, end)
        reserved += max(0, top - start) * per_ten_thousand // 10000
        start = end or start
    return reserved


def memory_capacity_mib(instance: InstanceType) -> int:
    mib = round(instance.memory_gib * 1024) - (GRAVITON_CMA_MIB if instance.architecture == Architecture.ARM64 else 0)
    return mib - math.ceil(mib * VM_MEMORY_OVERHEAD)


def managed_max_pods(instance: InstanceType) -> int:
    return min(eni_pods(instance.name), 110 if instance.vcpus < 30 else 250)


def allocatable(instance: InstanceType, launcher: NodeLauncher, efa_only_on_card_zero: int = 0) -> Allocatable:
    """The node's allocatable CPU, memory and pods under `launcher`; `efa_only_on_card_zero` counts the Karpenter
    node class's `efa-only` interfaces on card 0 (managed groups put EFA on card 0's primary interface)."""
    if launcher == NodeLauncher.KARPENTER:
        pods = eni_pods(instance.name, efa_only_on_card_zero)
    else:
        pods = managed_max_pods(instance)
    memory = memory_capacity_mib(instance) - (11 * pods + 255) - EVICTION_MIB
    return Allocatable(instance.vcpus * 1000 - kube_reserved_millicores(instance.vcpus), memory, pods)
