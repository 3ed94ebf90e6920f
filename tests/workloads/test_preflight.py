"""eks-ddp:nodeHealth: the node monitoring agent, node auto-repair, and a GPU pod's pre-flight, which is run here
under bash with stand-ins for `dcgmi`, `nv-hostengine` and the EFA devices the plugin would mount."""

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from infra.mocking import Registration
from stack import stack_file
from stack.config import parse
from stack.mocked import run_under_mocks
from workloads import preflight

BASH = "/bin/bash"


def _registrations(stack: str, **config: Any) -> list[Registration]:
    values, region = stack_file.load(stack)
    return run_under_mocks(parse({**values, **config}, region), stack=stack)


def _training_pod(registrations: list[Registration]) -> dict[str, Any]:
    job = next(r for r in registrations if r.inputs.get("kind") == "PyTorchJob")
    return job.inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]


def test_gpu_pods_check_their_gpus_and_efa_devices_first() -> None:
    pod = _training_pod(_registrations("gpu"))
    check = pod["initContainers"][0]
    assert check["name"] == preflight.CONTAINER and check["image"] == preflight.IMAGE
    trainer = pod["containers"][0]["resources"]["requests"]
    for device in ("nvidia.com/gpu", "vpc.amazonaws.com/efa"):
        assert check["resources"]["requests"][device] == check["resources"]["limits"][device] == trainer[device]
    env = {e["name"]: e for e in check["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["EFA_EXPECTED"]["value"] == trainer["vpc.amazonaws.com/efa"] == "4"  # p4de.24xlarge
    cpu = _training_pod(_registrations("dev"))
    assert preflight.CONTAINER not in [c["name"] for c in cpu["initContainers"]]
    off = _training_pod(_registrations("gpu", nodeHealth=False))
    assert preflight.CONTAINER not in [c["name"] for c in off["initContainers"]]


def _run(tmp_path: Path, diag_exit: int, devices: int, expected: int) -> subprocess.CompletedProcess[str]:
    bin_dir, dev = tmp_path / "bin", tmp_path / "infiniband"
    bin_dir.mkdir(parents=True)
    dev.mkdir(parents=True)
    (bin_dir / "dcgmi").write_text(f"#!/bin/sh\necho 'Deployment | Pass'\nexit {diag_exit}\n")
    (bin_dir / "nv-hostengine").write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    for index in range(devices):
        (dev / f"uverbs{index}").touch()
    (dev / "rdma_cm").touch()  # not an EFA device
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "NODE_NAME": "ip-10-0-1-23", "EFA_EXPECTED": str(expected),
           "EFA_DEVICES_DIR": str(dev)}
    return subprocess.run([BASH, "-c", preflight.SCRIPT], env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.skipif(not Path(BASH).exists(), reason="no bash here to run the pre-flight script")
def test_the_preflight_passes_a_healthy_node_and_fails_a_bad_one_in_one_line(tmp_path: Path) -> None:
    healthy = _run(tmp_path / "a", 0, 4, 4)
    assert healthy.returncode == 0, healthy.stderr
    assert healthy.stdout.strip() == "GPU PREFLIGHT PASSED on node ip-10-0-1-23: DCGM diagnostic level 1, 4 EFA devices"
    bad_gpu = _run(tmp_path / "b", 1, 4, 4)
    assert bad_gpu.returncode == 1
    assert bad_gpu.stderr.splitlines()[-1] == ("GPU PREFLIGHT FAILED on node ip-10-0-1-23: DCGM diagnostic level 1 "
                                               "failed (above); cordon it: kubectl cordon ip-10-0-1-23")
    missing = _run(tmp_path / "c", 0, 3, 4)
    assert missing.returncode == 1
    assert missing.stderr.strip() == "GPU PREFLIGHT FAILED on node ip-10-0-1-23: 3 EFA devices, the pod was given 4"


def test_node_health_installs_the_agent_and_repairs_training_nodes() -> None:
    registrations = _registrations("gpu")
    addons = {r.inputs["addonName"] for r in registrations if r.type == "aws:eks/addon:Addon"}
    assert "eks-node-monitoring-agent" in addons
    groups = [r for r in registrations if r.type == "aws:eks/nodeGroup:NodeGroup" and r.name.endswith("-nodes")]
    assert groups and all(g.inputs["nodeRepairConfig"] == {"enabled": True} for g in groups)
    karpenter = _registrations("gpu", autoscaler="karpenter")
    chart = next(r for r in karpenter if str(r.inputs.get("chart", "")).endswith("/karpenter"))
    # Karpenter's repair (alpha) terminates a node without a drain: off unless the stack turns it on.
    assert chart.inputs["values"]["settings"]["featureGates"] == {"nodeRepair": False}
    repairing = _registrations("gpu", autoscaler="karpenter", karpenterNodeRepair=True)
    chart = next(r for r in repairing if str(r.inputs.get("chart", "")).endswith("/karpenter"))
    assert chart.inputs["values"]["settings"]["featureGates"] == {"nodeRepair": True}
    off = _registrations("gpu", nodeHealth=False)
    assert "eks-node-monitoring-agent" not in {r.inputs["addonName"] for r in off if r.type == "aws:eks/addon:Addon"}
    groups = [r for r in off if r.type == "aws:eks/nodeGroup:NodeGroup" and r.name.endswith("-nodes")]
    assert all(g.inputs["nodeRepairConfig"] == {"enabled": False} for g in groups)
