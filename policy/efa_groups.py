"""The policy pack's check of EFA nodes across the stack: managed node groups through their launch templates,
Karpenter's node classes through their NodePools (EFA on every card: infra.facts.efa_cards)."""

from collections.abc import Callable, Sequence

from eks_ddp.infra.facts.efa_cards import NODE_CLASS, NODE_POOL, cards_with_efa, catalogue_cards, uncovered_types
from eks_ddp.policy.resources import StackResource

SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
SECURITY_GROUP_RULES = (
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
)


def efa_groups_consistent(resources: Sequence[StackResource]) -> list[str]:
    """Node groups (and Karpenter node classes) with EFA interfaces: one subnet, a cluster placement group (unless a
    reservation is used), and a security group on the interfaces with all-traffic rules to and from itself."""
    by_urn = {r.urn: r for r in resources}
    rules = [r for r in resources if r.type in SECURITY_GROUP_RULES]

    def self_referencing(group_urn: str) -> bool:
        """An all-traffic rule from the group to itself in each direction."""
        return all(
            any(
                rule.type == kind
                and rule.props.get("ipProtocol") == "-1"
                and rule.referenced("securityGroupId") == {group_urn}
                and rule.referenced("referencedSecurityGroupId") == {group_urn}
                for rule in rules
            )
            for kind in SECURITY_GROUP_RULES
        )

    problems = efa_node_classes_consistent(resources, self_referencing)
    for node_group in (r for r in resources if r.type == "aws:eks/nodeGroup:NodeGroup"):
        for template in (by_urn[urn] for urn in node_group.referenced("launchTemplate") if urn in by_urn):
            if not any(
                interface.get("interfaceType") == "efa" for interface in template.props.get("networkInterfaces") or []
            ):
                continue
            where = f"node group {node_group.name}"
            if len(node_group.props.get("subnetIds") or []) != 1:
                problems.append(f"{where}: EFA nodes must be in a single subnet (one availability zone)")
            placements = [by_urn[urn] for urn in template.referenced("placement") if urn in by_urn]
            if "capacityReservationSpecification" not in template.props and not any(
                p.props.get("strategy") == "cluster" for p in placements
            ):
                problems.append(f"{where}: EFA nodes need a `cluster` placement group")
            groups = [
                urn
                for urn in template.referenced("networkInterfaces")
                if urn in by_urn and by_urn[urn].type == SECURITY_GROUP
            ]
            if not any(self_referencing(urn) for urn in groups):
                problems.append(f"{where}: no security group on its interfaces allows all traffic to and from itself")
    return problems


def efa_node_classes_consistent(
    resources: Sequence[StackResource], self_referencing: Callable[[str], bool]
) -> list[str]:
    """Karpenter's EC2NodeClasses with EFA: one subnet, a placement group unless a reservation is used, an
    `efa-only` interface on every network card of their NodePool's type, and the self-referencing security group."""
    by_urn = {r.urn: r for r in resources}
    classes = {str((r.props.get("metadata") or {}).get("name")): r for r in resources if r.type == NODE_CLASS}
    problems = []
    for pool in (r for r in resources if r.type == NODE_POOL):
        template = ((pool.props.get("spec") or {}).get("template") or {}).get("spec") or {}
        node_class = classes.get(str((template.get("nodeClassRef") or {}).get("name")))
        spec = (node_class.props.get("spec") or {}) if node_class else {}
        cards = cards_with_efa(spec.get("networkInterfaces") or [])
        if not node_class or not cards:
            continue
        where = f"node class {node_class.name}"
        if len(spec.get("subnetSelectorTerms") or []) != 1:
            problems.append(f"{where}: EFA nodes must be in a single subnet (one availability zone)")
        if not spec.get("placementGroupSelector") and not spec.get("capacityReservationSelectorTerms"):
            problems.append(f"{where}: EFA nodes need a `cluster` placement group (or a capacity reservation)")
        for instance_type, network_cards in uncovered_types(template, cards, catalogue_cards):
            problems.append(f"{where}: EFA on {len(cards)} of the {network_cards} network cards of {instance_type}")
        groups = [urn for urn in node_class.referenced("spec") if urn in by_urn and by_urn[urn].type == SECURITY_GROUP]
        if not any(self_referencing(urn) for urn in groups):
            problems.append(f"{where}: no security group of its nodes allows all traffic to and from itself")
    return problems
