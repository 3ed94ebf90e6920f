"""Stack configuration: raw `eks-ddp:*` values in, typed objects out, errors naming the key.

Pure: `__main__.py` passes what pulumi.Config read; the offline preview, the local demo
and the rehearsal pass what they read from `Pulumi.<stack>.yaml`. Every key is checked
here, strictly typed (a string is not a boolean), and then by the components' own
validation, before any resource is registered; errors name the stack key
(`eks-ddp:nodeGroups[1].instanceType`), the value and what is allowed.
"""

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, TypeVar

import pulumi_aws as aws

from eks_ddp.infra import platform
from eks_ddp.infra.addons.kueue import QueueingArgs, QueueTopology
from eks_ddp.infra.addons.training_operator import OperatorKind
from eks_ddp.infra.aws.cluster import DEFAULT_SYSTEM_INSTANCE_TYPE
from eks_ddp.infra.aws.efa_node_group import NodeGroupShape
from eks_ddp.infra.aws.iam import RoleAccess
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.existing_cluster import aws_side_problem, facts_for
from eks_ddp.infra.facts import instance_facts
from eks_ddp.infra.facts.catalogue import Architecture, InstanceType
from eks_ddp.infra.platform import AutoscalerKind, MonitoringKind, StorageKind, TrainingPlatformArgs, system_shape
from eks_ddp.stack.project_config import PROJECT, closest
from eks_ddp.workloads.batch_jobs import OnFailure
from eks_ddp.workloads.target import too_small
from eks_ddp.workloads.training_pod import (
    DATASETS,
    DOWNLOADABLE_DATASETS,
    TrainingJob,
    TrainingJobSpec,
    UserCodeSpec,
    resolve,
    user_code,
    validate_name,
)

SYSTEM_GROUP = "system"


class ConfigError(ValueError):
    """Bad stack configuration: names the key (`eks-ddp:nodeGroups[1].instanceType`), the value, what is allowed."""

    def __init__(self, key: str, value: object, allowed: str) -> None:
        shown = value.value if isinstance(value, Enum) else value  # a component's choice, as the stack file says it
        super().__init__(f"{key}: {shown!r} is not allowed; {allowed}")
        self.key = key


@dataclass(frozen=True)
class JobConfig:
    node_group: str
    spec: TrainingJobSpec
    """What the job components take (image and bucket added by the program)."""
    prepare_data: bool
    evaluate: bool

    @property
    def job(self) -> TrainingJob:
        """The job with its defaults: what the local run and the checks read."""
        return resolve(self.spec)


Kind = TypeVar("Kind", bound=Enum)


class Queueing(str, Enum):
    """`eks-ddp:queueing`: jobs start when created (none), or wait in Kueue's queues until all their pods fit."""

    NONE = "none"
    KUEUE = "kueue"


class FabricCheck(str, Enum):
    """`eks-ddp:fabricCheck`: the EFA and NCCL checks gate training (workloads.batch_jobs.OnFailure), only report
    their verdict, or do not run."""

    GATE = OnFailure.GATE.value
    REPORT = OnFailure.REPORT.value
    OFF = "off"


@dataclass(frozen=True)
class StackConfig:
    region: str
    platform: TrainingPlatformArgs
    job: JobConfig | None
    image_uri: str | None
    """The image every group's jobs run instead of the stack's builds (`eks-ddp:image`)."""
    group_images: dict[str, str]
    """Per training group, the image its jobs run instead (`eks-ddp:nodeGroups[i].image`)."""
    fabric_check: FabricCheck
    """Whether the fabric checks run, and what a failed one does (`eks-ddp:fabricCheck`)."""
    fabric_check_image: str | None
    nccl_check: bool = True
    """Run nccl-tests between two nodes of the checked GPU group (`eks-ddp:ncclCheck`)."""
    nccl_check_image: str | None = None
    operator: OperatorKind = OperatorKind.V1
    """What runs the job (`eks-ddp:trainingOperator`)."""

    def job_shape(self, training_groups: Mapping[str, NodeGroupShape]) -> NodeGroupShape:
        """The shape of the job's group: a training group's as the platform built it, or the system group's."""
        assert self.job is not None
        name = self.job.node_group
        return training_groups[name] if name in training_groups else system_shape(self.platform)

    def checked_group(self, gpu: bool, describe: "Describe" = instance_facts.offline) -> str | None:
        """The group a fabric check proves: the job's own when it qualifies (EFA, room for two nodes, GPUs for the
        NCCL check), else the first that does; None when no group does or the checks are off."""
        if self.fabric_check == FabricCheck.OFF or (gpu and not self.nccl_check):
            return None
        groups = [
            group.get("name", "")
            for group in self.platform.get("node_groups", [])
            if group.get("efa", True)
            and group.get("max_size", 2) >= 2
            and (not gpu or describe(group["instance_type"]).is_gpu)
        ]
        trained = self.job.node_group if self.job else None
        return trained if trained in groups else next(iter(groups), None)


# Each section's keys: stack key -> (argument name, type). bool is not an int here.
TOP_LEVEL = {
    "clusterName": ("cluster_name", str),
    "kubernetesVersion": ("kubernetes_version", str),
    "adminPrincipalArns": ("admin_principal_arns", list),
    "trainingNamespace": ("training_namespace", str),
    "checkpointExpiryDays": ("checkpoint_expiry_days", int),
    "serviceAccountRoles": ("service_account_roles", str),
    "existingCluster": ("existing_cluster", dict),
    "addons": ("addons", dict),
    "modelBucket": ("model_bucket", bool),
    "vpc": ("vpc", dict),
    "nodeGroups": ("node_groups", list),
    "storage": ("storage", dict),
    "job": ("job", dict),
    "trainingOperator": ("training_operator", str),
    "autoscaler": ("autoscaler", str),
    "monitoring": ("monitoring", str),
    "efaExporterImage": ("efa_exporter_image", str),
    "nodeHealth": ("node_health", bool),
    "karpenterNodeRepair": ("karpenter_node_repair", bool),
    "managedPrometheus": ("managed_prometheus", bool),
    "image": ("image", str),
    "fabricCheck": ("fabric_check", str),
    "fabricCheckImage": ("fabric_check_image", str),
    "ncclCheck": ("nccl_check", bool),
    "ncclCheckImage": ("nccl_check_image", str),
    "queueing": ("queueing", str),
    "queueQuotas": ("queue_quotas", dict),
    "queueTopology": ("queue_topology", str),
    "queuePodsReadyTimeout": ("queue_pods_ready_timeout", str),
}
VPC = {
    "cidr": ("cidr", str),
    "availabilityZones": ("availability_zones", list),
    "natGateways": ("nat_gateways", str),
    "existingVpcId": ("existing_vpc_id", str),
    "existingPrivateSubnetIds": ("existing_private_subnet_ids", dict),
    "existingPublicSubnetIds": ("existing_public_subnet_ids", list),
}
EXISTING_CLUSTER = {
    "kubeconfig": ("kubeconfig", str),
    "context": ("context", str),
    "eksClusterName": ("eks_cluster_name", str),
}
# Add-ons a stack may leave out (false), and those it may install from a local folder (a path).
ADDONS = {
    "efaDevicePlugin": ("efa_device_plugin", bool),
    "nvidiaDevicePlugin": ("nvidia_device_plugin", bool),
    "neuronDevicePlugin": ("neuron_device_plugin", bool),
    "metricsServer": ("metrics_server", bool),
    "fsxCsiDriver": ("fsx_csi_driver", bool),
    "trainingOperator": ("training_operator", str),
    "kubeflowTrainer": ("kubeflow_trainer", str),
    "mpiOperator": ("mpi_operator", str),
    "kueue": ("kueue", str),
}
SYSTEM = {
    "name": ("name", str),
    "instanceType": ("system_instance_type", str),
    "desiredSize": ("system_node_count", int),
}
NODE_GROUP = {
    "name": ("name", str),
    "instanceType": ("instance_type", str),
    "availabilityZone": ("availability_zone", str),
    "efa": ("efa", bool),
    "minSize": ("min_size", int),
    "maxSize": ("max_size", int),
    "desiredSize": ("desired_size", int),
    "capacityType": ("capacity_type", str),
    "capacityReservationId": ("capacity_reservation_id", str),
    "labels": ("labels", dict),
    "taints": ("taints", list),
    "rootVolumeGiB": ("root_volume_gib", int),
    "releaseVersion": ("release_version", str),
    "image": ("image", str),
}
TAINT = {"key": ("key", str), "value": ("value", str), "effect": ("effect", str)}
STORAGE = {
    "kind": ("kind", str),
    "deploymentType": ("deployment_type", str),
    "capacityGiB": ("capacity_gib", int),
    "perUnitStorageThroughput": ("per_unit_storage_throughput", int),
    "s3ImportPath": ("s3_import_path", str),
    "s3ExportPath": ("s3_export_path", str),
    "fileSystemId": ("file_system_id", str),
    "dnsName": ("dns_name", str),
    "mountName": ("mount_name", str),
    "securityGroupId": ("security_group_id", str),
}
# The storage keys each kind takes (besides `kind`).
STORAGE_KEYS = {
    "fsx": {"deployment_type", "capacity_gib", "per_unit_storage_throughput", "s3_import_path", "s3_export_path"},
    "existing-fsx": {"file_system_id", "dns_name", "mount_name", "security_group_id", "capacity_gib"},
    "efs": set(),
    "none": set(),
}
JOB = {
    "name": ("name", str),
    "nodeGroup": ("node_group", str),
    "dataset": ("dataset", str),
    "epochs": ("epochs", int),
    "batchSize": ("batch_size", int),
    "replicas": ("replicas", int),
    "elasticMinReplicas": ("elastic_min_replicas", int),
    "prepareData": ("prepare_data", bool),
    "evaluate": ("evaluate", bool),
    "survivesNodeLosses": ("node_losses", int),
    "script": ("script", str),
    "args": ("args", list),
    "env": ("env", dict),
}
TABLES = (TOP_LEVEL, EXISTING_CLUSTER, ADDONS, VPC, SYSTEM, NODE_GROUP, STORAGE, JOB)
# The job's image when the stack builds the bundled trainer's (the program puts the built image in its place).
BUILT_IMAGE = "(built by the stack)"
# Keys that existed once, and why they went.
RETIRED = {
    "hugepagesMiB": "removed: a training pod asking for huge pages never gets a Karpenter node (Karpenter cannot "
    "know them before launch); the NCCL check asks for the EFA software's pages where the autoscaler knows them"
}
TYPE_WORDS = {str: "a string", int: "a whole number", bool: "true or false (unquoted)", list: "a list", dict: "a map"}


def _key(name: str) -> str:
    return f"{PROJECT}:{name}"


def _is(value: Any, kind: type) -> bool:
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


def _fields(raw: Any, key: str, table: Mapping[str, tuple[str, type]]) -> dict[str, Any]:
    """A section's values by argument name: only known keys, each of its declared type."""
    if not _is(raw, dict):
        raise ConfigError(key, raw, "give a map")
    fields = {}
    for name, value in raw.items():
        where = f"{key}.{name}" if key != PROJECT else _key(name)
        if name in RETIRED:
            raise ConfigError(where, value, RETIRED[name])
        if name not in table:
            raise ConfigError(where, value, f"known keys are {', '.join(sorted(table))}{closest(name, table)}")
        argument, kind = table[name]
        if value is not None and not _is(value, kind):
            raise ConfigError(where, value, f"give {TYPE_WORDS[kind]}")
        if value is not None:
            fields[argument] = value
    return fields


def _strings(values: list[Any], key: str) -> list[str]:
    for index, value in enumerate(values):
        if not _is(value, str):
            raise ConfigError(f"{key}[{index}]", value, "give a string")
    return values


def _string_values(values: Mapping[str, Any], key: str) -> None:
    """A map's values must be strings (labels, environment variables, subnet ids): the bad one named by its name."""
    for name, value in values.items():
        if not _is(value, str):
            raise ConfigError(f"{key}.{name}", value, "give a string")


@dataclass(frozen=True)
class _Layout:
    """Where each argument came from in the stack file, to name the key in component errors."""

    system_index: int | None
    group_indexes: list[int]

    def system_key(self, argument: str) -> str:
        """The system group's key for `argument`: at its index, or without one when the stack leaves the group out."""
        where = f"{_key('nodeGroups')}[{self.system_index}]" if self.system_index is not None else _key("nodeGroups")
        return f"{where}.{_camel(SYSTEM, argument)}"

    def stack_key(self, error: InvalidArgument) -> str:
        argument = error.argument
        group = re.fullmatch(r"node_groups\[(\d+)\]\.(\w+)", argument)
        if group:
            return (
                f"{_key('nodeGroups')}[{self.group_indexes[int(group.group(1))]}].{_camel(NODE_GROUP, group.group(2))}"
            )
        if argument in ("system_instance_type", "system_node_count"):
            return self.system_key(argument)
        if argument.startswith("existing_cluster"):
            field = argument.removeprefix("existing_cluster").removeprefix(".")
            return f"{_key('existingCluster')}{'.' if field else ''}{_camel(EXISTING_CLUSTER, field)}"
        if argument == "network":
            return _key("vpc")
        if error.component == "Network":
            return f"{_key('vpc')}.{_camel(VPC, argument)}"
        if argument.startswith("existing_fsx."):
            return f"{_key('storage')}.{_camel(STORAGE, argument.removeprefix('existing_fsx.'))}"
        if error.component in ("FsxLustreStorage", "ExistingFsxVolume"):
            return f"{_key('storage')}.{_camel(STORAGE, argument)}"
        if argument == "storage":
            return f"{_key('storage')}.kind"
        if argument.startswith("queueing."):
            field = argument.removeprefix("queueing.")
            fields = {"topology": _key("queueTopology"), "pods_ready_timeout": _key("queuePodsReadyTimeout")}
            return fields.get(field) or f"{_key('queueQuotas')}{field.removeprefix('quotas')}"
        return _key(_camel(TOP_LEVEL, argument))


def _in_stack_words(text: str) -> str:
    """A component's message with its arguments' Python names (`min_size`) in the stack file's words (`minSize`)."""
    words = {snake: camel for table in TABLES for camel, (snake, _) in table.items() if "_" in snake}
    return re.sub(r"\b[a-z]+(?:_[a-z]+)+\b", lambda match: words.get(match.group(0), match.group(0)), text)


def _camel(table: Mapping[str, tuple[str, type]], argument: str) -> str:
    return next((name for name, (snake, _) in table.items() if snake == argument), argument)


def _node_groups(raw: list[Any], zones: list[str] | None) -> tuple[TrainingPlatformArgs, _Layout, dict[str, str]]:
    """The system group's settings and the training groups; `zones` are those a group may name (None: an existing
    cluster's groups, which live where they are)."""
    platform_args: TrainingPlatformArgs = {}
    groups: list[NodeGroupShape] = []
    images: dict[str, str] = {}
    system_index, indexes = None, []
    for index, item in enumerate(raw):
        key = f"{_key('nodeGroups')}[{index}]"
        if _is(item, dict) and item.get("name") == SYSTEM_GROUP:
            system = _fields(item, key, SYSTEM)
            system_index = index
            platform_args.update({k: v for k, v in system.items() if k != "name"})  # type: ignore[typeddict-item]
            continue
        group = _fields(item, key, NODE_GROUP)
        if zones is not None and group.get("availability_zone") not in zones:
            raise ConfigError(
                f"{key}.availabilityZone",
                group.get("availability_zone"),
                f"use one of {_key('vpc')}.availabilityZones ({', '.join(zones) or 'none named'})",
            )
        if "labels" in group:
            _string_values(group["labels"], f"{key}.labels")
        if "taints" in group:
            group["taints"] = [_fields(taint, f"{key}.taints[{i}]", TAINT) for i, taint in enumerate(group["taints"])]
        if "image" in group:
            images[group.get("name", "")] = group.pop("image")
        groups.append(group)  # type: ignore[arg-type]
        indexes.append(index)
    platform_args["node_groups"] = groups
    return platform_args, _Layout(system_index, indexes), images


def _storage(raw: Any) -> tuple[StorageKind, dict[str, Any]]:
    options = _fields(raw or {}, _key("storage"), STORAGE)
    kind = options.pop("kind", StorageKind.FSX.value)
    if kind not in [item.value for item in StorageKind]:
        raise ConfigError(f"{_key('storage')}.kind", kind, f"use {', '.join(item.value for item in StorageKind)}")
    foreign = sorted(set(options) - STORAGE_KEYS[kind])
    if foreign:
        takes = [item for item, keys in STORAGE_KEYS.items() if foreign[0] in keys]
        raise ConfigError(
            f"{_key('storage')}.{_camel(STORAGE, foreign[0])}",
            options[foreign[0]],
            f"it applies to kind {' or '.join(takes)}, not {kind}",
        )
    return StorageKind(kind), options


Describe = Callable[[str], InstanceType]


# The regions the AWS provider `pulumi up` runs knows (pulumi-aws `Region`, which its region validation follows).
REGIONS = [region.value for region in aws.Region]


def _region(region: str | None) -> str:
    """`aws:region` must be a region the AWS provider knows: a typo would otherwise preview and rehearse clean."""
    if not region:
        raise ConfigError("aws:region", region, "set the AWS region, e.g. `pulumi config set aws:region us-east-1`")
    if region not in REGIONS:
        near = difflib.get_close_matches(region, REGIONS, n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(near)}?" if near else f"use one of {', '.join(REGIONS)}"
        raise ConfigError("aws:region", region, f"no AWS region of that name; {hint}")
    return region


def default_vpc(region: str) -> dict[str, Any]:
    """`eks-ddp:vpc` when the stack sets none: a /16 in the region's first two zones."""
    return {"cidr": "10.0.0.0/16", "availabilityZones": [f"{region}a", f"{region}b"]}


def _zones(zones: list[str], region: str, key: str) -> list[str]:
    """Each zone must be one of the region's (`us-east-1a`, or a Local Zone such as `us-east-1-bos-1a`)."""
    for zone in zones:
        if not re.fullmatch(rf"{re.escape(region)}(-[a-z]+-\d+)?[a-z]", zone):
            where = f"{_key('vpc')}.{key}"
            raise ConfigError(where, zone, f"not a zone of aws:region {region}: use {region}a, {region}b, ...")
    return zones


def _queueing(top: Mapping[str, Any]) -> QueueingArgs | None:
    """Kueue's settings with `eks-ddp:queueing: kueue`; its other keys without it are refused."""
    if _choice("queueing", top.get("queueing") or Queueing.NONE.value, Queueing) == Queueing.NONE:
        for key, argument in (("queueQuotas", "queue_quotas"), ("queueTopology", "queue_topology"),
                              ("queuePodsReadyTimeout", "queue_pods_ready_timeout")):
            if top.get(argument):
                raise ConfigError(_key(key), top[argument], "it sets Kueue's queues: add eks-ddp:queueing kueue")
        return None
    topology = _choice("queueTopology", top.get("queue_topology") or QueueTopology.PREFERRED.value, QueueTopology)
    queueing: QueueingArgs = {"topology": topology}
    if top.get("queue_quotas"):
        queueing["quotas"] = top["queue_quotas"]
    if top.get("queue_pods_ready_timeout"):
        queueing["pods_ready_timeout"] = top["queue_pods_ready_timeout"]
    return queueing


def _choice(key: str, value: str, kind: type[Kind]) -> Kind:
    """`value` as one of `kind`'s members, or an error naming the stack key and the members."""
    allowed = [member.value for member in kind]
    if value not in allowed:
        raise ConfigError(_key(key), value, f"use one of {', '.join(allowed)}")
    return kind(value)


def _job(
    raw: Any, groups: Sequence[NodeGroupShape], fixed: bool, namespace: str, image: str, claim: str | None,
    describe: Describe,
) -> JobConfig | None:
    """The job's settings, checked against the groups as the nodes they can reach (`fixed`: at their desiredSize)."""
    if not raw:  # the project default, {}: no job
        return None
    key = _key("job")
    fields = _fields(raw, key, JOB)
    name = fields.get("name", "mnist-ddp")
    problem = validate_name(name)
    if problem:
        raise ConfigError(f"{key}.name", name, problem)
    by_name = {group.get("name", ""): group for group in groups}
    target = fields.get("node_group")
    if target not in by_name:
        raise ConfigError(f"{key}.nodeGroup", target, f"use one of the node groups: {', '.join(by_name)}")
    dataset = fields.get("dataset", "mnist")
    if dataset not in DATASETS:
        raise ConfigError(f"{key}.dataset", dataset, f"use one of {', '.join(DATASETS)}")
    numbers = {
        argument: fields.get(argument, default)
        for argument, default in (("epochs", 10), ("batch_size", 128), ("replicas", 2))
    }
    for argument, value in numbers.items():
        if value < 1:
            raise ConfigError(f"{key}.{_camel(JOB, argument)}", value, "use a whole number >= 1")
    small = too_small(describe(by_name[target]["instance_type"]))
    if small:
        raise ConfigError(f"{key}.nodeGroup", target, small)
    max_size = by_name[target].get("max_size", 2)
    if numbers["replicas"] > max_size:
        raise ConfigError(
            f"{key}.replicas",
            numbers["replicas"],
            f"node group {target} keeps its desiredSize={max_size} nodes, one pod each (eks-ddp:autoscaler none "
            "adds none)" if fixed else f"node group {target} holds at most maxSize={max_size} pods (one per node)",
        )
    losses = fields.get("node_losses", 1)
    if not 0 <= losses <= 10:
        raise ConfigError(f"{key}.survivesNodeLosses", losses, "use 0 to 10 node losses")
    minimum = fields.get("elastic_min_replicas")
    if minimum is not None and not 1 <= minimum <= numbers["replicas"]:
        raise ConfigError(f"{key}.elasticMinReplicas", minimum, f"use 1 to replicas ({numbers['replicas']})")
    if minimum is not None:
        # The trainer keeps the full-sized job's global batch on fewer pods (trainer/sampling.py): every pod
        # count the job may run on must share it evenly, or a resize would be refused at run time.
        batch, replicas = numbers["batch_size"], numbers["replicas"]
        uneven = [pods for pods in range(minimum, replicas) if batch * replicas % pods]
        if uneven:
            raise ConfigError(
                f"{key}.elasticMinReplicas",
                minimum,
                f"{uneven[-1]} pods cannot share the job's global batch (batchSize {batch} x {replicas} replicas) "
                f"evenly; use elasticMinReplicas {uneven[-1] + 1} or more, "
                f"or a batchSize that {uneven[-1]} pods can share",
            )
    prepare = fields.get("prepare_data", dataset in DOWNLOADABLE_DATASETS and claim is not None)
    if prepare and claim is None:
        raise ConfigError(
            f"{key}.prepareData",
            prepare,
            "it fills the shared volume, and eks-ddp:storage is none: "
            "each pod fetches the data into its scratch space itself",
        )
    if prepare and dataset not in DOWNLOADABLE_DATASETS:
        raise ConfigError(
            f"{key}.prepareData", prepare, f"only {', '.join(DOWNLOADABLE_DATASETS)} are downloaded; {dataset} is not"
        )
    code = _user_code(fields, key, image)
    accelerator = describe(by_name[target]["instance_type"])
    if accelerator.neuron_devices and code is None:
        raise ConfigError(
            f"{key}.script",
            None,
            f"node group {target} has {accelerator.neuron_devices} Neuron devices ({accelerator.name}), which the "
            "bundled trainer does not run on: set job.script to your Neuron training code, in an image with the "
            "Neuron SDK (eks-ddp:image)",
        )
    if code is not None:
        for step in ("prepare_data", "evaluate"):
            if fields.get(step):
                raise ConfigError(
                    f"{key}.{_camel(JOB, step)}",
                    True,
                    "it runs the bundled trainer: a job with its "
                    "own script prepares and evaluates in that script; leave it unset",
                )
        prepare = False
    job: TrainingJobSpec = {
        "name": name,
        "namespace": namespace,
        "image": image,
        "dataset": dataset,
        "epochs": numbers["epochs"],
        "batch_size": numbers["batch_size"],
        "replicas": numbers["replicas"],
        "node_losses": losses,
        "claim_name": claim,
        "service_account": "trainer",
    }
    if minimum is not None:
        job["elastic_min_replicas"] = minimum
    if code is not None:
        job["code"] = code
    evaluate = fields.get("evaluate", code is None)
    return JobConfig(node_group=target, spec=job, prepare_data=prepare, evaluate=evaluate)


def _side_steps_fit_system_nodes(
    platform_args: TrainingPlatformArgs, job: JobConfig, describe: Describe, layout: _Layout
) -> None:
    """Data preparation and evaluation run on the system nodes in the job's image (workloads.batch_jobs): the
    system type must share the image's architecture, or their pods are never placed."""
    system_type = platform_args.get("system_instance_type", DEFAULT_SYSTEM_INSTANCE_TYPE)
    groups = [*platform_args.get("node_groups", []), system_shape(platform_args)]
    group = next(g for g in groups if g.get("name") == job.node_group)
    wanted = describe(group["instance_type"]).architecture
    if describe(system_type).architecture != wanted:
        key = layout.system_key("system_instance_type")
        example = "m5.large" if wanted == Architecture.X86_64 else "m7g.large"
        raise ConfigError(
            key,
            system_type,
            f"the job's data preparation and evaluation run on the system nodes in its {wanted.value} image: use an "
            f"{wanted.value} system type such as {example}, or set job.prepareData and job.evaluate to false",
        )


def _user_code(fields: Mapping[str, Any], key: str, image: str) -> UserCodeSpec | None:
    """`job.script` (with `job.args` and `job.env`): the user's own code, which needs the user's own image."""
    if "script" not in fields:
        for other in ("args", "env"):
            if other in fields:
                raise ConfigError(f"{key}.{other}", fields[other], "it goes with job.script: set job.script too")
        return None
    if image == BUILT_IMAGE:
        raise ConfigError(
            f"{key}.script",
            fields["script"],
            "it runs in your own image: set eks-ddp:image to an "
            "image that contains it (the image the stack builds holds only the bundled trainer)",
        )
    args = _strings(fields.get("args", []), f"{key}.args")
    env = fields.get("env", {})
    _string_values(env, f"{key}.env")
    code: UserCodeSpec = {"script": fields["script"], "args": args, "env": env}
    for field_name, problem in user_code(code).problems().items():
        raise ConfigError(f"{key}.{field_name}", fields[field_name], problem)
    return code


def parse(values: Mapping[str, Any], region: str | None, describe: Describe = instance_facts.offline) -> StackConfig:
    """Typed stack configuration from the `eks-ddp:*` values (keys without the project prefix).

    `describe` gives an instance type's facts: the catalogue's (or a stated guess) offline, EC2's in
    `pulumi up` (`__main__.py` passes infra.facts.instance_facts.describe).
    """
    top = _fields(dict(values), PROJECT, TOP_LEVEL)
    region = _region(region)
    if top.get("existing_cluster"):  # the project default, {}: the stack makes its own cluster
        existing = _fields(top["existing_cluster"], _key("existingCluster"), EXISTING_CLUSTER)
        platform_args, layout, group_images = _node_groups(top.get("node_groups", []), None)
        platform_args["existing_cluster"] = existing  # type: ignore[typeddict-item]
        if top.get("vpc"):
            platform_args["network"] = top["vpc"]  # refused by the platform, naming the key
    else:
        network = _fields(top.get("vpc") or default_vpc(region), _key("vpc"), VPC)
        zones = _zones(
            _strings(network.get("availability_zones", []), f"{_key('vpc')}.availabilityZones"),
            region,
            "availabilityZones",
        )
        if "existing_private_subnet_ids" in network:  # an existing VPC: its zones are the subnets' (zone -> id)
            subnets = network["existing_private_subnet_ids"]
            zones = _zones(list(subnets), region, "existingPrivateSubnetIds")
            _string_values(subnets, f"{_key('vpc')}.existingPrivateSubnetIds")
        platform_args, layout, group_images = _node_groups(top.get("node_groups", []), zones)
        platform_args["network"] = network  # type: ignore[typeddict-item]
    platform_args["tags"] = {"project": PROJECT}
    addons = _fields(top.get("addons") or {}, _key("addons"), ADDONS)
    sources = {name: addons.pop(name) for name in list(addons) if isinstance(addons[name], str)}
    platform_args.update(addons)  # type: ignore[typeddict-item]
    if sources:
        platform_args["addon_sources"] = sources
    if "model_bucket" in top:
        platform_args["model_bucket"] = top["model_bucket"]
    for argument in ("cluster_name", "kubernetes_version", "training_namespace", "checkpoint_expiry_days"):
        if top.get(argument) not in (None, "", 0):  # the project defaults mean "not set"
            platform_args[argument] = top[argument]  # type: ignore[literal-required]
    if top.get("admin_principal_arns"):
        platform_args["admin_principal_arns"] = _strings(top["admin_principal_arns"], _key("adminPrincipalArns"))
    if top.get("service_account_roles"):
        roles = _choice("serviceAccountRoles", top["service_account_roles"], RoleAccess)
        platform_args["service_account_roles"] = roles
    autoscaler = top.get("autoscaler") or AutoscalerKind.CLUSTER_AUTOSCALER.value
    platform_args["autoscaler"] = _choice("autoscaler", autoscaler, AutoscalerKind)
    # A stack with a training job is watched with Prometheus unless it says otherwise.
    watched = MonitoringKind.PROMETHEUS.value if top.get("job") else MonitoringKind.NONE.value
    platform_args["monitoring"] = _choice("monitoring", top.get("monitoring") or watched, MonitoringKind)
    if top.get("efa_exporter_image"):
        platform_args["efa_exporter_image"] = top["efa_exporter_image"]
    platform_args["node_health"] = top.get("node_health", True)
    if top.get("karpenter_node_repair"):
        platform_args["karpenter_node_repair"] = True
    if top.get("managed_prometheus"):
        if platform_args["monitoring"] != MonitoringKind.PROMETHEUS:
            raise ConfigError(
                _key("managedPrometheus"),
                True,
                f"it writes Prometheus' samples: needs "
                f"eks-ddp:monitoring prometheus, not {platform_args['monitoring'].value}",
            )
        platform_args["managed_prometheus"] = True
    queueing = _queueing(top)
    if queueing is not None:
        platform_args["queueing"] = queueing
    kind, fsx = _storage(top.get("storage"))
    platform_args["storage"] = kind
    if kind == StorageKind.FSX:
        platform_args["fsx"] = fsx  # type: ignore[typeddict-item]
    if kind == StorageKind.EXISTING_FSX:
        platform_args["existing_fsx"] = fsx  # type: ignore[typeddict-item]
    try:
        platform.validate(PROJECT, platform_args, describe)
    except InvalidArgument as error:
        raise ConfigError(layout.stack_key(error), error.value, _in_stack_words(error.allowed)) from None
    operator = _choice("trainingOperator", top.get("training_operator") or OperatorKind.V1.value, OperatorKind)
    platform_args["training_operator"] = operator
    claim = None if kind == StorageKind.NONE else "shared"
    image = top.get("image") or None
    existing = platform_args.get("existing_cluster")
    describe = facts_for(existing, describe)
    if image is None and existing is not None and aws_side_problem(existing):
        raise ConfigError(
            _key("image"), None, "the cluster is given by kubeconfig, so no image is built in ECR: give the image "
            "its nodes pull (trainer/Dockerfile built and pushed where they reach it)"
        )
    namespace = platform_args.get("training_namespace", "training")
    groups = platform.reachable_groups(platform_args)
    job = _job(top.get("job"), groups, platform.keeps_desired_size(platform_args), namespace, image or BUILT_IMAGE, claim, describe)
    if job is not None and (job.prepare_data or job.evaluate):
        _side_steps_fit_system_nodes(platform_args, job, describe, layout)
    if job is not None and not platform_args["node_health"]:
        job = replace(job, spec={**job.spec, "preflight": False})
    if job is not None and job.job.elastic and operator != OperatorKind.V1:
        raise ConfigError(
            f"{_key('job')}.elasticMinReplicas",
            job.job.elastic_min_replicas,
            f"elastic jobs need trainingOperator v1 (PyTorchJob elasticPolicy), not {operator.value}",
        )
    return StackConfig(
        region=region,
        platform=platform_args,
        job=job,
        image_uri=image,
        group_images=group_images,
        fabric_check=_choice("fabricCheck", top.get("fabric_check") or FabricCheck.GATE.value, FabricCheck),
        fabric_check_image=top.get("fabric_check_image") or None,
        nccl_check=top.get("nccl_check", True),
        nccl_check_image=top.get("nccl_check_image") or None,
        operator=operator,
    )
