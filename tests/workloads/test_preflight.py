"""eks-ddp:nodeHealth: the node monitoring agent, node auto-repair, and a GPU pod's pre-flight, which is run here
under bash with stand-ins for `dcgmi`, `nv-hostengine` and the EFA devices the plugin would mount."""

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from eks_ddp.stack import stack_file
from eks_ddp.stack.config import parse
from eks_ddp.stack.mocked import run_under_mocks
from eks_ddp.stack.mocking import Registration
from eks_ddp.workloads import preflight

BASH = "/bin/bash"


def _registrations(stack: str, **config: Any) -> list[Registration]:
    values, region = stack_file.load(stack)
    return run_under_mocks(parse({**values, **config}, region), stack=stack)


def _training_pod(registrations: list[Registration]) -> dict[str, Any]:
    job = next(r for r in registrations if r.inputs.get("kind") == "PyTorchJob")
    return job.inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]


def test_gpu_pods_check_their_gpus_and_efa_devices_first() -> None:
    pod = _training_pod(_registrations("gpu"))
    check, quarantine = pod["initContainers"][:2]
    assert check["name"] == preflight.CONTAINER and check["image"] == preflight.IMAGE
    trainer = pod["containers"][0]
    requests = trainer["resources"]["requests"]
    for device in ("nvidia.com/gpu", "vpc.amazonaws.com/efa"):
        assert check["resources"]["requests"][device] == check["resources"]["limits"][device] == requests[device]
    env = {e["name"]: e for e in check["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["EFA_EXPECTED"]["value"] == requests["vpc.amazonaws.com/efa"] == "4"  # p4de.24xlarge
    # The quarantine runs in the job's image, and only it sees the API token.
    assert quarantine["name"] == preflight.QUARANTINE and quarantine["image"] == trainer["image"]
    token = next(v for v in pod["volumes"] if v["name"] == preflight.TOKEN_VOLUME)
    assert {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}} in token["projected"]["sources"]
    mounting = [c["name"] for c in [*pod["initContainers"], *pod["containers"]]
                if preflight.TOKEN_VOLUME in {m["name"] for m in c.get("volumeMounts", [])}]
    assert mounting == [preflight.QUARANTINE]
    cpu = _training_pod(_registrations("dev"))
    assert not {preflight.CONTAINER, preflight.QUARANTINE} & {c["name"] for c in cpu["initContainers"]}
    off = _training_pod(_registrations("gpu", nodeHealth=False))
    assert not {preflight.CONTAINER, preflight.QUARANTINE} & {c["name"] for c in off["initContainers"]}


def _run(tmp_path: Path, diag_exit: int, devices: int, expected: int) -> subprocess.CompletedProcess[str]:
    bin_dir, dev, verdict = tmp_path / "bin", tmp_path / "infiniband", tmp_path / "preflight"
    for folder in (bin_dir, dev, verdict):
        folder.mkdir(parents=True)
    (bin_dir / "dcgmi").write_text(f"#!/bin/sh\necho 'Deployment | Pass'\nexit {diag_exit}\n")
    (bin_dir / "nv-hostengine").write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    for index in range(devices):
        (dev / f"uverbs{index}").touch()
    (dev / "rdma_cm").touch()  # not an EFA device
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "NODE_NAME": "ip-10-0-1-23", "EFA_EXPECTED": str(expected),
           "EFA_DEVICES_DIR": str(dev), "VERDICT_DIR": str(verdict)}
    return subprocess.run([BASH, "-c", preflight.SCRIPT], env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.skipif(not Path(BASH).exists(), reason="no bash here to run the pre-flight script")
def test_the_preflight_passes_a_healthy_node_and_leaves_a_verdict_on_a_bad_one(tmp_path: Path) -> None:
    """A bad node is not retried in place: the check exits 0 with its verdict for the quarantine container."""
    healthy = _run(tmp_path / "a", 0, 4, 4)
    assert healthy.returncode == 0, healthy.stderr
    assert healthy.stdout.strip() == "GPU PREFLIGHT PASSED on node ip-10-0-1-23: DCGM diagnostic level 1, 4 EFA devices"
    assert not (tmp_path / "a" / "preflight" / "failed").exists()
    bad_gpu = _run(tmp_path / "b", 1, 4, 4)
    assert bad_gpu.returncode == 0
    assert bad_gpu.stderr.splitlines()[-1] == ("GPU PREFLIGHT FAILED on node ip-10-0-1-23: DCGM diagnostic level 1 "
                                               "failed (above)")
    assert (tmp_path / "b" / "preflight" / "failed").read_text().strip() == "DCGM diagnostic level 1 failed (above)"
    missing = _run(tmp_path / "c", 0, 3, 4)
    assert missing.returncode == 0
    assert missing.stderr.strip() == "GPU PREFLIGHT FAILED on node ip-10-0-1-23: 3 EFA devices, the pod was given 4"
    assert (tmp_path / "c" / "preflight" / "failed").read_text().strip() == "3 EFA devices, the pod was given 4"


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
