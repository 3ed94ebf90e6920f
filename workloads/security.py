"""What every container of a job may do: Kubernetes' `restricted` Pod Security Standard, and where it writes.

The standard (kubernetes.io/docs/concepts/security/pod-security-standards, v1.33): no privilege escalation, every
capability dropped, a non-root user and the runtime's default seccomp profile. On top, each container's root file
system is read-only: the trainer and the user's code write to the claim (/shared), to /dev/shm (its own volume) and
to /tmp, an emptyDir that is also their HOME (matplotlib and torch keep caches there).

One container needs root: `volume-permissions` makes the job's directories on the claim and hands them to the
trainer's user, because the FSx CSI driver never applies fsGroup to a ReadWriteMany Lustre volume
(aws-fsx-csi-driver chart 1.11.0, `fsGroupPolicy: ReadWriteOnceWithFSType`). It keeps only the two capabilities
that needs: CHOWN, and DAC_OVERRIDE to make a new dataset's directory inside /shared/data, which an earlier run
gave to the trainer's user (capabilities(7)).
"""

from typing import Any

from eks_ddp.infra.storage.shared_claim import SHARED_UID

SCRATCH_MOUNT = "/tmp"
SCRATCH_VOLUME = {"name": "scratch", "emptyDir": {}}
SCRATCH = {"name": "scratch", "mountPath": SCRATCH_MOUNT}
SCRATCH_ENV = [{"name": "HOME", "value": SCRATCH_MOUNT}]
"""The image's HOME (/home/trainer) is on the read-only root file system."""

CHECK_UID = 65532
"""The user of a pod that writes no shared file (the EFA fabric check): high, so it can own no file of the node's
(checkov's CKV_K8S_40 asks for 10,000 or more); 65532 is the `nonroot` user of distroless images."""


def pod_context(uid: int = SHARED_UID) -> dict[str, Any]:
    """A pod's securityContext: a non-root user (by default the trainer's, which owns the job's directories on the
    claim) and the container runtime's default seccomp profile."""
    return {"runAsUser": uid, "runAsGroup": uid, "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
}
"""Every container's securityContext but the permissions step's."""
ROOT_PERMISSIONS_STEP = {
    "runAsUser": 0,
    "runAsNonRoot": False,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE"]},
    "readOnlyRootFilesystem": True,
}


CHECKOV_SKIPS = {
    "checkov.io/skip1": "CKV_K8S_25=volume-permissions adds CHOWN and DAC_OVERRIDE to hand the claim's directories "
    "to uid 1000: the FSx CSI driver never applies fsGroup to a ReadWriteMany Lustre volume",
    "checkov.io/skip2": "CKV_K8S_40=uid 1000 is the trainer image's user and owns the runs already on users' shared "
    "file systems; the restricted Pod Security Standard asks for non-root, which it is",
}
"""The two checkov checks a Job of the trainer's image does not pass, each with its reason, where a reviewer reads
them (checkov reads `checkov.io/skip<N>: <check>=<reason>` annotations on the object)."""


def by_digest(image: str) -> bool:
    """Pinned: what runs is exactly what was reviewed, whatever the registry later does with the tag."""
    return "@sha256:" in image


def unpinned_image_skips(image: str, stack_key: str) -> dict[str, str]:
    """checkov's skips for an image named by tag only, which the stack cannot pin for the user: the reason says
    which stack key pins it (and holds no '=', which ends checkov's check id). None for an image given by digest."""
    if by_digest(image):
        return {}
    reason = f"{image.rsplit('/', 1)[-1]} is named by tag; set {stack_key} to <image>@sha256:<digest> to pin it"
    return {
        "checkov.io/skip1": f"CKV_K8S_43={reason}",
        "checkov.io/skip2": f"CKV_K8S_15={reason} (then IfNotPresent is exact)",
    }


def restricted_pod(spec: dict[str, Any], uid: int = SHARED_UID) -> dict[str, Any]:
    """`spec` (a pod's) with the trainer's user, the runtime's seccomp profile, the scratch volume, and no service
    account token: none of these pods calls the Kubernetes API with it (the GPU pre-flight's quarantine step has its
    own projected token, workloads/preflight.py). IRSA and EKS Pod Identity still work: the EKS pod identity webhook
    projects its own token volume whatever `automountServiceAccountToken` says (aws/amazon-eks-pod-identity-webhook
    v0.6.17, pkg/handler/handler.go, which never reads the field)."""
    return {
        **spec,
        "securityContext": pod_context(uid),
        "automountServiceAccountToken": False,
        "volumes": [*spec.get("volumes", []), SCRATCH_VOLUME],
    }


def restricted(container: dict[str, Any]) -> dict[str, Any]:
    """`container` with the restricted securityContext, /tmp writable and HOME there."""
    return {
        **container,
        "securityContext": CONTAINER,
        "env": [*container.get("env", []), *SCRATCH_ENV],
        "volumeMounts": [*container.get("volumeMounts", []), SCRATCH],
    }
