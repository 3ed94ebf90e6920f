"""Each kind of cost line from a few registrations written out here, no program run: FSx by deployment type and
throughput, claims in Gi and Ti, a node group at or above its desired size, a NodePool at what its pods need, and a
type without a price. The stacks' own lines are tests/stack/test_cost.py's; these are fast enough for `make mutate`."""

from datetime import date
from typing import Any

import pytest

from eks_ddp.infra.facts.catalogue import PRICES
from eks_ddp.tools import cost
from eks_ddp.engine_models import Deployment
from eks_ddp.tools.mocking import Registration
from eks_ddp.workloads.training_pod import TRAINER_LABEL

HOURS_PER_MONTH = 730
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


def _registration(type_: str, name: str, inputs: dict[str, Any]) -> Registration:
    return Registration(type_, name, f"urn:pulumi:dev::eks-ddp::{type_}::{name}", "", inputs)


def _estimate(*registrations: Registration) -> list[tuple[str, float, float, bool]]:
    deployment = Deployment(list(registrations), "us-east-1", "arn:aws:iam::123456789012:role/ci", date.today())
    lines = cost.estimate(deployment)
    return [(line.item, line.quantity, round(line.unit_hourly, 8), line.priced) for line in lines]


@pytest.mark.parametrize(
    ("inputs", "item", "per_gib_month"),
    [
        ({"storageCapacity": 1200}, "FSx for Lustre SCRATCH_2 (GiB)", 0.140),
        ({"deploymentType": "SCRATCH_2", "perUnitStorageThroughput": 250, "storageCapacity": 1200},
         "FSx for Lustre SCRATCH_2 (GiB)", 0.140),
        ({"deploymentType": "PERSISTENT_2", "perUnitStorageThroughput": 125, "storageCapacity": 1200},
         "FSx for Lustre PERSISTENT_2 (GiB)", 0.145),
        ({"deploymentType": "PERSISTENT_2", "perUnitStorageThroughput": "250", "storageCapacity": 1200},
         "FSx for Lustre PERSISTENT_2 (GiB)", 0.210),
        ({"deploymentType": "PERSISTENT_2", "perUnitStorageThroughput": 1000, "storageCapacity": 1200},
         "FSx for Lustre PERSISTENT_2 (GiB)", 0.600),
    ],
)
def test_a_file_system_the_program_creates_costs_its_gib_at_its_kinds_price(
    inputs: dict[str, Any], item: str, per_gib_month: float
) -> None:
    unit = round(per_gib_month / HOURS_PER_MONTH, 8)
    assert _estimate(_registration(FSX, "fsx", inputs)) == [(item, 1200.0, unit, True)]


@pytest.mark.parametrize(
    "inputs",
    [
        {"deploymentType": "PERSISTENT_2", "storageCapacity": 2400},
        {"deploymentType": "PERSISTENT_1", "storageCapacity": 2400},
    ],
    ids=["PERSISTENT_2 without throughput", "a kind the catalogue does not price"],
)
def test_a_file_system_without_a_known_price_says_so_and_counts_zero(inputs: dict[str, Any]) -> None:
    kind = inputs["deploymentType"]
    assert _estimate(_registration(FSX, "fsx", inputs)) == [(f"FSx for Lustre {kind} (GiB)", 2400.0, 0.0, False)]


def test_a_file_system_restored_from_a_backup_has_the_backups_size_which_is_unknown_here() -> None:
    inputs = {"deploymentType": "SCRATCH_2", "backupId": "backup-0123456789abcdef0"}
    assert _estimate(_registration(FSX, "fsx", inputs)) == [
        ("FSx for Lustre SCRATCH_2 (GiB)", 0.0, round(0.140 / 730, 8), False)
    ]


def _claim(storage: str, provisioner: str = "fsx.csi.aws.com") -> list[Registration]:
    parameters = {"deploymentType": "PERSISTENT_2", "perUnitStorageThroughput": "500"}
    return [
        _registration("kubernetes:storage.k8s.io/v1:StorageClass", "fsx-sc", {
            "kind": "StorageClass", "metadata": {"name": "fsx-sc"}, "provisioner": provisioner,
            "parameters": parameters,
        }),
        _registration("kubernetes:core/v1:PersistentVolumeClaim", "shared", {
            "kind": "PersistentVolumeClaim", "metadata": {"name": "shared"},
            "spec": {"storageClassName": "fsx-sc", "resources": {"requests": {"storage": storage}}},
        }),
    ]


@pytest.mark.parametrize(("storage", "gib"), [("1200Gi", 1200.0), ("2.4Ti", 2457.6)])
def test_a_claim_on_an_fsx_class_costs_its_request_at_the_classs_price(storage: str, gib: float) -> None:
    assert _estimate(*_claim(storage)) == [("FSx for Lustre PERSISTENT_2 (GiB)", gib, round(0.340 / 730, 8), True)]


def test_a_claim_on_another_provisioners_class_is_no_file_system_of_ours() -> None:
    assert _estimate(*_claim("1200Gi", provisioner="efs.csi.aws.com")) == []


def test_a_claim_in_another_unit_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError) as raised:
        _estimate(*_claim("1200G"))
    assert str(raised.value) == "storage request '1200G': give Gi or Ti"


def _group(name: str, instance_type: str, desired: int) -> Registration:
    return _registration(NODE_GROUP, name, {
        "instanceTypes": [instance_type], "labels": {"eks-ddp/group": name},
        "scalingConfig": {"minSize": 0, "maxSize": 8, "desiredSize": desired},
    })


def _pool(name: str, instance_type: str) -> Registration:
    requirements = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]}]
    return _registration(NODE_POOL, name, {
        "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {"metadata": {"labels": {"eks-ddp/group": name}},
                              "spec": {"requirements": requirements}}},
    })


def _trainers(group: str, pods: int) -> Registration:
    template = {"metadata": {"labels": TRAINER_LABEL}, "spec": {"nodeSelector": {"eks-ddp/group": group}}}
    return _registration("kubernetes:batch/v1:Job", f"train-{group}", {
        "kind": "Job", "apiVersion": "batch/v1", "metadata": {"name": f"train-{group}"},
        "spec": {"parallelism": pods, "completions": pods, "template": template},
    })


@pytest.mark.parametrize(
    ("desired", "pods", "how", "nodes"),
    [(2, 1, "desired size", 2), (2, 2, "desired size", 2), (2, 3, "scaled up for the pods", 3)],
)
def test_a_node_group_costs_its_desired_size_or_what_its_pods_need_when_more(
    desired: int, pods: int, how: str, nodes: int
) -> None:
    lines = _estimate(_group("workers", "c5.4xlarge", desired), _trainers("workers", pods))
    assert lines == [(f"NodeGroup workers (c5.4xlarge, {how})", nodes, PRICES["c5.4xlarge"], True)]


def test_a_node_pool_costs_only_what_its_pods_need() -> None:
    lines = _estimate(_pool("workers", "c5.4xlarge"), _trainers("workers", 3))
    assert lines == [("NodePool workers (c5.4xlarge, Karpenter, while pods need them)", 3, PRICES["c5.4xlarge"], True)]


def test_a_type_without_a_price_is_unknown_not_free() -> None:
    lines = _estimate(_group("workers", "p5e.48xlarge", 2))
    assert lines == [("NodeGroup workers (p5e.48xlarge, desired size)", 2, 0.0, False)]


def test_a_cluster_made_here_adds_its_control_plane_and_nat_gateways() -> None:
    lines = _estimate(
        _registration("aws:eks/cluster:Cluster", "eks", {}),
        _group("system", "m5.large", 2),
        _registration("aws:ec2/natGateway:NatGateway", "nat-a", {}),
        _registration("aws:ec2/natGateway:NatGateway", "nat-b", {}),
    )
    assert lines == [
        ("EKS control plane", 1, 0.1, True),
        ("NodeGroup system (m5.large, desired size)", 2, PRICES["m5.large"], True),
        ("NAT gateways", 2, 0.045, True),
    ]


def test_pods_count_on_the_group_they_select_and_every_job_adds_its_own() -> None:
    """Two jobs on the second group add up there; a pod no group admits is counted nowhere."""
    second = _trainers("gpu", 2)
    another = _registration("kubernetes:batch/v1:Job", "eval", {**second.inputs, "spec": {
        **second.inputs["spec"], "parallelism": 1}})
    lines = _estimate(
        _group("cpu", "m5.large", 1), _group("gpu", "g4dn.metal", 0), second, another, _trainers("nowhere", 4)
    )
    assert lines == [
        ("NodeGroup cpu (m5.large, desired size)", 1, PRICES["m5.large"], True),
        ("NodeGroup gpu (g4dn.metal, scaled up for the pods)", 3, PRICES["g4dn.metal"], True),
    ]
