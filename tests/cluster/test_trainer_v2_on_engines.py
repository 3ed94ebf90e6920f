"""`trainingOperator: v2` on the engines themselves: Kubeflow Trainer v2.3.0 and JobSet v0.12.0, built from their Go
modules and run as the chart's Deployments say (tests/cluster/operators.py), admit the stack's ClusterTrainingRuntime
and TrainJob through their own webhooks; JobSet makes the Jobs, the real scheduler places the pods on the job's node
group; a failing training pod restarts the JobSet up to the budget the docs promise, and then fails it."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eks_ddp.tools import stack_file
from eks_ddp.engine_models import failures
from eks_ddp.workloads import trainjob
from eks_ddp.workloads.training_pod import TRAINER_LABEL
from tests.cluster import local_cluster
from tests.cluster.conftest import OnEngines, true_conditions, wait_for
from tests.cluster.kubectl import KubectlError

V2 = {"eks-ddp:trainingOperator": "v2"}
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
# The webhook configurations the chart installs, whose caBundle the operators' own rotators inject
# (github.com/kubeflow/trainer/v2@v2.3.0 cmd/trainer-controller-manager/main.go; sigs.k8s.io/jobset@v0.12.0
# pkg/util/cert/cert.go).
WEBHOOKS = {
    "validatingwebhookconfiguration": ("validator.trainer.kubeflow.org", "jobset-validating-webhook-configuration"),
    "mutatingwebhookconfiguration": ("defaulter.trainer.kubeflow.org", "jobset-mutating-webhook-configuration"),
}


def _job(stack: str) -> dict[str, Any]:
    return stack_file.load(stack, stack_file.ROOT, V2)[0]["job"]


@pytest.mark.parametrize("stack", ["dev", "gpu"])
def test_the_operators_webhooks_admit_the_trainjob_and_jobset_runs_it_on_its_node_group(
    cluster: Callable[..., OnEngines], stack: str
) -> None:
    on = cluster(stack, V2)
    for kind, names in WEBHOOKS.items():
        for name in names:
            hooks = on.kubectl.get(kind, name)["webhooks"]
            assert all(h["clientConfig"].get("caBundle") for h in hooks), f"{kind} {name}: no caBundle injected"
    job = _job(stack)
    namespace = on.sent("TrainJob")["metadata"]["namespace"]
    name = job["name"]
    assert on.kubectl.get("clustertrainingruntime", on.sent("ClusterTrainingRuntime")["metadata"]["name"])
    on.kubectl.get("trainjob", name, "-n", namespace)

    # The Trainer's validator is the one answering: it refuses what our model says it refuses.
    refused = on.sent("TrainJob")
    refused["metadata"] = {**refused["metadata"], "name": f"{name}-refused"}
    refused["spec"] = {**refused["spec"], "trainer": {**refused["spec"]["trainer"],
                                                      "env": [{"name": "PET_NNODES", "value": "1"}]}}
    assert trainjob.admission_errors(refused, on.sent("ClusterTrainingRuntime"))
    assert not trainjob.admission_errors(on.sent("TrainJob"), on.sent("ClusterTrainingRuntime"))
    with pytest.raises(KubectlError, match="validator.trainjob.trainer.kubeflow.org.*must not have reserved envs"):
        on.kubectl.run("create", "--dry-run=server", "-f", "-", stdin=json.dumps(refused))

    # JobSet makes the Jobs of the TrainJob's JobSet; the real scheduler places every pod on the job's group (KWOK then
    # runs a Job's pod to completion at once: Running or Succeeded).
    wait_for(f"JobSet {name}", lambda: on.kubectl.items("jobsets", "-n", namespace))
    jobs = wait_for(f"{name}'s Jobs", lambda: on.kubectl.items("jobs", "-n", namespace, "-l", f"{JOBSET_NAME}={name}"))
    assert {j["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] for j in jobs} == {trainjob.NODE}

    def placed() -> list[dict[str, Any]]:
        pods = on.kubectl.items("pods", "-n", namespace, "-l", f"{JOBSET_NAME}={name}")
        done = [p for p in pods if p["status"].get("phase") in ("Running", "Succeeded")]
        return done if len(done) >= job.get("replicas", 1) else []

    pods = wait_for(f"{name}'s pods placed and run", placed)
    assert all(TRAINER_LABEL.items() <= p["metadata"]["labels"].items() for p in pods)
    group = job.get("nodeGroup") or stack_file.load(stack, stack_file.ROOT, V2)[0]["nodeGroups"][0]["name"]
    assert {on.group_of(p["spec"]["nodeName"]) for p in pods} == {group}


def test_a_failing_training_pod_restarts_the_jobset_up_to_its_budget_and_then_fails_it(
    cluster: Callable[..., OnEngines], engines: dict[str, Path]
) -> None:
    on = cluster("dev", V2, deploy=False)
    runtime = on.sent("ClusterTrainingRuntime")
    # Every incarnation of the training pods ends with exit code 1 (restartPolicy Never: the pod fails, and with
    # backoffLimit 0 its Job), annotated through the runtime's pod template as the Trainer copies it into the JobSet.
    local_cluster.deploy(on.cluster, on.deployment, engines,
                         local_cluster.steps_of(on.deployment, engines, {runtime["metadata"]["name"]: 1}))
    namespace, name = on.sent("TrainJob")["metadata"]["namespace"], _job("dev")["name"]
    # The promise (Pulumi.yaml, eks-ddp:job): survivesNodeLosses events, default 1; the runtime carries it.
    budget = max(1, int(_job("dev").get("survivesNodeLosses", 1)))
    assert runtime["spec"]["template"]["spec"]["failurePolicy"]["maxRestarts"] == budget

    def failed_jobset() -> dict[str, Any] | None:
        """The JobSet once Failed (the Trainer creates it a moment after the TrainJob: none yet is not failed)."""
        found = on.kubectl.items("jobsets", "-n", namespace, f"--field-selector=metadata.name={name}")
        return found[0] if found and "Failed" in true_conditions(found[0]) else None

    jobset = wait_for(f"JobSet {name} Failed", failed_jobset)
    failed = true_conditions(jobset)["Failed"]
    assert failed["reason"] == "ReachedMaxRestarts", failed
    assert jobset["status"].get("restarts", 0) == budget, f"restarted {jobset['status'].get('restarts', 0)} times"
    # The rehearsal's failure counting (engine_models.failures, a fast model) says the same of this runtime.
    assert failures.outcome(runtime, [failures.CRASH] * (budget + 1)) == budget + 1
    # The TrainJob reports the JobSet's verdict (v2.3.0 pkg/runtime/framework/plugins/jobset/jobset.go Status).
    wait_for(f"TrainJob {name} Failed",
              lambda: "Failed" in true_conditions(on.kubectl.get("trainjob", name, "-n", namespace)))
