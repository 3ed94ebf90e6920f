"""Each engine's allocatable, against Karpenter's own published figures and the shipped instance types."""

import csv

import pytest

from eks_ddp.infra.aws.efa_node_group import autoscaler_tags
from eks_ddp.infra.facts.allocatable import (
    Allocatable,
    NodeLauncher,
    allocatable,
    eni_pods,
    kube_reserved_millicores,
    efa_hugepages_mib,
    memory_capacity_mib,
)
from eks_ddp.infra.facts.catalogue import INSTANCE_TYPES, Architecture, InstanceType
from eks_ddp.infra.facts.node_room import DAEMON_SETS_MIB, daemon_sets_millicores, node_allocatable, pod_room
from eks_ddp.workloads.target import NodeTarget, resources, too_small
from tests.upstream import REFERENCE


def _karpenter_table() -> list[dict[str, str]]:
    with (REFERENCE / "instance-types.tsv").open() as table:
        return list(csv.DictReader((line.removeprefix("# ") for line in table), delimiter="\t"))


# Karpenter's table lists them, but neither its vpclimits.go nor a whole number of 50-address interfaces gives their
# default card's interfaces: eks-ddp assumes 15 of 50 for them (infra.facts.allocatable.UNKNOWN_ENIS).
ENI_SPLIT_UNKNOWN = {f"{family}.metal-{size}xl" for family in ("c8ib", "m8ib", "m8idb", "m8idn", "m8in", "r8ib",
                     "r8idb", "r8idn", "r8in") for size in (48, 96)}


def _published(rows: list[dict[str, str]]) -> list[tuple[InstanceType, Allocatable]]:
    """Karpenter's table but for ENI_SPLIT_UNKNOWN: each type as EC2 describes it, and the allocatable Karpenter
    publishes for it."""
    published = []
    for row in (r for r in rows if r["instance_type"] not in ENI_SPLIT_UNKNOWN):
        arch = Architecture.ARM64 if row["arch"] == "arm64" else Architecture.X86_64
        memory_gib = int(row["memory_mib"]) / 1024
        node = Allocatable(
            int(row["karpenter_allocatable_cpu"].removesuffix("m")),
            int(row["karpenter_allocatable_memory"].removesuffix("Mi")),
            int(row["karpenter_max_pods"]),
        )
        published.append((InstanceType(row["instance_type"], arch, int(row["vcpus"]), memory_gib, 1, 0, None), node))
    return published


def test_karpenter_arithmetic_gives_its_published_allocatable_for_every_instance_type() -> None:
    """Karpenter v1.14.1's reference table (default node class, no efa-only interfaces): every one of its types."""
    rows = _karpenter_table()
    assert len(rows) > 1300
    wrong = []
    for instance, published in _published(rows):
        if allocatable(instance, NodeLauncher.KARPENTER) != published:
            wrong.append((instance.name, allocatable(instance, NodeLauncher.KARPENTER), published))
    assert wrong == []


def test_a_managed_node_is_karpenters_published_one_with_eks_pod_cap() -> None:
    """Every type of Karpenter's table as a managed group's node: the same CPU reserve, but EKS caps its pods at 110
    below 30 vCPUs and 250 otherwise (EKS user guide, "How maxPods is determined"), and nodeadm keeps 11 MiB for
    each pod it may hold, so 11 MiB less for each pod under Karpenter's ENI-limited count."""
    wrong = []
    for instance, karpenter in _published(_karpenter_table()):
        pods = min(karpenter.pods, 110 if instance.vcpus < 30 else 250)
        managed = Allocatable(karpenter.millicores, karpenter.memory_mib + 11 * (karpenter.pods - pods), pods)
        if allocatable(instance, NodeLauncher.MANAGED_NODE_GROUP) != managed:
            wrong.append((instance.name, allocatable(instance, NodeLauncher.MANAGED_NODE_GROUP), managed))
    assert wrong == []


def test_the_managed_pod_cap_rises_at_30_vcpus() -> None:
    """No EC2 type has 30 vCPUs today: m5.8xlarge's ENIs (234 pods) with 29, 30 and 31 vCPUs show where the cap
    changes, "fewer than 30 vCPUs" in the EKS user guide's words."""
    shapes = [InstanceType("m5.8xlarge", Architecture.X86_64, vcpus, 128, 1, 0, None) for vcpus in (29, 30, 31)]
    assert [allocatable(shape, NodeLauncher.MANAGED_NODE_GROUP).pods for shape in shapes] == [110, 234, 234]


def test_efa_only_interfaces_that_take_every_eni_of_card_zero_leave_no_pod_an_address() -> None:
    """hpc6id.32xlarge has one interface on its default card: with it taken, Karpenter's ENILimitedPods gives 0, not
    the 2 host-network pods."""
    assert eni_pods("hpc6id.32xlarge") == 51
    assert eni_pods("hpc6id.32xlarge", efa_only_on_card_zero=1) == 0
    assert eni_pods("hpc6id.32xlarge", efa_only_on_card_zero=2) == 0


def test_a_training_pod_gets_every_whole_cpu_its_node_leaves_beside_the_daemon_sets() -> None:
    """Every type of Karpenter's table, launched by either engine (their CPU reserve is the same): its published
    allocatable CPU less the daemon sets' 400m (1000m where GPUs or Neuron devices add theirs), in whole CPUs."""
    wrong = []
    for row in _karpenter_table():
        daemon_sets = 1000 if int(row["gpus"]) or int(row["neuron_devices"]) else 400
        cpus = (int(row["karpenter_allocatable_cpu"].removesuffix("m")) - daemon_sets) // 1000
        instance = INSTANCE_TYPES[row["instance_type"]]
        wrong += [(instance.name, engine) for engine in (*NodeLauncher, None) if pod_room(instance, engine)[0] != cpus]
    assert wrong == []


def test_the_engines_differ_where_the_issue_measured_it() -> None:
    """c7g.16xlarge and p4de.24xlarge with Karpenter's efa-only interface on card 0: 113,259 and 1,083,251 MiB
    (issue 21); managed node groups cap pods at 250 and so reserve less."""
    graviton, p4de = INSTANCE_TYPES["c7g.16xlarge"], INSTANCE_TYPES["p4de.24xlarge"]
    assert allocatable(graviton, NodeLauncher.KARPENTER, efa_only_on_card_zero=1) == Allocatable(63770, 113259, 688)
    assert allocatable(p4de, NodeLauncher.KARPENTER, efa_only_on_card_zero=1) == Allocatable(95690, 1083251, 688)
    assert allocatable(graviton, NodeLauncher.MANAGED_NODE_GROUP) == Allocatable(63770, 121182 - 3005 - 100, 250)
    assert eni_pods("m5.large") == 29 and allocatable(INSTANCE_TYPES["m5.large"], NodeLauncher.MANAGED_NODE_GROUP).pods == 29
    assert [kube_reserved_millicores(vcpus) for vcpus in (1, 2, 4, 16, 64, 96)] == [60, 70, 80, 110, 230, 310]


def _efa_hugepages_mib(instance: InstanceType) -> int:
    """What an EFA node's kubelet takes out of the pods' memory: the EFA software's 2 MiB huge pages, 110 a vCPU plus
    one (every node of PUBLISHED_EFA_NODES below holds that many)."""
    return (110 * instance.vcpus + 1) * 2


@pytest.mark.parametrize("name", sorted(INSTANCE_TYPES))
def test_a_training_pod_fits_the_node_of_whichever_engine_launches_it(name: str) -> None:
    """The pod asked 116,736 MiB on c7g.16xlarge where Karpenter offers 113,259: sized per engine (and, when the
    engine is not known, for both), it fits that engine's node beside the daemon sets' budget, in what the node
    offers once an EFA node's huge pages are out. Its memory limit is that room in whole GiB (or its request, if
    larger): above it, the pod could take the daemon sets' share; below it, a node without EFA loses memory for
    pages it does not hold."""
    instance = INSTANCE_TYPES[name]
    efa = instance.network_cards if instance.efa else 0
    if too_small(instance):
        return  # refused: workloads.target.too_small
    pages_mib = _efa_hugepages_mib(instance) if efa else 0
    for launcher in (*NodeLauncher, None):
        pod = resources(NodeTarget(instance, efa, launcher=launcher))
        request_mib = int(pod["requests"]["memory"].removesuffix("Mi"))
        offered_mib = []  # what each engine's node really offers pods
        for engine in [launcher] if launcher else list(NodeLauncher):
            node = allocatable(instance, engine, 1 if engine == NodeLauncher.KARPENTER and efa else 0)
            assert int(pod["requests"]["cpu"]) * 1000 + daemon_sets_millicores(instance) <= node.millicores
            offered_mib.append(node.memory_mib - pages_mib)
            assert request_mib + DAEMON_SETS_MIB <= offered_mib[-1]
        room_gib = (min(offered_mib) - DAEMON_SETS_MIB) // 1024
        assert pod["limits"]["memory"] == (f"{room_gib}Gi" if room_gib * 1024 >= request_mib else f"{request_mib}Mi")


# Real EKS nodes with EFA as their operators published them: instance type, hugepages-2Mi (MiB), allocatable and
# capacity memory (KiB; None where not shown), and where. AWS's own: aws-samples/awsome-distributed-training at 7217859
# (eksctl nodes). Beside them, nodes of an EKS 1.27 managed group (eksctl, AL2, EFA installer) that the LLNL/Flux
# operator study recorded with `kubectl get nodes -o json`: converged-computing/operator-experiments at 4942e54.
AWSOME = "aws-samples/awsome-distributed-training 7217859 3.test_cases/"
STUDY = "converged-computing/operator-experiments 4942e54 aws/lammps/hpc7g/run1/data/"
PUBLISHED_EFA_NODES = [
    ("p4de.24xlarge", 21122, 1146004920, None, AWSOME + "megatron/nemo1.0/EKS/README.md"),
    ("p5.48xlarge", 42242, 2052371068, None, AWSOME + "pytorch/mosaicml-composer/stable-diffusion/README.md"),
    ("hpc6a.48xlarge", 21122, 364778036, 387896884, STUDY + "hpc6a/hpc6a-nodes.json"),
    ("hpc7g.16xlarge", 14082, 112536312, 129550072, STUDY + "hpc7g/hpc7g-nodes.json"),
    ("im4gn.16xlarge", 14082, 236164300, 259249356, STUDY + "im4gn/im4gn-nodes.json"),
]
HUGEPAGES_TAG = "k8s.io/cluster-autoscaler/node-template/resources/hugepages-2Mi"


@pytest.mark.parametrize(("name", "pages_mib", "source"), [(row[0], row[1], row[4]) for row in PUBLISHED_EFA_NODES])
def test_the_autoscaler_template_announces_the_huge_pages_a_published_node_has(
    name: str, pages_mib: int, source: str
) -> None:
    """5,128 pages (10,256 MiB) was the EKS user guide's figure; real nodes hold 110 per vCPU plus one."""
    instance = INSTANCE_TYPES[name]
    assert autoscaler_tags("training", instance, True, {}, [])[HUGEPAGES_TAG] == f"{pages_mib}Mi", source


@pytest.mark.parametrize("row", [row for row in PUBLISHED_EFA_NODES if row[3] is not None], ids=lambda row: row[0])
def test_the_memory_left_for_pods_loses_exactly_the_huge_pages_a_published_node_holds(row: tuple) -> None:
    """The published nodes' kubelet took capacity less AL2's kube-reserved (11 MiB per ENI-limited pod + 255, from
    bootstrap.sh at awslabs/amazon-eks-ami v20260304, before AL2's removal), the 100 MiB eviction threshold and the
    huge pages; eks-ddp's allocatable loses the same pages on a node with EFA."""
    name, pages_mib, allocatable_kib, capacity_kib, source = row
    instance = INSTANCE_TYPES[name]
    taken_mib = allocatable(instance, NodeLauncher.MANAGED_NODE_GROUP).memory_mib - node_allocatable(
        instance, NodeLauncher.MANAGED_NODE_GROUP, instance.network_cards
    ).memory_mib
    kube_reserved_mib = 11 * eni_pods(name) + 255
    assert capacity_kib - (kube_reserved_mib + 100 + taken_mib) * 1024 == allocatable_kib, source


@pytest.mark.parametrize("row", PUBLISHED_EFA_NODES, ids=lambda row: row[0])
def test_no_engine_is_estimated_to_offer_more_than_a_published_node(row: tuple) -> None:
    """Both engines' arithmetic (Karpenter's 7.5 % estimate of the kernel's share) stays below what these nodes
    offered, their huge pages taken out: a pod sized to the estimate fits them."""
    name, _, allocatable_kib, capacity_kib, source = row
    instance = INSTANCE_TYPES[name]
    assert capacity_kib is None or memory_capacity_mib(instance) * 1024 <= capacity_kib, source
    for launcher in NodeLauncher:
        estimate = node_allocatable(instance, launcher, instance.network_cards)
        assert estimate.memory_mib * 1024 <= allocatable_kib, (source, launcher)


def test_the_nccl_checks_workers_ask_for_no_more_huge_pages_than_their_node_holds() -> None:
    """AWS's manifest asks for 5120Mi; a managed p5.4xlarge (16 vCPUs) holds 3,522 MiB, so its workers stayed Pending."""
    from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES
    from eks_ddp.workloads.nccl_check import render

    def pages(instance: InstanceType) -> str:
        target = NodeTarget(instance, instance.network_cards, launcher=NodeLauncher.MANAGED_NODE_GROUP)
        worker = render("nccl", "training", target)["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
        return worker["containers"][0]["resources"]["limits"]["hugepages-2Mi"]

    gpu_types = [instance for instance in EFA_INSTANCE_TYPES.values() if instance.gpus]
    assert pages(INSTANCE_TYPES["p5.4xlarge"]) == "3522Mi" and pages(INSTANCE_TYPES["p4de.24xlarge"]) == "5120Mi"
    assert all(int(pages(instance).removesuffix("Mi")) <= efa_hugepages_mib(instance) for instance in gpu_types)
