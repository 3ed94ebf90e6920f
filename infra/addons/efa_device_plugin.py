"""EfaDevicePlugin: advertises `vpc.amazonaws.com/efa` on nodes that have EFA interfaces."""

from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from eks_ddp.infra.addons import helm
from eks_ddp.infra.aws.efa_node_group import EFA_LABEL, Taint
from eks_ddp.infra.aws.registries import eks_addon_registry
from eks_ddp.infra.facts import catalogue, versions
from eks_ddp.infra.options import waits_for

COMPONENT = "EfaDevicePlugin"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


class EfaDevicePluginArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    node_taints: NotRequired[Sequence[Taint]]
    """Taints of the EFA node groups, to tolerate."""
    instance_types: NotRequired[Sequence[str]]
    """Instance types of the EFA node groups: the plugin may run on these and the catalogue's EFA types."""
    region: NotRequired[pulumi.Input[str]]
    """The cluster's region: the plugin's image is pulled from its EKS add-on registry (default: the chart's, in
    us-west-2)."""


def plugin_values(taints: Sequence[Taint], instance_types: Sequence[str] = ()) -> dict[str, Any]:
    """Chart values: on every EFA node of ours, and only there.

    The chart turns `supportedInstanceLabels` into a required node affinity
    (aws/eks-charts stable/aws-efa-k8s-device-plugin templates/daemonset.yaml): a
    type missing from its list never gets the plugin, so the list is our own
    catalogue's plus the stack's EFA groups' types, and cannot lag them. The node selector keeps the plugin off
    EFA-capable instances launched without EFA interfaces, where it crash-loops.
    """
    return {
        "supportedInstanceLabels": {
            "keys": [INSTANCE_TYPE_LABEL],
            "values": sorted({*catalogue.EFA_INSTANCE_TYPES, *instance_types}),
        },
        "nodeSelector": {EFA_LABEL: "true"},
        "tolerations": helm.tolerations(taints),
    }


def image_repository(region: str) -> str:
    """The plugin's image in the region's EKS add-on registry (the chart's default is us-west-2's, whatever the
    cluster's region: aws/eks-charts stable/aws-efa-k8s-device-plugin v0.5.30 values.yaml `image.repository`)."""
    return f"{eks_addon_registry(region)}/eks/aws-efa-k8s-device-plugin"


class EfaDevicePlugin(pulumi.ComponentResource):
    release: k8s.helm.v3.Release
    """Escape hatch: the Helm release."""

    def __init__(self, name: str, args: EfaDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        values: dict[str, Any] = plugin_values(args.get("node_taints", []), args.get("instance_types", []))
        if "region" in args:
            values["image"] = {"repository": pulumi.Output.from_input(args["region"]).apply(image_repository)}
        self.release = helm.release(
            f"{name}-chart",
            self,
            args["provider"],
            versions.EFA_DEVICE_PLUGIN_CHART,
            "kube-system",
            values,
            waits_for(opts),
        )
        self.register_outputs({})
