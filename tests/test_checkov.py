"""checkov (the scanner a platform team runs) on every shipped stack's rendered Jobs that run the trainer's image.

The checks below are those of the restricted containers (eks_ddp.workloads.security): resources, no privilege
escalation, no NET_RAW or other capability, a read-only root file system, a seccomp profile, a security context on
pod and container. checkov 3.3.30 does not read PyTorchJob, TrainJob or JobSet objects; the training pods inside
them get the same contexts (tests/workloads/test_batch_jobs.py). Not yet checked here (issue 25): image digests and
pull policy (CKV_K8S_43, CKV_K8S_15), the GPU pre-flight and the EFA fabric check's containers. Two checks are
skipped on each Job with their reasons in its annotations: CKV_K8S_25 (the root permissions step's two added
capabilities) and CKV_K8S_40 (uid 1000, below checkov's 10,000).
"""

import json
import subprocess
from pathlib import Path

import pytest

from eks_ddp.stack import preview, stack_file
from tests.conftest import ROOT

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
RESTRICTED_CONTAINER_CHECKS = [
    "CKV_K8S_10", "CKV_K8S_11", "CKV_K8S_12", "CKV_K8S_13",  # CPU and memory requests and limits
    "CKV_K8S_20",  # allowPrivilegeEscalation
    "CKV_K8S_22",  # readOnlyRootFilesystem
    "CKV_K8S_28",  # NET_RAW
    "CKV_K8S_29", "CKV_K8S_30",  # a securityContext on the pod and the container
    "CKV_K8S_31",  # seccomp profile
    "CKV_K8S_37",  # capabilities
    "CKV_K8S_38",  # no service account token where the pod does not call the Kubernetes API
]
SKIPPED_WITH_REASONS = ["CKV_K8S_25", "CKV_K8S_40"]  # annotations on each Job (workloads/security.py CHECKOV_SKIPS)
NETWORK_POLICY_CHECK = "CKV2_K8S_6"  # a NetworkPolicy selects the pod (the namespace's, workloads/network_policy.py)


@pytest.mark.slow
@pytest.mark.skipif(not CHECKOV.exists(), reason="checkov is installed by `make test` (make .venv-checkov/.installed)")
def test_every_stacks_trainer_jobs_pass_the_restricted_container_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files: list[Path] = []
    policies: list[Path] = []  # read with the Jobs: CKV2_K8S_6 looks for a NetworkPolicy that selects each pod
    for stack in sorted(stack_file.stacks()):
        assert preview.main(["--stack", stack, "--manifests", str(tmp_path / stack)]) == 0, stack
        rendered = tmp_path / stack
        files += sorted(rendered.glob("job-*-data.yaml")) + sorted(rendered.glob("job-*-evaluate.yaml"))
        policies += sorted(rendered.glob("networkpolicy-*.yaml"))
    capsys.readouterr()
    assert len(files) >= 8 and len(policies) == 4 * len(stack_file.stacks()), (files, policies)
    command = [str(CHECKOV), "--framework", "kubernetes", "--compact", "-o", "json", "--skip-download"]  # offline
    checks = ",".join([*RESTRICTED_CONTAINER_CHECKS, *SKIPPED_WITH_REASONS, NETWORK_POLICY_CHECK])
    command += ["--check", checks, *(arg for file in [*files, *policies] for arg in ("-f", str(file)))]
    report = json.loads(subprocess.run(command, capture_output=True, text=True, timeout=300, check=False).stdout)
    results = (report[0] if isinstance(report, list) else report)["results"]
    assert [(r["check_id"], r["resource"], r["file_path"]) for r in results["failed_checks"]] == []
    passed = {(r["check_id"], r["resource"], r["file_path"]) for r in results["passed_checks"]}
    jobs = {(resource, path) for _, resource, path in passed if resource.startswith("Job.")}
    assert len(jobs) == len(files)  # every file's Job was read ...
    for check in RESTRICTED_CONTAINER_CHECKS:  # ... and passed every check
        assert {(check, *job) for job in jobs} <= passed, check
    assert sum(check == NETWORK_POLICY_CHECK for check, _, _ in passed) == len(files)  # every Job's pod is guarded
    skipped = {(r["check_id"], r["file_path"]) for r in results["skipped_checks"]}
    assert skipped == {(check, path) for check in SKIPPED_WITH_REASONS for _, path in jobs}
    assert all(len(r["check_result"].get("suppress_comment", "")) > 40 for r in results["skipped_checks"])
