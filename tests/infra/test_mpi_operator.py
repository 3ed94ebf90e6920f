"""MPIJobs v2 beside the training operator v1: one owner for mpijobs.kubeflow.org, one controller."""

import re
from pathlib import Path

import yaml

from eks_ddp.infra.addons import training_operator
from eks_ddp.infra.facts import versions
from eks_ddp.infra.platform import TrainingPlatform
from tests.pulumi_harness import Recorded

KUSTOMIZATION = Path(training_operator.WITHOUT_MPIJOB) / "kustomization.yaml"
# kubeflow/trainer v1.9.4 cmd/training-operator.v1/main.go: the schemes `--enable-scheme` accepts, besides MPIJob.
OTHER_SCHEMES = {"pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob"}


def test_the_patched_training_operator_drops_only_mpijob_at_the_pinned_release() -> None:
    kustomization = yaml.safe_load(KUSTOMIZATION.read_text())
    (resource,) = kustomization["resources"]
    assert resource == versions.TRAINING_OPERATOR_OVERLAY.format(version=versions.TRAINING_OPERATOR_VERSION)
    deleted, arguments = (yaml.safe_load(patch["patch"]) for patch in kustomization["patches"])
    assert deleted["$patch"] == "delete" and deleted["metadata"]["name"] == "mpijobs.kubeflow.org"
    assert arguments[0]["path"] == "/spec/template/spec/containers/0/args"
    assert {re.sub("^--enable-scheme=", "", arg) for arg in arguments[0]["value"]} == OTHER_SCHEMES


def test_a_gpu_efa_group_brings_the_mpi_operator_after_a_training_operator_without_mpijob(pulumi_mocks: Recorded) -> None:
    group = {"name": "gpu", "instance_type": "p5.48xlarge", "availability_zone": "us-east-1a", "max_size": 2}
    args = {"network": {"availability_zones": ["us-east-1a", "us-east-1b"]}, "node_groups": [group], "storage": "none"}
    pulumi_mocks.run(lambda: TrainingPlatform("p", args))  # type: ignore[arg-type]
    training = pulumi_mocks.named("p-training-operator-manifests")
    assert training.inputs["directory"] == "infra/addons/manifests/training-operator-without-mpijob"
    mpi = pulumi_mocks.named("p-mpi-operator-manifests")
    assert mpi.inputs["file"].endswith(f"/{versions.MPI_OPERATOR_VERSION}/deploy/v2beta1/mpi-operator.yaml")
    assert training.urn in mpi.dependencies
