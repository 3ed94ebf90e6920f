"""batch/v1 Jobs around training: prepare data, evaluate the model, check the EFA fabric."""

from enum import Enum
from typing import Any

from eks_ddp.infra.aws.cluster import SYSTEM_LABEL
from eks_ddp.workloads import security
from eks_ddp.workloads.target import ARCHITECTURE_LABEL, NodeTarget
from eks_ddp.workloads.training_pod import (
    DOWNLOADABLE_DATASETS,
    SHARED_MOUNT,
    TRAINER_MODULE,
    TrainingJob,
    prepare_data_command,
    run_id,
    run_name,
    s3_uri,
    shared_volume,
    volume_permissions,
)

# x86 nodes: an AWS Deep Learning Container ships libfabric with the EFA provider
# (fi_info, fi_pingpong), as the workshop uses. The tag was not pulled here (no
# registry access); no arm64 default is pinned, so Graviton groups must name one.
FABRIC_IMAGE = "pytorch-training:2.7.1-gpu-py312-cu128-ubuntu22.04-ec2"
# Deep Learning Containers live in each region's own registry, under account 763104351884
# except in these regions (aws/deep-learning-containers available_images.md).
DLC_ACCOUNTS = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-northeast-3": "364406365360",
    "ap-southeast-3": "907027046896",
    "eu-south-1": "692866216735",
    "me-central-1": "914824155844",
    "me-south-1": "217643126080",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
}


def default_fabric_image(architecture: str, region: str) -> str | None:
    """The fabric check's image in the stack's own region (None for arm64: none is published)."""
    if architecture != "x86_64":
        return None
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{DLC_ACCOUNTS.get(region, '763104351884')}.dkr.ecr.{region}.{domain}/{FABRIC_IMAGE}"


FABRIC_IMAGE_KEY = "eks-ddp:fabricCheckImage (FabricCheckJob's image)"
STEP_LABEL = "eks-ddp/step"
"""Which side step of the job a Job is: `data` or `evaluate`."""
FABRIC_PORT = 47592
FABRIC_CHECK_LABEL = "eks-ddp/fabric-check"
"""On every fabric check's object and pods (EFA and NCCL): what the rehearsal's gate rule knows them by."""
# A check gates training: `pulumi up` waits for it to end before it creates the training job (stack.program), so
# a broken fabric stops the deploy instead of training slowly over TCP, and the check's pods are gone before the
# training pods need the same nodes. Nodes scaled from zero take up to 15 minutes (the Cluster Autoscaler's
# --max-node-provision-time), the images several GB, the tests a minute or two: each check's pods stop at most
# GATE_SECONDS after they start (the EFA Job's deadline counts from its creation, so it ends the whole Job), and
# `pulumi up` waits at most AWAIT_SECONDS for it (engine_models.pulumi_kubernetes says what it does then).
GATE_SECONDS = 25 * 60
AWAIT_SECONDS = GATE_SECONDS + 5 * 60
REPLACE_UNREADY = "pulumi.com/replaceUnready"
"""pulumi-kubernetes replaces a batch/v1 Job with this annotation when the next `pulumi up` finds it not Complete
(v4.32.0 provider/pkg/provider/provider.go Diff); on any other kind it only warns that it is not supported."""
PEER_WINDOW_SECONDS = 15 * 60
"""How long each EFA check pod waits for its peer: the other node may join up to 15 minutes later."""
VERDICT_IN_STATUS = "FallbackToLogsOnError"
"""A failed container's log tail becomes its termination message (the kubelet, up to 80 lines or 2,048 bytes), which
pulumi-kubernetes' Job await puts in its error (provider/pkg/await/checker/pod/check.go containerTerminatedError)."""


class OnFailure(str, Enum):
    """What a failed fabric check does to training (`eks-ddp:fabricCheck`). Either way `pulumi up` waits for the
    check to end before it creates the training job, so the two never hold the same nodes' GPUs and EFA devices."""

    GATE = "gate"
    """The check's object fails, `pulumi up` stops there and the training job is not created."""
    REPORT = "report"
    """The check logs its verdict and ends well: training starts on a fabric it could not prove."""


def verdict(script: str, on_failure: OnFailure, check: str) -> str:
    """The check's script, or, when it only reports, the script with its failure turned into a logged line."""
    if on_failure == OnFailure.GATE:
        return script
    note = f"{check} CHECK FAILED, reported only (eks-ddp:fabricCheck: report): training starts anyway"
    return f"( {script}\n) || echo '{note}'"


def gate_annotations(wait_for: str | None = None) -> dict[str, str]:
    """Awaited by `pulumi up` (the job components skip the await unless the object says otherwise): a batch/v1 Job by
    pulumi-kubernetes' Job await (no `wait_for`), which fails as soon as the Job fails, and is replaced by the next
    `pulumi up` unless it completed (`pulumi.com/replaceUnready`, which the provider honours for Jobs only);
    any other kind until `wait_for`."""
    waits = {"pulumi.com/waitFor": wait_for} if wait_for else {REPLACE_UNREADY: "true"}
    return {"pulumi.com/skipAwait": "false", "pulumi.com/timeoutSeconds": str(AWAIT_SECONDS), **waits}


def _job(
    name: str,
    namespace: str,
    pod_spec: dict[str, Any],
    labels: dict[str, str],
    completions: int = 1,
    backoff_limit: int = 2,
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "completions": completions,
            "parallelism": completions,
            "backoffLimit": backoff_limit,
            # No ttlSecondsAfterFinished: the Job belongs to Pulumi, not to Kubernetes' TTL controller.
            "template": {"metadata": {"labels": labels}, "spec": {"restartPolicy": "Never", **pod_spec}},
        },
    }


def _trainer_job(name: str, namespace: str, pod_spec: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """A Job of the trainer's image, with the checkov checks it does not pass and why (workloads/security.py)."""
    manifest = _job(name, namespace, pod_spec, labels)
    manifest["metadata"]["annotations"] = dict(security.CHECKOV_SKIPS)
    return manifest


def _shared_volume(job: TrainingJob) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return [shared_volume(job)], [{"name": "shared", "mountPath": SHARED_MOUNT}]


def evaluation_command(job: TrainingJob, target: NodeTarget) -> list[str]:
    """Evaluates the model of exactly this run: the trainer refuses a model.pt another run wrote."""
    run = run_id(job, target)
    paths = job.paths(run)
    command = [
        "python",
        "-m",
        TRAINER_MODULE,
        "evaluate",
        "--model-file",
        f"{paths['output']}/model.pt",
        "--run-name",
        run_name(job, target),
        "--data-dir",
        paths["data"],
        "--json",
        f"{paths['output']}/evaluation.json",
    ]
    if not job.claim_name:  # scratch space only: the model comes from S3, once training has uploaded it
        model = s3_uri(job.artifact_bucket, f"runs/{job.name}/{run}/model.pt")
        command += ["--model-uri", model, "--wait-minutes", str(EVALUATION_DEADLINE_SECONDS // 60)]
    return command


# Side steps need no GPU, EFA or a node's worth of CPUs: they run on the system nodes, in the job's image (so its
# architecture), and never take room a training pod needs (a side pod beside a training pod that asks all but 0.69
# of a p4de's 96 CPUs cannot be placed, and a group at its maxSize has no node to spare).
SIDE_STEP_RESOURCES = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}


def side_step_selector(target: NodeTarget) -> dict[str, str]:
    """The system nodes of the job's image's architecture."""
    return {**SYSTEM_LABEL, ARCHITECTURE_LABEL: target.node_selector()[ARCHITECTURE_LABEL]}


def _trainer_pod(job: TrainingJob, target: NodeTarget, command: list[str]) -> dict[str, Any]:
    volumes, mounts = _shared_volume(job)
    spec: dict[str, Any] = {
        "containers": [
            security.restricted(
                {
                    "name": "trainer",
                    "image": job.image,
                    "command": command,
                    "volumeMounts": mounts,
                    "resources": SIDE_STEP_RESOURCES,
                }
            )
        ],
        "volumes": volumes,
        "initContainers": [volume_permissions(job, run_id(job, target))],
        "nodeSelector": side_step_selector(target),
    }
    if job.service_account:
        spec["serviceAccountName"] = job.service_account
    return security.restricted_pod(spec)


def render_data_preparation(job: TrainingJob, target: NodeTarget) -> dict[str, Any]:
    """The workshop's data download step, onto the shared claim (idempotent: verified files stay)."""
    return _trainer_job(
        f"{job.name}-data",
        job.namespace,
        _trainer_pod(job, target, prepare_data_command(job)),
        {"eks-ddp/job": job.name, STEP_LABEL: "data"},
    )


EVALUATION_DEADLINE_SECONDS = 2 * 24 * 3600


def render_evaluation(job: TrainingJob, target: NodeTarget) -> dict[str, Any]:
    """The workshop's test step: per-class accuracy of the trained model.

    Created with the PyTorchJob, it waits in an init container until training has
    written summary.json (the trainer's last, atomic write), for up to two days, in the
    run's own directory: a previous run's summary (another run id) cannot satisfy it. Without
    shared storage it fetches the test set into its scratch space and waits for the run's model
    in S3 instead (`evaluate --model-uri --wait-minutes`), and uploads its report next to it.
    """
    pod = _trainer_pod(job, target, evaluation_command(job, target))
    _, mounts = _shared_volume(job)
    if job.claim_name:
        summary = f"{job.paths(run_id(job, target))['output']}/summary.json"
        waiting = ["sh", "-c", f'until [ -f "{summary}" ]; do echo "waiting for {summary}"; sleep 30; done']
        resources = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}
        step = {"name": "wait-for-training", "command": waiting, "resources": resources}
    elif job.dataset in DOWNLOADABLE_DATASETS:  # scratch space: the test set is fetched into it first
        step = {"name": "prepare-data", "command": prepare_data_command(job), "resources": SIDE_STEP_RESOURCES}
    else:
        step = None
    if step:
        pod["initContainers"].append(security.restricted({**step, "image": job.image, "volumeMounts": mounts}))
    labels = {"eks-ddp/job": job.name, STEP_LABEL: "evaluate"}
    manifest = _trainer_job(f"{job.name}-evaluate", job.namespace, pod, labels)
    manifest["spec"]["activeDeadlineSeconds"] = EVALUATION_DEADLINE_SECONDS
    return manifest


FABRIC_SCRIPT = """set -u
fi_info -p efa -t FI_EP_RDM || { echo "EFA CHECK FAILED: no efa provider on $(hostname)"; exit 1; }
if [ "$JOB_COMPLETION_INDEX" = "0" ]; then
  timeout "$PEER_WINDOW" fi_pingpong -p efa -P {port} && echo "EFA CHECK PASSED (server)" \\
    || { echo "EFA CHECK FAILED (server: no pingpong from a client within $PEER_WINDOW s)"; exit 1; }
else
  until timeout 60 fi_pingpong -p efa -P {port} "$PEER"; do
    [ "$SECONDS" -lt "$PEER_WINDOW" ] \\
      || { echo "EFA CHECK FAILED (client: no pingpong with $PEER in $PEER_WINDOW s)"; exit 1; }
    sleep 5
  done
  echo "EFA CHECK PASSED (client)"
fi
"""


def render_fabric_check(
    name: str, namespace: str, target: NodeTarget, image: str, on_failure: OnFailure = OnFailure.GATE
) -> list[dict[str, Any]]:
    """Two pods on two EFA nodes: `fi_info -p efa` on each, then `fi_pingpong` between them.

    An indexed Job with a headless Service gives pod 0 a stable name for pod 1 to reach;
    anti-affinity puts them on different nodes. Logs end in EFA CHECK PASSED or FAILED.
    """
    labels = {FABRIC_CHECK_LABEL: name}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "clusterIP": "None",
            "selector": labels,
            "ports": [{"name": "pingpong", "port": FABRIC_PORT, "protocol": "TCP"}],
        },
    }
    amounts = {"vpc.amazonaws.com/efa": str(max(1, target.efa_interfaces)), "cpu": "1", "memory": "2Gi"}
    check = {
        "name": "fabric-check",
        "image": image,
        "command": ["bash", "-c", verdict(FABRIC_SCRIPT.replace("{port}", str(FABRIC_PORT)), on_failure, "EFA")],
        "env": [
            {"name": "PEER", "value": f"{name}-0.{name}"},
            {"name": "PEER_WINDOW", "value": str(PEER_WINDOW_SECONDS)},
        ],
        "resources": {"requests": amounts, "limits": amounts},
        "terminationMessagePolicy": VERDICT_IN_STATUS,
    }
    # Restricted like the training pods: libfabric's EFA provider needs no capability as a non-root user, only the
    # device the EFA plugin hands over and the locked-memory limit containerd gives every container (unlimited on
    # the EKS AMIs); fi_info and fi_pingpong write no file.
    pod_spec = {
        "subdomain": name,
        "containers": [security.restricted(check)],
        "nodeSelector": target.node_selector(),
        "tolerations": target.tolerations(),
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"},
                ]
            }
        },
    }
    # A verdict is final: the first failed pod fails the Job (backoffLimit 0), so `pulumi up` stops at once with it;
    # a retried pod would only say it again, minutes later.
    pod = security.restricted_pod(pod_spec, uid=security.CHECK_UID)
    job = _job(name, namespace, pod, labels, completions=2, backoff_limit=0)
    job["metadata"]["annotations"] = gate_annotations() | security.unpinned_image_skips(image, FABRIC_IMAGE_KEY)
    job["spec"]["completionMode"] = "Indexed"
    job["spec"]["activeDeadlineSeconds"] = GATE_SECONDS
    return [service, job]
