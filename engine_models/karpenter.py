"""What Karpenter and its chart do with what a stack registers: EFA on a node class's cards, the controller's nodes.

What its CRDs' CEL rules admit the API server itself decides (tests/cluster/test_karpenter_admission_on_engines.py)."""

from collections.abc import Iterator

from eks_ddp.infra.aws.cluster import SYSTEM_LABEL
from eks_ddp.infra.facts.efa_cards import NODE_CLASS, NODE_POOL, cards_with_efa, uncovered_types
from eks_ddp.engine_models.base import Deployment, Finding, located


def efa_on_every_card(deployment: Deployment) -> Iterator[Finding]:
    """A Karpenter node gets EFA on exactly the cards its node class lists: a missing card carries no traffic.

    Source: aws/karpenter-provider-aws v1.14.1, pkg/providers/launchtemplate/launchtemplate.go
    (generateNetworkInterfaces passes `networkInterfaces` to EC2 as they are; the rule: infra.facts.efa_cards); the
    cards per type from EC2's data (`Deployment.network_cards`).
    """
    classes = {str(c.inputs.get("metadata", {}).get("name")): c for c in deployment.of_type(NODE_CLASS)}
    for pool in deployment.of_type(NODE_POOL):
        spec = pool.inputs.get("spec", {}).get("template", {}).get("spec", {})
        node_class = classes.get(str(spec.get("nodeClassRef", {}).get("name")))
        efa = cards_with_efa(node_class.inputs.get("spec", {}).get("networkInterfaces") or []) if node_class else []
        if node_class is None or not efa:
            continue
        for instance_type, cards in uncovered_types(spec, efa, deployment.cards):
            yield Finding(
                "efa-interfaces",
                located(node_class),
                "spec.networkInterfaces",
                f"EFA on cards {sorted(efa)} of {instance_type}, which has {cards} network cards",
            )


def controller_schedules(deployment: Deployment) -> Iterator[Finding]:
    """Every Karpenter replica needs a system node of its own, or Helm's wait (atomic) fails the install.

    Source: aws/karpenter-provider-aws v1.14.1, charts/karpenter/values.yaml (`replicas: 2`, a required pod
    anti-affinity on kubernetes.io/hostname) and templates/deployment.yaml.
    """
    system = [
        g
        for g in deployment.of_type("aws:eks/nodeGroup:NodeGroup")
        if SYSTEM_LABEL.items() <= (g.inputs.get("labels") or {}).items()
    ]
    nodes = sum(int((g.inputs.get("scalingConfig") or {}).get("desiredSize", 0)) for g in system)
    for release in deployment.of_type("kubernetes:helm.sh/v3:Release"):
        if not str(release.inputs.get("chart", "")).endswith("/karpenter"):
            continue
        replicas = int(release.inputs.get("values", {}).get("replicas", 2))
        if replicas > nodes:
            yield Finding(
                "karpenter-controller",
                located(release),
                "values.replicas",
                f"{replicas} replicas on {nodes} system node(s): each needs a node of its own",
            )
