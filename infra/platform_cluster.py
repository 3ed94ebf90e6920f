"""A TrainingPlatform's cluster half: a new VPC, cluster and training groups, or a cluster made elsewhere with its
groups as described. Each function returns what it made."""

from typing import TypedDict

import pulumi

from eks_ddp.infra.addons.karpenter import Karpenter, KarpenterArgs
from eks_ddp.infra.addons.karpenter_nodes import KarpenterNodePool, KarpenterNodePoolArgs
from eks_ddp.infra.aws.cluster import DEFAULT_SYSTEM_NODE_COUNT, Cluster, ClusterArgs
from eks_ddp.infra.aws.efa_node_group import EfaNodeGroup, EfaNodeGroupArgs, TrainingNodes
from eks_ddp.infra.aws.network import Network, NetworkArgs
from eks_ddp.infra.existing_cluster import ClusterFacts, ExistingClusterArgs, ExistingNodeGroup, eks_facts
from eks_ddp.infra.existing_cluster import provider as existing_provider
from eks_ddp.infra.platform_args import AutoscalerKind, TrainingPlatformArgs, cluster_options
from eks_ddp.infra.platform_groups import system_shape
from eks_ddp.infra.platform_site import Site, aws_region


class Placement(TypedDict):
    """Where a training group's nodes go in a new cluster, whichever launcher makes them."""

    cluster_name: str
    vpc_id: pulumi.Input[str]
    tags: dict[str, str]
    cluster_security_group_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]


def new_cluster(parent: pulumi.Resource, name: str, args: TrainingPlatformArgs) -> tuple[Network, Cluster, Site]:
    """The VPC, then the EKS cluster with its system node group in the VPC's subnets."""
    child = pulumi.ResourceOptions(parent=parent)
    tags = dict(args.get("tags", {}))
    network_args: NetworkArgs = {
        **args.get("network", {}),
        "tags": {**tags, **args.get("network", {}).get("tags", {})},
    }
    network = Network(f"{name}-network", network_args, opts=child)
    cluster_args: ClusterArgs = {
        **cluster_options(name, args),
        "vpc_id": network.vpc_id,
        "private_subnet_ids": network.private_subnet_ids,
        "public_subnet_ids": network.public_subnet_ids,
        "tags": tags,
    }
    cluster = Cluster(f"{name}-cluster", cluster_args, opts=child)
    facts = ClusterFacts(
        network.vpc_id, cluster.cluster_security_group_id, cluster.oidc_provider_arn, cluster.oidc_issuer
    )
    site = Site.of(
        parent, name, args, aws_region(parent), provider=cluster.provider, cluster_name=cluster.cluster_name,
        kubeconfig=cluster.kubeconfig, facts=facts, system=(cluster.system_node_group,),
    )
    return network, cluster, site


def existing_cluster(
    parent: pulumi.Resource, name: str, args: TrainingPlatformArgs, existing: ExistingClusterArgs
) -> tuple[Site, ExistingNodeGroup]:
    """A cluster made elsewhere: its provider and facts, and its system nodes as they are described."""
    region = aws_region(parent)
    provider, kubeconfig = existing_provider(name, existing, region, parent)
    cluster_name = existing.get("eks_cluster_name", "")
    facts = eks_facts(cluster_name, parent) if cluster_name else None
    site = Site.of(
        parent, name, args, region, provider=provider, cluster_name=cluster_name, kubeconfig=kubeconfig, facts=facts
    )
    return site, ExistingNodeGroup(f"{name}-system", system_shape(args), pulumi.ResourceOptions(parent=parent))


def described_groups(site: Site, args: TrainingPlatformArgs) -> dict[str, TrainingNodes]:
    """An existing cluster's training groups, as they are described."""
    return {
        shape.get("name", ""): ExistingNodeGroup(
            f"{site.name}-{shape.get('name', '')}",
            shape,
            opts=pulumi.ResourceOptions(parent=site.parent),
        )
        for shape in args.get("node_groups", [])
    }


def karpenter(site: Site, args: TrainingPlatformArgs) -> Karpenter | None:
    """The Karpenter controller on the system nodes, when it launches the training nodes."""
    if args.get("autoscaler", AutoscalerKind.CLUSTER_AUTOSCALER) != AutoscalerKind.KARPENTER:
        return None
    karpenter_args: KarpenterArgs = {
        "provider": site.provider,
        "tags": site.tags,
        "system_node_count": args.get("system_node_count", DEFAULT_SYSTEM_NODE_COUNT),
        "node_repair": args.get("karpenter_node_repair", False),
        **site.role_inputs(),
    }
    return Karpenter(f"{site.name}-karpenter", karpenter_args, opts=site.after(site.system))


def node_groups(
    site: Site, args: TrainingPlatformArgs, network: Network, cluster: Cluster, karpenter: Karpenter | None
) -> dict[str, TrainingNodes]:
    """Each training group as a managed node group, or as a Karpenter node pool, in its zone's subnet."""
    made: dict[str, TrainingNodes] = {}
    for shape in args.get("node_groups", []):
        group_name = shape.get("name", "")  # validated: a DNS label
        placed: Placement = {
            "cluster_name": site.cluster_name,
            "vpc_id": network.vpc_id,
            "tags": site.tags,
            "cluster_security_group_id": cluster.cluster_security_group_id,
            "subnet_id": network.private_subnet_by_zone[shape["availability_zone"]],
        }
        if karpenter is not None:
            pool_args: KarpenterNodePoolArgs = {
                **shape,
                **placed,
                "provider": site.provider,
                "node_role_name": karpenter.node_role_name,
            }
            made[group_name] = KarpenterNodePool(
                f"{site.name}-{group_name}", pool_args, opts=site.after([karpenter.release])
            )
            continue
        group_args: EfaNodeGroupArgs = {
            **shape,
            **placed,
            "kubernetes_version": cluster.kubernetes_version,
            "auto_repair": args.get("node_health", True),
        }
        made[group_name] = EfaNodeGroup(
            f"{site.name}-{group_name}",
            group_args,
            opts=pulumi.ResourceOptions(parent=site.parent, depends_on=[cluster]),
        )
    return made
