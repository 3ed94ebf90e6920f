"""TrainingPlatform's checks: every child component's, and those of the children together, before any resource is
registered (the stack's config calls `validate` too, with the catalogue's facts, to answer in its own words)."""

import re
from collections.abc import Callable
from typing import cast

from eks_ddp.infra.addons import kueue
from eks_ddp.infra.addons.karpenter_nodes import validate as validate_karpenter_group
from eks_ddp.infra.addons.training_operator import OperatorKind
from eks_ddp.infra.args import check_keys
from eks_ddp.infra.aws.cluster import validate as validate_cluster
from eks_ddp.infra.aws.iam import DEFAULT_ROLE_ACCESS, role_access
from eks_ddp.infra.aws.model_bucket import validate as validate_bucket
from eks_ddp.infra.aws.network import validate as validate_network
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.existing_cluster import EKS_NAME, ExistingClusterArgs, aws_side_problem, facts_for
from eks_ddp.infra.existing_cluster import validate as validate_existing_cluster
from eks_ddp.infra.facts import instance_facts
from eks_ddp.infra.facts.catalogue import InstanceType
from eks_ddp.infra.node_group import NodeGroup, NodeGroupShape
from eks_ddp.infra.platform_args import (
    COMPONENT,
    DEFAULT_NAMESPACE,
    AutoscalerKind,
    MonitoringKind,
    StorageKind,
    TrainingPlatformArgs,
    cluster_options,
)
from eks_ddp.infra.platform_groups import reachable_groups
from eks_ddp.infra.storage.existing_fsx import ExistingFsxOptions
from eks_ddp.infra.storage.existing_fsx import validate as validate_existing_fsx
from eks_ddp.infra.storage.fsx import validate as validate_fsx

# What only a new cluster takes: an existing one has its own VPC, name, version and access entries.
NEW_CLUSTER_ONLY = ("network", "cluster_name", "kubernetes_version", "admin_principal_arns", "private_endpoint_only")
# What only a group made here takes: how its instances are bought and booted.
NEW_GROUP_ONLY = (
    "capacity_type", "capacity_reservation_id", "root_volume_gib", "metadata_hop_limit", "release_version"
)


def validate(
    name: str, args: TrainingPlatformArgs, describe: Callable[[str], InstanceType] = instance_facts.describe
) -> None:
    """Every check of every child component, so bad arguments fail before any resource is registered.

    `describe` gives an instance type's facts: EC2's in a Pulumi program, the catalogue's offline.
    """
    check_keys(COMPONENT, "", args, TrainingPlatformArgs)
    for index, group in enumerate(args.get("node_groups", [])):
        check_keys(COMPONENT, f"node_groups[{index}].", group, NodeGroupShape)
    existing = args.get("existing_cluster")
    if existing is not None:
        _validate_existing(args, existing)
        describe = facts_for(existing, describe)
    network = args.get("network", {})
    validate_network(network)
    _validate_kinds(args)
    validate_cluster(name, cluster_options(name, args))
    zones = list(network.get("availability_zones", [])) or list(network.get("existing_private_subnet_ids", {}))
    _validate_groups(args, describe, zones if existing is None else None)
    _validate_storage(args, zones)
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", args.get("training_namespace", DEFAULT_NAMESPACE)):
        raise InvalidArgument(COMPONENT, "training_namespace", args.get("training_namespace"), "use a DNS label")
    if args.get("model_bucket", True) and "checkpoint_expiry_days" in args:
        validate_bucket({"checkpoint_expiry_days": args["checkpoint_expiry_days"]})
    role_access(args.get("service_account_roles", DEFAULT_ROLE_ACCESS), COMPONENT, "service_account_roles")
    if "queueing" in args:
        provisioning = args.get("autoscaler", AutoscalerKind.CLUSTER_AUTOSCALER) == AutoscalerKind.CLUSTER_AUTOSCALER
        try:
            kueue.plan(reachable_groups(args), args["queueing"], provisioning, describe)
        except InvalidArgument as error:
            raise error.under(COMPONENT) from None


def _validate_kinds(args: TrainingPlatformArgs) -> None:
    """The choices among kinds (operator, autoscaler, monitoring) and what goes with one kind only."""
    operators = [kind.value for kind in OperatorKind]
    if args.get("training_operator", OperatorKind.V1) not in operators:
        raise InvalidArgument(
            COMPONENT, "training_operator", args.get("training_operator"), f"use one of {', '.join(operators)}"
        )
    autoscaler = args.get("autoscaler", AutoscalerKind.CLUSTER_AUTOSCALER)
    if autoscaler not in tuple(AutoscalerKind):
        raise InvalidArgument(
            COMPONENT, "autoscaler", autoscaler, f"use one of {', '.join(k.value for k in AutoscalerKind)}"
        )
    if args.get("karpenter_node_repair") and autoscaler != AutoscalerKind.KARPENTER:
        needs = f"it is Karpenter's: needs autoscaler karpenter, not {AutoscalerKind(autoscaler).value}"
        raise InvalidArgument(COMPONENT, "karpenter_node_repair", True, needs)
    monitoring = args.get("monitoring", MonitoringKind.NONE)
    if monitoring not in tuple(MonitoringKind):
        raise InvalidArgument(
            COMPONENT, "monitoring", monitoring, f"use one of {', '.join(k.value for k in MonitoringKind)}"
        )
    image = args.get("efa_exporter_image")
    if image is not None and not re.fullmatch(r"[^/:\s]+(:\d+)?/[^:\s]+:[\w.-]+", image):
        raise InvalidArgument(
            COMPONENT,
            "efa_exporter_image",
            image,
            "use REGISTRY/REPOSITORY:TAG, such as 123456789012.dkr.ecr.us-east-1.amazonaws.com/efa-node-exporter:1.0.0",
        )


def _validate_groups(args: TrainingPlatformArgs, describe: Callable[[str], InstanceType], zones: list[str] | None
                     ) -> None:
    """Each training group: a name of its own, one of the network's `zones` when the group is made here (None: an
    existing cluster's, which lives where it is), its own settings and what its launcher refuses."""
    karpenter = args.get("autoscaler", AutoscalerKind.CLUSTER_AUTOSCALER) == AutoscalerKind.KARPENTER
    names: set[str] = set()
    for index, shape in enumerate(args.get("node_groups", [])):
        where, group = f"node_groups[{index}]", NodeGroup.of(shape)
        if not re.fullmatch(r"[a-z]([-a-z0-9]{0,28}[a-z0-9])?", group.name):
            raise InvalidArgument(COMPONENT, f"{where}.name", group.name, "use a DNS label of at most 30 characters")
        if group.name in names or group.name == "system":
            raise InvalidArgument(
                COMPONENT,
                f"{where}.name",
                group.name,
                "names must be unique and not `system` (the cluster's own group)",
            )
        names.add(group.name)
        if zones is not None and not zones:
            raise InvalidArgument(
                COMPONENT, "network.availability_zones", None, "name the zones so node groups can each pick one"
            )
        if zones is not None and group.availability_zone not in zones:
            raise InvalidArgument(
                COMPONENT,
                f"{where}.availability_zone",
                group.availability_zone,
                f"use one of the network's zones: {', '.join(zones)}",
            )
        try:
            instance_facts.check_name(COMPONENT, "instance_type", group.instance_type)  # before EC2 is asked about it
            instance = describe(group.instance_type)
            group.validate(instance, zoned=zones is not None)
            if karpenter:
                validate_karpenter_group(group, instance)
        except InvalidArgument as error:
            raise error.under(COMPONENT, f"{where}.") from None


def _validate_storage(args: TrainingPlatformArgs, zones: list[str]) -> None:
    """The shared file system: a kind, zones for EFS's mount targets, a group's zone for FSx, and its own settings."""
    storage = args.get("storage", StorageKind.FSX)
    if storage not in tuple(StorageKind):
        raise InvalidArgument(COMPONENT, "storage", storage, f"use one of {[kind.value for kind in StorageKind]}")
    if storage == StorageKind.EFS and not zones:
        raise InvalidArgument(
            COMPONENT, "network.availability_zones", None, "name the zones so EFS gets a mount target in each"
        )
    if storage == StorageKind.FSX:
        if not args.get("node_groups"):
            raise InvalidArgument(
                COMPONENT, "storage", storage, "fsx lives in a node group's zone: add a node group, or use efs or none"
            )
        validate_fsx(args.get("fsx", {}))
    if storage == StorageKind.EXISTING_FSX:
        # An absent existing_fsx is checked as an empty one: validate names the first key it lacks.
        validate_existing_fsx(cast(ExistingFsxOptions, args.get("existing_fsx", {})))


def _validate_existing(args: TrainingPlatformArgs, existing: ExistingClusterArgs) -> None:
    """What an existing cluster cannot take: settings of a new cluster, node-making autoscalers, new file systems,
    and, when it is given by kubeconfig, anything made in AWS."""
    check_keys(COMPONENT, "existing_cluster.", existing, ExistingClusterArgs)
    validate_existing_cluster(existing)
    for key, value in args.items():
        if key in NEW_CLUSTER_ONLY:
            raise InvalidArgument(
                COMPONENT, key, value, "it shapes a new cluster: leave it out with {}", ["existing_cluster"]
            )
    for index, group in enumerate(args.get("node_groups", [])):
        for key, value in group.items():
            if key in NEW_GROUP_ONLY:
                raise InvalidArgument(
                    COMPONENT, f"node_groups[{index}].{key}", value, "it shapes a new node group: an existing group "
                    "is described by its instance type, labels, taints, sizes and EFA; leave it out"
                )
    autoscaler = args.get("autoscaler", AutoscalerKind.CLUSTER_AUTOSCALER)
    if autoscaler != AutoscalerKind.NONE:
        raise InvalidArgument(
            COMPONENT, "autoscaler", AutoscalerKind(autoscaler).value,
            "an existing cluster's groups keep what scales them now: use none",
        )
    storage = args.get("storage", StorageKind.FSX)
    if storage in (StorageKind.FSX, StorageKind.EFS):
        raise InvalidArgument(
            COMPONENT, "storage", StorageKind(storage).value,
            "a new file system needs the cluster's subnets: use existing-fsx or none",
        )
    problem = aws_side_problem(existing)
    if problem is None:
        return
    monitoring = args.get("monitoring", MonitoringKind.NONE)
    made_in_aws = (  # (argument, its value, whether it makes something in AWS)
        ("model_bucket", args.get("model_bucket", True), args.get("model_bucket", True)),
        ("node_health", args.get("node_health", True), args.get("node_health", True)),
        ("managed_prometheus", args.get("managed_prometheus", False), args.get("managed_prometheus", False)),
        ("monitoring", monitoring, monitoring == MonitoringKind.CLOUDWATCH),
        ("existing_fsx.security_group_id", args.get("existing_fsx", {}).get("security_group_id"),
         "security_group_id" in args.get("existing_fsx", {})),
    )
    for argument, value, made in made_in_aws:
        if made:
            raise InvalidArgument(COMPONENT, argument, value, f"it makes resources in AWS, and {problem}", [EKS_NAME])
