"""Cluster: the EKS control plane, its managed add-ons, admin access and a system node group."""

import json
import re
from collections.abc import Sequence
from typing import NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from eks_ddp.infra.aws.iam import node_role
from eks_ddp.infra.aws.launch_template import secure_launch_template, template_reference
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import instance_facts, versions
from eks_ddp.infra.facts.instance_facts import ami_type

COMPONENT = "Cluster"
LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
# Every node carries its group's name: the system nodes "system", a training group's nodes the group's name.
GROUP_LABEL = "eks-ddp/node-group"
SYSTEM_LABEL = {GROUP_LABEL: "system"}
DEFAULT_SYSTEM_INSTANCE_TYPE = "m7g.large"
DEFAULT_SYSTEM_NODE_COUNT = 2
NETWORK_ADDONS = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
"""The managed add-ons nodes need before they can be ready (CoreDNS comes after the system nodes)."""
# The VPC CNI's network policy agent enforces NetworkPolicies only when its add-on turns it on (EKS user guide,
# "Restrict Pod network traffic with Kubernetes network policies": configuration value `enableNetworkPolicy`).
ADDON_CONFIGURATION = {"vpc-cni": json.dumps({"enableNetworkPolicy": "true"})}


class ClusterOptions(TypedDict):
    """The cluster's own settings, independent of the network it runs in (checked before anything exists)."""

    cluster_name: NotRequired[str]
    """The EKS cluster's name (default: the component's name)."""
    kubernetes_version: NotRequired[str]
    """Kubernetes minor version, one in EKS standard support (default versions.DEFAULT_KUBERNETES_VERSION)."""
    admin_principal_arns: NotRequired[Sequence[str]]
    """IAM roles or users given cluster-admin through EKS access entries."""
    private_endpoint_only: NotRequired[bool]
    """Serve the Kubernetes API only inside the VPC (default false)."""
    public_access_cidrs: NotRequired[Sequence[str]]
    """CIDRs allowed to reach a public API endpoint (default anywhere)."""
    log_types: NotRequired[Sequence[str]]
    """Control-plane log types sent to CloudWatch (default all five)."""
    system_instance_type: NotRequired[str]
    """Instance type of the system node group for operators, any architecture (default m7g.large)."""
    system_node_count: NotRequired[int]
    """Nodes in the system node group (default 2, one per zone for resilience)."""
    tags: NotRequired[dict[str, str]]
    """Tags for every taggable resource."""


class ClusterArgs(ClusterOptions):
    vpc_id: pulumi.Input[str]
    """The VPC (from Network)."""
    private_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    """Private subnets for the control plane's interfaces and the system nodes."""
    public_subnet_ids: NotRequired[pulumi.Input[Sequence[pulumi.Input[str]]]]
    """Public subnets for internet-facing load balancers."""


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("-")[0])[:3])


def eks_name(name: str, args: ClusterOptions) -> str:
    """The EKS cluster's name: `cluster_name`, else the component's."""
    return args.get("cluster_name", name)


def validate(name: str, args: ClusterOptions) -> None:
    cluster_name = eks_name(name, args)
    if not re.fullmatch(r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}", cluster_name):
        raise InvalidArgument(
            COMPONENT,
            "cluster_name",
            cluster_name,
            "use 1-100 letters, digits, '-' or '_', starting with a letter or digit",
        )
    version = args.get("kubernetes_version", versions.DEFAULT_KUBERNETES_VERSION)
    if version not in versions.SUPPORTED_KUBERNETES_VERSIONS:
        supported = ", ".join(versions.SUPPORTED_KUBERNETES_VERSIONS)
        raise InvalidArgument(
            COMPONENT, "kubernetes_version", version, f"use one of {supported} (EKS standard support)"
        )
    for arn in args.get("admin_principal_arns", []):
        if not re.fullmatch(r"arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+", arn):
            raise InvalidArgument(
                COMPONENT,
                "admin_principal_arns",
                arn,
                "give IAM role or user ARNs such as arn:aws:iam::123456789012:role/admin",
            )
    unknown = sorted(set(args.get("log_types", LOG_TYPES)) - set(LOG_TYPES))
    if unknown:
        raise InvalidArgument(COMPONENT, "log_types", unknown, f"use some of {', '.join(LOG_TYPES)}")
    instance_facts.check_name(
        COMPONENT, "system_instance_type", args.get("system_instance_type", DEFAULT_SYSTEM_INSTANCE_TYPE)
    )
    count = args.get("system_node_count", DEFAULT_SYSTEM_NODE_COUNT)
    if not 1 <= count <= 10:
        raise InvalidArgument(COMPONENT, "system_node_count", count, "use 1 to 10")
    if args.get("private_endpoint_only") and args.get("public_access_cidrs"):
        raise InvalidArgument(
            COMPONENT,
            "public_access_cidrs",
            list(args.get("public_access_cidrs", [])),
            "a private-only endpoint has no public access",
        )
    pinned_cni = versions.ADDON_VERSIONS["vpc-cni"]
    if pinned_cni is not None and _version_tuple(pinned_cni) < versions.MINIMUM_VPC_CNI:
        raise InvalidArgument(
            COMPONENT, "versions.ADDON_VERSIONS['vpc-cni']", pinned_cni, "efa-only interfaces need vpc-cni >= 1.18.4"
        )


def admins_besides_deployer(arns: Sequence[str], parent: pulumi.Resource) -> list[str]:
    """The admin principals without the one running `pulumi up`.

    pulumi-eks always makes the cluster's creator an admin
    (`bootstrapClusterCreatorAdminPermissions`), so a second access entry for the
    same principal fails with ResourceInUseException. The deployer's IAM role (with
    its path) is the issuer of its STS session.
    """
    if not arns:
        return []
    invoke = pulumi.InvokeOptions(parent=parent)
    caller = aws.get_caller_identity(opts=invoke).arn
    deployer = aws.iam.get_session_context(arn=caller, opts=invoke).issuer_arn
    if deployer in arns:
        pulumi.log.warn(
            f"eks-ddp: {deployer} deploys this stack and is already a cluster admin (pulumi-eks makes "
            "the creator one); no second access entry is created for it",
            parent,
        )
    return [arn for arn in arns if arn != deployer]


def secrets_key(name: str, parent: pulumi.Resource, cluster_name: str, tags: dict[str, str]) -> aws.kms.Key:
    return aws.kms.Key(
        f"{name}-secrets",
        description=f"EKS secrets encryption for {cluster_name}",
        enable_key_rotation=True,
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )


def control_plane(
    name: str, parent: pulumi.Resource, args: ClusterArgs, version: str, key: aws.kms.Key, tags: dict[str, str]
) -> eks.Cluster:
    """The pulumi-eks cluster: API authentication, an OIDC provider, no node group or add-on of its own."""
    private_only = args.get("private_endpoint_only", False)
    return eks.Cluster(
        f"{name}-eks",
        name=eks_name(name, args),
        version=version,
        vpc_id=args["vpc_id"],
        private_subnet_ids=args["private_subnet_ids"],
        public_subnet_ids=args.get("public_subnet_ids"),
        authentication_mode=eks.AuthenticationMode.API,
        create_oidc_provider=True,
        skip_default_node_group=True,
        # Managed node groups use the EKS cluster security group; pulumi-eks's own node group would be unused.
        skip_default_security_groups=True,
        endpoint_private_access=True,
        endpoint_public_access=not private_only,
        public_access_cidrs=None if private_only else args.get("public_access_cidrs"),
        enabled_cluster_log_types=list(args.get("log_types", LOG_TYPES)),
        encryption_config_key_arn=key.arn,
        # The add-ons are EKS managed add-ons we create and pin ourselves (managed_addon).
        bootstrap_self_managed_addons=False,
        use_default_vpc_cni=True,
        coredns_addon_options={"enabled": False},
        kube_proxy_addon_options={"enabled": False},
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )


def admin_access(
    name: str, parent: pulumi.Resource, cluster: eks.Cluster, args: ClusterArgs, tags: dict[str, str]
) -> list[aws.eks.AccessPolicyAssociation]:
    """Cluster-admin for each of `admin_principal_arns` but the deployer (admins_besides_deployer): an access entry
    and the admin policy's association with it."""
    cluster_name = eks_name(name, args)
    associations = []
    for index, arn in enumerate(admins_besides_deployer(args.get("admin_principal_arns", []), parent)):
        entry = aws.eks.AccessEntry(
            f"{name}-admin-{index}",
            cluster_name=cluster_name,
            principal_arn=arn,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=parent, depends_on=[cluster]),
        )
        associations.append(
            aws.eks.AccessPolicyAssociation(
                f"{name}-admin-{index}",
                cluster_name=cluster_name,
                principal_arn=arn,
                policy_arn=ADMIN_POLICY,
                access_scope={"type": "cluster"},
                opts=pulumi.ResourceOptions(parent=parent, depends_on=[entry]),
            )
        )
    return associations


def managed_addon(
    name: str,
    parent: pulumi.Resource,
    cluster_name: str,
    addon: str,
    after: Sequence[pulumi.Resource],
    tags: dict[str, str],
) -> aws.eks.Addon:
    """An EKS managed add-on at its pinned version (versions.ADDON_VERSIONS), with its ADDON_CONFIGURATION."""
    return aws.eks.Addon(
        f"{name}-{addon}",
        cluster_name=cluster_name,
        addon_name=addon,
        addon_version=versions.ADDON_VERSIONS[addon],
        configuration_values=ADDON_CONFIGURATION.get(addon),
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="OVERWRITE",
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(after)),
    )


def system_node_group(
    name: str,
    parent: pulumi.Resource,
    args: ClusterArgs,
    after: Sequence[pulumi.Resource],
    tags: dict[str, str],
) -> aws.eks.NodeGroup:
    """The managed node group the operators, the autoscaler and CoreDNS run on, labelled SYSTEM_LABEL."""
    role = node_role(f"{name}-system-role", parent, tags)
    template = secure_launch_template(f"{name}-system-template", parent, tags, hop_limit=1, volume_gib=50)
    system_type = args.get("system_instance_type", DEFAULT_SYSTEM_INSTANCE_TYPE)
    count = args.get("system_node_count", DEFAULT_SYSTEM_NODE_COUNT)
    return aws.eks.NodeGroup(
        f"{name}-system",
        cluster_name=eks_name(name, args),
        node_role_arn=role.arn,
        subnet_ids=args["private_subnet_ids"],
        instance_types=[system_type],
        ami_type=ami_type(instance_facts.describe(system_type, pulumi.InvokeOptions(parent=parent))),
        scaling_config={"min_size": count, "max_size": count, "desired_size": count},
        launch_template=template_reference(template),
        labels=SYSTEM_LABEL,
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(after)),
    )


class Cluster(pulumi.ComponentResource):
    cluster: eks.Cluster
    """Escape hatch: the pulumi-eks cluster."""
    cluster_name: str
    """The EKS cluster's name (plain: it names autoscaler tags)."""
    kubernetes_version: str
    """The control plane's Kubernetes minor version."""
    provider: k8s.Provider
    """Kubernetes provider for this cluster (server-side apply)."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig (secret); it runs `aws eks get-token`, so users need the AWS CLI."""
    cluster_security_group_id: pulumi.Output[str]
    """The EKS-managed cluster security group."""
    oidc_provider_arn: pulumi.Output[str]
    """The IAM OIDC provider, for IRSA roles."""
    oidc_issuer: pulumi.Output[str]
    """The OIDC issuer host and path (no scheme), for IRSA conditions."""
    system_node_group: aws.eks.NodeGroup
    """The system node group (operators, autoscaler, CoreDNS)."""

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        validate(name, args)
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        tags = dict(args.get("tags", {}))
        self.cluster_name = eks_name(name, args)
        self.kubernetes_version = args.get("kubernetes_version", versions.DEFAULT_KUBERNETES_VERSION)
        key = secrets_key(name, self, self.cluster_name, tags)
        self.cluster = control_plane(name, self, args, self.kubernetes_version, key, tags)
        admin_access(name, self, self.cluster, args, tags)
        network_addons = [
            managed_addon(name, self, self.cluster_name, addon, [self.cluster], tags) for addon in NETWORK_ADDONS
        ]
        self.system_node_group = system_node_group(name, self, args, network_addons, tags)
        # CoreDNS needs nodes to schedule on, or the add-on stays degraded.
        managed_addon(name, self, self.cluster_name, "coredns", [self.system_node_group], tags)
        self.kubeconfig = pulumi.Output.secret(self.cluster.kubeconfig_json)
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.cluster_security_group_id = self.cluster.cluster_security_group_id
        self.oidc_provider_arn = self.cluster.oidc_provider_arn
        self.oidc_issuer = self.cluster.oidc_issuer
        self.register_outputs(
            {
                "kubeconfig": self.kubeconfig,
                "cluster_security_group_id": self.cluster_security_group_id,
                "oidc_provider_arn": self.oidc_provider_arn,
            }
        )
