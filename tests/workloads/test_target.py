"""Where a training pod lands and the shape it asks for, in figures worked out here from Karpenter's table
(../shared/reference/instance-types.tsv), EFA's huge pages ((110 x vCPUs + 1) x 2 MiB), the daemon sets' budget
(400m, 1000m with GPUs or Neuron devices, and 768 MiB) and the pod memory figures (torchrun 650 MiB, a rank 840, an
accelerator process 4,096 more, and half as much again)."""

from typing import Any

from eks_ddp.infra.facts.allocatable import NodeLauncher
from eks_ddp.infra.facts.catalogue import INSTANCE_TYPES, Architecture, InstanceType
from eks_ddp.infra.aws.efa_node_group import NodeGroupShape, Taint, TaintEffect
from eks_ddp.workloads.target import NodeTarget, pod_memory_mib, resources, target_of, too_small

GRAVITON, M5, P5, TRN1 = (INSTANCE_TYPES[n] for n in ("c7g.16xlarge", "m5.large", "p5.48xlarge", "trn1.32xlarge"))
TAINT: dict[str, Any] = {"key": "training", "value": "true", "effect": "NO_SCHEDULE"}
GROUP_TAINT: Taint = {"key": "training", "value": "true", "effect": TaintEffect.NO_SCHEDULE}


def test_a_groups_target_carries_its_efa_devices_labels_taints_and_launcher() -> None:
    shape: NodeGroupShape = {"name": "train", "instance_type": "c7g.16xlarge", "availability_zone": "us-east-1a",
             "labels": {"team": "ml"}, "taints": [GROUP_TAINT], "launcher": NodeLauncher.KARPENTER}
    labels = {"team": "ml", "eks-ddp/node-group": "train", "vpc.amazonaws.com/efa.present": "true"}
    assert target_of(shape, GRAVITON) == NodeTarget(GRAVITON, 1, labels, [TAINT], NodeLauncher.KARPENTER)
    plain: NodeGroupShape = {"instance_type": "m5.large", "availability_zone": "us-east-1a", "efa": False}
    assert target_of(plain, M5) == NodeTarget(M5, 0, {}, [], None)


def test_pods_tolerate_each_taint_of_their_group_in_kubernetes_spelling() -> None:
    """A taint without a value is tolerated with the empty value (what `Equal` matches it by)."""
    target = NodeTarget(GRAVITON, 1, taints=[TAINT, {"key": "dedicated", "effect": "NO_EXECUTE"}])
    assert target.tolerations() == [
        {"key": "training", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "", "effect": "NoExecute"},
    ]
    assert target.node_selector() == {"kubernetes.io/arch": "arm64"}


def test_a_pods_memory_is_torchrun_and_its_ranks_with_their_data_and_half_as_much_again() -> None:
    assert pod_memory_mib(M5, 1) == 2235  # (650 + 840) x 1.5
    assert pod_memory_mib(M5, 2, data_mib=520) == 5055  # (650 + 2 x 1,360) x 1.5
    assert pod_memory_mib(P5, 8) == 60207  # (650 + 8 x (840 + 4,096)) x 1.5


def test_a_cpu_pod_asks_for_one_rank_and_may_use_its_whole_room() -> None:
    """m5.large: 1,930m less 400m is 1 CPU; 6,903 MiB less 768 is 5 GiB of room."""
    assert resources(NodeTarget(M5, 0)) == {
        "requests": {"cpu": "1", "memory": "2235Mi"},
        "limits": {"cpu": "1", "memory": "5Gi"},
    }


def test_a_pod_whose_request_fills_its_room_has_that_room_as_its_limit_and_one_mib_more_its_request() -> None:
    m5 = NodeTarget(M5, 0)
    assert resources(m5, memory_mib=5120)["limits"]["memory"] == "5Gi"
    assert resources(m5, memory_mib=5121)["limits"]["memory"] == "5121Mi"


def test_a_gpu_pod_asks_for_a_process_per_gpu_and_every_gpu_and_efa_device() -> None:
    """p5.48xlarge, either engine: 191,450m less 1,000m; the managed node's 1,938,410 MiB (100 pods; Karpenter's,
    with 51, offers more) less 42,242 MiB of huge pages and 768 MiB is 1,850 GiB."""
    devices = {"cpu": "190", "vpc.amazonaws.com/efa": "32", "nvidia.com/gpu": "8"}
    assert resources(NodeTarget(P5, 32)) == {
        "requests": {**devices, "memory": "60207Mi"},
        "limits": {**devices, "memory": "1850Gi"},
    }


def test_a_trainium_pod_asks_for_every_neuron_device_and_a_process_per_device() -> None:
    """trn1.32xlarge, either engine: 127,610m less 1,000m; the managed node's 481,894 MiB (247 pods; Karpenter's,
    with 198, offers more) less 28,162 MiB of huge pages and 768 MiB is 442 GiB; (650 + 16 x (840 + 4,096)) x 1.5
    MiB asked."""
    devices = {"cpu": "126", "vpc.amazonaws.com/efa": "8", "aws.amazon.com/neuron": "16"}
    assert resources(NodeTarget(TRN1, 8)) == {
        "requests": {**devices, "memory": "119439Mi"},
        "limits": {**devices, "memory": "442Gi"},
    }


def test_a_type_without_room_for_the_smallest_pod_is_refused_saying_why() -> None:
    assert too_small(INSTANCE_TYPES["t4g.small"]) == (
        "t4g.small (2 vCPUs, 2 GiB) leaves no whole CPU and GiB for a training pod after what EKS reserves and the "
        "daemon sets (the smallest asks for 2235 MiB); use a type with at least 2 vCPUs and 4 GiB"
    )


def test_a_type_with_exactly_the_smallest_pods_room_is_accepted() -> None:
    """m5.large's ENIs and 2 vCPUs with 3,976 MiB: 3,976 - ceil(7.5 %) - (11 x 29 + 255) - 100 - 768 = 2,235 MiB,
    what the smallest pod asks; with 3,975 MiB, one less."""
    def shaped(memory_mib: int) -> InstanceType:
        return InstanceType("m5.large", Architecture.X86_64, 2, memory_mib / 1024, 1, 0, None)

    assert too_small(shaped(3976)) is None
    assert too_small(shaped(3975)) is not None
