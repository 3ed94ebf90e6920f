"""The rehearsal's placement verdicts beside the scheduler's: which node group each of a stack's jobs runs on.

The cluster rehearsal (stack.cluster.placement) stays as a fast model for `make rehearse` and the preview's cost only
while it says what the real scheduler does: the cluster tests compare the two on every stack they deploy.
"""

from typing import Any

from eks_ddp.stack.cluster.placement import placed
from eks_ddp.stack.engine_rules.base import Deployment, located
from eks_ddp.stack.engine_rules.pulumi_kubernetes import COMPLETING
from tests.cluster import local_cluster
from tests.cluster.kubectl import Kubectl
from tests.cluster.nodes import group_name

PENDING = "Pending"


def _jobs(deployment: Deployment) -> dict[str, str]:
    """The stack's Jobs, PyTorchJobs, MPIJobs and TrainJobs: name by `located` name."""
    return {located(r): r.inputs["metadata"]["name"] for r in deployment.kubernetes_objects()
            if r.inputs["kind"] in COMPLETING}


def model_groups(deployment: Deployment) -> dict[str, set[str]]:
    """The node groups the rehearsal puts each job's pods on, by job name; PENDING for a pod it finds no node for."""
    cluster, names = placed(deployment), _jobs(deployment)
    groups: dict[str, set[str]] = {}
    for pod, node in cluster.placements:
        if pod.owner in names:
            groups.setdefault(names[pod.owner], set()).add(group_name(node.source))
    for finding in cluster.findings:
        if finding.resource in names:
            groups.setdefault(names[finding.resource], set()).add(PENDING)
    return groups


def _owner(pod: str, jobs: set[str]) -> str | None:
    """The job a pod comes from, by its name: the longest job name it starts with (a Job's pods are `<job>-<suffix>`,
    a PyTorchJob's `<job>-master-0`, an MPIJob's `<job>-worker-0`, a TrainJob's JobSet's `<trainjob>-node-0-0-...`)."""
    return max((name for name in jobs if pod.startswith(f"{name}-")), key=len, default=None)


def engine_groups(kubectl: Kubectl, deployment: Deployment) -> dict[str, set[str]]:
    """The node groups the real scheduler bound each job's pods to, by its own `Scheduled` events (pods deleted since
    count: an MPIJob's workers are gone once it succeeded, `cleanPodPolicy: Running`); PENDING for a pod not bound."""
    jobs, node_groups = set(_jobs(deployment).values()), local_cluster.node_groups(kubectl)
    groups: dict[str, set[str]] = {}

    def add(pod: str, group: str) -> None:
        if (owner := _owner(pod, jobs)) is not None:
            groups.setdefault(owner, set()).add(group)

    events: list[dict[str, Any]] = kubectl.items("events", "--all-namespaces", "--field-selector=reason=Scheduled")
    for event in events:
        add(event["involvedObject"]["name"], node_groups.get(event["message"].rsplit(" to ", 1)[-1], "-"))
    for pod in kubectl.items("pods", "--all-namespaces", "--field-selector=spec.nodeName="):
        add(pod["metadata"]["name"], PENDING)
    return groups
