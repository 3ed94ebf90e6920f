import pytest

from eks_ddp.infra.aws.efa_node_group import CapacityType, EfaNodeGroup, EfaNodeGroupArgs, TaintEffect
from eks_ddp.infra.errors import InvalidArgument
from tests.pulumi_harness import Recorded


def _args(**overrides: object) -> EfaNodeGroupArgs:
    args: dict[str, object] = {
        "cluster_name": "training",
        "vpc_id": "vpc-1",
        "cluster_security_group_id": "sg-cluster",
        "instance_type": "c7g.16xlarge",
        "availability_zone": "us-east-1a",
        "subnet_id": "subnet-a",
        "min_size": 0,
        "max_size": 6,
        "desired_size": 2,
        "tags": {"team": "ml"},
    }
    args.update(overrides)
    return args  # type: ignore[return-value]


def test_graviton_group_has_its_efa_setup_in_plain_resources(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: EfaNodeGroup("workers", _args(labels={"role": "train"}, taints=[{"key": "training", "value": "true", "effect": TaintEffect.NO_SCHEDULE}])))
    template = pulumi_mocks.named("workers-template").inputs
    assert template["networkInterfaces"] == [{
        "networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "efa", "deleteOnTermination": "true",
        "associatePublicIpAddress": "false", "securityGroups": ["sg-cluster", "sg-workers-efa"],
    }]
    assert "vpcSecurityGroupIds" not in template
    assert template["metadataOptions"] == {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1}
    assert template["blockDeviceMappings"][0]["ebs"] == {"volumeSize": 100, "volumeType": "gp3", "encrypted": "true", "deleteOnTermination": "true"}
    placement = pulumi_mocks.named("workers-placement")
    assert placement.inputs["strategy"] == "cluster" and template["placement"] == {"groupName": placement.inputs["name"]}

    ingress, egress = pulumi_mocks.named("workers-efa-in").inputs, pulumi_mocks.named("workers-efa-out").inputs
    for rule in (ingress, egress):
        assert rule["securityGroupId"] == rule["referencedSecurityGroupId"] == "sg-workers-efa" and rule["ipProtocol"] == "-1"
    assert not any(key.startswith("kubernetes.io/cluster/") for key in pulumi_mocks.named("workers-efa").inputs["tags"])

    group = pulumi_mocks.named("workers-nodes").inputs
    assert group["subnetIds"] == ["subnet-a"] and group["amiType"] == "AL2023_ARM_64_STANDARD"
    assert group["labels"] == {"vpc.amazonaws.com/efa.present": "true", "role": "train"}
    assert group["taints"] == [{"key": "training", "value": "true", "effect": "NO_SCHEDULE"}]
    assert group["scalingConfig"] == {"minSize": 0, "maxSize": 6, "desiredSize": 2}

    asg_tags = {r.inputs["tag"]["key"]: r.inputs["tag"]["value"] for r in pulumi_mocks.of_type("aws:autoscaling/tag:Tag")}
    assert all(r.inputs["autoscalingGroupName"] == "eks-workers-nodes-asg" for r in pulumi_mocks.of_type("aws:autoscaling/tag:Tag"))
    assert asg_tags == {
        "k8s.io/cluster-autoscaler/enabled": "true",
        "k8s.io/cluster-autoscaler/training": "owned",
        "k8s.io/cluster-autoscaler/node-template/resources/vpc.amazonaws.com/efa": "1",
        "k8s.io/cluster-autoscaler/node-template/resources/hugepages-2Mi": "14082Mi",  # EFA's: 64 vCPUs x 110 + 1
        "k8s.io/cluster-autoscaler/node-template/label/vpc.amazonaws.com/efa.present": "true",
        "k8s.io/cluster-autoscaler/node-template/label/role": "train",
        "k8s.io/cluster-autoscaler/node-template/taint/training": "true:NoSchedule",
    }
    component = pulumi_mocks.named("workers")
    children = [r for r in pulumi_mocks.monitor.registrations if r is not component]
    assert children and all(r.parent == component.urn for r in children)


def test_p5_gets_32_interfaces_efa_on_card_0_efa_only_elsewhere(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: EfaNodeGroup("gpu", _args(instance_type="p5.48xlarge")))
    interfaces = pulumi_mocks.named("gpu-template").inputs["networkInterfaces"]
    assert [i["networkCardIndex"] for i in interfaces] == list(range(32))
    assert [i["deviceIndex"] for i in interfaces] == [0] + [1] * 31
    assert [i["interfaceType"] for i in interfaces] == ["efa"] + ["efa-only"] * 31
    assert pulumi_mocks.named("gpu-nodes").inputs["amiType"] == "AL2023_x86_64_NVIDIA"
    tags = {r.inputs["tag"]["key"]: r.inputs["tag"]["value"] for r in pulumi_mocks.of_type("aws:autoscaling/tag:Tag")}
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/vpc.amazonaws.com/efa"] == "32"
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "8"
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/hugepages-2Mi"] == "42242Mi"  # as AWS's p5 shows


def test_capacity_reservation_gets_no_placement_group(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: EfaNodeGroup("gpu", _args(instance_type="p4d.24xlarge", capacity_type=CapacityType.CAPACITY_BLOCK, capacity_reservation_id="cr-0123456789abcdef0")))
    assert pulumi_mocks.of_type("aws:ec2/placementGroup:PlacementGroup") == []
    template = pulumi_mocks.named("gpu-template").inputs
    assert "placement" not in template
    assert template["capacityReservationSpecification"] == {"capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}}
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert pulumi_mocks.named("gpu-nodes").inputs["capacityType"] == "CAPACITY_BLOCK"
    # EKS: a Capacity Block's instance type is in the launch template and not on the node group.
    assert template["instanceType"] == "p4d.24xlarge" and "instanceTypes" not in pulumi_mocks.named("gpu-nodes").inputs


def test_without_efa_no_fabric_resources(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: EfaNodeGroup("system", _args(instance_type="m7g.large", efa=False)))
    assert pulumi_mocks.of_type("aws:ec2/securityGroup:SecurityGroup") == []
    assert pulumi_mocks.of_type("aws:ec2/placementGroup:PlacementGroup") == []
    template = pulumi_mocks.named("system-template").inputs
    assert template["vpcSecurityGroupIds"] == ["sg-cluster"] and "networkInterfaces" not in template
    assert "vpc.amazonaws.com/efa.present" not in pulumi_mocks.named("system-nodes").inputs["labels"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"instance_type": "c7g.large"}, "efa=True is not allowed; c7g.large does not support EFA; turn efa off or use an EFA type"),
        ({"instance_type": "m7g.large"}, "efa=True is not allowed; m7g.large does not support EFA"),
        ({"instance_type": "m5large", "efa": False}, "instance_type='m5large' is not allowed; give an EC2 instance type such as"),
        ({"min_size": 3, "max_size": 2}, "min_size=3 is not allowed; need 0 <= min_size <= max_size (2)"),
        ({"desired_size": 9}, "desired_size=9 is not allowed; must lie between min_size=0 and max_size=6"),
        ({"availability_zone": "us-east-1"}, "availability_zone='us-east-1' is not allowed; name one zone"),
        ({"cluster_name": ""}, "cluster_name='' is not allowed"),
        ({"capacity_type": "RESERVED"}, "capacity_type='RESERVED' is not allowed"),
        ({"capacity_type": CapacityType.SPOT, "capacity_reservation_id": "cr-0123456789abcdef0"}, "not SPOT"),
        ({"capacity_type": CapacityType.CAPACITY_BLOCK}, "needs the Capacity Block's reservation id"),
        ({"capacity_reservation_id": "reservation-1"}, "use an id such as cr-"),
        ({"metadata_hop_limit": 0}, "metadata_hop_limit=0 is not allowed"),
        ({"root_volume_gib": 8}, "root_volume_gib=8 is not allowed"),
        ({"taints": [{"key": "a", "effect": "noschedule"}]}, "each taint needs a key and an effect: one of NO_SCHEDULE (NoSchedule)"),
        ({"labels": {"vpc.amazonaws.com/efa.present": "false"}}, "is set by the component"),
        ({"release_version": "1.35.0-20260401"}, "EFA on AL2023_ARM_64_STANDARD needs the AMI release of 20260505 or later"),
        ({"release_version": "latest"}, "release_version='latest' is not allowed; use an EKS AMI release such as"),
    ],
)
def test_invalid_arguments_are_refused_before_anything_exists(pulumi_mocks: Recorded, overrides: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        EfaNodeGroup("workers", _args(**overrides))
    assert message in str(raised.value)
    assert str(raised.value).startswith("EfaNodeGroup: ")
    assert pulumi_mocks.monitor.registrations == []


def test_release_pins_before_the_efa_ami_are_fine_without_efa_or_on_gpu_amis(pulumi_mocks: Recorded) -> None:
    """Only the STANDARD AMIs lacked the EFA module; the NVIDIA AMIs always had it."""
    pulumi_mocks.run(lambda: [
        EfaNodeGroup("cpu", _args(efa=False, release_version="1.35.0-20260401")),
        EfaNodeGroup("gpu", _args(instance_type="p5.48xlarge", release_version="1.35.0-20260401")),
        EfaNodeGroup("pinned", _args(release_version="1.35.0-20260505")),
    ])
    assert pulumi_mocks.named("pinned-nodes").inputs["releaseVersion"] == "1.35.0-20260505"


def test_taint_effects_in_the_kubernetes_spelling_are_accepted(pulumi_mocks: Recorded) -> None:
    """Users write `NoSchedule`, as kubectl shows it; EKS's API wants NO_SCHEDULE."""
    taints = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    pulumi_mocks.run(lambda: EfaNodeGroup("gpu", _args(instance_type="p5.48xlarge", taints=taints)))
    assert pulumi_mocks.named("gpu-nodes").inputs["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    tags = {r.inputs["tag"]["key"]: r.inputs["tag"]["value"] for r in pulumi_mocks.of_type("aws:autoscaling/tag:Tag")}
    assert tags["k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu"] == "true:NoSchedule"
