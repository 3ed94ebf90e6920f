"""NvidiaDevicePlugin: advertises `nvidia.com/gpu` on our GPU nodes, and only there.

The EKS AL2023 NVIDIA AMIs carry the driver and the container toolkit but no device plugin:
without one no pod gets `nvidia.com/gpu`, GPU pods stay Pending and the autoscaler keeps
adding nodes for them.
"""

from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from eks_ddp.infra.addons import helm
from eks_ddp.infra.aws.efa_node_group import GPU_LABEL, Taint
from eks_ddp.infra.facts import versions
from eks_ddp.infra.options import waits_for

COMPONENT = "NvidiaDevicePlugin"
# The chart's own tolerations (NVIDIA/k8s-device-plugin v0.20.0 deployments/helm/nvidia-device-plugin/values.yaml):
# Helm replaces a list value, so ours repeat them before the groups' taints.
CHART_TOLERATIONS = [
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
]


class NvidiaDevicePluginArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    node_taints: NotRequired[Sequence[Taint]]
    """Taints of the GPU node groups, to tolerate."""


def plugin_values(taints: Sequence[Taint]) -> dict[str, Any]:
    """On nodes labelled `nvidia.com/gpu.present=true` (our GPU groups; also one of the chart's default
    node-affinity terms, so both agree), tolerating the chart's defaults and our groups' taints."""
    return {
        "nodeSelector": {GPU_LABEL: "true"},
        "tolerations": [*CHART_TOLERATIONS, *helm.tolerations(taints)],
    }


class NvidiaDevicePlugin(pulumi.ComponentResource):
    release: k8s.helm.v3.Release
    """Escape hatch: the Helm release."""

    def __init__(self, name: str, args: NvidiaDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        self.release = helm.release(
            f"{name}-chart",
            self,
            args["provider"],
            versions.NVIDIA_DEVICE_PLUGIN_CHART,
            "kube-system",
            plugin_values(args.get("node_taints", [])),
            waits_for(opts),
        )
        self.register_outputs({})
