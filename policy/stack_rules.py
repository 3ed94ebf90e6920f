"""The policy pack's checks across the stack's pods: each denied by default, each training job in a queue."""

from collections.abc import Sequence

from eks_ddp.infra.addons import kueue
from eks_ddp.infra.addons.kueue import QUEUE_LABEL
from eks_ddp.infra.aws.cluster import GROUP_LABEL, SYSTEM_LABEL
from eks_ddp.policy.resources import StackResource

POD_OWNERS = (
    "kubernetes:batch/v1:Job",
    "kubernetes:kubeflow.org/v1:PyTorchJob",
    "kubernetes:kubeflow.org/v2beta1:MPIJob",
    "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob",
    "kubernetes:apps/v1:Deployment",
    "kubernetes:apps/v1:DaemonSet",
    "kubernetes:core/v1:Pod",
)
"""The objects the stack applies itself that make pods (charts' own are the charts' to guard)."""


def pods_denied_by_default(resources: Sequence[StackResource]) -> list[str]:
    """No pod without a NetworkPolicy: each object that makes pods sits in a namespace with a policy that selects every
    pod for both directions, so what no other policy allows is denied (workloads/network_policy.py default-deny)."""
    denying = {
        (r.props.get("metadata") or {}).get("namespace")
        for r in resources
        if r.type == "kubernetes:networking.k8s.io/v1:NetworkPolicy"
        and not (r.props.get("spec") or {}).get("podSelector")
        and {"Ingress", "Egress"} <= set((r.props.get("spec") or {}).get("policyTypes") or [])
    }
    return [
        f"{r.type.rsplit(':', 1)[1]} {r.name}: namespace {namespace} has no NetworkPolicy that denies its pods' "
        "traffic by default"
        for r in resources
        if r.type in POD_OWNERS and (namespace := (r.props.get("metadata") or {}).get("namespace")) not in denying
    ]


LOCAL_QUEUE = f"kubernetes:{kueue.API}:LocalQueue"
TRAINING_KINDS = (
    "kubernetes:kubeflow.org/v1:PyTorchJob",
    "kubernetes:kubeflow.org/v2beta1:MPIJob",
    "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob",
)


def _on_a_training_group(resource: StackResource) -> bool:
    """A training job, or a Job whose pods select a node group other than the system one (an Indexed training Job,
    the EFA check)."""
    if resource.type in TRAINING_KINDS:
        return True
    if resource.type != "kubernetes:batch/v1:Job":
        return False
    selector = (((resource.props.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
    system = SYSTEM_LABEL[GROUP_LABEL]
    return selector.get(GROUP_LABEL, system) != system


def training_jobs_queued(resources: Sequence[StackResource]) -> list[str]:
    """With queues in the stack (Kueue's LocalQueues), every job on a training group waits in one of them: a job
    outside a queue starts at once and takes nodes the queue's quota counts as free."""
    queues = {((r.props.get("metadata") or {}).get("namespace"), (r.props.get("metadata") or {}).get("name"))
              for r in resources if r.type == LOCAL_QUEUE}
    if not queues:
        return []
    problems = []
    for r in resources:
        metadata = r.props.get("metadata") or {}
        queue = (metadata.get("labels") or {}).get(QUEUE_LABEL)
        if _on_a_training_group(r) and (metadata.get("namespace"), queue) not in queues:
            where = f"queue {queue!r}, which its namespace has not" if queue else "no queue"
            problems.append(f"{r.type.rsplit(':', 1)[1]} {r.name}: {where}; label it {QUEUE_LABEL} with one of "
                            f"{', '.join(sorted(str(name) for _, name in queues))}")
    return problems
