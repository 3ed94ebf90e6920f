"""Every shipped stack on the engines themselves: each object accepted by the real API server (schemas, CEL rules,
webhooks, Pod Security Admission, RBAC), each pod placed by the real scheduler and run by KWOK."""

from collections.abc import Callable
from typing import Any

import pytest

from eks_ddp.tools import stack_file
from eks_ddp.stack.config import SYSTEM_GROUP
from eks_ddp.engine_models.base import EFA_RESOURCE, GPU_RESOURCE, NEURON_RESOURCE, quantity
from eks_ddp.workloads.batch_jobs import STEP_LABEL
from tests.cluster.conftest import OnEngines, training

STACKS = stack_file.stacks(stack_file.ROOT)
SIDE_STEPS = {"data", "evaluate"}
# A node offers a device only once its device plugin runs there (the kubelet's device manager): the DaemonSet that
# must have a pod on every node whose allocatable counts the device.
DEVICE_PLUGINS = {
    EFA_RESOURCE: "aws-efa-k8s-device-plugin",
    GPU_RESOURCE: "nvidia-device-plugin",
    NEURON_RESOURCE: "neuron-device-plugin",
}
GPU_EXPORTER = "dcgm-exporter"
"""Where the stack runs it, on every GPU node: its metrics come from no other."""


def _describe(pod: dict[str, Any]) -> str:
    conditions = pod.get("status", {}).get("conditions") or []
    why = next((c.get("message", "") for c in conditions if c.get("type") == "PodScheduled"), "")
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']} {pod['status'].get('phase')}: {why}"


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
    trainers = training(pods)
    assert trainers, f"{stack}: no training pod"
    assert {on.group_of(p["spec"].get("nodeName", "")) for p in trainers} == {group}
    side = [p for p in pods if (p["metadata"].get("labels") or {}).get(STEP_LABEL) in SIDE_STEPS]
    if group != SYSTEM_GROUP:  # a job on the system group shares it with everything, as the cpu stack's does
        taken = [p["metadata"]["name"] for p in side if on.group_of(p["spec"].get("nodeName", "")) == group]
        assert not taken, f"side Jobs on the training group {group}: {taken}"
    daemons = {(p["spec"].get("nodeName"), ref["name"]) for p in pods if p["status"].get("phase") == "Running"
               for ref in p["metadata"].get("ownerReferences") or [] if ref["kind"] == "DaemonSet"}
    wanted = [*DEVICE_PLUGINS.items(), *([(GPU_RESOURCE, GPU_EXPORTER)] if any(d == GPU_EXPORTER for _, d in daemons)
                                         else [])]
    unserved = [f"{node['metadata']['name']}: {daemon}" for node in on.kubectl.items("nodes")
                for resource, daemon in wanted
                if quantity(node["status"]["allocatable"].get(resource, 0))
                and (node["metadata"]["name"], daemon) not in daemons]
    assert not unserved, f"devices without their plugin or exporter: {unserved}"
