"""eks-ddp:nodeHealth: the node monitoring agent, node auto-repair, and a GPU pod's pre-flight, which is run here
under bash with stand-ins for `dcgmi`, `nv-hostengine` and the EFA devices the plugin would mount."""

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from eks_ddp.tools import stack_file
from eks_ddp.stack.config import parse
from eks_ddp.tools.mocking import run_under_mocks
from eks_ddp.tools.mocking import Registration
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


# What `dcgmi diag -r 1` prints and exits with, in NVIDIA/DCGM v4.5.3 (the DCGM of the pre-flight's image): main()
# returns the dcgmReturn_t (dcgmi/main_dcgmi.cpp), so the shell sees it modulo 256 (dcgmlib/dcgm_structs.h:
# DCGM_ST_NVVS_ERROR -30 is 226, DCGM_ST_NVVS_ISOLATE_ERROR -51 is 205, DCGM_ST_CONNECTION_NOT_VALID -21 is 235,
# DCGM_ST_NO_DATA -14 is 242, DCGM_ST_NVVS_BINARY_NOT_FOUND -52 is 204). Only a run that printed its results
# (dcgmi/Diag.cpp HelperDisplayAsCli: "Successfully ran diagnostic for group.") has examined the GPUs.
RAN = "Successfully ran diagnostic for group.\n| Deployment | Software | {result} |"
PASSED = (RAN.format(result="Pass"), 0)
GPU_FAILED = (RAN.format(result="Fail"), 226)
GPU_ISOLATE = (RAN.format(result="Fail"), 205)
NO_PLUGINS = ("Error: Cannot load plugins. Unable to change to the plugin dir "
              "'/usr/libexec/datacenter-gpu-manager-4/plugins/cuda12/': 'No such file or directory'", 226)
NO_HOST_ENGINE = ("Error: unable to establish a connection to the specified host: localhost\n"
                  "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.", 235)
NO_RESULTS = (RAN.format(result="Skip"), 242)
NO_NVVS = ("Error: Unable to complete diagnostic for group 0. Return: (-52) : The NVVS binary was not found", 204)


def _environment(tmp_path: Path, diag: tuple[str, int] | None, devices: int, expected: int,
                 delay_s: float = 0) -> dict[str, str]:
    """The script's environment; `diag` is what the stand-in `dcgmi` prints and exits with, `delay_s` after printing
    (None: no `dcgmi` at all)."""
    bin_dir, dev, verdict = tmp_path / "bin", tmp_path / "infiniband", tmp_path / "preflight"
    for folder in (bin_dir, dev, verdict):
        folder.mkdir(parents=True)
    if diag is not None:
        output, status = diag
        (tmp_path / "dcgmi.out").write_text(output + "\n")
        (bin_dir / "dcgmi").write_text(f"#!/bin/sh\ncat '{tmp_path / 'dcgmi.out'}'\nsleep {delay_s}\nexit {status}\n")
    (bin_dir / "nv-hostengine").write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    for index in range(devices):
        (dev / f"uverbs{index}").touch()
    (dev / "rdma_cm").touch()  # not an EFA device
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "NODE_NAME": "ip-10-0-1-23", "EFA_EXPECTED": str(expected),
            "EFA_DEVICES_DIR": str(dev), "VERDICT_DIR": str(verdict)}


def _run(tmp_path: Path, diag: tuple[str, int] | None, devices: int, expected: int) -> subprocess.CompletedProcess[str]:
    """The script under bash, to its end."""
    env = _environment(tmp_path, diag, devices, expected)
    return subprocess.run([BASH, "-c", preflight.SCRIPT], env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.skipif(not Path(BASH).exists(), reason="no bash here to run the pre-flight script")
def test_the_preflight_passes_a_healthy_node_and_leaves_a_verdict_on_a_bad_one(tmp_path: Path) -> None:
    """A bad node is not retried in place: the check exits 0 with its verdict for the quarantine container."""
    healthy = _run(tmp_path / "a", PASSED, 4, 4)
    assert healthy.returncode == 0, healthy.stderr
    assert healthy.stdout.strip() == "GPU PREFLIGHT PASSED on node ip-10-0-1-23: DCGM diagnostic level 1, 4 EFA devices"
    assert not (tmp_path / "a" / "preflight" / "failed").exists()
    for name, diag in (("b", GPU_FAILED), ("i", GPU_ISOLATE)):
        bad_gpu = _run(tmp_path / name, diag, 4, 4)
        assert bad_gpu.returncode == 0
        assert "| Deployment | Software | Fail |" in bad_gpu.stderr  # DCGM's own table, for the pod's log
        assert bad_gpu.stderr.splitlines()[-1] == ("GPU PREFLIGHT FAILED on node ip-10-0-1-23: DCGM diagnostic "
                                                   "level 1 failed (above)")
        verdict = (tmp_path / name / "preflight" / "failed").read_text().strip()
        assert verdict == "DCGM diagnostic level 1 failed (above)"
    missing = _run(tmp_path / "c", PASSED, 3, 4)
    assert missing.returncode == 0
    assert missing.stderr.strip() == "GPU PREFLIGHT FAILED on node ip-10-0-1-23: 3 EFA devices, the pod was given 4"
    assert (tmp_path / "c" / "preflight" / "failed").read_text().strip() == "3 EFA devices, the pod was given 4"


@pytest.mark.skipif(not Path(BASH).exists(), reason="no bash here to run the pre-flight script")
def test_two_checks_at_once_read_their_own_reports(tmp_path: Path) -> None:
    """A failed diagnostic still fails while another check's diagnostic, which could not run, writes its report in
    the meantime (two checks on one test host; a shared report file turned the failure into a warning)."""
    slow = _environment(tmp_path / "failing", GPU_FAILED, 4, 4, delay_s=1.5)
    failing = subprocess.Popen([BASH, "-c", preflight.SCRIPT], env=slow, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)  # its dcgmi has printed its report and still runs
    other = _environment(tmp_path / "other", NO_PLUGINS, 4, 4)
    subprocess.run([BASH, "-c", preflight.SCRIPT], env=other, capture_output=True, text=True, timeout=30, check=True)
    _, stderr = failing.communicate(timeout=30)
    failed = "GPU PREFLIGHT FAILED on node ip-10-0-1-23: DCGM diagnostic level 1 failed (above)"
    assert stderr.splitlines()[-1] == failed


@pytest.mark.skipif(not Path(BASH).exists(), reason="no bash here to run the pre-flight script")
@pytest.mark.parametrize(
    ("case", "diag", "status"),
    [
        ("no dcgmi in the image", None, 127),
        ("no CUDA plugins (the dcgm-exporter image)", NO_PLUGINS, 226),
        ("no host engine", NO_HOST_ENGINE, 235),
        ("a run without results", NO_RESULTS, 242),
        ("no nvvs binary", NO_NVVS, 204),
    ],
)
def test_a_diagnostic_that_could_not_run_never_quarantines_the_node(
    tmp_path: Path, case: str, diag: tuple[str, int] | None, status: int
) -> None:
    """The node is not known to be bad: the pod goes on (its EFA devices still counted) and says so in its log."""
    result = _run(tmp_path, diag, 4, 4)
    assert result.returncode == 0, case
    assert not (tmp_path / "preflight" / "failed").exists(), case
    warning = [line for line in result.stderr.splitlines() if line.startswith("GPU PREFLIGHT WARNING")]
    assert warning == [f"GPU PREFLIGHT WARNING on node ip-10-0-1-23: the DCGM diagnostic could not run (exit "
                       f"{status}, output above): the GPUs were not checked"], case
    assert result.stdout.strip() == ("GPU PREFLIGHT PASSED on node ip-10-0-1-23: no DCGM diagnostic (it could not "
                                     "run), 4 EFA devices")
    _run(tmp_path / "efa", diag, 3, 4)  # the EFA count still decides
    assert (tmp_path / "efa" / "preflight" / "failed").read_text().strip() == "3 EFA devices, the pod was given 4"


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
