"""The stack: TrainingPlatform, the trainer image and the workloads, from a parsed StackConfig."""

import dataclasses
from dataclasses import dataclass

import pulumi

from infra.platform import TrainingPlatform
from stack.config import StackConfig
from workloads.batch_jobs import default_fabric_image
from workloads.components import DataPrepJob, EvaluationJob, FabricCheckJob, PyTorchJob, TrainingJobArgs
from workloads.image import TrainerImage, TrainerImageArgs


@dataclass
class Stack:
    platform: TrainingPlatform
    image: TrainerImage
    job: PyTorchJob | None


def build(config: StackConfig, name: str = "eks-ddp") -> Stack:
    platform = TrainingPlatform(name, config.platform)
    architectures = sorted({group.instance.architecture for group in platform.node_groups.values()})
    image_args: TrainerImageArgs = {"architectures": architectures, "tags": {"project": "eks-ddp"}}
    if config.image_uri:
        image_args["image_uri"] = config.image_uri
    image = TrainerImage(f"{name}-image", image_args)
    job = None
    if config.job is not None:
        group = platform.node_groups[config.job.node_group]
        training = dataclasses.replace(config.job.job, image=image.image_uri)
        args: TrainingJobArgs = {"provider": platform.provider, "node_group": group, "job": training, "depends_on": [platform]}
        if config.job.prepare_data:
            DataPrepJob(f"{name}-data", args)
        if platform.training_operator is not None:
            args["training_operator"] = platform.training_operator
        job = PyTorchJob(f"{name}-train", args)
        if config.job.evaluate:
            EvaluationJob(f"{name}-evaluate", args)
    if config.fabric_check:
        efa_groups = [group for group in platform.node_groups.values() if group.efa_interfaces and group.max_size >= 2]
        if efa_groups:
            group = efa_groups[0]
            architecture = group.instance.architecture.value
            fabric_image = config.fabric_check_image or default_fabric_image(architecture, config.region)
            if fabric_image is None:
                pulumi.log.warn(f"EFA fabric check skipped: set eks-ddp:fabricCheckImage to an {architecture} image "
                                "with libfabric's EFA provider")
            else:
                FabricCheckJob(f"{name}-efa-check", {
                    "provider": platform.provider, "node_group": group, "namespace": platform.training_namespace,
                    "image": fabric_image, "depends_on": [platform],
                })
    return Stack(platform, image, job)
