"""Where a TrainingPlatform's children go, and what they read of its cluster, whoever made the cluster."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from eks_ddp.infra.aws.efa_node_group import TrainingNodes
from eks_ddp.infra.aws.iam import DEFAULT_ROLE_ACCESS, RoleAccess
from eks_ddp.infra.existing_cluster import ClusterFacts
from eks_ddp.infra.node_group import Taint
from eks_ddp.infra.platform_args import DEFAULT_NAMESPACE, TrainingPlatformArgs


class Oidc(TypedDict):
    """The cluster's OIDC provider, which IRSA roles trust."""

    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]


class RoleInputs(Oidc):
    """What a component whose service account gets a role takes: how, and the cluster's inputs for either way."""

    access: RoleAccess
    cluster_name: str


@dataclass(frozen=True)
class Site:
    """The platform (its children's parent), its name, tags and choices, and the cluster's provider and facts."""

    parent: pulumi.Resource
    name: str
    """The platform's name: its children's names start with it."""
    tags: dict[str, str]
    roles: RoleAccess
    """How service accounts get their IAM roles."""
    namespace: str
    """The training namespace's name."""
    region: pulumi.Input[str]
    provider: k8s.Provider
    cluster_name: str
    kubeconfig: pulumi.Output[str]
    facts: ClusterFacts | None
    """What AWS-side parts read of the EKS cluster (None for a cluster given by kubeconfig)."""
    system: tuple[pulumi.Resource, ...]
    """What add-ons on the system nodes wait for: the system node group, when the platform makes it."""

    @classmethod
    def of(
        cls,
        parent: pulumi.Resource,
        name: str,
        args: TrainingPlatformArgs,
        region: pulumi.Input[str],
        *,
        provider: k8s.Provider,
        cluster_name: str,
        kubeconfig: pulumi.Output[str],
        facts: ClusterFacts | None,
        system: tuple[pulumi.Resource, ...] = (),
    ) -> "Site":
        """The site of the platform `parent` on the cluster `provider` reaches, its choices read from `args`."""
        roles = RoleAccess(args.get("service_account_roles", DEFAULT_ROLE_ACCESS))
        namespace = args.get("training_namespace", DEFAULT_NAMESPACE)
        tags = dict(args.get("tags", {}))
        return cls(parent, name, tags, roles, namespace, region, provider, cluster_name, kubeconfig, facts, system)

    def after(self, resources: Sequence[pulumi.Resource]) -> pulumi.ResourceOptions:
        """A child's options: the platform as its parent, waiting for `resources`."""
        return pulumi.ResourceOptions(parent=self.parent, depends_on=list(resources))

    def oidc(self) -> Oidc:
        assert self.facts is not None, "validate() refuses AWS-side parts without an EKS cluster"
        return {"oidc_provider_arn": self.facts.oidc_provider_arn, "oidc_issuer": self.facts.oidc_issuer}

    def role_inputs(self) -> RoleInputs:
        return {"access": self.roles, "cluster_name": self.cluster_name, **self.oidc()}


def aws_region(parent: pulumi.Resource) -> pulumi.Input[str]:
    """The stack's `aws:region`; AWS is asked only when it is not set (an existing cluster given by kubeconfig is
    reached without it)."""
    configured = pulumi.Config("aws").get("region")
    return configured or aws.get_region_output(opts=pulumi.InvokeOutputOptions(parent=parent)).region


def taints_of(groups: Sequence[TrainingNodes]) -> list[Taint]:
    """Every taint of the groups: what an add-on on their nodes tolerates."""
    return [taint for group in groups for taint in group.taints]
