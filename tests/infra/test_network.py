import pytest

from eks_ddp.infra.aws.network import NatGateways, Network, NetworkArgs, plan_subnets
from eks_ddp.infra.errors import InvalidArgument
from tests.pulumi_harness import Recorded


def test_plan_splits_the_vpc_privates_first() -> None:
    assert plan_subnets("10.0.0.0/16", 2) == [("10.0.0.0/18", "10.0.128.0/18"), ("10.0.64.0/18", "10.0.192.0/18")]
    assert plan_subnets("10.0.0.0/16", 3)[2] == ("10.0.64.0/19", "10.0.160.0/19")


def test_new_vpc_has_tagged_subnets_nat_and_s3_endpoint(pulumi_mocks: Recorded) -> None:
    args: NetworkArgs = {"availability_zones": ["us-east-1a", "us-east-1b"], "tags": {"team": "ml"}}
    pulumi_mocks.run(lambda: Network("net", args))
    subnets = pulumi_mocks.of_type("aws:ec2/subnet:Subnet")
    assert [s.name for s in subnets] == ["net-private-0", "net-private-1", "net-public-0", "net-public-1"]
    assert subnets[0].inputs["tags"]["kubernetes.io/role/internal-elb"] == "1"
    assert subnets[2].inputs["tags"]["kubernetes.io/role/elb"] == "1"
    assert [s.inputs["availabilityZone"] for s in subnets[:2]] == ["us-east-1a", "us-east-1b"]
    assert len(pulumi_mocks.of_type("aws:ec2/natGateway:NatGateway")) == 1
    endpoint = pulumi_mocks.named("net-s3")
    assert endpoint.inputs["serviceName"] == "com.amazonaws.us-east-1.s3" and endpoint.inputs["vpcEndpointType"] == "Gateway"
    component = pulumi_mocks.named("net")
    taggable = [r for r in pulumi_mocks.monitor.registrations if r.type.startswith("aws:ec2/") and "Association" not in r.type]
    assert all(r.inputs["tags"]["team"] == "ml" for r in taggable)
    assert all(r.parent == component.urn for r in pulumi_mocks.monitor.registrations if r is not component)


def test_one_nat_gateway_per_zone(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: Network("net", {"availability_zone_count": 3, "nat_gateways": NatGateways.ONE_PER_ZONE}))
    assert len(pulumi_mocks.of_type("aws:ec2/natGateway:NatGateway")) == 3


def test_existing_vpc_creates_nothing(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: Network("net", {"existing_vpc_id": "vpc-1", "existing_private_subnet_ids": {"us-east-1a": "subnet-a", "us-east-1b": "subnet-b"}}))
    assert [r.type for r in pulumi_mocks.monitor.registrations] == ["eksddp:index:Network"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"cidr": "10.0.0.0/28"}, "cidr='10.0.0.0/28' is not allowed; the prefix must be /16 to /24"),
        ({"cidr": "10.0.0.0/24", "availability_zone_count": 6}, "too small for 12 subnets"),
        ({"cidr": "not-a-cidr"}, "use an IPv4 network"),
        ({"availability_zones": ["us-east-1a"]}, "name at least 2 distinct zones"),
        ({"availability_zone_count": 1}, "availability_zone_count=1 is not allowed"),
        ({"existing_vpc_id": "vpc-1"}, "existing_private_subnet_ids=None is not allowed"),
        ({"existing_private_subnet_ids": {"a": "b"}}, "existing subnet ids need existing_vpc_id"),
        ({"nat_gateways": "two"}, "nat_gateways='two' is not allowed"),
    ],
)
def test_invalid_arguments_are_refused_before_anything_exists(pulumi_mocks: Recorded, args: NetworkArgs, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        Network("net", args)
    assert pulumi_mocks.monitor.registrations == []
