"""A TrainingPlatform's storage: the shared file system every training pod mounts, and the model bucket with the
service account training pods run as."""

import pulumi
import pulumi_kubernetes as k8s

from eks_ddp.infra.aws.model_bucket import DEFAULT_SERVICE_ACCOUNT, ModelBucket, ModelBucketArgs
from eks_ddp.infra.aws.network import Network
from eks_ddp.infra.platform_args import StorageKind, TrainingPlatformArgs
from eks_ddp.infra.platform_site import Site
from eks_ddp.infra.storage.efs import EfsStorage, EfsStorageArgs
from eks_ddp.infra.storage.existing_fsx import ExistingFsxVolume, ExistingFsxVolumeArgs
from eks_ddp.infra.storage.fsx import FsxLustreStorage, FsxLustreStorageArgs
from eks_ddp.infra.storage.shared_claim import SharedStorageArgs


def shared_storage(
    site: Site, args: TrainingPlatformArgs, namespace: pulumi.Resource, network: Network | None
) -> FsxLustreStorage | EfsStorage | ExistingFsxVolume | None:
    """The shared file system and the claim every training pod mounts: FSx for Lustre, an existing one, or EFS
    (None with storage none)."""
    storage = args.get("storage", StorageKind.FSX)
    in_namespace = site.after([*site.system, namespace])
    if storage == StorageKind.EXISTING_FSX:
        return ExistingFsxVolume(f"{site.name}-existing-fsx", existing_fsx(site, args), opts=in_namespace)
    if storage not in (StorageKind.FSX, StorageKind.EFS):
        return None
    assert site.facts is not None and network is not None, "validate() refuses new file systems on an existing cluster"
    base: SharedStorageArgs = {
        "provider": site.provider,
        "vpc_id": site.facts.vpc_id,
        "node_security_group_id": site.facts.security_group_id,
        "namespace": site.namespace,
        "tags": site.tags,
        **site.oidc(),
    }
    if storage == StorageKind.FSX:
        zone = args.get("node_groups", [])[0]["availability_zone"]
        fsx_args: FsxLustreStorageArgs = {
            **base,
            **args.get("fsx", {}),
            "subnet_id": network.private_subnet_by_zone[zone],
        }
        return FsxLustreStorage(f"{site.name}-fsx", fsx_args, opts=in_namespace)
    efs_args: EfsStorageArgs = {**base, "subnet_ids": list(network.private_subnet_by_zone.values())}
    return EfsStorage(f"{site.name}-efs", efs_args, opts=in_namespace)


def existing_fsx(site: Site, args: TrainingPlatformArgs) -> ExistingFsxVolumeArgs:
    """The volume's args: the file system's facts as given, and the nodes' security group to let in when the cluster
    has facts (an EKS cluster)."""
    given = args.get("existing_fsx")
    assert given is not None, "validate() refuses existing-fsx storage without existing_fsx"
    volume: ExistingFsxVolumeArgs = {
        **given,
        "provider": site.provider,
        "namespace": site.namespace,
        "tags": site.tags,
        "csi_driver": args.get("fsx_csi_driver", True),
    }
    if site.facts is not None:
        volume["node_security_group_id"] = site.facts.security_group_id
    return volume


def bucket_and_service_account(
    site: Site, args: TrainingPlatformArgs, namespace: pulumi.Resource
) -> tuple[pulumi.Output[str] | None, str]:
    """The model bucket's name and the service account whose role may use it; without the bucket, None and the same
    service account with no role, since every training pod runs as it (and NodeQuarantine grants it its rights)."""
    if not args.get("model_bucket", True):
        k8s.core.v1.ServiceAccount(
            f"{site.name}-training-service-account",
            metadata={"name": DEFAULT_SERVICE_ACCOUNT, "namespace": site.namespace},
            opts=pulumi.ResourceOptions(parent=site.parent, provider=site.provider, depends_on=[namespace]),
        )
        return None, DEFAULT_SERVICE_ACCOUNT
    bucket_args: ModelBucketArgs = {
        "provider": site.provider,
        "namespace": site.namespace,
        "tags": site.tags,
        **site.role_inputs(),
    }
    if "checkpoint_expiry_days" in args:
        bucket_args["checkpoint_expiry_days"] = args["checkpoint_expiry_days"]
    bucket = ModelBucket(f"{site.name}-models", bucket_args, opts=site.after([namespace]))
    return bucket.bucket_name, bucket.service_account_name
