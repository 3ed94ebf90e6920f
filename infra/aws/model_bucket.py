"""ModelBucket: where models and checkpoints go, and the one role allowed to use it."""

import json
import re
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from eks_ddp.infra.aws.iam import (
    DEFAULT_ROLE_ACCESS,
    RoleAccess,
    ServiceAccountRole,
    cluster_inputs,
    policy,
    role_access,
    service_account_role,
)
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.options import waits_for

COMPONENT = "ModelBucket"
DEFAULT_SERVICE_ACCOUNT = "trainer"
CHECKPOINTS_PREFIX = "checkpoints/"
"""Where the stack's jobs put checkpoints (workloads.training_pod.artifact_arguments): the only deletable keys."""
ABORT_INCOMPLETE_UPLOADS_DAYS = 1
"""A multipart upload cut off by a lost pod leaves parts S3 bills for and no listing shows; a day is ample for one
to finish (the trainer gives its uploads 60 s at the end)."""
PRUNED_VERSIONS_DAYS = 1
"""The bucket is versioned, so a checkpoint the trainer prunes (DeleteObject) stays as a noncurrent version:
kept this long, in case one was deleted by mistake, then gone, so the checkpoints' storage stays bounded."""


class BucketOptions(TypedDict):
    """The bucket's own settings (checked before anything exists)."""

    access: NotRequired[RoleAccess]
    """How training pods get the role: pod-identity (default, EKS Pod Identity) or irsa."""
    service_account_name: NotRequired[str]
    """Name of the ServiceAccount training pods run as (default `trainer`)."""
    checkpoint_expiry_days: NotRequired[int]
    """Delete objects under `checkpoints/` older than this many days (default: keep; the trainer itself keeps its
    newest `--keep-checkpoints`)."""
    force_destroy: NotRequired[bool]
    """Let `pulumi destroy` delete a non-empty bucket (default false: models are kept)."""


class ModelBucketArgs(BucketOptions):
    cluster_name: NotRequired[pulumi.Input[str]]
    """The cluster's name (Cluster.cluster_name), with access pod-identity."""
    oidc_provider_arn: NotRequired[pulumi.Input[str]]
    """The cluster's IAM OIDC provider (Cluster.oidc_provider_arn), with access irsa."""
    oidc_issuer: NotRequired[pulumi.Input[str]]
    """The cluster's OIDC issuer (Cluster.oidc_issuer), with access irsa."""
    provider: k8s.Provider
    """Kubernetes provider of the cluster (Cluster.provider)."""
    namespace: str
    """Training namespace the ServiceAccount lives in."""
    tags: NotRequired[dict[str, str]]
    """Tags for every taggable resource."""


def tls_only_policy(bucket_arn: str) -> dict[str, Any]:
    return policy(
        [
            {
                "Sid": "DenyInsecureTransport",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [bucket_arn, f"{bucket_arn}/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ]
    )


def access_policy(bucket_arn: str) -> dict[str, Any]:
    """Read, write and list this bucket only, and delete checkpoints only: nothing else in the account."""
    return policy(
        [
            {"Sid": "ListCheckpoints", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": bucket_arn},
            # What trainer/artifacts.py calls, and nothing more (tests/infra/test_bucket_access.py records it):
            # uploads (multipart above 64 MiB, aborted by s3transfer when they fail), downloads of checkpoints and
            # of the run's history, and the deletes of checkpoints older than the newest --keep-checkpoints.
            {
                "Sid": "ReadWriteObjects",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
                "Resource": f"{bucket_arn}/*",
            },
            {
                "Sid": "PruneCheckpoints",
                "Effect": "Allow",
                "Action": ["s3:DeleteObject"],
                "Resource": f"{bucket_arn}/{CHECKPOINTS_PREFIX}*",
            },
        ]
    )


def lifecycle_rules(checkpoint_expiry_days: int | None) -> list[aws.s3.BucketLifecycleConfigurationRuleArgsDict]:
    """Always: incomplete multipart uploads aborted, and the versions of checkpoints the trainer pruned expired.
    When asked: checkpoints expired by age too."""
    checkpoints: aws.s3.BucketLifecycleConfigurationRuleArgsDict = {
        "id": "checkpoints",
        "status": "Enabled",
        "filter": {"prefix": CHECKPOINTS_PREFIX},
        "noncurrent_version_expiration": {"noncurrent_days": PRUNED_VERSIONS_DAYS},
    }
    if checkpoint_expiry_days is not None:
        checkpoints["expiration"] = {"days": checkpoint_expiry_days}
    return [
        {
            "id": "abort-incomplete-uploads",
            "status": "Enabled",
            "filter": {},
            "abort_incomplete_multipart_upload": {"days_after_initiation": ABORT_INCOMPLETE_UPLOADS_DAYS},
        },
        checkpoints,
    ]


def validate(args: BucketOptions) -> RoleAccess:
    """The way training pods get the role, once every option is checked."""
    access = role_access(args.get("access", DEFAULT_ROLE_ACCESS), COMPONENT)
    days = args.get("checkpoint_expiry_days")
    if days is not None and days < 1:
        raise InvalidArgument(
            COMPONENT,
            "checkpoint_expiry_days",
            days,
            "use a positive number of days, or leave it out to keep checkpoints",
        )
    account = args.get("service_account_name", DEFAULT_SERVICE_ACCOUNT)
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", account):
        raise InvalidArgument(
            COMPONENT, "service_account_name", account, "use a DNS-1123 subdomain (lowercase letters, digits, '-', '.')"
        )
    return access


def private_bucket(name: str, parent: pulumi.Resource, args: ModelBucketArgs, tags: dict[str, str]) -> aws.s3.Bucket:
    """The bucket: never public, encrypted with KMS, versioned, reached only over TLS, its checkpoints' old versions
    and cut-off uploads expired (lifecycle_rules)."""
    child = pulumi.ResourceOptions(parent=parent)
    bucket = aws.s3.Bucket(f"{name}-bucket", force_destroy=args.get("force_destroy", False), tags=tags, opts=child)
    aws.s3.BucketPublicAccessBlock(
        f"{name}-public-access",
        bucket=bucket.id,
        block_public_acls=True,
        block_public_policy=True,
        ignore_public_acls=True,
        restrict_public_buckets=True,
        opts=child,
    )
    aws.s3.BucketServerSideEncryptionConfiguration(
        f"{name}-encryption",
        bucket=bucket.id,
        rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "aws:kms"}, "bucket_key_enabled": True}],
        opts=child,
    )
    aws.s3.BucketVersioning(
        f"{name}-versioning", bucket=bucket.id, versioning_configuration={"status": "Enabled"}, opts=child
    )
    aws.s3.BucketPolicy(
        f"{name}-tls-only",
        bucket=bucket.id,
        policy=bucket.arn.apply(lambda arn: json.dumps(tls_only_policy(arn))),
        opts=child,
    )
    aws.s3.BucketLifecycleConfiguration(
        f"{name}-lifecycle",
        bucket=bucket.id,
        rules=lifecycle_rules(args.get("checkpoint_expiry_days")),
        opts=child,
    )
    return bucket


def service_account(
    name: str,
    parent: pulumi.Resource,
    args: ModelBucketArgs,
    account_name: str,
    granted: ServiceAccountRole,
    after: list[pulumi.Resource],
) -> k8s.core.v1.ServiceAccount:
    """The ServiceAccount training pods run as, annotated with the role where IRSA needs it."""
    identity: k8s.meta.v1.ObjectMetaArgsDict = {"name": account_name, "namespace": args["namespace"]}
    if granted.annotations:
        identity["annotations"] = granted.annotations
    return k8s.core.v1.ServiceAccount(
        f"{name}-service-account",
        metadata=identity,
        opts=pulumi.ResourceOptions(parent=parent, provider=args["provider"], depends_on=after),
    )


class ModelBucket(pulumi.ComponentResource):
    bucket: aws.s3.Bucket
    """Escape hatch: the bucket."""
    bucket_name: pulumi.Output[str]
    """The bucket's name."""
    role_arn: pulumi.Output[str]
    """The role training pods get, through EKS Pod Identity or IRSA."""
    service_account_name: str
    """The ServiceAccount the role is given to (plain, for pod specs)."""

    def __init__(self, name: str, args: ModelBucketArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        access = validate(args)
        cluster = cluster_inputs(COMPONENT, access, args)
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        tags, after = dict(args.get("tags", {})), waits_for(opts)
        self.bucket = private_bucket(name, self, args, tags)
        self.service_account_name = args.get("service_account_name", DEFAULT_SERVICE_ACCOUNT)
        account = (args["namespace"], self.service_account_name)
        granted = service_account_role(f"{name}-role", self, access, cluster, account, tags, after)
        aws.iam.RolePolicy(
            f"{name}-access",
            role=granted.role.id,
            policy=self.bucket.arn.apply(lambda arn: json.dumps(access_policy(arn))),
            opts=pulumi.ResourceOptions(parent=self),
        )
        service_account(name, self, args, self.service_account_name, granted, after)
        self.bucket_name = self.bucket.bucket
        self.role_arn = granted.role.arn
        self.register_outputs({"bucket_name": self.bucket_name, "role_arn": self.role_arn})
