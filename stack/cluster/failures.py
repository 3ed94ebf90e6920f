"""Failures stepped through the counting of the controller that runs the job, to the outcome the README promises.

Each event (a lost node, a crashed process) is turned into what the controller counts, and the job's own limit is
applied with the controller's comparison:
- training-operator v1.9.4 (kubeflow/trainer pkg/core/job.go, PastBackoffLimit) and the Job controller for
  `restartPolicy: OnFailure` pods (kubernetes v1.35 pkg/controller/job/job_controller.go, pastBackoffLimitOnFailure)
  sum the container restarts of the job's pods and fail it when the sum is >= `backoffLimit` (> 0 when it is 0).
  One event makes every other pod's torchrun exit and restart, and the replacement may restart while it waits for
  them: up to one restart per replica.
- JobSet v0.12.0 (kubernetes-sigs/jobset pkg/controllers/failure_policy.go): a failed child Job restarts the whole
  JobSet while its restart count is below `failurePolicy.maxRestarts`, and fails it once the count has reached it.

A bad GPU node (the pre-flight fails) costs what a node loss costs: the pod taints its node NoExecute
(workloads/scripts/quarantine_node.py) and is evicted, its controller recreates it, the other pods' torchrun restart.
`bad_node` follows the evicted pods through the cluster rehearsal to where they go next. A spot interruption costs
what a node loss costs too; `spot_drain` says whether the pods get their SIGTERM checkpoint first.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eks_ddp.infra.addons.node_quarantine import TAINT_KEY
from eks_ddp.stack.cluster.placement import Cluster, Node, object_pods, placed
from eks_ddp.stack.engine_rules.base import Deployment, Finding
from eks_ddp.workloads.preflight import QUARANTINE

NODE_LOSS, CRASH, BAD_NODE, SPOT = "node loss", "process crash", "bad GPU node", "spot interruption"
SPOT_NOTICE_SECONDS = 120
"""EC2's interruption warning comes two minutes before a Spot instance is reclaimed."""
QUARANTINE_TAINT = {"key": TAINT_KEY, "value": "true", "effect": "NO_EXECUTE"}


def restarts_per_event(replicas: int) -> int:
    """The worst case: every pod's container restarts once."""
    return replicas


def backoff_outcome(backoff_limit: int, replicas: int, events: Sequence[str]) -> int | None:
    """The event (1-based) on which an operator or Job controller fails the job, or None if it survives them all."""
    restarts = 0
    for number, _ in enumerate(events, start=1):
        restarts += restarts_per_event(replicas)
        if (restarts > 0) if backoff_limit == 0 else (restarts >= backoff_limit):
            return number
    return None


def jobset_outcome(max_restarts: int, events: Sequence[str]) -> int | None:
    """The event on which JobSet fails the TrainJob's JobSet, or None."""
    restarts = 0
    for number, _ in enumerate(events, start=1):
        if restarts >= max_restarts:
            return number
        restarts += 1
    return None


def outcome(manifest: dict[str, Any], events: Sequence[str]) -> int | None:
    """For a rendered PyTorchJob, Indexed Job or ClusterTrainingRuntime: where `events` fail it, or None."""
    spec = manifest["spec"]
    if manifest["kind"] == "PyTorchJob":
        replicas = sum(int(r.get("replicas", 1)) for r in spec["pytorchReplicaSpecs"].values())
        return backoff_outcome(int(spec["runPolicy"]["backoffLimit"]), replicas, events)
    if manifest["kind"] == "Job":
        return backoff_outcome(int(spec["backoffLimit"]), int(spec["parallelism"]), events)
    return jobset_outcome(int(spec["template"]["spec"]["failurePolicy"]["maxRestarts"]), events)


@dataclass(frozen=True)
class BadNode:
    node: str
    """The node whose pre-flight failed."""
    moved: dict[str, str]
    """Each evicted pod (`owner name`) and the node it runs on next, or why it waits."""
    returned: list[str]
    """Training pods on the bad node afterwards (not evicted, or placed there again): what the quarantine prevents."""


def _checked(cluster: Cluster) -> Node | None:
    """The node of the first training pod whose pre-flight can quarantine it."""
    for node in cluster.nodes:
        for pod in node.pods:
            if pod.training and any(c["name"] == QUARANTINE for c in pod.spec.get("initContainers", [])):
                return node
    return None


def bad_node(deployment: Deployment) -> BadNode | None:
    """The first node of a training pod with a pre-flight turns out bad: where its pods go (None without one)."""
    cluster = placed(deployment)
    node = _checked(cluster)
    if node is None:
        return None
    evicted = cluster.taint(node, QUARANTINE_TAINT)
    findings = len(cluster.findings)
    for pod in sorted(evicted, key=lambda p: p.training):
        cluster.place(pod)
    waiting = {f.key: f.problem for f in cluster.findings[findings:]}
    moved = {}
    for pod in evicted:
        now = cluster.node_of(pod)
        moved[f"{pod.owner} {pod.name}"] = now.name if now else f"Pending: {waiting.get(pod.name, '?')}"
    returned = [f"{pod.owner} {pod.name}" for pod in node.pods if pod.training]
    return BadNode(node.name, moved, returned)


def rehearse_bad_node(deployment: Deployment) -> list[Finding]:
    """A finding for each pod that would be placed on the quarantined node again."""
    outcome = bad_node(deployment)
    if outcome is None:
        return []
    problem = f"runs on {outcome.node} after its pre-flight failed"
    return [Finding("failures", pod, "bad GPU node", problem) for pod in outcome.returned]


@dataclass(frozen=True)
class SpotDrain:
    drained: bool
    """Karpenter reads the interruption queue and drains the node: the pods get SIGTERM before the reclaim."""
    grace_seconds: int
    """The longest grace period of a training pod: its checkpoint must fit in the notice."""


def spot_drain(deployment: Deployment) -> SpotDrain:
    """Karpenter v1.14.1 drains a node on the interruption warning it reads from `settings.interruptionQueue`
    (aws/karpenter-provider-aws pkg/controllers/interruption); a managed node group's Auto Scaling group, without
    capacity rebalancing or a termination handler, does not: the node is lost without SIGTERM."""
    charts = [
        r
        for r in deployment.of_type("kubernetes:helm.sh/v3:Release")
        if str(r.inputs.get("chart", "")).endswith("/karpenter")
    ]
    drained = any((r.inputs.get("values") or {}).get("settings", {}).get("interruptionQueue") for r in charts)
    grace = [
        int(spec.get("terminationGracePeriodSeconds", 30))
        for r in deployment.kubernetes_objects()
        for spec in (p.spec for p in object_pods(deployment, r, 0) if p.training)
    ]
    return SpotDrain(drained, max(grace, default=30))
