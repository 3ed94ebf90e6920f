"""KubeflowTrainer: Kubeflow Trainer v2 and its JobSet controller, which run TrainJobs (trainer.kubeflow.org/v1alpha1)."""

from typing import NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from eks_ddp.infra.addons import helm
from eks_ddp.infra.aws.cluster import SYSTEM_LABEL
from eks_ddp.infra.facts import versions
from eks_ddp.infra.options import waits_for

COMPONENT = "KubeflowTrainer"
NAMESPACE = "kubeflow-system"


class KubeflowTrainerArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    chart_folder: NotRequired[str]
    """The chart at versions.KUBEFLOW_TRAINER_CHART's version in a local folder, as its release packaged it (JobSet's
    chart in charts/), for clusters that cannot pull it from its OCI registry (default: the registry's)."""


class KubeflowTrainer(pulumi.ComponentResource):
    """The chart (versions.KUBEFLOW_TRAINER_CHART) with its JobSet dependency, both controllers on the system nodes.

    No built-in runtimes: each TrainJob of ours brings its own ClusterTrainingRuntime (workloads.trainjob).
    """

    release: k8s.helm.v3.Release
    """The release; TrainJobs and runtimes must depend on it (it installs their CRDs and webhooks)."""

    def __init__(self, name: str, args: KubeflowTrainerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        values = {
            "manager": {"nodeSelector": SYSTEM_LABEL},
            "jobset": {"install": True, "controller": {"nodeSelector": SYSTEM_LABEL}},
            "runtimes": {"defaultEnabled": False},
        }
        namespace = helm.namespace(f"{name}-namespace", self, args["provider"], NAMESPACE, waits_for(opts))
        self.release = helm.release(
            f"{name}-chart",
            self,
            args["provider"],
            versions.KUBEFLOW_TRAINER_CHART,
            NAMESPACE,
            values,
            [*waits_for(opts), namespace],
            local_chart=args.get("chart_folder"),
        )
        self.register_outputs({})
