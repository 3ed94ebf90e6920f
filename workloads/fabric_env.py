"""The environment a training pod's collectives need: gloo on CPUs, NCCL over EFA on GPUs, Neuron's over EFA.

Sources: AWS "Get started with EFA and NCCL" (EC2 user guide) and aws-ofi-nccl's README: with the
plugin installed NCCL uses libfabric; `FI_PROVIDER=efa` makes a missing EFA device an error instead
of a silent fall-back to TCP sockets; `FI_EFA_USE_DEVICE_RDMA=1` turns on GPUDirect RDMA on the types
whose EFA supports RDMA read (p4d, p4de and the p5 and p6 families; not p3dn, g5 or g6). PyTorch's
flight recorder (torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp, TORCH_FR_*) keeps the last
collectives of each rank and writes them out when the watchdog times out: what explains a hang.
"""

from typing import Any

from eks_ddp.workloads.target import NodeTarget

RDMA_READ_FAMILIES = ("p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300", "p6e-gb200")
FLIGHT_RECORDER_ENTRIES = 20000


def _env(**values: str) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in values.items()]


def rdma_read(instance_type: str) -> bool:
    return instance_type.split(".")[0] in RDMA_READ_FAMILIES


def neuron_env(target: NodeTarget) -> list[dict[str, str]]:
    """What AWS documents for multi-node Neuron training over EFA (aws-neuron-sdk v2.32.0 frameworks/torch/
    torch-neuronx/setup-trn1-multi-node-execution.rst; aws-neuron-eks-samples dp_bert_hf_pretrain trn1_dist_ddp.py):
    libfabric's EFA provider with device RDMA, Neuron's collectives bootstrapped over eth0, and cores reset at start
    (a pod restarted on the same node finds them as its predecessor left them). FI_EFA_FORK_SAFE is for AL2's older
    kernels only; the AL2023 Neuron AMI's are newer."""
    env = _env(CCOM_SOCKET_IFNAME="eth0", NEURON_RT_RESET_CORES="1")
    if target.efa_interfaces:
        env += _env(FI_PROVIDER="efa", FI_EFA_USE_DEVICE_RDMA="1")
    return env


def collective_env(target: NodeTarget, trace_prefix: str) -> list[dict[str, Any]]:
    """Variables for the training container; `trace_prefix` is where each rank's flight record goes."""
    env = _env(GLOO_SOCKET_IFNAME="eth0", NCCL_SOCKET_IFNAME="eth0", NCCL_DEBUG="WARN")
    if target.instance.neuron_devices:
        return [*env, *neuron_env(target)]
    if not target.instance.gpus:
        # One process per pod uses every CPU of the pod as intra-op threads (never the host's count).
        return [*env, *_env(OMP_NUM_THREADS=str(target.pod_room()[0]))]
    env += _env(
        TORCH_FR_BUFFER_SIZE=str(FLIGHT_RECORDER_ENTRIES),
        TORCH_NCCL_DUMP_ON_TIMEOUT="1",
        TORCH_FR_DUMP_TEMP_FILE=trace_prefix,
    )
    if target.efa_interfaces:
        env += _env(FI_PROVIDER="efa")
        if rdma_read(target.instance.name):
            env += _env(FI_EFA_USE_DEVICE_RDMA="1")
    return env
