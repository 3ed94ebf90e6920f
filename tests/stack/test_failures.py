"""A job with `survivesNodeLosses: N` survives exactly N node losses or crashes, in each engine's own counting."""

import copy
from datetime import date
from typing import Any

import pytest

from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES
from eks_ddp.stack import stack_file
from eks_ddp.stack.cluster.failures import (
    BAD_NODE,
    CRASH,
    NODE_LOSS,
    SPOT,
    SPOT_NOTICE_SECONDS,
    BadNode,
    backoff_outcome,
    bad_node,
    outcome,
    rehearse_bad_node,
    spot_drain,
)
from eks_ddp.stack.config import parse
from eks_ddp.stack.engine_rules import Deployment
from eks_ddp.stack.mocked import run_under_mocks
from eks_ddp.workloads import indexed_job, pytorchjob, trainjob
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.training_pod import TrainingJob

TARGET = NodeTarget(EFA_INSTANCE_TYPES["c7g.16xlarge"], efa_interfaces=1)


def _rendered(operator: str, job: TrainingJob) -> dict:
    if operator == "v1":
        return pytorchjob.render(job, TARGET)
    if operator == "v2":
        return trainjob.render_runtime(job, TARGET)
    return indexed_job.render(job, TARGET)[1]


@pytest.mark.parametrize("operator", ["v1", "v2", "none"])
@pytest.mark.parametrize(("losses", "replicas"), [(0, 2), (1, 2), (1, 4), (2, 3), (3, 2)])
def test_a_job_survives_exactly_the_node_losses_it_claims(operator: str, losses: int, replicas: int) -> None:
    job = TrainingJob(name="mnist", namespace="training", image="img:1", replicas=replicas, node_losses=losses)
    manifest = _rendered(operator, job)
    survived = max(1, losses)  # survivesNodeLosses 0 still survives one crash
    assert outcome(manifest, [NODE_LOSS] * survived) is None
    assert outcome(manifest, [NODE_LOSS] * (survived + 1)) == survived + 1
    assert outcome(manifest, [CRASH]) is None  # a crash does not fail a job that survives node losses


def test_the_old_budget_failed_on_the_last_loss_it_claimed_to_survive() -> None:
    """losses x replicas, compared with >=: one node loss of a 2-replica job failed it (issue 21)."""
    job = TrainingJob(name="mnist", namespace="training", image="img:1", replicas=2, node_losses=1)
    assert backoff_outcome(job.node_losses * job.replicas, job.replicas, [NODE_LOSS]) == 1
    assert outcome(pytorchjob.render(job, TARGET), [NODE_LOSS]) is None


def _bad_node(stack: str, **overrides: Any) -> BadNode | None:
    values, region = stack_file.load(stack)
    registrations = run_under_mocks(parse({**values, **overrides}, region), stack=stack)
    return bad_node(Deployment(registrations, region or "", "arn:aws:iam::123456789012:role/deployer", date.today()))


def _gpu_groups(max_size: int) -> list[dict[str, Any]]:
    values, _ = stack_file.load("gpu")
    groups = copy.deepcopy(values["nodeGroups"])
    for group in groups:
        if group.get("role", "training") == "training" and "p4de" in group["instanceType"]:
            group["maxSize"] = max_size
    return groups


@pytest.mark.parametrize("operator", ["v1", "v2", "none"])
def test_a_bad_gpu_node_costs_what_a_node_loss_costs(operator: str) -> None:
    job = TrainingJob(name="gpt", namespace="training", image="img:1", replicas=2, node_losses=1)
    assert outcome(_rendered(operator, job), [BAD_NODE]) is None
    assert outcome(_rendered(operator, job), [BAD_NODE, NODE_LOSS]) == 2


def test_a_bad_gpu_node_is_not_used_again_and_the_pod_waits_for_its_replacement_at_max_size() -> None:
    """Pulumi.gpu.yaml holds exactly its 2 reserved p4de nodes: the evicted pod waits, never on the bad node."""
    outcome_ = _bad_node("gpu")
    assert outcome_ is not None and outcome_.returned == []
    training = {pod: where for pod, where in outcome_.moved.items() if pod.startswith("PyTorchJob")}
    assert len(training) == 1
    assert next(iter(training.values())).startswith("Pending: needs ") and "at 2 of 2 nodes" in str(training)


@pytest.mark.parametrize("autoscaler", ["cluster-autoscaler", "karpenter"])
def test_with_room_to_grow_the_evicted_pod_runs_on_a_new_node(autoscaler: str) -> None:
    outcome_ = _bad_node("gpu", autoscaler=autoscaler, nodeGroups=_gpu_groups(3))
    assert outcome_ is not None and outcome_.returned == []
    training = [where for pod, where in outcome_.moved.items() if pod.startswith("PyTorchJob")]
    assert len(training) == 1 and training[0] != outcome_.node and not training[0].startswith("Pending"), outcome_


def test_cpu_stacks_have_no_preflight_to_fail() -> None:
    assert _bad_node("dev") is None


def test_the_rehearsal_reports_a_pod_that_tolerates_the_quarantine() -> None:
    """A training pod that tolerated every NoExecute taint would stay on the bad node: the rehearsal says so."""
    values, region = stack_file.load("gpu")
    registrations = run_under_mocks(parse({**values, "nodeGroups": _gpu_groups(3)}, region), stack="gpu")
    for registration in registrations:
        if registration.inputs.get("kind") == "PyTorchJob":
            for replica in registration.inputs["spec"]["pytorchReplicaSpecs"].values():
                replica["template"]["spec"]["tolerations"].append({"operator": "Exists", "effect": "NoExecute"})
    deployment = Deployment(registrations, region or "", "arn:aws:iam::123456789012:role/deployer", date.today())
    findings = rehearse_bad_node(deployment)
    assert findings and "runs on eks-ddp-gpu-nodes-1 after its pre-flight failed" in str(findings[0])


@pytest.mark.parametrize("operator", ["v1", "v2", "none"])
def test_a_spot_interruption_costs_a_node_loss_and_karpenter_drains_within_the_notice(operator: str) -> None:
    job = TrainingJob(name="gpt", namespace="training", image="img:1", replicas=2, node_losses=1)
    assert outcome(_rendered(operator, job), [SPOT]) is None
    values, region = stack_file.load("dev")
    for autoscaler, drained in (("karpenter", True), ("cluster-autoscaler", False)):
        config = parse({**values, "autoscaler": autoscaler, "trainingOperator": operator}, region)
        deployment = Deployment(run_under_mocks(config, stack="dev"), region or "", "arn:aws:iam::1:role/d", date.today())
        drain = spot_drain(deployment)
        assert drain.drained is drained
        assert drain.grace_seconds <= SPOT_NOTICE_SECONDS  # the SIGTERM checkpoint fits in the two-minute notice
