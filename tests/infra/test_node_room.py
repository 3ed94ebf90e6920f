"""One node's room for a training pod: the engines' allocatable, less EFA's huge pages and the daemon sets' budget.

c7g.16xlarge throughout, from Karpenter's table (../shared/reference/instance-types.tsv): 63,770m, 112,720 MiB
and 737 ENI-limited pods (15 interfaces of 50 addresses). A managed group caps pods at 250 and reserves
11 x (737 - 250) = 5,357 MiB less: 118,077; Karpenter's node class with an efa-only interface on card 0 leaves 688
pods and 11 x 49 = 539 MiB more: 113,259. EFA's huge pages: (110 x 64 + 1) x 2 MiB = 14,082 MiB.
"""

from eks_ddp.infra.facts.allocatable import Allocatable, NodeLauncher
from eks_ddp.infra.facts.catalogue import INSTANCE_TYPES
from eks_ddp.infra.facts.node_room import daemon_sets_millicores, node_allocatable, pod_room, room_mib

GRAVITON = INSTANCE_TYPES["c7g.16xlarge"]
PAGES_MIB = 14082


def test_a_node_with_efa_offers_its_allocatable_less_the_huge_pages_and_keeps_its_pod_count() -> None:
    assert node_allocatable(GRAVITON, NodeLauncher.MANAGED_NODE_GROUP, 0) == Allocatable(63770, 118077, 250)
    assert node_allocatable(GRAVITON, NodeLauncher.MANAGED_NODE_GROUP, 1) == Allocatable(63770, 118077 - PAGES_MIB, 250)
    assert node_allocatable(GRAVITON, NodeLauncher.KARPENTER, 0) == Allocatable(63770, 112720, 737)
    assert node_allocatable(GRAVITON, NodeLauncher.KARPENTER, 1) == Allocatable(63770, 113259 - PAGES_MIB, 688)


def test_a_node_whose_launcher_is_not_known_offers_the_least_of_both_engines() -> None:
    assert node_allocatable(GRAVITON, None, 0) == Allocatable(63770, 112720, 250)
    assert node_allocatable(GRAVITON, None, 1) == Allocatable(63770, 113259 - PAGES_MIB, 250)


def test_by_default_the_room_is_either_engines_on_a_node_without_efa() -> None:
    """The daemon sets' budget: 400m and 768 MiB."""
    assert room_mib(GRAVITON) == 112720 - 768
    assert pod_room(GRAVITON) == ((63770 - 400) // 1000, (112720 - 768) // 1024) == (63, 109)
    assert room_mib(GRAVITON, NodeLauncher.MANAGED_NODE_GROUP, 1) == 118077 - PAGES_MIB - 768
    assert pod_room(GRAVITON, NodeLauncher.MANAGED_NODE_GROUP, 1) == (63, 100)


def test_gpu_and_neuron_nodes_keep_a_whole_cpu_for_their_daemon_sets() -> None:
    """Accelerator nodes run more daemon sets (the DCGM exporter, CloudWatch's agents): 1000m; 400m on CPU nodes."""
    names = ("p5.48xlarge", "trn1.32xlarge", "c7g.16xlarge")
    budgets = {name: daemon_sets_millicores(INSTANCE_TYPES[name]) for name in names}
    assert budgets == {"p5.48xlarge": 1000, "trn1.32xlarge": 1000, "c7g.16xlarge": 400}
