"""The quarantine container's program, run for real against a stand-in Kubernetes API over TLS on 127.0.0.1."""

import json
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trustme

from eks_ddp.infra.addons.node_quarantine import TAINT_KEY
from eks_ddp.workloads import preflight

NODE = "ip-10-0-1-23.ec2.internal"
TOKEN = "bound-token"


@dataclass
class ApiServer:
    node: dict[str, Any]
    status: int = 200
    requests: list[tuple[str, str, str, Any]] = field(default_factory=list)
    """(method, path, content type, body) of every authorised request."""


def _handler(api: ApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _serve(self) -> None:
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                self._answer(401, {"kind": "Status", "reason": "Unauthorized"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            body: Any = json.loads(self.rfile.read(length)) if length else None
            api.requests.append((self.command, self.path, self.headers.get("Content-Type", ""), body))
            if api.status != 200:
                self._answer(api.status, {"kind": "Status", "reason": "Forbidden"})
            elif self.command == "PATCH":
                api.node["spec"]["taints"] = body[1]["value"]
                self._answer(200, api.node)
            else:
                self._answer(200, api.node)

        do_GET = do_PATCH = _serve

    return Handler


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[ApiServer, dict[str, str]]]:
    """The API server with a CA the container trusts, and the container's environment."""
    authority = trustme.CA()
    certificate = authority.issue_cert("127.0.0.1")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    certificate.configure_cert(context)
    existing = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    state = ApiServer({"metadata": {"name": NODE, "resourceVersion": "4711"}, "spec": {"taints": [existing]}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    account = tmp_path / "account"
    account.mkdir()
    (account / "token").write_text(TOKEN)
    authority.cert_pem.write_to_path(str(account / "ca.crt"))
    env = {
        "NODE_NAME": NODE,
        "TAINT_KEY": TAINT_KEY,
        "PREFLIGHT_VERDICT": str(tmp_path / "failed"),
        "QUARANTINE_ACCOUNT": str(account),
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(server.server_address[1]),
        "WAIT_SECONDS": "0.2",
    }
    yield state, env
    server.shutdown()


def _quarantine(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-I", "-c", preflight.QUARANTINE_SCRIPT]  # as the container runs it: no site, no repo
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def test_a_node_that_passed_is_left_alone(api: tuple[ApiServer, dict[str, str]]) -> None:
    state, env = api
    result = _quarantine(env)
    assert result.returncode == 0, result.stderr
    assert state.requests == []


def test_a_bad_node_is_tainted_no_execute_and_the_pod_waits_for_its_eviction(
    api: tuple[ApiServer, dict[str, str]],
) -> None:
    state, env = api
    Path(env["PREFLIGHT_VERDICT"]).write_text("3 EFA devices, the pod was given 4\n")
    result = _quarantine(env)
    assert [(method, path) for method, path, _, _ in state.requests] == [
        ("GET", f"/api/v1/nodes/{NODE}"),
        ("PATCH", f"/api/v1/nodes/{NODE}"),
    ]
    _, _, kind, patch = state.requests[1]
    assert kind == "application/json-patch+json"
    assert patch[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "4711"}  # no lost update
    assert state.node["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},  # kept
        {"key": TAINT_KEY, "value": "true", "effect": "NoExecute"},
    ]
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"GPU PREFLIGHT FAILED on node {NODE}: 3 EFA devices, the pod was given 4; ")
    assert lines[0].endswith(f"tainted {TAINT_KEY}=true:NoExecute, the pod is evicted to another node")
    # No eviction came (no taint manager here): the container fails, as the pre-flight did before.
    assert result.returncode == 1
    assert lines[-1] == f"node {NODE}: no eviction after the taint; cordon it: kubectl cordon {NODE}"
    again = _quarantine(env)  # the node already carries the taint: nothing is patched twice
    assert [method for method, *_ in state.requests] == ["GET", "PATCH", "GET"] and again.returncode == 1


def test_a_refused_taint_fails_the_pod_with_one_line_naming_the_node(api: tuple[ApiServer, dict[str, str]]) -> None:
    state, env = api
    state.status = 403
    Path(env["PREFLIGHT_VERDICT"]).write_text("DCGM diagnostic level 1 failed (above)")
    result = _quarantine(env)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"GPU PREFLIGHT FAILED on node {NODE}: DCGM diagnostic level 1 failed (above); could not taint it "
        f"(HTTP Error 403: Forbidden): cordon it: kubectl cordon {NODE}"
    )
