"""MpiOperator: the MPI operator v2, which runs MPIJobs (kubeflow.org/v2beta1) such as the NCCL check."""

from collections.abc import Sequence
from typing import NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from infra import versions

COMPONENT = "MpiOperator"


class MpiOperatorArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster (server-side apply: the MPIJob CRD is large)."""
    depends_on: NotRequired[Sequence[pulumi.Resource]]
    """Resources to wait for: the system node group, and a training operator installed without MPIJob v1."""


class MpiOperator(pulumi.ComponentResource):
    manifests: k8s.yaml.v2.ConfigFile
    """The release's manifest; MPIJobs must depend on it (it installs their CRD)."""

    def __init__(self, name: str, args: MpiOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        self.manifests = k8s.yaml.v2.ConfigFile(
            f"{name}-manifests",
            file=versions.MPI_OPERATOR_MANIFEST.format(version=versions.MPI_OPERATOR_VERSION),
            opts=pulumi.ResourceOptions(
                parent=self, provider=args["provider"], depends_on=list(args.get("depends_on", []))
            ),
        )
        self.register_outputs({})
