"""KarpenterNodePool: one training group's nodes launched by Karpenter: an EC2NodeClass and a NodePool (1.14.1).

The manifests come from pure functions, which tests validate against the CRDs in upstream/schemas and the rules
encoded here from aws/karpenter-provider-aws v1.14.1:
- pkg/providers/launchtemplate/launchtemplate.go (generateNetworkInterfaces): with `networkInterfaces` set,
  each entry's type goes to EC2 unchanged, and the CRD's types are `interface` and `efa-only` only: card 0
  gets EFA from an `efa-only` entry at device 1 beside the primary ENA interface, every other card from an
  `efa-only` entry at device 0 (EC2 user guide, "Maximize network bandwidth ... with multiple network cards");
- the EC2NodeClass CRD's CEL rules: the primary interface is card 0 / device 0 / `interface`, at most one
  `efa-only` per card, no card/device pair twice; exactly one of `role` and `instanceProfile`; no template label
  in the domains Karpenter keeps for itself;
- pkg/providers/instancetype/types.go (efas): with `networkInterfaces` set, a node offers as many
  `vpc.amazonaws.com/efa` as it has `efa-only` entries, so a pod requesting one per card needs every card's.
The group's EFA security group and placement group are the managed node group's (infra.aws.efa_node_group).
"""

import re
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired

import pulumi
import pulumi_kubernetes as k8s

from eks_ddp.infra.aws.efa_node_group import TrainingNodes, efa_fabric, node_security_groups
from eks_ddp.infra.aws.efa_node_group import validate as validate_group
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import versions
from eks_ddp.infra.facts.allocatable import NodeLauncher
from eks_ddp.infra.facts.catalogue import InstanceType
from eks_ddp.infra.facts.efa_cards import efa_cards
from eks_ddp.infra.node_group import KUBERNETES_EFFECT, CapacityType, NodeGroup, NodeGroupShape, Taint, TaintEffect
from eks_ddp.infra.options import waits_for

NODE_CLASS_API, NODE_POOL_API = "karpenter.k8s.aws/v1", "karpenter.sh/v1"
COMPONENT = "KarpenterNodePool"
CAPACITY = {CapacityType.ON_DEMAND: "on-demand", CapacityType.SPOT: "spot", CapacityType.CAPACITY_BLOCK: "reserved"}
# Template labels Karpenter refuses (the NodePool CRD's CEL rules): its own domains, but for the labels it lets
# users set, and the hostname.
RESERVED_LABEL_DOMAINS = ("karpenter.sh", "karpenter.k8s.aws")
ALLOWED_RESERVED_LABELS = {
    "karpenter.sh/capacity-type",
    "karpenter.k8s.aws/instance-tenancy",
    "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-id",
}


def network_interfaces(cards: int) -> list[dict[str, Any]]:
    """The primary ENA interface, and one EFA device per network card."""
    primary = {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}
    efa = [
        {"networkCardIndex": card, "deviceIndex": 1 if card == 0 else 0, "interfaceType": "efa-only"}
        for card in efa_cards(cards)
    ]
    return [primary, *efa]


def efa_only_on_card_zero(cards: int) -> int:
    """`efa-only` interfaces on card 0: each takes an ENI from the pods' IP addresses (infra.facts.allocatable)."""
    return sum(1 for i in network_interfaces(cards) if i["networkCardIndex"] == 0 and i["interfaceType"] == "efa-only")


def interface_errors(interfaces: Sequence[Mapping[str, Any]]) -> list[str]:
    """The EC2NodeClass CRD's CEL rules on `networkInterfaces` (jsonschema does not run CEL)."""
    errors = []
    if interfaces and not any(
        (i["networkCardIndex"], i["deviceIndex"], i["interfaceType"]) == (0, 0, "interface") for i in interfaces
    ):
        errors.append("networkInterfaces must include a primary interface with interfaceType='interface'")
    pairs = [(i["networkCardIndex"], i["deviceIndex"]) for i in interfaces]
    efa_cards = [i["networkCardIndex"] for i in interfaces if i["interfaceType"] == "efa-only"]
    if len(set(pairs)) != len(pairs) or len(set(efa_cards)) != len(efa_cards):
        errors.append("no duplicate card/device pairs, and at most one efa-only interface per network card")
    return errors


def label_errors(labels: Mapping[str, str]) -> list[str]:
    """The NodePool CRD's CEL rules on `template.metadata.labels`."""
    return [
        f"label {key!r} is restricted: Karpenter sets it"
        for key in labels
        if key == "kubernetes.io/hostname"
        or (key.split("/", 1)[0].endswith(RESERVED_LABEL_DOMAINS) and key not in ALLOWED_RESERVED_LABELS)
    ]


def validate(group: NodeGroup, instance: InstanceType) -> None:
    """What Karpenter refuses beyond a node group's own checks (infra.node_group NodeGroup.validate)."""
    for problem in label_errors(group.node_labels(instance)):
        raise InvalidArgument(COMPONENT, "labels", dict(group.labels), problem)


def ami_alias(release_version: str | None) -> str:
    """The AL2023 family at a pinned release: the group's `release_version` date, else the EFA floor.

    Karpenter picks the NVIDIA or Neuron variant of the release for accelerated types; `@latest` would let every
    AMI release drift the nodes.
    """
    match = re.fullmatch(r"\d+\.\d+\.\d+-(\d{8})", release_version or "")
    return f"al2023@v{match.group(1) if match else versions.EFA_STANDARD_AMI_FLOOR}"


def node_class(
    name: str,
    instance: InstanceType,
    efa: bool,
    role_name: Any,
    subnet_id: Any,
    security_group_ids: Sequence[Any],
    placement_group_name: Any = None,
    capacity_reservation_id: str | None = None,
    root_volume_gib: int = 100,
    metadata_hop_limit: int = 1,
    release_version: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The group's EC2NodeClass: its AMI pinned, its one subnet, IMDSv2, an encrypted root, EFA on every card."""
    spec: dict[str, Any] = {
        "role": role_name,
        "amiSelectorTerms": [{"alias": ami_alias(release_version)}],
        "subnetSelectorTerms": [{"id": subnet_id}],
        "securityGroupSelectorTerms": [{"id": group} for group in security_group_ids],
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpTokens": "required",
            "httpPutResponseHopLimit": metadata_hop_limit,
        },
        "blockDeviceMappings": [
            {
                "deviceName": "/dev/xvda",
                "ebs": {"volumeSize": f"{root_volume_gib}Gi", "volumeType": "gp3", "encrypted": True},
            }
        ],
        "tags": dict(tags or {}),
    }
    if efa:
        spec["networkInterfaces"] = network_interfaces(instance.network_cards)
    if placement_group_name is not None:
        spec["placementGroupSelector"] = {"name": placement_group_name}
    if capacity_reservation_id is not None:
        spec["capacityReservationSelectorTerms"] = [{"id": capacity_reservation_id}]
    return {"apiVersion": NODE_CLASS_API, "kind": "EC2NodeClass", "metadata": {"name": name}, "spec": spec}


def node_pool(
    name: str,
    instance: InstanceType,
    zone: str,
    capacity: CapacityType,
    labels: Mapping[str, str],
    taints: Sequence[Taint],
    max_size: int,
    reserved: bool = False,
) -> dict[str, Any]:
    """The group's NodePool: its one type and zone, its labels and taints, at most `max_size` nodes, and never
    a disruption of a node that runs a pod (consolidation only when empty, no voluntary disruption budget).

    `reserved`: the nodes come from the node class's capacity reservation only (Karpenter's `reserved` type).
    """
    requirements = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance.name]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
        {
            "key": "karpenter.sh/capacity-type",
            "operator": "In",
            "values": ["reserved" if reserved else CAPACITY[capacity]],
        },
    ]
    return {
        "apiVersion": NODE_POOL_API,
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name},
                    "requirements": requirements,
                    "taints": [
                        {
                            "key": t["key"],
                            "value": t.get("value", ""),
                            "effect": KUBERNETES_EFFECT[TaintEffect(t["effect"])],
                        }
                        for t in taints
                    ],
                    "expireAfter": "Never",  # a node is never recycled under a running job
                },
            },
            "limits": {"cpu": str(instance.vcpus * max_size)},
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": "10m",
                "budgets": [{"nodes": "0", "reasons": ["Drifted", "Underutilized"]}],
            },
        },
    }


class KarpenterNodePoolArgs(NodeGroupShape):
    cluster_name: str
    """The EKS cluster's name."""
    vpc_id: pulumi.Input[str]
    """The cluster's VPC (for the EFA security group)."""
    cluster_security_group_id: pulumi.Input[str]
    """The EKS cluster security group, on every node beside the EFA group."""
    subnet_id: pulumi.Input[str]
    """The private subnet of `availability_zone`, and only that one."""
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    node_role_name: pulumi.Input[str]
    """The role Karpenter's nodes get (Karpenter.node_role_name, which has the cluster's access entry); what
    installs the NodePool and EC2NodeClass CRDs (Karpenter.release) goes in `opts.depends_on`."""
    tags: NotRequired[Mapping[str, str]]
    """Tags for every taggable resource (and the nodes)."""


class KarpenterNodePool(TrainingNodes):
    """A training group as Karpenter nodes: the same shape, labels, taints and EFA setup as an EfaNodeGroup.

    `min_size` and `desired_size` have no effect: Karpenter launches nodes for pending pods and removes empty ones.
    """

    node_pool_name: str
    """The NodePool's (and EC2NodeClass's) name."""

    def __init__(self, name: str, args: KarpenterNodePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        group, instance = validate_group(args, args.get("cluster_name"))
        validate(group, instance)
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        warm = {key: args.get(key) for key in ("min_size", "desired_size") if args.get(key)}
        if warm:
            pulumi.log.warn(
                f"{COMPONENT} {name}: {warm} has no effect: Karpenter launches nodes for pending pods "
                "and keeps no idle ones",
                self,
            )
        tags = dict(args.get("tags", {}))
        self._take_shape(args, group, instance, NodeLauncher.KARPENTER)
        self.security_group_id, self.placement_group_name = efa_fabric(name, self, group, args["vpc_id"], tags)
        self.node_pool_name = name
        nodes = node_class(
            name,
            instance,
            group.efa,
            args["node_role_name"],
            args["subnet_id"],
            node_security_groups(args["cluster_security_group_id"], self.security_group_id),
            self.placement_group_name,
            group.capacity_reservation_id,
            group.root_volume_gib,
            group.metadata_hop_limit,
            group.release_version,
            tags,
        )
        pool = node_pool(
            name,
            instance,
            args["availability_zone"],
            CapacityType(group.capacity_type),
            self.labels,
            self.taints,
            self.max_size,
            reserved=group.capacity_reservation_id is not None,
        )
        node_class_resource = self._apply(nodes, args, waits_for(opts))
        self._apply(pool, args, [*waits_for(opts), node_class_resource])
        self.register_outputs({})

    def _apply(
        self, manifest: dict[str, Any], args: KarpenterNodePoolArgs, after: list[pulumi.Resource]
    ) -> pulumi.Resource:
        opts = pulumi.ResourceOptions(parent=self, provider=args["provider"], depends_on=after)
        return k8s.apiextensions.CustomResource(
            f"{manifest['metadata']['name']}-{manifest['kind'].lower()}",
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=opts,
        )
