"""MetricsServer: resource metrics for `kubectl top` and autoscaling."""

from collections.abc import Sequence
from typing import NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from infra import helm, versions
from infra.cluster import SYSTEM_LABEL

COMPONENT = "MetricsServer"


class MetricsServerArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    depends_on: NotRequired[Sequence[pulumi.Resource]]
    """Resources to wait for before installing (the system node group, whose nodes run it)."""


class MetricsServer(pulumi.ComponentResource):
    release: k8s.helm.v3.Release
    """Escape hatch: the Helm release."""

    def __init__(self, name: str, args: MetricsServerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        self.release = helm.release(
            f"{name}-chart",
            self,
            args["provider"],
            versions.METRICS_SERVER_CHART,
            "kube-system",
            {"nodeSelector": SYSTEM_LABEL},
            args.get("depends_on", []),
        )
        self.register_outputs({})
