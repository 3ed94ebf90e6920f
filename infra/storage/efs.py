"""EfsStorage: an encrypted EFS file system shared through access points."""

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from eks_ddp.infra.aws.iam import policy
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import versions
from eks_ddp.infra.options import waits_for
from eks_ddp.infra.storage.csi_driver import controller_account, csi_driver
from eks_ddp.infra.storage.shared_claim import (
    DEFAULT_CLAIM_NAME,
    SHARED_UID,
    SharedStorageArgs,
    storage_class_and_claim,
)

COMPONENT = "EfsStorage"
CONTROLLER_ACCOUNT = "efs-csi-controller-sa"


class EfsStorageArgs(SharedStorageArgs):
    subnet_ids: Sequence[pulumi.Input[str]]
    """Private subnets: one mount target each (one per zone)."""


def csi_policy() -> dict[str, Any]:
    """AWS's documented EFS CSI policy: access points only where the driver tagged them."""
    tag = "efs.csi.aws.com/cluster"
    return policy(
        [
            {
                "Sid": "Describe",
                "Effect": "Allow",
                "Action": [
                    "elasticfilesystem:DescribeAccessPoints",
                    "elasticfilesystem:DescribeFileSystems",
                    "elasticfilesystem:DescribeMountTargets",
                    "ec2:DescribeAvailabilityZones",
                ],
                "Resource": "*",
            },
            {
                "Sid": "CreateTagged",
                "Effect": "Allow",
                "Action": ["elasticfilesystem:CreateAccessPoint", "elasticfilesystem:TagResource"],
                "Resource": "*",
                "Condition": {"StringLike": {f"aws:RequestTag/{tag}": "true"}},
            },
            {
                "Sid": "DeleteTagged",
                "Effect": "Allow",
                "Action": "elasticfilesystem:DeleteAccessPoint",
                "Resource": "*",
                "Condition": {"StringEquals": {f"aws:ResourceTag/{tag}": "true"}},
            },
        ]
    )


def file_system(name: str, parent: pulumi.Resource, tags: dict[str, str]) -> aws.efs.FileSystem:
    return aws.efs.FileSystem(
        f"{name}-fs",
        encrypted=True,
        throughput_mode="elastic",
        tags={**tags, "Name": f"{name}-fs"},
        opts=pulumi.ResourceOptions(parent=parent),
    )


def nfs_security_group(
    name: str, parent: pulumi.Resource, args: EfsStorageArgs, tags: dict[str, str]
) -> aws.ec2.SecurityGroup:
    """The mount targets' security group, open to the nodes on NFS's port."""
    child = pulumi.ResourceOptions(parent=parent)
    group = aws.ec2.SecurityGroup(
        f"{name}-nfs",
        vpc_id=args["vpc_id"],
        description="EFS NFS from the nodes",
        tags={**tags, "Name": f"{name}-nfs"},
        opts=child,
    )
    aws.vpc.SecurityGroupIngressRule(
        f"{name}-nfs-in",
        security_group_id=group.id,
        referenced_security_group_id=args["node_security_group_id"],
        ip_protocol="tcp",
        from_port=2049,
        to_port=2049,
        description="NFS from the nodes",
        tags=tags,
        opts=child,
    )
    return group


def mount_targets(
    name: str,
    parent: pulumi.Resource,
    file_system_id: pulumi.Input[str],
    group_id: pulumi.Input[str],
    subnet_ids: Sequence[pulumi.Input[str]],
) -> list[aws.efs.MountTarget]:
    """One mount target per subnet: the driver can mount the file system only in a zone that has one."""
    return [
        aws.efs.MountTarget(
            f"{name}-target-{index}",
            file_system_id=file_system_id,
            subnet_id=subnet,
            security_groups=[group_id],
            opts=pulumi.ResourceOptions(parent=parent),
        )
        for index, subnet in enumerate(subnet_ids)
    ]


def access_point_parameters(file_system_id: pulumi.Input[str]) -> dict[str, pulumi.Input[str]]:
    """The StorageClass's: each claim gets an access point of its own, owned by the training pods' user."""
    return {
        "provisioningMode": "efs-ap",
        "fileSystemId": file_system_id,
        "directoryPerms": "700",
        # The access point's POSIX user: every operation through it, root's included, runs as this user.
        "uid": str(SHARED_UID),
        "gid": str(SHARED_UID),
    }


class EfsStorage(pulumi.ComponentResource):
    claim_name: str
    """The ReadWriteMany claim training pods mount."""
    file_system_id: pulumi.Output[str]
    """The EFS file system."""

    def __init__(self, name: str, args: EfsStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        if len(args.get("subnet_ids", [])) < 1:
            raise InvalidArgument(
                COMPONENT,
                "subnet_ids",
                list(args.get("subnet_ids", [])),
                "give at least one private subnet for a mount target",
            )
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        tags = dict(args.get("tags", {}))
        efs = file_system(name, self, tags)
        group = nfs_security_group(name, self, args, tags)
        targets = mount_targets(name, self, efs.id, group.id, args["subnet_ids"])
        account = controller_account(name, self, args, CONTROLLER_ACCOUNT, csi_policy())
        driver = csi_driver(
            name, self, args["provider"], versions.EFS_CSI_CHART, [*targets, *waits_for(opts)], account
        )
        self.claim_name = args.get("claim_name", DEFAULT_CLAIM_NAME)
        storage_class_and_claim(
            name,
            self,
            args["provider"],
            "efs.csi.aws.com",
            access_point_parameters(efs.id),
            args["namespace"],
            self.claim_name,
            100,
            [driver],
        )
        self.file_system_id = efs.id
        self.register_outputs({"file_system_id": self.file_system_id})
