"""checkov (the scanner a platform team runs) on every shipped stack's rendered manifests, with all its Kubernetes checks.

Every object `make preview` writes is scanned: no check may fail, and each skip is written on its object with a reason
(checkov reads `checkov.io/skip<N>: <check>=<reason>` annotations). The skips expected, and nothing else:
- CKV_K8S_25 and CKV_K8S_40 on each Job of the trainer's image (the root permissions step's two capabilities; uid
  1000 owns users' runs): workloads/security.py CHECKOV_SKIPS;
- CKV_K8S_43 and CKV_K8S_15 on the EFA fabric check's Job while its image is AWS's Deep Learning Container by tag
  (regional, no digest the stack can know): security.unpinned_image_skips names the stack key that pins it;
- CKV_K8S_14, CKV_K8S_15 and CKV_K8S_43 on the NCCL check's attempt Job, which never runs a pod
  (workloads/nccl_check.py ATTEMPT_SKIPS).
checkov 3.3.30 reads the containers of Pods, Jobs, Deployments and the like, not those inside PyTorchJob, TrainJob,
JobSet or MPIJob objects: the training pods get the same contexts (tests/workloads/test_batch_jobs.py) and the API
server's own Pod Security Admission admits them (tests/cluster/test_pod_security_on_engines.py).
"""

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from eks_ddp.tools import preview, stack_file
from tests.conftest import ROOT

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
TRAINER_JOB_SKIPS = {"CKV_K8S_25", "CKV_K8S_40"}
UNPINNED_IMAGE_SKIPS = {"CKV_K8S_43", "CKV_K8S_15"}
RESTRICTED_CONTAINER_CHECKS = [
    "CKV_K8S_10",
    "CKV_K8S_11",
    "CKV_K8S_12",
    "CKV_K8S_13",  # CPU and memory requests and limits
    "CKV_K8S_20",  # allowPrivilegeEscalation
    "CKV_K8S_22",  # readOnlyRootFilesystem
    "CKV_K8S_23",  # not root
    "CKV_K8S_28",  # NET_RAW
    "CKV_K8S_29",
    "CKV_K8S_30",  # a securityContext on the pod and the container
    "CKV_K8S_31",  # seccomp profile
    "CKV_K8S_37",  # capabilities
    "CKV_K8S_38",  # no service account token where the pod does not call the Kubernetes API
]
NETWORK_POLICY_CHECK = "CKV2_K8S_6"  # a NetworkPolicy selects the pod (the namespace's, workloads/network_policy.py)

CHECKED_KINDS = {"job", "service", "serviceaccount", "configmap", "clusterrole", "clusterrolebinding"}
"""The kinds of objects the stacks write that checkov has checks for (it has none for NetworkPolicy, Namespace, claims,
StorageClass or the operators' kinds), by the file-name prefix `preview --manifests` gives them."""


def checkov_report(directory: Path) -> dict[str, list[dict[str, Any]]]:
    command = [str(CHECKOV), "--framework", "kubernetes", "--compact", "-o", "json", "--skip-download", "-d"]
    run = subprocess.run([*command, str(directory)], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(run.stdout)  # offline (--skip-download): checkov's bundled checks only
    return (report[0] if isinstance(report, list) else report)["results"]


@pytest.mark.slow
def test_every_stacks_manifests_pass_checkov_with_each_skip_on_its_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without checkov's environment the test fails rather than skips: `make test` installs it, and a skip there
    would pass a stack that checkov refuses."""
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: run `make .venv-checkov/.installed` (make test does)", pytrace=False)
    for stack in sorted(stack_file.stacks()):
        assert preview.main(["--stack", stack, "--manifests", str(tmp_path / stack)]) == 0, stack
    capsys.readouterr()
    written = {f"/{path.relative_to(tmp_path)}" for path in tmp_path.glob("*/*.yaml")}
    results = checkov_report(tmp_path)
    assert [(r["check_id"], r["resource"], r["file_path"]) for r in results["failed_checks"]] == []
    passed = {(r["check_id"], r["resource"], r["file_path"]) for r in results["passed_checks"]}
    checked = {path for path in written if path.split("/")[2].split("-")[0] in CHECKED_KINDS}
    assert checked <= {path for _, _, path in passed}  # checkov read every object it has checks for
    jobs = {(resource, path) for _, resource, path in passed if resource.startswith("Job.")}
    assert len(jobs) == len(list(tmp_path.glob("*/job-*.yaml"))) >= 12  # every Job was read ...
    for check in RESTRICTED_CONTAINER_CHECKS:  # ... and passed every check of a restricted pod
        assert {(check, *job) for job in jobs} <= passed, check
    guarded = {
        path for check, resource, path in passed if check == NETWORK_POLICY_CHECK and resource.startswith("Pod.")
    }
    assert guarded == {path for _, path in jobs}  # checkov's graph check names each Job's pod template
    skipped = {(r["check_id"], r["resource"], r["file_path"]) for r in results["skipped_checks"]}
    fabric_checks = {job for job in jobs if job[0].endswith("-efa-check")}
    attempts = {job for job in jobs if job[0].endswith("-nccl-check-attempt")}
    expected = {(check, *job) for job in jobs - fabric_checks - attempts for check in TRAINER_JOB_SKIPS}
    expected |= {(check, *job) for job in fabric_checks for check in UNPINNED_IMAGE_SKIPS}
    expected |= {(check, *job) for job in attempts for check in ("CKV_K8S_14", *UNPINNED_IMAGE_SKIPS)}
    assert fabric_checks and skipped == expected
    assert all(len(r["check_result"].get("suppress_comment", "")) > 40 for r in results["skipped_checks"])
