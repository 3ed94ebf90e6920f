"""TrainingOperator: Kubeflow training operator v1, which runs PyTorchJobs."""

import re
from enum import Enum
from pathlib import Path
from typing import NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import versions
from eks_ddp.infra.options import waits_for

COMPONENT = "TrainingOperator"


class OperatorKind(str, Enum):
    """What runs the training job: the training operator v1 (PyTorchJob), Kubeflow Trainer v2 (TrainJob on
    JobSet), or nothing (an Indexed Job with a headless Service)."""

    V1 = "v1"
    """The Kubeflow training operator v1: PyTorchJob."""
    V2 = "v2"
    """Kubeflow Trainer v2: TrainJob on JobSet."""
    NONE = "none"
    """No operator: an Indexed Job with a headless Service."""


NAMESPACE = "kubeflow"
SERVICE_ACCOUNT = "training-operator"


class TrainingOperatorArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster (it must apply server-side: the v1.9 CRD is too large for client-side apply)."""
    version: NotRequired[str]
    """Release tag of the v1 line (default versions.TRAINING_OPERATOR_VERSION)."""
    mpi_jobs: NotRequired[bool]
    """Run its MPIJob v1 controller and CRD (default true); false where the MPI operator v2 owns MPIJobs."""
    directory: NotRequired[str]
    """A local kustomization to install instead, for clusters that cannot fetch the release from GitHub: the
    release's standalone overlay, or, without MPIJobs, one like WITHOUT_MPIJOB over a local copy of it (default: the
    overlay on GitHub at `version`, or WITHOUT_MPIJOB)."""


# Without MPIJob v1, where the MPI operator v2 is installed (a local kustomization over the same release, shipped
# in the wheel beside this module).
WITHOUT_MPIJOB = str(Path(__file__).resolve().parent / "manifests" / "training-operator-without-mpijob")


# The Secret the operator's certificate rotator (open-policy-agent/cert-controller) fills with its webhook's serving
# certificate (training-operator v1.9.4 manifests/base/webhook/secret.yaml, empty in the release).
WEBHOOK_SECRET = "training-operator-webhook-cert"


def _keep_rotated_certificate(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """Leave the webhook Secret's data to the operator: the next `pulumi up` saw the certificate as a change, replaced
    the Secret and dropped the certificate its webhook serves (found by `make deploy-local`, the real engine)."""
    if args.type_ != "kubernetes:core/v1:Secret" or not args.name.endswith(f"/{WEBHOOK_SECRET}"):
        return None
    kept = pulumi.ResourceOptions(ignore_changes=["data"])
    return pulumi.ResourceTransformResult(args.props, pulumi.ResourceOptions.merge(args.opts, kept))


def _stable_path(directory: str) -> str:
    """Relative to the program's directory when inside it: an absolute path would differ between checkouts
    and show as a change in every other machine's `pulumi preview`."""
    path = Path(directory)
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else directory


class TrainingOperator(pulumi.ComponentResource):
    manifests: k8s.kustomize.v2.Directory
    """The operator's kustomize overlay; PyTorchJobs must depend on it (it installs their CRD)."""
    version: str
    """The release tag installed."""

    def __init__(self, name: str, args: TrainingOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        version = args.get("version", versions.TRAINING_OPERATOR_VERSION)
        if not re.fullmatch(r"v1\.\d+\.\d+", version):
            raise InvalidArgument(
                COMPONENT, "version", version, "use a v1 release tag such as v1.9.4 (Trainer v2 is a different API)"
            )
        without_mpi = not args.get("mpi_jobs", True)
        if without_mpi and version != versions.TRAINING_OPERATOR_VERSION:
            patched = versions.TRAINING_OPERATOR_VERSION
            raise InvalidArgument(
                COMPONENT,
                "version",
                version,
                f"without MPIJobs only {patched} is patched (infra/addons/manifests/training-operator-without-mpijob)",
            )
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        self.version = version
        scoped = pulumi.ResourceOptions(parent=self, provider=args["provider"], depends_on=waits_for(opts))
        release = versions.TRAINING_OPERATOR_OVERLAY.format(version=version)
        directory = args.get("directory") or (_stable_path(WITHOUT_MPIJOB) if without_mpi else release)
        self.manifests = k8s.kustomize.v2.Directory(
            f"{name}-manifests",
            directory=directory,
            namespace=NAMESPACE,
            opts=pulumi.ResourceOptions.merge(scoped, pulumi.ResourceOptions(transforms=[_keep_rotated_certificate])),
        )
        # Elastic PyTorchJobs with metrics create HorizontalPodAutoscalers.
        hpa_role = k8s.rbac.v1.ClusterRole(
            f"{name}-hpa",
            metadata={"name": "training-operator-hpa"},
            rules=[
                {
                    "api_groups": ["autoscaling"],
                    "resources": ["horizontalpodautoscalers"],
                    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                }
            ],
            opts=scoped,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-hpa",
            metadata={"name": "training-operator-hpa"},
            role_ref={"api_group": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": hpa_role.metadata.name},
            subjects=[{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}],
            opts=pulumi.ResourceOptions(parent=self, provider=args["provider"], depends_on=[self.manifests]),
        )
        self.register_outputs({})
