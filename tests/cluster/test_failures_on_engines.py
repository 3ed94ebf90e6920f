"""Failures through the real controllers: a failing fabric check stops training (as `pulumi up` stops at a failed
gate), and crashed training containers are counted against the restart budget the docs promise."""

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eks_ddp.tools import stack_file
from eks_ddp.engine_models import failures
from tests.cluster import local_cluster
from tests.cluster.conftest import OnEngines, true_conditions, wait_for
from tests.cluster.objects import EXIT_CODE


@pytest.mark.parametrize("check", ["eks-ddp-efa-check", "eks-ddp-nccl-check"])
def test_a_failing_fabric_check_stops_training(
    cluster: Callable[..., OnEngines], engines: dict[str, Path], check: str
) -> None:
    on = cluster("gpu", deploy=False)
    with pytest.raises(local_cluster.DeployError, match=f"{check} failed"):
        local_cluster.deploy(on.cluster, on.deployment, engines,
                             local_cluster.steps_of(on.deployment, engines, {check: 1}))
    assert not on.kubectl.items("pytorchjobs", "--all-namespaces")


def _restarts(pod: dict[str, Any]) -> int:
    return sum(s.get("restartCount", 0) for s in pod.get("status", {}).get("containerStatuses") or [])


def _crash_once(on: OnEngines, job: str, pod: str) -> None:
    """One crash of the pod's containers (exit 1), restarted in place as the kubelet would (our KWOK stage, which
    takes the annotation off again); the test fails at once, saying so, if the crash failed the job instead."""
    before = _restarts(on.kubectl.get("pod", pod, "-n", "training"))
    on.kubectl.run("annotate", "pod", pod, "-n", "training", f"{EXIT_CODE}=1")

    def restarted() -> bool:
        assert "Failed" not in _job_condition(on, job), f"{job} failed on a crash within its budget"
        found = on.kubectl.items("pods", "-n", "training", f"--field-selector=metadata.name={pod}")
        return bool(found) and _restarts(found[0]) > before

    wait_for(f"{pod} restarted", restarted)


def _job_condition(on: OnEngines, name: str) -> set[str]:
    return set(true_conditions(on.kubectl.get("pytorchjob", name, "-n", "training")))


def test_the_pytorchjob_survives_its_budget_of_events_and_fails_on_the_next_crash(
    cluster: Callable[..., OnEngines],
) -> None:
    on = cluster("dev")
    job = on.kubectl.items("pytorchjobs", "-n", "training")[0]
    name = job["metadata"]["name"]
    pods = [p for p in on.pods() if p["metadata"].get("labels", {}).get("training.kubeflow.org/job-name") == name]
    # The promise (Pulumi.yaml, eks-ddp:job): survivesNodeLosses events, default 1; one event restarts every replica.
    events = max(1, int((stack_file.load("dev", stack_file.ROOT, {})[0].get("job") or {}).get("survivesNodeLosses", 1)))
    for _ in range(events):
        for pod in pods:
            _crash_once(on, name, pod["metadata"]["name"])
    time.sleep(2)  # the operator reconciles on the pods' updates
    assert "Failed" not in _job_condition(on, name), f"{name} failed within its budget of {events} events"
    on.kubectl.run("annotate", "pod", pods[0]["metadata"]["name"], "-n", "training", f"{EXIT_CODE}=1")
    wait_for(f"{name} Failed", lambda: "Failed" in _job_condition(on, name))
    # The rehearsal's failure counting (engine_models.failures, a fast model) says the same of this job.
    assert failures.outcome(job, [failures.CRASH] * events) is None
    assert failures.outcome(job, [failures.CRASH] * (events + 1)) == events + 1
