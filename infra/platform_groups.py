"""The groups a platform's jobs can run on, as shapes: what job components, Kueue and the stack's checks read."""

from typing import cast

from eks_ddp.infra.aws.cluster import DEFAULT_SYSTEM_INSTANCE_TYPE, DEFAULT_SYSTEM_NODE_COUNT, GROUP_LABEL, SYSTEM_LABEL
from eks_ddp.infra.facts.allocatable import NodeLauncher
from eks_ddp.infra.node_group import NodeGroup, NodeGroupShape
from eks_ddp.infra.platform_args import AutoscalerKind, TrainingPlatformArgs


def reachable_groups(args: TrainingPlatformArgs) -> list[NodeGroupShape]:
    """Every group a job's pods may run on, with the nodes it can reach and what launches them: the system group (the
    NCCL check's launcher runs there) and every training group. A new cluster's group without an autoscaler keeps its
    desiredSize nodes (min_size = max_size = desired_size here), which bound a job and which Kueue's quota counts; an
    existing cluster's groups scale as described (min_size to max_size), by whatever autoscaler that cluster runs."""
    autoscaler = args.get("autoscaler", AutoscalerKind.CLUSTER_AUTOSCALER)
    launcher = NodeLauncher.KARPENTER if autoscaler == AutoscalerKind.KARPENTER else NodeLauncher.MANAGED_NODE_GROUP
    groups: list[NodeGroupShape] = [{**group, "launcher": launcher} for group in args.get("node_groups", [])]
    if keeps_desired_size(args):
        desired = [NodeGroup.of(group).desired_size for group in groups]
        groups = [{**group, "min_size": nodes, "max_size": nodes} for group, nodes in zip(groups, desired)]
    return [system_shape(args), *groups]


def keeps_desired_size(args: TrainingPlatformArgs) -> bool:
    """Whether the new cluster's groups stay at their desiredSize: no autoscaler here adds or removes nodes."""
    return args.get("autoscaler") == AutoscalerKind.NONE and "existing_cluster" not in args


def system_shape(args: TrainingPlatformArgs) -> NodeGroupShape:
    """The system group as a node group (a job's target: the CPU tutorial trains on its two m5.large nodes; an existing
    cluster's system nodes, described): a fixed number of managed nodes, untainted, without EFA, labelled with its
    name like any group (infra.aws.cluster SYSTEM_LABEL)."""
    count = args.get("system_node_count", DEFAULT_SYSTEM_NODE_COUNT)
    # No availability_zone: the system nodes span the VPC's zones (an existing cluster's, its own), and a job
    # component reads only the type, the size, the labels and the launcher of its group's shape.
    return cast(
        NodeGroupShape,
        {
            "name": SYSTEM_LABEL[GROUP_LABEL],
            "instance_type": args.get("system_instance_type", DEFAULT_SYSTEM_INSTANCE_TYPE),
            "efa": False,
            "min_size": count,
            "max_size": count,
            "desired_size": count,
            "launcher": NodeLauncher.MANAGED_NODE_GROUP,
        },
    )
