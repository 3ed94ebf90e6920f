"""What the engines do with what a stack registers, as rules run by the deploy rehearsal.

Mocks accept everything; these rules are what pulumi-kubernetes, EKS, EC2, a Helm chart,
the Cluster Autoscaler, Karpenter and Kubernetes would do with the same inputs. Each rule reads the
registrations of one stack run under mocks, names its source (repository, file, version
or document), and reports the resource and the key it objects to.
"""

from eks_ddp.engine_models.base import Deployment, Finding, Rule
from eks_ddp.engine_models.dependencies import waits_for_what_it_names
from eks_ddp.engine_models.eks import (
    efa_ami_releases,
    efa_interfaces_per_network_card,
    images_in_stack_region,
    kubernetes_version_in_standard_support,
    managed_node_group_launch_templates,
    no_access_entry_for_the_deployer,
)
from eks_ddp.engine_models.karpenter import controller_schedules, efa_on_every_card
from eks_ddp.engine_models.network_policy import job_traffic
from eks_ddp.engine_models.pulumi_kubernetes import (
    checks_gate_training,
    immutable_specs_replaced,
    kubernetes_awaits,
    no_ttl_on_owned_objects,
)
from eks_ddp.engine_models.scheduling import (
    crds_have_one_owner,
    pods_fit_node_templates,
    shared_volume_ownership,
)
from eks_ddp.engine_models.updates import changed_pods, unapplied_pod_changes

__all__ = [
    "RULES",
    "Deployment",
    "Finding",
    "changed_pods",
    "check",
    "unapplied_pod_changes",
    "waits_for_what_it_names",
]

RULES: tuple[Rule, ...] = (
    kubernetes_awaits,
    checks_gate_training,
    no_ttl_on_owned_objects,
    immutable_specs_replaced,
    managed_node_group_launch_templates,
    efa_interfaces_per_network_card,
    crds_have_one_owner,
    kubernetes_version_in_standard_support,
    pods_fit_node_templates,
    shared_volume_ownership,
    images_in_stack_region,
    no_access_entry_for_the_deployer,
    efa_ami_releases,
    efa_on_every_card,
    controller_schedules,
    job_traffic,
    waits_for_what_it_names,
)


def check(deployment: Deployment) -> list[Finding]:
    """Every rule's findings, each once (a Master and its Workers share a pod template)."""
    return list(dict.fromkeys(finding for rule in RULES for finding in rule(deployment)))
