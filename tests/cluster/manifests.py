"""What a stack's kustomize Directory or yaml ConfigFile installs, read from the Go module cache instead of GitHub.

The stack names release manifests by their GitHub address (infra/facts/versions.py). The same files ship inside the
Go module an engine folder pins at that release; each address below maps to that module, and a release the engine
folder does not pin is refused in one line (the harness must never install one release's manifests beside another
release's controller). Kustomizations of ours that name such an address are rendered with the address replaced by
the module's folder, by the kustomize inside kubectl.
"""

import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from eks_ddp.tools.mocking import Registration
from tests.cluster.documents import documents
from tests.cluster.engines import build

KUSTOMIZE = "kubernetes:kustomize/v2:Directory"
YAML_FILE = "kubernetes:yaml/v2:ConfigFile"
ROOT = Path(__file__).resolve().parents[2]


class ManifestSourceError(Exception):
    """A release address that no engine folder pins, or pins at another version."""


@dataclass(frozen=True)
class Source:
    address: re.Pattern[str]
    """A release address with `ref` (the tag) and `path` (inside the repository) groups."""
    engine: str
    module: str
    equivalent: tuple[tuple[str, str], ...] = ()
    """Release refs whose file is not the module's byte for byte but the same for the API server, each with what
    differs: taken instead of refused."""


SOURCES = (
    # kubeflow/trainer moved from kubeflow/training-operator; the v1.9 tags still declare the old module path.
    Source(re.compile(r"github\.com/kubeflow/trainer\.git/(?P<path>[^?]+)\?ref=(?P<ref>v[\d.]+)"),
           "training-operator", "github.com/kubeflow/training-operator"),
    Source(re.compile(r"https://raw\.githubusercontent\.com/kubeflow/mpi-operator/(?P<ref>v[\d.]+)/(?P<path>.+)"),
           "mpi-operator", "github.com/kubeflow/mpi-operator"),
    # The ProvisioningRequest CRD (versions.PROVISIONING_REQUEST_CRD), from the autoscaler's apis module that Kueue's
    # go.mod requires (k8s.io/autoscaler/cluster-autoscaler/apis v0.0.0-20240830133931-adfbe7e45277, the only one the
    # proxy serves): its path in the module is the repository's without the leading cluster-autoscaler/apis/.
    Source(re.compile(r"https://raw\.githubusercontent\.com/kubernetes/autoscaler/(?P<ref>cluster-autoscaler-[\d.]+)/"
                      r"cluster-autoscaler/apis/(?P<path>.+)"),
           "kueue", "k8s.io/autoscaler/cluster-autoscaler/apis",
           (("cluster-autoscaler-1.35.2", "the same schema, v1 served and stored, v1beta1 served; the tag's file adds "
             "only v1beta1's deprecation (`deprecated`, `deprecationWarning`) and a newer controller-gen annotation "
             "(compared at the tag against the module's, 2026-11-26)"),),
           ),
)


def local_path(address: str) -> Path | None:
    """The file or folder inside the module cache that a release address names; None if no source matches it."""
    for source in SOURCES:
        match = source.address.fullmatch(address)
        if match is None:
            continue
        folder = build.module_dir(source.engine, source.module)
        pinned = folder.name.rpartition("@")[2]
        if pinned != match["ref"] and match["ref"] not in dict(source.equivalent):
            raise ManifestSourceError(
                f"{address}: release {match['ref']}, but tests/cluster/engines/{source.engine}/go.mod pins "
                f"{source.module} {pinned}; pin the same release in both"
            )
        return folder / match["path"]
    return None


def offline_kustomization(directory: Path, into: Path) -> Path:
    """A copy of our kustomization in `into` whose remote resources are their module-cache folders."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    resources = []
    for resource in kustomization.get("resources", []):
        local = local_path(resource)
        target = local if local is not None else (directory / resource).resolve()
        resources.append(os.path.relpath(target, into))  # kustomize takes no absolute path for a base
    (into / "kustomization.yaml").write_text(yaml.safe_dump({**kustomization, "resources": resources}))
    return into


def kustomize(directory: str, kube: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize` of a Directory's `directory`: a release address, or a kustomization of ours."""
    local = local_path(directory)
    with tempfile.TemporaryDirectory() as scratch:
        target = local if local is not None else offline_kustomization(ROOT / directory, Path(scratch))
        done = subprocess.run([str(kube), "kubectl", "kustomize", str(target)], capture_output=True, text=True)
    if done.returncode:
        raise ManifestSourceError(f"kustomize {directory}: {done.stderr.strip()}")
    return documents(done.stdout)


def config_file(address: str) -> list[dict[str, Any]]:
    local = local_path(address)
    if local is None:
        raise ManifestSourceError(f"{address}: no engine folder under tests/cluster/engines ships this file")
    return documents(local.read_text())


def render(registration: Registration, kube: Path) -> list[dict[str, Any]] | None:
    """The objects a Directory or ConfigFile installs; None for any other registration."""
    if registration.type == KUSTOMIZE:
        return kustomize(str(registration.sent["directory"]), kube)
    if registration.type == YAML_FILE:
        return config_file(str(registration.sent["file"]))
    return None


def crd_names(manifests: list[dict[str, Any]]) -> Iterator[str]:
    return (m["metadata"]["name"] for m in manifests if m.get("kind") == "CustomResourceDefinition")
