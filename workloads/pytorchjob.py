"""The PyTorchJob (kubeflow.org/v1) of the training operator v1, and the operator's rules.

The pod is workloads.training_pod's; this module wraps it in Master and Worker replicas.
"""

import copy
from collections.abc import Mapping
from typing import Any

from eks_ddp.workloads.restart_budget import backoff_limit
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.training_pod import (
    TrainingJob,
    pod_template,
    processes_per_pod,
)

API_VERSION, KIND = "kubeflow.org/v1", "PyTorchJob"
CONTAINER = "pytorch"  # the operator finds the training container by this name
MASTER_PORT = 23456  # the port the operator gives static jobs (its default `pytorchjob-port`)
# What the operator reads only when it creates a pod. The training operator v1.9.4 creates the missing pods from
# `pytorchReplicaSpecs.*.template`, with the variables `nprocPerNode` and `elasticPolicy` give
# (pkg/controller.v1/common/pod.go ReconcilePods, pytorch/envvar.go setPodEnv), and never recreates a pod whose
# template changed: a change to these must replace the job. `runPolicy` is read at every reconcile (common/job.go).
POD_FIELDS = ("spec.pytorchReplicaSpecs", "spec.nprocPerNode", "spec.elasticPolicy")


def render(job: TrainingJob, target: NodeTarget) -> dict[str, Any]:
    """The PyTorchJob for `job` on `target`'s node group."""
    template = pod_template(job, target, CONTAINER)
    replica = {"restartPolicy": "OnFailure", "template": template}
    if job.elastic:
        replica_specs = {"Worker": {**replica, "replicas": job.replicas}}
    else:
        replica_specs = {"Master": {**replica, "replicas": 1}}
        if job.replicas > 1:
            replica_specs["Worker"] = {**replica, "replicas": job.replicas - 1}
    spec: dict[str, Any] = {
        "nprocPerNode": str(processes_per_pod(target)),  # never "auto": on CPU it means the host's vCPUs
        # No ttlSecondsAfterFinished: the job belongs to Pulumi, which deletes it (pulumi destroy or a new job name).
        "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": backoff_limit(job)},
        "pytorchReplicaSpecs": replica_specs,
    }
    if job.elastic:
        spec["elasticPolicy"] = {
            "rdzvBackend": "c10d",
            "rdzvId": f"{job.namespace}-{job.name}",
            "minReplicas": job.elastic_min_replicas,
            "maxReplicas": job.replicas,
            "maxRestarts": job.max_restarts,
            # never "standalone": the operator would inject PET_STANDALONE="" and crash torchrun
        }
    metadata = {"name": job.name, "namespace": job.namespace}
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


def replica_pods(spec: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """Each replica type with its pod spec (empty where the manifest has none)."""
    return [
        (kind, (((replica or {}).get("template") or {}).get("spec") or {}))
        for kind, replica in (spec.get("pytorchReplicaSpecs") or {}).items()
    ]


def processes_unset(spec: Mapping[str, Any]) -> list[str]:
    """The operator accepts `auto`, and no value (which it reads as `auto`), but runs it wrongly on CPU nodes."""
    if str(spec.get("nprocPerNode", "auto")) == "auto":
        return ["nprocPerNode is 'auto' (on CPU nodes torchrun then starts one process per host vCPU)"]
    return []


def container_unnamed(kind: str, pod: Mapping[str, Any]) -> list[str]:
    """The operator finds the training container of a replica's pod by its name."""
    if any(container.get("name") == CONTAINER for container in pod.get("containers") or []):
        return []
    return [f"{kind} has no container named {CONTAINER}"]


def admission_errors(manifest: dict[str, Any]) -> list[str]:
    """What the training operator's admission webhook would refuse (the CRD schema accepts these), and `auto`
    processes, which it accepts but runs wrongly. The policy pack checks any PyTorchJob by `processes_unset` and
    `container_unnamed` too."""
    errors = []
    spec = manifest.get("spec", {})
    replicas = spec.get("pytorchReplicaSpecs", {})
    unknown = sorted(set(replicas) - {"Master", "Worker"})
    if unknown:
        errors.append(f"replica types {unknown} are not Master or Worker")
    if "Master" in replicas and replicas["Master"].get("replicas", 1) != 1:
        errors.append("Master must have exactly 1 replica")
    if "elasticPolicy" in spec:
        if "Worker" not in replicas:
            errors.append("an elastic job needs Workers")
        if spec["elasticPolicy"].get("standalone"):
            errors.append("elasticPolicy.standalone crashes torchrun")
    elif "Master" not in replicas:
        errors.append("a static job needs exactly one Master")
    if not isinstance(spec.get("nprocPerNode", ""), str):
        errors.append("nprocPerNode must be a string")
    errors += processes_unset(spec)
    for kind, pod in replica_pods(spec):
        errors += container_unnamed(kind, pod)
        if any(not container.get("image") for container in pod.get("containers") or []):
            errors.append(f"{kind} has a container without an image")
    return errors


def pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The job's pods as the operator creates them, in rank order (Master-0, then Worker-0..n-1), with its variables.

    Encoded from the training operator v1.9.4 (identical in v1.9.0), pkg/controller.v1/pytorch/envvar.go
    (setPodEnv), master.go and elastic.go. A static job's containers get MASTER_ADDR/PORT and their PET_ twins
    naming the Master's service, WORLD_SIZE = replicas x nprocPerNode, RANK = PET_NODE_RANK (Workers count from 1),
    PET_NPROC_PER_NODE and PET_NNODES. An elastic job has Workers only: no MASTER_*, RANK or WORLD_SIZE, but
    torchrun's rendezvous on Worker-0's `pytorchjob-port` (PET_RDZV_ENDPOINT), PET_RDZV_BACKEND, PET_RDZV_ID,
    PET_MAX_RESTARTS and PET_NNODES = "min:max", so torchrun starts once `min` pods joined, up to `max`.
    """
    name, spec = manifest["metadata"]["name"], manifest["spec"]
    replicas, processes = spec["pytorchReplicaSpecs"], spec["nprocPerNode"]
    if "elasticPolicy" in spec:
        policy = spec["elasticPolicy"]
        injected = {
            "PYTHONUNBUFFERED": "1",
            "PET_NPROC_PER_NODE": processes,
            "PET_RDZV_ENDPOINT": f"{name}-worker-0:{MASTER_PORT}",
            "PET_RDZV_BACKEND": policy.get("rdzvBackend", "c10d"),
            "PET_NNODES": f"{policy['minReplicas']}:{policy['maxReplicas']}",
            **({"PET_MAX_RESTARTS": str(policy["maxRestarts"])} if "maxRestarts" in policy else {}),
            **({"PET_RDZV_ID": policy["rdzvId"]} if "rdzvId" in policy else {}),
        }
        return [_with_env(replicas["Worker"], injected) for _ in range(replicas["Worker"]["replicas"])]
    workers = replicas.get("Worker", {}).get("replicas", 0)
    ordered = [("Master", 0)] + [("Worker", index + 1) for index in range(workers)]
    address = f"{name}-master-0"
    pods = []
    for kind, rank in ordered:
        injected = {
            "PYTHONUNBUFFERED": "1",
            "MASTER_PORT": str(MASTER_PORT),
            "PET_MASTER_PORT": str(MASTER_PORT),
            "MASTER_ADDR": address,
            "PET_MASTER_ADDR": address,
            "WORLD_SIZE": str(len(ordered) * int(processes)),
            "RANK": str(rank),
            "PET_NODE_RANK": str(rank),
            "PET_NPROC_PER_NODE": processes,
            "PET_NNODES": str(len(ordered)),
        }
        pods.append(_with_env(replicas[kind], injected))
    return pods


def _with_env(replica: dict[str, Any], injected: dict[str, str]) -> dict[str, Any]:
    """A pod of `replica`, every container's env followed by what the operator injects."""
    pod = copy.deepcopy(replica["template"]["spec"])
    for container in pod["containers"]:
        container["env"] = [*container.get("env", []), *({"name": k, "value": v} for k, v in injected.items())]
    return pod
