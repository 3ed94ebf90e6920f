import os
import subprocess
from pathlib import Path

import pytest

from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES
from eks_ddp.workloads.batch_jobs import (
    OnFailure,
    default_fabric_image,
    render_data_preparation,
    render_evaluation,
    render_fabric_check,
)
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.training_pod import TrainingJob, run_id, run_name
from tests.workloads.schemas import validate_core

TARGET = NodeTarget(
    EFA_INSTANCE_TYPES["c7g.16xlarge"],
    efa_interfaces=1,
    labels={"vpc.amazonaws.com/efa.present": "true"},
    taints=[{"key": "training", "value": "true", "effect": "NO_SCHEDULE"}],
)
JOB = TrainingJob(name="mnist-ddp", namespace="training", image="img:1")
RUN = f"mnist-ddp/{run_id(JOB, TARGET)}"


def test_data_preparation_job_writes_onto_the_claim() -> None:
    manifest = render_data_preparation(JOB, TARGET)
    validate_core(manifest)
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == [
        "python",
        "-m",
        "eks_ddp.trainer",
        "prepare-data",
        "--dataset",
        "mnist",
        "--data-dir",
        "/shared/data/mnist",
    ]
    assert manifest["spec"]["template"]["spec"]["volumes"] == [
        {"name": "shared", "persistentVolumeClaim": {"claimName": "shared"}},
        {"name": "scratch", "emptyDir": {}},  # /tmp and HOME: the root file system is read-only
    ]


def test_evaluation_job_reads_the_model_of_exactly_this_run() -> None:
    manifest = render_evaluation(JOB, TARGET)
    validate_core(manifest)
    command = manifest["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:4] == ["python", "-m", "eks_ddp.trainer", "evaluate"]
    assert command[command.index("--model-file") + 1] == f"/shared/runs/{RUN}/model.pt"
    assert command[command.index("--run-name") + 1] == run_name(JOB, TARGET) == f"training/{RUN}"


def test_side_steps_run_on_the_system_nodes_of_the_images_architecture() -> None:
    """They took the training group's selector and tolerations: on a group at its maxSize, or a node a training pod
    fills, they were placed first or never (issue 21)."""
    for manifest in (render_data_preparation(JOB, TARGET), render_evaluation(JOB, TARGET)):
        pod = manifest["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"eks-ddp/node-group": "system", "kubernetes.io/arch": "arm64"}
        assert "tolerations" not in pod and pod["containers"][0]["resources"]["requests"] == {
            "cpu": "500m",
            "memory": "1Gi",
        }


def test_fabric_check_runs_two_efa_pods_on_different_nodes() -> None:
    service, job = render_fabric_check("efa-check", "training", TARGET, "registry.example/efa-tools:1")
    validate_core(service)
    validate_core(job)
    spec = job["spec"]
    assert spec["completions"] == spec["parallelism"] == 2 and spec["completionMode"] == "Indexed"
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"] == "efa-check" and service["spec"]["clusterIP"] == "None"
    assert pod["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] == "1"
    script = pod["containers"][0]["command"][2]
    assert (
        "fi_info -p efa" in script
        and "fi_pingpong -p efa" in script
        and "EFA CHECK PASSED" in script
        and "EFA CHECK FAILED" in script
    )
    assert (
        pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"]
        == "kubernetes.io/hostname"
    )


def test_fabric_check_runs_restricted_and_says_why_a_tagged_image_is_not_pinned() -> None:
    """A high non-root user, no capability, no token; the checkov skips for a tag-only image name the stack key
    that pins it, and go when the image is given by digest."""
    pinned = "registry.example/efa-tools:1@sha256:" + "a" * 64
    for image, skipped in (("registry.example/efa-tools:1", {"CKV_K8S_43", "CKV_K8S_15"}), (pinned, set())):
        _, job = render_fabric_check("efa-check", "training", TARGET, image)
        pod = job["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsUser"] == 65532 and pod["automountServiceAccountToken"] is False
        assert pod["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        skips = {key: value for key, value in job["metadata"]["annotations"].items() if key.startswith("checkov.io/")}
        assert {value.split("=")[0] for value in skips.values()} == skipped
        assert all("eks-ddp:fabricCheckImage" in value and value.count("=") == 1 for value in skips.values())


@pytest.mark.parametrize(("on_failure", "status"), [(OnFailure.GATE, 1), (OnFailure.REPORT, 0)])
def test_a_node_without_the_efa_provider_fails_the_check_or_is_reported(
    tmp_path: Path, on_failure: OnFailure, status: int
) -> None:
    """The pod's own command, with a stand-in `fi_info` that finds no EFA provider (as on a node whose device is
    missing): gated, the pod fails and so does `pulumi up`'s wait for the Job; reported, it ends well."""
    fake = tmp_path / "fi_info"
    fake.write_text("#!/bin/sh\necho 'fi_getinfo: -61 (No data available)'\nexit 1\n")
    fake.chmod(0o755)
    _, job = render_fabric_check("efa-check", "training", TARGET, "registry.example/efa-tools:1", on_failure)
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "JOB_COMPLETION_INDEX": "0"}
    ran = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert ran.returncode == status and "EFA CHECK FAILED: no efa provider on" in ran.stdout, ran
    assert ("reported only (eks-ddp:fabricCheck: report)" in ran.stdout) == (on_failure == OnFailure.REPORT)


def test_evaluation_waits_for_the_training_summary() -> None:
    manifest = render_evaluation(JOB, TARGET)
    permissions, init = manifest["spec"]["template"]["spec"]["initContainers"]
    assert permissions["name"] == "volume-permissions"
    assert f"/shared/runs/{RUN}/summary.json" in init["command"][2] and init["command"][:2] == ["sh", "-c"]
    assert manifest["spec"]["activeDeadlineSeconds"] == 2 * 24 * 3600


def test_the_default_fabric_image_comes_from_the_stacks_own_region() -> None:
    """A pull from another region's registry is slow at every scale-up and fails where ECR is partitioned."""
    assert default_fabric_image("x86_64", "eu-west-1").startswith("763104351884.dkr.ecr.eu-west-1.amazonaws.com/")  # type: ignore[union-attr]
    assert default_fabric_image("x86_64", "ap-east-1").startswith("871362719292.dkr.ecr.ap-east-1.amazonaws.com/")  # type: ignore[union-attr]
    assert default_fabric_image("x86_64", "cn-north-1").startswith("727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/")  # type: ignore[union-attr]
    assert default_fabric_image("arm64", "us-east-1") is None


def test_every_pod_on_the_claim_gets_its_directories_from_a_root_step_and_runs_restricted_as_the_trainer() -> None:
    """A new Lustre file system's root is root's and fsGroup is never applied to it: mkdir as uid 1000 failed. The
    root step keeps two capabilities; every other container runs as the restricted Pod Security Standard asks."""
    from eks_ddp.workloads.pytorchjob import render

    pods = [
        render_data_preparation(JOB, TARGET)["spec"]["template"]["spec"],
        render_evaluation(JOB, TARGET)["spec"]["template"]["spec"],
    ]
    pods += [replica["template"]["spec"] for replica in render(JOB, TARGET)["spec"]["pytorchReplicaSpecs"].values()]
    for pod in pods:
        first = pod["initContainers"][0]
        assert first["name"] == "volume-permissions" and first["securityContext"]["runAsUser"] == 0
        script = first["command"][2]
        for directory in ("/shared/data", "/shared/data/mnist", f"/shared/runs/{RUN}", f"/shared/checkpoints/{RUN}"):
            assert directory in script
        assert "chown 1000:1000" in script
        assert first["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE"]}
        assert first["securityContext"]["allowPrivilegeEscalation"] is False
        assert pod["securityContext"] == {
            "runAsUser": 1000,
            "runAsGroup": 1000,
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        assert pod["automountServiceAccountToken"] is False  # none calls the Kubernetes API
        for container in [*pod["containers"], *pod["initContainers"][1:]]:
            assert container["securityContext"] == {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "readOnlyRootFilesystem": True,
            }, container["name"]
            assert {"name": "scratch", "mountPath": "/tmp"} in container["volumeMounts"]
            assert {"name": "HOME", "value": "/tmp"} in container["env"]


@pytest.mark.parametrize("index", ["0", "1"])
def test_a_check_pod_without_its_peer_says_so_within_its_window_and_fails_the_job(tmp_path: Path, index: str) -> None:
    """The pod's own command, with a `fi_pingpong` that never meets its peer (a server nobody calls, a client nobody
    answers): each side gives up after PEER_WINDOW seconds with its verdict, which the kubelet keeps as the
    container's termination message and pulumi-kubernetes' Job await shows, since the first failed pod fails the Job.
    The client used to try 30 times for up to 62 s each, the server 120 s only: a peer on a node that joined later
    failed the check, a missing one outlived the Job's deadline."""
    for tool, script in (("fi_info", "exit 0"), ("fi_pingpong", "exec sleep 30" if index == "0" else "exit 1")):
        (tmp_path / tool).write_text(f"#!/bin/sh\n{script}\n")
        (tmp_path / tool).chmod(0o755)
    _, job = render_fabric_check("efa-check", "training", TARGET, "registry.example/efa-tools:1")
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {
        **os.environ,
        **{variable["name"]: variable["value"] for variable in container["env"] if "value" in variable},
        "PATH": f"{tmp_path}:{os.environ['PATH']}",
        "JOB_COMPLETION_INDEX": index,
        "PEER_WINDOW": "2",
    }
    ran = subprocess.run(container["command"], env=env, capture_output=True, text=True, check=False, timeout=20)
    side = (
        "server: no pingpong from a client within 2 s"
        if index == "0"
        else "client: no pingpong with efa-check-0.efa-check in 2 s"
    )
    assert ran.returncode == 1 and ran.stdout.rstrip().endswith(f"EFA CHECK FAILED ({side})"), ran
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError" and job["spec"]["backoffLimit"] == 0
    window = next(int(variable["value"]) for variable in container["env"] if variable["name"] == "PEER_WINDOW")
    assert window >= 15 * 60  # a peer's node may join 15 minutes later (the Cluster Autoscaler's provision time)
