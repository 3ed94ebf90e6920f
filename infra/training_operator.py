"""TrainingOperator: Kubeflow training operator v1, which runs PyTorchJobs."""

import re
from collections.abc import Sequence
from typing import NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from infra import versions
from infra.errors import InvalidArgument

COMPONENT = "TrainingOperator"
NAMESPACE = "kubeflow"
SERVICE_ACCOUNT = "training-operator"


class TrainingOperatorArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster (it must apply server-side: the v1.9 CRD is too large for client-side apply)."""
    version: NotRequired[str]
    """Release tag of the v1 line (default versions.TRAINING_OPERATOR_VERSION)."""
    depends_on: NotRequired[Sequence[pulumi.Resource]]
    """Resources to wait for before installing (the system node group, whose nodes run it)."""


class TrainingOperator(pulumi.ComponentResource):
    manifests: k8s.kustomize.v2.Directory
    """The operator's kustomize overlay; PyTorchJobs must depend on it (it installs their CRD)."""
    version: str
    """The release tag installed."""

    def __init__(self, name: str, args: TrainingOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        version = args.get("version", versions.TRAINING_OPERATOR_VERSION)
        if not re.fullmatch(r"v1\.\d+\.\d+", version):
            raise InvalidArgument(COMPONENT, "version", version, "use a v1 release tag such as v1.9.4 (Trainer v2 is a different API)")
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        self.version = version
        scoped = pulumi.ResourceOptions(parent=self, provider=args["provider"], depends_on=list(args.get("depends_on", [])))
        self.manifests = k8s.kustomize.v2.Directory(
            f"{name}-manifests", directory=versions.TRAINING_OPERATOR_OVERLAY.format(version=version), namespace=NAMESPACE, opts=scoped
        )
        # Elastic PyTorchJobs with metrics create HorizontalPodAutoscalers.
        hpa_role = k8s.rbac.v1.ClusterRole(
            f"{name}-hpa",
            metadata={"name": "training-operator-hpa"},
            rules=[{"api_groups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}],
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
