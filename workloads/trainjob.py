"""Kubeflow Trainer v2: the job as a TrainJob on a ClusterTrainingRuntime of ours, and the engines' rules.

The runtime carries the pod (workloads.training_pod) and the restart budget; the TrainJob says what
runs (image, command) on how many nodes. Encoded from kubeflow/trainer v2.3.0:
- pkg/runtime/framework/plugins/torch/torch.go: the torch plugin injects PET_NNODES,
  PET_NPROC_PER_NODE, PET_NODE_RANK (the pod's Job completion index), PET_MASTER_ADDR
  (`<trainjob>-node-0-0.<trainjob>`) and PET_MASTER_PORT (29500) into the container named `node` of
  the replicated job labelled `trainer.kubeflow.org/trainjob-ancestor-step: trainer`; those names
  are refused in `spec.trainer.env`; without `numProcPerNode` on CPU nodes it starts one process
  per requested CPU;
- pkg/runtime/framework/plugins/jobset/builder.go: the TrainJob's image, command and args replace
  that container's;
and from kubernetes-sigs/jobset v0.12.0 (the chart's dependency), pkg/webhooks/jobset_webhook.go:
every pod name `<jobset>-<job>-<job index>-<pod index>-<5 random>` must be a DNS-1035 label.
"""

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from eks_ddp.workloads.restart_budget import jobset_max_restarts
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.training_pod import (
    TrainingJob,
    pod_template,
    processes_per_pod,
    static_rendezvous_env,
    trainer_command,
)

API_VERSION = "trainer.kubeflow.org/v1alpha1"
KIND, RUNTIME_KIND = "TrainJob", "ClusterTrainingRuntime"
NODE = "node"  # the replicated job and the container the torch plugin configures
ANCESTOR_LABEL, TRAINER_ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step", "trainer"
MASTER_PORT = 29500  # constants.ContainerTrainerPort
RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")


def runtime_name(job: TrainingJob, spec: dict[str, Any]) -> str:
    """Cluster-scoped, so it names the namespace too; and named after its whole spec, so that a change reaches the
    running job.

    The Trainer builds a TrainJob's JobSet from its runtime once: v2.3.0's pkg/runtime/framework/plugins/jobset/
    jobset.go (Build) does "not update the JobSet if it already exists and is not suspended". A runtime updated in
    place would change nothing that runs, and the CRD refuses in-place changes to some of its fields (CEL
    `self == oldSelf` on failurePolicy, network, ...). Named after its spec, a changed runtime is a new object
    (pulumi-kubernetes replaces an object whose name changes, the new one first), the TrainJob's `spec.runtimeRef`
    changes, and the TrainJob is replaced (workloads.applying.REPLACED_NOT_UPDATED): its pods stop with a SIGTERM
    checkpoint and the new ones resume the same run, whose id reads only the run's arguments (training_pod.run_id).
    The old runtime is deleted last, once no TrainJob uses it; v2.3.0 keeps no finalizer on runtimes in use
    (kubeflow/trainer #3716 removed `trainer.kubeflow.org/resource-in-use`; its controller only strips old ones).

    Pulumi outputs count as one placeholder: the only one here is the job's image (the prepare-data init
    container's), which the TrainJob carries too (`spec.trainer.image`), so a new image replaces it all the same.
    """
    text = json.dumps(spec, sort_keys=True, default=lambda _output: "<output>")
    return f"eks-ddp-{job.namespace}-{job.name}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def render_runtime(job: TrainingJob, target: NodeTarget) -> dict[str, Any]:
    """The ClusterTrainingRuntime: the job's pod in one indexed Job, restarted whole by JobSet.

    A failed pod fails its Job (`backoffLimit: 0`, `restartPolicy: Never`), and JobSet then
    recreates every pod at once (`failurePolicy.maxRestarts`): one restart per node loss, each a
    fresh rendezvous that resumes from the last checkpoint.
    """
    pod = pod_template(job, target, NODE)
    container = pod["spec"]["containers"][0]
    del container["command"]  # the TrainJob's (builder.go), with its image
    pod["spec"]["restartPolicy"] = "Never"
    replicated = {
        "name": NODE,
        "template": {
            "metadata": {"labels": {ANCESTOR_LABEL: TRAINER_ANCESTOR}},
            "spec": {"backoffLimit": 0, "completionMode": "Indexed", "template": pod},
        },
    }
    spec = {
        "mlPolicy": {"numNodes": job.replicas, "torch": {}},
        "template": {
            "spec": {"failurePolicy": {"maxRestarts": jobset_max_restarts(job)}, "replicatedJobs": [replicated]}
        },
    }
    return {
        "apiVersion": API_VERSION,
        "kind": RUNTIME_KIND,
        "metadata": {"name": runtime_name(job, spec), "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": spec,
    }


def render(job: TrainingJob, target: NodeTarget) -> dict[str, Any]:
    """The TrainJob: what runs, on how many nodes, with how many processes each (never the plugin's `auto`)."""
    runtime = render_runtime(job, target)["metadata"]["name"]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": job.name, "namespace": job.namespace},
        "spec": {
            "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": RUNTIME_KIND, "name": runtime},
            "trainer": {
                "image": job.image,
                "command": trainer_command(job, target),
                "numNodes": job.replicas,
                "numProcPerNode": processes_per_pod(target),
            },
        },
    }


def injected_env(trainjob: dict[str, Any]) -> list[dict[str, Any]]:
    """The variables the torch plugin gives the `node` container (torch.go, EnforceMLPolicy)."""
    name, trainer = trainjob["metadata"]["name"], trainjob["spec"]["trainer"]
    address = f"{name}-{NODE}-0-0.{name}"
    return static_rendezvous_env(trainer["numNodes"], trainer["numProcPerNode"], address, MASTER_PORT)


def pod_spec(trainjob: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
    """The trainer pod as the controllers build it: the runtime's, with the TrainJob's image, command and the
    plugin's variables in the `node` container."""
    replicated = _trainer_job(runtime)
    pod = dict(replicated["template"]["spec"]["template"]["spec"]) if replicated else {}
    trainer = trainjob["spec"]["trainer"]
    containers = []
    for container in pod.get("containers", []):
        if container["name"] == NODE:
            overrides = {key: trainer[key] for key in ("image", "command", "args") if key in trainer}
            env = [*container.get("env", []), *trainer.get("env", []), *injected_env(trainjob)]
            container = {**container, **overrides, "env": env}
        containers.append(container)
    return {**pod, "containers": containers}


def _trainer_job(runtime: dict[str, Any]) -> dict[str, Any] | None:
    jobs = runtime.get("spec", {}).get("template", {}).get("spec", {}).get("replicatedJobs", [])
    labelled = (j for j in jobs if j.get("template", {}).get("metadata", {}).get("labels", {}).get(ANCESTOR_LABEL))
    return next(labelled, None)


def processes_unset(trainer: Mapping[str, Any]) -> list[str]:
    """Without `numProcPerNode` the torch plugin runs `auto`: on CPU nodes, one process per requested CPU."""
    if "numProcPerNode" in trainer:
        return []
    return [
        "spec.trainer.numProcPerNode is unset: on CPU nodes the torch plugin starts one process per requested CPU"
    ]


def admission_errors(trainjob: dict[str, Any], runtime: dict[str, Any]) -> list[str]:
    """What the Trainer's and JobSet's webhooks refuse, and what they accept but run wrongly (`processes_unset`, which
    the policy pack checks on any TrainJob too)."""
    errors = []
    trainer = trainjob.get("spec", {}).get("trainer", {})
    reserved = sorted({e["name"] for e in trainer.get("env", [])} & set(RESERVED_ENV))
    if reserved:
        errors.append(f"spec.trainer.env must not set {reserved}: the torch plugin owns them")
    errors += processes_unset(trainer)
    replicated = _trainer_job(runtime)
    if replicated is None:
        errors.append(f"the runtime has no replicated job labelled {ANCESTOR_LABEL}: nothing receives PET_* variables")
    elif not any(c["name"] == NODE for c in replicated["template"]["spec"]["template"]["spec"].get("containers", [])):
        errors.append(f"the runtime's trainer job has no container named {NODE}: nothing receives PET_* variables")
    nodes = int(trainer.get("numNodes", 1))
    longest_pod = f"{trainjob['metadata']['name']}-{NODE}-0-{nodes - 1}-abcde"
    if len(longest_pod) > 63:
        errors.append(f"JobSet's pod name {longest_pod!r} exceeds 63 characters: shorten the job's name")
    return errors
