"""EFA on every network card: an EFA node takes one EFA interface on each network card of its type, or the cards
without one carry no traffic. The one rule the node builders follow and the checks apply (the policy pack and the
rehearsal's EKS and Karpenter rules), with the Karpenter objects it is checked on.

Source: EC2 user guide "Maximize network bandwidth on accelerated instances" (EFA on every card: `efa` at card 0
device 0, `efa-only` at device index 1 elsewhere). Karpenter passes a node class's `networkInterfaces` to EC2 as they
are (aws/karpenter-provider-aws v1.14.1, pkg/providers/launchtemplate/launchtemplate.go generateNetworkInterfaces).
"""

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from eks_ddp.infra.facts import catalogue

EFA_INTERFACE_TYPES = ("efa", "efa-only")
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
NODE_CLASS, NODE_POOL = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "kubernetes:karpenter.sh/v1:NodePool"
"""The Pulumi types of Karpenter's node classes and pools, as the stack registers them."""


def efa_cards(network_cards: int) -> range:
    """The cards a node of a type with `network_cards` takes an EFA interface on: every one."""
    return range(network_cards)


def cards_with_efa(interfaces: Iterable[Mapping[str, Any]]) -> set[int]:
    """The cards with an EFA interface among `interfaces` (as registered, camelCase: a node class's)."""
    return {int(i.get("networkCardIndex", 0)) for i in interfaces if i.get("interfaceType") in EFA_INTERFACE_TYPES}


def on_every_card(cards: Collection[int], network_cards: int) -> bool:
    """Whether EFA on `cards` reaches every card of a type with `network_cards`, and no other."""
    return set(cards) == set(efa_cards(network_cards))


def catalogue_cards(instance_type: str) -> int | None:
    """The type's network cards as the offline catalogue has them (None for a type it lacks)."""
    facts = catalogue.lookup(instance_type)
    return facts.network_cards if facts else None


def uncovered_types(
    pool_template: Mapping[str, Any], cards: Collection[int], cards_of: Callable[[str], int | None]
) -> list[tuple[str, int]]:
    """The instance types a NodePool launches (the values of its `In` requirement on the instance type; its
    `spec.template.spec` given) where EFA on `cards` misses a card or adds one, each with its network cards;
    types `cards_of` does not know are skipped."""
    types = next(
        (
            r.get("values") or []
            for r in pool_template.get("requirements") or []
            if r.get("key") == INSTANCE_TYPE_LABEL and r.get("operator") == "In"
        ),
        [],
    )
    counts = [(instance_type, cards_of(instance_type)) for instance_type in types]
    return [(name, count) for name, count in counts if count is not None and not on_every_card(cards, count)]
