"""One control plane for the tests of a session: each test gets it back as a fresh one would be, but for the CRDs its
stack installs anyway.

A fresh control plane costs every test 15 to 20 CPU-seconds of the API server, most of it on the operators' CRDs
(4.2 MB of schemas), and as long again on a machine whose two cores run the rest of the suite. Here etcd and the API
server stay up; between two tests every other process stops (controllers, KWOK, operators, Karpenter), every object
the API server did not hold right after it started goes (a CRD the next stack installs stays: applying it again
changes nothing), and the controllers start again, with none of the last test's state in memory. What a fresh
cluster would still refuse, an object whose CRD its stack installs only later, local_cluster.deploy refuses itself
(`_Known.refuse_unserved`). A reset that leaves anything behind is not trusted: the plane is stopped and a fresh one
started, saying why.
"""

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cluster import crds, local_cluster
from tests.cluster.control_plane import ControlPlane, any_alive, stop_recorded
from tests.cluster.api import Api, ApiError, Resource
from tests.cluster.kubectl import Kubectl

RESET_TIMEOUT_S = 60.0
ADMISSION_KINDS = {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy",
                   "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}
"""Deleted first: with their operators stopped, a webhook whose failurePolicy is Fail would refuse the rest."""
CRD = "CustomResourceDefinition"
AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"


class ResetError(Exception):
    """Objects of an earlier test that did not go."""


@dataclass(frozen=True)
class _Object:
    resource: Resource
    meta: dict[str, Any]

    @property
    def path(self) -> str:
        return self.resource.path(self.meta.get("namespace", ""), self.meta["name"])

    def __str__(self) -> str:
        return f"{self.resource.kind} {self.meta.get('namespace', '')}/{self.meta['name']}"


VOLATILE = {"Event", "Lease", "Endpoints", "EndpointSlice"}
"""Kinds whose objects come and go with the cluster's own life, not with what was applied to it."""


def held(api: Api) -> set[str]:
    """Every object the API server holds but the volatile ones, as "kind namespace/name"."""
    return {f"{o.resource.kind} {o.meta.get('namespace', '')}/{o.meta['name']}" for o in _objects(api)
            if o.resource.kind not in VOLATILE}


def _objects(api: Api) -> list[_Object]:
    """Every object the API server holds, each once (events are served by two groups): its metadata, read in its
    group's preferred version (discovery lists it first). Another version would need the CRD's conversion webhook,
    which is stopped while the plane is reset (Kueue's v1beta1 objects: a PATCH through it failed with EOF)."""
    found: dict[str, _Object] = {}
    read: set[tuple[str, str]] = set()
    for resource in api.resources():
        if (resource.group, resource.name) in read:
            continue
        read.add((resource.group, resource.name))
        if {"list", "delete"} <= resource.verbs:
            try:
                found |= {meta["uid"]: _Object(resource, meta) for meta in api.metadata(resource)}
            except ApiError as error:  # a kind discovery listed went with its CRD since
                if error.status != 404:
                    raise
    return list(found.values())


def _ignoring_gone(api: Api, method: str, path: str, body: Any = None, content_type: str = "application/json") -> None:
    try:
        api.request(method, path, body, content_type)
    except ApiError as error:
        if error.status != 404:
            raise


def _place(o: _Object) -> tuple[str, str, str]:
    return o.resource.group, o.resource.name, o.meta.get("namespace", "")


def _delete(api: Api, objects: list[_Object], kept: set[tuple[str, str, str]]) -> None:
    """Deleted at once, no grace period, their finalizers dropped (nothing that would remove them runs now); a CRD
    keeps its own, which the API server honours itself by deleting the CRD's objects. Namespaces are left to
    `_finalize`. The objects of a resource in a namespace where nothing is `kept` go in one request (a collection's
    DELETE): a test leaves thousands of events, one request each cost the API server more than the test itself."""
    for o in objects:
        if o.meta.get("finalizers") and o.resource.kind != CRD:
            _ignoring_gone(api, "PATCH", o.path, {"metadata": {"finalizers": None}}, "application/merge-patch+json")
    by_place: dict[tuple[str, str, str], list[_Object]] = {}
    for o in objects:
        if o.resource.kind != "Namespace":
            by_place.setdefault(_place(o), []).append(o)
    for place, inside in by_place.items():
        resource, namespace = inside[0].resource, place[2]
        if namespace and "deletecollection" in resource.verbs and place not in kept:
            _ignoring_gone(api, "DELETE", resource.path(namespace), {"gracePeriodSeconds": 0})
        else:
            for o in inside:
                _ignoring_gone(api, "DELETE", o.path, {"gracePeriodSeconds": 0})


def _finalize(api: Api, namespaces: list[_Object]) -> None:
    """Deleted and finalized, as their controller finalizes them once they are empty."""
    for namespace in namespaces:
        name = namespace.meta["name"]
        _ignoring_gone(api, "DELETE", namespace.path)
        finalized = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "spec": {"finalizers": []}}
        _ignoring_gone(api, "PUT", f"{namespace.path}/finalize", finalized)


def reset(plane: ControlPlane, api: Api, baseline: frozenset[str], keep_crds: set[str]) -> None:
    """The plane as it was right after its API server started, but for `keep_crds`, and its controllers running again
    from scratch; ResetError when objects of the last test are still there after RESET_TIMEOUT_S. Admission
    configurations go first, the objects in namespaces before their namespaces; a CRD's deletion, which the API
    server completes once its objects are gone, is waited for."""
    plane.stop_all_but_api()
    deadline = time.monotonic() + RESET_TIMEOUT_S
    while True:
        held = _objects(api)
        kept = {_place(o) for o in held if o.meta["uid"] in baseline}
        left = [o for o in held if o.meta["uid"] not in baseline and AUTOMANAGED not in (o.meta.get("labels") or {})
                and not (o.resource.kind == CRD and o.meta["name"] in keep_crds)]
        if not left:
            break
        if time.monotonic() > deadline:
            raise ResetError(f"{len(left)} objects of the last test still there: {', '.join(map(str, left[:10]))}")
        inside = [o for o in left if o.resource.kind != "Namespace"]
        _delete(api, [o for o in inside if o.resource.kind in ADMISSION_KINDS], kept)
        _delete(api, [o for o in inside if o.resource.kind not in ADMISSION_KINDS], kept)
        if not inside:
            _finalize(api, left)
        time.sleep(0.1)
    plane.start_controllers(local_cluster.kwok_stages())


class SharedPlane:
    """The session's control plane, started on first use, reset for each later one (`take`)."""

    def __init__(self, binaries: dict[str, Path], runs: Path, wait_s: float) -> None:
        self.binaries, self.state, self.wait_s = binaries, runs / "shared", wait_s
        self._cluster: local_cluster.LocalCluster | None = None
        self._baseline: frozenset[str] = frozenset()

    def take(self, stack: str, installed: list[dict[str, Any]]) -> local_cluster.LocalCluster:
        """The plane for `stack`'s test, with no object of an earlier test but those of `installed` (the CRDs the test's
        stack installs) that applying them again would not change."""
        if self._cluster is not None and any_alive(self.state):
            try:
                kubectl = self._cluster.kubectl
                reset(self._cluster.control_plane, kubectl.api, self._baseline, crds.unchanged(kubectl, installed))
                self._cluster.stack = stack
                return self._cluster
            except ResetError as error:
                print(f"shared control plane: {error}; starting a fresh one", file=sys.stderr)
        self.close()
        plane = local_cluster.new_plane(self.state, self.binaries)
        kubectl = Kubectl(self.binaries["kube"], plane.kubeconfig)
        try:
            plane.start_api(self.wait_s)
            self._baseline = frozenset(o.meta["uid"] for o in _objects(kubectl.api))
            plane.start_controllers(local_cluster.kwok_stages())
        except BaseException:
            stop_recorded(plane.state)
            raise
        self._cluster = local_cluster.LocalCluster(stack, plane, kubectl)
        return self._cluster

    def release(self) -> None:
        """Everything but etcd and the API server stopped: nothing acts between two tests."""
        if self._cluster is not None:
            self._cluster.control_plane.stop_all_but_api()

    def close(self) -> None:
        stop_recorded(self.state)
        self._cluster = None
