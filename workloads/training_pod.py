"""The pod every operator runs a training job in.

The job's run (its identity and paths), the trainer's command and the pod template
(node selector, tolerations, EFA and GPU resources, /dev/shm, the claim, the service account, the
environment, the grace period) live here once; workloads.pytorchjob, workloads.trainjob and
workloads.indexed_job only wrap the pod in their engine's object. Pure functions returning plain
dicts: tests validate them against the schemas, the local runner executes their commands.
"""

import hashlib
import json
from typing import Any

from eks_ddp.infra.storage.shared_claim import SHARED_UID
from eks_ddp.workloads import preflight, security
from eks_ddp.workloads.fabric_env import collective_env
from eks_ddp.workloads.job import DOWNLOADABLE_DATASETS, SHARED_MOUNT, TrainingJob
from eks_ddp.workloads.job import TrainingJobSpec as TrainingJobSpec  # stable here too (docs/api.md)
from eks_ddp.workloads.job import UserCodeSpec as UserCodeSpec  # stable here too (docs/api.md)
from eks_ddp.workloads.target import PROCESS_MIB, NodeTarget, pod_memory_mib, resources

CHECKPOINT_GRACE_SECONDS = 120
# torchrun forwards SIGTERM to its workers, then SIGKILLs them after TORCH_ELASTIC_SHUTDOWN_TIMEOUT
# (30 s by default; torch/distributed/launcher/api.py): it must leave them the pod's grace period,
# less the seconds torchrun and the kubelet need to wind down after the workers exit.
WORKER_SHUTDOWN_SECONDS = CHECKPOINT_GRACE_SECONDS - 15
# A new FSx for Lustre file system's root belongs to root, and the FSx CSI chart's
# `fsGroupPolicy: ReadWriteOnceWithFSType` (aws-fsx-csi-driver chart 1.11.0 values.yaml) means
# Kubernetes never applies fsGroup to a ReadWriteMany Lustre volume: a small root step makes the
# job's directories and gives them to the trainer's user, which every other container runs as.
# Pinned by digest: the tag's OCI index as docker-library/repo-info (commit 01a7054, repos/busybox/remote/1.37.0.md)
# records it for Docker Hub, whose official images ECR Public's docker/library serves with the same digests, without
# Docker Hub's pull limits. Not pulled from this project's offline CI: `crane digest` it when moving the tag.
PERMISSIONS_IMAGE = (
    "public.ecr.aws/docker/library/busybox:1.37.0"
    "@sha256:9db7b59979c38555a39def84a31fb98b5296952f9e3afd4f6f11f05b07adfab0"
)
# How long torchrun waits for every pod to join. Its static rendezvous gives up after 600 s
# (torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py), but a pod can wait for a
# node scaled up from zero: the Cluster Autoscaler allows 15 minutes to provision one
# (--max-node-provision-time), then the image is pulled. `timeout` is the static rendezvous'
# key, `join_timeout` the c10d one (elastic jobs); each ignores the other.
RENDEZVOUS_TIMEOUT_SECONDS = 1800
# Every pod serves the trainer's Prometheus metrics here (`--metrics-port`, from its local rank 0), on the port it
# declares under this name for the PodMonitor, which selects every pod of the job: every scrape target is up.
METRICS_PORT, METRICS_PORT_NAME = 9300, "metrics"
# The bundled trainer's module, run by `python -m` and `torchrun -m` in every pod that runs it.
TRAINER_MODULE = "eks_ddp.trainer"


# What the pods tell the user's own code (UserCode): where its data, results and checkpoints live on the claim.
USER_CODE_ENV = (
    "EKS_DDP_DATA_DIR",
    "EKS_DDP_OUTPUT_DIR",
    "EKS_DDP_CHECKPOINT_DIR",
    "EKS_DDP_RUN_NAME",
    "EKS_DDP_METRICS_PORT",
)






def global_batch(job: TrainingJob, target: NodeTarget) -> int:
    """Samples per optimizer step: `batch_size` on every rank of the job at full size. The trainer keeps it
    when an elastic job runs on fewer ranks (gradient accumulation), so its results do not depend on how
    many nodes it got."""
    return job.batch_size * job.replicas * processes_per_pod(target)


def run_arguments(job: TrainingJob, target: NodeTarget) -> list[str]:
    """The trainer's flags that define the run (it records them in its checkpoints and refuses a resume
    that changes them); for the user's own code, what it runs and with which arguments."""
    if job.code is not None:
        return [*job.code.launch(), *job.code.args]
    return [
        "--dataset",
        job.dataset,
        "--epochs",
        str(job.epochs),
        "--batch-size",
        str(job.batch_size),
        "--global-batch-size",
        str(global_batch(job, target)),
        *job.extra_args,
    ]


def run_id(job: TrainingJob, target: NodeTarget) -> str:
    """Names the run's directories: a deploy that changes what defines the run starts a new run beside the
    old one (whose model and checkpoints stay), instead of a resume the trainer must refuse."""
    return hashlib.sha256(json.dumps(run_arguments(job, target)).encode()).hexdigest()[:10]


def run_name(job: TrainingJob, target: NodeTarget) -> str:
    """The run's name in its checkpoints, summary and model, checked by the evaluation."""
    return f"{job.namespace}/{job.name}/{run_id(job, target)}"


def trainer_command(job: TrainingJob, target: NodeTarget) -> list[str]:
    """torchrun reads PET_NNODES, PET_NODE_RANK, PET_NPROC_PER_NODE, PET_MASTER_* from its pod's environment
    (each operator's, or the Indexed Job's own): no --nnodes or --master-addr here."""
    if job.code is not None:
        return ["torchrun", *run_arguments(job, target)]
    paths = job.paths(run_id(job, target))
    return [
        "torchrun",
        "-m",
        TRAINER_MODULE,
        "train",
        *run_arguments(job, target),
        "--data-dir",
        paths["data"],
        "--output-dir",
        paths["output"],
        "--checkpoint-dir",
        paths["checkpoints"],
        "--run-name",
        run_name(job, target),
        "--checkpoint-every",
        str(job.checkpoint_every),
        "--metrics-port",
        str(METRICS_PORT),
        # A GPU pod without CUDA (a CPU image, no driver) stops with one line instead of training on CPUs.
        *(["--device", "cuda"] if target.instance.gpus else []),
        *artifact_arguments(job, run_id(job, target)),
    ]


def user_code_env(job: TrainingJob, target: NodeTarget) -> list[dict[str, str]]:
    """The run's directories for the user's own code (USER_CODE_ENV), then its own variables."""
    if job.code is None:
        return []
    paths = job.paths(run_id(job, target))
    values = (paths["data"], paths["output"], paths["checkpoints"], run_name(job, target), str(METRICS_PORT))
    return [
        *({"name": name, "value": value} for name, value in zip(USER_CODE_ENV, values)),
        *({"name": name, "value": value} for name, value in job.code.env),
    ]


def artifact_arguments(job: TrainingJob, run: str) -> list[Any]:
    """`--artifact-uri` and `--checkpoint-uri` under the job's bucket (none without one)."""
    if job.artifact_bucket is None:
        return []
    return [
        "--artifact-uri",
        s3_uri(job.artifact_bucket, f"runs/{job.name}/{run}"),
        "--checkpoint-uri",
        s3_uri(job.artifact_bucket, f"checkpoints/{job.name}/{run}"),
    ]


def s3_uri(bucket: Any, path: str) -> Any:
    """s3://BUCKET/PATH, for a plain name or a Pulumi output of one (anything with `apply`)."""
    if hasattr(bucket, "apply"):
        return bucket.apply(lambda name: f"s3://{name}/{path}")
    return f"s3://{bucket}/{path}"


def shared_directories(job: TrainingJob, run: str) -> list[str]:
    """What the job's containers create files in (the data parent holds the preparers' lock)."""
    paths = job.paths(run)
    return [f"{SHARED_MOUNT}/data", paths["data"], paths["output"], paths["checkpoints"]]


def volume_permissions(job: TrainingJob, run: str) -> dict[str, Any]:
    """The init container that runs first, as root, and hands the job's directories to the trainer's user."""
    directories = " ".join(shared_directories(job, run))
    return {
        "name": "volume-permissions",
        "image": PERMISSIONS_IMAGE,
        "command": ["sh", "-c", f"mkdir -p {directories} && chown {SHARED_UID}:{SHARED_UID} {directories}"],
        "securityContext": security.ROOT_PERMISSIONS_STEP,
        "volumeMounts": [{"name": "shared", "mountPath": SHARED_MOUNT}],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "32Mi"}},
    }


def shared_volume(job: TrainingJob) -> dict[str, Any]:
    """The claim at /shared, or, without shared storage, scratch space that is lost with the pod: then what
    must last (results, checkpoints) goes to the job's S3 bucket."""
    if job.claim_name:
        return {"name": "shared", "persistentVolumeClaim": {"claimName": job.claim_name}}
    return {"name": "shared", "emptyDir": {}}


def prepare_data_command(job: TrainingJob) -> list[str]:
    """Idempotent: verified files are not fetched again."""
    data = f"{SHARED_MOUNT}/data/{job.dataset}"
    return ["python", "-m", TRAINER_MODULE, "prepare-data", "--dataset", job.dataset, "--data-dir", data]


# NeuronCores per Neuron device, one training process each (torchrun --nproc_per_node = the node's cores, as AWS's
# trn1 examples run 32 on trn1.32xlarge's 16 devices): 2 on trn1, trn1n and inf2; 8 physical on trn2, grouped 2 to a
# logical core by default (LNC=2, aws-neuron-sdk v2.32.0 deploy/eks/prerequisites.rst), so 4.
NEURON_CORES_PER_DEVICE = {"trn1": 2, "trn1n": 2, "inf2": 2, "trn2": 4}


def processes_per_pod(target: NodeTarget) -> int:
    """One per GPU on GPU nodes, one per NeuronCore on Neuron nodes; one per pod on CPU nodes (it uses all the pod's
    CPUs as threads)."""
    if target.instance.neuron_devices:
        family = target.instance.name.split(".")[0]
        return target.instance.neuron_devices * NEURON_CORES_PER_DEVICE[family]
    return target.instance.gpus or 1


# One rank of the bundled trainer at its peak, by dataset (its default model, a batch of 128): what
# benchmarks/pod_memory.py measured in one-epoch runs on full-size data (benchmarks/results/2026-11-25-pod-memory.jsonl), rounded up to 10 MiB.
# Above a bare rank (workloads.target.PROCESS_MIB): the splits as float32, the convolutional models' training images
# once more in channels-last, the evaluation's predictions. Arguments that change the data or the model
# (`--synthetic-size`, `--model`) change it: the pod's limit, its room on the node, still holds what they add.
RANK_PEAK_MIB = {"digits": PROCESS_MIB, "mnist": 1360, "cifar10": 2320, "synthetic": 1520}
DATASET_RANK_MIB = {dataset: peak - PROCESS_MIB for dataset, peak in RANK_PEAK_MIB.items()}


def trainer_memory_mib(job: TrainingJob, target: NodeTarget) -> int:
    """The memory a training pod asks for: its ranks with their dataset (the user's own code: bare ranks, whose needs
    are the user's to know; its limit is the pod's room)."""
    data = DATASET_RANK_MIB[job.dataset] if job.code is None else 0
    return pod_memory_mib(target.instance, processes_per_pod(target), data)


def pod_template(job: TrainingJob, target: NodeTarget, container: str) -> dict[str, Any]:
    """The training pod; `container` names the trainer's container as its operator expects."""
    env = [
        {
            "name": "PET_RDZV_CONF",
            "value": f"timeout={RENDEZVOUS_TIMEOUT_SECONDS},join_timeout={RENDEZVOUS_TIMEOUT_SECONDS}",
        },
        {"name": "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "value": str(WORKER_SHUTDOWN_SECONDS)},
        *collective_env(target, f"{job.paths(run_id(job, target))['output']}/flight-recorder-rank-"),
        *user_code_env(job, target),
    ]
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}, shared_volume(job)]
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "shared", "mountPath": SHARED_MOUNT},
    ]
    spec: dict[str, Any] = {
        "containers": [
            security.restricted(
                {
                    "name": container,
                    "image": job.image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": trainer_command(job, target),
                    "env": env,
                    "resources": resources(target, trainer_memory_mib(job, target)),
                    "volumeMounts": mounts,
                    "ports": [{"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"}],
                }
            )
        ],
        "volumes": volumes,
        "nodeSelector": target.node_selector(),
        "tolerations": target.tolerations(),
        # Room for the SIGTERM checkpoint before the kubelet's SIGKILL.
        "terminationGracePeriodSeconds": CHECKPOINT_GRACE_SECONDS,
    }
    if job.service_account:
        spec["serviceAccountName"] = job.service_account
    checks = preflight.init_containers(target, job.image) if job.preflight else []
    if checks:
        spec["volumes"] = [*volumes, *preflight.volumes()]
    spec["initContainers"] = [*checks, volume_permissions(job, run_id(job, target))]
    if job.code is None and job.dataset in DOWNLOADABLE_DATASETS:  # the user's image has no `trainer` to run
        # Pods may start before the DataPrepJob finishes (or have only scratch space): fetch or verify the data.
        spec["initContainers"].append(
            security.restricted(
                {
                    "name": "prepare-data",
                    "image": job.image,
                    "command": prepare_data_command(job),
                    "volumeMounts": mounts,
                    "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
                }
            )
        )
    return {"metadata": {"labels": pod_labels(job)}, "spec": security.restricted_pod(spec)}


TRAINER_LABEL = {"app.kubernetes.io/name": "eks-ddp-trainer"}
"""What every training pod carries, whichever operator runs it (the preview's cost and the cluster tests tell them by
it)."""


def pod_labels(job: TrainingJob) -> dict[str, str]:
    return {**TRAINER_LABEL, "eks-ddp/job": job.name}


def pod_monitor(job: TrainingJob) -> dict[str, Any]:
    """Prometheus scrapes the job's metrics port; each sample keeps the pod's job label (as `eks_ddp_job`),
    which the training dashboard selects on."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": f"{job.name}-trainer", "namespace": job.namespace, "labels": pod_labels(job)},
        "spec": {
            "selector": {"matchLabels": pod_labels(job)},
            "podMetricsEndpoints": [{"port": METRICS_PORT_NAME, "interval": "15s"}],
            "podTargetLabels": ["eks-ddp/job"],
        },
    }


# The Job controller annotates each pod of an Indexed Job with its index (kubernetes pkg/controller/job).
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def static_rendezvous_env(nodes: int, processes: int, address: str, port: int) -> list[dict[str, Any]]:
    """torchrun's static rendezvous on pod 0 of an Indexed Job: the Trainer's torch plugin's, or our own Job's."""
    return [
        {"name": "PET_NNODES", "value": str(nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": str(processes)},
        {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}},
        {"name": "PET_MASTER_ADDR", "value": address},
        {"name": "PET_MASTER_PORT", "value": str(port)},
    ]
