"""A GPU pod's pre-flight: DCGM's level-1 diagnostic and the EFA devices it was given, before torchrun starts.

A bad GPU or a missing EFA device otherwise shows up as a hang at the first collective, up to the collective
timeout later. The init container requests the pod's GPUs and EFA devices (Kubernetes hands an init
container's devices on to the containers after it), runs `dcgmi diag -r 1` against a host engine it starts, and
counts the uverbs devices the EFA device plugin mounted; it fails the pod with one line naming the node.

Image: NVIDIA/dcgm-exporter's ubuntu22.04 variant of the release the DCGM exporter chart runs (4.5.3-4.8.2;
docker/Dockerfile installs datacenter-gpu-manager-4-core, which carries `dcgmi` and `nv-hostengine`; the Makefile
tags it DCGM_VERSION-VERSION-ubuntu22.04). Not pulled here.
"""

from typing import Any

from workloads.target import NodeTarget

CONTAINER = "gpu-preflight"
IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-ubuntu22.04"
EFA_DEVICES_DIR = "/dev/infiniband"

SCRIPT = """set -u
nv-hostengine >/dev/null 2>&1 || true
if ! dcgmi diag -r 1 >/tmp/dcgm-diag.txt 2>&1; then
  cat /tmp/dcgm-diag.txt >&2
  echo "GPU PREFLIGHT FAILED on node $NODE_NAME: DCGM diagnostic level 1 failed (above);" \
    "cordon it: kubectl cordon $NODE_NAME" >&2
  exit 1
fi
found=$(ls "${EFA_DEVICES_DIR:-/dev/infiniband}" 2>/dev/null | grep -c '^uverbs')
if [ "$found" -lt "$EFA_EXPECTED" ]; then
  echo "GPU PREFLIGHT FAILED on node $NODE_NAME: $found EFA devices, the pod was given $EFA_EXPECTED" >&2
  exit 1
fi
echo "GPU PREFLIGHT PASSED on node $NODE_NAME: DCGM diagnostic level 1, $found EFA devices"
"""


def gpu_preflight(target: NodeTarget) -> dict[str, Any] | None:
    """The init container for a GPU pod (None on CPU nodes)."""
    if not target.instance.gpus:
        return None
    devices = {"nvidia.com/gpu": str(target.instance.gpus)}
    if target.efa_interfaces:
        devices["vpc.amazonaws.com/efa"] = str(target.efa_interfaces)
    return {
        "name": CONTAINER,
        "image": IMAGE,
        "command": ["bash", "-c", SCRIPT],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "EFA_EXPECTED", "value": str(target.efa_interfaces)},
        ],
        "securityContext": {"runAsUser": 0, "runAsNonRoot": False},  # DCGM's host engine runs as root
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi", **devices},
            "limits": {"cpu": "1", "memory": "1Gi", **devices},
        },
    }
