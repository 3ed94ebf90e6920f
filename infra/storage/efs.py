"""EfsStorage: an encrypted EFS file system shared through access points."""

import json
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from eks_ddp.infra.addons import helm
from eks_ddp.infra.aws.cluster import SYSTEM_LABEL
from eks_ddp.infra.aws.iam import irsa_role, policy
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import versions
from eks_ddp.infra.options import waits_for
from eks_ddp.infra.storage.shared_claim import SHARED_UID, SharedStorageArgs, storage_class_and_claim

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
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.get("tags", {}))
        file_system = aws.efs.FileSystem(
            f"{name}-fs", encrypted=True, throughput_mode="elastic", tags={**tags, "Name": f"{name}-fs"}, opts=child
        )
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
        targets = [
            aws.efs.MountTarget(
                f"{name}-target-{index}",
                file_system_id=file_system.id,
                subnet_id=subnet,
                security_groups=[group.id],
                opts=child,
            )
            for index, subnet in enumerate(args["subnet_ids"])
        ]
        role = irsa_role(
            f"{name}-csi-role",
            self,
            args["oidc_provider_arn"],
            args["oidc_issuer"],
            "kube-system",
            CONTROLLER_ACCOUNT,
            tags,
        )
        aws.iam.RolePolicy(f"{name}-csi-policy", role=role.id, policy=json.dumps(csi_policy()), opts=child)
        driver = helm.release(
            f"{name}-csi",
            self,
            args["provider"],
            versions.EFS_CSI_CHART,
            "kube-system",
            {
                "controller": {
                    "serviceAccount": {
                        "create": True,
                        "name": CONTROLLER_ACCOUNT,
                        "annotations": {"eks.amazonaws.com/role-arn": role.arn},
                    },
                    "nodeSelector": SYSTEM_LABEL,
                },
                "node": {"tolerateAllTaints": True},
            },
            depends_on=[*targets, *waits_for(opts)],
        )
        self.claim_name = args.get("claim_name", "shared")
        parameters: dict[str, pulumi.Input[str]] = {
            "provisioningMode": "efs-ap",
            "fileSystemId": file_system.id,
            "directoryPerms": "700",
            # The access point's POSIX user: every operation through it, root's included, runs as this user.
            "uid": str(SHARED_UID),
            "gid": str(SHARED_UID),
        }
        storage_class_and_claim(
            name,
            self,
            args["provider"],
            "efs.csi.aws.com",
            parameters,
            args["namespace"],
            self.claim_name,
            100,
            [driver],
        )
        self.file_system_id = file_system.id
        self.register_outputs({"file_system_id": self.file_system_id})
