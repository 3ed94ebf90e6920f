"""MpiOperator: the MPI operator v2, which runs MPIJobs (kubeflow.org/v2beta1) such as the NCCL check."""

from typing import NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from eks_ddp.infra.facts import versions
from eks_ddp.infra.options import waits_for

COMPONENT = "MpiOperator"


class MpiOperatorArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster (server-side apply: the MPIJob CRD is large)."""
    file: NotRequired[str]
    """The release's manifest in a local file, for clusters that cannot fetch it from GitHub (default: GitHub's)."""


class MpiOperator(pulumi.ComponentResource):
    manifests: k8s.yaml.v2.ConfigFile
    """The release's manifest; MPIJobs must depend on it (it installs their CRD)."""

    def __init__(self, name: str, args: MpiOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        self.manifests = k8s.yaml.v2.ConfigFile(
            f"{name}-manifests",
            file=args.get("file") or versions.MPI_OPERATOR_MANIFEST.format(version=versions.MPI_OPERATOR_VERSION),
            opts=pulumi.ResourceOptions(parent=self, provider=args["provider"], depends_on=waits_for(opts)),
        )
        self.register_outputs({})
