"""No operator: the job as a Kubernetes Indexed Job plus a headless Service (the Graviton workshop's way).

Each pod runs the same torchrun command as under an operator, and gets from its own spec what an
operator would inject: PET_NODE_RANK from its completion index, PET_MASTER_ADDR naming pod 0
through the headless Service. Kubernetes rules encoded (kubernetes v1.35,
pkg/controller/job/job_controller.go, manageJob): an Indexed Job's pod `i` is named
`<job>-<i>-<5 random>` with hostname `<job>-<i>` and the completion-index annotation; a
`subdomain` naming a headless Service gives it the DNS name `<job>-<i>.<service>`; with
`restartPolicy: OnFailure` the Job counts container restarts against `backoffLimit`
(workloads.restart_budget.backoff_limit).
"""

from typing import Any

from eks_ddp.workloads.restart_budget import backoff_limit
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.training_pod import (
    TrainingJob,
    pod_labels,
    pod_template,
    processes_per_pod,
    static_rendezvous_env,
)

CONTAINER = "trainer"
MASTER_PORT = 29500  # torchrun's default


def master_address(job: TrainingJob) -> str:
    """Pod 0's DNS name through the headless Service (named as the job)."""
    return f"{job.name}-0.{job.name}"


def render(job: TrainingJob, target: NodeTarget) -> list[dict[str, Any]]:
    """The headless Service, then the Indexed Job."""
    metadata = {"name": job.name, "namespace": job.namespace}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "clusterIP": "None",
            # Pod 0 must resolve before it is ready: every torchrun waits for the others at the rendezvous.
            "publishNotReadyAddresses": True,
            "selector": pod_labels(job),
            "ports": [{"name": "rendezvous", "port": MASTER_PORT}],
        },
    }
    pod = pod_template(job, target, CONTAINER)
    pod["spec"]["subdomain"] = job.name
    pod["spec"]["restartPolicy"] = "OnFailure"
    container = pod["spec"]["containers"][0]
    container["env"] = [*container["env"], *rendezvous_env(job, target)]
    container["ports"] = [*container.get("ports", []), {"name": "rendezvous", "containerPort": MASTER_PORT}]
    indexed = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {**metadata, "labels": pod_labels(job)},
        "spec": {
            "completionMode": "Indexed",
            "completions": job.replicas,
            "parallelism": job.replicas,
            "backoffLimit": backoff_limit(job),
            "template": pod,
        },
    }
    return [service, indexed]


def rendezvous_env(job: TrainingJob, target: NodeTarget) -> list[dict[str, Any]]:
    """What an operator would inject: torchrun's static rendezvous on pod 0."""
    return static_rendezvous_env(job.replicas, processes_per_pod(target), master_address(job), MASTER_PORT)


def admission_errors(service: dict[str, Any], job: dict[str, Any]) -> list[str]:
    """What the API server accepts but leaves the pods unable to find pod 0."""
    errors = []
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    if spec.get("completionMode") != "Indexed" or spec.get("completions") != spec.get("parallelism"):
        errors.append("the Job must be Indexed with completions == parallelism: every rank runs at once")
    if pod.get("subdomain") != service["metadata"]["name"] or service["spec"].get("clusterIP") != "None":
        errors.append("the pods' subdomain must name a headless Service: pod 0's name would not resolve")
    labels = job["spec"]["template"].get("metadata", {}).get("labels", {})
    if any(labels.get(key) != value for key, value in service["spec"].get("selector", {}).items()):
        errors.append("the Service's selector does not match the pods: pod 0's name would not resolve")
    longest_pod = f"{job['metadata']['name']}-{spec.get('completions', 1) - 1}-abcde"
    if len(longest_pod) > 63:
        errors.append(f"pod name {longest_pod!r} exceeds 63 characters: shorten the job's name")
    return errors
