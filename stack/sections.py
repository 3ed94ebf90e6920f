"""Where each stack key sits, and the key of each argument a component refuses.

Each section of the stack config is the argument type it becomes (stack.keys.Section), so a field added there is a
key here; the program's own keys (an image per group, the job's group and steps) are the small TypedDicts below. The
top-level keys are Pulumi.yaml's. The exceptions to the naming rule are named here, once: the system group's two keys
(the platform's `system_instance_type` and `system_node_count`), Kueue's keys (top-level keys for the platform's
`queueing`), and the storage map that becomes the platform's `storage` kind and its options.
"""

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

from eks_ddp.infra.aws.efa_node_group import NodeGroupShape, Taint
from eks_ddp.infra.aws.network import NetworkArgs
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.existing_cluster import ExistingClusterArgs
from eks_ddp.infra.storage.existing_fsx import ExistingFsxOptions
from eks_ddp.infra.storage.fsx import FsxOptions
from eks_ddp.stack import project_config
from eks_ddp.stack.keys import Section, declared, key, stack_word
from eks_ddp.workloads.job import TrainingJobSpec, UserCodeSpec


class TrainingGroupKeys(NodeGroupShape):
    image: NotRequired[str]
    """The image this group's jobs run (stack.images)."""


class SystemGroupKeys(TypedDict):
    name: str
    instance_type: NotRequired[str]
    desired_size: NotRequired[int]


SYSTEM_ARGUMENTS = {"instance_type": "system_instance_type", "desired_size": "system_node_count"}
"""The system group's keys as the platform's arguments."""


class StorageKeys(FsxOptions, ExistingFsxOptions, total=False):
    kind: str
    """fsx, existing-fsx, efs or none: the platform's `storage`; the other keys are that kind's options."""


STORAGE_OPTIONS = {"fsx": FsxOptions, "existing-fsx": ExistingFsxOptions, "efs": None, "none": None}


class AddonKeys(TypedDict, total=False):
    """Add-ons a stack may leave out (false), and those it may install from a local folder (a path)."""

    efa_device_plugin: bool
    nvidia_device_plugin: bool
    neuron_device_plugin: bool
    metrics_server: bool
    fsx_csi_driver: bool
    training_operator: str
    kubeflow_trainer: str
    mpi_operator: str
    kueue: str


class JobKeys(UserCodeSpec, total=False):
    """The job's keys besides its spec's: its group, the steps around it, and the user's code, flat."""

    node_group: str
    prepare_data: bool
    evaluate: bool


QUEUEING_KEYS = {"topology": "queueTopology", "pods_ready_timeout": "queuePodsReadyTimeout", "quotas": "queueQuotas"}
"""The platform's `queueing` fields as the top-level keys that set them."""
VPC = Section((NetworkArgs,), hidden=frozenset({"availability_zone_count", "tags"}))
EXISTING_CLUSTER = Section((ExistingClusterArgs,))
SYSTEM = Section((SystemGroupKeys,))
NODE_GROUP = Section((TrainingGroupKeys,), hidden=frozenset({"metadata_hop_limit", "launcher"}))
TAINT = Section((Taint,))
STORAGE = Section((StorageKeys,))
ADDONS = Section((AddonKeys,))
JOB = Section(
    (TrainingJobSpec, JobKeys),
    hidden=frozenset({"namespace", "image", "max_restarts", "claim_name", "service_account", "checkpoint_every",
                      "extra_args", "code", "preflight", "artifact_bucket", "queue", "queue_placement"}),
)
"""The spec's fields the program sets (namespace, image, claim, bucket, queue) or a stack leaves at their defaults."""


@functools.cache
def top_level(project: Path = project_config.ROOT) -> dict[str, tuple[str, type]]:
    """The top-level keys, as the program's Pulumi.yaml (in `project`) declares them."""
    return declared({key(name): spec for name, spec in project_config.declarations(project).items()})


def storage_options(kind: str) -> set[str]:
    """The storage keys (arguments) a kind takes besides `kind`."""
    options = STORAGE_OPTIONS[kind]
    return set(options.__annotations__) if options else set()


@dataclass(frozen=True)
class Layout:
    """Where the node groups sat in the stack file, to name the key of a component's refusal."""

    system_index: int | None
    group_indexes: Sequence[int]

    def system_key(self, argument: str) -> str:
        """The system group's key for `argument`: at its index, or without one when the stack leaves the group out."""
        where = f"{key('nodeGroups')}[{self.system_index}]" if self.system_index is not None else key("nodeGroups")
        word = next(word for word, platform in SYSTEM_ARGUMENTS.items() if platform == argument)
        return f"{where}.{stack_word(word)}"

    def stack_key(self, error: InvalidArgument) -> str:
        """The key of the argument a component refused."""
        return self.path_key(error.argument, error.component)

    def path_key(self, path: str, component: str) -> str:
        """The key a platform argument's path (`node_groups[1].min_size`, `queueing.topology`) was set by; a path of
        one of the platform's children (`cidr` of the Network) is known by `component`."""
        group = re.fullmatch(r"node_groups\[(\d+)\]\.(\w+)", path)
        if group:
            return f"{key('nodeGroups')}[{self.group_indexes[int(group.group(1))]}].{stack_word(group.group(2))}"
        if path in SYSTEM_ARGUMENTS.values():
            return self.system_key(path)
        head, _, field = path.partition(".")
        if head == "queueing":
            name = next(name for name in QUEUEING_KEYS if field.startswith(name))
            return key(QUEUEING_KEYS[name]) + field.removeprefix(name)
        if head == "existing_fsx" or component in ("FsxLustreStorage", "ExistingFsxVolume"):
            return f"{key('storage')}.{stack_word(field or path)}"
        if path == "storage":
            return f"{key('storage')}.kind"
        if component == "Network":
            return f"{key('vpc')}.{stack_word(path)}"
        return key(stack_word(head)) + (f".{stack_word(field)}" if field else "")
