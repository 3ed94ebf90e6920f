"""Each operator's restart budget at 0, 1 and 2 node losses: the number in the object it renders, and what it buys.

`survivesNodeLosses: N` survives N node losses or crashes and fails on the next; 0 fails on the first
(workloads.restart_budget; tests/stack/test_failures.py). The numbers are
written out here, not recomputed, so a budget one off in either direction fails; what they buy is counted the way
each engine counts (engine_models.failures), with one replica too, where `>=` and `>` part.
"""

from typing import Any

import pytest

from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES
from eks_ddp.engine_models.failures import CRASH, NODE_LOSS, outcome
from eks_ddp.workloads import indexed_job, pytorchjob, trainjob
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.training_pod import TrainingJob

TARGET = NodeTarget(EFA_INSTANCE_TYPES["c7g.16xlarge"], efa_interfaces=1)
LOSSES, REPLICAS = (0, 1, 2), (1, 2, 3)
BACKOFF_LIMITS = {  # (losses, replicas): the sum of container restarts that fails a PyTorchJob or an Indexed Job
    (0, 1): 1, (1, 1): 2, (2, 1): 3,
    (0, 2): 1, (1, 2): 3, (2, 2): 5,
    (0, 3): 1, (1, 3): 4, (2, 3): 7,
}
JOBSET_MAX_RESTARTS = {0: 0, 1: 1, 2: 2}  # whole-JobSet restarts, whatever the replicas
SURVIVED = {0: 0, 1: 1, 2: 2}  # node losses survived: the promise


def _rendered(operator: str, job: TrainingJob) -> tuple[dict[str, Any], int]:
    """The object that carries the job's budget under `operator`, and the budget in it."""
    if operator == "v1":
        manifest = pytorchjob.render(job, TARGET)
        return manifest, manifest["spec"]["runPolicy"]["backoffLimit"]
    if operator == "v2":
        manifest = trainjob.render_runtime(job, TARGET)
        return manifest, manifest["spec"]["template"]["spec"]["failurePolicy"]["maxRestarts"]
    manifest = indexed_job.render(job, TARGET)[1]
    return manifest, manifest["spec"]["backoffLimit"]


@pytest.mark.parametrize("replicas", REPLICAS)
@pytest.mark.parametrize("losses", LOSSES)
@pytest.mark.parametrize("operator", ["v1", "v2", "none"])
def test_each_operator_renders_the_budget_for_its_node_losses(operator: str, losses: int, replicas: int) -> None:
    job = TrainingJob(name="mnist", namespace="training", image="img:1", replicas=replicas, node_losses=losses)
    _, budget = _rendered(operator, job)
    assert budget == (JOBSET_MAX_RESTARTS[losses] if operator == "v2" else BACKOFF_LIMITS[losses, replicas])


@pytest.mark.parametrize("replicas", REPLICAS)
@pytest.mark.parametrize("losses", LOSSES)
@pytest.mark.parametrize("operator", ["v1", "v2", "none"])
def test_the_budget_survives_what_it_promises_and_fails_on_the_next(operator: str, losses: int, replicas: int) -> None:
    job = TrainingJob(name="mnist", namespace="training", image="img:1", replicas=replicas, node_losses=losses)
    manifest, _ = _rendered(operator, job)
    survived = SURVIVED[losses]
    assert outcome(manifest, [NODE_LOSS] * survived) is None
    assert outcome(manifest, [CRASH] * survived) is None  # a crashed process costs what a lost node costs
    assert outcome(manifest, [NODE_LOSS] * (survived + 1)) == survived + 1
