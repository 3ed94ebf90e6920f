"""The stack's operators, run as processes of their own engine binaries, as the Deployments the stack installs say.

The Deployment a release installs still lands on a KWOK node (its pod is scheduled and admitted like any other), but
its container runs here: the engine built from the release's Go module (tests/cluster/engines), with the Deployment's
own arguments, the credentials of its own ServiceAccount (a token the API server issues, so its real RBAC applies),
and flags that keep its ports on 127.0.0.1. A webhook's Service is routed to the process through the egress proxy.
How each one runs out of a pod is read from its source: tests/cluster/engines/<engine>/RUNNING.md.
"""

import base64
import shutil
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.cluster.control_plane import LOOPBACK, ControlPlane, free_port
from tests.cluster.egress_proxy import add_route
from tests.cluster.kubectl import Kubectl

READY_TIMEOUT_S = 90.0


class OperatorError(Exception):
    """An operator that did not become ready, with the end of its log."""


@dataclass(frozen=True)
class Webhook:
    service: str
    """The Service (in the operator's namespace) the webhook configurations name."""
    port: int
    """The Service's port the API server dials."""
    secret: str
    """The Secret the operator's certificate rotator fills."""
    cert_dir: Path
    """Where the operator's webhook server reads tls.crt and tls.key (the Secret's mount in a pod)."""


@dataclass(frozen=True)
class Operator:
    engine: str
    deployment: str
    """The Deployment (name) whose container this process stands for."""
    namespace: str
    flags: Callable[[dict[str, int]], list[str]]
    """Host-process flags, given free ports by name (webhook, health, metrics)."""
    kubeconfig_flag: str = "--kubeconfig"
    webhook: Webhook | None = None
    ready_path: str = ""
    """An HTTP path on the `health` port that answers 200 once it serves."""
    env: dict[str, str] = field(default_factory=dict)


OPERATORS = (
    # github.com/kubeflow/training-operator v1.9.4 cmd/training-operator.v1/main.go; pkg/cert/cert.go (the cert dir
    # is a constant: the Secret's mount path in the Deployment).
    Operator(
        engine="training-operator",
        deployment="training-operator",
        namespace="kubeflow",
        flags=lambda ports: [
            f"--webhook-server-port={ports['webhook']}",
            f"--health-probe-bind-address={LOOPBACK}:{ports['health']}",
            "--metrics-bind-address=0",
            "--leader-elect=false",
        ],
        webhook=Webhook("training-operator", 443, "training-operator-webhook-cert",
                        Path("/tmp/k8s-webhook-server/serving-certs")),
        ready_path="/readyz",
        env={"MY_POD_NAMESPACE": "kubeflow", "TMPDIR": "/tmp"},
    ),
    # github.com/kubeflow/mpi-operator v0.8.0 cmd/mpi-operator/app/options: --kubeConfig; leader election always on,
    # in --lock-namespace (the Deployment's argument); /healthz on :8080, fixed.
    Operator(
        engine="mpi-operator",
        deployment="mpi-operator",
        namespace="mpi-operator",
        flags=lambda ports: [],
        kubeconfig_flag="--kubeConfig",
    ),
)


def _deployment(manifests: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((m for m in manifests if m.get("kind") == "Deployment" and m["metadata"]["name"] == name), None)


def installed(manifests: list[dict[str, Any]]) -> list[tuple[Operator, dict[str, Any]]]:
    """The operators whose Deployment these manifests carry, with that Deployment."""
    found = ((operator, _deployment(manifests, operator.deployment)) for operator in OPERATORS)
    return [(operator, deployment) for operator, deployment in found if deployment is not None]


def _token_kubeconfig(plane: ControlPlane, kubectl: Kubectl, namespace: str, account: str) -> Path:
    token = kubectl.run("create", "token", account, "-n", namespace, "--duration=48h").strip()
    path = plane.pki / f"{namespace}-{account}.kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: local\n  cluster:\n    server: https://{LOOPBACK}:{plane.api_port}\n"
        f"    certificate-authority: {plane.pki / 'ca.crt'}\n"
        f"users:\n- name: {account}\n  user:\n    token: {token}\n"
        f"contexts:\n- name: local\n  context:\n    cluster: local\n    user: {account}\n    namespace: {namespace}\n"
        "current-context: local\n"
    )
    return path


def _container_args(deployment: dict[str, Any]) -> list[str]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return [*container.get("command", [])[1:], *container.get("args", [])]


def _wait(what: str, ready: Callable[[], bool], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready():
        if time.monotonic() > deadline:
            tail = "\n".join(log.read_text().splitlines()[-15:]) if log.exists() else "(no log)"
            raise OperatorError(f"{what}: not ready after {READY_TIMEOUT_S:.0f} s; its log ends:\n{tail}")
        time.sleep(0.5)


def _answers(port: int, path: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}{path}", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, socket.timeout):
        return False


def _serve_certificate(kubectl: Kubectl, operator: Operator, webhook: Webhook) -> bool:
    """The rotator's certificate, copied from its Secret to where the webhook server reads it, once it is there."""
    data = kubectl.get("secret", webhook.secret, "-n", operator.namespace).get("data") or {}
    if "tls.crt" not in data:
        return False
    shutil.rmtree(webhook.cert_dir, ignore_errors=True)
    webhook.cert_dir.mkdir(parents=True)
    for name in ("tls.crt", "tls.key"):
        (webhook.cert_dir / name).write_bytes(base64.b64decode(data[name]))
    return True


def start(plane: ControlPlane, kubectl: Kubectl, binaries: dict[str, Path], operator: Operator,
          deployment: dict[str, Any]) -> None:
    """The operator's process, as its Deployment runs it; returns once it serves (its webhook routed)."""
    account = deployment["spec"]["template"]["spec"].get("serviceAccountName", "default")
    config = _token_kubeconfig(plane, kubectl, operator.namespace, account)
    ports = {name: free_port() for name in ("webhook", "health")}
    command = [str(binaries[operator.engine]), *_container_args(deployment), f"{operator.kubeconfig_flag}={config}",
               *operator.flags(ports)]
    plane.spawn(operator.engine, command, env={"PATH": "/usr/bin:/bin", **operator.env})
    log = plane.logs / f"{operator.engine}.log"
    if operator.webhook is not None:
        webhook = operator.webhook
        _wait(f"{operator.engine}'s certificate in Secret {webhook.secret}",
              lambda: _serve_certificate(kubectl, operator, webhook), log)
        service = kubectl.get("service", webhook.service, "-n", operator.namespace)
        add_route(plane.routes, f"{service['spec']['clusterIP']}:{webhook.port}", f"{LOOPBACK}:{ports['webhook']}")
    if operator.ready_path:
        _wait(f"{operator.engine} {operator.ready_path}", lambda: _answers(ports["health"], operator.ready_path), log)
