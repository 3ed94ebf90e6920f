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
TOO_MANY_RETRIES = 30
"""Times a request answered 429 (Too Many Requests) is sent again, a second apart."""


class ApiError(Exception):
    """The API server answered with an error status: the request and what it said."""

    def __init__(self, status: int, what: str) -> None:
        super().__init__(what)
        self.status = status


@dataclass(frozen=True)
class Resource:
    """A resource as discovery lists it (a group's preferred version)."""

    group: str
    version: str
    name: str
    """Plural, as in the path."""
    kind: str
    namespaced: bool
    verbs: frozenset[str]

    def path(self, namespace: str = "", name: str = "") -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        inside = f"/namespaces/{quote(namespace)}" if namespace and self.namespaced else ""
        return f"{prefix}{inside}/{self.name}" + (f"/{quote(name)}" if name else "")


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
        self._connection: http.client.HTTPSConnection | None = None
        self._by_kind: dict[tuple[str, str], Resource] = {}

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                accept: str = "application/json") -> Any:
        """The answer's JSON; ApiError for a status of 400 or more (429 is retried: TOO_MANY_RETRIES)."""
        headers = {**self.headers, "Accept": accept, **({"Content-Type": content_type} if body is not None else {})}
        payload = json.dumps(body).encode() if body is not None else None
        status, data = self._send(method, path, payload, headers)
        for _ in range(TOO_MANY_RETRIES):  # as client-go does: a CRD's storage starting, or priority and fairness
            if status != 429:
                break
            time.sleep(1)
            status, data = self._send(method, path, payload, headers)
        if status >= 400:
            raise ApiError(status, f"{method} {path}: {status} {data.decode(errors='replace')[:300]}")
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
        """Every resource the API server serves (subresources left out), from aggregated discovery."""
        found = []
        for root in ("/api", "/apis"):
            for group in self.request("GET", root, accept=DISCOVERY).get("items") or []:
                versions = group.get("versions") or []
                if not versions:
                    continue
                preferred = versions[0]  # discovery lists them in order of preference
                for resource in preferred.get("resources") or []:
                    found.append(Resource(
                        group.get("metadata", {}).get("name", ""), preferred["version"], resource["resource"],
                        resource.get("responseKind", {}).get("kind", ""), resource.get("scope") == "Namespaced",
                        frozenset(resource.get("verbs") or [])))
        return found

    def metadata(self, resource: Resource) -> list[dict[str, Any]]:
        """The metadata of every object of `resource`, in every namespace."""
        listed = self.request("GET", resource.path(), accept=METADATA_LIST)
        return [item["metadata"] for item in listed.get("items") or []]  # an empty list's items are null

    def resource(self, api_version: str, kind: str) -> Resource:
        """The resource serving `kind` of `api_version`'s group (discovery asked again for one not seen before)."""
        key = (api_version.rpartition("/")[0], kind)
        if key not in self._by_kind:
            self._by_kind = {(r.group, r.kind): r for r in self.resources()}
        if key not in self._by_kind:
            raise ApiError(404, f"no matches for kind {kind} in version {api_version}")
        return self._by_kind[key]

    def read(self, api_version: str, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        """One object, whole."""
        return self.request("GET", self.resource(api_version, kind).path(namespace, name))

    def items(self, path: str) -> list[dict[str, Any]]:
        """The objects a list path names, whole: /api/v1/pods, /api/v1/namespaces/training/pods."""
        return self.request("GET", path).get("items") or []
