"""The platform's keys: the VPC or an existing cluster, the node groups, storage, add-ons, monitoring, queueing.

Read into TrainingPlatformArgs, which the platform then checks itself (infra.platform.validate): its refusals are
named by the keys that set the arguments (stack.sections.Layout). A top-level key named for a platform argument is
passed as set; those read their own way are OWN_WAY.
"""

import re
from collections.abc import Mapping
from enum import Enum
from typing import Any, cast

from eks_ddp.infra import platform
from eks_ddp.infra.addons.kueue import QueueingArgs, QueueTopology
from eks_ddp.infra.aws.efa_node_group import NodeGroupShape
from eks_ddp.infra.aws.network import NetworkArgs
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.existing_cluster import ExistingClusterArgs
from eks_ddp.infra.platform import MonitoringKind, StorageKind, TrainingPlatformArgs
from eks_ddp.infra.storage.existing_fsx import ExistingFsxOptions
from eks_ddp.infra.storage.fsx import FsxOptions
from eks_ddp.stack.keys import (
    ConfigError,
    argument_of,
    choice,
    hints,
    is_a,
    is_unset,
    key,
    stack_word,
    string_values,
    strings,
)
from eks_ddp.stack.project_config import PROJECT
from eks_ddp.stack.sections import (
    ADDONS,
    EXISTING_CLUSTER,
    NODE_GROUP,
    QUEUEING_KEYS,
    STORAGE,
    SYSTEM,
    SYSTEM_ARGUMENTS,
    TAINT,
    VPC,
    Layout,
    storage_options,
)
from eks_ddp.stack.settings import SYSTEM_GROUP, Describe, Queueing


def _node_groups(raw: list[Any], zones: list[str] | None) -> tuple[TrainingPlatformArgs, Layout, dict[str, str]]:
    """The system group's settings and the training groups; `zones` are those a group may name (None: an existing
    cluster's groups, which live where they are)."""
    platform_args: TrainingPlatformArgs = {}
    groups: list[NodeGroupShape] = []
    images: dict[str, str] = {}
    system_index, indexes = None, []
    for index, item in enumerate(raw):
        where = f"{key('nodeGroups')}[{index}]"
        if is_a(item, dict) and item.get("name") == SYSTEM_GROUP:
            system = SYSTEM.read(item, where)
            system_index = index
            for word, argument in SYSTEM_ARGUMENTS.items():
                if word in system:
                    platform_args[argument] = system[word]
            continue
        group = NODE_GROUP.read(item, where)
        if zones is not None and group.get("availability_zone") not in zones:
            raise ConfigError(
                f"{where}.availabilityZone",
                group.get("availability_zone"),
                f"use one of {key('vpc')}.availabilityZones ({', '.join(zones) or 'none named'})",
            )
        if "labels" in group:
            string_values(group["labels"], f"{where}.labels")
        if "taints" in group:
            group["taints"] = [TAINT.read(taint, f"{where}.taints[{i}]") for i, taint in enumerate(group["taints"])]
        if "image" in group:
            images[group.get("name", "")] = group.pop("image")
        groups.append(cast(NodeGroupShape, group))
        indexes.append(index)
    platform_args["node_groups"] = groups
    return platform_args, Layout(system_index, indexes), images


def _storage(raw: Any) -> tuple[StorageKind, dict[str, Any]]:
    options = STORAGE.read(raw or {}, key("storage"))
    kind = options.pop("kind", StorageKind.FSX.value)
    if kind not in [item.value for item in StorageKind]:
        raise ConfigError(f"{key('storage')}.kind", kind, f"use {', '.join(item.value for item in StorageKind)}")
    foreign = sorted(set(options) - storage_options(kind))
    if foreign:
        takes = [item.value for item in StorageKind if foreign[0] in storage_options(item.value)]
        raise ConfigError(
            f"{key('storage')}.{stack_word(foreign[0])}",
            options[foreign[0]],
            f"it applies to kind {' or '.join(takes)}, not {kind}",
        )
    return StorageKind(kind), options


def default_vpc(region: str) -> dict[str, Any]:
    """`eks-ddp:vpc` when the stack sets none: a /16 in the region's first two zones."""
    return {"cidr": "10.0.0.0/16", "availabilityZones": [f"{region}a", f"{region}b"]}


def _zones(zones: list[str], region: str, word: str) -> list[str]:
    """Each zone must be one of the region's (`us-east-1a`, or a Local Zone such as `us-east-1-bos-1a`)."""
    for zone in zones:
        if not re.fullmatch(rf"{re.escape(region)}(-[a-z]+-\d+)?[a-z]", zone):
            where = f"{key('vpc')}.{word}"
            raise ConfigError(where, zone, f"not a zone of aws:region {region}: use {region}a, {region}b, ...")
    return zones


def _queueing(top: Mapping[str, Any]) -> QueueingArgs | None:
    """Kueue's settings with `eks-ddp:queueing: kueue`; its other keys without it are refused."""
    if choice("queueing", top.get("queueing") or Queueing.NONE.value, Queueing) == Queueing.NONE:
        for word in QUEUEING_KEYS.values():
            if top.get(argument_of(word)):
                raise ConfigError(
                    key(word), top[argument_of(word)], "it sets Kueue's queues: add eks-ddp:queueing kueue"
                )
        return None
    topology = choice("queueTopology", top.get("queue_topology") or QueueTopology.PREFERRED.value, QueueTopology)
    queueing: QueueingArgs = {"topology": topology}
    if top.get("queue_quotas"):
        queueing["quotas"] = top["queue_quotas"]
    if top.get("queue_pods_ready_timeout"):
        queueing["pods_ready_timeout"] = top["queue_pods_ready_timeout"]
    return queueing


def _cluster_and_groups(top: Mapping[str, Any], region: str) -> tuple[TrainingPlatformArgs, Layout, dict[str, str]]:
    """An existing cluster and the groups it has, or a new cluster's VPC and the groups to make in its zones."""
    if top.get("existing_cluster"):  # the project default, {}: the stack makes its own cluster
        existing = EXISTING_CLUSTER.read(top["existing_cluster"], key("existingCluster"))
        platform_args, layout, group_images = _node_groups(top.get("node_groups", []), None)
        platform_args["existing_cluster"] = cast(ExistingClusterArgs, existing)
        if top.get("network"):
            platform_args["network"] = top["network"]  # refused by the platform, naming the key
        return platform_args, layout, group_images
    network = VPC.read(top.get("network") or default_vpc(region), key("vpc"))
    where = f"{key('vpc')}.availabilityZones"
    zones = _zones(strings(network.get("availability_zones", []), where), region, "availabilityZones")
    if "existing_private_subnet_ids" in network:  # an existing VPC: its zones are the subnets' (zone -> id)
        subnets = network["existing_private_subnet_ids"]
        zones = _zones(list(subnets), region, "existingPrivateSubnetIds")
        string_values(subnets, f"{key('vpc')}.existingPrivateSubnetIds")
    platform_args, layout, group_images = _node_groups(top.get("node_groups", []), zones)
    platform_args["network"] = cast(NetworkArgs, network)
    return platform_args, layout, group_images


def _addons(platform_args: TrainingPlatformArgs, top: Mapping[str, Any]) -> None:
    """Add-ons left out (false) go to the platform as they are; those given a local folder, as its sources."""
    addons = ADDONS.read(top.get("addons") or {}, key("addons"))
    sources = {name: addons.pop(name) for name in list(addons) if isinstance(addons[name], str)}
    platform_args.update(cast(TrainingPlatformArgs, addons))
    if sources:
        platform_args["addon_sources"] = sources


def _monitoring(platform_args: TrainingPlatformArgs, top: Mapping[str, Any]) -> None:
    """Prometheus by default for a stack with a job; Amazon Managed Service for Prometheus only beside it."""
    watched = MonitoringKind.PROMETHEUS.value if top.get("job") else MonitoringKind.NONE.value
    monitoring = choice("monitoring", top.get("monitoring") or watched, MonitoringKind)
    platform_args["monitoring"] = monitoring
    if top.get("managed_prometheus") and monitoring != MonitoringKind.PROMETHEUS:
        raise ConfigError(
            key("managedPrometheus"),
            True,
            f"it writes Prometheus' samples: needs eks-ddp:monitoring prometheus, not {monitoring.value}",
        )


OWN_WAY = {
    "network", "node_groups", "existing_cluster", "storage", "addons", "monitoring", "training_operator", "queueing"
}
"""The platform's arguments whose keys are read their own way; every other key that names one is passed as set."""


def _as_set(platform_args: TrainingPlatformArgs, top: Mapping[str, Any]) -> None:
    """Each top-level key named for a platform argument, as set (a choice as its member), unless unset."""
    fields = hints(TrainingPlatformArgs)
    for argument, value in top.items():
        if argument not in fields or argument in OWN_WAY or is_unset(value):
            continue
        kind = fields[argument]
        if isinstance(kind, type) and issubclass(kind, Enum):
            value = choice(stack_word(argument), value, kind)
        elif isinstance(value, list):
            value = strings(value, key(stack_word(argument)))
        platform_args[argument] = value


def read_platform(top: Mapping[str, Any], region: str, describe: Describe) -> tuple[TrainingPlatformArgs, Layout, dict]:
    """The platform's arguments, checked by the platform itself (its refusals named by their keys)."""
    platform_args, layout, group_images = _cluster_and_groups(top, region)
    platform_args["tags"] = {"project": PROJECT}
    _addons(platform_args, top)
    _as_set(platform_args, top)
    _monitoring(platform_args, top)
    queueing = _queueing(top)
    if queueing is not None:
        platform_args["queueing"] = queueing
    kind, options = _storage(top.get("storage"))
    platform_args["storage"] = kind
    if kind == StorageKind.FSX:
        platform_args["fsx"] = cast(FsxOptions, options)
    if kind == StorageKind.EXISTING_FSX:
        platform_args["existing_fsx"] = cast(ExistingFsxOptions, options)
    try:
        platform.validate(PROJECT, platform_args, describe)
    except InvalidArgument as error:
        named = error.allowed_as(lambda path: layout.path_key(path, error.component).removeprefix(f"{PROJECT}:"))
        raise ConfigError(layout.stack_key(error), error.value, named) from None
    return platform_args, layout, group_images
