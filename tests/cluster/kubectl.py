"""kubectl (the control-plane binary's own) against one cluster: server-side apply, reads as JSON, waits."""

import functools
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cluster.api import Api

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

    def apply(self, manifests: list[dict[str, Any]], manager: str = FIELD_MANAGER) -> str:
        """Server-side apply, conflicts forced as `pulumi up` forces them (nothing to apply: nothing done)."""
        if not manifests:
            return ""
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests})
        return self.run("apply", "--server-side", "--force-conflicts", f"--field-manager={manager}", "-f", "-",
                        stdin=body)

    def get(self, *args: str) -> dict[str, Any]:
        return json.loads(self.run("get", "-o", "json", *args))

    def items(self, *args: str) -> list[dict[str, Any]]:
        return self.get(*args)["items"]
