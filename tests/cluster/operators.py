"""The stack's operators, run as processes of their own engine binaries, as the Deployments the stack installs say.

The Deployment a release installs still lands on a KWOK node (its pod is scheduled and admitted like any other), but
its container runs here: the engine built from the release's Go module (tests/cluster/engines), with the Deployment's
own arguments, the credentials of its own ServiceAccount (a token the API server issues, so its real RBAC applies),
and flags that keep its ports on 127.0.0.1. A webhook's Service is routed to the process through the egress proxy.
How each one runs out of a pod is read from its source: tests/cluster/engines/<engine>/RUNNING.md (README.md for the
Trainer and JobSet).

Where the Deployment configures its process by a file from a ConfigMap, that file is read from the cluster and given
to the process with only the host's differences (ports on 127.0.0.1, no leader election). Where a program reads fixed
paths of its pod (its namespace from the ServiceAccount's folder, its certificate from the Secret's mount), it runs in
a mount namespace of its own (util-linux `unshare`) with those folders where the kubelet would mount them.
"""

import base64
import http.client
import os
import shlex
import shutil
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.cluster.api import ApiError
from tests.cluster.control_plane import LOOPBACK, POLL_S, ControlPlane, free_port
from tests.cluster.egress_proxy import add_route
from tests.cluster.kubectl import Kubectl

READY_TIMEOUT_S = 90.0
TOKEN_S = 48 * 3600
"""How long an operator's ServiceAccount token lasts: longer than any session."""


class OperatorError(Exception):
    """An operator that did not become ready, with the end of its log."""


@dataclass(frozen=True)
class Webhook:
    service: str
    """The Service (in the operator's namespace) the webhook configurations name."""
    port: int
    """The Service's port the API server dials."""
    secret: str
    """The Secret the operator's certificate rotator fills, which the Deployment mounts where its webhook server reads
    tls.crt and tls.key (the operator runs in its pod's view, `Operator.pod_view`)."""


@dataclass(frozen=True)
class ConfigFile:
    """The operator's configuration file: the Deployment's ConfigMap key, as the cluster holds it, edited for a host."""

    config_map: str
    key: str
    host: Callable[[dict[str, Any], dict[str, int]], dict[str, Any]]
    """The file's content given the ConfigMap's and free ports by name; the rest of the file as the chart made it."""
    flag: str = "--config"
    """The flag that names the file (given last, so it overrides the Deployment's own, which names its mount)."""


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
    config: ConfigFile | None = None
    routes: tuple[tuple[str, int, str], ...] = ()
    """Other Services of the Deployment the API server dials, routed to the process: (Service, its port, the name of
    the process's port, a key of the ports `flags` and the config file get)."""
    pod_view: bool = False
    """Run in a mount namespace of its own where /var/run/secrets/kubernetes.io/serviceaccount holds its namespace
    (and token and CA, as the kubelet projects them) and each Secret volume of the Deployment is at its mountPath."""


def _host_config(chart: dict[str, Any], ports: dict[str, int]) -> dict[str, Any]:
    """The chart's controller-runtime Configuration with the host's addresses. The Trainer and JobSet read the same
    fields (github.com/kubeflow/trainer/v2@v2.3.0 pkg/config/config.go addTo; sigs.k8s.io/jobset@v0.12.0
    pkg/config/config.go and main.go, whose flags would override the file): health probes and the webhook server on
    127.0.0.1, the metrics server off (`bindAddress: "0"`, controller-runtime's metricsserver), no leader election (the
    chart turns it on: a host process has no Lease to share). Certificate management stays as the chart sets it, on:
    the operator's own rotator fills the chart's Secret and injects the webhook configurations' caBundle."""
    return {
        **chart,
        "health": {**(chart.get("health") or {}), "healthProbeBindAddress": f"{LOOPBACK}:{ports['health']}"},
        "metrics": {**(chart.get("metrics") or {}), "bindAddress": "0"},
        "webhook": {**(chart.get("webhook") or {}), "host": LOOPBACK, "port": ports["webhook"]},
        "leaderElection": {**(chart.get("leaderElection") or {}), "leaderElect": False},
    }


def _kueue_host_config(chart: dict[str, Any], ports: dict[str, int]) -> dict[str, Any]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2, sigs.k8s.io/kueue@v0.17.0 apis/config/v1beta2): the
    fields `_host_config` sets, which Kueue reads alike, and its visibility API server on 127.0.0.1 (it listens on
    every address, port 8082, by default; the chart's APIService names it)."""
    return {**_host_config(chart, ports), "visibilityServer": {"bindAddress": LOOPBACK, "bindPort": ports["visibility"]}}


OPERATORS = (
    # github.com/kubeflow/training-operator v1.9.4 cmd/training-operator.v1/main.go; pkg/cert/cert.go (the cert dir
    # is a constant, /tmp/k8s-webhook-server/serving-certs: the Secret's mount path in the Deployment). In its pod's
    # view, so that no certificate of an earlier cluster left in that host folder is served (its rotator is ready as
    # soon as a tls.crt exists there, and the server loads it before this one is copied).
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
        webhook=Webhook("training-operator", 443, "training-operator-webhook-cert"),
        ready_path="/readyz",
        env={"MY_POD_NAMESPACE": "kubeflow", "TMPDIR": "/tmp"},
        pod_view=True,
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
    # JobSet v0.12.0, the Trainer chart's dependency (charts/jobset/templates/controller/deployment.yaml): started
    # before the Trainer, whose TrainJobs become JobSets that JobSet's webhooks admit. Its rotator
    # (pkg/util/cert/cert.go) takes its namespace from the ServiceAccount's folder, else "jobset-system", not the
    # release's: hence the pod's view. It checks for tls.crt in /tmp/k8s-webhook-server/serving-certs, the Secret's
    # mountPath, which is also the webhook server's default (controller-runtime: $TMPDIR/k8s-webhook-server/...).
    Operator(
        engine="jobset",
        deployment="jobset-controller",
        namespace="kubeflow-system",
        flags=lambda ports: [],
        webhook=Webhook("jobset-webhook-service", 443, "jobset-webhook-server-cert"),
        ready_path="/readyz",
        env={"TMPDIR": "/tmp"},
        config=ConfigFile("jobset-controller-config", "controller_manager_config.yaml", _host_config),
        pod_view=True,
    ),
    # Kueue v0.17.0 (charts/kueue/templates/manager/manager.yaml: /manager --config=/controller_manager_config.yaml,
    # the ConfigMap kueue-manager-config). Its rotator (cert-controller v0.16.0, pkg/util/cert/cert.go) fills the
    # Secret, injects the CA into the webhook configurations and the CRDs' conversion webhooks, and waits for tls.crt
    # in the Secret's mountPath /tmp/k8s-webhook-server/serving-certs; its namespace is the ServiceAccount folder's
    # (apis/config/v1beta2/defaults.go): hence the pod's view. Started after the training operators, whose CRDs its
    # integrations wait for (pkg/controller/jobframework/setup.go waitForAPI: a missing CRD is polled, not fatal).
    Operator(
        engine="kueue",
        deployment="kueue-controller-manager",
        namespace="kueue-system",
        flags=lambda ports: [],
        webhook=Webhook("kueue-webhook-service", 443, "kueue-webhook-server-cert"),
        ready_path="/readyz",
        env={"TMPDIR": "/tmp"},
        config=ConfigFile("kueue-manager-config", "controller_manager_config.yaml", _kueue_host_config),
        routes=(("kueue-visibility-server", 443, "visibility"),),
        pod_view=True,
    ),
    # Kubeflow Trainer v2.3.0 (charts/kubeflow-trainer/templates/manager/deployment.yaml): cmd/trainer-controller-
    # manager/main.go; its rotator (pkg/util/cert/cert.go) writes nothing itself and waits for tls.crt in
    # /tmp/k8s-webhook-server/serving-certs (a fixed path), the Secret's mountPath.
    Operator(
        engine="kubeflow-trainer",
        deployment="kubeflow-trainer-controller-manager",
        namespace="kubeflow-system",
        flags=lambda ports: [],
        webhook=Webhook("kubeflow-trainer-controller-manager", 443, "kubeflow-trainer-webhook-cert"),
        ready_path="/readyz",
        env={"TMPDIR": "/tmp"},
        config=ConfigFile("kubeflow-trainer-config", "controller_manager_config.yaml", _host_config),
        pod_view=True,
    ),
)


def _deployment(manifests: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((m for m in manifests if m.get("kind") == "Deployment" and m["metadata"]["name"] == name), None)


def installed(manifests: list[dict[str, Any]]) -> list[tuple[Operator, dict[str, Any]]]:
    """The operators whose Deployment these manifests carry, with that Deployment."""
    found = ((operator, _deployment(manifests, operator.deployment)) for operator in OPERATORS)
    return [(operator, deployment) for operator, deployment in found if deployment is not None]


def _container_args(deployment: dict[str, Any]) -> list[str]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return [*container.get("command", [])[1:], *container.get("args", [])]


def _wait(what: str, ready: Callable[[], bool], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready():
        if time.monotonic() > deadline:
            tail = "\n".join(log.read_text().splitlines()[-15:]) if log.exists() else "(no log)"
            raise OperatorError(f"{what}: not ready after {READY_TIMEOUT_S:.0f} s; its log ends:\n{tail}")
        time.sleep(POLL_S)


def answers(port: int, path: str) -> bool:
    """Whether http://127.0.0.1:<port><path> answers 200 (a health probe)."""
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}{path}", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, socket.timeout):
        return False


def _webhook_paths(kubectl: Kubectl, namespace: str, service: str) -> list[str]:
    """The paths the cluster's webhook configurations call on this Service."""
    configurations = kubectl.items("validatingwebhookconfigurations,mutatingwebhookconfigurations")
    services = (hook["clientConfig"].get("service") or {} for c in configurations for hook in c.get("webhooks") or [])
    return sorted({s.get("path", "/") for s in services if (s.get("namespace"), s.get("name")) == (namespace, service)})


def _serves_every_path(port: int, ca: bytes, paths: list[str]) -> bool:
    """Whether the webhook server on 127.0.0.1:<port> has a handler at each path: anything but 404 (an empty review
    is refused with 200 or 400 by a registered handler; controller-runtime's mux answers 404 for a path not yet
    registered). The certificate is checked against the rotator's CA, not against the Service's host name."""
    context = ssl.create_default_context(cadata=ca.decode())
    context.check_hostname = False
    for path in paths:
        connection = http.client.HTTPSConnection(LOOPBACK, port, timeout=2, context=context)
        try:
            connection.request("POST", path, body=b"{}", headers={"Content-Type": "application/json"})
            if connection.getresponse().status == 404:
                return False
        except (OSError, http.client.HTTPException):
            return False
        finally:
            connection.close()
    return True


def _filled_secret(kubectl: Kubectl, namespace: str, name: str) -> dict[str, bytes] | None:
    """The Secret's data once the rotator wrote a certificate into it (the chart's may hold empty keys; `pulumi up`
    may create the Secret after the Deployment)."""
    try:
        data = kubectl.api.read("v1", "Secret", name, namespace).get("data") or {}
    except ApiError as error:
        if error.status == 404:
            return None
        raise
    if not data.get("tls.crt"):
        return None
    return {key: base64.b64decode(value) for key, value in data.items()}


def _serve_certificate(kubectl: Kubectl, operator: Operator, webhook: Webhook, volume: Path) -> bool:
    """The rotator's certificate, copied from its Secret into the Secret's volume, once it is there, as the kubelet
    fills a Secret volume. Files are replaced one by one, never the folder (the process sees it through a bind mount),
    and tls.crt last: the rotators wait for that file alone (cert-controller v0.16.0 rotator.go ensureCertsMounted)."""
    data = _filled_secret(kubectl, operator.namespace, webhook.secret)
    if data is None:
        return False
    for name in sorted(data, key=lambda name: name == "tls.crt"):
        partial = volume / f".{name}.partial"
        partial.write_bytes(data[name])
        partial.replace(volume / name)
    return True


SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the kubelet projects a pod's ServiceAccount token, the cluster's CA and the pod's namespace."""


@dataclass(frozen=True)
class _Mount:
    source: Path
    target: str
    read_only: bool


def _secret_mounts(deployment: dict[str, Any], home: Path) -> dict[str, _Mount]:
    """The container's Secret volumes by Secret name: a host folder each, and where the pod has it."""
    pod = deployment["spec"]["template"]["spec"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod.get("volumes") or [] if "secret" in v}
    return {
        secrets[m["name"]]: _Mount(home / "volumes" / m["name"], m["mountPath"], bool(m.get("readOnly")))
        for m in pod["containers"][0].get("volumeMounts") or []
        if m["name"] in secrets and "subPath" not in m
    }


def _restarted(command: list[str]) -> str:
    """A shell loop that runs `command` again a second after it ends, as the kubelet restarts a Deployment's container
    (restartPolicy Always). The operators end themselves when they lose their lease: mpi-operator v0.8.0 renews it
    within 5 s (cmd/mpi-operator/app/server.go renewDuration), which a machine busy with other tests can miss. The
    loop and the process share their process group, which stop_recorded ends."""
    return (f"while :; do {shlex.join(command)}; echo \"exited $?: restarted in 1 s, as the kubelet would\"; "
            "sleep 1; done")


def _in_pod_view(command: list[str], mounts: list[_Mount]) -> list[str]:
    """`command` in a mount namespace of its own with `mounts` in place, as the kubelet mounts a pod's volumes. /var/run
    is a fresh tmpfs there (a pod has none of the host's); other targets are created on the host as empty folders
    (mount points), their content never. The process is restarted when it ends (`_restarted`)."""
    steps = ["mount -t tmpfs -o mode=0755 tmpfs /var/run"]
    for mount in mounts:
        steps += [f"mkdir -p {shlex.quote(mount.target)}",
                  f"mount --bind {shlex.quote(str(mount.source))} {shlex.quote(mount.target)}"]
        if mount.read_only:
            steps.append(f"mount -o remount,bind,ro {shlex.quote(mount.target)}")
    steps.append(_restarted(command))
    # Unprivileged, a user namespace gives the mount rights (util-linux unshare --map-root-user).
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    return ["unshare", "--mount", "--propagation", "private", *user, "/bin/sh", "-c", " && ".join(steps)]


def _config_file(kubectl: Kubectl, operator: Operator, config: ConfigFile, ports: dict[str, int], home: Path) -> Path:
    """The ConfigMap's file as the cluster holds it, with the host's differences (ConfigFile.host)."""
    data = kubectl.get("configmap", config.config_map, "-n", operator.namespace).get("data") or {}
    if config.key not in data:
        raise OperatorError(f"{operator.engine}: ConfigMap {config.config_map} has no key {config.key}")
    path = home / config.key
    path.write_text(yaml.safe_dump(config.host(yaml.safe_load(data[config.key]) or {}, ports), sort_keys=False))
    return path


def start(plane: ControlPlane, kubectl: Kubectl, binaries: dict[str, Path], operator: Operator,
          deployment: dict[str, Any]) -> None:
    """The operator's process, as its Deployment runs it; returns once it serves (its webhook routed)."""
    account = deployment["spec"]["template"]["spec"].get("serviceAccountName", "default")
    token = kubectl.api.token(account, operator.namespace, TOKEN_S)
    config = plane.write_kubeconfig(plane.pki / f"{operator.namespace}-{account}.kubeconfig", account,
                                    {"token": token}, operator.namespace)
    ports = {name: free_port() for name in ("webhook", "health", *(port for _, _, port in operator.routes))}
    home = plane.state / "operators" / operator.engine
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    command = [str(binaries[operator.engine]), *_container_args(deployment), f"{operator.kubeconfig_flag}={config}",
               *operator.flags(ports)]
    if operator.config is not None:
        command.append(f"{operator.config.flag}={_config_file(kubectl, operator, operator.config, ports, home)}")
    secrets = _secret_mounts(deployment, home)
    if operator.webhook is not None and not (operator.pod_view and operator.webhook.secret in secrets):
        raise OperatorError(f"{operator.engine}: its webhook's certificate is served from the Deployment's volume of "
                            f"Secret {operator.webhook.secret}, in the pod's view (pod_view)")
    if operator.pod_view:
        account_dir = home / "serviceaccount"
        account_dir.mkdir()
        (account_dir / "namespace").write_text(operator.namespace)
        (account_dir / "token").write_text(token)
        shutil.copyfile(plane.pki / "ca.crt", account_dir / "ca.crt")
        for mount in secrets.values():
            mount.source.mkdir(parents=True)
        command = _in_pod_view(command, [_Mount(account_dir, SERVICE_ACCOUNT_DIR, True), *secrets.values()])
    else:
        command = ["/bin/sh", "-c", _restarted(command)]
    plane.spawn(operator.engine, command, env={"PATH": "/usr/bin:/bin", **operator.env})
    log = plane.logs / f"{operator.engine}.log"
    if operator.webhook is not None:
        webhook = operator.webhook
        volume = secrets[webhook.secret].source
        _wait(f"{operator.engine}'s certificate in Secret {webhook.secret}",
              lambda: _serve_certificate(kubectl, operator, webhook, volume), log)
        service = kubectl.get("service", webhook.service, "-n", operator.namespace)
        add_route(plane.routes, f"{service['spec']['clusterIP']}:{webhook.port}", f"{LOOPBACK}:{ports['webhook']}")
    for name, port, process_port in operator.routes:
        service = kubectl.get("service", name, "-n", operator.namespace)
        add_route(plane.routes, f"{service['spec']['clusterIP']}:{port}", f"{LOOPBACK}:{ports[process_port]}")
    if operator.ready_path:
        _wait(f"{operator.engine} {operator.ready_path}", lambda: answers(ports["health"], operator.ready_path), log)
    if operator.webhook is not None:
        # Ready is not yet serving every webhook: the training operator v1.9.4 answers /readyz once its certificate is
        # there and registers its webhooks afterwards, scheme by scheme, in another goroutine
        # (cmd/training-operator.v1/main.go setupControllers, setupProbeEndpoints), and controller-runtime answers 404
        # meanwhile. The kubelet's probe (initialDelaySeconds 10, periodSeconds 15) leaves that window behind before
        # the pod is Ready; a host process polled every 0.5 s does not, so its paths are waited for here.
        paths = _webhook_paths(kubectl, operator.namespace, operator.webhook.service)
        ca = (secrets[operator.webhook.secret].source / "ca.crt").read_bytes()
        _wait(f"{operator.engine}'s webhook paths {', '.join(paths)}",
              lambda: _serves_every_path(ports["webhook"], ca, paths), log)
    _mark_serving(kubectl, operator, deployment, log)


SERVING = "eks-ddp.local/serving"
"""The annotation that makes an operator's pod Ready (stages/operator-pod.yaml): its process serves."""


def pods_of(kubectl: Kubectl, operator: Operator, deployment: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods of the operator's Deployment (its selector's labels)."""
    labels = deployment["spec"]["selector"].get("matchLabels", {})
    selector = ",".join(f"{key}={value}" for key, value in labels.items())
    return kubectl.api.items(f"/api/v1/namespaces/{operator.namespace}/pods?labelSelector={selector}")


def _mark_serving(kubectl: Kubectl, operator: Operator, deployment: dict[str, Any], log: Path) -> None:
    """Annotate the Deployment's pods SERVING, as the kubelet's readiness probe would pass (once the ReplicaSet
    made one: the Deployment may have been applied a moment ago). A pod made later, after a restart, stays not
    Ready: no test restarts an operator's pod."""
    _wait(f"{operator.engine}'s pod", lambda: bool(pods_of(kubectl, operator, deployment)), log)
    for pod in pods_of(kubectl, operator, deployment):
        path = f"/api/v1/namespaces/{operator.namespace}/pods/{pod['metadata']['name']}"
        kubectl.api.request("PATCH", path, {"metadata": {"annotations": {SERVING: "true"}}},
                            "application/merge-patch+json")
