"""One stack on the local cluster: its node groups as KWOK nodes, its objects applied as `pulumi up` would apply them.

    python -m tests.cluster.local_cluster up --stack gpu [--config eks-ddp:autoscaler=karpenter ...]
    python -m tests.cluster.local_cluster down

`up` builds the engines (once per machine), starts the control plane, adds the stack's nodes, applies its objects in
creation order (an object that waits for a gate is applied once the gate ended; a failed gate stops it, as it stops
`pulumi up`), waits until every pod is placed or the time runs out, prints where each pod runs and writes
runs/cluster/<stack>/kubeconfig. `down` stops every process a cluster under runs/cluster started, by process id.
"""

import argparse
import shutil
import sys
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from eks_ddp.stack.engine_rules.base import Deployment, located, node_sources
from eks_ddp.stack.mocking import DEPLOYER_ROLE_ARN, Registration
from eks_ddp.stack.programs import Program
from eks_ddp.stack.project_config import StackFileError
from tests.cluster import manifests, nodes, objects, operators, volumes
from tests.cluster.control_plane import ControlPlane, ControlPlaneError, stop_recorded
from tests.cluster.engines import build
from tests.cluster.engines.build import BuildError
from tests.cluster.kubectl import Kubectl, KubectlError

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs" / "cluster"
ENGINES = ["kube", "kwok", "training-operator", "mpi-operator"]
SETTLE_TIMEOUT_S = 120.0
GATE_TIMEOUT_S = 120.0
# The KWOK stages read from its module (sigs.k8s.io/kwok v0.8.0 kustomize/stage): nodes become Ready and keep their
# lease; pods start and become ready at once, those of a Job complete, deleted ones go. Ours (stages/) end a pod's
# containers with the exit code a test chose.
KWOK_STAGES = ("node/fast/node-initialize.yaml", "node/heartbeat-with-lease", "pod/fast")
OWN_STAGES = Path(__file__).resolve().parent / "stages"


class DeployError(Exception):
    """What `pulumi up` would stop at: a gate that failed, an object the API server refused."""


@dataclass
class LocalCluster:
    stack: str
    control_plane: ControlPlane
    kubectl: Kubectl

    @property
    def state(self) -> Path:
        return self.control_plane.state


def deployment_of(stack: str, override: dict[str, str]) -> Deployment:
    """The stack's registrations under the mocks, as the rehearsal reads them."""
    program = Program.at(ROOT)
    return Deployment(program.run(stack, override), program.region(stack, override), DEPLOYER_ROLE_ARN, date.today())


def _stage_files(kwok_module: Path) -> list[Path]:
    files: list[Path] = []
    for stage in KWOK_STAGES:
        path = kwok_module / "kustomize" / "stage" / stage
        files += sorted(p for p in path.glob("*.yaml") if p.name != "kustomization.yaml") if path.is_dir() else [path]
    return files + sorted(OWN_STAGES.glob("*.yaml"))


def start(stack: str, binaries: dict[str, Path], runs: Path = RUNS) -> LocalCluster:
    """A fresh control plane for `stack` under runs/<stack> (one left running there is stopped first)."""
    state = runs / stack
    stop_recorded(state)
    if state.exists():
        for leftover in ("etcd", "pki", "logs"):
            shutil.rmtree(state / leftover, ignore_errors=True)
    state.mkdir(parents=True, exist_ok=True)
    plane = ControlPlane(state, binaries["kube"], binaries["kwok"])
    plane.start(_stage_files(build.module_dir("kwok", "sigs.k8s.io/kwok")))
    return LocalCluster(stack, plane, Kubectl(binaries["kube"], plane.kubeconfig))


def _ended(kubectl: Kubectl, manifest: dict[str, Any]) -> str | None:
    """None while a gate runs; "" once it succeeded; why it failed once it failed."""
    meta = manifest["metadata"]
    found = kubectl.get(manifest["kind"].lower(), meta["name"], "-n", meta.get("namespace", "default"))
    conditions = {c["type"]: c for c in found.get("status", {}).get("conditions") or [] if c.get("status") == "True"}
    if "Failed" in conditions:
        failed = conditions["Failed"]
        return f"{failed.get('reason', 'Failed')}: {failed.get('message', '')}".strip()
    if {"Complete", "Succeeded"} & conditions.keys():
        return ""
    return None


def _await_gate(kubectl: Kubectl, step: objects.Step, gate: objects.Step) -> None:
    """Until the gate `step` waits for ended; a failed gate stops the deploy, as it stops `pulumi up`."""
    awaited, waiting = gate.manifests[0], step.manifests[0]
    what = f"{awaited['kind']} {awaited['metadata']['name']}"
    deadline = time.monotonic() + GATE_TIMEOUT_S
    while (verdict := _ended(kubectl, awaited)) is None:
        if time.monotonic() > deadline:
            raise DeployError(f"{what}: not ended after {GATE_TIMEOUT_S:.0f} s; {waiting['kind']} waits for it")
        time.sleep(0.5)
    if verdict:
        raise DeployError(f"{what} failed ({verdict}): {located(step.registration)} is not created")


def _renderer(deployment: Deployment, kube: Path) -> objects.Render:
    """An install's objects: a manifest or kustomization from the module cache, else the add-on's stand-ins."""
    stood_in = objects.stand_ins(deployment)

    def render(registration: Registration) -> list[dict[str, Any]]:
        rendered = manifests.render(registration, kube)
        return rendered if rendered is not None else stood_in.get(located(registration), [])

    return render


def _apply(cluster: LocalCluster, step: objects.Step, binaries: dict[str, Path]) -> None:
    """One registration's objects; CRDs established before anything else applies; its operators started."""
    namespaces = {m["metadata"].get("namespace") for m in step.manifests} - {None, "default", "kube-system"}
    existing = {n["metadata"]["name"] for n in cluster.kubectl.items("namespaces")}
    missing = sorted(str(n) for n in namespaces - existing if not any(
        m["kind"] == "Namespace" and m["metadata"]["name"] == n for m in step.manifests))
    if missing and step.registration.type in objects.INSTALLS:  # `createNamespace` or the add-on's own
        cluster.kubectl.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in missing])
    cluster.kubectl.apply(step.manifests)
    crds = list(manifests.crd_names(step.manifests))
    if crds:
        cluster.kubectl.run("wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{n}" for n in crds))
    for operator, deployment in operators.installed(step.manifests):
        operators.start(cluster.control_plane, cluster.kubectl, binaries, operator, deployment)


def deploy(cluster: LocalCluster, deployment: Deployment, binaries: dict[str, Path]) -> list[str]:
    """Nodes and volumes, then the stack's objects in creation order; the add-ons that were stood in."""
    cluster.kubectl.apply(nodes.nodes(node_sources(deployment)) + volumes.stand_in_volumes(deployment))
    steps = objects.creation_order(deployment, _renderer(deployment, binaries["kube"]))
    by_urn = {step.registration.urn: step for step in steps}
    for step in steps:
        for gate in step.after:
            _await_gate(cluster.kubectl, step, by_urn[gate.urn])
        _apply(cluster, step, binaries)
    return [
        f"{located(step.registration)} ({len(step.manifests)} workloads)"
        for step in steps
        if any(objects.STAND_IN_LABEL in m["metadata"].get("labels", {}) for m in step.manifests)
    ]


def settle(kubectl: Kubectl, timeout_s: float = SETTLE_TIMEOUT_S) -> list[dict[str, Any]]:
    """The pods once none is Pending or waiting to start (or the time ran out): what the table shows."""
    deadline = time.monotonic() + timeout_s
    while True:
        pods = kubectl.items("pods", "--all-namespaces")
        moving = [p for p in pods if p.get("status", {}).get("phase") == "Pending"]
        if not moving or time.monotonic() > deadline:
            return pods
        time.sleep(1)


def pod_table(pods: list[dict[str, Any]], node_groups: dict[str, str]) -> str:
    """One line per pod: namespace/name, phase, node and its group."""
    rows = [("POD", "PHASE", "NODE", "GROUP")]
    for pod in sorted(pods, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"])):
        node = pod["spec"].get("nodeName", "")
        rows.append((
            f"{pod['metadata']['namespace']}/{pod['metadata']['name']}",
            pod.get("status", {}).get("phase", ""),
            node or "-",
            node_groups.get(node, "-"),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)


def node_groups(kubectl: Kubectl) -> dict[str, str]:
    return {
        n["metadata"]["name"]: n["metadata"].get("labels", {}).get("eks-ddp/node-group", "-")
        for n in kubectl.items("nodes")
    }


def up(stack: str, override: dict[str, str]) -> LocalCluster:
    deployment = deployment_of(stack, override)
    binaries = build.build_all(ENGINES)
    print(f"==> the control plane of {stack} on 127.0.0.1", flush=True)
    cluster = start(stack, binaries)
    print(f"==> {stack}'s nodes and objects, in the order pulumi up creates them", flush=True)
    stood_in = deploy(cluster, deployment, binaries)
    print(f"    stood in (chart not rendered here): {', '.join(stood_in) or 'none'}", flush=True)
    pods = settle(cluster.kubectl)
    print(pod_table(pods, node_groups(cluster.kubectl)))
    print(f"kubeconfig: {cluster.control_plane.kubeconfig}")
    return cluster


def _override(pairs: list[str]) -> dict[str, str]:
    parsed = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key:
            raise StackFileError(f"--config {pair!r}: not allowed; give <key>=<value> (eks-ddp:autoscaler=karpenter)")
        parsed[key] = value
    return parsed


def main(argv: list[str] | None = None) -> int:
    summary = (__doc__ or "").split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m tests.cluster.local_cluster", description=summary)
    commands = parser.add_subparsers(dest="command", required=True)
    up_parser = commands.add_parser("up", help="start a cluster with a stack's nodes and objects")
    up_parser.add_argument("--stack", default="dev")
    up_parser.add_argument("--config", action="append", default=[], help="<key>=<value>, as pulumi up --config")
    commands.add_parser("down", help="stop every local cluster")
    args = parser.parse_args(argv)
    if args.command == "down":
        for state in sorted(RUNS.glob("*/")):
            stopped = stop_recorded(state)
            print(f"{state.name}: stopped {', '.join(stopped) if stopped else 'nothing (not running)'}")
        return 0
    try:
        up(args.stack, _override(args.config))
    except (BuildError, ControlPlaneError, DeployError, KubectlError, StackFileError, FileNotFoundError,
            manifests.ManifestSourceError, operators.OperatorError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
