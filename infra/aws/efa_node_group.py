"""EfaNodeGroup: a managed node group for distributed training, its EFA setup in plain sight.

Every EFA property that decides whether NCCL uses the fabric or silently falls back
to TCP is a plain pulumi-aws resource here, so tests can check it offline: the
placement group, the self-referencing security group, one interface per network
card in the launch template, and the autoscaler tags that let the group scale
from zero for pods that request EFA. Without `efa` it is a plain managed node group.
"""

import re
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired

import pulumi
import pulumi_aws as aws

from eks_ddp.infra.aws.iam import node_role
from eks_ddp.infra.aws.launch_template import secure_launch_template, template_reference
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import instance_facts
from eks_ddp.infra.facts.allocatable import NodeLauncher, efa_hugepages_mib
from eks_ddp.infra.facts.catalogue import InstanceType
from eks_ddp.infra.facts.efa_cards import efa_cards
from eks_ddp.infra.facts.instance_facts import ami_type

# A group's shape, its defaults and its checks are infra.node_group's. These names are imported from here too: the
# stable API lists NodeGroupShape, CapacityType, Taint and TaintEffect here (docs/api.md), and the add-ons, the
# workloads and the engine models take the labels, the effects and the placement from here.
from eks_ddp.infra.node_group import (
    COMPONENT,
    EFA_LABEL,
    EFA_RESOURCE,
    GPU_LABEL,
    KUBERNETES_EFFECT,
    CapacityType,
    NodeGroup,
    NodeGroupShape,
    Taint,
    TaintEffect,
    shape_of,
)

__all__ = [
    "EFA_LABEL",
    "EFA_RESOURCE",
    "GPU_LABEL",
    "KUBERNETES_EFFECT",
    "CapacityType",
    "EfaNodeGroup",
    "EfaNodeGroupArgs",
    "NodeGroupShape",
    "Taint",
    "TaintEffect",
    "TrainingNodes",
    "autoscaler_tags",
    "cluster_placement_group",
    "efa_fabric",
    "efa_interfaces",
    "efa_security_group",
    "node_security_groups",
    "shape_of",
    "validate",
]


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
        for card in efa_cards(network_cards)
    ]


def autoscaler_tags(
    cluster_name: str, instance: InstanceType, efa: bool, labels: Mapping[str, str], taints: Sequence[Taint]
) -> dict[str, str]:
    """Discovery tags plus the node template the autoscaler needs to scale up from zero nodes."""
    prefix = "k8s.io/cluster-autoscaler/node-template"
    tags = {"k8s.io/cluster-autoscaler/enabled": "true", f"k8s.io/cluster-autoscaler/{cluster_name}": "owned"}
    if efa:
        tags[f"{prefix}/resources/{EFA_RESOURCE}"] = str(len(efa_cards(instance.network_cards)))
        tags[f"{prefix}/resources/hugepages-2Mi"] = f"{efa_hugepages_mib(instance)}Mi"  # the EFA software's pages
    if instance.gpus:
        tags[f"{prefix}/resources/nvidia.com/gpu"] = str(instance.gpus)
    if instance.neuron_devices:
        tags[f"{prefix}/resources/aws.amazon.com/neuron"] = str(instance.neuron_devices)
    tags.update({f"{prefix}/label/{key}": value for key, value in labels.items()})
    for taint in taints:
        effect = KUBERNETES_EFFECT[TaintEffect(taint["effect"])]
        tags[f"{prefix}/taint/{taint['key']}"] = f"{taint.get('value', '')}:{effect}"
    return tags


def validate(shape: NodeGroupShape, cluster_name: object) -> tuple[NodeGroup, InstanceType]:
    """Check everything that can be checked before creating a group in the cluster `cluster_name`; returns the group
    resolved and EC2's facts of its type."""
    if not cluster_name:
        raise InvalidArgument(COMPONENT, "cluster_name", cluster_name, "give the EKS cluster's name")
    group = NodeGroup.of(shape)
    instance_facts.check_name(COMPONENT, "instance_type", group.instance_type)
    instance = instance_facts.describe(group.instance_type)
    group.validate(instance)
    return group, instance


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


def efa_fabric(
    name: str, parent: pulumi.Resource, group: NodeGroup, vpc_id: pulumi.Input[str], tags: Mapping[str, str]
) -> tuple[pulumi.Output[str] | None, pulumi.Output[str] | None]:
    """The group's EFA security group and cluster placement group, whichever launcher makes its nodes: neither without
    EFA, and no placement group with a capacity reservation (its capacity is where it is)."""
    if not group.efa:
        return None, None
    security_group = efa_security_group(name, parent, vpc_id, tags)
    placement = cluster_placement_group(name, parent, tags) if group.capacity_reservation_id is None else None
    return security_group, placement


def node_security_groups(
    cluster_security_group_id: pulumi.Input[str], efa_security_group_id: pulumi.Output[str] | None
) -> list[pulumi.Input[str]]:
    """The security groups on every node: the EKS cluster security group, and EFA's in a group with EFA."""
    return [cluster_security_group_id, *([efa_security_group_id] if efa_security_group_id is not None else [])]


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

    def _take_shape(
        self, shape: NodeGroupShape, group: NodeGroup, instance: InstanceType, launcher: NodeLauncher
    ) -> None:
        """The facts workloads read, derived from the shape alone (so a job component derives the same ones)."""
        self.shape = {**shape_of(shape), "launcher": launcher}
        self.instance_type, self.instance, self.max_size = instance.name, instance, group.max_size
        self.efa_interfaces, self.labels, self.taints = group.placement(instance)


class EfaNodeGroup(TrainingNodes):
    """A training group as an EKS managed node group: with `efa` (the default) the EFA setup above, without it a plain
    managed node group (the name predates those; its type token and messages keep it)."""

    node_group: aws.eks.NodeGroup
    """Escape hatch: the managed node group itself."""
    node_group_name: pulumi.Output[str]
    """The node group's name."""
    role_arn: pulumi.Output[str]
    """The nodes' IAM role."""

    def __init__(self, name: str, args: EfaNodeGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        group, instance = validate(args, args.get("cluster_name"))
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        tags = dict(args.get("tags", {}))
        self._take_shape(args, group, instance, NodeLauncher.MANAGED_NODE_GROUP)
        role = node_role(f"{name}-node-role", self, tags)
        self.security_group_id, self.placement_group_name = efa_fabric(name, self, group, args["vpc_id"], tags)
        groups = node_security_groups(args["cluster_security_group_id"], self.security_group_id)
        template = _launch_template(name, self, group, instance, groups, self.placement_group_name, tags)
        self.node_group = self._managed_node_group(name, args, group, instance, role.arn, template)
        scaling_tags = autoscaler_tags(args["cluster_name"], instance, group.efa, self.labels, self.taints)
        _tag_auto_scaling_group(name, self, self.node_group, scaling_tags)
        self.node_group_name = self.node_group.node_group_name
        self.role_arn = role.arn
        self.register_outputs({"node_group_name": self.node_group_name, "role_arn": self.role_arn})

    def _managed_node_group(
        self,
        name: str,
        args: EfaNodeGroupArgs,
        group: NodeGroup,
        instance: InstanceType,
        role_arn: pulumi.Output[str],
        template: aws.ec2.LaunchTemplate,
    ) -> aws.eks.NodeGroup:
        """The managed node group in its one subnet, labelled and tainted for its jobs' pods."""
        block = CapacityType(group.capacity_type) == CapacityType.CAPACITY_BLOCK
        return aws.eks.NodeGroup(
            f"{name}-nodes",
            cluster_name=args["cluster_name"],
            node_role_arn=role_arn,
            subnet_ids=[args["subnet_id"]],
            instance_types=None if block else [instance.name],  # a Capacity Block's type is the template's
            ami_type=ami_type(instance),
            release_version=group.release_version,
            version=args.get("kubernetes_version"),
            capacity_type=CapacityType(group.capacity_type).value,
            scaling_config={"min_size": group.min_size, "max_size": group.max_size, "desired_size": group.desired_size},
            launch_template=template_reference(template),
            labels=self.labels,
            taints=[
                {"key": taint["key"], "value": taint.get("value"), "effect": TaintEffect(taint["effect"]).value}
                for taint in self.taints
            ],
            update_config={"max_unavailable": 1},
            node_repair_config={"enabled": args.get("auto_repair", True)},
            tags=dict(args.get("tags", {})),
            # The cluster autoscaler owns the desired size once the group exists.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["scalingConfig.desiredSize"]),
        )


def _launch_template(
    name: str,
    parent: pulumi.Resource,
    group: NodeGroup,
    instance: InstanceType,
    security_group_ids: Sequence[pulumi.Input[str]],
    placement_group_name: pulumi.Output[str] | None,
    tags: Mapping[str, str],
) -> aws.ec2.LaunchTemplate:
    """The nodes' launch template: with EFA, an interface on every card in the security groups and the placement group;
    the capacity reservation or Capacity Block they launch into."""
    settings: dict[str, Any] = {}
    if group.efa:
        settings["network_interfaces"] = efa_interfaces(instance.network_cards, security_group_ids)
    else:
        settings["vpc_security_group_ids"] = list(security_group_ids)
    if placement_group_name is not None:
        settings["placement"] = {"group_name": placement_group_name}
    if group.capacity_reservation_id is not None:
        settings["capacity_reservation_specification"] = {
            "capacity_reservation_target": {"capacity_reservation_id": group.capacity_reservation_id}
        }
    # EKS takes a Capacity Block's instance type from the launch template, and refuses one on the group.
    if CapacityType(group.capacity_type) == CapacityType.CAPACITY_BLOCK:
        settings["instance_market_options"] = {"market_type": "capacity-block"}
        settings["instance_type"] = instance.name
    hops, volume = group.metadata_hop_limit, group.root_volume_gib
    return secure_launch_template(f"{name}-template", parent, tags, hops, volume, **settings)


def _tag_auto_scaling_group(
    name: str, parent: pulumi.Resource, node_group: aws.eks.NodeGroup, tags: Mapping[str, str]
) -> list[aws.autoscaling.Tag]:
    """Tags on the node group do not reach its Auto Scaling group: tag the ASG itself."""
    asg_name = node_group.resources.apply(_auto_scaling_group_name)
    return [
        aws.autoscaling.Tag(
            f"{name}-asg-{_slug(key)}",
            autoscaling_group_name=asg_name,
            tag={"key": key, "value": value, "propagate_at_launch": False},
            opts=pulumi.ResourceOptions(parent=parent),
        )
        for key, value in tags.items()
    ]


def _auto_scaling_group_name(resources: Sequence[aws.eks.outputs.NodeGroupResource]) -> str:
    groups = resources[0].autoscaling_groups
    # pulumi-aws types every output as optional; EKS makes one named Auto Scaling group for a managed node group.
    assert groups and groups[0].name, "EKS made the managed node group's Auto Scaling group"
    return groups[0].name


def _slug(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", key.removeprefix("k8s.io/cluster-autoscaler/").lower()).strip("-")
