"""EfaNodeGroup: a managed node group for distributed training, its EFA setup in plain sight.

Every EFA property that decides whether NCCL uses the fabric or silently falls back
to TCP is a plain pulumi-aws resource here, so tests can check it offline: the
placement group, the self-referencing security group, one interface per network
card in the launch template, and the autoscaler tags that let the group scale
from zero for pods that request EFA.
"""

import re
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, NotRequired, TypedDict, cast

import pulumi
import pulumi_aws as aws

from eks_ddp.infra.aws.cluster import GROUP_LABEL
from eks_ddp.infra.aws.iam import node_role
from eks_ddp.infra.aws.launch_template import secure_launch_template, template_reference
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import catalogue, instance_facts, versions
from eks_ddp.infra.facts.allocatable import NodeLauncher, efa_hugepages_mib
from eks_ddp.infra.facts.catalogue import InstanceType
from eks_ddp.infra.facts.instance_facts import ami_type

COMPONENT = "EfaNodeGroup"
EFA_LABEL = "vpc.amazonaws.com/efa.present"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
# On GPU groups: the label the NVIDIA device plugin's chart selects on (one of its default affinity terms).
GPU_LABEL = "nvidia.com/gpu.present"


class CapacityType(str, Enum):
    """How a group's instances are bought."""

    ON_DEMAND = "ON_DEMAND"
    """On-Demand instances (or an On-Demand Capacity Reservation's)."""
    SPOT = "SPOT"
    """Spot instances: cheaper, interrupted with two minutes' notice."""
    CAPACITY_BLOCK = "CAPACITY_BLOCK"
    """An EC2 Capacity Block for ML (needs `capacity_reservation_id`)."""


class TaintEffect(str, Enum):
    """A taint's effect, in the EKS API's spelling; the Kubernetes spelling (`NoSchedule`) is accepted too."""

    NO_SCHEDULE = "NO_SCHEDULE"
    """Pods that do not tolerate it are not scheduled on the node."""
    NO_EXECUTE = "NO_EXECUTE"
    """Pods that do not tolerate it are not scheduled, and running ones are evicted."""
    PREFER_NO_SCHEDULE = "PREFER_NO_SCHEDULE"
    """The scheduler avoids the node for pods that do not tolerate it."""

    @classmethod
    def _missing_(cls, value: object) -> "TaintEffect | None":
        return next((effect for effect, spelling in KUBERNETES_EFFECT.items() if spelling == value), None)


KUBERNETES_EFFECT = {
    TaintEffect.NO_SCHEDULE: "NoSchedule",
    TaintEffect.NO_EXECUTE: "NoExecute",
    TaintEffect.PREFER_NO_SCHEDULE: "PreferNoSchedule",
}


class Taint(TypedDict):
    """A node taint: which pods the group's nodes accept."""

    key: str
    """Taint key, for example `nvidia.com/gpu` or `training`."""
    value: NotRequired[str]
    """Taint value (default empty)."""
    effect: TaintEffect
    """What the taint does to pods that do not tolerate it."""


class NodeGroupShape(TypedDict):
    """What a training node group looks like, independent of the cluster it joins."""

    name: NotRequired[str]
    """Short name, unique in the platform (a DNS label; required in its `node_groups`): names the group and the
    job's target."""
    instance_type: str
    """Any EC2 instance type (EFA-capable when `efa` is on); its facts come from EC2."""
    availability_zone: str
    """The one zone the group lives in (EFA traffic stays inside a placement group)."""
    efa: NotRequired[bool]
    """Attach EFA interfaces, a placement group and the EFA security group (default true)."""
    min_size: NotRequired[int]
    """Fewest nodes (default 0: scale from zero)."""
    max_size: NotRequired[int]
    """Most nodes (default 2)."""
    desired_size: NotRequired[int]
    """Nodes at creation; the autoscaler owns it afterwards (default `min_size`)."""
    capacity_type: NotRequired[CapacityType]
    """On-demand (default), spot, or an EC2 Capacity Block."""
    capacity_reservation_id: NotRequired[str]
    """Launch into this On-Demand Capacity Reservation or Capacity Block (then no placement group is forced)."""
    labels: NotRequired[Mapping[str, str]]
    """Node labels in addition to `vpc.amazonaws.com/efa.present` (and `nvidia.com/gpu.present` on GPU types)."""
    taints: NotRequired[Sequence[Taint]]
    """Node taints (also announced to the autoscaler for scale-from-zero)."""
    root_volume_gib: NotRequired[int]
    """Size of the encrypted gp3 root volume (default 100)."""
    metadata_hop_limit: NotRequired[int]
    """IMDSv2 hop limit (default 1: pods use IRSA, not the node's credentials)."""
    release_version: NotRequired[str]
    """Pin the EKS AMI release (for example `1.33.4-20260505`); default: the latest at creation."""
    launcher: NotRequired[NodeLauncher]
    """What launches the nodes, which decides their allocatable (set by the group itself in `TrainingNodes.shape`;
    unset in a shape of your own, job pods are sized to fit either engine's nodes)."""


class EfaNodeGroupArgs(NodeGroupShape):
    cluster_name: str
    """The EKS cluster's name (it also names the autoscaler's discovery tag)."""
    vpc_id: pulumi.Input[str]
    """The cluster's VPC (for the EFA security group)."""
    cluster_security_group_id: pulumi.Input[str]
    """The EKS cluster security group, attached to every interface with the EFA group."""
    subnet_id: pulumi.Input[str]
    """The private subnet of `availability_zone`, and only that one."""
    kubernetes_version: NotRequired[str]
    """Kubernetes version of the nodes (default: the cluster's)."""
    tags: NotRequired[Mapping[str, str]]
    """Tags for every taggable resource."""
    auto_repair: NotRequired[bool]
    """EKS node auto-repair: replace nodes the node monitoring agent reports unhealthy (default true)."""


def efa_interfaces(network_cards: int, security_group_ids: Sequence[pulumi.Input[str]]) -> list[dict[str, Any]]:
    """One interface per network card: card 0 is the primary `efa` interface (device 0),
    the others are `efa-only` at device index 1 (they carry no IP traffic)."""
    return [
        {
            "network_card_index": card,
            "device_index": 0 if card == 0 else 1,
            "interface_type": "efa" if card == 0 else "efa-only",
            "delete_on_termination": "true",
            "associate_public_ip_address": "false",
            "security_groups": list(security_group_ids),
        }
        for card in range(network_cards)
    ]


def autoscaler_tags(
    cluster_name: str, instance: InstanceType, efa: bool, labels: Mapping[str, str], taints: Sequence[Taint]
) -> dict[str, str]:
    """Discovery tags plus the node template the autoscaler needs to scale up from zero nodes."""
    prefix = "k8s.io/cluster-autoscaler/node-template"
    tags = {"k8s.io/cluster-autoscaler/enabled": "true", f"k8s.io/cluster-autoscaler/{cluster_name}": "owned"}
    if efa:
        tags[f"{prefix}/resources/{EFA_RESOURCE}"] = str(instance.network_cards)
        tags[f"{prefix}/resources/hugepages-2Mi"] = f"{efa_hugepages_mib(instance)}Mi"  # the EFA software's pages
    if instance.gpus:
        tags[f"{prefix}/resources/nvidia.com/gpu"] = str(instance.gpus)
    if instance.neuron_devices:
        tags[f"{prefix}/resources/aws.amazon.com/neuron"] = str(instance.neuron_devices)
    tags.update({f"{prefix}/label/{key}": value for key, value in labels.items()})
    tags.update(
        {
            f"{prefix}/taint/{taint['key']}": f"{taint.get('value', '')}:{KUBERNETES_EFFECT[TaintEffect(taint['effect'])]}"
            for taint in taints
        }
    )
    return tags


def node_labels(group: str, instance: InstanceType, efa: bool, labels: Mapping[str, str]) -> dict[str, str]:
    """The group's node labels: its name (what its jobs' pods select, so they never land on the system nodes or
    another group of the same architecture), EFA's and the GPUs' presence (what the device plugins select on), then
    the user's."""
    presence = {**({EFA_LABEL: "true"} if efa else {}), **({GPU_LABEL: "true"} if instance.is_gpu else {})}
    return {**labels, **({GROUP_LABEL: group} if group else {}), **presence}


def shape_of(args: NodeGroupShape) -> NodeGroupShape:
    """Only the shape's keys of a wider args dict (a node group's, a platform's spec with its name)."""
    return cast(NodeGroupShape, {key: value for key, value in args.items() if key in NodeGroupShape.__annotations__})


def sizes(shape: NodeGroupShape) -> tuple[int, int, int]:
    """The group's (min_size, max_size, desired_size), with their defaults: 0, 2 and min_size."""
    minimum = shape.get("min_size", 0)
    return minimum, shape.get("max_size", 2), shape.get("desired_size", minimum)


def placement_facts(shape: NodeGroupShape, instance: InstanceType) -> tuple[int, dict[str, str], list[Taint]]:
    """EFA devices per node (what a pod requests), node labels (its selector) and taints (its tolerations)."""
    efa = shape.get("efa", True)
    return (
        instance.network_cards if efa else 0,
        node_labels(shape.get("name", ""), instance, efa, shape.get("labels", {})),
        [*shape.get("taints", [])],
    )


def validate(args: EfaNodeGroupArgs) -> InstanceType:
    """Check everything that can be checked before creating anything; returns EC2's facts of the type."""
    if not args.get("cluster_name"):
        raise InvalidArgument(COMPONENT, "cluster_name", args.get("cluster_name"), "give the EKS cluster's name")
    instance_facts.check_name(COMPONENT, "instance_type", args.get("instance_type", ""))
    instance = instance_facts.describe(args["instance_type"])
    validate_shape(args, instance)
    return instance


# Neuron families that train (Trainium) or run the Neuron SDK's current releases (Inferentia2); Inferentia1 (inf1)
# takes only the legacy Neuron SDK for inference (aws-neuron-sdk release notes: inf1 stays on Neuron 2.x's torch-neuron).
NEURON_FAMILIES = ("trn1", "trn1n", "trn2", "inf2")


def unsupported_accelerator(instance: InstanceType) -> str | None:
    """Why a type's accelerators cannot train here (None for CPUs, NVIDIA GPUs and current Neuron devices): the AMI,
    the device plugin and the pods' requests exist for those only, and a type taken for a CPU one would train on its
    CPUs alone."""
    family = instance.name.split(".")[0]
    if instance.neuron_devices and family not in NEURON_FAMILIES:
        return (
            f"{instance.name} is an Inferentia1 type, which the current Neuron SDK does not train on; use "
            f"{', '.join(NEURON_FAMILIES)} (Neuron), an NVIDIA GPU or a CPU type"
        )
    if instance.gpus and instance.gpu_maker != "nvidia":
        return (
            f"{instance.name} has {instance.gpu_maker or 'unknown'} GPUs ({instance.gpu_model}); eks-ddp supports "
            "NVIDIA GPUs, AWS Trainium and Inferentia2 (and CPUs) for now"
        )
    return None


def validate_shape(args: NodeGroupShape, instance: InstanceType, zoned: bool = True) -> None:
    """The group's own settings against its type's facts, independent of any cluster (stack config checks
    these early, with the catalogue's facts). `zoned`: the group is made here, in one zone it must name (an existing
    cluster's groups live where they are)."""
    instance_facts.check_name(COMPONENT, "instance_type", args.get("instance_type", ""))
    accelerator = unsupported_accelerator(instance)
    if accelerator:
        raise InvalidArgument(COMPONENT, "instance_type", instance.name, accelerator)
    efa = args.get("efa", True)
    if efa and not instance.efa:
        raise InvalidArgument(
            COMPONENT,
            "efa",
            efa,
            f"{instance.name} does not support EFA; turn efa off or use an "
            f"EFA type such as {', '.join(sorted(catalogue.EFA_INSTANCE_TYPES)[:4])}",
        )
    if (zoned or "availability_zone" in args) and not re.fullmatch(
        r"[a-z]{2}(-[a-z]+)+-\d[a-z]", args.get("availability_zone", "")
    ):
        raise InvalidArgument(
            COMPONENT, "availability_zone", args.get("availability_zone"), "name one zone, such as us-east-1a"
        )
    minimum, maximum, desired = sizes(args)
    if maximum < 1:
        raise InvalidArgument(COMPONENT, "max_size", maximum, "use 1 or more")
    if not 0 <= minimum <= maximum:
        raise InvalidArgument(COMPONENT, "min_size", minimum, f"need 0 <= min_size <= max_size ({maximum})")
    if not minimum <= desired <= maximum:
        raise InvalidArgument(
            COMPONENT, "desired_size", desired, f"must lie between min_size={minimum} and max_size={maximum}"
        )
    capacity = args.get("capacity_type", CapacityType.ON_DEMAND)
    if capacity not in tuple(CapacityType):
        raise InvalidArgument(
            COMPONENT, "capacity_type", capacity, f"use one of {[item.value for item in CapacityType]}"
        )
    reservation = args.get("capacity_reservation_id")
    if reservation is not None and capacity == CapacityType.SPOT:
        raise InvalidArgument(
            COMPONENT,
            "capacity_reservation_id",
            reservation,
            "capacity reservations are for ON_DEMAND or CAPACITY_BLOCK groups, not SPOT",
        )
    if capacity == CapacityType.CAPACITY_BLOCK and reservation is None:
        raise InvalidArgument(
            COMPONENT,
            "capacity_reservation_id",
            None,
            "a CAPACITY_BLOCK group needs the Capacity Block's reservation id",
        )
    if reservation is not None and not re.fullmatch(r"cr-[0-9a-f]{8,17}", reservation):
        raise InvalidArgument(
            COMPONENT, "capacity_reservation_id", reservation, "use an id such as cr-0123456789abcdef0"
        )
    hops = args.get("metadata_hop_limit", 1)
    if not 1 <= hops <= 64:
        raise InvalidArgument(
            COMPONENT, "metadata_hop_limit", hops, "use 1 to 64 (1 keeps pods away from the node's credentials)"
        )
    volume = args.get("root_volume_gib", 100)
    if not 20 <= volume <= 16384:
        raise InvalidArgument(COMPONENT, "root_volume_gib", volume, "use 20 to 16384 GiB")
    for taint in args.get("taints", []):
        if not taint.get("key") or not _is_effect(taint.get("effect")):
            spellings = ", ".join(f"{effect.value} ({KUBERNETES_EFFECT[effect]})" for effect in TaintEffect)
            raise InvalidArgument(
                COMPONENT, "taints", dict(taint), f"each taint needs a key and an effect: one of {spellings}"
            )
    _validate_release_version(args.get("release_version"), instance, args.get("efa", True))
    if EFA_LABEL in args.get("labels", {}):
        raise InvalidArgument(
            COMPONENT, "labels", dict(args.get("labels", {})), f"{EFA_LABEL} is set by the component from `efa`"
        )


def _is_effect(value: object) -> bool:
    try:
        TaintEffect(value)
    except ValueError:
        return False
    return True


def _validate_release_version(release: str | None, instance: InstanceType, efa: bool) -> None:
    """An AMI pin must name a release; on STANDARD AMIs with EFA, one that has the EFA kernel module."""
    if release is None:
        return
    match = re.fullmatch(r"\d+\.\d+\.\d+-(\d{8})", release)
    if match is None:
        raise InvalidArgument(COMPONENT, "release_version", release, "use an EKS AMI release such as 1.35.2-20260601")
    floor = versions.EFA_STANDARD_AMI_FLOOR
    if efa and ami_type(instance).endswith("_STANDARD") and match.group(1) < floor:
        raise InvalidArgument(
            COMPONENT,
            "release_version",
            release,
            f"EFA on {ami_type(instance)} needs the AMI release of {floor} or later (the first with EFA)",
        )


def efa_security_group(
    name: str, parent: pulumi.Resource, vpc_id: pulumi.Input[str], tags: Mapping[str, str]
) -> pulumi.Output[str]:
    """The security group EFA needs on every interface: all traffic to and from itself (EFA user guide)."""
    child = pulumi.ResourceOptions(parent=parent)
    # Not tagged kubernetes.io/cluster/<name>: the AWS Load Balancer Controller fails when it finds two tagged
    # groups on a node.
    group = aws.ec2.SecurityGroup(
        f"{name}-efa",
        vpc_id=vpc_id,
        description="EFA: all traffic within the group",
        tags={**tags, "Name": f"{name}-efa"},
        opts=child,
    )
    rules = ((aws.vpc.SecurityGroupIngressRule, "in", "from"), (aws.vpc.SecurityGroupEgressRule, "out", "to"))
    for rule, direction, text in rules:
        rule(
            f"{name}-efa-{direction}",
            security_group_id=group.id,
            referenced_security_group_id=group.id,
            ip_protocol="-1",
            description=f"EFA {text} itself",
            tags=dict(tags),
            opts=child,
        )
    return group.id


def cluster_placement_group(name: str, parent: pulumi.Resource, tags: Mapping[str, str]) -> pulumi.Output[str]:
    """A `cluster` placement group: EFA's low latency needs the nodes close together."""
    child = pulumi.ResourceOptions(parent=parent)
    return aws.ec2.PlacementGroup(f"{name}-placement", strategy="cluster", tags=dict(tags), opts=child).name


class TrainingNodes(pulumi.ComponentResource):
    """A training group's nodes, whichever autoscaler launches them: what workloads read to place their pods."""

    instance_type: str
    """The instance type (plain, for sizing pods)."""
    instance: InstanceType
    """EC2's facts of the instance type: vCPUs, memory, network cards, GPUs (and the catalogue's price)."""
    efa_interfaces: int
    """EFA devices per node: what a pod must request as `vpc.amazonaws.com/efa` (0 without EFA)."""
    labels: dict[str, str]
    """Node labels, `vpc.amazonaws.com/efa.present` included: a workload's node selector."""
    taints: list[Taint]
    """Node taints: a workload's tolerations."""
    max_size: int
    """Most nodes the group scales to: the most pods a job can place on it."""
    security_group_id: pulumi.Output[str] | None
    """The EFA security group (None without EFA)."""
    placement_group_name: pulumi.Output[str] | None
    """The cluster placement group (None without EFA or with a capacity reservation)."""
    shape: NodeGroupShape
    """The shape the group was made from: what a job component's `node_group` takes."""

    def _take_shape(self, args: NodeGroupShape, instance: InstanceType, launcher: NodeLauncher) -> None:
        """The facts workloads read, derived from the shape alone (so a job component derives the same ones)."""
        self.shape = {**shape_of(args), "launcher": launcher}
        self.instance_type, self.instance, self.max_size = instance.name, instance, sizes(args)[1]
        self.efa_interfaces, self.labels, self.taints = placement_facts(args, instance)


class EfaNodeGroup(TrainingNodes):
    node_group: aws.eks.NodeGroup
    """Escape hatch: the managed node group itself."""
    node_group_name: pulumi.Output[str]
    """The node group's name."""
    role_arn: pulumi.Output[str]
    """The nodes' IAM role."""

    def __init__(self, name: str, args: EfaNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        instance = validate(args)
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.get("tags", {}))
        efa = args.get("efa", True)
        reservation = args.get("capacity_reservation_id")
        capacity = CapacityType(args.get("capacity_type", CapacityType.ON_DEMAND))
        self._take_shape(args, instance, NodeLauncher.MANAGED_NODE_GROUP)

        role = node_role(f"{name}-node-role", self, tags)
        interface_groups: list[pulumi.Input[str]] = [args["cluster_security_group_id"]]
        self.security_group_id = self.placement_group_name = None
        template: dict[str, Any] = {}
        if efa:
            self.security_group_id = efa_security_group(name, self, args["vpc_id"], tags)
            interface_groups.append(self.security_group_id)
            template["network_interfaces"] = efa_interfaces(instance.network_cards, interface_groups)
            if reservation is None:
                self.placement_group_name = cluster_placement_group(name, self, tags)
                template["placement"] = {"group_name": self.placement_group_name}
        else:
            template["vpc_security_group_ids"] = interface_groups
        if reservation is not None:
            template["capacity_reservation_specification"] = {
                "capacity_reservation_target": {"capacity_reservation_id": reservation}
            }
        # EKS takes a Capacity Block's instance type from the launch template, and refuses one on the group.
        block = capacity == CapacityType.CAPACITY_BLOCK
        if block:
            template["instance_market_options"] = {"market_type": "capacity-block"}
            template["instance_type"] = instance.name
        launch_template = secure_launch_template(
            f"{name}-template",
            self,
            tags,
            args.get("metadata_hop_limit", 1),
            args.get("root_volume_gib", 100),
            **template,
        )
        minimum, maximum, desired = sizes(args)
        self.node_group = aws.eks.NodeGroup(
            f"{name}-nodes",
            cluster_name=args["cluster_name"],
            node_role_arn=role.arn,
            subnet_ids=[args["subnet_id"]],
            instance_types=None if block else [instance.name],
            ami_type=ami_type(instance),
            release_version=args.get("release_version"),
            version=args.get("kubernetes_version"),
            capacity_type=capacity.value,
            scaling_config={"min_size": minimum, "max_size": maximum, "desired_size": desired},
            launch_template=template_reference(launch_template),
            labels=self.labels,
            taints=[
                {"key": taint["key"], "value": taint.get("value"), "effect": TaintEffect(taint["effect"]).value}
                for taint in self.taints
            ],
            update_config={"max_unavailable": 1},
            node_repair_config={"enabled": args.get("auto_repair", True)},
            tags=tags,
            # The cluster autoscaler owns the desired size once the group exists.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["scalingConfig.desiredSize"]),
        )
        # Tags on the node group do not reach its Auto Scaling group: tag the ASG itself.
        asg_name = self.node_group.resources.apply(lambda resources: resources[0].autoscaling_groups[0].name)  # type: ignore[index]
        for key, value in autoscaler_tags(args["cluster_name"], instance, efa, self.labels, self.taints).items():
            aws.autoscaling.Tag(
                f"{name}-asg-{_slug(key)}",
                autoscaling_group_name=asg_name,
                tag={"key": key, "value": value, "propagate_at_launch": False},
                opts=child,
            )
        self.node_group_name = self.node_group.node_group_name
        self.role_arn = role.arn
        self.register_outputs({"node_group_name": self.node_group_name, "role_arn": self.role_arn})


def _slug(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", key.removeprefix("k8s.io/cluster-autoscaler/").lower()).strip("-")
