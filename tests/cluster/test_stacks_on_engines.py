"""Every shipped stack on the engines themselves: each object accepted by the real API server (schemas, CEL rules,
webhooks, Pod Security Admission, RBAC), each pod placed by the real scheduler and run by KWOK."""

from collections.abc import Callable
from typing import Any

import pytest

from eks_ddp.stack import stack_file
from eks_ddp.stack.cluster.placement import placed
from eks_ddp.stack.config import SYSTEM_GROUP
from eks_ddp.stack.engine_rules.base import Deployment, located
from eks_ddp.stack.engine_rules.pulumi_kubernetes import COMPLETING
from eks_ddp.workloads.batch_jobs import STEP_LABEL
from eks_ddp.workloads.training_pod import TRAINER_LABEL
from tests.cluster.conftest import OnEngines
from tests.cluster.nodes import group_name

STACKS = stack_file.stacks(stack_file.ROOT)
SIDE_STEPS = {"data", "evaluate"}
PENDING = "Pending"


def _describe(pod: dict[str, Any]) -> str:
    conditions = pod.get("status", {}).get("conditions") or []
    why = next((c.get("message", "") for c in conditions if c.get("type") == "PodScheduled"), "")
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']} {pod['status'].get('phase')}: {why}"


def _model_groups(deployment: Deployment) -> dict[str, set[str]]:
    """The node groups the cluster rehearsal (stack.cluster.placement) puts each of the stack's own objects' pods on,
    by object name; PENDING for a pod it finds no node for."""
    cluster = placed(deployment)
    names = {located(r): r.inputs["metadata"]["name"] for r in deployment.kubernetes_objects()}
    groups: dict[str, set[str]] = {}
    for pod, node in cluster.placements:
        if pod.owner in names:
            groups.setdefault(names[pod.owner], set()).add(group_name(node.source))
    for finding in cluster.findings:
        if finding.resource in names:
            groups.setdefault(names[finding.resource], set()).add(PENDING)
    return groups


def _owner(pod: str, objects: set[str]) -> str | None:
    """The stack's object a pod comes from, by its name: the longest object name it starts with (a Job's pods are
    `<job>-<suffix>`, a PyTorchJob's `<job>-master-0`, an MPIJob's `<job>-worker-0`, a TrainJob's JobSet's
    `<trainjob>-node-0-0-<suffix>`)."""
    return max((name for name in objects if pod.startswith(f"{name}-")), key=len, default=None)


def _engine_groups(on: OnEngines, objects: set[str]) -> dict[str, set[str]]:
    """The node groups the real scheduler bound the pods of each of `objects` to, by its own `Scheduled` events (pods
    deleted since count: an MPIJob's workers are gone once it succeeded, `cleanPodPolicy: Running`); PENDING for a
    pod it has not bound."""
    groups: dict[str, set[str]] = {}
    for event in on.kubectl.items("events", "--all-namespaces", "--field-selector=reason=Scheduled"):
        owner = _owner(event["involvedObject"]["name"], objects)
        if owner is not None:
            groups.setdefault(owner, set()).add(on.group_of(event["message"].rsplit(" to ", 1)[-1]))
    for pod in on.kubectl.items("pods", "--all-namespaces", "--field-selector=spec.nodeName="):
        owner = _owner(pod["metadata"]["name"], objects)
        if owner is not None:
            groups.setdefault(owner, set()).add(PENDING)
    return groups


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_is_admitted_and_runs_and_training_runs_on_its_group(
    cluster: Callable[..., OnEngines], stack: str
) -> None:
    on = cluster(stack)
    pods = on.pods()
    waiting = [_describe(p) for p in pods if p["status"].get("phase") not in ("Running", "Succeeded")]
    assert not waiting, "\n".join(waiting)
    values = stack_file.load(stack, stack_file.ROOT, {})[0]
    group = (values.get("job") or {}).get("nodeGroup") or values["nodeGroups"][0]["name"]
    training = [p for p in pods if TRAINER_LABEL.items() <= (p["metadata"].get("labels") or {}).items()]
    assert training, f"{stack}: no training pod"
    assert {on.group_of(p["spec"].get("nodeName", "")) for p in training} == {group}
    side = [p for p in pods if (p["metadata"].get("labels") or {}).get(STEP_LABEL) in SIDE_STEPS]
    if group != SYSTEM_GROUP:  # a job on the system group shares it with everything, as the cpu stack's does
        taken = [p["metadata"]["name"] for p in side if on.group_of(p["spec"].get("nodeName", "")) == group]
        assert not taken, f"side Jobs on the training group {group}: {taken}"
    # The rehearsal's placement, a fast model kept for `make rehearse`, agrees with the scheduler on every object.
    jobs = [r for r in on.deployment.kubernetes_objects() if r.inputs["kind"] in COMPLETING]
    objects = {r.inputs["metadata"]["name"] for r in jobs}
    assert _engine_groups(on, objects) == _model_groups(on.deployment)
