"""The NCCL check: an MPIJob the MPI operator's schema accepts, and a verdict script that really decides.

The script runs here with a stand-in `mpirun` that prints nccl-tests' own output format (no GPU here):
what is checked is the parsing of the bus bandwidth at the largest message and the verdict.
"""

import os
import subprocess
from pathlib import Path
from typing import Any

from eks_ddp.infra.facts.catalogue import INSTANCE_TYPES
from eks_ddp.workloads import nccl_check
from eks_ddp.workloads.batch_jobs import OnFailure
from eks_ddp.workloads.target import NodeTarget
from tests.upstream import validate_against_crd
from tests.workloads.schemas import validate_core

P5 = NodeTarget(
    INSTANCE_TYPES["p5.48xlarge"],
    32,
    {"nvidia.com/gpu.present": "true"},
    [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
)
P4DE = NodeTarget(INSTANCE_TYPES["p4de.24xlarge"], 4, {"nvidia.com/gpu.present": "true"})
P5EN = NodeTarget(INSTANCE_TYPES["p5en.48xlarge"], 16, {"nvidia.com/gpu.present": "true"})
HEADER = """# nThread 1 nGpus 1 minBytes 8 maxBytes 2147483648 step: 2(factor) warmup iters: 5 iters: 50
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
"""


def _results(busbw_at_2g: float) -> str:
    rows = [(8, 2, 0.0), (1073741824, 268435456, busbw_at_2g * 0.97), (2147483648, 536870912, busbw_at_2g)]
    lines = [
        f"{size:>12} {count:>12}     float     sum      -1   5000.0   {bw / 1.875:6.2f}  {bw:6.2f}      0"
        f"   5000.0   {bw / 1.875:6.2f}  {bw:6.2f}      0"
        for size, count, bw in rows
    ]
    return HEADER + "\n".join(lines) + "\n# Avg bus bandwidth    : 123.4\n"


def _run(
    target: NodeTarget, output: str, tmp_path: Path, status: int = 0, on_failure: OnFailure = OnFailure.GATE
) -> subprocess.CompletedProcess[str]:
    """The launcher's own command, as rendered, with a stand-in mpirun."""
    fake = tmp_path / "mpirun"
    fake.write_text(f"#!/bin/sh\ncat <<'OUT'\n{output}OUT\nexit {status}\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    manifest = nccl_check.render("nccl-check", "training", target, on_failure=on_failure)
    command = manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    return subprocess.run(command, env=env, capture_output=True, text=True, check=False)


def test_the_mpijob_validates_and_takes_every_gpu_and_efa_device_of_two_nodes() -> None:
    manifest = nccl_check.render("nccl-check", "training", P5)
    validate_against_crd(manifest, "kubeflow.org_mpijobs-v2beta1-mpi-operator-v0.8.0.yaml")
    worker = manifest["spec"]["mpiReplicaSpecs"]["Worker"]
    limits = worker["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert worker["replicas"] == 2 and manifest["spec"]["slotsPerWorker"] == 8
    assert limits["nvidia.com/gpu"] == "8" and limits["vpc.amazonaws.com/efa"] == "32"
    assert worker["template"]["spec"]["tolerations"][0]["key"] == "nvidia.com/gpu"
    # It gates training: pulumi up waits until it succeeded or failed, longer than its pods' own deadlines.
    notes = manifest["metadata"]["annotations"]
    assert (notes["pulumi.com/skipAwait"], notes["pulumi.com/waitFor"]) == ("false", nccl_check.ENDED)
    wait = int(notes["pulumi.com/timeoutSeconds"])
    assert wait > manifest["spec"]["runPolicy"]["activeDeadlineSeconds"]
    assert wait > worker["template"]["spec"]["activeDeadlineSeconds"]  # mpi-operator bounds only the launcher


def test_p5_passes_at_the_published_bandwidth_and_fails_on_tcp_speeds(tmp_path: Path) -> None:
    passed = _run(P5, _results(441.2), tmp_path)
    assert passed.returncode == 0 and passed.stdout.rstrip().endswith("NCCL CHECK PASSED"), passed.stdout
    assert "bus bandwidth at 2G: 441.20 GB/s (floor 352 GB/s" in passed.stdout
    slow = _run(P5, _results(11.9), tmp_path)  # what NCCL over TCP sockets gives
    assert slow.returncode == 1 and "NCCL CHECK FAILED: 11.90 GB/s is below 352.0 GB/s" in slow.stdout


def test_a_failed_mpirun_fails_the_check_and_a_type_without_a_figure_reports_it(tmp_path: Path) -> None:
    crashed = _run(P5, _results(441.2), tmp_path, status=1)
    assert crashed.returncode == 1 and "NCCL CHECK FAILED" in crashed.stdout
    unknown = _run(P5EN, _results(300.0), tmp_path)
    assert unknown.returncode == 0 and "no published figure for p5en.48xlarge" in unknown.stdout
    assert "-x FI_EFA_USE_DEVICE_RDMA=1" in nccl_check.check_script(P4DE)


def test_a_check_that_only_reports_logs_its_failure_and_lets_training_start(tmp_path: Path) -> None:
    """`fabricCheck: report`: the verdict stays in the log, the launcher ends well, so `pulumi up` goes on."""
    slow = _run(P5, _results(11.9), tmp_path, on_failure=OnFailure.REPORT)
    assert slow.returncode == 0 and "NCCL CHECK FAILED: 11.90 GB/s is below 352.0 GB/s" in slow.stdout
    assert slow.stdout.rstrip().endswith(
        "NCCL CHECK FAILED, reported only (eks-ddp:fabricCheck: report): training starts anyway"
    )
    crashed = _run(P5, _results(441.2), tmp_path, status=1, on_failure=OnFailure.REPORT)
    assert crashed.returncode == 0 and "reported only" in crashed.stdout
    passed = _run(P5, _results(441.2), tmp_path, on_failure=OnFailure.REPORT)
    assert passed.returncode == 0 and passed.stdout.rstrip().endswith("NCCL CHECK PASSED")


def test_p4de_has_a_floor_from_its_published_bandwidth(tmp_path: Path) -> None:
    passed = _run(P4DE, _results(77.6), tmp_path)
    assert passed.returncode == 0 and "floor 62.4 GB/s: 2 x p4de.24xlarge: about 78 GB/s" in passed.stdout
    assert _run(P4DE, _results(11.9), tmp_path).returncode == 1


def test_the_launcher_waits_for_ready_workers_and_calls_the_test_where_awss_image_builds_it() -> None:
    spec = nccl_check.render("nccl-check", "training", P4DE)["spec"]
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"
    # Its one pod fails the MPIJob, at once: the script itself starts mpirun again when the test did not run.
    assert spec["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] == "Never" and spec["runPolicy"]["backoffLimit"] == 0
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert "/opt/nccl-tests/build/all_reduce_perf -b 8 -e 2G" in launcher["command"][-1]
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["containers"][0]["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert worker["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]


def test_workers_ask_for_the_efa_huge_pages_only_where_the_autoscaler_knows_them() -> None:
    """AWS's nccl-tests workers request 5120Mi of 2 MiB pages; a managed group's ASG announces them to the Cluster
    Autoscaler, while Karpenter v1.14.1 cannot launch a node for a pod that asks for them."""
    from dataclasses import replace

    from eks_ddp.infra.facts.allocatable import NodeLauncher

    def limits(launcher: NodeLauncher) -> dict[str, str]:
        manifest = nccl_check.render("nccl-check", "training", replace(P4DE, launcher=launcher))
        return manifest["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]

    assert limits(NodeLauncher.MANAGED_NODE_GROUP)["hugepages-2Mi"] == "5120Mi"
    assert "hugepages-2Mi" not in limits(NodeLauncher.KARPENTER)


def _mpirun_failing_first(tmp_path: Path, first: str, then: str) -> None:
    """A stand-in mpirun that prints `first` and fails, then prints `then`; and a `sleep` that does not."""
    (tmp_path / "sleep").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "sleep").chmod(0o755)
    fake = tmp_path / "mpirun"
    fake.write_text(
        f"#!/bin/sh\nif [ -f {tmp_path}/ran ]; then cat <<'OUT'\n{then}OUT\nexit 0; fi\ntouch {tmp_path}/ran\n"
        f"cat <<'OUT'\n{first}OUT\nexit 255\n"
    )
    fake.chmod(0o755)


def test_mpirun_that_ended_before_the_test_ran_starts_again_and_a_verdict_is_never_retried(tmp_path: Path) -> None:
    """A worker Ready before its sshd listens ends mpirun before the test: the script starts it again (the launcher
    used to restart whole, twice, a verdict included, minutes before `pulumi up` heard of it)."""
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    command = nccl_check.render("nccl-check", "training", P5)["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    command = command["spec"]["containers"][0]["command"]
    _mpirun_failing_first(tmp_path, "ssh: connect to host worker-1 port 22: Connection refused\n", _results(441.2))
    started = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert started.returncode == 0 and started.stdout.rstrip().endswith("NCCL CHECK PASSED"), started.stdout
    assert "mpirun ended before the test ran (attempt 1 of 3): again in 10 s" in started.stdout
    (tmp_path / "ran").unlink()
    _mpirun_failing_first(tmp_path, _results(11.9), _results(441.2))  # the test ran, then mpirun failed
    ran = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert ran.returncode == 1 and "NCCL CHECK FAILED: mpirun or all_reduce_perf exited with an error" in ran.stdout
    assert "again in 10 s" not in ran.stdout


def test_the_failure_pulumi_up_stops_with_names_the_operators_reason_and_the_verdicts_log() -> None:
    failed = {
        "conditions": [
            {"type": "Created", "status": "True"},
            {"type": "Running", "status": "False"},
            {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "Job was active longer"},
        ]
    }
    assert nccl_check.failure("nccl", "training", failed) == (
        "NCCL check training/nccl failed (DeadlineExceeded: Job was active longer); its verdict is the last line of "
        "`kubectl -n training logs job/nccl-launcher`; the next `pulumi up` runs it again"
    )
    succeeded = {"conditions": [{"type": "Succeeded", "status": "True"}, {"type": "Failed", "status": "False"}]}
    assert nccl_check.failure("nccl", "training", succeeded) is None
    assert nccl_check.failure("nccl", "training", None) is None  # a preview or the mocks: no status yet


def test_the_attempt_job_validates_and_never_runs_a_pod_until_a_passed_verdict_scales_it() -> None:
    check = nccl_check.render("nccl-check", "training", P4DE)
    attempt = nccl_check.render_attempt("nccl-check", "training", P4DE, check)
    validate_core(attempt)
    spec = attempt["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 1, 0)
    assert attempt["metadata"]["annotations"]["pulumi.com/replaceUnready"] == "true"
    assert spec["template"]["spec"]["nodeSelector"] == {"eks-ddp/node-group": "system", "kubernetes.io/arch": "amd64"}
    validate_core({**attempt, "spec": {**spec, **nccl_check.PASSED}})  # still a Job once the passed patch scaled it


def test_a_check_replaced_for_a_change_of_its_own_gets_a_new_attempt() -> None:
    """A passed attempt stays complete: were the MPIJob alone replaced (a new image, `report` instead of `gate`), a
    failure of the new run would leave nothing for the next `pulumi up` to replace. The attempt's pod template
    changes with the check's spec, and pulumi-kubernetes replaces a Job whose template changed."""

    def template(check: dict[str, Any]) -> dict[str, Any]:
        return nccl_check.render_attempt("nccl-check", "training", P4DE, check)["spec"]["template"]

    gate = nccl_check.render("nccl-check", "training", P4DE)
    assert template(gate) == template(nccl_check.render("nccl-check", "training", P4DE))
    assert template(gate) != template(nccl_check.render("nccl-check", "training", P4DE, on_failure=OnFailure.REPORT))
    assert template(gate) != template(nccl_check.render("nccl-check", "training", P4DE, image="nccl-tests:2"))
