"""The upstream files the checks compare against, shipped in upstream/ (each file's source and tag in its README)."""

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

UPSTREAM = Path(__file__).resolve().parents[1] / "upstream"
SCHEMAS = UPSTREAM / "schemas"
REFERENCE = UPSTREAM / "reference"


@cache
def crd_schema(crd: str, version: str) -> dict[str, Any]:
    """The openAPIV3Schema a CRD file serves for one version (parsed once: the files are up to 1 MB)."""
    versions = yaml.safe_load((SCHEMAS / crd).read_text())["spec"]["versions"]
    return next(v for v in versions if v["name"] == version)["schema"]["openAPIV3Schema"]


def validate_against_crd(manifest: dict[str, Any], crd: str) -> None:
    """As the API server's structural check would: against the version the manifest's apiVersion names."""
    jsonschema.validate(manifest, crd_schema(crd, manifest["apiVersion"].rsplit("/", 1)[1]))
