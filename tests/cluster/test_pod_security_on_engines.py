"""Pod Security Admission itself (the API server's, kubernetes v1.35.4) on every pod every shipped stack creates.

Each pod template is sent as a Pod, dry-run, into a namespace enforcing its own namespace's level (the pod is
admitted) and into one enforcing `restricted` without what needs root (the pod is admitted but for it: why the
training namespace enforces `baseline` and warns at `restricted`, infra/platform.py). Pods of operators'
kinds (PyTorchJob, MPIJob, TrainJob) are created by their operators, so the API server never shows `pulumi up` what
it thinks of them: checking their templates as Pods is the only way to learn it before the operator meets it.
"""

from collections.abc import Callable
from typing import Any

from eks_ddp.tools import stack_file
from eks_ddp.engine_models.base import pod_specs
from eks_ddp.workloads import nccl_check
from eks_ddp.workloads.preflight import CONTAINER as GPU_PREFLIGHT
from tests.cluster import local_cluster
from tests.cluster.conftest import OnEngines
from tests.cluster.api import ApiError
from tests.cluster.kubectl import Kubectl

ENFORCE = "pod-security.kubernetes.io/enforce"
ROOT_STEPS = {"volume-permissions", GPU_PREFLIGHT}
"""The steps that run as root: the claim's directories handed to the trainer's user, and DCGM's host engine."""
ROOT_KINDS = {nccl_check.KIND}
"""Kinds whose every pod runs as root: the NCCL check's (AWS's nccl-tests image runs sshd and `mpirun
--allow-run-as-root` as root, workloads/nccl_check.py)."""


def _namespace(kubectl: Kubectl, level: str) -> str:
    name = f"psa-{level}"
    kubectl.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {ENFORCE: level}}}])
    return name


def _refusal(kubectl: Kubectl, namespace: str, name: str, spec: dict[str, Any]) -> str:
    """Why the API server refuses the pod (dry run), or "" when it admits it."""
    account = spec.get("serviceAccountName", "default")
    kubectl.apply([{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account,
                                                                              "namespace": namespace}}])
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    try:
        kubectl.api.create(pod, dry_run=True)
    except ApiError as error:
        return str(error).split(": ", 1)[-1]
    return ""


def _without_root_steps(spec: dict[str, Any]) -> dict[str, Any]:
    init = [c for c in spec.get("initContainers", []) if c["name"] not in ROOT_STEPS]
    return {**spec, "initContainers": init}


def test_every_pod_of_every_stack_passes_its_namespaces_level_and_restricted_but_for_the_root_steps(
    cluster: Callable[..., OnEngines],
) -> None:
    kubectl = cluster("dev", deploy=False).kubectl
    restricted = _namespace(kubectl, "restricted")
    refused: dict[str, str] = {}
    checked = with_root = 0
    for stack in stack_file.stacks(stack_file.ROOT):
        deployment = local_cluster.deployment_of(stack, {})
        levels = {(r.inputs["metadata"]["name"]): (r.inputs["metadata"].get("labels") or {}).get(ENFORCE)
                  for r in deployment.of_type("kubernetes:core/v1:Namespace")}
        for registration in deployment.kubernetes_objects():
            level = levels.get(str(registration.inputs.get("metadata", {}).get("namespace")))
            for index, spec in enumerate(pod_specs(registration.inputs) if level else []):
                where = f"{stack}: {registration.inputs['kind']} {registration.inputs['metadata']['name']} pod {index}"
                name = f"{registration.inputs['metadata']['name'][:50]}-{index}"
                checked += 1
                if why := _refusal(kubectl, _namespace(kubectl, str(level)), name, spec):
                    refused[f"{where} at {level}"] = why
                if registration.inputs["kind"] in ROOT_KINDS:
                    continue
                if why := _refusal(kubectl, restricted, name, _without_root_steps(spec)):
                    refused[f"{where} at restricted without {sorted(ROOT_STEPS)}"] = why
                root = sorted(c["name"] for c in spec.get("initContainers", []) if c["name"] in ROOT_STEPS)
                if root:  # the level is enforced: the same pod with its root steps is refused for them
                    with_root += 1
                    why = _refusal(kubectl, restricted, name, spec)
                    if not all(f'"{step}"' in why for step in root):
                        refused[f"{where} at restricted with {root}"] = f"not refused for them: {why or 'admitted'}"
    assert checked > 20 and with_root > 5, f"{checked} pod templates in namespaces with a level, {with_root} with root"
    assert not refused, "\n".join(f"{where}: {why}" for where, why in refused.items())
