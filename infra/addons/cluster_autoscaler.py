"""ClusterAutoscaler: scales the node groups, EFA groups from zero included."""

import json
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from eks_ddp.infra.addons import helm
from eks_ddp.infra.aws.cluster import SYSTEM_LABEL
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
from eks_ddp.infra.facts import versions
from eks_ddp.infra.options import waits_for

COMPONENT = "ClusterAutoscaler"
NAMESPACE, SERVICE_ACCOUNT = "kube-system", "cluster-autoscaler"

DESCRIBE_ACTIONS = [
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "autoscaling:DescribeTags",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
]


class ClusterAutoscalerArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    cluster_name: str
    """The EKS cluster's name (auto-discovery and the IAM condition use it)."""
    kubernetes_version: str
    """The cluster's Kubernetes minor version: the autoscaler image must match it."""
    access: NotRequired[RoleAccess]
    """How the autoscaler gets its role: pod-identity (default, EKS Pod Identity: its AWS provider's SDK reads the
    agent's credentials since cloudprovider/aws/aws-sdk-go 1.48.7, kubernetes/autoscaler #6379-#6382, December
    2023, older than every image pinned here) or irsa."""
    oidc_provider_arn: NotRequired[pulumi.Input[str]]
    """The cluster's IAM OIDC provider, with access irsa."""
    oidc_issuer: NotRequired[pulumi.Input[str]]
    """The cluster's OIDC issuer, with access irsa."""
    region: pulumi.Input[str]
    """AWS region of the cluster."""
    tags: NotRequired[dict[str, str]]
    """Tags for the IAM role."""
    provisioning_requests: NotRequired[bool]
    """Answer Kueue's ProvisioningRequests (`--enable-provisioning-requests`) and install their CRD (default false)."""


def autoscaler_policy(cluster_name: str) -> dict[str, Any]:
    """Describe anything; change only Auto Scaling groups this cluster owns."""
    return policy(
        [
            {"Sid": "Describe", "Effect": "Allow", "Action": DESCRIBE_ACTIONS, "Resource": "*"},
            {
                "Sid": "DescribeOwnNodegroups",
                "Effect": "Allow",
                "Action": "eks:DescribeNodegroup",
                "Resource": f"arn:aws:eks:*:*:nodegroup/{cluster_name}/*/*",
            },
            {
                "Sid": "ScaleOwnedGroups",
                "Effect": "Allow",
                "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
                "Resource": "*",
                "Condition": {"StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}},
            },
        ]
    )


def chart_values(args: ClusterAutoscalerArgs, image: str, granted: ServiceAccountRole) -> dict[str, Any]:
    """The chart's values: auto-discovery of this cluster's groups, the image matching its version, the service
    account's annotations (IRSA's role; none with EKS Pod Identity), the pods' (which way,
    iam.ROLE_ACCESS_ANNOTATION), and the autoscaler on the system nodes."""
    return {
        "autoDiscovery": {"clusterName": args["cluster_name"]},
        "awsRegion": args["region"],
        "image": {"tag": image},
        "rbac": {
            "serviceAccount": {
                "create": True,
                "name": SERVICE_ACCOUNT,
                "annotations": granted.annotations or {},
            }
        },
        "podAnnotations": granted.pod_annotations,
        "nodeSelector": SYSTEM_LABEL,
        # The workshop's flags.
        "extraArgs": {
            "expander": "least-waste",
            "balance-similar-node-groups": True,
            "skip-nodes-with-local-storage": False,
            "skip-nodes-with-system-pods": False,
            **({"enable-provisioning-requests": True} if args.get("provisioning_requests") else {}),
        },
    }


def provisioning_request_crd(
    name: str, parent: pulumi.Resource, provider: k8s.Provider, image: str, after: list[pulumi.Resource]
) -> k8s.yaml.v2.ConfigFile:
    """The ProvisioningRequest CRD of the autoscaler's own release (the image's version)."""
    return k8s.yaml.v2.ConfigFile(
        f"{name}-provisioning-requests",
        file=versions.PROVISIONING_REQUEST_CRD.format(version=image.removeprefix("v")),
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=after),
    )


class ClusterAutoscaler(pulumi.ComponentResource):
    release: k8s.helm.v3.Release
    """Escape hatch: the Helm release."""
    role_arn: pulumi.Output[str]
    """The autoscaler's role."""

    def __init__(self, name: str, args: ClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        image = versions.CLUSTER_AUTOSCALER_IMAGES.get(args["kubernetes_version"])
        if image is None:
            raise InvalidArgument(
                COMPONENT,
                "kubernetes_version",
                args["kubernetes_version"],
                f"an autoscaler image is pinned for {', '.join(versions.CLUSTER_AUTOSCALER_IMAGES)}",
            )
        access = role_access(args.get("access", DEFAULT_ROLE_ACCESS), COMPONENT)
        cluster = cluster_inputs(COMPONENT, access, args)
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        tags, after = args.get("tags", {}), waits_for(opts)
        account = (NAMESPACE, SERVICE_ACCOUNT)
        granted = service_account_role(f"{name}-role", self, access, cluster, account, tags, after)
        aws.iam.RolePolicy(
            f"{name}-policy",
            role=granted.role.id,
            policy=json.dumps(autoscaler_policy(args["cluster_name"])),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.provisioning_requests: k8s.yaml.v2.ConfigFile | None = None
        """The ProvisioningRequest CRD (None unless `provisioning_requests`): Kueue must start after it."""
        if args.get("provisioning_requests"):
            self.provisioning_requests = provisioning_request_crd(name, self, args["provider"], image, after)
        self.release = helm.release(
            f"{name}-chart",
            self,
            args["provider"],
            versions.CLUSTER_AUTOSCALER_CHART,
            NAMESPACE,
            chart_values(args, image, granted),
            [*after, *granted.ready],
        )
        self.role_arn = granted.role.arn
        self.register_outputs({"role_arn": self.role_arn})
