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
"""

from collections.abc import Sequence
from typing import Any

NODE_LOSS, CRASH = "node loss", "process crash"


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
