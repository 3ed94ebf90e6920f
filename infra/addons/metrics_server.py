"""MetricsServer: resource metrics for `kubectl top` and autoscaling."""

from typing import TypedDict

import pulumi
import pulumi_kubernetes as k8s

from eks_ddp.infra.addons import helm
from eks_ddp.infra.aws.cluster import SYSTEM_LABEL
from eks_ddp.infra.facts import versions
from eks_ddp.infra.options import waits_for

COMPONENT = "MetricsServer"


class MetricsServerArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""


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
            waits_for(opts),
        )
        self.register_outputs({})
