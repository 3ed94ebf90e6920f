"""Karpenter's EC2NodeClass and NodePool per training group, against the v1.14.1 CRDs and their CEL rules."""



from eks_ddp.infra.addons.karpenter_nodes import interface_errors, network_interfaces, node_class, node_pool
from eks_ddp.infra.aws.efa_node_group import CapacityType, TaintEffect
from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES, INSTANCE_TYPES
from tests.upstream import validate_against_crd


def test_p5_gets_the_primary_interface_and_an_efa_device_on_each_of_its_32_cards() -> None:
    interfaces = network_interfaces(EFA_INSTANCE_TYPES["p5.48xlarge"].network_cards)
    assert len(interfaces) == 33 and interface_errors(interfaces) == []
    assert interfaces[0] == {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}
    efa = [i for i in interfaces if i["interfaceType"] == "efa-only"]
    assert sorted(i["networkCardIndex"] for i in efa) == list(range(32))
    assert {(i["networkCardIndex"], i["deviceIndex"]) for i in efa if i["networkCardIndex"] == 0} == {(0, 1)}


def test_the_crds_cel_rules_on_interfaces_are_enforced() -> None:
    no_primary = [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "efa-only"}]
    twice = [*network_interfaces(2), {"networkCardIndex": 1, "deviceIndex": 1, "interfaceType": "efa-only"}]
    assert "primary interface" in interface_errors(no_primary)[0]
    assert "at most one efa-only" in interface_errors(twice)[0]


def test_node_class_and_pool_validate_for_a_reserved_p5_group() -> None:
    p5 = EFA_INSTANCE_TYPES["p5.48xlarge"]
    nodes = node_class("gpus", p5, True, "eks-ddp-gpus-node-role", "subnet-1", ["sg-cluster", "sg-efa"],
                       capacity_reservation_id="cr-0123456789abcdef0")
    validate_against_crd(nodes, "karpenter.k8s.aws_ec2nodeclasses-v1.14.1.yaml")
    spec = nodes["spec"]
    assert spec["metadataOptions"]["httpTokens"] == "required" and spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
    assert spec["blockDeviceMappings"][0]["ebs"]["encrypted"] is True and "placementGroupSelector" not in spec
    pool = node_pool("gpus", p5, "us-east-1a", CapacityType.CAPACITY_BLOCK, {"nvidia.com/gpu.present": "true"},
                     [{"key": "nvidia.com/gpu", "value": "true", "effect": TaintEffect.NO_SCHEDULE}], 2)
    validate_against_crd(pool, "karpenter.sh_nodepools-v1.14.1.yaml")
    assert pool["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert pool["spec"]["template"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]} in pool["spec"]["template"]["spec"]["requirements"]


def test_a_cpu_group_without_efa_has_no_interfaces_and_may_use_a_placement_group() -> None:
    m5 = INSTANCE_TYPES["m5.large"]
    nodes = node_class("cpu", m5, False, "role", "subnet-1", ["sg-cluster"], placement_group_name="pg-name")
    validate_against_crd(nodes, "karpenter.k8s.aws_ec2nodeclasses-v1.14.1.yaml")
    assert "networkInterfaces" not in nodes["spec"] and nodes["spec"]["placementGroupSelector"] == {"name": "pg-name"}
