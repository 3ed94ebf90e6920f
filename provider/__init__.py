"""eks-ddp's components for every Pulumi language: a source-based plugin package.

`pulumi package add <repository>.git/provider` runs this directory (PulumiPlugin.yaml beside it), asks it for its
schema and generates an SDK in the consumer's language. Pulumi infers that schema from the components' type
hints and docstrings (pulumi.provider.experimental, pulumi 3.272.0). Hosted: the platform, the trainer image and
the job components. The building blocks (Network, Cluster, EfaNodeGroup, Karpenter...) infer too, but the inference
reads a field's docstring only from the TypedDict it analyses, not from one it extends, so most of their fields
would go undescribed: they stay Python-only for now.
"""

import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pulumi
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.schema import generate_schema

from eks_ddp.infra.platform import TrainingPlatform
from eks_ddp.workloads.components import (
    DataPrepJob,
    EvaluationJob,
    FabricCheckJob,
    IndexedTrainingJob,
    NcclCheckJob,
    PyTorchJob,
    TrainJob,
)
from eks_ddp.workloads.image import TrainerImage

# The package's name is its components' type prefix (`eksddp:index:TrainingPlatform`): the engine constructs a
# component by that token and the component registers itself under it.
PACKAGE = "eksddp"
# Set, so every source gives the SDK one name (`@eks-ddp/eksddp`, Python `eks_ddp_eksddp`): left empty, Pulumi
# takes a git source's owner, lower-cased (pulumi/pulumi pkg/cmd/pulumi/packages/packages.go setSpecNamespace,
# v3.259), and `@pulumi` for a local path, so forks and clones would each get another package name.
NAMESPACE = "eks-ddp"
COMPONENTS: list[type[pulumi.ComponentResource]] = [
    TrainingPlatform,
    PyTorchJob,
    TrainJob,
    IndexedTrainingJob,
    DataPrepJob,
    EvaluationJob,
    FabricCheckJob,
    NcclCheckJob,
    TrainerImage,
]


def version() -> str:
    """The package's version, which the generated SDKs carry: pyproject.toml's where the plugin runs from a source
    checkout (`pulumi package add` clones the repository and installs nothing of it), else the installed wheel's."""
    source = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if source.is_file():
        with open(source, "rb") as project:
            return tomllib.load(project)["project"]["version"]
    return metadata.version("eks-ddp")


def schema() -> dict[str, Any]:
    """The schema `pulumi package add` would get from the running plugin, inferred the same way, offline."""
    inferred = Analyzer(PACKAGE).analyze(COMPONENTS)
    dependencies = sorted(inferred["dependencies"], key=lambda dependency: dependency.name)
    return generate_schema(
        PACKAGE,
        version(),
        NAMESPACE,
        inferred["component_definitions"],
        inferred["type_definitions"],
        dependencies,
    ).to_json()
