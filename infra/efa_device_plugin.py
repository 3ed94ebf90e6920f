"""EfaDevicePlugin: advertises `vpc.amazonaws.com/efa` on nodes that have EFA interfaces."""

from collections.abc import Sequence
from typing import NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from infra import helm, versions
from infra.efa_node_group import EFA_LABEL, Taint

COMPONENT = "EfaDevicePlugin"


class EfaDevicePluginArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    node_taints: NotRequired[Sequence[Taint]]
    """Taints of the EFA node groups, to tolerate."""
    depends_on: NotRequired[Sequence[pulumi.Resource]]
    """Resources to wait for (the EFA node groups)."""


class EfaDevicePlugin(pulumi.ComponentResource):
    release: k8s.helm.v3.Release
    """Escape hatch: the Helm release."""

    def __init__(self, name: str, args: EfaDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        values = {
            # Only nodes with EFA interfaces: the plugin crash-loops on EFA-capable
            # instances launched without them.
            "nodeSelector": {EFA_LABEL: "true"},
            "tolerations": helm.tolerations(args.get("node_taints", [])),
        }
        self.release = helm.release(f"{name}-chart", self, args["provider"], versions.EFA_DEVICE_PLUGIN_CHART, "kube-system", values, args.get("depends_on", []))
        self.register_outputs({})
