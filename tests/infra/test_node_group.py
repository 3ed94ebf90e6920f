"""NodeGroup: a shape resolved once, each default in one place, and its checks under one error type."""

import pytest

from eks_ddp.infra.aws.efa_node_group import EfaNodeGroupArgs
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES, INSTANCE_TYPES
from eks_ddp.infra.node_group import EFA_LABEL, CapacityType, NodeGroup, NodeGroupShape


def test_a_shape_with_only_its_type_takes_every_default() -> None:
    group = NodeGroup.of({"instance_type": "c7g.16xlarge", "availability_zone": "us-east-1a"})
    assert (group.efa, group.min_size, group.max_size, group.desired_size) == (True, 0, 2, 0)
    assert (group.capacity_type, group.root_volume_gib, group.metadata_hop_limit) == (CapacityType.ON_DEMAND, 100, 1)
    assert (group.name, group.labels, group.taints, group.launcher) == ("", {}, (), None)


def test_desired_size_defaults_to_min_size_and_keys_beyond_a_shape_are_left_out() -> None:
    wider: EfaNodeGroupArgs = {
        "instance_type": "m5.large", "availability_zone": "us-east-1a", "min_size": 3,
        "cluster_name": "training", "vpc_id": "vpc-1", "cluster_security_group_id": "sg-1", "subnet_id": "subnet-1",
    }
    group = NodeGroup.of(wider)
    assert (group.min_size, group.desired_size) == (3, 3) and not hasattr(group, "cluster_name")
    wider["desired_size"] = 4
    assert NodeGroup.of(wider).desired_size == 4


def test_efa_devices_are_one_per_network_card_and_none_without_efa() -> None:
    p5 = EFA_INSTANCE_TYPES["p5.48xlarge"]
    shape: NodeGroupShape = {"name": "gpus", "instance_type": p5.name, "availability_zone": "us-east-1a"}
    assert NodeGroup.of(shape).efa_devices(p5) == p5.network_cards == 32
    assert NodeGroup.of({**shape, "efa": False}).efa_devices(p5) == 0
    assert NodeGroup.of(shape).node_labels(p5) == {
        "eks-ddp/node-group": "gpus", EFA_LABEL: "true", "nvidia.com/gpu.present": "true"
    }


def test_checks_name_the_argument_as_the_managed_node_group_always_has() -> None:
    m5 = INSTANCE_TYPES["m5.large"]
    shape: NodeGroupShape = {"instance_type": "m5.large", "availability_zone": "us-east-1a", "efa": False}
    NodeGroup.of(shape).validate(m5)
    with pytest.raises(InvalidArgument, match=r"^EfaNodeGroup: desired_size=5 is not allowed; must lie between"):
        NodeGroup.of({**shape, "desired_size": 5}).validate(m5)
    unzoned = NodeGroup(instance_type="m5.large", efa=False, desired_size=0)  # an existing cluster's group
    with pytest.raises(InvalidArgument, match=r"^EfaNodeGroup: availability_zone=None is not allowed"):
        unzoned.validate(m5)
    unzoned.validate(m5, zoned=False)
