"""Each engine's allocatable, against Karpenter's own published figures and the shipped instance types."""

import csv

import pytest

from eks_ddp.infra.facts.allocatable import Allocatable, NodeLauncher, allocatable, eni_pods, kube_reserved_millicores
from eks_ddp.infra.facts.catalogue import INSTANCE_TYPES, Architecture, InstanceType
from eks_ddp.workloads.target import DAEMON_SETS_MIB, NodeTarget, daemon_sets_millicores, pod_room, resources
from tests.upstream import REFERENCE


def _karpenter_table() -> list[dict[str, str]]:
    with (REFERENCE / "instance-types.tsv").open() as table:
        return list(csv.DictReader((line.removeprefix("# ") for line in table), delimiter="\t"))


# Karpenter's table lists them, but neither its vpclimits.go nor a whole number of 50-address interfaces gives their
# default card's interfaces: eks-ddp assumes 15 of 50 for them (infra.facts.allocatable.UNKNOWN_ENIS).
ENI_SPLIT_UNKNOWN = {f"{family}.metal-{size}xl" for family in ("c8ib", "m8ib", "m8idb", "m8idn", "m8in", "r8ib",
                     "r8idb", "r8idn", "r8in") for size in (48, 96)}


def test_karpenter_arithmetic_gives_its_published_allocatable_for_every_instance_type() -> None:
    """Karpenter v1.14.1's reference table (default node class, no efa-only interfaces): every one of its types."""
    rows = _karpenter_table()
    assert len(rows) > 1300
    wrong = []
    for row in (r for r in rows if r["instance_type"] not in ENI_SPLIT_UNKNOWN):
        arch = Architecture.ARM64 if row["arch"] == "arm64" else Architecture.X86_64
        instance = InstanceType(row["instance_type"], arch, int(row["vcpus"]), int(row["memory_mib"]) / 1024, 1, 0, None)
        published = Allocatable(
            int(row["karpenter_allocatable_cpu"].removesuffix("m")),
            int(row["karpenter_allocatable_memory"].removesuffix("Mi")),
            int(row["karpenter_max_pods"]),
        )
        if allocatable(instance, NodeLauncher.KARPENTER) != published:
            wrong.append((row["instance_type"], allocatable(instance, NodeLauncher.KARPENTER), published))
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


@pytest.mark.parametrize("name", sorted(INSTANCE_TYPES))
def test_a_training_pod_fits_the_node_of_whichever_engine_launches_it(name: str) -> None:
    """The pod asked 116,736 MiB on c7g.16xlarge where Karpenter offers 113,259: sized per engine (and, when the
    engine is not known, for both), it fits that engine's node beside the daemon sets' budget."""
    instance = INSTANCE_TYPES[name]
    efa = instance.network_cards if instance.efa else 0
    for launcher in (*NodeLauncher, None):
        cpus, gib = pod_room(instance, launcher, efa)
        if cpus < 1 or gib < 1:
            continue  # too small for a training pod: refused by workloads.target.too_small
        requests = resources(NodeTarget(instance, efa, launcher=launcher))["requests"]
        for engine in [launcher] if launcher else list(NodeLauncher):
            node = allocatable(instance, engine, 1 if engine == NodeLauncher.KARPENTER and efa else 0)
            assert int(requests["cpu"]) * 1000 + daemon_sets_millicores(instance) <= node.millicores
            assert int(requests["memory"].removesuffix("Gi")) * 1024 + DAEMON_SETS_MIB <= node.memory_mib
