"""CloudWatchObservability: the `amazon-cloudwatch-observability` EKS add-on (Container Insights, with its GPU and
EFA metrics) and the IRSA role of its agent (eks-ddp:monitoring cloudwatch).

The add-on runs the CloudWatch agent as `amazon-cloudwatch/cloudwatch-agent` (EKS user guide, "Install the
CloudWatch agent with the Amazon CloudWatch Observability EKS add-on"); AWS's managed
CloudWatchAgentServerPolicy is what that guide attaches.
"""

from typing import NotRequired, TypedDict

import pulumi
import pulumi_aws as aws

from eks_ddp.infra.aws.iam import irsa_role
from eks_ddp.infra.facts import versions
from eks_ddp.infra.options import waits_for

COMPONENT = "CloudWatchObservability"
ADDON = "amazon-cloudwatch-observability"
NAMESPACE, SERVICE_ACCOUNT = "amazon-cloudwatch", "cloudwatch-agent"
AGENT_POLICY = "arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy"


class CloudWatchObservabilityArgs(TypedDict):
    cluster_name: str
    """The EKS cluster's name."""
    oidc_provider_arn: pulumi.Input[str]
    """The cluster's IAM OIDC provider."""
    oidc_issuer: pulumi.Input[str]
    """The cluster's OIDC issuer."""
    tags: NotRequired[dict[str, str]]
    """Tags for the role and the add-on."""


class CloudWatchObservability(pulumi.ComponentResource):
    addon: aws.eks.Addon
    """Escape hatch: the add-on."""

    def __init__(
        self, name: str, args: CloudWatchObservabilityArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        tags = dict(args.get("tags", {}))
        role = irsa_role(
            f"{name}-role", self, args["oidc_provider_arn"], args["oidc_issuer"], NAMESPACE, SERVICE_ACCOUNT, tags
        )
        attached = aws.iam.RolePolicyAttachment(
            f"{name}-agent-policy", role=role.name, policy_arn=AGENT_POLICY, opts=pulumi.ResourceOptions(parent=self)
        )
        self.addon = aws.eks.Addon(
            f"{name}-addon",
            cluster_name=args["cluster_name"],
            addon_name=ADDON,
            addon_version=versions.ADDON_VERSIONS[ADDON],
            service_account_role_arn=role.arn,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*waits_for(opts), attached]),
        )
        self.register_outputs({})
