"""The NCCL fabric check for GPU groups: nccl-tests' all_reduce_perf across two nodes, as an MPIJob.

`fi_pingpong` (the EFA check) proves the fabric for libfabric; what a GPU user needs before a long
run is NCCL's bus bandwidth across nodes, with the EFA plugin in the path. The launcher runs
`mpirun` over every GPU of two nodes (OpenMPI, the MPI operator's SSH bootstrap) and the log ends
in NCCL CHECK PASSED or FAILED against the floor for the instance type.
"""

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from eks_ddp.infra.facts.allocatable import NodeLauncher, efa_hugepages_mib
from eks_ddp.workloads import security
from eks_ddp.workloads.batch_jobs import (
    FABRIC_CHECK_LABEL,
    GATE_SECONDS,
    REPLACE_UNREADY,
    VERDICT_IN_STATUS,
    OnFailure,
    gate_annotations,
    side_step_selector,
    verdict,
)
from eks_ddp.workloads.fabric_env import rdma_read
from eks_ddp.workloads.target import NodeTarget, resources

API_VERSION, KIND = "kubeflow.org/v2beta1", "MPIJob"
NODES = 2
LARGEST_MESSAGE = "2G"


@dataclass(frozen=True)
class Floor:
    gb_per_second: float
    source: str


# Bus bandwidth at the largest message below which the check fails: 80 % of what was published for two
# nodes with EFA (busbw of all_reduce_perf, GB/s), leaving room for a shared or busy fabric.
FLOORS = {
    # awsome-distributed-training micro-benchmarks/nccl-tests and aws-do-eks: 2 x p5.48xlarge on EKS,
    # 438-444 GB/s at 2 GiB (the REFERENCE.md figures, 2026-11).
    "p5.48xlarge": Floor(0.8 * 440, "2 x p5.48xlarge on EKS: about 440 GB/s at 2 GiB (awsome-distributed-training)"),
    "p5e.48xlarge": Floor(0.8 * 440, "as p5.48xlarge: same 32 x 100 Gb/s EFA and H100-class NVLink"),
    # awsome-distributed-training micro-benchmarks/nccl-tests README: 2 x p4de.24xlarge, about 78 GB/s at 2 GiB.
    "p4de.24xlarge": Floor(0.8 * 78, "2 x p4de.24xlarge: about 78 GB/s at 2 GiB (awsome-distributed-training)"),
    "p4d.24xlarge": Floor(0.8 * 78, "as p4de.24xlarge: same 4 x 100 Gb/s EFA and A100 NVSwitch"),
}
IMAGE = "public.ecr.aws/hpc-cloud/nccl-tests:latest"
"""AWS's nccl-tests image (CUDA, NCCL, EFA installer, aws-ofi-nccl, OpenMPI, sshd); not pulled here: set
`eks-ddp:ncclCheckImage` to a tag you have tested."""
# Where AWS's image builds the test (its Dockerfile; AWS's nccl-tests manifests call it by this path): not on PATH.
ALL_REDUCE_PERF = "/opt/nccl-tests/build/all_reduce_perf"
MPIRUN_ATTEMPTS = 3
"""mpirun runs again, 10 s later, while it ends before the test printed a result (sshd not yet listening on a worker
that just became Ready): at most this many times in all. A test that ran is its verdict: it is not run again."""

CHECK = """set -o pipefail
for attempt in $(seq {attempts}); do
  mpirun --allow-run-as-root -np {ranks} --map-by ppr:{gpus}:node --bind-to none \\
    -x FI_PROVIDER=efa {rdma}-x NCCL_DEBUG=WARN -x LD_LIBRARY_PATH -x PATH \\
    {all_reduce_perf} -b 8 -e {largest} -f 2 -g 1 -c 1 -n 50 | tee /tmp/nccl.log && break
  awk '$1 ~ /^[0-9]+$/ {{ ran = 1 }} END {{ exit !ran }}' /tmp/nccl.log \\
    && {{ echo "NCCL CHECK FAILED: mpirun or all_reduce_perf exited with an error"; exit 1; }}
  [ "$attempt" -lt {attempts} ] \\
    || {{ echo "NCCL CHECK FAILED: mpirun ended before the test ran, {attempts} times"; exit 1; }}
  echo "mpirun ended before the test ran (attempt $attempt of {attempts}): again in 10 s"
  sleep 10
done
busbw=$(awk '$1 ~ /^[0-9]+$/ {{ last = $8 }} END {{ print last }}' /tmp/nccl.log)
echo "bus bandwidth at {largest}: ${{busbw}} GB/s ({floor_text})"
awk -v got="$busbw" -v floor={floor} 'BEGIN {{ exit !(got + 0 >= floor) }}' \\
  && echo "NCCL CHECK PASSED" || {{ echo "NCCL CHECK FAILED: ${{busbw}} GB/s is below {floor} GB/s"; exit 1; }}
"""


def check_script(target: NodeTarget) -> str:
    floor = FLOORS.get(target.instance.name)
    gpus = target.instance.gpus
    return CHECK.format(
        attempts=MPIRUN_ATTEMPTS,
        ranks=NODES * gpus,
        all_reduce_perf=ALL_REDUCE_PERF,
        gpus=gpus,
        largest=LARGEST_MESSAGE,
        rdma="-x FI_EFA_USE_DEVICE_RDMA=1 " if rdma_read(target.instance.name) else "",
        floor=floor.gb_per_second if floor else 0,
        floor_text=f"floor {floor.gb_per_second:g} GB/s: {floor.source}"
        if floor
        else f"no published figure for {target.instance.name}: any bandwidth passes, compare it yourself",
    )


# AWS's nccl-tests manifest (aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/kubernetes/
# nccl-tests.yaml) requests 5120Mi of the 2 MiB pages the EFA software pre-allocates, for libfabric's buffers. Only
# where the Cluster Autoscaler launches the nodes (the group's ASG announces them: EfaNodeGroup's node template):
# Karpenter v1.14.1 does not know a node's huge pages before it launches it (pkg/providers/instancetype/types.go
# computeCapacity), so a pod asking for them would never get a node; libfabric then uses regular pages. A node that
# holds fewer (p5.4xlarge's 16 vCPUs: 3,522 MiB, infra.facts.allocatable.efa_hugepages_mib) is asked for all it has.
HUGEPAGES_MIB = 5120
_SMALL = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "10m", "memory": "16Mi"}}


def _worker_resources(target: NodeTarget) -> dict[str, dict[str, str]]:
    amounts = resources(target)
    if target.launcher == NodeLauncher.MANAGED_NODE_GROUP:
        for kind in ("requests", "limits"):
            amounts[kind]["hugepages-2Mi"] = f"{min(HUGEPAGES_MIB, efa_hugepages_mib(target.instance))}Mi"
    return amounts


# What `pulumi up` waits for: pulumi-kubernetes' `pulumi.com/waitFor` awaits a condition or JSONPath value and fails
# only when `pulumi.com/timeoutSeconds` runs out (v4.32.0 provider/pkg/await/internal/awaiter.go), so
# `condition=Succeeded` left a failed check to the timeout. This JSONPath (RFC 9535, the theory/jsonpath v0.9.0 the
# provider parses it with) is met as soon as the MPIJob ended either way; the program then reads its status
# (`failure`) and stops `pulumi up` with its verdict.
ENDED = "jsonpath={.status.conditions[?@.status=='True' && (@.type=='Succeeded' || @.type=='Failed')].type}"
ATTEMPT_ANNOTATION = "eks-ddp/attempt"
"""On the MPIJob and on the patch that completes the attempt Job: that Job's uid (see `render_attempt`)."""
VERDICT_ANNOTATION = "eks-ddp/verdict"
ATTEMPT_SKIPS = {
    f"checkov.io/skip{number}": f"{check}=the attempt Job never runs a pod (no parallelism, then no completions): "
    "its image is never pulled"
    for number, check in enumerate(("CKV_K8S_14", "CKV_K8S_15", "CKV_K8S_43"), start=1)
}
"""checkov's image checks (a tag other than latest, Always pulled, a digest) on the attempt Job, with the reason."""
PASSED = {"completions": 0, "parallelism": 0}
"""The attempt Job's spec once the check passed: an Indexed Job scaled to no completions completes at once, without a
pod (kubernetes v1.35 pkg/controller/job/job_controller.go: complete when succeeded >= completions and nothing is
active; pkg/apis/batch/validation/validation.go validateCompletions: an Indexed Job's completions change with its
parallelism)."""


def render(
    name: str, namespace: str, target: NodeTarget, image: str = IMAGE, on_failure: OnFailure = OnFailure.GATE
) -> dict[str, Any]:
    """A launcher (on the system nodes' spare CPU), created once the workers are ready (mpi-operator v0.8.0
    pkg/apis/kubeflow/v2beta1/types.go launcherCreationPolicy: "so that the Launcher does not fail trying to connect
    to worker"), and one worker per GPU node with every GPU and EFA device and NCCL's shared memory.

    Bounded, workers included: v0.8.0 puts `runPolicy.activeDeadlineSeconds` and `backoffLimit` on the launcher Job
    only (mpi_job_controller.go newLauncherJob), which exists only once every worker is Ready, so each worker pod has
    its own deadline; the launcher's one failed pod fails the MPIJob (backoffLimit 0: its script starts mpirun again
    itself, `MPIRUN_ATTEMPTS`)."""
    worker = {
        "containers": [
            {
                "name": "worker",
                "image": image,
                "command": ["/usr/sbin/sshd", "-De"],
                "resources": _worker_resources(target),
                "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
            }
        ],
        "nodeSelector": target.node_selector(),
        "tolerations": target.tolerations(),
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        "activeDeadlineSeconds": GATE_SECONDS,
    }
    small = {"cpu": "1", "memory": "1Gi"}
    launcher = {
        "containers": [
            {
                "name": "launcher",
                "image": image,
                "command": ["bash", "-c", verdict(check_script(target), on_failure, "NCCL")],
                "resources": {"requests": small, "limits": small},
                "terminationMessagePolicy": VERDICT_IN_STATUS,
            }
        ],
        "nodeSelector": side_step_selector(target),
    }
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {FABRIC_CHECK_LABEL: name},
            "annotations": gate_annotations(ENDED),
        },
        "spec": {
            "slotsPerWorker": target.instance.gpus,
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0, "activeDeadlineSeconds": GATE_SECONDS},
            "launcherCreationPolicy": "WaitForWorkersReady",
            "mpiImplementation": "OpenMPI",
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": {"spec": launcher}},
                "Worker": {"replicas": NODES, "restartPolicy": "Never", "template": {"spec": worker}},
            },
        },
    }


def render_attempt(name: str, namespace: str, target: NodeTarget, check: dict[str, Any]) -> dict[str, Any]:
    """A Job that stands for one run of the check, and completes only once that run passed.

    The next `pulumi up` must run a failed check again, but pulumi-kubernetes replaces an object that did not become
    ready only for a batch/v1 Job (v4.32.0 provider/pkg/provider/provider.go Diff: `pulumi.com/replaceUnready`,
    "not supported" for other kinds), and the engine replaces one only when its await failed (pulumi/pulumi
    pkg/resource/deploy/step_generator.go applyReplaceOnChanges), which the MPIJob's does not: it ends on a failure.
    So this Job, created first with one completion and no parallelism (no pod, not complete), is
    `replaceUnready`; the MPIJob carries its uid (ATTEMPT_ANNOTATION, replaced when it changes); a patch scales it
    to `PASSED` once the program has read a passed verdict. A failed or unfinished run leaves it incomplete: the next
    `pulumi up` replaces it, and the MPIJob with it. Its pod template never runs; it names the digest of `check`'s
    spec, so a check replaced for a change of its own gets a new attempt too (pulumi-kubernetes replaces a Job whose
    template changed: updates.JOB_FORCE_NEW)."""
    labels = {"eks-ddp/check-attempt": name}
    digest = hashlib.sha256(json.dumps(check["spec"], sort_keys=True).encode()).hexdigest()[:16]
    image = check["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["image"]
    pod = {
        "containers": [
            security.restricted({"name": "attempt", "image": image, "command": ["true"], "resources": _SMALL})
        ],
        "nodeSelector": side_step_selector(target),
        "restartPolicy": "Never",
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{name}-attempt",
            "namespace": namespace,
            "labels": labels,
            "annotations": {REPLACE_UNREADY: "true", **ATTEMPT_SKIPS},
        },
        "spec": {
            "completionMode": "Indexed",
            "completions": 1,
            "parallelism": 0,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels, "annotations": {"eks-ddp/check-spec": digest}},
                "spec": security.restricted_pod(pod, uid=security.CHECK_UID),
            },
        },
    }


def failure(name: str, namespace: str, status: dict[str, Any] | None) -> str | None:
    """The check's verdict as `pulumi up`'s one-line error, or None when it passed (or, under a preview or the mocks,
    has no status yet: `pulumi up` reads it only once the await above has ended).

    pulumi-kubernetes cannot read the launcher's log, whose last line is the verdict: the line names the command.
    mpi-operator v0.8.0 fails the MPIJob with the launcher Job's reason (DeadlineExceeded, BackoffLimitExceeded),
    or when a worker is evicted (updateMPIJobStatus)."""
    conditions = {c.get("type"): c for c in (status or {}).get("conditions") or [] if c.get("status") == "True"}
    if "Failed" not in conditions:
        return None
    failed = conditions["Failed"]
    return (
        f"NCCL check {namespace}/{name} failed ({failed.get('reason')}: {failed.get('message')}); its verdict is the "
        f"last line of `kubectl -n {namespace} logs job/{name}-launcher`; the next `pulumi up` runs it again"
    )
