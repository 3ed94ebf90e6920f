"""Updates reach the running job (issue 21, part 4): each stack rendered again with a change to its pods alone, the
rehearsal's own (`rehearsal.with_pod_change`), is applied by some engine, under every operator; the defects the
rule exists for are findings."""

import functools
import json
import re
from dataclasses import replace
from datetime import date

import pytest

from eks_ddp.tools import rehearsal, stack_file
from eks_ddp.engine_models import Deployment, changed_pods, unapplied_pod_changes
from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN, Registration
from eks_ddp.workloads.components import QUEUE_CHANGE_REPLACES
from tests.stack.registered import registered

TODAY = date(2026, 11, 22)
TRAINING = {"v1": "PyTorchJob", "v2": "TrainJob", "none": "Job"}


@functools.cache
def _renderings(stack: str, operator: str) -> tuple[Deployment, Deployment]:
    """The stack under `operator`, before and after the rehearsal's change to the pods."""
    values, region = stack_file.load(stack)
    values = {**values, "trainingOperator": operator}
    if operator != "v1" and "elasticMinReplicas" in values.get("job", {}):  # elastic is v1's only: the shape, static
        values["job"] = {key: value for key, value in values["job"].items() if key != "elasticMinReplicas"}
    before = Deployment(registered(values, region, stack), region or "", DEPLOYER_ROLE_ARN, TODAY)
    after = registered(rehearsal.with_pod_change(values), region, stack)
    return before, replace(before, registrations=after)


def _run_ids(deployment: Deployment) -> set[str]:
    """The run ids in every object's inputs (the run's directories on the claim or in the bucket)."""
    text = json.dumps([r.inputs for r in deployment.kubernetes_objects()], default=str)
    return set(re.findall(r"runs/[a-z0-9-]+/([0-9a-f]{10})", text))


@pytest.mark.parametrize("operator", sorted(TRAINING))
@pytest.mark.parametrize("stack", stack_file.stacks())
def test_a_change_to_the_pods_alone_reaches_the_running_job_and_resumes_its_run(stack: str, operator: str) -> None:
    before, after = _renderings(stack, operator)
    changed = {new.inputs["kind"] for _, new in changed_pods(before, after)}
    assert TRAINING[operator] in changed, changed  # the label reaches the training pods: the check is not vacuous
    assert [str(finding) for finding in unapplied_pod_changes(before, after)] == []
    assert _run_ids(before) and _run_ids(after) == _run_ids(before)  # the replaced job resumes the same run


def _named_before_the_fix(registrations: list[Registration]) -> list[Registration]:
    """The runtime as it was named until 1d98c2c: after its CRD-immutable fields only, which a label leaves alone."""
    name = "eks-ddp-training-eks-ddp-train-immutable"

    def renamed(r: Registration) -> Registration:
        inputs = r.inputs
        if inputs.get("kind") == "ClusterTrainingRuntime":
            return replace(r, inputs={**inputs, "metadata": {**inputs["metadata"], "name": name}})
        if inputs.get("kind") == "TrainJob":
            reference = {**inputs["spec"]["runtimeRef"], "name": name}
            return replace(r, inputs={**inputs, "spec": {**inputs["spec"], "runtimeRef": reference}})
        return r

    return [renamed(r) for r in registrations]


def test_a_runtime_changed_in_place_never_reached_the_running_trainjob() -> None:
    """Trainer v2.3.0's jobset.go does not rebuild a JobSet that exists: `pulumi up` updated the runtime, left the
    TrainJob alone, and the job kept its old pods."""
    before, after = (replace(d, registrations=_named_before_the_fix(d.registrations)) for d in _renderings("dev", "v2"))
    (finding,) = unapplied_pod_changes(before, after)
    assert (finding.rule, finding.resource, finding.key) == ("updates", "TrainJob eks-ddp-train-job", "spec.runtimeRef")
    assert "jobset.go" in finding.problem


def _with_options(deployment: Deployment, kind: str, **options: object) -> Deployment:
    registrations = [replace(r, **options) if r.inputs.get("kind") == kind else r for r in deployment.registrations]
    return replace(deployment, registrations=registrations)


@pytest.mark.parametrize(("kind", "source"), [("PyTorchJob", "v1.9.4 (common/pod.go)"), ("MPIJob", "v0.8.0")])
def test_an_operators_job_updated_in_place_keeps_its_old_pods(kind: str, source: str) -> None:
    before, after = _renderings("gpu", "v1")
    (finding,) = unapplied_pod_changes(before, _with_options(after, kind, replace_on_changes=[]))
    assert finding.resource.startswith(f"{kind} ") and finding.key == "replaceOnChanges" and source in finding.problem
    (finding,) = unapplied_pod_changes(before, _with_options(after, kind, delete_before_replace=False))
    assert finding.key == "deleteBeforeReplace" and "AlreadyExists" in finding.problem


def test_pulumi_kubernetes_replaces_a_job_whose_template_changed_by_itself() -> None:
    """diff.go (pulumi-kubernetes v4.32.0): `.spec.template` is a Job's force-new property; no option is needed for
    it (the one a Job has is for its queue label, applying.QUEUE_CHANGE_REPLACES)."""
    before, after = _renderings("gpu", "none")
    jobs = [new for _, new in changed_pods(before, after) if new.inputs["kind"] == "Job"]
    assert {job.name for job in jobs} == {"eks-ddp-train-job", "eks-ddp-efa-check-job"}
    queue_label = QUEUE_CHANGE_REPLACES.replace_on_changes
    assert all(job.replace_on_changes == queue_label for job in jobs) and list(unapplied_pod_changes(before, after)) == []
