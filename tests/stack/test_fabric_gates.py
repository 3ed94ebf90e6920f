"""The fabric checks gate as a user expects (issue 37, finding 3): a failed check stops `pulumi up` within a minute
with its verdict, nothing it runs outlives the time the docs state, the next `pulumi up` runs a failed check again
and leaves a passed one alone, and the evaluation waits for the checks as training does.

What pulumi-kubernetes and the Pulumi engine do with each object is the rehearsal's model
(engine_models/pulumi_kubernetes.py, from their sources); these tests hold the GPU stack to it, and the model
to what today's objects (before this change) would meet.
"""

import copy
from dataclasses import replace
from datetime import date
from typing import Any

import pytest

from eks_ddp.tools import stack_file
from eks_ddp.engine_models import Deployment, check
from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN, Registration
from eks_ddp.workloads.batch_jobs import FABRIC_CHECK_LABEL
from tests.stack.registered import registered

TODAY = date(2026, 11, 24)


def _gpu(mode: str = "gate") -> list[Registration]:
    values, region = stack_file.load("gpu")
    return registered({**values, "fabricCheck": mode}, region, "gpu")


def _deployment(registrations: list[Registration]) -> Deployment:
    return Deployment(registrations, "us-west-2", DEPLOYER_ROLE_ARN, TODAY)


def _checks(registrations: list[Registration]) -> dict[str, Registration]:
    return {
        r.inputs["kind"]: r
        for r in registrations
        if r.inputs.get("kind") in ("Job", "MPIJob") and FABRIC_CHECK_LABEL in r.inputs["metadata"].get("labels", {})
    }


def _gate_findings(registrations: list[Registration]) -> list[str]:
    return [str(f) for f in check(_deployment(registrations)) if f.rule == "fabric-gate"]


def _as_before(registration: Registration) -> Registration:
    """The check object as this repository rendered it before issue 37: the EFA Job retried twice, without its
    verdict in its failure or replaceUnready; the MPIJob awaited until `condition=Succeeded`, its workers without a
    deadline, and no attempt Job behind it."""
    inputs: dict[str, Any] = copy.deepcopy(registration.inputs)
    notes = inputs["metadata"]["annotations"]
    if inputs["kind"] == "Job":
        inputs["spec"]["backoffLimit"] = 2
        notes.pop("pulumi.com/replaceUnready", None)
        for container in inputs["spec"]["template"]["spec"]["containers"]:
            container.pop("terminationMessagePolicy", None)
        return replace(registration, inputs=inputs)
    notes["pulumi.com/waitFor"] = "condition=Succeeded"
    notes.pop("eks-ddp/attempt", None)
    inputs["spec"]["runPolicy"]["backoffLimit"] = 2
    inputs["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"].pop("activeDeadlineSeconds", None)
    return replace(registration, inputs=inputs, property_dependencies={}, replace_on_changes=["spec"])


def test_the_rehearsal_knows_a_gate_that_reports_late_never_runs_again_or_lets_its_workers_run() -> None:
    """pulumi-kubernetes fails a Job's await as soon as it fails, but awaits a `waitFor` until its timeout whatever
    the object did; the next `pulumi up` re-awaits a failed object unless something replaces it; mpi-operator
    v0.8.0 bounds only the launcher (engine_models/pulumi_kubernetes.py)."""
    registrations = _gpu()
    checks = _checks(registrations)
    before = [_as_before(r) if r in checks.values() else r for r in registrations]
    findings = _gate_findings(before)
    efa, mpijob = (f"{checks[kind].type.split(':')[-1]} {checks[kind].name}" for kind in ("Job", "MPIJob"))
    expected = [
        (efa, "a verdict that failed 120 s in is reported 240 s later"),  # two retries of the same verdict
        (efa, "its failure does not say the verdict"),
        (efa, "the next pulumi up awaits the failed object again instead of running the check again"),
        (mpijob, "a verdict that failed 120 s in is reported 1680 s later"),  # at the 1,800 s timeout
        (mpijob, "the next pulumi up awaits the failed object again instead of running the check again"),
        (mpijob, "its workers run unbounded"),
    ]
    for resource, problem in expected:
        assert any(resource in line and problem in line for line in findings), (resource, problem, findings)


@pytest.mark.parametrize("mode", ["gate", "report"])
def test_the_gpu_stacks_checks_fail_fast_with_their_verdict_run_again_and_stay_bounded(mode: str) -> None:
    from eks_ddp.engine_models.pulumi_kubernetes import gate_problems, reported_after, runs_again

    registrations = _gpu(mode)
    deployment = _deployment(registrations)
    checks = _checks(registrations)
    assert set(checks) == {"Job", "MPIJob"} and _gate_findings(registrations) == []
    for registration in checks.values():
        assert gate_problems(deployment, registration) == []
        assert reported_after(registration, 300) == 300  # the failed test, not a retry or the timeout, is reported
        assert runs_again(deployment, registration, passed=False) and not runs_again(deployment, registration, True)


def test_an_attempt_that_nothing_completes_would_run_the_check_after_every_pulumi_up() -> None:
    """The second `pulumi up` after a pass must change nothing: the attempt Job is completed by the patch that waits
    for a passed verdict; without that patch it would stay incomplete and replace the check every time."""
    registrations = _gpu()
    without_patch = [r for r in registrations if r.type != "kubernetes:batch/v1:JobPatch"]
    findings = _gate_findings(without_patch)
    assert any("MPIJob eks-ddp-nccl-check-mpijob" in f and "runs it again after it passed" in f for f in findings)


def test_the_evaluation_waits_for_the_checks_as_training_does() -> None:
    """It used to start with the platform: after a failed check it held a system node's pod for two days, waiting
    for a model no training would write."""
    from eks_ddp.engine_models.pulumi_kubernetes import phases

    registrations = _gpu()
    stages = phases(_deployment(registrations))
    checks = _checks(registrations)
    (evaluation,) = [r for r in registrations if r.name == "eks-ddp-evaluate-job"]
    assert stages[evaluation.urn] > max(stages[check.urn] for check in checks.values())
