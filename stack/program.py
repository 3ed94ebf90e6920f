"""The stack: TrainingPlatform, the trainer images and the workloads, from a parsed StackConfig."""

from dataclasses import dataclass

import pulumi
from pulumi import Resource

from eks_ddp.infra.addons.training_operator import OperatorKind
from eks_ddp.infra.aws.cluster import DEFAULT_SYSTEM_INSTANCE_TYPE
from eks_ddp.infra.aws.iam import RoleAccess
from eks_ddp.infra.facts import instance_facts
from eks_ddp.infra.platform import TrainingPlatform
from eks_ddp.stack import images
from eks_ddp.stack.settings import FabricCheck, StackConfig
from eks_ddp.workloads import network_policy
from eks_ddp.workloads.batch_jobs import OnFailure, default_fabric_image
from eks_ddp.workloads.components import (
    DataPrepJob,
    EvaluationJob,
    FabricCheckArgs,
    FabricCheckJob,
    IndexedTrainingJob,
    NcclCheckArgs,
    NcclCheckJob,
    PyTorchJob,
    TrainingJobArgs,
    TrainJob,
    apply,
)
from eks_ddp.workloads.image import Accelerator, TrainerImage, TrainerImageArgs

IMAGE_SUFFIX = {Accelerator.CPU: "image", Accelerator.CUDA: "image-cuda", Accelerator.CUDA126: "image-cuda126"}
JOB_COMPONENTS = {OperatorKind.V1: PyTorchJob, OperatorKind.V2: TrainJob, OperatorKind.NONE: IndexedTrainingJob}


@dataclass
class Stack:
    platform: TrainingPlatform
    images: dict[str, pulumi.Output[str]]
    """The image each training group's jobs run, by group name."""
    job: PyTorchJob | TrainJob | IndexedTrainingJob | None


def _images(config: StackConfig, platform: TrainingPlatform, name: str) -> dict[str, pulumi.Output[str]]:
    """One build per accelerator the groups need (for all their architectures); given images as they are. The system
    group needs one only when the job trains there."""
    trained = {group: nodes.instance for group, nodes in platform.node_groups.items()}
    instances = images.needing_images(config, trained, instance_facts.describe)
    choices = {group: images.choose(config, group, instance) for group, instance in instances.items()}
    built = {}
    for accelerator, architectures in images.builds(choices, instances).items():
        args: TrainerImageArgs = {"architectures": architectures, "tags": {"project": "eks-ddp"}}
        if accelerator != Accelerator.CPU:
            args["accelerator"] = accelerator
        built[accelerator] = TrainerImage(f"{name}-{IMAGE_SUFFIX[accelerator]}", args).image_uri
    return {
        group: pulumi.Output.from_input(choice.given) if choice.given else built[choice.accelerator]
        for group, choice in choices.items()
    }


def job_commands(operator: OperatorKind, job: str, namespace: str) -> tuple[str, str]:
    """`kubectl` to watch the job, and to follow its rank-0 pod's log, whichever object runs it."""
    if operator == OperatorKind.V1:
        return f"kubectl -n {namespace} get pytorchjob {job} -w", f"kubectl -n {namespace} logs -f {job}-master-0"
    # Pod 0 by its completion-index label (Kubernetes >= 1.28), under JobSet's or the Job's own name label.
    owner = "jobset.sigs.k8s.io/jobset-name" if operator == OperatorKind.V2 else "batch.kubernetes.io/job-name"
    kind = "trainjob" if operator == OperatorKind.V2 else "job"
    selector = f"{owner}={job},batch.kubernetes.io/job-completion-index=0"
    return f"kubectl -n {namespace} get {kind} {job} -w", f"kubectl -n {namespace} logs -f -l {selector}"


def _efa_check(config: StackConfig, platform: TrainingPlatform, name: str, on_failure: OnFailure) -> list[Resource]:
    checked = config.checked_group(gpu=False, describe=instance_facts.describe)
    if checked is None:
        return []
    group = platform.node_groups[checked]
    architecture = group.instance.architecture.value
    image = config.fabric_check_image or default_fabric_image(architecture, config.region)
    if image is None:
        pulumi.log.warn(
            f"EFA fabric check skipped: set eks-ddp:fabricCheckImage to an {architecture} image "
            "with libfabric's EFA provider"
        )
        return []
    args: FabricCheckArgs = {
        "provider": platform.provider,
        "node_group": group.shape,
        "namespace": platform.training_namespace,
        "image": image,
        "on_failure": on_failure,
        **platform.submission(checked),
    }
    return [FabricCheckJob(f"{name}-efa-check", args, pulumi.ResourceOptions(depends_on=[platform]))]


def _nccl_check(
    config: StackConfig, platform: TrainingPlatform, name: str, on_failure: OnFailure, after: list[Resource]
) -> list[Resource]:
    checked = config.checked_group(gpu=True, describe=instance_facts.describe)
    if checked is None or platform.mpi_operator is None:
        return []
    group = platform.node_groups[checked]
    system = instance_facts.describe(config.platform.get("system_instance_type", DEFAULT_SYSTEM_INSTANCE_TYPE))
    if system.architecture != group.instance.architecture:
        pulumi.log.warn(
            f"NCCL check skipped: its launcher runs on the system nodes, which are {system.architecture.value}, "
            f"and its image is {group.instance.architecture.value}; use a system type of that architecture"
        )
        return []
    args: NcclCheckArgs = {
        "provider": platform.provider,
        "node_group": group.shape,
        "namespace": platform.training_namespace,
        "on_failure": on_failure,
        **platform.submission(checked),
    }
    if config.nccl_check_image:
        args["image"] = config.nccl_check_image
    return [NcclCheckJob(f"{name}-nccl-check", args, pulumi.ResourceOptions(depends_on=[platform, *after]))]


def _checks(config: StackConfig, platform: TrainingPlatform, name: str) -> list[Resource]:
    """The fabric checks, one after the other: `pulumi up` waits for each to end (at most workloads.batch_jobs
    AWAIT_SECONDS) and the training job and its evaluation are created after them, so they never compete with it for
    the group's nodes and nothing waits for a model a failed check kept from being trained; under `fabricCheck: gate`
    a failed check stops `pulumi up` there with its verdict, and the next one runs it again; under `report` it only
    logs its verdict."""
    if config.fabric_check == FabricCheck.OFF:
        return []
    on_failure = OnFailure(config.fabric_check.value)
    efa = _efa_check(config, platform, name, on_failure)
    return efa + _nccl_check(config, platform, name, on_failure, efa)


def build(config: StackConfig, name: str = "eks-ddp") -> Stack:
    platform = TrainingPlatform(name, config.platform)
    pod_identity = (
        platform.bucket_name is not None and platform.service_account_roles == RoleAccess.POD_IDENTITY
    )
    for policy in network_policy.training_policies(platform.training_namespace, pod_identity):
        apply(f"{name}-{policy['metadata']['name']}", policy, platform, platform.provider, [platform.namespace])
    group_images = _images(config, platform, name)
    checks = _checks(config, platform, name)
    job = None
    if config.job is not None:
        shapes = {group: nodes.shape for group, nodes in platform.node_groups.items()}
        args: TrainingJobArgs = {
            "provider": platform.provider,
            "node_group": config.job_shape(shapes),
            "job": {**config.job.spec, "image": group_images[config.job.node_group]},
        }
        if platform.bucket_name is not None:
            args["job"]["artifact_bucket"] = platform.bucket_name
        queued: TrainingJobArgs = {**args, "job": {**args["job"], **platform.submission(config.job.node_group)}}
        after = pulumi.ResourceOptions(depends_on=[platform])
        if config.job.prepare_data:
            DataPrepJob(f"{name}-data", args, after)
        monitored: TrainingJobArgs = {**queued, "pod_monitor": platform.prometheus is not None}
        gated = pulumi.ResourceOptions(depends_on=[platform, *checks])
        job = JOB_COMPONENTS[config.operator](f"{name}-train", monitored, gated)
        if config.job.evaluate:
            EvaluationJob(f"{name}-evaluate", args, gated)
    return Stack(platform, group_images, job)
