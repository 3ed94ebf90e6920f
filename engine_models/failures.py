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
(workloads/scripts/quarantine_node.py) and is evicted, its controller recreates it, the other pods' torchrun restart;
where the pods go next the engines decide (tests/cluster/test_quarantine_on_engines.py). A spot interruption costs
what a node loss costs too; `spot_drain` says whether the pods get their SIGTERM checkpoint first.

A fast model kept for the docs' promises: tests/cluster/test_failures_on_engines.py and test_trainer_v2_on_engines.py
check `outcome` against the training operator and JobSet themselves.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eks_ddp.engine_models.base import Deployment, training_templates

NODE_LOSS, CRASH, BAD_NODE, SPOT = "node loss", "process crash", "bad GPU node", "spot interruption"
SPOT_NOTICE_SECONDS = 120
"""EC2's interruption warning comes two minutes before a Spot instance is reclaimed."""


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
        int(template.get("spec", {}).get("terminationGracePeriodSeconds", 30))
        for template, _ in training_templates(deployment)
    ]
    return SpotDrain(drained, max(grace, default=30))
