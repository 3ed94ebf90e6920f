"""Validation against real schemas: the upstream CRDs in upstream/schemas and kubernetes-validate."""

from typing import Any

import kubernetes_validate

from eks_ddp.infra.facts.versions import DEFAULT_KUBERNETES_VERSION
from tests.upstream import validate_against_crd

CRDS = {
    "PyTorchJob": "kubeflow.org_pytorchjobs-v1.9.4.yaml",
    "TrainJob": "trainer.kubeflow.org_trainjobs-v2.3.0.yaml",
    "ClusterTrainingRuntime": "trainer.kubeflow.org_clustertrainingruntimes-v2.3.0.yaml",
}


def validate_custom(manifest: dict[str, Any]) -> None:
    """Against the served version of the kind's CRD."""
    validate_against_crd(manifest, CRDS[manifest["kind"]])


def validate_pytorchjob(manifest: dict[str, Any]) -> None:
    validate_custom(manifest)


def validate_core(manifest: dict[str, Any], kubernetes_version: str = DEFAULT_KUBERNETES_VERSION) -> None:
    kubernetes_validate.validate(manifest, kubernetes_version, strict=True)
