"""ExistingFsxVolume: an FSx for Lustre file system made elsewhere, mounted as a static volume.

The GPU workshop's shape: the file system (and its data) outlives clusters, so the stack only lets the
nodes reach it (Lustre's ports on its security group) and binds a PersistentVolume to it; no StorageClass
provisions anything, and the CSI driver only mounts.
"""

import re
from collections.abc import Sequence
from typing import NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import versions
from eks_ddp.infra.options import waits_for
from eks_ddp.infra.storage.csi_driver import csi_driver
from eks_ddp.infra.storage.fsx import DEFAULT_CAPACITY_GIB, lustre_ingress, valid_capacity
from eks_ddp.infra.storage.shared_claim import DEFAULT_CLAIM_NAME

COMPONENT = "ExistingFsxVolume"
DRIVER = "fsx.csi.aws.com"


class ExistingFsxOptions(TypedDict):
    """The file system's facts (from `aws fsx describe-file-systems`)."""

    file_system_id: str
    """Its id, such as fs-0123456789abcdef0."""
    dns_name: str
    """Its DNS name, such as fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com."""
    mount_name: str
    """Its Lustre mount name (8 characters, or `fsx` for SCRATCH_1)."""
    security_group_id: NotRequired[str]
    """The security group on its network interfaces: the nodes are let in on Lustre's ports (leave it out where they
    are let in already, as on a cluster given by kubeconfig, where nothing is made in AWS)."""
    capacity_gib: NotRequired[int]
    """Its storage capacity (default 1200 GiB): the volume's and the claim's size."""


class ExistingFsxVolumeArgs(ExistingFsxOptions):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    namespace: str
    """Namespace of the claim (the training namespace)."""
    node_security_group_id: NotRequired[pulumi.Input[str]]
    """Security group of the nodes, let in with `security_group_id`."""
    claim_name: NotRequired[str]
    """Name of the ReadWriteMany claim (default `shared`)."""
    csi_driver: NotRequired[bool]
    """Install the FSx for Lustre CSI driver (default true; false where the cluster runs it already)."""
    tags: NotRequired[dict[str, str]]
    """Tags for every taggable resource."""


def validate(args: ExistingFsxOptions) -> None:
    checks = (
        ("file_system_id", r"fs-[0-9a-f]{8,17}", "use an id such as fs-0123456789abcdef0"),
        ("dns_name", r"fs-[0-9a-f]{8,17}\.fsx\.[a-z0-9-]+\.amazonaws\.com(\.cn)?", "use the file system's DNS name"),
        ("mount_name", r"[a-z0-9]{8}|fsx", "use the file system's mount name (8 characters, or fsx)"),
        ("security_group_id", r"sg-[0-9a-f]{8,17}", "use its security group's id, such as sg-0123456789abcdef0"),
    )
    for key, pattern, allowed in checks:
        if key == "security_group_id" and key not in args:
            continue
        value = args.get(key)
        if not isinstance(value, str) or not re.fullmatch(pattern, value):
            raise InvalidArgument(COMPONENT, key, value, allowed)
    if not args["dns_name"].startswith(args["file_system_id"] + "."):
        raise InvalidArgument(
            COMPONENT, "dns_name", args["dns_name"], f"it names another file system than {args['file_system_id']}"
        )
    if not valid_capacity(args.get("capacity_gib", DEFAULT_CAPACITY_GIB)):
        raise InvalidArgument(
            COMPONENT, "capacity_gib", args.get("capacity_gib"), "use 1200, 2400 or a multiple of 2400 GiB"
        )


def static_volume_and_claim(
    name: str,
    parent: pulumi.Resource,
    args: ExistingFsxVolumeArgs,
    claim_name: str,
    depends_on: Sequence[pulumi.Resource],
) -> k8s.core.v1.PersistentVolumeClaim:
    """A PersistentVolume naming the file system, and the claim bound to it by name (no StorageClass)."""
    size = f"{args.get('capacity_gib', DEFAULT_CAPACITY_GIB)}Gi"
    volume = k8s.core.v1.PersistentVolume(
        f"{name}-volume",
        metadata={"name": f"{args['namespace']}-{claim_name}-{args['file_system_id']}"},
        spec={
            "capacity": {"storage": size},
            "access_modes": ["ReadWriteMany"],
            "storage_class_name": "",
            "mount_options": ["flock"],
            # Deleting the stack must never delete the data of a file system it did not make.
            "persistent_volume_reclaim_policy": "Retain",
            "csi": {
                "driver": DRIVER,
                "volume_handle": args["file_system_id"],
                "volume_attributes": {"dnsname": args["dns_name"], "mountname": args["mount_name"]},
            },
        },
        opts=pulumi.ResourceOptions(parent=parent, provider=args["provider"], depends_on=list(depends_on)),
    )
    return k8s.core.v1.PersistentVolumeClaim(
        f"{name}-claim",
        metadata={"name": claim_name, "namespace": args["namespace"]},
        spec={
            "access_modes": ["ReadWriteMany"],
            "storage_class_name": "",
            "volume_name": volume.metadata.name,
            "resources": {"requests": {"storage": size}},
        },
        opts=pulumi.ResourceOptions(parent=parent, provider=args["provider"], depends_on=[volume]),
    )


class ExistingFsxVolume(pulumi.ComponentResource):
    claim_name: str
    """The ReadWriteMany claim training pods mount."""

    def __init__(self, name: str, args: ExistingFsxVolumeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        validate(args)
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        tags = dict(args.get("tags", {}))
        opened, nodes = args.get("security_group_id"), args.get("node_security_group_id")
        if opened and nodes:
            lustre_ingress(f"{name}-lustre", opened, nodes, "the EKS nodes", tags, pulumi.ResourceOptions(parent=self))
        after = waits_for(opts)
        if args.get("csi_driver", True):
            after = [csi_driver(name, self, args["provider"], versions.FSX_CSI_CHART, after)]
        self.claim_name = args.get("claim_name", DEFAULT_CLAIM_NAME)
        static_volume_and_claim(name, self, args, self.claim_name, after)
        self.register_outputs({})
