"""What a stack's `pulumi up` sends to the cluster, as objects to apply, in the order it creates them.

The objects are the manifests the program sends (a registration's `sent` inputs, without what the mocks answer).
`pulumi up` creates a resource once every resource it depends on exists, and, for the ones pulumi-kubernetes awaits
(engine_models.pulumi_kubernetes.awaited_to_completion), has ended; a component stands for every resource under
it, and a child waits for what its ancestors wait for. Charts and managed add-ons are one resource under the mocks:
where no Go module ships their chart, their workloads are stood in by the pods tests.cluster.addon_pods reads from
the pinned charts (requests, node selectors, tolerations), each named in the cluster's output.
"""

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.cluster.addon_pods import EKS_ADDON, HELM_RELEASE, KUSTOMIZE, YAML_FILE, Workload, addon_workloads
from eks_ddp.engine_models.base import Deployment, located
from eks_ddp.engine_models.pulumi_kubernetes import awaited_to_completion
from eks_ddp.tools.mocking import Registration

STAND_IN_IMAGE = "registry.k8s.io/pause:3.10"
EXIT_CODE = "eks-ddp.local/exit-code"
"""A pod annotated so ends its containers with that code (tests/cluster/stages/pod-exit.yaml)."""
MESSAGE = "eks-ddp.local/message"
"""The termination message the exit-code stage gives the pod's containers (the kubelet's log tail, in a cluster)."""
RUNS_ON = "eks-ddp.local/runs-on"
"""A pod annotated so keeps running, a Job's too (tests/cluster/stages/pod-hold.yaml)."""
STAND_IN_LABEL = "eks-ddp.local/stand-in-for"


INSTALLS = (HELM_RELEASE, KUSTOMIZE, YAML_FILE, EKS_ADDON)
"""Registrations that stand for many objects: what their chart, manifest or add-on installs."""

Render = Callable[[Registration], list[dict[str, Any]]]


@dataclass(frozen=True)
class Step:
    """The objects one registration creates, and the awaited registrations that must have ended first."""

    manifests: list[dict[str, Any]]
    registration: Registration
    after: tuple[Registration, ...]


def _custom_under(by_urn: dict[str, Registration], children: dict[str, list[str]], urn: str) -> set[str]:
    """The custom resources a dependency on `urn` waits for: itself, or every one under a component."""
    registration = by_urn.get(urn)
    if registration is None:
        return set()
    if registration.custom:
        return {urn}
    return set().union(*(_custom_under(by_urn, children, child) for child in children[urn]))


def _applied(registration: Registration) -> bool:
    """A Kubernetes object `pulumi up` applies whole (a Patch only adds to one), or an install of many."""
    single = registration.type.startswith("kubernetes:") and "kind" in registration.sent
    return (single and not registration.type.endswith("Patch")) or registration.type in INSTALLS


def creation_order(deployment: Deployment, render: Render) -> list[Step]:
    """What the stack applies, each registration after all it depends on (registration order among equals);
    `render` gives an install's objects (an empty list: nothing to apply)."""
    by_urn = {r.urn: r for r in deployment.registrations}
    children: dict[str, list[str]] = defaultdict(list)
    for registration in deployment.registrations:
        children[registration.parent].append(registration.urn)

    def waits_for(registration: Registration) -> set[str]:
        own = set().union(*(_custom_under(by_urn, children, urn) for urn in registration.dependencies))
        parent = by_urn.get(registration.parent)
        return own | (waits_for(parent) if parent is not None else set())

    applied = [r for r in deployment.registrations if _applied(r)]
    wanted = {r.urn for r in applied}
    needs = {r.urn: waits_for(r) & wanted for r in applied}
    done: set[str] = set()
    order: list[Step] = []
    while len(done) < len(applied):
        ready = [r for r in applied if r.urn not in done and needs[r.urn] <= done]
        if not ready:
            cycle = sorted(located(r) for r in applied if r.urn not in done)
            raise ValueError(f"objects that wait for each other: {', '.join(cycle)}")
        for registration in ready:
            done.add(registration.urn)
            objects = render(registration) if registration.type in INSTALLS else [dict(registration.sent)]
            if objects:
                after = tuple(by_urn[u] for u in sorted(needs[registration.urn]) if awaited_to_completion(by_urn[u]))
                order.append(Step(objects, registration, after))
    return order


def _namespace_of(deployment: Deployment, owner: str) -> str:
    registration = next(r for r in deployment.registrations if located(r) == owner)
    if registration.type == EKS_ADDON:
        return "kube-system"
    return str(registration.inputs.get("namespace") or "default")


def stand_in(workload: Workload, namespace: str) -> dict[str, Any]:
    """A DaemonSet, Deployment or StatefulSet with the workload's scheduling and requests, running nothing."""
    labels = {"app.kubernetes.io/name": workload.name, STAND_IN_LABEL: workload.owner.replace(" ", ".")}
    pod = dict(workload.pod)
    for field in ("containers", "initContainers"):
        if field in pod:
            pod[field] = [{**container, "image": STAND_IN_IMAGE} for container in pod[field]]
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app.kubernetes.io/name": workload.name}},
        "template": {"metadata": {"labels": labels}, "spec": pod},
    }
    if workload.kind != "DaemonSet":
        spec["replicas"] = workload.replicas
    if workload.kind == "StatefulSet":
        spec["serviceName"] = workload.name
    return {
        "apiVersion": "apps/v1",
        "kind": workload.kind,
        "metadata": {"name": workload.name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def stand_ins(deployment: Deployment) -> dict[str, list[dict[str, Any]]]:
    """The add-ons' workloads, by the registration that installs them (as located() names it), as objects."""
    by_owner: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for workload in addon_workloads(deployment):
        by_owner[workload.owner].append(stand_in(workload, _namespace_of(deployment, workload.owner)))
    return dict(by_owner)


def failing(manifest: dict[str, Any], code: int, message: str = "") -> dict[str, Any]:
    """The object whose run ends with `code` (and `message`): an MPIJob's launcher, whose verdict the MPIJob's is
    (a failed worker would leave it waiting: mpi-operator v0.8.0 creates the launcher once every worker is Ready, and
    a failed pod is not), any other object's every pod."""
    if manifest.get("kind") != "MPIJob":
        return exiting(manifest, code, message)
    specs = manifest["spec"]["mpiReplicaSpecs"]
    launcher = exiting(specs["Launcher"], code, message)
    return {**manifest, "spec": {**manifest["spec"], "mpiReplicaSpecs": {**specs, "Launcher": launcher}}}


def exiting(manifest: dict[str, Any], code: int, message: str = "") -> dict[str, Any]:
    """The object with every pod template it has annotated to end with `code` (and termination `message`): a fault a
    test injects."""
    return annotated_pods(manifest, {EXIT_CODE: str(code), **({MESSAGE: message} if message else {})})


def running_on(manifest: dict[str, Any]) -> dict[str, Any]:
    """The object with every pod template it has annotated to keep running (RUNS_ON)."""
    return annotated_pods(manifest, {RUNS_ON: "true"})


def annotated_pods(manifest: dict[str, Any], fault: dict[str, str]) -> dict[str, Any]:
    """The object with `fault` among the annotations of every pod template it has."""

    def mark(node: Any) -> Any:
        if isinstance(node, dict):
            marked = {key: mark(value) for key, value in node.items()}
            if "template" in node and isinstance(node["template"], dict) and "spec" in node["template"]:
                metadata = marked["template"].setdefault("metadata", {})
                metadata["annotations"] = {**(metadata.get("annotations") or {}), **fault}
            return marked
        if isinstance(node, list):
            return [mark(item) for item in node]
        return node

    return mark(manifest)
