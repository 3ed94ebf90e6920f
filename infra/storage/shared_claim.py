"""A StorageClass and the ReadWriteMany claim every training pod mounts."""

from collections.abc import Mapping, Sequence
from typing import NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

# The POSIX user training pods run as: the trainer image's user (trainer/Dockerfile; a test checks).
SHARED_UID = 1000
DEFAULT_CLAIM_NAME = "shared"


class SharedStorageArgs(TypedDict):
    """What every shared file system needs from the cluster."""

    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    vpc_id: pulumi.Input[str]
    """The cluster's VPC."""
    node_security_group_id: pulumi.Input[str]
    """Security group of the nodes (the EKS cluster security group)."""
    oidc_provider_arn: pulumi.Input[str]
    """The cluster's IAM OIDC provider."""
    oidc_issuer: pulumi.Input[str]
    """The cluster's OIDC issuer."""
    namespace: str
    """Namespace of the claim (the training namespace)."""
    claim_name: NotRequired[str]
    """Name of the ReadWriteMany claim (default `shared`)."""
    tags: NotRequired[dict[str, str]]
    """Tags for every taggable resource."""


def storage_class_and_claim(
    name: str,
    parent: pulumi.Resource,
    provider: k8s.Provider,
    provisioner: str,
    parameters: Mapping[str, pulumi.Input[str]],
    namespace: str,
    claim_name: str,
    size_gib: int,
    depends_on: Sequence[pulumi.Resource],
    mount_options: Sequence[str] = (),
) -> k8s.core.v1.PersistentVolumeClaim:
    scoped = pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=list(depends_on))
    storage_class = k8s.storage.v1.StorageClass(
        f"{name}-class",
        metadata={"name": f"{claim_name}-class"},
        provisioner=provisioner,
        parameters=dict(parameters),
        mount_options=list(mount_options) or None,
        reclaim_policy="Retain",  # deleting the claim must not delete the data
        # pulumi-kubernetes awaits an Immediate claim until Bound for a fixed 5 minutes, and a new
        # FSx file system takes longer: with WaitForFirstConsumer it waits only for Pending, and
        # the volume is made when the first pod that mounts it is scheduled.
        volume_binding_mode="WaitForFirstConsumer",
        opts=scoped,
    )
    return k8s.core.v1.PersistentVolumeClaim(
        f"{name}-claim",
        metadata={"name": claim_name, "namespace": namespace},
        spec={
            "access_modes": ["ReadWriteMany"],
            "storage_class_name": storage_class.metadata.name,
            "resources": {"requests": {"storage": f"{size_gib}Gi"}},
        },
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[storage_class]),
    )
