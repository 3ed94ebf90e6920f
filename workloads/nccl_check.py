"""The NCCL fabric check for GPU groups: nccl-tests' all_reduce_perf across two nodes, as an MPIJob.

`fi_pingpong` (the EFA check) proves the fabric for libfabric; what a GPU user needs before a long
run is NCCL's bus bandwidth across nodes, with the EFA plugin in the path. The launcher runs
`mpirun` over every GPU of two nodes (OpenMPI, the MPI operator's SSH bootstrap) and the log ends
in NCCL CHECK PASSED or FAILED against the floor for the instance type.
"""

from dataclasses import dataclass
from typing import Any

from eks_ddp.infra.facts.allocatable import NodeLauncher, efa_hugepages_mib
from eks_ddp.workloads.batch_jobs import (
    FABRIC_CHECK_LABEL,
    GATE_SECONDS,
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
# Where AWS's image builds the test (its Dockerfile; AWS's nccl-tests manifests call it by this path): not on PATH.
ALL_REDUCE_PERF = "/opt/nccl-tests/build/all_reduce_perf"
# A transient start (sshd not yet listening) is retried, at most twice; the verdict itself fails the same way again.
LAUNCHER_RETRIES = 2
"""AWS's nccl-tests image (CUDA, NCCL, EFA installer, aws-ofi-nccl, OpenMPI, sshd); not pulled here: set
`eks-ddp:ncclCheckImage` to a tag you have tested."""

CHECK = """set -o pipefail
mpirun --allow-run-as-root -np {ranks} --map-by ppr:{gpus}:node --bind-to none \\
  -x FI_PROVIDER=efa {rdma}-x NCCL_DEBUG=WARN -x LD_LIBRARY_PATH -x PATH \\
  {all_reduce_perf} -b 8 -e {largest} -f 2 -g 1 -c 1 -n 50 | tee /tmp/nccl.log \
  || {{ echo "NCCL CHECK FAILED: mpirun or all_reduce_perf exited with an error"; exit 1; }}
busbw=$(awk '$1 ~ /^[0-9]+$/ {{ last = $8 }} END {{ print last }}' /tmp/nccl.log)
echo "bus bandwidth at {largest}: ${{busbw}} GB/s ({floor_text})"
awk -v got="$busbw" -v floor={floor} 'BEGIN {{ exit !(got + 0 >= floor) }}' \\
  && echo "NCCL CHECK PASSED" || {{ echo "NCCL CHECK FAILED: ${{busbw}} GB/s is below {floor} GB/s"; exit 1; }}
"""


def check_script(target: NodeTarget) -> str:
    floor = FLOORS.get(target.instance.name)
    gpus = target.instance.gpus
    return CHECK.format(
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


def _worker_resources(target: NodeTarget) -> dict[str, dict[str, str]]:
    amounts = resources(target)
    if target.launcher == NodeLauncher.MANAGED_NODE_GROUP:
        for kind in ("requests", "limits"):
            amounts[kind]["hugepages-2Mi"] = f"{min(HUGEPAGES_MIB, efa_hugepages_mib(target.instance))}Mi"
    return amounts


def render(
    name: str, namespace: str, target: NodeTarget, image: str = IMAGE, on_failure: OnFailure = OnFailure.GATE
) -> dict[str, Any]:
    """A launcher (on the system nodes' spare CPU), created once the workers are ready (mpi-operator v0.8.0
    pkg/apis/kubeflow/v2beta1/types.go launcherCreationPolicy: "so that the Launcher does not fail trying to connect
    to worker"), and one worker per GPU node with every GPU and EFA device and NCCL's shared memory."""
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
    }
    small = {"cpu": "1", "memory": "1Gi"}
    launcher = {
        "containers": [
            {
                "name": "launcher",
                "image": image,
                "command": ["bash", "-c", verdict(check_script(target), on_failure, "NCCL")],
                "resources": {"requests": small, "limits": small},
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
            "annotations": gate_annotations("condition=Succeeded"),
        },
        "spec": {
            "slotsPerWorker": target.instance.gpus,
            "runPolicy": {
                "cleanPodPolicy": "Running",
                "backoffLimit": LAUNCHER_RETRIES,
                "activeDeadlineSeconds": GATE_SECONDS,
            },
            "launcherCreationPolicy": "WaitForWorkersReady",
            "mpiImplementation": "OpenMPI",
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": launcher}},
                "Worker": {"replicas": NODES, "restartPolicy": "Never", "template": {"spec": worker}},
            },
        },
    }
