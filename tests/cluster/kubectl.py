"""kubectl (the control-plane binary's own) against one cluster: reads as JSON, dry runs, tokens; server-side apply
over the same API server's HTTPS (tests.cluster.api)."""

import functools
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
        return json.loads(self.run("get", "-o", "json", *args))

    def items(self, *args: str) -> list[dict[str, Any]]:
        return self.get(*args)["items"]
