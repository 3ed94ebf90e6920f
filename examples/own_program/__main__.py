"""A GPU training platform with EFA, a TrainJob on it and Prometheus watching it, from eks-ddp's components."""

import pulumi

from eks_ddp.infra.addons.training_operator import OperatorKind
from eks_ddp.infra.platform import MonitoringKind, StorageKind, TrainingPlatform
from eks_ddp.workloads.components import TrainJob
from infra import GPU_WORKERS

config = pulumi.Config()
platform = TrainingPlatform(
    "research",
    {
        "network": {"cidr": "10.40.0.0/16", "availability_zones": ["us-east-1a", "us-east-1b"]},
        "system_instance_type": "c5.2xlarge",
        "node_groups": [GPU_WORKERS],
        "storage": StorageKind.FSX,
        "training_operator": OperatorKind.V2,
        "monitoring": MonitoringKind.PROMETHEUS,
    },
)
job = TrainJob(
    "llm",
    {
        "provider": platform.provider,
        "node_group": GPU_WORKERS,  # the pods' GPUs, EFA devices, node selector and tolerations follow from it
        "job": {
            "name": "llm",
            "namespace": platform.training_namespace,
            "replicas": 2,
            "image": config.require("image"),
            "dataset": "synthetic",
        },
        "pod_monitor": True,
    },
    pulumi.ResourceOptions(depends_on=[platform]),
)
pulumi.export("kubeconfig", platform.kubeconfig)
pulumi.export("runName", job.run_name)
