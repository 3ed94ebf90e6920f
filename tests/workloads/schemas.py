"""Validation against real schemas: the Kubeflow CRD in ../shared/schemas and kubernetes-validate."""

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from eks_ddp.infra.facts.versions import DEFAULT_KUBERNETES_VERSION

SCHEMAS = Path(__file__).resolve().parents[2].parent / "shared" / "schemas"
PYTORCHJOB_CRD = SCHEMAS / "kubeflow.org_pytorchjobs-v1.9.4.yaml"


CRDS = {
    "PyTorchJob": PYTORCHJOB_CRD,
    "TrainJob": SCHEMAS / "trainer.kubeflow.org_trainjobs-v2.3.0.yaml",
    "ClusterTrainingRuntime": SCHEMAS / "trainer.kubeflow.org_clustertrainingruntimes-v2.3.0.yaml",
}


def validate_custom(manifest: dict[str, Any]) -> None:
    """Against the served version of the kind's CRD, as copied from upstream into ../shared/schemas."""
    path = CRDS[manifest["kind"]]
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/ is not checked out): {manifest['kind']} schema not checked")
    crd = yaml.safe_load(path.read_text())
    version = next(v for v in crd["spec"]["versions"] if manifest["apiVersion"].endswith("/" + v["name"]))
    jsonschema.validate(manifest, version["schema"]["openAPIV3Schema"])


def validate_pytorchjob(manifest: dict[str, Any]) -> None:
    validate_custom(manifest)


def validate_core(manifest: dict[str, Any], kubernetes_version: str = DEFAULT_KUBERNETES_VERSION) -> None:
    kubernetes_validate.validate(manifest, kubernetes_version, strict=True)
