"""One stack on the local cluster: its node groups as KWOK nodes, its objects applied as `pulumi up` would apply them.

    python -m tests.cluster.local_cluster up --stack gpu [--config eks-ddp:autoscaler=karpenter ...]
    python -m tests.cluster.local_cluster down

`up` builds the engines (once per machine), starts the control plane, adds the stack's nodes, applies its objects in
creation order (an object that waits for a gate is applied once the gate ended; a failed gate stops it, as it stops
`pulumi up`), waits until every pod is placed or the time runs out, prints where each pod runs and writes
runs/cluster/<stack>/kubeconfig. `down` stops every process a cluster under runs/cluster started, by process id.
"""

import argparse
import copy
import functools
import shutil
import sys
import time
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

from eks_ddp.engine_models.base import Deployment, located
from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN, Registration
from eks_ddp.tools.pulumi_program import Program
from eks_ddp.stack.project_config import StackFileError
from tests.cluster import charts, crds as custom_resources, karpenter, manifests, nodes, objects, operators, volumes
from tests.cluster.api import ApiError
from tests.cluster.control_plane import POLL_S, ControlPlane, ControlPlaneError, running_cluster, stop_recorded
from tests.cluster.engines import build
from tests.cluster.crds import CrdError
from tests.cluster.engines.build import BuildError
from tests.cluster.kubectl import Kubectl, KubectlError

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs" / "cluster"
ENGINES = ["kube", "kwok", "helm", "training-operator", "mpi-operator", "jobset", "kubeflow-trainer", "karpenter",
           "kueue"]
SETTLE_TIMEOUT_S = 120.0
SETTLED_S = 3.0
GATE_TIMEOUT_S = 120.0
# A cluster a test started holds the machine's one slot (control_plane.HOLDER) for a minute or two: wait for it.
CLI_WAIT_S = 900.0
# The KWOK stages read from its module (sigs.k8s.io/kwok v0.8.0 kustomize/stage): nodes become Ready and keep their
# lease; pods start and become ready at once, those of a Job complete, deleted ones go. Ours (stages/) end a pod's
# containers with the exit code a test chose.
KWOK_STAGES = ("node/fast/node-initialize.yaml", "node/heartbeat-with-lease", "pod/fast")
OWN_STAGES = Path(__file__).resolve().parent / "stages"
# Charts stood in whose CRDs a Go module ships: the stack's own objects of those kinds need them.
STOOD_IN_CRDS = {"kube-prometheus-stack": "monitoring.coreos.com"}


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
    """The stack's registrations under the mocks, as the rehearsal reads them: one run per process for a stack and
    override (0.4 to 1 CPU-s each; runs are deterministic, as the rehearsal's idempotence rule checks), a copy of it
    for each caller, to plant faults in."""
    return copy.deepcopy(_deployment(stack, tuple(sorted(override.items()))))


@functools.cache
def _deployment(stack: str, override: tuple[tuple[str, str], ...]) -> Deployment:
    program = Program.at(ROOT)
    config = dict(override)
    return Deployment(program.run(stack, config), program.region(stack, config), DEPLOYER_ROLE_ARN, date.today())


def kwok_stages() -> list[Path]:
    """KWOK_STAGES from the kwok module, then ours."""
    module, files = build.module_dir("kwok", "sigs.k8s.io/kwok"), []
    for stage in KWOK_STAGES:
        path = module / "kustomize" / "stage" / stage
        files += sorted(p for p in path.glob("*.yaml") if p.name != "kustomization.yaml") if path.is_dir() else [path]
    return files + sorted(OWN_STAGES.glob("*.yaml"))


def new_plane(state: Path, binaries: dict[str, Path]) -> ControlPlane:
    """A control plane (not started) with its state in `state`: one left running there is stopped first, and what an
    earlier one stored there goes."""
    stop_recorded(state)
    if state.exists():
        for leftover in ("etcd", "pki", "logs"):
            shutil.rmtree(state / leftover, ignore_errors=True)
    state.mkdir(parents=True, exist_ok=True)
    return ControlPlane(state, binaries["kube"], binaries["kwok"])


def start(stack: str, binaries: dict[str, Path], runs: Path = RUNS, wait_s: float = 0.0) -> LocalCluster:
    """A fresh control plane for `stack` under runs/<stack> (one left running there is stopped first; one running
    elsewhere is waited for up to `wait_s`)."""
    plane = new_plane(runs / stack, binaries)
    try:
        plane.start(kwok_stages(), wait_s)
    except BaseException:
        stop_recorded(plane.state)  # what did start, and the claim on the machine's one cluster
        raise
    return LocalCluster(stack, plane, Kubectl(binaries["kube"], plane.kubeconfig))


def _ended(kubectl: Kubectl, manifest: dict[str, Any]) -> str | None:
    """None while a gate runs; "" once it succeeded; why it failed once it failed."""
    meta = manifest["metadata"]
    found = kubectl.api.read(manifest["apiVersion"], manifest["kind"], meta["name"], meta.get("namespace", "default"))
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
        time.sleep(POLL_S)
    if verdict:
        raise DeployError(f"{what} failed ({verdict}): {located(step.registration)} is not created")


def _renderer(deployment: Deployment, kube: Path, kubernetes_version: str) -> objects.Render:
    """An install's objects: a manifest, kustomization or chart from the module cache, else the add-on's stand-ins
    (with the CRDs its chart installs, where a module ships them). APIServices are left out: an aggregated API needs
    its server, and metrics-server reads kubelets, which KWOK nodes do not serve."""
    stood_in = objects.stand_ins(deployment)

    def render(registration: Registration) -> list[dict[str, Any]]:
        rendered = manifests.render(registration, kube)
        if rendered is None and registration.type == objects.HELM_RELEASE:
            rendered = charts.render(registration, kubernetes_version)
        if rendered is not None:
            return [m for m in rendered if m.get("kind") != "APIService"]
        chart = charts.chart_name(registration) if registration.type == objects.HELM_RELEASE else ""
        group = STOOD_IN_CRDS.get(chart)
        return (charts.crds(group) if group else []) + stood_in.get(located(registration), [])

    return render


Kind = tuple[str, str]
"""An API group and a kind: what a manifest's apiVersion and kind ask the API server to serve."""


def _kind(manifest: dict[str, Any]) -> Kind:
    return str(manifest.get("apiVersion", "")).rpartition("/")[0], str(manifest.get("kind", ""))


def _crd_kinds(manifests: list[dict[str, Any]]) -> set[Kind]:
    return {(m["spec"]["group"], m["spec"]["names"]["kind"]) for m in manifests
            if m.get("kind") == "CustomResourceDefinition"}


def _discovery(kubectl: Kubectl) -> tuple[set[str], set[Kind]]:
    """Kinds without a namespace, and the kinds the API server serves but for those of its CRDs: what a fresh
    cluster serves before `pulumi up` installs any."""
    resources, custom = kubectl.api.resources(), set(custom_resources.held(kubectl))
    built_in = {(r.group, r.kind) for r in resources if f"{r.name}.{r.group}" not in custom}
    return {r.kind for r in resources if not r.namespaced}, built_in


@dataclass
class _Known:
    """What deploy knows of the cluster without asking it again: kinds without a namespace (asked again after CRDs),
    the kinds served (the built-in ones and those of the CRDs this deploy applied) and the namespaces that exist."""

    scoped: set[str]
    served: set[Kind]
    namespaces: set[str]

    def refuse_unserved(self, step: objects.Step, manifests: list[dict[str, Any]]) -> None:
        """What a fresh API server answers an object of a kind no CRD applied so far serves (kubectl: "no matches
        for kind"), even where a cluster shared with an earlier test kept that CRD (tests.cluster.shared_plane)."""
        for manifest in manifests:
            if _kind(manifest) not in self.served:
                raise DeployError(f"{located(step.registration)}: no matches for kind {manifest['kind']} in version "
                                  f"{manifest.get('apiVersion')}: its CRD is not installed before it")


def _install(
    cluster: LocalCluster, step: objects.Step, binaries: dict[str, Path], known: _Known, deployment: Deployment
) -> None:
    """What a chart, manifest or add-on installs, as Helm installs a chart: CRDs first and established, then the
    rest, objects without a namespace in the release's (created, as `createNamespace` or the add-on would); then
    its operators started."""
    crds = [m for m in step.manifests if m.get("kind") == "CustomResourceDefinition"]
    if crds:
        custom_resources.install(cluster.kubectl, crds)
        known.scoped, _ = _discovery(cluster.kubectl)
        known.served |= _crd_kinds(crds)
    release_namespace = str(step.registration.sent.get("namespace") or "default")
    rest = [
        m if m["kind"] in known.scoped or m["metadata"].get("namespace")
        else {**m, "metadata": {**m["metadata"], "namespace": release_namespace}}
        for m in step.manifests
        if m.get("kind") != "CustomResourceDefinition"
    ]
    own = {m["metadata"]["name"] for m in rest if m["kind"] == "Namespace"}
    missing = sorted({str(m["metadata"]["namespace"]) for m in rest if m["metadata"].get("namespace")}
                     - known.namespaces - own)
    known.refuse_unserved(step, rest)
    cluster.kubectl.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in missing]
                          + rest)
    known.namespaces |= own | set(missing)
    for operator, operator_deployment in operators.installed(step.manifests):
        operators.start(cluster.control_plane, cluster.kubectl, binaries, operator, operator_deployment)
    if karpenter.is_release(step.registration):
        karpenter.start(cluster.control_plane, cluster.kubectl, binaries[karpenter.ENGINE], deployment)
        known.served |= _crd_kinds(karpenter.crds())


def _with_faults(step: objects.Step, exit_codes: dict[str, int]) -> objects.Step:
    manifests_ = [
        objects.failing(m, exit_codes[m["metadata"]["name"]]) if m["metadata"].get("name") in exit_codes else m
        for m in step.manifests
    ]
    return replace(step, manifests=manifests_)


def steps_of(deployment: Deployment, binaries: dict[str, Path],
             exit_codes: dict[str, int] | None = None) -> list[objects.Step]:
    """What deploy applies, step by step (objects.creation_order), as the local cluster runs it: `exit_codes` are
    objects (by name) whose pods end with that code, faults a test injects; EC2NodeClasses get their KWOKNodeClass."""
    render = _renderer(deployment, binaries["kube"], build.version(build.Engine.read(build.HERE / "kube")))
    return [
        replace(marked, manifests=karpenter.for_kwok(marked.manifests))  # EC2NodeClass: the cloud boundary
        for marked in (_with_faults(step, exit_codes or {}) for step in objects.creation_order(deployment, render))
    ]


def installed_crds(steps: list[objects.Step]) -> list[dict[str, Any]]:
    """The CRDs deploying `steps` installs (Karpenter's process installs its own and the KWOKNodeClass)."""
    crds = [m for step in steps for m in step.manifests if m.get("kind") == "CustomResourceDefinition"]
    return crds + (karpenter.crds() if any(karpenter.is_release(step.registration) for step in steps) else [])


def deploy(cluster: LocalCluster, deployment: Deployment, binaries: dict[str, Path],
           steps: list[objects.Step] | None = None) -> list[str]:
    """Nodes and volumes, then the stack's objects in creation order (`steps`, else steps_of the deployment); the
    add-ons that were stood in. Plain objects between two installs or gates go in one apply (kubectl applies a list
    in order)."""
    steps = steps_of(deployment, binaries) if steps is None else steps
    cluster.kubectl.apply(nodes.nodes(deployment) + volumes.stand_in_volumes(deployment))
    by_urn = {step.registration.urn: step for step in steps}
    known = _Known(*_discovery(cluster.kubectl), {n["metadata"]["name"] for n in cluster.kubectl.items("namespaces")})
    batch: list[dict[str, Any]] = []
    for step in steps:
        install = step.registration.type in objects.INSTALLS
        if batch and (install or step.after):
            cluster.kubectl.apply(batch)
            batch = []
        for gate in step.after:
            _await_gate(cluster.kubectl, step, by_urn[gate.urn])
        if install:
            _install(cluster, step, binaries, known, deployment)
        else:
            known.refuse_unserved(step, step.manifests)
            batch += step.manifests
            known.namespaces |= {m["metadata"]["name"] for m in step.manifests if m["kind"] == "Namespace"}
    if batch:
        cluster.kubectl.apply(batch)
    return [
        f"{located(step.registration)} ({len(step.manifests)} workloads)"
        for step in steps
        if any(objects.STAND_IN_LABEL in m["metadata"].get("labels", {}) for m in step.manifests)
    ]


def settle(kubectl: Kubectl, timeout_s: float = SETTLE_TIMEOUT_S) -> list[dict[str, Any]]:
    """The pods once none is Pending and the same pods were there for SETTLED_S (an operator creates a job's pods a
    moment after the job), or when the time ran out: what the table shows."""
    deadline, seen, since = time.monotonic() + timeout_s, set(), time.monotonic()
    while True:
        pods = kubectl.api.items("/api/v1/pods")
        names = {(p["metadata"]["namespace"], p["metadata"]["name"], p.get("status", {}).get("phase")) for p in pods}
        if names != seen:
            seen, since = names, time.monotonic()
        pending = any(p.get("status", {}).get("phase") == "Pending" for p in pods)
        if (not pending and time.monotonic() - since >= SETTLED_S) or time.monotonic() > deadline:
            return pods
        time.sleep(POLL_S)


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
    running = running_cluster()
    if running is not None and running.is_relative_to(RUNS):  # the user's own: a second cluster-up replaces it
        print(f"==> stopping the local cluster of {running.name}: {', '.join(stop_recorded(running))}", flush=True)
    print(f"==> the control plane of {stack} on 127.0.0.1", flush=True)
    cluster = start(stack, binaries, wait_s=CLI_WAIT_S)
    print(f"==> {stack}'s nodes and objects, in the order pulumi up creates them", flush=True)
    stood_in = deploy(cluster, deployment, binaries)
    print(f"    stood in (chart not rendered here): {', '.join(stood_in) or 'none'}", flush=True)
    pods = settle(cluster.kubectl)
    print(pod_table(pods, node_groups(cluster.kubectl)))
    print(f"kubectl: {binaries['kube']} kubectl --kubeconfig {cluster.control_plane.kubeconfig}")
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
    down = commands.add_parser("down", help="stop the local clusters of this checkout (runs/cluster)")
    down.add_argument("--all", action="store_true", help="also the one started elsewhere (a test's), if one runs")
    args = parser.parse_args(argv)
    if args.command == "down":
        running = running_cluster()
        elsewhere = running is not None and not running.is_relative_to(RUNS)
        states: set[Path] = {*RUNS.glob("*/"), *([running] if running and args.all else [])}
        for state in sorted(states):
            stopped = stop_recorded(state)
            print(f"{state}: stopped {', '.join(stopped) if stopped else 'nothing (not running)'}")
        if elsewhere and not args.all:
            print(f"{running}: left running (started elsewhere, by a test); `down --all` stops it too")
        return 0
    try:
        up(args.stack, _override(args.config))
    except (ApiError, BuildError, ControlPlaneError, CrdError, DeployError, KubectlError, StackFileError,
            FileNotFoundError, manifests.ManifestSourceError, operators.OperatorError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
