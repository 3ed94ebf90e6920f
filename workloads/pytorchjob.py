"""The PyTorchJob (kubeflow.org/v1) of the training operator v1, and the operator's rules.

The pod is workloads.training_pod's; this module wraps it in Master and Worker replicas.
"""

from typing import Any

from workloads.target import NodeTarget
from workloads.training_pod import (
    TrainingJob,
    pod_template,
    processes_per_pod,
    restart_budget,
)

API_VERSION, KIND = "kubeflow.org/v1", "PyTorchJob"
CONTAINER = "pytorch"  # the operator finds the training container by this name


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
        "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": restart_budget(job)},
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


def admission_errors(manifest: dict[str, Any]) -> list[str]:
    """What the training operator's admission webhook would refuse (the CRD schema accepts these)."""
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
    for kind, replica in replicas.items():
        containers = replica.get("template", {}).get("spec", {}).get("containers", [])
        if not any(container.get("name") == CONTAINER for container in containers):
            errors.append(f"{kind} has no container named {CONTAINER}")
        if any(not container.get("image") for container in containers):
            errors.append(f"{kind} has a container without an image")
    return errors
