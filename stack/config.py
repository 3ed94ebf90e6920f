"""Stack configuration: raw `eks-ddp:*` values in, typed objects out, errors naming the key.

Pure: `__main__.py` passes what pulumi.Config read; the offline preview and the
local demo pass what they read from `Pulumi.<stack>.yaml`.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra import efa_node_group, fsx_storage, network
from infra.efa_node_group import NodeGroupShape
from infra.errors import InvalidArgument
from infra.fsx_storage import FsxOptions
from infra.network import NetworkArgs
from infra.platform import NodeGroupSpec, StorageKind, TrainingPlatformArgs
from workloads.pytorchjob import DATASETS, TrainingJob, validate_name

PROJECT = "eks-ddp"
SYSTEM_GROUP = "system"


class ConfigError(ValueError):
    """Bad stack configuration: names the key (`eks-ddp:nodeGroups[1].instanceType`), the value, what is allowed."""

    def __init__(self, key: str, value: object, allowed: str) -> None:
        super().__init__(f"{key}: {value!r} is not allowed; {allowed}")
        self.key = key


@dataclass(frozen=True)
class JobConfig:
    node_group: str
    job: TrainingJob
    prepare_data: bool
    evaluate: bool


@dataclass(frozen=True)
class StackConfig:
    region: str
    platform: TrainingPlatformArgs
    job: JobConfig | None
    image_uri: str | None
    fabric_check: bool
    fabric_check_image: str | None


_CAMEL = {"capacity_gib": "capacityGiB", "min_size/max_size": "minSize"}


def _camel(argument: str) -> str:
    if argument in _CAMEL:
        return _CAMEL[argument]
    head, *rest = argument.split("_")
    return head + "".join(part.title() for part in rest)


def _key(name: str) -> str:
    return f"{PROJECT}:{name}"


def _expect(value: Any, kind: type, key: str, allowed: str) -> Any:
    if not isinstance(value, kind):
        raise ConfigError(key, value, allowed)
    return value


def _check_keys(values: Mapping[str, Any], key: str, known: set[str]) -> None:
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}", values[unknown[0]], f"known keys are {', '.join(sorted(known))}")


def _network(raw: Any) -> NetworkArgs:
    key = _key("vpc")
    values = _expect(raw or {}, dict, key, "give a map with cidr and availabilityZones")
    _check_keys(values, key, {"cidr", "availabilityZones", "natGateways"})
    args: NetworkArgs = {}
    if "cidr" in values:
        args["cidr"] = _expect(values["cidr"], str, f"{key}.cidr", "give a CIDR such as 10.0.0.0/16")
    if "availabilityZones" in values:
        zones = _expect(values["availabilityZones"], list, f"{key}.availabilityZones", "give a list of zone names")
        args["availability_zones"] = [_expect(zone, str, f"{key}.availabilityZones", "zone names are strings") for zone in zones]
    if "natGateways" in values:
        args["nat_gateways"] = values["natGateways"]  # a str Enum: network.validate checks the value
    try:
        network.validate(args)
    except InvalidArgument as error:
        raise ConfigError(f"{key}.{_camel(error.argument)}", args.get(error.argument), str(error).split("; ", 1)[1]) from None  # type: ignore[misc]
    return args


_GROUP_KEYS = {"name", "instanceType", "availabilityZone", "efa", "minSize", "maxSize", "desiredSize", "capacityType",
               "capacityReservationId", "labels", "taints", "rootVolumeGiB", "releaseVersion"}


def _node_group(raw: Any, index: int, zones: list[str]) -> NodeGroupSpec:
    key = f"{_key('nodeGroups')}[{index}]"
    values = _expect(raw, dict, key, "each node group is a map")
    _check_keys(values, key, _GROUP_KEYS)
    name = values.get("name")
    zone = values.get("availabilityZone")
    if zone not in zones:
        raise ConfigError(f"{key}.availabilityZone", zone, f"use one of eks-ddp:vpc.availabilityZones ({', '.join(zones) or 'none named'})")
    spec: dict[str, Any] = {"name": name, "instance_type": values.get("instanceType"), "availability_zone": zone}
    for camel, snake in (("efa", "efa"), ("minSize", "min_size"), ("maxSize", "max_size"), ("desiredSize", "desired_size"),
                         ("capacityType", "capacity_type"), ("capacityReservationId", "capacity_reservation_id"), ("labels", "labels"),
                         ("rootVolumeGiB", "root_volume_gib"), ("releaseVersion", "release_version")):
        if camel in values:
            spec[snake] = values[camel]
    if "taints" in values:
        spec["taints"] = [{"key": t.get("key"), "value": t.get("value", ""), "effect": t.get("effect")} for t in _expect(values["taints"], list, f"{key}.taints", "a list")]
    shape: NodeGroupShape = {k: v for k, v in spec.items() if k != "name"}  # type: ignore[assignment]
    try:
        efa_node_group.validate_shape(shape)
    except InvalidArgument as error:
        field = error.argument.split("/")[0]
        raise ConfigError(f"{key}.{_camel(field)}", spec.get(field), str(error).split("; ", 1)[1]) from None
    if not isinstance(name, str) or not re.fullmatch(r"[a-z]([-a-z0-9]{0,28}[a-z0-9])?", name):
        raise ConfigError(f"{key}.name", name, "use a DNS label of at most 30 characters")
    return spec  # type: ignore[return-value]


def _storage(raw: Any) -> tuple[StorageKind, FsxOptions]:
    key = _key("storage")
    values = _expect(raw or {"kind": "fsx"}, dict, key, "give a map with kind")
    _check_keys(values, key, {"kind", "deploymentType", "capacityGiB", "perUnitStorageThroughput", "s3ImportPath", "s3ExportPath"})
    kind = values.get("kind", "fsx")
    if kind not in [item.value for item in StorageKind]:
        raise ConfigError(f"{key}.kind", kind, "use fsx, efs or none")
    options: dict[str, Any] = {}
    for camel, snake in (("deploymentType", "deployment_type"), ("capacityGiB", "capacity_gib"), ("perUnitStorageThroughput", "per_unit_storage_throughput"),
                         ("s3ImportPath", "s3_import_path"), ("s3ExportPath", "s3_export_path")):
        if camel in values:
            options[snake] = values[camel]
    if kind == "fsx":
        try:
            fsx_storage.validate(options)  # type: ignore[arg-type]  # keys built from the table above
        except InvalidArgument as error:
            raise ConfigError(f"{key}.{_camel(error.argument)}", options.get(error.argument), str(error).split("; ", 1)[1]) from None
    return StorageKind(kind), options  # type: ignore[return-value]


def _job(raw: Any, groups: list[NodeGroupSpec], namespace: str, image: str, claim: str | None, service_account: str | None) -> JobConfig | None:
    if raw is None:
        return None
    key = _key("job")
    values = _expect(raw, dict, key, "give a map describing the PyTorchJob")
    _check_keys(values, key, {"name", "nodeGroup", "dataset", "epochs", "batchSize", "replicas", "elasticMinReplicas", "prepareData", "evaluate"})
    name = values.get("name", "mnist-ddp")
    problem = validate_name(name) if isinstance(name, str) else "must be a string"
    if problem:
        raise ConfigError(f"{key}.name", name, problem)
    by_name = {group["name"]: group for group in groups}
    target = values.get("nodeGroup")
    if target not in by_name:
        raise ConfigError(f"{key}.nodeGroup", target, f"use one of the training node groups: {', '.join(by_name) or 'none defined'}")
    dataset = values.get("dataset", "mnist")
    if dataset not in DATASETS:
        raise ConfigError(f"{key}.dataset", dataset, f"use one of {', '.join(DATASETS)}")
    numbers = {}
    for camel, default in (("epochs", 10), ("batchSize", 128), ("replicas", 2)):
        value = values.get(camel, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{key}.{camel}", value, "use a whole number >= 1")
        numbers[camel] = value
    max_size = by_name[target].get("max_size", 2)
    if numbers["replicas"] > max_size:
        raise ConfigError(f"{key}.replicas", numbers["replicas"], f"node group {target} holds at most maxSize={max_size} pods (one per node)")
    job = TrainingJob(
        name=name, namespace=namespace, image=image, dataset=dataset, epochs=numbers["epochs"], batch_size=numbers["batchSize"],
        replicas=numbers["replicas"], elastic_min_replicas=values.get("elasticMinReplicas"), claim_name=claim, service_account=service_account,
    )
    return JobConfig(node_group=target, job=job, prepare_data=bool(values.get("prepareData", dataset in ("mnist", "cifar10"))), evaluate=bool(values.get("evaluate", True)))


KNOWN = {"clusterName", "kubernetesVersion", "vpc", "nodeGroups", "storage", "job", "image", "adminPrincipalArns", "fabricCheck",
         "fabricCheckImage", "trainingNamespace", "checkpointExpiryDays"}


def parse(values: Mapping[str, Any], region: str | None) -> StackConfig:
    """Typed stack configuration from the `eks-ddp:*` values (keys without the project prefix)."""
    unknown = sorted(set(values) - KNOWN)
    if unknown:
        raise ConfigError(_key(unknown[0]), values[unknown[0]], f"known keys are {', '.join(sorted(KNOWN))}")
    if not region:
        raise ConfigError("aws:region", region, "set the AWS region, e.g. `pulumi config set aws:region us-east-1`")
    network_args = _network(values.get("vpc"))
    zones = list(network_args.get("availability_zones", []))
    raw_groups = _expect(values.get("nodeGroups", []), list, _key("nodeGroups"), "give a list of node groups")
    platform: TrainingPlatformArgs = {"network": network_args, "tags": {"project": PROJECT}}
    groups: list[NodeGroupSpec] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_groups):
        key = f"{_key('nodeGroups')}[{index}]"
        if isinstance(raw, dict) and raw.get("name") == SYSTEM_GROUP:
            _check_keys(raw, key, {"name", "instanceType", "desiredSize"})
            platform["system_instance_type"] = raw.get("instanceType", "m7g.large")
            platform["system_node_count"] = raw.get("desiredSize", 2)
            continue
        group = _node_group(raw, index, zones)
        if group["name"] in seen:
            raise ConfigError(f"{key}.name", group["name"], "node group names must be unique")
        seen.add(group["name"])
        groups.append(group)
    platform["node_groups"] = groups
    for camel, snake in (("clusterName", "cluster_name"), ("kubernetesVersion", "kubernetes_version"), ("adminPrincipalArns", "admin_principal_arns"),
                         ("trainingNamespace", "training_namespace"), ("checkpointExpiryDays", "checkpoint_expiry_days")):
        if values.get(camel) not in (None, 0, "", []):  # the project defaults mean "not set"
            platform[snake] = values[camel]  # type: ignore[literal-required]
    kind, fsx = _storage(values.get("storage"))
    platform["storage"], platform["fsx"] = kind, fsx
    claim = None if kind == StorageKind.NONE else "shared"
    image = values.get("image") or None
    job = _job(values.get("job"), groups, platform.get("training_namespace", "training"), image or "(built by the stack)", claim, "trainer")
    return StackConfig(
        region=region, platform=platform, job=job, image_uri=image,
        fabric_check=bool(values.get("fabricCheck", True)), fabric_check_image=values.get("fabricCheckImage") or None,
    )
