"""NeuronDevicePlugin: advertises `aws.amazon.com/neuron` (and `neuroncore`) on Trainium and Inferentia2 nodes.

The EKS AL2023 Neuron AMI carries the Neuron driver and the EFA host software but no device plugin: without one no
pod gets a Neuron device and Neuron pods stay Pending. Installed as AWS's Neuron guide does (aws-neuron/aws-neuron-sdk
v2.32.0 deploy/includes/k8s-neuron-device-plugin.rst): AWS's Helm chart, the device plugin only. The scheduler
extension is left off: it is optional when a pod takes every Neuron device of its node (aws-neuron-sdk v2.26.0
containers/neuron-plugins.rst), which a training pod here always does, and on EKS it would be a second scheduler.
"""

from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from eks_ddp.infra.addons import helm
from eks_ddp.infra.aws.efa_node_group import Taint
from eks_ddp.infra.facts import versions
from eks_ddp.infra.options import waits_for

COMPONENT = "NeuronDevicePlugin"
NEURON_RESOURCE = "aws.amazon.com/neuron"
# The chart's own tolerations (aws-neuron/neuron-helm-charts 1.9.0 values.yaml devicePlugin.tolerations): Helm
# replaces a list value, so ours repeat them before the groups' taints.
CHART_TOLERATIONS = [
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": NEURON_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
    {
        "key": "sagemaker.amazonaws.com/node-health-status",
        "operator": "Equal",
        "value": "Unschedulable",
        "effect": "NoSchedule",
    },
]


class NeuronDevicePluginArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    node_taints: NotRequired[Sequence[Taint]]
    """Taints of the Neuron node groups, to tolerate."""


def plugin_values(taints: Sequence[Taint]) -> dict[str, Any]:
    """The device plugin alone (the chart also deploys a node problem detector unless told not to), on the chart's
    own node affinity (its list of Neuron instance types), tolerating the chart's defaults and our groups' taints."""
    return {
        "devicePlugin": {"enabled": True, "tolerations": [*CHART_TOLERATIONS, *helm.tolerations(taints)]},
        "scheduler": {"enabled": False},
        "npd": {"enabled": False},
    }


class NeuronDevicePlugin(pulumi.ComponentResource):
    release: k8s.helm.v3.Release
    """Escape hatch: the Helm release."""

    def __init__(self, name: str, args: NeuronDevicePluginArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        self.release = helm.release(
            f"{name}-chart",
            self,
            args["provider"],
            versions.NEURON_DEVICE_PLUGIN_CHART,
            "kube-system",
            plugin_values(args.get("node_taints", [])),
            waits_for(opts),
        )
        self.register_outputs({})
