"""eks-ddp:trainingOperator: each operator on the dev and GPU stacks passes the deploy rehearsal, installs what its
job needs and nothing else, and its job's objects wait for the operator that serves them."""

from datetime import date

import pytest

from eks_ddp.tools import stack_file
from eks_ddp.engine_models import Deployment, check
from eks_ddp.engine_models.pulumi_kubernetes import awaited_to_completion, is_training, phases
from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN, Registration
from eks_ddp.tools.rehearsal import rehearse_values
from eks_ddp.workloads.batch_jobs import FABRIC_CHECK_LABEL
from tests.stack.registered import registered

TODAY = date(2026, 11, 22)
K8S = "kubernetes:"
# What each operator's stack must register (kind or Helm chart) and must not.
EXPECTED = {
    "v1": ({"PyTorchJob", "kustomize"}, {"TrainJob", "ClusterTrainingRuntime", "kubeflow-trainer"}),
    "v2": ({"TrainJob", "ClusterTrainingRuntime", "kubeflow-trainer"}, {"PyTorchJob", "kustomize"}),
    "none": (
        {"Job/eks-ddp-train", "Service/eks-ddp-train"},
        {"PyTorchJob", "TrainJob", "kustomize", "kubeflow-trainer"},
    ),
}


def _features(registrations: list[Registration]) -> set[str]:
    found = set()
    for r in registrations:
        kind = r.inputs.get("kind")
        if kind:
            found |= {str(kind), f"{kind}/{r.name.rsplit('-', 1)[0]}"}
        if r.type.startswith(f"{K8S}kustomize"):
            found.add("kustomize")
        if r.type == f"{K8S}helm.sh/v3:Release":
            found.add(str(r.inputs.get("chart", "")).rsplit("/", 1)[-1])
    return found


@pytest.mark.parametrize("stack", ["dev", "gpu"])
@pytest.mark.parametrize("operator", ["v1", "v2", "none"])
def test_each_operator_passes_the_rehearsal_and_installs_only_what_its_job_needs(stack: str, operator: str) -> None:
    values, region = stack_file.load(stack)
    values = {**values, "trainingOperator": operator}
    registrations = registered(values, region, stack)
    assert rehearse_values(values, region, stack, TODAY, first=registrations) == []
    features = _features(registrations)
    present, absent = EXPECTED[operator]
    assert present <= features, present - features
    assert not absent & features, absent & features


def test_the_trainjob_and_its_runtime_wait_for_the_trainer_chart() -> None:
    values, region = stack_file.load("dev")
    registrations = registered({**values, "trainingOperator": "v2"}, region)
    releases = [r for r in registrations if r.type == f"{K8S}helm.sh/v3:Release"]
    chart = next(r for r in releases if "kubeflow-trainer" in str(r.inputs.get("chart")))
    assert (
        chart.inputs["chart"] == "oci://ghcr.io/kubeflow/charts/kubeflow-trainer" and chart.inputs["version"] == "2.3.0"
    )
    assert chart.inputs["values"]["jobset"]["install"] is True
    by_kind = {str(r.inputs.get("kind")): r for r in registrations if r.inputs.get("kind")}
    for kind in ("TrainJob", "ClusterTrainingRuntime"):
        assert chart.urn in by_kind[kind].dependencies, f"{kind} does not wait for the chart that installs its CRD"
    # The Trainer's webhook resolves spec.runtimeRef when the TrainJob is admitted: the runtime must exist first.
    assert by_kind["ClusterTrainingRuntime"].urn in by_kind["TrainJob"].dependencies


def test_a_trainjob_updated_in_place_is_reported_by_the_rehearsal() -> None:
    """Its spec.trainer is immutable (the CRD's CEL rule): an in-place update of a changed TrainJob fails."""
    from dataclasses import replace

    from eks_ddp.engine_models import Deployment, check
    from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN

    values, region = stack_file.load("dev")
    registrations = registered({**values, "trainingOperator": "v2"}, region)
    deployment = Deployment(registrations, region or "", DEPLOYER_ROLE_ARN, TODAY)
    assert not [f for f in check(deployment) if f.rule == "immutable"]
    updated = [replace(r, replace_on_changes=[]) if r.inputs.get("kind") == "TrainJob" else r for r in registrations]
    findings = [str(f) for f in check(Deployment(updated, region or "", DEPLOYER_ROLE_ARN, TODAY))]
    assert any(line.startswith("immutable: TrainJob eks-ddp-train-job replaceOnChanges") for line in findings), findings


@pytest.mark.parametrize("operator", ["v1", "v2", "none"])
@pytest.mark.parametrize("mode", ["gate", "report"])
def test_training_is_created_only_after_both_fabric_checks_ended_on_every_operator(operator: str, mode: str) -> None:
    """pulumi-kubernetes awaits the EFA Job to Complete and the MPIJob to Succeeded before it creates the training
    object that depends on them; under `report` the checks still run first (they hold the same GPUs and EFA devices)
    but end well whatever they find."""
    values, region = stack_file.load("gpu")
    runs = registered({**values, "trainingOperator": operator, "fabricCheck": mode}, region)
    deployment = Deployment(runs, region or "", DEPLOYER_ROLE_ARN, date(2026, 11, 24))
    stages = phases(deployment)
    checks = {
        r.inputs["kind"]: r for r in runs if r.inputs.get("metadata", {}).get("labels", {}).get(FABRIC_CHECK_LABEL)
    }
    trainings = [r for r in runs if r.urn in stages and is_training(r)]
    assert set(checks) == {"Job", "MPIJob", "Service"} and len(trainings) == 1
    assert all(awaited_to_completion(checks[kind]) for kind in ("Job", "MPIJob"))
    assert stages[trainings[0].urn] > max(stages[checks[kind].urn] for kind in ("Job", "MPIJob"))
    launcher = checks["MPIJob"].inputs["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert ("reported only" in launcher["command"][2]) == (mode == "report")
    assert not [f for f in check(deployment) if f.rule == "fabric-gate"]
