"""CRDs as the local cluster installs them: applied, then waited for until established, as Helm installs a chart's.

Each carries the digest of its manifest (DIGEST), so that a cluster that already holds the same CRD, one that a
test sharing the control plane before installed (tests.cluster.shared_plane), is not sent 4 MB of schemas again to
change nothing: applying the same manifest twice is a no-op for the API server, and a costly one.
"""

import hashlib
import json
import time
from typing import Any

from tests.cluster.api import Resource
from tests.cluster.kubectl import Kubectl

DIGEST = "eks-ddp.local/manifest-sha256"
ESTABLISHED_TIMEOUT_S = 120
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
                frozenset({"list"}))


class CrdError(Exception):
    """A CRD the API server did not establish."""


def digest(crd: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(crd, sort_keys=True).encode()).hexdigest()


def _stamped(crd: dict[str, Any]) -> dict[str, Any]:
    meta = crd["metadata"]
    return {**crd, "metadata": {**meta, "annotations": {**(meta.get("annotations") or {}), DIGEST: digest(crd)}}}


def held(kubectl: Kubectl) -> dict[str, str]:
    """The CRDs the API server holds, by name, with the digest of the manifest applied ("" if none was stamped)."""
    listed = kubectl.api.metadata(CRDS)
    return {meta["name"]: (meta.get("annotations") or {}).get(DIGEST, "") for meta in listed}


def unchanged(kubectl: Kubectl, crds: list[dict[str, Any]]) -> set[str]:
    """The names of `crds` the API server holds as these manifests were applied."""
    on_server = held(kubectl)
    return {crd["metadata"]["name"] for crd in crds if on_server.get(crd["metadata"]["name"]) == digest(crd)}


def install(kubectl: Kubectl, crds: list[dict[str, Any]]) -> None:
    """`crds` applied and established (CrdError if one is not after ESTABLISHED_TIMEOUT_S), but those the API server
    holds as they are: established when they were applied."""
    same = unchanged(kubectl, crds) if crds else set()
    changed = [crd for crd in crds if crd["metadata"]["name"] not in same]
    if not changed:
        return
    kubectl.apply([_stamped(crd) for crd in changed])
    waiting, deadline = [crd["metadata"]["name"] for crd in changed], time.monotonic() + ESTABLISHED_TIMEOUT_S
    while waiting := [name for name in waiting if not _established(kubectl, name)]:
        if time.monotonic() > deadline:
            raise CrdError(f"CRDs {', '.join(waiting)}: not Established after {ESTABLISHED_TIMEOUT_S} s")
        time.sleep(0.2)


def _established(kubectl: Kubectl, name: str) -> bool:
    found = kubectl.api.read("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
    return any(c["type"] == "Established" and c["status"] == "True"
               for c in (found.get("status") or {}).get("conditions") or [])
