"""Validation against real schemas: the Kubeflow CRD in ../shared/schemas and kubernetes-validate."""

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from infra.versions import DEFAULT_KUBERNETES_VERSION

SCHEMAS = Path(__file__).resolve().parents[2].parent / "shared" / "schemas"
PYTORCHJOB_CRD = SCHEMAS / "kubeflow.org_pytorchjobs-v1.9.4.yaml"


def validate_pytorchjob(manifest: dict[str, Any]) -> None:
    if not PYTORCHJOB_CRD.exists():
        pytest.skip(f"{PYTORCHJOB_CRD} is absent (../shared/ is not checked out): PyTorchJob schema not checked")
    crd = yaml.safe_load(PYTORCHJOB_CRD.read_text())
    jsonschema.validate(manifest, crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def validate_core(manifest: dict[str, Any], kubernetes_version: str = DEFAULT_KUBERNETES_VERSION) -> None:
    kubernetes_validate.validate(manifest, kubernetes_version, strict=True)
