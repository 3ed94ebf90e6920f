"""The security contexts every pod renders, written out field by field: a misspelt key or value is a hole that the
API server accepts silently (an unknown field is dropped, and the pod runs with the runtime's defaults)."""

from eks_ddp.infra.facts.catalogue import INSTANCE_TYPES
from eks_ddp.workloads.pytorchjob import pod_specs, render
from eks_ddp.workloads.security import CHECK_UID, restricted, restricted_pod, unpinned_image_skips
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.training_pod import TrainingJob

TRAINER_POD = {
    "runAsUser": 1000,
    "runAsGroup": 1000,
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
}
VOLUME_PERMISSIONS = {
    "runAsUser": 0,
    "runAsNonRoot": False,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE"]},
    "readOnlyRootFilesystem": True,
}
SCRATCH_VOLUME = {"name": "scratch", "emptyDir": {}}
SCRATCH_MOUNT = {"name": "scratch", "mountPath": "/tmp"}
HOME = {"name": "HOME", "value": "/tmp"}


def test_a_restricted_pod_runs_as_the_trainer_with_the_runtimes_seccomp_profile_and_no_token() -> None:
    spec = {"containers": [{"name": "c"}], "volumes": [{"name": "shared", "emptyDir": {}}]}
    assert restricted_pod(spec) == {
        "containers": [{"name": "c"}],
        "securityContext": TRAINER_POD,
        "automountServiceAccountToken": False,
        "volumes": [{"name": "shared", "emptyDir": {}}, SCRATCH_VOLUME],
    }
    assert restricted_pod({"containers": []}) == {
        "containers": [],
        "securityContext": TRAINER_POD,
        "automountServiceAccountToken": False,
        "volumes": [SCRATCH_VOLUME],
    }


def test_a_pod_that_writes_no_shared_file_runs_as_distroless_nonroot() -> None:
    """CHECK_UID: 10,000 or more (checkov's CKV_K8S_40), the `nonroot` user of distroless images."""
    assert CHECK_UID == 65532
    assert restricted_pod({}, uid=CHECK_UID)["securityContext"] == {
        "runAsUser": 65532, "runAsGroup": 65532, "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}
    }


def test_a_restricted_container_drops_every_capability_and_writes_only_to_its_scratch_home() -> None:
    container = {
        "name": "c",
        "env": [{"name": "A", "value": "1"}],
        "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
    }
    assert restricted(container) == {
        "name": "c",
        "securityContext": RESTRICTED_CONTAINER,
        "env": [{"name": "A", "value": "1"}, HOME],
        "volumeMounts": [{"name": "shared", "mountPath": "/shared"}, SCRATCH_MOUNT],
    }
    assert restricted({"name": "bare"}) == {
        "name": "bare", "securityContext": RESTRICTED_CONTAINER, "env": [HOME], "volumeMounts": [SCRATCH_MOUNT]
    }


def test_every_rendered_training_pod_is_restricted_but_for_the_root_permissions_step() -> None:
    """What the API server's Pod Security admission reads: the pod's context and each container's, as rendered."""
    job = TrainingJob(name="mnist-ddp", namespace="training", image="img:1", replicas=2)
    target = NodeTarget(INSTANCE_TYPES["c7g.16xlarge"], efa_interfaces=1)
    for pod in pod_specs(render(job, target)):
        assert pod["securityContext"] == TRAINER_POD and pod["automountServiceAccountToken"] is False
        assert SCRATCH_VOLUME in pod["volumes"]
        contexts = {c["name"]: c["securityContext"] for c in [*pod["initContainers"], *pod["containers"]]}
        assert contexts == {
            "volume-permissions": VOLUME_PERMISSIONS,
            "prepare-data": RESTRICTED_CONTAINER,
            "pytorch": RESTRICTED_CONTAINER,
        }


def test_an_image_named_by_tag_gets_checkovs_skips_naming_the_key_that_pins_it() -> None:
    reason = "efa-tools:1 is named by tag; set fabricImage to <image>@sha256:<digest> to pin it"
    skips = {
        "checkov.io/skip1": f"CKV_K8S_43={reason}",
        "checkov.io/skip2": f"CKV_K8S_15={reason} (then IfNotPresent is exact)",
    }
    assert unpinned_image_skips("registry.example/team/efa-tools:1", "fabricImage") == skips
    assert unpinned_image_skips("efa-tools:1", "fabricImage") == skips  # a Docker Hub name has no registry part


def test_an_image_pinned_by_digest_needs_no_skip() -> None:
    digest = "sha256:" + "0" * 64
    assert unpinned_image_skips(f"registry.example/team/efa-tools@{digest}", "fabricImage") == {}
    assert unpinned_image_skips(f"registry.example/team/efa-tools:1@{digest}", "fabricImage") == {}
