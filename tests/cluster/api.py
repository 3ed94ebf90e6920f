"""The API server over HTTPS from this process, for what the harness asks often: a kubectl process per request costs
a tenth of a CPU-second before it sends anything, and the reads that need no kubectl logic (discovery, lists, object
metadata, deletes) are many. Authenticated as the kubeconfig says (a client certificate or a token), trusting its CA.
"""

import http.client
import json
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import yaml

METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
"""Lists of object metadata only: a CRD's 4 MB of schema stays on the server."""
DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
"""Aggregated discovery (GA since Kubernetes 1.30): every group's resources in one answer."""
DISCOVERY_LAG_S = 5.0
TOO_MANY_RETRIES = 30
"""Times a request answered 429 (Too Many Requests) is sent again, a second apart."""


class ApiError(Exception):
    """The API server answered with an error status: the request and what it said."""

    def __init__(self, status: int, what: str) -> None:
        super().__init__(what)
        self.status = status


@dataclass(frozen=True)
class Resource:
    """A resource in one version of its group, as discovery lists it."""

    group: str
    version: str
    name: str
    """Plural, as in the path."""
    kind: str
    namespaced: bool
    verbs: frozenset[str]
    singular: str = ""
    short_names: frozenset[str] = frozenset()

    def named(self, word: str) -> bool:
        """Whether kubectl's resource argument `word` names this: its plural, singular or short name, or its kind."""
        return word.lower() in {self.name, self.singular, self.kind.lower(), *self.short_names}

    def path(self, namespace: str = "", name: str = "") -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        inside = f"/namespaces/{quote(namespace)}" if namespace and self.namespaced else ""
        return f"{prefix}{inside}/{self.name}" + (f"/{quote(name)}" if name else "")


def _message(answer: bytes) -> str:
    """A Status answer's message, whole (an admission webhook's or a CEL rule's reason is in it), else the text."""
    try:
        return str(json.loads(answer).get("message") or answer.decode())
    except (ValueError, AttributeError):
        return answer.decode(errors="replace")


def _as_go_writes(value: Any) -> Any:
    """`value` with each whole float as an int, as Go's encoding/json writes a float64 (1000, not 1000.0): Pulumi
    hands pulumi-kubernetes every number as a float (protobuf's Struct), and the API server's typed decoding of a
    create refuses 1000.0 for an int64 field (runAsGroup)."""
    if isinstance(value, dict):
        return {key: _as_go_writes(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_go_writes(item) for item in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


class Api:
    """One keep-alive connection to the kubeconfig's API server."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
        server = urlparse(cluster["server"])
        self.host, self.port = str(server.hostname), int(server.port or 443)
        self.context = ssl.create_default_context(cafile=cluster["certificate-authority"])
        if "client-certificate" in user:
            self.context.load_cert_chain(user["client-certificate"], user["client-key"])
        self.headers = {"Authorization": f"Bearer {user['token']}"} if "token" in user else {}
        self.namespace = config["contexts"][0]["context"].get("namespace") or "default"
        self._connection: http.client.HTTPSConnection | None = None
        self._by_kind: dict[tuple[str, str, str], Resource] = {}

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                accept: str = "application/json") -> Any:
        """The answer's JSON; ApiError for a status of 400 or more (429 is retried: TOO_MANY_RETRIES)."""
        headers = {**self.headers, "Accept": accept, **({"Content-Type": content_type} if body is not None else {})}
        payload = json.dumps(_as_go_writes(body)).encode() if body is not None else None
        status, data = self._send(method, path, payload, headers)
        for _ in range(TOO_MANY_RETRIES):  # as client-go does: a CRD's storage starting, or priority and fairness
            if status != 429:
                break
            time.sleep(1)
            status, data = self._send(method, path, payload, headers)
        if status >= 400:
            raise ApiError(status, f"{method} {path}: {status} {_message(data)}")
        return json.loads(data) if data else None

    def _send(self, method: str, path: str, payload: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        try:
            return self._exchange(method, path, payload, headers)
        except (http.client.HTTPException, ConnectionError):  # the server closed the idle connection: once more
            self._connection = None
            return self._exchange(method, path, payload, headers)

    def _exchange(self, method: str, path: str, payload: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        if self._connection is None:
            self._connection = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=60)
        self._connection.request(method, path, body=payload, headers=headers)
        response = self._connection.getresponse()
        return response.status, response.read()

    def resources(self) -> list[Resource]:
        """Every resource the API server serves, in each version it serves (subresources left out), from aggregated
        discovery: a group's versions may serve different kinds (kubeflow.org: PyTorchJob in v1, MPIJob in
        v2beta1)."""
        found = []
        for root in ("/api", "/apis"):
            for group in self.request("GET", root, accept=DISCOVERY).get("items") or []:
                for version in group.get("versions") or []:
                    for resource in version.get("resources") or []:
                        found.append(Resource(
                            group.get("metadata", {}).get("name", ""), version["version"], resource["resource"],
                            resource.get("responseKind", {}).get("kind", ""), resource.get("scope") == "Namespaced",
                            frozenset(resource.get("verbs") or []), resource.get("singularResource", ""),
                            frozenset(resource.get("shortNames") or [])))
        return found

    def metadata(self, resource: Resource) -> list[dict[str, Any]]:
        """The metadata of every object of `resource`, in every namespace."""
        listed = self.request("GET", resource.path(), accept=METADATA_LIST)
        return [item["metadata"] for item in listed.get("items") or []]  # an empty list's items are null

    def resource(self, api_version: str, kind: str) -> Resource:
        """The resource serving `kind` of `api_version`'s group; discovery is asked again for one not seen before, for
        a few seconds (it serves a CRD's kind a moment after the CRD is established)."""
        group, _, version = api_version.rpartition("/")
        key, deadline = (group, version, kind), time.monotonic() + DISCOVERY_LAG_S
        while key not in self._by_kind:
            self._by_kind = {(r.group, r.version, r.kind): r for r in self.resources()}
            if key not in self._by_kind and time.monotonic() > deadline:
                raise ApiError(404, f"no matches for kind {kind} in version {api_version}")
            time.sleep(0.2 if key not in self._by_kind else 0)
        return self._by_kind[key]

    def named(self, word: str) -> Resource:
        """The resource kubectl's argument `word` names (`pod`, `pytorchjobs`, `crd` ...), in its group's preferred
        version (discovery lists that first); discovery is asked again for a name not seen before."""
        for fresh in (False, True):
            if fresh or not self._by_kind:
                self._by_kind = {(r.group, r.version, r.kind): r for r in self.resources()}
            if found := next((r for r in self._by_kind.values() if r.named(word)), None):
                return found
        raise ApiError(404, f"the server doesn't have a resource type {word!r}")

    def apply(self, manifest: dict[str, Any], manager: str, dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply of one object, its conflicts forced and unknown fields refused (kubectl apply
        --server-side --force-conflicts, whose validation is strict), as `manager`; the object as the server holds
        it (or would, with `dry_run`: admitted, not stored). Without a namespace, a namespaced object goes to the
        kubeconfig's."""
        meta, resource = manifest["metadata"], self.resource(manifest["apiVersion"], manifest["kind"])
        path = resource.path(meta.get("namespace") or self.namespace, meta["name"])
        query = f"fieldManager={quote(manager)}&force=true&fieldValidation=Strict" + ("&dryRun=All" if dry_run else "")
        return self.request("PATCH", f"{path}?{query}", manifest, "application/apply-patch+yaml")

    def create(self, manifest: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        """The object created (kubectl create, strict validation), or with `dry_run` only admitted; ApiError with
        the API server's reason if it refuses it."""
        resource = self.resource(manifest["apiVersion"], manifest["kind"])
        path = resource.path(manifest["metadata"].get("namespace") or self.namespace)
        return self.request("POST", f"{path}?fieldValidation=Strict" + ("&dryRun=All" if dry_run else ""), manifest)

    def token(self, account: str, namespace: str, seconds: int) -> str:
        """A token of the ServiceAccount (TokenRequest, as `kubectl create token` asks for one)."""
        path = f"/api/v1/namespaces/{quote(namespace)}/serviceaccounts/{quote(account)}/token"
        asked = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                 "spec": {"expirationSeconds": seconds}}
        return str(self.request("POST", path, asked)["status"]["token"])

    def read(self, api_version: str, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        """One object, whole."""
        return self.request("GET", self.resource(api_version, kind).path(namespace, name))

    def items(self, path: str) -> list[dict[str, Any]]:
        """The objects a list path names, whole: /api/v1/pods, /api/v1/namespaces/training/pods."""
        return self.request("GET", path).get("items") or []
