"""TrainerImage: the ECR repository and the trainer image the jobs run, for CPUs or for NVIDIA GPUs."""

import hashlib
import json
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build
from docker.utils.build import exclude_paths

from eks_ddp.infra.facts.catalogue import Architecture, InstanceType

# The build context: the trainer alone (its requirements.txt, Dockerfile and .dockerignore).
CONTEXT = Path(__file__).resolve().parent.parent / "trainer"


class Accelerator(str, Enum):
    """What the image's torch runs on: the CPU wheel (slim), or CUDA with NCCL and the EFA plugin."""

    CPU = "cpu"
    """trainer/Dockerfile: the CPU wheel of torch."""
    CUDA = "cuda"
    """trainer/Dockerfile.cuda: CUDA 13.0 torch (cu130) with NCCL and the aws-ofi-nccl plugin, for Turing and newer."""
    CUDA126 = "cuda126"
    """trainer/Dockerfile.cuda on a CUDA 12.6 base with the cu126 wheel: the only torch 2.13 build with kernels for
    Volta (V100, sm_70) and Pascal (P100, sm_60)."""


DOCKERFILES = {
    Accelerator.CPU: "Dockerfile",
    Accelerator.CUDA: "Dockerfile.cuda",
    Accelerator.CUDA126: "Dockerfile.cuda",
}
BUILD_ARGS = {
    Accelerator.CUDA126: {
        "CUDA_IMAGE": "nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04",
        "TORCH_INDEX_URL": "https://download.pytorch.org/whl/cu126",
    }
}
# torch 2.13's wheels by GPU generation (pytorch RELEASE.md "PyTorch CUDA Support Matrix" for 2.12-2.14, and
# .ci/manywheel/build_cuda.sh): cu130 from Turing (sm_75) on, cu126 from Maxwell (sm_50) to Hopper. V100 (p3dn) is the
# only pre-Turing GPU in EC2's current catalogue.
CU126_ONLY_GPUS = {"V100"}


def accelerator_of(instance: InstanceType) -> Accelerator:
    """The build a group's bundled image needs: CPU, CUDA 13.0, or CUDA 12.6 for GPUs older than Turing."""
    if not instance.is_gpu:
        return Accelerator.CPU
    return Accelerator.CUDA126 if instance.gpu_model in CU126_ONLY_GPUS else Accelerator.CUDA


PLATFORMS = {
    Architecture.ARM64: docker_build.Platform.LINUX_ARM64,
    Architecture.X86_64: docker_build.Platform.LINUX_AMD64,
}


class TrainerImageArgs(TypedDict):
    architectures: list[Architecture]
    """CPU architectures of the node groups the image must run on."""
    accelerator: NotRequired[Accelerator]
    """cpu (default: trainer/Dockerfile), cuda (trainer/Dockerfile.cuda, for NVIDIA GPUs from Turing on) or cuda126
    (the same on CUDA 12.6, for Volta and Pascal GPUs: `accelerator_of`)."""
    image_uri: NotRequired[str]
    """Use this image instead of building one (then no repository is created)."""
    keep_images: NotRequired[int]
    """Tagged images the repository keeps (default 20)."""
    tags: NotRequired[dict[str, str]]
    """Tags for the repository."""


def context_files(context: Path = CONTEXT) -> list[str]:
    """The files a build sends: the context minus what its .dockerignore excludes (Docker's own rules)."""
    ignore = context / ".dockerignore"
    patterns = (
        [line.strip() for line in ignore.read_text().splitlines() if line.strip() and not line.startswith("#")]
        if ignore.exists()
        else []
    )
    return sorted(
        path for path in exclude_paths(str(context), patterns, dockerfile="Dockerfile") if (context / path).is_file()
    )


def content_tag(
    platforms: Sequence[str],
    context: Path = CONTEXT,
    dockerfile: str = "Dockerfile",
    build_args: dict[str, str] | None = None,
) -> str:
    """A tag from exactly what the build sends and the platforms it builds for.

    The repository's tags are immutable: the same tag for different content (another file,
    another architecture) would fail the push, and a new tag for the same content would
    rebuild and push for nothing.
    """
    # The CPU image's tags predate Dockerfile.cuda: only another Dockerfile joins the digest.
    named = [dockerfile] if dockerfile != "Dockerfile" else []
    named += [f"{key}={value}" for key, value in sorted((build_args or {}).items())]
    digest = hashlib.sha256(" ".join([*sorted(platforms), *named]).encode())
    for path in context_files(context):
        digest.update(path.encode() + b"\0" + (context / path).read_bytes())
    return digest.hexdigest()[:16]


def lifecycle_policy(keep: int) -> str:
    return json.dumps(
        {
            "rules": [
                {
                    "rulePriority": 1,
                    "description": "drop untagged layers after a day",
                    "selection": {
                        "tagStatus": "untagged",
                        "countType": "sinceImagePushed",
                        "countUnit": "days",
                        "countNumber": 1,
                    },
                    "action": {"type": "expire"},
                },
                {
                    "rulePriority": 2,
                    "description": f"keep the newest {keep} images",
                    "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": keep},
                    "action": {"type": "expire"},
                },
            ]
        }
    )


class TrainerImage(pulumi.ComponentResource):
    """The bundled trainer's image, built from trainer/ for the groups' architectures into a new ECR repository
    (scanned, immutable tags, old images pruned), or a given image."""

    image_uri: pulumi.Output[str]
    """What pods run: the pushed image by digest, or the given URI."""

    def __init__(self, name: str, args: TrainerImageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("eksddp:index:TrainerImage", name, {}, opts)
        if "image_uri" in args:
            self.image_uri = pulumi.Output.from_input(args["image_uri"])
            self.register_outputs({"image_uri": self.image_uri})
            return
        child = pulumi.ResourceOptions(parent=self)
        repository = aws.ecr.Repository(
            f"{name}-repository",
            image_scanning_configuration={"scan_on_push": True},
            image_tag_mutability="IMMUTABLE",
            encryption_configurations=[{"encryption_type": "KMS"}],
            tags=args.get("tags", {}),
            opts=child,
        )
        aws.ecr.LifecyclePolicy(
            f"{name}-lifecycle",
            repository=repository.name,
            policy=lifecycle_policy(args.get("keep_images", 20)),
            opts=child,
        )
        token = aws.ecr.get_authorization_token_output(
            registry_id=repository.registry_id, opts=pulumi.InvokeOutputOptions(parent=self)
        )
        platforms = [PLATFORMS[architecture] for architecture in dict.fromkeys(args["architectures"])]
        accelerator = Accelerator(args.get("accelerator", Accelerator.CPU))
        dockerfile, build_args = DOCKERFILES[accelerator], BUILD_ARGS.get(accelerator, {})
        tag = content_tag([platform.value for platform in platforms], dockerfile=dockerfile, build_args=build_args)
        image = docker_build.Image(
            f"{name}-build",
            context={"location": str(CONTEXT)},
            dockerfile={"location": str(CONTEXT / dockerfile)},
            build_args=build_args or None,  # none for the CPU and cu130 images: their inputs stay as they were
            platforms=platforms,
            push=True,
            tags=[pulumi.Output.concat(repository.repository_url, ":", tag)],
            registries=[
                {"address": repository.repository_url, "username": token.user_name, "password": token.password}
            ],
            opts=child,
        )
        self.image_uri = pulumi.Output.concat(repository.repository_url, "@", image.digest)
        self.register_outputs({"image_uri": self.image_uri})
