"""A Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, kube-scheduler, kube-controller-manager and KWOK.

Each is the upstream program (tests/cluster/engines), started as a process of its own with the flags below; their
process ids go to `<state>/pids`, so `stop` (and `make cluster-down` from another shell) ends exactly what was started.
Certificates come from one throw-away authority (trustme): the API server's serving certificate for 127.0.0.1, and a
client certificate per component whose name the API server's bootstrap RBAC grants that component's rights
(system:kube-scheduler, system:kube-controller-manager; the admin is in system:masters).

What the API server enforces is the real thing at its defaults for 1.35, plus the two admission plugins EKS enables
beyond them (NodeRestriction, ExtendedResourceToleration: the EKS user guide's platform-versions page lists the
plugins of every EKS platform version): RBAC, Pod Security Admission, CRD schemas and CEL rules, webhooks.
"""

import fcntl
import os
import signal
import sys
import socket
import subprocess
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import trustme
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.cluster.egress_proxy import egress_config

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = "127.0.0.1"
# EKS's default service range when the VPC's CIDR is not in 10.0.0.0/8 (EKS API: kubernetesNetworkConfig
# serviceIpv4Cidr defaults to 10.100.0.0/16 or 172.20.0.0/16).
SERVICE_RANGE = "10.100.0.0/16"
# KWOK gives pods addresses from here, as the VPC CNI gives them the subnet's.
POD_RANGE = "10.0.0.1/16"
ADMISSION_PLUGINS = "NodeRestriction,ExtendedResourceToleration"
READY_TIMEOUT_S = 60.0
BIND_ATTEMPTS = 3
"""API server starts on a new port each: a port found free is free only until another process binds it (a CI run at
52f59eb lost one to the previous case's processes: "bind: address already in use")."""
POLL_S = 0.2
"""Between two looks at what the harness waits for: each look is one request to a local server (or a process's
table), and the engines act within tens of milliseconds, so a longer pause would only add to every wait."""
# One local cluster per machine: the MPI operator's health port (:8080) is fixed in its source (cmd/mpi-operator/app
# server.go at v0.8.0). This file names the state folder of the one running.
CLAIMER = "claimer"
# What a cluster keeps running between the tests that share it (tests.cluster.shared_plane): its storage and API.
API_PROCESSES = ("etcd", "egress-proxy", "kube-apiserver")
HOLDER = Path(os.environ.get("EKS_DDP_CLUSTER_HOLDER", Path.home() / ".cache" / "eks-ddp" / "local-cluster"))
ENGINE_GOGC = "400"
"""Go's collector for every engine started here (where its pod's env does not set GOGC): at Go's default (100) it took
15 % of the API server's CPU in the cluster tests; collecting at 5x the live heap instead of 2x does a quarter of the
work, for memory this machine has (what the collector may free changes nothing the engines decide)."""


class ControlPlaneError(Exception):
    """A component that did not start, with the end of its log."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class Identity:
    name: str
    """The user the API server sees (the certificate's common name)."""
    group: str | None = None


ADMIN = Identity("eks-ddp-admin", "system:masters")
SCHEDULER = Identity("system:kube-scheduler")
CONTROLLER_MANAGER = Identity("system:kube-controller-manager")
KWOK = Identity("kwok", "system:masters")


def _served_port(kubeconfig: Path) -> int:
    """The API server's port that a cluster's kubeconfig names, so that a kept cluster (`make deploy-local` run again)
    gives operators it starts the right address; 0 before any start, which sets it."""
    if not kubeconfig.exists():
        return 0
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    return int(server.rsplit(":", 1)[1])


class ControlPlane:
    """The processes of one local cluster and the files they share, all under `state`."""

    def __init__(self, state: Path, kube: Path, kwok: Path) -> None:
        self.state, self.kube, self.kwok = state, kube, kwok
        self.pki = state / "pki"
        self.logs = state / "logs"
        self.api_port = _served_port(self.kubeconfig)

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def egress_socket(self) -> Path:
        return self.state / "egress.sock"

    @property
    def routes(self) -> Path:
        """Where the egress proxy sends each cluster IP:port (tests.cluster.egress_proxy.add_route)."""
        return self.state / "routes.json"

    def start(self, kwok_stages: list[Path], wait_s: float = 0.0) -> None:
        """Every component, each once the one it needs answers; the admin kubeconfig at `self.kubeconfig`. Another
        local cluster still running is waited for up to `wait_s`, then refused."""
        self.start_api(wait_s)
        self.start_controllers(kwok_stages)

    def start_api(self, wait_s: float = 0.0) -> None:
        """etcd and the API server (API_PROCESSES), ready; the controllers not yet (`start_controllers`)."""
        claim(self.state, wait_s)
        for folder in (self.pki, self.logs):
            folder.mkdir(parents=True, exist_ok=True)
        ca = self._certificates()
        etcd_port, peer_port = free_port(), free_port()
        self._etcd(etcd_port, peer_port)
        self._wait_for(f"etcd on port {etcd_port}", lambda: _listening(etcd_port), "etcd")
        self.spawn("egress-proxy", [sys.executable, "-m", "tests.cluster.egress_proxy", str(self.egress_socket),
                                     str(self.routes)])
        (self.state / "egress.yaml").write_text(egress_config(self.egress_socket))
        for attempt in range(1, BIND_ATTEMPTS + 1):
            self.api_port = free_port()
            self._apiserver(etcd_port)
            for identity in (ADMIN, SCHEDULER, CONTROLLER_MANAGER, KWOK):
                self._write_kubeconfig(ca, identity)
            try:
                self._wait_for("kube-apiserver /readyz", self._ready, "kube-apiserver", self._port_taken)
                return
            except ControlPlaneError as error:
                if attempt == BIND_ATTEMPTS or not self._port_taken():
                    raise error

    def _port_taken(self) -> bool:
        """Whether the API server exited because its port, free when chosen, was bound by another process first."""
        return "bind: address already in use" in (self.logs / "kube-apiserver.log").read_text()

    def start_controllers(self, kwok_stages: list[Path]) -> None:
        """The scheduler, the controller manager and KWOK, against the running API server."""
        self.spawn("kube-scheduler", [str(self.kube), "kube-scheduler", *self._component_flags(SCHEDULER)])
        self.spawn(
            "kube-controller-manager",
            [
                str(self.kube),
                "kube-controller-manager",
                *self._component_flags(CONTROLLER_MANAGER),
                f"--service-account-private-key-file={self.pki / 'service-account.key'}",
                f"--root-ca-file={self.pki / 'ca.crt'}",
                "--use-service-account-credentials=true",
                f"--service-cluster-ip-range={SERVICE_RANGE}",
            ],
        )
        self.spawn(
            "kwok",
            [
                str(self.kwok),
                f"--kubeconfig={self._kubeconfig_of(KWOK)}",
                "--manage-all-nodes=false",
                # Node leases, renewed as a kubelet renews them: without the flag KWOK v0.8.0 makes none (its default
                # of 40 applies to a configuration file, pkg/apis/config/v1alpha1 zz_generated.defaults.go), and its
                # heartbeat stage posts node status every 10 to 20 minutes (kustomize/stage/node/
                # heartbeat-with-lease), so the node lifecycle controller marks every node NotReady 40 s after it
                # last saw one and every pod on it not Ready: Pulumi's await of a Deployment or Service never ends.
                "--node-lease-duration-seconds=40",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                f"--cidr={POD_RANGE}",
                f"--node-ip={LOOPBACK}",
                "--server-address=",
                *(f"--config={stage}" for stage in kwok_stages),
            ],
        )

    def stop(self) -> None:
        stop_recorded(self.state)

    def stop_all_but_api(self) -> list[str]:
        """Ends every process but etcd and the API server (the controllers, operators, Karpenter): nothing acts on the
        cluster's objects any more, and the machine's claim on the cluster stays."""
        return stop_recorded(self.state, keep=API_PROCESSES)

    def _certificates(self) -> trustme.CA:
        ca = trustme.CA(organization_name="eks-ddp local cluster")
        ca.cert_pem.write_to_path(str(self.pki / "ca.crt"))
        serving = ca.issue_cert(LOOPBACK, "localhost", "kubernetes", "kubernetes.default.svc")
        serving.cert_chain_pems[0].write_to_path(str(self.pki / "apiserver.crt"))
        serving.private_key_pem.write_to_path(str(self.pki / "apiserver.key"))
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem, pkcs8 = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8
        (self.pki / "service-account.key").write_bytes(key.private_bytes(pem, pkcs8, serialization.NoEncryption()))
        (self.pki / "service-account.pub").write_bytes(
            key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
        self._ca = ca
        return ca

    def _etcd(self, port: int, peer_port: int) -> None:
        client, peer = f"http://{LOOPBACK}:{port}", f"http://{LOOPBACK}:{peer_port}"
        self.spawn(
            "etcd",
            [
                str(self.kube),
                "etcd",
                "--name=local",
                f"--data-dir={self.state / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=local={peer}",
                "--listen-metrics-urls=",
                # A cluster that lives for one test session: no fsync per write (etcd's own flag for tests).
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )

    def _apiserver(self, etcd_port: int) -> None:
        self.spawn(
            "kube-apiserver",
            [
                str(self.kube),
                "kube-apiserver",
                f"--etcd-servers=http://{LOOPBACK}:{etcd_port}",
                f"--bind-address={LOOPBACK}",
                f"--advertise-address={LOOPBACK}",
                f"--secure-port={self.api_port}",
                f"--tls-cert-file={self.pki / 'apiserver.crt'}",
                f"--tls-private-key-file={self.pki / 'apiserver.key'}",
                f"--client-ca-file={self.pki / 'ca.crt'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={self.pki / 'service-account.pub'}",
                f"--service-account-signing-key-file={self.pki / 'service-account.key'}",
                f"--service-cluster-ip-range={SERVICE_RANGE}",
                "--authorization-mode=Node,RBAC",
                f"--enable-admission-plugins={ADMISSION_PLUGINS}",
                "--allow-privileged=true",
                "--profiling=false",
                f"--egress-selector-config-file={self.state / 'egress.yaml'}",
            ],
        )

    def _component_flags(self, identity: Identity) -> list[str]:
        config = self._kubeconfig_of(identity)
        return [
            f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
            "--leader-elect=false",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={free_port()}",
        ]

    def _kubeconfig_of(self, identity: Identity) -> Path:
        return self.kubeconfig if identity == ADMIN else self.pki / f"{identity.name.split(':')[-1]}.kubeconfig"

    def _write_kubeconfig(self, ca: trustme.CA, identity: Identity) -> None:
        stem = identity.name.split(":")[-1]
        # One DNS name too: without any, trustme's subjectAltName is empty and critical, which Go's x509 refuses.
        leaf = ca.issue_cert(f"{stem}.local", common_name=identity.name, organization_name=identity.group)
        certificate, key = self.pki / f"{stem}.crt", self.pki / f"{stem}.key"
        leaf.cert_chain_pems[0].write_to_path(str(certificate))
        leaf.private_key_pem.write_to_path(str(key))
        self.write_kubeconfig(
            self._kubeconfig_of(identity), stem, {"client-certificate": str(certificate), "client-key": str(key)}
        )

    def write_kubeconfig(self, path: Path, user: str, credentials: dict[str, str], namespace: str = "") -> Path:
        """A kubeconfig for this API server, trusting its CA, as `user` with `credentials` (a client certificate
        and key, or a token)."""
        context = {"cluster": "local", "user": user, **({"namespace": namespace} if namespace else {})}
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local", "cluster": {"server": f"https://{LOOPBACK}:{self.api_port}",
                                                       "certificate-authority": str(self.pki / "ca.crt")}}],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": "local", "context": context}],
            "current-context": "local",
        }))
        return path

    def _ready(self) -> bool:
        done = subprocess.run(
            [str(self.kube), "kubectl", f"--kubeconfig={self.kubeconfig}", "get", "--raw=/readyz"],
            capture_output=True,
            text=True,
        )
        return done.returncode == 0 and done.stdout.strip() == "ok"

    def spawn(self, name: str, command: list[str], env: dict[str, str] | None = None) -> None:
        """`command` started in a session of its own, its output in `<logs>/<name>.log`, its pid recorded; with `env`
        (this process's when None) and ENGINE_GOGC."""
        log = (self.logs / f"{name}.log").open("w")
        environment = {"GOGC": ENGINE_GOGC, **(os.environ if env is None else env)}
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                   cwd=ROOT, env=environment)
        with (self.state / "pids").open("a") as pids:
            pids.write(f"{process.pid} {name}\n")

    def _wait_for(self, what: str, ready, component: str, failed=lambda: False) -> None:
        """Until `ready()`, for READY_TIMEOUT_S, or until `failed()` says it never will be."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline and not failed():
            if ready():
                return
            time.sleep(POLL_S)
        tail = (self.logs / f"{component}.log").read_text().splitlines()[-15:]
        raise ControlPlaneError(f"{what}: not ready after {READY_TIMEOUT_S:.0f} s; its log ends:\n" + "\n".join(tail))


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex((LOOPBACK, port)) == 0


def running_cluster() -> Path | None:
    """The state folder of the local cluster running on this machine, if one is."""
    if not HOLDER.exists():
        return None
    state = Path(HOLDER.read_text().strip())
    return state if any_alive(state) else None


def claim(state: Path, wait_s: float) -> None:
    """Makes `state` the machine's one local cluster; one that still runs elsewhere is waited for, then refused."""
    HOLDER.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    with (HOLDER.parent / "local-cluster.lock").open("w") as lock:
        while True:
            fcntl.flock(lock, fcntl.LOCK_EX)
            holder = running_cluster()
            if holder is None or holder == state:
                HOLDER.write_text(str(state))
                # The claimer itself, until the components it starts are recorded beside it: another claimer sees a
                # cluster running from here on, not only once etcd has started. stop_recorded never signals it.
                state.mkdir(parents=True, exist_ok=True)
                with (state / "pids").open("a") as pids:
                    pids.write(f"{os.getpid()} {CLAIMER}\n")
                return
            fcntl.flock(lock, fcntl.LOCK_UN)
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"a local cluster still runs from {holder}: stop it first (make cluster-down)")
            time.sleep(1)


def recorded(state: Path) -> list[tuple[int, str]]:
    """The processes `state/pids` records, started by `ControlPlane.spawn` (or the claim): (process id, name)."""
    pids = state / "pids"
    lines = pids.read_text().splitlines() if pids.exists() else []
    return [(int(pid), name) for pid, name in (line.split(maxsplit=1) for line in lines if line.strip())]


def any_alive(state: Path) -> bool:
    return any(_alive(pid) for pid, _ in recorded(state))


def stop_recorded(state: Path, grace_s: float = 2.0, keep: Collection[str] = ()) -> list[str]:
    """Ends every process `state/pids` records but those named in `keep` (SIGTERM, then SIGKILL after `grace_s`); the
    names of those that ran. With nothing kept the record goes, and with it the claim on the machine's cluster."""
    pids_file = state / "pids"
    records = recorded(state)
    if not records:
        pids_file.unlink(missing_ok=True)
        return []
    kept = [(pid, name) for pid, name in records if keep and (name in keep or name == CLAIMER)]
    running = [(pid, name) for pid, name in records if (pid, name) not in kept and name != CLAIMER and _alive(pid)]
    for pid, _ in running:
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(pid) or _group_alive(pid) for pid, _ in running):
        time.sleep(0.1)
    for pid, _ in running:
        if _group_alive(pid):
            os.killpg(pid, signal.SIGKILL)
    if kept:
        pids_file.write_text("".join(f"{pid} {name}\n" for pid, name in kept))
    else:
        pids_file.unlink()
    return [name for _, name in running]


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs: its leader (the restart loop, `unshare`) ends at the first SIGTERM,
    while a manager that shuts down gracefully may not (Kueue v0.17.0 kept running, orphaned, at 60 % of a CPU)."""
    _alive(pgid)  # reaps the leader if it is our child
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a child of ours that ended but was not reaped yet is no longer running
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True
