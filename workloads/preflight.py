"""A GPU pod's pre-flight: DCGM's level-1 diagnostic and the EFA devices it was given, before torchrun starts.

A bad GPU or a missing EFA device otherwise shows up as a hang at the first collective, up to the collective
timeout later. The init container requests the pod's GPUs and EFA devices (Kubernetes hands an init
container's devices on to the containers after it), runs `dcgmi diag -r 1` against a host engine it starts, and
counts the uverbs devices the EFA device plugin mounted.

A failure is not retried in place (with `restartPolicy: OnFailure` that would burn the job's restart budget on one
bad node): the check writes its verdict to a shared scratch volume and exits 0, and the next init container, in the
job's own image, taints the node so the pod is evicted and goes elsewhere (infra.addons.node_quarantine,
workloads/scripts/quarantine_node.py).

Image: NVIDIA/dcgm-exporter's ubuntu22.04 variant of the release the DCGM exporter chart runs (4.5.3-4.8.2;
docker/Dockerfile installs datacenter-gpu-manager-4-core and -proprietary with --no-install-recommends; the Makefile
tags it DCGM_VERSION-VERSION-ubuntu22.04). Not pulled here, and no GPU ran it.

Whether the diagnostic can run in that image, from NVIDIA's own sources (NVIDIA/DCGM v4.5.3): the -core package
carries `dcgmi`, `nv-hostengine`, `nvvs` and only the CUDA-less plugin library
(scripts/verify_package_contents/datacenter-gpu-manager-core_amd64.deb.txt); the GPU plugins are in
datacenter-gpu-manager-4-cuda12/-cuda13 (plugins/cuda13/libDiagnostic.so, ...), which NVIDIA's own DCGM image
installs (docker/Dockerfile.ubuntu22.04) and the exporter's does not; nvvs picks plugins/cuda<driver's major>/ and
stops with "Cannot load plugins. Unable to change to the plugin dir" when it is missing
(nvvs/src/TestFramework.cpp loadPlugins). So on a real node `dcgmi diag -r 1` most likely cannot run here.

Hence the rule: only a diagnostic that ran and reported a failure quarantines the node. dcgmi's exit status is its
dcgmReturn_t modulo 256 (dcgmi/main_dcgmi.cpp; dcgmlib/dcgm_structs.h): DCGM_ST_NVVS_ERROR (-30, 226: "successfully
executed, but reported an error") and DCGM_ST_NVVS_ISOLATE_ERROR (-51, 205) are failures the tests found
(dcgmi/Diag.cpp GetFailureResult), but -30 is also returned when nvvs could not start its tests (a "system error",
RunDiagOnce), so a failure counts only if dcgmi also printed its results table, which it does only after a run
("Successfully ran diagnostic for group.", Diag.cpp HelperDisplayAsCli). Anything else (no `dcgmi`, no host engine,
no plugins, no results) is "could not run": a warning in the pod's log, the EFA count still decides.
"""

from pathlib import Path
from typing import Any

from eks_ddp.infra.addons.node_quarantine import TAINT_KEY
from eks_ddp.workloads import security
from eks_ddp.workloads.target import NodeTarget

CONTAINER = "gpu-preflight"
QUARANTINE = "quarantine-bad-node"
IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-ubuntu22.04"
EFA_DEVICES_DIR = "/dev/infiniband"
VERDICT_VOLUME, VERDICT_DIR = "preflight", "/preflight"
TOKEN_VOLUME, TOKEN_DIR = "quarantine-token", "/var/run/secrets/eks-ddp/quarantine"
QUARANTINE_SCRIPT = (Path(__file__).parent / "scripts" / "quarantine_node.py").read_text()

SCRIPT = """set -u
verdict="$VERDICT_DIR/failed"
rm -f "$verdict"
fail() { echo "GPU PREFLIGHT FAILED on node $NODE_NAME: $1" >&2; echo "$1" >"$verdict"; exit 0; }
nv-hostengine >/dev/null 2>&1 || true
report=$(mktemp)  # its own file: two checks on one machine (or one test host) never read each other's report
dcgmi diag -r 1 >"$report" 2>&1
status=$?
diag="DCGM diagnostic level 1"
if [ "$status" -ne 0 ]; then
  cat "$report" >&2
  ran=$(grep -c '^Successfully ran diagnostic for group' "$report")
  case "$status:$ran" in  # DCGM_ST_NVVS_ERROR or DCGM_ST_NVVS_ISOLATE_ERROR, after a run that printed its results
    226:[1-9]*|205:[1-9]*) fail "DCGM diagnostic level 1 failed (above)" ;;
  esac
  echo "GPU PREFLIGHT WARNING on node $NODE_NAME: the DCGM diagnostic could not run (exit $status, output above):" \\
    "the GPUs were not checked" >&2
  diag="no DCGM diagnostic (it could not run)"
fi
found=$(ls "${EFA_DEVICES_DIR:-/dev/infiniband}" 2>/dev/null | grep -c '^uverbs')
if [ "$found" -lt "$EFA_EXPECTED" ]; then
  fail "$found EFA devices, the pod was given $EFA_EXPECTED"
fi
echo "GPU PREFLIGHT PASSED on node $NODE_NAME: $diag, $found EFA devices"
"""


NODE_NAME_ENV = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def volumes() -> list[dict[str, Any]]:
    """The verdict's scratch space, and an API token for the quarantine container alone (a projected service
    account token, bound to the pod and so naming its node; the trainer never sees it)."""
    token = {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}
    ca = {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    return [
        {"name": VERDICT_VOLUME, "emptyDir": {"sizeLimit": "1Mi"}},
        {"name": TOKEN_VOLUME, "projected": {"sources": [token, ca]}},
    ]


def init_containers(target: NodeTarget, image: object) -> list[dict[str, Any]]:
    """The check, then the quarantine in the job's `image` (none on CPU nodes)."""
    if not target.instance.gpus:
        return []
    devices = {"nvidia.com/gpu": str(target.instance.gpus)}
    if target.efa_interfaces:
        devices["vpc.amazonaws.com/efa"] = str(target.efa_interfaces)
    verdict = {"name": VERDICT_VOLUME, "mountPath": VERDICT_DIR}
    check = {
        "name": CONTAINER,
        "image": IMAGE,
        "command": ["bash", "-c", SCRIPT],
        "env": [
            NODE_NAME_ENV,
            {"name": "EFA_EXPECTED", "value": str(target.efa_interfaces)},
            {"name": "VERDICT_DIR", "value": VERDICT_DIR},
        ],
        "volumeMounts": [verdict],
        "securityContext": {"runAsUser": 0, "runAsNonRoot": False},  # DCGM's host engine runs as root
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi", **devices},
            "limits": {"cpu": "1", "memory": "1Gi", **devices},
        },
    }
    quarantine = security.restricted({
        "name": QUARANTINE,
        "image": image,
        "command": ["python", "-c", QUARANTINE_SCRIPT],
        "env": [
            NODE_NAME_ENV,
            {"name": "TAINT_KEY", "value": TAINT_KEY},
            {"name": "PREFLIGHT_VERDICT", "value": f"{VERDICT_DIR}/failed"},
            {"name": "QUARANTINE_ACCOUNT", "value": TOKEN_DIR},
        ],
        "volumeMounts": [
            {**verdict, "readOnly": True},
            {"name": TOKEN_VOLUME, "mountPath": TOKEN_DIR, "readOnly": True},
        ],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "100m", "memory": "128Mi"}},
    })
    return [check, quarantine]
