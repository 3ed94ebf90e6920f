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

POD = {
    "runAsUser": SHARED_UID,
    "runAsGroup": SHARED_UID,
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""Every pod's securityContext: the trainer's user, the container runtime's default seccomp profile."""
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


def restricted_pod(spec: dict[str, Any]) -> dict[str, Any]:
    """`spec` (a pod's) with the trainer's user, the runtime's seccomp profile, the scratch volume, and no service
    account token: none of these pods calls the Kubernetes API with it (the GPU pre-flight's quarantine step has its
    own projected token, workloads/preflight.py). IRSA and EKS Pod Identity still work: the EKS pod identity webhook
    projects its own token volume whatever `automountServiceAccountToken` says (aws/amazon-eks-pod-identity-webhook
    v0.6.17, pkg/handler/handler.go, which never reads the field)."""
    return {
        **spec,
        "securityContext": POD,
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
