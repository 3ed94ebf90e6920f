"""FsxLustreStorage: a shared FSx for Lustre volume, provisioned by its CSI driver."""

from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_aws as aws

from eks_ddp.infra.aws.iam import policy
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import versions
from eks_ddp.infra.options import waits_for
from eks_ddp.infra.storage.csi_driver import controller_account, csi_driver
from eks_ddp.infra.storage.shared_claim import DEFAULT_CLAIM_NAME, SharedStorageArgs, storage_class_and_claim

COMPONENT = "FsxLustreStorage"
DEPLOYMENT_TYPES = ("SCRATCH_2", "PERSISTENT_2")
DEFAULT_DEPLOYMENT_TYPE = "SCRATCH_2"
DEFAULT_CAPACITY_GIB = 1200
PERSISTENT_2_THROUGHPUT = (125, 250, 500, 1000)
CONTROLLER_ACCOUNT = "fsx-csi-controller-sa"
LUSTRE_PORTS = ((988, 988), (1018, 1023))
"""TCP ports Lustre clients and servers use (FSx for Lustre user guide, "File system access control with Amazon
VPC")."""


class FsxOptions(TypedDict):
    """The file system's own settings (the stack config and the platform pass these through)."""

    deployment_type: NotRequired[str]
    """SCRATCH_2 (default) or PERSISTENT_2."""
    capacity_gib: NotRequired[int]
    """1200, 2400, then multiples of 2400 GiB (default 1200)."""
    per_unit_storage_throughput: NotRequired[int]
    """PERSISTENT_2 only: 125, 250, 500 or 1000 MB/s/TiB."""
    s3_import_path: NotRequired[str]
    """SCRATCH_2 only: s3:// path whose objects appear in the file system."""
    s3_export_path: NotRequired[str]
    """SCRATCH_2 only: s3:// path to export to."""


class FsxLustreStorageArgs(FsxOptions, SharedStorageArgs):
    subnet_id: pulumi.Input[str]
    """Private subnet of the EFA node group's zone (Lustre stays next to the nodes)."""


def valid_capacity(gib: int) -> bool:
    return gib in (1200, 2400) or (gib > 2400 and gib % 2400 == 0)


def validate(args: FsxOptions) -> None:
    kind = args.get("deployment_type", DEFAULT_DEPLOYMENT_TYPE)
    if kind not in DEPLOYMENT_TYPES:
        raise InvalidArgument(COMPONENT, "deployment_type", kind, f"use one of {', '.join(DEPLOYMENT_TYPES)}")
    capacity = args.get("capacity_gib", DEFAULT_CAPACITY_GIB)
    if not valid_capacity(capacity):
        raise InvalidArgument(COMPONENT, "capacity_gib", capacity, "use 1200, 2400 or a multiple of 2400 GiB")
    throughput = args.get("per_unit_storage_throughput")
    if kind == "PERSISTENT_2" and throughput not in PERSISTENT_2_THROUGHPUT:
        raise InvalidArgument(
            COMPONENT,
            "per_unit_storage_throughput",
            throughput,
            f"PERSISTENT_2 needs one of {PERSISTENT_2_THROUGHPUT} MB/s/TiB",
        )
    if kind == "SCRATCH_2" and throughput is not None:
        raise InvalidArgument(
            COMPONENT, "per_unit_storage_throughput", throughput, "SCRATCH_2 has a fixed throughput; leave it out"
        )
    for key in ("s3_import_path", "s3_export_path"):
        path = args.get(key)
        if path is not None and (kind != "SCRATCH_2" or not path.startswith("s3://")):
            raise InvalidArgument(
                COMPONENT,
                key,
                path,
                "give an s3:// path, with {} SCRATCH_2 (use a data repository association for PERSISTENT_2)",
                refers=["deployment_type"],
            )


def csi_policy() -> dict[str, Any]:
    """What the CSI controller needs to create, describe, update and delete file systems."""
    return policy(
        [
            {
                "Sid": "FileSystems",
                "Effect": "Allow",
                "Action": [
                    "fsx:CreateFileSystem",
                    "fsx:DeleteFileSystem",
                    "fsx:DescribeFileSystems",
                    "fsx:UpdateFileSystem",
                    "fsx:TagResource",
                ],
                "Resource": "*",
            },
            {
                "Sid": "ServiceLinkedRoles",
                "Effect": "Allow",
                "Action": ["iam:CreateServiceLinkedRole", "iam:AttachRolePolicy", "iam:PutRolePolicy"],
                "Resource": [
                    "arn:aws:iam::*:role/aws-service-role/fsx.amazonaws.com/*",
                    "arn:aws:iam::*:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*",
                ],
            },
            {
                "Sid": "DataRepository",
                "Effect": "Allow",
                "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
                "Resource": "*",
            },
        ]
    )


def lustre_ingress(
    name: str,
    group_id: pulumi.Input[str],
    source: pulumi.Input[str],
    source_described: str,
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> None:
    """Lustre's ports (LUSTRE_PORTS) open on the file system's security group to the members of `source`."""
    for low, high in LUSTRE_PORTS:
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-{low}",
            security_group_id=group_id,
            referenced_security_group_id=source,
            ip_protocol="tcp",
            from_port=low,
            to_port=high,
            description=f"Lustre {low}-{high} from {source_described}",
            tags=tags,
            opts=opts,
        )


def lustre_security_group(
    name: str, parent: pulumi.Resource, args: FsxLustreStorageArgs, tags: dict[str, str]
) -> aws.ec2.SecurityGroup:
    """The file system's security group: Lustre's ports open to the nodes and to its own servers, all out."""
    child = pulumi.ResourceOptions(parent=parent)
    group = aws.ec2.SecurityGroup(
        f"{name}-lustre",
        vpc_id=args["vpc_id"],
        description="FSx for Lustre from the nodes",
        tags={**tags, "Name": f"{name}-lustre"},
        opts=child,
    )
    for source_name, source in (("nodes", args["node_security_group_id"]), ("self", group.id)):
        lustre_ingress(f"{name}-lustre-{source_name}", group.id, source, source_name, tags, child)
    aws.vpc.SecurityGroupEgressRule(
        f"{name}-lustre-out",
        security_group_id=group.id,
        cidr_ipv4="0.0.0.0/0",
        ip_protocol="-1",
        description="replies and S3",
        tags=tags,
        opts=child,
    )
    return group


def file_system_parameters(args: FsxLustreStorageArgs, group_id: pulumi.Input[str]) -> dict[str, pulumi.Input[str]]:
    """The StorageClass's: what the driver creates each claim's file system with."""
    kind = args.get("deployment_type", DEFAULT_DEPLOYMENT_TYPE)
    parameters: dict[str, pulumi.Input[str]] = {
        "subnetId": args["subnet_id"],
        "securityGroupIds": group_id,
        "deploymentType": kind,
        "fileSystemTypeVersion": "2.15",
    }
    if kind == "PERSISTENT_2":
        parameters["perUnitStorageThroughput"] = str(args.get("per_unit_storage_throughput"))
    for key, parameter in (("s3_import_path", "s3ImportPath"), ("s3_export_path", "s3ExportPath")):
        if key in args:
            parameters[parameter] = str(args.get(key))
    return parameters


class FsxLustreStorage(pulumi.ComponentResource):
    claim_name: str
    """The ReadWriteMany claim training pods mount."""
    security_group_id: pulumi.Output[str]
    """The Lustre security group."""

    def __init__(self, name: str, args: FsxLustreStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        validate(args)
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        tags = dict(args.get("tags", {}))
        group = lustre_security_group(name, self, args, tags)
        account = controller_account(name, self, args, CONTROLLER_ACCOUNT, csi_policy())
        driver = csi_driver(name, self, args["provider"], versions.FSX_CSI_CHART, waits_for(opts), account)
        self.claim_name = args.get("claim_name", DEFAULT_CLAIM_NAME)
        storage_class_and_claim(
            name,
            self,
            args["provider"],
            "fsx.csi.aws.com",
            file_system_parameters(args, group.id),
            args["namespace"],
            self.claim_name,
            args.get("capacity_gib", DEFAULT_CAPACITY_GIB),
            [driver],
            ["flock"],
        )
        self.security_group_id = group.id
        self.register_outputs({"security_group_id": self.security_group_id})
