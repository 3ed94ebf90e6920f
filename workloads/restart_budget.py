"""How many failures a job survives: `job.node_losses` node losses or process crashes, in each engine's counting
(docs/rehearsal.md). A budget one short fails a job on a loss it promised to survive; one long burns GPU hours on a
job that keeps failing."""

from eks_ddp.workloads.training_pod import TrainingJob


def backoff_limit(job: TrainingJob) -> int:
    """`backoffLimit` for surviving `job.node_losses` node losses (or process crashes), in the engines' own counting.

    The training operator v1.9.4 (kubeflow/trainer pkg/core/job.go, PastBackoffLimit: the running pods) and the
    Job controller for `restartPolicy: OnFailure` pods (kubernetes v1.35 pkg/controller/job/job_controller.go,
    pastBackoffLimitOnFailure: running and pending pods) add up the restarts of every container, init containers
    included, and fail the job when the sum is **>=** `backoffLimit`. One event (a lost node, a crashed process)
    makes the torchrun of every other pod exit 1 and restart, and the replacement may restart while it waits for
    them: up to one restart per replica. So N events cost up to N x replicas restarts, and the limit is one more.
    engine_models.failures steps these scenarios through each engine's counting.
    """
    return job.node_losses * job.replicas + 1


def jobset_max_restarts(job: TrainingJob) -> int:
    """JobSet's `failurePolicy.maxRestarts` (operator v2): one failed pod restarts every pod at once, so one restart
    per event, and JobSet v0.12.0 restarts while its count is below the limit."""
    return job.node_losses
