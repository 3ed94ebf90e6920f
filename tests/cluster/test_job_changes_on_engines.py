"""A change to a running job's pods, on the engines themselves: why the stack replaces a training job instead of
updating it (workloads.applying.REPLACED_NOT_UPDATED). The training operator accepts a changed PyTorchJob and never
applies it to the pods it made; the Trainer's CRD refuses a changed `spec.trainer` outright; a replacement (delete,
then create under the same name, as `deleteBeforeReplace` does) runs pods of the new template."""

from collections.abc import Callable
from typing import Any

import pytest

from eks_ddp.workloads import pytorchjob
from eks_ddp.workloads.training_pod import TRAINER_LABEL
from tests.cluster.conftest import OnEngines, wait_for
from tests.cluster.kubectl import KubectlError

CHANGE = {"name": "EKS_DDP_CHANGED", "value": "1"}
"""A change to the pods alone: one more environment variable in the training container."""


def _with_change(pod: dict[str, Any]) -> dict[str, Any]:
    first, *rest = pod["spec"]["containers"]
    return {**pod, "spec": {**pod["spec"], "containers": [{**first, "env": [*first.get("env", []), CHANGE]}, *rest]}}


def _changed(pods: list[dict[str, Any]]) -> list[bool]:
    return [CHANGE in p["spec"]["containers"][0].get("env", []) for p in pods]


def _training_pods(on: OnEngines, namespace: str) -> list[dict[str, Any]]:
    selector = ",".join(f"{key}={value}" for key, value in TRAINER_LABEL.items())
    return on.kubectl.items("pods", "-n", namespace, "-l", selector)


def test_a_changed_pytorchjob_is_accepted_its_pods_stay_as_they_were_and_a_replacement_runs_the_change(
    cluster: Callable[..., OnEngines],
) -> None:
    on = cluster("dev")
    sent = on.sent(pytorchjob.KIND)
    namespace, name = sent["metadata"]["namespace"], sent["metadata"]["name"]
    on.pods()  # every pod the operator makes for the job, made (it makes them a moment after the job is applied)
    before = {p["metadata"]["uid"] for p in _training_pods(on, namespace)}
    assert before, f"{name}: no training pod"
    changed = {**sent, "spec": {**sent["spec"], "pytorchReplicaSpecs": {
        replica: {**spec, "template": _with_change(spec["template"])}
        for replica, spec in sent["spec"]["pytorchReplicaSpecs"].items()
    }}}

    on.kubectl.apply([changed])  # accepted: the API server and the operator's webhook take the new template
    stored = on.kubectl.get(pytorchjob.KIND.lower(), name, "-n", namespace)
    assert all(_changed([r["template"]]) == [True] for r in stored["spec"]["pytorchReplicaSpecs"].values())
    on.pods()  # the operator has reconciled the change: the pods settled again
    pods = _training_pods(on, namespace)
    assert {p["metadata"]["uid"] for p in pods} == before and not any(_changed(pods)), "the operator changed a pod"

    on.kubectl.run("delete", pytorchjob.KIND.lower(), name, "-n", namespace, "--wait=true")
    wait_for(f"{name}'s old pods gone", lambda: not _training_pods(on, namespace))
    on.kubectl.apply([changed])
    replaced = wait_for(f"{name}'s new pods", lambda: [p for p in _training_pods(on, namespace)
                                                       if p["metadata"]["uid"] not in before])
    assert all(_changed(replaced)), "a replacement pod without the change"


def test_a_trainjobs_trainer_cannot_change_in_place(cluster: Callable[..., OnEngines]) -> None:
    on = cluster("dev", {"eks-ddp:trainingOperator": "v2"})
    sent = on.sent("TrainJob")
    trainer = sent["spec"]["trainer"]
    changed = {**sent, "spec": {**sent["spec"], "trainer": {**trainer, "env": [*trainer.get("env", []), CHANGE]}}}
    with pytest.raises(KubectlError, match=r"spec\.trainer: Invalid value: .*field is immutable"):
        on.kubectl.apply([changed])
