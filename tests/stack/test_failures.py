"""A job with `survivesNodeLosses: N` survives exactly N node losses or crashes, in each engine's own counting."""

from datetime import date
from typing import Any

import pytest

from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES
from eks_ddp.tools import stack_file
from eks_ddp.engine_models.failures import (
    BAD_NODE,
    CRASH,
    NODE_LOSS,
    SPOT,
    SPOT_NOTICE_SECONDS,
    SpotDrain,
    backoff_outcome,
    outcome,
    spot_drain,
)
from eks_ddp.engine_models import Deployment
from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN, Registration
from eks_ddp.workloads import indexed_job, pytorchjob, trainjob
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.training_pod import TRAINER_LABEL, TrainingJob
from tests.stack.registered import registered

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
    survived = losses  # survivesNodeLosses 0: the first loss or crash fails the job
    assert outcome(manifest, [NODE_LOSS] * survived) is None
    assert outcome(manifest, [NODE_LOSS] * (survived + 1)) == survived + 1
    assert outcome(manifest, [CRASH] * losses) is None  # a crashed process costs what a lost node costs


def test_the_old_budget_failed_on_the_last_loss_it_claimed_to_survive() -> None:
    """losses x replicas, compared with >=: one node loss of a 2-replica job failed it (issue 21)."""
    job = TrainingJob(name="mnist", namespace="training", image="img:1", replicas=2, node_losses=1)
    assert backoff_outcome(job.node_losses * job.replicas, job.replicas, [NODE_LOSS]) == 1
    assert outcome(pytorchjob.render(job, TARGET), [NODE_LOSS]) is None


@pytest.mark.parametrize("operator", ["v1", "v2", "none"])
def test_a_bad_gpu_node_costs_what_a_node_loss_costs(operator: str) -> None:
    job = TrainingJob(name="gpt", namespace="training", image="img:1", replicas=2, node_losses=1)
    assert outcome(_rendered(operator, job), [BAD_NODE]) is None
    assert outcome(_rendered(operator, job), [BAD_NODE, NODE_LOSS]) == 2


@pytest.mark.parametrize("operator", ["v1", "v2", "none"])
def test_a_spot_interruption_costs_a_node_loss_and_karpenter_drains_within_the_notice(operator: str) -> None:
    job = TrainingJob(name="gpt", namespace="training", image="img:1", replicas=2, node_losses=1)
    assert outcome(_rendered(operator, job), [SPOT]) is None
    values, region = stack_file.load("dev")
    for autoscaler, drained in (("karpenter", True), ("cluster-autoscaler", False)):
        registrations = registered({**values, "autoscaler": autoscaler, "trainingOperator": operator}, region)
        deployment = Deployment(registrations, region or "", "arn:aws:iam::1:role/d", date.today())
        drain = spot_drain(deployment)
        assert drain == SpotDrain(drained, grace_seconds=120)  # the training pods' terminationGracePeriodSeconds
        assert drain.grace_seconds <= SPOT_NOTICE_SECONDS  # the SIGTERM checkpoint fits in the two-minute notice


@pytest.mark.parametrize(
    ("backoff_limit", "pods", "failed_on"),
    [
        (0, 0, None),  # a Job paused at parallelism 0: no pod restarts, and a limit of 0 fails on a restart (> 0)
        (0, 1, 1),
        (1, 1, 1),
        (2, 1, 2),
        (3, 2, 2),  # 2 restarts survive, 4 reach the limit
    ],
)
def test_a_job_fails_on_the_event_whose_restarts_reach_its_backoff_limit(
    backoff_limit: int, pods: int, failed_on: int | None
) -> None:
    """The Job controller's pastBackoffLimitOnFailure, as the training operator's PastBackoffLimit: the sum of
    restarts > 0 when backoffLimit is 0, else >= backoffLimit; each event restarts every pod once."""
    job = {"kind": "Job", "spec": {"backoffLimit": backoff_limit, "parallelism": pods}}
    assert outcome(job, [NODE_LOSS] * 3) == failed_on


def test_a_replica_spec_without_replicas_is_one_pod() -> None:
    """The training operator defaults `replicas` to 1 (kubeflow/trainer v1.9.4 pkg/apis/kubeflow.org/v1
    pytorch_defaults.go, SetDefaults_PyTorchJob): a Master and one Worker restart 2 containers an event."""
    job = {
        "kind": "PyTorchJob",
        "spec": {"runPolicy": {"backoffLimit": 3}, "pytorchReplicaSpecs": {"Master": {}, "Worker": {"replicas": 1}}},
    }
    assert outcome(job, [NODE_LOSS]) is None
    assert outcome(job, [NODE_LOSS, NODE_LOSS]) == 2


def _registration(type_: str, name: str, inputs: dict[str, Any]) -> Registration:
    return Registration(type_, name, f"urn:{type_}::{name}", "", inputs)


@pytest.mark.parametrize(
    "trainer",
    [
        {"metadata": {"labels": TRAINER_LABEL}, "spec": {"containers": [{"name": "trainer"}]}},
        {"metadata": {"labels": TRAINER_LABEL}},  # no spec at all: read before the API server would refuse it
    ],
    ids=["no-grace", "no-spec"],
)
def test_karpenter_without_an_interruption_queue_does_not_drain_and_the_grace_defaults_to_30_seconds(
    trainer: dict[str, Any],
) -> None:
    """No `settings.interruptionQueue`: Karpenter never hears the warning. A pod spec without
    terminationGracePeriodSeconds gets 30 (kubernetes/api core/v1 PodSpec); a stack without training pods too."""
    chart = {"chart": "oci://public.ecr.aws/karpenter/karpenter", "values": {}}
    karpenter = _registration("kubernetes:helm.sh/v3:Release", "karpenter", chart)
    job = _registration(
        "kubernetes:batch/v1:Job", "train", {"kind": "Job", "spec": {"parallelism": 2, "template": trainer}}
    )
    for registrations in ([karpenter, job], [karpenter]):
        deployment = Deployment(registrations, "us-east-1", DEPLOYER_ROLE_ARN, date(2026, 11, 22))
        assert spot_drain(deployment) == SpotDrain(drained=False, grace_seconds=30)
