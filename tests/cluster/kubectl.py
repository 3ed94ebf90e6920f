"""kubectl (the control-plane binary's own) against one cluster, for what needs its own logic (patches, deletes);
reads as `kubectl get -o json` prints them and server-side applies over the same API server's HTTPS
(tests.cluster.api), a kubectl process per call costing more than the call."""

import functools
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from tests.cluster.api import Api, ApiError

FIELD_MANAGER = "pulumi-kubernetes"
"""The manager `pulumi up` applies as (pulumi-kubernetes v4 server-side apply), so later applies own the same fields."""


class KubectlError(Exception):
    """kubectl failed: its command and what it said."""


@dataclass(frozen=True)
class Kubectl:
    binary: Path
    kubeconfig: Path

    @functools.cached_property
    def api(self) -> Api:
        """The same API server, as the same user, without a process per request (tests.cluster.api)."""
        return Api(self.kubeconfig)

    def run(self, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        command = [str(self.binary), "kubectl", f"--kubeconfig={self.kubeconfig}", *args]
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout)
        if done.returncode:
            raise KubectlError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def apply(self, manifests: list[dict[str, Any]], manager: str = FIELD_MANAGER) -> None:
        """Server-side apply, one object after another, conflicts forced as `pulumi up` forces them; sent over HTTPS
        as client-go sends it (Api.apply), a kubectl process per call costing more than the call. KubectlError with
        the API server's reason if it refuses one."""
        for manifest in manifests:
            try:
                self.api.apply(manifest, manager)
            except ApiError as error:
                raise KubectlError(f"apply {manifest['kind']} {manifest['metadata'].get('name')}: {error}") from error

    def get(self, *args: str) -> dict[str, Any]:
        """What `kubectl get -o json ARGS` prints, read over HTTPS (the harness polls with it): one object for a
        resource and a name, else a List of every resource named (comma-separated). ARGS as kubectl reads them: -n,
        -l, --field-selector=, -A; any other flag is refused. KubectlError with the server's reason."""
        words: list[str] = []
        query: dict[str, str] = {}
        namespace, everywhere, rest = self.api.namespace, False, iter(args)
        for arg in rest:
            if arg in ("-n", "--namespace"):
                namespace = next(rest)
            elif arg in ("-l", "--selector"):
                query["labelSelector"] = next(rest)
            elif arg.startswith("--field-selector="):
                query["fieldSelector"] = arg.split("=", 1)[1]
            elif arg in ("-A", "--all-namespaces"):
                everywhere = True
            elif arg.startswith("-") or len(words) == 2:
                raise KubectlError(f"get {' '.join(args)}: {arg} is not an argument Kubectl.get reads")
            else:
                words.append(arg)
        try:
            if len(words) == 2:
                return self.api.request("GET", self.api.named(words[0]).path(namespace, words[1]))
            items = []
            for resource in map(self.api.named, "".join(words).split(",")):
                path = resource.path("" if everywhere else namespace) + (f"?{urlencode(query)}" if query else "")
                version = f"{resource.group}/{resource.version}" if resource.group else resource.version
                items += [{"apiVersion": version, "kind": resource.kind, **item} for item in self.api.items(path)]
            return {"apiVersion": "v1", "kind": "List", "items": items}
        except ApiError as error:
            raise KubectlError(f"get {' '.join(args)}: {error}") from error

    def items(self, *args: str) -> list[dict[str, Any]]:
        return self.get(*args)["items"]
