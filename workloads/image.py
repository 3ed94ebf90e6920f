"""TrainerImage: the ECR repository and the trainer image the jobs run."""

import hashlib
import json
from pathlib import Path
from typing import NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build

from infra.catalogue import Architecture

REPOSITORY_ROOT = Path(__file__).resolve().parent.parent
IMAGE_INPUTS = ("pyproject.toml", "trainer")
PLATFORMS = {Architecture.ARM64: docker_build.Platform.LINUX_ARM64, Architecture.X86_64: docker_build.Platform.LINUX_AMD64}


class TrainerImageArgs(TypedDict):
    architectures: list[Architecture]
    """CPU architectures of the node groups the image must run on."""
    image_uri: NotRequired[str]
    """Use this image instead of building one (then no repository is created)."""
    keep_images: NotRequired[int]
    """Tagged images the repository keeps (default 20)."""
    tags: NotRequired[dict[str, str]]
    """Tags for the repository."""


def source_tag(root: Path = REPOSITORY_ROOT) -> str:
    """A tag from the image's inputs: tags are immutable, so a new build needs new content."""
    digest = hashlib.sha256()
    for path in sorted(p for name in IMAGE_INPUTS for p in ([root / name] if (root / name).is_file() else (root / name).rglob("*")) if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def lifecycle_policy(keep: int) -> str:
    return json.dumps({"rules": [
        {"rulePriority": 1, "description": "drop untagged layers after a day", "selection": {"tagStatus": "untagged", "countType": "sinceImagePushed", "countUnit": "days", "countNumber": 1}, "action": {"type": "expire"}},
        {"rulePriority": 2, "description": f"keep the newest {keep} images", "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": keep}, "action": {"type": "expire"}},
    ]})


class TrainerImage(pulumi.ComponentResource):
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
            f"{name}-repository", image_scanning_configuration={"scan_on_push": True}, image_tag_mutability="IMMUTABLE",
            encryption_configurations=[{"encryption_type": "KMS"}], tags=args.get("tags", {}), opts=child,
        )
        aws.ecr.LifecyclePolicy(f"{name}-lifecycle", repository=repository.name, policy=lifecycle_policy(args.get("keep_images", 20)), opts=child)
        token = aws.ecr.get_authorization_token_output(registry_id=repository.registry_id, opts=pulumi.InvokeOutputOptions(parent=self))
        image = docker_build.Image(
            f"{name}-build",
            context={"location": str(REPOSITORY_ROOT)},
            dockerfile={"location": str(REPOSITORY_ROOT / "trainer" / "Dockerfile")},
            platforms=[PLATFORMS[architecture] for architecture in dict.fromkeys(args["architectures"])],
            push=True,
            tags=[pulumi.Output.concat(repository.repository_url, ":", source_tag())],
            registries=[{"address": repository.repository_url, "username": token.user_name, "password": token.password}],
            opts=child,
        )
        self.image_uri = pulumi.Output.concat(repository.repository_url, "@", image.digest)
        self.register_outputs({"image_uri": self.image_uri})
