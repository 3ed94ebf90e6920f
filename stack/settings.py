"""What a stack's config parses into: the platform's arguments, the job, the images and the fabric checks."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from eks_ddp.infra.addons.training_operator import OperatorKind
from eks_ddp.infra.aws.efa_node_group import NodeGroupShape
from eks_ddp.infra.facts import instance_facts
from eks_ddp.infra.facts.catalogue import InstanceType
from eks_ddp.infra.node_group import NodeGroup
from eks_ddp.infra.platform import TrainingPlatformArgs, system_shape
from eks_ddp.workloads.batch_jobs import OnFailure
from eks_ddp.workloads.job import TrainingJob, TrainingJobSpec, resolve

SYSTEM_GROUP = "system"
BUILT_IMAGE = "(built by the stack)"
"""The job's image when the stack builds the bundled trainer's (the program puts the built image in its place)."""
Describe = Callable[[str], InstanceType]


@dataclass(frozen=True)
class JobSettings:
    """`eks-ddp:job`: the job's spec for its component, the group it runs on, and the steps around it."""

    node_group: str
    spec: TrainingJobSpec
    """What the job components take (image and bucket added by the program)."""
    prepare_data: bool
    evaluate: bool

    @property
    def resolved(self) -> TrainingJob:
        """The job with its defaults: what the local run and the checks read."""
        return resolve(self.spec)


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
    job: JobSettings | None
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

    def checked_group(self, gpu: bool, describe: Describe = instance_facts.offline) -> str | None:
        """The group a fabric check proves: the job's own when it qualifies (EFA, room for two nodes, GPUs for the
        NCCL check), else the first that does; None when no group does or the checks are off."""
        if self.fabric_check == FabricCheck.OFF or (gpu and not self.nccl_check):
            return None
        groups = map(NodeGroup.of, self.platform.get("node_groups", []))
        qualified = [
            group.name
            for group in groups
            if group.efa and group.max_size >= 2 and (not gpu or describe(group.instance_type).is_gpu)
        ]
        trained = self.job.node_group if self.job else None
        return trained if trained in qualified else next(iter(qualified), None)
