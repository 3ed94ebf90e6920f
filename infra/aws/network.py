"""Network: a new VPC laid out for EKS, or an existing one given by id."""

import ipaddress
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NotRequired, TypedDict

import pulumi
import pulumi_aws as aws

from eks_ddp.infra.errors import InvalidArgument

COMPONENT = "Network"
DEFAULT_CIDR = "10.0.0.0/16"
DEFAULT_ZONE_COUNT = 2


class NatGateways(str, Enum):
    """How private subnets reach the internet."""

    SINGLE = "single"
    """One NAT gateway for all zones: cheaper, one zone's outage cuts egress."""
    ONE_PER_ZONE = "one_per_zone"
    """A NAT gateway per zone: zone-independent egress."""


DEFAULT_NAT_GATEWAYS = NatGateways.SINGLE


class NetworkArgs(TypedDict):
    """A new VPC (CIDR, zones, NAT gateways), or an existing one's ids."""

    cidr: NotRequired[str]
    """IPv4 CIDR of a new VPC, /16 to /24 (default 10.0.0.0/16)."""
    availability_zones: NotRequired[Sequence[str]]
    """Zones to use, by name (at least 2). Name them when an EFA node group must sit in a known zone."""
    availability_zone_count: NotRequired[int]
    """Number of zones taken from the region when `availability_zones` is not given (>= 2, default 2)."""
    nat_gateways: NotRequired[NatGateways]
    """NAT gateway layout (default single)."""
    existing_vpc_id: NotRequired[str]
    """Use this VPC instead of creating one (then give `existing_private_subnet_ids`)."""
    existing_private_subnet_ids: NotRequired[Mapping[str, str]]
    """With `existing_vpc_id`: private subnet id per zone name."""
    existing_public_subnet_ids: NotRequired[Sequence[str]]
    """With `existing_vpc_id`: public subnet ids (may be empty for private clusters)."""
    tags: NotRequired[Mapping[str, str]]
    """Tags for every taggable resource."""


def plan_subnets(cidr: str, zone_count: int) -> list[tuple[str, str]]:
    """(private, public) CIDR per zone: the VPC split into equal blocks, privates first."""
    network = ipaddress.ip_network(cidr)
    bits = math.ceil(math.log2(2 * zone_count))
    blocks = list(network.subnets(prefixlen_diff=bits))
    return [(str(blocks[index]), str(blocks[zone_count + index])) for index in range(zone_count)]


def validate(args: NetworkArgs) -> None:
    if "existing_vpc_id" in args:
        if not args.get("existing_private_subnet_ids"):
            raise InvalidArgument(
                COMPONENT,
                "existing_private_subnet_ids",
                args.get("existing_private_subnet_ids"),
                "give the private subnet id of each zone with {}",
                refers=["existing_vpc_id"],
            )
        return
    if "existing_private_subnet_ids" in args or "existing_public_subnet_ids" in args:
        raise InvalidArgument(COMPONENT, "existing_vpc_id", None, "existing subnet ids need {}", ["existing_vpc_id"])
    cidr = args.get("cidr", DEFAULT_CIDR)
    try:
        network = ipaddress.IPv4Network(cidr)
    except ValueError:
        raise InvalidArgument(COMPONENT, "cidr", cidr, "use an IPv4 network such as 10.0.0.0/16") from None
    if not 16 <= network.prefixlen <= 24:
        raise InvalidArgument(COMPONENT, "cidr", cidr, "the prefix must be /16 to /24")
    zones = args.get("availability_zones")
    if zones is not None:
        if len(zones) < 2 or len(set(zones)) != len(zones):
            raise InvalidArgument(
                COMPONENT, "availability_zones", list(zones), "name at least 2 distinct zones (EKS needs two)"
            )
        count = len(zones)
    else:
        count = args.get("availability_zone_count", DEFAULT_ZONE_COUNT)
        if count < 2:
            raise InvalidArgument(COMPONENT, "availability_zone_count", count, "use at least 2 (EKS needs two zones)")
    smallest = ipaddress.ip_network(plan_subnets(cidr, count)[0][0])
    if smallest.prefixlen > 27:
        raise InvalidArgument(
            COMPONENT, "cidr", cidr, f"too small for {2 * count} subnets of at least /27; use a larger block"
        )
    if args.get("nat_gateways", DEFAULT_NAT_GATEWAYS) not in tuple(NatGateways):
        raise InvalidArgument(
            COMPONENT, "nat_gateways", args.get("nat_gateways"), f"use one of {[item.value for item in NatGateways]}"
        )


def zone_names(parent: pulumi.Resource, args: NetworkArgs) -> list[pulumi.Input[str]]:
    """The zones named, or the region's first available ones."""
    named = args.get("availability_zones")
    if named is not None:
        return list(named)
    available = aws.get_availability_zones_output(state="available", opts=pulumi.InvokeOutputOptions(parent=parent))
    return [available.names[index] for index in range(args.get("availability_zone_count", DEFAULT_ZONE_COUNT))]


@dataclass(frozen=True)
class Layout:
    """What a Network gives the cluster, whether it made the VPC or was given one."""

    vpc_id: pulumi.Output[str]
    private_subnet_ids: pulumi.Output[list[str]]
    public_subnet_ids: pulumi.Output[list[str]]
    private_subnet_by_zone: dict[str, pulumi.Output[str]]


def existing_layout(vpc_id: str, args: NetworkArgs) -> Layout:
    private = dict(args.get("existing_private_subnet_ids", {}))
    return Layout(
        vpc_id=pulumi.Output.from_input(vpc_id),
        private_subnet_ids=pulumi.Output.from_input(list(private.values())),
        public_subnet_ids=pulumi.Output.from_input(list(args.get("existing_public_subnet_ids", []))),
        private_subnet_by_zone={zone: pulumi.Output.from_input(subnet) for zone, subnet in private.items()},
    )


def vpc_with_gateway(
    name: str, parent: pulumi.Resource, cidr: str, tags: dict[str, str]
) -> tuple[aws.ec2.Vpc, aws.ec2.InternetGateway]:
    child = pulumi.ResourceOptions(parent=parent)
    vpc = aws.ec2.Vpc(
        f"{name}-vpc",
        cidr_block=cidr,
        enable_dns_hostnames=True,
        enable_dns_support=True,
        tags={**tags, "Name": f"{name}-vpc"},
        opts=child,
    )
    gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags={**tags, "Name": f"{name}-igw"}, opts=child)
    return vpc, gateway


def public_subnets(
    name: str,
    parent: pulumi.Resource,
    vpc: aws.ec2.Vpc,
    gateway: aws.ec2.InternetGateway,
    placed: Sequence[tuple[pulumi.Input[str], str]],
    tags: dict[str, str],
) -> tuple[aws.ec2.RouteTable, list[aws.ec2.Subnet]]:
    """The public route table (to the internet gateway) and a subnet on it per (zone, CIDR) of `placed`, for
    internet-facing load balancers and the NAT gateways; instances get no public address."""
    child = pulumi.ResourceOptions(parent=parent)
    table = aws.ec2.RouteTable(
        f"{name}-public",
        vpc_id=vpc.id,
        routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": gateway.id}],
        tags={**tags, "Name": f"{name}-public"},
        opts=child,
    )
    subnets = []
    for index, (zone, cidr) in enumerate(placed):
        subnet = aws.ec2.Subnet(
            f"{name}-public-{index}",
            vpc_id=vpc.id,
            cidr_block=cidr,
            availability_zone=zone,
            map_public_ip_on_launch=False,
            tags={**tags, "Name": f"{name}-public-{index}", "kubernetes.io/role/elb": "1"},
            opts=child,
        )
        aws.ec2.RouteTableAssociation(
            f"{name}-public-{index}", subnet_id=subnet.id, route_table_id=table.id, opts=child
        )
        subnets.append(subnet)
    return table, subnets


def nat_gateways(
    name: str,
    parent: pulumi.Resource,
    public: Sequence[aws.ec2.Subnet],
    gateway: aws.ec2.InternetGateway,
    tags: dict[str, str],
) -> list[aws.ec2.NatGateway]:
    """A NAT gateway, with its Elastic IP, in each of the `public` subnets."""
    gateways = []
    for index, subnet in enumerate(public):
        address = aws.ec2.Eip(
            f"{name}-nat-{index}",
            domain="vpc",
            tags={**tags, "Name": f"{name}-nat-{index}"},
            opts=pulumi.ResourceOptions(parent=parent),
        )
        gateways.append(
            aws.ec2.NatGateway(
                f"{name}-nat-{index}",
                allocation_id=address.id,
                subnet_id=subnet.id,
                tags={**tags, "Name": f"{name}-nat-{index}"},
                opts=pulumi.ResourceOptions(parent=parent, depends_on=[gateway]),
            )
        )
    return gateways


def private_subnets(
    name: str,
    parent: pulumi.Resource,
    vpc: aws.ec2.Vpc,
    placed: Sequence[tuple[pulumi.Input[str], str, aws.ec2.NatGateway]],
    tags: dict[str, str],
) -> tuple[list[aws.ec2.RouteTable], list[aws.ec2.Subnet]]:
    """A subnet per (zone, CIDR, NAT gateway) of `placed`, each with its own route table to its NAT gateway."""
    child = pulumi.ResourceOptions(parent=parent)
    tables, subnets = [], []
    for index, (zone, cidr, nat) in enumerate(placed):
        subnet = aws.ec2.Subnet(
            f"{name}-private-{index}",
            vpc_id=vpc.id,
            cidr_block=cidr,
            availability_zone=zone,
            tags={**tags, "Name": f"{name}-private-{index}", "kubernetes.io/role/internal-elb": "1"},
            opts=child,
        )
        table = aws.ec2.RouteTable(
            f"{name}-private-{index}",
            vpc_id=vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}],
            tags={**tags, "Name": f"{name}-private-{index}"},
            opts=child,
        )
        aws.ec2.RouteTableAssociation(
            f"{name}-private-{index}", subnet_id=subnet.id, route_table_id=table.id, opts=child
        )
        tables.append(table)
        subnets.append(subnet)
    return tables, subnets


def s3_endpoint(
    name: str,
    parent: pulumi.Resource,
    vpc: aws.ec2.Vpc,
    tables: Sequence[aws.ec2.RouteTable],
    tags: dict[str, str],
) -> aws.ec2.VpcEndpoint:
    """S3 traffic (images, datasets, checkpoints) skips the NAT gateway: cheaper and faster."""
    region = aws.get_region_output(opts=pulumi.InvokeOutputOptions(parent=parent))
    return aws.ec2.VpcEndpoint(
        f"{name}-s3",
        vpc_id=vpc.id,
        service_name=pulumi.Output.format("com.amazonaws.{0}.s3", region.region),
        vpc_endpoint_type="Gateway",
        route_table_ids=[table.id for table in tables],
        tags={**tags, "Name": f"{name}-s3"},
        opts=pulumi.ResourceOptions(parent=parent),
    )


def new_layout(name: str, parent: pulumi.Resource, args: NetworkArgs, tags: dict[str, str]) -> Layout:
    """A VPC over the zones: a public and a private subnet in each (plan_subnets), private ones reaching the internet
    through one NAT gateway or one per zone, and S3 through a gateway endpoint."""
    cidr, zones = args.get("cidr", DEFAULT_CIDR), zone_names(parent, args)
    private_cidrs, public_cidrs = zip(*plan_subnets(cidr, len(zones)))
    vpc, gateway = vpc_with_gateway(name, parent, cidr, tags)
    public_table, public = public_subnets(name, parent, vpc, gateway, list(zip(zones, public_cidrs)), tags)
    per_zone = args.get("nat_gateways", DEFAULT_NAT_GATEWAYS) == NatGateways.ONE_PER_ZONE
    nats = nat_gateways(name, parent, public if per_zone else public[:1], gateway, tags)
    routes = nats if per_zone else nats * len(zones)
    private_tables, private = private_subnets(name, parent, vpc, list(zip(zones, private_cidrs, routes)), tags)
    s3_endpoint(name, parent, vpc, [public_table, *private_tables], tags)
    named = args.get("availability_zones") or []
    return Layout(
        vpc_id=vpc.id,
        private_subnet_ids=pulumi.Output.all(*[subnet.id for subnet in private]),
        public_subnet_ids=pulumi.Output.all(*[subnet.id for subnet in public]),
        private_subnet_by_zone={zone: private[index].id for index, zone in enumerate(named)},
    )


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    """The VPC's id."""
    private_subnet_ids: pulumi.Output[list[str]]
    """Private subnets, one per zone, in zone order (nodes live here)."""
    public_subnet_ids: pulumi.Output[list[str]]
    """Public subnets, one per zone (load balancers and NAT gateways)."""
    private_subnet_by_zone: dict[str, pulumi.Output[str]]
    """Private subnet id per zone name, when zones were named (EFA groups need one zone's subnet)."""

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        validate(args)
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        tags = dict(args.get("tags", {}))
        if "existing_vpc_id" in args:
            layout = existing_layout(args["existing_vpc_id"], args)
        else:
            layout = new_layout(name, self, args, tags)
        self.vpc_id, self.private_subnet_ids = layout.vpc_id, layout.private_subnet_ids
        self.public_subnet_ids, self.private_subnet_by_zone = layout.public_subnet_ids, layout.private_subnet_by_zone
        self.register_outputs(
            {
                "vpc_id": self.vpc_id,
                "private_subnet_ids": self.private_subnet_ids,
                "public_subnet_ids": self.public_subnet_ids,
            }
        )
