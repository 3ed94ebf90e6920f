"""Which image each training group's jobs run, and where it comes from: one plan for the program and the preview.

A group's own image (`nodeGroups[i].image`) first, then the stack's (`eks-ddp:image`), else one the stack
builds per accelerator: trainer/Dockerfile for CPU groups (every architecture they use), trainer/Dockerfile.cuda
for NVIDIA GPU groups (CUDA, NCCL and the EFA plugin NCCL needs), on CUDA 12.6 for GPUs older than Turing.
"""

from collections.abc import Callable
from dataclasses import dataclass

from eks_ddp.infra.facts.catalogue import Architecture, InstanceType
from eks_ddp.infra.platform import system_shape
from eks_ddp.stack.settings import SYSTEM_GROUP, StackConfig
from eks_ddp.workloads.image import BUILD_ARGS, DOCKERFILES, PLATFORMS, Accelerator, accelerator_of


@dataclass(frozen=True)
class ImageChoice:
    given: str | None
    """The image the user named, or None when the stack builds it."""
    accelerator: Accelerator

    def describe(self, architectures: list[Architecture]) -> str:
        if self.given:
            return f"{self.given} (given)"
        platforms = ", ".join(PLATFORMS[architecture].value for architecture in sorted(set(architectures)))
        args = "".join(f", {key}={value}" for key, value in BUILD_ARGS.get(self.accelerator, {}).items())
        return f"built from trainer/{DOCKERFILES[self.accelerator]} for {platforms}{args}"


def choose(config: StackConfig, group: str, instance: InstanceType) -> ImageChoice:
    return ImageChoice(config.group_images.get(group) or config.image_uri, accelerator_of(instance))


def needing_images(
    config: StackConfig, instances: dict[str, InstanceType], describe: Callable[[str], InstanceType]
) -> dict[str, InstanceType]:
    """The groups whose jobs need an image: the training groups, and the system group when the job trains there; a
    Neuron group only with an image of its own (no bundled image runs on Trainium or Inferentia)."""
    groups = {
        name: instance
        for name, instance in instances.items()
        if not instance.neuron_devices or config.group_images.get(name) or config.image_uri
    }
    if config.job is None or config.job.node_group != SYSTEM_GROUP:
        return groups
    return {**groups, SYSTEM_GROUP: describe(system_shape(config.platform)["instance_type"])}


def builds(
    choices: dict[str, ImageChoice], instances: dict[str, InstanceType]
) -> dict[Accelerator, list[Architecture]]:
    """What the stack builds: per accelerator, the architectures of every group that runs that build."""
    needed: dict[Accelerator, set[Architecture]] = {}
    for group, choice in choices.items():
        if not choice.given:
            needed.setdefault(choice.accelerator, set()).add(instances[group].architecture)
    return {accelerator: sorted(architectures) for accelerator, architectures in sorted(needed.items())}
