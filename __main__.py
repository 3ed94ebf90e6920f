"""The eks-ddp stack: config -> typed objects -> TrainingPlatform + workloads -> exports."""

from pathlib import Path

import pulumi

from eks_ddp.stack.config import from_pulumi
from eks_ddp.stack.program import build, job_commands
from eks_ddp.stack.project_config import PROJECT

settings = from_pulumi(Path(__file__).resolve().parent)  # this program's Pulumi.yaml declares its keys
deployed = build(settings, name=PROJECT)

platform = deployed.platform
pulumi.export("kubeconfig", platform.kubeconfig)
pulumi.export("clusterName", platform.cluster_name)
pulumi.export("trainingNamespace", platform.training_namespace)
pulumi.export("images", deployed.images)
if platform.cluster_name:  # an EKS cluster's (a cluster given by kubeconfig has none)
    pulumi.export(
        "updateKubeconfig", f"aws eks update-kubeconfig --name {platform.cluster_name} --region {settings.region}"
    )
if platform.bucket_name is not None:
    pulumi.export("bucketName", platform.bucket_name)
if settings.job is not None:
    job, namespace = settings.job.resolved.name, platform.training_namespace
    watch, logs = job_commands(settings.operator, job, namespace)
    pulumi.export("watchJob", watch)
    pulumi.export("jobLogs", logs)
    if deployed.job is not None:
        pulumi.export("runName", deployed.job.run_name)
        pulumi.export("runDirectory", deployed.job.output_dir)
    if settings.job.prepare_data:
        pulumi.export("watchData", f"kubectl -n {namespace} logs -f job/{job}-data")
    if settings.job.evaluate:
        pulumi.export("evaluation", f"kubectl -n {namespace} logs -f job/{job}-evaluate")
