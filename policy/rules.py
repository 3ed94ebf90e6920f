"""The checks of the policy pack, as pure functions over resource inputs, each with its name and what it asks.

Each resource rule takes the engine's view of one resource (type and camelCase inputs) and returns what is wrong
with it; each stack rule takes every resource of the stack. The pack (policy/pack.py) wraps them for
`pulumi preview --policy-pack policy`, and tests call them directly. The checks live by what they guard: AWS
resources (policy.aws_rules), IAM (policy.iam_rules), Kubernetes objects (policy.kubernetes_rules), the stack's pods
(policy.stack_rules) and its EFA nodes (policy.efa_groups).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from eks_ddp.policy import aws_rules, iam_rules, kubernetes_rules
from eks_ddp.policy.efa_groups import efa_groups_consistent
from eks_ddp.policy.resources import Props, StackResource
from eks_ddp.policy.stack_rules import pods_denied_by_default, training_jobs_queued


@dataclass(frozen=True)
class ResourceRule:
    name: str
    description: str
    types: tuple[str, ...]
    check: Callable[[str, Props], list[str]]


@dataclass(frozen=True)
class StackRule:
    name: str
    description: str
    check: Callable[[Sequence[StackResource]], list[str]]


RESOURCE_RULES: Sequence[ResourceRule] = (
    ResourceRule(
        "s3-public-access-blocked",
        "S3 public access blocks block everything.",
        ("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",),
        aws_rules.bucket_public_access_blocked,
    ),
    ResourceRule(
        "s3-encrypted",
        "S3 buckets encrypt by default.",
        ("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",),
        aws_rules.bucket_encrypted,
    ),
    ResourceRule(
        "s3-tls-only",
        "S3 bucket policies deny requests without TLS.",
        ("aws:s3/bucketPolicy:BucketPolicy",),
        aws_rules.bucket_tls_only,
    ),
    ResourceRule(
        "launch-template-hardened",
        "Launch templates require IMDSv2 and encrypt EBS.",
        ("aws:ec2/launchTemplate:LaunchTemplate",),
        aws_rules.launch_template_hardened,
    ),
    ResourceRule(
        "no-open-ingress",
        "No security group ingress from 0.0.0.0/0 or ::/0.",
        ("aws:ec2/securityGroup:SecurityGroup", "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"),
        aws_rules.no_open_ingress,
    ),
    ResourceRule(
        "eks-encrypted-and-logged",
        "EKS clusters encrypt secrets and log the control plane.",
        ("eks:index:Cluster", "aws:eks/cluster:Cluster"),
        aws_rules.eks_encrypted_and_logged,
    ),
    ResourceRule(
        "iam-oidc-trust-conditions",
        "Roles trusted through OIDC pin `sub` and `aud`.",
        ("aws:iam/role:Role",),
        iam_rules.oidc_trust_conditions,
    ),
    ResourceRule(
        "iam-no-wildcard-admin",
        'No "Action": "*" on "Resource": "*".',
        ("aws:iam/rolePolicy:RolePolicy", "aws:iam/policy:Policy"),
        iam_rules.no_wildcard_admin,
    ),
    ResourceRule(
        "ecr-scanned-and-immutable",
        "ECR repositories scan on push and have immutable tags.",
        ("aws:ecr/repository:Repository",),
        aws_rules.ecr_scanned_and_immutable,
    ),
    ResourceRule(
        "iam-pod-identity-trust-scoped",
        "Roles trusted by EKS Pod Identity are scoped to a namespace and service account.",
        ("aws:iam/role:Role",),
        iam_rules.pod_identity_trust_scoped,
    ),
    ResourceRule(
        "namespace-pod-security",
        "Namespaces enforce the baseline or restricted Pod Security Standard.",
        ("kubernetes:core/v1:Namespace",),
        kubernetes_rules.namespace_pod_security,
    ),
    ResourceRule(
        "pytorchjob-sane",
        "PyTorchJobs name a `pytorch` container, set nprocPerNode, and request EFA on EFA nodes.",
        ("kubernetes:kubeflow.org/v1:PyTorchJob",),
        kubernetes_rules.pytorchjob_sane,
    ),
    ResourceRule(
        "trainjob-sane",
        "TrainJobs set numProcPerNode.",
        ("kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob",),
        kubernetes_rules.trainjob_sane,
    ),
    ResourceRule(
        "training-runtime-efa",
        "Training runtimes request EFA on EFA nodes.",
        ("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime",),
        kubernetes_rules.training_runtime_sane,
    ),
)

STACK_RULES: Sequence[StackRule] = (
    StackRule(
        "efa-node-groups-consistent",
        "EFA node groups and Karpenter node classes sit in one subnet, in a cluster placement group, with a "
        "self-referencing security group (node classes: EFA on every card).",
        efa_groups_consistent,
    ),
    StackRule(
        "pods-denied-by-default",
        "Every object that makes pods sits in a namespace with a default-deny NetworkPolicy.",
        pods_denied_by_default,
    ),
    StackRule(
        "training-jobs-queued",
        "With Kueue's queues in the stack, every job on a training group is labelled for one of them.",
        training_jobs_queued,
    ),
)
